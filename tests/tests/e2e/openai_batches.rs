//! OpenAI's Batch API: a JSONL file uploaded, a batch made of it (each line mapped as its
//! endpoint maps a single request, accepted whole as a native batch at the batch price, or
//! failed naming its lines with nothing held), read back in OpenAI's shape, its output and error
//! files read from its items, canceled, listed; files and batches belong to their user.

use std::time::{Duration, Instant};

use genjobs_tests::{TestApp, assert_error};
use reqwest::Response;
use serde_json::{Value, json};

use super::openai_edits::{BOUNDARY, Part, form};
use crate::spawn_app;

/// A line of an input file.
fn line(custom_id: &str, url: &str, body: Value) -> String {
    json!({"custom_id": custom_id, "method": "POST", "url": url, "body": body}).to_string()
}

/// An image request's line.
fn image(custom_id: &str, prompt: &str) -> String {
    line(custom_id, "/v1/images/generations", json!({"model": "nano-banana", "prompt": prompt}))
}

async fn upload_as(app: &TestApp, key: &str, purpose: &str, content: &str) -> Response {
    let body =
        form(&[Part::Text("purpose", purpose), Part::File("file", "requests.jsonl", content.as_bytes().to_vec())]);
    app.client
        .post(app.url("/openai/v1/files"))
        .bearer_auth(key)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Uploads `lines` as a batch file; its id.
async fn upload(app: &TestApp, key: &str, lines: &[String]) -> String {
    let response = upload_as(app, key, "batch", &lines.join("\n")).await;
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    let file: Value = response.json().await.unwrap();
    file["id"].as_str().unwrap().to_owned()
}

async fn create(app: &TestApp, key: &str, file_id: &str, endpoint: &str) -> Value {
    let body = json!({"input_file_id": file_id, "endpoint": endpoint, "completion_window": "24h"});
    let response = app.post("/openai/v1/batches", key, &body).await;
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    response.json().await.unwrap()
}

/// Reads the batch until its status is `status`, for at most 30 s.
async fn batch_until(app: &TestApp, key: &str, id: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = app.get(&format!("/openai/v1/batches/{id}"), key).await;
        assert_eq!(response.status(), 200);
        let batch: Value = response.json().await.unwrap();
        if batch["status"] == status {
            return batch;
        }
        assert!(tokio::time::Instant::now() < deadline, "batch {id} never got {status}: {batch}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The lines of file `id`.
async fn lines(app: &TestApp, key: &str, id: &str) -> Vec<Value> {
    let response = app.get(&format!("/openai/v1/files/{id}/content"), key).await;
    assert_eq!(response.status(), 200);
    response.text().await.unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

async fn account(app: &TestApp, key: &str) -> Value {
    app.get("/api/v1/account", key).await.json().await.unwrap()
}

async fn batch_price(app: &TestApp, key: &str) -> u64 {
    let body = json!({"model": "nano-banana", "prompt": "x", "batch": true});
    let quote: Value = app.post("/api/v1/images/generations/quote", key, &body).await.json().await.unwrap();
    quote["credits"].as_u64().unwrap()
}

#[tokio::test]
async fn a_file_of_requests_becomes_a_batch_at_the_batch_price_with_output_and_error_files() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({})).await;
    let price = batch_price(&app, &user.key).await;
    let requests = [image("a", "a cat"), String::new(), image("b", "a dog"), image("c", "[sim:fail] no luck")];
    let content = requests.join("\n");
    let response = upload_as(&app, &user.key, "batch", &content).await;
    assert_eq!(response.status(), 200);
    let file: Value = response.json().await.unwrap();
    assert_eq!((file["object"].as_str(), file["purpose"].as_str()), (Some("file"), Some("batch")), "{file}");
    assert_eq!(
        (file["bytes"].as_u64(), file["filename"].as_str()),
        (Some(content.len() as u64), Some("requests.jsonl"))
    );
    assert!(file["created_at"].is_i64(), "{file}");
    let file_id = file["id"].as_str().unwrap();
    let read: Value = app.get(&format!("/openai/v1/files/{file_id}"), &user.key).await.json().await.unwrap();
    assert_eq!(read, file);
    let stored = app.get(&format!("/openai/v1/files/{file_id}/content"), &user.key).await.text().await.unwrap();
    assert_eq!(stored, content);

    let mut body = json!({"input_file_id": file_id, "endpoint": "/v1/images/generations", "completion_window": "24h"});
    body["metadata"] = json!({"run": "nightly"});
    let response = app.post("/openai/v1/batches", &user.key, &body).await;
    assert_eq!(response.status(), 200);
    let batch: Value = response.json().await.unwrap();
    assert_eq!((batch["object"].as_str(), batch["status"].as_str()), (Some("batch"), Some("in_progress")), "{batch}");
    assert_eq!(batch["request_counts"], json!({"total": 3, "completed": 0, "failed": 0}));
    assert_eq!(
        (batch["input_file_id"].as_str(), batch["endpoint"].as_str()),
        (Some(file_id), Some("/v1/images/generations"))
    );
    assert_eq!((batch["output_file_id"].clone(), batch["error_file_id"].clone()), (Value::Null, Value::Null));
    assert_eq!(batch["metadata"]["run"], "nightly");
    assert!(batch["in_progress_at"].is_i64() && batch["expires_at"].as_i64() > batch["created_at"].as_i64(), "{batch}");
    assert_eq!(account(&app, &user.key).await["credits_held"], 3 * price, "one hold of every item at the batch price");
    let id = batch["id"].as_str().unwrap();
    let native: Value = app.get(&format!("/api/v1/batches/{id}"), &user.key).await.json().await.unwrap();
    assert_eq!(native["counts"]["total"], 3, "the same batch natively: {native}");

    let done = batch_until(&app, &user.key, id, "completed").await;
    assert_eq!(done["request_counts"], json!({"total": 3, "completed": 2, "failed": 1}), "{done}");
    assert!(done["completed_at"].is_i64(), "{done}");
    let output_id = done["output_file_id"].as_str().unwrap();
    let output = lines(&app, &user.key, output_id).await;
    assert_eq!(output.iter().map(|l| l["custom_id"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b"]);
    for answered in &output {
        assert_eq!(answered["response"]["status_code"], 200, "{answered}");
        assert!(answered["id"].as_str().unwrap().starts_with("batch_req_"), "{answered}");
        assert!(answered["response"]["request_id"].is_string() && answered["error"].is_null(), "{answered}");
        assert!(answered["response"]["body"]["data"][0]["url"].is_string(), "an images response: {answered}");
        assert!(answered["response"]["body"]["created"].is_i64(), "{answered}");
    }
    let errors = lines(&app, &user.key, done["error_file_id"].as_str().unwrap()).await;
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0]["custom_id"].as_str(), errors[0]["response"].clone()), (Some("c"), Value::Null));
    assert!(errors[0]["error"]["code"].is_string() && errors[0]["error"]["message"].is_string(), "{}", errors[0]);
    let output_file: Value = app.get(&format!("/openai/v1/files/{output_id}"), &user.key).await.json().await.unwrap();
    assert_eq!(output_file["purpose"], "batch_output");
    let output_text = app.get(&format!("/openai/v1/files/{output_id}/content"), &user.key).await.text().await.unwrap();
    assert_eq!(output_file["bytes"].as_u64(), Some(output_text.len() as u64), "{output_file}");

    let spent = account(&app, &user.key).await;
    assert_eq!((spent["credits_spent"].as_u64(), spent["credits_held"].as_u64()), (Some(2 * price), Some(0)));
    assert_eq!(spent["credits_available"].as_u64(), Some(1_000 - 2 * price), "the failed item cost nothing");
}

#[tokio::test]
async fn a_video_batch_answers_each_request_with_its_video() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({})).await;
    let body = json!({"model": "seedance-2.0-fast", "prompt": "waves", "seconds": "4", "size": "1280x720"});
    let file_id = upload(&app, &user.key, &[line("clip", "/v1/videos", body)]).await;
    let batch = create(&app, &user.key, &file_id, "/v1/videos").await;
    let done = batch_until(&app, &user.key, batch["id"].as_str().unwrap(), "completed").await;
    let output = lines(&app, &user.key, done["output_file_id"].as_str().unwrap()).await;
    let video = &output[0]["response"]["body"];
    assert_eq!((video["object"].as_str(), video["status"].as_str()), (Some("video"), Some("completed")), "{video}");
    assert_eq!((video["size"].as_str(), video["seconds"].as_str()), (Some("1280x720"), Some("4")), "{video}");
    assert_eq!(done["error_file_id"], Value::Null, "no line, no file");
}

#[tokio::test]
async fn invalid_lines_fail_the_batch_naming_each_line_and_hold_nothing() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({})).await;
    let requests = [
        image("ok", "a cat"),
        line("no-prompt", "/v1/images/generations", json!({"model": "nano-banana"})),
        String::new(),
        line("video", "/v1/videos", json!({"prompt": "x"})),
        json!({"custom_id": "get", "method": "GET", "url": "/v1/images/generations", "body": {"prompt": "x"}})
            .to_string(),
        line("model", "/v1/images/generations", json!({"model": "dall-e-3", "prompt": "x"})),
        image("ok", "again"),
        json!({"custom_id": "extra", "method": "POST", "url": "/v1/images/generations", "body": {}, "x": 1})
            .to_string(),
        line("b64", "/v1/images/generations", json!({"prompt": "x", "response_format": "b64_json"})),
    ];
    let file_id = upload(&app, &user.key, &requests).await;
    let batch = create(&app, &user.key, &file_id, "/v1/images/generations").await;
    assert_eq!(batch["status"], "failed", "{batch}");
    assert!(batch["failed_at"].is_i64(), "{batch}");
    let named: Vec<(u64, String, String)> = batch["errors"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
            (
                e["line"].as_u64().unwrap(),
                e["code"].as_str().unwrap().to_owned(),
                e["param"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let expected = [
        (2, "invalid_request", "body.prompt"),
        (4, "invalid_url", "url"),
        (5, "invalid_method", "method"),
        (6, "invalid_request", "body.model"),
        (8, "invalid_request", "x"),
        (9, "invalid_request", "body.response_format"),
    ];
    let expected: Vec<(u64, String, String)> =
        expected.iter().map(|(l, c, p)| (*l, (*c).to_owned(), (*p).to_owned())).collect();
    assert_eq!(named, expected, "{batch}");
    assert_eq!(batch["request_counts"], json!({"total": 0, "completed": 0, "failed": 0}));
    assert_eq!(account(&app, &user.key).await["credits_available"], 1_000, "nothing held");

    let twice = upload(&app, &user.key, &[image("same", "a"), image("same", "b")]).await;
    let batch = create(&app, &user.key, &twice, "/v1/images/generations").await;
    let error = &batch["errors"]["data"][0];
    assert_eq!((error["line"].as_u64(), error["code"].as_str()), (Some(2), Some("duplicate_custom_id")), "{batch}");
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    assert!(jobs["data"].as_array().unwrap().is_empty(), "no item was made: {jobs}");
    let read: Value = app
        .get(&format!("/openai/v1/batches/{}", batch["id"].as_str().unwrap()), &user.key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(read, batch, "a failed batch reads back as answered");
}

#[tokio::test]
async fn bad_files_and_batch_requests_are_refused_with_400() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({})).await;
    let refused = |response: Response, param: &'static str| async move {
        let error = assert_error(response, 400, "invalid_request_error", "invalid_request").await;
        assert_eq!(error["param"], param, "{error}");
    };
    refused(upload_as(&app, &user.key, "fine-tune", &image("a", "x")).await, "purpose").await;
    refused(upload_as(&app, &user.key, "batch", "{\"custom_id\": \"a\"}\nnot json\n").await, "file").await;
    refused(upload_as(&app, &user.key, "batch", "").await, "file").await;
    let too_many = "{}\n".repeat(50_001);
    refused(upload_as(&app, &user.key, "batch", &too_many).await, "file").await;
    let no_file = form(&[Part::Text("purpose", "batch")]);
    let response = app
        .client
        .post(app.url("/openai/v1/files"))
        .bearer_auth(&user.key)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(no_file)
        .send()
        .await
        .unwrap();
    refused(response, "file").await;

    let file_id = upload(&app, &user.key, &[image("a", "x")]).await;
    for (body, param) in [
        (json!({"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}), "endpoint"),
        (json!({"input_file_id": file_id, "endpoint": "/v1/videos", "completion_window": "48h"}), "completion_window"),
        (json!({"input_file_id": file_id, "endpoint": "/v1/videos"}), "completion_window"),
        (json!({"input_file_id": "nope", "endpoint": "/v1/videos", "completion_window": "24h"}), "input_file_id"),
    ] {
        refused(app.post("/openai/v1/batches", &user.key, &body).await, param).await;
    }
    let unknown = json!({"input_file_id": "file-0190a7b6-7c3e-7000-8000-000000000000", "endpoint": "/v1/videos", "completion_window": "24h"});
    assert_error(app.post("/openai/v1/batches", &user.key, &unknown).await, 404, "not_found_error", "file_not_found")
        .await;
    let listed: Value = app.get("/openai/v1/batches", &user.key).await.json().await.unwrap();
    assert_eq!(listed["data"], json!([]), "nothing was made: {listed}");
}

#[tokio::test]
async fn files_and_batches_belong_to_their_user() {
    let app = spawn_app().await;
    let owner = app.create_user(1_000, json!({})).await;
    let other = app.create_user(1_000, json!({})).await;
    let file_id = upload(&app, &owner.key, &[image("a", "x [sim:hang]")]).await;
    let batch = create(&app, &owner.key, &file_id, "/v1/images/generations").await;
    let id = batch["id"].as_str().unwrap();
    for path in [
        format!("/openai/v1/files/{file_id}"),
        format!("/openai/v1/files/{file_id}/content"),
        format!("/openai/v1/files/file-output-{id}/content"),
    ] {
        assert_error(app.get(&path, &other.key).await, 404, "not_found_error", "file_not_found").await;
    }
    let response = app.get(&format!("/openai/v1/batches/{id}"), &other.key).await;
    assert_error(response, 404, "not_found_error", "batch_not_found").await;
    let response = app.post(&format!("/openai/v1/batches/{id}/cancel"), &other.key, &json!({})).await;
    assert_error(response, 404, "not_found_error", "batch_not_found").await;
    let theirs = json!({"input_file_id": file_id, "endpoint": "/v1/images/generations", "completion_window": "24h"});
    let response = app.post("/openai/v1/batches", &other.key, &theirs).await;
    assert_error(response, 404, "not_found_error", "file_not_found").await;
    let listed: Value = app.get("/openai/v1/batches", &other.key).await.json().await.unwrap();
    assert_eq!(listed["data"], json!([]));
    app.post(&format!("/openai/v1/batches/{id}/cancel"), &owner.key, &json!({})).await;
}

#[tokio::test]
async fn a_canceled_batch_releases_its_requests_and_batches_are_listed_newest_first() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({})).await;
    let price = batch_price(&app, &user.key).await;
    let quick = upload(&app, &user.key, &[image("q", "quick")]).await;
    let first = create(&app, &user.key, &quick, "/v1/images/generations").await;
    let first_id = first["id"].as_str().unwrap();
    batch_until(&app, &user.key, first_id, "completed").await;
    let hanging = upload(&app, &user.key, &[image("h1", "a [sim:hang]"), image("h2", "b [sim:hang]")]).await;
    let second = create(&app, &user.key, &hanging, "/v1/images/generations").await;
    let second_id = second["id"].as_str().unwrap();

    let response = app.post(&format!("/openai/v1/batches/{second_id}/cancel"), &user.key, &json!({})).await;
    assert_eq!(response.status(), 200);
    let canceling: Value = response.json().await.unwrap();
    assert!(["cancelling", "cancelled"].contains(&canceling["status"].as_str().unwrap()), "{canceling}");
    assert!(canceling["cancelling_at"].is_i64(), "{canceling}");
    let canceled = batch_until(&app, &user.key, second_id, "cancelled").await;
    assert_eq!(canceled["request_counts"], json!({"total": 2, "completed": 0, "failed": 2}), "{canceled}");
    assert!(canceled["cancelled_at"].is_i64() && canceled["output_file_id"].is_null(), "{canceled}");
    let errors = lines(&app, &user.key, canceled["error_file_id"].as_str().unwrap()).await;
    assert_eq!(
        errors.iter().map(|l| l["error"]["code"].as_str().unwrap()).collect::<Vec<_>>(),
        ["canceled", "canceled"]
    );
    let spent = account(&app, &user.key).await;
    assert_eq!((spent["credits_spent"].as_u64(), spent["credits_held"].as_u64()), (Some(price), Some(0)), "{spent}");

    let failed = upload(&app, &user.key, &[line("bad", "/v1/videos", json!({}))]).await;
    let third = create(&app, &user.key, &failed, "/v1/images/generations").await;
    let third_id = third["id"].as_str().unwrap();
    let page: Value = app.get("/openai/v1/batches?limit=2", &user.key).await.json().await.unwrap();
    let ids: Vec<&str> = page["data"].as_array().unwrap().iter().map(|b| b["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [third_id, second_id], "newest first, failed ones too");
    assert_eq!((page["object"].as_str(), page["has_more"].as_bool()), (Some("list"), Some(true)));
    assert_eq!((page["first_id"].as_str(), page["last_id"].as_str()), (Some(third_id), Some(second_id)));
    let rest: Value =
        app.get(&format!("/openai/v1/batches?limit=2&after={second_id}"), &user.key).await.json().await.unwrap();
    assert_eq!(rest["data"][0]["id"], first_id);
    assert_eq!(rest["has_more"], false);
    let response = app.get("/openai/v1/batches?limit=0", &user.key).await;
    assert_error(response, 400, "invalid_request_error", "invalid_request").await;
}

#[tokio::test]
async fn a_batch_the_account_cannot_cover_is_refused_whole_and_a_retry_answers_the_same_batch() {
    let app = spawn_app().await;
    let user = app.create_user(10, json!({})).await;
    let requests: Vec<String> = (0..40).map(|i| image(&format!("r{i}"), "x")).collect();
    let file_id = upload(&app, &user.key, &requests).await;
    let body = json!({"input_file_id": file_id, "endpoint": "/v1/images/generations", "completion_window": "24h"});
    let response = app.post("/openai/v1/batches", &user.key, &body).await;
    assert_error(response, 402, "insufficient_quota", "not_enough_credits").await;
    let listed: Value = app.get("/openai/v1/batches", &user.key).await.json().await.unwrap();
    assert_eq!(listed["data"], json!([]), "a refused batch is not kept");
    assert_eq!(account(&app, &user.key).await["credits_available"], 10);

    let rich = app.create_user(1_000, json!({})).await;
    let file_id = upload(&app, &rich.key, &[image("a", "x [sim:hang]")]).await;
    let body = json!({"input_file_id": file_id, "endpoint": "/v1/images/generations", "completion_window": "24h"});
    let send = || {
        app.client
            .post(app.url("/openai/v1/batches"))
            .bearer_auth(&rich.key)
            .header("Idempotency-Key", "nightly")
            .json(&body)
            .send()
    };
    let first: Value = send().await.unwrap().json().await.unwrap();
    let held = account(&app, &rich.key).await["credits_held"].clone();
    let again: Value = send().await.unwrap().json().await.unwrap();
    assert_eq!(first["id"], again["id"], "{first} {again}");
    assert_eq!(account(&app, &rich.key).await["credits_held"], held, "held once");
    let listed: Value = app.get("/openai/v1/batches", &rich.key).await.json().await.unwrap();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    app.post(&format!("/openai/v1/batches/{}/cancel", first["id"].as_str().unwrap()), &rich.key, &json!({})).await;
}

#[tokio::test]
async fn a_retried_upload_with_its_idempotency_key_answers_the_same_file() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({})).await;
    let send = |content: &str| {
        let body = form(&[Part::Text("purpose", "batch"), Part::File("file", "r.jsonl", content.as_bytes().to_vec())]);
        app.client
            .post(app.url("/openai/v1/files"))
            .bearer_auth(&user.key)
            .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
            .header("Idempotency-Key", "upload-1")
            .body(body)
            .send()
    };
    let first: Value = send(&image("a", "x")).await.unwrap().json().await.unwrap();
    let again: Value = send(&image("a", "x")).await.unwrap().json().await.unwrap();
    assert_eq!(first, again, "the same file");
    let other = send(&image("b", "y")).await.unwrap();
    assert_error(other, 409, "conflict_error", "idempotency_key_reused").await;
    let someone = app.create_user(1_000, json!({})).await;
    let theirs = form(&[Part::Text("purpose", "batch"), Part::File("file", "r.jsonl", image("a", "x").into_bytes())]);
    let response = app
        .client
        .post(app.url("/openai/v1/files"))
        .bearer_auth(&someone.key)
        .header("content-type", format!("multipart/form-data; boundary={BOUNDARY}"))
        .header("Idempotency-Key", "upload-1")
        .body(theirs)
        .send()
        .await
        .unwrap();
    let theirs: Value = response.json().await.unwrap();
    assert_ne!(theirs["id"], first["id"], "a key is its user's");
}

/// A file of 50,000 requests, the most a file holds, is accepted whole in one hold. How long the
/// acceptance took is printed for the record, not asserted.
#[tokio::test]
async fn a_file_of_50000_requests_is_accepted_whole() {
    let app = spawn_app().await;
    let user = app.create_user(10_000_000, json!({"max_concurrent_jobs": 1})).await;
    let price = batch_price(&app, &user.key).await;
    let requests: Vec<String> = (0..50_000).map(|i| image(&format!("r{i}"), "x [sim:hang]")).collect();
    let file_id = upload(&app, &user.key, &requests).await;
    let started = Instant::now();
    let batch = create(&app, &user.key, &file_id, "/v1/images/generations").await;
    eprintln!("50,000 requests accepted in {:?}", started.elapsed());
    assert_eq!(
        (batch["status"].as_str(), batch["request_counts"]["total"].as_u64()),
        (Some("in_progress"), Some(50_000)),
        "{}",
        batch["errors"]
    );
    assert_eq!(account(&app, &user.key).await["credits_held"], 50_000 * price);
}
