//! Moderation under the same chaos: the replicas check every job with a moderation service of its
//! own (a simulator process failing a share of its checks with 500 or 503), and one user submits
//! a job now and then, a third of them with a prompt its word list flags. At the end: every
//! flagged job failed `CONTENT_REFUSED` naming its categories, charged nothing (its account's
//! balance is checked with every user's), and no provider ever saw a flagged prompt; no clean job
//! was refused for its content.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::clients::{Shared, Tally, User, merge};
use crate::processes::Cluster;

/// The word the moderation simulator flags (as `violence`) that the flagged prompts carry.
pub const FLAGGED_WORD: &str = "gore";

/// Time between the user's jobs.
const EVERY: Duration = Duration::from_millis(700);

/// What the moderated user did.
#[derive(Debug, Default)]
pub struct ModerationTally {
    /// Requests answered, by status, and those that got no answer.
    pub tally: Tally,
    /// Jobs accepted with a flagged prompt, by id.
    pub flagged: Vec<String>,
    /// Jobs accepted with a clean prompt, by id.
    pub clean: Vec<String>,
}

/// What the moderation checks found, for the report.
#[derive(Debug, Default)]
pub struct ModerationReport {
    /// Flagged jobs refused, of those accepted.
    pub refused: usize,
    /// Flagged jobs accepted.
    pub flagged: usize,
    /// Clean jobs accepted, and how many of them succeeded.
    pub clean: usize,
    /// Clean jobs that succeeded.
    pub clean_succeeded: usize,
    /// Checks the moderation service failed (500, 503), as it counted them.
    pub service_failures: u64,
    /// Checks it answered.
    pub checks: u64,
}

/// Submits a job every [`EVERY`] until `deadline`, every third flagged.
pub async fn run_until(shared: &Shared, user: &User, deadline: Instant) -> ModerationTally {
    let mut seen = ModerationTally::default();
    let mut round = 0u64;
    while Instant::now() < deadline {
        round += 1;
        let flagged = round.is_multiple_of(3);
        let prompt = match flagged {
            true => format!("moderated {FLAGGED_WORD} {}", uuid::Uuid::new_v4()),
            false => format!("moderated calm {}", uuid::Uuid::new_v4()),
        };
        let body = json!({"prompt": prompt});
        let mut tally = Tally::default();
        let answer =
            shared.call(&mut tally, Method::POST, "/api/v1/images/generations", &user.key, Some(&body), None).await;
        merge(&mut seen.tally, tally);
        match answer {
            Some((StatusCode::ACCEPTED, receipt)) => {
                shared.note_accepted(user, &receipt, None);
                let id = receipt["job_id"].as_str().unwrap_or_default().to_owned();
                if flagged { seen.flagged.push(id) } else { seen.clean.push(id) }
            }
            Some((StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS, _)) | None => {}
            Some((status, value)) => {
                shared.violation(format!("moderated user: a submission was answered {status}: {value}"));
            }
        }
        tokio::time::sleep(EVERY).await;
    }
    seen
}

/// Once every job is final: the checks of the module's doc, and the figures.
pub async fn check_after(shared: &Shared, cluster: &Cluster, user: &User, seen: &ModerationTally) -> ModerationReport {
    let mut report =
        ModerationReport { flagged: seen.flagged.len(), clean: seen.clean.len(), ..ModerationReport::default() };
    for id in &seen.flagged {
        let Some(job) = read_job(shared, user, id).await else { continue };
        let error = &job["error"];
        let categories = error["details"]["categories"].as_array().map_or(0, Vec::len);
        if job["state"] == "failed" && error["code"] == "CONTENT_REFUSED" && categories > 0 {
            report.refused += 1;
        } else {
            shared.violation(format!("flagged job {id} was not refused for its content: {job}"));
        }
        if job["credits_actual"].as_u64().unwrap_or(0) != 0 {
            shared.violation(format!("flagged job {id} was charged: {job}"));
        }
    }
    for id in &seen.clean {
        let Some(job) = read_job(shared, user, id).await else { continue };
        report.clean_succeeded += usize::from(job["state"] == "succeeded");
        if job["error"]["code"] == "CONTENT_REFUSED" {
            shared.violation(format!("clean job {id} was refused for its content: {job}"));
        }
    }
    for sim in cluster.sims().await {
        for field in ["submits_by_prompt", "faulted_submits_by_prompt"] {
            for prompt in sim.stats[field].as_object().into_iter().flatten().map(|(prompt, _)| prompt) {
                if prompt.contains(FLAGGED_WORD) {
                    shared.violation(format!("fal was sent the flagged prompt {prompt:?}"));
                }
            }
        }
    }
    let moderation = cluster.moderation_stats().await;
    report.checks = moderation["routes"]["moderations"].as_u64().unwrap_or(0);
    report.service_failures = moderation["routes"]["moderations_failed"].as_u64().unwrap_or(0);
    report
}

async fn read_job(shared: &Shared, user: &User, id: &str) -> Option<Value> {
    let mut tally = Tally::default();
    for _ in 0..10 {
        let path = format!("/api/v1/jobs/{id}");
        if let Some((StatusCode::OK, job)) = shared.call(&mut tally, Method::GET, &path, &user.key, None, None).await {
            return Some(job);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    shared.violation(format!("moderated job {id} could not be read"));
    None
}

impl ModerationReport {
    /// Prints the figures.
    pub fn print(&self) {
        println!(
            "soak: moderation: {}/{} flagged jobs refused, {}/{} clean jobs succeeded; the service answered {} checks and failed {}",
            self.refused, self.flagged, self.clean_succeeded, self.clean, self.checks, self.service_failures
        );
    }
}
