//! The JSON shapes of responses, kept apart from the domain types so that the API stays exactly
//! as the spec writes it whatever the domain keeps internally. No view embeds a domain type.

use genjobs_domain::job::{Job, JobError};
use genjobs_domain::output::{OutputCopy, OutputItem};
use genjobs_domain::ports::Account;
use genjobs_domain::usecases::{CancelReceipt, JobListing, Quote, Receipt};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

pub use super::models::{FieldOptionView, FieldView, ModelView};
pub use super::schemas::EventStreamItem;
use super::schemas::{job_state_schema, modality_schema, nullable_timestamp_schema, timestamp_schema};
use crate::links::OutputLinks;

/// ISO 8601 UTC with milliseconds, e.g. `2026-11-21T23:14:54.123Z`. Written out by hand rather
/// than through a format description, whose formatting can fail.
#[must_use]
pub fn iso(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.millisecond()
    )
}

/// An output item: `{url, type, meta}`. With an output store, `url` is a signed link to the
/// gateway's own copy.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Output)]
pub struct OutputView<'a> {
    #[schema(value_type = String)]
    url: std::borrow::Cow<'a, str>,
    #[schema(value_type = String)]
    #[serde(rename = "type")]
    kind: &'static str,
    meta: MetaView<'a>,
}

/// What is known of an output: `{content_type, width?, height?, duration_sec?, seed?}`, and with
/// an output store `stored`, `upstream_url` and `size_bytes` (when stored).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = OutputMeta)]
pub struct MetaView<'a> {
    content_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    height: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    /// Whether the gateway keeps its own copy, which `url` then links to.
    #[serde(skip_serializing_if = "Option::is_none")]
    stored: Option<bool>,
    /// Where the provider served it (for as long as the provider keeps it).
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_url: Option<&'a str>,
    /// Its length in bytes, when stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    size_bytes: Option<u64>,
}

/// Where a client reads output `index` of `job`: the signed link to the service's copy when it
/// keeps one, else the provider's URL.
#[must_use]
pub fn output_url(job: &Job, index: usize, item: &OutputItem, links: &OutputLinks<'_>) -> String {
    match &item.copy {
        Some(OutputCopy::Stored(_)) => links.url(job.id(), index),
        _ => item.url.clone(),
    }
}

impl<'a> OutputView<'a> {
    fn new(job: &Job, index: usize, item: &'a OutputItem, links: &OutputLinks<'_>) -> Self {
        let m = &item.meta;
        let (content_type, size_bytes) = match &item.copy {
            Some(OutputCopy::Stored(file)) => (file.content_type.as_str(), Some(file.size)),
            _ => (m.content_type.as_str(), None),
        };
        let url = output_url(job, index, item, links).into();
        Self {
            url,
            kind: item.kind.as_str(),
            meta: MetaView {
                content_type,
                width: m.width,
                height: m.height,
                duration_sec: m.duration_sec,
                seed: m.seed,
                stored: item.copy.as_ref().map(|copy| matches!(copy, OutputCopy::Stored(_))),
                upstream_url: item.copy.as_ref().map(|_| item.url.as_str()),
                size_bytes,
            },
        }
    }
}

fn outputs<'a>(job: &'a Job, links: &OutputLinks<'_>) -> Option<Vec<OutputView<'a>>> {
    job.outputs().map(|items| items.iter().enumerate().map(|(i, item)| OutputView::new(job, i, item, links)).collect())
}

/// A final job's error: `{type, code, message}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = JobError)]
pub struct JobErrorView<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    code: &'static str,
    message: &'a str,
}

impl<'a> From<&'a JobError> for JobErrorView<'a> {
    fn from(e: &'a JobError) -> Self {
        Self { kind: e.error_type(), code: e.code.as_str(), message: &e.message }
    }
}

/// A job as `GET /v1/jobs/:id` shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Job)]
pub struct JobView<'a> {
    id: String,
    #[schema(schema_with = job_state_schema)]
    state: &'static str,
    #[schema(maximum = 100)]
    progress: u8,
    model: &'a str,
    #[schema(schema_with = modality_schema)]
    modality: &'static str,
    outputs: Option<Vec<OutputView<'a>>>,
    error: Option<JobErrorView<'a>>,
    #[schema(schema_with = timestamp_schema)]
    created_at: String,
    #[schema(schema_with = nullable_timestamp_schema)]
    started_at: Option<String>,
    #[schema(schema_with = nullable_timestamp_schema)]
    finished_at: Option<String>,
    credits_held: u64,
    credits_actual: Option<u64>,
    /// What the provider says of the job while it runs there; absent when it says nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    meta: Option<JobMetaView>,
}

/// What the provider says of a job while it runs there: `{queue_position}` while it waits in the
/// provider's queue (how many requests are ahead of it).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = JobMeta)]
pub struct JobMetaView {
    queue_position: u32,
}

impl<'a> JobView<'a> {
    /// The job, its stored outputs linked by `links`.
    #[must_use]
    pub fn new(job: &'a Job, links: &OutputLinks<'_>) -> Self {
        Self {
            id: job.id().to_string(),
            state: job.state().as_str(),
            progress: job.progress(),
            model: job.model().as_str(),
            modality: job.modality().as_str(),
            outputs: outputs(job, links),
            error: job.error().map(JobErrorView::from),
            created_at: iso(job.created_at()),
            started_at: job.started_at().map(iso),
            finished_at: job.finished_at().map(iso),
            credits_held: job.credits_held().get(),
            credits_actual: job.credits_actual().map(|c| c.get()),
            meta: job.queue_position().map(|queue_position| JobMetaView { queue_position }),
        }
    }
}

/// The data of a stream event.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = StreamEvent)]
pub struct EventView<'a> {
    #[schema(schema_with = job_state_schema)]
    state: &'static str,
    #[schema(maximum = 100)]
    progress: u8,
    outputs: Option<Vec<OutputView<'a>>>,
    error: Option<JobErrorView<'a>>,
}

impl<'a> EventView<'a> {
    /// The job as an event, its stored outputs linked by `links`.
    #[must_use]
    pub fn new(job: &'a Job, links: &OutputLinks<'_>) -> Self {
        Self {
            state: job.state().as_str(),
            progress: job.progress(),
            outputs: outputs(job, links),
            error: job.error().map(JobErrorView::from),
        }
    }
}

/// The receipt of both generation endpoints.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Receipt)]
pub struct ReceiptView {
    job_id: String,
    #[schema(schema_with = job_state_schema)]
    state: &'static str,
    model: String,
    #[schema(schema_with = timestamp_schema)]
    created_at: String,
    credits_held: u64,
}

impl From<Receipt> for ReceiptView {
    fn from(r: Receipt) -> Self {
        Self {
            job_id: r.job_id.to_string(),
            state: r.state.as_str(),
            model: r.model.to_string(),
            created_at: iso(r.created_at),
            credits_held: r.credits_held.get(),
        }
    }
}

/// The answer of both quote endpoints: what submitting the same body now would hold.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Quote)]
pub struct QuoteView {
    /// The model in effect.
    model: String,
    /// Exactly the `credits_held` a submission of the same body would hold now.
    credits: u64,
}

impl From<Quote> for QuoteView {
    fn from(q: Quote) -> Self {
        Self { model: q.model.to_string(), credits: q.credits.get() }
    }
}

/// The answer of a cancel.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CancelReceipt)]
pub struct CancelView {
    id: String,
    #[schema(schema_with = job_state_schema)]
    state: &'static str,
    #[schema(schema_with = timestamp_schema)]
    canceled_at: String,
}

impl From<CancelReceipt> for CancelView {
    fn from(r: CancelReceipt) -> Self {
        Self { id: r.id.to_string(), state: r.state.as_str(), canceled_at: iso(r.canceled_at) }
    }
}

/// A page of jobs.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = JobPage)]
pub struct JobPageView<'a> {
    data: Vec<JobView<'a>>,
    next: Option<String>,
}

impl<'a> JobPageView<'a> {
    /// The page, its jobs' stored outputs linked by `links`.
    #[must_use]
    pub fn new(page: &'a JobListing, links: &OutputLinks<'_>) -> Self {
        Self {
            data: page.jobs.iter().map(|job| JobView::new(job, links)).collect(),
            next: page.next.map(|id| id.to_string()),
        }
    }
}

/// `{data: [...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataView<T> {
    /// The items.
    pub data: Vec<T>,
}

/// Balances and limits, shared by the caller's and the operators' view of an account.
#[derive(Debug, Serialize, ToSchema)]
struct AccountFields {
    credits_available: u64,
    credits_held: u64,
    credits_spent: u64,
    rate_limit_per_minute: u32,
    max_concurrent_jobs: u32,
    active_jobs: u32,
}

impl From<&Account> for AccountFields {
    fn from(a: &Account) -> Self {
        Self {
            credits_available: a.balances.available.get(),
            credits_held: a.balances.held.get(),
            credits_spent: a.balances.spent.get(),
            rate_limit_per_minute: a.limits.rate_limit_per_minute,
            max_concurrent_jobs: a.limits.max_concurrent_jobs,
            active_jobs: a.active_jobs,
        }
    }
}

/// The caller's account (`GET /api/v1/account`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Account)]
pub struct AccountView {
    user_id: String,
    #[serde(flatten)]
    fields: AccountFields,
}

impl From<&Account> for AccountView {
    fn from(a: &Account) -> Self {
        Self { user_id: a.user_id.to_string(), fields: a.into() }
    }
}

/// A user as operators see it (`GET /api/admin/users/{id}`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = User)]
pub struct UserView {
    id: String,
    name: String,
    #[serde(flatten)]
    fields: AccountFields,
}

impl From<&Account> for UserView {
    fn from(a: &Account) -> Self {
        Self { id: a.user_id.to_string(), name: a.name.clone(), fields: a.into() }
    }
}

/// A user just created, with its key shown this once.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CreatedUser)]
pub struct CreatedUserView {
    id: String,
    name: String,
    api_key: String,
    credits_available: u64,
    rate_limit_per_minute: u32,
    max_concurrent_jobs: u32,
}

impl CreatedUserView {
    /// The view of `account` with its first key.
    #[must_use]
    pub fn new(account: &Account, api_key: &str) -> Self {
        Self {
            id: account.user_id.to_string(),
            name: account.name.clone(),
            api_key: api_key.to_owned(),
            credits_available: account.balances.available.get(),
            rate_limit_per_minute: account.limits.rate_limit_per_minute,
            max_concurrent_jobs: account.limits.max_concurrent_jobs,
        }
    }
}

/// `{status}` of `/healthz` and `/readyz`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Status)]
pub struct StatusView {
    /// `ok` (alive) or `ready`.
    pub status: &'static str,
}

/// A key just issued, shown this once.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = IssuedKey)]
pub struct IssuedKeyView<'a> {
    /// The API key.
    pub api_key: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(1_700_000_000_123);
        assert_eq!(iso(at), "2023-11-14T22:13:20.123Z");
        let elsewhere = at.to_offset(time::UtcOffset::from_hms(2, 0, 0).unwrap());
        assert_eq!(iso(elsewhere), "2023-11-14T22:13:20.123Z");
    }
}
