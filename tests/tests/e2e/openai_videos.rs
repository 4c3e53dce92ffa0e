//! The rest of the OpenAI-compatible edge's videos over real HTTP: `videos.list`,
//! `videos.delete`, the Video object of a canceled job, `Idempotency-Key` on every `POST`, and
//! `x-should-retry: false` on a 5xx after a job was accepted (a failed job's 502, a 503 as the
//! service stops).

use genjobs_tests::TestApp;
use reqwest::Response;
use serde_json::{Value, json};

use crate::spawn_app;

/// A form as OpenAI's clients send one, with `boundary`.
fn form(boundary: &str, fields: &[(&str, &str)]) -> String {
    let parts: String = fields
        .iter()
        .map(|(name, value)| {
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
        })
        .collect();
    parts + &format!("--{boundary}--\r\n")
}

async fn post_form(app: &TestApp, key: &str, boundary: &str, fields: &[(&str, &str)], idempotency: &str) -> Response {
    app.client
        .post(app.url("/openai/v1/videos"))
        .bearer_auth(key)
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .header("idempotency-key", idempotency)
        .body(form(boundary, fields))
        .send()
        .await
        .unwrap()
}

async fn video(app: &TestApp, key: &str, prompt: &str) -> String {
    let body = json!({"model": "seedance-2.0-fast", "prompt": prompt, "seconds": "4", "size": "1280x720"});
    let response = app.post("/openai/v1/videos", key, &body).await;
    assert_eq!(response.status(), 200);
    let video: Value = response.json().await.unwrap();
    video["id"].as_str().unwrap().to_owned()
}

async fn list(app: &TestApp, key: &str, query: &str) -> Value {
    let response = app.get(&format!("/openai/v1/videos{query}"), key).await;
    assert_eq!(response.status(), 200, "{query}");
    response.json().await.unwrap()
}

fn ids(page: &Value) -> Vec<&str> {
    page["data"].as_array().unwrap().iter().map(|video| video["id"].as_str().unwrap()).collect()
}

async fn refused_param(response: Response, status: u16) -> String {
    assert_eq!(response.status().as_u16(), status, "{}", response.url());
    let body: Value = response.json().await.unwrap();
    body["error"]["param"].as_str().unwrap_or_default().to_owned()
}

async fn delete(app: &TestApp, key: &str, id: &str) -> Response {
    app.client.delete(app.url(&format!("/openai/v1/videos/{id}"))).bearer_auth(key).send().await.unwrap()
}

#[tokio::test]
async fn videos_are_listed_in_pages_either_way_and_only_the_callers() {
    let app = spawn_app().await;
    let user = app.create_user(500, json!({"max_concurrent_jobs": 10})).await;
    let other = app.create_user(100, json!({})).await;
    video(&app, &other.key, "someone else's").await;
    let mut made = Vec::new();
    for i in 0..3 {
        made.push(video(&app, &user.key, &format!("wave {i} [sim:hang]")).await);
    }
    app.submit("images", &user.key, json!({"prompt": "not a video"})).await;

    let first = list(&app, &user.key, "?limit=2").await;
    assert_eq!(first["object"], "list");
    assert_eq!(ids(&first), [made[2].as_str(), made[1].as_str()], "newest first");
    assert_eq!(
        (first["first_id"].as_str(), first["last_id"].as_str()),
        (Some(made[2].as_str()), Some(made[1].as_str()))
    );
    assert_eq!(first["has_more"], true);
    assert_eq!(first["data"][0]["object"], "video");
    let rest = list(&app, &user.key, &format!("?limit=2&after={}", made[1])).await;
    assert_eq!((ids(&rest), rest["has_more"].as_bool()), (vec![made[0].as_str()], Some(false)));
    let oldest_first = list(&app, &user.key, "?order=asc").await;
    assert_eq!(ids(&oldest_first), made.iter().map(String::as_str).collect::<Vec<_>>());
    let empty = list(&app, &user.key, &format!("?order=asc&after={}", made[2])).await;
    assert_eq!(
        (empty["first_id"].clone(), empty["last_id"].clone(), empty["has_more"].clone()),
        (Value::Null, Value::Null, json!(false))
    );

    for (query, param) in
        [("?order=sideways", "order"), ("?after=nope", "after"), ("?limit=0", "limit"), ("?limit=101", "limit")]
    {
        assert_eq!(refused_param(app.get(&format!("/openai/v1/videos{query}"), &user.key).await, 400).await, param);
    }
}

#[tokio::test]
async fn deleting_a_running_video_refunds_it_and_hides_it_here_only() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let id = video(&app, &user.key, "long [sim:hang]").await;
    let kept = video(&app, &user.key, "kept [sim:hang]").await;
    let held: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!(held["credits_held"], 32);

    let stranger = app.create_user(10, json!({})).await;
    assert_eq!(delete(&app, &stranger.key, &id).await.status(), 403);
    let deleted = delete(&app, &user.key, &id).await;
    assert_eq!(deleted.status(), 200);
    assert_eq!(deleted.json::<Value>().await.unwrap(), json!({"id": id, "object": "video.deleted", "deleted": true}));

    for path in [format!("/openai/v1/videos/{id}"), format!("/openai/v1/videos/{id}/content")] {
        assert_eq!(app.get(&path, &user.key).await.status(), 404, "{path}");
    }
    assert_eq!(delete(&app, &user.key, &id).await.status(), 404, "deleted once");
    assert_eq!(ids(&list(&app, &user.key, "").await), [kept.as_str()]);

    let job = app.job(&user.key, &id, 0).await;
    assert_eq!(job["state"], "canceled", "the native job stays: {job}");
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!((account["credits_held"].as_u64(), account["credits_available"].as_u64()), (Some(16), Some(84)));
    let ledger: Value = app.get("/api/v1/account/ledger", &user.key).await.json().await.unwrap();
    let of_job = ledger["data"].as_array().unwrap().iter().filter(|entry| entry["job_id"] == id.as_str()).count();
    assert_eq!(of_job, 2, "the hold and the release stay in the ledger: {ledger}");
}

#[tokio::test]
async fn deleting_a_finished_video_keeps_its_charge_and_its_job() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let id = video(&app, &user.key, "short").await;
    let job = app.wait_final(&user.key, &id).await;
    assert_eq!((job["state"].as_str(), job["credits_actual"].as_u64()), (Some("succeeded"), Some(16)), "{job}");
    assert_eq!(delete(&app, &user.key, &id).await.status(), 200);
    assert_eq!(app.get(&format!("/openai/v1/videos/{id}"), &user.key).await.status(), 404);
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!((account["credits_spent"].as_u64(), account["credits_available"].as_u64()), (Some(16), Some(84)));
    assert_eq!(app.job(&user.key, &id, 0).await["state"], "succeeded", "the native job stays");
}

#[tokio::test]
async fn a_canceled_video_is_failed_with_the_code_canceled() {
    let app = spawn_app().await;
    let id = video(&app, &app.demo_key, "stopped [sim:hang]").await;
    app.post(&format!("/api/v1/jobs/{id}/cancel"), &app.demo_key, &json!({})).await;
    let video: Value = app.get(&format!("/openai/v1/videos/{id}"), &app.demo_key).await.json().await.unwrap();
    assert_eq!(video["status"], "failed");
    assert_eq!(video["error"]["code"], "canceled", "{video}");
    assert!(video["completed_at"].is_i64(), "{video}");
    assert_eq!((video["seconds"].as_str(), video["size"].as_str()), (Some("4"), Some("1280x720")));
}

#[tokio::test]
async fn an_idempotent_retry_answers_the_first_video_whatever_the_forms_boundary() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let fields = [("prompt", "a calm sea [sim:hang]"), ("model", "seedance-2.0-fast"), ("seconds", "4")];
    let first: Value = post_form(&app, &user.key, "first-boundary", &fields, "k-1").await.json().await.unwrap();
    let reordered = [fields[2], fields[0], fields[1]];
    let again = post_form(&app, &user.key, "another-boundary", &reordered, "k-1").await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.json::<Value>().await.unwrap()["id"], first["id"]);
    let job = app.job(&user.key, first["id"].as_str().unwrap(), 0).await;
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!(account["credits_held"], job["credits_held"], "held once");

    let other = [("prompt", "another sea"), ("model", "seedance-2.0-fast"), ("seconds", "4")];
    let conflict = post_form(&app, &user.key, "first-boundary", &other, "k-1").await;
    assert_eq!(conflict.status(), 409);
    let json = app
        .client
        .post(app.url("/openai/v1/videos"))
        .bearer_auth(&user.key)
        .header("idempotency-key", "k-2")
        .json(&json!({"prompt": "json [sim:hang]", "seconds": 4}));
    let (one, two): (Value, Value) = (
        json.try_clone().unwrap().send().await.unwrap().json().await.unwrap(),
        json.send().await.unwrap().json().await.unwrap(),
    );
    assert_eq!(one["id"], two["id"], "JSON bodies too");
}

#[tokio::test]
async fn an_idempotent_image_retry_answers_the_same_images() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let body = json!({"model": "nano-banana", "prompt": "a fox", "n": 2});
    let call = || {
        app.client
            .post(app.url("/openai/v1/images/generations"))
            .bearer_auth(&user.key)
            .header("idempotency-key", "same-fox")
            .json(&body)
            .send()
    };
    let paths = |images: &Value| -> Vec<String> {
        let data = images["data"].as_array().unwrap();
        data.iter().map(|image| image["url"].as_str().unwrap().split('?').next().unwrap().to_owned()).collect()
    };
    let first: Value = call().await.unwrap().json().await.unwrap();
    let second: Value = call().await.unwrap().json().await.unwrap();
    assert_eq!(paths(&first).len(), 2);
    assert_eq!(paths(&first), paths(&second), "the same job's images");
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    assert_eq!(jobs["data"].as_array().unwrap().len(), 1, "one job: {jobs}");
}

#[tokio::test]
async fn a_failed_generation_tells_clients_not_to_retry() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let failed = app.post("/openai/v1/images/generations", &user.key, &json!({"prompt": "[sim:fail] no"})).await;
    assert_eq!(failed.status(), 502);
    assert_eq!(failed.headers().get("x-should-retry").and_then(|v| v.to_str().ok()), Some("false"));
    let refused = app.post("/openai/v1/images/generations", &user.key, &json!({"prompt": "[sim:reject] no"})).await;
    assert_eq!(refused.status(), 400, "the provider refused the input");
    let invalid = app.post("/openai/v1/images/generations", &user.key, &json!({"prompt": "a", "n": 9})).await;
    assert_eq!(invalid.status(), 400);
    assert!(invalid.headers().get("x-should-retry").is_none(), "no job was accepted");
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(100), Some(0)));
}

#[tokio::test]
async fn a_wait_cut_short_by_the_service_stopping_is_503_without_retry() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let waiting = app
        .client
        .post(app.url("/openai/v1/images/generations"))
        .bearer_auth(&user.key)
        .json(&json!({"prompt": "patient [sim:run=5000]"}))
        .send();
    let waiting = tokio::spawn(waiting);
    let accepted = genjobs_test_wait::eventually(std::time::Duration::from_secs(10), async || {
        let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
        !jobs["data"].as_array().unwrap().is_empty()
    });
    assert!(accepted.await, "the job was never accepted");
    app.drain.as_ref().unwrap().start();
    let stopped = waiting.await.unwrap().unwrap();
    assert_eq!(stopped.status(), 503);
    let header = stopped.headers().get("x-should-retry").and_then(|v| v.to_str().ok());
    assert_eq!(header, Some("false"), "the job was accepted: a retry would pay twice");
    let body: Value = stopped.json().await.unwrap();
    assert_eq!(body["error"]["code"], "service_unavailable", "{body}");
}
