//! The files of OpenAI's Batch API: `files.create` (a JSONL input file, `purpose=batch`),
//! `files.retrieve` and `files.content`, for uploaded files and for batches' output and error
//! files, which are read from the batch's items when asked for, streamed a page at a time.

use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::{Stream, StreamExt, stream};
use genjobs_api::openai_batches::FileObject;
use genjobs_domain::ids::{BatchId, JobId};
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::openai_batch::{MAX_BATCH_FILE_BYTES, OpenAiFileId};
use genjobs_domain::usecases::{BatchPage, Caller, OpenAiBatchError};

use super::batch_wire::{batch_file_object, file_object, output_line};
use super::error::OpenAiError;
use crate::AppState;
use crate::auth::Authenticated;
use crate::error::ApiError;
use crate::form::{ImageLimits, read_image_form};
use crate::handlers::{idempotency_key, now};

type Handled = Result<HttpResponse, OpenAiError>;
type Caught = Result<Authenticated, ApiError>;

/// A batch's final items read at a time while its output or error file is written.
const LINES_PAGE: usize = 500;

/// The form of `files.create`: one file, named `file`, of any content.
const INPUT_FILE: ImageLimits =
    ImageLimits { names: &["file"], max_files: 1, max_bytes: MAX_BATCH_FILE_BYTES, images_only: false };

fn file_id(path: &str) -> Result<OpenAiFileId, ApiError> {
    OpenAiFileId::parse(path).ok_or_else(|| OpenAiBatchError::NotFound("file").into())
}

/// A batch's file is not found when its batch is not: another user's batch is no file of theirs.
fn as_file(e: OpenAiBatchError) -> ApiError {
    match e {
        OpenAiBatchError::NotFound(_) => OpenAiBatchError::NotFound("file").into(),
        other => other.into(),
    }
}

/// Upload a file (OpenAI's `files.create`)
///
/// A `multipart/form-data` body as OpenAI's clients send it: `purpose` `batch` and `file`, a
/// JSON Lines file of 1 to 50,000 requests and at most 100 MB, checked line by line when it
/// arrives (each line a JSON object; what a line asks for is checked when a batch is made of it).
#[utoipa::path(post, path = "/openai/v1/files", tag = "openai", operation_id = "openai_create_file",
    security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a retry with the same key and file answers the file the first call kept, and keeps nothing more")),
    request_body(content = String, content_type = "multipart/form-data", description = "`purpose`: `batch`; `file`: the JSONL file"),
    responses(
        (status = 200, description = "The file, kept", body = FileObject),
        (status = 400, description = "No file, a `purpose` other than `batch`, or a file that is not JSON Lines of at most 50,000 lines (`param` names it)", body = super::error::Envelope),
        (status = 409, description = "The Idempotency-Key was used with another file", body = super::error::Envelope),
        (status = 413, description = "The file is over 100 MB", body = super::error::Envelope),
        (status = 415, description = "The body is not a form", body = super::error::Envelope),
    ))]
pub async fn create_file(
    state: web::Data<AppState>,
    caller: Caught,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let caller = caller?.0;
    let mut form = read_image_form(&req, payload, INPUT_FILE).await?;
    let Some(file) = form.images.pop() else {
        return Err(InvalidRequest::param("file", "`file` is required: the JSONL file").into());
    };
    let purpose = match form.fields.remove("purpose") {
        Some(serde_json::Value::String(purpose)) => purpose,
        _ => return Err(InvalidRequest::param("purpose", "`purpose` is required: `batch`").into()),
    };
    let filename = file.filename.unwrap_or_else(|| "input.jsonl".to_owned());
    let idempotency = idempotency_key(&req)?;
    let uploads = &state.services.openai_batches;
    let kept = uploads.upload(&caller, filename, &purpose, file.bytes, idempotency).await.map_err(ApiError::from)?;
    Ok(HttpResponse::Ok().json(file_object(&kept)))
}

/// Retrieve a file (OpenAI's `files.retrieve`)
///
/// An uploaded file, or a batch's output or error file (its size counted from its lines now).
#[utoipa::path(get, path = "/openai/v1/files/{id}", tag = "openai", operation_id = "openai_get_file",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The file's id")),
    responses(
        (status = 200, description = "The file", body = FileObject),
        (status = 404, description = "No such file, or another user's", body = super::error::Envelope),
    ))]
pub async fn get_file(
    state: web::Data<AppState>,
    caller: Caught,
    path: web::Path<String>,
    req: HttpRequest,
) -> Handled {
    let caller = caller?.0;
    let uses = &state.services.openai_batches;
    let (batch, id) = match file_id(&path)? {
        OpenAiFileId::Upload(id) => {
            let file = uses.file(&caller, id).await.map_err(ApiError::from)?;
            return Ok(HttpResponse::Ok().json(file_object(&file)));
        }
        id @ (OpenAiFileId::Output(batch) | OpenAiFileId::Errors(batch)) => (batch, id),
    };
    let view = uses.batch(&caller, batch).await.map_err(as_file)?;
    let has_lines = match id {
        OpenAiFileId::Output(_) => view.output_file().is_some(),
        _ => view.error_file().is_some(),
    };
    if !has_lines {
        return Err(ApiError::from(OpenAiBatchError::NotFound("file")).into());
    }
    let base = state.links.base_of(&req);
    let mut lines = Box::pin(batch_lines(state.clone(), caller, batch, id, base, None));
    let mut bytes = 0u64;
    while let Some(chunk) = lines.next().await {
        bytes += chunk.map_err(ApiError::from)?.len() as u64;
    }
    Ok(HttpResponse::Ok().json(batch_file_object(id, &view, bytes)))
}

/// Retrieve a file's content (OpenAI's `files.content`)
///
/// An uploaded file's bytes; a batch's output or error file as JSON Lines, one line per final
/// item in the batch's order, streamed (memory does not grow with the batch).
#[utoipa::path(get, path = "/openai/v1/files/{id}/content", tag = "openai", operation_id = "openai_file_content",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The file's id")),
    responses(
        (status = 200, description = "The file's content", content_type = "application/jsonl", body = String),
        (status = 404, description = "No such file, or another user's", body = super::error::Envelope),
    ))]
pub async fn file_content(
    state: web::Data<AppState>,
    caller: Caught,
    path: web::Path<String>,
    req: HttpRequest,
) -> Handled {
    let caller = caller?.0;
    let uses = &state.services.openai_batches;
    let (batch, id) = match file_id(&path)? {
        OpenAiFileId::Upload(id) => {
            let content = uses.file_content(&caller, id).await.map_err(ApiError::from)?;
            return Ok(HttpResponse::Ok().content_type("application/jsonl").body(content));
        }
        id @ (OpenAiFileId::Output(batch) | OpenAiFileId::Errors(batch)) => (batch, id),
    };
    // The first page is read before answering, so that a refusal is an error response, not a
    // stream that breaks off.
    uses.batch(&caller, batch).await.map_err(as_file)?;
    let first = uses.final_items(&caller, batch, None, LINES_PAGE).await.map_err(as_file)?;
    let base = state.links.base_of(&req);
    let lines = batch_lines(state.clone(), caller, batch, id, base, Some(first));
    Ok(HttpResponse::Ok().content_type("application/jsonl").streaming(lines))
}

/// The lines of `batch`'s file `id`, a page of its final items at a time from `first` (read
/// first when `None`).
fn batch_lines(
    state: web::Data<AppState>,
    caller: Caller,
    batch: BatchId,
    id: OpenAiFileId,
    base: String,
    first: Option<BatchPage<genjobs_domain::job::Job, JobId>>,
) -> impl Stream<Item = Result<web::Bytes, OpenAiBatchError>> {
    let errors = matches!(id, OpenAiFileId::Errors(_));
    let start = match first {
        Some(page) => Next::Page(page),
        None => Next::After(None),
    };
    stream::unfold(Some(start), move |next| {
        let (state, caller, base) = (state.clone(), caller.clone(), base.clone());
        async move {
            let page = match next? {
                Next::Page(page) => page,
                Next::After(after) => {
                    match state.services.openai_batches.final_items(&caller, batch, after, LINES_PAGE).await {
                        Ok(page) => page,
                        Err(e) => {
                            tracing::warn!(batch_id = %batch, error = %e, "a batch file's lines broke off");
                            return Some((Err(e), None));
                        }
                    }
                }
            };
            let links = state.links.rooted_at(base, now());
            let mut lines = Vec::with_capacity(page.data.len() * 256);
            for line in page.data.iter().filter_map(|job| output_line(job, errors, &links)) {
                if serde_json::to_writer(&mut lines, &line).is_ok() {
                    lines.push(b'\n');
                }
            }
            let next = page.next.map(|after| Next::After(Some(after)));
            Some((Ok(web::Bytes::from(lines)), next))
        }
    })
}

/// Where the lines of a batch's file go on from.
enum Next {
    /// A page read already.
    Page(BatchPage<genjobs_domain::job::Job, JobId>),
    /// The page after this item (from the first when `None`).
    After(Option<JobId>),
}
