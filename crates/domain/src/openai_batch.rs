//! OpenAI's Batch API over batches: a JSONL file uploaded first ([`BatchFile`]), then a batch
//! made from it ([`OpenAiBatch`]), whose items are a native batch's (the same id), or which
//! failed on the file's invalid lines ([`LineError`]) and holds nothing. Its status in OpenAI's
//! terms is read from the native batch's state ([`OpenAiBatchView::status`]); its output and
//! error files are not kept but read from the batch's items, and named by the batch
//! ([`OpenAiFileId`]).

use std::collections::BTreeMap;
use std::fmt;

use time::OffsetDateTime;

use crate::batch::{BatchEnd, BatchState, BatchView};
use crate::ids::{BatchId, FileId, KeyPrefix, UserId};
use crate::invalid::InvalidRequest;

/// Most lines of an input file.
pub const MAX_BATCH_FILE_LINES: usize = 50_000;
/// Largest input file: 100 MB.
pub const MAX_BATCH_FILE_BYTES: usize = 100_000_000;
/// The only `purpose` a file is uploaded for here.
pub const BATCH_PURPOSE: &str = "batch";
/// The only completion window OpenAI's API offers: a day.
pub const COMPLETION_WINDOW: &str = "24h";
/// The endpoints a batch may name, and the `url` each line of its file names.
pub const BATCH_ENDPOINTS: [&str; 2] = ["/v1/images/generations", "/v1/videos"];
/// Most line errors a failed batch lists: the first ones.
pub const MAX_LINE_ERRORS: usize = 100;

/// A file uploaded for batches, as kept (its content is kept beside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchFile {
    /// Its id.
    pub id: FileId,
    /// Its owner.
    pub user_id: UserId,
    /// The key it was uploaded with.
    pub key_prefix: Option<KeyPrefix>,
    /// The name the client gave it.
    pub filename: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// When it was uploaded.
    pub created_at: OffsetDateTime,
}

/// Why one line of an input file cannot be an item: a failed batch lists these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// What kind of fault: `invalid_json`, `invalid_request`, `duplicate_custom_id`, …
    pub code: String,
    /// What is wrong, for a person.
    pub message: String,
    /// The field at fault, when one is (`body.prompt`, `custom_id`, `url`, …).
    pub param: Option<String>,
    /// The line, counted from 1; `None` for a fault of the file as a whole.
    pub line: Option<u64>,
}

/// An OpenAI batch as kept: what its request named, and why it failed, if it did. An accepted
/// one has the id of the native batch that holds its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiBatch {
    /// Its id, the native batch's once accepted.
    pub id: BatchId,
    /// Its owner.
    pub user_id: UserId,
    /// The key it was made with.
    pub key_prefix: Option<KeyPrefix>,
    /// The file its items came from.
    pub input_file_id: FileId,
    /// The endpoint its items call.
    pub endpoint: String,
    /// As the client sent it (`24h`).
    pub completion_window: String,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// The client's labels.
    pub metadata: BTreeMap<String, String>,
    /// Why its file could not be accepted; empty unless it failed.
    pub errors: Vec<LineError>,
}

/// OpenAI's status of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenAiBatchStatus {
    /// Recorded, its items not yet accepted (an acceptance a crash cut short stays here).
    Validating,
    /// Its file had invalid lines: nothing was held.
    Failed,
    /// Its items are accepted and some are not final.
    InProgress,
    /// Its window closed: items not sent failed; the ones sent are running out.
    Finalizing,
    /// Every item is final, the batch not ended early.
    Completed,
    /// Its window closed and every item is final.
    Expired,
    /// It was canceled; some items are not final yet.
    Cancelling,
    /// It was canceled and every item is final.
    Cancelled,
}

impl OpenAiBatchStatus {
    /// The name OpenAI's API uses.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            OpenAiBatchStatus::Validating => "validating",
            OpenAiBatchStatus::Failed => "failed",
            OpenAiBatchStatus::InProgress => "in_progress",
            OpenAiBatchStatus::Finalizing => "finalizing",
            OpenAiBatchStatus::Completed => "completed",
            OpenAiBatchStatus::Expired => "expired",
            OpenAiBatchStatus::Cancelling => "cancelling",
            OpenAiBatchStatus::Cancelled => "cancelled",
        }
    }
}

/// An OpenAI batch and, once accepted, its native batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiBatchView {
    /// The batch as kept.
    pub batch: OpenAiBatch,
    /// Its native batch, when its items were accepted.
    pub native: Option<BatchView>,
}

impl OpenAiBatchView {
    /// Its status, from the native batch's state and how it was ended.
    #[must_use]
    pub fn status(&self) -> OpenAiBatchStatus {
        if !self.batch.errors.is_empty() {
            return OpenAiBatchStatus::Failed;
        }
        let Some(native) = &self.native else { return OpenAiBatchStatus::Validating };
        match (native.state(), native.batch.ended) {
            (BatchState::InProgress, Some((BatchEnd::Canceled, _))) => OpenAiBatchStatus::Cancelling,
            (BatchState::InProgress, Some((BatchEnd::Expired, _))) => OpenAiBatchStatus::Finalizing,
            (BatchState::InProgress, None) => OpenAiBatchStatus::InProgress,
            (BatchState::Completed, _) => OpenAiBatchStatus::Completed,
            (BatchState::Expired, _) => OpenAiBatchStatus::Expired,
            (BatchState::Canceled, _) => OpenAiBatchStatus::Cancelled,
        }
    }

    /// `request_counts`: every item, the succeeded ones, and every other final one.
    #[must_use]
    pub fn request_counts(&self) -> (u64, u64, u64) {
        self.native.as_ref().map_or((0, 0, 0), |native| {
            let counts = native.figures.counts;
            (counts.total, counts.succeeded, counts.failed + counts.canceled)
        })
    }

    /// Its output file, when it has a line: one per succeeded item.
    #[must_use]
    pub fn output_file(&self) -> Option<OpenAiFileId> {
        let (_, completed, _) = self.request_counts();
        (completed > 0).then_some(OpenAiFileId::Output(self.batch.id))
    }

    /// Its error file, when it has a line: one per other final item.
    #[must_use]
    pub fn error_file(&self) -> Option<OpenAiFileId> {
        let (_, _, failed) = self.request_counts();
        (failed > 0).then_some(OpenAiFileId::Errors(self.batch.id))
    }
}

/// A file of the Batch API: one uploaded, or a batch's output or error file, read from its
/// items when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenAiFileId {
    /// An uploaded file.
    Upload(FileId),
    /// The succeeded items of a batch.
    Output(BatchId),
    /// The other final items of a batch.
    Errors(BatchId),
}

impl OpenAiFileId {
    /// Parses [`fmt::Display`]'s form; `None` for anything else.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        if let Some(batch) = text.strip_prefix("file-output-") {
            return BatchId::parse(batch).ok().map(OpenAiFileId::Output);
        }
        if let Some(batch) = text.strip_prefix("file-errors-") {
            return BatchId::parse(batch).ok().map(OpenAiFileId::Errors);
        }
        text.strip_prefix("file-").and_then(|id| FileId::parse(id).ok()).map(OpenAiFileId::Upload)
    }
}

impl fmt::Display for OpenAiFileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenAiFileId::Upload(id) => write!(f, "file-{id}"),
            OpenAiFileId::Output(batch) => write!(f, "file-output-{batch}"),
            OpenAiFileId::Errors(batch) => write!(f, "file-errors-{batch}"),
        }
    }
}

/// Checks an uploaded file: `purpose` `batch`, at most 100 MB, UTF-8, and JSON Lines of 1 to
/// 50,000 objects (blank lines are allowed and counted).
///
/// # Errors
/// [`InvalidRequest`] naming `purpose` or `file`, with the first line at fault.
pub fn check_batch_file(purpose: &str, content: &[u8]) -> Result<(), InvalidRequest> {
    if purpose != BATCH_PURPOSE {
        return Err(InvalidRequest::param("purpose", format!("`purpose` must be `{BATCH_PURPOSE}`")));
    }
    let invalid = |message: String| Err(InvalidRequest::param("file", message));
    if content.len() > MAX_BATCH_FILE_BYTES {
        return invalid(format!("the file must be at most {MAX_BATCH_FILE_BYTES} bytes"));
    }
    let Ok(text) = std::str::from_utf8(content) else { return invalid("the file must be UTF-8 text".into()) };
    let mut objects = 0;
    for (index, line) in text.lines().enumerate() {
        if index >= MAX_BATCH_FILE_LINES {
            return invalid(format!("the file must have at most {MAX_BATCH_FILE_LINES} lines"));
        }
        if line.trim().is_empty() {
            continue;
        }
        if !matches!(serde_json::from_str::<serde_json::Value>(line), Ok(serde_json::Value::Object(_))) {
            return invalid(format!("line {} is not a JSON object: the file must be JSON Lines", index + 1));
        }
        objects += 1;
    }
    if objects == 0 {
        return invalid("the file has no request".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::batch::{Batch, BatchCounts, BatchFigures};

    use super::*;

    fn view(errors: bool, native: Option<(BatchCounts, Option<BatchEnd>)>) -> OpenAiBatchView {
        let at = OffsetDateTime::UNIX_EPOCH;
        let id = BatchId::new_at(at);
        let user_id = UserId::new_at(at);
        let batch = OpenAiBatch {
            id,
            user_id,
            key_prefix: None,
            input_file_id: FileId::new_at(at),
            endpoint: "/v1/videos".into(),
            completion_window: COMPLETION_WINDOW.into(),
            created_at: at,
            metadata: BTreeMap::new(),
            errors: if errors {
                vec![LineError { code: "invalid_request".into(), message: "no".into(), param: None, line: Some(1) }]
            } else {
                Vec::new()
            },
        };
        let native = native.map(|(counts, ended)| BatchView {
            batch: Batch {
                id,
                user_id,
                key_prefix: None,
                created_at: at,
                expires_at: at,
                webhook_url: None,
                metadata: BTreeMap::new(),
                ended: ended.map(|end| (end, at)),
            },
            figures: BatchFigures { counts, ..BatchFigures::default() },
        });
        OpenAiBatchView { batch, native }
    }

    #[test]
    fn every_status_follows_the_native_state_and_how_it_ended() {
        let running = BatchCounts { total: 3, running: 1, succeeded: 1, failed: 1, ..BatchCounts::default() };
        let done = BatchCounts { total: 3, succeeded: 2, canceled: 1, ..BatchCounts::default() };
        let cases = [
            (view(true, None), OpenAiBatchStatus::Failed),
            (view(false, None), OpenAiBatchStatus::Validating),
            (view(false, Some((running, None))), OpenAiBatchStatus::InProgress),
            (view(false, Some((running, Some(BatchEnd::Expired)))), OpenAiBatchStatus::Finalizing),
            (view(false, Some((running, Some(BatchEnd::Canceled)))), OpenAiBatchStatus::Cancelling),
            (view(false, Some((done, None))), OpenAiBatchStatus::Completed),
            (view(false, Some((done, Some(BatchEnd::Expired)))), OpenAiBatchStatus::Expired),
            (view(false, Some((done, Some(BatchEnd::Canceled)))), OpenAiBatchStatus::Cancelled),
        ];
        for (view, status) in cases {
            assert_eq!(view.status(), status);
        }
        let finished = view(false, Some((done, None)));
        assert_eq!(finished.request_counts(), (3, 2, 1), "canceled items count as failed");
        assert!(finished.output_file().is_some() && finished.error_file().is_some());
        let clean = view(false, Some((BatchCounts { total: 1, succeeded: 1, ..BatchCounts::default() }, None)));
        assert_eq!(clean.error_file(), None, "a file with no line is none");
        assert_eq!(view(false, None).output_file(), None);
    }

    #[test]
    fn file_ids_name_uploads_and_batches_files() {
        let at = OffsetDateTime::UNIX_EPOCH;
        for id in [
            OpenAiFileId::Upload(FileId::new_at(at)),
            OpenAiFileId::Output(BatchId::new_at(at)),
            OpenAiFileId::Errors(BatchId::new_at(at)),
        ] {
            assert_eq!(OpenAiFileId::parse(&id.to_string()), Some(id));
        }
        assert_eq!(OpenAiFileId::parse("file-x"), None);
        assert_eq!(OpenAiFileId::parse("batch_1"), None);
    }

    #[test]
    fn a_file_must_be_json_lines_for_batches() {
        assert!(check_batch_file("batch", b"{\"a\":1}\n\n{\"b\":2}\n").is_ok());
        assert_eq!(check_batch_file("fine-tune", b"{}").unwrap_err().param.as_deref(), Some("purpose"));
        let not_json = check_batch_file("batch", b"{}\nnope\n").unwrap_err();
        assert!(not_json.message.contains("line 2"), "{}", not_json.message);
        assert!(check_batch_file("batch", b"\n\n").is_err());
        let too_many = "{}\n".repeat(MAX_BATCH_FILE_LINES + 1);
        assert!(check_batch_file("batch", too_many.as_bytes()).is_err());
    }
}
