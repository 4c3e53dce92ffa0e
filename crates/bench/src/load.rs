//! Load generators: a closed loop (N clients, each sending its next request when the previous
//! answers), which finds the maximum rate, and an open loop (requests sent on a fixed schedule
//! whatever the answers), whose latencies include the queueing a closed loop hides.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

/// What a load run measured.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LoadResult {
    /// Requests that succeeded.
    pub ok: u64,
    /// Requests that failed (transport error or unexpected status).
    pub errors: u64,
    /// Successful requests per second.
    pub per_sec: f64,
    /// Median latency, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: f64,
}

/// Runs `clients` loops for `duration`; each calls `request(client, sequence)` and waits for it.
/// The request's future says whether it succeeded.
pub async fn closed_loop<F, Fut>(clients: usize, duration: Duration, request: F) -> LoadResult
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let request = Arc::new(request);
    let sequence = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let (request, sequence, errors) = (Arc::clone(&request), Arc::clone(&sequence), Arc::clone(&errors));
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(4096);
                while Instant::now() < deadline {
                    let n = sequence.fetch_add(1, Ordering::Relaxed);
                    let sent = Instant::now();
                    if request(client, n).await {
                        latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap_or_default());
    }
    let elapsed = started.elapsed().as_secs_f64();
    summarize(latencies, errors.load(Ordering::Relaxed), elapsed)
}

/// Sends `request(sequence)` at `rate` per second for `duration`, each on its own task whether or
/// not the previous ones answered; a latency runs from when the request was due, not from when
/// it was sent, so that a stalled generator does not hide queueing (coordinated omission).
pub async fn open_loop<F, Fut>(rate: f64, duration: Duration, request: F) -> LoadResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let period = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let started = Instant::now();
    let total = (duration.as_secs_f64() * rate.max(1.0)) as u64;
    let mut tasks = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for n in 0..total {
        let due = started + period.mul_f64(n as f64);
        tokio::time::sleep_until(due.into()).await;
        let answer = request(n);
        tasks.push(tokio::spawn(async move {
            let ok = answer.await;
            (ok, u32::try_from(due.elapsed().as_micros()).unwrap_or(u32::MAX))
        }));
    }
    let (mut latencies, mut errors) = (Vec::with_capacity(tasks.len()), 0);
    for task in tasks {
        match task.await {
            Ok((true, micros)) => latencies.push(micros),
            _ => errors += 1,
        }
    }
    summarize(latencies, errors, duration.as_secs_f64())
}

fn summarize(mut latencies: Vec<u32>, errors: u64, elapsed_secs: f64) -> LoadResult {
    latencies.sort_unstable();
    let ok = latencies.len() as u64;
    LoadResult {
        ok,
        errors,
        per_sec: ok as f64 / elapsed_secs.max(f64::EPSILON),
        p50_ms: percentile_ms(&latencies, 0.50),
        p99_ms: percentile_ms(&latencies, 0.99),
    }
}

/// The `q` quantile of sorted microsecond latencies, in milliseconds.
#[must_use]
pub fn percentile_ms(sorted_micros: &[u32], q: f64) -> f64 {
    if sorted_micros.is_empty() {
        return 0.0;
    }
    let index = ((sorted_micros.len() as f64 - 1.0) * q).round() as usize;
    f64::from(sorted_micros[index.min(sorted_micros.len() - 1)]) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let sorted: Vec<u32> = (1..=100).map(|ms| ms * 1000).collect();
        assert_eq!(percentile_ms(&sorted, 0.5), 51.0);
        assert_eq!(percentile_ms(&sorted, 0.99), 99.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
    }

    #[tokio::test]
    async fn an_open_loop_keeps_its_schedule_and_counts_queueing() {
        let in_flight = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&in_flight);
        let result = open_loop(100.0, Duration::from_millis(300), move |_| {
            seen.fetch_add(1, Ordering::Relaxed);
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                true
            }
        })
        .await;
        assert_eq!(result.ok + result.errors, 30, "100/s for 0.3 s, whatever the answers: {result:?}");
        assert_eq!(in_flight.load(Ordering::Relaxed), 30);
        assert!(result.p50_ms >= 50.0, "latency counts from the due time: {result:?}");
    }

    #[tokio::test]
    async fn a_closed_loop_counts_successes_and_errors() {
        let result = closed_loop(4, Duration::from_millis(200), |_, n| async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            n % 2 == 0
        })
        .await;
        assert!(result.ok > 10 && result.errors > 10, "{result:?}");
        assert!(result.p50_ms >= 10.0 && result.p99_ms < 100.0, "{result:?}");
    }
}
