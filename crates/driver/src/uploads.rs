//! The upload sweep: every so often, the uploads whose time to live (`GENJOBS_UPLOAD_TTL_SECS`)
//! is over and that no job not yet final names are deleted, with their bytes
//! ([`Uploads::remove_expired`]), so that neither the output store nor the database, nor the
//! memory of the in-memory store, keeps images nobody can read any more.

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::ports::Clock;
use genjobs_domain::usecases::Uploads;

/// The longest pause between two sweeps.
const MOST_EVERY: Duration = Duration::from_secs(60);
/// The shortest pause between two sweeps.
const LEAST_EVERY: Duration = Duration::from_millis(100);

/// The upload sweep, one of the [`Loops`](crate::Loops).
pub struct UploadSweep {
    /// The uploads.
    pub uploads: Uploads,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Time between two sweeps.
    pub every: Duration,
}

impl UploadSweep {
    /// A sweep of `uploads` every minute, or every half time to live when that is shorter, so
    /// that an upload outlives its time by at most half of it.
    #[must_use]
    pub fn new(uploads: Uploads, clock: Arc<dyn Clock>) -> Self {
        let every = (uploads.settings().ttl / 2).clamp(LEAST_EVERY, MOST_EVERY);
        Self { uploads, clock, every }
    }

    /// Sweeps every `every`, for as long as it is polled.
    pub async fn run(self) {
        loop {
            match self.uploads.remove_expired().await {
                Ok(0) => {}
                Ok(removed) => {
                    metrics::counter!("genjobs_uploads_deleted_total").increment(removed as u64);
                    tracing::info!(removed, "uploads past their time to live deleted");
                }
                Err(error) => {
                    tracing::warn!(%error, "could not delete expired uploads; trying again at the next sweep");
                }
            }
            self.clock.sleep(self.every).await;
        }
    }
}
