//! Client webhooks: the event body a receiver gets (its `data` is the job exactly as
//! `GET /api/v1/jobs/{id}` shows it, or the batch as `GET /api/v1/batches/{id}` does), a job's
//! deliveries, and the account's signing secret.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::batches::Batch;
use crate::jobs::Job;
use crate::schemas::{batch_event_type_schema, event_type_schema, nullable_timestamp_schema, timestamp_schema};

/// What a receiver gets: `{type, timestamp, data}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WebhookPayload {
    /// `job.succeeded`, `job.failed` or `job.canceled`.
    #[serde(rename = "type")]
    #[schema(schema_with = event_type_schema)]
    pub event_type: String,
    /// When the job became final.
    #[schema(schema_with = timestamp_schema)]
    pub timestamp: String,
    /// The job, as `GET /api/v1/jobs/{id}` shows it.
    pub data: Job,
}

/// What a batch's receiver gets when the batch ends: `{type, timestamp, data}`, signed and
/// retried as a job's event; its items send none of their own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchWebhookPayload {
    /// `batch.completed`, `batch.expired` or `batch.canceled`.
    #[serde(rename = "type")]
    #[schema(schema_with = batch_event_type_schema)]
    pub event_type: String,
    /// When the batch ended.
    #[schema(schema_with = timestamp_schema)]
    pub timestamp: String,
    /// The batch, as `GET /api/v1/batches/{id}` shows it.
    pub data: Batch,
}

/// One attempt at delivering a webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookAttempt {
    /// When it started.
    #[schema(schema_with = timestamp_schema)]
    pub at: String,
    /// The receiver's HTTP status; null when it did not answer (the `error` says why).
    pub status: Option<u16>,
    /// Why the attempt did not deliver; null when it did.
    pub error: Option<String>,
}

/// A job's webhook event and its deliveries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookDelivery {
    /// The event's id: the `webhook-id` header of every attempt.
    pub id: String,
    /// `job.succeeded`, `job.failed` or `job.canceled`.
    #[serde(rename = "type")]
    #[schema(schema_with = event_type_schema)]
    pub event_type: String,
    /// Where it goes.
    pub url: String,
    /// Every attempt, oldest first.
    pub attempts: Vec<WebhookAttempt>,
    /// When it was delivered.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub delivered_at: Option<String>,
    /// When it is tried next; null once delivered or given up.
    #[schema(schema_with = nullable_timestamp_schema)]
    pub next_attempt_at: Option<String>,
}

/// The account's webhook signing secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookSecret {
    /// `whsec_<base64>`: the Standard Webhooks key, base64 after the prefix.
    pub secret: String,
}
