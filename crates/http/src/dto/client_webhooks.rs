//! Client webhooks' views: the event body the receiver gets (its `data` is the job exactly as
//! `GET /api/v1/jobs/{id}` shows it, or the batch as `GET /api/v1/batches/{id}` does), and a
//! job's deliveries.

use genjobs_api::{BatchWebhookPayload, WebhookAttempt, WebhookDelivery, WebhookPayload};
use genjobs_domain::batch::BatchView;
use genjobs_domain::client_webhooks::{EventType, WebhookEvent};
use genjobs_domain::job::Job;
use genjobs_domain::ports::WebhookRenderer;
use time::OffsetDateTime;

use super::batches::batch_view;
use super::responses::{iso, job_view};
use crate::links::LinkSigner;

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
        let payload = WebhookPayload {
            event_type: event_type.as_str().to_owned(),
            timestamp: iso(timestamp),
            data: job_view(job, &links),
        };
        serde_json::to_vec(&payload).unwrap_or_default()
    }

    fn render_batch(&self, event_type: EventType, timestamp: OffsetDateTime, batch: &BatchView) -> Vec<u8> {
        let payload = BatchWebhookPayload {
            event_type: event_type.as_str().to_owned(),
            timestamp: iso(timestamp),
            data: batch_view(batch),
        };
        serde_json::to_vec(&payload).unwrap_or_default()
    }
}

/// A job's webhook event and its deliveries.
#[must_use]
pub fn delivery_view(e: &WebhookEvent) -> WebhookDelivery {
    WebhookDelivery {
        id: e.id().to_string(),
        event_type: e.event_type.as_str().to_owned(),
        url: e.url.clone(),
        attempts: e
            .attempts
            .iter()
            .map(|a| WebhookAttempt { at: iso(a.at), status: a.status, error: a.error.clone() })
            .collect(),
        delivered_at: e.delivered_at.map(iso),
        next_attempt_at: e.next_attempt_at.map(iso),
    }
}
