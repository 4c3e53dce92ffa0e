//! [`OpenAiBatchStore`]: the files uploaded for OpenAI's Batch API, and the OpenAI batches made
//! from them.

use async_trait::async_trait;
use bytes::Bytes;

use super::StoreError;
use crate::ids::{BatchId, FileId, UserId};
use crate::openai_batch::{BatchFile, OpenAiBatch};

/// Uploaded batch files with their content, and OpenAI batches. The items of an accepted batch
/// are a native batch's ([`crate::ports::BatchStore`]); this port keeps what OpenAI's API adds.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] when the store cannot be reached, and
/// [`StoreError::Internal`] for anything else unexpected.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait OpenAiBatchStore: Send + Sync {
    /// Keeps `file` and its `content`, in one step: a file is never seen without its content.
    async fn put_file(&self, file: &BatchFile, content: Bytes) -> Result<(), StoreError>;

    /// The file `id`, without its content; `None` when there is none.
    async fn file(&self, id: FileId) -> Result<Option<BatchFile>, StoreError>;

    /// The content of file `id`; `None` when there is none.
    async fn file_content(&self, id: FileId) -> Result<Option<Bytes>, StoreError>;

    /// Keeps `batch`, replacing the one with its id if there is one.
    async fn put_openai_batch(&self, batch: &OpenAiBatch) -> Result<(), StoreError>;

    /// Forgets the batch `id`, if there is one.
    async fn remove_openai_batch(&self, id: BatchId) -> Result<(), StoreError>;

    /// The batch `id`; `None` when there is none.
    async fn openai_batch(&self, id: BatchId) -> Result<Option<OpenAiBatch>, StoreError>;

    /// `user_id`'s batches, newest first, older than `before` when given, at most `limit`.
    async fn openai_batches(
        &self,
        user_id: UserId,
        before: Option<BatchId>,
        limit: usize,
    ) -> Result<Vec<OpenAiBatch>, StoreError>;
}
