//! Reading a body: media type first (415), then size (413), then syntax (400); and the deadline
//! on every body ([`body_deadline`]): a client that sends headers and then trickles or withholds
//! the body would otherwise hold its connection, and a worker's buffer, for as long as it likes.

use std::io;
use std::time::Duration;

use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, web};
use futures_util::StreamExt;
use genjobs_domain::invalid::InvalidRequest;
use serde_json::Value;

use crate::error::ApiError;

/// Largest body accepted.
pub const MAX_BODY_BYTES: usize = 1 << 20;

fn is_json(req: &HttpRequest) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// The body as JSON.
///
/// # Errors
/// 415 for another media type, 413 for a body over 1 MiB (refused from `Content-Length` before
/// reading when it is given), 400 for JSON that does not parse.
pub async fn read_json(req: &HttpRequest, payload: web::Payload) -> Result<Value, ApiError> {
    read_json_within(req, payload, MAX_BODY_BYTES).await
}

/// The body as JSON, refused past `limit` bytes: [`read_json`] for the endpoints that take
/// larger bodies (a batch's).
///
/// # Errors
/// As [`read_json`], with `limit` for 1 MiB.
pub async fn read_json_within(req: &HttpRequest, payload: web::Payload, limit: usize) -> Result<Value, ApiError> {
    if !is_json(req) {
        return Err(ApiError::unsupported_media_type());
    }
    let body = read_bytes_within(req, payload, limit).await?;
    serde_json::from_slice(&body).map_err(|e| InvalidRequest::body(format!("the body is not valid JSON: {e}")).into())
}

/// The body as JSON, or `None` for a request that sends none (no `Content-Type`, and no
/// `Content-Length` or a zero one): the endpoints whose body is optional.
///
/// # Errors
/// As [`read_json`] for a request that sends a body.
pub async fn read_optional_json(req: &HttpRequest, payload: web::Payload) -> Result<Option<Value>, ApiError> {
    let declared_empty =
        req.headers().get(CONTENT_LENGTH).is_none_or(|length| length.to_str().is_ok_and(|length| length.trim() == "0"));
    if declared_empty && req.headers().get(CONTENT_TYPE).is_none() && req.headers().get(TRANSFER_ENCODING).is_none() {
        return Ok(None);
    }
    read_json(req, payload).await.map(Some)
}

/// The body's bytes, as they came.
///
/// # Errors
/// 413 for a body over 1 MiB (refused from `Content-Length` before reading when it is given),
/// 400 when it cannot be read.
pub async fn read_bytes(req: &HttpRequest, payload: web::Payload) -> Result<web::BytesMut, ApiError> {
    read_bytes_within(req, payload, MAX_BODY_BYTES).await
}

/// The body's bytes, as they came, refused as soon as they pass `limit`.
///
/// # Errors
/// 413 for a body over `limit` (refused from `Content-Length` before reading when it is given,
/// else as its bytes pass it), 400 when it cannot be read.
pub async fn read_bytes_within(
    req: &HttpRequest,
    mut payload: web::Payload,
    limit: usize,
) -> Result<web::BytesMut, ApiError> {
    let declared =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(ApiError::body_too_large(limit));
    }
    let mut body = web::BytesMut::with_capacity(declared.unwrap_or(1024).min(limit));
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| match e {
            PayloadError::Io(e) if e.kind() == io::ErrorKind::TimedOut => ApiError::body_timeout(),
            _ => InvalidRequest::body("the body could not be read").into(),
        })?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::body_too_large(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Every body must arrive within `limit` of its headers: past the deadline, the payload ends with
/// a timed-out error, which a handler reading it answers with 408 (and the connection closes).
/// Requests without a body pass untouched.
pub(crate) async fn body_deadline(
    limit: Duration,
    mut req: ServiceRequest,
    next: Next<impl actix_web::body::MessageBody>,
) -> Result<ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let declared_empty =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() == "0");
    let has_body = !declared_empty
        && (req.headers().contains_key(CONTENT_LENGTH) || req.headers().contains_key(TRANSFER_ENCODING));
    if has_body {
        let deadline = tokio::time::Instant::now() + limit;
        let payload = req.take_payload();
        let bounded = futures_util::stream::unfold(Some(payload), move |payload| async move {
            let mut payload = payload?;
            match tokio::time::timeout_at(deadline, payload.next()).await {
                Ok(chunk) => chunk.map(|chunk| (chunk, Some(payload))),
                Err(_) => Some((Err(PayloadError::Io(io::ErrorKind::TimedOut.into())), None)),
            }
        })
        // Fused: a reader such as actix-multipart may poll again after the end, which an unfold
        // alone answers with a panic.
        .fuse();
        req.set_payload(Payload::Stream { payload: Box::pin(bounded) });
    }
    next.call(req).await
}
