//! Provider capacity across replicas: two replicas on one database, sending to one provider with
//! one key, never have more of its jobs in flight than its cap between them.

use std::time::Duration;

use genjobs::{Config, start};
use genjobs_test_postgres::TestDatabase;
use genjobs_tests::{TestApp, fast_config};
use genjobs_upstream_sim::SimConfig;
use serde_json::json;

/// A replica on `database` with one fal key capped at two jobs in flight, sending to `upstream`
/// (the built-in simulator when `None`).
async fn replica(database: &TestDatabase, upstream: Option<String>) -> TestApp {
    let defaults = fast_config();
    let config = Config {
        database_url: Some(database.url.clone()),
        upstream_url: upstream.clone(),
        upstream_key: Some("shared-key-dddd".into()),
        upstream_max_in_flight: 2,
        simulator: SimConfig { run: Duration::from_millis(300), ..defaults.simulator.clone() },
        ..defaults
    };
    let service = start(config).await.expect("genjobs starts on Postgres");
    let sim = upstream.or_else(|| service.simulator_url.clone()).unwrap_or_default();
    let app = TestApp::remote(format!("http://{}", service.address), sim);
    tokio::spawn(service.run());
    app
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_cap() {
    let database = TestDatabase::new().await;
    let first = replica(&database, None).await;
    let second = replica(&database, Some(first.sim_url.clone())).await;
    let user = first.create_user(1_000, json!({"max_concurrent_jobs": 20, "rate_limit_per_minute": 100000})).await;
    let mut jobs = Vec::new();
    for i in 0..10 {
        let replica = if i % 2 == 0 { &first } else { &second };
        let receipt = replica.submit("images", &user.key, json!({"prompt": format!("shared {i}")})).await;
        jobs.push(receipt["job_id"].as_str().unwrap().to_owned());
    }
    for (i, id) in jobs.iter().enumerate() {
        let replica = if i % 2 == 0 { &second } else { &first };
        assert_eq!(replica.wait_final(&user.key, id).await["state"], "succeeded");
    }
    let stats = first.sim_stats().await;
    assert_eq!(stats["routes"]["submit"], 10, "each job sent once: {stats}");
    assert_eq!(stats["peak_in_flight_by_key"]["dddd"], 2, "the cap held across both replicas: {stats}");
}
