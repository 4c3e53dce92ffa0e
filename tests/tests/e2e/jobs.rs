use std::time::{Duration, Instant};

use crate::spawn_app;
use genjobs_tests::assert_error;
use genjobs_tests::snapshot;
use serde_json::{Value, json};

const NULL_UNTIL_FINAL: [&str; 5] = ["outputs", "error", "started_at", "finished_at", "credits_actual"];

#[tokio::test]
async fn wait_zero_answers_at_once_with_nulls_until_things_happen() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "a [sim:hang]"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    let started = Instant::now();
    let job: Value = app.get(&format!("/api/v1/jobs/{id}?wait=0"), &app.demo_key).await.json().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(job["id"], id);
    assert_eq!(job["state"], "queued");
    assert_eq!(
        (job["progress"].as_u64(), job["model"].as_str(), job["modality"].as_str()),
        (Some(0), Some("nano-banana"), Some("image"))
    );
    for field in NULL_UNTIL_FINAL {
        assert!(job[field].is_null(), "{field} in {job}");
    }
    assert_eq!(job["credits_held"], receipt["credits_held"]);
    assert_eq!(job["created_at"], receipt["created_at"]);
    // Whether the submission reached fal by the time of this read is a race: `upstream` is null
    // until it did, then "fal".
    assert!(job["upstream"].is_null() || job["upstream"] == "fal", "{job}");
    snapshot!("queued_job", job, { ".id" => "[job id]", ".created_at" => "[time]", ".upstream" => "[null or fal]" });
}

#[tokio::test]
async fn a_job_advances_in_the_background_and_succeeds_with_outputs() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "two foxes", "n": 2})).await;
    let id = receipt["job_id"].as_str().unwrap();
    let job = app.final_unwatched(&app.demo_key, id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["progress"], 100);
    assert!(job["error"].is_null());
    let outputs = job["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 2);
    for output in outputs {
        assert_eq!(output["type"], "image");
        assert!(output["url"].as_str().unwrap().starts_with("http"));
        assert_eq!(output["meta"]["content_type"], "image/png");
        assert!(output["meta"].get("width").is_none(), "fal's nano-banana results carry no image size: {output}");
    }
    assert_eq!(job["credits_actual"], 8);
    assert_eq!(job["upstream"], "fal", "the provider that ran it");
    assert!(job["started_at"].is_string() && job["finished_at"].is_string());
    let account: Value = app.get("/api/v1/account", &app.demo_key).await.json().await.unwrap();
    assert_eq!((account["credits_spent"].as_u64(), account["credits_held"].as_u64()), (Some(8), Some(0)));
}

#[tokio::test]
async fn a_long_poll_answers_as_soon_as_the_job_is_final() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "quick"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    let started = Instant::now();
    let job: Value = app.get(&format!("/api/v1/jobs/{id}?wait=30"), &app.demo_key).await.json().await.unwrap();
    assert_eq!(job["state"], "succeeded");
    assert!(started.elapsed() < Duration::from_secs(10), "answered after {:?}", started.elapsed());
}

#[tokio::test]
async fn a_long_poll_gives_up_after_its_wait() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "never [sim:hang]"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    let started = Instant::now();
    let job: Value = app.get(&format!("/api/v1/jobs/{id}?wait=1"), &app.demo_key).await.json().await.unwrap();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(950) && waited < Duration::from_secs(5), "{waited:?}");
    assert!(["queued", "running"].contains(&job["state"].as_str().unwrap()));
}

#[tokio::test]
async fn wait_must_be_an_integer_from_0_to_60() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "a"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    for wait in ["61", "-1", "abc", "1.5", ""] {
        let response = app.get(&format!("/api/v1/jobs/{id}?wait={wait}"), &app.demo_key).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], "wait", "wait={wait}");
    }
    assert_eq!(app.get(&format!("/api/v1/jobs/{id}?wait=60&other=1"), &app.demo_key).await.status(), 200);
}

#[tokio::test]
async fn an_unknown_or_malformed_job_id_is_404() {
    let app = spawn_app().await;
    for id in ["01a20071-bf18-7493-acc7-9f682d0b19fd", "not-a-job"] {
        for path in [format!("/api/v1/jobs/{id}"), format!("/api/v1/jobs/{id}/stream")] {
            assert_error(app.get(&path, &app.demo_key).await, 404, "not_found", "JOB_NOT_FOUND").await;
        }
        let cancel = app.post(&format!("/api/v1/jobs/{id}/cancel"), &app.demo_key, &json!({})).await;
        assert_error(cancel, 404, "not_found", "JOB_NOT_FOUND").await;
    }
}

#[tokio::test]
async fn cancel_refunds_and_is_idempotent() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit("video", &user.key, json!({"prompt": "long [sim:hang]", "resolution": "720p"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    assert_eq!(app.user(&user.id).await["credits_held"], 20);

    let response =
        app.client.post(app.url(&format!("/api/v1/jobs/{id}/cancel"))).bearer_auth(&user.key).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let canceled: Value = response.json().await.unwrap();
    assert_eq!((canceled["id"].as_str(), canceled["state"].as_str()), (Some(id), Some("canceled")));
    assert!(canceled["canceled_at"].is_string());
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_held"].as_u64()), (Some(100), Some(0)));

    let job: Value = app.get(&format!("/api/v1/jobs/{id}"), &user.key).await.json().await.unwrap();
    assert_eq!(job["state"], "canceled");
    assert_eq!(job["error"]["type"], "canceled");
    assert_eq!(job["error"]["code"], "JOB_CANCELED");
    assert_eq!(job["finished_at"], canceled["canceled_at"]);
    assert_eq!(job["credits_actual"], 0);
    assert!(job["outputs"].is_null());

    let again: Value =
        app.post(&format!("/api/v1/jobs/{id}/cancel"), &user.key, &json!({})).await.json().await.unwrap();
    assert_eq!(again, canceled, "a second cancel changes nothing");
    assert_eq!(app.user(&user.id).await["credits_available"], 100, "refunded once");
}

#[tokio::test]
async fn canceling_a_succeeded_job_keeps_its_state_and_charge() {
    let app = spawn_app().await;
    let receipt = app.submit("images", &app.demo_key, json!({"prompt": "done soon"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    assert_eq!(app.wait_final(&app.demo_key, id).await["state"], "succeeded");
    let response = app.post(&format!("/api/v1/jobs/{id}/cancel"), &app.demo_key, &json!({})).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["state"], "succeeded");
    assert!(body["canceled_at"].is_string());
    let job: Value = app.get(&format!("/api/v1/jobs/{id}"), &app.demo_key).await.json().await.unwrap();
    assert_eq!((job["state"].as_str(), job["credits_actual"].as_u64()), (Some("succeeded"), Some(4)));
}

#[tokio::test]
async fn a_result_arriving_after_a_cancel_is_discarded() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit("images", &user.key, json!({"prompt": "slowish [sim:run=1500]"})).await;
    let id = receipt["job_id"].as_str().unwrap();
    app.job_until(&user.key, id, Duration::from_secs(30), |job| job["state"] == "running").await;
    app.post(&format!("/api/v1/jobs/{id}/cancel"), &user.key, &json!({})).await;
    // A job as long, submitted after the cancel, ends after the provider finished the first.
    let later = app.submit("images", &app.demo_key, json!({"prompt": "as slow [sim:run=1500]"})).await;
    assert_eq!(app.final_unwatched(&app.demo_key, later["job_id"].as_str().unwrap()).await["state"], "succeeded");
    let job: Value = app.get(&format!("/api/v1/jobs/{id}"), &user.key).await.json().await.unwrap();
    assert_eq!(job["state"], "canceled");
    assert!(job["outputs"].is_null());
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(100), Some(0)));
}

#[tokio::test]
async fn the_job_list_is_newest_first_in_pages() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let receipt = app.submit("images", &user.key, json!({"prompt": format!("n{i}")})).await;
        ids.push(receipt["job_id"].as_str().unwrap().to_owned());
    }
    ids.reverse();
    let page: Value = app.get("/api/v1/jobs?limit=2", &user.key).await.json().await.unwrap();
    let listed: Vec<_> =
        page["data"].as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(listed, ids[..2]);
    assert_eq!(page["next"], ids[1]);
    let next: Value =
        app.get(&format!("/api/v1/jobs?limit=2&before={}", ids[1]), &user.key).await.json().await.unwrap();
    assert_eq!(next["data"].as_array().unwrap().len(), 1);
    assert_eq!(next["data"][0]["id"], ids[2]);
    assert!(next["next"].is_null());
    let others: Value = app.get("/api/v1/jobs", &app.demo_key).await.json().await.unwrap();
    assert!(others["data"].as_array().unwrap().is_empty(), "never another user's jobs");
    for query in ["limit=0", "limit=101", "before=nope"] {
        let response = app.get(&format!("/api/v1/jobs?{query}"), &user.key).await;
        assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn the_account_shows_balances_limits_and_active_jobs() {
    let app = spawn_app().await;
    let user = app.create_user(50, json!({"rate_limit_per_minute": 90, "max_concurrent_jobs": 3})).await;
    app.submit("images", &user.key, json!({"prompt": "a [sim:hang]"})).await;
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!(
        account,
        json!({"user_id": user.id, "credits_available": 46, "credits_held": 4, "credits_spent": 0,
               "rate_limit_per_minute": 90, "max_concurrent_jobs": 3, "active_jobs": 1})
    );
}
