//! Long-polls and streams as decisions. A waiter on a job asks [`LongPoll::look`] or
//! [`JobStream::look`] what to do next: answer now, or wait for the job's next change but no
//! longer than a given time. The waiting itself (racing the job's change notifications against a
//! timer) is the edge's, on its runtime: the domain never waits.
//!
//! Waiters never talk to the provider: the driver polls it once per job, and waiters wake on
//! [`JobEvents`](crate::ports::JobEvents) notifications, with a re-read every poll interval as a
//! fallback for a lost notification.

use std::time::Duration;

use time::OffsetDateTime;

use super::{Caller, JobEvent, JobQueryError, JobReads};
use crate::ids::JobId;
use crate::job::Job;
use crate::ports::JobChanges;

/// What a waiter does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Watch<T> {
    /// Answer with this now.
    Answer(T),
    /// Wait for the job's next change (an item of its changes), but no longer than this.
    Wait(Duration),
}

/// What ended a wait the domain asked for ([`Watch::Wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// The job changed.
    Changed,
    /// The time passed, or the changes ended.
    TimePassed,
}

/// A long-poll of one job: the job once it is final, or as it is when the wait has passed.
pub struct LongPoll {
    reads: JobReads,
    caller: Caller,
    id: JobId,
    changes: JobChanges,
    deadline: OffsetDateTime,
    next_announcement: Option<OffsetDateTime>,
}

impl LongPoll {
    pub(super) fn new(reads: JobReads, caller: Caller, id: JobId, wait: Duration) -> Self {
        // Subscribed before the first read, so that no change is missed.
        let changes = reads.ports.events.subscribe(id);
        let deadline = reads.ports.clock.now() + wait;
        Self { reads, caller, id, changes, deadline, next_announcement: None }
    }

    /// The job's change notifications, for the edge to wait on.
    pub fn changes(&mut self) -> &mut JobChanges {
        &mut self.changes
    }

    /// Reads the job: answer with it when it is final or the wait has passed, otherwise wait.
    ///
    /// # Errors
    /// See [`JobQueryError`].
    pub async fn look(&mut self) -> Result<Watch<Job>, JobQueryError> {
        let job = self.reads.owned_job(&self.caller, self.id).await?;
        let now = self.reads.ports.clock.now();
        if job.state().is_final() || now >= self.deadline {
            return Ok(Watch::Answer(job));
        }
        if self.next_announcement.is_none_or(|at| now >= at) {
            self.next_announcement = Some(self.reads.announce_watching(self.id).await);
        }
        let remaining = Duration::try_from(self.deadline - self.reads.ports.clock.now()).unwrap_or_default();
        Ok(Watch::Wait(remaining.min(self.reads.settings.poll_interval)))
    }
}

/// A stream of one job's events: a `progress` event at once and then every poll interval while
/// it is not final, then `done` or `error` as soon as it is, which ends the stream.
pub struct JobStream {
    reads: JobReads,
    caller: Caller,
    id: JobId,
    changes: JobChanges,
    first: Option<JobEvent>,
    ended: bool,
    woke: Option<Woke>,
    next_tick: OffsetDateTime,
    next_announcement: OffsetDateTime,
}

impl JobStream {
    pub(super) async fn start(reads: JobReads, caller: Caller, id: JobId) -> Result<Self, JobQueryError> {
        // Subscribed before the first read, so that no change is missed.
        let changes = reads.ports.events.subscribe(id);
        let first = JobEvent::of(reads.owned_job(&caller, id).await?);
        let ended = !matches!(first, JobEvent::Progress(_));
        let next_announcement = if ended { reads.ports.clock.now() } else { reads.announce_watching(id).await };
        let next_tick = reads.ports.clock.now() + reads.settings.poll_interval;
        Ok(Self { reads, caller, id, changes, first: Some(first), ended, woke: None, next_tick, next_announcement })
    }

    /// The job's change notifications, for the edge to wait on.
    pub fn changes(&mut self) -> &mut JobChanges {
        &mut self.changes
    }

    /// Tells the stream what ended the wait it asked for.
    pub fn woken(&mut self, by: Woke) {
        self.woke = Some(by);
    }

    /// The next event to send, or how long to wait for a change before asking again; `None`
    /// ends the stream (after its final event, or when the job vanished or became another
    /// user's).
    pub async fn look(&mut self) -> Option<Watch<JobEvent>> {
        if let Some(first) = self.first.take() {
            return Some(Watch::Answer(first));
        }
        if self.ended {
            return None;
        }
        let reads = self.reads.clone();
        loop {
            let tick_due = match self.woke.take() {
                Some(woke) => woke == Woke::TimePassed,
                None => {
                    if reads.ports.clock.now() >= self.next_announcement {
                        self.next_announcement = reads.announce_watching(self.id).await;
                    }
                    let until_tick = self.next_tick - reads.ports.clock.now();
                    if until_tick.is_positive() {
                        return Some(Watch::Wait(Duration::try_from(until_tick).unwrap_or_default()));
                    }
                    true
                }
            };
            let job = match reads.owned_job(&self.caller, self.id).await {
                Ok(job) => job,
                Err(JobQueryError::Store(e)) => {
                    tracing::warn!(job_id = %self.id, error = %e, "stream could not read its job; retrying at the next tick");
                    if tick_due {
                        self.next_tick += reads.settings.poll_interval;
                    }
                    continue;
                }
                Err(_) => {
                    self.ended = true;
                    return None;
                }
            };
            if job.state().is_final() {
                self.ended = true;
                return Some(Watch::Answer(JobEvent::of(job)));
            }
            if tick_due || reads.ports.clock.now() >= self.next_tick {
                self.next_tick = reads.ports.clock.now() + reads.settings.poll_interval;
                return Some(Watch::Answer(JobEvent::Progress(job)));
            }
        }
    }
}
