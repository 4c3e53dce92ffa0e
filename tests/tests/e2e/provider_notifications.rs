//! fal's webhooks end jobs without polling: deliveries from the simulator, signed with its own
//! key, and the fallback poll for the ones that get lost.

use std::time::{Duration, Instant};

use genjobs_test_wait::wait_until;
use genjobs_tests::{TestApp, assert_error, webhook_config};
use serde_json::{Value, json};

use crate::spawn_app_with;

fn routes(stats: &Value, route: &str) -> u64 {
    stats["routes"][route].as_u64().unwrap_or(0)
}

/// The simulator's stats once it has counted `accepted` deliveries answered 2xx: it counts one
/// when the answer arrives, which is after the commit that a reader may already have seen.
async fn stats_after_deliveries(app: &TestApp, accepted: u64) -> Value {
    sim_stats_until(app, &format!("{accepted} accepted deliveries"), |stats| {
        routes(stats, "webhook_accepted") >= accepted
    })
    .await
}

/// The simulator's stats once `done` holds of them; panics after 30 s.
async fn sim_stats_until(app: &TestApp, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_until(Duration::from_secs(30), what, async || app.sim_stats().await, done).await
}

#[tokio::test]
async fn a_webhook_ends_a_job_nobody_watches_without_a_single_status_call() {
    let app = spawn_app_with(webhook_config(Duration::from_secs(60))).await;
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit("images", &user.key, json!({"prompt": "a quiet harbor"})).await;
    let job = app.final_unwatched(&user.key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let stats = stats_after_deliveries(&app, 1).await;
    assert_eq!(routes(&stats, "status"), 0, "the webhook came long before the first fallback poll: {stats}");
    assert_eq!(routes(&stats, "result"), 0, "the webhook carries the result: {stats}");
    assert_eq!(routes(&stats, "webhook_accepted"), 1, "{stats}");
    let account = app.user(&user.id).await;
    let spent = job["credits_actual"].as_u64().unwrap();
    assert_eq!((account["credits_spent"].as_u64(), account["credits_held"].as_u64()), (Some(spent), Some(0)));
}

#[tokio::test]
async fn a_dropped_webhook_is_made_up_for_by_the_fallback_poll() {
    let app = spawn_app_with(webhook_config(Duration::from_secs(1))).await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "lost [sim:webhook-drop]"})).await;
    let job = app.final_unwatched(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let stats = app.sim_stats().await;
    assert_eq!(routes(&stats, "webhook"), 0, "{stats}");
    let polls = routes(&stats, "status");
    assert!((1..=3).contains(&polls), "polled at the fallback cadence only: {polls} calls");
}

#[tokio::test]
async fn a_watched_job_is_polled_at_the_full_cadence() {
    let app = spawn_app_with(webhook_config(Duration::from_secs(60))).await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "watched [sim:webhook-drop]"})).await;
    let started = Instant::now();
    let job = app.job(&app.demo_key, receipt["job_id"].as_str().unwrap(), 20).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert!(started.elapsed() < Duration::from_secs(5), "a long-poll brings the polls back: {:?}", started.elapsed());
    assert!(routes(&app.sim_stats().await, "status") >= 2);
}

#[tokio::test]
async fn a_duplicate_delivery_moves_credits_once() {
    let app = spawn_app_with(webhook_config(Duration::from_secs(60))).await;
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit("images", &user.key, json!({"prompt": "twice [sim:webhook-duplicate]"})).await;
    let job = app.final_unwatched(&user.key, receipt["job_id"].as_str().unwrap()).await;
    let stats = stats_after_deliveries(&app, 2).await;
    assert_eq!(routes(&stats, "webhook_accepted"), 2, "the second delivery is answered 200 too: {stats}");
    let account = app.user(&user.id).await;
    let spent = job["credits_actual"].as_u64().unwrap();
    assert_eq!(
        (account["credits_available"].as_u64(), account["credits_held"].as_u64(), account["credits_spent"].as_u64()),
        (Some(100 - spent), Some(0), Some(spent))
    );
}

#[tokio::test]
async fn a_delivery_after_a_cancel_changes_nothing() {
    let app = spawn_app_with(webhook_config(Duration::from_secs(60))).await;
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit("images", &user.key, json!({"prompt": "too late [sim:webhook-delay=400]"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    sim_stats_until(&app, "the submission", |stats| routes(stats, "submit") > 0).await;
    let canceled = app.post(&format!("/api/v1/jobs/{id}/cancel"), &user.key, &json!({})).await;
    assert_eq!(canceled.status(), 200);
    sim_stats_until(&app, "the late delivery", |stats| routes(stats, "webhook") > 0).await;
    assert_eq!(app.job(&user.key, id, 0).await["state"], "canceled");
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(100), Some(0)));
}

#[tokio::test]
async fn a_corrupt_signature_is_refused_and_the_job_ends_by_polling() {
    let app = spawn_app_with(webhook_config(Duration::from_secs(1))).await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "forged [sim:webhook-corrupt]"})).await;
    let job = app.final_unwatched(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded");
    let stats = app.sim_stats().await;
    assert!(routes(&stats, "webhook") >= 1 && routes(&stats, "webhook_accepted") == 0, "{stats}");
}

#[tokio::test]
async fn deliveries_are_refused_unless_well_signed_fresh_and_for_a_known_request() {
    let app = spawn_app_with(webhook_config(Duration::from_secs(60))).await;
    let webhook = app.url("/api/upstream/fal/webhook");
    let body = json!({"request_id": "nope", "gateway_request_id": "nope", "status": "OK", "payload": {"images": []}});
    let bytes = body.to_string();

    let unsigned = app.client.post(&webhook).header("content-type", "application/json").body(bytes.clone()).send();
    assert_error(unsigned.await.unwrap(), 401, "unauthorized", "INVALID_SIGNATURE").await;

    let signed = sim_signature(&app, "nope", bytes.clone()).await;
    let deliver = |headers: Value, body: String| {
        let mut request = app.client.post(&webhook).header("content-type", "application/json").body(body);
        for (name, value) in headers.as_object().unwrap() {
            request = request.header(name.as_str(), value.as_str().unwrap());
        }
        request.send()
    };
    let unknown = deliver(signed.clone(), bytes.clone()).await.unwrap();
    assert_error(unknown, 404, "not_found", "JOB_NOT_FOUND").await;

    let tampered = deliver(signed.clone(), bytes.replace("OK", "ERROR")).await.unwrap();
    assert_error(tampered, 401, "unauthorized", "INVALID_SIGNATURE").await;

    let mut stale = signed.clone();
    let an_hour_ago = signed["x-fal-webhook-timestamp"].as_str().unwrap().parse::<i64>().unwrap() - 3600;
    stale["x-fal-webhook-timestamp"] = json!(an_hour_ago.to_string());
    assert_error(deliver(stale, bytes.clone()).await.unwrap(), 401, "unauthorized", "INVALID_SIGNATURE").await;

    let garbage = sim_signature(&app, "nope", "{not json".into()).await;
    assert_error(deliver(garbage, "{not json".into()).await.unwrap(), 400, "invalid_request", "INVALID_REQUEST").await;

    let other = app.client.post(app.url("/api/upstream/replicate/webhook")).body("{}").send().await.unwrap();
    assert_error(other, 404, "not_found", "UNKNOWN_PROVIDER").await;
}

/// The headers that sign `body` as the simulator's delivery for `request_id`.
async fn sim_signature(app: &TestApp, request_id: &str, body: String) -> Value {
    let url = format!("{}/_sim/sign?request_id={request_id}", app.sim_url);
    app.client.post(url).body(body).send().await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn without_a_public_url_webhooks_are_off() {
    let app = crate::spawn_app().await;
    let delivery = app.client.post(app.url("/api/upstream/fal/webhook")).body("{}").send().await.unwrap();
    assert_error(delivery, 404, "not_found", "WEBHOOKS_NOT_ENABLED").await;
}
