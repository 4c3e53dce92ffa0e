//! Models that route over two providers: flux-pro's second route runs at Replicate (its
//! simulator here, as strict as the real API), reached only after fal provably refused the job.
//! fal is made to refuse by pointing it at a port where nothing listens.

use std::time::Duration;

use genjobs::Config;
use genjobs_tests::{ADMIN_TOKEN, Answer, TestApp, WebhookReceiver, fast_config, webhook_config};
use genjobs_upstream_replicate::ReplicateArgs;
use genjobs_upstream_replicate_sim::{RunningSim, SimConfig, spawn};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::spawn_app_with;

/// A loopback URL where nothing listens: connections are refused.
fn refusing_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

pub(crate) fn replicate_sim() -> RunningSim {
    spawn(SimConfig {
        starting: Duration::from_millis(50),
        processing: Duration::from_millis(300),
        ..SimConfig::default()
    })
    .unwrap()
}

/// genjobs with fal refusing every submission and Replicate at `sim`; with `public`, its webhooks
/// on and signed with the simulator's default secret.
async fn app(sim: &RunningSim, public: bool) -> TestApp {
    // With webhooks on, a job nobody watches is polled once a minute: it ends within the tests'
    // waits only through Replicate's webhook.
    let base = if public { webhook_config(Duration::from_secs(60)) } else { fast_config() };
    spawn_app_with(replicate_only(sim, public, base)).await
}

/// `base` with fal refusing every submission and Replicate at `sim`; with `public`, its webhooks
/// signed with the simulator's default secret.
pub(crate) fn replicate_only(sim: &RunningSim, public: bool, base: Config) -> Config {
    let replicate = ReplicateArgs {
        replicate_url: sim.api_url(),
        replicate_token: Some(SimConfig::default().token),
        replicate_webhook_secret: public.then(|| genjobs_upstream_replicate_sim::DEFAULT_WEBHOOK_SECRET.to_owned()),
        ..ReplicateArgs::default()
    };
    Config { upstream_url: Some(refusing_url()), replicate, ..base }
}

async fn flux(app: &TestApp, key: &str, prompt: &str) -> String {
    let receipt = app.submit("images", key, json!({"model": "flux-pro", "prompt": prompt})).await;
    receipt["job_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_job_fal_refuses_runs_at_replicate_and_is_charged_once() {
    let sim = replicate_sim();
    let app = app(&sim, false).await;
    let user = app.create_user(100, json!({})).await;
    let id = flux(&app, &user.key, "a lighthouse at dusk").await;
    let job = app.final_unwatched(&user.key, &id).await;
    assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("replicate")), "{job}");
    assert_eq!(job["credits_actual"], 6);
    assert_eq!(job["outputs"].as_array().unwrap().len(), 1);
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_spent"].as_u64(), account["credits_held"].as_u64()), (Some(6), Some(0)));
    let calls = sim.create_calls();
    assert_eq!(calls.len(), 1, "one prediction for one job");
    assert_eq!(calls[0].model, "black-forest-labs/flux-1.1-pro-ultra");
    assert_eq!(calls[0].prefer, None, "created asynchronously");
    let keys: Vec<&str> = calls[0].body["input"].as_object().unwrap().keys().map(String::as_str).collect();
    assert!(keys.iter().all(|k| ["prompt", "aspect_ratio", "output_format", "seed"].contains(k)), "{keys:?}");
}

/// Submits `prompt` to flux-pro (at Replicate) and asserts the job failed `UPSTREAM_FAILED` with
/// its credits released; returns the simulator, to count what it was sent.
async fn fails_and_refunds(prompt: &str) -> RunningSim {
    let sim = replicate_sim();
    let app = app(&sim, false).await;
    let user = app.create_user(100, json!({})).await;
    let id = flux(&app, &user.key, prompt).await;
    let job = app.final_unwatched(&user.key, &id).await;
    assert_eq!(
        (job["state"].as_str(), job["error"]["code"].as_str()),
        (Some("failed"), Some("UPSTREAM_FAILED")),
        "{job}"
    );
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_spent"].as_u64()), (Some(100), Some(0)));
    sim
}

/// genjobs with fal standing in as a server that answers every request with `status`, and
/// Replicate at `sim`; returns the stand-in too, to count what fal was sent.
async fn app_with_fal_answering(sim: &RunningSim, status: u16) -> (TestApp, WebhookReceiver) {
    let fal = WebhookReceiver::start(vec![Answer::Status(status); 8]).await;
    let replicate = ReplicateArgs {
        replicate_url: sim.api_url(),
        replicate_token: Some(SimConfig::default().token),
        replicate_webhook_secret: None,
        ..ReplicateArgs::default()
    };
    let url = fal.url.trim_end_matches("/hook").to_owned();
    (spawn_app_with(Config { upstream_url: Some(url), replicate, ..fast_config() }).await, fal)
}

#[tokio::test]
async fn a_429_502_or_503_from_fal_sends_the_job_to_replicate_after_one_retry() {
    for status in [429, 502, 503] {
        let sim = replicate_sim();
        let (app, fal) = app_with_fal_answering(&sim, status).await;
        let user = app.create_user(100, json!({})).await;
        let id = flux(&app, &user.key, "a lighthouse").await;
        let job = app.final_unwatched(&user.key, &id).await;
        assert_eq!(
            (job["state"].as_str(), job["upstream"].as_str()),
            (Some("succeeded"), Some("replicate")),
            "{status}: {job}"
        );
        assert_eq!(fal.received().len(), 2, "{status}: tried once more at fal first");
        assert_eq!(sim.create_calls().len(), 1, "{status}");
        let account = app.user(&user.id).await;
        assert_eq!((account["credits_spent"].as_u64(), account["credits_held"].as_u64()), (Some(6), Some(0)));
    }
}

#[tokio::test]
async fn a_500_from_fal_is_ambiguous_and_the_job_never_goes_to_replicate() {
    let sim = replicate_sim();
    let (app, fal) = app_with_fal_answering(&sim, 500).await;
    let user = app.create_user(100, json!({})).await;
    let id = flux(&app, &user.key, "a lighthouse").await;
    let job = app.final_unwatched(&user.key, &id).await;
    assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("failed"), None), "{job}");
    assert_eq!(fal.received().len(), 1, "a request fal may have taken is never sent again");
    assert!(sim.create_calls().is_empty(), "never sent to a second provider");
    let account = app.user(&user.id).await;
    assert_eq!((account["credits_available"].as_u64(), account["credits_held"].as_u64()), (Some(100), Some(0)));
}

#[tokio::test]
async fn a_failed_prediction_fails_the_job_and_releases_its_credits() {
    fails_and_refunds("a fox [sim:fail]").await;
}

#[tokio::test]
async fn an_ambiguous_answer_fails_the_job_and_nothing_is_sent_elsewhere() {
    let sim = fails_and_refunds("a fox [sim:500]").await;
    assert_eq!(sim.create_calls().len(), 1, "sent once, never again");
}

#[tokio::test]
async fn canceling_a_job_at_replicate_refunds_it() {
    let sim = replicate_sim();
    let app = app(&sim, false).await;
    let user = app.create_user(100, json!({})).await;
    let id = flux(&app, &user.key, "a slow fox [sim:run=60000]").await;
    app.job_until(&user.key, &id, Duration::from_secs(30), |job| job["upstream"] == "replicate").await;
    let canceled = app.post(&format!("/api/v1/jobs/{id}/cancel"), &user.key, &json!({})).await;
    assert_eq!(canceled.status(), StatusCode::OK);
    let job = app.job(&user.key, &id, 0).await;
    assert_eq!(job["state"], "canceled", "{job}");
    assert_eq!(app.user(&user.id).await["credits_available"], 100);
}

#[tokio::test]
async fn replicate_webhooks_are_verified_and_refused_when_forged_or_unknown() {
    let sim = replicate_sim();
    let app = app(&sim, true).await;
    let url = app.url("/api/upstream/replicate/webhook");
    let client = reqwest::Client::new();
    let body =
        json!({"id": "no-such-prediction", "status": "succeeded", "output": ["https://replicate.delivery/x.png"]})
            .to_string();
    let forged = client
        .post(&url)
        .header("webhook-id", "msg_1")
        .header("webhook-timestamp", time::OffsetDateTime::now_utc().unix_timestamp().to_string())
        .header("webhook-signature", "v1,Zm9yZ2VkIHNpZ25hdHVyZSBvZiB0aGUgcmlnaHQgc2l6ZSE=")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    let refusal: Value = forged.json().await.unwrap();
    assert_eq!(refusal["error"]["code"], "INVALID_SIGNATURE", "{refusal}");
    let headers = sim.sign("msg_2", &body);
    for attempt in ["first", "again"] {
        let mut signed = client.post(&url).body(body.clone());
        for (name, value) in &headers {
            signed = signed.header(name, value);
        }
        // Not a replay the second time: a delivery of a job not recorded yet is read again.
        let status = signed.send().await.unwrap().status();
        assert_eq!(status, StatusCode::NOT_FOUND, "{attempt}: a well-signed delivery of no job");
    }

    let user = app.create_user(100, json!({})).await;
    let id = flux(&app, &user.key, "a lighthouse").await;
    let job = app.final_unwatched(&user.key, &id).await;
    assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("replicate")), "{job}");
}

#[tokio::test]
async fn operators_read_usage_by_the_provider_that_took_each_job() {
    let sim = replicate_sim();
    let app = app(&sim, false).await;
    // Polled until final without waiting on it: more reads than the default rate limit allows.
    let user = app.create_user(100, json!({"rate_limit_per_minute": 1000, "max_concurrent_jobs": 2})).await;
    // nano-banana's one route is fal's, which refuses: the job waits in the queue until canceled.
    let queued = app.submit("images", &user.key, json!({"model": "nano-banana", "prompt": "a"})).await;
    let at_replicate = flux(&app, &user.key, "a lighthouse at dusk").await;
    app.final_unwatched(&user.key, &at_replicate).await;
    let canceled =
        app.post(&format!("/api/v1/jobs/{}/cancel", queued["job_id"].as_str().unwrap()), &user.key, &json!({})).await;
    assert_eq!(canceled.status(), StatusCode::OK);
    let day = time::OffsetDateTime::now_utc().date();
    let path = format!("/api/admin/usage?from={day}&to={day}&group_by=provider");
    let report: Value = app.get(&path, ADMIN_TOKEN).await.json().await.unwrap();
    assert_eq!(
        report["data"],
        json!([
            {"provider": null, "jobs": 1, "succeeded": 0, "failed": 0, "canceled": 1, "credits_spent": 0,
                "content_refused": 0, "provider_cost_usd": "0", "revenue_usd": "0", "margin_usd": "0"},
            {"provider": "replicate", "jobs": 1, "succeeded": 1, "failed": 0, "canceled": 0, "credits_spent": 6,
                "content_refused": 0, "provider_cost_usd": "0.06", "revenue_usd": "0.06", "margin_usd": "0"},
        ]),
        "no provider took the canceled job"
    );
    let csv =
        app.client.get(app.url(&path)).bearer_auth(ADMIN_TOKEN).header("accept", "text/csv").send().await.unwrap();
    assert_eq!(
        csv.text().await.unwrap(),
        "provider,jobs,succeeded,failed,canceled,credits_spent,content_refused,provider_cost_usd,revenue_usd,margin_usd\n,1,0,0,1,0,0,0,0,0\nreplicate,1,1,0,0,6,0,0.06,0.06,0\n"
    );
}

#[tokio::test]
async fn readyz_verbose_shows_a_provider_that_keeps_refusing_as_cooling_down() {
    let sim = replicate_sim();
    let app = app(&sim, false).await;
    let user = app.create_user(100, json!({"rate_limit_per_minute": 1000, "max_concurrent_jobs": 3})).await;
    // fal refuses each job twice (one retry): by the third job, five refusals in a row or more
    // (the driver may send the three at once).
    let ids =
        [flux(&app, &user.key, "one").await, flux(&app, &user.key, "two").await, flux(&app, &user.key, "three").await];
    for id in &ids {
        app.final_unwatched(&user.key, id).await;
    }
    let plain: Value = app.client.get(app.url("/readyz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(plain, json!({"status": "ready"}), "the plain answer stays as the spec writes it");
    let verbose: Value = app.client.get(app.url("/readyz?verbose")).send().await.unwrap().json().await.unwrap();
    let providers = verbose["providers"].as_array().unwrap();
    assert_eq!((verbose["status"].as_str(), providers.len()), (Some("ready"), 2), "{verbose}");
    assert_eq!((&providers[0]["provider"], &providers[0]["breaker"]), (&json!("fal"), &json!("open")), "{verbose}");
    assert!(providers[0]["refusals_in_a_row"].as_u64().unwrap() >= 5, "{verbose}");
    assert!((1..=30).contains(&providers[0]["probe_in_secs"].as_u64().unwrap()), "{verbose}");
    assert_eq!(providers[1], json!({"provider": "replicate", "breaker": "closed", "refusals_in_a_row": 0}));
}

/// A job that fal's refusal moved to Replicate, finding Replicate's one slot taken, waits for
/// Replicate: when the slot frees it goes there, never back to fal (which would now take it, and
/// answer what genjobs cannot read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_a_refusal_moved_to_the_next_route_waits_for_that_provider() {
    let sim = replicate_sim();
    // Two refusals per job (one retry) for the two jobs; after them, fal takes requests.
    let fal = WebhookReceiver::start(vec![Answer::Status(503); 4]).await;
    let replicate = ReplicateArgs {
        replicate_url: sim.api_url(),
        replicate_token: Some(SimConfig::default().token),
        replicate_max_in_flight: 1,
        ..ReplicateArgs::default()
    };
    let url = fal.url.trim_end_matches("/hook").to_owned();
    let app = spawn_app_with(Config { upstream_url: Some(url), replicate, ..fast_config() }).await;
    let user = app.create_user(100, json!({"max_concurrent_jobs": 10})).await;
    let holding = flux(&app, &user.key, "holds the slot [sim:run=60000]").await;
    app.job_until(&user.key, &holding, Duration::from_secs(10), |job| job["upstream"] == "replicate").await;
    let moved = flux(&app, &user.key, "moved by a refusal").await;
    let waiting =
        app.job_until(&user.key, &moved, Duration::from_secs(10), |job| job["meta"]["waiting_for"] == "capacity").await;
    assert!(waiting["upstream"].is_null(), "{waiting}");
    assert_eq!(fal.received().len(), 4, "each job was refused twice at fal");
    let canceled = app.post(&format!("/api/v1/jobs/{holding}/cancel"), &user.key, &json!({})).await;
    assert_eq!(canceled.status(), StatusCode::OK);
    let job = app.final_unwatched(&user.key, &moved).await;
    assert_eq!((job["state"].as_str(), job["upstream"].as_str()), (Some("succeeded"), Some("replicate")), "{job}");
    assert_eq!(fal.received().len(), 4, "the waiting job never went back to fal");
    assert_eq!(sim.create_calls().len(), 2, "one prediction per job");
}

/// A prediction still `starting` at Replicate at its job's start deadline is canceled there
/// (`POST …/cancel`) and the job fails `DEADLINE_EXCEEDED`, its credits released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prediction_still_starting_at_its_start_deadline_is_canceled() {
    let sim = spawn(SimConfig {
        starting: Duration::from_secs(30),
        processing: Duration::from_millis(300),
        ..SimConfig::default()
    })
    .unwrap();
    let app = app(&sim, false).await;
    let user = app.create_user(100, json!({})).await;
    let body = json!({"model": "flux-pro", "prompt": "a long wait to start", "start_within_secs": 2});
    let id = app.submit("images", &user.key, body).await["job_id"].as_str().unwrap().to_owned();
    let job = app.wait_final(&user.key, &id).await;
    assert_eq!(
        (job["state"].as_str(), job["error"]["code"].as_str()),
        (Some("failed"), Some("DEADLINE_EXCEEDED")),
        "{job}"
    );
    assert_eq!(job["upstream"], "replicate", "{job}");
    let admin: Value = app.get(&format!("/api/admin/jobs/{id}"), ADMIN_TOKEN).await.json().await.unwrap();
    let prediction = admin["upstream_request_id"].as_str().unwrap();
    let at_sim: Value = reqwest::Client::new()
        .get(format!("{}/predictions/{prediction}", sim.api_url()))
        .bearer_auth(SimConfig::default().token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(at_sim["status"], "canceled", "{at_sim}");
    assert_eq!(app.user(&user.id).await["credits_available"], 100);
}
