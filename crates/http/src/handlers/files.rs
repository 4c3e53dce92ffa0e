//! What the service answers without an API key, on the strength of a signature: stored outputs
//! behind signed links, and the provider's webhook deliveries.

use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, ETAG, IF_NONE_MATCH, RANGE};
use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::UpstreamWebhookReceipt;
use genjobs_domain::ids::JobId;
use genjobs_domain::ports::Delivery;
use genjobs_domain::usecases::{NotificationOutcome, OutputReadError};

use super::{Handled, Query, now};
use crate::AppState;
use crate::body::read_bytes;
use crate::download::{file_response, parse_range, range_not_satisfiable};
use crate::error::ApiError;

/// A stored output
///
/// The link comes from a job's `outputs[].url` when the service keeps copies of outputs; it is
/// valid until `expires` (`GENJOBS_OUTPUT_URL_TTL_SECS` after the job was read) and needs no API
/// key. Answers with `Content-Length` and `ETag`, and serves one byte range (`Range: bytes=…`)
/// with 206. The `Content-Type` is the file's when it is an image or video type its job's
/// modality expects; any other file is `application/octet-stream` with `Content-Disposition:
/// attachment`. Every answer carries `X-Content-Type-Options: nosniff` and
/// `Content-Security-Policy: sandbox`.
#[utoipa::path(get, path = "/api/v1/files/{job_id}/{index}", tag = "jobs",
    params(
        ("job_id" = String, Path, description = "The job id"),
        ("index" = u32, Path, description = "The output's position in `outputs`, from 0"),
        ("expires" = i64, Query, description = "When the link expires, in Unix seconds"),
        ("sig" = String, Query, description = "The link's signature, hex"),
        ("Range" = Option<String>, Header, description = "One byte range, e.g. `bytes=0-1023`"),
    ),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 206, description = "The range asked for", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 304, description = "Not modified (`If-None-Match` names its ETag)"),
        (status = 403, description = "The link is not valid or has expired", body = crate::error::Envelope),
        (status = 404, description = "No such stored output", body = crate::error::Envelope),
        (status = 416, description = "The range lies outside the file", body = crate::error::Envelope),
    ))]
pub async fn output_file(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: Query,
    req: HttpRequest,
) -> Handled {
    let (job, index) = path.into_inner();
    let signed = match (query.get("expires"), query.get("sig")) {
        (Some(expires), Some(sig)) => state.links.verify(&job, &index, expires, sig, now()),
        _ => false,
    };
    if !signed {
        return Err(ApiError::invalid_link());
    }
    let (Ok(job_id), Ok(index)) = (JobId::parse(&job), index.parse::<usize>()) else {
        return Err(OutputReadError::NotFound.into());
    };
    let range = req.headers().get(RANGE).and_then(|v| v.to_str().ok()).and_then(parse_range);
    let read = match state.services.reads.stored_output(job_id, index, range).await {
        Ok(read) => read,
        Err(OutputReadError::RangeNotSatisfiable { size }) => {
            return Ok(range_not_satisfiable(OutputReadError::RangeNotSatisfiable { size }.into(), size));
        }
        Err(e) => return Err(e.into()),
    };
    let etag = format!("\"{}\"", read.file.sha256);
    let expires_in = query.get("expires").and_then(|e| e.parse::<i64>().ok()).unwrap_or(0) - now().unix_timestamp();
    let cache = format!("private, max-age={}", expires_in.max(0));
    let matches_etag = req
        .headers()
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|tag| tag.trim() == etag || tag.trim() == "*"));
    if matches_etag {
        return Ok(HttpResponse::NotModified()
            .insert_header((ETAG, etag))
            .insert_header((CACHE_CONTROL, cache))
            .finish());
    }
    Ok(file_response(read.served_as, read.range, Some(read.file.size))
        .insert_header((ETAG, etag))
        .insert_header((CACHE_CONTROL, cache))
        .streaming(read.body))
}

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
