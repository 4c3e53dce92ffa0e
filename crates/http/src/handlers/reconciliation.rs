//! The reconciliation of providers' bills, for operators: per day and provider key what the
//! providers billed, and the jobs billed more units than they were charged for.

use actix_web::{HttpResponse, web};
use genjobs_api::{Reconciliation, ReconciliationDay, UnitsMismatch};
use genjobs_domain::ports::{self, ReconciliationQuery};

use super::usage::days;
use super::{Handled, Query};
use crate::AppState;
use crate::auth::Operator;

/// Reconciliation of providers' bills
///
/// For the jobs created from `from` to `to` (UTC days, both included; default the 30 days ending
/// today), of one provider or all: per day, provider and provider key (`key_hint`, its last 4
/// characters), the jobs billed, their units and what they cost (decimal strings), to hold
/// against each provider's invoice; and `mismatches`, the jobs whose provider reported more
/// units than the job was charged for.
#[utoipa::path(get, path = "/api/admin/reconciliation", tag = "admin",
    security(("admin_token" = [])),
    params(
        ("from" = Option<String>, Query, description = "First day, YYYY-MM-DD (default: 29 days before `to`)"),
        ("to" = Option<String>, Query, description = "Last day, included, YYYY-MM-DD (default: today, UTC)"),
        ("provider" = Option<String>, Query, description = "Only this provider's jobs (`fal`, `replicate`)"),
    ),
    responses(
        (status = 200, description = "The bills per day and provider key, and the mismatched jobs", body = Reconciliation),
        (status = 400, description = "A bad date, a backwards or over-long range, or a provider no route names", body = crate::error::Envelope),
    ))]
pub async fn admin_reconciliation(state: web::Data<AppState>, _: Operator, query: Query) -> Handled {
    let (from, to) = days(&query)?;
    let provider = query.get("provider").cloned();
    let reconciled = state.services.admin.reconciliation(ReconciliationQuery { from, to, provider }).await?;
    Ok(HttpResponse::Ok().json(reconciliation_view(reconciled)))
}

fn reconciliation_view(reconciled: ports::Reconciliation) -> Reconciliation {
    Reconciliation {
        data: reconciled
            .rows
            .into_iter()
            .map(|row| ReconciliationDay {
                day: row.day.to_string(),
                provider: row.provider,
                key_hint: row.key_hint,
                jobs: row.jobs,
                units: row.units.to_string(),
                cost_usd: row.cost_usd.to_string(),
            })
            .collect(),
        mismatches: reconciled
            .mismatches
            .into_iter()
            .map(|m| UnitsMismatch {
                job_id: m.job_id.to_string(),
                model: m.model,
                units_charged: m.units_charged.to_string(),
                units_reported: m.units_reported.to_string(),
            })
            .collect(),
    }
}
