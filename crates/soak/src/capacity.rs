//! The capacity and budget rules of a soak: fal's keys capped at [`CAP_PER_KEY`] jobs in flight
//! each, checked at the simulator (its count of each key's requests not completed) and in the
//! replicas' own figures while the run goes and at its end; no job sent twice; the small user's
//! jobs not held behind the big user's bursts; and every budgeted key's `used` equal to what its
//! jobs hold and were charged, never above its budget.

use std::collections::HashMap;

use diesel_async::RunQueryDsl;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::appetite::{Appetite, AppetiteTally};
use crate::clients::{Shared, Tally};
use crate::processes::{ADMIN_TOKEN, CAP_PER_KEY, Cluster, FAL_KEYS};

/// The longest a soak job runs at fal: 100 ms in its queue and 1,500 ms running (`[sim:run=1500]`).
const LONGEST_JOB_SECS: f64 = 1.6;

/// A replica's poll interval (`GENJOBS_POLL_INTERVAL_MS`): a slot frees when a replica sees its
/// job final, up to one poll after the simulator completed it.
const POLL_SECS: f64 = 0.2;

/// The most the small user's job may wait from accepted to sent, when no chaos came in between:
/// one job duration behind whatever holds the slots, the poll that sees that job end, and the
/// round trip of the submission to fal.
pub const SMALL_WAIT_BOUND_SECS: f64 = LONGEST_JOB_SECS + POLL_SECS + 0.5;

/// How many of the big user's jobs may be sent while a small user's job waits past the bound
/// before it counts as held behind the burst: the sends that had taken their slots when the small
/// job came, one per key. A longer wait with no more sends than that waited for a slot to free
/// (slots held by calls that chaos made hang), not behind the burst.
const OVERTAKES_ALLOWED: usize = 2;

/// What the capacity checks found.
#[derive(Debug, Default)]
pub struct CapacityReport {
    /// The most requests of each fal key in flight at once at the simulator whose jobs were not
    /// final at genjobs (what the cap counts).
    pub peak_at_sim: HashMap<String, u64>,
    /// The same, counting every request until it ended at the simulator.
    pub peak_at_sim_raw: HashMap<String, u64>,
    /// Requests that ran on at the simulator after their job ended at genjobs, by the job's state.
    pub outlived_their_jobs: HashMap<String, u64>,
    /// Submissions per fal key at the simulator.
    pub submits_by_key: HashMap<String, u64>,
    /// The most times one prompt was submitted to fal.
    pub most_submits_of_a_prompt: u64,
    /// Samples of the replicas' figures taken during the run.
    pub samples: u64,
    /// The small user's jobs measured (sent to fal, no chaos while they waited), and those left out.
    pub small_measured: usize,
    /// The small user's jobs that waited across a disturbance, or were never sent.
    pub small_excluded: usize,
    /// Each of the small user's waits in seconds, in parentheses when left out, `-` when never
    /// sent.
    pub small_each: Vec<String>,
    /// Their median and longest wait, accepted → sent, in seconds.
    pub small_wait_median: f64,
    /// See `small_wait_median`.
    pub small_wait_max: f64,
    /// The big user's median wait, for comparison.
    pub big_wait_median: f64,
    /// Per budgeted key: prefix, period, budget, used, and what its jobs hold and were charged.
    pub budgets: Vec<(String, &'static str, u64, u64, u64)>,
    /// What the two users saw.
    pub appetite: AppetiteTally,
}

impl CapacityReport {
    /// Prints the figures.
    pub fn print(&self) {
        println!(
            "soak: capacity: cap {CAP_PER_KEY} per fal key, most in flight at the simulator {:?} ({:?} counting {:?} \
             requests that ran on after their job ended), submissions by key {:?}, at most {} submission(s) of one \
             prompt, {} samples of the replicas' figures",
            self.peak_at_sim,
            self.peak_at_sim_raw,
            self.outlived_their_jobs,
            self.submits_by_key,
            self.most_submits_of_a_prompt,
            self.samples
        );
        println!(
            "soak: fairness: big user {} jobs accepted (median wait {:.2} s), small user {} accepted, {} measured \
             (median wait {:.2} s, longest {:.2} s, bound {SMALL_WAIT_BOUND_SECS:.1} s), {} left out (chaos while waiting, a fault at its own submission, or never sent; a wait past the bound \
             says how many of the big user's jobs were sent meanwhile): {}",
            self.appetite.burst_accepted,
            self.big_wait_median,
            self.appetite.trickle_accepted,
            self.small_measured,
            self.small_wait_median,
            self.small_wait_max,
            self.small_excluded,
            self.small_each.join(" ")
        );
        println!(
            "soak: budgets (prefix, period, credits, used, held + charged of its jobs) {:?}; {} answers 402 KEY_BUDGET_EXCEEDED, \
             {} answers 403 MODEL_NOT_ALLOWED",
            self.budgets, self.appetite.budget_refusals, self.appetite.model_refusals
        );
    }
}

async fn admin_get(shared: &Shared, path: &str) -> Option<Value> {
    let mut tally = Tally::default();
    match shared.call(&mut tally, Method::GET, path, ADMIN_TOKEN, None, None).await {
        Some((StatusCode::OK, value)) => Some(value),
        _ => None,
    }
}

/// Checks the replicas' figures now: no key above its cap, no budget above its credits. A
/// replica that does not answer (killed, or its database cut) is not a violation.
pub async fn sample(shared: &Shared, appetites: &[&Appetite]) -> bool {
    let Some(providers) = admin_get(shared, "/api/admin/providers").await else { return false };
    for provider in providers["data"].as_array().into_iter().flatten() {
        for key in provider["keys"].as_array().into_iter().flatten() {
            let (in_flight, cap) = (key["in_flight"].as_u64(), key["max_in_flight"].as_u64());
            if let (Some(in_flight), Some(cap @ 1..)) = (in_flight, cap)
                && in_flight > cap
            {
                shared.violation(format!(
                    "{} key {} has {in_flight} jobs in flight, above its cap {cap}",
                    provider["provider"], key["key_hint"]
                ));
            }
        }
    }
    for who in appetites {
        if let Some((used, credits)) = budget_used(shared, who).await
            && used > credits
        {
            shared.violation(format!("key {} used {used}, above its budget {credits}", who.key.prefix));
        }
    }
    true
}

/// The budgeted key's `used` and `credits`, from the admin API.
async fn budget_used(shared: &Shared, who: &Appetite) -> Option<(u64, u64)> {
    let keys = admin_get(shared, &format!("/api/admin/users/{}/keys", who.user.id)).await?;
    let key = keys["data"].as_array()?.iter().find(|k| k["prefix"] == who.key.prefix.as_str())?;
    Some((key["budget"]["used"].as_u64()?, key["budget"]["credits"].as_u64()?))
}

/// What the jobs submitted with a key hold and were charged: `credits_held` of the open ones and
/// `credits_actual` of the final ones (holds − releases), from the admin job listing.
async fn held_and_charged(shared: &Shared, prefix: &str) -> Option<u64> {
    let mut total = 0;
    let mut path = format!("/api/admin/jobs?key={prefix}&limit=100");
    loop {
        let page = admin_get(shared, &path).await?;
        for job in page["data"].as_array()? {
            let final_ = matches!(job["state"].as_str(), Some("succeeded" | "failed" | "canceled"));
            total += if final_ { job["credits_actual"].as_u64().unwrap_or(0) } else { job["credits_held"].as_u64()? };
        }
        match page["next"].as_str() {
            Some(next) => path = format!("/api/admin/jobs?key={prefix}&limit=100&before={next}"),
            None => return Some(total),
        }
    }
}

#[derive(diesel::QueryableByName)]
struct Waited {
    #[diesel(sql_type = diesel::sql_types::Double)]
    created: f64,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Double>)]
    sent: Option<f64>,
    #[diesel(sql_type = diesel::sql_types::Text)]
    prompt: String,
}

/// A job's wait: accepted and sent, in seconds since the epoch, and its prompt.
struct Wait {
    accepted: f64,
    sent: Option<f64>,
    prompt: String,
}

/// Each job's wait of `user`: (accepted, sent) in seconds since the epoch, from the jobs' own
/// timestamps in the database (the API shows when a job started running, not when it was sent).
async fn waits(database_url: &str, user: &str) -> Result<Vec<Wait>, String> {
    let mut conn = connect(database_url).await?;
    let rows: Vec<Waited> = diesel::sql_query(
        "SELECT extract(epoch FROM created_at)::float8 AS created, extract(epoch FROM sent_at)::float8 AS sent, \
            coalesce(input->>'prompt', '') AS prompt \
         FROM jobs WHERE user_id::text = $1",
    )
    .bind::<diesel::sql_types::Text, _>(user)
    .load(&mut conn)
    .await
    .map_err(|e| e.to_string())?;
    Ok(rows.into_iter().map(|w| Wait { accepted: w.created, sent: w.sent, prompt: w.prompt }).collect())
}

async fn connect(database_url: &str) -> Result<diesel_async::AsyncPgConnection, String> {
    let limit = std::time::Duration::from_secs(5);
    genjobs_store_postgres::open_connection(database_url, limit, limit).await.map_err(|e| e.to_string())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The checks at the end, once every job is final.
pub async fn check_after(
    shared: &Shared,
    cluster: &Cluster,
    database_url: &str,
    big: &Appetite,
    small: &Appetite,
    appetite: AppetiteTally,
) -> CapacityReport {
    let mut report = CapacityReport { appetite, ..CapacityReport::default() };
    check_simulator(shared, cluster, database_url, &mut report).await;
    check_slots_returned(shared).await;
    check_small_waits(shared, cluster, database_url, big, small, &mut report).await;
    for who in [big, small] {
        check_budget(shared, who, &mut report).await;
    }
    if report.appetite.budget_refusals == 0 {
        shared.violation(format!(
            "key {} never answered 402 KEY_BUDGET_EXCEEDED, though its bursts outspend its budget",
            big.key.prefix
        ));
    }
    report
}

/// Most requests open at once per key, from their (key, start, end) in milliseconds (an end
/// of `f64::INFINITY`: still open); a request that ends as another starts is not open with it.
fn most_at_once(lives: &[(String, f64, f64)]) -> HashMap<String, u64> {
    let mut events: Vec<(&str, f64, i64)> = Vec::new();
    for (key, start, end) in lives.iter().filter(|(_, start, end)| end > start) {
        events.extend([(key.as_str(), *start, 1), (key.as_str(), *end, -1)]);
    }
    events.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.2.cmp(&b.2)));
    let (mut open, mut most) = (HashMap::<String, i64>::new(), HashMap::<String, u64>::new());
    for (key, _, change) in events {
        let now = open.entry(key.to_owned()).or_default();
        *now += change;
        let peak = most.entry(key.to_owned()).or_default();
        *peak = (*peak).max(u64::try_from(*now).unwrap_or(0));
    }
    most
}

#[derive(diesel::QueryableByName)]
struct Ended {
    #[diesel(sql_type = diesel::sql_types::Text)]
    prompt: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    state: String,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Double>)]
    ended_ms: Option<f64>,
}

/// When each job ended (milliseconds since the epoch), and how, by its prompt.
async fn jobs_ended(database_url: &str) -> Result<HashMap<String, (String, Option<f64>)>, String> {
    let mut conn = connect(database_url).await?;
    let rows: Vec<Ended> = diesel::sql_query(
        "SELECT input->>'prompt' AS prompt, state, \
            extract(epoch FROM coalesce(finished_at, canceled_at))::float8 * 1000 AS ended_ms \
         FROM jobs WHERE input ? 'prompt'",
    )
    .load(&mut conn)
    .await
    .map_err(|e| e.to_string())?;
    Ok(rows.into_iter().map(|row| (row.prompt, (row.state, row.ended_ms))).collect())
}

/// Checks fal's keys at the simulator: a request counts against its key from its acceptance
/// until it ended there or its job ended at genjobs, whichever came first. A job that ends while
/// its request still runs (canceled, its cancel on its way to fal; failed as ambiguous, its
/// submission's answer lost) gives its slot back by the contract ("sent and not final"); those
/// requests are counted apart, and reported.
async fn check_simulator(shared: &Shared, cluster: &Cluster, database_url: &str, report: &mut CapacityReport) {
    let ended = match jobs_ended(database_url).await {
        Ok(ended) => ended,
        Err(e) => {
            shared.violation(format!("the jobs' ends could not be read: {e}"));
            return;
        }
    };
    let mut prompts: HashMap<String, u64> = HashMap::new();
    let (mut counted, mut raw) = (Vec::new(), Vec::new());
    for sim in cluster.sims().await {
        for (hint, count) in sim.stats["submits_by_key"].as_object().into_iter().flatten() {
            *report.submits_by_key.entry(hint.clone()).or_default() += count.as_u64().unwrap_or(0);
        }
        for (prompt, count) in sim.stats["submits_by_prompt"].as_object().into_iter().flatten() {
            *prompts.entry(prompt.clone()).or_default() += count.as_u64().unwrap_or(0);
        }
        let taken_down = sim.retired_ms.unwrap_or(f64::INFINITY);
        for life in sim.requests.as_array().into_iter().flatten() {
            let (Some(prompt), Some(key), Some(start)) =
                (life["prompt"].as_str(), life["key"].as_str(), life["accepted_ms"].as_f64())
            else {
                continue;
            };
            let end = life["ended_ms"].as_f64().unwrap_or(f64::INFINITY).min(taken_down);
            let job = ended.get(prompt);
            let job_end = job.and_then(|(_, at)| *at).unwrap_or(f64::INFINITY);
            if job_end < end {
                let state = job.map_or("?", |(state, _)| state.as_str());
                *report.outlived_their_jobs.entry(state.to_owned()).or_default() += 1;
            }
            raw.push((key.to_owned(), start, end));
            counted.push((key.to_owned(), start, end.min(job_end)));
        }
    }
    report.peak_at_sim = most_at_once(&counted);
    report.peak_at_sim_raw = most_at_once(&raw);
    for (hint, peak) in &report.peak_at_sim {
        if *peak > CAP_PER_KEY {
            shared.violation(format!(
                "fal key …{hint} had {peak} requests of jobs not final in flight at the simulator, above its cap {CAP_PER_KEY}"
            ));
        }
    }
    for key in FAL_KEYS {
        let hint = &key[key.len() - 4..];
        if report.submits_by_key.get(hint).copied().unwrap_or(0) == 0 {
            shared.violation(format!("fal key …{hint} was never used: the least busy key was not chosen"));
        }
    }
    for (prompt, count) in &prompts {
        if *count > 1 {
            shared.violation(format!("the job of prompt {prompt:?} was sent to fal {count} times"));
        }
    }
    report.most_submits_of_a_prompt = prompts.values().copied().max().unwrap_or(0);
}

async fn check_slots_returned(shared: &Shared) {
    let Some(providers) = admin_get(shared, "/api/admin/providers").await else {
        shared.violation("the providers' figures could not be read at the end".into());
        return;
    };
    for provider in providers["data"].as_array().into_iter().flatten() {
        for key in provider["keys"].as_array().into_iter().flatten() {
            if key["in_flight"] != 0 {
                shared.violation(format!(
                    "{} key {} still has {} in flight after every job ended",
                    provider["provider"], key["key_hint"], key["in_flight"]
                ));
            }
        }
        if provider["waiting"]["normal"] != 0 || provider["waiting"]["low"] != 0 {
            shared.violation(format!(
                "{} still has jobs waiting after every job ended: {}",
                provider["provider"], provider["waiting"]
            ));
        }
    }
}

async fn check_small_waits(
    shared: &Shared,
    cluster: &Cluster,
    database_url: &str,
    big: &Appetite,
    small: &Appetite,
    report: &mut CapacityReport,
) {
    let disturbances = shared.disturbances();
    let calm = |from: f64, to: f64| disturbances.iter().all(|(start, end)| to < *start || from > *end);
    // A job whose own submission a fault struck waited for its retry, not for a slot.
    let mut faulted: HashMap<String, u64> = HashMap::new();
    for sim in cluster.sims().await {
        for (prompt, count) in sim.stats["faulted_submits_by_prompt"].as_object().into_iter().flatten() {
            *faulted.entry(prompt.clone()).or_default() += count.as_u64().unwrap_or(0);
        }
    }
    let big_sent: Vec<f64> = match waits(database_url, &big.user.id).await {
        Ok(jobs) => {
            report.big_wait_median = median(jobs.iter().filter_map(|w| w.sent.map(|s| s - w.accepted)).collect());
            jobs.iter().filter_map(|w| w.sent).collect()
        }
        Err(e) => {
            shared.violation(format!("the big user's jobs could not be read: {e}"));
            return;
        }
    };
    let jobs = match waits(database_url, &small.user.id).await {
        Ok(jobs) => jobs,
        Err(e) => {
            shared.violation(format!("the small user's jobs could not be read: {e}"));
            return;
        }
    };
    let measured_wait = |w: &Wait| {
        w.sent.filter(|sent| calm(w.accepted, *sent) && !faulted.contains_key(&w.prompt)).map(|sent| sent - w.accepted)
    };
    let overtakes = |w: &Wait| {
        let sent = w.sent.unwrap_or(w.accepted);
        big_sent.iter().filter(|at| **at > w.accepted && **at < sent).count()
    };
    report.small_each = jobs
        .iter()
        .map(|w| match (measured_wait(w), w.sent) {
            (Some(wait), _) if wait > SMALL_WAIT_BOUND_SECS => format!("{wait:.2}[{} overtook]", overtakes(w)),
            (Some(wait), _) => format!("{wait:.2}"),
            (None, Some(sent)) => format!("({:.2})", sent - w.accepted),
            (None, None) => "-".to_owned(),
        })
        .collect();
    let measured: Vec<f64> = jobs.iter().filter_map(measured_wait).collect();
    report.small_excluded = jobs.len() - measured.len();
    report.small_measured = measured.len();
    report.small_wait_max = measured.iter().copied().fold(0.0, f64::max);
    report.small_wait_median = median(measured);
    for job in &jobs {
        if let Some(wait) = measured_wait(job).filter(|wait| *wait > SMALL_WAIT_BOUND_SECS)
            && overtakes(job) > OVERTAKES_ALLOWED
        {
            shared.violation(format!(
                "a job of the small user waited {wait:.2} s to be sent, above {SMALL_WAIT_BOUND_SECS:.1} s, while {} of \
                 the big user's jobs were sent",
                overtakes(job)
            ));
        }
    }
}

async fn check_budget(shared: &Shared, who: &Appetite, report: &mut CapacityReport) {
    let prefix = &who.key.prefix;
    // A day's budget starts afresh at 00:00 UTC: a run across it compares two periods.
    let today = (crate::clock::epoch_now() / 86_400.0).floor();
    if who.key.period == "day" && today != who.key.created_day {
        println!("soak: key {prefix}'s day ended during the run: its budget is not compared");
        return;
    }
    let (Some((used, credits)), Some(jobs)) = (budget_used(shared, who).await, held_and_charged(shared, prefix).await)
    else {
        shared.violation(format!("the budget of key {prefix} could not be read"));
        return;
    };
    report.budgets.push((prefix.clone(), who.key.period, credits, used, jobs));
    if used > credits {
        shared.violation(format!("key {prefix} used {used}, above its budget {credits}"));
    }
    if used != jobs {
        shared.violation(format!("key {prefix} used {used}, but its jobs hold and were charged {jobs}"));
    }
}
