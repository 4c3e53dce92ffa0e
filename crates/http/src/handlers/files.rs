//! Stored outputs behind signed links: answered without an API key, on the strength of the
//! link's signature.

use actix_web::http::header::{CACHE_CONTROL, ETAG, IF_NONE_MATCH, RANGE};
use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_domain::ids::JobId;
use genjobs_domain::usecases::OutputReadError;

use super::{Handled, Query, now};
use crate::AppState;
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
