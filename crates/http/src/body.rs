//! Reading a JSON body: media type first (415), then size (413), then syntax (400).

use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{HttpRequest, web};
use futures_util::StreamExt;
use genjobs_domain::request::InvalidRequest;
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
    if !is_json(req) {
        return Err(ApiError::unsupported_media_type());
    }
    let body = read_bytes(req, payload).await?;
    serde_json::from_slice(&body).map_err(|e| InvalidRequest::body(format!("the body is not valid JSON: {e}")).into())
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
        let chunk = chunk.map_err(|_| InvalidRequest::body("the body could not be read"))?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::body_too_large(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
