//! The end of a soak: wait for every accepted job to be final, then check every user's account,
//! ledger (its entries must sum to the account) and listing, and report the figures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::clients::{Shared, Tally, User, merge};
use crate::conn::ConnTally;
use crate::processes::ADMIN_TOKEN;

/// How long the jobs still running at the end may take to become final.
const SETTLE: Duration = Duration::from_secs(150);

/// What a soak did and found.
#[derive(Debug, Default)]
pub struct Report {
    /// Requests answered, by status, and those that got no answer.
    pub tally: Tally,
    /// Jobs accepted (a 202 seen).
    pub accepted: usize,
    /// Jobs listed at the end, by final state.
    pub states: BTreeMap<String, u64>,
    /// Jobs listed at the end, by the provider that had them (`none`: never sent).
    pub providers: BTreeMap<String, u64>,
    /// Faults the simulator injected, by kind.
    pub faults: Vec<(String, u64)>,
    /// Replicas killed with SIGKILL.
    pub kills: u32,
    /// Database sessions terminated.
    pub terminations: usize,
    /// What the `conn` phase did.
    pub conn: ConnTally,
    /// What the capacity and budget checks found.
    pub capacity: crate::capacity::CapacityReport,
    /// What the money checks found.
    pub costs: crate::costs::CostReport,
    /// What the moderation checks found.
    pub moderation: crate::moderation::ModerationReport,
    /// What the batch checks found.
    pub batches: crate::batches::BatchReport,
    /// Every broken rule.
    pub violations: Vec<String>,
}

impl Report {
    /// Prints the figures, and the violations.
    pub fn print(&self) {
        let requests: u64 = self.tally.statuses.values().sum();
        println!(
            "soak: {requests} requests answered ({} without an answer), statuses {:?}",
            self.tally.transport_errors, self.tally.statuses
        );
        println!(
            "soak: {} jobs accepted, final states {:?}, by provider {:?}",
            self.accepted, self.states, self.providers
        );
        println!(
            "soak: faults {:?}, {} replica kills, {} database sessions terminated",
            self.faults, self.kills, self.terminations
        );
        println!(
            "soak: conn phase: {} stalled bodies answered 408 and closed ({} lost to kills), made-up methods answered {:?}",
            self.conn.stalled_closed, self.conn.stalled_lost, self.conn.made_up.statuses
        );
        self.capacity.print();
        self.costs.print();
        self.moderation.print();
        self.batches.print();
        println!("soak: {} violations", self.violations.len());
        for violation in &self.violations {
            println!("soak: VIOLATION {violation}");
        }
    }
}

async fn job(shared: &Shared, user: &User, id: &str, tally: &mut Tally) -> Option<Value> {
    let path = format!("/api/v1/jobs/{id}?wait=20");
    match shared.call(tally, Method::GET, &path, &user.key, None, None).await {
        Some((StatusCode::OK, job)) => Some(job),
        _ => None,
    }
}

async fn listing(shared: &Shared, user: &User, tally: &mut Tally) -> Option<Vec<Value>> {
    let mut jobs = Vec::new();
    let mut path = "/api/v1/jobs?limit=100".to_owned();
    loop {
        let Some((StatusCode::OK, page)) = shared.call(tally, Method::GET, &path, &user.key, None, None).await else {
            return None;
        };
        jobs.extend(page["data"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) => path = format!("/api/v1/jobs?limit=100&before={next}"),
            None => return Some(jobs),
        }
    }
}

/// Every entry of the user's ledger, following its pages.
async fn ledger(shared: &Shared, user: &User, tally: &mut Tally) -> Option<Vec<Value>> {
    let mut entries = Vec::new();
    let mut path = "/api/v1/account/ledger?limit=100".to_owned();
    loop {
        let Some((StatusCode::OK, page)) = shared.call(tally, Method::GET, &path, &user.key, None, None).await else {
            return None;
        };
        entries.extend(page["data"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) => path = format!("/api/v1/account/ledger?limit=100&before={next}"),
            None => return Some(entries),
        }
    }
}

/// The ledger's sums: (available, held, spent) = (grants − holds + releases, holds − releases −
/// charges, charges).
fn ledger_sums(entries: &[Value]) -> (i128, i128, i128) {
    let sum = |kind: &str| -> i128 {
        entries.iter().filter(|e| e["kind"] == kind).map(|e| i128::from(e["credits"].as_i64().unwrap_or(0))).sum()
    };
    let (grants, holds, releases, charges) = (sum("grant"), sum("hold"), sum("release"), sum("charge"));
    (grants - holds + releases, holds - releases - charges, charges)
}

fn is_final(job: &Value) -> bool {
    matches!(job["state"].as_str(), Some("succeeded" | "failed" | "canceled"))
}

/// Waits for every accepted job to be final, then checks every user.
pub async fn settle_and_check(shared: &Shared, users: &[User], tallies: Vec<Tally>, granted: u64) -> Report {
    let mut report = Report::default();
    for tally in tallies {
        merge(&mut report.tally, tally);
    }
    let deadline = Instant::now() + SETTLE;
    for user in users {
        let accepted = shared.accepted(&user.id);
        report.accepted += accepted.len();
        for id in &accepted {
            while Instant::now() < deadline {
                if job(shared, user, id, &mut report.tally).await.is_some_and(|j| is_final(&j)) {
                    break;
                }
            }
        }
        check_user(shared, user, granted, &mut report).await;
    }
    report.violations.extend(shared.violations());
    report
}

async fn check_user(shared: &Shared, user: &User, granted: u64, report: &mut Report) {
    let mut violation = |what: String| report.violations.push(format!("user {}: {what}", user.id));
    let Some(listed) = listing(shared, user, &mut report.tally).await else {
        violation("the job listing could not be read".into());
        return;
    };
    let path = format!("/api/admin/users/{}", user.id);
    let Some((StatusCode::OK, account)) =
        shared.call(&mut report.tally, Method::GET, &path, ADMIN_TOKEN, None, None).await
    else {
        violation("the account could not be read".into());
        return;
    };
    let field = |f: &str| account[f].as_u64().unwrap_or(u64::MAX);
    let (available, held, spent) = (field("credits_available"), field("credits_held"), field("credits_spent"));
    if u128::from(available) + u128::from(held) + u128::from(spent) != u128::from(granted) {
        violation(format!("available {available} + held {held} + spent {spent} != granted {granted}"));
    }
    if held != 0 || field("active_jobs") != 0 {
        violation(format!("still held {held}, active {} after every job ended", field("active_jobs")));
    }
    match ledger(shared, user, &mut report.tally).await {
        None => violation("the ledger could not be read".into()),
        Some(entries) => {
            let sums = ledger_sums(&entries);
            if sums != (i128::from(available), i128::from(held), i128::from(spent)) {
                violation(format!("the ledger sums to {sums:?}, the account is ({available}, {held}, {spent})"));
            }
        }
    }
    let charged: u64 = listed.iter().map(|j| j["credits_actual"].as_u64().unwrap_or(0)).sum();
    if charged != spent {
        violation(format!("spent {spent} but the jobs' credits_actual add up to {charged}"));
    }
    let listed_ids: std::collections::BTreeSet<&str> = listed.iter().filter_map(|j| j["id"].as_str()).collect();
    for id in shared.accepted(&user.id) {
        if !listed_ids.contains(id.as_str()) {
            violation(format!("accepted job {id} is not listed"));
        }
    }
    for job in &listed {
        if !is_final(job) {
            violation(format!("job {} is still {}", job["id"], job["state"]));
        }
        *report.states.entry(job["state"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
        *report.providers.entry(job["upstream"].as_str().unwrap_or("none").to_owned()).or_default() += 1;
    }
}
