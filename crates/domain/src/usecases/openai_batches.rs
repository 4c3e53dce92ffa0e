//! OpenAI's Batch API ([`OpenAiBatches`]): files uploaded for batches, and batches made from
//! them through the native batch's acceptance ([`Submissions::submit_batch`], one hold for
//! every item), read, listed and canceled as native batches are.
//!
//! A batch is recorded (`validating`) before its items are accepted under the same id, so that
//! an acceptance is never without its record; an acceptance refused (credits, a key's budget)
//! forgets the record and answers the refusal, and an item refused by the native checks fails the
//! batch naming its line, nothing held.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::{BatchItemRequest, BatchPage, BatchQueryError, BatchSubmission, Batches, Caller, IdempotencyKey};
use super::{Submissions, SubmitError};
use crate::batch::{DEFAULT_COMPLETION_WINDOW_SECS, MAX_CUSTOM_ID_CHARS, check_metadata};
use crate::ids::{BatchId, FileId, JobId};
use crate::invalid::InvalidRequest;
use crate::job::Job;
use crate::openai_batch::{
    BATCH_ENDPOINTS, BatchFile, COMPLETION_WINDOW, LineError, MAX_BATCH_FILE_LINES, MAX_LINE_ERRORS, OpenAiBatch,
    OpenAiBatchView, check_batch_file,
};
use crate::ports::{Clock, OpenAiBatchStore, StoreError};

/// Most batches a page of OpenAI's listing holds.
pub const MAX_OPENAI_BATCHES_PAGE: usize = 100;

/// Why a file or an OpenAI batch could not be made, read or canceled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenAiBatchError {
    /// 400: the request itself is invalid (not a line of its file).
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    /// 404: no such file or batch, or another user's.
    #[error("no such {0}")]
    NotFound(&'static str),
    /// The batch's acceptance was refused (402, 403, 409, …).
    #[error(transparent)]
    Submit(#[from] SubmitError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<BatchQueryError> for OpenAiBatchError {
    fn from(e: BatchQueryError) -> Self {
        match e {
            BatchQueryError::NotFound | BatchQueryError::Forbidden => OpenAiBatchError::NotFound("batch"),
            BatchQueryError::Store(e) => OpenAiBatchError::Store(e),
        }
    }
}

/// One line of an input file read into an item.
#[derive(Debug, Clone)]
pub struct LinedItem {
    /// Its line, counted from 1.
    pub line: u64,
    /// The item.
    pub item: BatchItemRequest,
}

/// `POST /openai/v1/batches`, its file read: every line an item, or the lines at fault.
#[derive(Debug, Clone)]
pub struct OpenAiBatchRequest {
    /// The file the items came from.
    pub input_file_id: FileId,
    /// The endpoint every line names.
    pub endpoint: String,
    /// `24h`.
    pub completion_window: String,
    /// The client's labels.
    pub metadata: BTreeMap<String, String>,
    /// The items, or why some lines cannot be.
    pub items: Result<Vec<LinedItem>, Vec<LineError>>,
    /// The idempotency key and a fingerprint of the request.
    pub idempotency: Option<(IdempotencyKey, String)>,
}

/// Checks what a batch's request names besides its file: an endpoint served here, the `24h`
/// window, at most 16 metadata pairs.
///
/// # Errors
/// [`InvalidRequest`] naming `endpoint`, `completion_window` or `metadata`.
pub fn check_openai_batch(
    endpoint: &str,
    completion_window: &str,
    metadata: &BTreeMap<String, String>,
) -> Result<(), InvalidRequest> {
    if !BATCH_ENDPOINTS.contains(&endpoint) {
        let served = BATCH_ENDPOINTS.join("` or `");
        return Err(InvalidRequest::param("endpoint", format!("`endpoint` must be `{served}`")));
    }
    if completion_window != COMPLETION_WINDOW {
        return Err(InvalidRequest::param(
            "completion_window",
            format!("`completion_window` must be `{COMPLETION_WINDOW}`"),
        ));
    }
    check_metadata(metadata)
}

/// The files and batches of OpenAI's Batch API.
#[derive(Clone)]
pub struct OpenAiBatches {
    store: Arc<dyn OpenAiBatchStore>,
    clock: Arc<dyn Clock>,
    submissions: Submissions,
    batches: Batches,
}

impl OpenAiBatches {
    /// Over `store`, accepting through `submissions` and reading native batches through `batches`.
    #[must_use]
    pub fn new(
        store: Arc<dyn OpenAiBatchStore>,
        clock: Arc<dyn Clock>,
        submissions: Submissions,
        batches: Batches,
    ) -> Self {
        Self { store, clock, submissions, batches }
    }

    /// The same, accepting through `submissions`.
    #[must_use]
    pub fn with_submissions(self, submissions: Submissions) -> Self {
        Self { submissions, ..self }
    }

    /// Keeps an uploaded file for batches. With an idempotency key, the file's id is the key's
    /// (for its user): a retry finds the file the first call kept and answers it, nothing kept
    /// twice; the same key with another file is refused.
    ///
    /// # Errors
    /// [`OpenAiBatchError::Invalid`] as [`check_batch_file`] says;
    /// [`SubmitError::IdempotencyConflict`] for a key used with another file; when the store fails.
    pub async fn upload(
        &self,
        caller: &Caller,
        filename: String,
        purpose: &str,
        content: Bytes,
        idempotency: Option<IdempotencyKey>,
    ) -> Result<BatchFile, OpenAiBatchError> {
        check_batch_file(purpose, &content)?;
        let now = self.clock.now();
        let id = idempotency.as_ref().map_or_else(|| FileId::new_at(now), |key| keyed_file_id(caller, key));
        if idempotency.is_some()
            && let Some(first) = self.same_upload(id, &filename, &content).await?
        {
            return Ok(first);
        }
        let file = BatchFile {
            id,
            user_id: caller.user_id,
            key_prefix: caller.key.as_ref().map(|key| key.prefix.clone()),
            filename,
            bytes: content.len() as u64,
            created_at: now,
        };
        if let Err(e) = self.store.put_file(&file, content.clone()).await {
            // A concurrent retry with the same key kept it first.
            if idempotency.is_some()
                && let Some(first) = self.same_upload(id, &file.filename, &content).await?
            {
                return Ok(first);
            }
            return Err(e.into());
        }
        tracing::info!(file_id = %file.id, user_id = %caller.user_id, bytes = file.bytes, "batch file uploaded");
        Ok(file)
    }

    /// The file `id` kept before, when it is this upload again; refused when it is another.
    async fn same_upload(
        &self,
        id: FileId,
        filename: &str,
        content: &Bytes,
    ) -> Result<Option<BatchFile>, OpenAiBatchError> {
        let Some(first) = self.store.file(id).await? else { return Ok(None) };
        let same = first.filename == filename
            && first.bytes == content.len() as u64
            && self.store.file_content(id).await?.as_ref() == Some(content);
        if same { Ok(Some(first)) } else { Err(SubmitError::IdempotencyConflict.into()) }
    }

    /// The caller's file `id`.
    ///
    /// # Errors
    /// [`OpenAiBatchError::NotFound`] for none, or another user's; when the store fails.
    pub async fn file(&self, caller: &Caller, id: FileId) -> Result<BatchFile, OpenAiBatchError> {
        self.store
            .file(id)
            .await?
            .filter(|file| file.user_id == caller.user_id && caller.sees_key(file.key_prefix.as_ref()))
            .ok_or(OpenAiBatchError::NotFound("file"))
    }

    /// The content of the caller's file `id`.
    ///
    /// # Errors
    /// As [`OpenAiBatches::file`].
    pub async fn file_content(&self, caller: &Caller, id: FileId) -> Result<Bytes, OpenAiBatchError> {
        self.file(caller, id).await?;
        self.store.file_content(id).await?.ok_or(OpenAiBatchError::NotFound("file"))
    }

    /// Makes a batch of the caller's file: failed, naming the lines at fault, when some line
    /// cannot be an item; else its items accepted as one native batch of the same id, at the
    /// batch price, in one hold.
    ///
    /// # Errors
    /// [`OpenAiBatchError::Invalid`] for a wrong endpoint, window or metadata;
    /// [`OpenAiBatchError::NotFound`] for a file that is not the caller's;
    /// [`OpenAiBatchError::Submit`] when the acceptance is refused (nothing is kept then).
    pub async fn create(
        &self,
        caller: &Caller,
        request: OpenAiBatchRequest,
    ) -> Result<OpenAiBatchView, OpenAiBatchError> {
        check_openai_batch(&request.endpoint, &request.completion_window, &request.metadata)?;
        self.file(caller, request.input_file_id).await?;
        let now = self.clock.now();
        let mut record = OpenAiBatch {
            id: BatchId::new_at(now),
            user_id: caller.user_id,
            key_prefix: caller.key.as_ref().map(|key| key.prefix.clone()),
            input_file_id: request.input_file_id,
            endpoint: request.endpoint,
            completion_window: request.completion_window,
            created_at: now,
            metadata: request.metadata,
            errors: Vec::new(),
        };
        let items = match request.items.map(checked_custom_ids) {
            Ok(Ok(items)) => items,
            Ok(Err(errors)) | Err(errors) => return self.failed(record, errors).await,
        };
        self.store.put_openai_batch(&record).await?;
        let lines: Vec<u64> = items.iter().map(|item| item.line).collect();
        let submission = BatchSubmission {
            id: Some(record.id),
            max_items: MAX_BATCH_FILE_LINES,
            items: items.into_iter().map(|item| item.item).collect(),
            completion_window_secs: DEFAULT_COMPLETION_WINDOW_SECS,
            webhook_url: None,
            metadata: record.metadata.clone(),
            idempotency: request.idempotency,
        };
        match self.submissions.submit_batch(caller, submission).await {
            Ok(native) if native.batch.id == record.id => Ok(OpenAiBatchView { batch: record, native: Some(native) }),
            Ok(replayed) => {
                self.store.remove_openai_batch(record.id).await?;
                let first = self.store.openai_batch(replayed.batch.id).await?;
                let first = first.ok_or(OpenAiBatchError::Submit(SubmitError::IdempotencyConflict))?;
                Ok(OpenAiBatchView { batch: first, native: Some(replayed) })
            }
            Err(SubmitError::Invalid(refused)) => {
                record.errors = vec![line_error(refused, &lines)];
                self.failed(record, Vec::new()).await
            }
            Err(refused) => {
                self.store.remove_openai_batch(record.id).await?;
                Err(refused.into())
            }
        }
    }

    /// Keeps `record` failed with `errors` (added to its own), nothing held.
    async fn failed(
        &self,
        mut record: OpenAiBatch,
        errors: Vec<LineError>,
    ) -> Result<OpenAiBatchView, OpenAiBatchError> {
        record.errors.extend(errors);
        record.errors.truncate(MAX_LINE_ERRORS);
        self.store.put_openai_batch(&record).await?;
        tracing::info!(batch_id = %record.id, errors = record.errors.len(), "OpenAI batch failed on its file's lines");
        Ok(OpenAiBatchView { batch: record, native: None })
    }

    /// The caller's batch `id`, with its native batch once accepted.
    ///
    /// # Errors
    /// [`OpenAiBatchError::NotFound`] for none, or another user's; when the store fails.
    pub async fn batch(&self, caller: &Caller, id: BatchId) -> Result<OpenAiBatchView, OpenAiBatchError> {
        let batch = self
            .store
            .openai_batch(id)
            .await?
            .filter(|batch| batch.user_id == caller.user_id && caller.sees_key(batch.key_prefix.as_ref()))
            .ok_or(OpenAiBatchError::NotFound("batch"))?;
        self.view(caller, batch).await
    }

    async fn view(&self, caller: &Caller, batch: OpenAiBatch) -> Result<OpenAiBatchView, OpenAiBatchError> {
        if !batch.errors.is_empty() {
            return Ok(OpenAiBatchView { batch, native: None });
        }
        let native = match self.batches.batch(caller, batch.id).await {
            Ok(native) => Some(native),
            Err(BatchQueryError::NotFound) => None,
            Err(e) => return Err(e.into()),
        };
        Ok(OpenAiBatchView { batch, native })
    }

    /// The caller's batches, newest first, `limit` (1 to [`MAX_OPENAI_BATCHES_PAGE`]) after the
    /// batch `after`; whether more follow.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn list(
        &self,
        caller: &Caller,
        after: Option<BatchId>,
        limit: usize,
    ) -> Result<(Vec<OpenAiBatchView>, bool), OpenAiBatchError> {
        let limit = limit.clamp(1, MAX_OPENAI_BATCHES_PAGE);
        let mut batches = self.store.openai_batches(caller.user_id, after, limit + 1).await?;
        let has_more = batches.len() > limit;
        batches.truncate(limit);
        let mut views = Vec::with_capacity(batches.len());
        for batch in batches.into_iter().filter(|batch| caller.sees_key(batch.key_prefix.as_ref())) {
            views.push(self.view(caller, batch).await?);
        }
        Ok((views, has_more))
    }

    /// Cancels the caller's batch as a native batch's cancel does; a batch with no items (failed,
    /// or still validating) is answered as it is.
    ///
    /// # Errors
    /// As [`OpenAiBatches::batch`].
    pub async fn cancel(&self, caller: &Caller, id: BatchId) -> Result<OpenAiBatchView, OpenAiBatchError> {
        let view = self.batch(caller, id).await?;
        if view.native.is_none() {
            return Ok(view);
        }
        let native = self.batches.cancel(caller, id).await?;
        tracing::info!(batch_id = %id, "OpenAI batch canceled");
        Ok(OpenAiBatchView { native: Some(native), ..view })
    }

    /// The final items of the caller's batch, in its order, `limit` after the item `after`: what
    /// its output and error files are read from, a page at a time.
    ///
    /// # Errors
    /// As [`OpenAiBatches::batch`].
    pub async fn final_items(
        &self,
        caller: &Caller,
        id: BatchId,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<BatchPage<Job, JobId>, OpenAiBatchError> {
        Ok(self.batches.results(caller, id, after, limit).await?)
    }
}

/// The id of a file uploaded with idempotency key `key` by `caller`'s user: the same for every
/// retry, and no other user's or key's.
fn keyed_file_id(caller: &Caller, key: &IdempotencyKey) -> FileId {
    let digest =
        Sha256::new().chain_update(caller.user_id.as_uuid().as_bytes()).chain_update(key.0.as_bytes()).finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    FileId::from_uuid(uuid::Builder::from_random_bytes(bytes).into_uuid())
}

/// The items when their `custom_id`s are 1 to 64 characters and unique, else the lines at fault.
fn checked_custom_ids(items: Vec<LinedItem>) -> Result<Vec<LinedItem>, Vec<LineError>> {
    let errors = custom_id_errors(&items);
    if errors.is_empty() { Ok(items) } else { Err(errors) }
}

fn custom_id_errors(items: &[LinedItem]) -> Vec<LineError> {
    let mut seen = HashSet::with_capacity(items.len());
    let mut errors = Vec::new();
    for item in items {
        let custom_id = item.item.custom_id.as_str();
        let chars = custom_id.chars().count();
        let fault = if chars == 0 || chars > MAX_CUSTOM_ID_CHARS {
            Some(("invalid_custom_id", format!("`custom_id` must be 1 to {MAX_CUSTOM_ID_CHARS} characters")))
        } else if !seen.insert(custom_id) {
            Some(("duplicate_custom_id", format!("`custom_id` {custom_id:?} is used twice in this file")))
        } else {
            None
        };
        if let Some((code, message)) = fault {
            errors.push(LineError {
                code: code.into(),
                message,
                param: Some("custom_id".into()),
                line: Some(item.line),
            });
        }
    }
    errors
}

/// A refusal of the native checks, named by its item (`items[3].body.prompt`), as a line's:
/// the line of item 3, `body.prompt`.
fn line_error(refused: InvalidRequest, lines: &[u64]) -> LineError {
    let placed = refused.param.as_deref().and_then(|param| {
        let rest = param.strip_prefix("items[")?;
        let (index, rest) = rest.split_once(']')?;
        let line = lines.get(index.parse::<usize>().ok()?)?;
        Some((*line, rest.trim_start_matches('.').to_owned()))
    });
    let (line, param) = match placed {
        Some((line, param)) => (Some(line), (!param.is_empty()).then_some(param)),
        None => (None, refused.param),
    };
    LineError { code: "invalid_request".into(), message: refused.message, param, line }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_refusal_names_the_line_of_its_item() {
        let refused = InvalidRequest::param("items[1].body.prompt", "too long");
        let error = line_error(refused, &[2, 5]);
        assert_eq!((error.line, error.param.as_deref()), (Some(5), Some("body.prompt")));
        let whole = line_error(InvalidRequest::param("items", "too many"), &[1]);
        assert_eq!((whole.line, whole.param.as_deref()), (None, Some("items")));
    }

    #[test]
    fn endpoints_and_window_are_openais() {
        let none = BTreeMap::new();
        assert!(check_openai_batch("/v1/videos", "24h", &none).is_ok());
        assert_eq!(
            check_openai_batch("/v1/chat/completions", "24h", &none).unwrap_err().param.as_deref(),
            Some("endpoint")
        );
        assert_eq!(
            check_openai_batch("/v1/videos", "48h", &none).unwrap_err().param.as_deref(),
            Some("completion_window")
        );
    }
}
