//! What the error messages say, word for word where a person reads them: one rule per message,
//! stated as the API states it (not a Rust type's range), with the right article and the right
//! name for the token asked for.

use genjobs_tests::{ADMIN_TOKEN, assert_error};
use serde_json::{Value, json};

use crate::spawn_app;

async fn refusal(response: reqwest::Response, param: &str) -> String {
    let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
    assert_eq!(error["param"], param, "{error}");
    error["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn body_refusals_state_the_apis_rule_once() {
    let app = spawn_app().await;
    let images = "/api/v1/images/generations";
    let n = app.post(images, &app.demo_key, &json!({"prompt": "x", "n": "2"})).await;
    assert_eq!(refusal(n, "n").await, "`n` must be an integer from 1 to 4");
    let n = app.post(images, &app.demo_key, &json!({"prompt": "x", "n": -1})).await;
    assert_eq!(refusal(n, "n").await, "`n` must be an integer from 1 to 4");

    let video_model = app.post(images, &app.demo_key, &json!({"prompt": "x", "model": "seedance-2.0-fast"})).await;
    assert_eq!(refusal(video_model, "model").await, "model \"seedance-2.0-fast\" is a video model, not an image model");

    let hook =
        app.post(images, &app.demo_key, &json!({"prompt": "x", "webhook_url": "http://localhost:18590/x"})).await;
    let message = refusal(hook, "webhook_url").await;
    assert_eq!(
        message,
        "the host of `webhook_url`, localhost, resolves to a private or reserved address, which webhooks may not reach",
        "the reason's class, never the address"
    );

    let credits = app.post("/api/admin/users", ADMIN_TOKEN, &json!({"name": "ada", "credits": -5})).await;
    assert_eq!(refusal(credits, "credits").await, "`credits` must be a whole number (0 or more); got -5");
    let prompt = app.post(images, &app.demo_key, &json!({"prompt": 3})).await;
    assert_eq!(refusal(prompt, "prompt").await, "`prompt` must be a string; got 3");
}

#[tokio::test]
async fn a_refused_catalog_field_and_openai_seconds_are_named_with_their_rule() {
    let app = spawn_app().await;
    let mut document = app.admin_model("flux-pro").await;
    document["price"]["credits"] = json!(-3);
    let refused = app.put_model("flux-pro", &document).await;
    assert_eq!(refusal(refused, "price.credits").await, "`price.credits` must be a whole number (0 or more); got -3");

    let video = json!({"model": "seedance-2.0-fast", "prompt": "waves", "seconds": "99"});
    let response = app.client.post(app.url("/openai/v1/videos")).bearer_auth(&app.demo_key).json(&video).send().await;
    let error: Value = response.unwrap().json().await.unwrap();
    assert_eq!(error["error"]["param"], "seconds", "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("`seconds` must be ") && !message.contains("duration_sec"), "{message}");
}

#[tokio::test]
async fn a_wrong_admin_token_is_called_the_admin_token() {
    let app = spawn_app().await;
    let wrong = app.get("/api/admin/models", "not-the-admin-token").await;
    let error = assert_error(wrong, 401, "unauthorized", "INVALID_API_KEY").await;
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with("the admin token is not valid"), "{message}");
    let missing = app.client.get(app.url("/api/admin/models")).send().await.unwrap();
    let error: Value = assert_error(missing, 401, "unauthorized", "MISSING_API_KEY").await;
    assert_eq!(error["message"], "the Authorization header is missing; send Authorization: Bearer <admin token>");
}
