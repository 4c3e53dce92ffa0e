//! Sealing usage days: every so often, each UTC day that is over and whose jobs are all final is
//! sealed, oldest first ([`UsageStore::seal_usage_day`]), so that usage reports read it from a few
//! rollup rows instead of from every job created on it.

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::ports::{Clock, StoreError, UsageStore};
use time::Date;

/// How often a replica looks for days to seal: a day becomes ready once a day, so a replica that
/// looks every few minutes seals it soon enough, whichever replica gets there first.
pub const SEAL_CHECK_INTERVAL: Duration = Duration::from_secs(300);

/// Seals every day that is ready now, oldest first; the last one sealed.
///
/// # Errors
/// The store's, as [`UsageStore::seal_usage_day`] returns them; the days sealed before stay sealed.
pub async fn seal_ready_days(usage: &dyn UsageStore, clock: &dyn Clock) -> Result<Option<Date>, StoreError> {
    let mut last = None;
    while let Some(day) = usage.seal_usage_day(clock.now()).await? {
        tracing::info!(%day, "usage day sealed: reports read it from the rollup");
        metrics::counter!("genjobs_usage_days_sealed_total").increment(1);
        last = Some(day);
        // Between days, let the rest of the process (submissions among it) run first.
        tokio::task::yield_now().await;
    }
    Ok(last)
}

/// Usage sealing, one of the [`Loops`](crate::Loops).
pub struct UsageSealing {
    /// Where days are sealed.
    pub usage: Arc<dyn UsageStore>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Time between two checks ([`SEAL_CHECK_INTERVAL`] in production).
    pub every: Duration,
}

impl UsageSealing {
    /// Seals the days that are ready, then again every `every`, for as long as it is polled.
    pub async fn run(self) {
        loop {
            if let Err(error) = seal_ready_days(&*self.usage, &*self.clock).await {
                tracing::warn!(%error, "could not seal usage days; trying again at the next check");
            }
            self.clock.sleep(self.every).await;
        }
    }
}
