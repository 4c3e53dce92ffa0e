//! Keeping the catalog in effect current on every replica: a reload on every change the store
//! announces, and one every so often in case an announcement was lost.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream;
use genjobs_domain::ports::CatalogStore;
use genjobs_domain::usecases::Admin;

/// The catalog follower, one of the [`Loops`](crate::Loops).
pub struct CatalogFollower {
    /// The operators' use cases, whose catalog every service of this process reads.
    pub admin: Admin,
    /// The store whose changes are followed.
    pub store: Arc<dyn CatalogStore>,
    /// Time between two reloads without an announcement.
    pub every: Duration,
}

impl CatalogFollower {
    /// Follows the catalog for as long as it is polled.
    pub async fn run(self) {
        follow_catalog(self.admin, self.store, self.every).await;
    }
}

/// Reloads `admin`'s catalog (the one every service of this process reads) from `store` on every change the store announces and every
/// `every`, for as long as it is polled. A failed reload keeps the catalog in effect.
pub async fn follow_catalog(admin: Admin, store: Arc<dyn CatalogStore>, every: Duration) {
    let mut changes = store.catalog_changes();
    loop {
        tokio::select! {
            change = changes.next() => {
                if change.is_none() {
                    changes = stream::pending().boxed();
                }
            }
            () = tokio::time::sleep(every) => {}
        }
        if let Err(error) = admin.reload_catalog().await {
            tracing::warn!(%error, "catalog reload failed; the catalog in effect stays");
        }
    }
}
