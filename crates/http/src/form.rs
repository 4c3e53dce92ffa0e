//! Reading a `multipart/form-data` body that carries images: streamed part by part and bounded
//! as it arrives, so that a body over the limit is refused (413) when its bytes pass the limit,
//! never read whole first. Text fields are bounded by [`MAX_BODY_BYTES`] together; the file parts
//! named for images by the images' limit together, and each must be an image by its bytes (PNG,
//! JPEG, WebP or GIF), whatever its name or declared type says.

use actix_multipart::{Multipart, MultipartError};
use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use actix_web::{HttpRequest, web};
use futures_util::{StreamExt, TryStreamExt};
use genjobs_domain::request::InvalidRequest;
use genjobs_domain::upload::ImageFormat;
use serde_json::{Map, Value};

use crate::body::MAX_BODY_BYTES;
use crate::error::ApiError;

/// An image file of a form, recognised by its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFile {
    /// Its format, from its bytes.
    pub format: ImageFormat,
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
/// 415 for a body that is not a form; 413 as soon as the images pass `limits.max_bytes`, the
/// text fields [`MAX_BODY_BYTES`], or the declared length both (before reading); 400 naming
/// the first of `limits.names` for too many images or one that is not an image by its bytes, a
/// field's name for another file part or text that is not UTF-8, and the body for a malformed
/// form.
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
    let malformed = |e: MultipartError| ApiError::from(InvalidRequest::body(format!("the form is not valid: {e}")));
    let mut parts = Multipart::new(req.headers(), payload);
    let mut form = ImageForm::default();
    let (mut image_bytes, mut text_bytes) = (0usize, 0usize);
    while let Some(mut part) = parts.try_next().await.map_err(malformed)? {
        let name = part.name().unwrap_or_default().to_owned();
        let is_image = limits.names.contains(&name.as_str());
        let is_file = part.content_disposition().and_then(|d| d.get_filename()).is_some();
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
            let chunk = chunk.map_err(malformed)?;
            *used += chunk.len();
            if *used > limit {
                let what = if is_image { "the images" } else { "the form's text fields" };
                let message = format!("{what} must be at most {limit} bytes in all");
                return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request", "BODY_TOO_LARGE", message));
            }
            value.extend_from_slice(&chunk);
        }
        if is_image {
            let format = ImageFormat::sniff(&value).ok_or_else(|| {
                InvalidRequest::param(image_param, format!("`{image_param}` must be PNG, JPEG, WebP or GIF images"))
            })?;
            form.images.push(ImageFile { format, bytes: value.freeze() });
        } else {
            let text = String::from_utf8(value.to_vec())
                .map_err(|_| InvalidRequest::param(&name, format!("`{name}` must be UTF-8 text")))?;
            form.fields.insert(name, Value::String(text));
        }
    }
    Ok(form)
}
