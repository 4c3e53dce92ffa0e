//! OpenAI's Batch API on the wire: an input file's lines read into the domain's items, each body
//! mapped as its endpoint maps a single request (`wire`); batches in OpenAI's shape; the lines
//! of a batch's output and error files.

use genjobs_api::openai::{ImageData, ImagesRequest, ImagesResponse, ResponseFormat};
use genjobs_api::openai_batches::{
    BatchErrors, BatchInputLine, BatchLineError, BatchObject, BatchOutputLine, BatchRequestError, BatchResponse,
    FileObject, RequestCounts,
};
use genjobs_domain::batch::BatchEnd;
use genjobs_domain::catalog::Catalog;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::job::{Job, JobState};
use genjobs_domain::modality::Modality;
use genjobs_domain::openai_batch::{
    BATCH_ENDPOINTS, BatchFile, LineError, MAX_LINE_ERRORS, OpenAiBatchStatus, OpenAiBatchView, OpenAiFileId,
};
use genjobs_domain::request::GenerationRequest;
use genjobs_domain::usecases::{BatchItemRequest, LinedItem, Submission};
use serde_json::Value;
use time::OffsetDateTime;

use super::wire::{images_into_domain, read_video_request, video_error_code, video_into_domain, video_object};
use crate::dto::requests::{read, received};
use crate::dto::responses::output_url;
use crate::links::OutputLinks;

/// Reads every line of an input file for `endpoint` into an item, or answers the lines at fault
/// (the first [`MAX_LINE_ERRORS`]). Blank lines are skipped but counted.
///
/// # Errors
/// The lines at fault, each named by its number from 1.
pub fn read_lines(text: &str, endpoint: &str, catalog: &Catalog) -> Result<Vec<LinedItem>, Vec<LineError>> {
    let mut items = Vec::new();
    let mut errors = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let number = index as u64 + 1;
        match read_line(line, endpoint, catalog) {
            Ok(item) => items.push(LinedItem { line: number, item }),
            Err((code, refused)) => {
                errors.push(LineError {
                    code: code.into(),
                    message: refused.message,
                    param: refused.param,
                    line: Some(number),
                });
                if errors.len() == MAX_LINE_ERRORS {
                    break;
                }
            }
        }
    }
    if errors.is_empty() { Ok(items) } else { Err(errors) }
}

type LineRefusal = (&'static str, InvalidRequest);

fn read_line(line: &str, endpoint: &str, catalog: &Catalog) -> Result<BatchItemRequest, LineRefusal> {
    let value: Value = serde_json::from_str(line)
        .map_err(|e| ("invalid_json", InvalidRequest::body(format!("the line is not JSON: {e}"))))?;
    let asked: BatchInputLine = read(&value).map_err(|refused| ("invalid_request", refused))?;
    if asked.method != "POST" {
        return Err(("invalid_method", InvalidRequest::param("method", "`method` must be `POST`")));
    }
    if !BATCH_ENDPOINTS.contains(&asked.url.as_str()) || asked.url != endpoint {
        let message = format!("`url` must be the batch's endpoint, `{endpoint}`");
        return Err(("invalid_url", InvalidRequest::param("url", message)));
    }
    let request = body_request(&asked.body, endpoint, catalog).map_err(|e| ("invalid_request", e.under("body")))?;
    let submission = Submission { request, received: received(&asked.body), idempotency: None };
    Ok(BatchItemRequest { custom_id: asked.custom_id, submission })
}

/// A line's body as the endpoint maps a single request. Images are answered as links: a
/// batch's output file holds no image bytes.
fn body_request(body: &Value, endpoint: &str, catalog: &Catalog) -> Result<GenerationRequest, InvalidRequest> {
    if endpoint == "/v1/videos" {
        let Value::Object(fields) = body else { return Err(InvalidRequest::body("the body must be a JSON object")) };
        return video_into_domain(read_video_request(fields.clone())?, catalog);
    }
    let asked: ImagesRequest = read(body)?;
    if asked.response_format == Some(ResponseFormat::B64Json) {
        return Err(InvalidRequest::param(
            "response_format",
            "a batch answers images as links: `response_format` may only be `url`",
        ));
    }
    images_into_domain(asked, catalog)
}

fn unix(at: OffsetDateTime) -> i64 {
    at.unix_timestamp()
}

/// OpenAI's `Batch` of `view`.
#[must_use]
pub fn batch_object(view: &OpenAiBatchView) -> BatchObject {
    let batch = &view.batch;
    let status = view.status();
    let native = view.native.as_ref();
    let finished = native.and_then(genjobs_domain::batch::BatchView::finished_at).map(unix);
    let ended = |end: BatchEnd| {
        native.and_then(|native| native.batch.ended).filter(|(how, _)| *how == end).map(|(_, at)| unix(at))
    };
    let (total, completed, failed) = view.request_counts();
    let errors = (!batch.errors.is_empty()).then(|| BatchErrors {
        object: "list".to_owned(),
        data: batch
            .errors
            .iter()
            .map(|e| BatchLineError {
                code: e.code.clone(),
                message: e.message.clone(),
                param: e.param.clone(),
                line: e.line,
            })
            .collect(),
    });
    BatchObject {
        id: batch.id.to_string(),
        object: "batch".to_owned(),
        endpoint: batch.endpoint.clone(),
        errors,
        input_file_id: OpenAiFileId::Upload(batch.input_file_id).to_string(),
        completion_window: batch.completion_window.clone(),
        status: status.as_str().to_owned(),
        output_file_id: view.output_file().map(|id| id.to_string()),
        error_file_id: view.error_file().map(|id| id.to_string()),
        created_at: unix(batch.created_at),
        in_progress_at: native.map(|native| unix(native.batch.created_at)),
        expires_at: native.map(|native| unix(native.batch.expires_at)),
        finalizing_at: ended(BatchEnd::Expired),
        completed_at: finished.filter(|_| status == OpenAiBatchStatus::Completed),
        failed_at: (status == OpenAiBatchStatus::Failed).then(|| unix(batch.created_at)),
        expired_at: finished.filter(|_| status == OpenAiBatchStatus::Expired),
        cancelling_at: ended(BatchEnd::Canceled),
        cancelled_at: finished.filter(|_| status == OpenAiBatchStatus::Cancelled),
        request_counts: RequestCounts { total, completed, failed },
        metadata: batch.metadata.clone(),
    }
}

/// OpenAI's `FileObject` of an uploaded file.
#[must_use]
pub fn file_object(file: &BatchFile) -> FileObject {
    FileObject {
        id: OpenAiFileId::Upload(file.id).to_string(),
        object: "file".to_owned(),
        bytes: file.bytes,
        created_at: unix(file.created_at),
        filename: file.filename.clone(),
        purpose: "batch".to_owned(),
        status: "processed".to_owned(),
    }
}

/// OpenAI's `FileObject` of a batch's output or error file of `bytes` bytes.
#[must_use]
pub fn batch_file_object(id: OpenAiFileId, view: &OpenAiBatchView, bytes: u64) -> FileObject {
    let kind = if matches!(id, OpenAiFileId::Errors(_)) { "error" } else { "output" };
    FileObject {
        id: id.to_string(),
        object: "file".to_owned(),
        bytes,
        created_at: unix(view.batch.created_at),
        filename: format!("batch_{}_{kind}.jsonl", view.batch.id),
        purpose: "batch_output".to_owned(),
        status: "processed".to_owned(),
    }
}

/// The line of `job` in its batch's output file (`errors` false) or error file (`errors` true),
/// or `None` when it belongs to the other file.
#[must_use]
pub fn output_line(job: &Job, errors: bool, links: &OutputLinks<'_>) -> Option<BatchOutputLine> {
    let custom_id = job.batch().map(|place| place.custom_id.clone()).unwrap_or_default();
    let id = format!("batch_req_{}", job.id());
    let succeeded = job.state() == JobState::Succeeded;
    if succeeded == errors {
        return None;
    }
    if errors {
        let error = match job.error() {
            Some(e) => BatchRequestError { code: video_error_code(e.code), message: e.message.clone() },
            None => {
                BatchRequestError { code: "canceled".to_owned(), message: format!("job {} was canceled", job.id()) }
            }
        };
        return Some(BatchOutputLine { id, custom_id, response: None, error: Some(error) });
    }
    let body = match job.modality() {
        Modality::Video => serde_json::to_value(video_object(job)),
        _ => {
            let data = job
                .outputs()
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(index, item)| ImageData::Url { url: output_url(job, index, item, links) })
                .collect();
            serde_json::to_value(ImagesResponse { created: unix(job.created_at()), data })
        }
    }
    .unwrap_or_default();
    let response = BatchResponse { status_code: 200, request_id: job.id().to_string(), body };
    Some(BatchOutputLine { id, custom_id, response: Some(response), error: None })
}
