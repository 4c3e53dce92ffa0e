//! Moderation before any provider call, over HTTP, against the simulator's `/moderations` (a word
//! list: `gore` is violence) or a moderation service that is down: a flagged prompt or image input
//! fails `CONTENT_REFUSED` with its categories, released, and the provider never sees it; a
//! service that stays down fails the job `MODERATION_UNAVAILABLE` (or sends it unchecked when
//! failing open); a model with `"moderate": false` is not checked. And the providers' own content
//! refusals: fal's `content_policy_violation` and Replicate's NSFW failure fail the job
//! `CONTENT_REFUSED`, released, never retried on the other route.

use genjobs::Config;
use genjobs_moderation_openai::{ModerationArgs, ModerationUrl};
use genjobs_tests::{ADMIN_TOKEN, TestApp, fast_config, sample_sum};
use serde_json::{Value, json};

use super::fal_failures::run;
use crate::spawn_app_with;

/// A loopback URL where nothing listens: the moderation service is down.
fn down() -> ModerationUrl {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    ModerationUrl::At(format!("http://127.0.0.1:{port}/v1").parse().unwrap())
}

/// [`fast_config`] checked by the moderation service at `url`, tried again for `window_secs`.
fn moderated(url: ModerationUrl, window_secs: u64, fail_open: bool) -> Config {
    Config {
        moderation: ModerationArgs {
            moderation_url: Some(url),
            moderation_retry_window_secs: window_secs,
            moderation_fail_open: fail_open,
            ..ModerationArgs::default()
        },
        ..fast_config()
    }
}

fn released(account: &Value) -> bool {
    (account["credits_available"].as_u64(), account["credits_held"].as_u64(), account["credits_spent"].as_u64())
        == (Some(100), Some(0), Some(0))
}

/// What the admin console's job view says of the job's moderation.
async fn moderation_of(app: &TestApp, job: &Value) -> Value {
    let id = job["id"].as_str().unwrap();
    let detail: Value = app.get(&format!("/api/admin/jobs/{id}"), ADMIN_TOKEN).await.json().await.unwrap();
    detail["moderation"].clone()
}

fn submits_of(stats: &Value, prompt: &str) -> u64 {
    stats["submits_by_prompt"][prompt].as_u64().unwrap_or(0)
}

#[tokio::test]
async fn a_flagged_prompt_is_refused_with_its_categories_released_and_never_sent() {
    let app = spawn_app_with(moderated(ModerationUrl::Simulator, 60, false)).await;
    let prompt = "a gore scene in the rain";
    let (job, account) = run(&app, "images", json!({"prompt": prompt})).await;
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(
        job["error"],
        json!({
            "type": "invalid_request",
            "code": "CONTENT_REFUSED",
            "message": "the moderation service flagged the content",
            "details": {"categories": ["violence", "violence/graphic"]},
        })
    );
    assert!(released(&account), "{account}");
    let stats = app.sim_stats().await;
    assert_eq!(submits_of(&stats, prompt), 0, "the provider never saw it: {stats}");
    assert_eq!(stats["routes"]["moderations_flagged"], 1, "{stats}");
    assert_eq!(moderation_of(&app, &job).await, "flagged");
    assert!(sample_sum(&app.metrics().await, "genjobs_moderation_total", &[r#"result="flagged""#]) >= 1.0);
}

#[tokio::test]
async fn a_flagged_image_input_is_refused_too_and_a_clean_job_runs_checked() {
    let app = spawn_app_with(moderated(ModerationUrl::Simulator, 60, false)).await;
    let flagged = json!({"prompt": "make it red", "image_inputs": ["https://example.com/gore.png"]});
    let (job, account) = run(&app, "images", flagged).await;
    assert_eq!(
        (job["error"]["code"].as_str(), job["error"]["type"].as_str()),
        (Some("CONTENT_REFUSED"), Some("invalid_request"))
    );
    assert_eq!(job["error"]["details"]["categories"], json!(["violence", "violence/graphic"]), "{job}");
    assert!(released(&account), "{account}");
    assert_eq!(submits_of(&app.sim_stats().await, "make it red"), 0);

    let (job, account) = run(&app, "images", json!({"prompt": "a calm fox"})).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(account["credits_spent"], 4);
    assert_eq!(moderation_of(&app, &job).await, "passed");
    assert!(sample_sum(&app.metrics().await, "genjobs_moderation_total", &[r#"result="passed""#]) >= 1.0);
}

#[tokio::test]
async fn a_check_the_service_fails_is_tried_again_and_then_passes() {
    let app = spawn_app_with(moderated(ModerationUrl::Simulator, 60, false)).await;
    let (job, _) = run(&app, "images", json!({"prompt": "[sim:moderation-fail-first=2] a patient fox"})).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let stats = app.sim_stats().await;
    assert_eq!(
        (stats["routes"]["moderations"].as_u64(), stats["routes"]["moderations_failed"].as_u64()),
        (Some(3), Some(2))
    );
    assert!(sample_sum(&app.metrics().await, "genjobs_moderation_total", &[r#"result="unavailable""#]) >= 2.0);
}

#[tokio::test]
async fn a_service_that_stays_down_fails_the_job_unavailable_and_released() {
    let app = spawn_app_with(moderated(down(), 1, false)).await;
    let prompt = "a fox nobody checked";
    let (job, account) = run(&app, "images", json!({"prompt": prompt})).await;
    assert_eq!(
        (job["state"].as_str(), job["error"]["code"].as_str()),
        (Some("failed"), Some("MODERATION_UNAVAILABLE")),
        "{job}"
    );
    assert!(job["error"].get("details").is_none(), "{job}");
    assert!(released(&account), "{account}");
    assert_eq!(submits_of(&app.sim_stats().await, prompt), 0);
    assert_eq!(moderation_of(&app, &job).await, "unavailable");

    let app = spawn_app_with(moderated(ModerationUrl::Simulator, 0, false)).await;
    let (job, account) = run(&app, "images", json!({"prompt": "[sim:moderation-503] a fox"})).await;
    assert_eq!(job["error"]["code"], "MODERATION_UNAVAILABLE", "a 5xx is unavailable too: {job}");
    assert!(released(&account), "{account}");
}

#[tokio::test]
async fn failing_open_sends_the_job_unchecked() {
    let app = spawn_app_with(moderated(down(), 0, true)).await;
    let prompt = "a gore scene sent unchecked";
    let (job, account) = run(&app, "images", json!({"prompt": prompt})).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(account["credits_spent"], 4);
    assert_eq!(submits_of(&app.sim_stats().await, prompt), 1);
    assert_eq!(moderation_of(&app, &job).await, "unchecked");
}

#[tokio::test]
async fn a_model_that_sets_moderate_false_is_not_checked() {
    let app = spawn_app_with(moderated(ModerationUrl::Simulator, 60, false)).await;
    let mut document = app.admin_model("nano-banana").await;
    let document = document.as_object_mut().unwrap();
    for key in ["id", "created_at", "updated_at", "version"] {
        document.remove(key);
    }
    document.insert("moderate".into(), json!(false));
    let response = app.put_model("nano-unmoderated", &Value::Object(document.clone())).await;
    assert!(response.status().is_success(), "{:?}", response.text().await);
    let prompt = "gore, but this model is not moderated";
    let (job, _) = run(&app, "images", json!({"model": "nano-unmoderated", "prompt": prompt})).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let stats = app.sim_stats().await;
    assert_eq!(stats["routes"].get("moderations"), None, "no check was made: {stats}");
    assert_eq!(moderation_of(&app, &job).await, Value::Null);
}

#[tokio::test]
async fn fals_content_policy_refusal_is_content_refused_and_never_sent_elsewhere() {
    let sim = super::replicate::replicate_sim();
    let base =
        Config { replicate: super::replicate::replicate_only(&sim, false, fast_config()).replicate, ..fast_config() };
    let app = spawn_app_with(base).await;
    for prompt in ["[sim:content-policy] a fox", "[sim:content-policy-submit] a fox"] {
        let (job, account) = run(&app, "images", json!({"model": "flux-pro", "prompt": prompt})).await;
        assert_eq!(
            (job["state"].as_str(), job["error"]["code"].as_str(), job["error"]["type"].as_str()),
            (Some("failed"), Some("CONTENT_REFUSED"), Some("invalid_request")),
            "{prompt}: {job}"
        );
        assert!(released(&account), "{prompt}: {account}");
    }
    assert_eq!(sim.predictions_created(), 0, "Replicate, the second route, never got the job");
}

#[tokio::test]
async fn replicates_nsfw_failure_is_content_refused_and_released() {
    let sim = super::replicate::replicate_sim();
    let app = spawn_app_with(super::replicate::replicate_only(&sim, false, fast_config())).await;
    let (job, account) = run(&app, "images", json!({"model": "flux-pro", "prompt": "[sim:nsfw] a fox"})).await;
    assert_eq!(
        (job["state"].as_str(), job["error"]["code"].as_str()),
        (Some("failed"), Some("CONTENT_REFUSED")),
        "{job}"
    );
    assert!(job["error"]["message"].as_str().unwrap().contains("NSFW"), "{job}");
    assert!(released(&account), "{account}");
    assert_eq!(sim.predictions_created(), 1, "tried once, nowhere else");
}
