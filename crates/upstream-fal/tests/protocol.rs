//! The fal adapter against a stub server (protocol details: headers, paths, bodies, the
//! returned-URL rule, failure classification) and against the simulator (whole runs).

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use genjobs_domain::catalog::{Catalog, Model};
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{PollFailure, ResultFailure, SubmitFailure, UpstreamProvider, UpstreamStatus};
use genjobs_domain::request::{GenerationDraft, GenerationRequest, WholeNumber};
use genjobs_test_wait::wait_until;
use genjobs_upstream_fal::{FalConfig, FalRef, FalUpstream, ReadRetry};
use genjobs_upstream_sim::SimConfig;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    authorization: Option<String>,
    request_timeout: Option<String>,
    body: Option<Value>,
}

/// When the stub answers a request.
#[derive(Debug, Clone, Copy)]
enum Pace {
    AtOnce,
    After(Duration),
    Never,
}

#[derive(Default)]
struct Stub {
    seen: Mutex<Vec<Seen>>,
    answers: Mutex<HashMap<String, (u16, Value, Pace)>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

async fn answer(stub: web::Data<Stub>, req: HttpRequest, body: web::Bytes) -> HttpResponse {
    let now = stub.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    stub.max_in_flight.fetch_max(now, Ordering::SeqCst);
    stub.seen.lock().unwrap().push(Seen {
        method: req.method().to_string(),
        path: req.path().to_owned(),
        query: req.query_string().to_owned(),
        authorization: req.headers().get("authorization").map(|v| v.to_str().unwrap().to_owned()),
        request_timeout: req.headers().get("x-fal-request-timeout").map(|v| v.to_str().unwrap().to_owned()),
        body: serde_json::from_slice(&body).ok(),
    });
    let key = format!("{} {}", req.method(), req.path());
    let (status, body, pace) = stub.answers.lock().unwrap().get(&key).cloned().unwrap_or((
        404,
        json!({"detail": "no such stub"}),
        Pace::AtOnce,
    ));
    match pace {
        Pace::AtOnce => {}
        // A slow provider, for a test that proves calls overlap no more than allowed.
        Pace::After(delay) => tokio::time::sleep(delay).await,
        Pace::Never => std::future::pending().await,
    }
    stub.in_flight.fetch_sub(1, Ordering::SeqCst);
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap()).json(body)
}

struct StubServer {
    base: String,
    stub: Arc<Stub>,
}

impl StubServer {
    fn start() -> Self {
        let stub = Arc::new(Stub::default());
        let data = web::Data::from(Arc::clone(&stub));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = HttpServer::new(move || App::new().app_data(data.clone()).default_service(web::to(answer)))
            .workers(1)
            .disable_signals()
            .listen(listener)
            .unwrap()
            .run();
        tokio::spawn(server);
        Self { base, stub }
    }

    fn on(&self, method_and_path: &str, status: u16, body: Value) {
        self.on_paced(method_and_path, status, body, Pace::AtOnce);
    }

    fn on_paced(&self, method_and_path: &str, status: u16, body: Value, pace: Pace) {
        self.stub.answers.lock().unwrap().insert(method_and_path.to_owned(), (status, body, pace));
    }

    fn seen(&self) -> Vec<Seen> {
        self.stub.seen.lock().unwrap().clone()
    }

    /// The adapter on the stub, its reads retried in place for 50 ms at most rather than 5 s:
    /// these tests look at how an answer is classified once the retries are spent, not at the
    /// back-off, which the crate's own tests cover.
    fn adapter(&self) -> FalUpstream {
        let read_retry = ReadRetry {
            first_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(10),
            budget: Duration::from_millis(50),
        };
        FalUpstream::new(FalConfig { read_retry, ..FalConfig::new(self.base.clone(), Some("secret-key".into())) })
            .unwrap()
    }

    fn upstream_ref(&self) -> UpstreamRef {
        FalRef {
            endpoint: "owner/app".into(),
            request_id: "req-9".into(),
            status_url: format!("{}/owner/app/requests/req-9/status", self.base),
            response_url: format!("{}/owner/app/requests/req-9", self.base),
            cancel_url: format!("{}/owner/app/requests/req-9/cancel", self.base),
        }
        .to_upstream()
    }
}

fn job() -> JobId {
    JobId::new_at(time::OffsetDateTime::now_utc())
}

/// A flux-pro request with two images, a seed, a reference image and `extra`.
fn flux() -> (Model, GenerationInput) {
    let catalog = Catalog::builtin().unwrap();
    let draft = GenerationDraft {
        prompt: Some("a fox".into()),
        n: Some(WholeNumber::Exact(2)),
        seed: Some(WholeNumber::Exact(5)),
        image_inputs: Some(vec!["https://img/ref.png".into()]),
        extra: json!({"raw": true, "seed": 6}).as_object().cloned(),
        ..GenerationDraft::default()
    };
    let request = GenerationRequest::validate(Modality::Image, draft, &catalog).unwrap();
    (catalog.model("flux-pro").unwrap().clone(), request.input)
}

fn fal(upstream: &UpstreamRef) -> FalRef {
    FalRef::from_upstream(upstream).unwrap()
}

#[tokio::test]
async fn submit_posts_the_mapped_body_with_the_key_and_keeps_the_returned_urls() {
    let stub = StubServer::start();
    let returned = json!({
        "request_id": "req-9",
        "status_url": format!("{}/elsewhere/status", stub.base),
        "response_url": format!("{}/elsewhere/result", stub.base),
        "cancel_url": format!("{}/elsewhere/cancel", stub.base),
        "status": "IN_QUEUE", "queue_position": 3
    });
    stub.on("POST /fal-ai/flux-pro/v1.1-ultra", 200, returned);
    let (model, input) = flux();
    let upstream = stub.adapter().submit(job(), &model, &input).await.unwrap();
    assert_eq!(fal(&upstream).request_id, "req-9");
    assert_eq!(fal(&upstream).endpoint, "fal-ai/flux-pro/v1.1-ultra");
    let returned_status = format!("{}/elsewhere/status", stub.base);
    assert_eq!(fal(&upstream).status_url, returned_status, "returned URLs are used as they are");

    let seen = &stub.seen()[0];
    assert_eq!((seen.method.as_str(), seen.path.as_str()), ("POST", "/fal-ai/flux-pro/v1.1-ultra"));
    assert_eq!(seen.authorization.as_deref(), Some("Key secret-key"));
    assert_eq!(seen.request_timeout, None, "no start timeout configured, none sent");
    assert_eq!(
        seen.body.clone().unwrap(),
        json!({"prompt": "a fox", "num_images": 2, "seed": 6, "aspect_ratio": "1:1", "image_url": "https://img/ref.png", "raw": true})
    );

    stub.on("GET /elsewhere/status", 202, json!({"status": "IN_PROGRESS", "logs": [{"message": "progress: 30%", "level": "INFO", "source": "user", "timestamp": "1"}]}));
    assert_eq!(stub.adapter().status(job(), &upstream).await, Ok(UpstreamStatus::Running { percent: Some(30) }));
    let status_call = stub.seen().last().cloned().unwrap();
    assert_eq!((status_call.path.as_str(), status_call.query.as_str()), ("/elsewhere/status", "logs=1"));
}

/// fal drops a request no runner started within the start timeout, as fal-js's `startTimeout`
/// asks: the header in whole seconds, only above fal's minimum of 1.
#[tokio::test]
async fn submit_sends_the_start_timeout_as_fal_js_does() {
    let stub = StubServer::start();
    stub.on("POST /fal-ai/flux-pro/v1.1-ultra", 200, json!({"request_id": "req-1", "status_url": format!("{}/s", stub.base), "response_url": format!("{}/r", stub.base), "cancel_url": format!("{}/c", stub.base)}));
    let (model, input) = flux();
    for (timeout, header) in [(Duration::from_secs(1800), Some("1800")), (Duration::from_millis(200), None)] {
        let adapter = FalUpstream::new(FalConfig {
            start_timeout: Some(timeout),
            ..FalConfig::new(stub.base.clone(), Some("secret-key".into()))
        })
        .unwrap();
        adapter.submit(job(), &model, &input).await.unwrap();
        assert_eq!(stub.seen().last().unwrap().request_timeout.as_deref(), header, "{timeout:?}");
    }
}

#[tokio::test]
async fn submit_failures_are_classified_so_that_nothing_runs_twice() {
    let stub = StubServer::start();
    let (model, input) = flux();
    for (status, expected) in [
        (422, SubmitFailure::Rejected("prompt too spicy".into())),
        (429, SubmitFailure::NotReached("the provider is rate limiting".into())),
        (500, SubmitFailure::Ambiguous("the provider answered HTTP 500".into())),
        (504, SubmitFailure::Ambiguous("the provider answered HTTP 504".into())),
        (503, SubmitFailure::NotReached("the provider's queue answered HTTP 503 without queuing the request".into())),
        (502, SubmitFailure::NotReached("the provider's queue answered HTTP 502 without queuing the request".into())),
        (401, SubmitFailure::Ambiguous("the provider refused the gateway's credentials".into())),
    ] {
        stub.on("POST /fal-ai/flux-pro/v1.1-ultra", status, json!({"detail": [{"msg": "prompt too spicy"}]}));
        assert_eq!(stub.adapter().submit(job(), &model, &input).await, Err(expected), "HTTP {status}");
    }
    stub.on("POST /fal-ai/flux-pro/v1.1-ultra", 200, json!({"request_id": "only"}));
    assert!(matches!(stub.adapter().submit(job(), &model, &input).await, Err(SubmitFailure::Ambiguous(_))));

    stub.on_paced("POST /fal-ai/flux-pro/v1.1-ultra", 200, json!({}), Pace::Never);
    let impatient = FalUpstream::new(FalConfig {
        request_timeout: Duration::from_millis(300),
        ..FalConfig::new(stub.base.clone(), None)
    })
    .unwrap();
    assert!(
        matches!(impatient.submit(job(), &model, &input).await, Err(SubmitFailure::Ambiguous(_))),
        "a timeout may have reached fal"
    );

    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let unreachable = FalUpstream::new(FalConfig::new(nowhere, None)).unwrap();
    assert!(matches!(unreachable.submit(job(), &model, &input).await, Err(SubmitFailure::NotReached(_))));
}

#[tokio::test]
async fn status_failures_are_transient_or_gone() {
    let stub = StubServer::start();
    let upstream = stub.upstream_ref();
    for (status, body, transient) in
        [(503, json!({}), true), (429, json!({}), true), (404, json!({"detail": "Request not found"}), false)]
    {
        stub.on("GET /owner/app/requests/req-9/status", status, body);
        let result = stub.adapter().status(job(), &upstream).await;
        match result {
            Err(PollFailure::Transient(_)) => assert!(transient, "HTTP {status}"),
            Err(PollFailure::Gone(_)) => assert!(!transient, "HTTP {status}"),
            other => panic!("HTTP {status}: {other:?}"),
        }
    }
    stub.on("GET /owner/app/requests/req-9/status", 200, json!({"status": "COMPLETED"}));
    assert_eq!(stub.adapter().status(job(), &upstream).await, Ok(UpstreamStatus::Completed));
    stub.on("GET /owner/app/requests/req-9/status", 202, json!({"status": "IN_QUEUE", "queue_position": 2}));
    assert_eq!(stub.adapter().status(job(), &upstream).await, Ok(UpstreamStatus::Queued { position: Some(2) }));
}

#[tokio::test]
async fn result_answers_map_to_outputs_or_failures() {
    let stub = StubServer::start();
    let upstream = stub.upstream_ref();
    let path = "GET /owner/app/requests/req-9";
    stub.on(path, 200, json!({"images": [{"url": "https://cdn/a.png", "width": 8, "height": 8, "content_type": "image/png"}], "seed": 3}));
    let outputs = stub.adapter().result(job(), &upstream, Modality::Image).await.unwrap().outputs;
    assert_eq!((outputs.len(), outputs[0].meta.seed), (1, Some(3)));
    for (status, body, check) in [
        (422, json!({"detail": [{"msg": "refused"}]}), "rejected"),
        (
            422,
            json!({"detail": [{"loc": ["body", "prompt"], "msg": "flagged", "type": "content_policy_violation"}]}),
            "content refused",
        ),
        (500, json!({"detail": "CUDA out of memory"}), "failed"),
        (502, json!({}), "transient"),
        (404, json!({"detail": "gone"}), "failed"),
        (503, json!({"detail": "Request timed out", "error_type": "request_timeout"}), "failed"),
        (200, json!({"images": [{"nourl": 1}]}), "invalid"),
    ] {
        stub.on(path, status, body);
        let result = stub.adapter().result(job(), &upstream, Modality::Image).await;
        let kind = match result {
            Err(ResultFailure::Rejected(_)) => "rejected",
            Err(ResultFailure::ContentRefused(_)) => "content refused",
            Err(ResultFailure::Failed(_)) => "failed",
            Err(ResultFailure::Transient(_)) => "transient",
            Err(ResultFailure::Invalid(_)) => "invalid",
            Err(ResultFailure::Billed { .. }) => "billed",
            Ok(_) => "ok",
        };
        assert_eq!(kind, check, "HTTP {status}");
    }
}

#[tokio::test]
async fn cancel_puts_to_the_cancel_url() {
    let stub = StubServer::start();
    stub.on("PUT /owner/app/requests/req-9/cancel", 202, json!({"status": "CANCELLATION_REQUESTED"}));
    assert_eq!(stub.adapter().cancel(job(), &stub.upstream_ref()).await, Ok(()));
    let seen = stub.seen().pop().unwrap();
    assert_eq!((seen.method.as_str(), seen.authorization.as_deref()), ("PUT", Some("Key secret-key")));
}

#[tokio::test]
async fn requests_in_flight_are_bounded() {
    let stub = StubServer::start();
    let slow = Pace::After(Duration::from_millis(150));
    stub.on_paced("GET /owner/app/requests/req-9/status", 202, json!({"status": "IN_QUEUE"}), slow);
    let adapter =
        Arc::new(FalUpstream::new(FalConfig { max_in_flight: 2, ..FalConfig::new(stub.base.clone(), None) }).unwrap());
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (adapter, upstream) = (Arc::clone(&adapter), stub.upstream_ref());
            tokio::spawn(async move { adapter.status(job(), &upstream).await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap(), Ok(UpstreamStatus::Queued { position: None }));
    }
    assert_eq!(stub.stub.max_in_flight.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_whole_run_against_the_simulator() {
    let sim = genjobs_upstream_sim::spawn(SimConfig {
        queue: Duration::from_millis(20),
        run: Duration::from_millis(200),
        api_key: Some("k".into()),
        ..SimConfig::default()
    })
    .unwrap();
    let adapter = FalUpstream::new(FalConfig::new(sim.base_url.clone(), Some("k".into()))).unwrap();
    let (model, input) = flux();
    let upstream = adapter.submit(job(), &model, &input).await.unwrap();
    assert!(fal(&upstream).status_url.contains("/fal-ai/flux-pro/requests/"), "URLs name only owner and app");
    let mut seen_running = false;
    let poll = async || {
        let status = adapter.status(job(), &upstream).await.unwrap();
        seen_running |= matches!(status, UpstreamStatus::Running { percent: Some(_) });
        status
    };
    let last = wait_until(Duration::from_secs(30), "the run's end", poll, |status| {
        !matches!(status, UpstreamStatus::Queued { .. } | UpstreamStatus::Running { .. })
    })
    .await;
    assert_eq!(last, UpstreamStatus::Completed);
    assert!(seen_running, "the simulator reports percentages in its logs");
    let outputs = adapter.result(job(), &upstream, Modality::Image).await.unwrap().outputs;
    assert_eq!(outputs.len(), 2);
    assert_eq!(sim.stats().routes["submit"], 1);

    let wrong_key = FalUpstream::new(FalConfig::new(sim.base_url.clone(), Some("nope".into()))).unwrap();
    assert!(matches!(wrong_key.submit(job(), &model, &input).await, Err(SubmitFailure::Ambiguous(_))));
}

#[tokio::test]
async fn fal_errors_become_useful_messages_and_codes() {
    let stub = StubServer::start();
    let upstream = stub.upstream_ref();
    let status = "GET /owner/app/requests/req-9/status";
    stub.on(
        status,
        200,
        json!({"status": "COMPLETED", "error": "Runner disconnected", "error_type": "runner_disconnected"}),
    );
    assert_eq!(
        stub.adapter().status(job(), &upstream).await,
        Ok(UpstreamStatus::Failed(ResultFailure::Failed("Runner disconnected (runner_disconnected)".into()))),
        "a COMPLETED status with an error fails the job with its message"
    );
    stub.on(
        status,
        200,
        json!({"status": "COMPLETED", "error": "Unsafe content", "error_type": "content_policy_violation"}),
    );
    assert!(matches!(
        stub.adapter().status(job(), &upstream).await,
        Ok(UpstreamStatus::Failed(ResultFailure::ContentRefused(_)))
    ));

    let (model, input) = flux();
    let detail =
        json!({"detail": [{"loc": ["body", "image_size"], "msg": "Input should be a valid preset", "type": "enum"}]});
    stub.on("POST /fal-ai/flux-pro/v1.1-ultra", 422, detail);
    assert_eq!(
        stub.adapter().submit(job(), &model, &input).await,
        Err(SubmitFailure::Rejected("image_size: Input should be a valid preset".into())),
        "a validation list names the parameter"
    );

    let policy = json!({"detail": [{"loc": ["body", "prompt"], "msg": "flagged", "type": "content_policy_violation"}]});
    stub.on("POST /fal-ai/flux-pro/v1.1-ultra", 422, policy);
    assert!(
        matches!(stub.adapter().submit(job(), &model, &input).await, Err(SubmitFailure::ContentRefused(_))),
        "fal's content policy refusing the submission is a content refusal"
    );

    let result = "GET /owner/app/requests/req-9";
    stub.on(result, 404, json!({"detail": "Not found"}));
    let Err(ResultFailure::Failed(expired)) = stub.adapter().result(job(), &upstream, Modality::Image).await else {
        panic!("a result gone after fal's 6 minutes fails the job");
    };
    assert!(expired.contains("expired") && expired.contains("6 minutes"), "{expired}");
}

#[tokio::test]
async fn every_model_of_the_catalog_routes_to_an_endpoint_the_simulator_accepts() {
    let sim =
        genjobs_upstream_sim::spawn(SimConfig { queue: Duration::ZERO, run: Duration::ZERO, ..SimConfig::default() })
            .unwrap();
    let adapter = FalUpstream::new(FalConfig::new(sim.base_url.clone(), None)).unwrap();
    let catalog = Catalog::builtin().unwrap();
    let mut runs = 0;
    for model in catalog.managed() {
        for draft in catalog_walk::drafts(model) {
            let request = GenerationRequest::validate(model.modality, draft.clone(), &catalog)
                .unwrap_or_else(|e| panic!("{} refuses its own form: {draft:?}: {e}", model.id));
            let upstream = adapter
                .submit(job(), model, &request.input)
                .await
                .unwrap_or_else(|e| panic!("{}: {draft:?} refused: {e}", model.id));
            let status = adapter.status(job(), &upstream).await.unwrap();
            assert_eq!(status, UpstreamStatus::Completed, "{}", model.id);
            let outputs = adapter.result(job(), &upstream, model.modality).await.unwrap().outputs;
            let expected = request.input.n.map_or(1, usize::from);
            assert_eq!(outputs.len(), expected, "{}: {draft:?}", model.id);
            assert!(outputs.iter().all(|o| o.url.starts_with("http")), "{}", model.id);
            runs += 1;
        }
    }
    assert!(runs > 40, "the walk covers every option: {runs} runs");
    println!("catalog walk: {runs} requests accepted and parsed");
}

/// Every value a model's form offers: each option of each select, the min and max of each number,
/// with and without image inputs.
mod catalog_walk {
    use genjobs_domain::catalog::{FieldKind, Model};
    use genjobs_domain::request::{GenerationDraft, WholeNumber};

    fn snake(camel: &str) -> String {
        camel.chars().fold(String::new(), |mut out, c| {
            if c.is_ascii_uppercase() {
                out.push('_');
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
            out
        })
    }

    fn set(draft: &mut GenerationDraft, field: &str, value: &serde_json::Value) {
        let number = || match value {
            serde_json::Value::String(text) => WholeNumber::Text(text.clone()),
            other => WholeNumber::Exact(other.as_u64().unwrap_or(0)),
        };
        match field {
            "aspect_ratio" => draft.aspect_ratio = value.as_str().map(str::to_owned),
            "resolution" => draft.resolution = value.as_str().map(str::to_owned),
            "duration_sec" => draft.duration_sec = Some(number()),
            "n" => draft.n = Some(number()),
            "seed" => draft.seed = Some(number()),
            other => panic!("the walk does not know field {other}"),
        }
    }

    pub fn drafts(model: &Model) -> Vec<GenerationDraft> {
        let base = GenerationDraft {
            prompt: Some("a lighthouse".into()),
            model: Some(model.id.to_string()),
            ..GenerationDraft::default()
        };
        let mut drafts = vec![base.clone()];
        for field in &model.fields {
            let name = snake(&field.name);
            let values: Vec<serde_json::Value> = match field.kind {
                FieldKind::Select => {
                    field.options.iter().flatten().map(|o| serde_json::Value::String(o.value.clone())).collect()
                }
                FieldKind::Number => [&field.min, &field.max]
                    .into_iter()
                    .flatten()
                    .map(|n| serde_json::Value::Number(n.clone()))
                    .collect(),
                FieldKind::Text | FieldKind::Textarea => {
                    if name == "negative_prompt" {
                        drafts.push(GenerationDraft { negative_prompt: Some("blur".into()), ..base.clone() });
                    }
                    continue;
                }
                FieldKind::ImageUrl => continue,
            };
            for value in values {
                let mut draft = base.clone();
                set(&mut draft, &name, &value);
                drafts.push(draft);
            }
        }
        let with_images: Vec<GenerationDraft> = drafts
            .iter()
            .filter(|_| model.fields.iter().any(|f| f.kind == FieldKind::ImageUrl))
            .map(|d| GenerationDraft { image_inputs: Some(vec!["https://example.com/ref.png".into()]), ..d.clone() })
            .collect();
        drafts.extend(with_images);
        drafts
    }
}
