//! # genjobs-output-store
//!
//! The output store port ([`OutputStore`]) over the `object_store` crate, so that one adapter
//! serves every store it reads from a URL: `memory://`, `file:///path`, `s3://bucket/prefix`
//! (credentials, region and endpoint from the usual `AWS_*` variables), and the others
//! `object_store` knows.
//!
//! A copy streams: the provider's file is read chunk by chunk and written as a multipart upload
//! (parts of 5 MiB, at most two in flight), so a video never sits whole in memory, and a file
//! past the size limit is aborted as soon as it passes it. Its SHA-256 is computed on the way,
//! for the `ETag` the edge serves. Output `i` of job `j` lives at `{prefix}/{j}/{i}`: copying
//! it again (a duplicate webhook racing a poll) replaces it with the same bytes. An image a
//! client uploads (at most 20 MiB, already in memory) is put whole at `{prefix}/uploads/{sha256}`:
//! the same content uploaded again replaces itself, one copy.
//!
//! [`HttpOutputSource`] reads an output whole from the provider's link instead, for clients that
//! ask for its bytes when no copy is kept; both read links through `fetch`. [`OutputStoreArgs`]
//! are the store's flags and variables, which the binary flattens into its own.

mod args;
mod fetch;
mod hosts;

pub use args::OutputStoreArgs;
pub use fetch::HttpOutputSource;
pub use hosts::{DEFAULT_OUTPUT_HOSTS, NoPublicAddress, OutputHosts, PublicResolver};

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use genjobs_domain::ids::JobId;
use genjobs_domain::output::StoredFile;
use genjobs_domain::ports::{ByteRange, CopyFailure, FileBytes, OutputStore, StoreError};
use genjobs_domain::upload::UploadDigest;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::{Digest, Sha256};

/// Parts of a multipart upload in flight at once, per copy.
const PARTS_IN_FLIGHT: usize = 2;

/// The default size limit of one output: 2 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;

/// An output store that cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Not a URL, or a scheme `object_store` does not know.
    #[error("GENJOBS_OUTPUT_STORE: {0}")]
    Url(String),
    /// The store's client cannot be built (missing bucket, bad options).
    #[error("GENJOBS_OUTPUT_STORE: {0}")]
    Store(#[from] object_store::Error),
    /// The HTTP client that fetches outputs cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Outputs kept in an `object_store`.
#[derive(Debug)]
pub struct ObjectOutputStore {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    client: reqwest::Client,
    hosts: Arc<OutputHosts>,
    max_bytes: u64,
}

impl ObjectOutputStore {
    /// The store at `url`, configured from `options` (`(name, value)` pairs such as the
    /// process's environment: `AWS_ENDPOINT`, `AWS_REGION`, …, case-insensitive; the others are
    /// ignored), keeping outputs of at most `max_bytes` copied from `hosts` only. A `file://`
    /// directory is created.
    ///
    /// # Errors
    /// [`OpenError`] when the URL or the options do not make a store.
    pub fn open<K: AsRef<str>, V: Into<String>>(
        url: &str,
        options: impl IntoIterator<Item = (K, V)>,
        max_bytes: u64,
        hosts: OutputHosts,
    ) -> Result<Self, OpenError> {
        let parsed = url::Url::parse(url).map_err(|e| OpenError::Url(format!("{url:?} is not a URL: {e}")))?;
        if parsed.scheme() == "file" {
            let dir = parsed.to_file_path().map_err(|()| OpenError::Url(format!("{url:?} is not a local path")))?;
            std::fs::create_dir_all(&dir)
                .map_err(|e| OpenError::Url(format!("cannot create {}: {e}", dir.display())))?;
        }
        let (store, prefix) = object_store::parse_url_opts(&parsed, options)?;
        Ok(Self::new(Arc::from(store), prefix, max_bytes, hosts)?)
    }

    /// Outputs kept in `store` under `prefix`, copied from `hosts` only.
    ///
    /// # Errors
    /// When the HTTP client that fetches outputs cannot be built.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: Path,
        max_bytes: u64,
        hosts: OutputHosts,
    ) -> Result<Self, reqwest::Error> {
        let hosts = Arc::new(hosts);
        let client = fetch::client(&hosts)?;
        Ok(Self { store, prefix, client, hosts, max_bytes })
    }

    fn location(&self, job_id: JobId, index: usize) -> Path {
        self.prefix.clone().join(job_id.to_string()).join(index.to_string())
    }

    fn upload_location(&self, digest: &UploadDigest) -> Path {
        self.prefix.clone().join("uploads").join(digest.as_str())
    }

    /// The file at `location`, whole or `range` of it; `None` when there is none.
    async fn read(&self, location: &Path, range: Option<ByteRange>) -> Result<Option<FileBytes>, StoreError> {
        let options =
            GetOptions { range: range.map(|r| GetRange::Bounded(r.first..r.last + 1)), ..GetOptions::default() };
        match self.store.get_opts(location, options).await {
            Ok(found) => Ok(Some(
                found
                    .into_stream()
                    .map_err(|e| StoreError::Unavailable(format!("the output store failed: {e}")))
                    .boxed(),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StoreError::Unavailable(format!("the output store failed: {e}"))),
        }
    }

    /// Writes the body of `response` to `location`, hashing and counting it on the way.
    async fn stream_into(&self, location: &Path, response: reqwest::Response) -> Result<(u64, String), CopyFailure> {
        let upload = self.store.put_multipart(location).await.map_err(store_failure)?;
        let mut writer = WriteMultipart::new(upload);
        let (mut size, mut digest) = (0u64, Sha256::new());
        let mut body = response.bytes_stream();
        let failure = loop {
            let chunk = match body.next().await {
                None => break None,
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) => break Some(CopyFailure::Transient(format!("the download broke off: {e}"))),
            };
            size += chunk.len() as u64;
            if size > self.max_bytes {
                break Some(fetch::too_large(self.max_bytes));
            }
            digest.update(&chunk);
            if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                break Some(store_failure(e));
            }
            writer.write(&chunk);
        };
        if let Some(failure) = failure {
            if let Err(e) = writer.abort().await {
                tracing::warn!(%location, error = %e, "could not abort a failed upload");
            }
            return Err(failure);
        }
        writer.finish().await.map_err(store_failure)?;
        Ok((size, hex::encode(digest.finalize())))
    }
}

fn store_failure(e: object_store::Error) -> CopyFailure {
    CopyFailure::Transient(format!("the output store failed: {e}"))
}

#[async_trait]
impl OutputStore for ObjectOutputStore {
    async fn copy(
        &self,
        job_id: JobId,
        index: usize,
        source_url: &str,
        content_type: &str,
    ) -> Result<StoredFile, CopyFailure> {
        let response = fetch::request(&self.client, &self.hosts, source_url, None, self.max_bytes).await?;
        let content_type = fetch::content_type(&response).unwrap_or_else(|| content_type.to_owned());
        let (size, sha256) = self.stream_into(&self.location(job_id, index), response).await?;
        Ok(StoredFile { size, content_type, sha256 })
    }

    async fn open(
        &self,
        job_id: JobId,
        index: usize,
        range: Option<ByteRange>,
    ) -> Result<Option<FileBytes>, StoreError> {
        self.read(&self.location(job_id, index), range).await
    }

    async fn keep_upload(&self, digest: &UploadDigest, bytes: Bytes) -> Result<(), StoreError> {
        self.store
            .put(&self.upload_location(digest), PutPayload::from(bytes))
            .await
            .map(drop)
            .map_err(|e| StoreError::Unavailable(format!("the output store failed: {e}")))
    }

    async fn open_upload(&self, digest: &UploadDigest) -> Result<Option<FileBytes>, StoreError> {
        self.read(&self.upload_location(digest), None).await
    }

    async fn delete_upload(&self, digest: &UploadDigest) -> Result<(), StoreError> {
        match self.store.delete(&self.upload_location(digest)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(StoreError::Unavailable(format!("the output store failed: {e}"))),
        }
    }
}
