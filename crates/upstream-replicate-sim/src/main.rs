//! `genjobs-upstream-replicate-sim`: the Replicate simulator as a standalone server, to point a
//! genjobs replica (`GENJOBS_REPLICATE_URL=http://<bind>/v1`) or a soak run at.
//!
//! Environment: `SIM_BIND` (default `127.0.0.1:8091`), `SIM_TOKEN` (default `sim-token`),
//! `SIM_STARTING_MS`, `SIM_PROCESSING_MS`, `SIM_WEBHOOK_SECRET` (`whsec_…`), and the shares of
//! submissions that fail (0 to 1, default 0): `SIM_THROTTLED`, `SIM_UNAVAILABLE`,
//! `SIM_SERVER_ERROR`, `SIM_FAILED`.

use std::net::TcpListener;
use std::time::Duration;

use genjobs_upstream_replicate_sim::{Failures, SimConfig};

fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let defaults = SimConfig::default();
    let config = SimConfig {
        token: var("SIM_TOKEN").unwrap_or(defaults.token),
        starting: var("SIM_STARTING_MS").map_or(defaults.starting, Duration::from_millis),
        processing: var("SIM_PROCESSING_MS").map_or(defaults.processing, Duration::from_millis),
        webhook_secret: var("SIM_WEBHOOK_SECRET").unwrap_or(defaults.webhook_secret),
        webhook_retry: defaults.webhook_retry,
        failures: Failures {
            throttled: var("SIM_THROTTLED").unwrap_or(0.0),
            unavailable: var("SIM_UNAVAILABLE").unwrap_or(0.0),
            server_error: var("SIM_SERVER_ERROR").unwrap_or(0.0),
            failed: var("SIM_FAILED").unwrap_or(0.0),
        },
    };
    let bind = std::env::var("SIM_BIND").unwrap_or_else(|_| "127.0.0.1:8091".into());
    let (server, running) = genjobs_upstream_replicate_sim::server(config, TcpListener::bind(&bind)?)?;
    tracing::info!(api_url = %running.api_url(), "replicate simulator listening");
    println!("genjobs-upstream-replicate-sim listening on {}", running.api_url());
    server.await
}
