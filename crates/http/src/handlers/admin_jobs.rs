//! The operators' handlers of jobs (`/api/admin/jobs`): every user's jobs by filter, one job
//! with its request and ledger, and a cancel of any user's job.

use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use genjobs_api::{AdminJobDetail, AdminJobPage, CancelReceipt};
use genjobs_domain::ids::JobId;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::usecases::MAX_ADMIN_JOBS_PAGE;

use super::{Handled, Query, integer_param, job_id, now};
use crate::AppState;
use crate::auth::Operator;
use crate::dto::admin_jobs::{admin_job_page_view, inspected_job_view, job_filter};
use crate::dto::responses::cancel_view;

/// List every user's jobs
///
/// Newest first, each filter optional; `next` is the `before` of the following page, or null.
#[utoipa::path(get, path = "/api/admin/jobs", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("user_id" = Option<String>, Query, description = "Only this user's jobs"),
        ("state" = Option<String>, Query, description = "Only jobs in this state: queued, running, succeeded, failed or canceled"),
        ("model" = Option<String>, Query, description = "Only jobs of this model"),
        ("upstream" = Option<String>, Query, description = "Only jobs sent to this provider (`fal`, `replicate`)"),
        ("key" = Option<String>, Query, description = "Only jobs submitted with the key of this prefix (a whole key is cut to its prefix)"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 100, description = "Jobs per page (default 20)"),
        ("before" = Option<String>, Query, description = "A job id: list only older jobs"),
    ),
    responses(
        (status = 200, description = "A page of jobs", body = AdminJobPage),
        (status = 400, description = "A filter, `limit` or `before` is not valid (`param` names it)", body = crate::error::Envelope),
    ))]
pub async fn admin_jobs(state: web::Data<AppState>, _: Operator, query: Query, req: HttpRequest) -> Handled {
    let filter = job_filter(&query)?;
    let limit = integer_param(&query, "limit", 1, MAX_ADMIN_JOBS_PAGE as u64)?.unwrap_or(20);
    let before = query
        .get("before")
        .map(|b| JobId::parse(b).map_err(|_| InvalidRequest::param("before", "`before` must be a job id")))
        .transpose()?;
    let page = state.services.admin.find_jobs(&filter, before, limit as usize).await?;
    Ok(HttpResponse::Ok().json(admin_job_page_view(&page, &state.links.for_request(&req, now()))))
}

/// Inspect any user's job
///
/// The job as the listing shows it, the JSON object its submission was received with (no
/// default filled in), its ledger entries, oldest first, and its client webhook events with
/// their attempts.
#[utoipa::path(get, path = "/api/admin/jobs/{id}", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job", body = AdminJobDetail),
        (status = 404, description = "No such job", body = crate::error::Envelope),
    ))]
pub async fn admin_job(state: web::Data<AppState>, _: Operator, path: web::Path<String>, req: HttpRequest) -> Handled {
    let id = job_id(&path)?;
    req.extensions_mut().insert(id);
    let inspected = state.services.admin.inspect_job(id).await?;
    let webhooks = state.services.webhooks.any_job_webhooks(id).await?;
    Ok(HttpResponse::Ok().json(inspected_job_view(inspected, &webhooks, &state.links.for_request(&req, now()))))
}

/// Cancel any user's job
///
/// As its owner's cancel: everything held is released; a final job is left as it is and the
/// answer names its state.
#[utoipa::path(post, path = "/api/admin/jobs/{id}/cancel", tag = "admin",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The job id")),
    responses(
        (status = 200, description = "The job's state after the cancel", body = CancelReceipt),
        (status = 404, description = "No such job", body = crate::error::Envelope),
    ))]
pub async fn admin_cancel_job(
    state: web::Data<AppState>,
    _: Operator,
    path: web::Path<String>,
    req: HttpRequest,
) -> Handled {
    let id = job_id(&path)?;
    req.extensions_mut().insert(id);
    let receipt = state.services.cancellations.cancel_for_operator(id).await?;
    Ok(HttpResponse::Ok().json(cancel_view(receipt)))
}
