//! Provider capacity: several keys share the jobs, no key goes over its cap of jobs in flight,
//! jobs beyond the caps wait unsent, every later call uses the key that submitted the job (the
//! simulator answers a request only to that key), and bad settings stop the service at start.

use std::time::Duration;

use genjobs::Config;
use genjobs_test_wait::wait_until;
use genjobs_tests::{TestApp, fast_config};
use genjobs_upstream_sim::SimConfig;
use serde_json::{Value, json};

use crate::spawn_app_with;

/// Two fal keys, each capped at one job in flight; the simulator runs each job `run_ms`.
fn capped(run_ms: u64) -> Config {
    let defaults = fast_config();
    Config {
        upstream_key: Some("key-one-aaaa, key-two-bbbb".into()),
        upstream_max_in_flight: 1,
        simulator: SimConfig { run: Duration::from_millis(run_ms), ..defaults.simulator.clone() },
        ..defaults
    }
}

/// Submits an image job of `key`; returns its id.
async fn submitted(app: &TestApp, key: &str, body: Value) -> String {
    app.submit("images", key, body).await["job_id"].as_str().unwrap().to_owned()
}

/// The job once it is at its provider.
async fn sent(app: &TestApp, key: &str, id: &str) -> Value {
    app.job_until(key, id, Duration::from_secs(10), |job| !job["upstream"].is_null()).await
}

/// The job once it says it waits for capacity.
async fn waits(app: &TestApp, key: &str, id: &str) -> Value {
    app.job_until(key, id, Duration::from_secs(10), |job| job["meta"]["waiting_for"] == "capacity").await
}

/// `config` with canceled jobs stopped at the provider too, so that the simulator's count of a
/// key's requests drops with genjobs' own.
fn stopping(config: Config) -> Config {
    Config { gateway: genjobs_domain::usecases::Settings { upstream_cancel: true, ..config.gateway.clone() }, ..config }
}

/// The jobs that say they wait for capacity; each must be queued and unsent.
fn waiting(jobs: &[Value]) -> usize {
    let waiting: Vec<&Value> = jobs.iter().filter(|job| job["meta"] == json!({"waiting_for": "capacity"})).collect();
    for job in &waiting {
        assert!(job["state"] == "queued" && job["upstream"].is_null(), "a waiting job is queued and unsent: {job}");
    }
    waiting.len()
}

/// Five jobs on two keys capped at one each: the simulator never sees more than one job of a key
/// at once, the others wait queued and unsent (saying so in `meta`), both keys are used, and
/// every job succeeds (its status and result read with the key that submitted it: the simulator
/// answers no other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_beyond_the_caps_wait_unsent_and_each_key_stays_under_its_cap() {
    let app = spawn_app_with(capped(400)).await;
    let user = app.create_user(1000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(submitted(&app, &user.key, json!({"prompt": format!("capped {i}")})).await);
    }
    let mut seen_waiting = 0;
    let read_all = async || {
        let mut jobs = Vec::new();
        for id in &ids {
            jobs.push(app.job(&user.key, id, 0).await);
        }
        seen_waiting = seen_waiting.max(waiting(&jobs));
        jobs
    };
    let jobs = wait_until(Duration::from_secs(30), "every job final", read_all, |jobs| {
        jobs.iter().all(|job| ["succeeded", "failed", "canceled"].contains(&job["state"].as_str().unwrap()))
    })
    .await;
    for job in &jobs {
        assert_eq!(job["state"], "succeeded", "{job}");
    }
    assert!(seen_waiting >= 1, "jobs beyond the caps waited unsent, saying so");
    let stats = app.sim_stats().await;
    assert_eq!(stats["routes"]["submit"], 5, "each job sent once: {stats}");
    for key in ["aaaa", "bbbb"] {
        assert!(stats["submits_by_key"][key].as_u64().unwrap_or(0) >= 1, "key {key} took jobs: {stats}");
        assert_eq!(stats["peak_in_flight_by_key"][key], 1, "key {key} never over its cap: {stats}");
    }
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_held"].as_u64(), account["active_jobs"].as_u64()), (Some(0), Some(0)), "{account}");
}

/// A slot frees when its job ends in any way: a canceled job (stopped at the provider too, as
/// `GENJOBS_UPSTREAM_CANCEL` asks) gives its slot to the next waiting job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceled_job_gives_its_slot_to_a_waiting_one() {
    let app = spawn_app_with(stopping(Config { upstream_key: Some("only-key-cccc".into()), ..capped(400) })).await;
    let user = app.create_user(1000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let hanging = submitted(&app, &user.key, json!({"prompt": "holds the slot [sim:hang]"})).await;
    sent(&app, &user.key, &hanging).await;
    let next = submitted(&app, &user.key, json!({"prompt": "waits"})).await;
    let read_next = async || app.job(&user.key, &next, 0).await;
    let waiting = wait_until(Duration::from_secs(10), "the next job to wait for the slot", read_next, |job| {
        job["meta"] == json!({"waiting_for": "capacity"})
    })
    .await;
    assert_eq!((waiting["state"].as_str(), waiting["upstream"].is_null()), (Some("queued"), true), "{waiting}");
    let canceled = app.post(&format!("/api/v1/jobs/{hanging}/cancel"), &user.key, &json!({})).await;
    assert_eq!(canceled.status(), 200);
    let done = app.wait_final(&user.key, &next).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(app.sim_stats().await["peak_in_flight_by_key"]["cccc"], 1);
}

/// When a slot frees, the user with fewer jobs in flight at the provider goes first: a small
/// user's job is sent before the rest of a big user's burst, which waited longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freed_slot_goes_to_the_user_with_fewer_jobs_in_flight() {
    let app = spawn_app_with(stopping(Config {
        upstream_key: Some("only-key-eeee".into()),
        upstream_max_in_flight: 2,
        ..capped(400)
    }))
    .await;
    let limits = json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000});
    let (big, small) = (app.create_user(1000, limits.clone()).await, app.create_user(1000, limits).await);
    let mut burst = Vec::new();
    // The two that hold the slots are sent before the rest of the burst is submitted: jobs
    // submitted together take their first look in any order, so "third" could otherwise take a
    // slot before "first", and end (it does not hang), freeing a slot the test does not expect.
    for prompt in ["first [sim:hang]", "second [sim:hang]"] {
        burst.push(submitted(&app, &big.key, json!({"prompt": prompt})).await);
    }
    for holding in &burst {
        sent(&app, &big.key, holding).await;
    }
    for prompt in ["third", "fourth"] {
        burst.push(submitted(&app, &big.key, json!({"prompt": prompt})).await);
    }
    for waiting in &burst[2..] {
        waits(&app, &big.key, waiting).await;
    }
    let lone = submitted(&app, &small.key, json!({"prompt": "the small user's one job"})).await;
    waits(&app, &small.key, &lone).await;
    let canceled = app.post(&format!("/api/v1/jobs/{}/cancel", burst[0]), &big.key, &json!({})).await;
    assert_eq!(canceled.status(), 200);
    sent(&app, &small.key, &lone).await;
    for waiting in &burst[2..] {
        let job = app.job(&big.key, waiting, 0).await;
        assert!(job["upstream"].is_null(), "the burst's older jobs still wait: {job}");
    }
    assert_eq!(app.sim_stats().await["peak_in_flight_by_key"]["eeee"], 2);
}

/// A low job goes to the provider only while no normal job waits there: a normal job that came
/// later is sent first, and fal is asked to queue the low one after its normal requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_job_waits_while_a_normal_one_waits() {
    let app = spawn_app_with(stopping(Config { upstream_key: Some("only-key-ffff".into()), ..capped(400) })).await;
    let user = app.create_user(1000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let first = submitted(&app, &user.key, json!({"prompt": "holds the slot [sim:hang]"})).await;
    sent(&app, &user.key, &first).await;
    let low = submitted(&app, &user.key, json!({"prompt": "whenever", "priority": "low"})).await;
    let normal = submitted(&app, &user.key, json!({"prompt": "now", "priority": "normal"})).await;
    waits(&app, &user.key, &normal).await;
    let canceled = app.post(&format!("/api/v1/jobs/{first}/cancel"), &user.key, &json!({})).await;
    assert_eq!(canceled.status(), 200);
    sent(&app, &user.key, &normal).await;
    let waiting = app.job(&user.key, &low, 0).await;
    assert!(waiting["upstream"].is_null(), "the older low job still waits: {waiting}");
    assert_eq!(waiting["meta"], json!({"waiting_for": "capacity"}));
    assert_eq!(app.wait_final(&user.key, &low).await["state"], "succeeded");
    let stats = app.sim_stats().await;
    assert_eq!(stats["low_priority_submits"], 1, "{stats}");
    assert_eq!(stats["peak_in_flight_by_key"]["ffff"], 1, "{stats}");
}

/// Operators see each key's jobs in flight against its cap and the jobs waiting, by priority,
/// at `GET /api/admin/providers` and in `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_see_each_keys_jobs_in_flight_and_the_jobs_waiting() {
    let app = spawn_app_with(Config { upstream_key: Some("only-key-gggg".into()), ..capped(400) }).await;
    let user = app.create_user(1000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let hanging = submitted(&app, &user.key, json!({"prompt": "holds the slot [sim:hang]"})).await;
    sent(&app, &user.key, &hanging).await;
    let low = submitted(&app, &user.key, json!({"prompt": "whenever", "priority": "low"})).await;
    waits(&app, &user.key, &low).await;
    let providers: Value = app.get("/api/admin/providers", genjobs_tests::ADMIN_TOKEN).await.json().await.unwrap();
    assert_eq!(
        providers["data"][0],
        json!({"provider": "fal", "keys": [{"key_hint": "gggg", "in_flight": 1, "max_in_flight": 1}],
               "waiting": {"normal": 0, "low": 1}}),
        "{providers}"
    );
    let metrics = app.metrics().await;
    assert_eq!(genjobs_tests::sample_sum(&metrics, "genjobs_provider_in_flight", &["key_hint=\"gggg\""]), 1.0);
    assert_eq!(genjobs_tests::sample_sum(&metrics, "genjobs_provider_waiting", &["priority=\"low\""]), 1.0);
    let canceled = app.post(&format!("/api/v1/jobs/{hanging}/cancel"), &user.key, &json!({})).await;
    assert_eq!(canceled.status(), 200);
    assert_eq!(app.wait_final(&user.key, &low).await["state"], "succeeded");
}

/// `priority` takes `normal` or `low` only, on both generation endpoints and their quotes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_other_than_normal_or_low_is_refused_naming_it() {
    let app = spawn_app_with(fast_config()).await;
    for path in ["/api/v1/images/generations", "/api/v1/video/generations", "/api/v1/images/generations/quote"] {
        for priority in [json!("urgent"), json!(""), json!(1)] {
            let response = app.post(path, &app.demo_key, &json!({"prompt": "a fox", "priority": priority})).await;
            let error = genjobs_tests::assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
            assert_eq!(error["param"], "priority", "{path} {priority}: {error}");
        }
    }
}

/// A list of keys with an empty item, or a negative cap, stops the service at start with a
/// message that names the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_key_lists_and_negative_caps_refuse_to_start() {
    let refusals = [
        (Config { upstream_key: Some("a,,b".into()), ..fast_config() }, "GENJOBS_UPSTREAM_KEY"),
        (Config { upstream_max_in_flight: -1, ..fast_config() }, "GENJOBS_UPSTREAM_MAX_IN_FLIGHT"),
        (
            Config {
                replicate: genjobs_upstream_replicate::ReplicateArgs {
                    replicate_token: Some("r8_a,".into()),
                    ..genjobs_upstream_replicate::ReplicateArgs::default()
                },
                ..fast_config()
            },
            "GENJOBS_REPLICATE_TOKEN",
        ),
        (
            Config {
                replicate: genjobs_upstream_replicate::ReplicateArgs {
                    replicate_max_in_flight: -2,
                    ..genjobs_upstream_replicate::ReplicateArgs::default()
                },
                ..fast_config()
            },
            "GENJOBS_REPLICATE_MAX_IN_FLIGHT",
        ),
    ];
    for (config, setting) in refusals {
        let Err(refused) = genjobs::start(config).await else { panic!("{setting}: the service started") };
        assert!(refused.to_string().contains(setting), "{setting}: {refused}");
    }
}

/// Submits `prompt` with `start_within_secs`; returns the job's id and when it was accepted.
async fn submitted_within(app: &TestApp, key: &str, prompt: &str, secs: u64) -> (String, tokio::time::Instant) {
    let accepted = tokio::time::Instant::now();
    (submitted(app, key, json!({"prompt": prompt, "start_within_secs": secs})).await, accepted)
}

/// Waits for the job to fail `DEADLINE_EXCEEDED`, asserting it did within 2 s of its deadline
/// (`secs` after `accepted`) and not before, with an error that names the deadline.
async fn misses_its_start(app: &TestApp, key: &str, id: &str, accepted: tokio::time::Instant, secs: u64) -> Value {
    let job = app.wait_final(key, id).await;
    let took = accepted.elapsed();
    assert_eq!(
        (job["state"].as_str(), job["error"]["code"].as_str()),
        (Some("failed"), Some("DEADLINE_EXCEEDED")),
        "{job}"
    );
    assert_eq!(job["error"]["type"], "upstream_error", "{job}");
    let message = job["error"]["message"].as_str().unwrap();
    assert!(message.contains("start_within_secs") && message.contains(&format!("{secs} s")), "{message}");
    let deadline = Duration::from_secs(secs);
    eprintln!("job {id} failed DEADLINE_EXCEEDED {took:?} after acceptance; its deadline was {deadline:?}");
    assert!(took + Duration::from_millis(100) >= deadline, "failed {took:?} after acceptance, before its deadline");
    assert!(took <= deadline + Duration::from_secs(2), "failed {took:?} after acceptance, over 2 s past its deadline");
    job
}

/// A job waiting, unsent, for the one slot (held by a job that never ends) fails at its start
/// deadline with `DEADLINE_EXCEEDED`, everything it held released and nothing sent for it; the
/// job holding the slot is not touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waiting_for_capacity_fails_at_its_start_deadline() {
    let app = spawn_app_with(Config { upstream_key: Some("only-key-hhhh".into()), ..capped(400) }).await;
    let user = app.create_user(1000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let hanging = submitted(&app, &user.key, json!({"prompt": "holds the slot [sim:hang]"})).await;
    sent(&app, &user.key, &hanging).await;
    let held_by_one = app.user(&user.id).await["credits_held"].as_u64().unwrap();
    let (late, accepted) = submitted_within(&app, &user.key, "waits too long", 2).await;
    waits(&app, &user.key, &late).await;
    let job = misses_its_start(&app, &user.key, &late, accepted, 2).await;
    assert!(job["upstream"].is_null(), "never sent: {job}");
    let account = app.user(&user.id).await;
    assert_eq!(account["credits_held"].as_u64(), Some(held_by_one), "only the hanging job holds credits: {account}");
    assert_eq!(account["active_jobs"], 1, "{account}");
    let stats = app.sim_stats().await;
    assert_eq!((stats["routes"]["submit"].as_u64(), stats["routes"]["cancel"].as_u64()), (Some(1), None), "{stats}");
    assert_eq!(app.job(&user.key, &hanging, 0).await["state"], "running");
}

/// A job the provider still queues at its start deadline is canceled there (fal's `PUT
/// …/cancel`) and fails `DEADLINE_EXCEEDED`, its credits released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_still_queued_at_the_provider_is_canceled_there_at_its_start_deadline() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(1000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let (queued, accepted) = submitted_within(&app, &user.key, "a long queue [sim:queue=20000]", 1).await;
    let job = misses_its_start(&app, &user.key, &queued, accepted, 1).await;
    assert_eq!(job["upstream"], "fal", "it was sent: {job}");
    let stats = app.sim_stats().await;
    assert_eq!((stats["routes"]["submit"].as_u64(), stats["routes"]["cancel"].as_u64()), (Some(1), Some(1)), "{stats}");
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_held"].as_u64(), account["credits_spent"].as_u64()), (Some(0), Some(0)), "{account}");
}

/// A job that started running before its start deadline runs on past it and succeeds, never
/// canceled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_started_in_time_is_left_to_finish() {
    let app = spawn_app_with(fast_config()).await;
    let user = app.create_user(1000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let (id, _) = submitted_within(&app, &user.key, "starts at once, runs long [sim:run=2500]", 1).await;
    let job = app.wait_final(&user.key, &id).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(app.sim_stats().await["routes"]["cancel"], Value::Null, "never canceled");
}

/// `start_within_secs` takes an integer from 1 to 86,400 only, on both generation endpoints and
/// their quotes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_within_secs_outside_1_to_86400_or_not_an_integer_is_refused_naming_it() {
    let app = spawn_app_with(fast_config()).await;
    for path in ["/api/v1/images/generations", "/api/v1/video/generations", "/api/v1/images/generations/quote"] {
        for secs in [json!(0), json!(86_401), json!(-5), json!(1.5), json!("60"), json!(true), json!([60])] {
            let response = app.post(path, &app.demo_key, &json!({"prompt": "a fox", "start_within_secs": secs})).await;
            let error = genjobs_tests::assert_error(response, 400, "invalid_request", "INVALID_REQUEST").await;
            assert_eq!(error["param"], "start_within_secs", "{path} {secs}: {error}");
        }
        let response = app.post(path, &app.demo_key, &json!({"prompt": "a fox", "start_within_secs": 86_400})).await;
        assert!(response.status().is_success(), "{path}: the longest deadline is taken: {}", response.status());
    }
}
