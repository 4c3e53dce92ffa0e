//! Canceling the caller's jobs: the job ends `canceled` and its credits are released in one
//! commit, by compare-and-set, so that a cancel racing the provider's answer moves no credit
//! twice; the provider may then be asked to stop it.

use std::sync::Arc;

use time::OffsetDateTime;

use super::{Caller, JobQueryError, Ports, owned_job};
use crate::ids::JobId;
use crate::job::{Job, JobState, TransitionError, Trigger};
use crate::ports::{Clock, Commit, JobEvents, JobStore, StoreError, UpstreamProvider};

/// How often a cancel re-reads a job that changed under it before giving up.
const CANCEL_ATTEMPTS: usize = 16;

/// What canceling answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelReceipt {
    /// The job.
    pub id: JobId,
    /// `canceled`, or the final state the job already had.
    pub state: JobState,
    /// When it was canceled; for a job that was already succeeded or failed, when the
    /// cancel request was answered.
    pub canceled_at: OffsetDateTime,
}

/// Canceling jobs.
#[derive(Clone)]
pub struct Cancellations {
    ports: CancelPorts,
    upstream_cancel: bool,
}

/// The ports of [`Cancellations`].
#[derive(Clone)]
struct CancelPorts {
    jobs: Arc<dyn JobStore>,
    upstream: Arc<dyn UpstreamProvider>,
    events: Arc<dyn JobEvents>,
    clock: Arc<dyn Clock>,
}

impl Cancellations {
    /// Cancels over `ports`; with `upstream_cancel`, the provider is asked to stop a canceled
    /// job too.
    #[must_use]
    pub fn new(ports: &Ports, upstream_cancel: bool) -> Self {
        let ports = CancelPorts {
            jobs: Arc::clone(&ports.jobs),
            upstream: Arc::clone(&ports.upstream),
            events: Arc::clone(&ports.events),
            clock: Arc::clone(&ports.clock),
        };
        Self { ports, upstream_cancel }
    }

    /// Cancels a job that is not final and releases its credits; a final job is left as it is.
    ///
    /// # Errors
    /// See [`JobQueryError`].
    pub async fn cancel(&self, caller: &Caller, id: JobId) -> Result<CancelReceipt, JobQueryError> {
        self.cancel_where(id, Some(caller)).await
    }

    /// Cancels any user's job as its owner's cancel would: an operator's.
    ///
    /// # Errors
    /// [`JobQueryError::NotFound`] when there is no such job; when the store fails.
    pub async fn cancel_for_operator(&self, id: JobId) -> Result<CancelReceipt, JobQueryError> {
        tracing::info!(job_id = %id, "an operator cancels the job");
        self.cancel_where(id, None).await
    }

    /// Cancels an item of a batch being canceled.
    ///
    /// # Errors
    /// [`JobQueryError::NotFound`] when there is no such job; when the store fails.
    pub(super) async fn cancel_batch_item(&self, id: JobId) -> Result<CancelReceipt, JobQueryError> {
        self.cancel_where(id, None).await
    }

    /// Cancels job `id`, refused unless it is `owner`'s, when an owner is named.
    async fn cancel_where(&self, id: JobId, owner: Option<&Caller>) -> Result<CancelReceipt, JobQueryError> {
        for _ in 0..CANCEL_ATTEMPTS {
            let job = match owner {
                Some(caller) => owned_job(self.ports.jobs.as_ref(), caller, id).await?,
                None => self.ports.jobs.job(id).await?.ok_or(JobQueryError::NotFound)?,
            };
            let now = self.ports.clock.now();
            let transition = match job.apply(Trigger::Cancel, now) {
                Ok(transition) => transition,
                Err(TransitionError::AlreadyFinal(state)) => {
                    return Ok(CancelReceipt { id, state, canceled_at: job.canceled_at().unwrap_or(now) });
                }
                Err(e @ TransitionError::NotApplicable { .. }) => {
                    return Err(StoreError::Internal(e.to_string()).into());
                }
            };
            match self.ports.jobs.commit(transition).await? {
                Commit::Applied(job) => {
                    tracing::info!(job_id = %id, credits_released = %job.credits_held(), "job canceled");
                    self.ports.events.publish(id).await;
                    // The provider is told first, so that a job waiting for the slot this one
                    // held is sent after it stopped, not beside it.
                    self.stop_upstream(&job).await;
                    super::job_ended(self.ports.events.as_ref(), &job).await;
                    return Ok(CancelReceipt { id, state: job.state(), canceled_at: job.canceled_at().unwrap_or(now) });
                }
                // A cancel never admits a batch item.
                Commit::Stale(_) | Commit::OwnerAtLimit(_) => continue,
                Commit::Missing => return Err(JobQueryError::NotFound),
            }
        }
        Err(StoreError::Internal(format!("job {id} kept changing while being canceled")).into())
    }

    async fn stop_upstream(&self, job: &Job) {
        if let (true, Some(upstream)) = (self.upstream_cancel, &job.upstream()) {
            match self.ports.upstream.cancel(job.id(), upstream).await {
                Ok(()) => {
                    tracing::info!(job_id = %job.id(), "upstream asked to cancel")
                }
                Err(e) => {
                    tracing::warn!(job_id = %job.id(), error = %e, "upstream cancel failed")
                }
            }
        }
    }
}
