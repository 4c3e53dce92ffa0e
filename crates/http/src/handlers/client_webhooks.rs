//! Client webhooks: the account's signing secret, a job's deliveries, and a redelivery.

use actix_web::{HttpResponse, web};
use genjobs_api::{DataView, WebhookDelivery, WebhookSecret};
use genjobs_domain::usecases::WebhookQueryError;

use super::{Handled, job_id};
use crate::AppState;
use crate::auth::Authenticated;
use crate::dto::client_webhooks::delivery_view;
use crate::error::ApiError;

/// The webhook signing secret
///
/// The secret that signs the account's webhooks (Standard Webhooks: `webhook-signature` is
/// `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">` keyed with the base64
/// part of the secret). Made on first use; the same until rotated.
#[utoipa::path(get, path = "/api/v1/account/webhook-secret", tag = "webhooks",
    security(("api_key" = [])),
    responses((status = 200, description = "The secret", body = WebhookSecret)))]
pub async fn webhook_secret(state: web::Data<AppState>, caller: Authenticated) -> Handled {
    let secret = state.services.webhooks.webhook_secret(&caller.0).await?;
    Ok(HttpResponse::Ok().json(WebhookSecret { secret }))
}

/// Rotate the webhook signing secret
///
/// A new secret; the old one signs nothing from now on, on every replica.
#[utoipa::path(post, path = "/api/v1/account/webhook-secret/rotate", tag = "webhooks",
    security(("api_key" = [])),
    responses((status = 200, description = "The new secret", body = WebhookSecret)))]
pub async fn rotate_webhook_secret(state: web::Data<AppState>, caller: Authenticated) -> Handled {
    let secret = state.services.webhooks.rotate_webhook_secret(&caller.0).await?;
    Ok(HttpResponse::Ok().json(WebhookSecret { secret }))
}

impl From<WebhookQueryError> for ApiError {
    fn from(e: WebhookQueryError) -> Self {
        match e {
            WebhookQueryError::Job(e) => e.into(),
            WebhookQueryError::UnknownEvent => ApiError::new(
                actix_web::http::StatusCode::NOT_FOUND,
                "not_found",
                "WEBHOOK_EVENT_NOT_FOUND",
                e.to_string(),
            ),
        }
    }
}

/// A job's webhook deliveries
///
/// The job's webhook event (one, once the job is final, when it was submitted with a
/// `webhook_url`) with every delivery attempt.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/webhooks", tag = "webhooks",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job's events", body = inline(DataView<WebhookDelivery>)),
        (status = 403, description = "The job is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such job", body = crate::error::Envelope),
    ))]
pub async fn job_webhooks(state: web::Data<AppState>, caller: Authenticated, path: web::Path<String>) -> Handled {
    let events = state.services.webhooks.job_webhooks(&caller.0, job_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(DataView { data: events.iter().map(delivery_view).collect() }))
}

/// Redeliver a webhook
///
/// One more delivery of the event, with the same `webhook-id` and body, as soon as possible.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/webhooks/{event_id}/redeliver", tag = "webhooks",
    security(("api_key" = [])),
    params(
        ("id" = String, Path, description = "The job id"),
        ("event_id" = String, Path, description = "The event id"),
    ),
    responses(
        (status = 202, description = "The delivery is scheduled"),
        (status = 403, description = "The job is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such job or event", body = crate::error::Envelope),
    ))]
pub async fn redeliver_webhook(
    state: web::Data<AppState>,
    caller: Authenticated,
    path: web::Path<(String, String)>,
) -> Handled {
    let (id, event) = path.into_inner();
    state.services.webhooks.redeliver_webhook(&caller.0, job_id(&id)?, &event).await?;
    Ok(HttpResponse::Accepted().finish())
}
