//! Fresh jobs passed in memory from the gateway that accepted them to the driver of the same
//! process.
//!
//! Without it, a new job waits for a driver to claim it (a round trip to the store) and to write
//! "submission started" (a durable commit) before it is sent. With it, the accept itself records
//! the submission's start and leases the job to this process's driver, which sends the job as
//! soon as it has a free slot: one durable commit fewer and no claim per job.
//!
//! The crash rule is unchanged: a job whose submission has started and that has no provider
//! reference is never sent again. So if this process dies between the accept and the send, the
//! job fails once its lease runs out (its credits are released) rather than risking a second run.
//! A driver that stops gracefully, or a handoff that finds no driver, withdraws the start instead
//! ([`withdraw`]), and any driver then submits the job as usual.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use time::OffsetDateTime;

use super::Ports;
use crate::ids::JobId;
use crate::job::{Job, Trigger};

/// The gateway's end: passes each job it accepts to the driver of its process.
#[derive(Clone)]
pub struct Handoff {
    jobs: UnboundedSender<Box<Job>>,
    open: Arc<AtomicBool>,
    lease: Duration,
}

/// The driver's end, taken by the first [`super::JobDriver::run_until`].
#[derive(Clone)]
pub(super) struct Inbox {
    shared: Arc<Mutex<Option<UnboundedReceiver<Box<Job>>>>>,
    open: Arc<AtomicBool>,
}

/// A handoff and its inbox, the driver's lease being `lease`.
pub(super) fn channel(lease: Duration) -> (Handoff, Inbox) {
    let (jobs, receiver) = unbounded();
    let open = Arc::new(AtomicBool::new(true));
    (Handoff { jobs, open: Arc::clone(&open), lease }, Inbox { shared: Arc::new(Mutex::new(Some(receiver))), open })
}

impl Handoff {
    /// Whether a driver takes jobs: not stopping, not gone.
    pub(super) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire) && !self.jobs.is_closed()
    }

    /// `job` with its submission started, leased to this driver: what the accept records. A
    /// fresh job always takes the start; if it did not, it is accepted as it is, for any driver.
    pub(super) fn started(&self, job: Job, now: OffsetDateTime) -> (Job, Option<OffsetDateTime>) {
        let until = now + self.lease;
        match job.apply(Trigger::SubmitStarted { next_poll_at: until }, now) {
            Ok(started) => (started.into_job(), Some(until)),
            Err(_) => (job, None),
        }
    }

    /// Passes an accepted job to the driver; gives it back if no driver takes jobs any more.
    pub(super) fn send(&self, job: Job) -> Result<(), Box<Job>> {
        self.jobs.unbounded_send(Box::new(job)).map_err(|e| e.into_inner())
    }
}

impl Inbox {
    /// The receiver, for the one run that drives the handed jobs; `None` once taken.
    pub(super) fn take(&self) -> Option<UnboundedReceiver<Box<Job>>> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Stops handing jobs to this driver: the gateway accepts new ones for any driver.
    pub(super) fn shut(&self) {
        self.open.store(false, Ordering::Release);
    }
}

/// Undoes the started submission of handed jobs that were never sent, and ends their lease, so
/// that any driver submits them at once. A job changed meanwhile (canceled) is left as it is.
pub(super) async fn withdraw(ports: &Ports, jobs: Vec<Job>) {
    let now = ports.clock.now();
    let ids: Vec<JobId> = jobs.iter().map(Job::id).collect();
    for job in jobs {
        let Ok(withdrawn) = job.apply(Trigger::SubmitNotReached { next_poll_at: now }, now) else { continue };
        if let Err(e) = ports.jobs.commit(withdrawn).await {
            tracing::warn!(job_id = %job.id(), error = %e, "could not withdraw an unsent submission; the job fails when its lease runs out");
        }
    }
    if let Err(e) = ports.jobs.release_leases(ids, now).await {
        tracing::warn!(error = %e, "could not release the leases of withdrawn jobs; they are taken over when they run out");
    }
}
