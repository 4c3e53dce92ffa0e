//! The JSON of client webhooks: the event body the receiver gets (its `data` is the job exactly
//! as `GET /api/v1/jobs/{id}` shows it), a job's deliveries, and the account's secret.

use genjobs_domain::job::Job;
use genjobs_domain::ports::WebhookRenderer;
use genjobs_domain::webhooks::{Attempt, EventType, WebhookEvent};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::responses::{JobView, iso};
use super::schemas::{nullable_timestamp_schema, one_of, timestamp_schema};
use crate::links::LinkSigner;

fn event_type_schema() -> utoipa::openapi::schema::Object {
    one_of(&["job.succeeded", "job.failed", "job.canceled"], "What ended the job.")
}

/// What a receiver gets: `{type, timestamp, data}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookPayload)]
pub struct WebhookPayloadView<'a> {
    #[serde(rename = "type")]
    #[schema(schema_with = event_type_schema)]
    kind: &'static str,
    /// When the job became final.
    #[schema(schema_with = timestamp_schema)]
    timestamp: String,
    /// The job, as `GET /api/v1/jobs/{id}` shows it.
    data: JobView<'a>,
}

/// Renders event bodies with the output links the API would show, rooted at `base`.
#[derive(Debug, Clone)]
pub struct WebhookBodies {
    links: LinkSigner,
    base: String,
}

impl WebhookBodies {
    /// Bodies whose stored outputs are linked by `links`, under `base` (the public URL, or the
    /// address the service listens on).
    #[must_use]
    pub fn new(links: LinkSigner, base: String) -> Self {
        Self { links, base }
    }
}

impl WebhookRenderer for WebhookBodies {
    fn render(&self, event_type: EventType, timestamp: OffsetDateTime, job: &Job) -> Vec<u8> {
        let links = self.links.rooted_at(self.base.clone(), OffsetDateTime::now_utc());
        let payload = WebhookPayloadView {
            kind: event_type.as_str(),
            timestamp: iso(timestamp),
            data: JobView::new(job, &links),
        };
        serde_json::to_vec(&payload).unwrap_or_default()
    }
}

/// One delivery attempt.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookAttempt)]
pub struct WebhookAttemptView {
    #[schema(schema_with = timestamp_schema)]
    at: String,
    /// The receiver's HTTP status; null when it did not answer (the `error` says why).
    status: Option<u16>,
    /// Why the attempt did not deliver; null when it did.
    error: Option<String>,
}

impl From<&Attempt> for WebhookAttemptView {
    fn from(a: &Attempt) -> Self {
        Self { at: iso(a.at), status: a.status, error: a.error.clone() }
    }
}

/// A job's webhook event and its deliveries.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookDelivery)]
pub struct WebhookEventView {
    /// The event's id: the `webhook-id` header of every attempt.
    id: String,
    #[serde(rename = "type")]
    #[schema(schema_with = event_type_schema)]
    kind: &'static str,
    url: String,
    /// Every attempt, oldest first.
    attempts: Vec<WebhookAttemptView>,
    #[schema(schema_with = nullable_timestamp_schema)]
    delivered_at: Option<String>,
    /// When it is tried next; null once delivered or given up.
    #[schema(schema_with = nullable_timestamp_schema)]
    next_attempt_at: Option<String>,
}

impl From<&WebhookEvent> for WebhookEventView {
    fn from(e: &WebhookEvent) -> Self {
        Self {
            id: e.id().to_string(),
            kind: e.event_type.as_str(),
            url: e.url.clone(),
            attempts: e.attempts.iter().map(WebhookAttemptView::from).collect(),
            delivered_at: e.delivered_at.map(iso),
            next_attempt_at: e.next_attempt_at.map(iso),
        }
    }
}

/// The account's webhook signing secret.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WebhookSecret)]
pub struct WebhookSecretView {
    /// `whsec_<base64>`: the Standard Webhooks key, base64 after the prefix.
    pub secret: String,
}
