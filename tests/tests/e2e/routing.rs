//! Routing preferences: a request's `provider` object filters and orders the model's routes
//! (flux-pro runs at fal, then at Replicate), keeps a job to its first route, or spills it to a
//! provider with a free slot rather than wait behind a cap; a model's `spill` does the same for
//! every request that says nothing else. Bad preferences are refused with their `param`.

use std::time::Duration;

use genjobs::Config;
use genjobs_tests::{Answer, TestApp, WebhookReceiver, fast_config};
use genjobs_upstream_replicate::ReplicateArgs;
use genjobs_upstream_replicate_sim::{RunningSim, SimConfig};
use genjobs_upstream_sim::SimConfig as FalSimConfig;
use serde_json::{Value, json};

use super::replicate::replicate_sim;
use crate::spawn_app_with;

/// `base` with Replicate at `sim` besides fal.
fn with_replicate(sim: &RunningSim, base: Config) -> Config {
    let replicate = ReplicateArgs {
        replicate_url: sim.api_url(),
        replicate_token: Some(SimConfig::default().token),
        ..ReplicateArgs::default()
    };
    Config { replicate, ..base }
}

/// fal (its simulator, one key capped at one job in flight, each job running 3 s) and Replicate.
fn capped_fal(sim: &RunningSim) -> Config {
    let defaults = fast_config();
    with_replicate(
        sim,
        Config {
            upstream_key: Some("route-key-cccc".into()),
            upstream_max_in_flight: 1,
            simulator: FalSimConfig { run: Duration::from_secs(3), ..defaults.simulator.clone() },
            ..defaults
        },
    )
}

/// Submits a flux-pro image job with `provider` (none when null); returns its id.
async fn flux(app: &TestApp, key: &str, prompt: &str, provider: Value) -> String {
    let mut body = json!({"model": "flux-pro", "prompt": prompt});
    if !provider.is_null() {
        body["provider"] = provider;
    }
    app.submit("images", key, body).await["job_id"].as_str().unwrap().to_owned()
}

/// The job once it is at its provider.
async fn sent(app: &TestApp, key: &str, id: &str) -> Value {
    app.job_until(key, id, Duration::from_secs(10), |job| !job["upstream"].is_null()).await
}

/// The job once it says it waits for capacity; it is queued and unsent.
async fn waits(app: &TestApp, key: &str, id: &str) -> Value {
    let job = app.job_until(key, id, Duration::from_secs(10), |job| job["meta"]["waiting_for"] == "capacity").await;
    assert!(job["state"] == "queued" && job["upstream"].is_null(), "{job}");
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_only_and_ignore_choose_where_the_job_runs() {
    let sim = replicate_sim();
    let app = spawn_app_with(with_replicate(&sim, fast_config())).await;
    let user = app.create_user(1_000, json!({"max_concurrent_jobs": 10})).await;
    for (provider, runs_at) in [
        (Value::Null, "fal"),
        (json!({"order": ["replicate"]}), "replicate"),
        (json!({"only": ["replicate"]}), "replicate"),
        (json!({"ignore": ["fal"]}), "replicate"),
        (json!({"order": ["replicate", "fal"], "ignore": ["replicate"]}), "fal"),
        (json!({"only": ["fal", "replicate"], "order": ["fal"]}), "fal"),
    ] {
        let id = flux(&app, &user.key, "a lighthouse", provider.clone()).await;
        let job = app.final_unwatched(&user.key, &id).await;
        assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some(runs_at)), "{provider}");
    }
    assert_eq!(sim.create_calls().len(), 3, "Replicate ran exactly the jobs sent there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_fallbacks_a_refusal_is_retried_on_the_first_route_only() {
    let sim = replicate_sim();
    let fal = WebhookReceiver::start(vec![Answer::Status(503); 64]).await;
    let url = fal.url.trim_end_matches("/hook").to_owned();
    let app = spawn_app_with(with_replicate(&sim, Config { upstream_url: Some(url), ..fast_config() })).await;
    let user = app.create_user(100, json!({})).await;
    let id = flux(&app, &user.key, "a lighthouse", json!({"allow_fallbacks": false})).await;
    // One step tries fal twice; a third call is a later step trying fal again.
    fal.wait_for(3, Duration::from_secs(10)).await;
    let job = app.job(&user.key, &id, 0).await;
    assert!(job["state"] == "queued" && job["upstream"].is_null(), "{job}");
    assert!(sim.create_calls().is_empty(), "never sent to the next route");
    // With fallbacks (the default) the same refusal hands the job to Replicate.
    let id = flux(&app, &user.key, "a lighthouse", json!({"allow_fallbacks": true})).await;
    let job = app.final_unwatched(&user.key, &id).await;
    assert_eq!(job["upstream"], "replicate", "{job}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_wait_spills_to_a_provider_with_a_free_slot_rather_than_wait_behind_a_cap() {
    let sim = replicate_sim();
    let app = spawn_app_with(capped_fal(&sim)).await;
    let user = app.create_user(1_000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let first = flux(&app, &user.key, "takes fal's one slot", Value::Null).await;
    assert_eq!(sent(&app, &user.key, &first).await["upstream"], "fal");
    let spilled = flux(&app, &user.key, "spills", json!({"sort": "wait"})).await;
    let job = app.final_unwatched(&user.key, &spilled).await;
    assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("replicate")), "{job}");
    let waiting = flux(&app, &user.key, "waits for fal", Value::Null).await;
    waits(&app, &user.key, &waiting).await;
    let kept = flux(&app, &user.key, "keeps to fal", json!({"sort": "wait", "allow_fallbacks": false})).await;
    waits(&app, &user.key, &kept).await;
    for id in [&first, &waiting, &kept] {
        let job = app.final_unwatched(&user.key, id).await;
        assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("fal")), "{job}");
    }
    assert_eq!(sim.create_calls().len(), 1, "only the spilled job went to Replicate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_spills_sends_its_jobs_where_a_slot_is_free() {
    let sim = replicate_sim();
    let app = spawn_app_with(capped_fal(&sim)).await;
    let mut document = app.admin_model("flux-pro").await;
    assert_eq!(document["spill"], false, "{document}");
    document["spill"] = json!(true);
    assert!(app.put_model("flux-pro", &document).await.status().is_success());
    assert_eq!(app.admin_model("flux-pro").await["spill"], true);
    let user = app.create_user(1_000, json!({"max_concurrent_jobs": 10, "rate_limit_per_minute": 100000})).await;
    let first = flux(&app, &user.key, "takes fal's one slot", Value::Null).await;
    assert_eq!(sent(&app, &user.key, &first).await["upstream"], "fal");
    let spilled = flux(&app, &user.key, "spills by the catalog", Value::Null).await;
    assert_eq!(app.final_unwatched(&user.key, &spilled).await["upstream"], "replicate");
    // A request that keeps to one route says otherwise: it waits for fal.
    let kept = flux(&app, &user.key, "keeps to fal", json!({"allow_fallbacks": false})).await;
    waits(&app, &user.key, &kept).await;
    assert_eq!(app.final_unwatched(&user.key, &kept).await["upstream"], "fal");
    document["spill"] = json!("yes");
    let refused = app.put_model("flux-pro", &document).await;
    assert_eq!(refused.status(), 400);
    let answer: Value = refused.json().await.unwrap();
    assert_eq!(answer["error"]["param"], "spill", "{answer}");
}

/// The 400 `param` of `body` posted to `path`.
async fn refused_param(app: &TestApp, key: &str, path: &str, body: Value) -> String {
    let response = app.post(path, key, &body).await;
    assert_eq!(response.status(), 400, "{body}");
    let answer: Value = response.json().await.unwrap();
    answer["error"]["param"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn bad_preferences_are_refused_naming_provider() {
    let sim = replicate_sim();
    let app = spawn_app_with(with_replicate(&sim, fast_config())).await;
    let user = app.create_user(100, json!({})).await;
    for (model, provider, param) in [
        ("flux-pro", json!({"only": []}), "provider"),
        ("flux-pro", json!({"only": ["nobody"]}), "provider.only[0]"),
        ("flux-pro", json!({"order": ["fal", "nobody"]}), "provider.order[1]"),
        ("flux-pro", json!({"ignore": ["fal", "replicate"]}), "provider"),
        ("nano-banana", json!({"only": ["replicate"]}), "provider"),
        ("flux-pro", json!({"sort": "price"}), "provider.sort"),
        ("flux-pro", json!({"surprise": true}), "provider"),
        ("flux-pro", json!(["fal"]), "provider"),
    ] {
        let body = json!({"model": model, "prompt": "a cat", "provider": provider});
        for path in ["/api/v1/images/generations", "/api/v1/images/generations/quote", "/openai/v1/images/generations"]
        {
            assert_eq!(refused_param(&app, &user.key, path, body.clone()).await, param, "{path} {body}");
        }
    }
    let video = json!({"prompt": "waves", "provider": {"only": []}});
    assert_eq!(refused_param(&app, &user.key, "/api/v1/video/generations", video.clone()).await, "provider");
    assert_eq!(refused_param(&app, &user.key, "/openai/v1/videos", video).await, "provider");
    assert_eq!(app.user(&user.id).await["credits_available"], 100, "nothing held");
}

#[tokio::test]
async fn quotes_and_the_openai_edge_take_the_same_preference() {
    let sim = replicate_sim();
    let app = spawn_app_with(with_replicate(&sim, fast_config())).await;
    let user = app.create_user(100, json!({})).await;
    let body = json!({"model": "flux-pro", "prompt": "a cat", "provider": {"only": ["replicate"]}});
    let quote = app.post("/api/v1/images/generations/quote", &user.key, &body).await;
    assert_eq!(quote.status(), 200);
    let images = app.post("/openai/v1/images/generations", &user.key, &body).await;
    assert_eq!(images.status(), 200, "{:?}", images.text().await);
    assert_eq!(sim.create_calls().len(), 1, "the OpenAI edge's job ran at Replicate");
}
