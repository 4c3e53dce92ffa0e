//! Removing the caller's jobs from a listing (OpenAI's `videos.delete`), and reading the jobs
//! kept there. Removing a job that still runs cancels it first, so that its credits are
//! released exactly as a cancel releases them; the job, its credits and its ledger stay, and
//! only the listing forgets it.

use std::sync::Arc;

use super::{Caller, Cancellations, JobQueryError, Ports, owned_job};
use crate::ids::JobId;
use crate::job::Job;
use crate::ports::{Clock, JobRemovals, JobStore, KeptPage};

/// Largest page of kept jobs.
pub const MAX_KEPT_PAGE: usize = 100;

/// A page of kept jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptListing {
    /// In the page's order.
    pub jobs: Vec<Job>,
    /// Whether more jobs follow the last one, in the page's order.
    pub has_more: bool,
}

/// Removing jobs from a listing, and reading those kept.
#[derive(Clone)]
pub struct Removals {
    jobs: Arc<dyn JobStore>,
    removals: Arc<dyn JobRemovals>,
    clock: Arc<dyn Clock>,
    cancellations: Cancellations,
}

impl Removals {
    /// Removals over `ports`, canceling through `cancellations`.
    #[must_use]
    pub fn new(ports: &Ports, cancellations: Cancellations) -> Self {
        Self {
            jobs: Arc::clone(&ports.jobs),
            removals: Arc::clone(&ports.removals),
            clock: Arc::clone(&ports.clock),
            cancellations,
        }
    }

    /// The caller's job `id`, unless it was removed.
    ///
    /// # Errors
    /// [`JobQueryError::NotFound`] for a removed job too; see [`JobQueryError`].
    pub async fn kept_job(&self, caller: &Caller, id: JobId) -> Result<Job, JobQueryError> {
        let job = owned_job(self.jobs.as_ref(), caller, id).await?;
        if self.removals.is_removed(id).await? {
            return Err(JobQueryError::NotFound);
        }
        Ok(job)
    }

    /// A page of the caller's kept jobs; `page.limit` is at most [`MAX_KEPT_PAGE`].
    ///
    /// # Errors
    /// [`JobQueryError::Store`] when the store fails.
    pub async fn kept_page(&self, caller: &Caller, page: KeptPage) -> Result<KeptListing, JobQueryError> {
        let limit = page.limit.clamp(1, MAX_KEPT_PAGE);
        let mut jobs = self.removals.kept_jobs(caller.user_id, KeptPage { limit: limit + 1, ..page }).await?;
        let has_more = jobs.len() > limit;
        // A restricted key's page leaves out its user's other jobs; `has_more` still tells
        // whether the user's listing goes on, so a page may be short but never ends early.
        jobs.retain(|job| caller.sees_key(job.key_prefix()));
        jobs.truncate(limit);
        Ok(KeptListing { jobs, has_more })
    }

    /// Removes the caller's job `id`: cancels it (releasing its credits) when it is not final,
    /// then marks it removed. Returns the job as it is once canceled.
    ///
    /// # Errors
    /// [`JobQueryError::NotFound`] for a job removed before; see [`JobQueryError`].
    pub async fn remove(&self, caller: &Caller, id: JobId) -> Result<Job, JobQueryError> {
        let job = self.kept_job(caller, id).await?;
        let job = if job.state().is_final() {
            job
        } else {
            self.cancellations.cancel(caller, id).await?;
            owned_job(self.jobs.as_ref(), caller, id).await?
        };
        if !self.removals.remove(id, self.clock.now()).await? {
            return Err(JobQueryError::NotFound);
        }
        tracing::info!(job_id = %id, state = job.state().as_str(), "job removed from its listing");
        Ok(job)
    }
}
