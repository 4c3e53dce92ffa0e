//! Boundaries inside an account: a key made with another is its child, no wider than it in any
//! field and inheriting what it leaves out; its jobs count against every ancestor's budget and
//! concurrency limit; revoking or expiring a key stops its whole subtree, open streams,
//! long-polls and waiting OpenAI calls included; a restricted key acts only within its subtree.

use std::time::{Duration, Instant};

use crate::spawn_app;
use futures_util::future::join_all;
use genjobs_test_wait::wait_until;
use genjobs_tests::{ADMIN_TOKEN, TestApp, TestUser, assert_error, read_to_end};
use serde_json::{Value, json};

/// A key made with `maker` (`POST /api/v1/account/keys`), asserting 201.
async fn child(app: &TestApp, maker: &str, settings: &Value) -> Value {
    let response = app.post("/api/v1/account/keys", maker, settings).await;
    assert_eq!(response.status(), 201, "{:?}", response.text().await);
    response.json().await.unwrap()
}

fn key_of(issued: &Value) -> String {
    issued["api_key"].as_str().unwrap().to_owned()
}

async fn revoke(app: &TestApp, prefix: &str) {
    let response =
        app.client.delete(app.url(&format!("/api/admin/keys/{prefix}"))).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 204);
}

fn hanging() -> Value {
    json!({"model": "nano-banana", "prompt": "a lighthouse [sim:hang]"})
}

/// A user with room for many jobs at once, so that only keys' limits bind.
async fn roomy_user(app: &TestApp, credits: u64) -> TestUser {
    app.create_user(credits, json!({"max_concurrent_jobs": 100, "rate_limit_per_minute": 10000})).await
}

#[tokio::test]
async fn a_child_is_no_wider_than_its_parent_in_any_field_and_inherits_what_it_leaves_out() {
    let app = spawn_app().await;
    let user = roomy_user(&app, 1000).await;
    let parent_settings = json!({
        "models": ["nano-banana", "flux-pro"],
        "budget": {"credits": 40, "period": "day"},
        "expires_at": "2099-01-01T00:00:00Z",
        "rate_limit_per_minute": 100,
        "max_concurrent_jobs": 5,
    });
    let parent = child(&app, &user.key, &parent_settings).await;
    let parent_key = key_of(&parent);
    for (wider, field) in [
        (json!({"models": ["nano-banana", "recraft-v3"]}), "models"),
        (json!({"expires_at": "2099-01-02T00:00:00Z"}), "expires_at"),
        (json!({"rate_limit_per_minute": 101}), "rate_limit_per_minute"),
        (json!({"max_concurrent_jobs": 6}), "max_concurrent_jobs"),
        (json!({"budget": {"credits": 41, "period": "day"}}), "budget"),
        (json!({"budget": {"credits": 10, "period": "week"}}), "budget"),
    ] {
        let refused = app.post("/api/v1/account/keys", &parent_key, &wider).await;
        let error = assert_error(refused, 403, "forbidden", "KEY_SCOPE_EXCEEDED").await;
        assert_eq!(error["param"], field, "{wider}");
    }
    let narrower = child(&app, &parent_key, &json!({"name": "ci", "max_concurrent_jobs": 2})).await;
    assert_eq!(narrower["parent"], parent["prefix"]);
    assert_eq!(narrower["models"], json!(["nano-banana", "flux-pro"]), "inherited");
    assert_eq!(narrower["budget"]["credits"], 40, "inherited");
    assert_eq!(narrower["expires_at"], parent["expires_at"], "inherited");
    assert_eq!(
        (narrower["rate_limit_per_minute"].clone(), narrower["max_concurrent_jobs"].clone()),
        (json!(100), json!(2))
    );
    let listed: Value = app.get(&format!("/api/admin/users/{}/keys", user.id), ADMIN_TOKEN).await.json().await.unwrap();
    let by_prefix =
        |prefix: &Value| listed["data"].as_array().unwrap().iter().find(|k| k["prefix"] == *prefix).cloned();
    assert_eq!(by_prefix(&narrower["prefix"]).unwrap()["parent"], parent["prefix"], "the admin listing shows it");
    assert!(listed["data"][0]["parent"].is_null(), "the operator's key has none");
    let mine: Value = app.get("/api/v1/account/keys", &user.key).await.json().await.unwrap();
    assert_eq!(mine["data"].as_array().unwrap().len(), 3, "an unrestricted key sees every key of its user");
}

#[tokio::test]
async fn three_children_racing_never_spend_more_than_their_parents_budget() {
    let app = spawn_app().await;
    let user = roomy_user(&app, 10_000).await;
    let parent = child(&app, &user.key, &json!({"budget": {"credits": 32, "period": "day"}})).await;
    let mut keys = Vec::new();
    for _ in 0..3 {
        keys.push(key_of(&child(&app, &key_of(&parent), &json!({})).await));
    }
    let submissions = (0..24).map(|n| {
        let (app, key) = (&app, keys[n % 3].clone());
        async move { app.post("/api/v1/images/generations", &key, &hanging()).await.status().as_u16() }
    });
    let statuses = join_all(submissions).await;
    let accepted = statuses.iter().filter(|s| **s == 202).count();
    assert!(statuses.iter().all(|s| [202, 402].contains(s)), "{statuses:?}");
    assert_eq!(accepted, 8, "32 credits a day take eight 4-credit holds: {statuses:?}");
    let listed: Value = app.get("/api/v1/account/keys", &user.key).await.json().await.unwrap();
    let parent_listed = listed["data"].as_array().unwrap().iter().find(|k| k["prefix"] == parent["prefix"]).unwrap();
    assert_eq!(parent_listed["budget"]["used"], 32, "the parent's used counts its children's jobs");
    assert_eq!(app.user(&user.id).await["credits_held"], 32);
}

#[tokio::test]
async fn a_parents_revocation_ends_its_childs_stream_long_poll_and_requests_within_a_second() {
    let app = spawn_app().await;
    let user = roomy_user(&app, 1000).await;
    let parent = child(&app, &user.key, &json!({})).await;
    let grandchild = key_of(&child(&app, &key_of(&child(&app, &key_of(&parent), &json!({})).await), &json!({})).await);
    let job = app.submit("images", &grandchild, hanging()).await;
    let id = job["job_id"].as_str().unwrap().to_owned();
    let stream = app.open_stream(&id, &grandchild).await;
    let long_poll = {
        let (client, url, key) =
            (app.client.clone(), app.url(&format!("/api/v1/jobs/{id}?wait=30")), grandchild.clone());
        tokio::spawn(async move { client.get(url).bearer_auth(key).send().await.unwrap() })
    };
    // A long-poll let in before the revocation must end with it; one let in after is refused
    // at once: either way it answers 401 within the bound, never after its 30 s.
    let revoked_at = Instant::now();
    revoke(&app, parent["prefix"].as_str().unwrap()).await;
    let polled = long_poll.await.unwrap();
    assert_error(polled, 401, "unauthorized", "INVALID_API_KEY").await;
    let text = read_to_end(stream, Duration::from_secs(10)).await;
    assert!(
        revoked_at.elapsed() < Duration::from_secs(2),
        "both ended {:?} after the revocation",
        revoked_at.elapsed()
    );
    assert!(!text.contains("event: done"), "the stream ended without its job: {text}");
    let refused = app.get(&format!("/api/v1/jobs/{id}"), &grandchild).await;
    assert_error(refused, 401, "unauthorized", "INVALID_API_KEY").await;
    let listed: Value = app.get(&format!("/api/admin/users/{}/keys", user.id), ADMIN_TOKEN).await.json().await.unwrap();
    let revoked = listed["data"].as_array().unwrap().iter().filter(|k| k["revoked_at"].is_string()).count();
    assert_eq!(revoked, 3, "the parent and its whole subtree are listed revoked");
    assert_eq!(app.get("/api/v1/account", &user.key).await.status(), 200, "the parent's maker goes on");
}

#[tokio::test]
async fn an_ancestors_expiry_expires_its_descendants() {
    let app = spawn_app().await;
    let user = roomy_user(&app, 1000).await;
    let parent = child(&app, &user.key, &json!({})).await;
    let grandchild = key_of(&child(&app, &key_of(&parent), &json!({})).await);
    assert_eq!(app.get("/api/v1/account", &grandchild).await.status(), 200);
    let response = app
        .client
        .patch(app.url(&format!("/api/admin/keys/{}", parent["prefix"].as_str().unwrap())))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"expires_at": "2020-01-01T00:00:00Z"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let refused = app.get("/api/v1/account", &grandchild).await;
    assert_error(refused, 401, "unauthorized", "API_KEY_EXPIRED").await;
}

#[tokio::test]
async fn a_waiting_openai_call_ends_with_401_when_its_key_is_revoked_and_its_job_goes_on() {
    let app = spawn_app().await;
    let user = roomy_user(&app, 1000).await;
    let issued = child(&app, &user.key, &json!({})).await;
    let key = key_of(&issued);
    let call = {
        let (client, url, key) = (app.client.clone(), app.url("/openai/v1/images/generations"), key.clone());
        tokio::spawn(async move {
            let body = json!({"model": "nano-banana", "prompt": "a lighthouse [sim:hang]"});
            client.post(url).bearer_auth(key).json(&body).send().await.unwrap()
        })
    };
    let jobs = wait_until(
        Duration::from_secs(5),
        "the call's job is accepted",
        async || {
            let listed: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
            listed["data"].as_array().cloned().unwrap_or_default()
        },
        |jobs| !jobs.is_empty(),
    )
    .await;
    let revoked_at = Instant::now();
    revoke(&app, issued["prefix"].as_str().unwrap()).await;
    let answered = call.await.unwrap();
    assert!(revoked_at.elapsed() < Duration::from_secs(2), "answered {:?} after the revocation", revoked_at.elapsed());
    assert_eq!(answered.status(), 401);
    let id = jobs[0]["id"].as_str().unwrap();
    assert_eq!(app.job(&user.key, id, 0).await["state"], "running", "the job goes on");
}

#[tokio::test]
async fn a_restricted_key_acts_only_within_its_subtree() {
    let app = spawn_app().await;
    let user = roomy_user(&app, 1000).await;
    let main_job = app.submit("images", &user.key, hanging()).await;
    let main_id = main_job["job_id"].as_str().unwrap();
    let restricted = child(&app, &user.key, &json!({"name": "script"})).await;
    let (key, prefix) = (key_of(&restricted), restricted["prefix"].as_str().unwrap().to_owned());
    let below = child(&app, &key, &json!({})).await;
    let own_job = app.submit("images", &key, hanging()).await;
    let below_job = app.submit("images", &key_of(&below), hanging()).await;

    for path in [
        format!("/api/v1/jobs/{main_id}"),
        format!("/api/v1/jobs/{main_id}/stream"),
        format!("/api/v1/jobs/{main_id}/webhooks"),
    ] {
        assert_error(app.get(&path, &key).await, 404, "not_found", "JOB_NOT_FOUND").await;
    }
    let cancel = app.post(&format!("/api/v1/jobs/{main_id}/cancel"), &key, &json!({})).await;
    assert_error(cancel, 404, "not_found", "JOB_NOT_FOUND").await;
    assert_eq!(
        app.job(&key, below_job["job_id"].as_str().unwrap(), 0).await["id"],
        below_job["job_id"],
        "its subtree's job"
    );

    let listed: Value = app.get("/api/v1/jobs", &key).await.json().await.unwrap();
    let mut ids: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|j| j["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    let mut expected = vec![own_job["job_id"].as_str().unwrap(), below_job["job_id"].as_str().unwrap()];
    expected.sort_unstable();
    assert_eq!(ids, expected, "only its subtree's jobs");
    let everything: Value = app.get("/api/v1/jobs", &user.key).await.json().await.unwrap();
    assert_eq!(everything["data"].as_array().unwrap().len(), 3, "the main key sees every job");

    let ledger: Value = app.get("/api/v1/account/ledger", &key).await.json().await.unwrap();
    let entries = ledger["data"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "two holds, no grant: {entries:?}");
    assert!(entries.iter().all(|e| e["job_id"] != main_job["job_id"] && e["kind"] == "hold"), "{entries:?}");
    let usage: Value = app.get("/api/v1/account/usage?group_by=key", &key).await.json().await.unwrap();
    let jobs: u64 = usage["data"].as_array().unwrap().iter().map(|row| row["jobs"].as_u64().unwrap()).sum();
    assert_eq!(jobs, 2, "{usage}");

    for (method, path) in [("GET", "/api/v1/account/webhook-secret"), ("POST", "/api/v1/account/webhook-secret/rotate")]
    {
        let request = app.client.request(method.parse().unwrap(), app.url(path)).bearer_auth(&key);
        let response = request.send().await.unwrap();
        assert_error(response, 403, "forbidden", "KEY_SCOPE_EXCEEDED").await;
    }
    assert_eq!(app.get("/api/v1/account/webhook-secret", &user.key).await.status(), 200, "the main key may");
    assert_eq!(app.get("/api/v1/account", &key).await.status(), 200, "the balance stays readable");

    let keys: Value = app.get("/api/v1/account/keys", &key).await.json().await.unwrap();
    let mut prefixes: Vec<&str> =
        keys["data"].as_array().unwrap().iter().map(|k| k["prefix"].as_str().unwrap()).collect();
    prefixes.sort_unstable();
    let mut subtree = vec![prefix.as_str(), below["prefix"].as_str().unwrap()];
    subtree.sort_unstable();
    assert_eq!(prefixes, subtree, "its own subtree's keys");
    let main_prefix = &user.key[..prefix.len()];
    let delete = app.client.delete(app.url(&format!("/api/v1/account/keys/{main_prefix}"))).bearer_auth(&key);
    assert_error(delete.send().await.unwrap(), 404, "not_found", "KEY_NOT_FOUND").await;
    assert_eq!(app.get("/api/v1/account", &user.key).await.status(), 200, "the main key still works");
}
