//! `genjobs-bench outside`: one replica measured as an outside load test measures it, all in one
//! run: wrk with 32 connections, each request with the key of one of 100 users at random; for
//! submissions, pgbench running genjobs' accept transaction with `-M prepared` over the same 100
//! accounts as the baseline; for reads of jobs on Postgres, a constant-JSON actix-web server as
//! the ceiling. Writes `docs/benchmarks-outside.md`.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use genjobs_bench::scenarios::{self, Api};

use super::report::verdict;
use super::{Failure, create_users, fresh_database, pgbench, progress, spawn_genjobs, statements};

const CLIENTS: usize = 32;
const USERS: usize = 100;

/// What wrk measured of one run.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Wrk {
    pub(super) per_sec: f64,
    pub(super) p99_ms: f64,
    /// Answers other than 2xx or 3xx, and socket errors.
    pub(super) errors: u64,
    /// Requests completed.
    pub(super) requests: u64,
}

/// Reads wrk's summary (`--latency`): requests per second, the 99th percentile, the errors.
fn parse_wrk(text: &str) -> Option<Wrk> {
    let per_sec = text.lines().find_map(|l| l.trim().strip_prefix("Requests/sec:"))?.trim().parse().ok()?;
    let p99 = text.lines().find_map(|l| l.trim().strip_prefix("99%"))?.trim();
    let p99_ms = if let Some(us) = p99.strip_suffix("us") {
        us.parse::<f64>().ok()? / 1000.0
    } else if let Some(ms) = p99.strip_suffix("ms") {
        ms.parse().ok()?
    } else {
        p99.strip_suffix('s')?.parse::<f64>().ok()? * 1000.0
    };
    let count = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .map_or(0, |rest| rest.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse::<u64>().ok()).sum())
    };
    let requests = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in ").and_then(|(n, _)| n.trim().parse().ok()))
        .unwrap_or(0);
    Some(Wrk { per_sec, p99_ms, errors: count("Non-2xx or 3xx responses:") + count("Socket errors:"), requests })
}

/// Runs wrk against `url` for `seconds`, with `script` when given.
fn wrk(url: &str, script: Option<&Path>, seconds: u64) -> Result<Wrk, Failure> {
    run_wrk(Command::new("wrk"), url, script, seconds)
}

/// Runs wrk against `url` for `seconds` with `script`, which reads `envs`.
pub(super) fn wrk_with(url: &str, script: &Path, envs: &[(&str, String)], seconds: u64) -> Result<Wrk, Failure> {
    let mut command = Command::new("wrk");
    command.envs(envs.iter().map(|(name, value)| (*name, value)));
    run_wrk(command, url, Some(script), seconds)
}

fn run_wrk(mut command: Command, url: &str, script: Option<&Path>, seconds: u64) -> Result<Wrk, Failure> {
    command.args(["-t", "2", "-c", &CLIENTS.to_string(), "-d", &format!("{seconds}s"), "--latency"]);
    if let Some(script) = script {
        command.arg("-s").arg(script);
    }
    let output = command.arg(url).output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    parse_wrk(&text)
        .ok_or_else(|| format!("unexpected wrk output: {text}{}", String::from_utf8_lossy(&output.stderr)).into())
}

/// A Lua list of strings.
fn lua_list(items: &[String]) -> String {
    items.iter().map(|item| format!("{item:?}")).collect::<Vec<_>>().join(", ")
}

/// A wrk script submitting an image job with the key of one of `keys` at random.
fn submit_script(dir: &Path, keys: &[String]) -> Result<PathBuf, Failure> {
    let path = dir.join("submit.lua");
    std::fs::write(
        &path,
        format!(
            "local keys = {{{}}}\n\
             request = function()\n\
               local key = keys[math.random(#keys)]\n\
               return wrk.format(\"POST\", \"/api/v1/images/generations\", \
                 {{[\"Authorization\"] = \"Bearer \" .. key, [\"Content-Type\"] = \"application/json\"}}, \
                 '{{\"prompt\": \"bench\"}}')\n\
             end\n",
            lua_list(keys)
        ),
    )?;
    Ok(path)
}

/// A wrk script reading one of `jobs` (id, its owner's key) at random.
fn read_script(dir: &Path, jobs: &[(String, String)]) -> Result<PathBuf, Failure> {
    let (ids, keys): (Vec<String>, Vec<String>) = jobs.iter().cloned().unzip();
    let path = dir.join("read.lua");
    std::fs::write(
        &path,
        format!(
            "local ids = {{{}}}\nlocal keys = {{{}}}\n\
             request = function()\n\
               local i = math.random(#ids)\n\
               return wrk.format(\"GET\", \"/api/v1/jobs/\" .. ids[i], {{[\"Authorization\"] = \"Bearer \" .. keys[i]}})\n\
             end\n",
            lua_list(&ids),
            lua_list(&keys)
        ),
    )?;
    Ok(path)
}

/// What one submissions run measured: genjobs under wrk, then pgbench over the same accounts;
/// with each side's statements where they were profiled.
struct Submissions {
    genjobs: Wrk,
    pgbench_tps: f64,
    pgbench_p99_ms: f64,
    statements: Option<(statements::Profile, statements::Profile)>,
}

/// Submissions with wrk, then pgbench `-M prepared` over the same accounts, on a fresh database
/// of `server`; each side's statements too when `profiled`.
async fn submissions_run(
    bin: &Path,
    server: &str,
    sim: &str,
    dir: &Path,
    seconds: u64,
    profiled: bool,
) -> Result<Submissions, Failure> {
    let url = fresh_database(server, "genjobs_bench_outside")?;
    // The pool is left at its default, as an operator would run it: sized to wrk's 32
    // connections, it let twice the sessions queue inside Postgres, for a p99 about 10 ms higher.
    let envs = [("DATABASE_URL", url.clone()), ("GENJOBS_UPSTREAM_URL", sim.to_owned())];
    let app = spawn_genjobs(bin, &envs)?;
    let users = create_users(&app.base, USERS).await?;
    let keys: Vec<String> = users.iter().map(|(_, key)| key.clone()).collect();
    let window = || profiled.then(|| statements::Window::open(&url)).transpose();
    let close = |window: Option<statements::Window>| window.map(|w| w.close(&url)).transpose();
    let opened = window()?;
    let genjobs = wrk(&app.base, Some(&submit_script(dir, &keys)?), seconds)?;
    let genjobs_profile = close(opened)?;
    drop(app);
    let prepared = pgbench::scripts(dir, &users, true)?;
    let opened = window()?;
    let (pgbench_tps, pgbench_p99_ms) = pgbench::run_logged(&url, &prepared, CLIENTS, seconds, dir)?;
    let pgbench_profile = close(opened)?;
    super::psql(server, "DROP DATABASE IF EXISTS genjobs_bench_outside WITH (FORCE)")?;
    Ok(Submissions { genjobs, pgbench_tps, pgbench_p99_ms, statements: genjobs_profile.zip(pgbench_profile) })
}

/// Runs the scenario on `server` and writes `docs/benchmarks-outside.md`; then, given a server
/// that loads `pg_stat_statements` (`profiled`), runs the submissions once more there and writes
/// where Postgres spent their time to `docs/benchmarks-outside-statements.md`. The table's runs
/// are not profiled: counting every statement slows the reads measurably.
pub(super) async fn run(
    bin: &Path,
    server: &str,
    profiled: Option<&str>,
    sim: &str,
    seconds: u64,
) -> Result<(), Failure> {
    let dir = std::env::temp_dir().join(format!("genjobs-bench-outside-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    progress("outside 1/4 submissions with wrk, then pgbench -M prepared over the same accounts");
    let Submissions { genjobs: submissions, pgbench_tps, pgbench_p99_ms, .. } =
        submissions_run(bin, server, sim, &dir, seconds, false).await?;

    progress("outside 2/4 reads of jobs on Postgres with wrk");
    let url = fresh_database(server, "genjobs_bench_outside_reads")?;
    let app = spawn_genjobs(bin, &[("DATABASE_URL", url), ("GENJOBS_UPSTREAM_URL", sim.to_owned())])?;
    let users = create_users(&app.base, USERS).await?;
    let mut jobs = Vec::new();
    for (_, key) in &users {
        let api = Api::new(&app.base, key, 2);
        for id in scenarios::submit_many(&api, 2, 2, "read me").await {
            jobs.push((id, key.clone()));
        }
    }
    let reads = wrk(&app.base, Some(&read_script(&dir, &jobs)?), seconds)?;
    drop(app);

    progress("outside 3/4 the ceiling: a constant-JSON actix-web server");
    let listener = TcpListener::bind("127.0.0.1:0")?;
    // The ceiling serves any job id the same constant body.
    let base = format!("http://{}/api/v1/jobs/ceiling", listener.local_addr()?);
    let ceiling_server = genjobs_bench::baseline::server(listener, 2)?;
    let handle = ceiling_server.handle();
    tokio::spawn(ceiling_server);
    let ceiling = wrk(&base, None, seconds)?;
    handle.stop(false).await;
    super::psql(server, "DROP DATABASE IF EXISTS genjobs_bench_outside_reads WITH (FORCE)")?;

    let measured = Outside { submissions, pgbench_tps, pgbench_p99_ms, reads, ceiling, jobs: jobs.len() };
    write(Path::new("docs/benchmarks-outside.md"), &measured, seconds)?;
    progress(&format!(
        "   submissions {:.0}/s (p99 {:.1} ms) against pgbench {:.0} (p99 {:.1} ms); reads {:.0}/s against {:.0}; wrote docs/benchmarks-outside.md",
        submissions.per_sec, submissions.p99_ms, pgbench_tps, pgbench_p99_ms, reads.per_sec, ceiling.per_sec
    ));
    match profiled {
        Some(profiled) if statements::available(profiled)? => {
            progress("outside 4/4 the submissions again, with the statements of each side");
            let run = submissions_run(bin, profiled, sim, &dir, seconds, true).await?;
            if let Some((genjobs, baseline)) = &run.statements {
                write_profile(Path::new("docs/benchmarks-outside-statements.md"), &run, genjobs, baseline, seconds)?;
                progress("   wrote docs/benchmarks-outside-statements.md");
            }
        }
        _ => progress("outside 4/4 skipped: no server that loads pg_stat_statements (BENCH_PROFILED_DATABASE_URL)"),
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn write_profile(
    path: &Path,
    run: &Submissions,
    genjobs: &statements::Profile,
    baseline: &statements::Profile,
    seconds: u64,
) -> std::io::Result<()> {
    let doc = format!(
        "# Where Postgres spends a submission's time\n\n\
         Written by `genjobs-bench outside` after its table, from a submissions run of its own on a server that \
         loads `pg_stat_statements` (`just bench` starts one, `scripts/profiled-postgres.sh`; the table's runs are \
         not profiled, since counting every statement slows the reads): the statements of genjobs' database during \
         {seconds} s of submissions under wrk ({:.0}/s, p99 {:.1} ms), per job accepted, the costliest first. The \
         simulator holds every job for an hour, so a job here is accepted, handed to the driver, sent and recorded \
         as running. Below it, the same for pgbench's accept transaction run next ({:.0} tps, p99 {:.1} ms), the \
         baseline.\n\n## genjobs\n\n{}\n## pgbench `-M prepared`, the baseline\n\n{}",
        run.genjobs.per_sec,
        run.genjobs.p99_ms,
        run.pgbench_tps,
        run.pgbench_p99_ms,
        statements::table(genjobs),
        statements::table(baseline),
    );
    std::fs::write(path, doc)
}

struct Outside {
    submissions: Wrk,
    pgbench_tps: f64,
    pgbench_p99_ms: f64,
    reads: Wrk,
    ceiling: Wrk,
    jobs: usize,
}

fn write(path: &Path, m: &Outside, seconds: u64) -> std::io::Result<()> {
    let submit_ratio = m.submissions.per_sec / m.pgbench_tps.max(f64::EPSILON);
    let read_ratio = m.reads.per_sec / m.ceiling.per_sec.max(f64::EPSILON);
    let mut doc = String::from("# One replica, measured from outside\n\n");
    let _ = writeln!(
        doc,
        "Written by `genjobs-bench outside` (`just bench` runs it). One release build of genjobs on Postgres, \
         loaded by wrk (2 threads, {CLIENTS} connections, {seconds} s a run, each request with the key of one of \
         {USERS} users at random), next to its baselines measured in the same run on this 2-core machine, which \
         genjobs, Postgres, the simulator and wrk share; genjobs runs with its default settings (a pool of {} \
         database connections). Submissions: `POST /api/v1/images/generations`; their \
         baseline is pgbench running genjobs' accept transaction with `-M prepared` over the same {USERS} accounts \
         ({CLIENTS} clients). Reads: `GET /api/v1/jobs/{{id}}` of {} jobs on the Postgres store, by their owners; \
         their ceiling is a constant-JSON actix-web server under the same wrk.\n",
        genjobs_store_postgres::PgSettings::default().pool_size,
        m.jobs
    );
    doc.push_str("| what | genjobs (p99) | baseline, same run (p99) | ratio | target | |\n|---|---|---|---|---|---|\n");
    let _ = writeln!(
        doc,
        "| submissions/s | {:.0} ({:.1} ms), {} errors | pgbench `-M prepared`: {:.0} tps ({:.1} ms) | {submit_ratio:.2} | ≥ 0.6, p99 ≤ 50 ms | {} |",
        m.submissions.per_sec,
        m.submissions.p99_ms,
        m.submissions.errors,
        m.pgbench_tps,
        m.pgbench_p99_ms,
        verdict(submit_ratio >= 0.6 && m.submissions.p99_ms <= 50.0 && m.submissions.errors == 0)
    );
    let _ = writeln!(
        doc,
        "| GET job/s, Postgres store | {:.0} ({:.1} ms), {} errors | constant JSON: {:.0} ({:.1} ms) | {read_ratio:.2} | ≥ 0.35 | {} |",
        m.reads.per_sec,
        m.reads.p99_ms,
        m.reads.errors,
        m.ceiling.per_sec,
        m.ceiling.p99_ms,
        verdict(read_ratio >= 0.35 && m.reads.errors == 0)
    );
    std::fs::write(path, doc)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::float_cmp, reason = "test: exact values parsed from text")]

    use super::*;

    #[test]
    fn wrk_summaries_are_read_in_every_unit() {
        let text = "Running 10s test @ http://127.0.0.1:1\n  Latency Distribution\n     50%  1.20ms\n     99%  43.61ms\n\
                    23406 requests in 10.00s, 1.2MB read\n\
                    Non-2xx or 3xx responses: 12\nRequests/sec:   2340.55\nTransfer/sec:  1.2MB\n";
        let read = parse_wrk(text).unwrap();
        assert_eq!((read.per_sec, read.p99_ms, read.errors, read.requests), (2340.55, 43.61, 12, 23406));
        let micro = parse_wrk("     99%  850.00us\nRequests/sec: 1.0\n").unwrap();
        assert!((micro.p99_ms - 0.85).abs() < 1e-9);
        let secs =
            parse_wrk("     99%    1.50s\nSocket errors: connect 0, read 3, write 0, timeout 2\nRequests/sec: 1.0\n")
                .unwrap();
        assert_eq!((secs.p99_ms, secs.errors), (1500.0, 5));
        assert!(parse_wrk("no summary").is_none());
    }
}
