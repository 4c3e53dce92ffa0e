//! The ports of client webhooks: the outbox and the users' secrets ([`WebhookStore`]), the
//! network ([`WebhookTransport`]), the secrets' encryption ([`SecretVault`]) and the body
//! ([`WebhookRenderer`], since the job and batch resources are the edge's wire format).

use std::collections::HashMap;

use async_trait::async_trait;
use time::OffsetDateTime;

use super::StoreError;
use crate::batch::BatchView;
use crate::client_webhooks::{Attempt, EventId, EventType, WebhookEvent};
use crate::ids::UserId;
use crate::job::Job;

/// How many events one claim may take: in all, and for each destination host (the host and
/// port of its URL, as [`crate::address::destination_host`] names it) no more than the slots
/// its deliveries in flight leave free. A host at its limit is skipped, not waited on, so a slow
/// receiver holds only its own slots and the events of other hosts are claimed past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimLimits {
    /// Events in all.
    pub total: usize,
    /// Deliveries at once to one host.
    pub per_host: usize,
    /// Deliveries in flight now, by host.
    pub in_flight: HashMap<String, usize>,
}

impl ClaimLimits {
    /// Up to `total` events, whatever their hosts.
    #[must_use]
    pub fn up_to(total: usize) -> Self {
        Self { total, per_host: usize::MAX, in_flight: HashMap::new() }
    }

    /// How many more events of `host` may be claimed.
    #[must_use]
    pub fn free_for(&self, host: &str) -> usize {
        self.per_host.saturating_sub(self.in_flight.get(host).copied().unwrap_or(0))
    }
}

/// The outbox as a whole, for the dispatcher's sleep and the operators' gauge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxState {
    /// The earliest time an event can be claimed: its next attempt's time, or its lease's end
    /// when later.
    pub next_claimable_at: Option<OffsetDateTime>,
    /// When the oldest event still to be tried became due.
    pub oldest_pending_since: Option<OffsetDateTime>,
}

/// The outbox of client webhooks and the users' sealed webhook secrets. The events themselves are
/// written by [`super::JobStore::commit`], with the final transition that causes them: a job's
/// own, or its batch's when it is the batch's last item to become final (and by
/// [`super::BatchStore::end_batch`] never, since a batch whose items are all final has ended).
/// Events are keyed by their [`EventId`], their subject's id.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] when the backing store cannot be reached,
/// and [`StoreError::Internal`] for anything else unexpected.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Claims events whose next attempt is due by `now` and whose lease (if any) has run out,
    /// earliest first within `limits` (in all, and per destination host), leasing them until
    /// `lease_until` so that no other dispatcher takes them.
    async fn claim_due_events(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limits: ClaimLimits,
    ) -> Result<Vec<WebhookEvent>, StoreError>;

    /// Hands claimed events back without trying them: none may be claimed again before `until`.
    async fn defer_events(&self, events: Vec<EventId>, until: OffsetDateTime) -> Result<(), StoreError>;

    /// Sets the event's body if it has none yet, and returns the body it has now: the first
    /// attempt fixes it for every later one.
    async fn fix_event_body(&self, event: EventId, body: Vec<u8>) -> Result<Vec<u8>, StoreError>;

    /// Records an attempt and ends the event's lease: appends `attempt`, sets `delivered_at` to
    /// its time when it delivered, and sets the next attempt (`None`: no more).
    async fn record_attempt(
        &self,
        event: EventId,
        attempt: Attempt,
        next_attempt_at: Option<OffsetDateTime>,
    ) -> Result<(), StoreError>;

    /// The events of a job or a batch, by the id its event would have (none when it had no
    /// `webhook_url` or is not final).
    async fn webhook_events(&self, event: EventId) -> Result<Vec<WebhookEvent>, StoreError>;

    /// Makes the event due at `now` for one more attempt; `false` when there is none.
    async fn redeliver(&self, event: EventId, now: OffsetDateTime) -> Result<bool, StoreError>;

    /// See [`OutboxState`].
    async fn outbox_state(&self) -> Result<OutboxState, StoreError>;

    /// The user's sealed secret, if one was made.
    async fn webhook_secret(&self, user_id: UserId) -> Result<Option<Vec<u8>>, StoreError>;

    /// Keeps `sealed` as the user's secret, replacing the one there only when `replace`; returns
    /// the secret kept (another replica may have made one first).
    async fn keep_webhook_secret(&self, user_id: UserId, sealed: Vec<u8>, replace: bool)
    -> Result<Vec<u8>, StoreError>;
}

/// One attempt's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingWebhook {
    /// Where it goes.
    pub url: String,
    /// `webhook-id`.
    pub id: String,
    /// The JSON body.
    pub body: Vec<u8>,
    /// The owner's secret, `whsec_<base64>`.
    pub secret: String,
}

/// What came of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptOutcome {
    /// The receiver's status; `None` when it did not answer.
    pub status: Option<u16>,
    /// Why it did not deliver: an [`AttemptFailure`]'s class, never the operating system's text,
    /// which would tell a user probing the network a refused port from an unreachable host.
    pub error: Option<String>,
}

impl AttemptOutcome {
    /// An attempt that failed for `failure`, with the receiver's `status` when it answered.
    #[must_use]
    pub fn failed(status: Option<u16>, failure: AttemptFailure) -> Self {
        Self { status, error: Some(failure.as_str().to_owned()) }
    }
}

/// The classes of a failed attempt the user sees; the detail goes to the operators' logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptFailure {
    /// No connection was made (refused, unreachable, reset, TLS), or the request could not be
    /// made at all.
    ConnectFailed,
    /// No answer within the transport's timeout.
    Timeout,
    /// The receiver answered with a status other than 2xx (redirects included).
    HttpStatus,
    /// The destination's address is not one the service may call.
    RefusedAddress,
}

impl AttemptFailure {
    /// The class as an attempt's `error` shows it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ConnectFailed => "connect_failed",
            Self::Timeout => "timeout",
            Self::HttpStatus => "http_status",
            Self::RefusedAddress => "refused_address",
        }
    }
}

/// The network side of client webhooks.
///
/// # Errors
/// [`WebhookTransport::check_destination`] says why a URL may not be called; sending never
/// fails: what happened is the [`AttemptOutcome`].
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait WebhookTransport: Send + Sync {
    /// Whether webhooks may go to `url`: its host, resolved, has only addresses the service may
    /// call ([`crate::address::is_public`], unless the operator allows private ones).
    ///
    /// # Errors
    /// Why not, for the client.
    async fn check_destination(&self, url: &str) -> Result<(), String>;

    /// Signs and posts one attempt, checking the resolved addresses again, following no
    /// redirect, within the transport's timeout.
    async fn send(&self, webhook: OutgoingWebhook) -> AttemptOutcome;
}

/// The users' webhook secrets, encrypted at rest.
///
/// # Errors
/// [`SecretVault::open`] returns [`StoreError::Internal`] for a sealed secret this key did not
/// seal.
#[cfg_attr(feature = "mocks", mockall::automock)]
pub trait SecretVault: Send + Sync {
    /// A new random secret, `whsec_<base64>`.
    fn generate(&self) -> String;
    /// `secret`, encrypted.
    fn seal(&self, secret: &str) -> Vec<u8>;
    /// The secret `sealed` holds.
    fn open(&self, sealed: &[u8]) -> Result<String, StoreError>;
}

/// The body of an event: `{type, timestamp, data: <the job or batch resource>}`, the job or the
/// batch shown exactly as the API shows it.
#[cfg_attr(feature = "mocks", mockall::automock)]
pub trait WebhookRenderer: Send + Sync {
    /// The JSON body of `job`'s `event_type` event at `timestamp`.
    fn render(&self, event_type: EventType, timestamp: OffsetDateTime, job: &Job) -> Vec<u8>;

    /// The JSON body of the batch's `event_type` event at `timestamp`.
    fn render_batch(&self, event_type: EventType, timestamp: OffsetDateTime, batch: &BatchView) -> Vec<u8>;
}
