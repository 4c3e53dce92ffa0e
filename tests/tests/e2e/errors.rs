use std::sync::Arc;

use crate::spawn_app;
use futures_util::StreamExt;
use genjobs_domain::ids::ApiKey;
use genjobs_domain::ports::*;
use genjobs_domain::usecases::Ports;
use genjobs_runtime::{EventHub, SystemClock, TokenBucketLimiter};
use genjobs_store_memory::MemoryStore;
use genjobs_tests::snapshot;
use genjobs_tests::{assert_error, spawn_gateway};
use serde_json::json;

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405() {
    let app = spawn_app().await;
    for path in ["/api/v2/models", "/api/v1/jobs/x/y/z", "/api/v1/videos/generations", "/favicon.png"] {
        assert_error(app.get(path, &app.demo_key).await, 404, "not_found", "ROUTE_NOT_FOUND").await;
    }
    let wrong = [
        ("GET", "/api/v1/video/generations", "POST"),
        ("PUT", "/api/v1/images/generations", "POST"),
        ("DELETE", "/api/v1/jobs/01a20071-bf18-7493-acc7-9f682d0b19fd", "GET, HEAD"),
        ("GET", "/api/v1/jobs/01a20071-bf18-7493-acc7-9f682d0b19fd/cancel", "POST"),
        ("POST", "/api/v1/models", "GET, HEAD"),
        ("PUT", "/api/admin/users", "POST, GET, HEAD"),
        ("POST", "/", "GET, HEAD"),
        ("PUT", "/openai/v1/videos", "POST, GET, HEAD"),
    ];
    for (method, path, allowed) in wrong {
        let response =
            app.client.request(method.parse().unwrap(), app.url(path)).bearer_auth(&app.demo_key).send().await.unwrap();
        assert_eq!(response.headers().get("allow").and_then(|v| v.to_str().ok()), Some(allowed), "{method} {path}");
        if path.starts_with("/openai/") {
            assert_eq!(response.status(), 405);
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "method_not_allowed", "in OpenAI's shape: {body}");
        } else {
            assert_error(response, 405, "invalid_request", "METHOD_NOT_ALLOWED").await;
        }
    }
    let head = app.client.head(app.url("/api/v1/images/generations")).send().await.unwrap();
    assert_eq!(head.status(), 405, "HEAD is GET's, and this path takes POST only");
    assert_eq!(head.headers()["allow"], "POST");
}

fn ports_with(jobs: Arc<dyn JobStore>, accounts: Arc<dyn AccountStore>) -> Ports {
    Ports {
        jobs,
        accounts,
        batches: Arc::new(MemoryStore::new()),
        openai_batches: Arc::new(MemoryStore::new()),
        removals: Arc::new(MemoryStore::new()),
        usage: Arc::new(MemoryStore::new()),
        catalog: Arc::new(MemoryStore::new()),
        route_schemas: vec![],
        upstream: Arc::new(MockUpstreamProvider::new()),
        outputs: None,
        uploads: Arc::new(MemoryStore::new()),
        events: Arc::new(EventHub::new()),
        rate_limiter: Arc::new(TokenBucketLimiter::new()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
        traces: Arc::new(genjobs_domain::ports::NoTraces),
    }
}

async fn user_in(store: &MemoryStore) -> ApiKey {
    let key = ApiKey::generate();
    let id = genjobs_domain::ids::UserId::new_at(time::OffsetDateTime::now_utc());
    let limits = Limits { rate_limit_per_minute: 100, max_concurrent_jobs: 5 };
    store
        .create_user(
            id,
            "u".into(),
            genjobs_domain::credits::Credits::new(100),
            limits,
            StoredKey::of(&key, id, time::OffsetDateTime::now_utc()),
        )
        .await
        .unwrap();
    key
}

#[tokio::test]
async fn a_broken_store_is_500_without_internals_and_an_unreachable_one_503() {
    let accounts = Arc::new(MemoryStore::new());
    let key = user_in(&accounts).await;
    for (failure, status, kind, code) in [
        (StoreError::Internal("relation \"jobs\" does not exist".into()), 500, "internal_error", "INTERNAL"),
        (StoreError::Unavailable("connection refused".into()), 503, "unavailable", "SERVICE_UNAVAILABLE"),
    ] {
        let mut jobs = MockJobStore::new();
        let returned = failure.clone();
        jobs.expect_job().returning(move |_| Err(returned.clone()));
        jobs.expect_accept().returning(move |_, _, _, _| Err(AcceptError::Store(failure.clone())));
        let base = spawn_gateway(ports_with(Arc::new(jobs), accounts.clone())).await;
        let client = reqwest::Client::new();
        let read =
            client.get(format!("{base}/api/v1/jobs/01a20071-bf18-7493-acc7-9f682d0b19fd")).bearer_auth(key.expose());
        let error = assert_error(read.send().await.unwrap(), status, kind, code).await;
        assert!(!error["message"].as_str().unwrap().contains("relation"), "no internals: {error}");
        let submit = client
            .post(format!("{base}/api/v1/images/generations"))
            .bearer_auth(key.expose())
            .json(&json!({"prompt": "a"}));
        assert_error(submit.send().await.unwrap(), status, kind, code).await;
    }
}

#[tokio::test]
async fn readiness_is_503_in_the_envelope_while_the_store_cannot_serve() {
    let mut jobs = MockJobStore::new();
    jobs.expect_ready().returning(|| Err(StoreError::Unavailable("2 database migrations are not applied".into())));
    let base = spawn_gateway(ports_with(Arc::new(jobs), Arc::new(MemoryStore::new()))).await;
    let response = reqwest::Client::new().get(format!("{base}/readyz")).send().await.unwrap();
    assert_error(response, 503, "unavailable", "SERVICE_UNAVAILABLE").await;
    let alive = reqwest::Client::new().get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(alive.status(), 200, "the process still answers");
}

/// Probes answer from a store check at most a second old: a burst of them costs one check.
#[tokio::test]
async fn a_burst_of_readiness_probes_checks_the_store_once() {
    let checks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut jobs = MockJobStore::new();
    let counted = Arc::clone(&checks);
    jobs.expect_ready().returning(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    });
    let base = spawn_gateway(ports_with(Arc::new(jobs), Arc::new(MemoryStore::new()))).await;
    let client = reqwest::Client::new();
    let started = std::time::Instant::now();
    for _ in 0..20 {
        assert_eq!(client.get(format!("{base}/readyz")).send().await.unwrap().status(), 200);
    }
    let bound = 1 + started.elapsed().as_secs() as usize;
    let made = checks.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=bound).contains(&made), "{made} store checks for 20 probes in {:?}", started.elapsed());
}

#[tokio::test]
async fn an_unreachable_key_store_is_503_not_401() {
    let mut accounts = MockAccountStore::new();
    accounts.expect_credentials().returning(|_| Err(StoreError::Unavailable("timeout".into())));
    let base = spawn_gateway(ports_with(Arc::new(MemoryStore::new()), Arc::new(accounts))).await;
    let response =
        reqwest::Client::new().get(format!("{base}/api/v1/models")).bearer_auth("gj_whatever").send().await.unwrap();
    assert_error(response, 503, "unavailable", "SERVICE_UNAVAILABLE").await;
}

#[tokio::test]
async fn every_error_body_is_the_envelope() {
    let app = spawn_app().await;
    let response = app.get("/nowhere", &app.demo_key).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: serde_json::Value = response.json().await.unwrap();
    snapshot!("route_not_found", body);
    let stream = app.client.get(app.url("/api/v1/jobs/nope/stream")).send().await.unwrap();
    assert_eq!(stream.headers()["content-type"], "application/json");
    assert!(stream.bytes_stream().next().await.is_some());
}

#[tokio::test]
async fn a_nul_character_is_refused_with_its_field_on_every_store() {
    let app = spawn_app().await;
    for (body, param) in [
        (json!({"prompt": "\u{0} sunset"}), "prompt"),
        (json!({"prompt": "sunset", "extra": {"style": "noir\u{0}"}}), "extra"),
    ] {
        let response = app.post("/api/v1/images/generations", &app.demo_key, &body).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], param, "{body}");
    }
    let account: serde_json::Value = app.get("/api/v1/account", &app.demo_key).await.json().await.unwrap();
    assert_eq!(account["credits_held"], 0, "nothing was accepted");
}
