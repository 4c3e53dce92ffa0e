//! Replicate's webhooks end to end: the adapter asks for one on creation, the simulator delivers
//! the ended prediction signed by the Standard Webhooks scheme, and the adapter verifies it and
//! refuses a forged, stale or unsigned copy.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use genjobs_domain::catalog::{Catalog, Model, ModelDocument};
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::ports::{Delivery, NotificationRejected, ResultFailure, UpstreamProvider};
use genjobs_test_wait::wait_until;
use genjobs_upstream_replicate::{ReplicateConfig, ReplicateUpstream, WebhookConfig};
use genjobs_upstream_replicate_sim::{DEFAULT_WEBHOOK_SECRET, RunningSim, SimConfig};
use serde_json::json;
use time::OffsetDateTime;

/// A receiver that keeps every delivery posted to it; its base URL.
fn receiver() -> (String, Arc<Mutex<Vec<Delivery>>>) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&kept);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = HttpServer::new(move || {
        let keep = Arc::clone(&keep);
        App::new().default_service(web::to(move |req: HttpRequest, body: web::Bytes| {
            let headers = req
                .headers()
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or_default().to_owned()))
                .collect();
            keep.lock().unwrap().push(Delivery { provider: "replicate".into(), headers, body: body.to_vec() });
            async { HttpResponse::NoContent().finish() }
        }))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    (base, kept)
}

fn ultra() -> Model {
    let catalog = Catalog::builtin().unwrap();
    let mut document = serde_json::to_value(catalog.model("flux-pro").unwrap().document()).unwrap();
    let route = json!({"provider": "replicate", "model": "black-forest-labs/flux-1.1-pro-ultra",
        "params": {"prompt": "prompt", "aspect_ratio": "aspect_ratio"}, "fixed": {"output_format": "png"}});
    document["routes"] = json!([route]);
    Model::from_document("flux-pro", ModelDocument::from_value(document).unwrap()).unwrap()
}

fn input(prompt: &str) -> GenerationInput {
    GenerationInput {
        prompt: prompt.into(),
        negative_prompt: None,
        aspect_ratio: "1:1".into(),
        resolution: None,
        duration_sec: None,
        n: None,
        seed: None,
        image_inputs: vec![],
        extra: None,
    }
}

fn adapter(sim: &RunningSim, public_url: &str, secret: &str) -> ReplicateUpstream {
    let webhook = Some(WebhookConfig::new(public_url, secret));
    ReplicateUpstream::new(ReplicateConfig { webhook, ..ReplicateConfig::new(sim.api_url(), "sim-token") }).unwrap()
}

fn sim() -> RunningSim {
    genjobs_upstream_replicate_sim::spawn(SimConfig {
        starting: Duration::from_millis(20),
        processing: Duration::from_millis(100),
        ..SimConfig::default()
    })
    .unwrap()
}

async fn delivered(kept: &Arc<Mutex<Vec<Delivery>>>) -> Delivery {
    wait_until(
        Duration::from_secs(10),
        "a webhook delivery",
        async || kept.lock().unwrap().first().cloned(),
        Option::is_some,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn an_ended_prediction_is_delivered_signed_and_verified() {
    let sim = sim();
    let (public_url, kept) = receiver();
    let replicate = adapter(&sim, &public_url, DEFAULT_WEBHOOK_SECRET);
    let upstream = replicate.submit(JobId::new_at(OffsetDateTime::now_utc()), &ultra(), &input("a fox")).await.unwrap();
    let body = &sim.create_calls()[0].body;
    assert_eq!(body["webhook"], format!("{public_url}/api/upstream/replicate/webhook"));
    assert_eq!(body["webhook_events_filter"], json!(["completed"]));

    let delivery = delivered(&kept).await;
    assert!(delivery.header("webhook-id").is_some_and(|id| id.starts_with("msg_")));
    let report = replicate.read_notification(&delivery, OffsetDateTime::now_utc()).await.unwrap();
    assert_eq!(report.key, upstream.key(), "the delivery names the prediction the job keeps");
    let outputs = report.outcome.unwrap().outputs;
    assert!(outputs[0].url.ends_with("/output.png"), "{}", outputs[0].url);

    let stale = OffsetDateTime::now_utc() + Duration::from_secs(301);
    assert!(matches!(
        replicate.read_notification(&delivery, stale).await,
        Err(NotificationRejected::InvalidSignature(_))
    ));
    let mut forged = delivery.clone();
    forged.body = String::from_utf8(forged.body).unwrap().replace("succeeded", "failed").into_bytes();
    assert!(matches!(
        replicate.read_notification(&forged, OffsetDateTime::now_utc()).await,
        Err(NotificationRejected::InvalidSignature(_))
    ));
    let other_secret = adapter(&sim, &public_url, "whsec_b3RoZXItc2VjcmV0LW9mLTMyLWJ5dGVzLWxvbmchIQ==");
    assert!(matches!(
        other_secret.read_notification(&delivery, OffsetDateTime::now_utc()).await,
        Err(NotificationRejected::InvalidSignature(_))
    ));
    let unsigned = Delivery { provider: "replicate".into(), headers: vec![], body: delivery.body.clone() };
    assert!(matches!(
        replicate.read_notification(&unsigned, OffsetDateTime::now_utc()).await,
        Err(NotificationRejected::InvalidSignature(_))
    ));
}

#[tokio::test]
async fn a_canceled_prediction_is_delivered_as_failed_and_without_webhooks_nothing_is_read() {
    let sim = genjobs_upstream_replicate_sim::spawn(SimConfig {
        processing: Duration::from_secs(30),
        ..SimConfig::default()
    })
    .unwrap();
    let (public_url, kept) = receiver();
    let replicate = adapter(&sim, &public_url, DEFAULT_WEBHOOK_SECRET);
    let job = JobId::new_at(OffsetDateTime::now_utc());
    let upstream = replicate.submit(job, &ultra(), &input("a fox")).await.unwrap();
    replicate.cancel(job, &upstream).await.unwrap();
    let report = replicate.read_notification(&delivered(&kept).await, OffsetDateTime::now_utc()).await.unwrap();
    // Billed when the cancel came after the prediction started, which this test does not time.
    let failure = match report.outcome {
        Err(ResultFailure::Billed { failure, .. }) => Err(*failure),
        outcome => outcome,
    };
    assert!(matches!(failure, Err(ResultFailure::Failed(reason)) if reason.contains("canceled")));

    let body = r#"{"id": "p1", "status": "succeeded", "output": "https://r/o.png"}"#;
    let headers = sim.sign("msg_1", body);
    let delivery = Delivery { provider: "replicate".into(), headers, body: body.as_bytes().to_vec() };
    assert_eq!(replicate.read_notification(&delivery, OffsetDateTime::now_utc()).await.unwrap().key, "p1");
    let polling_only = ReplicateUpstream::new(ReplicateConfig::new(sim.api_url(), "sim-token")).unwrap();
    assert_eq!(
        polling_only.read_notification(&delivery, OffsetDateTime::now_utc()).await,
        Err(NotificationRejected::NotEnabled)
    );
}
