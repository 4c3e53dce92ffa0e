//! The end-to-end suite of `e2e`, module for module, on the Postgres store: each test starts
//! genjobs on a database of its own.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

mod capacity_replicas;
mod catalog_replicas;
mod deploy;
mod key_budget_replicas;
mod routing_replicas;
#[path = "shared.rs"]
mod shared;

use genjobs::Config;
use genjobs_store_postgres::PgSettings;
use genjobs_tests::{TestApp, fast_config, spawn_postgres_app};

pub(crate) async fn spawn_app() -> TestApp {
    spawn_postgres_app(fast_config()).await
}

pub(crate) async fn spawn_app_with(config: Config) -> TestApp {
    spawn_postgres_app(config).await
}

/// A driver with many jobs in flight must never starve the pool: with two connections, a burst
/// of submissions (each of which the driver then submits and polls) and reads all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_pool_serves_a_burst_without_starving() {
    let app =
        spawn_postgres_app(Config { postgres: PgSettings { pool_size: 2, ..PgSettings::default() }, ..fast_config() })
            .await;
    let user = app
        .create_user(10_000, serde_json::json!({"max_concurrent_jobs": 1000, "rate_limit_per_minute": 100000}))
        .await;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (client, base, key) = (app.client.clone(), app.base.clone(), user.key.clone());
            tokio::spawn(async move {
                for _ in 0..8 {
                    let response = client
                        .post(format!("{base}/api/v1/images/generations"))
                        .bearer_auth(&key)
                        .json(&serde_json::json!({"prompt": "burst [sim:hang]"}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 202);
                    let account = client.get(format!("{base}/api/v1/account")).bearer_auth(&key).send().await.unwrap();
                    assert_eq!(account.status(), 200);
                }
            })
        })
        .collect();
    let all = tokio::time::timeout(std::time::Duration::from_secs(30), futures_util::future::join_all(tasks)).await;
    for task in all.expect("the burst finished") {
        task.unwrap();
    }
}
