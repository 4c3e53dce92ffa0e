//! In-process services the use cases need: change notifications, the handoff to this process's
//! driver, the rate limit, time, ids and traces.

use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use time::OffsetDateTime;

use super::StoreError;
use crate::ids::{ApiKey, JobId, KeyPrefix, LeaseId, UserId};
use crate::job::Job;
use crate::trace::TraceParent;

/// Notifications that a job changed; each item means "read the job again".
pub type JobChanges = BoxStream<'static, ()>;

/// Wakes whoever waits on a job (long-polls, streams) when it changes, across replicas where the
/// adapter spans them.
///
/// # Errors
/// None: a lost notification only delays a waiter until its next periodic check.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait JobEvents: Send + Sync {
    /// Tells the job's subscribers that it changed.
    async fn publish(&self, job_id: JobId);

    /// Changes of one job from now on. Subscribe before reading the job, so no change is missed.
    fn subscribe(&self, job_id: JobId) -> JobChanges;

    /// The ids of all jobs that change from now on, for the driver to let go of jobs canceled
    /// while it holds them. A slow reader may miss some: the driver then lets such a job go when a
    /// step of its own finds it changed.
    fn subscribe_all(&self) -> BoxStream<'static, JobId>;

    /// Tells the drivers that someone waits on the job now (a long-poll or a stream), so that
    /// whichever holds it polls it at the full cadence for a while ([`WATCH_TTL`]). Waiters
    /// repeat it while they wait.
    async fn watch(&self, job_id: JobId);

    /// The ids of the jobs someone announces waiting on ([`JobEvents::watch`]) from now on. A
    /// slow reader may miss some: such a job is polled at the slower cadence meanwhile.
    fn subscribe_watches(&self) -> BoxStream<'static, JobId>;

    /// Tells this process's client webhook dispatcher that an event may be due now: a final
    /// commit recorded one, or a redelivery was asked. Only this process hears it; the
    /// dispatchers of other replicas find the event at their next look at the outbox.
    fn announce_webhook(&self);

    /// This process's [`JobEvents::announce_webhook`] from now on. A slow reader may miss
    /// some, but wakes at least once after them.
    fn subscribe_webhooks(&self) -> BoxStream<'static, ()>;

    /// Tells the drivers of every replica that job `job_id`, which held a slot of a provider's
    /// keys, ended: the jobs waiting for capacity look for a slot now rather than at their next
    /// look.
    async fn free_capacity(&self, job_id: JobId);

    /// [`JobEvents::free_capacity`] from now on, from any replica. A slow reader may miss some,
    /// but wakes at least once after them.
    fn subscribe_capacity(&self) -> BoxStream<'static, ()>;
}

/// How long a job counts as watched after a waiter last announced itself; waiters announce
/// themselves again well before.
pub const WATCH_TTL: Duration = Duration::from_secs(30);

/// The lease of the driver that takes handed jobs, and how long it lasts without renewal: a
/// handed job not sent that long after its accept was interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenLease {
    /// The lease a handed job goes under.
    pub id: LeaseId,
    /// How long the lease lasts without renewal.
    pub length: Duration,
}

/// The driver of this process, to which its submissions pass the jobs they accept so that they are
/// sent at once, without a claim and without a write of their own
/// ([`crate::usecases::Submissions::with_handoff`]; the `genjobs-driver` crate implements it).
///
/// # Errors
/// [`JobHandoff::send`] gives the job back when the driver stopped taking jobs meanwhile: the
/// submission then withdraws its start, for any driver to send the job.
#[cfg_attr(feature = "mocks", mockall::automock)]
pub trait JobHandoff: Send + Sync {
    /// The driver's lease that a handed job goes under; `None` while no driver takes jobs
    /// (stopping, or gone).
    fn open_lease(&self) -> Option<OpenLease>;

    /// Passes an accepted job, its submission started and leased to the driver, for it to send.
    ///
    /// # Errors
    /// The job, when no driver takes jobs any more.
    fn send(&self, job: Job) -> Result<(), Box<Job>>;
}

/// Whether a request may go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDecision {
    /// Go ahead.
    Allowed,
    /// Too many requests; try again after this long.
    Limited {
        /// Time until a request would be allowed.
        retry_after: Duration,
    },
}

/// Whose allowance a request spends: its user's, or its key's own (a key with a rate limit of
/// its own spends both). A user's bucket is the user's id; a key's is a UUID of version 8 made
/// from its prefix, which no user id (version 7) can equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateBucket(uuid::Uuid);

impl RateBucket {
    /// The bucket of `user_id`.
    #[must_use]
    pub fn user(user_id: UserId) -> Self {
        Self(user_id.as_uuid())
    }

    /// The bucket of the key of `prefix`.
    #[must_use]
    pub fn key(prefix: &KeyPrefix) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(format!("genjobs rate bucket of key {prefix}").as_bytes());
        let mut bytes = [0_u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        Self(uuid::Builder::from_custom_bytes(bytes).into_uuid())
    }

    /// The bucket as a UUID, for storage.
    #[must_use]
    pub fn as_uuid(self) -> uuid::Uuid {
        self.0
    }
}

/// Requests per minute per bucket (a user, or a key with a limit of its own).
///
/// # Errors
/// [`StoreError::Unavailable`] when a shared limiter cannot be reached.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Takes one request from the bucket's allowance of `per_minute`.
    async fn acquire(&self, bucket: RateBucket, per_minute: u32) -> Result<RateDecision, StoreError>;
}

/// Time, so that tests control it.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait Clock: Send + Sync {
    /// The current UTC time.
    fn now(&self) -> OffsetDateTime;

    /// Resolves after `duration`.
    async fn sleep(&self, duration: Duration);
}

/// New identifiers and keys, so that tests can fix them.
#[cfg_attr(feature = "mocks", mockall::automock)]
pub trait IdSource: Send + Sync {
    /// A new job id for a job created at `at`.
    fn job_id(&self, at: OffsetDateTime) -> JobId;
    /// A new user id for a user created at `at`.
    fn user_id(&self, at: OffsetDateTime) -> UserId;
    /// A new random API key.
    fn api_key(&self) -> ApiKey;
}

/// The production [`IdSource`]: UUID v7 ids and random keys.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn job_id(&self, at: OffsetDateTime) -> JobId {
        JobId::new_at(at)
    }

    fn user_id(&self, at: OffsetDateTime) -> UserId {
        UserId::new_at(at)
    }

    fn api_key(&self) -> ApiKey {
        ApiKey::generate()
    }
}

/// Traces across replicas: the context of the span in effect, for a job to keep, and a span made
/// to go on with a kept one. Spans are the `tracing` crate's; an adapter links them to a tracer.
#[cfg_attr(feature = "mocks", mockall::automock)]
pub trait Traces: Send + Sync {
    /// Whether spans go anywhere: without, nothing is worth reading to continue a trace.
    fn are_on(&self) -> bool;

    /// The context of the span in effect, to continue elsewhere; `None` without traces.
    fn current(&self) -> Option<TraceParent>;

    /// Makes `span`, not yet entered, a child of `parent`'s span, in its trace.
    fn continue_trace(&self, span: &tracing::Span, parent: &TraceParent);
}

/// No traces: every span stays in the process's logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTraces;

impl Traces for NoTraces {
    fn are_on(&self) -> bool {
        false
    }

    fn current(&self) -> Option<TraceParent> {
        None
    }

    fn continue_trace(&self, _: &tracing::Span, _: &TraceParent) {}
}
