//! The output ports: the gateway's own copies of succeeded jobs' outputs, so that their links
//! outlive the provider's, and the images clients upload ([`OutputStore`]), and reading an output from the provider's link for
//! clients that ask for its bytes rather than a URL ([`OutputSource`]).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;

use super::StoreError;
use crate::ids::JobId;
use crate::output::StoredFile;
use crate::upload::UploadDigest;

/// Why a copy failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CopyFailure {
    /// Worth another try: the source or the store did not answer, timed out, or answered 429 or
    /// a 5xx, or the transfer broke off.
    #[error("transient: {0}")]
    Transient(String),
    /// Another try would fail the same: the source refuses (4xx), is not a URL the store can
    /// fetch, or is larger than the store's size limit.
    #[error("permanent: {0}")]
    Permanent(String),
}

/// Tries of one output's copy before the job succeeds without it.
pub const COPY_ATTEMPTS: u32 = 3;
/// Pause before the second try of a copy; doubled before each next one.
pub const COPY_BACKOFF: Duration = Duration::from_millis(500);

/// Whether a copy that failed with `failure` on try `attempt` (from 1) is tried again, and after
/// how long: a transient failure is, with back-off, until [`COPY_ATTEMPTS`] tries are spent. A
/// decision only: whoever calls [`OutputStore::copy`] on a runtime waits and tries again.
#[must_use]
pub fn copy_retry(failure: &CopyFailure, attempt: u32) -> Option<Duration> {
    let transient = matches!(failure, CopyFailure::Transient(_));
    (transient && attempt < COPY_ATTEMPTS).then(|| COPY_BACKOFF * (1 << attempt.saturating_sub(1).min(16)))
}

/// A byte range of a file, both ends included, as in `Range: bytes=first-last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub first: u64,
    /// Last byte, included.
    pub last: u64,
}

impl ByteRange {
    /// How many bytes it spans.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Never: a range spans one byte at least.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The bytes of a stored file, in order.
pub type FileBytes = BoxStream<'static, Result<Bytes, StoreError>>;

/// Where succeeded jobs' outputs are copied to and served from. The use cases try a copy once:
/// a deployment that wants transient failures tried again wraps its store in a decorator that
/// follows [`copy_retry`] (the runtime crate's `RetriedCopies`).
///
/// # Errors
/// [`OutputStore::copy`] classifies every failure as [`CopyFailure`]; [`OutputStore::open`]
/// returns [`StoreError::Unavailable`] when the store cannot be reached, and the stream it
/// returns yields the same when the store fails midway.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait OutputStore: Send + Sync {
    /// Copies the file at `source_url` into the store as output `index` of `job_id`: streamed,
    /// never whole in memory, and refused past the store's size limit. Copying the same output
    /// again replaces the copy. `content_type` is used when the source names none.
    ///
    /// # Errors
    /// [`CopyFailure::Permanent`] for a file over the limit or a source that refuses it.
    async fn copy(
        &self,
        job_id: JobId,
        index: usize,
        source_url: &str,
        content_type: &str,
    ) -> Result<StoredFile, CopyFailure>;

    /// Reads output `index` of `job_id`: the whole file, or `range` (which lies within it).
    /// `None` when the store has no such file.
    async fn open(
        &self,
        job_id: JobId,
        index: usize,
        range: Option<ByteRange>,
    ) -> Result<Option<FileBytes>, StoreError>;

    /// Keeps `bytes`, an image a client uploaded, under its content `digest`: the same content
    /// kept again replaces itself, one copy.
    async fn keep_upload(&self, digest: &UploadDigest, bytes: Bytes) -> Result<(), StoreError>;

    /// Reads upload `digest` whole; `None` when the store has no such upload.
    async fn open_upload(&self, digest: &UploadDigest) -> Result<Option<FileBytes>, StoreError>;

    /// Deletes upload `digest`; deleting one the store does not have is no error.
    async fn delete_upload(&self, digest: &UploadDigest) -> Result<(), StoreError>;
}

/// Reads outputs from the provider's links: for clients that ask for an output's bytes (the
/// OpenAI-compatible edge's `b64_json` and video content) when the service keeps no copy of it.
///
/// # Errors
/// Every failure is a [`CopyFailure`]: [`CopyFailure::Permanent`] when the link refuses (4xx),
/// names a host outputs are not fetched from, or the file is over `max_bytes`;
/// [`CopyFailure::Transient`] when the source cannot be reached now, answers 429 or a 5xx, or
/// the transfer breaks off.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait OutputSource: Send + Sync {
    /// The file at `url`, or the part `range` asks for when the source serves ranges, as a
    /// stream, never whole in memory: refused at once when the source announces more than
    /// `max_bytes`, and broken off with [`StoreError::Unavailable`] when it sends more.
    async fn open(&self, url: &str, range: Option<RangeRequest>, max_bytes: u64) -> Result<OpenedFile, CopyFailure>;
}

/// What a client asked of a file with `Range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeRequest {
    /// `bytes=first-last` (`last` past the end means to the end).
    Bounded {
        /// First byte.
        first: u64,
        /// Last byte, included.
        last: u64,
    },
    /// `bytes=first-`.
    From(u64),
    /// `bytes=-length`: the last `length` bytes.
    Suffix(u64),
}

impl RangeRequest {
    /// The bytes this asks of a file of `size` bytes, or `None` when it asks for none of them.
    #[must_use]
    pub fn resolve(self, size: u64) -> Option<ByteRange> {
        let end = size.checked_sub(1)?;
        let (first, last) = match self {
            RangeRequest::Bounded { first, last } if first <= last => (first, last.min(end)),
            RangeRequest::Bounded { .. } => return None,
            RangeRequest::From(first) => (first, end),
            RangeRequest::Suffix(0) => return None,
            RangeRequest::Suffix(length) => (size.saturating_sub(length), end),
        };
        (first <= end).then_some(ByteRange { first, last })
    }

    /// The request as a `Range` header's value.
    #[must_use]
    pub fn header_value(self) -> String {
        match self {
            RangeRequest::Bounded { first, last } => format!("bytes={first}-{last}"),
            RangeRequest::From(first) => format!("bytes={first}-"),
            RangeRequest::Suffix(length) => format!("bytes=-{length}"),
        }
    }
}

/// An output file opened at the provider's link.
pub struct OpenedFile {
    /// The type the source named, if it named one.
    pub content_type: Option<String>,
    /// The whole file's length, when the source announced it.
    pub size: Option<u64>,
    /// The part being sent, when a range was asked for and the source served it; the whole
    /// file otherwise.
    pub range: Option<ByteRange>,
    /// The bytes, in order.
    pub body: FileBytes,
}

impl std::fmt::Debug for OpenedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedFile")
            .field("content_type", &self.content_type)
            .field("size", &self.size)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}
