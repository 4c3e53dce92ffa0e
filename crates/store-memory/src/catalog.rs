//! The catalog port in memory: the documents and the catalog's version behind a mutex of their
//! own. One process reads this store, and it reloads after its own changes, so no change needs
//! announcing.

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use genjobs_domain::catalog::ModelDocument;
use genjobs_domain::ids::ModelId;
use genjobs_domain::ports::{CatalogChanges, CatalogStore, PutOutcome, StoreError, StoredModel};
use time::OffsetDateTime;

use crate::MemoryStore;

/// The stored documents, deleted ones included, in the order first put (a catalog is small:
/// finding one by a scan costs nothing), and the last version given.
#[derive(Debug, Default)]
pub(crate) struct Models {
    rows: Vec<StoredModel>,
    version: u64,
}

impl Models {
    fn put(&mut self, id: &ModelId, document: &ModelDocument) -> PutOutcome {
        self.version += 1;
        let row = StoredModel {
            id: id.clone(),
            document: ModelDocument { id: None, ..document.clone() },
            version: self.version,
            updated_at: OffsetDateTime::now_utc(),
            deleted: false,
        };
        match self.rows.iter_mut().find(|r| r.id == *id) {
            Some(before) => {
                let outcome = if before.deleted { PutOutcome::Created } else { PutOutcome::Replaced };
                *before = row;
                outcome
            }
            None => {
                self.rows.push(row);
                PutOutcome::Created
            }
        }
    }

    fn live(&self, id: &ModelId) -> Option<&StoredModel> {
        self.rows.iter().find(|r| r.id == *id && !r.deleted)
    }

    fn delete(&mut self, id: &ModelId) -> bool {
        let Some(row) = self.rows.iter_mut().find(|r| r.id == *id && !r.deleted) else {
            return false;
        };
        self.version += 1;
        row.deleted = true;
        row.version = self.version;
        row.updated_at = OffsetDateTime::now_utc();
        true
    }
}

impl MemoryStore {
    fn models(&self) -> std::sync::MutexGuard<'_, Models> {
        self.models.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Kept beside the job state's mutex, not in it: the catalog never changes with a job.
pub(crate) type ModelsLock = Mutex<Models>;

#[async_trait]
impl CatalogStore for MemoryStore {
    async fn list_models(&self) -> Result<Vec<StoredModel>, StoreError> {
        Ok(self.models().rows.clone())
    }

    async fn get_model(&self, id: &ModelId) -> Result<Option<StoredModel>, StoreError> {
        Ok(self.models().live(id).cloned())
    }

    async fn put_model(&self, id: &ModelId, document: &ModelDocument) -> Result<PutOutcome, StoreError> {
        Ok(self.models().put(id, document))
    }

    async fn delete_model(&self, id: &ModelId) -> Result<bool, StoreError> {
        Ok(self.models().delete(id))
    }

    async fn apply_models(&self, changes: &CatalogChanges) -> Result<(), StoreError> {
        let mut models = self.models();
        for (id, document) in &changes.puts {
            models.put(id, document);
        }
        for id in &changes.deletes {
            models.delete(id);
        }
        Ok(())
    }

    async fn seed_models(&self, documents: &[(ModelId, ModelDocument)]) -> Result<bool, StoreError> {
        let mut models = self.models();
        if !models.rows.is_empty() {
            return Ok(false);
        }
        for (id, document) in documents {
            models.put(id, document);
        }
        Ok(true)
    }

    fn catalog_changes(&self) -> BoxStream<'static, ()> {
        futures_util::stream::pending().boxed()
    }
}
