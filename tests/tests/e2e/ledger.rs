//! The ledger and usage reports from outside: every credit movement readable, its sums equal to
//! the account, usage by day and model, and the operators' report in JSON and CSV.

use std::time::Duration;

use genjobs::Config;
use genjobs_driver::retention::Retention;
use genjobs_test_wait::wait_until;
use genjobs_tests::{ADMIN_TOKEN, TestApp, assert_error, fast_config};
use serde_json::{Value, json};

use crate::{spawn_app, spawn_app_with};

async fn ledger(app: &TestApp, key: &str, query: &str) -> Value {
    let response = app.get(&format!("/api/v1/account/ledger{query}"), key).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// Every entry of the caller's ledger, following `next`.
async fn whole_ledger(app: &TestApp, key: &str) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let page = ledger(app, key, &query).await;
        entries.extend(page["data"].as_array().unwrap().iter().cloned());
        match page["next"].as_str() {
            Some(next) => query = format!("?limit=2&before={next}"),
            None => return entries,
        }
    }
}

fn sum(entries: &[Value], kind: &str) -> i64 {
    entries.iter().filter(|e| e["kind"] == kind).map(|e| e["credits"].as_i64().unwrap()).sum()
}

fn today() -> String {
    time::OffsetDateTime::now_utc().date().to_string()
}

#[tokio::test]
async fn the_ledger_records_every_movement_and_sums_to_the_account() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let opening = ledger(&app, &user.key, "").await;
    assert_eq!(opening["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        (opening["data"][0]["kind"].as_str(), opening["data"][0]["credits"].as_i64()),
        (Some("grant"), Some(100))
    );
    assert_eq!((opening["data"][0]["job_id"].clone(), opening["next"].clone()), (Value::Null, Value::Null));

    let done = app.submit("images", &user.key, json!({"prompt": "a", "n": 2})).await;
    let done_id = done["job_id"].as_str().unwrap();
    app.wait_final(&user.key, done_id).await;
    let canceled = app.submit("images", &user.key, json!({"prompt": "[sim:run=5000] b"})).await;
    let canceled_id = canceled["job_id"].as_str().unwrap();
    app.post(&format!("/api/v1/jobs/{canceled_id}/cancel"), &user.key, &json!({})).await;
    let response =
        app.post(&format!("/api/admin/users/{}/credits", user.id), ADMIN_TOKEN, &json!({"amount": -5})).await;
    assert_eq!(response.status(), 200);

    let entries = whole_ledger(&app, &user.key).await;
    let ids: Vec<i64> = entries.iter().map(|e| e["id"].as_str().unwrap().parse().unwrap()).collect();
    assert!(ids.windows(2).all(|pair| pair[0] > pair[1]), "newest first, no entry twice: {ids:?}");
    let of = |job: &str| {
        entries.iter().filter(|e| e["job_id"] == job).map(|e| e["kind"].as_str().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(of(done_id), vec!["charge", "hold"], "a job's hold is older than its charge: {entries:#?}");
    assert_eq!(of(canceled_id), vec!["release", "hold"]);
    assert_eq!(entries[0]["kind"], "grant");
    assert_eq!(entries[0]["credits"], -5);
    assert!(entries.iter().all(|e| e["created_at"].as_str().is_some_and(|t| t.ends_with('Z'))));

    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    let (grants, holds, releases, charges) =
        (sum(&entries, "grant"), sum(&entries, "hold"), sum(&entries, "release"), sum(&entries, "charge"));
    assert_eq!(account["credits_available"].as_i64(), Some(grants - holds + releases), "{account} {entries:?}");
    assert_eq!(account["credits_held"].as_i64(), Some(holds - releases - charges));
    assert_eq!(account["credits_spent"].as_i64(), Some(charges));
    assert_eq!(charges, 8, "two images at 4");
}

#[tokio::test]
async fn a_user_reads_only_their_own_ledger_and_usage() {
    let app = spawn_app().await;
    let (alice, bob) = (app.create_user(50, json!({})).await, app.create_user(70, json!({})).await);
    let job = app.submit("images", &alice.key, json!({"prompt": "a"})).await;
    app.wait_final(&alice.key, job["job_id"].as_str().unwrap()).await;
    let bobs = whole_ledger(&app, &bob.key).await;
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0]["credits"], 70);
    let usage: Value = app.get("/api/v1/account/usage?group_by=model", &bob.key).await.json().await.unwrap();
    assert_eq!(usage["data"], json!([]));
}

#[tokio::test]
async fn usage_counts_jobs_by_day_and_model_with_what_they_cost() {
    let app = spawn_app().await;
    let user = app.create_user(500, json!({})).await;
    for body in
        [json!({"prompt": "a", "n": 2}), json!({"prompt": "b", "model": "flux-pro"}), json!({"prompt": "[sim:fail] c"})]
    {
        let job = app.submit("images", &user.key, body).await;
        app.wait_final(&user.key, job["job_id"].as_str().unwrap()).await;
    }
    let video = app.submit("video", &user.key, json!({"prompt": "[sim:run=5000] d", "resolution": "720p"})).await;
    app.post(&format!("/api/v1/jobs/{}/cancel", video["job_id"].as_str().unwrap()), &user.key, &json!({})).await;

    let day = today();
    let by_day: Value = app
        .get(&format!("/api/v1/account/usage?from={day}&to={day}&group_by=day"), &user.key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        by_day["data"],
        json!([{"day": day, "jobs": 4, "succeeded": 2, "failed": 1, "canceled": 1, "credits_spent": 14, "content_refused": 0}])
    );
    let by_model: Value = app
        .get(&format!("/api/v1/account/usage?from={day}&to={day}&group_by=model"), &user.key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        by_model["data"],
        json!([
            {"model": "flux-pro", "jobs": 1, "succeeded": 1, "failed": 0, "canceled": 0, "credits_spent": 6, "content_refused": 0},
            {"model": "nano-banana", "jobs": 2, "succeeded": 1, "failed": 1, "canceled": 0, "credits_spent": 8, "content_refused": 0},
            {"model": "seedance-2.0-fast", "jobs": 1, "succeeded": 0, "failed": 0, "canceled": 1, "credits_spent": 0, "content_refused": 0},
        ])
    );
    let by_day_and_model: Value = app
        .get(&format!("/api/v1/account/usage?from={day}&to={day}&group_by=day,model"), &user.key)
        .await
        .json()
        .await
        .unwrap();
    let pairs: Vec<(&str, &str, u64)> = by_day_and_model["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (row["day"].as_str().unwrap(), row["model"].as_str().unwrap(), row["credits_spent"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        pairs,
        [(day.as_str(), "flux-pro", 6), (day.as_str(), "nano-banana", 8), (day.as_str(), "seedance-2.0-fast", 0)],
        "a row per day and model"
    );
    let yesterday = (time::OffsetDateTime::now_utc().date() - time::Duration::days(1)).to_string();
    let before: Value = app
        .get(&format!("/api/v1/account/usage?from={yesterday}&to={yesterday}"), &user.key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(before["data"], json!([]), "a job counts on the day it was created");
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!(account["credits_spent"], 14);
}

#[tokio::test]
async fn bad_parameters_are_400_naming_them() {
    let app = spawn_app().await;
    let cases = [
        ("/api/v1/account/usage?from=2026-13-01", "from"),
        ("/api/v1/account/usage?to=yesterday", "to"),
        ("/api/v1/account/usage?from=2026-11-02&to=2026-11-01", "to"),
        ("/api/v1/account/usage?from=2020-01-01&to=2026-11-01", "from"),
        ("/api/v1/account/usage?group_by=week", "group_by"),
        ("/api/v1/account/usage?group_by=user", "group_by"),
        ("/api/v1/account/ledger?limit=0", "limit"),
        ("/api/v1/account/ledger?limit=101", "limit"),
        ("/api/v1/account/ledger?before=abc", "before"),
    ];
    for (path, param) in cases {
        let error = assert_error(app.get(path, &app.demo_key).await, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], param, "{path}");
    }
    let admin = app.get("/api/admin/usage?group_by=hour", ADMIN_TOKEN).await;
    assert_eq!(assert_error(admin, 400, "invalid_request", "INVALID_REQUEST").await["param"], "group_by");
}

#[tokio::test]
async fn operators_read_usage_across_users_as_json_and_csv() {
    let app = spawn_app().await;
    let (alice, bob) = (app.create_user(100, json!({})).await, app.create_user(100, json!({})).await);
    for (user, n) in [(&alice, 1), (&bob, 3)] {
        let job = app.submit("images", &user.key, json!({"prompt": "a", "n": n})).await;
        app.wait_final(&user.key, job["job_id"].as_str().unwrap()).await;
    }
    let day = today();
    let report: Value = app
        .get(&format!("/api/admin/usage?from={day}&to={day}&group_by=user"), ADMIN_TOKEN)
        .await
        .json()
        .await
        .unwrap();
    let rows = report["data"].as_array().unwrap();
    let spent = |id: &str| rows.iter().find(|r| r["user_id"] == id).map(|r| r["credits_spent"].clone());
    assert_eq!((spent(&alice.id), spent(&bob.id)), (Some(json!(4)), Some(json!(12))), "{report}");

    let csv = app
        .client
        .get(app.url(&format!("/api/admin/usage?from={day}&to={day}&group_by=model")))
        .bearer_auth(ADMIN_TOKEN)
        .header("accept", "text/csv")
        .send()
        .await
        .unwrap();
    assert_eq!(csv.status(), 200);
    assert!(csv.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let text = csv.text().await.unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "model,jobs,succeeded,failed,canceled,credits_spent,content_refused,provider_cost_usd,revenue_usd,margin_usd"
        )
    );
    assert!(lines.any(|line| line.starts_with("nano-banana,") && line.split(',').nth(5) == Some("16")), "{text}");

    let user_key = app.get("/api/admin/usage", &alice.key).await;
    assert_error(user_key, 401, "unauthorized", "INVALID_API_KEY").await;
}

#[tokio::test]
async fn a_job_past_the_retention_is_gone_while_its_ledger_and_usage_stay() {
    let retention = Retention { every: Duration::from_millis(50), ..Retention::keeping(Duration::ZERO) };
    let app = spawn_app_with(Config { retention: Some(retention), ..fast_config() }).await;
    let user = app.create_user(100, json!({})).await;
    let receipt = app.submit("images", &user.key, json!({"prompt": "kept a while", "n": 2})).await;
    let id = receipt["job_id"].as_str().unwrap();
    let today = time::OffsetDateTime::now_utc().date();
    let usage_query = format!("/api/v1/account/usage?from={today}&to={today}&group_by=model");
    // The job may already be gone when first read: usage and ledger were the same before.
    let status = async || app.get(&format!("/api/v1/jobs/{id}"), &user.key).await.status();
    wait_until(Duration::from_secs(30), "the job's removal", status, |status| *status == 404).await;
    let usage: Value = app.get(&usage_query, &user.key).await.json().await.unwrap();
    assert_eq!(
        usage["data"],
        json!([{"model": "nano-banana", "jobs": 1, "succeeded": 1, "failed": 0, "canceled": 0, "credits_spent": 8, "content_refused": 0}]),
        "usage still counts the removed job"
    );
    let entries = whole_ledger(&app, &user.key).await;
    let kinds: Vec<_> = entries.iter().filter(|e| e["job_id"] == id).map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["charge", "hold"], "the removed job's ledger entries stay: {entries:?}");
    let account: Value = app.get("/api/v1/account", &user.key).await.json().await.unwrap();
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(92), Some(8)));
}
