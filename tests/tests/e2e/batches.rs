//! Batches: many generations accepted whole at the batch price, each item a job of the batch,
//! admitted to run only while its owner has room, read back with counts, items and streamed
//! results; canceled, expired, refused whole with nothing held.

use std::time::Duration;

use genjobs_tests::{TestApp, assert_error};
use serde_json::{Value, json};

use crate::spawn_app;

/// A batch body of `prompts` as image items named `item-0`, `item-1`, …
fn images(prompts: &[&str]) -> Value {
    let items: Vec<Value> = prompts
        .iter()
        .enumerate()
        .map(|(i, prompt)| json!({"custom_id": format!("item-{i}"), "modality": "image", "body": {"prompt": prompt}}))
        .collect();
    json!({ "items": items })
}

async fn submit_batch(app: &TestApp, key: &str, body: &Value) -> Value {
    let response = app.post("/api/v1/batches", key, body).await;
    assert_eq!(response.status(), 202, "{:?}", response.text().await);
    response.json().await.unwrap()
}

async fn batch(app: &TestApp, key: &str, id: &str) -> Value {
    let response = app.get(&format!("/api/v1/batches/{id}"), key).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// Reads the batch until `condition` holds, for at most `limit`.
async fn batch_until(
    app: &TestApp,
    key: &str,
    id: &str,
    limit: Duration,
    mut condition: impl FnMut(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let read = batch(app, key, id).await;
        if condition(&read) {
            return read;
        }
        assert!(tokio::time::Instant::now() < deadline, "batch {id} never got there: {read}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn available(app: &TestApp, key: &str) -> u64 {
    let account: Value = app.get("/api/v1/account", key).await.json().await.unwrap();
    account["credits_available"].as_u64().unwrap()
}

async fn quote(app: &TestApp, key: &str, body: Value) -> u64 {
    let response = app.post("/api/v1/images/generations/quote", key, &body).await;
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    let quote: Value = response.json().await.unwrap();
    quote["credits"].as_u64().unwrap()
}

#[tokio::test]
async fn a_batch_is_held_whole_at_the_batch_price_and_read_back_in_order() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({"price_percent": 75})).await;
    let full = quote(&app, &user.key, json!({"prompt": "a cat", "n": 3})).await;
    let in_batch = quote(&app, &user.key, json!({"prompt": "a cat", "n": 3, "batch": true})).await;
    assert!(in_batch < full, "the batch price ({in_batch}) is below the price ({full})");
    let mut body = images(&["a cat", "a dog", "a bird"]);
    for item in body["items"].as_array_mut().unwrap() {
        item["body"]["n"] = json!(3);
    }
    body["metadata"] = json!({"project": "atlas"});
    let accepted = submit_batch(&app, &user.key, &body).await;
    assert_eq!(accepted["object"], "batch");
    assert_eq!(accepted["counts"]["total"], 3);
    assert_eq!(accepted["credits_held"], 3 * in_batch, "each item holds its batch price: {accepted}");
    assert_eq!(accepted["metadata"]["project"], "atlas");
    assert_eq!(available(&app, &user.key).await, 1_000 - 3 * in_batch, "one hold, the sum");
    let id = accepted["id"].as_str().unwrap().to_owned();

    let done = batch_until(&app, &user.key, &id, Duration::from_secs(20), |b| b["state"] == "completed").await;
    assert_eq!(done["counts"]["succeeded"], 3, "{done}");
    assert!(done["finished_at"].is_string() && done["started_at"].is_string(), "{done}");
    assert_eq!(done["credits_spent"], 3 * in_batch);

    let items: Value = app.get(&format!("/api/v1/batches/{id}/items"), &user.key).await.json().await.unwrap();
    let names: Vec<&str> = items["data"].as_array().unwrap().iter().map(|i| i["custom_id"].as_str().unwrap()).collect();
    assert_eq!(names, ["item-0", "item-1", "item-2"], "items come in the batch's order");
    for item in items["data"].as_array().unwrap() {
        assert_eq!(item["job"]["batch_id"], id.as_str(), "each item is a job of the batch");
        assert_eq!(item["job"]["credits_held"], in_batch);
    }

    let results = app.get(&format!("/api/v1/batches/{id}/results"), &user.key).await;
    assert_eq!(results.status(), 200);
    assert_eq!(results.headers()["content-type"], "application/x-ndjson");
    let text = results.text().await.unwrap();
    let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[1]["custom_id"], "item-1");
    assert_eq!(lines[1]["state"], "succeeded");
    assert_eq!(lines[1]["outputs"].as_array().unwrap().len(), 3);
    assert_eq!(lines[1]["credits_actual"], in_batch);

    let listed: Value = app.get("/api/v1/batches", &user.key).await.json().await.unwrap();
    assert_eq!(listed["data"][0]["id"], id.as_str());
    let admin: Value = app
        .get(&format!("/api/admin/batches?user_id={}&state=completed", user.id), genjobs_tests::ADMIN_TOKEN)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(admin["data"].as_array().unwrap().len(), 1, "{admin}");
}

#[tokio::test]
async fn an_invalid_batch_names_the_item_at_fault_and_holds_nothing() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({})).await;
    let refusals = [
        (
            json!({"items": [{"custom_id": "a", "modality": "image", "body": {"prompt": "ok"}},
                          {"custom_id": "b", "modality": "image", "body": {}}]}),
            "items[1].body.prompt",
        ),
        (
            json!({"items": [{"custom_id": "a", "modality": "image", "body": {"prompt": "ok"}},
                          {"custom_id": "a", "modality": "image", "body": {"prompt": "ok"}}]}),
            "items[1].custom_id",
        ),
        (json!({"items": [{"custom_id": "a", "modality": "audio", "body": {"prompt": "ok"}}]}), "items[0].modality"),
        (
            json!({"items": [{"custom_id": "a", "modality": "image",
                           "body": {"prompt": "ok", "webhook_url": "https://example.com/hook"}}]}),
            "items[0].body.webhook_url",
        ),
        (
            json!({"items": [{"custom_id": "a", "modality": "image", "body": {"prompt": "ok", "n": 9}}]}),
            "items[0].body.n",
        ),
        (json!({"items": []}), "items"),
        (
            json!({"items": [{"custom_id": "a", "modality": "image", "body": {"prompt": "ok"}}], "completion_window_secs": 10}),
            "completion_window_secs",
        ),
        (json!({"items": [{"custom_id": 7, "modality": "image", "body": {"prompt": "ok"}}]}), "items[0].custom_id"),
    ];
    for (body, param) in refusals {
        let response = app.post("/api/v1/batches", &user.key, &body).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], param, "{body} → {error}");
    }
    let too_many: Vec<Value> = (0..5_001)
        .map(|i| json!({"custom_id": format!("i{i}"), "modality": "image", "body": {"prompt": "ok"}}))
        .collect();
    let response = app.post("/api/v1/batches", &user.key, &json!({ "items": too_many })).await;
    let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
    assert_eq!(error["param"], "items");
    assert_eq!(available(&app, &user.key).await, 1_000, "nothing was held");
    let listed: Value = app.get("/api/v1/batches", &user.key).await.json().await.unwrap();
    assert!(listed["data"].as_array().unwrap().is_empty(), "nothing was made");
}

#[tokio::test]
async fn a_batch_the_account_cannot_cover_is_refused_whole() {
    let app = spawn_app().await;
    let user = app.create_user(10, json!({})).await;
    let prompts = ["a"; 40];
    let response = app.post("/api/v1/batches", &user.key, &images(&prompts)).await;
    assert_error(response, 402, "insufficient_credits", "NOT_ENOUGH_CREDITS").await;
    assert_eq!(available(&app, &user.key).await, 10);
    let jobs: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    assert!(jobs["data"].as_array().unwrap().is_empty(), "no item was made: {jobs}");
}

#[tokio::test]
async fn a_retry_with_the_same_idempotency_key_answers_the_same_batch_and_holds_once() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({})).await;
    let body = images(&["a [sim:hang]", "b [sim:hang]"]);
    let send = || {
        app.client
            .post(app.url("/api/v1/batches"))
            .bearer_auth(&user.key)
            .header("Idempotency-Key", "nightly-1")
            .json(&body)
            .send()
    };
    let first: Value = send().await.unwrap().json().await.unwrap();
    let after_first = available(&app, &user.key).await;
    let second: Value = send().await.unwrap().json().await.unwrap();
    assert_eq!(first["id"], second["id"]);
    assert_eq!(available(&app, &user.key).await, after_first, "the retry held nothing");
    let other = app
        .client
        .post(app.url("/api/v1/batches"))
        .bearer_auth(&user.key)
        .header("Idempotency-Key", "nightly-1")
        .json(&images(&["c"]))
        .send()
        .await
        .unwrap();
    assert_error(other, 409, "idempotency_conflict", "IDEMPOTENCY_KEY_REUSED").await;
}

/// With room for one job, a batch's items run one at a time, and the user's own submissions
/// are accepted beside them all along.
#[tokio::test]
async fn items_wait_for_the_users_room_and_never_stop_the_users_own_submissions() {
    let app = spawn_app().await;
    let user = app.create_user(10_000, json!({"max_concurrent_jobs": 1})).await;
    let accepted = submit_batch(&app, &user.key, &images(&["a [sim:run=400]"; 4])).await;
    let id = accepted["id"].as_str().unwrap().to_owned();
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert!(account["active_jobs"].as_u64().unwrap() <= 1, "unsent items count nowhere: {account}");
    let own = app.submit("images", &user.key, json!({"prompt": "mine"})).await;
    let mut most_running = 0;
    let done = batch_until(&app, &user.key, &id, Duration::from_secs(30), |b| {
        most_running = most_running.max(b["counts"]["running"].as_u64().unwrap());
        b["state"] == "completed"
    })
    .await;
    assert_eq!(done["counts"]["succeeded"], 4, "{done}");
    assert!(most_running <= 1, "at most the user's limit of items ran at once");
    let own = app.wait_final(&user.key, own["job_id"].as_str().unwrap()).await;
    assert_eq!(own["state"], "succeeded");
}

#[tokio::test]
async fn canceling_a_batch_cancels_its_items_and_releases_them() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({"max_concurrent_jobs": 1})).await;
    let accepted = submit_batch(&app, &user.key, &images(&["a [sim:hang]"; 5])).await;
    let id = accepted["id"].as_str().unwrap().to_owned();
    batch_until(&app, &user.key, &id, Duration::from_secs(10), |b| {
        b["counts"]["running"] == 1 || b["started_at"].is_string()
    })
    .await;
    let response = app.post(&format!("/api/v1/batches/{id}/cancel"), &user.key, &json!({})).await;
    assert_eq!(response.status(), 202);
    let canceled = batch_until(&app, &user.key, &id, Duration::from_secs(2), |b| b["state"] == "canceled").await;
    assert_eq!(canceled["counts"]["canceled"], 5, "{canceled}");
    assert_eq!(canceled["credits_spent"], 0);
    assert_eq!(available(&app, &user.key).await, 1_000, "every hold released");
    let ledger: Value = app.get("/api/v1/account/ledger", &user.key).await.json().await.unwrap();
    let releases = ledger["data"].as_array().unwrap().iter().filter(|e| e["kind"] == "release").count();
    assert_eq!(releases, 5, "one release per item: {ledger}");
    let other = app.create_user(10, json!({})).await;
    let response = app.get(&format!("/api/v1/batches/{id}"), &other.key).await;
    assert_error(response, 403, "forbidden", "FORBIDDEN").await;
    let response = app.get("/api/v1/batches/not-a-batch", &other.key).await;
    assert_error(response, 404, "not_found", "BATCH_NOT_FOUND").await;
}

/// An item not sent when its batch's window closes fails `BATCH_EXPIRED` within 2 s, never
/// before; items already running finish. With room for one job, whichever item is admitted first
/// runs past the window and the other two wait for it.
#[tokio::test]
async fn items_not_sent_by_the_window_expire_and_are_released() {
    let app = spawn_app().await;
    let user = app.create_user(1_000, json!({"max_concurrent_jobs": 1})).await;
    let mut body = images(&["a [sim:run=61000]", "b [sim:run=61000]", "c [sim:run=61000]"]);
    body["completion_window_secs"] = json!(60);
    let accepted = submit_batch(&app, &user.key, &body).await;
    let id = accepted["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_secs(58)).await;
    let before = batch(&app, &user.key, &id).await;
    assert_eq!(before["counts"]["failed"], 0, "nothing expires before the window: {before}");
    let expired = batch_until(&app, &user.key, &id, Duration::from_secs(4), |b| b["counts"]["failed"] == 2).await;
    assert_eq!(expired["state"], "in_progress", "the running item goes on: {expired}");
    let items: Value =
        app.get(&format!("/api/v1/batches/{id}/items?state=failed"), &user.key).await.json().await.unwrap();
    for item in items["data"].as_array().unwrap() {
        assert_eq!(item["job"]["error"]["code"], "BATCH_EXPIRED", "{item}");
    }
    let ended = batch_until(&app, &user.key, &id, Duration::from_secs(20), |b| b["state"] == "expired").await;
    assert_eq!(ended["counts"]["succeeded"], 1, "{ended}");
}
