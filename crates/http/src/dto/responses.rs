//! The JSON shapes of responses, kept apart from the domain types so that the API stays exactly
//! as the spec writes it whatever the domain keeps internally. No view embeds a domain type.

use genjobs_domain::catalog::{Field, FieldKind, FieldOption, Model};
use genjobs_domain::job::{Job, JobError};
use genjobs_domain::output::OutputItem;
use genjobs_domain::ports::Account;
use genjobs_domain::usecases::{CancelReceipt, JobListing, Receipt};
use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;

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

/// An output item: `{url, type, meta}`.
#[derive(Debug, Serialize)]
pub struct OutputView<'a> {
    url: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    meta: MetaView<'a>,
}

/// What is known of an output: `{content_type, width?, height?, duration_sec?, seed?}`.
#[derive(Debug, Serialize)]
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
}

impl<'a> From<&'a OutputItem> for OutputView<'a> {
    fn from(item: &'a OutputItem) -> Self {
        let m = &item.meta;
        Self {
            url: &item.url,
            kind: item.kind.as_str(),
            meta: MetaView {
                content_type: &m.content_type,
                width: m.width,
                height: m.height,
                duration_sec: m.duration_sec,
                seed: m.seed,
            },
        }
    }
}

fn outputs(job: &Job) -> Option<Vec<OutputView<'_>>> {
    job.outputs().map(|items| items.iter().map(OutputView::from).collect())
}

/// A final job's error: `{type, code, message}`.
#[derive(Debug, Serialize)]
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
#[derive(Debug, Serialize)]
pub struct JobView<'a> {
    id: String,
    state: &'static str,
    progress: u8,
    model: &'a str,
    modality: &'static str,
    outputs: Option<Vec<OutputView<'a>>>,
    error: Option<JobErrorView<'a>>,
    created_at: String,
    started_at: Option<String>,
    finished_at: Option<String>,
    credits_held: u64,
    credits_actual: Option<u64>,
}

impl<'a> From<&'a Job> for JobView<'a> {
    fn from(job: &'a Job) -> Self {
        Self {
            id: job.id().to_string(),
            state: job.state().as_str(),
            progress: job.progress(),
            model: job.model().as_str(),
            modality: job.modality().as_str(),
            outputs: outputs(job),
            error: job.error().map(JobErrorView::from),
            created_at: iso(job.created_at()),
            started_at: job.started_at().map(iso),
            finished_at: job.finished_at().map(iso),
            credits_held: job.credits_held().get(),
            credits_actual: job.credits_actual().map(|c| c.get()),
        }
    }
}

/// The data of a stream event.
#[derive(Debug, Serialize)]
pub struct EventView<'a> {
    state: &'static str,
    progress: u8,
    outputs: Option<Vec<OutputView<'a>>>,
    error: Option<JobErrorView<'a>>,
}

impl<'a> From<&'a Job> for EventView<'a> {
    fn from(job: &'a Job) -> Self {
        Self {
            state: job.state().as_str(),
            progress: job.progress(),
            outputs: outputs(job),
            error: job.error().map(JobErrorView::from),
        }
    }
}

/// The receipt of both generation endpoints.
#[derive(Debug, Serialize)]
pub struct ReceiptView {
    job_id: String,
    state: &'static str,
    model: String,
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

/// The answer of a cancel.
#[derive(Debug, Serialize)]
pub struct CancelView {
    id: String,
    state: &'static str,
    canceled_at: String,
}

impl From<CancelReceipt> for CancelView {
    fn from(r: CancelReceipt) -> Self {
        Self { id: r.id.to_string(), state: r.state.as_str(), canceled_at: iso(r.canceled_at) }
    }
}

/// A page of jobs.
#[derive(Debug, Serialize)]
pub struct JobPageView<'a> {
    data: Vec<JobView<'a>>,
    next: Option<String>,
}

impl<'a> From<&'a JobListing> for JobPageView<'a> {
    fn from(page: &'a JobListing) -> Self {
        Self { data: page.jobs.iter().map(JobView::from).collect(), next: page.next.map(|id| id.to_string()) }
    }
}

/// A model of the listing.
#[derive(Debug, Serialize)]
pub struct ModelView<'a> {
    id: &'a str,
    modality: &'static str,
    display_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    upstream: &'static str,
    fields: Vec<FieldView<'a>>,
}

/// A form field of a model, as the spec describes it.
#[derive(Debug, Serialize)]
pub struct FieldView<'a> {
    name: &'a str,
    label: &'a str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    required: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    placeholder: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Vec<FieldOptionView<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<&'a serde_json::Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<&'a serde_json::Number>,
}

/// A choice of a `select` field: `{value, label}`.
#[derive(Debug, Serialize)]
pub struct FieldOptionView<'a> {
    value: &'a str,
    label: &'a str,
}

impl<'a> From<&'a FieldOption> for FieldOptionView<'a> {
    fn from(o: &'a FieldOption) -> Self {
        Self { value: &o.value, label: &o.label }
    }
}

fn field_kind(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::Text => "text",
        FieldKind::Textarea => "textarea",
        FieldKind::Number => "number",
        FieldKind::Select => "select",
        FieldKind::ImageUrl => "image-url",
    }
}

impl<'a> From<&'a Field> for FieldView<'a> {
    fn from(f: &'a Field) -> Self {
        Self {
            name: &f.name,
            label: &f.label,
            kind: field_kind(f.kind),
            required: f.required,
            placeholder: f.placeholder.as_deref(),
            default: f.default.as_ref(),
            options: f.options.as_ref().map(|o| o.iter().map(FieldOptionView::from).collect()),
            min: f.min.as_ref(),
            max: f.max.as_ref(),
        }
    }
}

impl<'a> ModelView<'a> {
    /// The view of `m`, run by the provider named `upstream`.
    #[must_use]
    pub fn new(m: &'a Model, upstream: &'static str) -> Self {
        Self {
            id: m.id.as_str(),
            modality: m.modality.as_str(),
            display_name: &m.display_name,
            description: m.description.as_deref(),
            upstream,
            fields: m.fields.iter().map(FieldView::from).collect(),
        }
    }
}

/// `{data: [...]}`.
#[derive(Debug, Serialize)]
pub struct DataView<T> {
    /// The items.
    pub data: Vec<T>,
}

/// Balances and limits, shared by the caller's and the operators' view of an account.
#[derive(Debug, Serialize)]
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
#[derive(Debug, Serialize)]
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
#[derive(Debug, Serialize)]
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
#[derive(Debug, Serialize)]
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
