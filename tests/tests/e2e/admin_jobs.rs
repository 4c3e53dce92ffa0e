//! The operators' view of jobs from outside: every user's jobs found by owner, state, model,
//! provider and key in pages; one job with the body it was received with and its ledger; any
//! user's job canceled as its owner would.

use std::time::Duration;

use genjobs_test_wait::wait_until;
use genjobs_tests::{ADMIN_TOKEN, TestApp, WebhookReceiver, assert_error, client_webhook_config};
use serde_json::{Value, json};

use crate::{spawn_app, spawn_app_with};

async fn admin_jobs(app: &TestApp, query: &str) -> Value {
    let response = app.get(&format!("/api/admin/jobs{query}"), ADMIN_TOKEN).await;
    assert_eq!(response.status(), 200, "{query}");
    response.json().await.unwrap()
}

async fn ids(app: &TestApp, query: &str) -> Vec<String> {
    let page = admin_jobs(app, query).await;
    page["data"].as_array().unwrap().iter().map(|job| job["id"].as_str().unwrap().to_owned()).collect()
}

/// Reads the job until the provider has it, for at most 10 s.
async fn sent(app: &TestApp, key: &str, id: &str) -> Value {
    app.job_until(key, id, Duration::from_secs(10), |job| !job["upstream"].is_null()).await
}

#[tokio::test]
async fn operators_find_every_users_jobs_by_each_filter_in_pages() {
    let app = spawn_app().await;
    let (ada, bob) = (app.create_user(500, json!({})).await, app.create_user(500, json!({})).await);
    let image =
        app.submit("images", &ada.key, json!({"prompt": "a [sim:hang]"})).await["job_id"].as_str().unwrap().to_owned();
    let video =
        app.submit("video", &bob.key, json!({"prompt": "b [sim:hang]"})).await["job_id"].as_str().unwrap().to_owned();
    let failing =
        app.submit("images", &ada.key, json!({"prompt": "c [sim:fail]"})).await["job_id"].as_str().unwrap().to_owned();
    let shown = sent(&app, &ada.key, &image).await;
    sent(&app, &bob.key, &video).await;
    assert_eq!(app.wait_final(&ada.key, &failing).await["state"], "failed");

    let page = admin_jobs(&app, "").await;
    assert_eq!(ids(&app, "").await, [failing.as_str(), video.as_str(), image.as_str()], "every user's, newest first");
    let listed = page["data"].as_array().unwrap().iter().find(|job| job["id"] == image.as_str()).unwrap().clone();
    assert_eq!(listed["user_id"], ada.id.as_str());
    assert_eq!(listed["upstream"], "fal");
    assert!(listed["upstream_request_id"].as_str().is_some_and(|id| !id.is_empty()), "{listed}");
    let keys = |job: &Value| job.as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>();
    let mut expected = keys(&shown);
    expected.extend(["user_id", "upstream_request_id", "key_prefix", "priority"].map(str::to_owned));
    assert_eq!(keys(&listed), expected, "the job resource as its owner reads it, plus four fields");
    for fixed in ["created_at", "credits_held", "model", "modality", "upstream"] {
        assert_eq!(listed[fixed], shown[fixed], "{fixed}");
    }
    assert!(page["next"].is_null());

    assert_eq!(ids(&app, &format!("?user_id={}", ada.id)).await, [failing.as_str(), image.as_str()]);
    assert_eq!(ids(&app, "?state=failed").await, [failing.as_str()]);
    assert_eq!(ids(&app, "?model=seedance-2.0-fast").await, [video.as_str()]);
    assert_eq!(ids(&app, &format!("?model=nano-banana&user_id={}", ada.id)).await, [failing.as_str(), image.as_str()]);
    assert_eq!(
        ids(&app, "?model=nano-banana&state=failed&upstream=fal").await,
        [failing.as_str()],
        "every filter at once"
    );
    assert_eq!(ids(&app, "?upstream=fal").await.len(), 3, "all three were sent to fal");
    assert!(ids(&app, "?upstream=replicate").await.is_empty());
    assert!(ids(&app, &format!("?user_id={}&state=failed", bob.id)).await.is_empty());

    let first = admin_jobs(&app, "?limit=2").await;
    assert_eq!(first["data"].as_array().unwrap().len(), 2);
    let next = first["next"].as_str().unwrap();
    assert_eq!(next, video);
    assert_eq!(ids(&app, &format!("?limit=2&before={next}")).await, [image.as_str()]);
    assert!(admin_jobs(&app, &format!("?limit=2&before={next}")).await["next"].is_null());
}

#[tokio::test]
async fn a_job_shows_the_body_as_received_and_its_ledger() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let body = json!({"prompt": "  two foxes ", "n": 2});
    let id = app.submit("images", &user.key, body.clone()).await["job_id"].as_str().unwrap().to_owned();
    let done = app.wait_final(&user.key, &id).await;
    assert_eq!(done["state"], "succeeded", "{done}");

    let response = app.get(&format!("/api/admin/jobs/{id}"), ADMIN_TOKEN).await;
    assert_eq!(response.status(), 200);
    let detail: Value = response.json().await.unwrap();
    assert_eq!(detail["request"], body, "no default filled in, nothing trimmed");
    assert_eq!(detail["id"], id.as_str());
    assert_eq!(detail["user_id"], user.id.as_str());
    assert_eq!(detail["state"], "succeeded");
    assert_eq!(detail["credits_actual"], done["credits_actual"]);
    let ledger = detail["ledger"].as_array().unwrap();
    let kinds: Vec<_> = ledger.iter().map(|entry| entry["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[..2], ["hold", "charge"], "oldest first: {ledger:?}");
    assert!(ledger.iter().all(|entry| entry["job_id"] == id.as_str()));
    assert_eq!(ledger[0]["credits"], done["credits_held"]);
    assert_eq!(ledger[1]["credits"], done["credits_actual"]);
    assert_eq!(detail["webhooks"], json!([]), "no webhook_url, no deliveries");

    let openai = json!({"model": "seedance-2.0-fast", "prompt": "waves", "seconds": "4"});
    let video: Value = app.post("/openai/v1/videos", &user.key, &openai).await.json().await.unwrap();
    let shown: Value =
        app.get(&format!("/api/admin/jobs/{}", video["id"].as_str().unwrap()), ADMIN_TOKEN).await.json().await.unwrap();
    assert_eq!(shown["request"], openai, "the OpenAI edge's body, as received");

    for unknown in ["01a20071-bf18-7493-acc7-9f682d0b19fd", "nothing"] {
        let response = app.get(&format!("/api/admin/jobs/{unknown}"), ADMIN_TOKEN).await;
        assert_error(response, 404, "not_found", "JOB_NOT_FOUND").await;
    }
    let as_user = app.get(&format!("/api/admin/jobs/{id}"), &user.key).await;
    assert_error(as_user, 401, "unauthorized", "INVALID_API_KEY").await;
}

#[tokio::test]
async fn a_job_shows_its_webhook_deliveries_as_its_owner_reads_them() {
    let app = spawn_app_with(client_webhook_config(Duration::from_secs(10))).await;
    let receiver = WebhookReceiver::start(vec![]).await;
    let user = app.create_user(100, json!({})).await;
    let body = json!({"prompt": "a kite", "webhook_url": receiver.url});
    let id = app.submit("images", &user.key, body).await["job_id"].as_str().unwrap().to_owned();
    receiver.wait_for(1, Duration::from_secs(20)).await;
    let owners = async || -> Value {
        let page: Value = app.get(&format!("/api/v1/jobs/{id}/webhooks"), &user.key).await.json().await.unwrap();
        page["data"].clone()
    };
    let delivered = |events: &Value| events[0]["delivered_at"].is_string();
    let owners = wait_until(Duration::from_secs(20), "the recorded delivery", owners, delivered).await;
    let detail: Value = app.get(&format!("/api/admin/jobs/{id}"), ADMIN_TOKEN).await.json().await.unwrap();
    assert_eq!(detail["webhooks"], owners, "the owner's deliveries, attempts and all");
    assert_eq!(detail["webhooks"][0]["attempts"][0]["status"], 200, "{detail}");
}

#[tokio::test]
async fn an_operator_cancels_any_users_job_as_its_owner_would() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let id =
        app.submit("images", &user.key, json!({"prompt": "a [sim:hang]"})).await["job_id"].as_str().unwrap().to_owned();
    let path = format!("/api/admin/jobs/{id}/cancel");
    assert_error(app.post(&path, &user.key, &json!({})).await, 401, "unauthorized", "INVALID_API_KEY").await;

    let response = app.post(&path, ADMIN_TOKEN, &json!({})).await;
    assert_eq!(response.status(), 200);
    let receipt: Value = response.json().await.unwrap();
    assert_eq!((receipt["id"].as_str(), receipt["state"].as_str()), (Some(id.as_str()), Some("canceled")));
    let job = app.job(&user.key, &id, 0).await;
    assert_eq!((job["state"].as_str(), job["error"]["code"].as_str()), (Some("canceled"), Some("JOB_CANCELED")));
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_held"].as_u64()), (Some(100), Some(0)));
    assert_eq!(account["active_jobs"], 0);

    let again: Value = app.post(&path, ADMIN_TOKEN, &json!({})).await.json().await.unwrap();
    assert_eq!(again["state"], "canceled", "a final job is left as it is");
    assert_eq!(app.user(&user.id).await["credits_available"], 100, "released once");
    let detail: Value = app.get(&format!("/api/admin/jobs/{id}"), ADMIN_TOKEN).await.json().await.unwrap();
    let kinds: Vec<_> = detail["ledger"].as_array().unwrap().iter().map(|e| e["kind"].clone()).collect();
    assert_eq!(kinds, ["hold", "release"]);
    let unknown =
        app.post("/api/admin/jobs/01a20071-bf18-7493-acc7-9f682d0b19fd/cancel", ADMIN_TOKEN, &json!({})).await;
    assert_error(unknown, 404, "not_found", "JOB_NOT_FOUND").await;
}

#[tokio::test]
async fn bad_filters_are_refused_naming_their_param() {
    let app = spawn_app().await;
    for (query, param) in [
        ("?state=done", "state"),
        ("?user_id=someone", "user_id"),
        ("?model=two%20words", "model"),
        ("?model=", "model"),
        ("?upstream=fal!", "upstream"),
        ("?limit=0", "limit"),
        ("?limit=101", "limit"),
        ("?limit=ten", "limit"),
        ("?before=yesterday", "before"),
    ] {
        let response = app.get(&format!("/api/admin/jobs{query}"), ADMIN_TOKEN).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], param, "{query}");
    }
    let missing = app.client.get(app.url("/api/admin/jobs")).send().await.unwrap();
    assert_error(missing, 401, "unauthorized", "MISSING_API_KEY").await;
}

/// Jobs are found by the key they were submitted with, and show it with their priority.
#[tokio::test]
async fn operators_find_jobs_by_their_key_and_see_its_prefix_and_the_priority() {
    let app = spawn_app().await;
    let ada = app.create_user(500, json!({})).await;
    let issued = app.post(&format!("/api/admin/users/{}/keys", ada.id), ADMIN_TOKEN, &json!({"name": "batch"})).await;
    assert_eq!(issued.status(), 201);
    let issued: Value = issued.json().await.unwrap();
    let (batch_key, prefix) = (issued["api_key"].as_str().unwrap(), issued["prefix"].as_str().unwrap());
    let low = app.submit("images", batch_key, json!({"prompt": "a [sim:hang]", "priority": "low"})).await;
    let normal = app.submit("images", &ada.key, json!({"prompt": "b [sim:hang]"})).await;

    let page = admin_jobs(&app, &format!("?key={prefix}")).await;
    let found: Vec<&Value> = page["data"].as_array().unwrap().iter().collect();
    assert_eq!(found.len(), 1, "only the job of that key: {page}");
    assert_eq!(found[0]["id"], low["job_id"]);
    assert_eq!((found[0]["key_prefix"].as_str(), found[0]["priority"].as_str()), (Some(prefix), Some("low")));
    assert_eq!(ids(&app, &format!("?key={batch_key}")).await, [low["job_id"].as_str().unwrap()], "a whole key is cut");
    let other = admin_jobs(&app, &format!("/{}", normal["job_id"].as_str().unwrap())).await;
    assert_eq!(other["priority"], "normal");
    assert_eq!(other["key_prefix"].as_str(), Some(&ada.key[..15]));
    let bad = app.get("/api/admin/jobs?key=not%20a%20key", ADMIN_TOKEN).await;
    assert_error(bad, 400, "invalid_request", "INVALID_REQUEST").await;
}
