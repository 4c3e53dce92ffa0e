//! `genjobs-bench capacity`: fair capacity on Postgres (issue 39). One fal key capped at 4 jobs
//! in flight (`GENJOBS_UPSTREAM_MAX_IN_FLIGHT=4`), jobs of 100 ms at the simulator; one user
//! submits 1,000 jobs at once, another 10 jobs one at a time while the burst drains. Measured: the
//! second user's wait (accepted → sent, from the jobs' own timestamps), the first user's for
//! comparison, how long the whole drains, and the scheduler's cost per job sent: the statements
//! of taking a slot (the advisory lock, the counts, the fair rank, the writes) from
//! `pg_stat_statements`, where the server loads it. Writes `docs/benchmarks-capacity.md`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::report::verdict;
use super::statements::{self, query};
use super::{Failure, create_users, fresh_database, progress, psql, spawn_genjobs};

/// The cap of the one fal key.
const CAP: u64 = 4;
/// The first user's burst.
const BURST: usize = 1_000;
/// The second user's jobs.
const SMALL: usize = 10;
/// How long a job runs at the simulator.
const RUN_MS: &str = "100";
/// The replica's poll interval: a slot frees when a poll sees its job final.
const POLL_MS: &str = "50";
/// Clients submitting the burst at once.
const CLIENTS: usize = 16;
/// How long after the second user's last job the run waits for the burst to drain.
const PATIENCE: Duration = Duration::from_secs(90);

/// What the statements of taking a slot contain, as `pg_stat_statements` normalises them (its
/// literals become parameters): the provider's lock, the fair rank, the counts per key, the
/// writes of the job's place.
const TAKE_SLOT_STATEMENTS: [&str; 4] =
    ["pg_advisory_xact_lock", "WITH busy AS", "SELECT slot_key, count(*)", "SET \"slot_provider\""];

/// The waits of one user's jobs, in seconds: (accepted → sent) for each job sent.
fn waits(url: &str, user: &str) -> Result<Vec<f64>, Failure> {
    let text = query(
        url,
        &format!(
            "SELECT extract(epoch FROM sent_at - created_at) FROM jobs \
             WHERE user_id = '{user}' AND sent_at IS NOT NULL ORDER BY created_at"
        ),
    )?;
    Ok(text.lines().filter_map(|line| line.trim().parse().ok()).collect())
}

pub(super) fn percentile(values: &[f64], share: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let index = ((sorted.len() as f64 - 1.0) * share).round() as usize;
    sorted.get(index).copied().unwrap_or(0.0)
}

/// The take-slot statements' calls and time since the statistics were reset: (calls, ms, the
/// advisory locks taken, i.e. the take-slot transactions).
fn take_slot_cost(url: &str) -> Result<(u64, f64, u64), Failure> {
    let like = TAKE_SLOT_STATEMENTS.iter().map(|s| format!("s.query LIKE '%{s}%'")).collect::<Vec<_>>().join(" OR ");
    let text = query(
        url,
        &format!(
            "SELECT coalesce(sum(s.calls), 0), coalesce(sum(s.total_exec_time), 0), \
                coalesce(sum(s.calls) FILTER (WHERE s.query LIKE '%pg_advisory_xact_lock%'), 0) \
             FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
             WHERE d.datname = current_database() AND ({like})"
        ),
    )?;
    let mut fields = text.trim().split('\t');
    let mut next = || fields.next().and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    let (calls, ms, locks) = (next(), next(), next());
    Ok((calls as u64, ms, locks as u64))
}

/// Submits one job, again after a 503 (as a client does; the database pool may be busy with
/// the waiting jobs' attempts at a slot); how many 503s it took.
async fn submit(client: &reqwest::Client, base: &str, key: &str, prompt: String) -> Result<u64, String> {
    let mut refused = 0;
    loop {
        let response = client
            .post(format!("{base}/api/v1/images/generations"))
            .bearer_auth(key)
            .json(&json!({"prompt": prompt}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        match response.status().as_u16() {
            202 => return Ok(refused),
            503 if refused < 50 => {
                refused += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            status => return Err(format!("a submission was answered {status}")),
        }
    }
}

/// What the run measured.
struct Measured {
    small: Vec<f64>,
    big: Vec<f64>,
    /// How long the burst's submissions took, and how many were answered 503 first.
    submitted_in: Duration,
    refused: u64,
    drained: Duration,
    sent: u64,
    /// (statements, ms, take-slot transactions) of taking slots, when profiled.
    take_slot: Option<(u64, f64, u64)>,
    /// All statements' calls and ms per job, and commits per job, when profiled.
    overall: Option<statements::Profile>,
}

/// Runs the scenario on the server of `server` against the simulator at `sim`, and writes
/// `docs/benchmarks-capacity.md`.
pub(super) async fn run(bin: &Path, server: &str, sim: &str) -> Result<(), Failure> {
    let url = fresh_database(server, "genjobs_bench_capacity")?;
    let envs = [
        ("DATABASE_URL", url.clone()),
        ("GENJOBS_UPSTREAM_URL", sim.to_owned()),
        ("GENJOBS_UPSTREAM_KEY", "bench-capacity-key-cccc".to_owned()),
        ("GENJOBS_UPSTREAM_MAX_IN_FLIGHT", CAP.to_string()),
        ("GENJOBS_POLL_INTERVAL_MS", POLL_MS.to_owned()),
    ];
    let app = spawn_genjobs(bin, &envs)?;
    let users = create_users(&app.base, 2).await?;
    let ((big_id, big_key), (small_id, small_key)) = (users[0].clone(), users[1].clone());
    let profiled = statements::available(&url)?;
    let window = if profiled { Some(statements::Window::open(&url)?) } else { None };

    progress(&format!("capacity 1/2 a burst of {BURST} jobs, cap {CAP}"));
    let client = reqwest::Client::builder().pool_max_idle_per_host(CLIENTS).build()?;
    let started = Instant::now();
    let burst = (0..CLIENTS).map(|worker| {
        let (client, base, key) = (client.clone(), app.base.clone(), big_key.clone());
        tokio::spawn(async move {
            let mut refused = 0;
            for n in (worker..BURST).step_by(CLIENTS) {
                refused += submit(&client, &base, &key, format!("burst {n} [sim:run={RUN_MS}]")).await?;
            }
            Ok::<u64, String>(refused)
        })
    });
    let mut refused = 0;
    for done in futures_util::future::join_all(burst).await {
        refused += done?.map_err(|e| format!("the burst: {e}"))?;
    }
    let submitted_in = started.elapsed();

    progress(&format!("capacity 2/2 {SMALL} jobs of another user while the burst drains"));
    // Spread over the burst's expected drain: 1,000 jobs, 4 at a time, about 150 ms each.
    let spacing = Duration::from_millis(2_000);
    for n in 0..SMALL {
        refused += submit(&client, &app.base, &small_key, format!("small {n} [sim:run={RUN_MS}]")).await?;
        tokio::time::sleep(spacing).await;
    }
    let total = BURST + SMALL;
    // The whole burst may take long to drain where the scheduler is slow: the run ends once it
    // drained, or once the second user's jobs are all final and `PATIENCE` has passed.
    let patience = Instant::now() + PATIENCE;
    let deadline = Instant::now() + Duration::from_secs(600);
    let open = |condition: &str| -> Result<u64, Failure> {
        let sql = format!("SELECT count(*) FROM jobs WHERE state IN ('queued', 'running') {condition}");
        Ok(query(&url, &sql)?.trim().parse()?)
    };
    let small_condition = format!("AND user_id = '{small_id}'");
    loop {
        let (all, small) = (open("")?, open(&small_condition)?);
        if all == 0 || (small == 0 && Instant::now() > patience) {
            break;
        }
        if Instant::now() > deadline {
            return Err(
                format!("{all} of {total} jobs, {small} of the second user's, still open after 10 minutes").into()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drained = started.elapsed();
    let take_slot = if profiled { Some(take_slot_cost(&url)?) } else { None };
    let overall = window.map(|w| w.close(&url)).transpose()?;
    let sent: u64 = query(&url, "SELECT count(*) FROM jobs WHERE sent_at IS NOT NULL")?.trim().parse()?;
    let measured = Measured {
        small: waits(&url, &small_id)?,
        big: waits(&url, &big_id)?,
        submitted_in,
        refused,
        drained,
        sent,
        take_slot,
        overall,
    };
    drop(app);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_capacity WITH (FORCE)")?;
    write(Path::new("docs/benchmarks-capacity.md"), &measured)?;
    progress("wrote docs/benchmarks-capacity.md");
    Ok(())
}

fn write(path: &Path, m: &Measured) -> Result<(), Failure> {
    let small_median = percentile(&m.small, 0.5);
    let run_s = RUN_MS.parse::<f64>().unwrap_or(0.0) / 1000.0;
    let mut doc = format!(
        "# Fair capacity: a burst and a trickle on one capped key\n\n\
         Generated by `genjobs-bench capacity` (`scripts/bench.sh`). One replica on Postgres, one fal key capped at \
         {CAP} jobs in flight (`GENJOBS_UPSTREAM_MAX_IN_FLIGHT={CAP}`), jobs of {RUN_MS} ms at the simulator, a poll \
         every {POLL_MS} ms. One user submits {BURST} jobs at once ({CLIENTS} clients); then another submits {SMALL} \
         jobs, one every 2 s, while the burst drains. A wait is from a job's `created_at` to its `sent_at` (the \
         moment fal took it), as the jobs table keeps them. Built {}.\n\n\
         | figure | value | target |\n|---|---|---|\n",
        if cfg!(debug_assertions) { "for debugging (`cargo build`)" } else { "for release" }
    );
    let _ = writeln!(
        doc,
        "| second user's median wait | {:.3} s | within one job ({run_s:.1} s) and a poll: {} |",
        small_median,
        verdict(small_median <= run_s + 0.2)
    );
    let _ = writeln!(doc, "| second user's longest wait | {:.3} s | |", m.small.iter().copied().fold(0.0, f64::max));
    let _ = writeln!(
        doc,
        "| first user's median / longest wait | {:.1} s / {:.1} s | (its own burst, {CAP} at a time) |",
        percentile(&m.big, 0.5),
        m.big.iter().copied().fold(0.0, f64::max)
    );
    let _ = writeln!(
        doc,
        "| the burst's {BURST} submissions took | {:.1} s; {} answers 503 first (tried again) | none refused |",
        m.submitted_in.as_secs_f64(),
        m.refused
    );
    let _ = writeln!(
        doc,
        "| jobs sent | {} of {} in {:.1} s ({:.1} jobs/s){} | {:.0} jobs/s ({CAP} at a time, {RUN_MS} ms each) |",
        m.sent,
        BURST + SMALL,
        m.drained.as_secs_f64(),
        m.sent as f64 / m.drained.as_secs_f64().max(f64::EPSILON),
        if m.sent < (BURST + SMALL) as u64 { ", the run stopped before the burst drained" } else { "" },
        CAP as f64 / run_s.max(f64::EPSILON)
    );
    let sent = m.sent.max(1) as f64;
    match (&m.take_slot, &m.overall) {
        (Some((calls, ms, transactions)), Some(overall)) => {
            let _ = writeln!(
                doc,
                "| take-slot transactions per job sent | {:.2} | (a job that finds no free slot tries again when one frees) |",
                *transactions as f64 / sent
            );
            let _ = writeln!(
                doc,
                "| take-slot statements per job sent | {:.2} ({:.3} ms of statement time, waits for the provider's lock included) | |",
                *calls as f64 / sent,
                ms / sent
            );
            let _ = writeln!(
                doc,
                "| all statements per job sent | {:.1} ({:.3} ms), {:.2} commits | take-slot's share {:.0} % of the time |",
                overall.calls as f64 / sent,
                overall.total_ms / sent,
                overall.commits as f64 / sent,
                100.0 * ms / overall.total_ms.max(f64::EPSILON)
            );
            doc.push_str("\nThe costliest statements of the run, per job accepted:\n\n");
            doc.push_str(&statements::table(overall));
        }
        _ => doc.push_str(
            "\nThe server does not load `pg_stat_statements`: the scheduler's cost is not measured in this run \
             (`scripts/bench.sh` runs it on `scripts/profiled-postgres.sh`'s cluster, which does).\n",
        ),
    }
    let small: Vec<String> = m.small.iter().map(|w| format!("{w:.3}")).collect();
    let _ = writeln!(doc, "\nThe second user's waits, in seconds, in order: {}.", small.join(", "));
    std::fs::write(path, doc)?;
    Ok(())
}
