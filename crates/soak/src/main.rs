//! # genjobs-soak
//!
//! A chaos soak, run by `just soak` (30 s in CI, `just soak --secs 600` for a long run): two
//! `genjobs` replicas on one Postgres database and the fal simulator in a process of its own,
//! failing one call in ten at random (503s, 500s, hangs, cut-off JSON, dropped connections), and
//! the Replicate simulator, to which flux-pro falls back when fal refuses it (and which refuses or
//! answers 500 to a share of its own). Clients
//! submit (with and without `Idempotency-Key`, retried and in parallel), cancel (racing the
//! completions), read, long-poll, stream and list, while each replica is killed with SIGKILL and
//! restarted, fal is down for a fifth of the run (flux-pro then runs at Replicate), and every
//! database session is terminated now and then. Meanwhile the `conn` phase (`conn.rs`) stalls
//! request bodies, which must be answered 408 and closed by the body deadline, and sends
//! made-up methods, which must be answered in the envelope and never become metric labels; and
//! the `boundaries` phase (`boundaries.rs`) runs a user's tree of budgeted keys while a client
//! hammers every replica with a revoked key from the same address: the tree's keys and the
//! admin token must never be refused 429 for it, and no key of the tree may end over its budget
//! nor any parent's `used` differ from its children's together.
//!
//! At the end it checks, for every user: available + held + spent = granted, nothing held, spent
//! = the sum of `credits_actual`; every accepted job final and listed; no idempotent retry answered
//! with another job; no 5xx but a 503 while the database was away; every error in the envelope.
//! The replicas send to fal with two keys capped at 4 jobs in flight each; besides the random
//! clients, one user bursts many jobs and one submits a job now and then, each with a key of its
//! own that has a budget and a model allowlist (`appetite`). At the end it also checks
//! (`capacity`): no fal key ever above its cap at the simulator, and none in the replicas'
//! figures sampled every second; every slot returned and nothing waiting; no job sent to fal
//! twice; each of the small user's jobs sent within about one job duration of its acceptance,
//! or else with no more than one of the big user's jobs per key sent while it waited (slots held
//! by calls that chaos made hang free late, which is no unfairness); those that waited across a
//! kill, fal's outage or a database cut, or whose own submission a fault struck, left out and
//! counted; per
//! budgeted key, `used` equal to what its jobs hold and were charged, never above its budget, and
//! 402 `KEY_BUDGET_EXCEEDED` seen once the big user's budget is spent.
//! The replicas check every job with a moderation service of their own (a simulator process that
//! fails a share of its checks), and one user's prompts are flagged a third of the time
//! (`moderation`): no flagged job may reach a provider or be charged, and every one must fail
//! `CONTENT_REFUSED`.
//! One user submits small batches now and then and cancels every third (`batches`): every item
//! must end once, be sent at most once and be charged exactly once, and every batch must end in
//! the state its cancel calls for, with counts that add up.
//! It prints the figures and exits 1 on any violation.
//!
//! `--bin-dir` names where the `genjobs`, `genjobs-upstream-sim` and
//! `genjobs-upstream-replicate-sim` binaries are (built first by `just soak`); `DATABASE_URL` or the local server gives the Postgres server.

mod appetite;
mod batches;
mod boundaries;
mod capacity;
mod checks;
mod clients;
mod clock;
mod conn;
mod costs;
mod moderation;
mod processes;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use checks::{Report, settle_and_check};
use clients::{Client, Shared, merge};
use clock::epoch_now;
use processes::{Cluster, JOB_TIMEOUT_SECS, LEASE_SECS, terminate_sessions};

/// Credits each user starts with.
const GRANTED: u64 = 100_000;

/// The big user's budgeted key: less than the half of one burst it submits with that key.
const BIG_BUDGET: u64 = 40;

/// The small user's budgeted key, per day: more than a long run spends.
const SMALL_BUDGET: u64 = 4_000;

/// The batch user's concurrency limit: its items wait for it, never refused.
const BATCH_USER_MAX_CONCURRENT_JOBS: u64 = 4;

/// How long after a replica restarts or fal comes back a job's wait is still the chaos's doing:
/// the lease of the dead replica's jobs, and a second's catching up.
const AFTERMATH: Duration = Duration::from_secs(LEASE_SECS + 1);

/// The same after database sessions are cut: the replicas reconnect and listen again.
const RECONNECT: Duration = Duration::from_secs(1);

struct Args {
    secs: u64,
    bin_dir: PathBuf,
    clients: usize,
    chaos: f64,
}

fn args() -> Result<Args, String> {
    let mut args = Args { secs: 30, bin_dir: PathBuf::from("target/debug"), clients: 6, chaos: 0.1 };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        let mut value = || words.next().ok_or_else(|| format!("{word} needs a value"));
        match word.as_str() {
            "--secs" => args.secs = value()?.parse().map_err(|_| "--secs takes whole seconds")?,
            "--bin-dir" => args.bin_dir = PathBuf::from(value()?),
            "--clients" => args.clients = value()?.parse().map_err(|_| "--clients takes a number")?,
            "--chaos" => args.chaos = value()?.parse().map_err(|_| "--chaos takes a probability")?,
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: genjobs-soak [--secs N] [--bin-dir DIR] [--clients N] [--chaos P]"
                ));
            }
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match args() {
        Ok(args) => args,
        Err(usage) => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let logs = processes::logs_dir().display();
    match soak(args).await {
        Ok(report) if report.violations.is_empty() => {
            report.print();
            let _ = std::fs::remove_dir_all(processes::logs_dir());
            ExitCode::SUCCESS
        }
        Ok(report) => {
            report.print();
            println!("soak: the processes' logs are kept in {logs}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("soak could not run: {error}; the processes' logs are kept in {logs}");
            ExitCode::FAILURE
        }
    }
}

async fn soak(args: Args) -> Result<Report, String> {
    let db = genjobs_test_postgres::TestDatabase::new().await;
    let cluster = Arc::new(Cluster::start(&args.bin_dir, &db.url, args.chaos)?);
    let shared = Arc::new(Shared::new(Arc::clone(&cluster)));
    let mut users = Vec::new();
    for i in 0..args.clients {
        users.push(shared.create_user(&format!("soak-{i}"), GRANTED).await?);
    }
    println!(
        "soak: {} s, {} clients, chaos {}, replicas at {:?}",
        args.secs,
        args.clients,
        args.chaos,
        cluster.bases()
    );

    let big = shared.create_appetite("soak-big", GRANTED, 500, BIG_BUDGET, "total").await?;
    let small = shared.create_appetite("soak-small", GRANTED, 10, SMALL_BUDGET, "day").await?;

    let tree = boundaries::plant(&shared, GRANTED).await?;
    let moderated = shared.create_user("soak-moderated", GRANTED).await?;
    let batcher = shared.create_user_with("soak-batches", GRANTED, BATCH_USER_MAX_CONCURRENT_JOBS).await?;

    let run_started = Instant::now();
    let deadline = run_started + Duration::from_secs(args.secs);
    let appetites = {
        let (shared, big, small) = (Arc::clone(&shared), big.clone(), small.clone());
        tokio::spawn(async move {
            let (burst, trickle) = tokio::join!(
                appetite::burst_until(&shared, &big, deadline),
                appetite::trickle_until(&shared, &small, deadline)
            );
            appetite::combine(burst, trickle)
        })
    };
    let clients: Vec<_> = users
        .iter()
        .cloned()
        .map(|user| {
            let client = Client::new(Arc::clone(&shared), user);
            tokio::spawn(async move { client.run_until(deadline).await })
        })
        .collect();
    let conn_phase = tokio::spawn(conn::run_until(Arc::clone(&shared), deadline));
    let moderation_phase = {
        let (shared, user) = (Arc::clone(&shared), moderated.clone());
        tokio::spawn(async move { moderation::run_until(&shared, &user, deadline).await })
    };
    let boundaries_phase = {
        let (shared, tree) = (Arc::clone(&shared), tree.clone());
        tokio::spawn(async move { boundaries::run_until(&shared, &tree, run_started, deadline).await })
    };
    let batch_phase = {
        let (shared, user) = (Arc::clone(&shared), batcher.clone());
        tokio::spawn(async move { batches::run_until(&shared, &user, deadline).await })
    };
    users.extend([big.user.clone(), small.user.clone(), tree.user.clone(), moderated.clone(), batcher.clone()]);

    // Chaos: each replica killed once (at a third and two thirds of the run) and restarted; fal
    // down from 40 % to 60 % of the run; every database session terminated every few seconds.
    let (fal_down_at, fal_back_at) = (Duration::from_secs(args.secs) * 2 / 5, Duration::from_secs(args.secs) * 3 / 5);
    let mut fal_down = false;
    let mut fal_outages = 0;
    let mut kills = 0;
    let mut terminations = 0;
    let mut fal_down_since = 0.0;
    let (mut samples, mut next_sample) = (0, Instant::now());
    let started = Instant::now();
    let period = Duration::from_secs(args.secs.max(3));
    let mut next_termination = started + Duration::from_secs(4);
    while Instant::now() < deadline {
        let elapsed = started.elapsed();
        if kills < 2 && elapsed >= period * (kills + 1) / 3 {
            let from = epoch_now();
            cluster.kill_and_restart(kills as usize % 2)?;
            shared.disturbed(from, epoch_now() + AFTERMATH.as_secs_f64());
            kills += 1;
        }
        if !fal_down && fal_outages == 0 && elapsed >= fal_down_at {
            fal_down_since = epoch_now();
            cluster.take_fal_down().await?;
            (fal_down, fal_outages) = (true, 1);
        }
        if fal_down && elapsed >= fal_back_at {
            cluster.bring_fal_back()?;
            // The jobs fal lost hold their slots until their timeout ends them.
            let lost_jobs_end = Duration::from_secs(JOB_TIMEOUT_SECS) + AFTERMATH;
            shared.disturbed(fal_down_since, epoch_now() + lost_jobs_end.as_secs_f64());
            fal_down = false;
        }
        if Instant::now() >= next_termination {
            shared.mark_database_away();
            let from = epoch_now();
            terminations += terminate_sessions(&db.url).await?;
            shared.disturbed(from, epoch_now() + RECONNECT.as_secs_f64());
            next_termination = Instant::now() + Duration::from_secs(7);
        }
        if Instant::now() >= next_sample {
            samples += u64::from(capacity::sample(&shared, &[&big, &small]).await);
            next_sample = Instant::now() + Duration::from_secs(1);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut tallies = Vec::new();
    for client in clients {
        tallies.push(client.await.map_err(|e| format!("a client panicked: {e}"))?);
    }
    let appetite = appetites.await.map_err(|e| format!("the big or small user panicked: {e}"))?;
    let conn = conn_phase.await.map_err(|e| format!("the conn phase panicked: {e}"))?;
    let boundaries = boundaries_phase.await.map_err(|e| format!("the boundaries phase panicked: {e}"))?;
    let moderation = moderation_phase.await.map_err(|e| format!("the moderation phase panicked: {e}"))?;
    let batch_tally = batch_phase.await.map_err(|e| format!("the batch phase panicked: {e}"))?;
    conn::check_labels(&shared).await;
    let (batches, batch_requests) = batches::settle(&shared, &batcher, batch_tally).await;
    tallies.push(batch_requests);
    let mut report = settle_and_check(&shared, &users, tallies, GRANTED).await;
    report.costs = costs::check_costs(&shared, &mut report.tally).await;
    boundaries::check_trees(&shared, &tree, &boundaries).await;
    let moderation_report = moderation::check_after(&shared, &cluster, &moderated, &moderation).await;
    merge(&mut report.tally, moderation.tally);
    let mut capacity = capacity::check_after(&shared, &cluster, &db.url, &big, &small, appetite).await;
    capacity.samples = samples;
    let found_after: Vec<String> = shared.violations().into_iter().filter(|v| !report.violations.contains(v)).collect();
    report.violations.extend(found_after);
    report.capacity = capacity;
    report.conn = conn;
    report.moderation = moderation_report;
    report.batches = batches;
    report.kills = kills;
    report.terminations = terminations;
    report.faults = cluster.faults().await;
    Ok(report)
}
