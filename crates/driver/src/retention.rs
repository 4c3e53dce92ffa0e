//! Job retention (`GENJOBS_JOB_RETENTION_DAYS`): every so often, the final jobs that finished
//! longer ago than the retention are removed in small batches through
//! [`UsageStore::purge_final_jobs`], which keeps their ledger records and rolls what usage counted
//! of them into daily totals, so that reports stay exact, and keeps their charges counted in their
//! keys' budgets, so that a retention shorter than a budget's period does not give them back.

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::ports::{Clock, StoreError, UsageStore};

/// How long final jobs are kept, and how the sweep runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// A final job is removed once it finished longer ago than this.
    pub keep_for: Duration,
    /// Time between two sweeps.
    pub every: Duration,
    /// Jobs removed per statement: small, so that each holds its row locks only briefly.
    pub batch: usize,
}

impl Retention {
    /// Keeps final jobs for `keep_for`, sweeping every minute, 500 jobs per statement.
    #[must_use]
    pub fn keeping(keep_for: Duration) -> Self {
        Self { keep_for, every: Duration::from_secs(60), batch: 500 }
    }
}

/// Removes every final job past `retention` now, batch after batch; how many.
///
/// # Errors
/// The store's, as [`UsageStore::purge_final_jobs`] returns them; what was removed before stays
/// removed.
pub async fn purge_expired_jobs(
    usage: &dyn UsageStore,
    clock: &dyn Clock,
    retention: Retention,
) -> Result<usize, StoreError> {
    let cut = clock.now() - retention.keep_for;
    let mut removed = 0;
    loop {
        let batch = usage.purge_final_jobs(cut, retention.batch).await?;
        removed += batch;
        metrics::counter!("genjobs_jobs_purged_total").increment(batch as u64);
        if batch < retention.batch {
            return Ok(removed);
        }
        // Between batches, let the rest of the process (submissions among it) run first.
        tokio::task::yield_now().await;
    }
}

/// The retention sweep, one of the [`Loops`](crate::Loops).
pub struct RetentionSweep {
    /// Where final jobs are removed from.
    pub usage: Arc<dyn UsageStore>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// What is kept, and how often the sweep runs.
    pub retention: Retention,
}

impl RetentionSweep {
    /// Sweeps every `retention.every`, for as long as it is polled.
    pub async fn run(self) {
        let Self { usage, clock, retention } = self;
        loop {
            match purge_expired_jobs(&*usage, &*clock, retention).await {
                Ok(0) => {}
                Ok(removed) => tracing::info!(
                    removed,
                    keep_for_secs = retention.keep_for.as_secs(),
                    "final jobs past the retention removed"
                ),
                Err(error) => {
                    tracing::warn!(%error, "could not remove jobs past the retention; trying again at the next sweep")
                }
            }
            clock.sleep(retention.every).await;
        }
    }
}
