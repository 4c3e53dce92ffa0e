//! Spill-over across replicas: two replicas on one database read the same free slots, so a job
//! sent by either spills to Replicate while the other's job holds fal's one slot, and a job that
//! does not spill waits for fal on either.

use std::time::Duration;

use genjobs::{Config, start};
use genjobs_test_postgres::TestDatabase;
use genjobs_tests::{TestApp, fast_config};
use genjobs_upstream_replicate::ReplicateArgs;
use genjobs_upstream_replicate_sim::{RunningSim, SimConfig};
use genjobs_upstream_sim::SimConfig as FalSimConfig;
use serde_json::{Value, json};

/// A replica on `database` with one fal key capped at one job in flight (each running 3 s), at
/// `fal` (the built-in simulator when `None`), and Replicate at `replicate`.
async fn replica(database: &TestDatabase, fal: Option<String>, replicate: &RunningSim) -> TestApp {
    let defaults = fast_config();
    let config = Config {
        database_url: Some(database.url.clone()),
        upstream_url: fal.clone(),
        upstream_key: Some("spill-key-eeee".into()),
        upstream_max_in_flight: 1,
        simulator: FalSimConfig { run: Duration::from_secs(3), ..defaults.simulator.clone() },
        replicate: ReplicateArgs {
            replicate_url: replicate.api_url(),
            replicate_token: Some(SimConfig::default().token),
            ..ReplicateArgs::default()
        },
        ..defaults
    };
    let service = start(config).await.expect("genjobs starts on Postgres");
    let sim = fal.or_else(|| service.simulator_url.clone()).unwrap_or_default();
    let app = TestApp::remote(format!("http://{}", service.address), sim);
    tokio::spawn(service.run());
    app
}

async fn flux(app: &TestApp, key: &str, prompt: &str, provider: Value) -> String {
    let body = json!({"model": "flux-pro", "prompt": prompt, "provider": provider});
    app.submit("images", key, body).await["job_id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_agree_on_spill_over_at_a_cap() {
    let replicate = genjobs_upstream_replicate_sim::spawn(SimConfig {
        starting: Duration::from_millis(50),
        processing: Duration::from_millis(300),
        ..SimConfig::default()
    })
    .unwrap();
    let database = TestDatabase::new().await;
    let first = replica(&database, None, &replicate).await;
    let second = replica(&database, Some(first.sim_url.clone()), &replicate).await;
    let user = first.create_user(1_000, json!({"max_concurrent_jobs": 20, "rate_limit_per_minute": 100000})).await;
    let holder = flux(&first, &user.key, "holds fal's slot", json!({"only": ["fal"]})).await;
    first.job_until(&user.key, &holder, Duration::from_secs(10), |job| job["upstream"] == "fal").await;
    // Sent by the other replica, which never saw the first job but counts its slot.
    let spilled = flux(&second, &user.key, "spills from the second replica", json!({"sort": "wait"})).await;
    let job = second.final_unwatched(&user.key, &spilled).await;
    assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("replicate")), "{job}");
    let waiting = flux(&second, &user.key, "waits on the second replica", json!({"order": ["fal"]})).await;
    let job = second
        .job_until(&user.key, &waiting, Duration::from_secs(10), |job| job["meta"]["waiting_for"] == "capacity")
        .await;
    assert!(job["upstream"].is_null(), "{job}");
    for id in [&holder, &waiting] {
        let job = first.final_unwatched(&user.key, id).await;
        assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("fal")), "{job}");
    }
    assert_eq!(replicate.create_calls().len(), 1, "only the spilled job went to Replicate");
    let stats = first.sim_stats().await;
    assert_eq!(stats["peak_in_flight_by_key"]["eeee"], 1, "fal's cap held across both replicas: {stats}");
}
