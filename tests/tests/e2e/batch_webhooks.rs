//! A batch's one webhook, end to end: when a batch submitted with a `webhook_url` ends, the
//! receiver gets one event (`batch.completed`, `batch.canceled` or `batch.expired`) signed with
//! the account's secret, its `data` the batch as `GET /api/v1/batches/{id}` shows it; its items
//! post none of their own.

use std::time::Duration;

use genjobs_tests::{Received, TestApp, WebhookReceiver, client_webhook_config};
use serde_json::{Value, json};

use super::client_webhooks::{secret, signed_with};
use crate::spawn_app_with;

const DEADLINE: Duration = Duration::from_secs(30);

async fn hooked_app() -> TestApp {
    spawn_app_with(client_webhook_config(Duration::from_secs(10))).await
}

/// A batch of image items of `prompts` posting its end to `url`, accepted; its id.
async fn submit_batch(app: &TestApp, key: &str, prompts: &[&str], url: &str, window_secs: u64) -> String {
    let items: Vec<Value> = prompts
        .iter()
        .enumerate()
        .map(|(i, prompt)| json!({"custom_id": format!("item-{i}"), "modality": "image", "body": {"prompt": prompt}}))
        .collect();
    let body = json!({"items": items, "webhook_url": url, "completion_window_secs": window_secs});
    let response = app.post("/api/v1/batches", key, &body).await;
    assert_eq!(response.status(), 202, "{:?}", response.text().await);
    let accepted: Value = response.json().await.unwrap();
    accepted["id"].as_str().unwrap().to_owned()
}

/// The one event posted for batch `id`, checked against the batch as the API reads it now:
/// signed with the owner's secret, of `event_type`, its data the batch, its timestamp the
/// batch's end; and no item has an event of its own.
async fn the_batchs_event(app: &TestApp, key: &str, id: &str, posted: &Received, event_type: &str) -> Value {
    assert!(signed_with(&secret(app, key).await, posted), "{:?}", posted.headers);
    assert_eq!(posted.header("content-type"), "application/json");
    let body = posted.json();
    assert_eq!(body["type"], event_type, "{body}");
    let batch: Value = app.get(&format!("/api/v1/batches/{id}"), key).await.json().await.unwrap();
    assert_eq!(body["data"], batch, "the data is the batch as the API shows it");
    assert_eq!(body["timestamp"], batch["finished_at"]);
    let items: Value = app.get(&format!("/api/v1/batches/{id}/items"), key).await.json().await.unwrap();
    for item in items["data"].as_array().unwrap() {
        let job_id = item["job"]["id"].as_str().unwrap();
        let hooks: Value = app.get(&format!("/api/v1/jobs/{job_id}/webhooks"), key).await.json().await.unwrap();
        assert_eq!(hooks["data"], json!([]), "item {job_id} has no webhook of its own");
        assert_ne!(posted.header("webhook-id"), format!("msg_{}", job_id.replace('-', "")));
    }
    assert!(posted.header("webhook-id").starts_with("msg_"), "{:?}", posted.headers);
    body
}

/// A batch whose items all succeed posts `batch.completed` once, with its final counts.
#[tokio::test]
async fn a_completed_batch_posts_one_signed_batch_completed_with_its_final_counts() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let user = app.create_user(1_000, json!({})).await;
    let id = submit_batch(&app, &user.key, &["a cat", "a dog", "a bird"], &receiver.url, 3_600).await;
    let posted = receiver.wait_for(1, DEADLINE).await.remove(0);
    let body = the_batchs_event(&app, &user.key, &id, &posted, "batch.completed").await;
    assert_eq!(body["data"]["id"], id.as_str());
    assert_eq!(body["data"]["state"], "completed");
    assert_eq!(
        (body["data"]["counts"]["total"].as_u64(), body["data"]["counts"]["succeeded"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(receiver.received().len(), 1, "one webhook for the whole batch");
}

/// A canceled batch posts `batch.canceled` once every item is final.
#[tokio::test]
async fn a_canceled_batch_posts_batch_canceled() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let user = app.create_user(1_000, json!({"max_concurrent_jobs": 1})).await;
    let id = submit_batch(&app, &user.key, &["a [sim:hang]"; 4], &receiver.url, 3_600).await;
    let response = app.post(&format!("/api/v1/batches/{id}/cancel"), &user.key, &json!({})).await;
    assert_eq!(response.status(), 202);
    let posted = receiver.wait_for(1, DEADLINE).await.remove(0);
    let body = the_batchs_event(&app, &user.key, &id, &posted, "batch.canceled").await;
    assert_eq!(body["data"]["state"], "canceled");
    assert_eq!(body["data"]["counts"]["canceled"], 4, "{body}");
    assert_eq!(receiver.received().len(), 1, "one webhook for the whole batch");
}

/// A batch whose window closes before its items could be sent (the user's one slot is taken by
/// a job of its own) posts `batch.expired`.
#[tokio::test]
async fn an_expired_batch_posts_batch_expired() {
    let (app, receiver) = (hooked_app().await, WebhookReceiver::start(vec![]).await);
    let user = app.create_user(1_000, json!({"max_concurrent_jobs": 1})).await;
    app.submit("images", &user.key, json!({"prompt": "mine [sim:hang]"})).await;
    let id = submit_batch(&app, &user.key, &["a", "b"], &receiver.url, 60).await;
    let posted = receiver.wait_for(1, Duration::from_secs(90)).await.remove(0);
    let body = the_batchs_event(&app, &user.key, &id, &posted, "batch.expired").await;
    assert_eq!(body["data"]["state"], "expired");
    assert_eq!(body["data"]["counts"]["failed"], 2, "{body}");
}
