//! Sealing usage days: every so often, each UTC day that is over and whose jobs are all final is
//! sealed, oldest first ([`UsageStore::seal_usage_day`]), so that usage reports read it from a few
//! rollup rows instead of from every job created on it.

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::ports::{Clock, StoreError, UsageStore};
use time::Date;
use tokio::task::JoinHandle;

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

/// Seals the days that are ready, then again every `every`, until aborted.
pub fn sealer(usage: Arc<dyn UsageStore>, clock: Arc<dyn Clock>, every: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(error) = seal_ready_days(&*usage, &*clock).await {
                tracing::warn!(%error, "could not seal usage days; trying again at the next check");
            }
            clock.sleep(every).await;
        }
    })
}
