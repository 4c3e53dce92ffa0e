use std::time::Duration;

use crate::{spawn_app, spawn_app_with};
use genjobs::Config;
use genjobs_test_wait::wait_until;
use genjobs_tests::{fast_config, sample_sum};
use serde_json::{Value, json};

async fn final_job(prompt: &str, config: Config) -> (Value, Value) {
    let app = spawn_app_with(config).await;
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit("images", &user.key, json!({"prompt": prompt})).await;
    let job = app.wait_final(&user.key, receipt["job_id"].as_str().unwrap()).await;
    (job, app.user(&user.id).await)
}

/// Asserts the job failed with `code` and released its credits; returns the error's message.
async fn assert_failed_with(prompt: &str, code: &str, config: Config) -> String {
    let (job, account) = final_job(prompt, config).await;
    assert_eq!(job["state"], "failed", "{prompt}: {job}");
    assert_eq!(job["error"]["type"], "upstream_error");
    assert_eq!(job["error"]["code"], code, "{prompt}: {job}");
    assert!(job["outputs"].is_null());
    assert_eq!(job["credits_actual"], 0);
    assert_eq!(
        (account["credits_available"].as_u64(), account["credits_held"].as_u64()),
        (Some(100), Some(0)),
        "{prompt}: released"
    );
    let message = job["error"]["message"].as_str().unwrap();
    assert!(!message.contains("http://") && !message.contains("Key "), "no internals: {message}");
    message.to_owned()
}

#[tokio::test]
async fn a_model_failure_fails_the_job_and_releases_the_credits() {
    assert_failed_with("boom [sim:fail]", "UPSTREAM_FAILED", fast_config()).await;
}

#[tokio::test]
async fn a_refused_input_is_upstream_rejected() {
    assert_failed_with("nope [sim:reject]", "UPSTREAM_REJECTED", fast_config()).await;
    assert_failed_with("nope [sim:reject-submit]", "UPSTREAM_REJECTED", fast_config()).await;
}

#[tokio::test]
async fn an_unreadable_result_is_output_invalid() {
    assert_failed_with("garbled [sim:malformed]", "OUTPUT_INVALID", fast_config()).await;
}

#[tokio::test]
async fn an_expired_result_fails_the_job_and_says_why() {
    let message = assert_failed_with("late [sim:expired]", "UPSTREAM_FAILED", fast_config()).await;
    assert!(message.contains("expired"), "{message}");
}

#[tokio::test]
async fn an_error_in_a_completed_status_fails_the_job_with_its_message() {
    let message = assert_failed_with("unlucky [sim:error-status]", "UPSTREAM_FAILED", fast_config()).await;
    assert!(message.contains("runner disconnected") && message.contains("runner_disconnected"), "{message}");
}

#[tokio::test]
async fn extra_is_checked_as_fal_checks_it() {
    let app = spawn_app().await;
    let refused = app.submit("video", &app.demo_key, json!({"prompt": "waves", "extra": {"motion_bucket": 3}})).await;
    let job = app.wait_final(&app.demo_key, refused["job_id"].as_str().unwrap()).await;
    assert_eq!((job["state"].as_str(), job["error"]["code"].as_str()), (Some("failed"), Some("UPSTREAM_REJECTED")));
    assert!(job["error"]["message"].as_str().unwrap().contains("motion_bucket"), "{job}");
    let taken = app
        .submit(
            "video",
            &app.demo_key,
            json!({"prompt": "waves", "resolution": "720p", "extra": {"generate_audio": false}}),
        )
        .await;
    let job = app.wait_final(&app.demo_key, taken["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
}

#[tokio::test]
async fn a_job_past_the_timeout_is_upstream_timeout() {
    let config = {
        let config = fast_config();
        Config { driver: config.driver.with_job_timeout(Duration::from_secs(1)), ..config }
    };
    assert_failed_with("stuck [sim:hang]", "UPSTREAM_TIMEOUT", config).await;
}

/// A job that times out here is also canceled at fal, which would otherwise go on running (and
/// billing) it.
#[tokio::test]
async fn a_job_past_the_timeout_is_canceled_at_the_provider() {
    let config = fast_config();
    let config = Config { driver: config.driver.with_job_timeout(Duration::from_secs(1)), ..config };
    let app = spawn_app_with(config).await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "stuck [sim:hang]"})).await;
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["error"]["code"], "UPSTREAM_TIMEOUT", "{job}");
    let canceled = |stats: &Value| stats["routes"]["cancel"].as_u64() == Some(1);
    wait_until(Duration::from_secs(30), "a cancel at the provider", async || app.sim_stats().await, canceled).await;
}

#[tokio::test]
async fn flaky_status_calls_are_retried_until_success() {
    let (job, account) = final_job("wobbly [sim:flaky=3]", fast_config()).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!((account["credits_spent"].as_u64(), account["credits_held"].as_u64()), (Some(4), Some(0)));
}

#[tokio::test]
async fn an_unreachable_provider_is_retried_not_failed() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let app = spawn_app_with(Config { upstream_url: Some(url), ..fast_config() }).await;
    let not_reached = ["kind=\"submit\"", "outcome=\"not_reached\""];
    let attempts = |scrape: &str| sample_sum(scrape, "genjobs_upstream_calls_total", &not_reached);
    let before = attempts(&app.metrics().await);
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "patience"})).await;
    // The metrics count for the whole test process, and no other test here submits to a closed port.
    let tried_twice = |scrape: &String| attempts(scrape) >= before + 2.0;
    wait_until(Duration::from_secs(30), "a second submission", async || app.metrics().await, tried_twice).await;
    let job: Value = app
        .get(&format!("/api/v1/jobs/{}", receipt["job_id"].as_str().unwrap()), &app.demo_key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(job["state"], "queued", "connection refused means the provider never had it: {job}");
}

#[tokio::test]
async fn each_job_is_submitted_once_and_polled_at_the_interval() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "count me [sim:run=500]"})).await;
    app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    let stats = app.sim_stats().await;
    assert_eq!(stats["routes"]["submit"], 1);
    assert_eq!(stats["routes"]["result"], 1);
    let polls = stats["routes"]["status"].as_u64().unwrap();
    assert!((5..=20).contains(&polls), "about 530 ms at one poll per 50 ms, got {polls}");
}

#[tokio::test]
async fn video_models_map_to_video_outputs() {
    let app = spawn_app().await;
    let receipt = app
        .submit("video", &app.demo_key, json!({"prompt": "a train", "model": "kling-2.1-master", "duration_sec": 10}))
        .await;
    assert_eq!(receipt["credits_held"], 140);
    let job = app.wait_final(&app.demo_key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(job["state"], "succeeded");
    assert_eq!(job["modality"], "video");
    assert_eq!(job["outputs"][0]["type"], "video");
    assert_eq!(job["outputs"][0]["meta"]["content_type"], "video/mp4");
    assert_eq!(job["credits_actual"], 140, "the provider did not report a shorter duration");
}

#[tokio::test]
async fn a_job_waiting_in_the_providers_queue_shows_its_position_until_it_runs() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(100, json!({})).await;
    let first = app.submit("images", &user.key, json!({"prompt": "[sim:queue=1500] first"})).await;
    let second = app.submit("images", &user.key, json!({"prompt": "[sim:queue=1500] second"})).await;
    let limit = Duration::from_secs(5);
    let waiting = app
        .job_until(&user.key, second["job_id"].as_str().unwrap(), limit, |job| !job["meta"]["queue_position"].is_null())
        .await;
    assert_eq!((waiting["state"].as_str(), waiting["meta"]["queue_position"].as_u64()), (Some("queued"), Some(1)));
    let ahead = app.job(&user.key, first["job_id"].as_str().unwrap(), 0).await;
    assert_eq!(ahead["meta"]["queue_position"], 0, "nothing is ahead of the first: {ahead}");
    let done = app.wait_final(&user.key, second["job_id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "succeeded");
    assert!(done.get("meta").is_none(), "no position once it left the queue: {done}");
}
