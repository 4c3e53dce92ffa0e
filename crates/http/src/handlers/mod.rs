//! The handlers: each parses its input into domain types, calls one use case, and maps the result.
//! The operators' handlers are in `admin`; keys with settings, the operators' and the users' own,
//! in `keys`.

mod admin;
mod admin_jobs;
mod batches;
mod client_webhooks;
mod files;
mod keys;
mod provider_notifications;
mod quotes;
mod reconciliation;
mod uploads;
mod usage;

pub use admin::*;
pub use admin_jobs::*;
pub use batches::*;
pub use client_webhooks::*;
pub use files::*;
pub use keys::*;
pub use provider_notifications::*;
pub use quotes::*;
pub use reconciliation::*;
pub use uploads::*;
pub use usage::*;

use std::time::Duration;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpMessage, HttpRequest, HttpResponse, Responder, web};
use actix_web_lab::sse;

use futures_util::StreamExt;
use genjobs_api::{
    Account, CancelReceipt, DataView, EventStreamItem, ImageRequest, Job, JobPage, Model, Receipt, Status, VideoRequest,
};
use genjobs_domain::ids::JobId;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::modality::Modality;
use genjobs_domain::usecases::{IdempotencyKey, JobEvent, MAX_JOBS_PAGE, MAX_WAIT_SECS, Submission};

use crate::AppState;
use crate::auth::{Authenticated, Operator, presented_key};
use crate::body::read_json;
use crate::dto::model_view;
use crate::dto::requests::{generation_request, received, request_fingerprint};
use crate::dto::responses::{
    account_view, cancel_view, event_view, job_page_view, job_view, provider_status_view, receipt_view,
};
use crate::error::ApiError;
use crate::links::OutputLinks;
use crate::query::{Query, integer_param};
use crate::telemetry::{Held, OpenConnection};
use crate::waiting::{job_events, key_revoked, wait_for_job};

type Handled = Result<HttpResponse, ApiError>;

fn job_id(path: &str) -> Result<JobId, ApiError> {
    JobId::parse(path).map_err(|_| ApiError::job_not_found())
}

/// The request's `Idempotency-Key`, if it has one.
///
/// # Errors
/// [`InvalidRequest`] naming `Idempotency-Key` for a key that is not 1 to 255 visible ASCII characters.
pub(crate) fn idempotency_key(req: &HttpRequest) -> Result<Option<IdempotencyKey>, InvalidRequest> {
    req.headers()
        .get("idempotency-key")
        .map(|value| {
            value
                .to_str()
                .map_err(|_| {
                    InvalidRequest::param("Idempotency-Key", "the Idempotency-Key header must be visible ASCII")
                })
                .and_then(IdempotencyKey::parse)
        })
        .transpose()
}

async fn generate(
    modality: Modality,
    state: &AppState,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let body = read_json(&req, payload).await?;
    let request = generation_request(modality, &body, &state.services.submissions.catalog())?;
    let idempotency = idempotency_key(&req)?.map(|key| (key, request_fingerprint(modality, &body)));
    let receipt = state
        .services
        .submissions
        .submit(&caller.0, Submission { request, received: received(&body), idempotency })
        .await
        .map_err(|e| ApiError::from_submit(e, state.services.settings().poll_interval))?;
    req.extensions_mut().insert(receipt.job_id);
    Ok(HttpResponse::Accepted().json(receipt_view(receipt)))
}

/// Submit a video generation
///
/// Accepts the request at once with `202` and a job id, holding the most the job can cost; the
/// job then runs at the provider. Follow it with `GET /api/v1/jobs/{id}` (long-poll with `wait`)
/// or its event stream.
#[utoipa::path(post, path = "/api/v1/video/generations", tag = "generations",
    security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a retry with the same key and body answers with the original receipt and holds nothing more")),
    request_body(content = VideoRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Accepted: the job is queued and its credits held", body = Receipt),
        (status = 400, description = "Invalid body or field (`param` names it)", body = crate::error::Envelope),
        (status = 402, description = "Not enough credits: the message states needed and available", body = crate::error::Envelope),
        (status = 409, description = "The Idempotency-Key was used with another body", body = crate::error::Envelope),
    ))]
pub async fn create_video(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    generate(Modality::Video, &state, caller, req, payload).await
}

/// Submit an image generation
///
/// As the video endpoint, for images: `202` with a job id at once, credits held.
#[utoipa::path(post, path = "/api/v1/images/generations", tag = "generations",
    security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a retry with the same key and body answers with the original receipt and holds nothing more")),
    request_body(content = ImageRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Accepted: the job is queued and its credits held", body = Receipt),
        (status = 400, description = "Invalid body or field (`param` names it)", body = crate::error::Envelope),
        (status = 402, description = "Not enough credits: the message states needed and available", body = crate::error::Envelope),
        (status = 409, description = "The Idempotency-Key was used with another body", body = crate::error::Envelope),
    ))]
pub async fn create_image(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    generate(Modality::Image, &state, caller, req, payload).await
}

/// Read a job, or long-poll it
///
/// With `wait`, answers as soon as the job is final or `wait` seconds have passed.
#[utoipa::path(get, path = "/api/v1/jobs/{id}", tag = "jobs",
    security(("api_key" = [])),
    params(
        ("id" = String, Path, description = "The job id"),
        ("wait" = Option<u64>, Query, minimum = 0, maximum = 60, description = "Seconds to wait for the job to become final"),
    ),
    responses(
        (status = 200, description = "The job", body = Job),
        (status = 400, description = "`wait` is not an integer from 0 to 60", body = crate::error::Envelope),
        (status = 403, description = "The job is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such job", body = crate::error::Envelope),
    ))]
pub async fn get_job(
    state: web::Data<AppState>,
    caller: Authenticated,
    path: web::Path<String>,
    query: Query,
    req: HttpRequest,
) -> Handled {
    let id = job_id(&path)?;
    let wait = integer_param(&query, "wait", 0, MAX_WAIT_SECS)?.unwrap_or(0);
    let job = if wait == 0 {
        state.services.reads.job(&caller.0, id).await?
    } else {
        let _open = OpenConnection::new(Held::LongPoll);
        let waited = wait_for_job(&state.services.reads, &caller.0, id, Duration::from_secs(wait));
        tokio::select! {
            job = waited => job?,
            // The process stops: answer with the job as it is now rather than be cut off.
            () = state.drain.started() => state.services.reads.job(&caller.0, id).await?,
            () = key_revoked(state.services.accounts.clone(), presented_key(&req), id) => return Err(ApiError::invalid_key()),
        }
    };
    Ok(HttpResponse::Ok().json(job_view(&job, &state.links.for_request(&req, now()))))
}

/// List the caller's jobs
///
/// Newest first; `next` is the `before` of the following page, or null.
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs",
    security(("api_key" = [])),
    params(
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 100, description = "Jobs per page (default 20)"),
        ("before" = Option<String>, Query, description = "A job id: list only older jobs"),
    ),
    responses(
        (status = 200, description = "A page of jobs", body = JobPage),
        (status = 400, description = "`limit` or `before` is not valid", body = crate::error::Envelope),
    ))]
pub async fn list_jobs(state: web::Data<AppState>, caller: Authenticated, query: Query, req: HttpRequest) -> Handled {
    let limit = integer_param(&query, "limit", 1, MAX_JOBS_PAGE as u64)?.unwrap_or(20);
    let before = query
        .get("before")
        .map(|b| JobId::parse(b).map_err(|_| InvalidRequest::param("before", "`before` must be a job id")))
        .transpose()?;
    let page = state.services.reads.list_jobs(&caller.0, before, limit as usize).await?;
    Ok(HttpResponse::Ok().json(job_page_view(&page, &state.links.for_request(&req, now()))))
}

pub(crate) fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn sse_event(event: &JobEvent, links: &OutputLinks<'_>) -> Result<sse::Event, serde_json::Error> {
    let name = match event {
        JobEvent::Progress(_) => "progress",
        JobEvent::Done(_) => "done",
        JobEvent::Error(_) => "error",
    };
    let id = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000).to_string();
    let data = serde_json::to_string(&event_view(event.job(), links))?;
    Ok(sse::Data::new(data).event(name).id(id).into())
}

/// Follow a job over server-sent events
///
/// Each event has `event:` (`progress`, `done` or `error`), `id:` and one `data:` line holding a
/// `StreamEvent` as JSON; the first bytes carry a `retry:` hint and a `: keep-alive` comment comes
/// at least every 15 s. A job already final gets its `done` or `error` at once, then the stream
/// closes. A connection lasts at most `GENJOBS_STREAM_MAX_SECS`; reconnect to go on from the
/// job's current state. A draining server ends the stream with `: server draining; reconnect`.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/stream", tag = "jobs",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "An event stream; each `data:` line is a `StreamEvent`", content_type = "text/event-stream", body = EventStreamItem),
        (status = 403, description = "The job is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such job", body = crate::error::Envelope),
    ))]
pub async fn stream_job(
    state: web::Data<AppState>,
    caller: Authenticated,
    path: web::Path<String>,
    req: HttpRequest,
) -> Handled {
    let id = job_id(&path)?;
    let events = job_events(&state.services.reads, &caller.0, id).await?;
    let (lifetime, drain) = (state.settings.stream_max, state.drain.clone());
    let draining = drain.started();
    let open = OpenConnection::new(Held::Stream);
    let (linked, base) = (state.clone(), state.links.base_of(&req));
    let revoked = key_revoked(state.services.accounts.clone(), presented_key(&req), id);
    // One future, kept inline in the stream: it ends at the connection's lifetime, the drain, or
    // the revocation of the key that opened it.
    let ended = async move {
        tokio::select! {
            () = tokio::time::sleep(lifetime) => {}
            () = draining => {}
            () = revoked => {}
        }
    };
    let stream = events
        .map(move |event| {
            let _counted = &open;
            let links = linked.links.rooted_at(base.clone(), now());
            sse_event(&event, &links)
                .inspect_err(|e| tracing::error!(job_id = %id, error = %e, "cannot serialize an event"))
        })
        .take_until(ended)
        .chain(
            futures_util::stream::once(async move {
                drain.is_draining().then(|| Ok(sse::Event::Comment("server draining; reconnect".into())))
            })
            .filter_map(std::future::ready),
        );
    let response = sse::Sse::from_stream(stream)
        .with_keep_alive(state.settings.keep_alive)
        .with_retry_duration(state.settings.retry_hint);
    // Proxies such as nginx buffer responses unless told not to, which would hold events back.
    let mut response = response.respond_to(&req);
    response.headers_mut().insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
    Ok(response)
}

/// Cancel a job
///
/// Releases everything held for it. Canceling a final job changes nothing and answers with its
/// state.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/cancel", tag = "jobs",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job's state after the cancel", body = CancelReceipt),
        (status = 403, description = "The job is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such job", body = crate::error::Envelope),
    ))]
pub async fn cancel_job(state: web::Data<AppState>, caller: Authenticated, path: web::Path<String>) -> Handled {
    let receipt = state.services.cancellations.cancel(&caller.0, job_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(cancel_view(receipt)))
}

/// List the models
///
/// Each with the form fields a client draws for it.
#[utoipa::path(get, path = "/api/v1/models", tag = "models",
    security(("api_key" = [])),
    params(("modality" = Option<String>, Query, description = "Only models of this modality: video, image, audio, music, speech or 3d")),
    responses(
        (status = 200, description = "The models", body = DataView<Model>),
        (status = 400, description = "`modality` is not one of the modalities", body = crate::error::Envelope),
    ))]
pub async fn list_models(state: web::Data<AppState>, caller: Authenticated, query: Query) -> Handled {
    let modality = query
        .get("modality")
        .map(|m| {
            Modality::parse(m).ok_or_else(|| {
                InvalidRequest::param("modality", "`modality` must be one of video, image, audio, music, speech, 3d")
            })
        })
        .transpose()?;
    let submissions = &state.services.submissions;
    let catalog = submissions.catalog();
    let data = catalog
        .models_of(modality)
        .filter(|m| caller.0.may_use(&m.id))
        .map(|m| model_view(m, submissions.provider_of(m)))
        .collect();
    Ok(HttpResponse::Ok().json(DataView { data }))
}

/// Liveness
///
/// `{"status":"ok"}` while the process serves. No key, no rate limit.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process serves", body = Status)))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Status { status: "ok".to_owned(), providers: Vec::new() })
}

/// Readiness
///
/// `{"status":"ready"}` when the store answered, at most a second ago, and its migrations are
/// current; 503 otherwise, and while the process drains. With `?verbose`, also each configured provider's circuit
/// breaker (a provider cooling down does not make the replica unready: its jobs wait or take
/// another route). No key, no rate limit.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    params(("verbose" = Option<String>, Query, description = "Any value: add `providers`, each provider's breaker")),
    responses((status = 200, description = "Ready to serve", body = Status)))]
pub async fn readyz(state: web::Data<AppState>, query: Query) -> Handled {
    if state.drain.is_draining() {
        return Err(genjobs_domain::ports::StoreError::Unavailable("the process is draining".into()).into());
    }
    state.readiness.check(&state.services.admin).await?;
    let providers = if query.contains_key("verbose") {
        state.services.submissions.provider_availability().into_iter().map(provider_status_view).collect()
    } else {
        Vec::new()
    };
    Ok(HttpResponse::Ok().json(Status { status: "ready".to_owned(), providers }))
}

/// Metrics
///
/// Prometheus text exposition; every name starts with `genjobs_`.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    security(("admin_token" = [])),
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain; version=0.0.4", body = String)))]
pub async fn metrics(state: web::Data<AppState>, _: Operator) -> HttpResponse {
    if let Err(e) = state.services.admin.count_unfinished().await {
        tracing::warn!(error = %e, "cannot count jobs by state for /metrics");
    }
    if let Err(e) = state.services.submissions.provider_loads().await {
        tracing::warn!(error = %e, "cannot count the providers' slots for /metrics");
    }
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(state.metrics.render())
}

/// The caller's account
///
/// Credits available, held and spent, and the caller's limits.
#[utoipa::path(get, path = "/api/v1/account", tag = "account",
    security(("api_key" = [])),
    responses((status = 200, description = "The account", body = Account)))]
pub async fn account(state: web::Data<AppState>, caller: Authenticated) -> Handled {
    let account = state.services.accounts.account(&caller.0).await?;
    Ok(HttpResponse::Ok().json(account_view(&account)))
}
