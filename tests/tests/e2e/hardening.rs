//! The hardening of the edge, seen from outside: `extra` that may not inline outputs, metric
//! labels that made-up methods cannot multiply, bodies that must arrive in time, links that no
//! `Host` header can move, a limit on unauthenticated requests, the policy of the service's own
//! pages, and streams that end with their key.

use std::time::{Duration, Instant};

use genjobs::Config;
use genjobs_http::HttpSettings;
use genjobs_tests::{ADMIN_TOKEN, TestApp, assert_error, fast_config};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{spawn_app, spawn_app_with};

fn with_http(http: impl FnOnce(HttpSettings) -> HttpSettings) -> Config {
    let config = fast_config();
    Config { http: http(config.http.clone()), ..config }
}

/// `extra` may not turn on fal's `sync_mode`, which would put the outputs inline, as `data:`
/// URIs of megabytes, into the job.
#[tokio::test]
async fn extra_may_not_ask_for_outputs_inline() {
    let app = spawn_app().await;
    let body = json!({"prompt": "a", "extra": {"sync_mode": true}});
    let error = assert_error(
        app.post("/api/v1/images/generations", &app.demo_key, &body).await,
        400,
        "invalid_request",
        "INVALID_REQUEST",
    )
    .await;
    assert_eq!(error["param"], "extra.sync_mode");
}

/// Requests with made-up methods are counted under `OTHER`: a client cannot add a series per
/// method (each kept for good, and rendered at every scrape).
#[tokio::test]
async fn made_up_methods_do_not_become_metric_labels() {
    let app = spawn_app().await;
    for i in 0..50 {
        let method = format!("MADEUP{i}{}", "X".repeat(500));
        let response = app.client.request(method.parse().unwrap(), app.url("/api/v1/models")).send().await.unwrap();
        assert_eq!(response.status(), 405);
    }
    let metrics = app.metrics().await;
    assert!(!metrics.contains("MADEUP"), "a made-up method became a label");
    let other = metrics
        .lines()
        .find(|line| line.starts_with("genjobs_http_requests_total") && line.contains("method=\"OTHER\""))
        .unwrap_or_else(|| panic!("no OTHER series:\n{metrics}"));
    assert!(other.ends_with(" 50"), "{other}");
}

/// Sends `head` (a request's line and headers, without their blank line) announcing a body
/// that never comes, and reads what the server answers until it closes the connection.
async fn stall_body(app: &TestApp, head: &str, limit: Duration) -> String {
    let mut stream = TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
    stream.write_all(format!("{head}\r\nContent-Length: 1048576\r\n\r\n").as_bytes()).await.unwrap();
    stream.write_all(b"{\"prompt\":").await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(limit, stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection was still open after {limit:?}: {}", String::from_utf8_lossy(&answer));
    String::from_utf8_lossy(&answer).into_owned()
}

/// A body that stalls gets 408 once the deadline passes, and its connection is closed, on every
/// route that reads one: with a key, without one, and on the provider's webhook.
#[tokio::test]
async fn a_stalled_body_is_answered_408_and_its_connection_closed() {
    let app =
        spawn_app_with(with_http(|http| HttpSettings { body_read_timeout: Duration::from_secs(1), ..http })).await;
    let started = Instant::now();
    let heads = [
        format!(
            "POST /api/v1/images/generations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json",
            app.demo_key
        ),
        "POST /api/upstream/fal/webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json".to_owned(),
        format!(
            "POST /openai/v1/videos HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json",
            app.demo_key
        ),
        format!(
            "POST /api/admin/users HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json"
        ),
    ];
    for head in heads {
        let answer = stall_body(&app, &head, Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{head}: {answer}");
        assert!(answer.to_lowercase().contains("\"request_timeout\""), "in the envelope: {answer}");
    }
    assert!(started.elapsed() >= Duration::from_secs(4), "each waited its deadline: {:?}", started.elapsed());
    let unauthenticated = "POST /api/v1/images/generations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json";
    let answer = stall_body(&app, unauthenticated, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "refused before its body, and closed: {answer}");
}

/// Headers that never end are cut off too (actix's request timeout), so neither half of a
/// request can hold a connection.
#[tokio::test]
async fn headers_that_never_end_are_cut_off() {
    let app = spawn_app().await;
    let mut stream = TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
    stream.write_all(b"GET /api/v1/models HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection was still open: {}", String::from_utf8_lossy(&answer));
}

/// Many connections stalling their bodies at once are all closed by the deadline: none is held
/// open for as long as its client likes (the slowloris of bodies).
#[tokio::test]
async fn many_stalled_bodies_are_all_closed_by_the_deadline() {
    let app =
        spawn_app_with(with_http(|http| HttpSettings { body_read_timeout: Duration::from_secs(1), ..http })).await;
    let head = "POST /api/upstream/fal/webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json";
    let stalls = (0..100).map(|_| stall_body(&app, head, Duration::from_secs(10)));
    for answer in futures_util::future::join_all(stalls).await {
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    }
    let models = app.get("/api/v1/models", &app.demo_key).await;
    assert_eq!(models.status(), 200, "the service still serves");
}

/// Without `GENJOBS_PUBLIC_URL`, output links are rooted at the address the request came to:
/// neither `Host` nor `X-Forwarded-Host` can point them elsewhere, unless forwarded headers are
/// trusted.
#[tokio::test]
async fn links_are_rooted_at_the_bound_address_not_at_headers() {
    for trusted in [false, true] {
        let app = spawn_app_with(with_http(|http| HttpSettings { trust_forwarded: trusted, ..http })).await;
        let receipt = app.submit("images", &app.demo_key, json!({"prompt": "a kite"})).await;
        let id = receipt["job_id"].as_str().unwrap();
        app.wait_final(&app.demo_key, id).await;
        let job: Value = app
            .client
            .get(app.url(&format!("/api/v1/jobs/{id}")))
            .bearer_auth(&app.demo_key)
            .header("host", "evil.example")
            .header("x-forwarded-host", "evil.example")
            .header("forwarded", "host=evil.example;proto=https")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let url = job["outputs"][0]["url"].as_str().unwrap();
        if trusted {
            assert!(url.starts_with("https://evil.example/api/v1/files/"), "{url}");
        } else {
            assert!(url.starts_with(&format!("{}/api/v1/files/", app.base)), "{url}");
        }
    }
}

/// Past its allowance of 401s in a minute, a client address is answered 429 before any key is
/// looked up, whatever key it sends that the replica has not let in yet (`boundaries_edge` has
/// the keys it has); the allowance is configurable.
#[tokio::test]
async fn unauthenticated_requests_are_limited_per_address() {
    let app = spawn_app_with(with_http(|http| HttpSettings { unauthenticated_per_minute: 5, ..http })).await;
    for i in 0..5 {
        let guess = format!("gj_guess{i}{}", "x".repeat(40));
        assert_error(app.get("/api/v1/account", &guess).await, 401, "unauthorized", "INVALID_API_KEY").await;
    }
    let limited = app.get("/api/v1/account", "gj_guess-again").await;
    let retry_after: u64 = limited.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_error(limited, 429, "rate_limited", "RATE_LIMIT_EXCEEDED").await;
    let admin = app.get("/api/admin/usage", "wrong-admin-token").await;
    assert_eq!(admin.status(), 429, "admin guesses count as well");
    assert_eq!(app.get("/api/v1/account", &app.demo_key).await.status(), 429, "the address waits out its minute");
}

/// The playground and the account page run only their own script, talk only to this origin,
/// and may not be framed by another site; a browser neither sniffs them.
#[tokio::test]
async fn the_pages_send_a_strict_content_security_policy() {
    let app = spawn_app().await;
    for path in ["/playground", "/playground/account"] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let policy = response.headers()["content-security-policy"].to_str().unwrap().to_owned();
        for directive in
            ["default-src 'none'", "script-src 'self' 'sha256-", "connect-src 'self'", "frame-ancestors 'none'"]
        {
            assert!(policy.contains(directive), "{path}: {directive} missing from {policy}");
        }
        assert!(!policy.contains("unsafe-inline"), "{path}: {policy}");
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    }
}

/// An open stream ends soon after its key is revoked, rather than living out its lifetime.
#[tokio::test]
async fn a_stream_ends_when_its_key_is_revoked() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit("images", &user.key, json!({"prompt": "held [sim:hang]"})).await;
    let stream = app.open_stream(receipt["job_id"].as_str().unwrap(), &user.key).await;
    let prefix = &user.key[..15];
    let revoked =
        app.client.delete(app.url(&format!("/api/admin/keys/{prefix}"))).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(revoked.status(), 204);
    let started = Instant::now();
    genjobs_tests::read_to_end(stream, Duration::from_secs(10)).await;
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}
