//! The router over several providers: a submission follows the model's routes and moves on only
//! after a provable refusal; every later call goes to the provider that has the job. Providers
//! are mockall mocks; time is tokio's paused clock, so the retry pause takes none.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::catalog::{Catalog, Model, ModelDocument};
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::ports::{
    BreakerState, Delivery, MockUpstreamProvider, NotificationRejected, PollFailure, SubmitFailure, UpstreamProvider,
    UpstreamStatus,
};
use genjobs_runtime::RoutedUpstream;
use serde_json::json;

/// flux-pro with a fal route and then a replicate route.
fn model() -> Model {
    let catalog = Catalog::builtin().unwrap();
    let mut document = serde_json::to_value(catalog.model("flux-pro").unwrap().document()).unwrap();
    document["routes"] = json!([{"provider": "fal"}, {"provider": "replicate"}]);
    Model::from_document("flux-pro", ModelDocument::from_value(document).unwrap()).unwrap()
}

fn input() -> GenerationInput {
    let catalog = Catalog::builtin().unwrap();
    let draft = genjobs_domain::request::GenerationDraft { prompt: Some("a fox".into()), ..Default::default() };
    genjobs_domain::request::GenerationRequest::validate(genjobs_domain::modality::Modality::Image, draft, &catalog)
        .unwrap()
        .input
}

/// A provider named `name` whose submissions answer `answers` in turn.
fn provider(name: &'static str, answers: Vec<Result<UpstreamRef, SubmitFailure>>) -> MockUpstreamProvider {
    let mut provider = MockUpstreamProvider::new();
    provider.expect_name().return_const(name);
    provider.expect_serves().returning(move |p| p == name);
    let mut answers = answers.into_iter();
    let calls = answers.len();
    provider.expect_submit().times(calls).returning(move |_, _, _| answers.next().unwrap());
    provider
}

fn router(fal: MockUpstreamProvider, replicate: MockUpstreamProvider) -> RoutedUpstream {
    RoutedUpstream::new(Arc::new(fal), vec![Arc::new(replicate)], Duration::from_millis(250))
}

fn refused() -> Result<UpstreamRef, SubmitFailure> {
    Err(SubmitFailure::NotReached("503".into()))
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_retried_once_then_the_next_route_takes_the_job() {
    let sent = UpstreamRef::new("replicate", "p-1");
    let routed = router(provider("fal", vec![refused(), refused()]), provider("replicate", vec![Ok(sent.clone())]));
    let started = tokio::time::Instant::now();
    assert_eq!(routed.submit(JobId::new_at(time::OffsetDateTime::now_utc()), &model(), &input()).await, Ok(sent));
    assert!(started.elapsed() < Duration::from_secs(5), "the next route is reached within 5 s");
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_or_refused_input_answer_is_never_sent_to_another_provider() {
    for answer in [
        SubmitFailure::Ambiguous("500".into()),
        SubmitFailure::Rejected("422".into()),
        SubmitFailure::ContentRefused("content_policy_violation".into()),
    ] {
        let routed = router(provider("fal", vec![Err(answer.clone())]), provider("replicate", vec![]));
        let submitted = routed.submit(JobId::new_at(time::OffsetDateTime::now_utc()), &model(), &input()).await;
        assert_eq!(submitted, Err(answer));
    }
}

#[tokio::test(start_paused = true)]
async fn when_every_route_refuses_the_job_waits_for_its_next_try() {
    let routed = router(provider("fal", vec![refused(), refused()]), provider("replicate", vec![refused(), refused()]));
    let submitted = routed.submit(JobId::new_at(time::OffsetDateTime::now_utc()), &model(), &input()).await;
    assert!(
        matches!(submitted, Err(SubmitFailure::NotReached(reason)) if reason.contains("fal") && reason.contains("replicate"))
    );
}

#[tokio::test(start_paused = true)]
async fn a_model_with_no_configured_route_is_refused_without_a_call() {
    let mut document = serde_json::to_value(model().document()).unwrap();
    document["routes"] = json!([{"provider": "elsewhere"}]);
    let lonely = Model::from_document("flux-pro", ModelDocument::from_value(document).unwrap()).unwrap();
    let routed = router(provider("fal", vec![]), provider("replicate", vec![]));
    let submitted = routed.submit(JobId::new_at(time::OffsetDateTime::now_utc()), &lonely, &input()).await;
    assert!(matches!(submitted, Err(SubmitFailure::Rejected(_))));
}

#[tokio::test]
async fn later_calls_go_to_the_provider_that_has_the_job() {
    let mut replicate = provider("replicate", vec![]);
    replicate.expect_status().times(1).returning(|_, _| Ok(UpstreamStatus::Completed));
    let routed = router(provider("fal", vec![]), replicate);
    let id = JobId::new_at(time::OffsetDateTime::now_utc());
    assert_eq!(routed.status(id, &UpstreamRef::new("replicate", "p-1")).await, Ok(UpstreamStatus::Completed));
    let gone = routed.status(id, &UpstreamRef::new("elsewhere", "x")).await;
    assert!(matches!(gone, Err(PollFailure::Transient(_))), "{gone:?}");
    let delivery = Delivery { provider: "elsewhere".into(), ..Delivery::default() };
    let refused = routed.read_notification(&delivery, time::OffsetDateTime::now_utc()).await;
    assert_eq!(refused.unwrap_err(), NotificationRejected::NotEnabled);
    assert!(routed.serves("replicate") && routed.serves("fal") && !routed.serves("elsewhere"));
}

#[tokio::test(start_paused = true)]
async fn a_provider_that_keeps_refusing_cools_down_then_one_submission_probes_it() {
    let sent = UpstreamRef::new("replicate", "p");
    // Five refusals in a row: two submissions retry once each, the third's first try trips it.
    let fal =
        provider("fal", vec![refused(), refused(), refused(), refused(), refused(), Ok(UpstreamRef::new("fal", "f"))]);
    let replicate = provider("replicate", vec![Ok(sent.clone()), Ok(sent.clone()), Ok(sent.clone()), Ok(sent.clone())]);
    let routed = router(fal, replicate);
    let id = JobId::new_at(time::OffsetDateTime::now_utc());
    for _ in 0..3 {
        assert_eq!(routed.submit(id, &model(), &input()).await, Ok(sent.clone()), "refused at fal, taken at replicate");
    }
    let breakers = |routed: &RoutedUpstream| -> Vec<(String, BreakerState, u32)> {
        routed.availability().into_iter().map(|p| (p.provider, p.breaker, p.refusals_in_a_row)).collect()
    };
    let open = BreakerState::Open { cools_for: genjobs_runtime::COOL_DOWN };
    assert_eq!(breakers(&routed), [("fal".into(), open, 5), ("replicate".into(), BreakerState::Closed, 0)]);
    // Cooling down: fal is passed by without a call (its mock allows no seventh).
    assert_eq!(routed.submit(id, &model(), &input()).await, Ok(sent.clone()));
    tokio::time::advance(genjobs_runtime::COOL_DOWN).await;
    assert_eq!(breakers(&routed)[0].1, BreakerState::HalfOpen, "the next submission probes fal");
    assert_eq!(routed.submit(id, &model(), &input()).await, Ok(UpstreamRef::new("fal", "f")), "the probe closes it");
    assert_eq!(breakers(&routed)[0], ("fal".into(), BreakerState::Closed, 0));
}
