use crate::spawn_app;
use genjobs_tests::assert_error;
use genjobs_tests::snapshot;
use serde_json::{Value, json};

fn is_iso_utc(text: &Value) -> bool {
    text.as_str().is_some_and(|t| {
        t.ends_with('Z') && time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).is_ok()
    })
}

#[tokio::test]
async fn video_receipt_applies_the_spec_defaults() {
    let app = spawn_app().await;
    let response = app.post("/api/v1/video/generations", &app.demo_key, &json!({"prompt": "a wave"})).await;
    assert_eq!(response.status(), 202);
    let receipt: Value = response.json().await.unwrap();
    assert_eq!(receipt["state"], "queued");
    assert_eq!(receipt["model"], "seedance-2.0-fast");
    assert_eq!(receipt["credits_held"], 40, "1080p at 8 credits a second, 5 s by default");
    assert!(is_iso_utc(&receipt["created_at"]));
    assert!(receipt["job_id"].as_str().is_some_and(|id| id.len() == 36));
    snapshot!("video_receipt", receipt, { ".job_id" => "[job id]", ".created_at" => "[time]" });
}

#[tokio::test]
async fn image_receipt_applies_the_spec_defaults() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "a fox"})).await;
    assert_eq!((receipt["model"].as_str(), receipt["credits_held"].as_u64()), (Some("nano-banana"), Some(4)));
    let three = app.submit("images", &app.demo_key, json!({"prompt": "a fox", "model": "ideogram-v3", "n": 3})).await;
    assert_eq!(three["credits_held"], 24);
}

#[tokio::test]
async fn every_invalid_input_is_a_400_naming_its_param() {
    let app = spawn_app().await;
    let cases = [
        ("video", json!({}), Some("prompt")),
        ("video", json!({"prompt": ""}), Some("prompt")),
        ("video", json!({"prompt": "x".repeat(10_001)}), Some("prompt")),
        ("video", json!({"prompt": "a", "model": "nope"}), Some("model")),
        ("images", json!({"prompt": "a", "model": "seedance-2.0-fast"}), Some("model")),
        ("video", json!({"prompt": "a", "aspect_ratio": "4:3"}), Some("aspect_ratio")),
        ("video", json!({"prompt": "a", "resolution": "480p"}), Some("resolution")),
        ("video", json!({"prompt": "a", "duration_sec": 20}), Some("duration_sec")),
        ("images", json!({"prompt": "a", "n": 5}), Some("n")),
        ("images", json!({"prompt": "a", "seed": "seven"}), Some("seed")),
        ("images", json!({"prompt": "a", "image_inputs": ["file:///etc/passwd"]}), Some("image_inputs")),
        ("images", json!({"prompt": "a", "negative_prompt": "x".repeat(2001)}), Some("negative_prompt")),
        ("images", json!({"prompt": "a", "extra": "not an object"}), Some("extra")),
        ("images", json!({"prompt": "a", "style": "noir"}), Some("style")),
        ("images", json!(["a"]), None),
    ];
    for (endpoint, body, param) in cases {
        let response = app.post(&format!("/api/v1/{endpoint}/generations"), &app.demo_key, &body).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"].as_str(), param, "{body}");
    }
    let account: Value = app.get("/api/v1/account", &app.demo_key).await.json().await.unwrap();
    assert_eq!(account["credits_held"], 0, "nothing is held for refused requests");
}

#[tokio::test]
async fn malformed_json_is_a_400_without_param() {
    let app = spawn_app().await;
    let response = app
        .client
        .post(app.url("/api/v1/images/generations"))
        .bearer_auth(&app.demo_key)
        .header("content-type", "application/json")
        .body("{\"prompt\": ")
        .send()
        .await
        .unwrap();
    let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
    assert!(error.get("param").is_none());
}

#[tokio::test]
async fn a_body_that_is_not_json_is_415() {
    let app = spawn_app().await;
    for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let mut request =
            app.client.post(app.url("/api/v1/images/generations")).bearer_auth(&app.demo_key).body("prompt=x");
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        assert_error(request.send().await.unwrap(), 415, "invalid_request", "UNSUPPORTED_MEDIA_TYPE").await;
    }
    let with_charset = app
        .client
        .post(app.url("/api/v1/images/generations"))
        .bearer_auth(&app.demo_key)
        .header("content-type", "application/json; charset=utf-8")
        .body(r#"{"prompt":"x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(with_charset.status(), 202);
}

#[tokio::test]
async fn a_body_over_one_mebibyte_is_413() {
    let app = spawn_app().await;
    let huge = json!({"prompt": "a", "extra": {"blob": "x".repeat(1 << 20)}});
    let response = app.post("/api/v1/images/generations", &app.demo_key, &huge).await;
    assert_error(response, 413, "invalid_request", "BODY_TOO_LARGE").await;
}

#[tokio::test]
async fn insufficient_credits_is_402_stating_both_amounts() {
    let app = spawn_app().await;
    let user = app.create_user(12, json!({})).await;
    let response = app.post("/api/v1/video/generations", &user.key, &json!({"prompt": "a"})).await;
    let error = assert_error(response, 402, "insufficient_credits", "NOT_ENOUGH_CREDITS").await;
    assert_eq!(error["message"], "needs 40 credits, 12 available");
}

#[tokio::test]
async fn the_concurrent_job_limit_is_429_with_retry_after() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({"max_concurrent_jobs": 2})).await;
    for _ in 0..2 {
        app.submit("images", &user.key, json!({"prompt": "slow [sim:hang]"})).await;
    }
    let response = app.post("/api/v1/images/generations", &user.key, &json!({"prompt": "one more"})).await;
    assert!(response.headers().contains_key("retry-after"));
    assert_error(response, 429, "rate_limited", "CONCURRENCY_LIMIT_EXCEEDED").await;
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!((account["active_jobs"].as_u64(), account["credits_held"].as_u64()), (Some(2), Some(8)));
}

#[tokio::test]
async fn an_idempotent_retry_returns_the_original_receipt_and_holds_nothing_new() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let send = |body: Value, key: &'static str| {
        let request = app
            .client
            .post(app.url("/api/v1/images/generations"))
            .bearer_auth(&user.key)
            .header("idempotency-key", key)
            .json(&body);
        async move { request.send().await.unwrap() }
    };
    let first = send(json!({"prompt": "a fox", "n": 2}), "order-1").await;
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    let retry = send(json!({"n": 2, "prompt": "a fox"}), "order-1").await;
    assert_eq!(retry.status(), 202);
    assert_eq!(retry.json::<Value>().await.unwrap(), first);
    let account = app.user(&user.id).await;
    assert_eq!(account["credits_held"].as_u64().unwrap() + account["credits_spent"].as_u64().unwrap(), 8);

    let conflict = send(json!({"prompt": "a wolf"}), "order-1").await;
    assert_error(conflict, 409, "idempotency_conflict", "IDEMPOTENCY_KEY_REUSED").await;
    let too_long = app
        .client
        .post(app.url("/api/v1/images/generations"))
        .bearer_auth(&user.key)
        .header("idempotency-key", "k".repeat(256))
        .json(&json!({"prompt": "a"}))
        .send()
        .await
        .unwrap();
    let error = assert_error(too_long, 400, "invalid_request", "INVALID_REQUEST").await;
    assert_eq!(error["param"], "Idempotency-Key");
}

#[tokio::test]
async fn extra_is_passed_through_to_the_provider_unchanged() {
    let app = spawn_app().await;
    let receipt = app
        .submit(
            "images",
            &app.demo_key,
            json!({"prompt": "a", "model": "flux-pro", "seed": 77, "extra": {"safety_tolerance": "2", "raw": true}}),
        )
        .await;
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["outputs"][0]["meta"]["seed"], 77, "the simulator echoes the seed it was sent");
}
