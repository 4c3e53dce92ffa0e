//! A batch item's admission: it is sent only while its batch lets it be (not canceled, its
//! window open) and its owner has room under the concurrent-job limit, which the store checks
//! and counts in the same commit that admits it.

use super::{JobSteps, Stepped};
use crate::job::{Job, Trigger};
use crate::ports::Commit;

impl JobSteps {
    /// The job, admitted when it is a batch item waiting for admission; else what the step
    /// leaves the driver with: the item ended (its batch canceled or expired), or waiting.
    pub(super) async fn admit(&self, job: Job) -> Result<Job, Stepped> {
        let Some(place) = job.batch().filter(|_| job.awaits_admission()) else { return Ok(job) };
        let now = self.ports.clock.now();
        let batch = match self.ports.batches.batch_record(place.batch_id).await {
            Ok(Some(batch)) => batch,
            Ok(None) => {
                tracing::error!(job_id = %job.id(), batch_id = %place.batch_id, "a batch item's batch is missing; the item is let go");
                return Err(Stepped::Done(None));
            }
            Err(e) => {
                // Let go, as a waiting item always is: it rests until a wake, at the latest a
                // poll interval from now.
                tracing::warn!(job_id = %job.id(), error = %e, "could not read the item's batch; will look again");
                let next_poll_at = now + self.settings.poll_interval;
                self.commit(&job, Trigger::AwaitCapacity { next_poll_at }).await;
                return Err(Stepped::Done(None));
            }
        };
        if let Some(ending) = super::super::batches::ending_for(&batch, now) {
            return Err(Stepped::Done(self.commit(&job, ending).await));
        }
        let Ok(admission) = job.apply(Trigger::Admitted, now) else { return Ok(job) };
        match self.ports.jobs.commit(admission).await {
            Ok(Commit::Applied(admitted)) => {
                tracing::debug!(job_id = %admitted.id(), batch_id = %place.batch_id, "batch item admitted");
                Ok(admitted)
            }
            Ok(Commit::OwnerAtLimit(current)) if !current.awaits_admission() => {
                // Admitted by another driver holding it too (its lease lost meanwhile): that
                // driver sends it, and parking it would undo a send begun.
                tracing::info!(job_id = %current.id(), "the batch item was admitted elsewhere meanwhile; let go");
                Err(Stepped::Done(None))
            }
            Ok(Commit::OwnerAtLimit(current)) => {
                // Parked until its window closes, and let go: the driver keeps nothing of it, and
                // a job of its owner's ending wakes it (`BatchStore::wake_admissible`).
                tracing::debug!(job_id = %current.id(), "the owner is at the concurrent-job limit; the batch item waits");
                self.commit(&current, Trigger::AwaitCapacity { next_poll_at: batch.expires_at }).await;
                Err(Stepped::Done(None))
            }
            Ok(Commit::Stale(_) | Commit::Missing) => Err(Stepped::Done(None)),
            Err(e) => {
                tracing::warn!(job_id = %job.id(), error = %e, "could not admit the batch item; it is let go for a driver to claim");
                Err(Stepped::Done(None))
            }
        }
    }
}
