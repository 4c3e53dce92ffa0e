//! Every background loop of a replica, listed in one place ([`Loops`]) and started and drained
//! the same way: each is one tokio task that runs until the drain starts. The job driver and the
//! client webhook dispatcher then finish what they started (provider calls, deliveries) and hand
//! their work back; the others hold nothing to hand back and stop at once.

use std::future::Future;

use tokio::task::JoinHandle;

use crate::batches::BatchWindows;
use crate::catalog::CatalogFollower;
use crate::retention::RetentionSweep;
use crate::sealing::UsageSealing;
use crate::uploads::UploadSweep;
use crate::{JobDriver, WebhookDispatcher};

/// Every background loop of a replica.
pub struct Loops {
    /// Claims, holds and steps jobs.
    pub jobs: JobDriver,
    /// Delivers webhooks to clients.
    pub client_webhooks: WebhookDispatcher,
    /// Keeps the catalog in effect current.
    pub catalog: CatalogFollower,
    /// Removes final jobs past the retention, when one is set.
    pub retention: Option<RetentionSweep>,
    /// Seals finished usage days.
    pub sealing: UsageSealing,
    /// Deletes uploads past their time to live.
    pub uploads: UploadSweep,
    /// Expires the items of batches whose window closed.
    pub batch_windows: BatchWindows,
}

impl Loops {
    /// Starts each loop as a tokio task that runs until a future made by `stop` resolves.
    #[must_use]
    pub fn start<S>(self, stop: impl Fn() -> S) -> RunningLoops
    where
        S: Future<Output = ()> + Send + 'static,
    {
        let Self { jobs, client_webhooks, catalog, retention, sealing, uploads, batch_windows } = self;
        let (jobs_stop, webhooks_stop) = (stop(), stop());
        let mut tasks = vec![
            ("job driver", tokio::spawn(async move { jobs.run_until(jobs_stop).await })),
            ("client webhook dispatcher", tokio::spawn(async move { client_webhooks.run_until(webhooks_stop).await })),
            ("catalog follower", tokio::spawn(until(stop(), catalog.run()))),
            ("usage sealing", tokio::spawn(until(stop(), sealing.run()))),
            ("upload sweep", tokio::spawn(until(stop(), uploads.run()))),
            ("batch windows", tokio::spawn(until(stop(), batch_windows.run()))),
        ];
        if let Some(retention) = retention {
            tasks.push(("retention sweep", tokio::spawn(until(stop(), retention.run()))));
        }
        RunningLoops { tasks }
    }
}

/// Runs `work` until `stop` resolves.
async fn until(stop: impl Future<Output = ()>, work: impl Future<Output = ()>) {
    tokio::select! {
        () = stop => {}
        () = work => {}
    }
}

/// The started loops. Dropped before they are drained, they are aborted.
pub struct RunningLoops {
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl RunningLoops {
    /// Waits for every loop to end, in the order they are listed in [`Loops`]: once the drain has
    /// started, after the job driver handed its jobs back and the dispatcher ended its
    /// deliveries.
    pub async fn drained(mut self) {
        for (name, task) in std::mem::take(&mut self.tasks) {
            if let Err(e) = task.await {
                tracing::error!(background_loop = name, error = %e, "a background loop ended abnormally");
            }
        }
    }
}

impl Drop for RunningLoops {
    fn drop(&mut self) {
        for (_, task) in &self.tasks {
            task.abort();
        }
    }
}
