//! Reading a `multipart/form-data` body that carries images: streamed part by part and bounded
//! as it arrives, so that a body over the limit is refused (413) when its bytes pass the limit,
//! never read whole first. The body in all is counted as its bytes come, chunked or not (the
//! lines before the first part, which the parser skips, included); text fields are bounded by
//! [`MAX_BODY_BYTES`] together; the file parts named for images by the images' limit together,
//! and each must be an image by its bytes (PNG, JPEG, WebP or GIF), whatever its name or declared
//! type says.
//!
//! A form is also bounded in its shape, each limit checked as a part's headers arrive, before
//! its value is read: at most [`MAX_PARTS`] parts, a part's name at most [`MAX_NAME_BYTES`], its
//! headers at most [`MAX_HEADER_BYTES`]. actix-multipart itself holds at most 64 KiB of a part's
//! headers (and 32 lines) before it refuses them, so memory stays bounded past our own limit; a
//! part it refuses for that is answered as one whose headers are too long.

use std::cell::Cell;
use std::io;
use std::rc::Rc;

use actix_multipart::{Field, Multipart, MultipartError};
use actix_web::error::{ParseError, PayloadError};
use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{HttpRequest, web};
use futures_util::{Stream, StreamExt, TryStreamExt};
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::upload::ImageFormat;
use serde_json::{Map, Value};

use crate::body::MAX_BODY_BYTES;
use crate::error::ApiError;

/// Most parts in a form; a text field sent again counts again (and its last value is kept).
pub const MAX_PARTS: usize = 64;
/// Most bytes of a part's name.
pub const MAX_NAME_BYTES: usize = 256;
/// Most bytes of a part's headers, each counted as `name: value` and its line end.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// A file of a form: an image, recognised by its bytes, unless the form takes any file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFile {
    /// Its format, from its bytes; `None` in a form that takes any file.
    pub format: Option<ImageFormat>,
    /// The name the client gave it.
    pub filename: Option<String>,
    /// The file.
    pub bytes: web::Bytes,
}

/// A form read: its text fields and its images, in the order they came.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageForm {
    /// The text fields, by name.
    pub fields: Map<String, Value>,
    /// The image files.
    pub images: Vec<ImageFile>,
}

/// What a form may carry.
#[derive(Debug, Clone, Copy)]
pub struct ImageLimits {
    /// The names of the image parts (`image` and `image[]`, say); the name a refusal gives is
    /// the first.
    pub names: &'static [&'static str],
    /// Most image files.
    pub max_files: usize,
    /// Most bytes of all the images together.
    pub max_bytes: usize,
    /// Whether the file parts must be images; `false` takes any file (a batch's input file).
    pub images_only: bool,
}

/// Whether the request carries a form.
#[must_use]
pub fn is_form(req: &HttpRequest) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("multipart/form-data"))
}

/// Reads a form of text fields and images within `limits`.
///
/// # Errors
/// 415 for a body that is not a form; 413 as soon as the body passes `limits.max_bytes` and
/// [`MAX_BODY_BYTES`] together, the images `limits.max_bytes`, the text fields
/// [`MAX_BODY_BYTES`], or the declared length the first (before reading); 400 for a form past
/// its shape's limits (`param` `parts`, `parts[i].name` or `parts[i].headers`), naming the first
/// of `limits.names` for too many images or one that is not an image by its bytes, a field's
/// name for another file part or text that is not UTF-8, and the body for a malformed form; 408
/// for a body that did not arrive in time.
pub async fn read_image_form(
    req: &HttpRequest,
    payload: web::Payload,
    limits: ImageLimits,
) -> Result<ImageForm, ApiError> {
    if !is_form(req) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request",
            "UNSUPPORTED_MEDIA_TYPE",
            "the body must be multipart/form-data",
        ));
    }
    let most = limits.max_bytes + MAX_BODY_BYTES;
    let declared =
        req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > most) {
        return Err(ApiError::body_too_large(most));
    }
    let image_param = limits.names.first().copied().unwrap_or("image");
    let over = Rc::new(Cell::new(false));
    let mut parts = Multipart::new(req.headers(), counted(payload, most, Rc::clone(&over)));
    let refused = |e: MultipartError, next_part: Option<usize>| refusal(&e, over.get(), most, next_part);
    let mut form = ImageForm::default();
    let (mut image_bytes, mut text_bytes, mut index) = (0usize, 0usize, 0usize);
    while let Some(mut part) = parts.try_next().await.map_err(|e| refused(e, Some(index)))? {
        let name = within_shape(&part, index)?;
        index += 1;
        let is_image = limits.names.contains(&name.as_str());
        let filename = part.content_disposition().and_then(|d| d.get_filename()).map(str::to_owned);
        let is_file = filename.is_some();
        if is_file && !is_image {
            return Err(InvalidRequest::param(&name, format!("`{name}`: file uploads are not supported here")).into());
        }
        if is_image && form.images.len() == limits.max_files {
            let message = format!("`{image_param}` takes at most {} files", limits.max_files);
            return Err(InvalidRequest::param(image_param, message).into());
        }
        let (used, limit) =
            if is_image { (&mut image_bytes, limits.max_bytes) } else { (&mut text_bytes, MAX_BODY_BYTES) };
        let mut value = web::BytesMut::new();
        while let Some(chunk) = part.next().await {
            let chunk = chunk.map_err(|e| refused(e, None))?;
            *used += chunk.len();
            if *used > limit {
                let what = if is_image { "the images" } else { "the form's text fields" };
                let message = format!("{what} must be at most {limit} bytes in all");
                return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request", "BODY_TOO_LARGE", message));
            }
            value.extend_from_slice(&chunk);
        }
        if is_image {
            let format = ImageFormat::sniff(&value);
            if format.is_none() && limits.images_only {
                let message = format!("`{image_param}` must be PNG, JPEG, WebP or GIF images");
                return Err(InvalidRequest::param(image_param, message).into());
            }
            form.images.push(ImageFile { format, filename, bytes: value.freeze() });
        } else {
            let text = String::from_utf8(value.to_vec())
                .map_err(|_| InvalidRequest::param(&name, format!("`{name}` must be UTF-8 text")))?;
            form.fields.insert(name, Value::String(text));
        }
    }
    Ok(form)
}

/// The name of `part`, the form's part number `index` (from 0), when the form's shape allows
/// it: a part past [`MAX_PARTS`], headers past [`MAX_HEADER_BYTES`] or a name past
/// [`MAX_NAME_BYTES`] is refused (400) before its value is read.
fn within_shape(part: &Field, index: usize) -> Result<String, ApiError> {
    if index >= MAX_PARTS {
        let message = format!("a form has at most {MAX_PARTS} parts (a field sent again counts again)");
        return Err(InvalidRequest::param("parts", message).into());
    }
    let header_bytes: usize = part.headers().iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Err(headers_too_long(index));
    }
    let name = part.name().unwrap_or_default();
    if name.len() > MAX_NAME_BYTES {
        let message = format!("a part's name must be at most {MAX_NAME_BYTES} bytes");
        return Err(InvalidRequest::param(&format!("parts[{index}].name"), message).into());
    }
    Ok(name.to_owned())
}

fn headers_too_long(index: usize) -> ApiError {
    let message = format!("a part's headers must be at most {MAX_HEADER_BYTES} bytes");
    InvalidRequest::param(&format!("parts[{index}].headers"), message).into()
}

/// `payload`, counted as it arrives: past `limit` bytes it ends with an error, and `over` tells
/// that error from the parser's own.
fn counted(
    payload: web::Payload,
    limit: usize,
    over: Rc<Cell<bool>>,
) -> impl Stream<Item = Result<web::Bytes, PayloadError>> {
    let mut received = 0usize;
    payload.map(move |chunk| {
        let chunk = chunk?;
        received = received.saturating_add(chunk.len());
        if received > limit {
            over.set(true);
            return Err(PayloadError::Overflow);
        }
        Ok(chunk)
    })
}

/// What the parser's error `e` is answered with: 413 once the body passed its `limit` (`over`),
/// 408 for a body that did not arrive in time, 400 naming the headers of the part awaited
/// (`next_part`) when the parser refused them as too long or too many, else 400 for the body.
fn refusal(e: &MultipartError, over: bool, limit: usize, next_part: Option<usize>) -> ApiError {
    match (e, next_part) {
        _ if over => ApiError::body_too_large(limit),
        (MultipartError::Payload(PayloadError::Io(io)), _) if io.kind() == io::ErrorKind::TimedOut => {
            ApiError::body_timeout()
        }
        (
            MultipartError::Payload(PayloadError::Overflow) | MultipartError::Parse(ParseError::TooLarge),
            Some(index),
        ) => headers_too_long(index),
        _ => InvalidRequest::body(format!("the form is not valid: {e}")).into(),
    }
}
