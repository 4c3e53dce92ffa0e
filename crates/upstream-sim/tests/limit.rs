//! The simulator's per-key concurrency limit over HTTP, as fal's accounts behave: requests of one
//! key beyond the limit stay `IN_QUEUE` until one of that key's requests ends, other keys are not
//! held up, and the stats give each key's most requests in progress at once.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::time::{Duration, Instant};

use genjobs_test_wait::wait_until;
use genjobs_upstream_sim::{RunningSim, SimConfig};
use serde_json::{Value, json};

const ENDPOINT: &str = "fal-ai/flux-pro/v1.1-ultra";

async fn submit(sim: &RunningSim, key: &str, prompt: &str) -> String {
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/{ENDPOINT}", sim.base_url))
        .header("authorization", format!("Key {key}"))
        .json(&json!({"prompt": prompt}))
        .send()
        .await
        .expect("the simulator answers")
        .json()
        .await
        .expect("a JSON answer");
    answer["request_id"].as_str().expect("a request id").to_owned()
}

async fn status(sim: &RunningSim, key: &str, id: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{}/fal-ai/flux-pro/requests/{id}/status", sim.base_url))
        .header("authorization", format!("Key {key}"))
        .send()
        .await
        .expect("the simulator answers")
        .json()
        .await
        .expect("a JSON answer")
}

async fn stats(sim: &RunningSim) -> Value {
    reqwest::get(format!("{}/_sim/stats", sim.base_url)).await.unwrap().json().await.unwrap()
}

fn limited(run_ms: u64, limit: u32) -> RunningSim {
    genjobs_upstream_sim::spawn(SimConfig {
        queue: Duration::ZERO,
        run: Duration::from_millis(run_ms),
        max_in_progress_per_key: limit,
        ..SimConfig::default()
    })
    .expect("the simulator starts")
}

#[tokio::test]
async fn a_keys_requests_beyond_its_limit_wait_in_queue_until_one_ends() {
    let sim = limited(400, 2);
    let submitted = Instant::now();
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(submit(&sim, "key-aaaa", &format!("a {i}")).await);
    }
    let other = submit(&sim, "key-bbbb", "b 0").await;
    for id in &ids[..2] {
        assert_eq!(status(&sim, "key-aaaa", id).await["status"], "IN_PROGRESS");
    }
    let third = status(&sim, "key-aaaa", &ids[2]).await;
    assert_eq!(third["status"], "IN_QUEUE", "the third waits for a slot of its key: {third}");
    assert!(third["queue_position"].is_u64(), "with its place in the queue: {third}");
    assert_eq!(status(&sim, "key-bbbb", &other).await["status"], "IN_PROGRESS", "another key is not held up");

    let mut state_of_third = async || status(&sim, "key-aaaa", &ids[2]).await["status"].clone();
    wait_until(Duration::from_secs(5), "the third to start once a slot frees", &mut state_of_third, |s| {
        s != "IN_QUEUE"
    })
    .await;
    let started = submitted.elapsed();
    assert!(started >= Duration::from_millis(380), "not before the first ended: {started:?}");
    wait_until(Duration::from_secs(5), "the third to complete", state_of_third, |s| s == "COMPLETED").await;
    assert!(submitted.elapsed() >= Duration::from_millis(780), "it ran its full time after waiting");

    let stats = stats(&sim).await;
    assert_eq!(stats["peak_in_progress_by_key"]["aaaa"], 2, "never more in progress than the limit: {stats}");
    assert_eq!(stats["peak_in_flight_by_key"]["aaaa"], 3, "the waiting one counts as not completed: {stats}");
    assert_eq!(stats["peak_in_progress_by_key"]["bbbb"], 1, "{stats}");
    assert_eq!(stats["submits_by_prompt"]["a 2"], 1, "each prompt counted: {stats}");
    let lives: Value = reqwest::get(format!("{}/_sim/requests", sim.base_url)).await.unwrap().json().await.unwrap();
    let third = lives.as_array().unwrap().iter().find(|l| l["prompt"] == "a 2").unwrap();
    let (accepted, ended) = (third["accepted_ms"].as_u64().unwrap(), third["ended_ms"].as_u64().unwrap());
    assert!((600..1_000).contains(&(ended - accepted)), "its life counts its wait for a slot: {third}");
}

#[tokio::test]
async fn a_canceled_request_gives_its_slot_back() {
    let sim = limited(5_000, 1);
    let first = submit(&sim, "key-aaaa", "long").await;
    let second = submit(&sim, "key-aaaa", "next").await;
    assert_eq!(status(&sim, "key-aaaa", &second).await["status"], "IN_QUEUE");
    let canceled = reqwest::Client::new()
        .put(format!("{}/fal-ai/flux-pro/requests/{first}/cancel", sim.base_url))
        .header("authorization", "Key key-aaaa")
        .send()
        .await
        .unwrap();
    assert_eq!(canceled.status(), 202);
    assert_eq!(status(&sim, "key-aaaa", &second).await["status"], "IN_PROGRESS", "the slot freed at the cancel");
}

#[tokio::test]
async fn without_a_limit_every_request_runs_at_once() {
    let sim = limited(400, 0);
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(submit(&sim, "key-aaaa", &format!("a {i}")).await);
    }
    for id in &ids {
        assert_eq!(status(&sim, "key-aaaa", id).await["status"], "IN_PROGRESS");
    }
    assert_eq!(stats(&sim).await["peak_in_progress_by_key"]["aaaa"], 5);
}
