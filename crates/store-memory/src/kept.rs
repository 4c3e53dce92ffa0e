//! The kept secrets in memory: they last as long as the process, which is as long as everything
//! they protect in this store.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::PoisonError;

use async_trait::async_trait;
use genjobs_domain::ports::{Kept, KeptName, KeptSecrets, StoreError};

use crate::MemoryStore;

/// The secrets kept, by name.
pub(crate) type KeptValues = std::sync::Mutex<HashMap<KeptName, Vec<u8>>>;

#[async_trait]
impl KeptSecrets for MemoryStore {
    async fn keep_first(&self, name: KeptName, candidate: Vec<u8>) -> Result<Kept, StoreError> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(match kept.entry(name) {
            Entry::Occupied(existing) => Kept { value: existing.get().clone(), made_now: false },
            Entry::Vacant(slot) => Kept { value: slot.insert(candidate).clone(), made_now: true },
        })
    }

    async fn replace(&self, name: KeptName, value: Vec<u8>) -> Result<(), StoreError> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner).insert(name, value);
        Ok(())
    }
}
