use crate::spawn_app;
use genjobs_tests::assert_error;
use serde_json::{Value, json};

#[tokio::test]
async fn health_and_readiness_answer_without_a_key() {
    let app = spawn_app().await;
    for (path, status) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.json::<Value>().await.unwrap(), json!({"status": status}), "{path}");
    }
    let wrong_method = app.client.post(app.url("/healthz")).send().await.unwrap();
    assert_error(wrong_method, 405, "invalid_request", "METHOD_NOT_ALLOWED").await;
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = spawn_app().await;
    let given = app.client.get(app.url("/healthz")).header("x-request-id", "trace-42").send().await.unwrap();
    assert_eq!(given.headers()["x-request-id"], "trace-42", "the request's own id is kept");
    let refused = app.get("/api/v1/jobs/nope", &app.demo_key).await;
    let generated = refused.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(generated.len() == 32 && generated.bytes().all(|b| b.is_ascii_hexdigit()), "{generated}");
    let too_long = "x".repeat(129);
    let replaced = app.client.get(app.url("/healthz")).header("x-request-id", &too_long).send().await.unwrap();
    assert_ne!(replaced.headers()["x-request-id"], too_long.as_str(), "an id over 128 characters is replaced");
}
