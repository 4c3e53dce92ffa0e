//! The submissions' baseline: genjobs' accept transaction run by pgbench on genjobs' own schema,
//! with the simple protocol and with `-M prepared` (what a client with a statement cache does).

use std::path::{Path, PathBuf};
use std::process::Command;

use genjobs_bench::load::percentile_ms;

use super::Failure;

/// The accept transaction of genjobs, as plain SQL: a conditional update of the account row, a
/// job row and a ledger row, for one of the bench users at random. With `prepared`, the job id
/// travels as a parameter (`:job_id` is bound, not pasted into the text).
pub(crate) fn scripts(dir: &Path, users: &[(String, String)], prepared: bool) -> Result<Vec<PathBuf>, Failure> {
    let returning = if prepared { "id" } else { "quote_literal(id)" };
    users
        .iter()
        .enumerate()
        .map(|(i, (id, _))| {
            let path = dir.join(format!("accept-{i}{}.sql", if prepared { "-prepared" } else { "" }));
            std::fs::write(
                &path,
                format!(
                    "BEGIN;\n\
                     UPDATE users SET credits_available = credits_available - 4, credits_held = credits_held + 4, active_jobs = active_jobs + 1 \
                     WHERE id = '{id}' AND credits_available >= 4 AND active_jobs < max_concurrent_jobs;\n\
                     INSERT INTO jobs (id, user_id, model, modality, state, progress, created_at, credits_held, input, rate_per, rate_credits, submit_attempted, poll_failures, version) \
                     VALUES (gen_random_uuid(), '{id}', 'nano-banana', 'image', 'queued', 0, now(), 4, '{{\"prompt\":\"bench\"}}', 'image', 4, false, 0, 0) RETURNING {returning} AS job_id \\gset\n\
                     INSERT INTO ledger (user_id, job_id, kind, amount) VALUES ('{id}', :job_id, 'hold', 4);\n\
                     END;\n"
                ),
            )?;
            Ok(path)
        })
        .collect()
}

/// Runs `scripts` with `clients` clients for `seconds`; the transactions per second.
pub(crate) fn run(
    url: &str,
    scripts: &[PathBuf],
    clients: usize,
    seconds: u64,
    prepared: bool,
) -> Result<f64, Failure> {
    let mut command = Command::new("pgbench");
    command.args(["-n", "-c", &clients.to_string(), "-j", "2", "-T", &seconds.to_string()]);
    if prepared {
        command.args(["-M", "prepared"]);
    }
    for script in scripts {
        command.arg("-f").arg(format!("{}@1", script.display()));
    }
    let output = command.arg(url).output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = ").and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok()))
        .ok_or_else(|| format!("no tps in pgbench output: {text}{}", String::from_utf8_lossy(&output.stderr)).into())
}

/// Runs `scripts` at a fixed `rate` (transactions per second, an open loop: pgbench schedules
/// each start in advance) with `clients` clients for `seconds`; the p50 and p99 latencies in
/// milliseconds, each counted from the transaction's scheduled start, as genjobs' open loop
/// counts them. pgbench logs each transaction's time and its lag behind the schedule.
pub(crate) fn run_at_rate(
    url: &str,
    scripts: &[PathBuf],
    clients: usize,
    seconds: u64,
    rate: f64,
    log_dir: &Path,
) -> Result<(f64, f64), Failure> {
    let prefix = log_dir.join("open-loop");
    let mut command = Command::new("pgbench");
    command.args(["-n", "-M", "prepared", "-c", &clients.to_string(), "-j", "2", "-T", &seconds.to_string()]);
    command.args(["-R", &format!("{rate:.0}"), "--log", "--log-prefix"]).arg(&prefix);
    for script in scripts {
        command.arg("-f").arg(format!("{}@1", script.display()));
    }
    let output = command.arg(url).output()?;
    if !output.status.success() {
        return Err(format!("pgbench at a fixed rate failed: {}", String::from_utf8_lossy(&output.stderr)).into());
    }
    let mut latencies_us = Vec::new();
    for entry in std::fs::read_dir(log_dir)? {
        let path = entry?.path();
        if !path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("open-loop")) {
            continue;
        }
        for line in std::fs::read_to_string(&path)?.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if let (Some(Ok(time)), Some(Ok(lag))) =
                (fields.get(2).map(|v| v.parse::<u32>()), fields.get(6).map(|v| v.parse::<u32>()))
            {
                latencies_us.push(time.saturating_add(lag));
            }
        }
        std::fs::remove_file(&path)?;
    }
    if latencies_us.is_empty() {
        return Err("pgbench logged no transaction".into());
    }
    latencies_us.sort_unstable();
    Ok((percentile_ms(&latencies_us, 0.50), percentile_ms(&latencies_us, 0.99)))
}
