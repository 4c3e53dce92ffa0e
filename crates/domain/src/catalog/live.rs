//! The catalog the service reads now: one snapshot behind a lock, swapped whole when the store
//! changes, so that a request sees one consistent catalog from start to end.

use std::sync::{Arc, PoisonError, RwLock};

use super::Catalog;

/// The current catalog, shared by the use cases of one process.
#[derive(Debug, Clone, Default)]
pub struct LiveCatalog {
    current: Arc<RwLock<Arc<Catalog>>>,
}

impl LiveCatalog {
    /// A live catalog that starts at `catalog`.
    #[must_use]
    pub fn new(catalog: Catalog) -> Self {
        Self { current: Arc::new(RwLock::new(Arc::new(catalog))) }
    }

    /// The snapshot in effect.
    #[must_use]
    pub fn current(&self) -> Arc<Catalog> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Puts `catalog` in effect, unless the one in effect was read at a later store version
    /// (two reloads racing never move the catalog back).
    pub fn replace(&self, catalog: Catalog) {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if catalog.version() >= current.version() {
            *current = Arc::new(catalog);
        }
    }
}

impl From<Catalog> for LiveCatalog {
    fn from(catalog: Catalog) -> Self {
        Self::new(catalog)
    }
}

impl From<Arc<Catalog>> for LiveCatalog {
    fn from(catalog: Arc<Catalog>) -> Self {
        Self { current: Arc::new(RwLock::new(catalog)) }
    }
}
