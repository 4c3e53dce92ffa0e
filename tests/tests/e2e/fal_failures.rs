//! fal's real failure modes against the simulator, over HTTP: result reads that answer 429, 502,
//! 503 or 504 or drop the connection are tried again and the job still succeeds; a job past its
//! deadline is canceled at fal, and one that fal had already completed is fetched and charged;
//! a body fal cannot use is queued and refused when it runs; a webhook `ERROR` without
//! validation details is a provider failure.

use std::time::Duration;

use genjobs::Config;
use genjobs_tests::{TestApp, fast_config, webhook_config};
use serde_json::{Value, json};

use crate::spawn_app_with;

/// Submits `body` to `endpoint` as a new user of 100 credits; the final job and the account.
pub(crate) async fn run(app: &TestApp, endpoint: &str, body: Value) -> (Value, Value) {
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit(endpoint, &user.key, body).await;
    let job = app.wait_final(&user.key, receipt["job_id"].as_str().unwrap()).await;
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    (job, account)
}

#[tokio::test]
async fn result_reads_that_say_later_are_tried_again_until_the_job_succeeds() {
    let app = spawn_app_with(fast_config()).await;
    for fault in ["result-429=1", "result-502=2", "result-503=2", "result-504=2", "result-drop=2"] {
        let (job, account) = run(&app, "images", json!({"prompt": format!("[sim:{fault}] a fox")})).await;
        assert_eq!(job["state"], "succeeded", "{fault}: {job}");
        assert_eq!(
            (account["credits_spent"].as_u64(), account["credits_held"].as_u64()),
            (Some(4), Some(0)),
            "{fault}"
        );
    }
}

fn timing_out() -> Config {
    let config = fast_config();
    Config { driver: config.driver.with_job_timeout(Duration::from_secs(1)), ..config }
}

#[tokio::test]
async fn a_job_fal_completed_before_the_timeout_cancel_is_fetched_and_charged() {
    let app = spawn_app_with(timing_out()).await;
    let (job, account) = run(&app, "images", json!({"prompt": "[sim:hang] [sim:cancel-completed] late"})).await;
    assert_eq!(job["state"], "succeeded", "fal answered the cancel with ALREADY_COMPLETED: {job}");
    assert_eq!((account["credits_spent"].as_u64(), account["credits_held"].as_u64()), (Some(4), Some(0)));
    assert_eq!(app.sim_stats().await["routes"]["cancel"], 1);
}

#[tokio::test]
async fn a_body_fal_cannot_use_is_queued_then_refused_when_it_runs() {
    let app = spawn_app_with(fast_config()).await;
    let (job, account) =
        run(&app, "video", json!({"prompt": "waves", "resolution": "720p", "extra": {"motion_bucket": 3}})).await;
    assert_eq!(
        (job["state"].as_str(), job["error"]["code"].as_str()),
        (Some("failed"), Some("UPSTREAM_REJECTED")),
        "{job}"
    );
    assert!(job["error"]["message"].as_str().unwrap().contains("motion_bucket"), "{job}");
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(100), Some(0)));
}

#[tokio::test]
async fn a_webhook_error_without_validation_details_is_a_provider_failure() {
    let app = spawn_app_with(webhook_config(Duration::from_secs(60))).await;
    let (job, account) = run(&app, "images", json!({"prompt": "[sim:webhook-error] broken"})).await;
    assert_eq!(
        (job["state"].as_str(), job["error"]["code"].as_str()),
        (Some("failed"), Some("UPSTREAM_FAILED")),
        "{job}"
    );
    assert_eq!(account["credits_available"], 100);
}
