//! `genjobs-bench client-webhooks`: webhooks to clients, measured from outside.
//!
//! 1. Latency and rate: 1,000 jobs, each with a `webhook_url` at a receiver in this process,
//!    submitted at an even rate over 10 s so that they finish within about 10 s, then 1,000
//!    within 1 s for the rate a burst is delivered at; the receiver notes when each event's
//!    first attempt reaches it, against the `finished_at` the event carries (the commit that
//!    made the job final, on the same clock).
//! 2. Memory: a replica started over 100,000 undelivered events whose receiver accepts the
//!    connection and never answers, against the same replica over an empty outbox, both sampled
//!    for the same time in the same run.
//!
//! Writes `docs/benchmarks-client-webhooks.md`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use genjobs_bench::host::rss_kib;
use genjobs_bench::load::{open_loop, percentile_ms};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::report::verdict;
use super::{
    ADMIN, Failure, create_users, env_number, free_port, fresh_database, progress, psql, spawn_genjobs, spawn_simulator,
};

/// When each event's first attempt reached the receiver, and when its job ended.
type Arrivals = Arc<Mutex<HashMap<String, (OffsetDateTime, OffsetDateTime)>>>;

/// What one batch of jobs posted to the receiver showed.
#[derive(Default)]
struct Deliveries {
    jobs: usize,
    delivered: usize,
    finish_window: Duration,
    delivery_window: Duration,
    lag_p50_ms: f64,
    lag_p99_ms: f64,
    lag_max_ms: f64,
}

impl Deliveries {
    fn per_sec(&self) -> f64 {
        self.delivered as f64 / self.delivery_window.as_secs_f64().max(f64::EPSILON)
    }
}

/// What the run measured.
#[derive(Default)]
struct Measured {
    even: Deliveries,
    burst: Deliveries,
    pending: u64,
    rss_empty_kib: u64,
    rss_pending_kib: u64,
    attempts_meanwhile: u64,
    sample_secs: u64,
}

/// A receiver that answers 204 and notes the first arrival of each event id.
fn receiver(port: u16, arrivals: Arrivals) -> std::io::Result<actix_web::dev::Server> {
    let server = HttpServer::new(move || {
        let arrivals = Arc::clone(&arrivals);
        App::new().app_data(web::PayloadConfig::new(4 << 20)).default_service(web::to(
            move |request: HttpRequest, body: web::Bytes| {
                let arrivals = Arc::clone(&arrivals);
                async move {
                    let now = OffsetDateTime::now_utc();
                    let id = request.headers().get("webhook-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
                    let finished = serde_json::from_slice::<Value>(&body).ok().and_then(|event| {
                        event["data"]["finished_at"].as_str().and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok())
                    });
                    if let (Some(id), Some(finished)) = (id, finished) {
                        arrivals
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .entry(id)
                            .or_insert((now, finished));
                    }
                    HttpResponse::NoContent().finish()
                }
            },
        ))
    })
    .workers(2)
    .bind(("127.0.0.1", port))?
    .run();
    Ok(server)
}

/// A receiver that takes connections and never answers: every attempt runs into its timeout.
async fn silent_receiver() -> std::io::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    Ok(port)
}

/// Part 1: `jobs` jobs submitted at an even rate over `spread`, each posted to the receiver.
async fn deliveries(bin: &Path, server: &str, jobs: usize, spread: Duration) -> Result<Deliveries, Failure> {
    let sim = spawn_simulator(bin, "3000").await?;
    let port = free_port()?;
    let app = spawn_genjobs(
        bin,
        &[
            ("DATABASE_URL", fresh_database(server, "genjobs_bench_client_webhooks")?),
            ("GENJOBS_UPSTREAM_URL", sim.base.clone()),
            ("GENJOBS_BIND", format!("127.0.0.1:{port}")),
            ("GENJOBS_PUBLIC_URL", format!("http://127.0.0.1:{port}")),
            ("GENJOBS_FAL_JWKS_URL", format!("{}/.well-known/jwks.json", sim.base)),
            ("GENJOBS_WEBHOOK_ALLOW_PRIVATE", "true".into()),
        ],
    )?;
    let arrivals: Arrivals = Arc::default();
    let receiver_port = free_port()?;
    let receiving = receiver(receiver_port, Arc::clone(&arrivals))?;
    let stop_receiving = receiving.handle();
    tokio::spawn(receiving);

    let (_, key) = create_users(&app.base, 1).await?.remove(0);
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).build()?;
    let webhook_url = format!("http://127.0.0.1:{receiver_port}/hooks");
    let body = json!({"prompt": "a webhook bench", "webhook_url": webhook_url});
    let url = format!("{}/api/v1/images/generations", app.base);
    let submitted = open_loop(jobs as f64 / spread.as_secs_f64(), spread, move |_| {
        let request = client.post(&url).bearer_auth(&key).json(&body);
        async move { request.send().await.is_ok_and(|r| r.status() == 202) }
    })
    .await;
    progress(&format!("   {} jobs accepted over {:.0} s", submitted.ok, spread.as_secs_f64()));
    let accepted = usize::try_from(submitted.ok).unwrap_or(usize::MAX);

    let deadline = Instant::now() + Duration::from_secs(120);
    while arrivals.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len() < accepted
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_receiving.stop(false).await;
    let seen: Vec<(OffsetDateTime, OffsetDateTime)> =
        arrivals.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().copied().collect();
    // In microseconds, as the load generator's percentiles take them; an arrival in the same
    // millisecond as the end it carries counts as no lag.
    let mut lags: Vec<u32> = seen
        .iter()
        .map(|(at, finished)| u32::try_from((*at - *finished).whole_microseconds().max(0)).unwrap_or(u32::MAX))
        .collect();
    lags.sort_unstable();
    let window = |times: Vec<OffsetDateTime>| {
        let (first, last) = (times.iter().min().copied(), times.iter().max().copied());
        first.zip(last).map_or(Duration::ZERO, |(a, b)| Duration::try_from(b - a).unwrap_or_default())
    };
    let measured = Deliveries {
        jobs: accepted,
        delivered: seen.len(),
        finish_window: window(seen.iter().map(|(_, finished)| *finished).collect()),
        delivery_window: window(seen.iter().flat_map(|(at, finished)| [*at, *finished]).collect()),
        lag_p50_ms: percentile_ms(&lags, 0.5),
        lag_p99_ms: percentile_ms(&lags, 0.99),
        lag_max_ms: percentile_ms(&lags, 1.0),
    };
    psql(server, "DROP DATABASE IF EXISTS genjobs_bench_client_webhooks WITH (FORCE)")?;
    Ok(measured)
}

/// The replica's largest resident set over `secs` seconds, sampled every 250 ms.
async fn peak_rss(pid: u32, secs: u64) -> u64 {
    let mut peak = 0;
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        peak = peak.max(rss_kib(pid).unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    peak
}

/// The value of a metric without labels in a Prometheus text page.
fn metric(page: &str, name: &str) -> f64 {
    page.lines().find_map(|line| line.strip_prefix(name).and_then(|rest| rest.trim().parse().ok())).unwrap_or_default()
}

/// Part 2: resident memory over 100,000 undelivered events, against an empty outbox.
async fn memory(bin: &Path, server: &str, pending: u64, measured: &mut Measured) -> Result<(), Failure> {
    let secs = env_number("BENCH_SECONDS", 10) * 3;
    let sim = spawn_simulator(bin, "1000").await?;
    let silent = silent_receiver().await?;
    let mut peaks = Vec::new();
    for (name, events) in [("genjobs_bench_outbox_empty", 0), ("genjobs_bench_outbox_full", pending)] {
        let url = fresh_database(server, name)?;
        let envs = [
            ("DATABASE_URL", url.clone()),
            ("GENJOBS_UPSTREAM_URL", sim.base.clone()),
            ("GENJOBS_WEBHOOK_ALLOW_PRIVATE", "true".into()),
        ];
        let app = spawn_genjobs(bin, &envs)?;
        let (user, _) = create_users(&app.base, 1).await?.remove(0);
        drop(app);
        psql(
            &url,
            &format!(
                "INSERT INTO jobs (id, user_id, model, modality, state, progress, error, created_at, started_at,
                                   finished_at, canceled_at, credits_held, credits_actual, input, submit_attempted, poll_failures, version,
                                   rate_per, rate_credits, webhook_url)
                 SELECT gen_random_uuid(), '{user}', 'nano-banana', 'image', 'canceled', 0,
                        '{{\"type\": \"canceled\", \"code\": \"JOB_CANCELED\", \"message\": \"Canceled.\"}}',
                        now(), now(), now(), now(), 4, 0,
                        '{{\"prompt\": \"generated\", \"aspect_ratio\": \"1:1\", \"n\": 1}}', true, 0, 3, 'image', 4,
                        'http://127.0.0.1:{silent}/hooks'
                 FROM generate_series(1, {events});
                 INSERT INTO client_webhook_events (job_id, user_id, final_state, url, occurred_at, next_attempt_at)
                 SELECT id, user_id, state, webhook_url, finished_at, finished_at FROM jobs;"
            ),
        )?;
        let app = spawn_genjobs(bin, &envs)?;
        peaks.push(peak_rss(app.pid(), secs).await);
        if events > 0 {
            let metrics = reqwest::Client::new().get(format!("{}/metrics", app.base)).bearer_auth(ADMIN);
            let page = metrics.send().await?.text().await?;
            measured.attempts_meanwhile = metric(&page, "genjobs_client_webhook_attempts_total") as u64;
        }
        drop(app);
        psql(server, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
    }
    measured.pending = pending;
    measured.sample_secs = secs;
    measured.rss_empty_kib = peaks[0];
    measured.rss_pending_kib = peaks[1];
    Ok(())
}

/// Runs the scenario and writes `docs/benchmarks-client-webhooks.md`.
pub(super) async fn run(bin: &Path, server: &str) -> Result<(), Failure> {
    let mut measured = Measured::default();
    let jobs = env_number("BENCH_WEBHOOK_JOBS", 1000) as usize;
    progress("client webhooks 1/3 1,000 jobs over 10 s posted to a receiver");
    measured.even = deliveries(bin, server, jobs, Duration::from_secs(10)).await?;
    progress("client webhooks 2/3 1,000 jobs within 1 s posted to a receiver");
    measured.burst = deliveries(bin, server, jobs, Duration::from_secs(1)).await?;
    progress("client webhooks 3/3 memory over 100,000 undelivered events");
    memory(bin, server, env_number("BENCH_WEBHOOK_PENDING", 100_000), &mut measured).await?;
    write(Path::new("docs/benchmarks-client-webhooks.md"), &measured)?;
    progress("wrote docs/benchmarks-client-webhooks.md");
    Ok(())
}

fn write(path: &Path, m: &Measured) -> std::io::Result<()> {
    let mut doc = String::from(
        "# Webhooks to clients\n\nWritten by `genjobs-bench client-webhooks` (`just bench` runs it after the main \
         benchmarks): a release build on Postgres against the simulator (jobs of 3 s), with the receiver in the \
         bench's own process on this machine, all figures from one run. The lag is from the commit that made a job \
         final (its `finished_at`) to the first attempt reaching the receiver.\n\n",
    );
    doc.push_str("| what | measured | target | |\n|---|---|---|---|\n");
    for (what, d, target) in [
        ("1,000 jobs ending over 10 s", &m.even, true),
        ("1,000 jobs ending within 1 s (a burst, for the rate)", &m.burst, false),
    ] {
        let _ = writeln!(
            doc,
            "| {what} (ended within {:.1} s; {} of {} delivered within {:.1} s of the first end) | lag p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; {:.0} deliveries/s | {} | {} |",
            d.finish_window.as_secs_f64(),
            d.delivered,
            d.jobs,
            d.delivery_window.as_secs_f64(),
            d.lag_p50_ms,
            d.lag_p99_ms,
            d.lag_max_ms,
            d.per_sec(),
            if target { "p99 ≤ 250 ms, every event delivered" } else { "every event delivered" },
            verdict(d.delivered == d.jobs && d.jobs > 0 && (!target || d.lag_p99_ms <= 250.0))
        );
    }
    let _ = writeln!(
        doc,
        "| peak resident memory over {} s with {} undelivered events (receiver never answers), against an empty outbox | {:.1} MiB against {:.1} MiB ({} attempts meanwhile) | bounded | {} |",
        m.sample_secs,
        m.pending,
        m.rss_pending_kib as f64 / 1024.0,
        m.rss_empty_kib as f64 / 1024.0,
        m.attempts_meanwhile,
        verdict(m.rss_pending_kib < m.rss_empty_kib + 64 * 1024)
    );
    doc.push_str(
        "\nWhy memory stays bounded: the outbox lives in the database, and a dispatcher holds only the events it \
         has claimed, at most 256 at once (its deliveries in flight, at most 8 a destination host). A claim skips \
         the hosts whose slots are full, so the waiting events of a dead receiver stay in the outbox untouched and \
         other hosts' events are claimed past them. The number of undelivered events moves the size of a table and \
         an index, not the memory of a replica. In the burst, one receiver's 8 slots set the rate: each delivery \
         reads the job and the secret, fixes the body and records the attempt, four statements.\n",
    );
    std::fs::write(path, doc)
}
