//! `genjobs-bench usage`: usage reports over 10 million jobs. The jobs and their ledger rows are
//! generated in SQL with `generate_series` (not through the API) over 60 days and 1,000 users;
//! then one user's usage over 30 days, the operators' usage by user over one day and by each
//! grouping over 30 days, and the reconciliation over 30 days are read through the API once
//! genjobs has sealed every hour that can be, and submissions are measured on
//! the full database against the same closed loop on an empty one, in alternated runs of the same
//! run. Writes `docs/benchmarks-usage.md`, with the plans Postgres chose (`EXPLAIN (ANALYZE,
//! BUFFERS)`).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use genjobs_bench::load::{LoadResult, closed_loop};
use genjobs_domain::ports::{SEAL_AFTER, UsageGrouping, hour_start};
use genjobs_store_postgres::{LIVE_FLOOR, reconciliation_statement, usage_statement};

use super::report::verdict;
use super::{ADMIN, Failure, create_users, env_number, fresh_database, progress, psql, spawn_genjobs, submissions};

const GENERATED_USERS: u64 = 999;

/// What the run measured.
struct UsageAtScale {
    jobs: u64,
    ledger_rows: u64,
    generate: Duration,
    seal: Duration,
    sealed_days: u64,
    /// The first instant not sealed, when the reports were read.
    sealed_before: String,
    /// When the reports were read (UTC), and how many jobs created since the last seal they read.
    reports_at: String,
    live_jobs: u64,
    database_size: String,
    /// One run a round, in the order they ran (each round: empty, then full).
    empty_submissions: Vec<LoadResult>,
    full_submissions: Vec<LoadResult>,
    user_usage: LoadResult,
    admin_usage: LoadResult,
    /// The operators' usage over 30 days, by each `group_by`.
    admin_usage_by: Vec<(&'static str, LoadResult)>,
    reconciliation: LoadResult,
    user_plan: String,
    admin_plan: String,
    reconciliation_plan: String,
}

/// Generates `jobs` final jobs (90 % succeeded at 4 credits, 5 % failed, 5 % canceled) over the
/// last 60 days for the generated users and `owner` (every 1,000th job is the owner's), each
/// with its hold and its settle or release in the ledger, and the accounts to match; each was
/// sent to fal on one of three keys at $0.039 an image, with its bill.
fn generate(url: &str, jobs: u64, owner: &str) -> Result<(), Failure> {
    let sql = format!(
        "SET synchronous_commit = off;
        INSERT INTO users (id, name, credits_available, credits_held, credits_spent, credits_granted,
                           rate_limit_per_minute, max_concurrent_jobs, active_jobs)
        SELECT gen_random_uuid(), 'generated' || n, 1000000000000, 0, 0, 1000000000000, 1000000, 1000000, 0
        FROM generate_series(1, {GENERATED_USERS}) AS n;
        INSERT INTO ledger (user_id, kind, amount) SELECT id, 'grant', credits_granted FROM users WHERE name LIKE 'generated%';
        CREATE TEMP TABLE owners AS
            SELECT row_number() OVER (ORDER BY name) - 1 AS slot, id FROM users WHERE name LIKE 'generated%'
            UNION ALL SELECT {GENERATED_USERS}, '{owner}'::uuid;
        CREATE TEMP TABLE generated AS
            SELECT gen_random_uuid() AS id, o.id AS user_id,
                (ARRAY['nano-banana', 'flux-pro', 'seedance-2.0-fast', 'kling-2.1-master', 'veo-3-fast'])[1 + n % 5] AS model,
                CASE WHEN n % 20 = 0 THEN 'failed' WHEN n % 20 = 1 THEN 'canceled' ELSE 'succeeded' END AS state,
                now() - interval '60 days' * (n::float8 / {jobs}) AS created_at
            FROM generate_series(0, {jobs} - 1) AS n JOIN owners o ON o.slot = n % 1000;
        INSERT INTO jobs (id, user_id, model, modality, state, progress, outputs, error, created_at, started_at,
                          finished_at, canceled_at, credits_held, credits_actual, input, upstream, submit_attempted,
                          next_poll_at, poll_failures, version, rate_per, rate_credits, billing, provider_units,
                          units_charged, provider_cost)
        SELECT id, user_id, model, 'image', state, CASE WHEN state = 'succeeded' THEN 100 ELSE 0 END,
            NULL, NULL, created_at, created_at + interval '2 s', created_at + interval '10 s',
            CASE WHEN state = 'canceled' THEN created_at + interval '10 s' END,
            4, CASE WHEN state = 'succeeded' THEN 4 ELSE 0 END, '{{\"generated\": true}}',
            jsonb_build_object('provider', 'fal', 'id', id::text), true, NULL, 0, 3, 'image', 4,
            jsonb_build_object('per', 'image', 'usd', '0.039', 'key_hint', (ARRAY['k1a2', 'k3b4', 'k5c6'])[1 + abs(hashtext(id::text)) % 3]),
            CASE WHEN state = 'succeeded' THEN 1000000000 ELSE 0 END,
            CASE WHEN state = 'succeeded' THEN 1000000000 ELSE 0 END,
            CASE WHEN state = 'succeeded' THEN 39000000 ELSE 0 END
        FROM generated;
        INSERT INTO ledger (user_id, job_id, kind, amount, created_at)
        SELECT user_id, id, 'hold', 4, created_at FROM generated;
        INSERT INTO ledger (user_id, job_id, kind, amount, released, created_at)
        SELECT user_id, id, CASE WHEN state = 'succeeded' THEN 'settle' ELSE 'release' END,
            4, 0, created_at + interval '10 s' FROM generated;
        UPDATE users u SET credits_spent = u.credits_spent + s.spent, credits_available = u.credits_available - s.spent
        FROM (SELECT user_id, sum(CASE WHEN state = 'succeeded' THEN 4 ELSE 0 END) AS spent FROM generated GROUP BY user_id) s
        WHERE u.id = s.user_id;"
    );
    psql(url, &sql)?;
    // Outside the statement above: VACUUM runs in no transaction block.
    psql(url, "VACUUM ANALYZE")
}

/// Waits until every job of `url` is final, so that a measurement does not also drive the jobs
/// of the one before it.
pub(super) async fn settle(url: &str) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(300);
    while count(url, "SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded', 'failed', 'canceled')")? != "0" {
        if Instant::now() > deadline {
            return Err("jobs still unfinished after 300 s".into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// Writes every dirty page out (Postgres's, then the kernel's), so that the bulk load's
/// write-back does not compete with the measurement that follows it.
pub(super) fn flush(url: &str) -> Result<(), Failure> {
    psql(url, "CHECKPOINT")?;
    Command::new("sync").status()?;
    Ok(())
}

/// Submission runs on each database, alternated, so that the drift of this shared machine falls
/// on both alike.
const SUBMISSION_ROUNDS: usize = 3;

/// One closed loop of submissions by `keys` to a genjobs started on `url` for the run; it returns
/// once every job it accepted is final, with every dirty page written out before it started.
async fn submission_run(
    bin: &Path,
    envs: &[(&str, String)],
    url: &str,
    keys: &Arc<Vec<String>>,
    clients: usize,
    seconds: u64,
) -> Result<LoadResult, Failure> {
    flush(url)?;
    let app = spawn_genjobs(bin, envs)?;
    let measured = submissions(&app.base, Arc::clone(keys), clients, seconds).await;
    settle(url).await?;
    drop(app);
    Ok(measured)
}

/// Waits until genjobs has sealed every hour before `through` (it seals at start and then every
/// few minutes), so that reports read those hours from the rollup; how long it took and how many
/// days the rollup counts.
async fn sealed(url: &str, through: time::OffsetDateTime) -> Result<(Duration, u64), Failure> {
    let started = Instant::now();
    let query = format!("SELECT count(*) FROM usage_sealed WHERE sealed_before >= '{through}'");
    while count(url, &query)? != "1" {
        if started.elapsed() > Duration::from_secs(600) {
            return Err(format!("hours before {through} not sealed after 600 s").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let days = count(url, "SELECT count(DISTINCT day) FROM usage_rollup")?.parse().unwrap_or(0);
    Ok((started.elapsed(), days))
}

pub(super) fn count(url: &str, sql: &str) -> Result<String, Failure> {
    let out = Command::new("psql").args([url, "-qtAc", sql]).stderr(Stdio::inherit()).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The live floor a report over `[from, …)` binds, as the store computes it.
fn floor(url: &str, from: &str) -> Result<String, Failure> {
    match count(url, LIVE_FLOOR)?.as_str() {
        "" => Ok(format!("'{from}'::timestamptz")),
        sealed => Ok(format!("greatest('{from}'::timestamptz, '{sealed}'::timestamptz)")),
    }
}

/// The plan of the reconciliation's statement over `[from, to)`, every provider.
fn reconciliation_plan(url: &str, from: &str, to: &str) -> Result<String, Failure> {
    let statement = reconciliation_statement()
        .replace("$1", &format!("'{from}'::timestamptz"))
        .replace("$2", &format!("'{to}'::timestamptz"))
        .replace("$3", "NULL")
        .replace("$4", &floor(url, from)?);
    count(url, &format!("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {statement}"))
}

/// The plan of a usage report's statement over `[from, to)`, for `user` when given.
fn plan(url: &str, group_by: UsageGrouping, from: &str, to: &str, user: Option<&str>) -> Result<String, Failure> {
    let (user_parameter, floor_parameter) = if user.is_some() { ("$3", "$4") } else { ("$4", "$3") };
    let statement = usage_statement(group_by, user.is_some(), false)
        .replace("$1", &format!("'{from}'::timestamptz"))
        .replace("$2", &format!("'{to}'::timestamptz"))
        .replace(floor_parameter, &floor(url, from)?)
        .replace(user_parameter, &user.map(|u| format!("'{u}'::uuid")).unwrap_or_default());
    count(url, &format!("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {statement}"))
}

/// Every `group_by` of the operators' usage report, each read over 30 days.
const ADMIN_GROUPINGS: [&str; 7] = ["user", "model", "day", "day,model", "provider", "key", "provider_key"];

async fn reads(url: String, token: String, clients: usize, seconds: u64) -> LoadResult {
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap_or_default();
    closed_loop(clients, Duration::from_secs(seconds), move |_, _| {
        let request = client.get(&url).bearer_auth(&token);
        async move { request.send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await
}

/// Runs the scenario and writes `docs/benchmarks-usage.md`.
pub(super) async fn run(bin: &Path, server: &str, sim: &str) -> Result<(), Failure> {
    let jobs = env_number("BENCH_USAGE_JOBS", 10_000_000);
    let (seconds, clients) = (env_number("BENCH_SECONDS", 10), env_number("BENCH_CLIENTS", 32) as usize);
    let url = fresh_database(server, "genjobs_bench_usage")?;
    let envs = [
        ("DATABASE_URL", url.clone()),
        ("GENJOBS_UPSTREAM_URL", sim.to_owned()),
        ("GENJOBS_DB_POOL_SIZE", clients.to_string()),
    ];

    progress("usage 1/4 users");
    let app = spawn_genjobs(bin, &envs)?;
    let users = create_users(&app.base, 65).await?;
    let (owner, owner_key) = users[64].clone();
    let keys = Arc::new(users[..64].iter().map(|(_, k)| k.clone()).collect::<Vec<_>>());
    drop(app);

    progress(&format!("usage 2/4 generating {jobs} jobs and their ledger in SQL"));
    let started = Instant::now();
    generate(&url, jobs, &owner)?;
    let generate_time = started.elapsed();

    let today = time::OffsetDateTime::now_utc().date();
    let yesterday = today - time::Duration::days(1);
    let through = hour_start(time::OffsetDateTime::now_utc() - SEAL_AFTER);
    progress(&format!("usage 3/4 sealing every hour before {through}, then usage reports over the full database"));
    let app = spawn_genjobs(bin, &envs)?;
    let (seal, sealed_days) = sealed(&url, through).await?;
    // The rollup rows the seals updated (today's, an hour at a time), cleaned as autovacuum
    // would, which the main cluster of this machine runs without.
    psql(&url, "VACUUM ANALYZE usage_rollup, usage_key_rollup")?;
    // Before the submissions below: their jobs, thousands a minute, would be the reports' live
    // hour, where the generated data has about 7,000 jobs an hour.
    let now = time::OffsetDateTime::now_utc();
    let reports_at = format!("{:02}:{:02}", now.hour(), now.minute());
    let sealed_before = count(&url, "SELECT sealed_before FROM usage_sealed")?;
    let live_jobs = "SELECT count(*) FROM jobs WHERE created_at >= (SELECT sealed_before FROM usage_sealed)";
    let live_jobs = count(&url, live_jobs)?.parse().unwrap_or(0);
    let (from, to) = (today - time::Duration::days(29), today);
    let user_url = format!("{}/api/v1/account/usage?from={from}&to={to}&group_by=day", app.base);
    let admin_url = format!("{}/api/admin/usage?from={yesterday}&to={yesterday}&group_by=user", app.base);
    let reconciliation_url = format!("{}/api/admin/reconciliation?from={from}&to={to}", app.base);
    let user_usage = reads(user_url, owner_key, 8, seconds).await;
    let admin_usage = reads(admin_url, ADMIN.to_owned(), 8, seconds).await;
    let mut admin_usage_by = Vec::new();
    for group_by in ADMIN_GROUPINGS {
        let url = format!("{}/api/admin/usage?from={from}&to={to}&group_by={group_by}", app.base);
        admin_usage_by.push((group_by, reads(url, ADMIN.to_owned(), 8, seconds).await));
    }
    let reconciliation = reads(reconciliation_url, ADMIN.to_owned(), 8, seconds).await;
    drop(app);
    let day_after = (to + time::Duration::days(1)).to_string();
    let reconciliation_plan = reconciliation_plan(&url, &from.to_string(), &day_after)?;
    let user_plan = plan(&url, UsageGrouping::Day, &from.to_string(), &day_after, Some(&owner))?;
    let admin_plan = plan(&url, UsageGrouping::User, &yesterday.to_string(), &today.to_string(), None)?;

    progress("usage 4/4 submissions, empty and full database in turn");
    let empty_url = fresh_database(server, "genjobs_bench_usage_empty")?;
    let empty_envs = [("DATABASE_URL", empty_url.clone()), envs[1].clone(), envs[2].clone()];
    let app = spawn_genjobs(bin, &empty_envs)?;
    let empty_keys = Arc::new(create_users(&app.base, 64).await?.into_iter().map(|(_, k)| k).collect::<Vec<_>>());
    drop(app);
    let (mut empty_submissions, mut full_submissions) = (Vec::new(), Vec::new());
    for _ in 0..SUBMISSION_ROUNDS {
        empty_submissions.push(submission_run(bin, &empty_envs, &empty_url, &empty_keys, clients, seconds).await?);
        full_submissions.push(submission_run(bin, &envs, &url, &keys, clients, seconds).await?);
    }
    let measured = UsageAtScale {
        jobs: count(&url, "SELECT count(*) FROM jobs")?.parse().unwrap_or(0),
        ledger_rows: count(&url, "SELECT count(*) FROM ledger")?.parse().unwrap_or(0),
        generate: generate_time,
        seal,
        sealed_days,
        sealed_before,
        reports_at,
        live_jobs,
        database_size: count(&url, "SELECT pg_size_pretty(pg_database_size(current_database()))")?,
        empty_submissions,
        full_submissions,
        user_usage,
        admin_usage,
        admin_usage_by,
        reconciliation,
        reconciliation_plan,
        user_plan,
        admin_plan,
    };
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_usage WITH (FORCE)")?;
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_usage_empty WITH (FORCE)")?;
    write(Path::new("docs/benchmarks-usage.md"), &measured)?;
    progress("wrote docs/benchmarks-usage.md");
    Ok(())
}

fn write(path: &Path, m: &UsageAtScale) -> std::io::Result<()> {
    let total = |runs: &[LoadResult]| runs.iter().map(|run| run.per_sec).sum::<f64>();
    let ratio = total(&m.full_submissions) / total(&m.empty_submissions).max(f64::EPSILON);
    let median = |runs: &[LoadResult], of: fn(&LoadResult) -> f64| {
        let mut values: Vec<f64> = runs.iter().map(of).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or_default()
    };
    let mut doc = String::from(
        "# Usage reports at 10 million jobs\n\nWritten by `genjobs-bench usage` (`just bench` runs it after the main \
         benchmarks). The jobs and their ledger rows are generated in SQL with `generate_series`, not through the \
         API; the reports and submissions go through the API of a release build on this machine, all figures from \
         one run.\n\n",
    );
    let _ = writeln!(
        doc,
        "Data: {} jobs over 60 days and 1,000 users, {} ledger rows, {} on disk; generated in {:.0} s. genjobs sealed \
         every whole hour before {} into the usage rollup ({} days) in {:.1} s after it started (an hour is sealed \
         once it has been over for 15 minutes and all its jobs are final; reports read sealed hours from the rollup \
         alone). The reports ran at {} UTC, before the submissions, when they read {} jobs created since the last \
         seal from the jobs themselves.\n",
        m.jobs,
        m.ledger_rows,
        m.database_size,
        m.generate.as_secs_f64(),
        m.sealed_before,
        m.sealed_days,
        m.seal.as_secs_f64(),
        m.reports_at,
        m.live_jobs
    );
    doc.push_str("| what | p50 | p99 | per second | target | |\n|---|---|---|---|---|---|\n");
    let targeted = [
        ("one user's usage over 30 days, by day (8 clients)", &m.user_usage),
        ("admin usage by user over one day (8 clients)", &m.admin_usage),
    ];
    for (what, load) in targeted {
        let _ = writeln!(
            doc,
            "| {what} | {:.1} ms | {:.1} ms | {:.0} ({} errors) | p99 ≤ 50 ms | {} |",
            load.p50_ms,
            load.p99_ms,
            load.per_sec,
            load.errors,
            verdict(load.p99_ms <= 50.0 && load.errors == 0)
        );
    }
    let by_grouping = m.admin_usage_by.iter().map(|(group_by, load)| {
        (format!("admin usage by `{group_by}` over 30 days, with cost and margin (8 clients)"), load)
    });
    let reconciliation = ("reconciliation over 30 days, every provider (8 clients)".to_owned(), &m.reconciliation);
    for (what, load) in by_grouping.chain([reconciliation]) {
        let _ = writeln!(
            doc,
            "| {what} | {:.1} ms | {:.1} ms | {:.0} ({} errors) | none set | |",
            load.p50_ms, load.p99_ms, load.per_sec, load.errors
        );
    }
    let _ = writeln!(
        doc,
        "| submissions on the full database, against an empty one (same closed loop, {} runs each, alternated; medians) | {:.1} / {:.1} ms | {:.1} / {:.1} ms | {:.0} / {:.0}: ratio {ratio:.2} | within 10 % (≥ 0.90) | {} |",
        m.full_submissions.len(),
        median(&m.full_submissions, |r| r.p50_ms),
        median(&m.empty_submissions, |r| r.p50_ms),
        median(&m.full_submissions, |r| r.p99_ms),
        median(&m.empty_submissions, |r| r.p99_ms),
        total(&m.full_submissions) / m.full_submissions.len().max(1) as f64,
        total(&m.empty_submissions) / m.empty_submissions.len().max(1) as f64,
        verdict(ratio >= 0.9)
    );
    let runs: Vec<String> = m
        .empty_submissions
        .iter()
        .zip(&m.full_submissions)
        .map(|(empty, full)| format!("{:.0} / {:.0}", empty.per_sec, full.per_sec))
        .collect();
    let _ = writeln!(
        doc,
        "\nSubmissions per second, empty / full, run by run: {}. Before each run every earlier job was final and \
         every dirty page written out; each run had a genjobs of its own.",
        runs.join("; ")
    );
    let _ = write!(
        doc,
        "\n## Plans\n\nOne user's usage over 30 days: the sealed hours from the rollup (index \
         `usage_rollup_user_id_day`), the jobs created since the last seal from the index `jobs_user_id_created_at`:\
         \n\n```\n{}\n```\n\n\
         Admin usage by user over one sealed day: the rollup alone (its primary key); the jobs' index `jobs_created_at` \
         is searched from the first instant not sealed, so it finds none:\n\n```\n{}\n```\n\n\
         The reconciliation over 30 days: the sealed hours' bills from the rollup per provider key \
         (`usage_key_rollup`), the jobs created since the last seal from `jobs_created_at`:\n\n\
         ```\n{}\n```\n",
        m.user_plan, m.admin_plan, m.reconciliation_plan
    );
    std::fs::write(path, doc)
}
