//! Keys with scopes, budgets and expiry: issued, listed and changed by an operator, managed by
//! their users no wider than the calling key, and enforced on every submission (the native API
//! and the OpenAI edge alike).

use std::time::Duration;

use crate::spawn_app;
use genjobs_test_wait::eventually;
use genjobs_tests::{ADMIN_TOKEN, TestApp, TestUser, assert_error};
use serde_json::{Value, json};

/// Issues `user` a key with `settings` through the admin API, asserting 201.
async fn issue(app: &TestApp, user: &TestUser, settings: &Value) -> Value {
    let response = app.post(&format!("/api/admin/users/{}/keys", user.id), ADMIN_TOKEN, settings).await;
    assert_eq!(response.status(), 201, "{:?}", response.text().await);
    response.json().await.unwrap()
}

async fn keys_of(app: &TestApp, user: &TestUser) -> Vec<Value> {
    let listed: Value = app.get(&format!("/api/admin/users/{}/keys", user.id), ADMIN_TOKEN).await.json().await.unwrap();
    listed["data"].as_array().unwrap().clone()
}

async fn listed_key(app: &TestApp, user: &TestUser, prefix: &str) -> Value {
    keys_of(app, user).await.into_iter().find(|k| k["prefix"] == prefix).expect("the key is listed")
}

async fn patch(app: &TestApp, prefix: &str, body: &Value) -> reqwest::Response {
    app.client
        .patch(app.url(&format!("/api/admin/keys/{prefix}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap()
}

fn image(model: &str) -> Value {
    json!({"model": model, "prompt": "a lighthouse [sim:hang]"})
}

#[tokio::test]
async fn a_restricted_key_uses_only_its_models_and_its_budget() {
    let app = spawn_app().await;
    let user = app.create_user(1000, json!({})).await;
    let settings = json!({"name": "ci", "models": ["nano-banana"], "budget": {"credits": 10, "period": "day"}});
    let issued = issue(&app, &user, &settings).await;
    let (key, prefix) = (issued["api_key"].as_str().unwrap(), issued["prefix"].as_str().unwrap());
    assert_eq!((issued["name"].clone(), issued["models"].clone()), (json!("ci"), json!(["nano-banana"])));
    assert_eq!(issued["budget"]["used"], 0);
    assert!(key.starts_with(prefix));
    assert!(issued["last_used_at"].is_null());

    assert_eq!(app.model_ids(key).await, vec!["nano-banana".to_owned()], "the models list shows the key's only");
    assert!(app.model_ids(&user.key).await.len() > 1, "the user's other key sees them all");
    let refused = app.post("/api/v1/images/generations", key, &image("flux-pro")).await;
    let error = assert_error(refused, 403, "forbidden", "MODEL_NOT_ALLOWED").await;
    assert_eq!(error["param"], "model");

    let first = app.submit("images", key, image("nano-banana")).await;
    app.submit("images", key, image("nano-banana")).await;
    let over = app.post("/api/v1/images/generations", key, &image("nano-banana")).await;
    let error = assert_error(over, 402, "insufficient_credits", "KEY_BUDGET_EXCEEDED").await;
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("10 credits per day") && message.contains("8 used") && message.contains("needs 4"),
        "{message}"
    );
    assert_eq!(app.user(&user.id).await["credits_held"], 8, "the refusal held nothing");
    assert_eq!(
        app.submit("images", &user.key, image("flux-pro")).await["credits_held"],
        6,
        "the user's other key is not limited"
    );

    assert!(listed_key(&app, &user, prefix).await["last_used_at"].is_string(), "set on its first use");
    let budget = listed_key(&app, &user, prefix).await["budget"].clone();
    assert_eq!(
        (budget["credits"].clone(), budget["period"].clone(), budget["used"].clone()),
        (json!(10), json!("day"), json!(8))
    );
    assert!(budget["resets_at"].as_str().is_some_and(|at| at.ends_with("T00:00:00.000Z")), "{budget}");
    let job = first["job_id"].as_str().unwrap();
    assert_eq!(app.post(&format!("/api/v1/jobs/{job}/cancel"), key, &json!({})).await.status(), 200);
    assert_eq!(listed_key(&app, &user, prefix).await["budget"]["used"], 4, "a release gives back");
    app.submit("images", key, image("nano-banana")).await;
}

#[tokio::test]
async fn the_openai_edge_enforces_the_same_scopes() {
    let app = spawn_app().await;
    let user = app.create_user(1000, json!({})).await;
    let issued =
        issue(&app, &user, &json!({"models": ["nano-banana"], "budget": {"credits": 3, "period": "total"}})).await;
    let key = issued["api_key"].as_str().unwrap();
    let outside = app.post("/openai/v1/images/generations", key, &json!({"model": "flux-pro", "prompt": "a"})).await;
    assert_eq!(outside.status(), 403);
    let over = app.post("/openai/v1/images/generations", key, &json!({"model": "nano-banana", "prompt": "a"})).await;
    assert_eq!(over.status(), 402);
    let body: Value = over.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("3 credits"), "{body}");
    let models: Value = app.get("/openai/v1/models", key).await.json().await.unwrap();
    assert_eq!(models["data"].as_array().unwrap().len(), 1, "{models}");
}

#[tokio::test]
async fn an_expired_key_is_refused_and_a_change_reaches_it_at_once() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let issued = issue(&app, &user, &json!({"expires_at": "2020-01-01T00:00:00Z"})).await;
    let (key, prefix) = (issued["api_key"].as_str().unwrap(), issued["prefix"].as_str().unwrap());
    assert_error(app.get("/api/v1/account", key).await, 401, "unauthorized", "API_KEY_EXPIRED").await;

    let changed =
        patch(&app, prefix, &json!({"expires_at": null, "models": ["flux-pro"], "max_concurrent_jobs": 1})).await;
    assert_eq!(changed.status(), 200);
    let changed: Value = changed.json().await.unwrap();
    assert_eq!((changed["expires_at"].clone(), changed["models"].clone()), (Value::Null, json!(["flux-pro"])));
    let works =
        eventually(Duration::from_secs(1), async || app.get("/api/v1/account", key).await.status() == 200).await;
    assert!(works, "the change did not reach the key within 1 s");
    let refused = app.post("/api/v1/images/generations", key, &image("nano-banana")).await;
    assert_error(refused, 403, "forbidden", "MODEL_NOT_ALLOWED").await;
    app.submit("images", key, image("flux-pro")).await;
    let busy = app.post("/api/v1/images/generations", key, &image("flux-pro")).await;
    assert_error(busy, 429, "rate_limited", "CONCURRENCY_LIMIT_EXCEEDED").await;
    let unknown = patch(&app, "gj_nosuchkey1", &json!({"name": "x"})).await;
    assert_error(unknown, 404, "not_found", "KEY_NOT_FOUND").await;
}

#[tokio::test]
async fn usage_groups_by_the_key_that_submitted_the_jobs() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let issued = issue(&app, &user, &json!({"name": "second"})).await;
    let (key, prefix) = (issued["api_key"].as_str().unwrap(), issued["prefix"].as_str().unwrap());
    let receipt = app.submit("images", key, json!({"model": "nano-banana", "prompt": "a fox"})).await;
    app.wait_final(key, receipt["job_id"].as_str().unwrap()).await;
    app.submit("images", &user.key, json!({"model": "flux-pro", "prompt": "a fox [sim:hang]"})).await;
    let mine: Value = app.get("/api/v1/account/usage?group_by=key", &user.key).await.json().await.unwrap();
    let rows = mine["data"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{mine}");
    let of = |prefix: &str| rows.iter().find(|r| r["key"] == prefix).cloned().unwrap_or(Value::Null);
    assert_eq!((of(prefix)["jobs"].clone(), of(prefix)["credits_spent"].clone()), (json!(1), json!(4)), "{mine}");
    assert_eq!(of(&user.key[..15])["jobs"], 1, "{mine}");
    let all: Value =
        app.get(&format!("/api/admin/usage?group_by=key&user_id={}", user.id), ADMIN_TOKEN).await.json().await.unwrap();
    let mut grouped = all["data"].clone();
    for row in grouped.as_array_mut().unwrap() {
        let row = row.as_object_mut().unwrap();
        for money in ["provider_cost_usd", "revenue_usd", "margin_usd"] {
            assert!(row.remove(money).is_some(), "the operators' rows carry {money}");
        }
    }
    assert_eq!(grouped, mine["data"], "the operators' report groups alike");
}

#[tokio::test]
async fn a_keys_own_rate_limit_applies_beside_its_users() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let issued = issue(&app, &user, &json!({"rate_limit_per_minute": 2})).await;
    let key = issued["api_key"].as_str().unwrap();
    for _ in 0..2 {
        assert_eq!(app.get("/api/v1/account", key).await.status(), 200);
    }
    let limited = app.get("/api/v1/account", key).await;
    assert!(limited.headers().contains_key("retry-after"));
    assert_error(limited, 429, "rate_limited", "RATE_LIMIT_EXCEEDED").await;
    assert_eq!(app.get("/api/v1/account", &user.key).await.status(), 200, "the user's other key is not limited");
}

#[tokio::test]
async fn bad_key_settings_are_refused_naming_their_field_and_change_nothing() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let cases = [
        (json!({"budget": {"credits": 5, "period": "year"}}), "budget"),
        (json!({"budget": {"credits": -5, "period": "day"}}), "budget"),
        (json!({"budget": {"credits": 2.5, "period": "day"}}), "budget"),
        (json!({"models": "nano-banana"}), "models"),
        (json!({"models": ["no-such-model"]}), "models"),
        (json!({"expires_at": "next tuesday"}), "expires_at"),
        (json!({"max_concurrent_jobs": 0}), "max_concurrent_jobs"),
        (json!({"colour": "red"}), "colour"),
    ];
    for (body, param) in &cases {
        let response = app.post(&format!("/api/admin/users/{}/keys", user.id), ADMIN_TOKEN, body).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], *param, "{body}");
    }
    assert_eq!(keys_of(&app, &user).await.len(), 1, "no key was issued");
    let prefix = keys_of(&app, &user).await[0]["prefix"].as_str().unwrap().to_owned();
    for (body, param) in &cases {
        let error = assert_error(patch(&app, &prefix, body).await, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], *param, "{body}");
    }
    let unchanged = listed_key(&app, &user, &prefix).await;
    assert_eq!((unchanged["models"].clone(), unchanged["budget"].clone()), (Value::Null, Value::Null));
}

#[tokio::test]
async fn users_manage_their_own_keys_no_wider_than_the_calling_one() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    let restricted =
        issue(&app, &user, &json!({"models": ["nano-banana"], "budget": {"credits": 10, "period": "day"}})).await;
    let restricted = restricted["api_key"].as_str().unwrap();
    for wider in [
        json!({"models": ["nano-banana", "flux-pro"], "budget": {"credits": 5, "period": "day"}}),
        json!({"models": ["nano-banana"], "budget": {"credits": 11, "period": "day"}}),
        json!({"models": ["nano-banana"], "budget": {"credits": 5, "period": "week"}}),
    ] {
        let refused = app.post("/api/v1/account/keys", restricted, &wider).await;
        assert_error(refused, 403, "forbidden", "KEY_SCOPE_EXCEEDED").await;
    }
    let inherited: Value = app.post("/api/v1/account/keys", restricted, &json!({})).await.json().await.unwrap();
    assert_eq!(inherited["models"], json!(["nano-banana"]), "a field left out is the calling key's");
    assert_eq!(inherited["budget"]["credits"], 10);
    let narrower = json!({"name": "child", "models": ["nano-banana"], "budget": {"credits": 5, "period": "day"}});
    let created = app.post("/api/v1/account/keys", restricted, &narrower).await;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let (child, child_prefix) = (created["api_key"].as_str().unwrap(), created["prefix"].as_str().unwrap());
    assert_eq!(app.get("/api/v1/account", child).await.status(), 200);
    let unrestricted = app.post("/api/v1/account/keys", &user.key, &json!({})).await;
    assert_eq!(unrestricted.status(), 201, "an unrestricted key may issue an unrestricted one");

    let mine: Value = app.get("/api/v1/account/keys", &user.key).await.json().await.unwrap();
    assert_eq!(mine["data"].as_array().unwrap().len(), 5);
    let other = app.create_user(100, json!({})).await;
    let theirs: Value = app.get("/api/v1/account/keys", &other.key).await.json().await.unwrap();
    assert_eq!(theirs["data"].as_array().unwrap().len(), 1, "a user sees only their own keys");
    let delete = |key: &str, prefix: &str| {
        app.client.delete(app.url(&format!("/api/v1/account/keys/{prefix}"))).bearer_auth(key).send()
    };
    assert_error(delete(&other.key, child_prefix).await.unwrap(), 404, "not_found", "KEY_NOT_FOUND").await;
    assert_eq!(app.get("/api/v1/account", child).await.status(), 200, "another user's attempt changed nothing");
    assert_eq!(delete(restricted, child_prefix).await.unwrap().status(), 204);
    assert_error(app.get("/api/v1/account", child).await, 401, "unauthorized", "INVALID_API_KEY").await;
    let listed = listed_key(&app, &user, child_prefix).await;
    assert!(listed["revoked_at"].is_string(), "a revoked key stays listed: {listed}");
}
