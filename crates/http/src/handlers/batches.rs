//! The batch endpoints: submit a batch, read it, page its items, stream its results, cancel it;
//! and the operators' listing of every user's batches, one batch and its items.

use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::stream;
use genjobs_api::{AdminBatch, AdminBatchPage, Batch, BatchItemPage, BatchPage, BatchRequest, BatchResult};
use genjobs_domain::batch::BatchState;
use genjobs_domain::ids::{BatchId, JobId, UserId};
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::job::JobState;
use genjobs_domain::ports::BatchFilter;
use genjobs_domain::usecases::{BatchPage as Page, Caller, MAX_BATCH_ITEMS_PAGE, MAX_BATCHES_PAGE};

use super::{Handled, Query, idempotency_key, integer_param, now};
use crate::AppState;
use crate::auth::{Authenticated, Operator};
use crate::body::read_json_within;
use crate::dto::batches::{admin_batch_view, batch_item_view, batch_result_view, batch_submission, batch_view};
use crate::error::ApiError;
use crate::links::OutputLinks;

/// Largest batch body: 16 MiB.
const MAX_BATCH_BODY_BYTES: usize = 16 << 20;
/// How many result lines are read from the store at a time while streaming.
const RESULTS_PAGE: usize = 500;

fn batch_id(path: &str) -> Result<BatchId, ApiError> {
    BatchId::parse(path).map_err(|_| ApiError::from(genjobs_domain::usecases::BatchQueryError::NotFound))
}

/// The `limit` query parameter, 1 to `most`, 20 when absent.
fn limit(query: &Query, most: usize) -> Result<usize, ApiError> {
    Ok(integer_param(query, "limit", 1, most as u64)?.map_or(20, |n| n as usize))
}

fn id_param<T>(query: &Query, name: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Option<T>, ApiError> {
    query
        .get(name)
        .map(|text| {
            parse(text).ok_or_else(|| InvalidRequest::param(name, format!("`{name}` is not a valid id")).into())
        })
        .transpose()
}

/// The `state`, `limit` and `after` of a page of a batch's items.
fn items_query(query: &Query) -> Result<(Option<JobState>, usize, Option<JobId>), ApiError> {
    let wanted = query
        .get("state")
        .map(|text| {
            JobState::parse(text).ok_or_else(|| {
                InvalidRequest::param("state", "`state` must be queued, running, succeeded, failed or canceled")
            })
        })
        .transpose()?;
    let limit = limit(query, MAX_BATCH_ITEMS_PAGE)?;
    let after = id_param(query, "after", |text| JobId::parse(text).ok())?;
    Ok((wanted, limit, after))
}

fn item_page_view(page: &Page<genjobs_domain::job::Job, JobId>, links: &OutputLinks<'_>) -> BatchItemPage {
    BatchItemPage {
        data: page.data.iter().map(|job| batch_item_view(job, links)).collect(),
        next: page.next.map(|id| id.to_string()),
    }
}

fn batch_page_view(page: &Page<genjobs_domain::batch::BatchView, BatchId>) -> BatchPage {
    BatchPage { data: page.data.iter().map(batch_view).collect(), next: page.next.map(|id| id.to_string()) }
}

/// Submit a batch
///
/// 1 to 5,000 generations as one unit, every item validated before anything is held, the sum of
/// their holds held in one step; items run at `low` priority at the batch price, waiting (not
/// refused) for room under the user's concurrent-job limit.
#[utoipa::path(post, path = "/api/v1/batches", tag = "batches",
    security(("api_key" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a retry with the same key and body answers with the original batch and holds nothing more")),
    request_body(content = BatchRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Accepted: every item is queued and its credits held", body = Batch),
        (status = 400, description = "An invalid item or field (`param` names it, e.g. `items[3].body.prompt`); nothing held", body = crate::error::Envelope),
        (status = 402, description = "Not enough credits, or a key's budget, for the whole batch; nothing held", body = crate::error::Envelope),
        (status = 409, description = "The Idempotency-Key was used with another body", body = crate::error::Envelope),
        (status = 413, description = "The body is over 16 MiB", body = crate::error::Envelope),
    ))]
pub async fn create_batch(
    state: web::Data<AppState>,
    caller: Authenticated,
    req: HttpRequest,
    payload: web::Payload,
) -> Handled {
    let body = read_json_within(&req, payload, MAX_BATCH_BODY_BYTES).await?;
    let submissions = &state.services.submissions;
    let submission = batch_submission(body, &submissions.catalog(), idempotency_key(&req)?)?;
    let view = submissions
        .submit_batch(&caller.0, submission)
        .await
        .map_err(|e| ApiError::from_submit(e, state.services.settings().poll_interval))?;
    Ok(HttpResponse::Accepted().json(batch_view(&view)))
}

/// List the caller's batches
///
/// Newest first; `next` is the `before` of the following page, or null.
#[utoipa::path(get, path = "/api/v1/batches", tag = "batches",
    security(("api_key" = [])),
    params(
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 100, description = "Batches per page (default 20)"),
        ("before" = Option<String>, Query, description = "A batch id: list only older batches"),
    ),
    responses(
        (status = 200, description = "A page of batches", body = BatchPage),
        (status = 400, description = "`limit` or `before` is not valid", body = crate::error::Envelope),
    ))]
pub async fn list_batches(state: web::Data<AppState>, caller: Authenticated, query: Query) -> Handled {
    let limit = limit(&query, MAX_BATCHES_PAGE)?;
    let before = id_param(&query, "before", |text| BatchId::parse(text).ok())?;
    let filter = BatchFilter { user_id: Some(caller.0.user_id), state: None };
    let page = visible(&caller.0, state.services.batches.list(filter, before, limit).await?);
    Ok(HttpResponse::Ok().json(batch_page_view(&page)))
}

/// A page of the caller's batches without those their key may not see (a restricted key sees
/// its own subtree's).
fn visible(
    caller: &Caller,
    mut page: Page<genjobs_domain::batch::BatchView, BatchId>,
) -> Page<genjobs_domain::batch::BatchView, BatchId> {
    page.data.retain(|view| caller.sees_key(view.batch.key_prefix.as_ref()));
    page
}

/// Read a batch
#[utoipa::path(get, path = "/api/v1/batches/{id}", tag = "batches",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The batch id")),
    responses(
        (status = 200, description = "The batch", body = Batch),
        (status = 403, description = "The batch is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such batch", body = crate::error::Envelope),
    ))]
pub async fn get_batch(state: web::Data<AppState>, caller: Authenticated, path: web::Path<String>) -> Handled {
    let view = state.services.batches.batch(&caller.0, batch_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(batch_view(&view)))
}

/// Page a batch's items
///
/// In the batch's order, each with its job; `next` is the `after` of the following page, or null.
#[utoipa::path(get, path = "/api/v1/batches/{id}/items", tag = "batches",
    security(("api_key" = [])),
    params(
        ("id" = String, Path, description = "The batch id"),
        ("state" = Option<String>, Query, description = "Only items in this state: queued, running, succeeded, failed or canceled"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "Items per page (default 20)"),
        ("after" = Option<String>, Query, description = "A job id of the batch: list only the items after it"),
    ),
    responses(
        (status = 200, description = "A page of items", body = BatchItemPage),
        (status = 400, description = "`state`, `limit` or `after` is not valid", body = crate::error::Envelope),
        (status = 403, description = "The batch is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such batch", body = crate::error::Envelope),
    ))]
pub async fn batch_items(
    state: web::Data<AppState>,
    caller: Authenticated,
    path: web::Path<String>,
    query: Query,
    req: HttpRequest,
) -> Handled {
    let id = batch_id(&path)?;
    let (wanted, limit, after) = items_query(&query)?;
    let page = state.services.batches.items(&caller.0, id, wanted, after, limit).await?;
    Ok(HttpResponse::Ok().json(item_page_view(&page, &state.links.for_request(&req, now()))))
}

/// Stream a batch's results
///
/// `application/x-ndjson`: one line per final item, in the batch's order, read from the store a
/// page at a time as the response is written, so that no side holds the whole batch.
#[utoipa::path(get, path = "/api/v1/batches/{id}/results", tag = "batches",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The batch id")),
    responses(
        (status = 200, description = "One `BatchResult` per line", content_type = "application/x-ndjson", body = BatchResult),
        (status = 403, description = "The batch is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such batch", body = crate::error::Envelope),
    ))]
pub async fn batch_results(
    state: web::Data<AppState>,
    caller: Authenticated,
    path: web::Path<String>,
    req: HttpRequest,
) -> Handled {
    let id = batch_id(&path)?;
    // The first page is read before answering, so that a refusal is an error response, not a
    // stream that breaks off.
    let first = state.services.batches.results(&caller.0, id, None, RESULTS_PAGE).await?;
    let base = state.links.base_of(&req);
    let pages = stream::unfold(Some(first), move |page| {
        let (state, caller, base) = (state.clone(), caller.0.clone(), base.clone());
        async move {
            let page = page?;
            let links = state.links.rooted_at(base, now());
            let mut lines = Vec::with_capacity(page.data.len() * 256);
            for job in &page.data {
                if serde_json::to_writer(&mut lines, &batch_result_view(job, &links)).is_ok() {
                    lines.push(b'\n');
                }
            }
            let next = match page.next {
                Some(after) => match state.services.batches.results(&caller, id, Some(after), RESULTS_PAGE).await {
                    Ok(next) => Some(next),
                    Err(e) => {
                        tracing::warn!(batch_id = %id, error = %e, "a batch's results stream broke off");
                        None
                    }
                },
                None => None,
            };
            Some((Ok::<_, actix_web::Error>(web::Bytes::from(lines)), next))
        }
    });
    Ok(HttpResponse::Ok().content_type("application/x-ndjson").streaming(pages))
}

/// Cancel a batch
///
/// From now on no item of the batch is sent; items not yet sent are canceled and released at
/// once, sent ones canceled as a job's cancel does. The batch is `canceled` once every item is final.
#[utoipa::path(post, path = "/api/v1/batches/{id}/cancel", tag = "batches",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "The batch id")),
    responses(
        (status = 202, description = "The batch as the cancel left it", body = Batch),
        (status = 403, description = "The batch is another user's", body = crate::error::Envelope),
        (status = 404, description = "No such batch", body = crate::error::Envelope),
    ))]
pub async fn cancel_batch(state: web::Data<AppState>, caller: Authenticated, path: web::Path<String>) -> Handled {
    let view = state.services.batches.cancel(&caller.0, batch_id(&path)?).await?;
    Ok(HttpResponse::Accepted().json(batch_view(&view)))
}

/// List every user's batches
///
/// Newest first, each filter optional; `next` is the `before` of the following page, or null.
#[utoipa::path(get, path = "/api/admin/batches", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("user_id" = Option<String>, Query, description = "Only this user's batches"),
        ("state" = Option<String>, Query, description = "Only batches in this state: in_progress, completed, expired or canceled"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 100, description = "Batches per page (default 20)"),
        ("before" = Option<String>, Query, description = "A batch id: list only older batches"),
    ),
    responses(
        (status = 200, description = "A page of batches, each with its owner and key", body = AdminBatchPage),
        (status = 400, description = "A filter, `limit` or `before` is not valid (`param` names it)", body = crate::error::Envelope),
    ))]
pub async fn admin_batches(state: web::Data<AppState>, _: Operator, query: Query) -> Handled {
    let user_id = id_param(&query, "user_id", |text| UserId::parse(text).ok())?;
    let wanted = query
        .get("state")
        .map(|text| {
            BatchState::parse(text).ok_or_else(|| {
                InvalidRequest::param("state", "`state` must be in_progress, completed, expired or canceled")
            })
        })
        .transpose()?;
    let limit = limit(&query, MAX_BATCHES_PAGE)?;
    let before = id_param(&query, "before", |text| BatchId::parse(text).ok())?;
    let page = state.services.batches.list(BatchFilter { user_id, state: wanted }, before, limit).await?;
    Ok(HttpResponse::Ok().json(AdminBatchPage {
        data: page.data.iter().map(admin_batch_view).collect(),
        next: page.next.map(|id| id.to_string()),
    }))
}

/// Read any user's batch
#[utoipa::path(get, path = "/api/admin/batches/{id}", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The batch id")),
    responses(
        (status = 200, description = "The batch, with its owner and key", body = AdminBatch),
        (status = 404, description = "No such batch", body = crate::error::Envelope),
    ))]
pub async fn admin_batch(state: web::Data<AppState>, _: Operator, path: web::Path<String>) -> Handled {
    let view = state.services.batches.batch_for_operator(batch_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(admin_batch_view(&view)))
}

/// Page any user's batch's items
///
/// As the owner's `GET /api/v1/batches/{id}/items` pages them: in the batch's order, each with
/// its job; `next` is the `after` of the following page, or null.
#[utoipa::path(get, path = "/api/admin/batches/{id}/items", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("id" = String, Path, description = "The batch id"),
        ("state" = Option<String>, Query, description = "Only items in this state: queued, running, succeeded, failed or canceled"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "Items per page (default 20)"),
        ("after" = Option<String>, Query, description = "A job id of the batch: list only the items after it"),
    ),
    responses(
        (status = 200, description = "A page of items", body = BatchItemPage),
        (status = 400, description = "`state`, `limit` or `after` is not valid", body = crate::error::Envelope),
        (status = 404, description = "No such batch", body = crate::error::Envelope),
    ))]
pub async fn admin_batch_items(
    state: web::Data<AppState>,
    _: Operator,
    path: web::Path<String>,
    query: Query,
    req: HttpRequest,
) -> Handled {
    let id = batch_id(&path)?;
    let (wanted, limit, after) = items_query(&query)?;
    let page = state.services.batches.items_for_operator(id, wanted, after, limit).await?;
    Ok(HttpResponse::Ok().json(item_page_view(&page, &state.links.for_request(&req, now()))))
}
