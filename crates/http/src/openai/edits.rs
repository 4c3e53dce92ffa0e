//! `POST /openai/v1/images/edits` (OpenAI's `images.edit`): a form of text fields and images,
//! read streamed and bounded (`crate::form`), whose images are kept as uploads are (once per
//! content, counted against the user's day) and go to the provider as the model's image inputs,
//! by their signed links: the job holds the links, never the bytes. Then it answers as
//! `images.generate` does.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::openai::{ImagesRequest, ImagesResponse};
use genjobs_domain::request::MAX_UPLOADED_IMAGES;
use genjobs_domain::upload::MAX_UPLOAD_BYTES;
use genjobs_domain::usecases::Submission;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::OpenAiError;
use super::handlers::{IDEMPOTENCY_KEY_DOC, idempotency, images_of, submit};
use super::wire::edit_into_domain;
use crate::AppState;
use crate::auth::Authenticated;
use crate::dto::requests::{read, received};
use crate::error::ApiError;
use crate::form::{ImageForm, ImageLimits, read_image_form};
use crate::handlers::now;

/// The images an edit takes: `image`, or `image[]` as OpenAI's clients name several.
const EDIT_IMAGES: ImageLimits = ImageLimits {
    names: &["image", "image[]"],
    max_files: MAX_UPLOADED_IMAGES,
    max_bytes: MAX_UPLOAD_BYTES,
    images_only: true,
};

/// What an idempotent retry must repeat: the text fields and each image's SHA-256, in order.
fn fingerprinted(form: &ImageForm) -> Value {
    let digests = form.images.iter().map(|image| Value::String(hex::encode(Sha256::digest(&image.bytes)))).collect();
    let mut fields = form.fields.clone();
    fields.insert("image".to_owned(), Value::Array(digests));
    Value::Object(fields)
}

/// Edit images (OpenAI's `images.edit`)
///
/// A `multipart/form-data` body as OpenAI's clients send it: 1 to 16 images (`image`, or
/// `image[]` for several; PNG, JPEG, WebP or GIF by their bytes, 20 MiB in all) and the fields of
/// `images.generate`, in at most 64 parts (a field sent again counts again; its last value is
/// kept), each named in at most 256 bytes with at most 8 KiB of headers. The images are kept as
/// uploads are (counted against the day's upload quota) and become the model's image inputs, by
/// link; the job is accepted, waited for and answered as `POST /openai/v1/images/generations`
/// answers.
#[utoipa::path(post, path = "/openai/v1/images/edits", tag = "openai", operation_id = "openai_edit_image",
    security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = IDEMPOTENCY_KEY_DOC)),
    request_body(content = ImagesRequest, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "The job succeeded: its images", body = ImagesResponse),
        (status = 400, description = "Invalid input (`param` names it: `image` for a file that is not an image, `model` for a model without image inputs; `parts` for a form of more than 64 parts, `parts[i].name` for a name over 256 bytes, `parts[i].headers` for headers over 8 KiB), or the provider refused it", body = super::error::Envelope),
        (status = 402, description = "Not enough credits", body = super::error::Envelope),
        (status = 409, description = "The job was canceled while the request waited, or the Idempotency-Key was used with another body", body = super::error::Envelope),
        (status = 413, description = "Images over 20 MiB in all, or a body over 21 MiB, refused as they arrive", body = super::error::Envelope),
        (status = 415, description = "Body not multipart/form-data", body = super::error::Envelope),
        (status = 502, description = "The job failed at the provider", body = super::error::Envelope),
    ))]
pub async fn edit_image(
    state: web::Data<AppState>,
    caller: Result<Authenticated, ApiError>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, OpenAiError> {
    let caller = caller?.0;
    let form = read_image_form(&req, payload, EDIT_IMAGES).await?;
    // What an operator sees of the form: its fields, each image named by its SHA-256.
    let fields = fingerprinted(&form);
    let idempotency = idempotency(&req, "openai/images/edits", &fields)?;
    let asked: ImagesRequest = read(&Value::Object(form.fields))?;
    let format = asked.response_format.unwrap_or_default();
    let request = edit_into_domain(asked, &state.services.submissions.catalog())?;
    // What the submission checks of the routes and `extra` is checked before any image is kept,
    // so that a refused edit costs nothing of the day's upload quota.
    state.services.submissions.quote(&caller, &request).map_err(|e| ApiError::from_submit(e, Duration::ZERO))?;
    let images = form.images.into_iter().map(|image| image.bytes).collect();
    let names = state.services.uploads.keep_all(&caller, images).await?;
    let base = state.links.base_of(&req);
    let links = names.iter().map(|name| state.links.upload_url(&base, &name.as_path(), now())).collect();
    let request = request.with_uploaded_images(links)?;
    let id = submit(&state, &caller, Submission { request, received: received(&fields), idempotency }, &req).await?;
    images_of(&state, &caller, id, format, &req).await.map_err(OpenAiError::after_acceptance)
}
