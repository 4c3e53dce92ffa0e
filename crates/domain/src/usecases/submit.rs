//! Submitting a generation job: price it, then hold credits and insert it in one atomic step.

use std::sync::Arc;

use time::OffsetDateTime;

use super::{Caller, ClientWebhookPorts, Ports};
use crate::batch::BatchSettings;
use crate::capacity::ProviderLoad;
use crate::catalog::{Catalog, LiveCatalog, Model, Rate};
use crate::credits::Credits;
use crate::ids::{JobId, ModelId};
use crate::invalid::InvalidRequest;
use crate::job::{Job, JobState};
use crate::keys::BudgetExceeded;
use crate::ports::{
    AcceptError, Accepted, BatchStore, Clock, IdSource, IdempotencyClaim, JobHandoff, JobStore, ProviderAvailability,
    StoreError, Traces, UpstreamProvider,
};
use crate::request::{GenerationRequest, ReceivedRequest};

/// An `Idempotency-Key` header value, 1 to 255 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(pub(super) String);

impl IdempotencyKey {
    /// Longest key.
    pub const MAX_CHARS: usize = 255;

    /// Checks the header value.
    ///
    /// # Errors
    /// [`InvalidRequest`] with param `Idempotency-Key` when empty or longer than 255 characters.
    pub fn parse(text: &str) -> Result<Self, InvalidRequest> {
        let count = text.chars().count();
        if count == 0 || count > Self::MAX_CHARS {
            return Err(InvalidRequest::param(
                "Idempotency-Key",
                format!("the Idempotency-Key header must be 1 to {} characters", Self::MAX_CHARS),
            ));
        }
        Ok(Self(text.to_owned()))
    }
}

/// A validated submission.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The validated request.
    pub request: GenerationRequest,
    /// The body as the client sent it, kept with the job for operators.
    pub received: ReceivedRequest,
    /// The idempotency key and a fingerprint of the request as the client sent it (equal
    /// requests, equal fingerprints), when the client sent a key.
    pub idempotency: Option<(IdempotencyKey, String)>,
}

/// What both generation endpoints answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The new job.
    pub job_id: JobId,
    /// Always `queued`: the state on acceptance.
    pub state: JobState,
    /// The model in effect.
    pub model: ModelId,
    /// Acceptance time.
    pub created_at: OffsetDateTime,
    /// Credits held.
    pub credits_held: Credits,
}

impl Receipt {
    fn of(job: &Job) -> Self {
        Self {
            job_id: job.id(),
            state: JobState::Queued,
            model: job.model().clone(),
            created_at: job.created_at(),
            credits_held: job.credits_held(),
        }
    }
}

/// Why a submission was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// 402: fewer credits available than the hold.
    #[error("needs {needed} credits, {available} available")]
    InsufficientCredits {
        /// The hold.
        needed: Credits,
        /// Available credits.
        available: Credits,
    },
    /// 429: too many jobs not yet final.
    #[error("at most {limit} jobs may run at once; wait for one to finish")]
    ConcurrencyLimit {
        /// The user's limit.
        limit: u32,
    },
    /// 402 `KEY_BUDGET_EXCEEDED`: the hold would take the key past its budget for the period.
    #[error(transparent)]
    KeyBudgetExceeded(BudgetExceeded),
    /// 403 `MODEL_NOT_ALLOWED`: the key may not use the model.
    #[error("this API key may not use the model `{model}`")]
    ModelNotAllowed {
        /// The model asked for.
        model: ModelId,
    },
    /// 429: too many jobs of the key not yet final.
    #[error("at most {limit} jobs of this API key may run at once; wait for one to finish")]
    KeyConcurrencyLimit {
        /// The key's limit.
        limit: u32,
    },
    /// 409: the idempotency key was used with another body.
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyConflict,
    /// 400: the request is valid for the catalog, but `extra` sets a provider parameter it may
    /// not ([`crate::ports::UpstreamProvider::refused_extra_key`]).
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    /// The store failed, or the request named a model the catalog lost.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Submissions and (in `quote.rs`) quotes.
#[derive(Clone)]
pub struct Submissions {
    pub(super) ports: SubmitPorts,
    pub(super) catalog: LiveCatalog,
    handoff: Option<Arc<dyn JobHandoff>>,
    webhooks: Option<ClientWebhookPorts>,
    pub(super) batch: BatchSettings,
}

/// The ports of [`Submissions`].
#[derive(Clone)]
pub(super) struct SubmitPorts {
    jobs: Arc<dyn JobStore>,
    pub(super) batches: Arc<dyn BatchStore>,
    pub(super) upstream: Arc<dyn UpstreamProvider>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) ids: Arc<dyn IdSource>,
    traces: Arc<dyn Traces>,
}

impl Submissions {
    /// Submissions over `ports`, priced by `catalog`.
    #[must_use]
    pub fn new(ports: &Ports, catalog: impl Into<LiveCatalog>) -> Self {
        let ports = SubmitPorts {
            jobs: Arc::clone(&ports.jobs),
            batches: Arc::clone(&ports.batches),
            upstream: Arc::clone(&ports.upstream),
            clock: Arc::clone(&ports.clock),
            ids: Arc::clone(&ports.ids),
            traces: Arc::clone(&ports.traces),
        };
        Self { ports, catalog: catalog.into(), handoff: None, webhooks: None, batch: BatchSettings::default() }
    }

    /// The same submissions, passing the jobs they accept to the driver of their own process
    /// instead of leaving them for any driver to claim.
    #[must_use]
    pub fn with_handoff(self, handoff: Arc<dyn JobHandoff>) -> Self {
        Self { handoff: Some(handoff), ..self }
    }

    /// The same submissions, pricing batch items as `settings` says.
    #[must_use]
    pub fn with_batch_settings(self, settings: BatchSettings) -> Self {
        Self { batch: settings, ..self }
    }

    /// The same submissions, taking `webhook_url` when `ports` may call it.
    #[must_use]
    pub fn with_client_webhooks(self, ports: ClientWebhookPorts) -> Self {
        Self { webhooks: Some(ports), ..self }
    }

    /// The catalog in effect now: one snapshot, for one request to read throughout.
    #[must_use]
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.current()
    }

    /// The provider a new job of `model` goes to first, as the models list shows it: the first of
    /// its routes whose provider is configured (else its first route's, whose jobs would fail).
    #[must_use]
    pub fn provider_of<'m>(&self, model: &'m Model) -> &'m str {
        let configured = model.routes.iter().find(|route| self.ports.upstream.serves(&route.provider));
        configured.or(model.routes.first()).map_or("", |route| route.provider.as_str())
    }

    /// Where submissions can go now: each configured provider and its breaker.
    #[must_use]
    pub fn provider_availability(&self) -> Vec<ProviderAvailability> {
        self.ports.upstream.availability()
    }

    /// Each provider's keys with their jobs in flight and the jobs waiting for them, also shown
    /// as `genjobs_provider_in_flight` and `genjobs_provider_waiting`.
    ///
    /// # Errors
    /// [`StoreError`] when the slots cannot be counted.
    pub async fn provider_loads(&self) -> Result<Vec<ProviderLoad>, StoreError> {
        let loads = self.ports.upstream.loads().await?;
        super::telemetry::provider_loads(&loads);
        Ok(loads)
    }

    /// A job accepted now for `caller`, paying `rate`: `request`'s model, input and routing, the
    /// body as received and the caller's key; what a single submission and a batch's item share.
    pub(super) fn new_job(
        &self,
        caller: &Caller,
        request: &GenerationRequest,
        rate: Rate,
        received: ReceivedRequest,
        now: OffsetDateTime,
    ) -> Job {
        let (job, _hold) = Job::accept(
            self.ports.ids.job_id(now),
            caller.user_id,
            request.model.clone(),
            request.modality,
            request.input.clone(),
            rate,
            now,
        );
        job.with_routing(request.routing.clone())
            .with_request(received)
            .with_key_prefix(caller.key.as_ref().map(|key| key.prefix.clone()))
    }

    /// Refuses a `webhook_url` whose host may not be called (checked again at each delivery).
    pub(super) async fn check_webhook_destination(&self, url: &str) -> Result<(), InvalidRequest> {
        let Some(webhooks) = &self.webhooks else {
            return Err(InvalidRequest::param("webhook_url", "this service sends no webhooks"));
        };
        webhooks.transport.check_destination(url).await.map_err(|why| InvalidRequest::param("webhook_url", why))
    }

    /// Accepts a generation job: holds its price and queues it; the driver takes it from there
    /// (this process's own, at once, given a [`crate::ports::JobHandoff`]).
    ///
    /// # Errors
    /// See [`SubmitError`].
    pub async fn submit(&self, caller: &Caller, submission: Submission) -> Result<Receipt, SubmitError> {
        let Submission { request, received, idempotency } = submission;
        if !caller.may_use(&request.model) {
            return Err(SubmitError::ModelNotAllowed { model: request.model.clone() });
        }
        let catalog = self.catalog.current();
        let rate = self.price(&catalog, &request)?.rate(&request.input).at(caller.price_percent);
        if let Some(url) = &request.webhook_url {
            self.check_webhook_destination(url).await?;
        }
        let now = self.ports.clock.now();
        // The job goes on with the trace of the request that submits it, on whichever replica drives it.
        let job = self
            .new_job(caller, &request, rate, received, now)
            .with_webhook_url(request.webhook_url.clone())
            .with_priority(request.priority)
            .with_start_by(request.start_within_secs.map(|secs| now + time::Duration::seconds(i64::from(secs))))
            .with_trace(self.ports.traces.current());
        let claim = idempotency.map(|(key, fingerprint)| IdempotencyClaim { key: key.0, fingerprint });
        let (job, lease) = match &self.handoff {
            Some(handoff) => super::handoff::started(handoff.as_ref(), job, now),
            None => (job, None),
        };
        match self.ports.jobs.accept(job, claim, lease, now).await {
            Ok(Accepted::Created(job)) => {
                tracing::info!(job_id = %job.id(), user_id = %job.user_id(), model = %job.model(), credits_held = %job.credits_held(), "job accepted");
                super::telemetry::job_accepted(&job);
                let receipt = Receipt::of(&job);
                if let Some(handoff) = self.handoff.as_ref().filter(|_| lease.is_some())
                    && let Err(job) = handoff.send(job)
                {
                    super::handoff::withdraw(self.ports.jobs.as_ref(), self.ports.clock.as_ref(), vec![*job]).await;
                }
                Ok(receipt)
            }
            Ok(Accepted::Replayed(job)) => {
                tracing::info!(job_id = %job.id(), "idempotent retry answered with the original receipt");
                Ok(Receipt::of(&job))
            }
            Err(AcceptError::InsufficientCredits { needed, available }) => {
                Err(SubmitError::InsufficientCredits { needed, available })
            }
            Err(AcceptError::ConcurrencyLimit { limit }) => Err(SubmitError::ConcurrencyLimit { limit }),
            Err(AcceptError::KeyBudgetExceeded(exceeded)) => Err(SubmitError::KeyBudgetExceeded(exceeded)),
            Err(AcceptError::KeyConcurrencyLimit { limit }) => Err(SubmitError::KeyConcurrencyLimit { limit }),
            Err(AcceptError::IdempotencyConflict) => Err(SubmitError::IdempotencyConflict),
            Err(AcceptError::UnknownUser) => {
                Err(StoreError::Internal("an authenticated user has no account".into()).into())
            }
            Err(AcceptError::Store(e)) => Err(e.into()),
        }
    }
}
