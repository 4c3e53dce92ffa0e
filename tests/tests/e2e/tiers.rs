//! Price tiers and the operators' listing of users: a user's `price_percent` prices quotes,
//! holds, charges and the 402 message, rounded up per job; limits and tier change with one PATCH.

use std::time::Duration;

use crate::spawn_app;
use genjobs_test_wait::eventually;
use genjobs_tests::{ADMIN_TOKEN, TestApp, assert_error};
use serde_json::{Value, json};

async fn patch_user(app: &TestApp, id: &str, body: &Value) -> reqwest::Response {
    app.client
        .patch(app.url(&format!("/api/admin/users/{id}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn quote(app: &TestApp, key: &str, n: u64) -> Value {
    let body = json!({"model": "nano-banana", "prompt": "a fox", "n": n});
    app.post("/api/v1/images/generations/quote", key, &body).await.json().await.unwrap()
}

#[tokio::test]
async fn a_tier_prices_quotes_holds_charges_and_the_402() {
    let app = spawn_app().await;
    let user = app.create_user(100, json!({"price_percent": 150})).await;
    let shown = app.user(&user.id).await;
    assert_eq!(shown["price_percent"], 150);
    assert!(shown["created_at"].is_string(), "{shown}");
    assert_eq!(quote(&app, &user.key, 1).await["credits"], 6, "4 × 1.5");
    assert_eq!(quote(&app, &user.key, 3).await["credits"], 18, "12 × 1.5");
    let receipt = app.submit("images", &user.key, json!({"model": "nano-banana", "prompt": "a fox"})).await;
    assert_eq!(receipt["credits_held"], 6);
    let done = app.wait_final(&user.key, receipt["job_id"].as_str().unwrap()).await;
    assert_eq!(done["credits_actual"], 6, "{done}");

    let changed = patch_user(&app, &user.id, &json!({"price_percent": 33, "max_concurrent_jobs": 3})).await;
    assert_eq!(changed.status(), 200);
    let changed: Value = changed.json().await.unwrap();
    assert_eq!((changed["price_percent"].clone(), changed["max_concurrent_jobs"].clone()), (json!(33), json!(3)));
    let cheaper = eventually(Duration::from_secs(1), async || quote(&app, &user.key, 1).await["credits"] == 2).await;
    assert!(cheaper, "4 × 0.33 rounds up to 2, within 1 s");

    let poor = app.create_user(5, json!({"price_percent": 200})).await;
    let refused =
        app.post("/api/v1/images/generations", &poor.key, &json!({"model": "nano-banana", "prompt": "a"})).await;
    let error = assert_error(refused, 402, "insufficient_credits", "NOT_ENOUGH_CREDITS").await;
    assert!(error["message"].as_str().unwrap().contains("needs 8 credits, 5 available"), "{error}");
}

#[tokio::test]
async fn a_tier_outside_1_to_1000_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    for percent in [json!(0), json!(1001), json!(-5), json!(1.5)] {
        let created = app
            .post("/api/admin/users", ADMIN_TOKEN, &json!({"name": "x", "credits": 1, "price_percent": percent}))
            .await;
        let error = assert_error(created, 400, "invalid_request", "INVALID_REQUEST").await;
        assert_eq!(error["param"], "price_percent");
        assert!(
            error["message"].as_str().unwrap().contains("from 1 to 1000"),
            "the range, whatever the value: {error}"
        );
    }
    let user = app.create_user(10, json!({})).await;
    let refused = patch_user(&app, &user.id, &json!({"price_percent": 1001, "max_concurrent_jobs": 2})).await;
    assert_eq!(assert_error(refused, 400, "invalid_request", "INVALID_REQUEST").await["param"], "price_percent");
    let shown = app.user(&user.id).await;
    assert_eq!((shown["price_percent"].clone(), shown["max_concurrent_jobs"].clone()), (json!(100), json!(8)));
    let unknown = patch_user(&app, "00000000-0000-7000-8000-000000000000", &json!({"price_percent": 5})).await;
    assert_error(unknown, 404, "not_found", "USER_NOT_FOUND").await;
}

#[tokio::test]
async fn users_are_listed_newest_first_by_name_or_key_prefix() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for name in ["zora-one", "zora-two", "yuki"] {
        let response = app.post("/api/admin/users", ADMIN_TOKEN, &json!({"name": name, "credits": 1})).await;
        let created: Value = response.json().await.unwrap();
        ids.push((created["id"].as_str().unwrap().to_owned(), created["api_key"].as_str().unwrap().to_owned()));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let list = |query: String| {
        let app = &app;
        async move { app.get(&format!("/api/admin/users{query}"), ADMIN_TOKEN).await.json::<Value>().await.unwrap() }
    };
    let ids_of = |page: &Value| -> Vec<String> {
        page["data"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap().to_owned()).collect()
    };
    let zoras = list("?q=zora".into()).await;
    assert_eq!(ids_of(&zoras), vec![ids[1].0.clone(), ids[0].0.clone()], "newest first");
    assert_eq!(zoras["data"][0]["price_percent"], 100);
    let first = list("?q=zora&limit=1".into()).await;
    assert_eq!(ids_of(&first), vec![ids[1].0.clone()]);
    let next = first["next"].as_str().unwrap();
    let second = list(format!("?q=zora&limit=1&before={next}")).await;
    assert_eq!(ids_of(&second), vec![ids[0].0.clone()]);
    assert!(second["next"].is_null());
    let by_key = list(format!("?q={}", &ids[2].1[..15])).await;
    assert_eq!(ids_of(&by_key), vec![ids[2].0.clone()]);
    let bad = app.get("/api/admin/users?limit=0", ADMIN_TOKEN).await;
    assert_eq!(assert_error(bad, 400, "invalid_request", "INVALID_REQUEST").await["param"], "limit");
}
