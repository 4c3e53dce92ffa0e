//! The provider port: submit, poll, fetch and cancel, with every failure classified.

use async_trait::async_trait;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::ReportedUsage;
use crate::capacity::{Priority, ProviderKey, ProviderLoad};
use crate::catalog::Model;
use crate::ids::JobId;
use crate::input::GenerationInput;
use crate::job::UpstreamRef;
use crate::modality::Modality;
use crate::output::OutputItem;

/// What the provider says of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamStatus {
    /// Waiting in the provider's queue.
    Queued {
        /// How many requests are ahead of it, when the provider says.
        position: Option<u32>,
    },
    /// Running; with the percentage the provider reported, if any.
    Running {
        /// Percent done according to the provider's logs.
        percent: Option<u8>,
    },
    /// Done; the result can be fetched (it may still be an error).
    Completed,
    /// Done, and the status already says the job failed ([`ResultFailure::Rejected`] or
    /// [`ResultFailure::Failed`]); there is no result to fetch.
    Failed(ResultFailure),
}

/// Why a submission failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitFailure {
    /// The provider refused the input (a 4xx): final.
    #[error("refused: {0}")]
    Rejected(String),
    /// The provider's own content policy refused the input: final, and never sent to another
    /// route, which would only be asked to make what one provider already refused.
    #[error("content refused: {0}")]
    ContentRefused(String),
    /// The request surely never reached the provider (connection refused): safe to send again.
    #[error("not reached: {0}")]
    NotReached(String),
    /// The provider may or may not have the job (timeout, 5xx, cut connection): never resent.
    #[error("outcome unknown: {0}")]
    Ambiguous(String),
    /// Every key of the provider the job goes to has its cap of jobs in flight: nothing was
    /// sent, and the job waits for a slot of that provider.
    #[error("at capacity: {0}")]
    AtCapacity(String),
}

/// What became of a submission call that brought no job back, in the terms that decide whether
/// it may go to the next provider ([`SubmitCall::never_reached`]). Each adapter says which of
/// these its transport's failure was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitCall {
    /// No connection was made (refused, or none within the connect timeout): nothing was sent.
    NotConnected,
    /// The request was sent and no answer came in time.
    TimedOut,
    /// The connection broke off during the call.
    Broken,
    /// The provider answered with this HTTP status, not a success.
    Answered(u16),
}

impl SubmitCall {
    /// A call that got no answer: whether its connection was never made, else whether it
    /// timed out, else it broke off.
    #[must_use]
    pub fn unanswered_by(not_connected: bool, timed_out: bool) -> Self {
        match (not_connected, timed_out) {
            (true, _) => SubmitCall::NotConnected,
            (false, true) => SubmitCall::TimedOut,
            (false, false) => SubmitCall::Broken,
        }
    }

    /// Whether the provider surely holds no job from this call, so that the submission may go
    /// to the next provider (or be sent again later): no connection was made, or the answer came
    /// before anything was queued (429 throttled, 502 a gateway that did not reach the API, 503
    /// the API unavailable). A 500 or a 504 may come after the job was stored, and a timeout or a
    /// broken connection after the body was sent: those are never sent again anywhere, since a
    /// second provider running the job would charge the user twice.
    #[must_use]
    pub fn never_reached(self) -> bool {
        matches!(self, SubmitCall::NotConnected | SubmitCall::Answered(429 | 502 | 503))
    }

    /// The port's failure for this call, explained by `reason`: [`SubmitFailure::NotReached`]
    /// when it never reached the provider, [`SubmitFailure::Ambiguous`] otherwise.
    #[must_use]
    pub fn failure(self, reason: impl Into<String>) -> SubmitFailure {
        if self.never_reached() {
            SubmitFailure::NotReached(reason.into())
        } else {
            SubmitFailure::Ambiguous(reason.into())
        }
    }

    /// [`SubmitCall::failure`] of a call that got no answer, in the same words for every
    /// provider.
    #[must_use]
    pub fn unanswered(self) -> SubmitFailure {
        let reason = match self {
            SubmitCall::NotConnected => "the provider could not be reached".to_owned(),
            SubmitCall::TimedOut => "the provider did not answer in time".to_owned(),
            SubmitCall::Broken => "the connection to the provider failed".to_owned(),
            SubmitCall::Answered(status) => format!("the provider answered HTTP {status}"),
        };
        self.failure(reason)
    }
}

/// Where a job goes: the provider the router chose for it and the key whose slot it holds there
/// (none for a provider with one key and no cap), and the job's priority.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The provider, by name; `None` leaves the choice to the submission.
    pub provider: Option<String>,
    /// The [`crate::capacity::ProviderKey::id`] of the key it is sent with.
    pub key_id: Option<String>,
    /// The job's priority, which the provider is told where it takes one.
    pub priority: Priority,
}

/// How one provider is sent a job: on which key, at which priority.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendAs {
    /// The [`crate::capacity::ProviderKey::id`] of the key; `None`: the provider's first.
    pub key_id: Option<String>,
    /// The job's priority.
    pub priority: Priority,
}

/// Whether a job may be sent now, as its provider's keys and their caps say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capacity {
    /// A slot is the job's: send it so placed.
    Free(Placement),
    /// Every key is at its cap, or jobs that come first take the free slots: the job waits.
    Full,
    /// The slots cannot be counted now (the store is out of reach): the job waits, and looks
    /// again later.
    Unknown(String),
}

/// Why a status or cancel call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PollFailure {
    /// Timeout, connection error, 429 or 5xx: try again later.
    #[error("transient: {0}")]
    Transient(String),
    /// The provider does not know the request (any more): final.
    #[error("gone: {0}")]
    Gone(String),
}

/// A completed job's result: what it delivered, and what the provider says it billed for it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpstreamResult {
    /// The outputs delivered.
    pub outputs: Vec<OutputItem>,
    /// What the provider says it billed for the job.
    pub usage: ReportedUsage,
}

impl From<Vec<OutputItem>> for UpstreamResult {
    /// A result whose provider reported nothing of its billing.
    fn from(outputs: Vec<OutputItem>) -> Self {
        Self { outputs, ..Self::default() }
    }
}

/// Why a result could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultFailure {
    /// The provider refused the input (422).
    #[error("refused: {0}")]
    Rejected(String),
    /// The provider's own content policy refused the input or the output (a safety checker, a
    /// content policy violation): final, never tried on another route.
    #[error("content refused: {0}")]
    ContentRefused(String),
    /// The model failed (other 4xx, 5xx with a detail).
    #[error("failed: {0}")]
    Failed(String),
    /// A result came but cannot be read.
    #[error("unreadable: {0}")]
    Invalid(String),
    /// Timeout, connection error, 429 or a bare 5xx: try again later.
    #[error("transient: {0}")]
    Transient(String),
    /// A final failure the provider billed all the same (a run that failed or was canceled after
    /// it used the provider's machine): the job fails as `failure` says, keeping `usage` in its
    /// provider bill.
    #[error("{failure} (billed)")]
    Billed {
        /// Why the job failed.
        failure: Box<ResultFailure>,
        /// What the provider billed for it.
        usage: ReportedUsage,
    },
}

impl ResultFailure {
    /// This failure, carrying `usage` when the provider reported any and the failure is final
    /// (a transient one ends nothing, so it bills nothing).
    #[must_use]
    pub fn billed(self, usage: ReportedUsage) -> ResultFailure {
        match self {
            ResultFailure::Transient(_) => self,
            failure if usage.is_reported() => ResultFailure::Billed { failure: Box::new(failure), usage },
            failure => failure,
        }
    }
}

/// What the provider answered a cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The provider will stop the job (or it never started).
    Requested,
    /// The job had already completed at the provider: its result can still be fetched.
    AlreadyCompleted,
}

/// A notification the provider pushed about a job (a webhook delivery), verified and read.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamReport {
    /// The provider's id of the job ([`UpstreamRef::key`]).
    pub key: String,
    /// How the job ended: its outputs, or why it failed.
    pub outcome: Result<UpstreamResult, ResultFailure>,
    /// The delivery's own id, when the provider's scheme signs one (Standard Webhooks'
    /// `webhook-id`): a delivery answered once is refused when it comes again (a replay).
    pub delivery_id: Option<String>,
}

/// One delivery as it arrived: its headers (names in lowercase) and its raw body.
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    /// The provider the delivery is addressed to, as its webhook's path names it.
    pub provider: String,
    /// Header names, lowercase, with their values.
    pub headers: Vec<(String, String)>,
    /// The body, byte for byte as signed.
    pub body: Vec<u8>,
}

impl Delivery {
    /// The value of a header, by lowercase name.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Why a delivery is not trusted or not read; nothing changes for any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotificationRejected {
    /// This provider (or this configuration of it) takes no notifications.
    #[error("notifications are not enabled")]
    NotEnabled,
    /// Unsigned, wrongly signed, or signed too long ago or ahead.
    #[error("invalid signature: {0}")]
    InvalidSignature(String),
    /// Well signed, but not a notification this adapter can read.
    #[error("malformed notification: {0}")]
    Malformed(String),
    /// The keys to verify it cannot be had right now; the provider should deliver it again.
    #[error("cannot verify now: {0}")]
    Unavailable(String),
}

/// Whether a provider takes submissions now, as the router's circuit breaker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Submissions go to the provider.
    Closed,
    /// The provider refused too often in a row: submissions pass it by for `cools_for` more.
    Open {
        /// Until the next submission probes it again.
        cools_for: std::time::Duration,
    },
    /// The cool-down is over: the next submission probes the provider, and its answer closes or
    /// opens the breaker.
    HalfOpen,
}

/// A configured provider and its breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderAvailability {
    /// The provider's name.
    pub provider: String,
    /// Its breaker.
    pub breaker: BreakerState,
    /// Refusals in a row since it last answered.
    pub refusals_in_a_row: u32,
}

/// The upstream provider that runs the jobs. Provider-neutral: it is given a validated request
/// for a catalog model and answers with an opaque [`UpstreamRef`]; which endpoint serves the
/// model, how fields are named and translated, and where to poll are the adapter's own.
///
/// # Errors
/// Implementations classify every failure into the variants of [`SubmitFailure`],
/// [`PollFailure`] and [`ResultFailure`] as documented there; messages never contain the key.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait UpstreamProvider: Send + Sync {
    /// The provider's name: the `provider` of the catalog routes it reads, the `upstream` of the
    /// jobs it runs. An adapter over several providers answers with its first.
    fn name(&self) -> &'static str;

    /// Whether this adapter runs the routes of `provider`: its own name, or, for an adapter over
    /// several providers, any of theirs.
    fn serves(&self, provider: &str) -> bool {
        provider == self.name()
    }

    /// Each provider behind this adapter and whether it takes submissions now: one adapter alone
    /// has no breaker and is always [`BreakerState::Closed`]; an adapter that routes over several
    /// answers for each, in the order it tries them.
    fn availability(&self) -> Vec<ProviderAvailability> {
        vec![ProviderAvailability {
            provider: self.name().to_owned(),
            breaker: BreakerState::Closed,
            refusals_in_a_row: 0,
        }]
    }

    /// The first key of `extra` (in key order) that a request to `model` may not set: a
    /// provider parameter the adapter derives from a body field, or one the price depends on
    /// (how many outputs, how long, how large). Checked before anything is held, so that `extra`
    /// can never make the provider produce more than was paid for; every other key is sent
    /// unchanged. `None` when every key may pass.
    fn refused_extra_key(&self, model: &Model, extra: &Map<String, Value>) -> Option<String>;

    /// Submits a job: `input` (validated against `model`) in the provider's terms.
    ///
    /// # Errors
    /// [`SubmitFailure::Rejected`] also when the adapter cannot express the input for the model
    /// (a model it has no route for, a value it cannot translate).
    async fn submit(&self, job_id: JobId, model: &Model, input: &GenerationInput)
    -> Result<UpstreamRef, SubmitFailure>;

    /// The keys this provider is called with, each with its cap of jobs in flight, in the
    /// operator's order. Empty for a provider called with one key and no cap: its submissions
    /// take no slot ([`crate::ports::ProviderSlots`]).
    fn keys(&self) -> Vec<ProviderKey> {
        Vec::new()
    }

    /// The last 4 characters of the key a job was sent with (as its reference names it, or the
    /// provider's only key), for reports per provider key; `None` when the provider is called
    /// with no key. The default knows none.
    fn key_hint(&self, upstream: &UpstreamRef) -> Option<String> {
        let _ = upstream;
        None
    }

    /// Takes a slot for the job at the provider its model's routes lead to, before anything is
    /// sent or written: [`Capacity::Free`] with where it goes, else why it waits. The default,
    /// for a provider without caps, always has room.
    async fn reserve(&self, job_id: JobId, model: &Model) -> Capacity {
        let _ = (job_id, model);
        Capacity::Free(Placement::default())
    }

    /// As [`UpstreamProvider::reserve`], at the first route of `model` not cooling down even when
    /// the job waited at another: the caller ordered the routes by the capacity free now
    /// ([`crate::routing::spill_order`]). The default reserves as
    /// [`UpstreamProvider::reserve`] does.
    async fn reserve_first(&self, job_id: JobId, model: &Model) -> Capacity {
        self.reserve(job_id, model).await
    }

    /// The jobs waiting for capacity that the slots free now would go to, at every provider
    /// that takes slots ([`crate::ports::ProviderSlots::next_in_line`]): the driver wakes these
    /// alone when a slot frees. The default, for an adapter that takes no slots, has no job
    /// waiting.
    ///
    /// # Errors
    /// [`crate::ports::StoreError`] when the slots cannot be read.
    async fn next_in_line(&self) -> Result<Vec<JobId>, crate::ports::StoreError> {
        Ok(Vec::new())
    }

    /// As [`UpstreamProvider::submit`], as `placement` (from [`UpstreamProvider::reserve`]) says.
    ///
    /// # Errors
    /// As [`UpstreamProvider::submit`]; the default ignores the placement.
    async fn submit_placed(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
        placement: &Placement,
    ) -> Result<UpstreamRef, SubmitFailure> {
        let _ = placement;
        self.submit(job_id, model, input).await
    }

    /// As [`UpstreamProvider::submit`], as `send` says: with the key whose [`ProviderKey::id`] it
    /// names (the returned reference names that key, so that every later call for the job uses
    /// it), at its priority where the provider takes one.
    ///
    /// # Errors
    /// As [`UpstreamProvider::submit`]; the default, for a provider of one key and no
    /// priorities, submits as usual.
    async fn submit_as(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
        send: &SendAs,
    ) -> Result<UpstreamRef, SubmitFailure> {
        let _ = send;
        self.submit(job_id, model, input).await
    }

    /// Each provider behind this adapter with its keys' jobs in flight and the jobs waiting for
    /// them, for operators. The default, for an adapter that takes no slots, knows none.
    ///
    /// # Errors
    /// [`crate::ports::StoreError`] when the slots cannot be counted.
    async fn loads(&self) -> Result<Vec<ProviderLoad>, crate::ports::StoreError> {
        Ok(Vec::new())
    }

    /// Polls a job's status.
    async fn status(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<UpstreamStatus, PollFailure>;

    /// Fetches a completed job's outputs, with the units the provider reported billing.
    async fn result(
        &self,
        job_id: JobId,
        upstream: &UpstreamRef,
        modality: Modality,
    ) -> Result<UpstreamResult, ResultFailure>;

    /// Asks the provider to stop a job (best effort).
    async fn cancel(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<(), PollFailure>;

    /// As [`UpstreamProvider::cancel`], telling a job that had already completed at the provider
    /// (whose result can still be fetched) from one that will stop.
    ///
    /// # Errors
    /// As [`UpstreamProvider::cancel`]; the default reads every success as
    /// [`CancelOutcome::Requested`], for a provider that cannot tell.
    async fn cancel_unless_done(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<CancelOutcome, PollFailure> {
        self.cancel(job_id, upstream).await.map(|()| CancelOutcome::Requested)
    }

    /// Verifies a delivery the provider pushed (signature, freshness against `now`) and reads
    /// it. Verification comes first: nothing of an unverified delivery is read.
    ///
    /// # Errors
    /// [`NotificationRejected::NotEnabled`] from a provider that does not notify (the default);
    /// the other variants as documented there.
    async fn read_notification(
        &self,
        delivery: &Delivery,
        now: OffsetDateTime,
    ) -> Result<UpstreamReport, NotificationRejected> {
        let _ = (delivery, now);
        Err(NotificationRejected::NotEnabled)
    }
}
