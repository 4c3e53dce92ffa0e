use crate::spawn_app;
use genjobs_tests::snapshot;
use genjobs_tests::{ADMIN_TOKEN, assert_error};
use serde_json::{Value, json};

#[tokio::test]
async fn creating_a_user_returns_its_key_once() {
    let app = spawn_app().await;
    let response = app
        .post("/api/admin/users", ADMIN_TOKEN, &json!({"name": "ada", "credits": 250, "max_concurrent_jobs": 2}))
        .await;
    assert_eq!(response.status(), 201);
    let user: Value = response.json().await.unwrap();
    snapshot!("created_user", user, { ".id" => "[user id]", ".api_key" => "[api key]" });
    let key = user["api_key"].as_str().unwrap();
    assert_eq!(app.get("/api/v1/account", key).await.status(), 200);
    let shown: Value =
        app.get(&format!("/api/admin/users/{}", user["id"].as_str().unwrap()), ADMIN_TOKEN).await.json().await.unwrap();
    assert!(shown.get("api_key").is_none(), "the key is shown only at creation");
}

#[tokio::test]
async fn the_admin_api_needs_the_admin_token() {
    let app = spawn_app().await;
    let body = json!({"name": "x", "credits": 1});
    let missing = app.client.post(app.url("/api/admin/users")).json(&body).send().await.unwrap();
    assert_error(missing, 401, "unauthorized", "MISSING_API_KEY").await;
    assert_error(app.post("/api/admin/users", "wrong-token", &body).await, 401, "unauthorized", "INVALID_API_KEY")
        .await;
    assert_error(app.post("/api/admin/users", &app.demo_key, &body).await, 401, "unauthorized", "INVALID_API_KEY")
        .await;
}

#[tokio::test]
async fn keys_can_be_added_and_revoked_at_once() {
    let app = spawn_app().await;
    let user = app.create_user(10, json!({})).await;
    let response = app.post(&format!("/api/admin/users/{}/keys", user.id), ADMIN_TOKEN, &json!({})).await;
    assert_eq!(response.status(), 201);
    let second = response.json::<Value>().await.unwrap()["api_key"].as_str().unwrap().to_owned();
    assert_eq!(app.get("/api/v1/account", &second).await.status(), 200);
    let prefix = &second[..15];
    let revoke =
        app.client.delete(app.url(&format!("/api/admin/keys/{prefix}"))).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(revoke.status(), 204);
    assert_error(app.get("/api/v1/account", &second).await, 401, "unauthorized", "INVALID_API_KEY").await;
    assert_eq!(app.get("/api/v1/account", &user.key).await.status(), 200, "the first key still works");
    let again =
        app.client.delete(app.url(&format!("/api/admin/keys/{prefix}"))).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_error(again, 404, "not_found", "KEY_NOT_FOUND").await;
}

#[tokio::test]
async fn grants_change_available_credits_and_keep_the_ledger_whole() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({})).await;
    app.submit("images", &user.key, json!({"prompt": "a [sim:hang]"})).await;
    let response =
        app.post(&format!("/api/admin/users/{}/credits", user.id), ADMIN_TOKEN, &json!({"amount": 50})).await;
    assert_eq!(response.status(), 200);
    let mut account: Value = response.json().await.unwrap();
    let created_at = account.as_object_mut().and_then(|a| a.remove("created_at"));
    assert!(created_at.is_some_and(|at| at.is_string()));
    assert_eq!(
        account,
        json!({"id": user.id, "name": "tester", "credits_available": 146, "credits_held": 4, "credits_spent": 0,
               "rate_limit_per_minute": 120, "max_concurrent_jobs": 8, "active_jobs": 1, "price_percent": 100})
    );
    let taken = app.post(&format!("/api/admin/users/{}/credits", user.id), ADMIN_TOKEN, &json!({"amount": -146})).await;
    assert_eq!(taken.json::<Value>().await.unwrap()["credits_available"], 0);
    let below = app.post(&format!("/api/admin/users/{}/credits", user.id), ADMIN_TOKEN, &json!({"amount": -1})).await;
    assert_eq!(assert_error(below, 400, "invalid_request", "INVALID_REQUEST").await["param"], "amount");
    let total = app.user(&user.id).await;
    let sum: u64 =
        ["credits_available", "credits_held", "credits_spent"].iter().map(|k| total[k].as_u64().unwrap()).sum();
    assert_eq!(sum, 100 + 50 - 146);
}

#[tokio::test]
async fn unknown_users_and_bad_bodies_are_refused() {
    let app = spawn_app().await;
    for path in ["/api/admin/users/01a20071-bf18-7493-acc7-9f682d0b19fd", "/api/admin/users/nobody"] {
        assert_error(app.get(path, ADMIN_TOKEN).await, 404, "not_found", "USER_NOT_FOUND").await;
    }
    let grant = app
        .post("/api/admin/users/01a20071-bf18-7493-acc7-9f682d0b19fd/credits", ADMIN_TOKEN, &json!({"amount": 5}))
        .await;
    assert_error(grant, 404, "not_found", "USER_NOT_FOUND").await;
    let bad = app.post("/api/admin/users", ADMIN_TOKEN, &json!({"name": "x", "credits": -5})).await;
    assert_eq!(assert_error(bad, 400, "invalid_request", "INVALID_REQUEST").await["param"], "credits");
}

#[tokio::test]
async fn a_grant_past_the_64_bit_limit_is_refused_on_every_store() {
    let app = spawn_app().await;
    let user = app.create_user(10, json!({})).await;
    let path = format!("/api/admin/users/{}/credits", user.id);
    for amount in [json!(i64::MAX), json!(9_223_372_036_854_775_808_u64), json!(1e20)] {
        let response = app.post(&path, ADMIN_TOKEN, &json!({"amount": amount})).await;
        let error = assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], "amount", "{amount}");
    }
    assert_eq!(app.user(&user.id).await["credits_available"], 10, "nothing changed");
}
