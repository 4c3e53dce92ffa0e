//! The operators' view of jobs: every user's jobs found by owner, state, model or provider, page
//! by page, and one job with its ledger (what it held, then what it was charged or released).
//! An operator's cancel is the owner's (`cancel.rs`).

use super::usage::{LedgerEntry, entries};
use super::{Admin, JobListing, JobQueryError};
use crate::ids::JobId;
use crate::job::Job;
use crate::ports::{JobFilter, StoreError};

/// Most jobs on one page of the operators' listing.
pub const MAX_ADMIN_JOBS_PAGE: usize = 100;

/// One job as an operator inspects it.
#[derive(Debug, Clone, PartialEq)]
pub struct InspectedJob {
    /// The job, with the body it was received with ([`Job::request`]).
    pub job: Job,
    /// Its ledger entries, oldest first.
    pub ledger: Vec<LedgerEntry>,
}

impl Admin {
    /// Every user's jobs that `filter` matches, newest first: at most `limit` older than
    /// `before`, and the cursor of the next page.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn find_jobs(
        &self,
        filter: &JobFilter,
        before: Option<JobId>,
        limit: usize,
    ) -> Result<JobListing, StoreError> {
        let limit = limit.clamp(1, MAX_ADMIN_JOBS_PAGE);
        let mut jobs = self.ports.jobs.find_jobs(filter, before, limit + 1).await?;
        let more = jobs.len() > limit;
        jobs.truncate(limit);
        let next = if more { jobs.last().map(Job::id) } else { None };
        Ok(JobListing { jobs, next })
    }

    /// Any user's job `id` with its ledger.
    ///
    /// # Errors
    /// [`JobQueryError::NotFound`] when there is no such job; when the store fails.
    pub async fn inspect_job(&self, id: JobId) -> Result<InspectedJob, JobQueryError> {
        let job = self.ports.jobs.job(id).await?.ok_or(JobQueryError::NotFound)?;
        let records = self.ports.usage.job_ledger(id).await?;
        Ok(InspectedJob { job, ledger: records.iter().flat_map(entries).collect() })
    }
}
