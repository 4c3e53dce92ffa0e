//! `genjobs-bench ceilings`: one replica against the ceilings of the shared bench folder
//! (`../shared/bench` from the checkout: its `README.md` says what they are), all in one run, with
//! the same wrk scripts on both sides: GET of a job against a constant-JSON actix-web server,
//! submissions against the least a correct accept can do on the same stack, and the answers of a
//! replica behind PgBouncer while the database is out of reach. Writes
//! `docs/benchmarks-ceilings.md`; with a server that loads `pg_stat_statements`, the GET run is
//! made there and counts the statements per GET.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use genjobs_bench::scenarios::{self, Api};
use genjobs_test_postgres::{Gate, pgbouncer_of_its_own};

use super::cpu::{Snapshot, Split};
use super::flame;
use super::outside::{Wrk, wrk_with};
use super::report::verdict;
use super::{
    Failure, Process, batches, create_users, free_port, fresh_database, progress, psql, spawn_genjobs_logging,
    spawn_simulator, statements,
};

/// The shared README's genjobs side on `database_url` (started with the log it has when deployed:
/// a line per request): polls off, so that the jobs stay running and nothing but the requests
/// touches the database, and the built-in simulator as the provider, its jobs running for an hour
/// and every request in progress at once.
fn genjobs_envs(database_url: String) -> Vec<(&'static str, String)> {
    [
        ("DATABASE_URL", database_url),
        ("GENJOBS_POLL_INTERVAL_MS", "600000".to_owned()),
        ("GENJOBS_SIM_RUN_MS", "3600000".to_owned()),
        ("GENJOBS_SIM_QUEUE_MS", "0".to_owned()),
        ("GENJOBS_SIM_MAX_IN_PROGRESS_PER_KEY", "0".to_owned()),
        ("GENJOBS_SIM_PORT", "0".to_owned()),
    ]
    .into()
}

/// How many times each pair of runs (genjobs, then its ceiling) is made in turn. The report keeps
/// the round of the median ratio, so that a burst of other load on this shared machine during one
/// pair does not make the figure; the other rounds' ratios are reported beside it.
const ROUNDS: usize = 5;

/// Where the ceilings and their wrk scripts are, and the ceiling's binary.
pub(super) struct Shared {
    /// `../shared/bench` of the checkout.
    pub dir: PathBuf,
    /// The ceiling, built from `dir/ceiling` (`scripts/bench-ceilings.sh` builds it).
    pub ceiling: PathBuf,
    /// Whether to draw flame graphs of genjobs under wrk (`BENCH_FLAME=--flame`).
    pub flame: bool,
}

/// What one run measured.
struct Ceilings {
    /// The GET round of the median ratio.
    reads: ReadRound,
    /// The GET ratio of every round, in the order run.
    read_ratios: Vec<f64>,
    /// The submissions round of the median ratio against the end-to-end ceiling.
    submissions: SubmissionRound,
    /// The submissions ratio against the end-to-end ceiling of every round, in the order run.
    submission_ratios: Vec<f64>,
    outage: Outage,
    /// The batches' table, measured after the rest (`genjobs-bench batches`' runs).
    bulk: String,
}

/// The answers of a replica behind PgBouncer while the database is out of reach.
#[derive(Debug, Default)]
struct Outage {
    requests: usize,
    unavailable: usize,
    /// Requests that got no answer at all within the client's 30 s.
    unanswered: usize,
    first_503: Option<Duration>,
    slowest: Duration,
    /// From the database's return to the first 200.
    recovered_after: Option<Duration>,
}

fn ceiling(shared: &Shared, envs: &[(&str, String)]) -> Result<Process, Failure> {
    let port = free_port()?;
    let mut command = Command::new(&shared.ceiling);
    command.env("CEILING_PORT", port.to_string()).stdout(Stdio::null()).stderr(Stdio::inherit());
    for (name, value) in envs {
        command.env(name, value);
    }
    let process = Process { child: command.spawn()?, base: format!("http://127.0.0.1:{port}") };
    for _ in 0..100 {
        if std::net::TcpStream::connect(process.addr()).is_ok() {
            return Ok(process);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err("the ceiling did not start".into())
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn lines(dir: &Path, name: &str, items: &[String]) -> Result<PathBuf, Failure> {
    let path = dir.join(name);
    std::fs::write(&path, items.join("\n") + "\n")?;
    Ok(path)
}

/// GET of 100 running jobs of one user, genjobs then the constant ceiling, with `get.lua`.
async fn reads(
    bin: &Path,
    shared: &Shared,
    server: &str,
    profiled: bool,
    dir: &Path,
    seconds: u64,
    draw: bool,
) -> Result<ReadRound, Failure> {
    let url = fresh_database(server, "genjobs_bench_ceiling_reads")?;
    let app = spawn_genjobs_logging(bin, &genjobs_envs(url.clone()))?;
    let (_, key) = create_users(&app.base, 1).await?.remove(0);
    let ids = scenarios::submit_many(&Api::new(&app.base, &key, 8), 100, 8, "read me").await;
    let script = shared.dir.join("get.lua");
    let files = [("IDS_FILE", path_text(&lines(dir, "ids.txt", &ids)?)), ("KEY", key.clone())];
    // A warm-up second: every job read once, as a polling client has.
    wrk_with(&app.base, &script, &files, 1)?;
    let window = profiled.then(|| statements::Window::open(&url)).transpose()?;
    let recording =
        (shared.flame && draw).then(|| flame::record(app.pid(), seconds, &dir.join("perf.data"))).transpose()?;
    let before = Snapshot::take(app.pid());
    let genjobs = wrk_with(&app.base, &script, &files, seconds)?;
    let genjobs_cpu = before.until(Snapshot::take(app.pid()));
    if let Some(recording) = recording {
        recording.draw(Path::new("docs/flame-reads.svg"), "genjobs under wrk: GET of a job (get.lua)")?;
    }
    let profile = window.map(|w| w.close(&url)).transpose()?;
    drop(app);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_ceiling_reads WITH (FORCE)")?;
    let constant = ceiling(shared, &[])?;
    let before = Snapshot::take(constant.pid());
    let ceiling = wrk_with(&constant.base, &script, &files, seconds)?;
    let ceiling_cpu = before.until(Snapshot::take(constant.pid()));
    let per_get = profile.map(|p| (p.calls as f64 / genjobs.requests.max(1) as f64, p));
    Ok(ReadRound { genjobs: (genjobs, genjobs_cpu), ceiling: (ceiling, ceiling_cpu), per_get })
}

/// One round of the GET runs: genjobs, then the constant ceiling.
struct ReadRound {
    genjobs: (Wrk, Split),
    ceiling: (Wrk, Split),
    /// Statements per GET, where measured, and the statements.
    per_get: Option<(f64, statements::Profile)>,
}

/// Whether a statement is one a request can cost (a rate-limit lease, a key look-up or its use
/// recorded, a job read by id), as opposed to the replica's own ticks (claims, webhook
/// deliveries, the listener's heartbeat, the pool's session set-up), which run whether anyone
/// asks or not.
fn caused_by_requests(statement: &statements::Statement) -> bool {
    ["rate_limits", "api_keys", "FROM \"jobs\""].iter().any(|table| statement.query.contains(table))
}

/// The calls of the statements requests caused.
fn request_calls(profile: &statements::Profile) -> u64 {
    profile.statements.iter().filter(|s| caused_by_requests(s)).map(|s| s.calls).sum()
}

/// Submissions by 100 users, genjobs then the stack ceiling in both modes, with `post.lua`.
async fn submissions(
    bin: &Path,
    shared: &Shared,
    server: &str,
    dir: &Path,
    seconds: u64,
    draw: bool,
) -> Result<SubmissionRound, Failure> {
    let url = fresh_database(server, "genjobs_bench_ceiling_accept")?;
    let app = spawn_genjobs_logging(bin, &genjobs_envs(url))?;
    let keys: Vec<String> = create_users(&app.base, 100).await?.into_iter().map(|(_, key)| key).collect();
    let script = shared.dir.join("post.lua");
    let recording =
        (shared.flame && draw).then(|| flame::record(app.pid(), seconds, &dir.join("perf.data"))).transpose()?;
    let keys_file = path_text(&lines(dir, "keys.txt", &keys)?);
    let before = Snapshot::take(app.pid());
    let genjobs = wrk_with(&app.base, &script, &[("KEYS_FILE", keys_file)], seconds)?;
    let genjobs_cpu = before.until(Snapshot::take(app.pid()));
    if let Some(recording) = recording {
        recording.draw(Path::new("docs/flame-submissions.svg"), "genjobs under wrk: submissions (post.lua)")?;
    }
    drop(app);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_ceiling_accept WITH (FORCE)")?;
    let accept_only = stack_ceiling(shared, server, dir, seconds, false)?;
    let end_to_end = stack_ceiling(shared, server, dir, seconds, true)?;
    Ok(SubmissionRound { genjobs: (genjobs, genjobs_cpu), accept_only, end_to_end })
}

/// One round of the submission runs: genjobs, then the stack ceiling in both its modes.
struct SubmissionRound {
    genjobs: (Wrk, Split),
    /// The accept alone.
    accept_only: (Wrk, Split),
    /// The accept, then each job sent to a provider and its request id recorded (`CEILING_SEND=1`).
    end_to_end: (Wrk, Split),
}

/// The stack ceiling under `post.lua` on a database of its own made from `schema.sql`; with
/// `send`, in its end-to-end mode.
fn stack_ceiling(shared: &Shared, server: &str, dir: &Path, seconds: u64, send: bool) -> Result<(Wrk, Split), Failure> {
    let url = fresh_database(server, "genjobs_bench_ceiling_stack")?;
    let status = Command::new("psql")
        .args([url.as_str(), "-qX", "-f"])
        .arg(shared.dir.join("schema.sql"))
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        return Err("cannot load the ceiling's schema.sql".into());
    }
    let keys: Vec<String> = (1..=100).map(|i| format!("ceiling-key-{i}")).collect();
    let mut envs = vec![("CEILING_DATABASE_URL", url), ("CEILING_KEYS", keys.join(","))];
    if send {
        envs.push(("CEILING_SEND", "1".to_owned()));
    }
    let stack = ceiling(shared, &envs)?;
    let keys_file = path_text(&lines(dir, "ceiling-keys.txt", &keys)?);
    let before = Snapshot::take(stack.pid());
    let measured = wrk_with(&stack.base, &shared.dir.join("post.lua"), &[("KEYS_FILE", keys_file)], seconds)?;
    let cpu = before.until(Snapshot::take(stack.pid()));
    drop(stack);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_ceiling_stack WITH (FORCE)")?;
    Ok((measured, cpu))
}

/// A replica behind PgBouncer, the database made unreachable behind the pooler for `seconds`
/// while 32 clients list their jobs (a read that always asks the database), then back.
async fn outage(bin: &Path, server: &str, sim: &str, seconds: u64) -> Result<Outage, Failure> {
    let url = fresh_database(server, "genjobs_bench_ceiling_outage")?;
    let host = url.split_once('@').map_or("127.0.0.1:5432", |(_, rest)| rest.split('/').next().unwrap_or(rest));
    let gate = Gate::open_to(host).await;
    let pooler = pgbouncer_of_its_own(&gate.addr.to_string());
    let envs = [
        ("DATABASE_URL", url.replacen(host, &pooler.addr.to_string(), 1)),
        ("GENJOBS_DATABASE_POOLER", "transaction".to_owned()),
        ("GENJOBS_DATABASE_LISTEN_URL", url.replacen(host, &gate.addr.to_string(), 1)),
        ("GENJOBS_UPSTREAM_URL", sim.to_owned()),
    ];
    let app = spawn_genjobs_logging(bin, &envs)?;
    let (_, key) = create_users(&app.base, 1).await?.remove(0);
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let list = format!("{}/api/v1/jobs", app.base);

    gate.close();
    let closed = Instant::now();
    let until = closed + Duration::from_secs(seconds);
    let workers = (0..32).map(|_| {
        let (client, list, key) = (client.clone(), list.clone(), key.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while Instant::now() < until {
                let sent = Instant::now();
                let status = client.get(&list).bearer_auth(&key).send().await.map(|r| r.status().as_u16()).ok();
                seen.push((status, sent.elapsed(), sent.elapsed() + (sent - closed)));
            }
            seen
        })
    });
    let mut outage = Outage::default();
    for worker in futures_util::future::join_all(workers).await {
        for (status, took, at) in worker? {
            outage.requests += 1;
            outage.slowest = outage.slowest.max(took);
            match status {
                Some(503) => {
                    outage.unavailable += 1;
                    outage.first_503 = Some(outage.first_503.map_or(at, |first| first.min(at)));
                }
                None => outage.unanswered += 1,
                Some(_) => {}
            }
        }
    }
    gate.open();
    let opened = Instant::now();
    while opened.elapsed() < Duration::from_secs(60) {
        if client.get(&list).bearer_auth(&key).send().await.is_ok_and(|r| r.status().is_success()) {
            outage.recovered_after = Some(opened.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(app);
    drop(gate);
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_ceiling_outage WITH (FORCE)")?;
    Ok(outage)
}

/// Runs the three and writes `docs/benchmarks-ceilings.md`.
pub(super) async fn run(
    bin: &Path,
    shared: &Shared,
    server: &str,
    profiled: Option<&str>,
    sim: &str,
    seconds: u64,
) -> Result<(), Failure> {
    let dir = std::env::temp_dir().join(format!("genjobs-bench-ceilings-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let profiled = match profiled {
        Some(url) if statements::available(url)? => Some(url),
        _ => None,
    };
    let mut read_rounds = Vec::new();
    for round in 1..=ROUNDS {
        progress(&format!(
            "ceilings 1/4 GET of a job, round {round}/{ROUNDS}: genjobs, then the constant ceiling (get.lua)"
        ));
        let round =
            reads(bin, shared, profiled.unwrap_or(server), profiled.is_some(), &dir, seconds, round == 1).await?;
        progress(&format!(
            "   genjobs {:.0}/s (p99 {:.1} ms), ceiling {:.0}/s; {}",
            round.genjobs.0.per_sec,
            round.genjobs.0.p99_ms,
            round.ceiling.0.per_sec,
            round
                .per_get
                .as_ref()
                .map_or("statements not counted".to_owned(), |(n, _)| format!("{n:.4} statements per GET"))
        ));
        read_rounds.push((ratio(&round.genjobs.0, &round.ceiling.0), round));
    }
    let (read_ratios, reads) = median_round(read_rounds);
    let mut submission_rounds = Vec::new();
    for round in 1..=ROUNDS {
        progress(&format!(
            "ceilings 2/4 submissions, round {round}/{ROUNDS}: genjobs, then the stack ceiling accepting only, then end to end (post.lua)"
        ));
        let measured = submissions(bin, shared, server, &dir, seconds, round == 1).await?;
        let (genjobs, accept_only, end_to_end) = (&measured.genjobs.0, &measured.accept_only.0, &measured.end_to_end.0);
        progress(&format!(
            "   genjobs {:.0}/s (p99 {:.1} ms), accept-only ceiling {:.0}/s (p99 {:.1} ms), end-to-end ceiling {:.0}/s (p99 {:.1} ms)",
            genjobs.per_sec,
            genjobs.p99_ms,
            accept_only.per_sec,
            accept_only.p99_ms,
            end_to_end.per_sec,
            end_to_end.p99_ms
        ));
        submission_rounds.push((ratio(genjobs, end_to_end), measured));
    }
    let (submission_ratios, submissions) = median_round(submission_rounds);
    progress("ceilings 3/4 the database unreachable behind PgBouncer");
    let outage = outage(bin, server, sim, seconds).await?;
    progress(&format!("   {outage:?}"));
    std::fs::remove_dir_all(&dir)?;
    progress("ceilings 4/4 batches: acceptance, throughput, fairness and 100,000 items waiting");
    // On the profiled cluster where there is one, so that the acceptance's statements are counted,
    // and against a simulator of its own whose jobs end after 100 ms: the interactive submissions
    // measured beside the waiting items would otherwise stay running, polled every 50 ms.
    let batch_sim = spawn_simulator(bin, "100").await?;
    let bulk = batches::run(bin, profiled.unwrap_or(server), &batch_sim.base).await?;
    let measured = Ceilings { reads, read_ratios, submissions, submission_ratios, outage, bulk };
    write(Path::new("docs/benchmarks-ceilings.md"), &measured, seconds)?;
    progress("   wrote docs/benchmarks-ceilings.md");
    Ok(())
}

/// genjobs's throughput over its ceiling's.
fn ratio(genjobs: &Wrk, ceiling: &Wrk) -> f64 {
    genjobs.per_sec / ceiling.per_sec.max(f64::EPSILON)
}

/// The ratios of `rounds` in the order run, and the round of the median ratio.
fn median_round<T>(mut rounds: Vec<(f64, T)>) -> (Vec<f64>, T) {
    let ratios = rounds.iter().map(|(ratio, _)| *ratio).collect();
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (_, median) = rounds.swap_remove(rounds.len() / 2);
    (ratios, median)
}

fn write(path: &Path, m: &Ceilings, seconds: u64) -> std::io::Result<()> {
    let (reads, reads_ceiling) = (&m.reads.genjobs.0, &m.reads.ceiling.0);
    let read_ratio = ratio(reads, reads_ceiling);
    let (submissions, accept_only, end_to_end) =
        (&m.submissions.genjobs.0, &m.submissions.accept_only.0, &m.submissions.end_to_end.0);
    let o = &m.outage;
    let mut doc = String::from("# One replica against the ceilings of its stack\n\n");
    let _ = writeln!(
        doc,
        "Written by `genjobs-bench ceilings` (`just bench-ceilings`, and `just bench` after the rest). The ceilings \
         and the wrk scripts are the shared bench folder's (`../shared/bench` beside the checkout; its README \
         says what each is): wrk with 2 threads and 32 connections, {seconds} s a run, the same script on both \
         sides, in one run on this 2-core machine, which genjobs (with its built-in simulator, as the shared README \
         has it), Postgres and wrk share. genjobs runs with its default settings, its log level included: a JSON \
         line per request, written to the null device. The batches' figures at the end come from the same run. \
         Figures from a machine other people were loading at the same time are noisy; compare the ratios of one \
         run. Each pair (genjobs, then its ceiling) runs {ROUNDS} times in turn, and the table shows the round of \
         the median ratio; the ratios of all rounds, in the order run: GET {}, submissions against the \
         end-to-end ceiling {}.\n",
        rounds_text(&m.read_ratios),
        rounds_text(&m.submission_ratios),
    );
    doc.push_str("| target | genjobs | ceiling, same run | ratio | target | |\n|---|---|---|---|---|---|\n");
    let get_statements = m.reads.per_get.as_ref().map(|(_, p)| request_calls(p));
    let statements = m.reads.per_get.as_ref().map_or("not counted (no `pg_stat_statements`)".to_owned(), |(n, p)| {
        format!(
            "{:.6} statements per GET caused by GETs ({} in all), {n:.4} with the replica's own ticks",
            request_calls(p) as f64 / reads.requests.max(1) as f64,
            request_calls(p)
        )
    });
    let _ = writeln!(
        doc,
        "| GET job/s, Postgres store, 100 running jobs (`get.lua`) | {:.0} (p99 {:.1} ms), {} errors; {statements} | \
         constant JSON: {:.0} (p99 {:.1} ms) | {read_ratio:.2} | ≥ 0.6, p99 ≤ 10 ms, 0 statements per GET (under 1 in 10,000) | {} |",
        reads.per_sec,
        reads.p99_ms,
        reads.errors,
        reads_ceiling.per_sec,
        reads_ceiling.p99_ms,
        verdict(
            read_ratio >= 0.6
                && reads.p99_ms <= 10.0
                && reads.errors == 0
                && get_statements.is_some_and(|n| (n as f64) < 0.0001 * reads.requests as f64)
        )
    );
    let end_to_end_ratio = ratio(submissions, end_to_end);
    let p99_ratio = submissions.p99_ms / end_to_end.p99_ms.max(f64::EPSILON);
    let _ = writeln!(
        doc,
        "| submissions/s, 100 users (`post.lua`) | {:.0} (p99 {:.1} ms), {} errors | end-to-end ceiling (`CEILING_SEND=1`: \
         the accept, then each job sent to a provider and its id recorded): {:.0} (p99 {:.1} ms) \
         | {end_to_end_ratio:.2}, p99 × {p99_ratio:.2} | ≥ 0.8, p99 ≤ 1.5 × | {} |",
        submissions.per_sec,
        submissions.p99_ms,
        submissions.errors,
        end_to_end.per_sec,
        end_to_end.p99_ms,
        verdict(end_to_end_ratio >= 0.8 && p99_ratio <= 1.5 && submissions.errors == 0)
    );
    let _ = writeln!(
        doc,
        "| the same round against the accept-only ceiling | (as above) | accept-only ceiling: {:.0} (p99 {:.1} ms) \
         | {:.2}, p99 × {:.2} | none: the gap is the send and its record, which the end-to-end ceiling pays | |",
        accept_only.per_sec,
        accept_only.p99_ms,
        ratio(submissions, accept_only),
        submissions.p99_ms / accept_only.p99_ms.max(f64::EPSILON)
    );
    let ms = |d: Option<Duration>| d.map_or("never".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
    let cpu_row = |(server, postgres, rest): (f64, f64, f64)| {
        format!(
            "{:.0} µs in all: server {server:.0}, Postgres {postgres:.0}, the rest {rest:.0}",
            server + postgres + rest
        )
    };
    let cpu_note = format!(
        "\nWhere the CPU went during the submission runs, per submission answered (from `/proc`; genjobs's \
         figure holds its built-in simulator and the driver sending each job to it, the rest is wrk and the \
         kernel): genjobs {}; end-to-end ceiling {}; accept-only ceiling {}. A ceiling's throughput is the machine's CPU divided by its \
         figure, so each ratio above is about the ratio of the two totals.\n",
        cpu_row(m.submissions.genjobs.1.per_request(submissions.requests)),
        cpu_row(m.submissions.end_to_end.1.per_request(end_to_end.requests)),
        cpu_row(m.submissions.accept_only.1.per_request(accept_only.requests)),
    );
    let read_cpu = |split: &Split, requests: u64| split.per_request(requests).0;
    let read_cpu_note = format!(
        "\nThe server's CPU per GET answered, in the same rounds: genjobs {:.1} µs (its request line included), the \
         constant ceiling {:.1} µs.\n",
        read_cpu(&m.reads.genjobs.1, reads.requests),
        read_cpu(&m.reads.ceiling.1, reads_ceiling.requests),
    );
    let _ = writeln!(
        doc,
        "| database unreachable behind PgBouncer, 32 clients listing jobs for {seconds} s | first 503 after {}; \
         {} requests, {} answered 503, {} unanswered, slowest {:.2} s; first 200 {} after the database came back | — | — | \
         first 503 within 5 s, every request answered | {} |",
        ms(o.first_503),
        o.requests,
        o.unavailable,
        o.unanswered,
        o.slowest.as_secs_f64(),
        ms(o.recovered_after),
        verdict(
            o.first_503.is_some_and(|d| d <= Duration::from_secs(5))
                && o.unanswered == 0
                && o.requests > 0
                && o.recovered_after.is_some()
        )
    );
    doc.push_str(&cpu_note);
    doc.push_str(&read_cpu_note);
    if let Some((_, profile)) = &m.reads.per_get {
        let _ = writeln!(
            doc,
            "\nThe statements of the GET run ({} GETs), all of them, those a request can cost marked **GET**: \
             a GET of a cached job costs no job read; the rate limiter leases tokens in batches that double \
             while they are used up within their minute (so a steady poll reaches the database about once a \
             minute per user and replica, and a few times while the batch grows), and a key found stays \
             cached until a change of it is announced. The rest are the replica's own ticks (claims, webhook \
             deliveries, the listener's heartbeat, sessions set up), which run with or without GETs.\n",
            reads.requests
        );
        for s in &profile.statements {
            let by = if caused_by_requests(s) { "**GET** " } else { "" };
            let _ = writeln!(doc, "- {by}{} calls, {:.1} ms: `{}`", s.calls, s.total_ms, s.query.replace('`', "'"));
        }
    }
    let _ = writeln!(
        doc,
        "\n## Batches, in the same run\n\nAs `genjobs-bench batches` measures them (`docs/benchmarks-batches.md` says how):\n\n{}",
        m.bulk
    );
    std::fs::write(path, doc)
}

fn rounds_text(ratios: &[f64]) -> String {
    ratios.iter().map(|ratio| format!("{ratio:.2}")).collect::<Vec<_>>().join(", ")
}

/// `../shared/bench` beside the checkout (`BENCH_SHARED` elsewhere), and the ceiling built from it
/// (`BENCH_CEILING`, else where `scripts/bench-ceilings.sh` builds it by default).
pub(super) fn shared() -> Shared {
    let var = |name: &str, default: &str| PathBuf::from(std::env::var(name).unwrap_or_else(|_| default.to_owned()));
    Shared {
        dir: var("BENCH_SHARED", "../shared/bench"),
        ceiling: var("BENCH_CEILING", "target/ceiling/release/ceiling"),
        flame: std::env::var("BENCH_FLAME").is_ok_and(|flag| flag == "--flame"),
    }
}
