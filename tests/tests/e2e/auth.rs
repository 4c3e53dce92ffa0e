use crate::spawn_app;
use genjobs_tests::assert_error;
use serde_json::json;

const ENDPOINTS: &[(&str, &str)] = &[
    ("POST", "/api/v1/video/generations"),
    ("POST", "/api/v1/images/generations"),
    ("GET", "/api/v1/jobs/01a20071-bf18-7493-acc7-9f682d0b19fd"),
    ("GET", "/api/v1/jobs/01a20071-bf18-7493-acc7-9f682d0b19fd/stream"),
    ("POST", "/api/v1/jobs/01a20071-bf18-7493-acc7-9f682d0b19fd/cancel"),
    ("GET", "/api/v1/models"),
    ("GET", "/api/v1/account"),
    ("GET", "/api/v1/jobs"),
];

#[tokio::test]
async fn every_endpoint_needs_the_authorization_header() {
    let app = spawn_app().await;
    for (method, path) in ENDPOINTS {
        let request = app.client.request(method.parse().unwrap(), app.url(path));
        let response = request.json(&json!({"prompt": "x"})).send().await.unwrap();
        assert_error(response, 401, "unauthorized", "MISSING_API_KEY").await;
    }
}

#[tokio::test]
async fn a_header_not_of_the_bearer_form_says_so() {
    let app = spawn_app().await;
    for header in ["Basic dXNlcjpwYXNz", "gj_0123456789abcdef", "Token abc"] {
        let response = app.client.get(app.url("/api/v1/models")).header("authorization", header).send().await.unwrap();
        let error = assert_error(response, 401, "unauthorized", "MISSING_API_KEY").await;
        assert_eq!(error["message"], "Authorization header must be: Bearer <api_key>", "{header}");
    }
}

#[tokio::test]
async fn bearer_followed_by_nothing_has_its_own_message() {
    let app = spawn_app().await;
    for header in ["Bearer", "Bearer ", "Bearer    "] {
        let response = app.client.get(app.url("/api/v1/models")).header("authorization", header).send().await.unwrap();
        let error = assert_error(response, 401, "unauthorized", "MISSING_API_KEY").await;
        assert_eq!(error["message"], "Authorization header is empty after Bearer", "{header:?}");
    }
}

#[tokio::test]
async fn a_wrong_key_is_invalid() {
    let app = spawn_app().await;
    for key in ["gj_00000000000000000000000000000000", "short", &format!("{}x", app.demo_key)] {
        assert_error(app.get("/api/v1/models", key).await, 401, "unauthorized", "INVALID_API_KEY").await;
    }
    assert_eq!(app.get("/api/v1/models", &app.demo_key).await.status(), 200);
}

#[tokio::test]
async fn another_users_job_is_forbidden_to_read_stream_and_cancel() {
    let app = spawn_app().await;
    let owner = app.create_user(100, json!({})).await;
    let stranger = app.create_user(100, json!({})).await;
    let receipt = app.submit("images", &owner.key, json!({"prompt": "mine [sim:hang]"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    for (method, path) in [
        ("GET", format!("/api/v1/jobs/{id}")),
        ("GET", format!("/api/v1/jobs/{id}?wait=1")),
        ("GET", format!("/api/v1/jobs/{id}/stream")),
        ("POST", format!("/api/v1/jobs/{id}/cancel")),
    ] {
        let response = app
            .client
            .request(method.parse().unwrap(), app.url(&path))
            .bearer_auth(&stranger.key)
            .send()
            .await
            .unwrap();
        assert_error(response, 403, "forbidden", "FORBIDDEN").await;
    }
    let job: serde_json::Value = app.get(&format!("/api/v1/jobs/{id}"), &owner.key).await.json().await.unwrap();
    assert_ne!(job["state"], "canceled", "the stranger's cancel must not have applied");
}

#[tokio::test]
async fn the_rate_limit_answers_429_with_retry_after() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({"rate_limit_per_minute": 3})).await;
    for _ in 0..3 {
        assert_eq!(app.get("/api/v1/models", &user.key).await.status(), 200);
    }
    let limited = app.get("/api/v1/account", &user.key).await;
    let retry_after: u64 = limited.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=20).contains(&retry_after), "{retry_after}");
    assert_error(limited, 429, "rate_limited", "RATE_LIMIT_EXCEEDED").await;
    assert_eq!(app.get("/api/v1/models", &app.demo_key).await.status(), 200, "limits are per user");
}
