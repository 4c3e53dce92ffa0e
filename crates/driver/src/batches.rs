//! The batch windows: every second, the batches whose completion window closed end `expired`,
//! and their items not yet sent fail `BATCH_EXPIRED` ([`Batches::close_windows`]), so that an
//! item expires within about a second of its batch's `expires_at`, never before; and the items
//! waiting for their owners' room that have it now are woken ([`Batches::wake_waiting`]), should
//! the wake of a job's end have been lost.

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::ports::Clock;
use genjobs_domain::usecases::Batches;

/// The pause between two looks: the contract allows an item 2 s past its window.
const EVERY: Duration = Duration::from_secs(1);

/// The batch windows, one of the [`Loops`](crate::Loops).
pub struct BatchWindows {
    /// The batches.
    pub batches: Batches,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl BatchWindows {
    /// Closes the windows that passed and wakes the items their owners have room for every
    /// second, for as long as it is polled.
    pub async fn run(self) {
        loop {
            match self.batches.close_windows().await {
                Ok(0) => {}
                Ok(closed) => tracing::info!(closed, "batch windows closed"),
                Err(error) => {
                    tracing::warn!(%error, "could not close the batch windows that passed; trying again in a second")
                }
            }
            match self.batches.wake_waiting().await {
                Ok(0) => {}
                Ok(woken) => tracing::debug!(woken, "waiting batch items woken"),
                Err(error) => {
                    tracing::warn!(%error, "could not wake the waiting batch items; trying again in a second")
                }
            }
            self.clock.sleep(EVERY).await;
        }
    }
}
