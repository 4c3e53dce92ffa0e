//! Rows 7 and 8: what the provider sees of a job's whole life with webhooks on and nobody
//! watching (against the same jobs with webhooks off, in the same run), and how fast an output is
//! copied into the output store (against `cp` of the same file on the same disk).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use genjobs_bench::scenarios::Api;
use genjobs_domain::ids::JobId;
use genjobs_domain::ports::OutputStore;
use genjobs_output_store::{ObjectOutputStore, OutputHosts};
use serde::Serialize;

use super::{ADMIN, Failure, create_users, free_port, fresh_database, progress, spawn_genjobs, spawn_simulator};

/// Status calls per job over its life.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub(crate) struct WebhookResult {
    /// Jobs per run.
    pub jobs: usize,
    /// Run time of each job, seconds.
    pub job_secs: u64,
    /// With webhooks on (fallback poll every 60 s), nobody watching.
    pub with_webhooks: f64,
    /// Polling only, nobody watching.
    pub polling_only: f64,
    /// Jobs that ended succeeded in each run.
    pub succeeded: (usize, usize),
}

/// `jobs` jobs of `job_secs` on each of two services, one with webhooks and one without, each on
/// a simulator of its own; clients read the jobs every few seconds without waiting (which would
/// count as watching) until all are final.
pub(crate) async fn status_calls_per_job(
    bin: &Path,
    server: &str,
    jobs: usize,
    job_secs: u64,
) -> Result<WebhookResult, Failure> {
    let run_ms = (job_secs * 1000).to_string();
    let (sim_on, sim_off) = (spawn_simulator(bin, &run_ms).await?, spawn_simulator(bin, &run_ms).await?);
    let port = free_port()?;
    let with = spawn_genjobs(
        bin,
        &[
            ("DATABASE_URL", fresh_database(server, "genjobs_bench_webhooks")?),
            ("GENJOBS_UPSTREAM_URL", sim_on.base.clone()),
            ("GENJOBS_BIND", format!("127.0.0.1:{port}")),
            ("GENJOBS_PUBLIC_URL", format!("http://127.0.0.1:{port}")),
            ("GENJOBS_FAL_JWKS_URL", format!("{}/.well-known/jwks.json", sim_on.base)),
        ],
    )?;
    let without = spawn_genjobs(
        bin,
        &[
            ("DATABASE_URL", fresh_database(server, "genjobs_bench_polling")?),
            ("GENJOBS_UPSTREAM_URL", sim_off.base.clone()),
        ],
    )?;
    let mut runs = Vec::new();
    for app in [&with, &without] {
        let (_, key) = create_users(&app.base, 1).await?.remove(0);
        let api = Api::new(&app.base, &key, 16);
        let ids = genjobs_bench::scenarios::submit_many(&api, jobs, 8, "a minute-long job").await;
        runs.push((api, ids));
    }
    let deadline = Instant::now() + Duration::from_secs(job_secs * 2 + 60);
    let mut succeeded = [0usize; 2];
    for (i, (api, ids)) in runs.iter().enumerate() {
        let mut open: Vec<&String> = ids.iter().collect();
        while !open.is_empty() && Instant::now() < deadline {
            let mut still = Vec::new();
            for id in open {
                match api.job(id, 0).await.and_then(|job| job["state"].as_str().map(str::to_owned)).as_deref() {
                    Some("succeeded") => succeeded[i] += 1,
                    Some("failed" | "canceled") => {}
                    _ => still.push(id),
                }
            }
            open = still;
            if !open.is_empty() {
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
        }
        progress(&format!("   {} of {jobs} jobs succeeded ({})", succeeded[i], ["webhooks", "polling"][i]));
    }
    let calls = |sim_base: String| async move {
        let stats: serde_json::Value = reqwest::get(format!("{sim_base}/_sim/stats")).await?.json().await?;
        Ok::<_, reqwest::Error>(stats["routes"]["status"].as_u64().unwrap_or(0))
    };
    let (on, off) = (calls(sim_on.base.clone()).await?, calls(sim_off.base.clone()).await?);
    Ok(WebhookResult {
        jobs,
        job_secs,
        with_webhooks: on as f64 / jobs.max(1) as f64,
        polling_only: off as f64 / jobs.max(1) as f64,
        succeeded: (succeeded[0], succeeded[1]),
    })
}

/// Throughput of copying an output into a `file://` output store, and of `cp`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub(crate) struct CopyResult {
    /// Bytes of the output.
    pub bytes: u64,
    /// Best of three, MB/s: fetched over loopback HTTP, streamed into the store.
    pub store_mb_per_sec: f64,
    /// Best of three, MB/s: `cp` of the same file on the same disk.
    pub cp_mb_per_sec: f64,
}

/// Copies a `bytes`-long output three times each way in a temporary directory.
pub(crate) async fn copy_throughput(bytes: usize) -> Result<CopyResult, Failure> {
    let dir = std::env::temp_dir().join(format!("genjobs-bench-copy-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let content: Vec<u8> = (0..bytes).map(|i| (i * 31 % 251) as u8).collect();
    let source = dir.join("output.mp4");
    std::fs::write(&source, &content)?;
    let served = web::Bytes::from(content);
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/output.mp4", listener.local_addr()?);
    let server = HttpServer::new(move || {
        let served = served.clone();
        App::new().route(
            "/output.mp4",
            web::get().to(move || {
                let served = served.clone();
                async move { HttpResponse::Ok().content_type("video/mp4").body(served) }
            }),
        )
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    let store = ObjectOutputStore::open(
        &format!("file://{}", dir.join("store").display()),
        [("", "")],
        1 << 31,
        OutputHosts::new([], ["http://127.0.0.1"]),
    )?;
    let mb = bytes as f64 / 1e6;
    let (mut store_best, mut cp_best) = (f64::MAX, f64::MAX);
    for attempt in 0..3 {
        let job = JobId::new_at(time::OffsetDateTime::now_utc());
        let started = Instant::now();
        store.copy(job, 0, &url, "video/mp4").await.map_err(|e| e.to_string())?;
        store_best = store_best.min(started.elapsed().as_secs_f64());
        let started = Instant::now();
        let copied = Command::new("cp").arg(&source).arg(dir.join(format!("cp-{attempt}.mp4"))).status()?;
        cp_best = cp_best.min(started.elapsed().as_secs_f64());
        if !copied.success() {
            return Err("cp failed".into());
        }
    }
    handle.stop(false).await;
    std::fs::remove_dir_all(&dir)?;
    Ok(CopyResult { bytes: bytes as u64, store_mb_per_sec: mb / store_best, cp_mb_per_sec: mb / cp_best })
}

/// What one job costs Postgres from accept to final.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct JobCost {
    /// Jobs measured.
    pub jobs: usize,
    /// Transactions committed per job (`pg_stat_database.xact_commit`, reads included), with the
    /// idle rate of the same service subtracted.
    pub commits_per_job: f64,
    /// WAL flushes per job (`pg_stat_wal.wal_sync`), the WAL writer's background flushes of
    /// relaxed commits included.
    pub wal_syncs_per_job: f64,
    /// Commits that wrote jobs and waited for the disk, per job, as genjobs counts them
    /// (`genjobs_db_job_commits_total{durability="durable"}`).
    pub durable_commits_per_job: f64,
    /// Commits that wrote jobs without waiting for the disk, per job (progress, leases).
    pub relaxed_commits_per_job: f64,
    /// Rows inserted, updated or deleted per job.
    pub rows_written_per_job: f64,
    /// Bytes of WAL written per job (`pg_current_wal_lsn`, cluster-wide, idle rate subtracted).
    pub wal_bytes_per_job: f64,
    /// Rows inserted, updated or deleted per job in each table that had any
    /// (`pg_stat_user_tables`), most first.
    pub rows_by_table: Vec<(String, f64)>,
}

/// Rows inserted, updated or deleted so far in each table of `database`.
fn rows_by_table(server: &str, database: &str) -> Result<Vec<(String, f64)>, Failure> {
    let url = super::database_url(server, database);
    let sql = "SELECT relname || '|' || (n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables ORDER BY relname";
    let output = Command::new("psql").args([url.as_str(), "-qtAc", sql]).output()?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let (table, rows) = line.split_once('|')?;
            Some((table.to_owned(), rows.parse().ok()?))
        })
        .collect())
}

/// The database's counters: commits, rows written, and the cluster's WAL flushes and bytes.
fn counters(server: &str, database: &str) -> Result<[f64; 4], Failure> {
    let sql = format!(
        "SELECT d.xact_commit, d.tup_inserted + d.tup_updated + d.tup_deleted, w.wal_sync, \
         pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') \
         FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = '{database}'"
    );
    let output = Command::new("psql").args([server, "-qtAc", &sql]).output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let values: Vec<f64> = text.trim().split('|').filter_map(|v| v.parse().ok()).collect();
    values.try_into().map_err(|_| format!("unexpected counters: {text}").into())
}

/// Statistics reach `pg_stat_database` when a backend goes idle, at the latest about 10 s later.
const STATS_SETTLE: Duration = Duration::from_secs(11);

/// `jobs` jobs with no progress updates (they complete before their first poll), submitted one
/// at a time so that no flush serves two jobs; the counters' growth over an idle window of the
/// same service, scaled to the run's length, is subtracted.
pub(crate) async fn job_cost(bin: &Path, server: &str, jobs: usize) -> Result<JobCost, Failure> {
    let sim = spawn_simulator(bin, "0").await?;
    let database = "genjobs_bench_cost";
    let url = fresh_database(server, database)?;
    let app = spawn_genjobs(bin, &[("DATABASE_URL", url), ("GENJOBS_UPSTREAM_URL", sim.base.clone())])?;
    let (_, key) = create_users(&app.base, 1).await?.remove(0);
    let api = Api::new(&app.base, &key, 4);
    tokio::time::sleep(STATS_SETTLE).await;
    let idle_start = (counters(server, database)?, Instant::now());
    tokio::time::sleep(STATS_SETTLE).await;
    let idle_end = (counters(server, database)?, Instant::now());
    let idle_secs = (idle_end.1 - idle_start.1).as_secs_f64();
    let commits_before = job_commits(&app.base).await?;
    let tables_before = rows_by_table(server, database)?;

    let started = Instant::now();
    for _ in 0..jobs {
        api.submit("a job with no progress").await.ok_or("a submission failed")?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let results = || async {
        let stats: serde_json::Value =
            reqwest::get(format!("{}/_sim/stats", sim.base)).await.ok()?.json().await.ok()?;
        stats["routes"]["result"].as_u64()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while results().await.unwrap_or(0) < jobs as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let commits_after = job_commits(&app.base).await?;
    tokio::time::sleep(STATS_SETTLE).await;
    let end = counters(server, database)?;
    let mut tables: Vec<(String, f64)> = rows_by_table(server, database)?
        .into_iter()
        .filter_map(|(table, rows)| {
            let before = tables_before.iter().find(|(t, _)| *t == table).map_or(0.0, |(_, r)| *r);
            let per_job = (rows - before) / jobs as f64;
            (per_job > 0.0).then_some((table, per_job))
        })
        .collect();
    tables.sort_by(|a, b| b.1.total_cmp(&a.1));
    let run_secs = started.elapsed().as_secs_f64();
    let commits = |i: usize| (commits_after[i] - commits_before[i]) / jobs as f64;
    let per_job = |i: usize| {
        let idle = (idle_end.0[i] - idle_start.0[i]) / idle_secs * run_secs;
        ((end[i] - idle_end.0[i]) - idle).max(0.0) / jobs as f64
    };
    Ok(JobCost {
        jobs,
        commits_per_job: per_job(0),
        rows_written_per_job: per_job(1),
        wal_syncs_per_job: per_job(2),
        wal_bytes_per_job: per_job(3),
        rows_by_table: tables,
        durable_commits_per_job: commits(0),
        relaxed_commits_per_job: commits(1),
    })
}

/// genjobs' own count of its commits that wrote jobs: durable, relaxed.
async fn job_commits(base: &str) -> Result<[f64; 2], Failure> {
    let text = reqwest::Client::new().get(format!("{base}/metrics")).bearer_auth(ADMIN).send().await?.text().await?;
    let count = |durability: &str| {
        let series = format!("genjobs_db_job_commits_total{{durability=\"{durability}\"}} ");
        text.lines().find_map(|line| line.strip_prefix(&series)?.trim().parse::<f64>().ok()).unwrap_or(0.0)
    };
    Ok([count("durable"), count("relaxed")])
}
