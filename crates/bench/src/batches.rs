//! `genjobs-bench batches`: batches on Postgres (issues 53 and 57). Four runs, each on a database
//! and a genjobs of its own, against the simulator:
//! 1. Acceptance: batches of 5,000 items accepted one after another (the time of each
//!    `POST /api/v1/batches`, and its statements from `pg_stat_statements` where the server loads
//!    it), against the same 5,000 jobs submitted one by one by 32 clients.
//! 2. Throughput: one batch of 5,000 items from `POST` to `completed`, jobs that end at once.
//! 3. Fairness: one fal key capped at 4 jobs in flight, jobs of 100 ms; another user's
//!    interactive jobs, one at a time, with no batch and then behind a batch of 5,000 items of a
//!    user at the default concurrency limit of 8; their waits (accepted → sent) from the jobs'
//!    own timestamps.
//! 4. Waiting: 100,000 items waiting for their owner's concurrency limit of 4: the memory they
//!    add to the replica, how soon a freed slot sends the next item (a job's end → the next
//!    item's send, from the jobs' own timestamps), and interactive submissions' latency with them
//!    waiting against none.
//!
//! Writes `docs/benchmarks-batches.md`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use genjobs_bench::host::rss_kib;
use genjobs_bench::load::LoadResult;
use serde_json::{Value, json};

use super::capacity::percentile;
use super::cpu::{Snapshot, Split};
use super::report::verdict;
use super::statements::{self, query};
use super::{ADMIN, Failure, create_users, fresh_database, progress, psql, spawn_genjobs_logging, submissions};

/// Items in one batch: the most the API takes.
const ITEMS: usize = 5_000;

/// Batches accepted one after another in the acceptance run.
const ACCEPTANCE_ROUNDS: usize = 5;
/// Clients submitting the same jobs one by one.
const SINGLE_CLIENTS: usize = 32;
/// Interactive jobs in each fairness run, one at a time.
const INTERACTIVE: usize = 20;
/// The pause between two interactive jobs.
const INTERACTIVE_SPACING: Duration = Duration::from_millis(300);
/// The batch owner's concurrency limit in the fairness run: the default a user gets.
const BATCH_OWNER_LIMIT: u64 = 8;
/// Items waiting in the waiting run.
const WAITING: usize = 100_000;
/// The waiting items' owner's concurrency limit.
const WAITING_LIMIT: u64 = 4;
/// How long the waiting items run with nothing else running, before the interactive load.
const QUIET_WAITING: Duration = Duration::from_secs(15);

/// What the four runs measured.
struct Measured {
    /// Each batch's acceptance, in the order they ran.
    acceptances: Vec<Duration>,
    /// The statements of accepting the batches, per batch, where profiled.
    acceptance_profile: Option<statements::Profile>,
    /// The CPU of all the acceptances: genjobs's, Postgres's.
    acceptance_cpu: Split,
    /// What Postgres alone takes to write one batch's rows.
    floor: Floor,
    /// The same number of jobs submitted one by one.
    singles: Duration,
    /// 5,000 items from `POST` to `completed`.
    throughput: Duration,
    /// The interactive user's waits in seconds, with no batch and behind one.
    alone: Vec<f64>,
    behind: Vec<f64>,
    /// The replica's resident memory before and with the items waiting, in KiB.
    rss_before: u64,
    rss_waiting: u64,
    /// A job's end → the next item's send, in seconds, with the items waiting: with nothing
    /// else running, and under the interactive submissions' load.
    freed_quiet: Vec<f64>,
    freed_loaded: Vec<f64>,
    /// Interactive submissions with none waiting, and with the items waiting.
    submissions_none: LoadResult,
    submissions_waiting: LoadResult,
}

/// A batch's body: `count` image items whose prompts carry `suffix` (simulator directives).
fn batch_body(count: usize, suffix: &str) -> Value {
    let items: Vec<Value> = (0..count)
        .map(|n| json!({"custom_id": format!("item-{n}"), "modality": "image", "body": {"prompt": format!("batch item {n} {suffix}")}}))
        .collect();
    json!({"items": items})
}

/// Submits a batch, and returns its id and how long its acceptance took.
async fn submit_batch(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    body: &Value,
) -> Result<(String, Duration), Failure> {
    let started = Instant::now();
    let response = client.post(format!("{base}/api/v1/batches")).bearer_auth(key).json(body).send().await?;
    let took = started.elapsed();
    let status = response.status();
    let batch: Value = response.json().await?;
    if status.as_u16() != 202 {
        return Err(format!("a batch was answered {status}: {batch}").into());
    }
    Ok((batch["id"].as_str().ok_or("no batch id")?.to_owned(), took))
}

/// Makes a user with `max_concurrent_jobs` and a key; returns (id, key).
async fn user_with_limit(base: &str, name: &str, limit: u64) -> Result<(String, String), Failure> {
    let user: Value = reqwest::Client::new()
        .post(format!("{base}/api/admin/users"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": name, "credits": 1_000_000_000_000_u64, "rate_limit_per_minute": 1_000_000_000,
                      "max_concurrent_jobs": limit}))
        .send()
        .await?
        .json()
        .await?;
    Ok((user["id"].as_str().ok_or("no user id")?.to_owned(), user["api_key"].as_str().ok_or("no key")?.to_owned()))
}

/// Submits `count` jobs one by one from `clients` clients at once, each job with a key of its
/// own user; how long they took.
async fn singles(base: &str, keys: &[String], count: usize, clients: usize) -> Result<Duration, Failure> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build()?;
    let started = Instant::now();
    let workers = (0..clients).map(|worker| {
        let (client, url, key) =
            (client.clone(), format!("{base}/api/v1/images/generations"), keys[worker % keys.len()].clone());
        tokio::spawn(async move {
            for n in (worker..count).step_by(clients) {
                let response = client
                    .post(&url)
                    .bearer_auth(&key)
                    .json(&json!({"prompt": format!("single {n} [sim:run=3600000]")}))
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                if response.status().as_u16() != 202 {
                    return Err(format!("a submission was answered {}", response.status()));
                }
            }
            Ok::<(), String>(())
        })
    });
    for done in futures_util::future::join_all(workers).await {
        done?.map_err(|e| format!("single submissions: {e}"))?;
    }
    Ok(started.elapsed())
}

/// Waits until the batch is `completed`, for at most ten minutes.
async fn until_completed(client: &reqwest::Client, base: &str, key: &str, id: &str) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let batch: Value =
            client.get(format!("{base}/api/v1/batches/{id}")).bearer_auth(key).send().await?.json().await?;
        if batch["state"] == "completed" {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the batch was not completed after ten minutes: {}", batch["counts"]).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Submits `INTERACTIVE` jobs one at a time for `user`, then waits until they are all sent;
/// their waits (accepted → sent) in seconds.
async fn interactive_waits(base: &str, url: &str, (user, key): &(String, String)) -> Result<Vec<f64>, Failure> {
    let client = reqwest::Client::new();
    for n in 0..INTERACTIVE {
        let response = client
            .post(format!("{base}/api/v1/images/generations"))
            .bearer_auth(key)
            .json(&json!({"prompt": format!("interactive {n} [sim:run=100]")}))
            .send()
            .await?;
        let status = response.status();
        if status.as_u16() != 202 {
            return Err(format!("an interactive job was answered {status}: {}", response.text().await?).into());
        }
        tokio::time::sleep(INTERACTIVE_SPACING).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let waits = query(
            url,
            &format!(
                "SELECT extract(epoch FROM sent_at - created_at) FROM jobs \
                 WHERE user_id = '{user}' AND sent_at IS NOT NULL ORDER BY created_at"
            ),
        )?;
        let waits: Vec<f64> = waits.lines().filter_map(|line| line.trim().parse().ok()).collect();
        if waits.len() >= INTERACTIVE {
            return Ok(waits);
        }
        if Instant::now() > deadline {
            return Err(format!("{} of {INTERACTIVE} interactive jobs sent after two minutes", waits.len()).into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Run 1: acceptance, batch against one by one.
async fn acceptance(bin: &Path, server: &str, sim: &str) -> Result<Acceptance, Failure> {
    progress(&format!("batches 1/4 {ACCEPTANCE_ROUNDS} batches of {ITEMS} items, then {ITEMS} single submissions"));
    let url = fresh_database(server, "genjobs_bench_batches")?;
    let app = spawn_genjobs_logging(bin, &[("DATABASE_URL", url.clone()), ("GENJOBS_UPSTREAM_URL", sim.to_owned())])?;
    // Items of a user limited to one job at a time: the acceptances are measured, not the sends.
    let (_, key) = user_with_limit(&app.base, "batch-owner", 1).await?;
    let client = reqwest::Client::new();
    let body = batch_body(ITEMS, "[sim:run=3600000]");
    let profiled = statements::available(&url)?;
    let mut acceptances = Vec::new();
    let mut profile = None;
    let mut last = String::new();
    let before = Snapshot::take(app.pid());
    for round in 0..ACCEPTANCE_ROUNDS {
        // The last round is profiled, once the others warmed the caches.
        let window =
            if profiled && round + 1 == ACCEPTANCE_ROUNDS { Some(statements::Window::open(&url)?) } else { None };
        let (id, took) = submit_batch(&client, &app.base, &key, &body).await?;
        acceptances.push(took);
        last = id;
        profile = window.map(|w| w.close(&url)).transpose()?;
    }
    let cpu = before.until(Snapshot::take(app.pid()));
    let floor = database_floor(&url, &last)?;
    let keys: Vec<String> = create_users(&app.base, SINGLE_CLIENTS).await?.into_iter().map(|(_, key)| key).collect();
    let singles = singles(&app.base, &keys, ITEMS, SINGLE_CLIENTS).await?;
    drop(app);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_batches WITH (FORCE)")?;
    Ok(Acceptance { rounds: acceptances, profile, cpu, floor, singles })
}

/// What the acceptance run measured.
struct Acceptance {
    rounds: Vec<Duration>,
    profile: Option<statements::Profile>,
    /// The CPU of all the rounds: genjobs's, Postgres's.
    cpu: Split,
    floor: Floor,
    singles: Duration,
}

/// What Postgres alone takes to write a batch's rows: the items of batch `batch` copied under
/// new ids into `jobs`, then a hold for each into `ledger`, each one `INSERT … SELECT` in a
/// transaction rolled back (milliseconds of execution, from `EXPLAIN ANALYZE`).
#[derive(Debug, Clone, Copy, Default)]
struct Floor {
    jobs_ms: f64,
    ledger_ms: f64,
    /// The indexes of `jobs`, partial ones included.
    job_indexes: u64,
}

fn database_floor(url: &str, batch: &str) -> Result<Floor, Failure> {
    let explained = query(
        url,
        &format!(
            "BEGIN; CREATE TEMP TABLE copied AS SELECT * FROM jobs WHERE batch_id = '{batch}'; \
             UPDATE copied SET id = gen_random_uuid(); \
             EXPLAIN (ANALYZE, TIMING OFF) INSERT INTO jobs SELECT * FROM copied; \
             EXPLAIN (ANALYZE, TIMING OFF) INSERT INTO ledger (user_id, job_id, kind, amount) \
               SELECT user_id, id, 'hold', credits_held FROM copied; \
             ROLLBACK;"
        ),
    )?;
    let times: Vec<f64> = explained
        .lines()
        .filter_map(|line| line.trim().strip_prefix("Execution Time: "))
        .filter_map(|rest| rest.trim_end_matches(" ms").parse().ok())
        .collect();
    match times[..] {
        [jobs_ms, ledger_ms] => {
            let job_indexes = query(url, "SELECT count(*) FROM pg_indexes WHERE tablename = 'jobs'")?.trim().parse()?;
            Ok(Floor { jobs_ms, ledger_ms, job_indexes })
        }
        _ => Err(format!("the database floor's plans had no two execution times: {explained}").into()),
    }
}

/// Run 2: one batch through to `completed`, jobs that end at once.
async fn throughput(bin: &Path, server: &str, sim: &str) -> Result<Duration, Failure> {
    progress(&format!("batches 2/4 one batch of {ITEMS} items through to completed"));
    let url = fresh_database(server, "genjobs_bench_batches")?;
    let app = spawn_genjobs_logging(bin, &[("DATABASE_URL", url.clone()), ("GENJOBS_UPSTREAM_URL", sim.to_owned())])?;
    let (_, key) = user_with_limit(&app.base, "batch-owner", 1_000_000).await?;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let (id, _) = submit_batch(&client, &app.base, &key, &batch_body(ITEMS, "[sim:run=0]")).await?;
    until_completed(&client, &app.base, &key, &id).await?;
    let took = started.elapsed();
    drop(app);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_batches WITH (FORCE)")?;
    Ok(took)
}

/// Run 3: an interactive user's waits on a capped key, with no batch and behind one.
async fn fairness(bin: &Path, server: &str, sim: &str) -> Result<(Vec<f64>, Vec<f64>), Failure> {
    progress("batches 3/4 an interactive user's waits on a key capped at 4, alone and behind a batch");
    let url = fresh_database(server, "genjobs_bench_batches")?;
    let app = spawn_genjobs_logging(
        bin,
        &[
            ("DATABASE_URL", url.clone()),
            ("GENJOBS_UPSTREAM_URL", sim.to_owned()),
            ("GENJOBS_UPSTREAM_KEY", "bench-batches-key-bbbb".to_owned()),
            ("GENJOBS_UPSTREAM_MAX_IN_FLIGHT", "4".to_owned()),
            ("GENJOBS_POLL_INTERVAL_MS", "50".to_owned()),
        ],
    )?;
    let alone_user = user_with_limit(&app.base, "interactive-alone", 1_000).await?;
    let behind_user = user_with_limit(&app.base, "interactive-behind", 1_000).await?;
    let (_, owner_key) = user_with_limit(&app.base, "batch-owner", BATCH_OWNER_LIMIT).await?;
    let alone = interactive_waits(&app.base, &url, &alone_user).await?;
    submit_batch(&reqwest::Client::new(), &app.base, &owner_key, &batch_body(ITEMS, "[sim:run=100]")).await?;
    // The batch's items fill the key's slots before the interactive jobs start.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let behind = interactive_waits(&app.base, &url, &behind_user).await?;
    drop(app);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_batches WITH (FORCE)")?;
    Ok((alone, behind))
}

/// What run 4 measured.
struct Waiting {
    rss_before: u64,
    rss_waiting: u64,
    freed_quiet: Vec<f64>,
    freed_loaded: Vec<f64>,
    none: LoadResult,
    waiting: LoadResult,
}

/// Run 4: `WAITING` items waiting for their owner's limit.
async fn waiting(bin: &Path, server: &str, sim: &str) -> Result<Waiting, Failure> {
    progress(&format!("batches 4/4 {WAITING} items waiting for their owner's limit of {WAITING_LIMIT}"));
    let url = fresh_database(server, "genjobs_bench_batches")?;
    let app = spawn_genjobs_logging(
        bin,
        &[
            ("DATABASE_URL", url.clone()),
            ("GENJOBS_UPSTREAM_URL", sim.to_owned()),
            ("GENJOBS_POLL_INTERVAL_MS", "50".to_owned()),
        ],
    )?;
    let keys = Arc::new(create_users(&app.base, 64).await?.into_iter().map(|(_, key)| key).collect::<Vec<_>>());
    let (owner, owner_key) = user_with_limit(&app.base, "batch-owner", WAITING_LIMIT).await?;
    let none = submissions(&app.base, keys.clone(), SINGLE_CLIENTS, 10).await;
    let rss_before = rss_kib(app.pid()).unwrap_or(0);
    let client = reqwest::Client::new();
    let body = batch_body(ITEMS, "[sim:run=100]");
    for _ in 0..WAITING / ITEMS {
        submit_batch(&client, &app.base, &owner_key, &body).await?;
    }
    let marked = query(&url, "SELECT now()")?.trim().to_owned();
    // Long enough for a few hundred items to pass through the owner's four slots.
    tokio::time::sleep(QUIET_WAITING).await;
    let rss_waiting = rss_kib(app.pid()).unwrap_or(0);
    let quiet_until = query(&url, "SELECT now()")?.trim().to_owned();
    let with_waiting = submissions(&app.base, keys, SINGLE_CLIENTS, 10).await;
    let loaded_until = query(&url, "SELECT now()")?.trim().to_owned();
    // The first sends after the batches' acceptance wait for the wakes the acceptances made; from
    // 2 s on, each send follows an end.
    let freed_to_sent = |from: &str, until: &str| -> Result<Vec<f64>, Failure> {
        let sql = format!(
            "WITH ended AS (SELECT finished_at FROM jobs WHERE user_id = '{owner}' AND finished_at IS NOT NULL) \
             SELECT extract(epoch FROM j.sent_at - (SELECT max(e.finished_at) FROM ended e WHERE e.finished_at <= j.sent_at)) \
             FROM jobs j WHERE j.user_id = '{owner}' AND j.sent_at > '{from}'::timestamptz AND j.sent_at <= '{until}'::timestamptz \
             AND EXISTS (SELECT 1 FROM ended e WHERE e.finished_at <= j.sent_at)"
        );
        Ok(query(&url, &sql)?.lines().filter_map(|line| line.trim().parse().ok()).collect())
    };
    let settled = query(&url, &format!("SELECT '{marked}'::timestamptz + interval '2 s'"))?.trim().to_owned();
    let freed_quiet = freed_to_sent(&settled, &quiet_until)?;
    let freed_loaded = freed_to_sent(&quiet_until, &loaded_until)?;
    drop(app);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_batches WITH (FORCE)")?;
    Ok(Waiting { rss_before, rss_waiting, freed_quiet, freed_loaded, none, waiting: with_waiting })
}

/// Runs the four runs on the server of `server` against the simulator at `sim`, writes
/// `docs/benchmarks-batches.md`, and answers its table.
pub(super) async fn run(bin: &Path, server: &str, sim: &str) -> Result<String, Failure> {
    let Acceptance { rounds: acceptances, profile: acceptance_profile, cpu: acceptance_cpu, floor, singles } =
        acceptance(bin, server, sim).await?;
    let throughput = throughput(bin, server, sim).await?;
    let (alone, behind) = fairness(bin, server, sim).await?;
    let waiting = waiting(bin, server, sim).await?;
    let measured = Measured {
        acceptances,
        acceptance_profile,
        acceptance_cpu,
        floor,
        singles,
        throughput,
        alone,
        behind,
        rss_before: waiting.rss_before,
        rss_waiting: waiting.rss_waiting,
        freed_quiet: waiting.freed_quiet,
        freed_loaded: waiting.freed_loaded,
        submissions_none: waiting.none,
        submissions_waiting: waiting.waiting,
    };
    let table = table(&measured);
    write(Path::new("docs/benchmarks-batches.md"), &measured, &table)?;
    progress("wrote docs/benchmarks-batches.md");
    Ok(table)
}

fn seconds(values: &[Duration]) -> Vec<f64> {
    values.iter().map(Duration::as_secs_f64).collect()
}

/// The table of what was measured, against the targets, and the acceptances one by one.
fn table(m: &Measured) -> String {
    let accepted = seconds(&m.acceptances);
    let (median, slowest) = (percentile(&accepted, 0.5), percentile(&accepted, 1.0));
    let speedup = m.singles.as_secs_f64() / median.max(f64::EPSILON);
    let added_per_item = 1024.0 * m.rss_waiting.saturating_sub(m.rss_before) as f64 / WAITING as f64;
    let (freed_p50, freed_p99) = (percentile(&m.freed_quiet, 0.5), percentile(&m.freed_quiet, 0.99));
    let p99_ratio = m.submissions_waiting.p99_ms / m.submissions_none.p99_ms.max(f64::EPSILON);
    let mut doc = String::from("| what | figure | target | |\n|---|---|---|---|\n");
    let _ = writeln!(
        doc,
        "| a batch of {ITEMS} items accepted (`POST /api/v1/batches`, {ACCEPTANCE_ROUNDS} one after another: median, slowest) | {:.0} ms, {:.0} ms | under 1 s | {} |",
        median * 1000.0,
        slowest * 1000.0,
        verdict(slowest < 1.0)
    );
    let _ = writeln!(
        doc,
        "| the same {ITEMS} jobs submitted one by one ({SINGLE_CLIENTS} clients at once) | {:.0} ms: the batch is {speedup:.1} times faster | 10 times | {} |",
        m.singles.as_secs_f64() * 1000.0,
        verdict(speedup >= 10.0)
    );
    let rounds = ACCEPTANCE_ROUNDS as f64;
    let _ = writeln!(
        doc,
        "| where an acceptance's time goes: CPU per acceptance (mean of the {ACCEPTANCE_ROUNDS}; Postgres's holds its background writers); Postgres alone writing the same {ITEMS} jobs and their {ITEMS} holds (`INSERT … SELECT` of the last batch's rows, rolled back; `jobs` has {} indexes, partial ones included, and a foreign key) | genjobs {:.0} ms, Postgres {:.0} ms; the rows alone {:.0} ms (jobs {:.0}, holds {:.0}) | 10 times the single submissions needs the whole acceptance within {:.0} ms | |",
        m.floor.job_indexes,
        m.acceptance_cpu.server_ms / rounds,
        m.acceptance_cpu.postgres_ms / rounds,
        m.floor.jobs_ms + m.floor.ledger_ms,
        m.floor.jobs_ms,
        m.floor.ledger_ms,
        m.singles.as_secs_f64() * 100.0,
    );
    let _ = writeln!(
        doc,
        "| {ITEMS} items from `POST` to `completed` (jobs that end at once) | {:.1} s: {:.0} items/s | none set | |",
        m.throughput.as_secs_f64(),
        ITEMS as f64 / m.throughput.as_secs_f64().max(f64::EPSILON)
    );
    let _ = writeln!(
        doc,
        "| an interactive user's wait, accepted → sent, on a key capped at 4 ({INTERACTIVE} jobs one at a time): median with no batch / behind a batch of {ITEMS} (its owner at the default limit of {BATCH_OWNER_LIMIT}) | {:.0} ms / {:.0} ms (p99 {:.0} / {:.0} ms) | none set | |",
        percentile(&m.alone, 0.5) * 1000.0,
        percentile(&m.behind, 0.5) * 1000.0,
        percentile(&m.alone, 0.99) * 1000.0,
        percentile(&m.behind, 0.99) * 1000.0
    );
    let _ = writeln!(
        doc,
        "| memory {WAITING} waiting items add to the replica (resident, before → with them waiting) | {} → {} KiB: {added_per_item:.0} bytes an item | at most 1 KiB an item | {} |",
        m.rss_before,
        m.rss_waiting,
        verdict(added_per_item <= 1024.0)
    );
    let _ = writeln!(
        doc,
        "| a freed slot → the next item sent, with {WAITING} waiting and nothing else running ({} sends in {} s): p50, p99 | {:.0} ms, {:.0} ms | within 100 ms | {} |",
        m.freed_quiet.len(),
        QUIET_WAITING.as_secs() - 2,
        freed_p50 * 1000.0,
        freed_p99 * 1000.0,
        verdict(!m.freed_quiet.is_empty() && freed_p99 <= 0.1)
    );
    let _ = writeln!(
        doc,
        "| the same while the interactive submissions below load the machine ({} sends): p50, p99 | {:.0} ms, {:.0} ms | none set | |",
        m.freed_loaded.len(),
        percentile(&m.freed_loaded, 0.5) * 1000.0,
        percentile(&m.freed_loaded, 0.99) * 1000.0,
    );
    let _ = writeln!(
        doc,
        "| interactive submissions ({SINGLE_CLIENTS} clients, 10 s): p99 with none waiting / with {WAITING} waiting | {:.1} / {:.1} ms ({:.0} / {:.0} per second): {p99_ratio:.2} times | at most 1.5 times | {} |",
        m.submissions_none.p99_ms,
        m.submissions_waiting.p99_ms,
        m.submissions_none.per_sec,
        m.submissions_waiting.per_sec,
        verdict(p99_ratio <= 1.5)
    );
    let _ = writeln!(
        doc,
        "\nAcceptances one after another: {}.",
        accepted.iter().map(|s| format!("{:.0} ms", s * 1000.0)).collect::<Vec<_>>().join(", ")
    );
    doc
}

fn write(path: &Path, m: &Measured, table: &str) -> std::io::Result<()> {
    let mut doc = String::from(
        "# Batches\n\nWritten by `genjobs-bench batches` (`just bench-ceilings` runs it after the ceilings): a release \
         build on Postgres against the simulator, each run on a database and a genjobs of its own with its \
         default settings, its log level included, all figures from one run. The fairness and waiting runs \
         poll the simulator every 50 ms (`GENJOBS_POLL_INTERVAL_MS=50`), so that jobs of 100 ms end often enough \
         to measure what follows an end, and the fairness run caps its fal key at 4 jobs in flight.\n\n",
    );
    doc.push_str(table);
    match &m.acceptance_profile {
        Some(profile) => {
            let _ = writeln!(
                doc,
                "\n## The statements of one acceptance\n\nThe last batch's acceptance, from `pg_stat_statements`: {} statements in all, {} commits, {:.1} ms of statement time; per item:\n",
                profile.calls, profile.commits, profile.total_ms
            );
            doc.push_str(&statements::table(profile));
        }
        None => doc.push_str(
            "\nThe statements were not counted: this Postgres server does not load `pg_stat_statements` (`just bench` runs this on a cluster that does).\n",
        ),
    }
    std::fs::write(path, doc)
}
