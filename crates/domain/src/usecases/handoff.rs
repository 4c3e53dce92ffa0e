//! Fresh jobs passed in memory from the gateway that accepted them to the driver of the same
//! process ([`JobHandoff`]).
//!
//! Without it, a new job waits for a driver to claim it (a round trip to the store) and to write
//! "submission started" (a durable commit) before it is sent. With it, the accept itself records
//! the submission's start and puts the job under the lease of this process's driver, which
//! sends the job as soon as it has a free slot: one durable commit fewer and no claim per job.
//!
//! The crash rule is unchanged: a job whose submission has started and that has no provider
//! reference is never sent again. So if this process dies between the accept and the send, the
//! job fails once its lease runs out (its credits are released) rather than risking a second run.
//! A driver that stops gracefully, or a handoff that finds no driver, withdraws the start instead
//! ([`withdraw`]), and any driver then submits the job as usual.

use time::OffsetDateTime;

use crate::ids::LeaseId;
use crate::job::{Job, Trigger};
use crate::ports::{Clock, JobHandoff, JobStore};

/// `job` with its submission started, and the lease of the driver behind `handoff` that it goes
/// under: what the accept records. `None` when no driver takes jobs now, or when the job did not
/// take the start; the job is then accepted as it is, for any driver. Its next poll time is a
/// lease away, so that a driver taking it over finds it interrupted only once a lease passed.
pub(super) fn started(handoff: &dyn JobHandoff, job: Job, now: OffsetDateTime) -> (Job, Option<LeaseId>) {
    let Some(lease) = handoff.open_lease() else { return (job, None) };
    match job.apply(Trigger::SubmitStarted { next_poll_at: now + lease.length }, now) {
        Ok(started) => (started.into_job(), Some(lease.id)),
        Err(_) => (job, None),
    }
}

/// Undoes the started submission of handed jobs that were never sent, so that any driver submits
/// them as soon as the lease they are under ends (the stopping driver ends it as it goes). A job
/// changed meanwhile (canceled) is left as it is.
pub(super) async fn withdraw(store: &dyn JobStore, clock: &dyn Clock, jobs: Vec<Job>) {
    let now = clock.now();
    for job in jobs {
        let Ok(withdrawn) = job.apply(Trigger::SubmitNotReached { next_poll_at: now }, now) else { continue };
        if let Err(e) = store.commit(withdrawn).await {
            tracing::warn!(job_id = %job.id(), error = %e, "could not withdraw an unsent submission; the job fails when its lease runs out");
        }
    }
}
