//! The catalog across processes on one database: a change made through one replica is served by
//! another within 2 s, and the catalog survives a restart.

use std::time::Duration;

use genjobs::{Config, start};
use genjobs_test_postgres::TestDatabase;
use genjobs_test_wait::eventually;
use genjobs_tests::{ADMIN_TOKEN, TestApp, fast_config};
use serde_json::{Value, json};

/// A replica on `database`, with the drain that stops it.
pub(crate) async fn replica(database: &TestDatabase) -> (TestApp, genjobs_http::Drain) {
    let service = start(Config { database_url: Some(database.url.clone()), ..fast_config() })
        .await
        .expect("genjobs starts on Postgres");
    let app = TestApp::remote(format!("http://{}", service.address), service.simulator_url.clone().unwrap_or_default());
    let drain = service.drain();
    tokio::spawn(service.run());
    (app, drain)
}

async fn priced_banana(app: &TestApp, credits: u64) -> Value {
    let mut document = app.admin_model("nano-banana").await;
    document["price"] = json!({"per": "image", "credits": credits});
    document
}

/// Whether `check` comes to hold of `app`'s catalog within `limit`.
async fn seen_within(app: &TestApp, limit: Duration, check: impl AsyncFn(&TestApp) -> bool) -> bool {
    eventually(limit, async || check(app).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_replica_reaches_the_other_within_two_seconds() {
    let database = TestDatabase::new().await;
    let (first, _first_drain) = replica(&database).await;
    let (second, _second_drain) = replica(&database).await;
    let user = second.create_user(1_000, json!({})).await;

    assert_eq!(first.put_model("replicated", &priced_banana(&first, 7).await).await.status(), 201);
    let listed = seen_within(&second, Duration::from_secs(2), async |app| {
        app.model_ids(&user.key).await.contains(&"replicated".to_owned())
    });
    assert!(listed.await, "the second replica did not list the new model within 2 s");
    let quote = |credits: u64| {
        let key = user.key.clone();
        async move |app: &TestApp| {
            let body = json!({"prompt": "a kiwi", "model": "replicated"});
            let quote: Value = app.post("/api/v1/images/generations/quote", &key, &body).await.json().await.unwrap();
            quote["credits"] == credits
        }
    };
    assert!(seen_within(&second, Duration::from_secs(2), quote(7)).await);

    assert_eq!(first.put_model("replicated", &priced_banana(&first, 9).await).await.status(), 200);
    assert!(seen_within(&second, Duration::from_secs(2), quote(9)).await, "a price change within 2 s");

    let deleted = first.client.delete(first.url("/api/admin/models/replicated")).bearer_auth(ADMIN_TOKEN).send();
    assert_eq!(deleted.await.unwrap().status(), 204);
    let gone = seen_within(&second, Duration::from_secs(2), async |app| {
        !app.model_ids(&user.key).await.contains(&"replicated".to_owned())
    });
    assert!(gone.await, "the deletion did not reach the second replica within 2 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_survives_a_restart() {
    let database = TestDatabase::new().await;
    let (before, drain) = replica(&database).await;
    assert_eq!(before.put_model("kept", &priced_banana(&before, 11).await).await.status(), 201);
    let deleted = before.client.delete(before.url("/api/admin/models/flux-pro")).bearer_auth(ADMIN_TOKEN).send();
    assert_eq!(deleted.await.unwrap().status(), 204);
    drain.start();

    let (after, _drain) = replica(&database).await;
    assert_eq!(after.admin_model("kept").await["price"]["credits"], 11);
    assert!(after.admin_model("flux-pro").await.is_null(), "a deleted built-in model stays deleted");
    assert!(after.admin_model("nano-banana").await.is_object());
}
