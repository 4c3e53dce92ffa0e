//! fal's webhooks as the adapter sees them: the `fal_webhook` a submission carries, and the
//! verification of deliveries signed by the simulator's key (which publishes a JWKS as fal does).

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use genjobs_domain::catalog::Catalog;
use genjobs_domain::ids::JobId;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{Delivery, NotificationRejected, ResultFailure, UpstreamProvider};
use genjobs_domain::request::{GenerationDraft, GenerationRequest};
use genjobs_upstream_fal::{FalConfig, FalUpstream, WEBHOOK_PATH, WebhookConfig};
use genjobs_upstream_sim::{RunningSim, SimConfig};
use serde_json::{Value, json};
use time::OffsetDateTime;

fn adapter(base: &str, jwks_url: String, min_refetch: Duration) -> FalUpstream {
    let webhooks = WebhookConfig { min_refetch, ..WebhookConfig::new("https://gen.example/", jwks_url) };
    FalUpstream::new(FalConfig { webhooks: Some(webhooks), ..FalConfig::new(base, None) }).unwrap()
}

fn sim() -> RunningSim {
    genjobs_upstream_sim::spawn(SimConfig::default()).unwrap()
}

/// A delivery of `body` for `request_id`, signed now by the simulator's current key.
async fn signed(sim: &RunningSim, request_id: &str, body: &Value) -> Delivery {
    let bytes = body.to_string().into_bytes();
    let url = format!("{}/_sim/sign?request_id={request_id}", sim.base_url);
    let headers: Value =
        reqwest::Client::new().post(url).body(bytes.clone()).send().await.unwrap().json().await.unwrap();
    let headers =
        headers.as_object().unwrap().iter().map(|(n, v)| (n.clone(), v.as_str().unwrap().to_owned())).collect();
    Delivery { provider: "fal".into(), headers, body: bytes }
}

fn ok_body(request_id: &str) -> Value {
    json!({
        "request_id": request_id, "gateway_request_id": request_id, "status": "OK",
        "payload": {"images": [{"url": "https://cdn.example/a.png", "width": 8, "height": 8}], "seed": 3},
        "error": null, "payload_error": null,
    })
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

#[tokio::test]
async fn a_submission_names_the_webhook_under_the_public_url() {
    let queries = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&queries);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let returned = json!({"request_id": "r1", "status_url": "http://x/s", "response_url": "http://x/r", "cancel_url": "http://x/c"});
    let server = HttpServer::new(move || {
        let (seen, returned) = (Arc::clone(&seen), returned.clone());
        App::new().default_service(web::to(move |req: HttpRequest| {
            seen.lock().unwrap().push(req.query_string().to_owned());
            let returned = returned.clone();
            async move { HttpResponse::Ok().json(returned) }
        }))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    let catalog = Catalog::builtin().unwrap();
    let draft = GenerationDraft { prompt: Some("a fox".into()), ..GenerationDraft::default() };
    let request = GenerationRequest::validate(Modality::Image, draft, &catalog).unwrap();
    let model = catalog.model(request.model.as_str()).unwrap();
    let upstream = adapter(&base, "http://127.0.0.1:9/jwks".into(), Duration::ZERO);
    let reference = upstream.submit(JobId::new_at(now()), model, &request.input).await.unwrap();
    assert_eq!(reference.key(), "r1", "the job is found by fal's request id");
    let expected = format!("fal_webhook={}", "https%3A%2F%2Fgen.example/api/upstream/fal/webhook".replace('/', "%2F"));
    assert_eq!(queries.lock().unwrap().as_slice(), [expected]);
    assert_eq!(WEBHOOK_PATH, "/api/upstream/fal/webhook");
}

#[tokio::test]
async fn a_well_signed_delivery_is_read() {
    let sim = sim();
    let upstream = adapter(&sim.base_url, sim.jwks_url(), Duration::ZERO);
    let report = upstream.read_notification(&signed(&sim, "r1", &ok_body("r1")).await, now()).await.unwrap();
    assert_eq!(report.key, "r1");
    let outputs = report.outcome.unwrap().outputs;
    assert_eq!((outputs.len(), outputs[0].meta.width, outputs[0].meta.seed), (1, Some(8), Some(3)));
}

#[tokio::test]
async fn a_delivery_for_another_fal_account_is_refused_when_the_account_is_configured() {
    let sim = sim();
    let body = ok_body("r1");
    let delivery = signed(&sim, "r1", &body).await;
    let for_account = |user_id: &str| {
        let webhooks = WebhookConfig {
            user_id: Some(user_id.into()),
            ..WebhookConfig::new("https://gen.example/", sim.jwks_url())
        };
        FalUpstream::new(FalConfig { webhooks: Some(webhooks), ..FalConfig::new(&sim.base_url, None) }).unwrap()
    };
    let refused = for_account("the-operator").read_notification(&delivery, now()).await;
    assert!(matches!(refused, Err(NotificationRejected::InvalidSignature(_))), "{refused:?}");
    assert!(for_account("sim-user").read_notification(&delivery, now()).await.is_ok());
}

#[tokio::test]
async fn tampered_stale_or_unsigned_deliveries_are_refused() {
    let sim = sim();
    let upstream = adapter(&sim.base_url, sim.jwks_url(), Duration::ZERO);
    let good = signed(&sim, "r1", &ok_body("r1")).await;
    let refused =
        |result: Result<_, NotificationRejected>| matches!(result, Err(NotificationRejected::InvalidSignature(_)));

    let mut tampered = good.clone();
    tampered.body = ok_body("r2").to_string().into_bytes();
    assert!(refused(upstream.read_notification(&tampered, now()).await), "another body");

    let mut renamed = good.clone();
    renamed.headers.iter_mut().filter(|(n, _)| n == "x-fal-webhook-request-id").for_each(|(_, v)| *v = "r2".into());
    assert!(refused(upstream.read_notification(&renamed, now()).await), "another request id");

    let later = now() + Duration::from_secs(301);
    assert!(refused(upstream.read_notification(&good, later).await), "over 300 s old");
    // 302: the signature's whole second may lie one second behind now's by the time this runs.
    let earlier = now() - Duration::from_secs(302);
    assert!(refused(upstream.read_notification(&good, earlier).await), "over 300 s ahead");
    assert!(upstream.read_notification(&good, now() + Duration::from_secs(290)).await.is_ok(), "within 300 s");

    for missing in ["x-fal-webhook-signature", "x-fal-webhook-timestamp", "x-fal-webhook-user-id"] {
        let mut stripped = good.clone();
        stripped.headers.retain(|(n, _)| n != missing);
        assert!(refused(upstream.read_notification(&stripped, now()).await), "without {missing}");
    }
}

#[tokio::test]
async fn a_rotated_key_is_fetched_again_but_not_more_than_the_refetch_interval_allows() {
    let sim = sim();
    let eager = adapter(&sim.base_url, sim.jwks_url(), Duration::ZERO);
    let patient = adapter(&sim.base_url, sim.jwks_url(), Duration::from_secs(3600));
    let before = signed(&sim, "r1", &ok_body("r1")).await;
    assert!(eager.read_notification(&before, now()).await.is_ok());
    assert!(patient.read_notification(&before, now()).await.is_ok());

    let rotated = reqwest::Client::new().post(format!("{}/_sim/rotate-key", sim.base_url)).send().await.unwrap();
    assert_eq!(rotated.status(), 204);
    let after = signed(&sim, "r1", &ok_body("r1")).await;
    assert!(eager.read_notification(&after, now()).await.is_ok(), "an unknown key makes it fetch the keys again");
    assert!(
        matches!(patient.read_notification(&after, now()).await, Err(NotificationRejected::InvalidSignature(_))),
        "but not more often than min_refetch, so that forged deliveries cannot make it hammer the JWKS"
    );
}

#[tokio::test]
async fn without_the_keys_a_delivery_cannot_be_verified_yet() {
    let sim = sim();
    let upstream = adapter(&sim.base_url, format!("{}/nowhere.json", sim.base_url), Duration::ZERO);
    let delivery = signed(&sim, "r1", &ok_body("r1")).await;
    assert!(matches!(upstream.read_notification(&delivery, now()).await, Err(NotificationRejected::Unavailable(_))));
}

#[tokio::test]
async fn error_deliveries_say_why_and_whether_the_input_was_refused() {
    let sim = sim();
    let upstream = adapter(&sim.base_url, sim.jwks_url(), Duration::ZERO);
    let error = |payload: Value, error: &str| json!({"request_id": "r1", "gateway_request_id": "r1", "status": "ERROR", "payload": payload, "error": error, "payload_error": null});
    let read = |body: Value| {
        let sim = &sim;
        let upstream = &upstream;
        async move { upstream.read_notification(&signed(sim, "r1", &body).await, now()).await.unwrap().outcome }
    };
    let refused = error(
        json!({"detail": [{"loc": ["body", "prompt"], "msg": "not allowed", "type": "value_error"}]}),
        "Invalid status code: 422",
    );
    assert_eq!(read(refused).await, Err(ResultFailure::Rejected("prompt: not allowed".into())));
    let crashed = error(json!({"detail": "the model crashed"}), "Invalid status code: 500");
    assert_eq!(read(crashed).await, Err(ResultFailure::Failed("the model crashed".into())));
    let bare = error(Value::Null, "Request timed out");
    assert_eq!(read(bare).await, Err(ResultFailure::Failed("Request timed out".into())));
    let unsent = json!({"request_id": "r1", "status": "OK", "payload": null, "payload_error": "too large"});
    assert!(matches!(read(unsent).await, Err(ResultFailure::Transient(_))), "the driver fetches the result itself");
    let unknown = json!({"request_id": "r1", "status": "MAYBE"});
    let delivery = signed(&sim, "r1", &unknown).await;
    assert!(matches!(upstream.read_notification(&delivery, now()).await, Err(NotificationRejected::Malformed(_))));
}
