//! Writes `docs/benchmarks.md` from one run's figures, keeping the history of runs in
//! `docs/benchmarks-history.jsonl` and the hand-written reading in `docs/benchmarks-notes.md`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::Figures;

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned()))
        })
        .unwrap_or_default();
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_owned()))
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or_else(String::new, |kib| format!("{:.0} GiB", kib as f64 / 1024.0 / 1024.0));
    format!(
        "{} cores ({cpu}), {memory}; Postgres, the load generator and the simulator share them",
        command_output("nproc", &[])
    )
}

pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**missed**" }
}

fn per_stream_kib(f: &Figures) -> f64 {
    f.streams_rss_after_kib.saturating_sub(f.streams_rss_before_kib) as f64 / f.streams.opened.max(1) as f64
}

/// Writes the report and appends the run to the history.
///
/// # Errors
/// When a file cannot be written.
pub fn write(
    dir: &Path,
    f: &Figures,
    seconds: u64,
    clients: usize,
    streams: usize,
    driver_jobs: usize,
) -> std::io::Result<()> {
    let submit_ratio = f.submissions.per_sec / f.pgbench_tps.max(f64::EPSILON);
    let pg_ratio = f.reads_postgres.per_sec / f.reads_baseline.per_sec.max(f64::EPSILON);
    let mem_ratio = f.reads_memory.per_sec / f.reads_baseline.per_sec.max(f64::EPSILON);
    let kib = per_stream_kib(f);
    let date =
        time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    let commit = command_output("git", &["rev-parse", "--short", "HEAD"]);

    let history_path = dir.join("benchmarks-history.jsonl");
    let line = json!({
        "date": date, "commit": commit,
        "submissions_per_sec": f.submissions.per_sec, "pgbench_tps": f.pgbench_tps, "submit_ratio": submit_ratio,
        "submit_p99_ms": f.submissions.p99_ms,
        "reads_pg_ratio": pg_ratio, "reads_mem_ratio": mem_ratio,
        "kib_per_stream": kib, "stream_finals": f.streams.finals, "streams_opened": f.streams.opened,
        "polls_per_job_interval": f.economy.per_job_per_interval,
        "wakeup_one_p99_ms": f.wakeup_one.p99_ms, "wakeup_two_p99_ms": f.wakeup_two.p99_ms,
        "driver_within": f.driver.within_20_percent, "driver_cores": f.driver.service_cores,
        "status_calls_per_job_webhooks": f.webhooks.with_webhooks,
        "submit_ratio_prepared": f.submissions.per_sec / f.pgbench_prepared_tps.max(f64::EPSILON),
        "open_loop_p99_ms": f.submissions_open.p99_ms,
        "commits_per_job": f.job_cost.commits_per_job,
        "durable_commits_per_job": f.job_cost.durable_commits_per_job,
        "wal_bytes_per_job": f.job_cost.wal_bytes_per_job,
        "copy_ratio": f.copy.store_mb_per_sec / f.copy.cp_mb_per_sec.max(f64::EPSILON),
        "figures": f,
    });
    let mut history = std::fs::OpenOptions::new().create(true).append(true).open(&history_path)?;
    writeln!(history, "{line}")?;

    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Written by `just bench` (`scripts/bench.sh`, then `target/release/genjobs-bench`); do not edit by hand:"
    );
    let _ = writeln!(md, "the reading below comes from `docs/benchmarks-notes.md`.\n");
    let _ = writeln!(md, "- Run: {date}, commit `{commit}`");
    let _ = writeln!(md, "- Machine: {}", machine());
    let _ = writeln!(
        md,
        "- Load: closed loop, {clients} clients, {seconds} s per run, reqwest (HTTP/1.1 keep-alive); genjobs logs at `warn`; Postgres store unless said otherwise; poll interval 2 s; genjobs runs with its default pool ({} connections) everywhere\n",
        genjobs_store_postgres::PgSettings::default().pool_size
    );
    let _ = writeln!(md, "| # | what | genjobs | baseline (same run) | ratio | target | |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    let _ = writeln!(
        md,
        "| 1 | submissions/s (p50 / p99) | {:.0} ({:.1} / {:.1} ms) | pgbench, same transaction: {:.0} tps | {:.2} | ≥ 0.6, p99 ≤ 50 ms | {} |",
        f.submissions.per_sec,
        f.submissions.p50_ms,
        f.submissions.p99_ms,
        f.pgbench_tps,
        submit_ratio,
        verdict(submit_ratio >= 0.6 && f.submissions.p99_ms <= 50.0)
    );
    let prepared_ratio = f.submissions.per_sec / f.pgbench_prepared_tps.max(f64::EPSILON);
    let _ = writeln!(
        md,
        "| 1b | submissions/s against pgbench `-M prepared` | {:.0} | pgbench `-M prepared`, same transaction: {:.0} tps | {prepared_ratio:.2} | ≥ 0.6 | {} |",
        f.submissions.per_sec,
        f.pgbench_prepared_tps,
        verdict(prepared_ratio >= 0.6)
    );
    let o = &f.submissions_open;
    let _ = writeln!(
        md,
        "| 1c | submissions, open loop at half the closed loop's rate after 1 s unmeasured: p50 / p99; errors | {:.1} / {:.1} ms; {} of {} | pgbench `-M prepared` at that rate, same transaction: {:.1} / {:.1} ms | | p99 ≤ 50 ms | {} |",
        o.p50_ms,
        o.p99_ms,
        o.errors,
        o.ok + o.errors,
        f.pgbench_open.0,
        f.pgbench_open.1,
        verdict(o.p99_ms <= 50.0 && o.errors == 0)
    );
    let _ = writeln!(
        md,
        "| 2a | reads/s, Postgres store (p99) | {:.0} ({:.1} ms) | constant handler: {:.0} | {:.2} | ≥ 0.35 | {} |",
        f.reads_postgres.per_sec,
        f.reads_postgres.p99_ms,
        f.reads_baseline.per_sec,
        pg_ratio,
        verdict(pg_ratio >= 0.35)
    );
    let _ = writeln!(
        md,
        "| 2b | reads/s, in-memory store (p99) | {:.0} ({:.1} ms) | constant handler: {:.0} | {:.2} | ≥ 0.7 | {} |",
        f.reads_memory.per_sec,
        f.reads_memory.p99_ms,
        f.reads_baseline.per_sec,
        mem_ratio,
        verdict(mem_ratio >= 0.7)
    );
    let _ = writeln!(
        md,
        "| 3 | {streams} open streams: RSS growth per stream; final events | {kib:.1} KiB; {} of {} | RSS before: {} KiB | | ≤ 16 KiB; all | {} |",
        f.streams.finals,
        f.streams.opened,
        f.streams_rss_before_kib,
        verdict(kib <= 16.0 && f.streams.finals == f.streams.opened && f.streams.opened as usize == streams)
    );
    let _ = writeln!(
        md,
        "| 4 | status calls per job per interval, 1000 waiters on 100 jobs | {:.3} ({} calls) | | | ≤ 1.05 | {} |",
        f.economy.per_job_per_interval,
        f.economy.status_calls,
        verdict(f.economy.per_job_per_interval <= 1.05)
    );
    let _ = writeln!(
        md,
        "| 5 | wake-up p50 / p99, one replica; two replicas | {:.1} / {:.1} ms; {:.1} / {:.1} ms | | | p99 ≤ 50; ≤ 100 ms | {} |",
        f.wakeup_one.p50_ms,
        f.wakeup_one.p99_ms,
        f.wakeup_two.p50_ms,
        f.wakeup_two.p99_ms,
        verdict(f.wakeup_one.p99_ms <= 50.0 && f.wakeup_two.p99_ms <= 100.0)
    );
    let _ = writeln!(
        md,
        "| 6 | {driver_jobs} running jobs: polls within ±20 % of 2 s (p50 / p99 interval); service CPU | {:.1} % ({:.0} / {:.0} ms); {:.2} cores | | | all; < 1 core | {} |",
        f.driver.within_20_percent * 100.0,
        f.driver.p50_interval_ms,
        f.driver.p99_interval_ms,
        f.driver.service_cores,
        verdict(f.driver.within_20_percent >= 0.99 && f.driver.service_cores < 1.0)
    );
    let w = &f.webhooks;
    let _ = writeln!(
        md,
        "| 7 | status calls per job over its life, {} jobs of {} s, nobody watching, webhooks on (fallback poll 60 s); succeeded | {:.2}; {} of {} | polling only: {:.2}; {} of {} | {:.2} | ≤ 2 | {} |",
        w.jobs,
        w.job_secs,
        w.with_webhooks,
        w.succeeded.0,
        w.jobs,
        w.polling_only,
        w.succeeded.1,
        w.jobs,
        w.with_webhooks / w.polling_only.max(f64::EPSILON),
        verdict(w.with_webhooks <= 2.0 && w.succeeded.0 == w.jobs)
    );
    let c = &f.copy;
    let copy_ratio = c.store_mb_per_sec / c.cp_mb_per_sec.max(f64::EPSILON);
    let _ = writeln!(
        md,
        "| 8 | copy of a {:.0} MB output into a `file://` store, over loopback HTTP, streamed (best of 3) | {:.0} MB/s | `cp` of the same file, same disk: {:.0} MB/s | {copy_ratio:.2} | | |",
        c.bytes as f64 / 1e6,
        c.store_mb_per_sec,
        c.cp_mb_per_sec
    );
    let j = &f.job_cost;
    let _ = writeln!(
        md,
        "| 9 | one job from accept to final, no progress ({} jobs, one at a time): durable job commits (genjobs' count); relaxed ones; all commits, reads included (Postgres); WAL flushes; WAL bytes; rows written | {:.2}; {:.2}; {:.2}; {:.2}; {:.0}; {:.2} | | | ≤ 3 durable commits | {} |\n",
        j.jobs,
        j.durable_commits_per_job,
        j.relaxed_commits_per_job,
        j.commits_per_job,
        j.wal_syncs_per_job,
        j.wal_bytes_per_job,
        j.rows_written_per_job,
        verdict(j.durable_commits_per_job <= 3.0)
    );
    let tables: Vec<String> = j.rows_by_table.iter().map(|(table, rows)| format!("`{table}` {rows:.2}")).collect();
    let _ = writeln!(md, "Row 9's rows written per job, by table: {}.\n", tables.join(", "));

    let _ = writeln!(md, "## History\n");
    let _ = writeln!(
        md,
        "| run | commit | submit ratio (p99) | reads pg / mem ratio | KiB/stream | polls/job/interval | wake-up p99 one / two | driver within ±20 % (cores) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for run in std::fs::read_to_string(&history_path)?.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        let n = |k: &str| run[k].as_f64().unwrap_or(0.0);
        let _ = writeln!(
            md,
            "| {} | `{}` | {:.2} ({:.1} ms) | {:.2} / {:.2} | {:.1} | {:.3} | {:.1} / {:.1} ms | {:.1} % ({:.2}) |",
            run["date"].as_str().unwrap_or(""),
            run["commit"].as_str().unwrap_or(""),
            n("submit_ratio"),
            n("submit_p99_ms"),
            n("reads_pg_ratio"),
            n("reads_mem_ratio"),
            n("kib_per_stream"),
            n("polls_per_job_interval"),
            n("wakeup_one_p99_ms"),
            n("wakeup_two_p99_ms"),
            n("driver_within") * 100.0,
            n("driver_cores")
        );
    }
    if let Ok(notes) = std::fs::read_to_string(dir.join("benchmarks-notes.md")) {
        let _ = writeln!(md, "\n{notes}");
    }
    std::fs::write(dir.join("benchmarks.md"), md)
}
