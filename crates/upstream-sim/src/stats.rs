//! What tests and benchmarks read of the simulator: calls per route and per request id, and the
//! time of every status call. Behind the `stats` feature so that the production binary, whose
//! built-in simulator nobody measures, does not carry it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use actix_web::{HttpResponse, web};
use serde::Serialize;

/// Calls received, per route and per request id.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SimStats {
    /// `submit`, `status`, `result`, `cancel` → count.
    pub routes: HashMap<String, u64>,
    /// Request id → route → count.
    pub requests: HashMap<String, HashMap<String, u64>>,
    /// The last 4 characters of each key submitted with (`-` for none) → submissions.
    pub submits_by_key: HashMap<String, u64>,
    /// The same keys → the most requests of that key not completed at once, as seen at each
    /// submission.
    pub peak_in_flight_by_key: HashMap<String, u64>,
    /// The same keys → the most requests of that key in progress (holding one of its slots, see
    /// `SimConfig::max_in_progress_per_key`) at once; without a limit, the same as
    /// `peak_in_flight_by_key`.
    pub peak_in_progress_by_key: HashMap<String, u64>,
    /// The prompt of each submission accepted → how many times it was submitted, so that a
    /// test whose prompts are unique sees a job sent twice.
    pub submits_by_prompt: HashMap<String, u64>,
    /// The prompt of each submission call a fault of chaos struck → how many times, so that a
    /// test can tell a job that waited for its retry from one that waited for a slot.
    pub faulted_submits_by_prompt: HashMap<String, u64>,
    /// Submissions that asked for the low queue priority (`X-Fal-Queue-Priority: low`).
    pub low_priority_submits: u64,
}

/// One request's life at the simulator, in milliseconds since the Unix epoch, so that a test
/// can set it beside what its caller recorded of the same job (its prompt names it).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Timeline {
    /// The prompt it was submitted with.
    pub prompt: String,
    /// Its key's last 4 characters (`-` for none).
    pub key: String,
    /// When it was accepted.
    pub accepted_ms: u64,
    /// When it completed, or will (a cancel ends it at once); `None` while it waits for a slot,
    /// or when it never completes.
    pub ended_ms: Option<u64>,
}

/// How a key is shown in the stats: its last 4 characters.
pub(crate) fn hint(key: Option<&str>) -> String {
    let Some(key) = key else { return "-".to_owned() };
    let skip = key.chars().count().saturating_sub(4);
    key.chars().skip(skip).collect()
}

/// Counts calls as they arrive.
pub(crate) struct Recorder {
    started: Instant,
    started_wall: SystemTime,
    stats: Mutex<SimStats>,
    polls: Mutex<HashMap<String, Vec<u64>>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            started_wall: SystemTime::now(),
            stats: Mutex::default(),
            polls: Mutex::default(),
        }
    }
}

impl Recorder {
    pub(crate) fn count(&self, route: &str, request_id: Option<&str>) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        *stats.routes.entry(route.to_owned()).or_default() += 1;
        if let Some(id) = request_id {
            *stats.requests.entry(id.to_owned()).or_default().entry(route.to_owned()).or_default() += 1;
        }
        if let (Some(id), "status") = (request_id, route) {
            let at = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.polls.lock().unwrap_or_else(PoisonError::into_inner).entry(id.to_owned()).or_default().push(at);
        }
    }

    pub(crate) fn submit_faulted(&self, prompt: &str) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        *stats.faulted_submits_by_prompt.entry(prompt.to_owned()).or_default() += 1;
    }

    pub(crate) fn submitted(&self, key: Option<&str>, prompt: &str, in_flight: u64, low: bool) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        *stats.submits_by_prompt.entry(prompt.to_owned()).or_default() += 1;
        stats.low_priority_submits += u64::from(low);
        let hint = hint(key);
        *stats.submits_by_key.entry(hint.clone()).or_default() += 1;
        let peak = stats.peak_in_flight_by_key.entry(hint).or_default();
        *peak = (*peak).max(in_flight);
    }

    pub(crate) fn in_progress(&self, key: Option<&str>, in_progress: u64) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        let peak = stats.peak_in_progress_by_key.entry(hint(key)).or_default();
        *peak = (*peak).max(in_progress);
    }

    /// `at` in milliseconds since the Unix epoch.
    pub(crate) fn epoch_ms(&self, at: Instant) -> u64 {
        let wall = self.started_wall + at.saturating_duration_since(self.started);
        wall.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(crate) fn stats(&self) -> SimStats {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn polls(&self) -> HashMap<String, Vec<u64>> {
        self.polls.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The simulator's state, as the stats routes see it.
pub(crate) trait HasRecorder: 'static {
    fn recorder(&self) -> &Recorder;
}

pub(crate) fn routes<S: HasRecorder>(config: &mut web::ServiceConfig) {
    config
        .route(
            "/_sim/stats",
            web::get().to(|sim: web::Data<S>| async move { HttpResponse::Ok().json(sim.recorder().stats()) }),
        )
        .route(
            "/_sim/polls",
            web::get().to(|sim: web::Data<S>| async move { HttpResponse::Ok().json(sim.recorder().polls()) }),
        );
}
