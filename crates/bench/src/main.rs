//! `genjobs-bench`: one full benchmark run on the Postgres store against the simulator, with
//! every baseline measured in the same run; writes `docs/benchmarks.md` and appends a line to
//! `docs/benchmarks-history.jsonl`. `scripts/bench.sh` (`just bench`) builds and calls it.
//! `genjobs-bench usage` runs only the usage reports over 10 million jobs (`usage_scale`), which
//! writes `docs/benchmarks-usage.md`; `genjobs-bench admin-jobs` only the operators' job listing
//! over 10 million jobs (`admin_jobs_scale`), which writes `docs/benchmarks-admin-jobs.md`;
//! `genjobs-bench batches` only batches' acceptance, throughput, fairness and waiting items
//! (`batches`), which writes `docs/benchmarks-batches.md`; `genjobs-bench capacity` only a burst
//! of 1,000 jobs and 10 of another user on one fal key
//! capped at 4 (`capacity`), which writes `docs/benchmarks-capacity.md`;
//! `genjobs-bench replicas` only 1, 2 and 4 replicas, directly
//! and through PgBouncer (`replicas`), which writes `docs/benchmarks-replicas.md`;
//! `genjobs-bench client-webhooks` only the webhooks to clients (`client_webhooks`), which writes
//! `docs/benchmarks-client-webhooks.md`; `genjobs-bench moderation` only a job's accepted → sent
//! with moderation off and on (`moderation`), which writes `docs/benchmarks-moderation.md`;
//! `just bench` runs all three after the rest.
//!
//! Environment: `DATABASE_URL` (server to create the bench databases on; the local one by
//! default), `BENCH_SECONDS` (length of each load run, 10), `BENCH_CLIENTS` (32),
//! `BENCH_STREAMS` (10000), `BENCH_DRIVER_JOBS` (5000).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use genjobs_bench::host::rss_kib;
use genjobs_bench::load::{LoadResult, closed_loop, open_loop};
use genjobs_bench::scenarios::{self, Api};
use serde_json::{Value, json};

const ADMIN: &str = "bench-admin-token-of-at-least-32-characters";

type Failure = Box<dyn std::error::Error>;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn progress(message: &str) {
    eprintln!("[bench] {message}");
}

struct Process {
    child: Child,
    base: String,
}

impl Process {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn addr(&self) -> SocketAddr {
        self.base.trim_start_matches("http://").parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, Failure> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn spawn_genjobs(bin: &Path, envs: &[(&str, String)]) -> Result<Process, Failure> {
    let mut command = Command::new(bin.join("genjobs"));
    command.env("RUST_LOG", "warn").stderr(Stdio::inherit());
    start_genjobs(command, envs)
}

/// genjobs with the log it has when deployed: its default level (a line per request) in its
/// default format for a destination that is not a terminal (JSON). The lines go to the null
/// device, so that what they cost is genjobs's own (formatting and writing them), not a
/// reader's on the same machine.
fn spawn_genjobs_logging(bin: &Path, envs: &[(&str, String)]) -> Result<Process, Failure> {
    let mut command = Command::new(bin.join("genjobs"));
    command.env_remove("RUST_LOG").env_remove("GENJOBS_LOG_FORMAT").stderr(Stdio::null());
    start_genjobs(command, envs)
}

/// `command` (genjobs) on a free loopback port with `envs`, once it listens.
fn start_genjobs(mut command: Command, envs: &[(&str, String)]) -> Result<Process, Failure> {
    command.env("GENJOBS_BIND", "127.0.0.1:0").env("GENJOBS_ADMIN_TOKEN", ADMIN);
    for (name, value) in envs {
        command.env(name, value);
    }
    let mut child = command.stdout(Stdio::piped()).spawn()?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    while !line.starts_with("genjobs listening on ") {
        line.clear();
        if stdout.read_line(&mut line)? == 0 {
            return Err("genjobs exited before listening".into());
        }
    }
    let base = line.trim().trim_start_matches("genjobs listening on ").to_owned();
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    Ok(Process { child, base })
}

/// A simulator whose jobs run `run_ms` milliseconds.
async fn spawn_simulator(bin: &Path, run_ms: &str) -> Result<Process, Failure> {
    let port = free_port()?;
    let child = Command::new(bin.join("genjobs-upstream-sim"))
        .env("SIM_BIND", format!("127.0.0.1:{port}"))
        .env("SIM_QUEUE_MS", "0")
        .env("SIM_RUN_MS", run_ms)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()?;
    let process = Process { child, base: format!("http://127.0.0.1:{port}") };
    for _ in 0..100 {
        if reqwest::get(format!("{}/_sim/stats", process.base)).await.is_ok() {
            return Ok(process);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err("the simulator did not start".into())
}

fn psql(url: &str, sql: &str) -> Result<(), Failure> {
    let status = Command::new("psql").args([url, "-qtAc", sql]).stdout(Stdio::null()).status()?;
    if status.success() { Ok(()) } else { Err(format!("psql failed: {sql}").into()) }
}

fn database_url(server: &str, name: &str) -> String {
    let base = server.rsplit_once('/').map_or(server, |(b, _)| b);
    format!("{base}/{name}")
}

fn fresh_database(server: &str, name: &str) -> Result<String, Failure> {
    psql(server, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
    psql(server, &format!("CREATE DATABASE {name}"))?;
    Ok(database_url(server, name))
}

async fn create_users(base: &str, n: usize) -> Result<Vec<(String, String)>, Failure> {
    let client = reqwest::Client::new();
    let mut users = Vec::new();
    for i in 0..n {
        let user: Value = client
            .post(format!("{base}/api/admin/users"))
            .bearer_auth(ADMIN)
            .json(&json!({"name": format!("bench{i}"), "credits": 1_000_000_000_000_u64,
                          "rate_limit_per_minute": 1_000_000_000, "max_concurrent_jobs": 1_000_000}))
            .send()
            .await?
            .json()
            .await?;
        let id = user["id"].as_str().ok_or("no user id")?.to_owned();
        let key = user["api_key"].as_str().ok_or("no key")?.to_owned();
        users.push((id, key));
    }
    Ok(users)
}

async fn submissions(base: &str, keys: Arc<Vec<String>>, clients: usize, seconds: u64) -> LoadResult {
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap_or_default();
    let url = format!("{base}/api/v1/images/generations");
    closed_loop(clients, Duration::from_secs(seconds), move |worker, _| {
        let request = client.post(&url).bearer_auth(&keys[worker % keys.len()]).json(&json!({"prompt": "bench"}));
        async move { request.send().await.is_ok_and(|r| r.status() == 202) }
    })
    .await
}

async fn open_submissions(base: &str, keys: Arc<Vec<String>>, rate: f64, seconds: u64) -> LoadResult {
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build().unwrap_or_default();
    let url = format!("{base}/api/v1/images/generations");
    open_loop(rate, Duration::from_secs(seconds), move |n| {
        let key = &keys[(n as usize) % keys.len()];
        let request = client.post(&url).bearer_auth(key).json(&json!({"prompt": "bench"}));
        async move { request.send().await.is_ok_and(|r| r.status() == 202) }
    })
    .await
}

async fn reads(base: &str, key: &str, ids: Arc<Vec<String>>, clients: usize, seconds: u64) -> LoadResult {
    let client = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap_or_default();
    let (base, key) = (base.to_owned(), key.to_owned());
    closed_loop(clients, Duration::from_secs(seconds), move |_, n| {
        let url = format!("{base}/api/v1/jobs/{}", ids[(n as usize) % ids.len()]);
        let request = client.get(url).bearer_auth(&key);
        async move { request.send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await
}

#[derive(Default, serde::Serialize)]
struct Figures {
    submissions: LoadResult,
    submissions_open: LoadResult,
    pgbench_tps: f64,
    pgbench_prepared_tps: f64,
    /// pgbench `-M prepared` at the open loop's rate: p50 and p99 in milliseconds.
    pgbench_open: (f64, f64),
    job_cost: lifecycle::JobCost,
    reads_postgres: LoadResult,
    reads_memory: LoadResult,
    reads_baseline: LoadResult,
    streams: scenarios::StreamsResult,
    streams_rss_before_kib: u64,
    streams_rss_after_kib: u64,
    economy: scenarios::EconomyResult,
    wakeup_one: scenarios::LatencyResult,
    wakeup_two: scenarios::LatencyResult,
    driver: scenarios::DriverResult,
    webhooks: lifecycle::WebhookResult,
    copy: lifecycle::CopyResult,
}

/// Where this binary is, and with it `genjobs` and the simulators it runs.
fn binary_dir() -> Result<std::path::PathBuf, Failure> {
    Ok(std::env::current_exe()?.parent().ok_or("no binary directory")?.to_path_buf())
}

/// The Postgres server the scale runs make their databases on: `DATABASE_URL`, else the local one.
fn database_server() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// `genjobs-bench usage`: only the usage reports at 10 million jobs.
async fn run_usage() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    // Jobs that end at once: each submission run's jobs are all final before the next one starts,
    // so that neither run also drives the other's.
    let sim = spawn_simulator(&bin, "0").await?;
    usage_scale::run(&bin, &server, &sim.base).await
}

/// `genjobs-bench admin-jobs`: only the operators' job listing over 10 million jobs.
async fn run_admin_jobs() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let sim = spawn_simulator(&bin, "0").await?;
    admin_jobs_scale::run(&bin, &server, &sim.base).await
}

/// `genjobs-bench capacity`: only a burst and a trickle on one capped fal key.
async fn run_capacity() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let sim = spawn_simulator(&bin, "100").await?;
    capacity::run(&bin, &server, &sim.base).await
}

/// `genjobs-bench batches`: only batches' acceptance, throughput, fairness and waiting items.
async fn run_batches() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let sim = spawn_simulator(&bin, "100").await?;
    batches::run(&bin, &server, &sim.base).await.map(drop)
}

/// `genjobs-bench key-checks`: submissions with keys that have a budget and an allowlist, against
/// keys that have none (`key_checks`), which writes `docs/benchmarks-keys.md`.
async fn run_key_checks() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let sim = spawn_simulator(&bin, "0").await?;
    key_checks::run(&bin, &server, &sim.base).await
}

/// `genjobs-bench moderation`: accepted → sent with moderation off and on (`moderation`), which
/// writes `docs/benchmarks-moderation.md`.
async fn run_moderation() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let sim = spawn_simulator(&bin, "100").await?;
    moderation::run(&bin, &server, &sim.base).await
}

/// `genjobs-bench replicas`: only 1, 2 and 4 replicas, directly and through PgBouncer.
async fn run_replicas() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let sim = spawn_simulator(&bin, "3600000").await?;
    replicas::run(&bin, &server, &sim.base).await
}

/// `genjobs-bench outside`: one replica under wrk, against pgbench and a constant-JSON server.
async fn run_outside() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let profiled = std::env::var("BENCH_PROFILED_DATABASE_URL").ok();
    let sim = spawn_simulator(&bin, "3600000").await?;
    outside::run(&bin, &server, profiled.as_deref(), &sim.base, env_number("BENCH_SECONDS", 10)).await
}

/// `genjobs-bench ceilings`: one replica against the ceilings of `../shared/bench`.
async fn run_ceilings() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let profiled = std::env::var("BENCH_PROFILED_DATABASE_URL").ok();
    let sim = spawn_simulator(&bin, "3600000").await?;
    ceilings::run(&bin, &ceilings::shared(), &server, profiled.as_deref(), &sim.base, env_number("BENCH_SECONDS", 10))
        .await
}

/// `genjobs-bench client-webhooks`: only the webhooks to clients.
async fn run_client_webhooks() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    client_webhooks::run(&bin, &server).await
}

async fn run() -> Result<(), Failure> {
    let (bin, server) = (binary_dir()?, database_server());
    let seconds = env_number("BENCH_SECONDS", 10);
    let clients = env_number("BENCH_CLIENTS", 32) as usize;
    let stream_count = env_number("BENCH_STREAMS", 10_000) as usize;
    let driver_jobs = env_number("BENCH_DRIVER_JOBS", 5_000) as usize;
    let interval = Duration::from_secs(2);
    let mut figures = Figures::default();
    let sim = spawn_simulator(&bin, "3600000").await?;

    progress("1/9 submissions, and pgbench running the same transaction");
    {
        let url = fresh_database(&server, "genjobs_bench_accept")?;
        // genjobs runs with its default pool, as an operator runs it: sized to the clients, it
        // let twice the sessions queue inside Postgres (docs/scaling.md, "The pool").
        let submitting = |url: String| [("DATABASE_URL", url), ("GENJOBS_UPSTREAM_URL", sim.base.clone())];
        let app = spawn_genjobs(&bin, &submitting(url.clone()))?;
        let users = create_users(&app.base, 64).await?;
        let keys = Arc::new(users.iter().map(|(_, k)| k.clone()).collect::<Vec<_>>());
        figures.submissions = submissions(&app.base, keys, clients, seconds).await;
        progress(&format!(
            "   genjobs: {:.0} submissions/s, p99 {:.1} ms",
            figures.submissions.per_sec, figures.submissions.p99_ms
        ));
        drop(app);
        let dir = std::env::temp_dir().join(format!("genjobs-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        figures.pgbench_tps = pgbench::run(&url, &pgbench::scripts(&dir, &users, false)?, clients, seconds, false)?;
        let prepared = pgbench::scripts(&dir, &users, true)?;
        figures.pgbench_prepared_tps = pgbench::run(&url, &prepared, clients, seconds, true)?;
        progress(&format!(
            "   pgbench: {:.0} transactions/s, {:.0} with -M prepared",
            figures.pgbench_tps, figures.pgbench_prepared_tps
        ));
        let rate = figures.submissions.per_sec / 2.0;
        figures.pgbench_open = pgbench::run_at_rate(&url, &prepared, clients, seconds, rate, &dir)?;
        // A fresh database, as for the closed loop: a replica taking over the jobs the one
        // before left would measure that takeover, not submissions.
        let url = fresh_database(&server, "genjobs_bench_open")?;
        let app = spawn_genjobs(&bin, &submitting(url))?;
        let keys = Arc::new(create_users(&app.base, 64).await?.into_iter().map(|(_, k)| k).collect::<Vec<_>>());
        // One unmeasured second at the same rate first, as pgbench opens its connections before
        // its clock starts: on a fresh replica, 57 of the 58 requests over 50 ms fell in the first
        // 0.2 s, while the pool made its connections.
        open_submissions(&app.base, Arc::clone(&keys), rate, 1).await;
        figures.submissions_open = open_submissions(&app.base, keys, rate, seconds).await;
        progress(&format!(
            "   open loop at {rate:.0}/s: p50 {:.1} ms, p99 {:.1} ms, {} errors; pgbench -M prepared at that rate: p50 {:.1} ms, p99 {:.1} ms",
            figures.submissions_open.p50_ms,
            figures.submissions_open.p99_ms,
            figures.submissions_open.errors,
            figures.pgbench_open.0,
            figures.pgbench_open.1
        ));
        drop(app);
    }

    progress("2/9 reads: Postgres store, in-memory store, constant baseline");
    {
        let url = fresh_database(&server, "genjobs_bench_reads")?;
        let app = spawn_genjobs(&bin, &[("DATABASE_URL", url), ("GENJOBS_UPSTREAM_URL", sim.base.clone())])?;
        let (_, key) = create_users(&app.base, 1).await?.remove(0);
        let api = Api::new(&app.base, &key, clients);
        let ids = Arc::new(scenarios::submit_many(&api, 200, 8, "read me").await);
        figures.reads_postgres = reads(&app.base, &key, Arc::clone(&ids), clients, seconds).await;
        drop(app);

        let memory = spawn_genjobs(&bin, &[("GENJOBS_UPSTREAM_URL", sim.base.clone())])?;
        let (_, key) = create_users(&memory.base, 1).await?.remove(0);
        let api = Api::new(&memory.base, &key, clients);
        let ids = Arc::new(scenarios::submit_many(&api, 200, 8, "read me").await);
        figures.reads_memory = reads(&memory.base, &key, ids, clients, seconds).await;
        drop(memory);

        let listener = TcpListener::bind("127.0.0.1:0")?;
        let base = format!("http://{}", listener.local_addr()?);
        let baseline = genjobs_bench::baseline::server(listener, 2)?;
        let handle = baseline.handle();
        tokio::spawn(baseline);
        figures.reads_baseline = reads(&base, "none", Arc::new(vec!["x".into()]), clients, seconds).await;
        handle.stop(false).await;
        progress(&format!(
            "   reads/s: postgres {:.0}, memory {:.0}, baseline {:.0}",
            figures.reads_postgres.per_sec, figures.reads_memory.per_sec, figures.reads_baseline.per_sec
        ));
    }

    let url = fresh_database(&server, "genjobs_bench_watch")?;
    let envs = [
        ("DATABASE_URL", url.clone()),
        ("GENJOBS_UPSTREAM_URL", sim.base.clone()),
        ("GENJOBS_STREAM_MAX_SECS", "300".into()),
    ];
    let app = spawn_genjobs(&bin, &envs)?;
    let (_, key) = create_users(&app.base, 1).await?.remove(0);
    let api = Api::new(&app.base, &key, 256);

    progress(&format!("3/9 {stream_count} open streams on one process"));
    {
        let jobs = scenarios::submit_many(&api, 100, 8, "streamed [sim:run=60000]").await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        figures.streams_rss_before_kib = rss_kib(app.pid()).unwrap_or(0);
        let pid = app.pid();
        let mut after = 0;
        figures.streams =
            scenarios::streams(app.addr(), &key, &jobs, stream_count, Duration::from_secs(120), |opened| {
                after = rss_kib(pid).unwrap_or(0);
                progress(&format!("   {opened} streams open"));
            })
            .await;
        figures.streams_rss_after_kib = after;
        progress(&format!("   {} of {} streams got their final event", figures.streams.finals, figures.streams.opened));
    }

    progress("4/9 upstream economy: 1000 waiters on 100 running jobs");
    {
        let jobs = scenarios::submit_many(&api, 100, 8, "watched [sim:hang]").await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        figures.economy = scenarios::economy(&api, &sim.base, &jobs, 1000, Duration::from_secs(20), interval).await;
        for id in &jobs {
            api.cancel(id).await;
        }
        progress(&format!("   {:.3} status calls per job per interval", figures.economy.per_job_per_interval));
    }

    progress("5/9 wake-up latency, one replica and across two");
    {
        figures.wakeup_one = scenarios::wakeup(&api, &api, 200, 20).await;
        let other = spawn_genjobs(&bin, &envs)?;
        let other_api = Api::new(&other.base, &key, 64);
        tokio::time::sleep(Duration::from_secs(1)).await;
        figures.wakeup_two = scenarios::wakeup(&other_api, &api, 200, 20).await;
        progress(&format!(
            "   p99 {:.1} ms on one, {:.1} ms across two",
            figures.wakeup_one.p99_ms, figures.wakeup_two.p99_ms
        ));
    }

    progress(&format!("6/9 driver scale: {driver_jobs} jobs running on one replica"));
    {
        scenarios::submit_many(&api, driver_jobs, 16, "many [sim:hang]").await;
        tokio::time::sleep(interval * 3).await;
        figures.driver =
            scenarios::driver_scale(&api.client, &sim.base, app.pid(), interval, Duration::from_secs(20)).await;
        progress(&format!(
            "   {:.1} % of polls within ±20 %, service at {:.2} cores",
            figures.driver.within_20_percent * 100.0,
            figures.driver.service_cores
        ));
    }
    drop(app);

    progress("7/9 status calls over a job's life: 50 jobs of 60 s, webhooks on and off, nobody watching");
    figures.webhooks = lifecycle::status_calls_per_job(&bin, &server, 50, 60).await?;
    progress(&format!(
        "   {:.2} status calls per job with webhooks, {:.2} polling only",
        figures.webhooks.with_webhooks, figures.webhooks.polling_only
    ));

    progress("8/9 copying a 50 MB output into a file:// store, and cp of the same file");
    figures.copy = lifecycle::copy_throughput(50_000_000).await?;
    progress(&format!(
        "   {:.0} MB/s copied, {:.0} MB/s by cp",
        figures.copy.store_mb_per_sec, figures.copy.cp_mb_per_sec
    ));

    progress("9/9 what one job costs Postgres from accept to final: 100 jobs, one at a time");
    figures.job_cost = lifecycle::job_cost(&bin, &server, 100).await?;
    progress(&format!(
        "   {:.2} durable and {:.2} relaxed job commits; {:.2} commits, {:.2} WAL flushes, {:.0} WAL bytes, {:.2} rows written per job",
        figures.job_cost.durable_commits_per_job,
        figures.job_cost.relaxed_commits_per_job,
        figures.job_cost.commits_per_job,
        figures.job_cost.wal_syncs_per_job,
        figures.job_cost.wal_bytes_per_job,
        figures.job_cost.rows_written_per_job
    ));

    for name in [
        "genjobs_bench_cost",
        "genjobs_bench_accept",
        "genjobs_bench_open",
        "genjobs_bench_reads",
        "genjobs_bench_watch",
        "genjobs_bench_webhooks",
        "genjobs_bench_polling",
    ] {
        psql(&server, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
    }
    report::write(Path::new("docs"), &figures, seconds, clients, stream_count, driver_jobs)?;
    progress("wrote docs/benchmarks.md");
    Ok(())
}

mod admin_jobs_scale;
mod batches;
mod capacity;
mod ceilings;
mod client_webhooks;
mod cpu;
mod flame;
mod key_checks;
mod lifecycle;
mod moderation;
mod outside;
mod pgbench;
mod replicas;
mod report;
mod statements;
mod usage_scale;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let outcome = match std::env::args().nth(1).as_deref() {
        Some("usage") => run_usage().await,
        Some("admin-jobs") => run_admin_jobs().await,
        Some("capacity") => run_capacity().await,
        Some("batches") => run_batches().await,
        Some("replicas") => run_replicas().await,
        Some("client-webhooks") => run_client_webhooks().await,
        Some("outside") => run_outside().await,
        Some("ceilings") => run_ceilings().await,
        Some("key-checks") => run_key_checks().await,
        Some("moderation") => run_moderation().await,
        _ => run().await,
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("[bench] failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
