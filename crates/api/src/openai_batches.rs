//! OpenAI's Batch API shapes, as OpenAI's published API document describes them and the official
//! clients send and read them: `FileObject`, `CreateBatchRequest`, `Batch` and
//! `ListBatchesResponse`, and the lines of a batch's input, output and error files.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A file of the Batch API: one uploaded, or a batch's output or error file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiFile)]
pub struct FileObject {
    /// `file-…` for an uploaded file, `file-output-{batch}` or `file-errors-{batch}` for a
    /// batch's files.
    pub id: String,
    /// Always `file`.
    pub object: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Unix seconds: its upload, or its batch's creation.
    pub created_at: i64,
    /// The name it was uploaded with, or `batch_{id}_output.jsonl` / `batch_{id}_error.jsonl`.
    pub filename: String,
    /// `batch` for an uploaded file, `batch_output` for a batch's files.
    pub purpose: String,
    /// Always `processed`: a file is checked when it is uploaded.
    pub status: String,
}

/// `POST /openai/v1/batches`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = OpenAiBatchRequest)]
pub struct BatchRequest {
    /// An uploaded file of purpose `batch`. Required: missing, it is refused by its name.
    #[serde(default)]
    pub input_file_id: String,
    /// `/v1/images/generations` or `/v1/videos`; every line's `url` must be this. Required.
    #[serde(default)]
    pub endpoint: String,
    /// Only `24h`. Required.
    #[serde(default)]
    pub completion_window: String,
    /// At most 16 string pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// One line of an input file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = OpenAiBatchInputLine)]
pub struct BatchInputLine {
    /// 1 to 64 characters, unique in the file.
    pub custom_id: String,
    /// Only `POST`.
    pub method: String,
    /// The batch's endpoint.
    pub url: String,
    /// The request's body, as the endpoint takes it.
    #[schema(value_type = Object)]
    pub body: Value,
}

/// Why a line of the input file could not be an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiBatchLineError)]
pub struct BatchLineError {
    /// `invalid_json`, `invalid_request`, `invalid_url`, `invalid_method`, `invalid_custom_id` or
    /// `duplicate_custom_id`.
    pub code: String,
    /// For people.
    pub message: String,
    /// The field at fault (`body.prompt`, `url`, …), or null.
    #[schema(required = true)]
    pub param: Option<String>,
    /// The line, counted from 1; null for a fault of the file as a whole.
    #[schema(required = true)]
    pub line: Option<u64>,
}

/// A failed batch's errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiBatchErrors)]
pub struct BatchErrors {
    /// Always `list`.
    pub object: String,
    /// The first 100 lines at fault.
    pub data: Vec<BatchLineError>,
}

/// How many of a batch's requests ended how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiBatchRequestCounts)]
pub struct RequestCounts {
    /// Every request.
    pub total: u64,
    /// The succeeded ones.
    pub completed: u64,
    /// Every other final one: failed, canceled or expired.
    pub failed: u64,
}

/// OpenAI's `Batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiBatch)]
pub struct BatchObject {
    /// The batch's id: its native batch's (`/api/v1/batches/{id}`).
    pub id: String,
    /// Always `batch`.
    pub object: String,
    /// The endpoint its requests call.
    pub endpoint: String,
    /// Why it failed (its file's lines at fault); null unless `failed`.
    pub errors: Option<BatchErrors>,
    /// The file its requests came from.
    pub input_file_id: String,
    /// `24h`.
    pub completion_window: String,
    /// `validating`, `failed`, `in_progress`, `finalizing`, `completed`, `expired`, `cancelling`
    /// or `cancelled`.
    pub status: String,
    /// The file of its succeeded requests; null while it has none.
    pub output_file_id: Option<String>,
    /// The file of its other final requests; null while it has none.
    pub error_file_id: Option<String>,
    /// Unix seconds.
    pub created_at: i64,
    /// When its requests were accepted.
    pub in_progress_at: Option<i64>,
    /// When its requests not sent expire.
    pub expires_at: Option<i64>,
    /// When its window closed with requests still running.
    pub finalizing_at: Option<i64>,
    /// When it completed.
    pub completed_at: Option<i64>,
    /// When it failed.
    pub failed_at: Option<i64>,
    /// When it ended expired.
    pub expired_at: Option<i64>,
    /// When it was canceled.
    pub cancelling_at: Option<i64>,
    /// When it ended canceled.
    pub cancelled_at: Option<i64>,
    /// Its requests by outcome.
    pub request_counts: RequestCounts,
    /// The client's labels.
    pub metadata: BTreeMap<String, String>,
}

/// `GET /openai/v1/batches`: a page of the caller's batches, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiBatchList)]
pub struct BatchList {
    /// Always `list`.
    pub object: String,
    /// The batches.
    pub data: Vec<BatchObject>,
    /// The first batch's id; null for an empty page.
    pub first_id: Option<String>,
    /// The last batch's id (the `after` of the next page); null for an empty page.
    pub last_id: Option<String>,
    /// Whether more batches follow.
    pub has_more: bool,
}

/// The response of one succeeded request, in a line of the output file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiBatchResponse)]
pub struct BatchResponse {
    /// Always 200.
    pub status_code: u16,
    /// The request's job id.
    pub request_id: String,
    /// What the endpoint answers: an images response, or the Video.
    #[schema(value_type = Object)]
    pub body: Value,
}

/// Why a request did not succeed, in a line of the error file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiBatchRequestError)]
pub struct BatchRequestError {
    /// The job's error code in lower case; `canceled` for a canceled request.
    pub code: String,
    /// For people.
    pub message: String,
}

/// A line of a batch's output or error file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = OpenAiBatchOutputLine)]
pub struct BatchOutputLine {
    /// `batch_req_{job id}`.
    pub id: String,
    /// The line's `custom_id`.
    pub custom_id: String,
    /// The response, for a succeeded request; else null.
    pub response: Option<BatchResponse>,
    /// Why it did not succeed; null for a succeeded request.
    pub error: Option<BatchRequestError>,
}
