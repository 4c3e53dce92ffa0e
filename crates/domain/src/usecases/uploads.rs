//! Keeping the images clients upload (`POST /api/v1/uploads`), so that a job can name one among
//! its image inputs by a link any provider can fetch, and reading them back for that link.

use std::sync::Arc;

use bytes::Bytes;

use super::{Caller, Ports};
use crate::ids::UploadId;
use crate::ports::{Clock, FileBytes, OutputStore, StoreError};
use crate::upload::{ImageFormat, MAX_UPLOAD_BYTES};

/// Why an upload was not kept or cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    /// The bytes are not a PNG, JPEG, WebP or GIF image.
    #[error("the upload must be a PNG, JPEG, WebP or GIF image")]
    NotAnImage,
    /// Over [`MAX_UPLOAD_BYTES`].
    #[error("the upload must be at most {MAX_UPLOAD_BYTES} bytes")]
    TooLarge,
    /// The service keeps no files (no output store is configured).
    #[error("this service keeps no uploads: it has no output store")]
    NoStore,
    /// No such upload.
    #[error("no such upload")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An image kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upload {
    /// Its id.
    pub id: UploadId,
    /// Its format, from its bytes.
    pub format: ImageFormat,
}

/// Keeping and reading uploaded images.
#[derive(Clone)]
pub struct Uploads {
    outputs: Option<Arc<dyn OutputStore>>,
    clock: Arc<dyn Clock>,
}

impl Uploads {
    /// Uploads kept in `ports`' output store.
    #[must_use]
    pub fn new(ports: &Ports) -> Self {
        Self { outputs: ports.outputs.clone(), clock: Arc::clone(&ports.clock) }
    }

    fn store(&self) -> Result<&Arc<dyn OutputStore>, UploadError> {
        self.outputs.as_ref().ok_or(UploadError::NoStore)
    }

    /// Keeps `bytes`, the caller's image.
    ///
    /// # Errors
    /// [`UploadError::NoStore`], [`UploadError::TooLarge`], [`UploadError::NotAnImage`] (judged
    /// by the bytes alone), [`UploadError::Store`].
    pub async fn keep(&self, caller: &Caller, bytes: Bytes) -> Result<Upload, UploadError> {
        let store = self.store()?;
        if bytes.len() > MAX_UPLOAD_BYTES {
            return Err(UploadError::TooLarge);
        }
        let format = ImageFormat::sniff(&bytes).ok_or(UploadError::NotAnImage)?;
        let id = UploadId::new_at(self.clock.now());
        let size = bytes.len();
        store.keep_upload(id, bytes).await?;
        tracing::info!(upload_id = %id, user_id = %caller.user_id, size, format = format.media_type(), "image uploaded");
        Ok(Upload { id, format })
    }

    /// The bytes of upload `id`.
    ///
    /// # Errors
    /// [`UploadError::NoStore`], [`UploadError::NotFound`], [`UploadError::Store`].
    pub async fn open(&self, id: UploadId) -> Result<FileBytes, UploadError> {
        self.store()?.open_upload(id).await?.ok_or(UploadError::NotFound)
    }
}
