//! Reading, listing and (through `watch.rs`, whose waits the edge runs) waiting on and
//! streaming the caller's jobs.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::watch::{JobStream, LongPoll};
use super::{Caller, Ports, Settings, owned_job};
use crate::ids::JobId;
use crate::job::{Job, JobState};
use crate::ports::{Clock, JobEvents, JobFilter, JobStore, OutputSource, OutputStore, StoreError, WATCH_TTL};

/// Longest long-poll, in seconds.
pub const MAX_WAIT_SECS: u64 = 60;
/// Largest page of the job listing.
pub const MAX_JOBS_PAGE: usize = 100;

/// Why a job cannot be read or canceled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobQueryError {
    /// 404: no such job.
    #[error("no job with this id")]
    NotFound,
    /// 403: the job belongs to another user.
    #[error("this job belongs to another user")]
    Forbidden,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An event of a job's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum JobEvent {
    /// The job is not final yet.
    Progress(Job),
    /// The job succeeded; the stream ends.
    Done(Job),
    /// The job failed or was canceled; the stream ends.
    Error(Job),
}

impl JobEvent {
    pub(super) fn of(job: Job) -> Self {
        match job.state() {
            JobState::Succeeded => JobEvent::Done(job),
            JobState::Failed | JobState::Canceled => JobEvent::Error(job),
            JobState::Queued | JobState::Running => JobEvent::Progress(job),
        }
    }

    /// The job as of this event.
    #[must_use]
    pub fn job(&self) -> &Job {
        match self {
            JobEvent::Progress(job) | JobEvent::Done(job) | JobEvent::Error(job) => job,
        }
    }
}

/// A page of the caller's jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobListing {
    /// Newest first.
    pub jobs: Vec<Job>,
    /// Pass as `before` for the next page; `None` on the last page.
    pub next: Option<JobId>,
}

/// Reading, waiting on, streaming and listing the caller's jobs, and (in `outputs.rs`) their
/// outputs.
#[derive(Clone)]
pub struct JobReads {
    pub(super) ports: ReadPorts,
    pub(super) settings: Settings,
    pub(super) sources: Option<Arc<dyn OutputSource>>,
}

/// The ports of [`JobReads`].
#[derive(Clone)]
pub(super) struct ReadPorts {
    pub(super) jobs: Arc<dyn JobStore>,
    pub(super) events: Arc<dyn JobEvents>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) outputs: Option<Arc<dyn OutputStore>>,
}

impl JobReads {
    /// The reads over `ports`; `settings` give the cadence of waits and streams.
    #[must_use]
    pub fn new(ports: &Ports, settings: Settings) -> Self {
        let ports = ReadPorts {
            jobs: Arc::clone(&ports.jobs),
            events: Arc::clone(&ports.events),
            clock: Arc::clone(&ports.clock),
            outputs: ports.outputs.clone(),
        };
        Self { ports, settings, sources: None }
    }

    /// The same reads, reading outputs the service keeps no copy of from the provider's links
    /// through `source` ([`JobReads::open_output`]).
    #[must_use]
    pub fn with_output_source(self, source: Arc<dyn OutputSource>) -> Self {
        Self { sources: Some(source), ..self }
    }

    pub(super) async fn owned_job(&self, caller: &Caller, id: JobId) -> Result<Job, JobQueryError> {
        owned_job(self.ports.jobs.as_ref(), caller, id).await
    }

    /// The job as it is now.
    ///
    /// # Errors
    /// See [`JobQueryError`].
    pub async fn job(&self, caller: &Caller, id: JobId) -> Result<Job, JobQueryError> {
        self.owned_job(caller, id).await
    }

    /// A long-poll of the job: the job once it is final, or as it is when `wait` has passed;
    /// the edge waits as [`LongPoll::look`] says.
    #[must_use]
    pub fn long_poll(&self, caller: &Caller, id: JobId, wait: Duration) -> LongPoll {
        LongPoll::new(self.clone(), caller.clone(), id, wait)
    }

    /// Tells the drivers someone waits on the job, when the provider notifies (otherwise every
    /// job is polled at the full cadence anyway); returns when to tell them again.
    pub(super) async fn announce_watching(&self, id: JobId) -> OffsetDateTime {
        if self.settings.upstream_notifies {
            self.ports.events.watch(id).await;
        }
        self.ports.clock.now() + WATCH_TTL / 3
    }

    /// The job's events: a `progress` event at once and then every poll interval while it is not
    /// final, then `done` or `error` as soon as it is, which ends the stream. A job already final
    /// gets its final event at once. The edge waits as [`JobStream::look`] says.
    ///
    /// # Errors
    /// See [`JobQueryError`]; checked before the stream starts.
    pub async fn job_events(&self, caller: &Caller, id: JobId) -> Result<JobStream, JobQueryError> {
        JobStream::start(self.clone(), caller.clone(), id).await
    }

    /// The caller's jobs, newest first: the user's every job, or a restricted key's subtree's.
    ///
    /// # Errors
    /// [`StoreError`] when the store fails.
    pub async fn list_jobs(
        &self,
        caller: &Caller,
        before: Option<JobId>,
        limit: usize,
    ) -> Result<JobListing, StoreError> {
        let limit = limit.clamp(1, MAX_JOBS_PAGE);
        let jobs = self.ports.jobs.as_ref();
        let mut jobs = match caller.subtree() {
            None => jobs.jobs_of(caller.user_id, before, limit + 1).await?,
            Some(subtree) => {
                let filter =
                    JobFilter { user_id: Some(caller.user_id), keys: Some(subtree.to_vec()), ..JobFilter::default() };
                jobs.find_jobs(&filter, before, limit + 1).await?
            }
        };
        let next = if jobs.len() > limit {
            jobs.truncate(limit);
            jobs.last().map(|j| j.id())
        } else {
            None
        };
        Ok(JobListing { jobs, next })
    }
}
