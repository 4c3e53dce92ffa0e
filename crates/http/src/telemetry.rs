//! Metrics of the edge, and their Prometheus exposition at `GET /metrics`.
//!
//! The recorder is process-wide (the `metrics` facade has one), so it is installed once and every
//! [`Metrics`] renders it; the domain, the runtime and the Postgres adapter record into it
//! through the same facade.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use metrics::{
    Counter, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Bucket bounds, in seconds, for every histogram: request, upstream call and driver lag
/// latencies all fall between a millisecond and a minute.
const BUCKETS: [f64; 14] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0];

static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often histogram samples are folded into their buckets between scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Something to record just before each scrape (a pool's gauges, say).
pub type Collector = Arc<dyn Fn() + Send + Sync>;

/// The Prometheus view of this process's metrics.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
    collectors: Vec<Collector>,
}

impl Metrics {
    /// Installs the process's recorder on first use, and returns a view of it.
    #[must_use]
    pub fn install() -> Self {
        let handle = RECORDER.get_or_init(|| {
            let builder = PrometheusBuilder::new();
            let recorder = match builder.set_buckets(&BUCKETS) {
                Ok(builder) => builder.build_recorder(),
                Err(_) => PrometheusBuilder::new().build_recorder(),
            };
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("another metrics recorder is installed; /metrics shows only what reaches this one");
            }
            describe_all();
            // Without its HTTP listener, the exporter keeps every histogram sample until an
            // upkeep folds them into buckets; a process nobody scrapes would grow without end.
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new().name("metrics-upkeep".into()).spawn(move || {
                loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                }
            });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start the metrics upkeep; histograms are folded only when scraped");
            }
            handle
        });
        Self { handle: handle.clone(), collectors: Vec::new() }
    }

    /// Also runs `collector` before each scrape.
    #[must_use]
    pub fn with_collector(mut self, collector: Collector) -> Self {
        self.collectors.push(collector);
        self
    }

    /// The text exposition format (`text/plain; version=0.0.4`).
    #[must_use]
    pub fn render(&self) -> String {
        for collect in &self.collectors {
            collect();
        }
        self.handle.run_upkeep();
        self.handle.render()
    }
}

/// The `# HELP` line of every metric the process records, wherever it is recorded.
fn describe_all() {
    describe_counter!("genjobs_http_requests_total", "HTTP requests answered, by route pattern, method and status");
    describe_histogram!("genjobs_http_request_duration_seconds", Unit::Seconds, "Time to answer an HTTP request");
    describe_counter!(
        "genjobs_log_lines_dropped_total",
        "Log lines dropped because their destination took nothing for 100 ms while the log's buffer was full"
    );
    describe_counter!("genjobs_jobs_accepted_total", "Jobs accepted, by model");
    describe_counter!("genjobs_jobs_finished_total", "Jobs that became final, by model, final state and provider");
    describe_counter!("genjobs_jobs_failed_total", "Jobs that failed or were canceled, by model and error code");
    describe_counter!("genjobs_jobs_purged_total", "Final jobs removed past GENJOBS_JOB_RETENTION_DAYS");
    describe_counter!(
        "genjobs_usage_seals_total",
        "Stretches of whole hours sealed into the usage rollups, which reports then read instead of the jobs"
    );
    describe_histogram!(
        "genjobs_client_webhook_lag_seconds",
        Unit::Seconds,
        "Time from a job's final transition to the first attempt to deliver its webhook"
    );
    describe_counter!("genjobs_client_webhook_attempts_total", "Attempts to deliver webhooks to clients");
    describe_counter!(
        "genjobs_client_webhook_deliveries_total",
        "Webhook deliveries to clients, by outcome (delivered, retrying, given_up)"
    );
    describe_gauge!(
        "genjobs_client_webhook_oldest_pending_seconds",
        Unit::Seconds,
        "Age of the oldest webhook event to a client not yet delivered"
    );
    describe_gauge!("genjobs_jobs", "Jobs not yet final now, by state, across every replica");
    describe_counter!("genjobs_credits_held_total", "Credits held at acceptance, by model");
    describe_counter!("genjobs_credits_spent_total", "Credits charged for succeeded jobs, by model");
    describe_counter!("genjobs_credits_released_total", "Credits held and then released, by model");
    describe_counter!(
        "genjobs_moderation_total",
        "Checks by the moderation service before a job is sent, by result (passed, flagged, unavailable)"
    );
    describe_gauge!(
        "genjobs_provider_cost_usd_total",
        "What providers billed for finished jobs, in USD, by provider and model (a float, so a gauge that only grows)"
    );
    describe_histogram!("genjobs_driver_lag_seconds", Unit::Seconds, "How late a job's poll started after its time");
    describe_counter!("genjobs_upstream_calls_total", "Calls to each provider, by kind and outcome");
    describe_histogram!("genjobs_upstream_call_duration_seconds", Unit::Seconds, "Time of a call to a provider");
    describe_counter!("genjobs_upstream_notifications_total", "Webhook deliveries from each provider, by outcome");
    describe_counter!("genjobs_upstream_refusals_total", "Submissions a provider provably did not take, by provider");
    describe_counter!(
        "genjobs_upstream_fallbacks_total",
        "Submissions moved to a next route, by the provider they went to"
    );
    describe_gauge!(
        "genjobs_upstream_cooling_down",
        "1 while a provider is passed by after refusals in a row, by provider"
    );
    describe_gauge!(
        "genjobs_provider_in_flight",
        "Jobs sent with each provider key and not final, by provider and the key's last 4 characters"
    );
    describe_gauge!("genjobs_provider_waiting", "Jobs waiting, unsent, for a slot of a provider's keys, by priority");
    describe_counter!(
        "genjobs_upstream_timeout_cancels_total",
        "Cancels sent to the provider for jobs past their deadline, by the provider's answer"
    );
    describe_gauge!("genjobs_open_connections", "Open event streams (sse) and long-polls (long_poll)");
    describe_gauge!("genjobs_db_pool_connections", "Postgres pool connections, by pool and state (in_use, idle)");
    describe_gauge!("genjobs_db_pool_waiting", "Callers waiting for a Postgres pool connection, by pool");
    describe_counter!(
        "genjobs_db_job_commits_total",
        "Postgres commits that wrote jobs (accepts, transitions, leases), by durability (durable, relaxed)"
    );
    describe_counter!(
        "genjobs_db_deadlines_missed_total",
        "Units of work on Postgres given up at GENJOBS_DB_STATEMENT_TIMEOUT_MS (answered 503)"
    );
}

/// The methods counted by name; any other is counted as `OTHER`.
const STANDARD_METHODS: [&str; 9] = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/// `method` as a label: one of [`STANDARD_METHODS`] or `OTHER`, so that a client making up
/// methods cannot add series (each one kept for good, and rendered at every scrape).
fn method_label(method: &str) -> &'static str {
    STANDARD_METHODS.into_iter().find(|standard| *standard == method).unwrap_or("OTHER")
}

/// One request answered: `genjobs_http_requests_total{route, method, status}` and
/// `genjobs_http_request_duration_seconds{route, method}`. Every label comes from a closed set:
/// `route` is the template matched (`/api/v1/jobs/{id}`) or `unmatched`, so that ids and made-up
/// paths do not multiply the series; `method` is a standard method or `OTHER`; `status` a
/// status code.
pub(crate) fn request(route: &str, method: &str, status: u16, elapsed: Duration) {
    // Each worker thread keeps the handles it has used: no lock shared between workers, and a
    // route already seen is found by the name it comes as, without making a key of it.
    thread_local! {
        static SERIES: RefCell<HashMap<String, Vec<RouteSeries>>> = RefCell::new(HashMap::new());
    }
    let method = method_label(method);
    SERIES.with_borrow_mut(|series| match series.get_mut(route) {
        Some(by_method) => record(by_method, route, method, status, elapsed),
        None => record(series.entry(route.to_owned()).or_default(), route, method, status, elapsed),
    });
}

/// Records one request in the series of its method among `by_method`, those of `route`.
fn record(by_method: &mut Vec<RouteSeries>, route: &str, method: &'static str, status: u16, elapsed: Duration) {
    let at = match by_method.iter().position(|known| known.method == method) {
        Some(at) => at,
        None => {
            by_method.push(RouteSeries::new(route, method));
            by_method.len() - 1
        }
    };
    let route_series = &mut by_method[at];
    route_series.duration.record(elapsed.as_secs_f64());
    route_series.requests(status).increment(1);
}

/// The handles of one route and method's series, registered once: building their keys and
/// finding them in the registry on every request took a twentieth of a cached GET's time.
struct RouteSeries {
    route: String,
    method: &'static str,
    duration: Histogram,
    requests: Vec<(u16, Counter)>,
}

impl RouteSeries {
    fn new(route: &str, method: &'static str) -> Self {
        Self {
            duration: histogram!("genjobs_http_request_duration_seconds", "route" => route.to_owned(), "method" => method),
            route: route.to_owned(),
            method,
            requests: Vec::new(),
        }
    }

    /// The counter of `status`: a route answers with a handful of statuses, found by a look at
    /// each.
    fn requests(&mut self, status: u16) -> &Counter {
        let at = match self.requests.iter().position(|(known, _)| *known == status) {
            Some(at) => at,
            None => {
                let (route, method) = (self.route.clone(), self.method);
                let counter = counter!("genjobs_http_requests_total", "route" => route, "method" => method, "status" => status.to_string());
                self.requests.push((status, counter));
                self.requests.len() - 1
            }
        };
        &self.requests[at].1
    }
}

/// What a connection is held open for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Held {
    /// An SSE stream.
    Stream,
    /// A long-poll (`?wait=`).
    LongPoll,
}

/// Counts one open stream or long-poll in `genjobs_open_connections{kind}` while it lives.
pub(crate) struct OpenConnection(&'static str);

impl OpenConnection {
    pub(crate) fn new(held: Held) -> Self {
        let kind = match held {
            Held::Stream => "sse",
            Held::LongPoll => "long_poll",
        };
        gauge!("genjobs_open_connections", "kind" => kind).increment(1.0);
        Self(kind)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        gauge!("genjobs_open_connections", "kind" => self.0).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_are_counted_as_other() {
        for standard in STANDARD_METHODS {
            assert_eq!(method_label(standard), standard);
        }
        for made_up in ["BREW", "get", "PROPFIND", &"X".repeat(2048)] {
            assert_eq!(method_label(made_up), "OTHER", "{made_up}");
        }
    }
}
