//! Stored outputs behind signed links: answered without an API key, on the strength of the
//! link's signature.

use actix_web::http::StatusCode;
use actix_web::http::header::{
    ACCEPT_RANGES, CACHE_CONTROL, CONTENT_RANGE, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH, RANGE,
};
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use genjobs_domain::ids::JobId;
use genjobs_domain::usecases::{OutputReadError, RangeRequest};

use super::{Handled, Query, now};
use crate::AppState;
use crate::error::ApiError;

/// A stored output
///
/// The link comes from a job's `outputs[].url` when the service keeps copies of outputs; it is
/// valid until `expires` (`GENJOBS_OUTPUT_URL_TTL_SECS` after the job was read) and needs no API
/// key. Answers with the file's `Content-Type`, `Content-Length` and `ETag`, and serves one byte
/// range (`Range: bytes=…`) with 206.
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
            let mut response = ApiError::from(OutputReadError::RangeNotSatisfiable { size }).error_response();
            if let Ok(value) = HeaderValue::from_str(&format!("bytes */{size}")) {
                response.headers_mut().insert(CONTENT_RANGE, value);
            }
            return Ok(response);
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
    let (status, length) = match read.range {
        Some(range) => (StatusCode::PARTIAL_CONTENT, range.len()),
        None => (StatusCode::OK, read.file.size),
    };
    let mut response = HttpResponse::build(status);
    response
        .insert_header((CONTENT_TYPE, read.file.content_type.as_str()))
        .insert_header((ETAG, etag))
        .insert_header((ACCEPT_RANGES, "bytes"))
        .insert_header((CACHE_CONTROL, cache))
        .no_chunking(length);
    if let Some(range) = read.range {
        response.insert_header((CONTENT_RANGE, format!("bytes {}-{}/{}", range.first, range.last, read.file.size)));
    }
    Ok(response.streaming(read.body))
}

/// One range of `Range: bytes=…`; anything else (several ranges, another unit, bad syntax) is
/// ignored, which serves the whole file as HTTP allows.
fn parse_range(header: &str) -> Option<RangeRequest> {
    let spec = header.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (first, last) = spec.trim().split_once('-')?;
    match (first.trim(), last.trim()) {
        ("", "") => None,
        ("", suffix) => suffix.parse().ok().map(RangeRequest::Suffix),
        (first, "") => first.parse().ok().map(RangeRequest::From),
        (first, last) => Some(RangeRequest::Bounded { first: first.parse().ok()?, last: last.parse().ok()? }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_byte_range_is_read_and_anything_else_ignored() {
        assert_eq!(parse_range("bytes=0-99"), Some(RangeRequest::Bounded { first: 0, last: 99 }));
        assert_eq!(parse_range("bytes=100-"), Some(RangeRequest::From(100)));
        assert_eq!(parse_range("bytes=-500"), Some(RangeRequest::Suffix(500)));
        for ignored in ["bytes=0-1,5-9", "items=0-9", "bytes=-", "bytes=a-b", "0-99", "bytes=9-x"] {
            assert_eq!(parse_range(ignored), None, "{ignored}");
        }
    }
}
