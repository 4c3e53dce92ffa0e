//! The `conn` phase: a client that abuses connections rather than the API, alongside the
//! others, against whichever replica is up. It stalls request bodies (headers announcing a body
//! that never comes), which must be answered 408 and closed within the replicas' body deadline,
//! and sends made-up HTTP methods, which must be answered in the envelope (the shared rules of
//! every answer) and must never become metric labels.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::clients::{Shared, Tally};
use crate::processes::{ADMIN_TOKEN, BODY_READ_TIMEOUT_SECS};

/// Time past the body deadline after which a stalled connection still open is a violation.
const SLACK: Duration = Duration::from_secs(5);

/// The prefix of every made-up method, looked for in `/metrics` at the end.
const MADE_UP: &str = "SOAKMETHOD";

/// What the phase did.
#[derive(Debug, Default)]
pub struct ConnTally {
    /// Stalled bodies answered 408 and closed.
    pub stalled_closed: u64,
    /// Stalled bodies whose replica was killed under them.
    pub stalled_lost: u64,
    /// Requests sent with a made-up method, and what answered them.
    pub made_up: Tally,
}

/// Stalls bodies and makes up methods until `deadline`, a few at a time.
pub async fn run_until(shared: Arc<Shared>, deadline: Instant) -> ConnTally {
    let mut tally = ConnTally::default();
    let mut round = 0u64;
    while Instant::now() < deadline {
        round += 1;
        let bases = shared.bases();
        let stalls: Vec<_> = bases.iter().map(|base| stall_body(base)).collect();
        for outcome in futures_util::future::join_all(stalls).await {
            match outcome {
                Stalled::Closed408 => tally.stalled_closed += 1,
                Stalled::Lost => tally.stalled_lost += 1,
                Stalled::Broken(why) => shared.violation(why),
            }
        }
        for path in ["/api/v1/models", "/api/v1/jobs/x", "/api/upstream/fal/webhook", "/nowhere"] {
            let method = format!("{MADE_UP}{round}{}", "X".repeat(1024));
            let Ok(method) = Method::from_bytes(method.as_bytes()) else { continue };
            shared.call(&mut tally.made_up, method, path, ADMIN_TOKEN, None, None).await;
        }
    }
    tally
}

/// Checks that no replica's metrics name a made-up method.
pub async fn check_labels(shared: &Shared) {
    for base in shared.bases() {
        match shared.metrics(&base).await {
            Some(text) if text.contains(MADE_UP) => {
                shared.violation(format!("{base}/metrics has a made-up method as a label"));
            }
            Some(_) => {}
            None => shared.violation(format!("{base}/metrics could not be read")),
        }
    }
}

enum Stalled {
    Closed408,
    Lost,
    Broken(String),
}

/// Opens a connection to `base`, sends headers announcing a 1 MiB body and a few bytes of it,
/// and waits for the answer and the close.
async fn stall_body(base: &str) -> Stalled {
    let address = base.trim_start_matches("http://");
    let Ok(mut stream) = TcpStream::connect(address).await else { return Stalled::Lost };
    let head = "POST /api/upstream/fal/webhook HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n\
                Content-Length: 1048576\r\n\r\n{\"request_id\":";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return Stalled::Lost;
    }
    let limit = Duration::from_secs(BODY_READ_TIMEOUT_SECS) + SLACK;
    let mut answer = Vec::new();
    match tokio::time::timeout(limit, stream.read_to_end(&mut answer)).await {
        Err(_) => Stalled::Broken(format!("a stalled body on {base} was still open after {limit:?}")),
        Ok(Err(_)) => Stalled::Lost,
        Ok(Ok(_)) if answer.is_empty() => Stalled::Lost,
        Ok(Ok(_)) if answer.starts_with(b"HTTP/1.1 408") => Stalled::Closed408,
        Ok(Ok(_)) => Stalled::Broken(format!(
            "a stalled body on {base} was answered {}",
            String::from_utf8_lossy(&answer).lines().next().unwrap_or_default()
        )),
    }
}
