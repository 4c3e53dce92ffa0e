//! The Rust client against a running genjobs: every public endpoint, its errors, idempotent
//! retries, long-polls and a stream that outlives several connections.

use std::time::Duration;

use futures_util::StreamExt;
use genjobs::Config;
use genjobs_client::{Client, EventKind, ImageRequest, JobState, VideoRequest};
use genjobs_tests::{fast_config, spawn_app, spawn_app_with};
use serde_json::json;

#[tokio::test]
async fn a_job_is_submitted_waited_for_and_downloaded() {
    let app = spawn_app().await;
    let client = Client::new(&app.base, &app.demo_key).unwrap();
    let receipt =
        client.submit_image(&ImageRequest { n: Some(2), ..ImageRequest::new("a lighthouse") }, None).await.unwrap();
    assert_eq!(receipt.state, JobState::Queued);
    let job = client.wait_final(&receipt.job_id, Duration::from_secs(20)).await.unwrap();
    assert_eq!(job.state, JobState::Succeeded);
    let outputs = job.outputs.unwrap();
    assert_eq!(outputs.len(), 2);
    let dir = std::env::temp_dir().join(format!("genjobs-client-{}", receipt.job_id));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("0.png");
    let written = client.download(&outputs[0].url, &path).await.unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), written);
    assert_eq!(&std::fs::read(&path).unwrap()[1..4], b"PNG");
    std::fs::remove_dir_all(dir).unwrap();

    let page = client.jobs(10, None).await.unwrap();
    assert_eq!(page.data[0].id, receipt.job_id);
    let models = client.models(Some("video")).await.unwrap();
    assert!(!models.is_empty() && models.iter().all(|m| m.modality == "video"));
    let account = client.account().await.unwrap();
    assert_eq!(account.credits_spent, job.credits_actual.unwrap());
}

#[tokio::test]
async fn the_same_idempotency_key_never_holds_twice() {
    let app = spawn_app().await;
    let client = Client::new(&app.base, &app.demo_key).unwrap();
    let request = ImageRequest::new("once");
    let first = client.submit_image(&request, Some("order-17")).await.unwrap();
    let again = client.submit_image(&request, Some("order-17")).await.unwrap();
    assert_eq!(first.job_id, again.job_id);
    let account = client.account().await.unwrap();
    assert_eq!(account.credits_held + account.credits_spent, first.credits_held, "held once");
    let other = client.submit_image(&ImageRequest::new("twice"), Some("order-17")).await.unwrap_err();
    assert_eq!(other.api().map(|e| e.code.as_str()), Some("IDEMPOTENCY_KEY_REUSED"));
}

#[tokio::test]
async fn refusals_carry_the_envelope_and_retry_after() {
    let app = spawn_app_with(Config { demo_credits: 3, ..fast_config() }).await;
    let client = Client::new(&app.base, &app.demo_key).unwrap();
    let poor = client.submit_video(&VideoRequest::new("expensive"), None).await.unwrap_err();
    let envelope = poor.api().unwrap();
    assert_eq!(
        (envelope.status, envelope.kind.as_str(), envelope.code.as_str()),
        (402, "insufficient_credits", "NOT_ENOUGH_CREDITS")
    );
    let invalid = client.submit_image(&ImageRequest { n: Some(9), ..ImageRequest::new("x") }, None).await.unwrap_err();
    assert_eq!(invalid.api().and_then(|e| e.param.as_deref()), Some("n"));
    assert_eq!(client.job("nope").await.unwrap_err().api().map(|e| e.status), Some(404));
    let stranger = Client::new(&app.base, "gj_000000000000notakey").unwrap();
    assert_eq!(stranger.account().await.unwrap_err().api().map(|e| e.code.as_str()), Some("INVALID_API_KEY"));

    let limited = app.create_user(10, json!({"rate_limit_per_minute": 1})).await;
    let client = Client::new(&app.base, &limited.key).unwrap();
    client.account().await.unwrap();
    let refused = client.account().await.unwrap_err();
    let envelope = refused.api().unwrap();
    assert_eq!(envelope.code, "RATE_LIMIT_EXCEEDED");
    assert!(envelope.retry_after.is_some_and(|d| d >= Duration::from_secs(1)), "{envelope:?}");
    assert!(refused.is_retryable());
}

#[tokio::test]
async fn a_stream_reconnects_by_itself_until_the_job_ends() {
    let mut config = fast_config();
    config.http.stream_max = Duration::from_millis(1000);
    let app = spawn_app_with(config).await;
    let client = Client::new(&app.base, &app.demo_key).unwrap();
    let receipt = client.submit_image(&ImageRequest::new("slow [sim:run=2600]"), None).await.unwrap();
    let started = std::time::Instant::now();
    let events: Vec<_> = client.stream(&receipt.job_id).collect().await;
    let events: Vec<_> = events.into_iter().map(Result::unwrap).collect();
    assert!(started.elapsed() > Duration::from_millis(2000), "outlived two connections of 1 s");
    let last = events.last().unwrap();
    assert_eq!((last.kind, last.data.state), (EventKind::Done, JobState::Succeeded));
    assert!(events.iter().filter(|e| e.kind == EventKind::Progress).count() >= 2);
    let progress: Vec<u8> = events.iter().map(|e| e.data.progress).collect();
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");

    let canceled = client.submit_image(&ImageRequest::new("stopped [sim:hang]"), None).await.unwrap();
    let stream = client.stream(&canceled.job_id);
    let cancel = client.cancel(&canceled.job_id).await.unwrap();
    assert_eq!(cancel.state, JobState::Canceled);
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>()).await.unwrap();
    let last = events.last().unwrap().as_ref().unwrap();
    assert_eq!(
        (last.kind, last.data.error.as_ref().map(|e| e.code.as_str())),
        (EventKind::Error, Some("JOB_CANCELED"))
    );
    assert!(client.stream("nope").next().await.unwrap().is_err(), "a refusal ends the stream");
}
