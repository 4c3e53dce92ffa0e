//! Outputs that never expire: copying a succeeded job's outputs into the output store before the
//! job is shown as succeeded, and reading them back for the signed links the edge mints.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;

use super::{Caller, JobQueryError, JobReads};
use crate::ids::JobId;
use crate::job::JobState;
use crate::output::{OutputCopy, OutputItem, StoredFile};
use crate::ports::{ByteRange, FileBytes, OutputStore, RangeRequest, ResultFailure, StoreError, UpstreamResult};

/// A fetched result with its outputs kept ([`keep_outputs`]); a failure, or a result without
/// outputs, as it came.
pub(super) async fn keep_result(
    store: Option<&Arc<dyn OutputStore>>,
    job_id: JobId,
    fetched: Result<UpstreamResult, ResultFailure>,
) -> Result<UpstreamResult, ResultFailure> {
    match fetched {
        Ok(result) if !result.outputs.is_empty() => {
            let outputs = keep_outputs(store, job_id, result.outputs).await;
            Ok(UpstreamResult { outputs, ..result })
        }
        other => other,
    }
}

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

/// A stored output, opened.
pub struct OutputRead {
    /// The whole file's facts.
    pub file: StoredFile,
    /// The type it is served as inline ([`crate::modality::Modality::inline_media_type`]);
    /// `None` to send it as an attachment.
    pub served_as: Option<&'static str>,
    /// The part being sent, when a range was asked for; the whole file otherwise.
    pub range: Option<ByteRange>,
    /// The bytes being sent.
    pub body: FileBytes,
}

/// One output of a caller's job, opened for download.
pub struct OpenedOutput {
    /// The type it is served as inline; `None` to send it as an attachment.
    pub served_as: Option<&'static str>,
    /// The whole file's length, when known (always for a stored copy).
    pub size: Option<u64>,
    /// The part being sent, when a range was asked for and can be served; the whole file
    /// otherwise.
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

/// Why [`JobReads::open_output`] has no bytes to give.
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
    /// The range asks for no byte of the file.
    #[error("the range lies outside the file's {size} bytes")]
    RangeNotSatisfiable {
        /// The file's length.
        size: u64,
    },
}

impl JobReads {
    /// The whole of output `index` of the caller's succeeded job, at most `max_bytes`: the
    /// service's own copy when it keeps one, else the file at the provider's link, read through
    /// the [`crate::ports::OutputSource`] given with [`JobReads::with_output_source`]. For
    /// clients that need the bytes at once (`b64_json`); downloads stream ([`JobReads::open_output`]).
    ///
    /// # Errors
    /// See [`OutputContentError`]; [`OutputContentError::Unreadable`] past `max_bytes`.
    pub async fn output_bytes(
        &self,
        caller: &Caller,
        job_id: JobId,
        index: usize,
        max_bytes: u64,
    ) -> Result<Bytes, OutputContentError> {
        let mut opened = self.open_output(caller, job_id, index, None, max_bytes).await?;
        let unreadable = |e: StoreError| OutputContentError::Unreadable(e.to_string());
        let mut bytes = BytesMut::with_capacity(opened.size.map_or(0, |size| usize::try_from(size).unwrap_or(0)));
        while let Some(chunk) = opened.body.next().await {
            let chunk = chunk.map_err(unreadable)?;
            if (bytes.len() + chunk.len()) as u64 > max_bytes {
                return Err(OutputContentError::Unreadable(format!("the output is larger than {max_bytes} bytes")));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes.freeze())
    }

    /// Output `index` of the caller's succeeded job as a stream, never whole in memory, the part
    /// `range` asks for when asked: the service's own copy when it keeps one, else the file at
    /// the provider's link (whole when the provider serves no ranges, as HTTP allows), refused
    /// past `max_bytes`.
    ///
    /// # Errors
    /// See [`OutputContentError`].
    pub async fn open_output(
        &self,
        caller: &Caller,
        job_id: JobId,
        index: usize,
        range: Option<RangeRequest>,
        max_bytes: u64,
    ) -> Result<OpenedOutput, OutputContentError> {
        let job = self.job(caller, job_id).await?;
        let item = match (job.state(), job.outputs().and_then(|outputs| outputs.get(index))) {
            (JobState::Succeeded, Some(item)) => item.clone(),
            _ => return Err(OutputContentError::NoSuchOutput(index)),
        };
        let modality = job.modality();
        if let (Some(OutputCopy::Stored(file)), Some(store)) = (&item.copy, &self.ports.outputs) {
            let range = match range {
                Some(asked) => {
                    Some(asked.resolve(file.size).ok_or(OutputContentError::RangeNotSatisfiable { size: file.size })?)
                }
                None => None,
            };
            let unreadable = |e: StoreError| OutputContentError::Unreadable(e.to_string());
            if let Some(body) = store.open(job_id, index, range).await.map_err(unreadable)? {
                let served_as = modality.inline_media_type(&file.content_type);
                return Ok(OpenedOutput { served_as, size: Some(file.size), range, body });
            }
        }
        let source =
            self.sources.as_ref().ok_or_else(|| OutputContentError::Unreadable("outputs are not read here".into()))?;
        let opened = source
            .open(&item.url, range, max_bytes)
            .await
            .map_err(|failure| OutputContentError::Unreadable(failure.to_string()))?;
        let content_type = opened.content_type.unwrap_or(item.meta.content_type);
        Ok(OpenedOutput {
            served_as: modality.inline_media_type(&content_type),
            size: opened.size,
            range: opened.range,
            body: opened.body,
        })
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
        let served_as = job.modality().inline_media_type(&file.content_type);
        Ok(OutputRead { file, served_as, range, body })
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
