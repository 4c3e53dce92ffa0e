//! The Replicate adapter against the simulator: whole predictions over real HTTP, and every
//! failure classified as the port says.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::net::TcpListener;
use std::time::Duration;

use genjobs_domain::catalog::{Catalog, Model, ModelDocument};
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{
    CancelOutcome, PollFailure, ReportedUsage, ResultFailure, SubmitFailure, UpstreamProvider, UpstreamStatus,
};
use genjobs_test_wait::wait_until;
use genjobs_upstream_replicate::{ReplicateConfig, ReplicateUpstream};
use genjobs_upstream_replicate_sim::{RunningSim, SimConfig};
use serde_json::json;

/// flux-pro of the built-in catalog, with a Replicate route to `replicate_model` first.
fn flux(replicate_model: &str) -> Model {
    let catalog = Catalog::builtin().unwrap();
    let mut document = serde_json::to_value(catalog.model("flux-pro").unwrap().document()).unwrap();
    let route = json!({"provider": "replicate", "model": replicate_model,
        "params": {"prompt": "prompt", "aspect_ratio": "aspect_ratio", "seed": "seed"},
        "image_inputs": {"to": "image_prompt", "list": false}, "fixed": {"output_format": "png"}});
    document["routes"].as_array_mut().unwrap().insert(0, route);
    Model::from_document("flux-pro", ModelDocument::from_value(document).unwrap()).unwrap()
}

fn ultra() -> Model {
    flux("black-forest-labs/flux-1.1-pro-ultra")
}

fn input(prompt: &str) -> GenerationInput {
    GenerationInput {
        prompt: prompt.into(),
        negative_prompt: None,
        aspect_ratio: "16:9".into(),
        resolution: None,
        duration_sec: None,
        n: Some(1),
        seed: Some(5),
        image_inputs: vec![],
        extra: None,
    }
}

fn job() -> JobId {
    JobId::new_at(time::OffsetDateTime::now_utc())
}

fn sim(config: SimConfig) -> RunningSim {
    genjobs_upstream_replicate_sim::spawn(config).unwrap()
}

fn fast() -> SimConfig {
    SimConfig { starting: Duration::from_millis(50), processing: Duration::from_millis(300), ..SimConfig::default() }
}

fn adapter(sim: &RunningSim) -> ReplicateUpstream {
    ReplicateUpstream::new(ReplicateConfig::new(sim.api_url(), "sim-token")).unwrap()
}

async fn submitted(sim: &RunningSim, prompt: &str) -> UpstreamRef {
    adapter(sim).submit(job(), &ultra(), &input(prompt)).await.unwrap()
}

async fn ended(sim: &RunningSim, upstream: &UpstreamRef) -> UpstreamStatus {
    let replicate = adapter(sim);
    wait_until(
        Duration::from_secs(10),
        "the prediction ends",
        async || replicate.status(job(), upstream).await.unwrap(),
        |s| matches!(s, UpstreamStatus::Completed | UpstreamStatus::Failed(_)),
    )
    .await
}

#[tokio::test]
async fn a_prediction_is_created_asynchronously_with_the_bearer_token_and_the_mapped_input() {
    let sim = sim(fast());
    let extra = json!({"raw": true, "safety_tolerance": 5}).as_object().cloned();
    let with_image = GenerationInput { image_inputs: vec!["https://img/ref.png".into()], extra, ..input("a fox") };
    let upstream = adapter(&sim).submit(job(), &ultra(), &with_image).await.unwrap();
    assert_eq!(upstream.provider(), "replicate");
    assert_eq!(upstream.key().len(), 26, "keyed by the prediction id");
    let calls = sim.create_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].model.as_str(), calls[0].prefer.as_deref()), ("black-forest-labs/flux-1.1-pro-ultra", None));
    assert_eq!(
        calls[0].body,
        json!({"input": {"prompt": "a fox", "aspect_ratio": "16:9", "seed": 5, "image_prompt": "https://img/ref.png",
            "output_format": "png", "raw": true, "safety_tolerance": 5}}),
        "no webhook keys without a webhook configured"
    );
}

#[tokio::test]
async fn a_prediction_is_followed_to_success_and_its_output_is_a_real_png() {
    let sim = sim(SimConfig { starting: Duration::from_millis(300), ..fast() });
    let upstream = submitted(&sim, "a lighthouse").await;
    let replicate = adapter(&sim);
    assert_eq!(replicate.status(job(), &upstream).await, Ok(UpstreamStatus::Queued { position: None }));
    wait_until(
        Duration::from_secs(5),
        "processing",
        async || replicate.status(job(), &upstream).await.unwrap(),
        |s| matches!(s, UpstreamStatus::Running { percent: Some(_) } | UpstreamStatus::Completed),
    )
    .await;
    assert_eq!(ended(&sim, &upstream).await, UpstreamStatus::Completed);
    let outputs = replicate.result(job(), &upstream, Modality::Image).await.unwrap().outputs;
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].meta.content_type, "image/png");
    let file = reqwest::get(&outputs[0].url).await.unwrap();
    assert_eq!(file.status(), 200);
    let bytes = file.bytes().await.unwrap();
    let png = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png).unwrap();
    assert_eq!((png.width(), png.height()), (256, 144), "16:9 as asked");
}

#[tokio::test]
async fn a_running_prediction_is_canceled_and_a_finished_one_is_already_completed() {
    let sim = sim(SimConfig { processing: Duration::from_secs(30), ..fast() });
    let upstream = submitted(&sim, "a slow fox").await;
    let replicate = adapter(&sim);
    assert_eq!(replicate.cancel_unless_done(job(), &upstream).await, Ok(CancelOutcome::Requested));
    // Billed when the cancel came after the prediction started, which this test does not time.
    let failure = match replicate.status(job(), &upstream).await {
        Ok(UpstreamStatus::Failed(ResultFailure::Billed { failure, .. })) => *failure,
        Ok(UpstreamStatus::Failed(failure)) => failure,
        other => panic!("{other:?}"),
    };
    assert!(matches!(failure, ResultFailure::Failed(reason) if reason.contains("canceled")));
    let done = submitted(&sim, "a quick fox [sim:run=0]").await;
    assert_eq!(ended(&sim, &done).await, UpstreamStatus::Completed);
    assert_eq!(replicate.cancel_unless_done(job(), &done).await, Ok(CancelOutcome::AlreadyCompleted));
    let unknown = UpstreamRef::new("replicate", "nosuchprediction");
    assert!(matches!(replicate.cancel(job(), &unknown).await, Err(PollFailure::Gone(_))));
    assert!(matches!(replicate.status(job(), &unknown).await, Err(PollFailure::Gone(_))));
}

#[tokio::test]
async fn a_failed_prediction_fails_with_its_error() {
    let sim = sim(fast());
    let upstream = submitted(&sim, "a fox [sim:fail] [sim:run=50]").await;
    let status = ended(&sim, &upstream).await;
    let ran = ReportedUsage { billable_units: None, compute_seconds: "0.05".parse().ok() };
    let UpstreamStatus::Failed(ResultFailure::Billed { failure, usage }) = &status else { panic!("{status:?}") };
    assert!(matches!(&**failure, ResultFailure::Failed(e) if e.contains("simulated model")), "{status:?}");
    assert_eq!(*usage, ran, "the time the failed prediction ran is billed");
    let result = adapter(&sim).result(job(), &upstream, Modality::Image).await;
    let Err(ResultFailure::Billed { failure, usage }) = result else { panic!("{result:?}") };
    assert!(matches!(*failure, ResultFailure::Failed(_)) && usage == ran);
}

#[tokio::test]
async fn refused_inputs_and_unknown_models_are_rejected_with_the_problem_words() {
    let sim = sim(fast());
    let out_of_range = GenerationInput { extra: json!({"safety_tolerance": 9}).as_object().cloned(), ..input("a fox") };
    let refused = adapter(&sim).submit(job(), &ultra(), &out_of_range).await;
    assert_eq!(
        refused,
        Err(SubmitFailure::Rejected("invalid input: input.safety_tolerance: Must be less than or equal to 6".into()))
    );
    let unknown = adapter(&sim).submit(job(), &flux("black-forest-labs/flux-nope"), &input("a fox")).await;
    assert!(
        matches!(&unknown, Err(SubmitFailure::Rejected(m)) if m.contains("could not be found") && m.contains("404")),
        "{unknown:?}"
    );
    // More images than a prediction makes is not sent: not refused, so that another route of the
    // model may take the job.
    let four = GenerationInput { n: Some(4), ..input("a fox") };
    assert!(matches!(adapter(&sim).submit(job(), &ultra(), &four).await, Err(SubmitFailure::NotReached(_))));
    assert_eq!(sim.predictions_created(), 0);
}

#[tokio::test]
async fn throttling_unavailability_and_a_refused_connection_are_not_reached() {
    let sim = sim(fast());
    for directive in ["[sim:429]", "[sim:502]", "[sim:503]"] {
        let refused = adapter(&sim).submit(job(), &ultra(), &input(&format!("a fox {directive}"))).await;
        assert!(matches!(&refused, Err(SubmitFailure::NotReached(_))), "{directive}: {refused:?}");
    }
    let throttled = adapter(&sim).submit(job(), &ultra(), &input("a fox [sim:429]")).await;
    assert!(matches!(&throttled, Err(SubmitFailure::NotReached(m)) if m.contains("retry after 1 s")), "{throttled:?}");
    let wrong_token = ReplicateUpstream::new(ReplicateConfig::new(sim.api_url(), "wrong")).unwrap();
    assert!(matches!(wrong_token.submit(job(), &ultra(), &input("a fox")).await, Err(SubmitFailure::NotReached(_))));
    assert_eq!(sim.predictions_created(), 0);

    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let nobody = ReplicateUpstream::new(ReplicateConfig::new(base, "sim-token")).unwrap();
    assert!(matches!(nobody.submit(job(), &ultra(), &input("a fox")).await, Err(SubmitFailure::NotReached(_))));
    let unknown = UpstreamRef::new("replicate", "p");
    assert!(matches!(nobody.status(job(), &unknown).await, Err(PollFailure::Transient(_))));
}

#[tokio::test]
async fn a_server_error_or_a_timeout_after_the_body_was_sent_is_ambiguous() {
    let sim = sim(fast());
    let failed = adapter(&sim).submit(job(), &ultra(), &input("a fox [sim:500]")).await;
    assert!(matches!(&failed, Err(SubmitFailure::Ambiguous(m)) if m.contains("500")), "{failed:?}");
    assert_eq!(sim.predictions_created(), 1, "the prediction exists although the answer was a 500");
    let impatient = ReplicateUpstream::new(ReplicateConfig {
        request_timeout: Duration::from_millis(300),
        ..ReplicateConfig::new(sim.api_url(), "sim-token")
    })
    .unwrap();
    let stalled = impatient.submit(job(), &ultra(), &input("a fox [sim:stall=2000]")).await;
    assert!(matches!(stalled, Err(SubmitFailure::Ambiguous(_))), "{stalled:?}");
    assert_eq!(sim.predictions_created(), 2);
}

#[tokio::test]
async fn configured_shares_of_submissions_fail() {
    let failures = genjobs_upstream_replicate_sim::Failures { throttled: 1.0, ..Default::default() };
    let sim = sim(SimConfig { failures, ..fast() });
    assert!(matches!(adapter(&sim).submit(job(), &ultra(), &input("a fox")).await, Err(SubmitFailure::NotReached(_))));
    let failures = genjobs_upstream_replicate_sim::Failures { server_error: 1.0, ..Default::default() };
    let sim = self::sim(SimConfig { failures, ..fast() });
    assert!(matches!(adapter(&sim).submit(job(), &ultra(), &input("a fox")).await, Err(SubmitFailure::Ambiguous(_))));
}

#[tokio::test]
async fn a_result_read_before_the_end_is_tried_again_later() {
    let sim = sim(SimConfig { processing: Duration::from_secs(30), ..fast() });
    let upstream = submitted(&sim, "a fox").await;
    let early = adapter(&sim).result(job(), &upstream, Modality::Image).await;
    assert!(matches!(early, Err(ResultFailure::Transient(_))));
    let foreign = UpstreamRef::new("fal", "x");
    assert!(matches!(adapter(&sim).status(job(), &foreign).await, Err(PollFailure::Gone(_))));
}
