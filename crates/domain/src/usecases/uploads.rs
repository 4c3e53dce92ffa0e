//! Keeping the images clients upload (`POST /api/v1/uploads`, and the images of OpenAI's
//! `images.edit`), so that a job names each by a link any provider can fetch and never holds its
//! bytes; reading them back for that link; and forgetting them once their time to live is over.
//!
//! Each content is kept once, by its SHA-256: in the output store when the service has one, else
//! in the [`UploadStore`], apart from the jobs. What a user uploads counts against their UTC day
//! before anything is kept, so that a refused upload keeps nothing.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;

use super::{Caller, Ports};
use crate::ports::{
    Clock, FileBytes, NewUpload, OutputStore, RecordUploadsError, StoreError, UploadBatch, UploadStore,
};
use crate::upload::{ImageFormat, MAX_UPLOAD_BYTES, UploadDigest, UploadName, UploadSettings};

/// Contents forgotten per call of the store, in a sweep.
const SWEEP_BATCH: usize = 100;

/// Why an upload was not kept or cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    /// The bytes are not a PNG, JPEG, WebP or GIF image.
    #[error("the upload must be a PNG, JPEG, WebP or GIF image")]
    NotAnImage,
    /// Over [`MAX_UPLOAD_BYTES`], one upload or the images of one edit together.
    #[error("the upload must be at most {MAX_UPLOAD_BYTES} bytes")]
    TooLarge,
    /// The user's uploads of the UTC day would pass `GENJOBS_UPLOAD_BYTES_PER_DAY`.
    #[error("uploading this would pass your upload quota of {quota} bytes for today (UTC)")]
    QuotaExceeded {
        /// The quota, in bytes.
        quota: u64,
    },
    /// No such upload.
    #[error("no such upload")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Keeping, reading and forgetting uploaded images.
#[derive(Clone)]
pub struct Uploads {
    outputs: Option<Arc<dyn OutputStore>>,
    store: Arc<dyn UploadStore>,
    clock: Arc<dyn Clock>,
    settings: UploadSettings,
}

impl Uploads {
    /// Uploads kept in `ports`' output store, or in its upload store when there is none.
    #[must_use]
    pub fn new(ports: &Ports, settings: UploadSettings) -> Self {
        Self {
            outputs: ports.outputs.clone(),
            store: Arc::clone(&ports.uploads),
            clock: Arc::clone(&ports.clock),
            settings,
        }
    }

    /// The settings in use.
    #[must_use]
    pub fn settings(&self) -> UploadSettings {
        self.settings
    }

    /// Keeps `bytes`, the caller's image.
    ///
    /// # Errors
    /// As [`Uploads::keep_all`].
    pub async fn keep(&self, caller: &Caller, bytes: Bytes) -> Result<UploadName, UploadError> {
        let mut names = self.keep_all(caller, vec![bytes]).await?;
        names.pop().ok_or(UploadError::NotAnImage)
    }

    /// Keeps `images`, the caller's images of one request, each content once; their names, in
    /// order.
    ///
    /// # Errors
    /// [`UploadError::TooLarge`] past [`MAX_UPLOAD_BYTES`] together, [`UploadError::NotAnImage`]
    /// (judged by the bytes alone), [`UploadError::QuotaExceeded`] (nothing kept),
    /// [`UploadError::Store`].
    pub async fn keep_all(&self, caller: &Caller, images: Vec<Bytes>) -> Result<Vec<UploadName>, UploadError> {
        if images.is_empty() {
            return Ok(Vec::new());
        }
        if images.iter().map(Bytes::len).sum::<usize>() > MAX_UPLOAD_BYTES {
            return Err(UploadError::TooLarge);
        }
        let names = images
            .iter()
            .map(|bytes| {
                let format = ImageFormat::sniff(bytes).ok_or(UploadError::NotAnImage)?;
                Ok(UploadName { digest: UploadDigest::of(bytes), format })
            })
            .collect::<Result<Vec<_>, UploadError>>()?;
        let now = self.clock.now();
        let batch = UploadBatch {
            user_id: caller.user_id,
            day: now.date(),
            quota: self.settings.bytes_per_day,
            keep_until: now + self.settings.ttl,
            uploads: names
                .iter()
                .zip(&images)
                .map(|(name, bytes)| NewUpload { digest: name.digest.clone(), size: bytes.len() as u64 })
                .collect(),
        };
        let held = self.store.record(&batch).await.map_err(|e| match e {
            RecordUploadsError::QuotaExceeded => UploadError::QuotaExceeded { quota: self.settings.bytes_per_day },
            RecordUploadsError::Store(e) => UploadError::Store(e),
        })?;
        for ((name, bytes), held) in names.iter().zip(images).zip(held) {
            match &self.outputs {
                // Put again even when recorded before: an earlier put may have failed, and the
                // store keeps one object per content whatever the number of puts.
                Some(outputs) => outputs.keep_upload(&name.digest, bytes).await?,
                None if held => {}
                None => self.store.put_bytes(&name.digest, bytes).await?,
            }
        }
        let size = batch.uploads.iter().map(|upload| upload.size).sum::<u64>();
        tracing::info!(user_id = %caller.user_id, images = names.len(), size, "images uploaded");
        Ok(names)
    }

    /// The bytes of the upload `digest`.
    ///
    /// # Errors
    /// [`UploadError::NotFound`], [`UploadError::Store`].
    pub async fn open(&self, digest: &UploadDigest) -> Result<FileBytes, UploadError> {
        let found = match &self.outputs {
            Some(outputs) => outputs.open_upload(digest).await?,
            None => self.store.bytes(digest).await?.map(|bytes| futures_util::stream::iter([Ok(bytes)]).boxed()),
        };
        found.ok_or(UploadError::NotFound)
    }

    /// Forgets every upload whose time to live is over and that no job not yet final names,
    /// with its bytes; how many. An output store that fails to delete some bytes is logged, not
    /// an error: the upload is forgotten all the same.
    ///
    /// # Errors
    /// The upload store's; what was forgotten before stays forgotten.
    pub async fn remove_expired(&self) -> Result<usize, StoreError> {
        let mut removed = 0;
        loop {
            let batch = self.store.remove_expired(self.clock.now(), SWEEP_BATCH).await?;
            if let Some(outputs) = &self.outputs {
                for digest in &batch {
                    // Its record is gone already: stopping here would leave the rest of the
                    // batch's bytes behind too.
                    if let Err(error) = outputs.delete_upload(digest).await {
                        tracing::warn!(%error, upload = %digest, "could not delete an expired upload's bytes");
                    }
                }
            }
            removed += batch.len();
            if batch.len() < SWEEP_BATCH {
                return Ok(removed);
            }
        }
    }
}
