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
    let output = closed_loop(scripts, clients, seconds, prepared).arg(url).output()?;
    tps(&output)
}

/// As [`run`] with `-M prepared`, and the 99th percentile of the transactions' times in milliseconds, from
/// pgbench's log of each transaction written under `log_dir`.
pub(crate) fn run_logged(
    url: &str,
    scripts: &[PathBuf],
    clients: usize,
    seconds: u64,
    log_dir: &Path,
) -> Result<(f64, f64), Failure> {
    let prefix = log_dir.join("closed-loop");
    let output =
        closed_loop(scripts, clients, seconds, true).arg("--log").arg("--log-prefix").arg(&prefix).arg(url).output()?;
    let tps = tps(&output)?;
    let latencies_us = logged_latencies(log_dir, "closed-loop", false)?;
    Ok((tps, percentile_ms(&latencies_us, 0.99)))
}

fn closed_loop(scripts: &[PathBuf], clients: usize, seconds: u64, prepared: bool) -> Command {
    let mut command = Command::new("pgbench");
    command.args(["-n", "-c", &clients.to_string(), "-j", "2", "-T", &seconds.to_string()]);
    if prepared {
        command.args(["-M", "prepared"]);
    }
    for script in scripts {
        command.arg("-f").arg(format!("{}@1", script.display()));
    }
    command
}

fn tps(output: &std::process::Output) -> Result<f64, Failure> {
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = ").and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok()))
        .ok_or_else(|| format!("no tps in pgbench output: {text}{}", String::from_utf8_lossy(&output.stderr)).into())
}

/// The times of the transactions pgbench logged under `log_dir` with `prefix`, in microseconds,
/// sorted, each with its lag behind the schedule added when `with_lag`; the logs are removed.
fn logged_latencies(log_dir: &Path, prefix: &str, with_lag: bool) -> Result<Vec<u32>, Failure> {
    let mut latencies_us = Vec::new();
    for entry in std::fs::read_dir(log_dir)? {
        let path = entry?.path();
        if !path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)) {
            continue;
        }
        for line in std::fs::read_to_string(&path)?.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let lag = if with_lag { fields.get(6).and_then(|v| v.parse::<u32>().ok()) } else { Some(0) };
            if let (Some(Ok(time)), Some(lag)) = (fields.get(2).map(|v| v.parse::<u32>()), lag) {
                latencies_us.push(time.saturating_add(lag));
            }
        }
        std::fs::remove_file(&path)?;
    }
    if latencies_us.is_empty() {
        return Err("pgbench logged no transaction".into());
    }
    latencies_us.sort_unstable();
    Ok(latencies_us)
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
    let latencies_us = logged_latencies(log_dir, "open-loop", true)?;
    Ok((percentile_ms(&latencies_us, 0.50), percentile_ms(&latencies_us, 0.99)))
}
