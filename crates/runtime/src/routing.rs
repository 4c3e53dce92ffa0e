//! [`RoutedUpstream`]: one provider port over several providers, following each model's routes.
//!
//! A model lists its routes in order of preference. A submission goes to the first route whose
//! provider is configured here, and moves to the next only when that provider provably did not
//! take the request ([`SubmitFailure::NotReached`]: connection refused, 429, 502, 503 before any
//! request id), after one short retry at the same provider. Any other answer ends the search: after
//! an ambiguous one (a 500, a timeout after the body was sent) the job may exist at the provider,
//! and one job is never sent to two providers; a provider's content refusal
//! ([`SubmitFailure::ContentRefused`]) is never taken elsewhere for another opinion. Every later call (status, result, cancel) goes to
//! the provider named by the job's reference, and a notification to the one its path names.
//!
//! A provider with several keys, or a cap of jobs in flight per key, sends each job on the least
//! busy key under its cap: the router takes a slot of it in the store first
//! ([`ProviderSlots::take_slot`], one atomic step across replicas) and gives it back when the
//! provider provably did not take the job. The driver's step reserves the slot first
//! ([`UpstreamProvider::reserve`], at the first route not cooling down) and sends as reserved
//! ([`UpstreamProvider::submit_placed`]). With no slot free for it the job is not sent
//! ([`Capacity::Full`], or [`SubmitFailure::AtCapacity`] at a provider it falls back to) and waits
//! for that provider, in fair order with the other jobs waiting there.
//!
//! A provider that keeps refusing is put in cool-down (a circuit breaker): after
//! [`TRIP_AFTER`] refusals in a row, submissions pass it by for [`COOL_DOWN`], so that routing
//! does not pay a refused connection per request; then one submission probes it (half-open), and
//! its answer closes the breaker or opens it again. `genjobs_upstream_cooling_down{provider}` shows
//! the state, `genjobs_upstream_refusals_total{provider}` and `genjobs_upstream_fallbacks_total{to}`
//! what routing did.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use genjobs_domain::capacity::{KeyLoad, Priority, ProviderLoad};
use genjobs_domain::catalog::Model;
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{
    BreakerState, CancelOutcome, Capacity, Delivery, NotificationRejected, Placement, PollFailure,
    ProviderAvailability, ProviderSlots, ResultFailure, SendAs, StoreError, SubmitFailure, UpstreamProvider,
    UpstreamReport, UpstreamResult, UpstreamStatus,
};
use metrics::{counter, gauge};
use tokio::time::Instant;

/// The pause before the one retry at a provider that refused a submission: long enough for a
/// blip to pass, short enough that the next route is reached well within 5 s.
pub const REFUSED_RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Refusals in a row after which a provider is put in cool-down.
pub const TRIP_AFTER: u32 = 5;

/// How long a provider in cool-down is passed by before one submission probes it again.
pub const COOL_DOWN: Duration = Duration::from_secs(30);

/// The configured providers, routed by each model's routes.
pub struct RoutedUpstream {
    first: Arc<dyn UpstreamProvider>,
    others: Vec<Arc<dyn UpstreamProvider>>,
    retry_pause: Duration,
    breakers: Mutex<HashMap<&'static str, Breaker>>,
    slots: Option<Arc<dyn ProviderSlots>>,
}

/// Which key a submission goes on.
enum Slot {
    /// The provider has one key and no cap: it is sent with that key, holding no slot.
    NotCapped,
    /// A slot of the key with this id was taken.
    Taken(String),
}

/// A provider's circuit breaker.
#[derive(Debug, Default)]
struct Breaker {
    refusals_in_a_row: u32,
    /// Set while in cool-down: until then the provider is passed by.
    cooling_until: Option<Instant>,
    /// A submission is probing the provider after its cool-down.
    probing: bool,
}

impl Breaker {
    /// Whether a submission may go to the provider now; the first one after a cool-down is the
    /// probe, and the others pass by until its answer.
    fn admits(&mut self, now: Instant) -> bool {
        match self.cooling_until {
            None => true,
            Some(until) if now < until || self.probing => false,
            Some(_) => {
                self.probing = true;
                true
            }
        }
    }

    /// A refusal: the breaker opens on the [`TRIP_AFTER`]-th in a row, or when the probe is refused.
    fn refused(&mut self, now: Instant) {
        self.refusals_in_a_row = self.refusals_in_a_row.saturating_add(1);
        if self.probing || self.refusals_in_a_row >= TRIP_AFTER {
            self.cooling_until = Some(now + COOL_DOWN);
            self.probing = false;
        }
    }

    /// Any other answer: the provider takes requests, the breaker closes.
    fn answered(&mut self) {
        *self = Self::default();
    }

    fn state(&self, now: Instant) -> BreakerState {
        match self.cooling_until {
            None => BreakerState::Closed,
            Some(until) if now < until => BreakerState::Open { cools_for: until - now },
            Some(_) => BreakerState::HalfOpen,
        }
    }
}

impl RoutedUpstream {
    /// Routes over `first` and `others`, retrying a refusal once after `retry_pause`.
    #[must_use]
    pub fn new(
        first: Arc<dyn UpstreamProvider>,
        others: Vec<Arc<dyn UpstreamProvider>>,
        retry_pause: Duration,
    ) -> Self {
        // Every provider's breaker is shown from the start, closed: a dashboard or an alert on it
        // then reads 0, not "no data", until the first refusal.
        for provider in std::iter::once(&first).chain(&others) {
            gauge!("genjobs_upstream_cooling_down", "provider" => provider.name()).set(0.0);
        }
        Self { first, others, retry_pause, breakers: Mutex::default(), slots: None }
    }

    /// The same router, sending each job on the least busy key of its provider under its cap,
    /// as `slots` count them; a provider whose keys are all at their cap keeps the job waiting.
    #[must_use]
    pub fn with_slots(mut self, slots: Arc<dyn ProviderSlots>) -> Self {
        self.slots = Some(slots);
        self
    }

    /// Runs `change` on `provider`'s breaker and shows whether it is cooling down; returns what
    /// `change` returns.
    fn breaker<T>(&self, provider: &'static str, change: impl FnOnce(&mut Breaker) -> T) -> T {
        let mut breakers = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
        let breaker = breakers.entry(provider).or_default();
        let result = change(breaker);
        gauge!("genjobs_upstream_cooling_down", "provider" => provider)
            .set(f64::from(u8::from(breaker.cooling_until.is_some())));
        result
    }

    fn providers(&self) -> impl Iterator<Item = &Arc<dyn UpstreamProvider>> {
        std::iter::once(&self.first).chain(&self.others)
    }

    /// The configured provider of `name`.
    fn provider(&self, name: &str) -> Option<&Arc<dyn UpstreamProvider>> {
        self.providers().find(|provider| provider.serves(name))
    }

    /// The configured providers of `model`'s routes, in the routes' order, each once.
    fn route_providers(&self, model: &Model) -> Vec<&Arc<dyn UpstreamProvider>> {
        let mut found: Vec<&Arc<dyn UpstreamProvider>> = Vec::new();
        for route in &model.routes {
            if let Some(provider) = self.provider(&route.provider)
                && !found.iter().any(|seen| Arc::ptr_eq(seen, provider))
            {
                found.push(provider);
            }
        }
        found
    }

    /// Takes a slot of one of `provider`'s keys for the job, when the provider has keys to
    /// choose from or a cap.
    ///
    /// A store that cannot answer leaves the job unsent, to be tried again like a refusal.
    async fn take_slot(&self, job_id: JobId, provider: &dyn UpstreamProvider) -> Result<Slot, SubmitFailure> {
        let Some(slots) = self.slots.as_ref() else {
            return Ok(Slot::NotCapped);
        };
        let keys = provider.keys();
        if keys.is_empty() {
            return Ok(Slot::NotCapped);
        }
        let name = provider.name();
        match slots.take_slot(job_id, name, &keys).await {
            Ok(Some(key)) => Ok(Slot::Taken(key)),
            Ok(None) => Err(SubmitFailure::AtCapacity(format!("every key of {name} has its cap of jobs in flight"))),
            Err(e) => Err(SubmitFailure::NotReached(format!("no slot of {name} could be taken: {e}"))),
        }
    }

    /// The provider the job waits for (or holds a slot of), as the store keeps it; `None` when
    /// it has no place, or the store cannot say (routing then starts at the first route).
    async fn waits_at(&self, job_id: JobId) -> Option<String> {
        let slots = self.slots.as_ref()?;
        match slots.slot_provider(job_id).await {
            Ok(provider) => provider,
            Err(e) => {
                tracing::warn!(%job_id, error = %e, "the provider a job waits for could not be read; routing from its first route");
                None
            }
        }
    }

    /// Gives back the slot of a job that the provider provably did not take, so that it moves
    /// to the next route holding none.
    async fn release_slot(&self, job_id: JobId) {
        if let Some(slots) = &self.slots
            && let Err(e) = slots.release_slot(job_id).await
        {
            // The slot stays with the job and stops counting once the job is final.
            tracing::warn!(%job_id, error = %e, "a refused submission's slot could not be given back");
        }
    }

    /// Takes a slot for the job at the first provider of `model`'s routes not cooling down, or,
    /// when `follow_waiting`, at the later one a refusal moved it to (it does not go back to the
    /// provider that refused it).
    async fn reserve_from(&self, job_id: JobId, model: &Model, follow_waiting: bool) -> Capacity {
        let now = Instant::now();
        let cooling = |provider: &Arc<dyn UpstreamProvider>| {
            matches!(self.breaker(provider.name(), |breaker| breaker.state(now)), BreakerState::Open { .. })
        };
        let routes = self.route_providers(model);
        // Only a job with a later route to move to, at a provider with slots, can wait there: the
        // store is asked only then, so that the common send reads nothing more.
        let movable =
            follow_waiting && routes.len() > 1 && routes.iter().skip(1).any(|provider| !provider.keys().is_empty());
        let waits_at = if movable { self.waits_at(job_id).await } else { None };
        let first = waits_at
            .and_then(|name| routes.iter().copied().find(|provider| provider.serves(&name)))
            .filter(|provider| !cooling(provider))
            .or_else(|| routes.into_iter().find(|provider| !cooling(provider)));
        let Some(provider) = first else {
            return Capacity::Free(Placement::default());
        };
        let key_id = match self.take_slot(job_id, provider.as_ref()).await {
            Ok(Slot::Taken(key)) => Some(key),
            Ok(Slot::NotCapped) => None,
            Err(SubmitFailure::AtCapacity(_)) => return Capacity::Full,
            Err(e) => return Capacity::Unknown(e.to_string()),
        };
        Capacity::Free(Placement { provider: Some(provider.name().to_owned()), key_id, ..Placement::default() })
    }

    /// The configured provider that has the job at `upstream`, or why there is none.
    fn holder(&self, upstream: &UpstreamRef) -> Result<&Arc<dyn UpstreamProvider>, String> {
        self.provider(upstream.provider())
            .ok_or_else(|| format!("the provider {:?} of this job is not configured here", upstream.provider()))
    }
}

#[async_trait]
impl UpstreamProvider for RoutedUpstream {
    fn name(&self) -> &'static str {
        self.first.name()
    }

    fn serves(&self, provider: &str) -> bool {
        self.provider(provider).is_some()
    }

    fn availability(&self) -> Vec<ProviderAvailability> {
        let now = Instant::now();
        let breakers = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
        self.providers()
            .map(|provider| {
                let breaker = breakers.get(provider.name());
                ProviderAvailability {
                    provider: provider.name().to_owned(),
                    breaker: breaker.map_or(BreakerState::Closed, |breaker| breaker.state(now)),
                    refusals_in_a_row: breaker.map_or(0, |breaker| breaker.refusals_in_a_row),
                }
            })
            .collect()
    }

    /// A key is refused when any provider the job could go to refuses it: which route takes the
    /// job is known only once it is sent, after the credits are held.
    fn refused_extra_key(&self, model: &Model, extra: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
        self.route_providers(model).into_iter().find_map(|provider| provider.refused_extra_key(model, extra))
    }

    async fn submit(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
    ) -> Result<UpstreamRef, SubmitFailure> {
        self.submit_placed(job_id, model, input, &Placement::default()).await
    }

    /// The slot is taken at the provider the job already waits for, when a refusal moved it
    /// there (it does not go back to the provider that refused it), and otherwise at the first
    /// provider of the model's routes that is not cooling down: the one the submission goes to
    /// unless it refuses.
    async fn reserve(&self, job_id: JobId, model: &Model) -> Capacity {
        self.reserve_from(job_id, model, true).await
    }

    /// The slot is taken at the first provider of the routes not cooling down: the domain put
    /// first the one with room now, so a job waiting elsewhere moves there.
    async fn reserve_first(&self, job_id: JobId, model: &Model) -> Capacity {
        self.reserve_from(job_id, model, false).await
    }

    async fn submit_placed(
        &self,
        job_id: JobId,
        model: &Model,
        input: &GenerationInput,
        placement: &Placement,
    ) -> Result<UpstreamRef, SubmitFailure> {
        let providers = self.route_providers(model);
        if providers.is_empty() {
            return Err(SubmitFailure::Rejected("no route of this model has its provider configured here".into()));
        }
        // A send reserved at a later route (where a refusal moved the job) starts there: the
        // routes before it refused this job already.
        let start = placement
            .provider
            .as_deref()
            .and_then(|reserved| providers.iter().position(|provider| provider.serves(reserved)))
            .unwrap_or(0);
        let mut refusals = Vec::new();
        for (index, provider) in providers.into_iter().enumerate().skip(start) {
            let name = provider.name();
            if !self.breaker(name, |breaker| breaker.admits(Instant::now())) {
                refusals.push(format!("{name}: cooling down after refusals"));
                continue;
            }
            // Every route before this one refused the job or was cooling down, now or when the
            // job was moved here.
            if index > 0 {
                counter!("genjobs_upstream_fallbacks_total", "to" => name).increment(1);
                tracing::info!(%job_id, provider = name, "the submission falls back to the next route");
            }
            let key = if placement.provider.as_deref() == Some(name) {
                placement.key_id.clone()
            } else {
                match self.take_slot(job_id, provider.as_ref()).await? {
                    Slot::Taken(key) => Some(key),
                    Slot::NotCapped => None,
                }
            };
            for attempt in 0..2 {
                let sent = match (&key, placement.priority) {
                    (None, Priority::Normal) => provider.submit(job_id, model, input).await,
                    (key_id, priority) => {
                        let send = SendAs { key_id: key_id.clone(), priority };
                        provider.submit_as(job_id, model, input, &send).await
                    }
                };
                match sent {
                    Err(SubmitFailure::NotReached(reason)) => {
                        tracing::warn!(%job_id, provider = name, attempt, %reason, "provider refused the submission");
                        counter!("genjobs_upstream_refusals_total", "provider" => name).increment(1);
                        refusals.push(format!("{name}: {reason}"));
                        let cooling = self.breaker(name, |breaker| {
                            breaker.refused(Instant::now());
                            breaker.cooling_until.is_some()
                        });
                        if cooling {
                            break;
                        }
                        if attempt == 0 {
                            tokio::time::sleep(self.retry_pause).await;
                        }
                    }
                    sent => {
                        self.breaker(name, Breaker::answered);
                        return sent;
                    }
                }
            }
            if key.is_some() {
                self.release_slot(job_id).await;
            }
        }
        Err(SubmitFailure::NotReached(refusals.join("; ")))
    }

    /// Asks each provider that takes slots in turn: one read each, under no lock.
    async fn next_in_line(&self) -> Result<Vec<JobId>, StoreError> {
        let Some(slots) = &self.slots else {
            return Ok(Vec::new());
        };
        let mut next = Vec::new();
        for provider in self.providers() {
            let keys = provider.keys();
            if !keys.is_empty() {
                next.extend(slots.next_in_line(provider.name(), &keys).await?);
            }
        }
        Ok(next)
    }

    /// Every configured provider, its keys (when it has several, or a cap) with their jobs in
    /// flight, and its waiting jobs, as the slots count them.
    async fn loads(&self) -> Result<Vec<ProviderLoad>, StoreError> {
        let mut loads = Vec::new();
        for provider in self.providers() {
            let name = provider.name();
            let keys = provider.keys();
            let (in_flight, waiting) = match &self.slots {
                Some(slots) if !keys.is_empty() => {
                    (slots.slots_in_flight(name).await?, slots.slots_waiting(name).await?)
                }
                _ => Default::default(),
            };
            let keys = keys
                .into_iter()
                .map(|key| KeyLoad {
                    in_flight: in_flight.get(&key.id).copied().unwrap_or(0),
                    hint: key.hint,
                    max_in_flight: key.max_in_flight,
                })
                .collect();
            loads.push(ProviderLoad { provider: name.to_owned(), keys, waiting });
        }
        Ok(loads)
    }

    async fn status(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<UpstreamStatus, PollFailure> {
        let provider = self.holder(upstream).map_err(PollFailure::Transient)?;
        provider.status(job_id, upstream).await
    }

    fn key_hint(&self, upstream: &UpstreamRef) -> Option<String> {
        self.holder(upstream).ok()?.key_hint(upstream)
    }

    async fn result(
        &self,
        job_id: JobId,
        upstream: &UpstreamRef,
        modality: Modality,
    ) -> Result<UpstreamResult, ResultFailure> {
        let provider = self.holder(upstream).map_err(ResultFailure::Transient)?;
        provider.result(job_id, upstream, modality).await
    }

    async fn cancel(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<(), PollFailure> {
        let provider = self.holder(upstream).map_err(PollFailure::Transient)?;
        provider.cancel(job_id, upstream).await
    }

    async fn cancel_unless_done(&self, job_id: JobId, upstream: &UpstreamRef) -> Result<CancelOutcome, PollFailure> {
        let provider = self.holder(upstream).map_err(PollFailure::Transient)?;
        provider.cancel_unless_done(job_id, upstream).await
    }

    async fn read_notification(
        &self,
        delivery: &Delivery,
        now: time::OffsetDateTime,
    ) -> Result<UpstreamReport, NotificationRejected> {
        let provider = self.provider(&delivery.provider).ok_or(NotificationRejected::NotEnabled)?;
        provider.read_notification(delivery, now).await
    }
}
