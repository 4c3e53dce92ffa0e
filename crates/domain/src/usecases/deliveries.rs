//! Client webhook deliveries: claiming due events of the outbox, one attempt at delivering an
//! event, and recording it with when to try next. Every replica's dispatcher (the
//! `genjobs-driver` crate) calls these; each claims due events under a lease
//! ([`crate::ports::WebhookStore::claim_due_events`]), so that an attempt is made once across
//! replicas, and an event whose replica died is claimed by another once its lease runs out.
//!
//! The claim skips the hosts whose slots are full ([`ClaimLimits`]): a slow or dead receiver
//! holds only its own host's slots, its waiting events stay in the outbox untouched, and other
//! hosts' events are claimed past them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::Ports;
use super::client_webhooks::ClientWebhookPorts;
use crate::client_webhooks::{Attempt, EventSubject, RetryPolicy, WebhookEvent};
use crate::ports::{ClaimLimits, OutgoingWebhook, StoreError, WebhookRenderer};
use tracing::Instrument;
use tracing::field::display;

/// How events are claimed and tried.
#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// When failed deliveries are tried again.
    pub retry: RetryPolicy,
    /// How long a claimed event is the claiming dispatcher's: longer than one attempt can take,
    /// and as short as that allows, since an attempt cut off by a dying replica waits this long.
    pub lease: Duration,
    /// Deliveries at once to one destination host.
    pub per_host: usize,
    /// How soon an event that could not be prepared (its job or its secret unreadable for a
    /// moment) is tried again.
    pub prepare_retry: Duration,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            lease: Duration::from_secs(20),
            per_host: 8,
            prepare_retry: Duration::from_millis(250),
        }
    }
}

/// Delivers client webhooks, one event at a time.
#[derive(Clone)]
pub struct WebhookDeliveries {
    ports: Ports,
    webhooks: ClientWebhookPorts,
    renderer: Arc<dyn WebhookRenderer>,
    settings: DeliverySettings,
}

impl WebhookDeliveries {
    /// Deliveries over `ports` (jobs, events, clock) and `webhooks`, rendering bodies with
    /// `renderer`.
    #[must_use]
    pub fn new(
        ports: Ports,
        webhooks: ClientWebhookPorts,
        renderer: Arc<dyn WebhookRenderer>,
        settings: DeliverySettings,
    ) -> Self {
        Self { ports, webhooks, renderer, settings }
    }

    /// The ports the deliveries use, for the dispatcher to listen to job changes and time with.
    #[must_use]
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// When the next event not claimed now may be claimed, for the dispatcher to sleep until;
    /// `None` when none waits on time (it waits on a host at its limit, or there is none).
    /// `can_claim_more` is whether the dispatcher has a free slot: without one, only a delivery's
    /// end frees the way. Records the age of the oldest waiting event as a gauge.
    pub async fn next_claimable_at(&self, now: OffsetDateTime, can_claim_more: bool) -> Option<OffsetDateTime> {
        match self.webhooks.store.outbox_state().await {
            Ok(state) => {
                super::telemetry::webhook_outbox(state.oldest_pending_since.map(|since| now - since));
                // An event due by now that was not claimed waits on a host at its limit: a
                // delivery's end, not the clock, frees it.
                state.next_claimable_at.filter(|at| can_claim_more && *at > now)
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read the webhook outbox");
                None
            }
        }
    }

    /// Claims at most `free` due events, within each host's free slots (`in_flight`: deliveries
    /// running now by host).
    pub async fn claim(
        &self,
        now: OffsetDateTime,
        free: usize,
        in_flight: &HashMap<String, usize>,
    ) -> Vec<WebhookEvent> {
        let limits = ClaimLimits { total: free, per_host: self.settings.per_host, in_flight: in_flight.clone() };
        match self.webhooks.store.claim_due_events(now, now + self.settings.lease, limits).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, "could not claim due webhook events");
                Vec::new()
            }
        }
    }

    /// One attempt at delivering `event`, recorded with when to try next; a span of the trace
    /// its job's submission started (a batch's event starts a trace of its own: its items' traces
    /// are many).
    pub async fn deliver(&self, event: WebhookEvent) {
        if !self.ports.traces.are_on() {
            return self.deliver_within(event).await;
        }
        let span = match event.subject {
            EventSubject::Job(job_id) => {
                let span =
                    tracing::info_span!("webhook.delivery", genjobs.job_id = %job_id, genjobs.event_id = %event.id());
                if let Ok(Some(job)) = self.ports.jobs.job(job_id).await
                    && let Some(parent) = job.trace()
                {
                    self.ports.traces.continue_trace(&span, parent);
                }
                span
            }
            EventSubject::Batch(batch_id) => {
                tracing::info_span!("webhook.delivery", genjobs.batch_id = %batch_id, genjobs.event_id = %event.id())
            }
        };
        self.deliver_within(event).instrument(span).await;
    }

    /// [`WebhookDeliveries::deliver`] within its span.
    async fn deliver_within(&self, event: WebhookEvent) {
        let started = self.ports.clock.now();
        if let Some(lag) = event.next_attempt_at.and_then(|due| Duration::try_from(started - due).ok()) {
            super::telemetry::webhook_lag(lag);
        }
        let event_id = event.id();
        // A job's event is logged by its job, a batch's by its batch.
        let (job_id, batch_id) = (event.subject.job_id().map(display), event.subject.batch_id().map(display));
        let prepared = async {
            let body = self.body_of(&event).await?;
            let secret = self.webhooks.secret_of(event.user_id).await?;
            Ok::<_, StoreError>((body, secret))
        };
        let (body, secret) = match prepared.await {
            Ok(prepared) => prepared,
            Err(e) => {
                tracing::warn!(job_id, batch_id, %event_id, error = %e, "could not prepare a webhook; trying again shortly");
                let again = self.ports.clock.now() + self.settings.prepare_retry;
                if let Err(e) = self.webhooks.store.defer_events(vec![event_id], again).await {
                    tracing::warn!(job_id, batch_id, %event_id, error = %e, "could not hand a webhook back; retried after its lease");
                }
                return;
            }
        };
        let outcome = self
            .webhooks
            .transport
            .send(OutgoingWebhook { url: event.url.clone(), id: event_id.to_string(), body, secret })
            .await;
        let now = self.ports.clock.now();
        let attempt = Attempt { at: started, status: outcome.status, error: outcome.error };
        let delivered = attempt.delivered();
        let mut attempts = event.attempts.clone();
        attempts.push(attempt.clone());
        // A redelivery of an event delivered before is one more try, not a new schedule.
        let next = match delivered || event.delivered_at.is_some() {
            true => None,
            false => self.settings.retry.next_attempt(&event, &attempts, now),
        };
        super::telemetry::webhook_attempt(delivered, next.is_some());
        tracing::info!(
            job_id, batch_id, %event_id, attempt = attempts.len(), status = attempt.status, error = attempt.error.as_deref(),
            delivered, next_attempt_at = next.map(|at| at.unix_timestamp()), "client webhook attempted"
        );
        if let Err(e) = self.webhooks.store.record_attempt(event_id, attempt, next).await {
            tracing::warn!(job_id, batch_id, %event_id, error = %e, "could not record a webhook attempt; tried again after its lease");
        }
    }

    /// The event's body: the one fixed by an earlier attempt, or rendered from the job or the
    /// batch now and fixed for every later attempt.
    async fn body_of(&self, event: &WebhookEvent) -> Result<Vec<u8>, StoreError> {
        if let Some(body) = &event.body {
            return Ok(body.clone());
        }
        let body =
            match event.subject {
                EventSubject::Job(job_id) => {
                    let job =
                        self.ports.jobs.job(job_id).await?.ok_or_else(|| {
                            StoreError::Internal(format!("webhook event of the missing job {job_id}"))
                        })?;
                    // A replica's job cache may lag the commit that made the job final for a moment.
                    if Some(job.state()) != event.event_type.job_state() {
                        return Err(StoreError::Unavailable(format!("job {job_id} is not yet seen final")));
                    }
                    self.renderer.render(event.event_type, event.occurred_at, &job)
                }
                EventSubject::Batch(batch_id) => {
                    let view = self.ports.batches.batch(batch_id).await?.ok_or_else(|| {
                        StoreError::Internal(format!("webhook event of the missing batch {batch_id}"))
                    })?;
                    // The event was recorded with the batch's end, so a batch read after it shows that
                    // end; one that does not was read from a copy behind it.
                    if Some(view.state()) != event.event_type.batch_state() {
                        return Err(StoreError::Unavailable(format!("batch {batch_id} is not yet seen ended")));
                    }
                    self.renderer.render_batch(event.event_type, event.occurred_at, &view)
                }
            };
        self.webhooks.store.fix_event_body(event.id(), body).await
    }
}
