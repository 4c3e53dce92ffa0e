//! The handlers of the OpenAI-compatible edge: each reads OpenAI's request, calls the same use
//! case as `/api/v1`, and answers in OpenAI's shape.

use std::pin::pin;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header::RANGE;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use base64::Engine;
use genjobs_api::openai::{
    ImageData, ImagesRequest, ImagesResponse, ModelList, ModelObject, ResponseFormat, VideoDeleted, VideoList,
    VideoObject, VideoRequest,
};
use genjobs_domain::ids::JobId;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::job::{Job, JobErrorCode, JobState};
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{KeptPage, PageOrder};
use genjobs_domain::request::ReceivedRequest;
use genjobs_domain::usecases::{
    Caller, IdempotencyKey, MAX_KEPT_PAGE, MAX_WAIT_SECS, OutputContentError, OutputReadError, Submission,
};
use serde_json::Value;

use super::error::OpenAiError;
use super::wire::{images_into_domain, read_video_request, video_into_domain, video_object};
use crate::AppState;
use crate::auth::{Authenticated, presented_key};
use crate::body::read_json;
use crate::download::{file_response, parse_range, range_not_satisfiable};
use crate::dto::requests::{fingerprint, read, received};
use crate::dto::responses::output_url;
use crate::error::ApiError;
use crate::form::{ImageLimits, is_form, read_image_form};
use crate::handlers::idempotency_key;
use crate::query::{Query, integer_param};
use crate::waiting::{key_revoked, wait_for_job};

type Handled = Result<HttpResponse, OpenAiError>;

/// What every `POST` of the edge says of its `Idempotency-Key`.
pub(super) const IDEMPOTENCY_KEY_DOC: &str = "1 to 255 visible ASCII characters: a retry with the same key and the same fields answers as the first call did and holds nothing more";
type Caught = Result<Authenticated, ApiError>;

/// The most one image is read into memory to answer `b64_json`.
const MAX_INLINE_IMAGE_BYTES: u64 = 32 << 20;
/// The largest video streamed from a provider's link (a stored copy is sent whatever its size).
const MAX_VIDEO_CONTENT_BYTES: u64 = 512 << 20;
/// Videos in a page of `videos.list` when the client names no `limit`.
const DEFAULT_VIDEO_PAGE: u64 = 20;

fn job_id(path: &str) -> Result<JobId, ApiError> {
    JobId::parse(path).map_err(|_| ApiError::job_not_found())
}

/// The `Idempotency-Key` of a request to `endpoint` with `fields`, and its fingerprint: the same
/// fields and values make the same fingerprint, whatever their order or a form's boundary.
pub(super) fn idempotency(
    req: &HttpRequest,
    endpoint: &str,
    fields: &Value,
) -> Result<Option<(IdempotencyKey, String)>, InvalidRequest> {
    Ok(idempotency_key(req)?.map(|key| (key, fingerprint(endpoint, fields))))
}

/// Accepts the job, or finds the one an earlier request with the same idempotency key accepted.
pub(super) async fn submit(
    state: &AppState,
    caller: &Caller,
    submission: Submission,
    req: &HttpRequest,
) -> Result<JobId, ApiError> {
    let receipt = state
        .services
        .submissions
        .submit(caller, submission)
        .await
        .map_err(|e| ApiError::from_submit(e, state.services.settings().poll_interval))?;
    req.extensions_mut().insert(receipt.job_id);
    Ok(receipt.job_id)
}

/// Waits until the job is final. The job is the service's from its acceptance: a client that
/// goes away stops only this wait, never the job, which runs, is charged once and stays in the
/// caller's jobs.
/// A key revoked or expired meanwhile ends the wait with 401 (the job goes on, and is charged as
/// any other).
async fn final_job(state: &AppState, caller: &Caller, id: JobId, req: &HttpRequest) -> Result<Job, ApiError> {
    let mut revoked = pin!(key_revoked(state.services.accounts.clone(), presented_key(req), id));
    loop {
        let waited = wait_for_job(&state.services.reads, caller, id, Duration::from_secs(MAX_WAIT_SECS));
        let job = tokio::select! {
            job = waited => job?,
            () = state.drain.started() => {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "SERVICE_UNAVAILABLE",
                    format!("the service is stopping; job {id} goes on and can be read at /api/v1/jobs/{id}"),
                ));
            }
            () = &mut revoked => return Err(ApiError::invalid_key()),
        };
        if job.state().is_final() {
            return Ok(job);
        }
    }
}

/// The error a synchronous request answers for a job that did not succeed.
fn unsuccessful(job: &Job) -> ApiError {
    let id = job.id();
    match job.error() {
        Some(error) if matches!(error.code, JobErrorCode::UpstreamRejected | JobErrorCode::ContentRefused) => {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", error.code.as_str(), &error.message)
        }
        _ if job.state() == JobState::Canceled => {
            ApiError::new(StatusCode::CONFLICT, "canceled", "JOB_CANCELED", format!("job {id} was canceled"))
        }
        Some(error) => ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", error.code.as_str(), &error.message),
        None => ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", "UPSTREAM_FAILED", format!("job {id} failed")),
    }
}

fn unreadable(e: OutputContentError) -> ApiError {
    match e {
        OutputContentError::Job(e) => e.into(),
        OutputContentError::NoSuchOutput(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "CONTENT_NOT_READY", "the video has no content yet")
        }
        OutputContentError::RangeNotSatisfiable { size } => OutputReadError::RangeNotSatisfiable { size }.into(),
        OutputContentError::Unreadable(reason) => {
            tracing::warn!(%reason, "an output could not be read");
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "OUTPUT_UNAVAILABLE",
                "the output cannot be read now",
            )
        }
    }
}

/// Create images (OpenAI's `images.generate`)
///
/// Accepts the job as `/api/v1/images/generations` does, waits for it, and answers with its
/// images as links or base64. A client that goes away stops only its wait: the job runs, is
/// charged once, and is listed in `GET /api/v1/jobs`.
#[utoipa::path(post, path = "/openai/v1/images/generations", tag = "openai", operation_id = "openai_create_image",
    security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = IDEMPOTENCY_KEY_DOC)),
    request_body(content = ImagesRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The job succeeded: its images", body = ImagesResponse),
        (status = 400, description = "Invalid input (`param` names it), or the provider refused it", body = super::error::Envelope),
        (status = 402, description = "Not enough credits", body = super::error::Envelope),
        (status = 409, description = "The job was canceled while the request waited, or the Idempotency-Key was used with another body", body = super::error::Envelope),
        (status = 502, description = "The job failed at the provider", body = super::error::Envelope),
    ))]
pub async fn create_image(
    state: web::Data<AppState>,
    caller: Caught,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let caller = caller?.0;
    let body = read_json(&req, payload).await?;
    let asked: ImagesRequest = read(&body)?;
    let format = asked.response_format.unwrap_or_default();
    let request = images_into_domain(asked, &state.services.submissions.catalog())?;
    let idempotency = idempotency(&req, "openai/images/generations", &body)?;
    let submission = Submission { request, received: received(&body), idempotency };
    let id = submit(&state, &caller, submission, &req).await?;
    images_of(&state, &caller, id, format, &req).await.map_err(OpenAiError::after_acceptance)
}

/// Waits for the image job `id` and answers its images, as links or base64; an error when it
/// did not succeed.
pub(super) async fn images_of(
    state: &AppState,
    caller: &Caller,
    id: JobId,
    format: ResponseFormat,
    req: &HttpRequest,
) -> Handled {
    let job = final_job(state, caller, id, req).await?;
    let Some(outputs) = job.outputs().filter(|_| job.state() == JobState::Succeeded) else {
        return Err(unsuccessful(&job).into());
    };
    let mut data = Vec::with_capacity(outputs.len());
    let links = state.links.for_request(req, time::OffsetDateTime::now_utc());
    for (index, item) in outputs.iter().enumerate() {
        data.push(match format {
            ResponseFormat::Url => ImageData::Url { url: output_url(&job, index, item, &links) },
            ResponseFormat::B64Json => {
                let bytes = state
                    .services
                    .reads
                    .output_bytes(caller, id, index, MAX_INLINE_IMAGE_BYTES)
                    .await
                    .map_err(unreadable)?;
                ImageData::B64Json { b64_json: base64::engine::general_purpose::STANDARD.encode(&bytes) }
            }
        });
    }
    Ok(HttpResponse::Ok().json(ImagesResponse { created: job.created_at().unix_timestamp(), data }))
}

/// A form with no file at all: `videos.create`'s.
const NO_IMAGES: ImageLimits = ImageLimits { names: &[], max_files: 0, max_bytes: 0, images_only: true };

/// Create a video (OpenAI's `videos.create`)
///
/// JSON, or `multipart/form-data` as OpenAI's clients send it. Answers at once with the
/// `Video` object; the job runs as `/api/v1/video/generations` runs it.
#[utoipa::path(post, path = "/openai/v1/videos", tag = "openai", operation_id = "openai_create_video",
    security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = IDEMPOTENCY_KEY_DOC)),
    request_body(content(
        (VideoRequest = "application/json"),
        (VideoRequest = "multipart/form-data"),
    )),
    responses(
        (status = 200, description = "Accepted: the video's job is queued, its credits held", body = VideoObject),
        (status = 400, description = "Invalid input (`param` names it)", body = super::error::Envelope),
        (status = 402, description = "Not enough credits", body = super::error::Envelope),
        (status = 409, description = "The Idempotency-Key was used with another body", body = super::error::Envelope),
        (status = 415, description = "Body neither JSON nor a form", body = super::error::Envelope),
    ))]
pub async fn create_video(
    state: web::Data<AppState>,
    caller: Caught,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let caller = caller?.0;
    let fields = if is_form(&req) {
        read_image_form(&req, payload, NO_IMAGES).await?.fields
    } else {
        match read_json(&req, payload).await? {
            Value::Object(fields) => fields,
            _ => return Err(InvalidRequest::body("the body must be a JSON object").into()),
        }
    };
    let received = ReceivedRequest::new(fields.clone());
    let idempotency = idempotency(&req, "openai/videos", &Value::Object(fields.clone()))?;
    let request = video_into_domain(read_video_request(fields)?, &state.services.submissions.catalog())?;
    let id = submit(&state, &caller, Submission { request, received, idempotency }, &req).await?;
    let job = state.services.reads.job(&caller, id).await.map_err(|e| OpenAiError::from(e).after_acceptance())?;
    Ok(HttpResponse::Ok().json(video_object(&job)))
}

async fn video_job(state: &AppState, caller: &Caller, path: &str, req: &HttpRequest) -> Result<Job, ApiError> {
    let id = job_id(path)?;
    req.extensions_mut().insert(id);
    let job = state.services.removals.kept_job(caller, id).await?;
    if job.modality() != Modality::Video {
        return Err(ApiError::job_not_found());
    }
    Ok(job)
}

/// Retrieve a video (OpenAI's `videos.retrieve`)
///
/// While it runs, `openai-poll-after-ms` names the interval to poll at.
#[utoipa::path(get, path = "/openai/v1/videos/{id}", tag = "openai", operation_id = "openai_get_video",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The video's id: its job id")),
    responses(
        (status = 200, description = "The video", body = VideoObject),
        (status = 403, description = "Another user's video", body = super::error::Envelope),
        (status = 404, description = "No such video", body = super::error::Envelope),
    ))]
pub async fn get_video(
    state: web::Data<AppState>,
    caller: Caught,
    path: web::Path<String>,
    req: HttpRequest,
) -> Handled {
    let caller = caller?.0;
    let job = video_job(&state, &caller, &path, &req).await?;
    let mut response = HttpResponse::Ok();
    if !job.state().is_final() {
        // OpenAI's clients poll at the interval this header names.
        let poll_ms = state.services.settings().poll_interval.as_millis().max(1);
        response.insert_header(("openai-poll-after-ms", poll_ms.to_string()));
    }
    Ok(response.json(video_object(&job)))
}

/// List videos (OpenAI's `videos.list`)
///
/// The caller's videos, newest first unless `order=asc`, without those deleted here; `after`
/// is the `last_id` of the page before.
#[utoipa::path(get, path = "/openai/v1/videos", tag = "openai", operation_id = "openai_list_videos",
    security(("api_key" = [])),
    params(
        ("limit" = Option<u64>, Query, description = "1 to 100 videos; 20 when absent"),
        ("after" = Option<String>, Query, description = "The page starts after this video, in `order`"),
        ("order" = Option<String>, Query, description = "`desc` (newest first, the default) or `asc`"),
    ),
    responses(
        (status = 200, description = "A page of the caller's videos", body = VideoList),
        (status = 400, description = "A `limit`, `after` or `order` out of range (`param` names it)", body = super::error::Envelope),
    ))]
pub async fn list_videos(state: web::Data<AppState>, caller: Caught, query: Query) -> Handled {
    let caller = caller?.0;
    let limit = integer_param(&query, "limit", 1, MAX_KEPT_PAGE as u64)?.unwrap_or(DEFAULT_VIDEO_PAGE);
    let after = query
        .get("after")
        .map(|after| JobId::parse(after).map_err(|_| InvalidRequest::param("after", "`after` must be a video id")))
        .transpose()?;
    let order = match query.get("order").map(String::as_str) {
        None | Some("desc") => PageOrder::Descending,
        Some("asc") => PageOrder::Ascending,
        Some(_) => return Err(InvalidRequest::param("order", "`order` must be `asc` or `desc`").into()),
    };
    let page = KeptPage { modality: Modality::Video, after, order, limit: usize::try_from(limit).unwrap_or(1) };
    let listing = state.services.removals.kept_page(&caller, page).await.map_err(ApiError::from)?;
    let data: Vec<VideoObject> = listing.jobs.iter().map(video_object).collect();
    Ok(HttpResponse::Ok().json(VideoList {
        object: "list".to_owned(),
        first_id: data.first().map(|video| video.id.clone()),
        last_id: data.last().map(|video| video.id.clone()),
        has_more: listing.has_more,
        data,
    }))
}

/// Delete a video (OpenAI's `videos.delete`)
///
/// A video that is not final is canceled first, and its credits released. Afterwards the video
/// is neither listed nor read here (404), while its job, credits and ledger stay on `/api/v1`.
#[utoipa::path(delete, path = "/openai/v1/videos/{id}", tag = "openai", operation_id = "openai_delete_video",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The video's id: its job id")),
    responses(
        (status = 200, description = "Deleted", body = VideoDeleted),
        (status = 403, description = "Another user's video", body = super::error::Envelope),
        (status = 404, description = "No such video, or deleted before", body = super::error::Envelope),
    ))]
pub async fn delete_video(
    state: web::Data<AppState>,
    caller: Caught,
    path: web::Path<String>,
    req: HttpRequest,
) -> Handled {
    let caller = caller?.0;
    let id = video_job(&state, &caller, &path, &req).await?.id();
    state.services.removals.remove(&caller, id).await.map_err(ApiError::from)?;
    Ok(HttpResponse::Ok().json(VideoDeleted { id: id.to_string(), object: "video.deleted".to_owned(), deleted: true }))
}

/// Download a video's content (OpenAI's `videos.download_content`)
///
/// The MP4 of a completed video, streamed; one byte range (`Range: bytes=…`) is served with 206
/// when the service keeps a copy. `variant` may only be `video`: no thumbnails are made here.
#[utoipa::path(get, path = "/openai/v1/videos/{id}/content", tag = "openai", operation_id = "openai_video_content",
    security(("api_key" = [])),
    params(
        ("id" = String, Path, description = "The video's id: its job id"),
        ("variant" = Option<String>, Query, description = "Only `video`"),
        ("Range" = Option<String>, Header, description = "One byte range, e.g. `bytes=0-1023`"),
    ),
    responses(
        (status = 200, description = "The MP4", content_type = "video/mp4", body = Vec<u8>),
        (status = 206, description = "The range asked for", content_type = "video/mp4", body = Vec<u8>),
        (status = 416, description = "The range lies outside the file", body = super::error::Envelope),
        (status = 400, description = "A variant other than `video`", body = super::error::Envelope),
        (status = 403, description = "Another user's video", body = super::error::Envelope),
        (status = 404, description = "No such video, or it has no content yet", body = super::error::Envelope),
        (status = 502, description = "The content cannot be read from the provider now", body = super::error::Envelope),
    ))]
pub async fn video_content(
    state: web::Data<AppState>,
    caller: Caught,
    path: web::Path<String>,
    query: Query,
    req: HttpRequest,
) -> Handled {
    let caller = caller?.0;
    if query.get("variant").is_some_and(|variant| variant != "video") {
        return Err(InvalidRequest::param("variant", "only the `video` variant is available").into());
    }
    let job = video_job(&state, &caller, &path, &req).await?;
    let range = req.headers().get(RANGE).and_then(|v| v.to_str().ok()).and_then(parse_range);
    let opened = match state.services.reads.open_output(&caller, job.id(), 0, range, MAX_VIDEO_CONTENT_BYTES).await {
        Ok(opened) => opened,
        Err(OutputContentError::RangeNotSatisfiable { size }) => {
            let refused = ApiError::from(OutputReadError::RangeNotSatisfiable { size });
            return Ok(range_not_satisfiable(refused, size));
        }
        Err(e) => return Err(unreadable(e).into()),
    };
    Ok(file_response(opened.served_as, opened.range, opened.size).streaming(opened.body))
}

/// List models (OpenAI's `models.list`)
///
/// The catalog's models, images and videos alike.
#[utoipa::path(get, path = "/openai/v1/models", tag = "openai", operation_id = "openai_list_models",
    security(("api_key" = [])),
    responses((status = 200, description = "The catalog's models", body = ModelList)))]
pub async fn list_models(state: web::Data<AppState>, caller: Caught) -> Handled {
    let caller = caller?;
    let submissions = &state.services.submissions;
    let data = submissions
        .catalog()
        .models_of(None)
        .filter(|model| caller.0.may_use(&model.id))
        .map(|model| ModelObject {
            id: model.id.to_string(),
            object: "model".to_owned(),
            created: 0,
            owned_by: submissions.provider_of(model).to_owned(),
        })
        .collect();
    Ok(HttpResponse::Ok().json(ModelList { object: "list".to_owned(), data }))
}

/// 405 in OpenAI's shape.
pub async fn method_not_allowed() -> Handled {
    Err(ApiError::method_not_allowed().into())
}

/// Another method on `/openai/v1/videos/{id}`: 405 for a video's path, but 404 when `{id}` cannot
/// name a video, as for OpenAI's `POST /videos/edits`, `/videos/extensions` and
/// `/videos/characters`, which are other calls, not served here.
pub async fn video_method_not_allowed(path: web::Path<String>) -> Handled {
    if JobId::parse(&path).is_err() {
        return Err(ApiError::route_not_found().into());
    }
    method_not_allowed().await
}
