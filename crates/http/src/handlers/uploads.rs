//! Uploaded images: `POST /api/v1/uploads` keeps one (once per content, counted against the
//! user's day) and answers a signed link to it, `/api/v1/uploads/{sha256}.{ext}`, which any
//! provider can fetch as one of a job's `image_inputs`; the link is answered without an API key,
//! on the strength of its signature, until it expires.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::Upload;
use genjobs_domain::upload::{MAX_UPLOAD_BYTES, UploadName};
use genjobs_domain::usecases::UploadError;

use super::{Handled, Query, now};
use crate::AppState;
use crate::auth::Authenticated;
use crate::body::read_bytes_within;
use crate::error::ApiError;

/// Upload an image
///
/// The body is the image itself (PNG, JPEG, WebP or GIF, judged by its bytes; at most 20 MiB,
/// refused with 413 as it arrives past that). Answers a link to the service's copy, valid
/// `GENJOBS_UPLOAD_TTL_SECS` (24 h by default), to pass among a job's `image_inputs`. The same
/// bytes uploaded again are kept once; every upload counts against the user's
/// `GENJOBS_UPLOAD_BYTES_PER_DAY` (UTC days, the images of edits included).
#[utoipa::path(post, path = "/api/v1/uploads", tag = "uploads",
    security(("api_key" = [])),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The image's bytes"),
    responses(
        (status = 201, description = "Kept: its link", body = Upload),
        (status = 400, description = "Not a PNG, JPEG, WebP or GIF image", body = crate::error::Envelope),
        (status = 413, description = "Over 20 MiB", body = crate::error::Envelope),
        (status = 503, description = "The store cannot be reached", body = crate::error::Envelope),
    ))]
pub async fn upload_image(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let bytes = read_bytes_within(&req, payload, MAX_UPLOAD_BYTES).await?;
    let upload = state.services.uploads.keep(&caller.0, bytes.freeze()).await?;
    let url = state.links.upload_url(&state.links.base_of(&req), &upload.as_path(), now());
    Ok(HttpResponse::Created().json(Upload { url }))
}

/// An uploaded image
///
/// The link `POST /api/v1/uploads` answered; needs no API key until it expires.
#[utoipa::path(get, path = "/api/v1/uploads/{name}", tag = "uploads",
    params(
        ("name" = String, Path, description = "The upload's SHA-256 and extension, e.g. `9f86….png`"),
        ("expires" = i64, Query, description = "When the link expires, in Unix seconds"),
        ("sig" = String, Query, description = "The link's signature, hex"),
    ),
    responses(
        (status = 200, description = "The image", content_type = "image/*", body = Vec<u8>),
        (status = 403, description = "The link is not valid or has expired", body = crate::error::Envelope),
        (status = 404, description = "No such upload (it was deleted)", body = crate::error::Envelope),
    ))]
pub async fn uploaded_image(state: web::Data<AppState>, path: web::Path<String>, query: Query) -> Handled {
    let name = path.into_inner();
    let signed = match (query.get("expires"), query.get("sig")) {
        (Some(expires), Some(sig)) => state.links.verify_upload(&name, expires, sig, now()),
        _ => false,
    };
    if !signed {
        return Err(ApiError::invalid_link());
    }
    let UploadName { digest, format } = UploadName::parse(&name).ok_or(UploadError::NotFound)?;
    let body = state.services.uploads.open(&digest).await?;
    let expires_in = query.get("expires").and_then(|e| e.parse::<i64>().ok()).unwrap_or(0) - now().unix_timestamp();
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, format.media_type()))
        .insert_header((CACHE_CONTROL, format!("private, max-age={}", expires_in.max(0))))
        .insert_header(("x-content-type-options", "nosniff"))
        .insert_header(("content-security-policy", "sandbox"))
        .streaming(body))
}
