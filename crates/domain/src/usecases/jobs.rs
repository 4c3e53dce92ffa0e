//! Reading, waiting on, streaming and listing the caller's jobs.
//!
//! Waiters never talk to the provider: the driver polls it once per job, and waiters wake on
//! [`JobEvents`](crate::ports::JobEvents) notifications, with a re-read every poll interval as a
//! fallback for a lost notification.

use std::pin::pin;
use std::time::Duration;

use futures_util::stream::{self, BoxStream, StreamExt};
use futures_util::{FutureExt, select_biased};
use time::OffsetDateTime;

use std::sync::Arc;

use super::{Caller, Ports, Settings, owned_job};
use crate::ids::JobId;
use crate::job::{Job, JobState};
use crate::ports::{Clock, JobChanges, JobEvents, JobStore, OutputSource, OutputStore, StoreError, WATCH_TTL};

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
    fn of(job: Job) -> Self {
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
    settings: Settings,
    pub(super) sources: Option<Arc<dyn OutputSource>>,
}

/// The ports of [`JobReads`].
#[derive(Clone)]
pub(super) struct ReadPorts {
    pub(super) jobs: Arc<dyn JobStore>,
    events: Arc<dyn JobEvents>,
    clock: Arc<dyn Clock>,
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

    async fn owned_job(&self, caller: &Caller, id: JobId) -> Result<Job, JobQueryError> {
        owned_job(self.ports.jobs.as_ref(), caller, id).await
    }

    /// The job as it is now.
    ///
    /// # Errors
    /// See [`JobQueryError`].
    pub async fn job(&self, caller: &Caller, id: JobId) -> Result<Job, JobQueryError> {
        self.owned_job(caller, id).await
    }

    /// The job once it is final, or as it is when `wait` has passed.
    ///
    /// # Errors
    /// See [`JobQueryError`].
    pub async fn wait_for_job(&self, caller: &Caller, id: JobId, wait: Duration) -> Result<Job, JobQueryError> {
        let mut changes = self.ports.events.subscribe(id);
        let job = self.owned_job(caller, id).await?;
        if job.state().is_final() || wait.is_zero() {
            return Ok(job);
        }
        let deadline = self.ports.clock.now() + wait;
        let mut next_announcement = self.announce_watching(id).await;
        loop {
            if self.ports.clock.now() >= next_announcement {
                next_announcement = self.announce_watching(id).await;
            }
            let remaining = deadline - self.ports.clock.now();
            if !remaining.is_positive() {
                return self.owned_job(caller, id).await;
            }
            let nap = Duration::try_from(remaining).unwrap_or_default().min(self.settings.poll_interval);
            self.next_change_or(&mut changes, nap).await;
            let job = self.owned_job(caller, id).await?;
            if job.state().is_final() {
                return Ok(job);
            }
        }
    }

    /// Tells the drivers someone waits on the job, when the provider notifies (otherwise every
    /// job is polled at the full cadence anyway); returns when to tell them again.
    async fn announce_watching(&self, id: JobId) -> OffsetDateTime {
        if self.settings.upstream_notifies {
            self.ports.events.watch(id).await;
        }
        self.ports.clock.now() + WATCH_TTL / 3
    }

    /// Waits for a change notification or `nap`, whichever comes first.
    async fn next_change_or(&self, changes: &mut JobChanges, nap: Duration) -> bool {
        let mut sleep = pin!(self.ports.clock.sleep(nap).fuse());
        select_biased! {
            change = changes.next().fuse() => match change {
                Some(()) => true,
                None => {
                    *changes = stream::pending().boxed();
                    false
                }
            },
            () = sleep => false,
        }
    }

    /// The job's events: a `progress` event at once and then every poll interval while it is not
    /// final, then `done` or `error` as soon as it is, which ends the stream. A job already final
    /// gets its final event at once.
    ///
    /// # Errors
    /// See [`JobQueryError`]; checked before the stream starts.
    pub async fn job_events(&self, caller: &Caller, id: JobId) -> Result<BoxStream<'static, JobEvent>, JobQueryError> {
        let changes = self.ports.events.subscribe(id);
        let job = self.owned_job(caller, id).await?;
        let first = JobEvent::of(job);
        if !matches!(first, JobEvent::Progress(_)) {
            return Ok(stream::once(async move { first }).boxed());
        }
        let next_announcement = self.announce_watching(id).await;
        let watch = Watch {
            reads: self.clone(),
            caller: *caller,
            id,
            changes,
            next_tick: self.ports.clock.now() + self.settings.poll_interval,
            next_announcement,
        };
        let rest = stream::unfold(Some(watch), |watch| async move {
            let mut watch = watch?;
            let event = watch.next_event().await?;
            let more = matches!(event, JobEvent::Progress(_));
            Some((event, more.then_some(watch)))
        });
        Ok(stream::once(async move { first }).chain(rest).boxed())
    }

    /// The caller's jobs, newest first.
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
        let mut jobs = self.ports.jobs.jobs_of(caller.user_id, before, limit + 1).await?;
        let next = if jobs.len() > limit {
            jobs.truncate(limit);
            jobs.last().map(|j| j.id())
        } else {
            None
        };
        Ok(JobListing { jobs, next })
    }
}

struct Watch {
    reads: JobReads,
    caller: Caller,
    id: JobId,
    changes: JobChanges,
    next_tick: OffsetDateTime,
    next_announcement: OffsetDateTime,
}

impl Watch {
    /// The next event: a final one as soon as the job is final, otherwise a progress event at
    /// the next tick. `None` ends the stream (the job vanished or became another user's).
    async fn next_event(&mut self) -> Option<JobEvent> {
        let reads = &self.reads;
        loop {
            if reads.ports.clock.now() >= self.next_announcement {
                self.next_announcement = reads.announce_watching(self.id).await;
            }
            let until_tick = self.next_tick - reads.ports.clock.now();
            let tick_due = !until_tick.is_positive()
                || !reads.next_change_or(&mut self.changes, Duration::try_from(until_tick).unwrap_or_default()).await;
            let job = match reads.owned_job(&self.caller, self.id).await {
                Ok(job) => job,
                Err(JobQueryError::Store(e)) => {
                    tracing::warn!(job_id = %self.id, error = %e, "stream could not read its job; retrying at the next tick");
                    if tick_due {
                        self.next_tick += reads.settings.poll_interval;
                    }
                    continue;
                }
                Err(_) => return None,
            };
            if job.state().is_final() {
                return Some(JobEvent::of(job));
            }
            if tick_due || reads.ports.clock.now() >= self.next_tick {
                self.next_tick = reads.ports.clock.now() + reads.settings.poll_interval;
                return Some(JobEvent::Progress(job));
            }
        }
    }
}
