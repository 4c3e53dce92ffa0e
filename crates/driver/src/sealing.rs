//! Sealing usage: every so often, the hours over (and a quarter of an hour more) whose jobs are
//! all final are sealed, oldest first ([`UsageStore::seal_usage`]), so that usage reports read
//! them from a few rollup rows instead of from every job created in them.

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::ports::{Clock, StoreError, UsageStore};
use time::OffsetDateTime;

/// How often a replica looks for hours to seal: an hour becomes ready every hour, so a replica
/// that looks every few minutes keeps what reports read from the jobs to an hour or so,
/// whichever replica gets there first.
pub const SEAL_CHECK_INTERVAL: Duration = Duration::from_secs(300);

/// Seals everything that is ready now, oldest first; the first instant not sealed after the
/// last seal.
///
/// # Errors
/// The store's, as [`UsageStore::seal_usage`] returns them; what was sealed before stays sealed.
pub async fn seal_ready_hours(usage: &dyn UsageStore, clock: &dyn Clock) -> Result<Option<OffsetDateTime>, StoreError> {
    let mut last = None;
    while let Some(sealed_before) = usage.seal_usage(clock.now()).await? {
        tracing::info!(%sealed_before, "usage sealed: reports read the jobs created before this from the rollup");
        metrics::counter!("genjobs_usage_seals_total").increment(1);
        last = Some(sealed_before);
        // Between seals, let the rest of the process (submissions among it) run first.
        tokio::task::yield_now().await;
    }
    Ok(last)
}

/// Usage sealing, one of the [`Loops`](crate::Loops).
pub struct UsageSealing {
    /// Where usage is sealed.
    pub usage: Arc<dyn UsageStore>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Time between two checks ([`SEAL_CHECK_INTERVAL`] in production).
    pub every: Duration,
}

impl UsageSealing {
    /// Seals what is ready, then again every `every`, for as long as it is polled.
    pub async fn run(self) {
        loop {
            if let Err(error) = seal_ready_hours(&*self.usage, &*self.clock).await {
                tracing::warn!(%error, "could not seal usage; trying again at the next check");
            }
            self.clock.sleep(self.every).await;
        }
    }
}
