//! Client webhooks as the API shows them: each user's signing secret (made on first use, rotated
//! on request), a job's events with their attempts, and a redelivery. Delivering is the
//! [`super::WebhookDeliveries`] use case's, run by each replica's dispatcher.

use std::sync::Arc;

use super::{Caller, JobQueryError, Ports, owned_job};
use crate::client_webhooks::{EventId, WebhookEvent};
use crate::ids::{JobId, UserId};
use crate::ports::{Clock, JobEvents, JobStore, SecretVault, StoreError, WebhookStore, WebhookTransport};

/// The ports client webhooks need, given to the services ([`super::Services::with_client_webhooks`])
/// and to the [`super::WebhookDeliveries`].
#[derive(Clone)]
pub struct ClientWebhookPorts {
    /// The outbox and the secrets.
    pub store: Arc<dyn WebhookStore>,
    /// Destination checks and delivery.
    pub transport: Arc<dyn WebhookTransport>,
    /// Encryption of the secrets.
    pub vault: Arc<dyn SecretVault>,
}

impl ClientWebhookPorts {
    /// The user's secret, made and kept now when the user has none yet.
    pub(crate) async fn secret_of(&self, user_id: UserId) -> Result<String, StoreError> {
        let sealed = match self.store.webhook_secret(user_id).await? {
            Some(sealed) => sealed,
            None => self.store.keep_webhook_secret(user_id, self.vault.seal(&self.vault.generate()), false).await?,
        };
        self.vault.open(&sealed)
    }
}

/// Why a job's webhooks cannot be read or redelivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookQueryError {
    /// The job cannot be read by the caller.
    #[error(transparent)]
    Job(#[from] JobQueryError),
    /// 404: the job has no such event.
    #[error("this job has no webhook event with this id")]
    UnknownEvent,
}

impl From<StoreError> for WebhookQueryError {
    fn from(e: StoreError) -> Self {
        Self::Job(JobQueryError::Store(e))
    }
}

/// Why the caller's webhook secret cannot be read or rotated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookSecretError {
    /// 403 `KEY_SCOPE_EXCEEDED`: a restricted key; the secret signs every job of the account, so
    /// whoever holds it could forge a delivery for any of them.
    #[error("a restricted key cannot read or rotate the account's webhook secret")]
    Restricted,
    /// The store failed, or the secret cannot be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Client webhooks as the API shows them.
#[derive(Clone)]
pub struct ClientWebhooks {
    ports: ClientWebhooksPorts,
    webhooks: Option<ClientWebhookPorts>,
}

/// The ports of [`ClientWebhooks`] besides the webhooks' own.
#[derive(Clone)]
struct ClientWebhooksPorts {
    jobs: Arc<dyn JobStore>,
    events: Arc<dyn JobEvents>,
    clock: Arc<dyn Clock>,
}

impl ClientWebhooks {
    /// Client webhooks over `ports`, refusing everything until given the webhooks' own
    /// ([`ClientWebhooks::with_client_webhooks`]).
    #[must_use]
    pub fn new(ports: &Ports) -> Self {
        let ports = ClientWebhooksPorts {
            jobs: Arc::clone(&ports.jobs),
            events: Arc::clone(&ports.events),
            clock: Arc::clone(&ports.clock),
        };
        Self { ports, webhooks: None }
    }

    /// The same use cases, serving webhook secrets and deliveries through `ports`.
    #[must_use]
    pub fn with_client_webhooks(self, ports: ClientWebhookPorts) -> Self {
        Self { webhooks: Some(ports), ..self }
    }

    fn client_webhooks(&self) -> Result<&ClientWebhookPorts, StoreError> {
        self.webhooks.as_ref().ok_or_else(|| StoreError::Internal("client webhooks are not configured".into()))
    }

    /// The caller's signing secret, made now if the caller has none yet.
    ///
    /// # Errors
    /// [`WebhookSecretError::Restricted`] for a restricted key; when the store fails or the
    /// secret cannot be opened.
    pub async fn webhook_secret(&self, caller: &Caller) -> Result<String, WebhookSecretError> {
        if caller.is_restricted() {
            return Err(WebhookSecretError::Restricted);
        }
        Ok(self.client_webhooks()?.secret_of(caller.user_id).await?)
    }

    /// A new signing secret for the caller; the old one signs nothing from now on, on every
    /// replica, since each attempt reads the secret from the store.
    ///
    /// # Errors
    /// [`WebhookSecretError::Restricted`] for a restricted key; when the store fails.
    pub async fn rotate_webhook_secret(&self, caller: &Caller) -> Result<String, WebhookSecretError> {
        if caller.is_restricted() {
            return Err(WebhookSecretError::Restricted);
        }
        let webhooks = self.client_webhooks()?;
        let secret = webhooks.vault.generate();
        webhooks.store.keep_webhook_secret(caller.user_id, webhooks.vault.seal(&secret), true).await?;
        tracing::info!(user_id = %caller.user_id, "webhook secret rotated");
        Ok(secret)
    }

    /// The webhook events of one of the caller's jobs.
    ///
    /// # Errors
    /// See [`WebhookQueryError`].
    pub async fn job_webhooks(&self, caller: &Caller, id: JobId) -> Result<Vec<WebhookEvent>, WebhookQueryError> {
        owned_job(self.ports.jobs.as_ref(), caller, id).await?;
        Ok(self.client_webhooks()?.store.webhook_events(EventId::of_job(id)).await?)
    }

    /// The webhook events of any user's job, for operators; none without client webhooks.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn any_job_webhooks(&self, id: JobId) -> Result<Vec<WebhookEvent>, StoreError> {
        match &self.webhooks {
            Some(webhooks) => webhooks.store.webhook_events(EventId::of_job(id)).await,
            None => Ok(Vec::new()),
        }
    }

    /// One more delivery of an event of one of the caller's jobs, with the same id and body.
    ///
    /// # Errors
    /// See [`WebhookQueryError`].
    pub async fn redeliver_webhook(&self, caller: &Caller, id: JobId, event: &str) -> Result<(), WebhookQueryError> {
        owned_job(self.ports.jobs.as_ref(), caller, id).await?;
        let event =
            EventId::parse(event).filter(|e| *e == EventId::of_job(id)).ok_or(WebhookQueryError::UnknownEvent)?;
        let now = self.ports.clock.now();
        if !self.client_webhooks()?.store.redeliver(event, now).await? {
            return Err(WebhookQueryError::UnknownEvent);
        }
        tracing::info!(job_id = %id, event_id = %event, "webhook redelivery requested");
        self.ports.events.announce_webhook();
        Ok(())
    }
}
