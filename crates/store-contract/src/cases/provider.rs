//! What webhooks and stored outputs need of a store: finding a job by the provider's id of it,
//! and keeping each output's copy as it was committed.

use std::sync::Arc;

use genjobs_domain::credits::Credits;
use genjobs_domain::job::{Trigger, UpstreamRef};
use genjobs_domain::output::{OutputCopy, OutputItem, OutputKind, OutputMeta, StoredFile};

use super::{Store, accepted, now, step, user};

/// A job is found by the provider's id of it, and its reference (provider, id and details)
/// reads back as it was written.
pub async fn jobs_are_found_by_their_upstream_key<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let first = accepted(&*store, id, 10).await;
    let second = accepted(&*store, id, 10).await;
    let detailed = UpstreamRef::new("fal", "req-k")
        .with_detail("endpoint", "fal-ai/flux-pro")
        .with_detail("status_url", "https://queue.example/requests/req-k/status");
    for (job, upstream) in [(&first, detailed.clone()), (&second, UpstreamRef::new("replicate", "req-u"))] {
        let started = step(&*store, job, Trigger::SubmitStarted { next_poll_at: now() }).await;
        step(&*store, &started, Trigger::Submitted { upstream, next_poll_at: now(), billing: None }).await;
    }
    let found = store.job_by_upstream_key("req-k").await.unwrap().expect("found by its key");
    assert_eq!(found.id(), first.id());
    assert_eq!(found.upstream(), Some(&detailed), "provider, id and details survive the round trip");
    assert_eq!(found.upstream().and_then(|u| u.detail("endpoint")), Some("fal-ai/flux-pro"));
    let other = store.job_by_upstream_key("req-u").await.unwrap().expect("found by its key");
    assert_eq!((other.id(), other.upstream().map(UpstreamRef::provider)), (second.id(), Some("replicate")));
    assert_eq!(store.job_by_upstream_key("nope").await.unwrap(), None);
}

/// Each output's copy (stored with its size, type and digest, or failed, or none) reads back as
/// it was committed.
pub async fn output_copies_are_kept_as_committed<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let job = accepted(&*store, id, 30).await;
    let started = step(&*store, &job, Trigger::SubmitStarted { next_poll_at: now() }).await;
    let upstream = UpstreamRef::new("test", "r");
    let submitted = step(&*store, &started, Trigger::Submitted { upstream, next_poll_at: now(), billing: None }).await;
    let item = |i: usize, copy| OutputItem {
        url: format!("https://cdn/{i}.png"),
        kind: OutputKind::Image,
        meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
        copy,
    };
    let file = StoredFile { size: 1234, content_type: "image/webp".into(), sha256: "ab".repeat(32) };
    let outputs = vec![item(0, Some(OutputCopy::Stored(file))), item(1, Some(OutputCopy::Failed)), item(2, None)];
    let done = step(
        &*store,
        &submitted,
        Trigger::Succeeded { outputs: outputs.clone(), credits_actual: Credits::new(30), reported_units: None },
    )
    .await;
    assert_eq!(done.outputs(), Some(outputs.as_slice()));
    assert_eq!(store.job(job.id()).await.unwrap().unwrap().outputs(), Some(outputs.as_slice()));
}
