//! How output files are sent, behind signed links and on the OpenAI content route alike: as a
//! stream, with one byte range when asked, and never as something a browser would run. An
//! output's type comes from the provider; served as it says from the service's own origin, an
//! HTML or SVG output would run script beside the playground, which keeps the user's key. So a
//! file goes inline only as an image or video type its job's modality expects, and otherwise as
//! an `application/octet-stream` attachment; every answer says `nosniff` and puts the document
//! in a CSP sandbox (no script, a unique origin) in case a browser renders it anyway.

use actix_web::HttpResponse;
use actix_web::HttpResponseBuilder;
use actix_web::http::StatusCode;
use actix_web::http::header::{
    ACCEPT_RANGES, CONTENT_DISPOSITION, CONTENT_RANGE, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderValue,
    X_CONTENT_TYPE_OPTIONS,
};
use genjobs_domain::ports::ByteRange;
use genjobs_domain::usecases::RangeRequest;

use crate::error::ApiError;

/// The start of an answer carrying a file (or the part `range` of it) of `size` bytes when
/// known, served as `served_as` inline, or as an attachment when `None`; the caller adds its
/// own caching headers and the body.
pub(crate) fn file_response(
    served_as: Option<&'static str>,
    range: Option<ByteRange>,
    size: Option<u64>,
) -> HttpResponseBuilder {
    let mut response = HttpResponse::build(if range.is_some() { StatusCode::PARTIAL_CONTENT } else { StatusCode::OK });
    match served_as {
        Some(media_type) => response.insert_header((CONTENT_TYPE, media_type)),
        None => response
            .insert_header((CONTENT_TYPE, "application/octet-stream"))
            .insert_header((CONTENT_DISPOSITION, "attachment")),
    };
    response.insert_header((X_CONTENT_TYPE_OPTIONS, "nosniff")).insert_header((CONTENT_SECURITY_POLICY, "sandbox"));
    if let Some(size) = size {
        response.insert_header((ACCEPT_RANGES, "bytes"));
        match range {
            Some(range) => {
                response
                    .insert_header((CONTENT_RANGE, format!("bytes {}-{}/{size}", range.first, range.last)))
                    .no_chunking(range.len());
            }
            None => {
                response.no_chunking(size);
            }
        }
    }
    response
}

/// 416, with the file's length in `Content-Range` as HTTP asks.
pub(crate) fn range_not_satisfiable(error: ApiError, size: u64) -> HttpResponse {
    let mut response = actix_web::ResponseError::error_response(&error);
    if let Ok(value) = HeaderValue::from_str(&format!("bytes */{size}")) {
        response.headers_mut().insert(CONTENT_RANGE, value);
    }
    response
}

/// One range of `Range: bytes=…`; anything else (several ranges, another unit, bad syntax) is
/// ignored, which serves the whole file as HTTP allows.
pub(crate) fn parse_range(header: &str) -> Option<RangeRequest> {
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
    fn a_file_not_of_an_expected_type_goes_as_an_attachment() {
        let inline = file_response(Some("image/png"), None, Some(10)).finish();
        assert_eq!(inline.headers().get(CONTENT_TYPE).unwrap(), "image/png");
        assert!(inline.headers().get(CONTENT_DISPOSITION).is_none());
        let other = file_response(None, Some(ByteRange { first: 2, last: 5 }), Some(10)).finish();
        assert_eq!(other.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(other.headers().get(CONTENT_TYPE).unwrap(), "application/octet-stream");
        assert_eq!(other.headers().get(CONTENT_DISPOSITION).unwrap(), "attachment");
        assert_eq!(other.headers().get(CONTENT_RANGE).unwrap(), "bytes 2-5/10");
        for response in [inline, other] {
            assert_eq!(response.headers().get(X_CONTENT_TYPE_OPTIONS).unwrap(), "nosniff");
            assert_eq!(response.headers().get(CONTENT_SECURITY_POLICY).unwrap(), "sandbox");
        }
    }

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
