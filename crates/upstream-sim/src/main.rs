//! `genjobs-upstream-sim`: the fal queue simulator as a standalone server, for load tests and for
//! pointing a genjobs replica (or several) at one shared simulated provider.
//!
//! Environment: `SIM_BIND` (default `127.0.0.1:8090`), `SIM_QUEUE_MS`, `SIM_RUN_MS`, `SIM_KEY`,
//! `SIM_CHAOS` (probability of a random fault per call, default 0), `SIM_WEBHOOK_RETRY_MS` (first
//! pause before a webhook delivery is tried again, default 1000), `SIM_MAX_IN_PROGRESS_PER_KEY`
//! (requests of one key in progress at once, the rest `IN_QUEUE`; default 0, no limit).

use std::net::TcpListener;
use std::time::Duration;

use genjobs_upstream_sim::SimConfig;

fn millis(name: &str, default: Duration) -> Duration {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).map_or(default, Duration::from_millis)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let defaults = SimConfig::default();
    let config = SimConfig {
        queue: millis("SIM_QUEUE_MS", defaults.queue),
        run: millis("SIM_RUN_MS", defaults.run),
        api_key: std::env::var("SIM_KEY").ok(),
        chaos: std::env::var("SIM_CHAOS").ok().and_then(|v| v.parse().ok()).unwrap_or(defaults.chaos),
        webhook_retry: millis("SIM_WEBHOOK_RETRY_MS", defaults.webhook_retry),
        max_in_progress_per_key: std::env::var("SIM_MAX_IN_PROGRESS_PER_KEY")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(defaults.max_in_progress_per_key),
        // Where it listens is SIM_BIND's.
        ..defaults
    };
    let bind = std::env::var("SIM_BIND").unwrap_or_else(|_| "127.0.0.1:8090".into());
    let (server, running) = genjobs_upstream_sim::server(config, TcpListener::bind(&bind)?)?;
    tracing::info!(base_url = %running.base_url, "fal queue simulator listening");
    println!("genjobs-upstream-sim listening on {}", running.base_url);
    server.await
}
