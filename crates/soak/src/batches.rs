//! Batches under the same chaos: one user submits a batch of a few items now and then (with an
//! `Idempotency-Key`, retried with it while no answer comes), and cancels every third a moment
//! later, while the interactive load runs on the same capped fal keys. Its items carry unique
//! prompts, so the capacity checks' count of each prompt at the simulator shows an item sent
//! twice; they are noted as accepted jobs, so the end's checks cover them as every user's jobs
//! (final, listed, charged exactly once, nothing held). At the end, besides: every batch final in
//! the state its end calls for, its counts adding up to its items, each item a job of its own.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::clients::{Shared, Tally, User};

/// Time between two batches.
const EVERY: Duration = Duration::from_secs(2);

/// Items in each batch.
const ITEMS: usize = 8;

/// How long a canceled batch runs before its cancel.
const BEFORE_CANCEL: Duration = Duration::from_millis(300);

/// How long the batches may take to end once the run is over.
const SETTLE: Duration = Duration::from_secs(150);

/// What the batch user did.
#[derive(Debug, Default)]
pub struct BatchTally {
    /// Requests answered, by status, and those that got no answer.
    pub tally: Tally,
    /// Batches accepted, by id, and whether their cancel was asked.
    pub batches: Vec<(String, bool)>,
}

/// What the batch checks found, for the report.
#[derive(Debug, Default)]
pub struct BatchReport {
    /// Batches accepted.
    pub accepted: usize,
    /// Batches ended, by state.
    pub states: std::collections::BTreeMap<String, u64>,
    /// Items, in all.
    pub items: u64,
}

/// Submits a batch every [`EVERY`] until `deadline`, and cancels every third.
pub async fn run_until(shared: &Shared, user: &User, deadline: Instant) -> BatchTally {
    let mut seen = BatchTally::default();
    let mut round = 0u64;
    while Instant::now() < deadline {
        round += 1;
        let tag = uuid::Uuid::new_v4();
        let items: Vec<Value> = (0..ITEMS)
            .map(|n| json!({"custom_id": format!("item-{n}"), "modality": "image", "body": {"prompt": format!("batch {tag} item {n}")}}))
            .collect();
        let body = json!({"items": items, "metadata": {"round": round.to_string()}});
        let idempotency = format!("soak-batch-{tag}");
        if let Some(id) = submit(shared, user, &body, &idempotency, &mut seen.tally).await {
            let cancel = round.is_multiple_of(3);
            if cancel {
                tokio::time::sleep(BEFORE_CANCEL).await;
                cancel_batch(shared, user, &id, &mut seen.tally).await;
            }
            seen.batches.push((id, cancel));
        }
        tokio::time::sleep(EVERY).await;
    }
    seen
}

/// Submits `body`, again with the same key while no answer comes or a 503 does; the batch's id.
async fn submit(shared: &Shared, user: &User, body: &Value, idempotency: &str, tally: &mut Tally) -> Option<String> {
    let mut first: Option<String> = None;
    for attempt in 0..10 {
        let answer =
            shared.call(tally, Method::POST, "/api/v1/batches", &user.key, Some(body), Some(idempotency)).await;
        match answer {
            Some((StatusCode::ACCEPTED, batch)) => {
                let id = batch["id"].as_str().unwrap_or_default().to_owned();
                if first.as_ref().is_some_and(|earlier| *earlier != id) {
                    shared.violation(format!("idempotency key {idempotency} answered batch {id} after another"));
                }
                first.get_or_insert(id);
                // A second attempt, now and then, must replay the same batch.
                if attempt > 0 || !idempotency.ends_with('0') {
                    return first;
                }
            }
            Some((StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS, _)) | None => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Some((status, value)) => {
                shared.violation(format!("batch user: a batch was answered {status}: {value}"));
                return None;
            }
        }
    }
    first
}

async fn cancel_batch(shared: &Shared, user: &User, id: &str, tally: &mut Tally) {
    let path = format!("/api/v1/batches/{id}/cancel");
    for _ in 0..30 {
        match shared.call(tally, Method::POST, &path, &user.key, None, None).await {
            Some((StatusCode::ACCEPTED, _)) => return,
            // The user's reads of its batches count against its request rate like any.
            Some((StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS, _)) | None => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Some((status, value)) => {
                shared.violation(format!("batch {id}: its cancel was answered {status}: {value}"));
                return;
            }
        }
    }
}

/// Waits for each batch to end, checks it, and notes its items as the user's accepted jobs, so
/// that the end's checks of every user cover them.
pub async fn settle(shared: &Shared, user: &User, seen: BatchTally) -> (BatchReport, Tally) {
    let mut tally = seen.tally;
    let mut report = BatchReport { accepted: seen.batches.len(), ..BatchReport::default() };
    let deadline = Instant::now() + SETTLE;
    for (id, canceled) in &seen.batches {
        let Some(batch) = ended(shared, user, id, deadline, &mut tally).await else {
            shared.violation(format!("batch {id} did not end"));
            continue;
        };
        let state = batch["state"].as_str().unwrap_or("?").to_owned();
        let counts = &batch["counts"];
        let count = |field: &str| counts[field].as_u64().unwrap_or(u64::MAX);
        // A cancel that came after every item ended leaves the batch completed.
        let expected = matches!((*canceled, state.as_str()), (_, "completed") | (true, "canceled"));
        if !expected {
            shared.violation(format!("batch {id} ended {state}, its cancel asked: {canceled}"));
        }
        if count("total") != ITEMS as u64
            || count("succeeded").saturating_add(count("failed")).saturating_add(count("canceled")) != ITEMS as u64
        {
            shared.violation(format!("batch {id}: counts {counts} do not add up to {ITEMS} final items"));
        }
        let items = items(shared, user, id, &mut tally).await;
        let mut jobs = std::collections::BTreeSet::new();
        for item in &items {
            if let Some(job) = item["job"]["id"].as_str() {
                jobs.insert(job.to_owned());
                shared.note_accepted(user, &json!({"job_id": job}), None);
            }
        }
        if jobs.len() != ITEMS {
            shared.violation(format!("batch {id}: {} distinct item jobs, not {ITEMS}", jobs.len()));
        }
        report.items += items.len() as u64;
        *report.states.entry(state).or_default() += 1;
    }
    (report, tally)
}

/// The batch once its state is final; `None` past `deadline`.
async fn ended(shared: &Shared, user: &User, id: &str, deadline: Instant, tally: &mut Tally) -> Option<Value> {
    let path = format!("/api/v1/batches/{id}");
    while Instant::now() < deadline {
        if let Some((StatusCode::OK, batch)) = shared.call(tally, Method::GET, &path, &user.key, None, None).await
            && batch["state"] != "in_progress"
        {
            return Some(batch);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    None
}

/// Every item of the batch, following its pages.
async fn items(shared: &Shared, user: &User, id: &str, tally: &mut Tally) -> Vec<Value> {
    let mut all = Vec::new();
    let mut path = format!("/api/v1/batches/{id}/items?limit=100");
    for _ in 0..20 {
        match shared.call(tally, Method::GET, &path, &user.key, None, None).await {
            Some((StatusCode::OK, page)) => {
                all.extend(page["data"].as_array().cloned().unwrap_or_default());
                match page["next"].as_str() {
                    Some(next) => path = format!("/api/v1/batches/{id}/items?limit=100&after={next}"),
                    None => return all,
                }
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    shared.violation(format!("batch {id}: its items could not be read"));
    all
}

impl BatchReport {
    /// Prints the figures.
    pub fn print(&self) {
        println!("soak: batches: {} accepted, {} items, ended {:?}", self.accepted, self.items, self.states);
    }
}
