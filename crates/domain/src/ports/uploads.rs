//! The uploads port ([`UploadStore`]): what the store keeps of uploaded images besides their
//! bytes (each content once, until when it is kept, and what each user uploaded per UTC day),
//! and their bytes too when the service has no output store, apart from the jobs, so that a job
//! names an image by its link and no job row, listing or cache ever holds image bytes.

use async_trait::async_trait;
use bytes::Bytes;
use time::{Date, OffsetDateTime};

use super::StoreError;
use crate::ids::UserId;
use crate::upload::UploadDigest;

/// One content among the images of an upload or an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUpload {
    /// Its content.
    pub digest: UploadDigest,
    /// Its size in bytes.
    pub size: u64,
}

/// The uploads of one request, counted against their user's day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadBatch {
    /// Whose they are.
    pub user_id: UserId,
    /// The UTC day they are counted on.
    pub day: Date,
    /// Most bytes the user may upload that day, these included.
    pub quota: u64,
    /// Each content is kept at least until then.
    pub keep_until: OffsetDateTime,
    /// The contents, in order.
    pub uploads: Vec<NewUpload>,
}

/// Why uploads were not recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordUploadsError {
    /// They would take the user past the day's quota: nothing was recorded or counted.
    #[error("the day's upload quota would be exceeded")]
    QuotaExceeded,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where uploads are recorded, and their bytes kept when there is no output store.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] when the store cannot be reached.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait UploadStore: Send + Sync {
    /// Adds the sizes of `batch`'s uploads to what its user uploaded on its day and records each
    /// content as kept until `keep_until` at least (a content already kept is kept the longer),
    /// in one step: two batches of one user never pass the quota together. Answers, for each
    /// upload in order, whether the store already holds its bytes ([`UploadStore::put_bytes`]).
    ///
    /// # Errors
    /// [`RecordUploadsError::QuotaExceeded`] when the day's total would pass `batch.quota`:
    /// nothing is recorded then.
    async fn record(&self, batch: &UploadBatch) -> Result<Vec<bool>, RecordUploadsError>;

    /// Keeps `bytes` as the content `digest` recorded before; a content whose bytes are held
    /// already, or that is no longer recorded, is left as it is.
    async fn put_bytes(&self, digest: &UploadDigest, bytes: Bytes) -> Result<(), StoreError>;

    /// The bytes of content `digest`, when the store holds them.
    async fn bytes(&self, digest: &UploadDigest) -> Result<Option<Bytes>, StoreError>;

    /// Forgets up to `limit` contents kept until before `now` that no job not yet final names
    /// among its image inputs (its link carries the digest), with their bytes; answers them, for
    /// the output store to delete their bytes too. Days before yesterday's are forgotten too.
    async fn remove_expired(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<UploadDigest>, StoreError>;
}
