//! Webhook deliveries from providers: answered without an API key, on the strength of the
//! provider's signature, which its adapter checks.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::UpstreamWebhookReceipt;
use genjobs_domain::ports::Delivery;
use genjobs_domain::usecases::NotificationOutcome;

use super::Handled;
use crate::AppState;
use crate::body::read_bytes;
use crate::error::ApiError;

/// A webhook delivery from the provider
///
/// A provider POSTs here (`GENJOBS_PUBLIC_URL` + `/api/upstream/{provider}/webhook`) when a job
/// ends there. fal's delivery carries its ED25519 signature headers (`X-Fal-Webhook-Request-Id`,
/// `-User-Id`, `-Timestamp`, `-Signature`), checked against fal's published keys; Replicate's the
/// Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`), checked
/// with `GENJOBS_REPLICATE_WEBHOOK_SECRET`. A verified delivery ends its job as a poll would.
/// Needs no API key.
#[utoipa::path(post, path = "/api/upstream/{provider}/webhook", tag = "operations",
    params(("provider" = String, Path, description = "The provider: `fal` or `replicate`")),
    request_body(content = serde_json::Value, description = "The provider's webhook body, as signed", content_type = "application/json"),
    responses(
        (status = 200, description = "Received", body = UpstreamWebhookReceipt),
        (status = 400, description = "Well signed, but not a webhook body", body = crate::error::Envelope),
        (status = 401, description = "Unsigned, wrongly signed, or stale (over 300 s)", body = crate::error::Envelope),
        (status = 404, description = "No job for this request, or webhooks are off", body = crate::error::Envelope),
        (status = 413, description = "The body is over 1 MiB", body = crate::error::Envelope),
    ))]
pub async fn upstream_webhook(
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    if !state.services.notifications.serves(&path) {
        let message = format!("no provider named {:?} here", path.as_str());
        return Err(ApiError::new(StatusCode::NOT_FOUND, "not_found", "UNKNOWN_PROVIDER", message));
    }
    let body = read_bytes(&req, payload).await?;
    let headers = req
        .headers()
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let delivery = Delivery { provider: path.into_inner(), headers, body: body.to_vec() };
    let outcome = match state.services.notifications.upstream_notification(&delivery).await? {
        NotificationOutcome::Applied(_) => "applied",
        NotificationOutcome::AlreadyFinal(_) => "already_final",
        NotificationOutcome::Ignored => "ignored",
    };
    Ok(HttpResponse::Ok().json(UpstreamWebhookReceipt { outcome: outcome.to_owned() }))
}
