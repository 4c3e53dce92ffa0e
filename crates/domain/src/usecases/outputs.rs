//! Outputs that never expire: copying a succeeded job's outputs into the output store before the
//! job is shown as succeeded, and reading them back for the signed links the edge mints.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;

use super::{Caller, JobQueryError, JobReads};
use crate::ids::JobId;
use crate::job::JobState;
use crate::output::{OutputCopy, OutputItem, StoredFile};
use crate::ports::{ByteRange, FileBytes, OutputStore, StoreError};

/// Copies each output into the output store, when there is one, and marks it stored or not. An
/// output whose copy fails keeps only the provider's URL ([`OutputCopy::Failed`]): the job still
/// succeeds. Trying a transient failure again is the store's (see [`OutputStore`]).
pub(super) async fn keep_outputs(
    store: Option<&Arc<dyn OutputStore>>,
    job_id: JobId,
    outputs: Vec<OutputItem>,
) -> Vec<OutputItem> {
    let Some(store) = store else { return outputs };
    let mut kept = Vec::with_capacity(outputs.len());
    for (index, mut item) in outputs.into_iter().enumerate() {
        let copy = match store.copy(job_id, index, &item.url, &item.meta.content_type).await {
            Ok(file) => {
                tracing::info!(job_id = %job_id, index, bytes = file.size, "output copied");
                OutputCopy::Stored(file)
            }
            Err(failure) => {
                tracing::warn!(job_id = %job_id, index, %failure, "output not copied; the provider's URL stays");
                OutputCopy::Failed
            }
        };
        item.copy = Some(copy);
        kept.push(item);
    }
    kept
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
}

/// A stored output, opened.
pub struct OutputRead {
    /// The whole file's facts.
    pub file: StoredFile,
    /// The part being sent, when a range was asked for; the whole file otherwise.
    pub range: Option<ByteRange>,
    /// The bytes being sent.
    pub body: FileBytes,
}

/// Why a stored output cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputReadError {
    /// No such job, output, or stored copy.
    #[error("no stored output here")]
    NotFound,
    /// The range asks for no byte of the file.
    #[error("the range lies outside the file's {size} bytes")]
    RangeNotSatisfiable {
        /// The file's length.
        size: u64,
    },
    /// The job store or the output store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The bytes of one output of a caller's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputContent {
    /// Its MIME type: the stored copy's, else the one the provider's link names, else the one
    /// the job's output names.
    pub content_type: String,
    /// The whole file.
    pub bytes: Bytes,
}

/// Why [`JobReads::output_content`] has no bytes to give.
#[derive(Debug, thiserror::Error)]
pub enum OutputContentError {
    /// The job is not the caller's, or does not exist.
    #[error(transparent)]
    Job(#[from] JobQueryError),
    /// The job has not succeeded (yet), or has no output at that index.
    #[error("the job has no output {0}")]
    NoSuchOutput(usize),
    /// The output could not be read: the service keeps no copy and the provider's link failed,
    /// or the service reads no links.
    #[error("the output cannot be read now: {0}")]
    Unreadable(String),
}

impl JobReads {
    /// The whole of output `index` of the caller's succeeded job, at most `max_bytes`: the
    /// service's own copy when it keeps one, else the file at the provider's link, read through
    /// the [`crate::ports::OutputSource`] given with [`JobReads::with_output_source`].
    ///
    /// # Errors
    /// See [`OutputContentError`].
    pub async fn output_content(
        &self,
        caller: &Caller,
        job_id: JobId,
        index: usize,
        max_bytes: u64,
    ) -> Result<OutputContent, OutputContentError> {
        let job = self.job(caller, job_id).await?;
        let item = match (job.state(), job.outputs().and_then(|outputs| outputs.get(index))) {
            (JobState::Succeeded, Some(item)) => item.clone(),
            _ => return Err(OutputContentError::NoSuchOutput(index)),
        };
        if let (Some(OutputCopy::Stored(file)), Some(store)) = (&item.copy, &self.ports.outputs) {
            let unreadable = |e: StoreError| OutputContentError::Unreadable(e.to_string());
            if let Some(mut body) = store.open(job_id, index, None).await.map_err(unreadable)? {
                let mut bytes = BytesMut::with_capacity(usize::try_from(file.size).unwrap_or(0));
                while let Some(chunk) = body.next().await {
                    bytes.extend_from_slice(&chunk.map_err(unreadable)?);
                }
                return Ok(OutputContent { content_type: file.content_type.clone(), bytes: bytes.freeze() });
            }
        }
        let source =
            self.sources.as_ref().ok_or_else(|| OutputContentError::Unreadable("outputs are not read here".into()))?;
        let fetched = source
            .fetch(&item.url, max_bytes)
            .await
            .map_err(|failure| OutputContentError::Unreadable(failure.to_string()))?;
        Ok(OutputContent { content_type: fetched.content_type.unwrap_or(item.meta.content_type), bytes: fetched.bytes })
    }

    /// Output `index` of a succeeded job, from the output store: whole, or the part `range`
    /// asks for. Whoever calls this has checked the caller may read it (a signed link).
    ///
    /// # Errors
    /// See [`OutputReadError`].
    pub async fn stored_output(
        &self,
        job_id: JobId,
        index: usize,
        range: Option<RangeRequest>,
    ) -> Result<OutputRead, OutputReadError> {
        let store = self.ports.outputs.as_ref().ok_or(OutputReadError::NotFound)?;
        let job = self.ports.jobs.job(job_id).await?.ok_or(OutputReadError::NotFound)?;
        let file = match job.outputs().and_then(|outputs| outputs.get(index)).and_then(|item| item.copy.as_ref()) {
            Some(OutputCopy::Stored(file)) => file.clone(),
            _ => return Err(OutputReadError::NotFound),
        };
        let range = match range {
            Some(asked) => {
                Some(asked.resolve(file.size).ok_or(OutputReadError::RangeNotSatisfiable { size: file.size })?)
            }
            None => None,
        };
        let body = store.open(job_id, index, range).await?.ok_or(OutputReadError::NotFound)?;
        Ok(OutputRead { file, range, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_against_the_file_size() {
        let range = |first, last| Some(ByteRange { first, last });
        assert_eq!(RangeRequest::Bounded { first: 0, last: 99 }.resolve(1000), range(0, 99));
        assert_eq!(RangeRequest::Bounded { first: 900, last: 5000 }.resolve(1000), range(900, 999));
        assert_eq!(RangeRequest::From(10).resolve(1000), range(10, 999));
        assert_eq!(RangeRequest::Suffix(100).resolve(1000), range(900, 999));
        assert_eq!(RangeRequest::Suffix(5000).resolve(1000), range(0, 999));
        assert_eq!(RangeRequest::From(1000).resolve(1000), None);
        assert_eq!(RangeRequest::Bounded { first: 5, last: 4 }.resolve(1000), None);
        assert_eq!(RangeRequest::Suffix(0).resolve(1000), None);
        assert_eq!(RangeRequest::From(0).resolve(0), None);
    }
}
