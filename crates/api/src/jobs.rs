//! A job as the API shows it, and what answers about jobs carry: receipts, quotes, cancels,
//! pages of jobs and the data of stream events.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::schemas::{job_state_schema, modality_schema, nullable_timestamp_schema, timestamp_schema};

/// What a job is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// The answer to a submission: the job exists and its credits are held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Receipt {
    /// The job's id.
    pub job_id: String,
    /// `queued`.
    #[schema(schema_with = job_state_schema)]
    pub state: JobState,
    /// The model in effect.
    pub model: String,
    /// When it was accepted.
    #[schema(schema_with = timestamp_schema)]
    pub created_at: String,
    /// The most the job can cost.
    pub credits_held: u64,
}

/// The answer of both quote endpoints: what submitting the same body now would hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Quote {
    /// The model in effect.
    pub model: String,
    /// Exactly the `credits_held` a submission of the same body would hold now.
    pub credits: u64,
}

/// What is known of an output: `{content_type, width?, height?, duration_sec?, seed?}`, and with
/// an output store `stored`, `upstream_url` and `size_bytes` (when stored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OutputMeta {
    /// MIME type.
    pub content_type: String,
    /// Pixels, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Pixels, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// Seconds, for a video, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_sec: Option<f64>,
    /// The seed used, when the model reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Whether the gateway keeps its own copy, which `url` then links to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<bool>,
    /// Where the provider served it (for as long as the provider keeps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_url: Option<String>,
    /// Its length in bytes, when stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

/// An output item: `{url, type, meta}`. With an output store, `url` is a signed link to the
/// gateway's own copy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Output {
    /// Where to download it.
    pub url: String,
    /// `image` or `video`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What is known of it.
    pub meta: OutputMeta,
}

/// A final job's error: `{type, code, message}`, and `details` where the code has some.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobError {
    /// `upstream_error`, `invalid_request` (`CONTENT_REFUSED`) or `canceled`.
    #[serde(rename = "type")]
    pub kind: String,
    /// E.g. `UPSTREAM_FAILED`, `JOB_CANCELED`, `CONTENT_REFUSED`, `MODERATION_UNAVAILABLE`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// For a `CONTENT_REFUSED` the moderation service decided: the categories it flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<JobErrorDetails>,
}

/// What more a job's error says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobErrorDetails {
    /// The names of the categories the moderation service flagged, e.g. `violence`.
    pub categories: Vec<String>,
}

/// Why a queued job waits: `{waiting_for: "capacity"}` while it waits, unsent, for a slot of its
/// provider's keys; `{queue_position}` while it waits in the provider's queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobMeta {
    /// `capacity`: every key of its provider has its cap of jobs in flight, or other users' jobs
    /// come first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// How many requests are ahead of it in the provider's queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<u32>,
}

/// A job as `GET /api/v1/jobs/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    /// Its id.
    pub id: String,
    /// Its state.
    #[schema(schema_with = job_state_schema)]
    pub state: JobState,
    /// 0 to 100, never decreasing; 100 only once succeeded.
    #[schema(maximum = 100)]
    pub progress: u8,
    /// The model.
    pub model: String,
    /// What the model produces.
    #[schema(schema_with = modality_schema)]
    pub modality: String,
    /// Set when succeeded.
    pub outputs: Option<Vec<Output>>,
    /// Set when failed or canceled.
    pub error: Option<JobError>,
    /// When it was accepted.
    #[schema(schema_with = timestamp_schema)]
    pub created_at: String,
    /// Once running.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub started_at: Option<String>,
    /// Once final.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub finished_at: Option<String>,
    /// Held at acceptance.
    pub credits_held: u64,
    /// What it cost, once final.
    pub credits_actual: Option<u64>,
    /// The provider that runs it (`fal`, `replicate`); null until it is sent.
    #[serde(default)]
    pub upstream: Option<String>,
    /// What the provider says of the job while it runs there; absent when it says nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JobMeta>,
    /// The batch it is an item of; absent for a job submitted on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
}

/// The data of a stream event: the job as the event tells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StreamEvent {
    /// The job's state.
    #[schema(schema_with = job_state_schema)]
    pub state: JobState,
    /// 0 to 100.
    #[schema(maximum = 100)]
    pub progress: u8,
    /// Set on `done`.
    pub outputs: Option<Vec<Output>>,
    /// Set on `error`.
    pub error: Option<JobError>,
}

/// The answer of a cancel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CancelReceipt {
    /// The job.
    pub id: String,
    /// Its state after the cancel (`canceled`, or the final state it had reached).
    #[schema(schema_with = job_state_schema)]
    pub state: JobState,
    /// When it was canceled.
    #[schema(schema_with = timestamp_schema)]
    pub canceled_at: String,
}

/// A page of jobs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobPage {
    /// The jobs.
    pub data: Vec<Job>,
    /// The `before` of the next page, or null.
    pub next: Option<String>,
}
