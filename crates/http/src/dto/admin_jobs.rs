//! The operators' job listing on the wire: its query read into the domain's [`JobFilter`], and
//! the views of a job with its owner and provider id, of a page of them, and of one job with the
//! body it was received with, its ledger and its webhook events.

use genjobs_api::{AdminJob, AdminJobDetail, AdminJobPage};
use genjobs_domain::catalog::MAX_MODEL_ID_CHARS;
use genjobs_domain::client_webhooks::WebhookEvent;
use genjobs_domain::ids::{JobId, KeyPrefix, ModelId, UserId};
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::job::{Job, JobState};
use genjobs_domain::ports::JobFilter;
use genjobs_domain::usecases::{InspectedJob, JobListing};

use super::client_webhooks::delivery_view;
use super::responses::job_view;
use super::usage::ledger_entry_view;
use crate::links::OutputLinks;
use crate::query::Query;

/// A model id or provider name from the query: 1 to [`MAX_MODEL_ID_CHARS`] URL-safe characters,
/// as model ids are (no job has another, so a query with another is a mistake worth naming).
fn name_param(query: &Query, name: &str) -> Result<Option<String>, InvalidRequest> {
    query
        .get(name)
        .map(|text| {
            let fine = !text.is_empty()
                && text.chars().count() <= MAX_MODEL_ID_CHARS
                && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            fine.then(|| text.clone()).ok_or_else(|| {
                InvalidRequest::param(
                    name,
                    format!(
                        "`{name}` must be 1 to {MAX_MODEL_ID_CHARS} of the characters a-z, A-Z, 0-9, `-`, `_`, `.`"
                    ),
                )
            })
        })
        .transpose()
}

/// The filter of `GET /api/admin/jobs` from its query: `user_id`, `state`, `model`, `upstream`,
/// `key` (a key's prefix; a whole key is cut to its prefix, as revocation does).
///
/// # Errors
/// [`InvalidRequest`] naming the parameter that is not a user id, a state, or a name.
pub fn job_filter(query: &Query) -> Result<JobFilter, InvalidRequest> {
    let user_id = query
        .get("user_id")
        .map(|text| UserId::parse(text).map_err(|_| InvalidRequest::param("user_id", "`user_id` must be a user id")))
        .transpose()?;
    let state = query
        .get("state")
        .map(|text| {
            JobState::parse(text).ok_or_else(|| {
                InvalidRequest::param("state", "`state` must be one of queued, running, succeeded, failed, canceled")
            })
        })
        .transpose()?;
    Ok(JobFilter {
        user_id,
        state,
        model: name_param(query, "model")?.map(ModelId::new),
        upstream: name_param(query, "upstream")?,
        key: name_param(query, "key")?.map(|key| KeyPrefix::of(&key)),
        keys: None,
    })
}

/// A job as operators see it, its stored outputs linked by `links`.
#[must_use]
pub fn admin_job_view(job: &Job, links: &OutputLinks<'_>) -> AdminJob {
    AdminJob {
        job: job_view(job, links),
        user_id: job.user_id().to_string(),
        upstream_request_id: job.upstream().map(|at| at.key().to_owned()),
        key_prefix: job.key_prefix().map(|key| key.as_str().to_owned()),
        priority: job.priority().as_str().to_owned(),
    }
}

/// A page of every user's jobs.
#[must_use]
pub fn admin_job_page_view(page: &JobListing, links: &OutputLinks<'_>) -> AdminJobPage {
    AdminJobPage {
        data: page.jobs.iter().map(|job| admin_job_view(job, links)).collect(),
        next: page.next.map(|id: JobId| id.to_string()),
    }
}

/// One job with the body it was received with, its ledger and its webhook events.
#[must_use]
pub fn inspected_job_view(
    inspected: InspectedJob,
    webhooks: &[WebhookEvent],
    links: &OutputLinks<'_>,
) -> AdminJobDetail {
    AdminJobDetail {
        job: admin_job_view(&inspected.job, links),
        request: inspected.job.request().map(|received| received.fields().clone()),
        moderation: inspected.job.moderation().map(|outcome| outcome.as_str().to_owned()),
        ledger: inspected.ledger.into_iter().map(ledger_entry_view).collect(),
        webhooks: webhooks.iter().map(delivery_view).collect(),
        provider_units: inspected.job.provider_bill().map(|bill| bill.units.to_string()),
        provider_cost_usd: inspected.job.provider_bill().map(|bill| bill.cost_usd.to_string()),
    }
}
