//! [`RetriedCopies`]: an output store whose copies are tried again after transient failures,
//! waiting as the domain's [`copy_retry`] says.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use genjobs_domain::ids::JobId;
use genjobs_domain::output::StoredFile;
use genjobs_domain::ports::{ByteRange, Clock, CopyFailure, FileBytes, OutputStore, StoreError, copy_retry};
use genjobs_domain::upload::UploadDigest;

/// Wraps an output store: a copy that fails transiently is tried again with back-off, up to the
/// domain's number of tries, before its failure is reported. Reads and uploads pass through.
pub struct RetriedCopies {
    inner: Arc<dyn OutputStore>,
    clock: Arc<dyn Clock>,
}

impl RetriedCopies {
    /// Retries the copies of `inner`, pausing on `clock`.
    #[must_use]
    pub fn new(inner: Arc<dyn OutputStore>, clock: Arc<dyn Clock>) -> Self {
        Self { inner, clock }
    }
}

#[async_trait]
impl OutputStore for RetriedCopies {
    async fn copy(
        &self,
        job_id: JobId,
        index: usize,
        source_url: &str,
        content_type: &str,
    ) -> Result<StoredFile, CopyFailure> {
        let mut attempt = 1;
        loop {
            let failure = match self.inner.copy(job_id, index, source_url, content_type).await {
                Ok(file) => return Ok(file),
                Err(failure) => failure,
            };
            let Some(pause) = copy_retry(&failure, attempt) else { return Err(failure) };
            tracing::warn!(job_id = %job_id, index, attempt, reason = %failure, "output copy failed; trying again");
            self.clock.sleep(pause).await;
            attempt += 1;
        }
    }

    async fn open(
        &self,
        job_id: JobId,
        index: usize,
        range: Option<ByteRange>,
    ) -> Result<Option<FileBytes>, StoreError> {
        self.inner.open(job_id, index, range).await
    }

    async fn keep_upload(&self, digest: &UploadDigest, bytes: Bytes) -> Result<(), StoreError> {
        self.inner.keep_upload(digest, bytes).await
    }

    async fn open_upload(&self, digest: &UploadDigest) -> Result<Option<FileBytes>, StoreError> {
        self.inner.open_upload(digest).await
    }

    async fn delete_upload(&self, digest: &UploadDigest) -> Result<(), StoreError> {
        self.inner.delete_upload(digest).await
    }
}
