//! Answers the simulator does not give, from a stub: how the adapter classifies them.

#![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

use std::net::TcpListener;

use actix_web::{App, HttpResponse, HttpServer, web};
use genjobs_domain::ids::JobId;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{CancelOutcome, PollFailure, ResultFailure, UpstreamProvider};
use genjobs_upstream_replicate::{ReplicateConfig, ReplicateUpstream};

/// An adapter on a server that answers every call with `status` and `body`.
fn answering(status: u16, body: &'static str) -> ReplicateUpstream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let server = HttpServer::new(move || {
        App::new().default_service(web::to(move || async move {
            HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap())
                .content_type("application/json")
                .body(body)
        }))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    ReplicateUpstream::new(ReplicateConfig::new(base, "t")).unwrap()
}

fn job() -> JobId {
    JobId::new_at(time::OffsetDateTime::now_utc())
}

fn prediction() -> UpstreamRef {
    UpstreamRef::new("replicate", "p1")
}

#[tokio::test]
async fn reads_answered_later_are_transient_and_a_gone_prediction_is_gone() {
    for status in [429, 500, 502, 503, 504] {
        let read = answering(status, r#"{"detail": "busy", "status": 503}"#).status(job(), &prediction()).await;
        assert!(matches!(read, Err(PollFailure::Transient(_))), "{status}: {read:?}");
    }
    let gone = answering(404, r#"{"title": "Not found", "status": 404}"#).status(job(), &prediction()).await;
    assert_eq!(gone, Err(PollFailure::Gone("Not found (HTTP 404)".into())));
    let garbled = answering(200, "{not json").status(job(), &prediction()).await;
    assert!(matches!(garbled, Err(PollFailure::Transient(_))));
}

#[tokio::test]
async fn a_cancel_answered_without_a_prediction_is_taken_as_requested() {
    assert_eq!(answering(200, "").cancel_unless_done(job(), &prediction()).await, Ok(CancelOutcome::Requested));
    let busy = answering(503, "").cancel_unless_done(job(), &prediction()).await;
    assert!(matches!(busy, Err(PollFailure::Transient(_))));
}

#[tokio::test]
async fn outputs_deleted_after_the_hour_fail_the_result() {
    let removed = answering(200, r#"{"id": "p1", "status": "succeeded", "output": null, "data_removed": true}"#);
    let result = removed.result(job(), &prediction(), Modality::Image).await;
    assert!(matches!(result, Err(ResultFailure::Failed(reason)) if reason.contains("an hour")));
    let odd = answering(200, r#"{"id": "p1", "status": "succeeded", "output": {"images": []}}"#);
    assert!(matches!(odd.result(job(), &prediction(), Modality::Image).await, Err(ResultFailure::Invalid(_))));
}

#[tokio::test]
async fn a_prediction_failed_for_nsfw_or_safety_is_a_content_refusal() {
    use genjobs_domain::ports::UpstreamStatus;
    for error in ["NSFW content detected. Try a different prompt.", "The safety checker flagged the image"] {
        let body: &'static str =
            Box::leak(format!(r#"{{"id": "p1", "status": "failed", "error": "{error}"}}"#).into_boxed_str());
        let status = answering(200, body).status(job(), &prediction()).await;
        assert!(matches!(status, Ok(UpstreamStatus::Failed(ResultFailure::ContentRefused(_)))), "{error}: {status:?}");
    }
    let crashed = answering(200, r#"{"id": "p1", "status": "failed", "error": "CUDA out of memory"}"#);
    let status = crashed.status(job(), &prediction()).await;
    assert!(matches!(status, Ok(UpstreamStatus::Failed(ResultFailure::Failed(_)))), "{status:?}");
}
