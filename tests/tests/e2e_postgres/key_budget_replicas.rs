//! A key's budget across processes on one database: two replicas taking submissions on one key
//! at once never let its `used` pass its budget, and a change through one reaches the other.

use std::time::Duration;

use futures_util::future::join_all;
use genjobs_test_postgres::TestDatabase;
use genjobs_test_wait::eventually;
use genjobs_tests::ADMIN_TOKEN;
use serde_json::{Value, json};

use crate::catalog_replicas::replica;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_hammering_one_key_never_pass_its_budget() {
    let database = TestDatabase::new().await;
    let (first, _first_drain) = replica(&database).await;
    let (second, _second_drain) = replica(&database).await;
    let user = first.create_user(100_000, json!({"max_concurrent_jobs": 1000, "rate_limit_per_minute": 100_000})).await;
    let body = json!({"models": ["nano-banana"], "budget": {"credits": 40, "period": "total"}});
    let issued: Value =
        first.post(&format!("/api/admin/users/{}/keys", user.id), ADMIN_TOKEN, &body).await.json().await.unwrap();
    let (key, prefix) = (issued["api_key"].as_str().unwrap().to_owned(), issued["prefix"].as_str().unwrap().to_owned());

    let submissions = (0..32).map(|i| {
        let app = if i % 2 == 0 { &first } else { &second };
        let (client, url, key) = (app.client.clone(), app.url("/api/v1/images/generations"), key.clone());
        tokio::spawn(async move {
            let body = json!({"model": "nano-banana", "prompt": "race [sim:hang]"});
            client.post(url).bearer_auth(key).json(&body).send().await.unwrap().status().as_u16()
        })
    });
    let statuses: Vec<u16> = join_all(submissions).await.into_iter().map(|s| s.unwrap()).collect();
    let accepted = statuses.iter().filter(|s| **s == 202).count();
    assert!(statuses.iter().all(|s| [202, 402].contains(s)), "{statuses:?}");
    assert_eq!(accepted, 10, "exactly the 10 jobs of 4 credits that 40 takes: {statuses:?}");
    let listed: Value =
        second.get(&format!("/api/admin/users/{}/keys", user.id), ADMIN_TOKEN).await.json().await.unwrap();
    let budget =
        listed["data"].as_array().unwrap().iter().find(|k| k["prefix"] == prefix.as_str()).unwrap()["budget"].clone();
    assert_eq!(budget["used"], 40, "{budget}");
    assert_eq!(first.user(&user.id).await["credits_held"], 40);

    let raised = first
        .client
        .patch(first.url(&format!("/api/admin/keys/{prefix}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"budget": {"credits": 44, "period": "total"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(raised.status(), 200);
    let body = json!({"model": "nano-banana", "prompt": "one more [sim:hang]"});
    let reached = eventually(Duration::from_secs(1), async || {
        second.post("/api/v1/images/generations", &key, &body).await.status() == 202
    });
    assert!(reached.await, "the raised budget did not reach the other replica within 1 s");
}

/// Three children of a budgeted key, each submitting on both replicas at once, never take the
/// parent past its budget; the parent's revocation through one replica stops a grandchild's open
/// stream and its requests on the other within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_trees_budget_and_revocation_hold_across_replicas() {
    let database = TestDatabase::new().await;
    let (first, _first_drain) = replica(&database).await;
    let (second, _second_drain) = replica(&database).await;
    let user = first.create_user(100_000, json!({"max_concurrent_jobs": 1000, "rate_limit_per_minute": 100_000})).await;
    let made = async |app: &genjobs_tests::TestApp, maker: &str, body: Value| -> Value {
        let response = app.post("/api/v1/account/keys", maker, &body).await;
        assert_eq!(response.status(), 201);
        response.json().await.unwrap()
    };
    let parent = made(&first, &user.key, json!({"budget": {"credits": 40, "period": "day"}})).await;
    let parent_key = parent["api_key"].as_str().unwrap().to_owned();
    let mut children = Vec::new();
    for _ in 0..3 {
        children.push(made(&second, &parent_key, json!({})).await["api_key"].as_str().unwrap().to_owned());
    }
    let grandchild = made(&first, &children[0], json!({})).await["api_key"].as_str().unwrap().to_owned();
    let id = second.submit("images", &grandchild, json!({"prompt": "followed [sim:hang]"})).await;
    let id = id["job_id"].as_str().unwrap().to_owned();
    let submissions = (0..36).map(|i| {
        let app = if i % 2 == 0 { &first } else { &second };
        let (client, url, key) = (app.client.clone(), app.url("/api/v1/images/generations"), children[i % 3].clone());
        tokio::spawn(async move {
            let body = json!({"model": "nano-banana", "prompt": "race [sim:hang]"});
            client.post(url).bearer_auth(key).json(&body).send().await.unwrap().status().as_u16()
        })
    });
    let statuses: Vec<u16> = join_all(submissions).await.into_iter().map(|s| s.unwrap()).collect();
    assert!(statuses.iter().all(|s| [202, 402].contains(s)), "{statuses:?}");
    let accepted = statuses.iter().filter(|s| **s == 202).count();
    assert_eq!(accepted, 9, "the parent's 40, less the grandchild's 4, take nine holds of 4: {statuses:?}");
    assert_eq!(second.user(&user.id).await["credits_held"], 40);
    // Cached on the other replica before the revocation.
    assert_eq!(second.get("/api/v1/account", &grandchild).await.status(), 200);
    let stream = second.open_stream(&id, &grandchild).await;
    let prefix = parent["prefix"].as_str().unwrap();
    let revoked =
        first.client.delete(first.url(&format!("/api/admin/keys/{prefix}"))).bearer_auth(ADMIN_TOKEN).send().await;
    assert_eq!(revoked.unwrap().status(), 204);
    let started = std::time::Instant::now();
    let refused =
        eventually(Duration::from_secs(1), async || second.get("/api/v1/account", &grandchild).await.status() == 401);
    assert!(refused.await, "the revocation did not reach the other replica's cache within 1 s");
    genjobs_tests::read_to_end(stream, Duration::from_secs(5)).await;
    assert!(started.elapsed() < Duration::from_secs(2), "the stream outlived the revocation: {:?}", started.elapsed());
}
