//! The scenarios beyond plain request load: open streams, upstream economy, wake-up latency and
//! driver scale. Each talks to genjobs (and its simulator) over HTTP only.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use crate::load::percentile_ms;

/// A user's view of one genjobs.
#[derive(Clone)]
pub struct Api {
    /// `http://host:port`.
    pub base: String,
    /// The user's key.
    pub key: String,
    /// A pooled client.
    pub client: reqwest::Client,
}

impl Api {
    /// An API handle with a client sized for `connections`.
    #[must_use]
    pub fn new(base: &str, key: &str, connections: usize) -> Self {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(connections)
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap_or_default();
        Self { base: base.to_owned(), key: key.to_owned(), client }
    }

    /// Submits an image job; its id, or `None` when refused.
    pub async fn submit(&self, prompt: &str) -> Option<String> {
        let response = self
            .client
            .post(format!("{}/api/v1/images/generations", self.base))
            .bearer_auth(&self.key)
            .json(&json!({"prompt": prompt}))
            .send()
            .await
            .ok()?;
        if response.status() != 202 {
            return None;
        }
        response.json::<Value>().await.ok()?["job_id"].as_str().map(str::to_owned)
    }

    /// Reads a job, long-polling up to `wait` seconds.
    pub async fn job(&self, id: &str, wait: u64) -> Option<Value> {
        let url = format!("{}/api/v1/jobs/{id}?wait={wait}", self.base);
        self.client.get(url).bearer_auth(&self.key).send().await.ok()?.json().await.ok()
    }

    /// Cancels a job.
    pub async fn cancel(&self, id: &str) -> bool {
        let url = format!("{}/api/v1/jobs/{id}/cancel", self.base);
        self.client.post(url).bearer_auth(&self.key).send().await.is_ok_and(|r| r.status() == 200)
    }
}

/// Submits `n` jobs with `prompt` through `clients` concurrent clients; their ids.
pub async fn submit_many(api: &Api, n: usize, clients: usize, prompt: &str) -> Vec<String> {
    let next = Arc::new(AtomicU64::new(0));
    let tasks = (0..clients).map(|_| {
        let (api, next, prompt) = (api.clone(), Arc::clone(&next), prompt.to_owned());
        tokio::spawn(async move {
            let mut ids = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < n as u64 {
                if let Some(id) = api.submit(&prompt).await {
                    ids.push(id);
                }
            }
            ids
        })
    });
    join_all(tasks).await.into_iter().flat_map(Result::unwrap_or_default).collect()
}

/// What the open-streams scenario saw.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct StreamsResult {
    /// Streams that answered 200.
    pub opened: u64,
    /// Streams that received their `done` or `error` event.
    pub finals: u64,
}

/// Opens `n` event streams spread over `jobs` (raw HTTP/1.1, one connection each, at most 256
/// connecting at once); calls `all_open` once every stream has answered, then waits (up to
/// `limit`) for every final event.
pub async fn streams(
    addr: SocketAddr,
    key: &str,
    jobs: &[String],
    n: usize,
    limit: Duration,
    all_open: impl FnOnce(u64),
) -> StreamsResult {
    let opened = Arc::new(AtomicU64::new(0));
    let connecting = Arc::new(Semaphore::new(256));
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let request = format!(
                "GET /api/v1/jobs/{}/stream HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {key}\r\n\r\n",
                jobs[i % jobs.len()]
            );
            let (opened, connecting, ready) = (Arc::clone(&opened), Arc::clone(&connecting), ready_tx.clone());
            tokio::spawn(async move {
                let mut permit = connecting.acquire_owned().await.ok();
                let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
                    let _ = ready.send(false);
                    return false;
                };
                if stream.write_all(request.as_bytes()).await.is_err() {
                    let _ = ready.send(false);
                    return false;
                }
                let mut buffer = vec![0u8; 2048];
                let mut seen = String::new();
                let mut answered = false;
                while let Ok(read) = stream.read(&mut buffer).await {
                    if read == 0 {
                        break;
                    }
                    seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
                    if !answered && seen.contains("\r\n\r\n") {
                        answered = true;
                        permit.take();
                        let ok = seen.starts_with("HTTP/1.1 200");
                        if ok {
                            opened.fetch_add(1, Ordering::Relaxed);
                        }
                        let _ = ready.send(ok);
                    }
                    if seen.contains("event: done") || seen.contains("event: error") {
                        return true;
                    }
                    // Keep only the tail, where the next event name may be split.
                    if seen.len() > 4096 {
                        seen = seen.split_off(seen.len() - 64);
                    }
                }
                if !answered {
                    let _ = ready.send(false);
                }
                false
            })
        })
        .collect();
    drop(ready_tx);
    for _ in 0..n {
        if ready_rx.recv().await.is_none() {
            break;
        }
    }
    all_open(opened.load(Ordering::Relaxed));
    let finals = tokio::time::timeout(limit, join_all(tasks))
        .await
        .map_or(0, |done| done.into_iter().filter(|r| matches!(r, Ok(true))).count() as u64);
    StreamsResult { opened: opened.load(Ordering::Relaxed), finals }
}

async fn sim_json(client: &reqwest::Client, sim_url: &str, path: &str) -> Value {
    match client.get(format!("{sim_url}{path}")).send().await {
        Ok(response) => response.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

fn status_calls(stats: &Value) -> u64 {
    stats["routes"]["status"].as_u64().unwrap_or(0)
}

/// What the upstream-economy scenario saw.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct EconomyResult {
    /// Status calls the simulator received during the window.
    pub status_calls: u64,
    /// Status calls per job per poll interval.
    pub per_job_per_interval: f64,
}

/// `waiters` clients (half long-polls renewed as they return, half streams) watch `jobs` running
/// jobs for `window`; counts the simulator's status calls meanwhile. The watched jobs must be
/// the only ones running, since the simulator counts every status call.
pub async fn economy(
    api: &Api,
    sim_url: &str,
    jobs: &[String],
    waiters: usize,
    window: Duration,
    interval: Duration,
) -> EconomyResult {
    let deadline = Instant::now() + window;
    let before = status_calls(&sim_json(&api.client, sim_url, "/_sim/stats").await);
    let started = Instant::now();
    let tasks = (0..waiters).map(|i| {
        let (api, id) = (api.clone(), jobs[i % jobs.len()].clone());
        tokio::spawn(async move {
            if i % 2 == 0 {
                while Instant::now() < deadline {
                    let left = deadline.saturating_duration_since(Instant::now()).as_secs().clamp(1, 60);
                    api.job(&id, left).await;
                }
            } else {
                let url = format!("{}/api/v1/jobs/{id}/stream", api.base);
                if let Ok(response) = api.client.get(url).bearer_auth(&api.key).send().await {
                    let _ = tokio::time::timeout_at(deadline.into(), response.bytes()).await;
                }
            }
        })
    });
    join_all(tasks).await;
    let elapsed = started.elapsed();
    let calls = status_calls(&sim_json(&api.client, sim_url, "/_sim/stats").await).saturating_sub(before);
    let intervals = elapsed.as_secs_f64() / interval.as_secs_f64();
    EconomyResult { status_calls: calls, per_job_per_interval: calls as f64 / (jobs.len() as f64 * intervals) }
}

/// Latency percentiles.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LatencyResult {
    /// Samples taken.
    pub samples: u64,
    /// Median, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, milliseconds.
    pub p99_ms: f64,
}

/// Time from a job's final transition (its `finished_at`, set by a cancel through `cancel_api`)
/// to the answer of a long-poll waiting on it through `wait_api`; `samples` jobs, `concurrency`
/// at a time.
pub async fn wakeup(wait_api: &Api, cancel_api: &Api, samples: usize, concurrency: usize) -> LatencyResult {
    let gate = Arc::new(Semaphore::new(concurrency));
    let tasks = (0..samples).map(|_| {
        let (wait_api, cancel_api, gate) = (wait_api.clone(), cancel_api.clone(), Arc::clone(&gate));
        tokio::spawn(async move {
            let _permit = gate.acquire().await.ok()?;
            let id = wait_api.submit("wake me [sim:hang]").await?;
            let waiting = {
                let (api, id) = (wait_api.clone(), id.clone());
                tokio::spawn(async move {
                    let job = api.job(&id, 30).await?;
                    Some((OffsetDateTime::now_utc(), job))
                })
            };
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel_api.cancel(&id).await;
            let (answered, job) = waiting.await.ok()??;
            let finished = OffsetDateTime::parse(job["finished_at"].as_str()?, &Rfc3339).ok()?;
            let micros = (answered - finished).whole_microseconds().max(0);
            u32::try_from(micros).ok()
        })
    });
    let mut micros: Vec<u32> = join_all(tasks).await.into_iter().filter_map(|r| r.ok().flatten()).collect();
    micros.sort_unstable();
    LatencyResult {
        samples: micros.len() as u64,
        p50_ms: percentile_ms(&micros, 0.5),
        p99_ms: percentile_ms(&micros, 0.99),
    }
}

/// What the driver-scale scenario saw.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct DriverResult {
    /// Jobs polled during the window.
    pub jobs_polled: u64,
    /// Poll intervals observed.
    pub intervals: u64,
    /// Share of intervals within ±20 % of the poll interval.
    pub within_20_percent: f64,
    /// Median interval, milliseconds.
    pub p50_interval_ms: f64,
    /// 99th percentile interval, milliseconds.
    pub p99_interval_ms: f64,
    /// CPU cores the service used during the window.
    pub service_cores: f64,
}

/// With many jobs running, measures for `window` how regularly the simulator is polled per job
/// and how much CPU the service process `pid` uses.
pub async fn driver_scale(
    client: &reqwest::Client,
    sim_url: &str,
    pid: u32,
    interval: Duration,
    window: Duration,
) -> DriverResult {
    let polls_before = sim_json(client, sim_url, "/_sim/polls").await;
    let cpu_before = crate::host::cpu_time(pid).unwrap_or_default();
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let cores = crate::host::cpu_time(pid).unwrap_or_default().saturating_sub(cpu_before).as_secs_f64()
        / started.elapsed().as_secs_f64();
    let polls_after = sim_json(client, sim_url, "/_sim/polls").await;
    let before: HashMap<&str, usize> = polls_before
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_array().map_or(0, Vec::len))).collect())
        .unwrap_or_default();
    let mut intervals: Vec<u32> = Vec::new();
    let mut jobs_polled = 0;
    for (id, times) in polls_after.as_object().into_iter().flatten() {
        let times: Vec<u64> = times.as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
        let skip = before.get(id.as_str()).copied().unwrap_or(0).saturating_sub(1);
        let window_times = &times[skip.min(times.len())..];
        if window_times.len() > 1 {
            jobs_polled += 1;
        }
        intervals.extend(window_times.windows(2).map(|w| u32::try_from((w[1] - w[0]) * 1000).unwrap_or(u32::MAX)));
    }
    intervals.sort_unstable();
    let target = interval.as_secs_f64() * 1_000_000.0;
    let within = intervals.iter().filter(|&&i| (f64::from(i) - target).abs() <= target * 0.2).count();
    DriverResult {
        jobs_polled,
        intervals: intervals.len() as u64,
        within_20_percent: within as f64 / intervals.len().max(1) as f64,
        p50_interval_ms: percentile_ms(&intervals, 0.5),
        p99_interval_ms: percentile_ms(&intervals, 0.99),
        service_cores: cores,
    }
}
