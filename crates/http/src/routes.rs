//! The handlers: each parses its input into domain types, calls one use case, and maps the result.

use std::collections::HashMap;
use std::time::Duration;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpMessage, HttpRequest, HttpResponse, Responder, web};
use actix_web_lab::sse;
use std::pin::pin;

use futures_util::future::{Either, select};
use futures_util::{FutureExt, StreamExt};
use genjobs_domain::ids::{JobId, UserId};
use genjobs_domain::modality::Modality;
use genjobs_domain::request::InvalidRequest;
use genjobs_domain::usecases::{IdempotencyKey, JobEvent, MAX_JOBS_PAGE, MAX_WAIT_SECS, Submission};

use crate::AppState;
use crate::auth::{Authenticated, Operator};
use crate::body::read_json;
use crate::dto::requests::{GenerationBody, GrantBody, NewUserBody, request_fingerprint};
use crate::dto::responses::{
    AccountView, CancelView, CreatedUserView, DataView, EventView, JobPageView, JobView, ModelView, ReceiptView,
    UserView,
};
use crate::error::ApiError;
use crate::telemetry::{Held, OpenConnection};

type Query = web::Query<HashMap<String, String>>;
type Handled = Result<HttpResponse, ApiError>;

fn job_id(path: &str) -> Result<JobId, ApiError> {
    JobId::parse(path).map_err(|_| ApiError::job_not_found())
}

fn user_id(path: &str) -> Result<UserId, ApiError> {
    UserId::parse(path).map_err(|_| genjobs_domain::usecases::AdminError::UnknownUser.into())
}

fn integer_param(query: &Query, name: &str, min: u64, max: u64) -> Result<Option<u64>, InvalidRequest> {
    query
        .get(name)
        .map(|text| {
            text.parse::<u64>()
                .ok()
                .filter(|v| (min..=max).contains(v))
                .ok_or_else(|| InvalidRequest::param(name, format!("`{name}` must be an integer from {min} to {max}")))
        })
        .transpose()
}

fn idempotency_key(req: &HttpRequest) -> Result<Option<IdempotencyKey>, InvalidRequest> {
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
    let request = GenerationBody::from_json(modality, &body)?.try_into_domain(modality, state.gateway.catalog())?;
    let idempotency = idempotency_key(&req)?.map(|key| (key, request_fingerprint(modality, &body)));
    let receipt = state
        .gateway
        .submit(&caller.0, Submission { request, idempotency })
        .await
        .map_err(|e| ApiError::from_submit(e, state.gateway.settings().poll_interval))?;
    req.extensions_mut().insert(receipt.job_id);
    Ok(HttpResponse::Accepted().json(ReceiptView::from(receipt)))
}

/// `POST /api/v1/video/generations`
pub async fn create_video(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    generate(Modality::Video, &state, caller, req, payload).await
}

/// `POST /api/v1/images/generations`
pub async fn create_image(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    generate(Modality::Image, &state, caller, req, payload).await
}

/// `GET /api/v1/jobs/:id?wait=`
pub async fn get_job(
    state: web::Data<AppState>,
    caller: Authenticated,
    path: web::Path<String>,
    query: Query,
) -> Handled {
    let id = job_id(&path)?;
    let wait = integer_param(&query, "wait", 0, MAX_WAIT_SECS)?.unwrap_or(0);
    let job = if wait == 0 {
        state.gateway.wait_for_job(&caller.0, id, Duration::ZERO).await?
    } else {
        let _open = OpenConnection::new(Held::LongPoll);
        let waited = pin!(state.gateway.wait_for_job(&caller.0, id, Duration::from_secs(wait)));
        match select(waited, pin!(state.drain.started())).await {
            Either::Left((job, _)) => job?,
            // The process stops: answer with the job as it is now rather than be cut off.
            Either::Right(((), _)) => state.gateway.wait_for_job(&caller.0, id, Duration::ZERO).await?,
        }
    };
    Ok(HttpResponse::Ok().json(JobView::from(&job)))
}

/// `GET /api/v1/jobs?limit=&before=`
pub async fn list_jobs(state: web::Data<AppState>, caller: Authenticated, query: Query) -> Handled {
    let limit = integer_param(&query, "limit", 1, MAX_JOBS_PAGE as u64)?.unwrap_or(20);
    let before = query
        .get("before")
        .map(|b| JobId::parse(b).map_err(|_| InvalidRequest::param("before", "`before` must be a job id")))
        .transpose()?;
    let page = state.gateway.list_jobs(&caller.0, before, limit as usize).await?;
    Ok(HttpResponse::Ok().json(JobPageView::from(&page)))
}

fn sse_event(event: &JobEvent) -> Result<sse::Event, serde_json::Error> {
    let name = match event {
        JobEvent::Progress(_) => "progress",
        JobEvent::Done(_) => "done",
        JobEvent::Error(_) => "error",
    };
    let id = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000).to_string();
    let data = serde_json::to_string(&EventView::from(event.job()))?;
    Ok(sse::Data::new(data).event(name).id(id).into())
}

/// `GET /api/v1/jobs/:id/stream`
pub async fn stream_job(
    state: web::Data<AppState>,
    caller: Authenticated,
    path: web::Path<String>,
    req: HttpRequest,
) -> Handled {
    let id = job_id(&path)?;
    let events = state.gateway.job_events(&caller.0, id).await?;
    let lifetime = tokio::time::sleep(state.settings.stream_max);
    let drain = state.drain.clone();
    let open = OpenConnection::new(Held::Stream);
    let ended = select(Box::pin(lifetime), drain.started().boxed());
    let stream = events
        .map(move |event| {
            let _counted = &open;
            sse_event(&event).inspect_err(|e| tracing::error!(job_id = %id, error = %e, "cannot serialize an event"))
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

/// `POST /api/v1/jobs/:id/cancel`
pub async fn cancel_job(state: web::Data<AppState>, caller: Authenticated, path: web::Path<String>) -> Handled {
    let receipt = state.gateway.cancel(&caller.0, job_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(CancelView::from(receipt)))
}

/// `GET /api/v1/models?modality=`
pub async fn list_models(state: web::Data<AppState>, _caller: Authenticated, query: Query) -> Handled {
    let modality = query
        .get("modality")
        .map(|m| {
            Modality::parse(m).ok_or_else(|| {
                InvalidRequest::param("modality", "`modality` must be one of video, image, audio, music, speech, 3d")
            })
        })
        .transpose()?;
    let upstream = state.gateway.upstream_name();
    let data = state.gateway.catalog().models_of(modality).map(|m| ModelView::new(m, upstream)).collect();
    Ok(HttpResponse::Ok().json(DataView { data }))
}

/// `GET /healthz`: the process serves. No key, no rate limit.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({"status": "ok"}))
}

/// `GET /readyz`: the store answers and its migrations are current; 503 in the envelope
/// otherwise. No key, no rate limit.
pub async fn readyz(state: web::Data<AppState>) -> Handled {
    if state.drain.is_draining() {
        return Err(genjobs_domain::ports::StoreError::Unavailable("the process is draining".into()).into());
    }
    state.gateway.readiness().await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({"status": "ready"})))
}

/// `GET /metrics`: Prometheus text, for the operators.
pub async fn metrics(state: web::Data<AppState>, _: Operator) -> HttpResponse {
    if let Err(e) = state.gateway.count_unfinished().await {
        tracing::warn!(error = %e, "cannot count jobs by state for /metrics");
    }
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(state.metrics.render())
}

/// `GET /api/v1/account`
pub async fn account(state: web::Data<AppState>, caller: Authenticated) -> Handled {
    let account = state.gateway.account(&caller.0).await?;
    Ok(HttpResponse::Ok().json(AccountView::from(&account)))
}

/// `POST /api/admin/users`
pub async fn admin_create_user(
    state: web::Data<AppState>,
    _: Operator,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let request = NewUserBody::from_json(&read_json(&req, payload).await?)?.try_into_domain()?;
    let (account, key) = state.gateway.create_user(request).await?;
    Ok(HttpResponse::Created().json(CreatedUserView::new(&account, key.expose())))
}

/// `POST /api/admin/users/{id}/keys`
pub async fn admin_issue_key(state: web::Data<AppState>, _: Operator, path: web::Path<String>) -> Handled {
    let key = state.gateway.issue_key(user_id(&path)?).await?;
    Ok(HttpResponse::Created().json(serde_json::json!({ "api_key": key.expose() })))
}

/// `DELETE /api/admin/keys/{api_key_prefix}`
pub async fn admin_revoke_key(state: web::Data<AppState>, _: Operator, path: web::Path<String>) -> Handled {
    state.gateway.revoke_key(&path).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `POST /api/admin/users/{id}/credits`
pub async fn admin_grant(
    state: web::Data<AppState>,
    _: Operator,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let user_id = user_id(&path)?;
    let amount = GrantBody::from_json(&read_json(&req, payload).await?)?.try_into_domain()?;
    let account = state.gateway.grant(user_id, amount).await?;
    Ok(HttpResponse::Ok().json(UserView::from(&account)))
}

/// `GET /api/admin/users/{id}`
pub async fn admin_user(state: web::Data<AppState>, _: Operator, path: web::Path<String>) -> Handled {
    let account = state.gateway.user(user_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(UserView::from(&account)))
}
