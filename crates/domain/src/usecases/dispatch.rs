//! The webhook dispatcher: delivers the outbox of client webhooks. Every replica runs one; each
//! claims due events under a lease ([`crate::ports::WebhookStore::claim_due_events`]), so that an
//! attempt is made once across replicas, and an event whose replica died is claimed by another
//! once its lease runs out.
//!
//! It sleeps until the earliest event can be claimed, not on a coarse tick, and wakes at once
//! when a job changes (a final commit records an event; a redelivery publishes the job too) or
//! a delivery ends, so that an attempt starts close to its due time. Deliveries run
//! concurrently, at most [`DispatchSettings::max_in_flight`] at once and
//! [`DispatchSettings::per_host`] per destination host. The claim itself skips the hosts whose
//! slots are full ([`ClaimLimits`]): a slow or dead receiver holds only its own host's slots,
//! its waiting events stay in the outbox untouched, and other hosts' events are claimed past
//! them.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, Either, select};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::{FutureExt, future};
use time::OffsetDateTime;

use super::Ports;
use super::webhooks::ClientWebhookPorts;
use crate::ports::{ClaimLimits, OutgoingWebhook, StoreError, WebhookRenderer};
use crate::webhooks::{Attempt, RetryPolicy, WebhookEvent, destination_host};

/// How the dispatcher works.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// When failed deliveries are tried again.
    pub retry: RetryPolicy,
    /// How long a claimed event is the dispatcher's: longer than one attempt can take, and as
    /// short as that allows, since an attempt cut off by a dying replica waits this long.
    pub lease: Duration,
    /// Deliveries at once.
    pub max_in_flight: usize,
    /// Deliveries at once to one destination host.
    pub per_host: usize,
    /// How soon an event that could not be prepared (its job or its secret unreadable for a
    /// moment) is tried again.
    pub prepare_retry: Duration,
    /// The longest sleep: how soon an event recorded by a replica that could not wake this one
    /// is seen.
    pub idle_check: Duration,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            lease: Duration::from_secs(20),
            max_in_flight: 256,
            per_host: 8,
            prepare_retry: Duration::from_millis(250),
            idle_check: Duration::from_secs(1),
        }
    }
}

/// Delivers client webhooks.
#[derive(Clone)]
pub struct WebhookDispatcher {
    ports: Ports,
    webhooks: ClientWebhookPorts,
    renderer: Arc<dyn WebhookRenderer>,
    settings: DispatchSettings,
}

/// What the dispatcher's wait ended on.
enum Woke {
    /// A delivery to this host ended.
    Delivered(String),
    /// Time to look at the outbox again, or a job changed.
    Look,
    /// The service stops.
    Shutdown,
}

impl WebhookDispatcher {
    /// A dispatcher over `ports` (jobs, events, clock) and `webhooks`, rendering bodies with
    /// `renderer`.
    #[must_use]
    pub fn new(
        ports: Ports,
        webhooks: ClientWebhookPorts,
        renderer: Arc<dyn WebhookRenderer>,
        settings: DispatchSettings,
    ) -> Self {
        Self { ports, webhooks, renderer, settings }
    }

    /// Delivers until `shutdown` completes, then lets the deliveries in flight end (each is
    /// bounded by the transport's timeout) and claims nothing more.
    pub async fn run_until(&self, shutdown: impl Future<Output = ()>) {
        let mut shutdown = pin!(shutdown.fuse());
        let mut changes = self.ports.events.subscribe_all();
        let mut in_flight: FuturesUnordered<BoxFuture<'_, String>> = FuturesUnordered::new();
        let mut per_host: HashMap<String, usize> = HashMap::new();
        let mut draining = false;
        loop {
            if draining && in_flight.is_empty() {
                break;
            }
            let mut nap = self.settings.idle_check;
            if !draining {
                let free = self.settings.max_in_flight.saturating_sub(in_flight.len());
                let now = self.ports.clock.now();
                if free > 0 {
                    for event in self.claim(now, free, &per_host).await {
                        let host = destination_host(&event.url);
                        *per_host.entry(host.clone()).or_default() += 1;
                        in_flight.push(self.deliver(event).map(move |()| host).boxed());
                    }
                }
                match self.webhooks.store.outbox_state().await {
                    Ok(state) => {
                        super::telemetry::webhook_outbox(state.oldest_pending_since.map(|since| now - since));
                        // An event due by now that was not claimed waits on a host at its
                        // limit: a delivery's end, not the clock, frees it.
                        let free = in_flight.len() < self.settings.max_in_flight;
                        if let Some(at) = state.next_claimable_at.filter(|at| free && *at > now) {
                            let until = Duration::try_from(at - self.ports.clock.now()).unwrap_or_default();
                            nap = nap.min(until);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not read the webhook outbox"),
                }
            }
            let woke = {
                let delivered =
                    async { if in_flight.is_empty() { future::pending().await } else { in_flight.next().await } };
                let timer = pin!(self.ports.clock.sleep(nap));
                let timer_or_change = pin!(select(timer, changes.next()));
                let interrupted = pin!(select(timer_or_change, shutdown.as_mut()));
                match select(pin!(delivered), interrupted).await {
                    Either::Left((Some(host), _)) => Woke::Delivered(host),
                    Either::Right((Either::Right(((), _)), _)) => Woke::Shutdown,
                    _ => Woke::Look,
                }
            };
            match woke {
                Woke::Delivered(host) => {
                    // Deliveries end in bursts under load: one look serves all that have ended.
                    let ended =
                        std::iter::once(host).chain(std::iter::from_fn(|| in_flight.next().now_or_never().flatten()));
                    for host in ended {
                        if let Some(count) = per_host.get_mut(&host) {
                            *count -= 1;
                            if *count == 0 {
                                per_host.remove(&host);
                            }
                        }
                    }
                }
                Woke::Shutdown => draining = true,
                Woke::Look => {
                    // Many jobs change at once under load: one look serves all of them.
                    while let Some(Some(_)) = changes.next().now_or_never() {}
                }
            }
        }
    }

    /// Claims due events for the free slots, within each host's free slots.
    async fn claim(&self, now: OffsetDateTime, free: usize, per_host: &HashMap<String, usize>) -> Vec<WebhookEvent> {
        let limits = ClaimLimits { total: free, per_host: self.settings.per_host, in_flight: per_host.clone() };
        match self.webhooks.store.claim_due_events(now, now + self.settings.lease, limits).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, "could not claim due webhook events");
                Vec::new()
            }
        }
    }

    /// One attempt at delivering `event`, recorded with when to try next.
    async fn deliver(&self, event: WebhookEvent) {
        let started = self.ports.clock.now();
        if let Some(lag) = event.next_attempt_at.and_then(|due| Duration::try_from(started - due).ok()) {
            super::telemetry::webhook_lag(lag);
        }
        let (job_id, event_id) = (event.job_id, event.id());
        let prepared = async {
            let body = self.body_of(&event).await?;
            let secret = self.webhooks.secret_of(event.user_id).await?;
            Ok::<_, StoreError>((body, secret))
        };
        let (body, secret) = match prepared.await {
            Ok(prepared) => prepared,
            Err(e) => {
                tracing::warn!(%job_id, %event_id, error = %e, "could not prepare a webhook; trying again shortly");
                let again = self.ports.clock.now() + self.settings.prepare_retry;
                if let Err(e) = self.webhooks.store.defer_events(vec![job_id], again).await {
                    tracing::warn!(%job_id, %event_id, error = %e, "could not hand a webhook back; retried after its lease");
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
            %job_id, %event_id, attempt = attempts.len(), status = attempt.status, error = attempt.error.as_deref(),
            delivered, next_attempt_at = next.map(|at| at.unix_timestamp()), "client webhook attempted"
        );
        if let Err(e) = self.webhooks.store.record_attempt(job_id, attempt, next).await {
            tracing::warn!(%job_id, %event_id, error = %e, "could not record a webhook attempt; tried again after its lease");
        }
    }

    /// The event's body: the one fixed by an earlier attempt, or rendered from the job now and
    /// fixed for every later attempt.
    async fn body_of(&self, event: &WebhookEvent) -> Result<Vec<u8>, StoreError> {
        if let Some(body) = &event.body {
            return Ok(body.clone());
        }
        let job = self
            .ports
            .jobs
            .job(event.job_id)
            .await?
            .ok_or_else(|| StoreError::Internal(format!("webhook event of the missing job {}", event.job_id)))?;
        // A replica's job cache may lag the commit that made the job final for a moment.
        if job.state() != event.event_type.state() {
            return Err(StoreError::Unavailable(format!("job {} is not yet seen final", event.job_id)));
        }
        let body = self.renderer.render(event.event_type, event.occurred_at, &job);
        self.webhooks.store.fix_event_body(event.job_id, body).await
    }
}
