//! The quote endpoints: the price a submission of the same body would hold now, with the same
//! validation, and nothing made or held.

use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::{ImageRequest, Quote, VideoRequest};
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::modality::Modality;

use super::Handled;
use crate::AppState;
use crate::auth::Authenticated;
use crate::body::read_json;
use crate::dto::requests::generation_request;
use crate::dto::responses::quote_view;
use crate::error::ApiError;

async fn quote(
    modality: Modality,
    state: &AppState,
    caller: &Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let mut body = read_json(&req, payload).await?;
    let in_batch = match body.as_object_mut().and_then(|fields| fields.remove("batch")) {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Bool(in_batch)) => in_batch,
        Some(_) => return Err(InvalidRequest::param("batch", "`batch` must be a boolean").into()),
    };
    let request = generation_request(modality, &body, &state.services.submissions.catalog())?;
    let quote = state
        .services
        .submissions
        .quote_as(&caller.0, &request, in_batch)
        .map_err(|e| ApiError::from_submit(e, state.services.settings().poll_interval))?;
    Ok(HttpResponse::Ok().json(quote_view(quote)))
}

/// Price a video generation
///
/// Takes the body of `POST /api/v1/video/generations` and answers what submitting it now would
/// hold; with `"batch": true`, what it would hold as an item of a batch (at the batch price). No job is made and nothing is held; never refused for lack of credits. Counts against
/// the rate limit.
#[utoipa::path(post, path = "/api/v1/video/generations/quote", tag = "generations",
    security(("api_key" = [])),
    request_body(content = VideoRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The price", body = Quote),
        (status = 400, description = "Invalid body or field (`param` names it), as for a submission", body = crate::error::Envelope),
    ))]
pub async fn quote_video(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    quote(Modality::Video, &state, &caller, req, payload).await
}

/// Price an image generation
///
/// As the video quote, for the body of `POST /api/v1/images/generations`.
#[utoipa::path(post, path = "/api/v1/images/generations/quote", tag = "generations",
    security(("api_key" = [])),
    request_body(content = ImageRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The price", body = Quote),
        (status = 400, description = "Invalid body or field (`param` names it), as for a submission", body = crate::error::Envelope),
    ))]
pub async fn quote_image(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    quote(Modality::Image, &state, &caller, req, payload).await
}
