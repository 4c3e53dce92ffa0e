//! The OpenAI batches port in memory: files with their content, and OpenAI batches by id (which
//! sort by creation time), in the store's one lock.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use bytes::Bytes;
use genjobs_domain::ids::{BatchId, FileId, UserId};
use genjobs_domain::openai_batch::{BatchFile, OpenAiBatch};
use genjobs_domain::ports::{OpenAiBatchStore, StoreError};

use crate::MemoryStore;

/// The files and the OpenAI batches kept.
#[derive(Debug, Default)]
pub(crate) struct OpenAiBatches {
    files: HashMap<FileId, (BatchFile, Bytes)>,
    batches: BTreeMap<BatchId, OpenAiBatch>,
}

#[async_trait]
impl OpenAiBatchStore for MemoryStore {
    async fn put_file(&self, file: &BatchFile, content: Bytes) -> Result<(), StoreError> {
        self.state().openai.files.insert(file.id, (file.clone(), content));
        Ok(())
    }

    async fn file(&self, id: FileId) -> Result<Option<BatchFile>, StoreError> {
        Ok(self.state().openai.files.get(&id).map(|(file, _)| file.clone()))
    }

    async fn file_content(&self, id: FileId) -> Result<Option<Bytes>, StoreError> {
        Ok(self.state().openai.files.get(&id).map(|(_, content)| content.clone()))
    }

    async fn put_openai_batch(&self, batch: &OpenAiBatch) -> Result<(), StoreError> {
        self.state().openai.batches.insert(batch.id, batch.clone());
        Ok(())
    }

    async fn remove_openai_batch(&self, id: BatchId) -> Result<(), StoreError> {
        self.state().openai.batches.remove(&id);
        Ok(())
    }

    async fn openai_batch(&self, id: BatchId) -> Result<Option<OpenAiBatch>, StoreError> {
        Ok(self.state().openai.batches.get(&id).cloned())
    }

    async fn openai_batches(
        &self,
        user_id: UserId,
        before: Option<BatchId>,
        limit: usize,
    ) -> Result<Vec<OpenAiBatch>, StoreError> {
        let state = self.state();
        let older = match before {
            Some(before) => state.openai.batches.range(..before),
            None => state.openai.batches.range(..),
        };
        Ok(older.rev().map(|(_, batch)| batch).filter(|batch| batch.user_id == user_id).take(limit).cloned().collect())
    }
}
