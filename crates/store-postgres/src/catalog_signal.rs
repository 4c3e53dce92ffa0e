//! How the listener (`events`) tells this process's catalog followers (`store::catalog`) that a
//! replica changed the catalog.

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::sync::broadcast;

/// Wakes this process's catalog followers when the listener hears a catalog change.
#[derive(Debug, Clone)]
pub struct CatalogSignal(broadcast::Sender<()>);

impl Default for CatalogSignal {
    fn default() -> Self {
        Self(broadcast::channel(16).0)
    }
}

impl CatalogSignal {
    /// Tells every follower the catalog may have changed.
    pub fn changed(&self) {
        // No follower yet is fine: one that starts reads the catalog anyway.
        let _ = self.0.send(());
    }

    pub(crate) fn subscribe(&self) -> BoxStream<'static, ()> {
        futures_util::stream::unfold(self.0.subscribe(), |mut receiver| async move {
            match receiver.recv().await {
                Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => Some(((), receiver)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
        .boxed()
    }
}
