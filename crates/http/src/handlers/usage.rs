//! The ledger and usage endpoints: the caller's credit movements and usage, and the operators'
//! usage across users, in JSON or CSV.

use actix_web::http::header::{ACCEPT, CONTENT_TYPE};
use actix_web::{HttpRequest, HttpResponse, web};
use genjobs_api::{DataView, LedgerPage, UsageRow};
use genjobs_domain::ids::UserId;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::ports::{UsageGrouping, UsageQuery};
use genjobs_domain::usecases::{MAX_LEDGER_PAGE, UsageError};
use time::{Date, Duration, OffsetDateTime};

use super::{Handled, Query, integer_param};
use crate::AppState;
use crate::auth::{Authenticated, Operator};
use crate::dto::usage::{admin_usage_row_view, ledger_page_view, usage_csv, usage_row_view};
use crate::error::ApiError;

impl From<UsageError> for ApiError {
    fn from(e: UsageError) -> Self {
        match e {
            UsageError::Invalid(e) => e.into(),
            UsageError::Store(e) => e.into(),
        }
    }
}

pub(super) fn day(query: &Query, name: &str) -> Result<Option<Date>, InvalidRequest> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    query
        .get(name)
        .map(|text| {
            Date::parse(text, &format)
                .map_err(|_| InvalidRequest::param(name, format!("`{name}` must be a date, YYYY-MM-DD")))
        })
        .transpose()
}

/// The report's days: `from` and `to` (included) as given; absent, the 30 days ending today (UTC).
pub(super) fn days(query: &Query) -> Result<(Date, Date), InvalidRequest> {
    let to = day(query, "to")?.unwrap_or_else(|| OffsetDateTime::now_utc().date());
    let from = day(query, "from")?.unwrap_or_else(|| to - Duration::days(29));
    Ok((from, to))
}

fn grouping(query: &Query, allowed: &[(&str, UsageGrouping)]) -> Result<UsageGrouping, InvalidRequest> {
    let Some(text) = query.get("group_by") else { return Ok(allowed[0].1) };
    allowed.iter().find(|(name, _)| name == text).map(|(_, grouping)| *grouping).ok_or_else(|| {
        let names: Vec<&str> = allowed.iter().map(|(name, _)| *name).collect();
        InvalidRequest::param("group_by", format!("`group_by` must be one of {}", names.join(", ")))
    })
}

/// The caller's ledger
///
/// Every credit movement, newest first: `grant` (the opening credits are the first), `hold` at
/// acceptance, then `charge` (what a succeeded job delivered) and `release` (the rest, or all of
/// a failed or canceled job's hold). Summed: available = grants − holds + releases, held = holds −
/// releases − charges, spent = charges.
#[utoipa::path(get, path = "/api/v1/account/ledger", tag = "account",
    security(("api_key" = [])),
    params(
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 100, description = "Entries per page (default 20)"),
        ("before" = Option<String>, Query, description = "The `next` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of the ledger", body = LedgerPage),
        (status = 400, description = "`limit` or `before` is not valid", body = crate::error::Envelope),
    ))]
pub async fn account_ledger(state: web::Data<AppState>, caller: Authenticated, query: Query) -> Handled {
    let limit = integer_param(&query, "limit", 1, MAX_LEDGER_PAGE as u64)?.unwrap_or(20);
    let before = query
        .get("before")
        .map(|b| {
            b.parse::<i64>()
                .ok()
                .filter(|b| *b > 0)
                .ok_or_else(|| InvalidRequest::param("before", "`before` must be a `next` cursor"))
        })
        .transpose()?;
    let page = state.services.accounts.ledger(&caller.0, before, limit as usize).await?;
    Ok(HttpResponse::Ok().json(ledger_page_view(page)))
}

/// The caller's usage
///
/// Jobs created from `from` to `to` (UTC days, both included; a job counts on the day it was
/// created), grouped by day or model, with what they were charged.
#[utoipa::path(get, path = "/api/v1/account/usage", tag = "account",
    security(("api_key" = [])),
    params(
        ("from" = Option<String>, Query, description = "First day, YYYY-MM-DD (default: 29 days before `to`)"),
        ("to" = Option<String>, Query, description = "Last day, included, YYYY-MM-DD (default: today, UTC)"),
        ("group_by" = Option<String>, Query, description = "`day` (default), `model`, `day,model` (a row per model and day), or `key` (the key prefix the jobs were submitted with; null for jobs of no recorded key)"),
    ),
    responses(
        (status = 200, description = "The usage, one row a group", body = DataView<UsageRow>),
        (status = 400, description = "A bad date, a backwards or over-long range, or a bad `group_by`", body = crate::error::Envelope),
    ))]
pub async fn account_usage(state: web::Data<AppState>, caller: Authenticated, query: Query) -> Handled {
    let (from, to) = days(&query)?;
    let group_by = grouping(
        &query,
        &[
            ("day", UsageGrouping::Day),
            ("model", UsageGrouping::Model),
            ("day,model", UsageGrouping::DayAndModel),
            ("key", UsageGrouping::Key),
        ],
    )?;
    let rows = state.services.accounts.usage(&caller.0, from, to, group_by).await?;
    Ok(HttpResponse::Ok().json(DataView { data: rows.into_iter().map(|row| usage_row_view(group_by, row)).collect() }))
}

/// Usage across users
///
/// As the caller's usage, for every user (or the one `user_id` names), grouped by user, model,
/// day, provider or provider key, each row with what the providers billed for it
/// (`provider_cost_usd`), what its credits are worth (`revenue_usd`, at `GENJOBS_CREDIT_USD` a
/// credit) and the difference (`margin_usd`), all decimal strings. With `Accept: text/csv`, CSV
/// whose header row names the JSON fields.
#[utoipa::path(get, path = "/api/admin/usage", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("from" = Option<String>, Query, description = "First day, YYYY-MM-DD (default: 29 days before `to`)"),
        ("to" = Option<String>, Query, description = "Last day, included, YYYY-MM-DD (default: today, UTC)"),
        ("group_by" = Option<String>, Query, description = "`user` (default), `model`, `day`, `day,model`, `provider` (the provider that took the jobs; null for those none took), `key` (the key prefix the jobs were submitted with; null for jobs of no recorded key), or `provider_key` (the last 4 characters of the provider key the jobs were sent with; null when not known)"),
        ("user_id" = Option<String>, Query, description = "Only this user's jobs"),
    ),
    responses(
        (status = 200, description = "The usage, one row a group", content(
            (DataView<UsageRow> = "application/json"),
            (String = "text/csv"),
        )),
        (status = 400, description = "A bad date, range, `group_by` or `user_id`", body = crate::error::Envelope),
    ))]
pub async fn admin_usage(state: web::Data<AppState>, _: Operator, query: Query, req: HttpRequest) -> Handled {
    let (from, to) = days(&query)?;
    let group_by = grouping(
        &query,
        &[
            ("user", UsageGrouping::User),
            ("model", UsageGrouping::Model),
            ("day", UsageGrouping::Day),
            ("day,model", UsageGrouping::DayAndModel),
            ("provider", UsageGrouping::Provider),
            ("key", UsageGrouping::Key),
            ("provider_key", UsageGrouping::ProviderKey),
        ],
    )?;
    let user_id = query
        .get("user_id")
        .map(|id| UserId::parse(id).map_err(|_| InvalidRequest::param("user_id", "`user_id` must be a user id")))
        .transpose()?;
    let credit_usd = state.services.admin.credit_usd();
    let rows: Vec<UsageRow> = state
        .services
        .admin
        .usage_report(UsageQuery { user_id, keys: None, from, to, group_by })
        .await?
        .into_iter()
        .map(|row| admin_usage_row_view(group_by, row, credit_usd))
        .collect();
    let wants_csv = req
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.to_ascii_lowercase().contains("text/csv"));
    if wants_csv {
        return Ok(HttpResponse::Ok()
            .insert_header((CONTENT_TYPE, "text/csv; charset=utf-8"))
            .body(usage_csv(group_by, &rows)));
    }
    Ok(HttpResponse::Ok().json(DataView { data: rows }))
}
