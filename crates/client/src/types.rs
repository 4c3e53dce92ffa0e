//! The API's JSON shapes as the client reads and writes them. Reads are lenient (fields the client
//! does not know are ignored), so that a newer server does not break an older client.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a job is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Accepted, not yet running at the provider.
    Queued,
    /// Running at the provider.
    Running,
    /// Done, with outputs.
    Succeeded,
    /// Done, without outputs; its credits released.
    Failed,
    /// Canceled by its owner; its credits released.
    Canceled,
}

impl JobState {
    /// Whether the job will not change any more.
    #[must_use]
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Canceled)
    }

    /// The state's name in the API.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Canceled => "canceled",
        }
    }
}

/// The body of `POST /api/v1/images/generations`. Fields left `None` take the model's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImageRequest {
    /// What to draw.
    pub prompt: String,
    /// Model id; the catalog's default image model when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Aspect ratio, e.g. `16:9`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aspect_ratio: Option<String>,
    /// Number of images, 1 to 4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Reference image URLs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_inputs: Option<Vec<String>>,
    /// What to avoid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negative_prompt: Option<String>,
    /// Model-specific parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
    /// Where the job's end is posted, signed with the account's webhook secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
}

impl ImageRequest {
    /// A request for `prompt` with every other field left to the model.
    #[must_use]
    pub fn new(prompt: impl Into<String>) -> Self {
        Self { prompt: prompt.into(), ..Self::default() }
    }
}

/// The body of `POST /api/v1/video/generations`. Fields left `None` take the model's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VideoRequest {
    /// What to film.
    pub prompt: String,
    /// Model id; the catalog's default video model when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Seconds of video.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_sec: Option<u32>,
    /// Aspect ratio, e.g. `16:9`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aspect_ratio: Option<String>,
    /// Resolution, e.g. `720p`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// Reference image URLs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_inputs: Option<Vec<String>>,
    /// Seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// What to avoid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negative_prompt: Option<String>,
    /// Model-specific parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
    /// Where the job's end is posted, signed with the account's webhook secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
}

impl VideoRequest {
    /// A request for `prompt` with every other field left to the model.
    #[must_use]
    pub fn new(prompt: impl Into<String>) -> Self {
        Self { prompt: prompt.into(), ..Self::default() }
    }
}

/// The answer to a submission: the job exists and its credits are held.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Receipt {
    /// The job's id.
    pub job_id: String,
    /// `queued`.
    pub state: JobState,
    /// The model in effect.
    pub model: String,
    /// When it was accepted (ISO 8601).
    pub created_at: String,
    /// The most the job can cost.
    pub credits_held: u64,
}

/// One credit movement of the caller's ledger.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct LedgerEntry {
    /// Increasing with time; a page's `next` is the `before` of the following page.
    pub id: String,
    /// When it was recorded (ISO 8601).
    pub created_at: String,
    /// `grant`, `hold`, `release` or `charge`.
    pub kind: String,
    /// The job it belongs to; `None` for grants.
    pub job_id: Option<String>,
    /// Credits moved; negative only for a negative grant.
    pub credits: i64,
}

/// A page of the caller's ledger, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct LedgerPage {
    /// The entries.
    pub data: Vec<LedgerEntry>,
    /// The `before` of the next page, when there is one.
    pub next: Option<String>,
}

/// One group of a usage report.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct UsageRow {
    /// The UTC day (`YYYY-MM-DD`), when grouped by day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// The model, when grouped by model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Jobs created in the group.
    pub jobs: u64,
    /// Of which succeeded.
    pub succeeded: u64,
    /// Of which failed.
    pub failed: u64,
    /// Of which were canceled.
    pub canceled: u64,
    /// Credits charged for them.
    pub credits_spent: u64,
}

/// The price of a request: what submitting it now would hold.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Quote {
    /// The model in effect.
    pub model: String,
    /// Exactly the `credits_held` a submission of the same request would hold now.
    pub credits: u64,
}

/// What is known of an output.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct OutputMeta {
    /// MIME type.
    #[serde(default)]
    pub content_type: String,
    /// Pixels, when known.
    pub width: Option<u32>,
    /// Pixels, when known.
    pub height: Option<u32>,
    /// Seconds, for a video, when known.
    pub duration_sec: Option<f64>,
    /// The seed used, when the model reports it.
    pub seed: Option<u64>,
}

/// One output of a succeeded job.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Output {
    /// Where to download it.
    pub url: String,
    /// `image` or `video`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What is known of it.
    #[serde(default)]
    pub meta: OutputMeta,
}

/// Why a job failed or was canceled.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct JobError {
    /// `upstream_error` or `canceled`.
    #[serde(rename = "type")]
    pub kind: String,
    /// E.g. `UPSTREAM_FAILED`, `JOB_CANCELED`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
}

/// A job.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Job {
    /// Its id.
    pub id: String,
    /// Its state.
    pub state: JobState,
    /// 0 to 100.
    pub progress: u8,
    /// The model.
    pub model: String,
    /// `image` or `video`.
    pub modality: String,
    /// Set when succeeded.
    pub outputs: Option<Vec<Output>>,
    /// Set when failed or canceled.
    pub error: Option<JobError>,
    /// ISO 8601.
    pub created_at: String,
    /// ISO 8601, once running.
    pub started_at: Option<String>,
    /// ISO 8601, once final.
    pub finished_at: Option<String>,
    /// Held at acceptance.
    pub credits_held: u64,
    /// What it cost, once final.
    pub credits_actual: Option<u64>,
    /// What the provider says of it while it runs there (absent when it says nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JobMeta>,
}

/// What the provider says of a job while it runs there.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct JobMeta {
    /// How many requests are ahead of it in the provider's queue.
    #[serde(default)]
    pub queue_position: Option<u32>,
}

/// A page of jobs, newest first.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct JobPage {
    /// The jobs.
    pub data: Vec<Job>,
    /// The `before` of the next page, if any.
    pub next: Option<String>,
}

/// The answer to a cancel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CancelReceipt {
    /// The job.
    pub id: String,
    /// Its state after the cancel (`canceled`, or the final state it had reached).
    pub state: JobState,
    /// When it was canceled (ISO 8601).
    pub canceled_at: String,
}

/// A choice of a `select` field.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct FieldOption {
    /// What to send.
    pub value: String,
    /// What to show.
    pub label: String,
}

/// A form field of a model.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Field {
    /// The body's field (camelCase names map to snake_case).
    pub name: String,
    /// What to show.
    pub label: String,
    /// `text`, `textarea`, `number`, `select` or `image-url`.
    pub kind: String,
    /// Whether it must be given.
    pub required: Option<bool>,
    /// A hint.
    pub placeholder: Option<String>,
    /// The default value.
    pub default: Option<Value>,
    /// The choices of a `select`.
    pub options: Option<Vec<FieldOption>>,
    /// Lowest value of a `number`.
    pub min: Option<f64>,
    /// Highest value of a `number`.
    pub max: Option<f64>,
}

/// A model of the catalog.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Model {
    /// Its id.
    pub id: String,
    /// What it produces.
    pub modality: String,
    /// Its name for people.
    pub display_name: String,
    /// A sentence about it.
    pub description: Option<String>,
    /// The provider that runs it.
    pub upstream: String,
    /// Its form.
    #[serde(default)]
    pub fields: Vec<Field>,
}

/// The caller's account.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Account {
    /// The caller.
    pub user_id: String,
    /// Free to spend.
    pub credits_available: u64,
    /// Held for jobs not yet final.
    pub credits_held: u64,
    /// Spent on succeeded jobs.
    pub credits_spent: u64,
    /// Requests per minute.
    pub rate_limit_per_minute: u32,
    /// Jobs not yet final at once.
    pub max_concurrent_jobs: u32,
    /// Jobs not yet final now.
    pub active_jobs: u32,
}

/// The data of a stream event.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct EventData {
    /// The job's state.
    pub state: JobState,
    /// 0 to 100.
    pub progress: u8,
    /// Set on `done`.
    pub outputs: Option<Vec<Output>>,
    /// Set on `error`.
    pub error: Option<JobError>,
}

/// The name of a stream event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The job moved on.
    Progress,
    /// The job succeeded; the stream ends.
    Done,
    /// The job failed or was canceled; the stream ends.
    Error,
}

/// One event of a job's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEvent {
    /// Which event.
    pub kind: EventKind,
    /// The event's id, sent back as `Last-Event-ID` on reconnection.
    pub id: Option<String>,
    /// The job as the event tells it.
    pub data: EventData,
}

/// The account's webhook signing secret, `whsec_<base64>` (Standard Webhooks).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct WebhookSecret {
    /// The secret.
    pub secret: String,
}

/// One attempt at delivering a webhook.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct WebhookAttempt {
    /// When it started (ISO 8601).
    pub at: String,
    /// The receiver's status; `None` when it did not answer.
    pub status: Option<u16>,
    /// Why it did not deliver.
    pub error: Option<String>,
}

/// A job's webhook event and its attempts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct WebhookDelivery {
    /// The event id, sent as `webhook-id`.
    pub id: String,
    /// `job.succeeded`, `job.failed` or `job.canceled`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Where it goes.
    pub url: String,
    /// Every attempt, oldest first.
    pub attempts: Vec<WebhookAttempt>,
    /// When it was delivered.
    pub delivered_at: Option<String>,
    /// When it is tried next; `None` once delivered or given up.
    pub next_attempt_at: Option<String>,
}
