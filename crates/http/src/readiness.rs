//! `/readyz` answers from a store check at most [`FRESH_FOR`] old: probes and floods alike cost
//! the database one query a second per replica, however many arrive. Callers that find the
//! result stale wait for the one check under way instead of starting their own.

use std::time::{Duration, Instant};

use genjobs_domain::ports::StoreError;
use genjobs_domain::usecases::Admin;
use tokio::sync::Mutex;

/// How long a check's result is answered with.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// The last readiness check and when it finished.
#[derive(Debug, Default)]
pub struct Readiness {
    last: Mutex<Option<(Instant, Result<(), StoreError>)>>,
}

impl Readiness {
    /// The store's readiness, checked now unless a check finished less than [`FRESH_FOR`] ago.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the store is not ready.
    pub async fn check(&self, admin: &Admin) -> Result<(), StoreError> {
        let mut last = self.last.lock().await;
        if let Some((at, result)) = last.as_ref()
            && at.elapsed() < FRESH_FOR
        {
            return result.clone();
        }
        let result = admin.readiness().await;
        *last = Some((Instant::now(), result.clone()));
        result
    }
}
