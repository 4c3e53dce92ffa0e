//! Batches: the body that submits one, a batch as the API shows it, pages of batches and of a
//! batch's items, and one line of its results.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::jobs::{Job, JobError, JobState, Output};
use crate::numbers;
use crate::schemas::{job_state_schema, modality_schema, nullable_timestamp_schema, one_of, timestamp_schema};

/// `POST /api/v1/batches`: 1 to 5,000 generations as one unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = BatchRequest)]
pub struct BatchRequest {
    /// The generations, in the order the batch keeps.
    pub items: Vec<BatchItemBody>,
    /// Seconds until items not yet sent expire: 60 to 604,800 (default 86,400).
    #[serde(default, deserialize_with = "numbers::optional_u64", skip_serializing_if = "Option::is_none")]
    pub completion_window_secs: Option<u64>,
    /// Where the batch's end is posted (`batch.completed`, `batch.expired`, `batch.canceled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// At most 16 string pairs, kept and shown with the batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// One generation of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchItemBody {
    /// The client's name for it: 1 to 64 characters, unique in the batch.
    pub custom_id: String,
    /// `image` or `video`: which generation endpoint's body `body` is.
    #[schema(schema_with = modality_schema)]
    pub modality: String,
    /// A body of `POST /api/v1/images/generations` or `/video/generations`, without `webhook_url`.
    #[schema(value_type = Object)]
    pub body: serde_json::Value,
}

/// What a batch is doing.
fn batch_state_schema() -> utoipa::openapi::schema::Object {
    one_of(&["in_progress", "completed", "expired", "canceled"], "What the batch is doing")
}

/// How many of a batch's items are in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchCounts {
    /// Every item.
    pub total: u64,
    /// Not yet running.
    pub queued: u64,
    /// Running.
    pub running: u64,
    /// Succeeded.
    pub succeeded: u64,
    /// Failed (expired included).
    pub failed: u64,
    /// Canceled.
    pub canceled: u64,
}

/// A batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Batch {
    /// Its id.
    pub id: String,
    /// Always `batch`.
    pub object: String,
    /// `in_progress`, `completed` (every item final), `expired` or `canceled`.
    #[schema(schema_with = batch_state_schema)]
    pub state: String,
    /// When it was accepted.
    #[schema(schema_with = timestamp_schema)]
    pub created_at: String,
    /// When its first item was sent.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub started_at: Option<String>,
    /// When it became final.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub finished_at: Option<String>,
    /// When its completion window closes.
    #[schema(schema_with = timestamp_schema)]
    pub expires_at: String,
    /// Its items by state.
    pub counts: BatchCounts,
    /// What its items held at acceptance.
    pub credits_held: u64,
    /// What its succeeded items were charged.
    pub credits_spent: u64,
    /// The client's labels.
    pub metadata: BTreeMap<String, String>,
}

/// A page of batches, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchPage {
    /// The batches.
    pub data: Vec<Batch>,
    /// The `before` of the next page, or null.
    pub next: Option<String>,
}

/// One item of a batch: its name and its job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchItem {
    /// The client's name for it.
    pub custom_id: String,
    /// Its job.
    pub job: Job,
}

/// A page of a batch's items, in the batch's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchItemPage {
    /// The items.
    pub data: Vec<BatchItem>,
    /// The `after` of the next page, or null.
    pub next: Option<String>,
}

/// One line of a batch's results: one final item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchResult {
    /// The client's name for it.
    pub custom_id: String,
    /// Its job.
    pub job_id: String,
    /// `succeeded`, `failed` or `canceled`.
    #[schema(schema_with = job_state_schema)]
    pub state: JobState,
    /// What it delivered, once succeeded.
    pub outputs: Option<Vec<Output>>,
    /// Why it failed or was canceled.
    pub error: Option<JobError>,
    /// What it cost.
    pub credits_actual: Option<u64>,
}
