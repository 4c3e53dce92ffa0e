//! `genjobs-bench admin-jobs`: the operators' job listing over 10 million jobs
//! (`BENCH_ADMIN_JOBS`). The jobs are generated in SQL with `generate_series` over 60 days and
//! 1,000 users, ids time-ordered as the service makes them, in every state, at two providers and
//! five models; then the first page of each filter is read through the API by a few clients for
//! `BENCH_SECONDS`, and its p99 set against 50 ms. Writes `docs/benchmarks-admin-jobs.md`, with
//! the plan Postgres chose for each filter (`EXPLAIN (ANALYZE, BUFFERS)`).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use genjobs_bench::load::{LoadResult, closed_loop};

use super::report::verdict;
use super::{ADMIN, Failure, create_users, env_number, fresh_database, progress, psql, spawn_genjobs};

/// Clients reading each filter's first page at once.
const CLIENTS: usize = 4;

/// The first page of each filter measured: what it is, its query, and its statement's `WHERE`
/// (as the search spells it) for the plan; `{owner}` is the user every 1,000th job belongs to.
const FILTERS: [(&str, &str, &str); 8] = [
    ("no filter", "", "true"),
    ("one user (0.1 % of the jobs)", "user_id={owner}", "user_id = '{owner}'"),
    ("state failed (5 %)", "state=failed", "state = 'failed'"),
    ("state running (0.1 %)", "state=running", "state = 'running'"),
    ("model veo-3-fast (20 %)", "model=veo-3-fast", "model = 'veo-3-fast'"),
    ("provider replicate (9 %)", "upstream=replicate", "(jobs.upstream ->> 'provider') = 'replicate'"),
    ("one user's failed jobs", "user_id={owner}&state=failed", "user_id = '{owner}' AND state = 'failed'"),
    (
        "a model at a provider",
        "model=flux-pro&upstream=fal",
        "model = 'flux-pro' AND (jobs.upstream ->> 'provider') = 'fal'",
    ),
];

/// Generates `jobs` jobs over the last 60 days for 999 generated users and `owner` (every
/// 1,000th job is the owner's): 90 % succeeded, 5 % failed, about 4 % canceled, 0.1 % running and
/// 0.1 % queued (their next poll a month ahead, so that no driver takes them); every job but the
/// canceled ones at a provider (`replicate` one in ten, else `fal`). Each row reads back as a job.
fn generate(url: &str, jobs: u64, owner: &str) -> Result<(), Failure> {
    let sql = format!(
        "SET synchronous_commit = off;
        INSERT INTO users (id, name, credits_available, credits_held, credits_spent, credits_granted,
                           rate_limit_per_minute, max_concurrent_jobs, active_jobs)
        SELECT gen_random_uuid(), 'generated' || n, 1000000, 0, 0, 1000000, 1000, 1000, 0
        FROM generate_series(1, 999) AS n;
        CREATE TEMP TABLE owners AS
            SELECT row_number() OVER (ORDER BY name) - 1 AS slot, id FROM users WHERE name LIKE 'generated%'
            UNION ALL SELECT 999, '{owner}'::uuid;
        CREATE TEMP TABLE generated AS
            SELECT n, o.id AS user_id,
                (ARRAY['nano-banana', 'flux-pro', 'seedance-2.0-fast', 'kling-2.1-master', 'veo-3-fast'])[1 + n % 5] AS model,
                CASE WHEN n % 1000 = 7 THEN 'running' WHEN n % 1000 = 11 THEN 'queued' WHEN n % 20 = 3 THEN 'failed'
                     WHEN n % 25 = 4 THEN 'canceled' ELSE 'succeeded' END AS state,
                CASE WHEN n % 10 = 9 THEN 'replicate' ELSE 'fal' END AS provider,
                now() - interval '60 days' + interval '60 days' * (n::float8 / {jobs}) AS created_at
            FROM generate_series(0, {jobs} - 1) AS n JOIN owners o ON o.slot = n % 1000;
        INSERT INTO jobs (id, user_id, model, modality, state, progress, outputs, error, created_at, started_at,
                          finished_at, canceled_at, credits_held, credits_actual, input, upstream, upstream_key,
                          submit_attempted, next_poll_at, poll_failures, version, rate_per, rate_credits, request)
        SELECT (lpad(to_hex((extract(epoch FROM created_at) * 1000)::bigint), 12, '0') || '7'
                || substr(md5(n::text), 1, 3) || '8' || substr(md5(n::text), 4, 15))::uuid,
            user_id, model, 'image', state,
            CASE state WHEN 'succeeded' THEN 100 WHEN 'running' THEN 40 ELSE 0 END,
            CASE WHEN state = 'succeeded' THEN '[{{\"url\": \"https://cdn.example/x.png\", \"type\": \"image\",
                \"meta\": {{\"content_type\": \"image/png\"}}}}]'::jsonb END,
            CASE state WHEN 'failed' THEN '{{\"type\": \"upstream_error\", \"code\": \"UPSTREAM_FAILED\", \"message\": \"x\"}}'::jsonb
                       WHEN 'canceled' THEN '{{\"type\": \"canceled\", \"code\": \"JOB_CANCELED\", \"message\": \"x\"}}'::jsonb END,
            created_at,
            CASE WHEN state IN ('succeeded', 'running') THEN created_at + interval '2 s' END,
            CASE WHEN state IN ('succeeded', 'failed') THEN created_at + interval '10 s' END,
            CASE WHEN state = 'canceled' THEN created_at + interval '1 s' END,
            4, CASE state WHEN 'succeeded' THEN 4 WHEN 'failed' THEN 0 WHEN 'canceled' THEN 0 END,
            '{{\"prompt\": \"bench\", \"aspect_ratio\": \"1:1\"}}',
            CASE WHEN state <> 'canceled' THEN jsonb_build_object('provider', provider, 'id', 'r' || n) END,
            CASE WHEN state <> 'canceled' THEN 'r' || n END,
            state <> 'canceled',
            CASE WHEN state IN ('running', 'queued') THEN now() + interval '30 days' END,
            0, 3, 'image', 4, '{{\"prompt\": \"bench\"}}'
        FROM generated;"
    );
    psql(url, &sql)?;
    // Outside the statement above: VACUUM runs in no transaction block.
    psql(url, "VACUUM ANALYZE")
}

fn query(url: &str, sql: &str) -> Result<String, Failure> {
    let out = Command::new("psql").args([url, "-qtAc", sql]).stderr(Stdio::inherit()).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

async fn first_pages(url: String, clients: usize, seconds: u64) -> LoadResult {
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap_or_default();
    closed_loop(clients, Duration::from_secs(seconds), move |_, _| {
        let request = client.get(&url).bearer_auth(ADMIN);
        async move { request.send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await
}

/// One filter's first page as measured.
struct Measured {
    what: &'static str,
    query: String,
    load: LoadResult,
    plan: String,
}

/// Runs the scenario and writes `docs/benchmarks-admin-jobs.md`.
pub(super) async fn run(bin: &Path, server: &str, sim: &str) -> Result<(), Failure> {
    let jobs = env_number("BENCH_ADMIN_JOBS", 10_000_000);
    let seconds = env_number("BENCH_SECONDS", 10);
    let url = fresh_database(server, "genjobs_bench_admin_jobs")?;
    let envs = [("DATABASE_URL", url.clone()), ("GENJOBS_UPSTREAM_URL", sim.to_owned())];

    progress("admin jobs 1/3 the owner");
    let app = spawn_genjobs(bin, &envs)?;
    let (owner, _) = create_users(&app.base, 1).await?.remove(0);
    drop(app);

    progress(&format!("admin jobs 2/3 generating {jobs} jobs in SQL"));
    let started = Instant::now();
    generate(&url, jobs, &owner)?;
    let generate_time = started.elapsed();

    progress("admin jobs 3/3 each filter's first page");
    let app = spawn_genjobs(bin, &envs)?;
    let mut measured = Vec::new();
    for (what, filter, condition) in FILTERS {
        let filter = filter.replace("{owner}", &owner);
        let load = first_pages(format!("{}/api/admin/jobs?limit=20&{filter}", app.base), CLIENTS, seconds).await;
        let condition = condition.replace("{owner}", &owner);
        let plan = query(
            &url,
            &format!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT * FROM jobs WHERE {condition} ORDER BY id DESC LIMIT 21"
            ),
        )?;
        progress(&format!("{what}: p99 {:.1} ms", load.p99_ms));
        measured.push(Measured { what, query: filter, load, plan });
    }
    drop(app);
    let size = query(&url, "SELECT pg_size_pretty(pg_database_size(current_database()))")?;
    let counted = query(&url, "SELECT count(*) FROM jobs")?;
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_admin_jobs WITH (FORCE)")?;
    write(Path::new("docs/benchmarks-admin-jobs.md"), &counted, &size, generate_time, seconds, &measured)?;
    progress("wrote docs/benchmarks-admin-jobs.md");
    Ok(())
}

fn write(
    path: &Path,
    jobs: &str,
    size: &str,
    generate: Duration,
    seconds: u64,
    measured: &[Measured],
) -> std::io::Result<()> {
    let mut doc = String::from(
        "# The operators' job listing at scale\n\nWritten by `genjobs-bench admin-jobs` (`just bench` runs it at 10 \
         million jobs; `BENCH_ADMIN_JOBS` sets another size). The jobs are generated in SQL with `generate_series`, \
         not through the API; each filter's first page (`limit=20`) goes through the API of the build the bench ran \
         with, all figures from one run.\n\n",
    );
    let _ = writeln!(
        doc,
        "Data: {jobs} jobs over 60 days and 1,000 users, {size} on disk; generated in {:.0} s. Each filter read by \
         {CLIENTS} clients for {seconds} s, through a {} build.\n",
        generate.as_secs_f64(),
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    doc.push_str("| first page of | query | p50 | p99 | per second | target | |\n|---|---|---|---|---|---|---|\n");
    for m in measured {
        let _ = writeln!(
            doc,
            "| {} | `{}` | {:.1} ms | {:.1} ms | {:.0} ({} errors) | p99 ≤ 50 ms | {} |",
            m.what,
            if m.query.is_empty() { "(none)" } else { &m.query },
            m.load.p50_ms,
            m.load.p99_ms,
            m.load.per_sec,
            m.load.errors,
            verdict(m.load.p99_ms <= 50.0 && m.load.errors == 0 && m.load.ok > 0)
        );
    }
    doc.push_str("\n## Plans\n");
    for m in measured {
        let _ = write!(doc, "\n{}:\n\n```\n{}\n```\n", m.what, m.plan);
    }
    std::fs::write(path, doc)
}
