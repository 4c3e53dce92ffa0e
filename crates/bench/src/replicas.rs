//! `genjobs-bench replicas`: submissions and job reads per second with 1, 2 and 4 replicas on
//! one Postgres, directly and through PgBouncer in transaction mode (`GENJOBS_DATABASE_POOLER=
//! transaction`), all in one run; with the CPU each side used and the wait events Postgres's
//! active sessions showed, to say what limits the rate, and where the server loads
//! `pg_stat_statements` the statements each job cost. Writes `docs/benchmarks-replicas.md`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use genjobs_bench::host::cpu_time;
use genjobs_bench::load::{LoadResult, closed_loop};
use genjobs_bench::scenarios::{self, Api};
use serde_json::json;

use super::{Failure, Process, create_users, env_number, fresh_database, progress, psql, spawn_genjobs, statements};

/// One configuration's figures.
struct Row {
    replicas: usize,
    pooled: bool,
    submissions: LoadResult,
    reads: LoadResult,
    /// CPU seconds per wall second over both load runs: the replicas together, and Postgres.
    replica_cores: f64,
    postgres_cores: f64,
    /// The wait events seen most often on active sessions while submitting.
    waits: String,
    /// The statements of the submissions run, where the server collects them.
    statements: Option<statements::Profile>,
}

/// CPU time of every process named `postgres` (the server and its backends), in seconds.
fn postgres_cpu() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0.0 };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()))
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "postgres"))
        .filter_map(cpu_time)
        .map(|time| time.as_secs_f64())
        .sum()
}

fn replicas_cpu(replicas: &[Process]) -> f64 {
    replicas.iter().filter_map(|r| cpu_time(r.pid())).map(|t| t.as_secs_f64()).sum()
}

/// Samples the wait events of active sessions every 100 ms while `load` runs.
async fn with_wait_events(url: &str, load: impl Future<Output = LoadResult>) -> (LoadResult, String) {
    let url = url.to_owned();
    let sampler = tokio::task::spawn_blocking(move || {
        let sql = "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity \
                   WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()";
        let mut counts: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(env_number("BENCH_SECONDS", 10));
        while std::time::Instant::now() < deadline {
            if let Ok(out) = Command::new("psql").args([url.as_str(), "-qtAc", sql]).stderr(Stdio::null()).output() {
                for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()) {
                    *counts.entry(line.to_owned()).or_default() += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        counts
    });
    let result = load.await;
    let counts = sampler.await.unwrap_or_default();
    let total: u64 = counts.values().sum();
    let mut top: Vec<_> = counts.into_iter().collect();
    top.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let waits = top
        .iter()
        .take(3)
        .map(|(event, n)| format!("{event} {:.0} %", *n as f64 * 100.0 / total.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ");
    (result, waits)
}

async fn measure(bin: &Path, server: &str, sim: &str, replicas: usize, pooled: bool) -> Result<Row, Failure> {
    let (seconds, clients) = (env_number("BENCH_SECONDS", 10), env_number("BENCH_CLIENTS", 32) as usize);
    let url = fresh_database(server, "genjobs_bench_replicas")?;
    let (database_url, pooler) = if pooled {
        let server_addr = url.split('@').nth(1).and_then(|rest| rest.split('/').next()).unwrap_or("127.0.0.1:5432");
        let bouncer = genjobs_test_postgres::pgbouncer_as_deployed(server_addr);
        (url.replacen(server_addr, &bouncer.addr.to_string(), 1), "transaction")
    } else {
        (url.clone(), "none")
    };
    // Each replica gets an even share of the sessions pgbench would get, so that adding
    // replicas adds processes, not database sessions.
    let per_replica = (clients / replicas).max(2).to_string();
    let envs = [
        ("DATABASE_URL", database_url),
        ("GENJOBS_DATABASE_POOLER", pooler.to_owned()),
        ("GENJOBS_DATABASE_LISTEN_URL", url.clone()),
        ("GENJOBS_UPSTREAM_URL", sim.to_owned()),
        ("GENJOBS_DB_POOL_SIZE", per_replica),
    ];
    let mut running = Vec::new();
    for _ in 0..replicas {
        running.push(spawn_genjobs(bin, &envs)?);
    }
    let bases: Arc<Vec<String>> = Arc::new(running.iter().map(|r| r.base.clone()).collect());
    let users = create_users(&bases[0], 64).await?;
    let keys: Arc<Vec<String>> = Arc::new(users.iter().map(|(_, k)| k.clone()).collect());
    let window = if statements::available(&url)? { Some(statements::Window::open(&url)?) } else { None };
    let (cpu_before, pg_before) = (replicas_cpu(&running), postgres_cpu());
    let http = reqwest::Client::builder().pool_max_idle_per_host(clients).build().unwrap_or_default();
    let (submit_bases, submit_keys, submit_http) = (Arc::clone(&bases), Arc::clone(&keys), http.clone());
    let (submissions, waits) = with_wait_events(
        &url,
        closed_loop(clients, Duration::from_secs(seconds), move |worker, _| {
            let base = &submit_bases[worker % submit_bases.len()];
            let request = submit_http
                .post(format!("{base}/api/v1/images/generations"))
                .bearer_auth(&submit_keys[worker % submit_keys.len()])
                .json(&json!({"prompt": "bench"}));
            async move { request.send().await.is_ok_and(|r| r.status() == 202) }
        }),
    )
    .await;
    let statements = window.map(|window| window.close(&url)).transpose()?;
    let reader = Api::new(&bases[0], &keys[0], clients);
    let ids: Arc<Vec<String>> = Arc::new(scenarios::submit_many(&reader, 200, 8, "read me").await);
    let (read_bases, key) = (Arc::clone(&bases), keys[0].clone());
    let reads = closed_loop(clients, Duration::from_secs(seconds), move |worker, n| {
        let base = &read_bases[worker % read_bases.len()];
        let request = http.get(format!("{base}/api/v1/jobs/{}", ids[(n as usize) % ids.len()])).bearer_auth(&key);
        async move { request.send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
    let wall = 2.0 * seconds as f64;
    let row = Row {
        replicas,
        pooled,
        submissions,
        reads,
        replica_cores: (replicas_cpu(&running) - cpu_before) / wall,
        postgres_cores: (postgres_cpu() - pg_before) / wall,
        waits,
        statements,
    };
    drop(running);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_replicas WITH (FORCE)")?;
    Ok(row)
}

/// Runs every configuration and writes `docs/benchmarks-replicas.md`.
pub(super) async fn run(bin: &Path, server: &str, sim: &str) -> Result<(), Failure> {
    let mut rows = Vec::new();
    for pooled in [false, true] {
        for replicas in [1, 2, 4] {
            progress(&format!("replicas: {replicas}, {}", if pooled { "through PgBouncer" } else { "direct" }));
            let row = measure(bin, server, sim, replicas, pooled).await?;
            progress(&format!(
                "   {:.0} submissions/s (p99 {:.1} ms), {:.0} reads/s (p99 {:.1} ms)",
                row.submissions.per_sec, row.submissions.p99_ms, row.reads.per_sec, row.reads.p99_ms
            ));
            rows.push(row);
        }
    }
    write(Path::new("docs/benchmarks-replicas.md"), &rows)?;
    progress("wrote docs/benchmarks-replicas.md");
    Ok(())
}

fn write(path: &Path, rows: &[Row]) -> std::io::Result<()> {
    let mut doc = String::from(
        "# Replicas and PgBouncer\n\nWritten by `genjobs-bench replicas` (`just bench` runs it). Submissions and `GET /api/v1/jobs/{id}` \
         per second from one closed loop of 32 clients spread over 1, 2 and 4 replicas of a release build on one \
         Postgres, directly and through PgBouncer 1.18 in transaction mode, each replica with an equal share of 32 \
         database sessions; all in one run on this 2-core machine, which the replicas, Postgres, PgBouncer and the \
         load generator share. CPU is cores used on average during the load; waits are what Postgres's active \
         sessions were doing, sampled every 100 ms while submitting. Where the server loads `pg_stat_statements` \
         (`just bench` starts one that does), the statements of each submissions run follow the tables, per job \
         accepted.\n\n\
         | path | replicas | submissions/s (p99) | reads/s (p99) | replicas' CPU | Postgres CPU | waits while submitting |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            doc,
            "| {} | {} | {:.0} ({:.1} ms) | {:.0} ({:.1} ms) | {:.2} | {:.2} | {} |",
            if r.pooled { "PgBouncer" } else { "direct" },
            r.replicas,
            r.submissions.per_sec,
            r.submissions.p99_ms,
            r.reads.per_sec,
            r.reads.p99_ms,
            r.replica_cores,
            r.postgres_cores,
            r.waits
        );
    }
    doc.push_str("\n| path | submissions, 4 replicas ÷ 1 | reads, 4 replicas ÷ 1 |\n|---|---|---|\n");
    for pooled in [false, true] {
        let of = |n: usize| rows.iter().find(|r| r.pooled == pooled && r.replicas == n);
        if let (Some(one), Some(four)) = (of(1), of(4)) {
            let _ = writeln!(
                doc,
                "| {} | {:.2} | {:.2} |",
                if pooled { "PgBouncer" } else { "direct" },
                four.submissions.per_sec / one.submissions.per_sec.max(f64::EPSILON),
                four.reads.per_sec / one.reads.per_sec.max(f64::EPSILON)
            );
        }
    }
    for (r, profile) in rows.iter().filter_map(|r| r.statements.as_ref().map(|profile| (r, profile))) {
        let _ = write!(
            doc,
            "\n## Statements per job: {}, {} replica{}\n\n{}",
            if r.pooled { "PgBouncer" } else { "direct" },
            r.replicas,
            if r.replicas == 1 { "" } else { "s" },
            statements::table(profile)
        );
    }
    std::fs::write(path, doc)
}
