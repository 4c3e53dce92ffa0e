//! The batches of OpenAI's Batch API: `batches.create` (its input file read line by line into a
//! native batch's items), `batches.retrieve`, `batches.list` and `batches.cancel`.

use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::openai_batches::{BatchList, BatchObject, BatchRequest};
use genjobs_domain::ids::BatchId;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::openai_batch::OpenAiFileId;
use genjobs_domain::usecases::{MAX_OPENAI_BATCHES_PAGE, OpenAiBatchError, OpenAiBatchRequest, check_openai_batch};

use super::batch_wire::{batch_object, read_lines};
use super::error::OpenAiError;
use super::handlers::{IDEMPOTENCY_KEY_DOC, idempotency};
use crate::AppState;
use crate::auth::Authenticated;
use crate::body::read_json;
use crate::dto::requests::read;
use crate::error::ApiError;
use crate::query::{Query, integer_param};

type Handled = Result<HttpResponse, OpenAiError>;
type Caught = Result<Authenticated, ApiError>;

/// Batches in a page of `batches.list` when the client names no `limit`.
const DEFAULT_BATCH_PAGE: u64 = 20;

fn batch_id(path: &str) -> Result<BatchId, ApiError> {
    BatchId::parse(path).map_err(|_| OpenAiBatchError::NotFound("batch").into())
}

/// Create a batch (OpenAI's `batches.create`)
///
/// Reads the input file: each line `{custom_id, method: "POST", url, body}`, `url` the batch's
/// `endpoint`, `body` as that endpoint takes it. Every line valid: the items are accepted as one
/// native batch of the same id (`/api/v1/batches/{id}`), at the batch price, all held in one step,
/// and the batch is `in_progress`. A line at fault: the batch is `failed`, `errors.data` names
/// each such line (from 1), and nothing is held.
#[utoipa::path(post, path = "/openai/v1/batches", tag = "openai", operation_id = "openai_create_batch",
    security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = IDEMPOTENCY_KEY_DOC)),
    request_body(content = BatchRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The batch: `in_progress`, or `failed` on its file's lines", body = BatchObject),
        (status = 400, description = "An `endpoint`, `completion_window` or `metadata` not taken here (`param` names it)", body = super::error::Envelope),
        (status = 402, description = "Not enough credits, or a key's budget, for the whole batch; nothing held", body = super::error::Envelope),
        (status = 404, description = "No such input file", body = super::error::Envelope),
        (status = 409, description = "The Idempotency-Key was used with another body", body = super::error::Envelope),
    ))]
pub async fn create_batch(
    state: web::Data<AppState>,
    caller: Caught,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let caller = caller?.0;
    let body = read_json(&req, payload).await?;
    let asked: BatchRequest = read(&body)?;
    let metadata = asked.metadata.unwrap_or_default();
    check_openai_batch(&asked.endpoint, &asked.completion_window, &metadata)?;
    let Some(OpenAiFileId::Upload(input_file_id)) = OpenAiFileId::parse(&asked.input_file_id) else {
        return Err(
            InvalidRequest::param("input_file_id", "`input_file_id` must name a file uploaded for batches").into()
        );
    };
    let uses = &state.services.openai_batches;
    let content = uses.file_content(&caller, input_file_id).await.map_err(ApiError::from)?;
    let catalog = state.services.submissions.catalog();
    let endpoint = asked.endpoint.clone();
    // Reading tens of thousands of lines is work for a blocking thread, not the server's.
    let items = web::block(move || {
        let text = String::from_utf8_lossy(&content);
        read_lines(&text, &endpoint, &catalog)
    })
    .await
    .map_err(|e| ApiError::from(genjobs_domain::ports::StoreError::Internal(e.to_string())))?;
    let request = OpenAiBatchRequest {
        input_file_id,
        endpoint: asked.endpoint,
        completion_window: asked.completion_window,
        metadata,
        items,
        idempotency: idempotency(&req, "openai/batches", &body)?,
    };
    let view = uses.create(&caller, request).await.map_err(ApiError::from)?;
    Ok(HttpResponse::Ok().json(batch_object(&view)))
}

/// Retrieve a batch (OpenAI's `batches.retrieve`)
#[utoipa::path(get, path = "/openai/v1/batches/{id}", tag = "openai", operation_id = "openai_get_batch",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The batch's id")),
    responses(
        (status = 200, description = "The batch", body = BatchObject),
        (status = 404, description = "No such batch, or another user's", body = super::error::Envelope),
    ))]
pub async fn get_batch(state: web::Data<AppState>, caller: Caught, path: web::Path<String>) -> Handled {
    let caller = caller?.0;
    let view = state.services.openai_batches.batch(&caller, batch_id(&path)?).await.map_err(ApiError::from)?;
    Ok(HttpResponse::Ok().json(batch_object(&view)))
}

/// List batches (OpenAI's `batches.list`)
///
/// The caller's batches, newest first; `after` is the `last_id` of the page before.
#[utoipa::path(get, path = "/openai/v1/batches", tag = "openai", operation_id = "openai_list_batches",
    security(("api_key" = [])),
    params(
        ("limit" = Option<u64>, Query, description = "1 to 100 batches; 20 when absent"),
        ("after" = Option<String>, Query, description = "The page starts after this batch"),
    ),
    responses(
        (status = 200, description = "A page of the caller's batches", body = BatchList),
        (status = 400, description = "A `limit` or `after` out of range (`param` names it)", body = super::error::Envelope),
    ))]
pub async fn list_batches(state: web::Data<AppState>, caller: Caught, query: Query) -> Handled {
    let caller = caller?.0;
    let limit = integer_param(&query, "limit", 1, MAX_OPENAI_BATCHES_PAGE as u64)?.unwrap_or(DEFAULT_BATCH_PAGE);
    let after = query
        .get("after")
        .map(|after| BatchId::parse(after).map_err(|_| InvalidRequest::param("after", "`after` must be a batch id")))
        .transpose()?;
    let limit = usize::try_from(limit).unwrap_or(1);
    let (views, has_more) = state.services.openai_batches.list(&caller, after, limit).await.map_err(ApiError::from)?;
    let data: Vec<BatchObject> = views.iter().map(batch_object).collect();
    Ok(HttpResponse::Ok().json(BatchList {
        object: "list".to_owned(),
        first_id: data.first().map(|batch| batch.id.clone()),
        last_id: data.last().map(|batch| batch.id.clone()),
        has_more,
        data,
    }))
}

/// Cancel a batch (OpenAI's `batches.cancel`)
///
/// As a native batch's cancel: no request is sent from now on, those not sent are canceled and
/// released at once, those sent canceled as a job is. `cancelling` until every request is final,
/// then `cancelled`. A `failed` batch is answered as it is.
#[utoipa::path(post, path = "/openai/v1/batches/{id}/cancel", tag = "openai", operation_id = "openai_cancel_batch",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The batch's id")),
    responses(
        (status = 200, description = "The batch as the cancel left it", body = BatchObject),
        (status = 404, description = "No such batch, or another user's", body = super::error::Envelope),
    ))]
pub async fn cancel_batch(state: web::Data<AppState>, caller: Caught, path: web::Path<String>) -> Handled {
    let caller = caller?.0;
    let view = state.services.openai_batches.cancel(&caller, batch_id(&path)?).await.map_err(ApiError::from)?;
    Ok(HttpResponse::Ok().json(batch_object(&view)))
}
