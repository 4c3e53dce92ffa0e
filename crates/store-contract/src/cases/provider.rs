//! What webhooks and stored outputs need of a store: finding a job by the provider's id of it,
//! and keeping each output's copy as it was committed.

use std::sync::Arc;

use genjobs_domain::credits::Credits;
use genjobs_domain::job::{Trigger, UpstreamRef};
use genjobs_domain::output::{OutputCopy, OutputItem, OutputKind, OutputMeta, StoredFile};

use super::{Store, accepted, now, step, user};

/// A job is found by its upstream reference's key, the key survives the round trip, and a job
/// whose reference has no key is found by nothing.
pub async fn jobs_are_found_by_their_upstream_key<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let keyed = accepted(&*store, id, 10).await;
    let unkeyed = accepted(&*store, id, 10).await;
    for (job, upstream) in [(&keyed, UpstreamRef::keyed("{\"ref\":1}", "req-k")), (&unkeyed, UpstreamRef::new("req-u"))]
    {
        let started = step(&*store, job, Trigger::SubmitStarted { next_poll_at: now() }).await;
        step(&*store, &started, Trigger::Submitted { upstream, next_poll_at: now() }).await;
    }
    let found = store.job_by_upstream_key("req-k").await.unwrap().expect("found by its key");
    assert_eq!(found.id(), keyed.id());
    assert_eq!(found.upstream().and_then(UpstreamRef::key), Some("req-k"));
    assert_eq!(found.upstream().map(UpstreamRef::as_str), Some("{\"ref\":1}"));
    assert_eq!(store.job_by_upstream_key("req-u").await.unwrap(), None, "a reference without a key");
    assert_eq!(store.job_by_upstream_key("nope").await.unwrap(), None);
}

/// Each output's copy (stored with its size, type and digest, or failed, or none) reads back as
/// it was committed.
pub async fn output_copies_are_kept_as_committed<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let job = accepted(&*store, id, 30).await;
    let started = step(&*store, &job, Trigger::SubmitStarted { next_poll_at: now() }).await;
    let upstream = UpstreamRef::keyed("r", "r");
    let submitted = step(&*store, &started, Trigger::Submitted { upstream, next_poll_at: now() }).await;
    let item = |i: usize, copy| OutputItem {
        url: format!("https://cdn/{i}.png"),
        kind: OutputKind::Image,
        meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
        copy,
    };
    let file = StoredFile { size: 1234, content_type: "image/webp".into(), sha256: "ab".repeat(32) };
    let outputs = vec![item(0, Some(OutputCopy::Stored(file))), item(1, Some(OutputCopy::Failed)), item(2, None)];
    let done =
        step(&*store, &submitted, Trigger::Succeeded { outputs: outputs.clone(), credits_actual: Credits::new(30) })
            .await;
    assert_eq!(done.outputs(), Some(outputs.as_slice()));
    assert_eq!(store.job(job.id()).await.unwrap().unwrap().outputs(), Some(outputs.as_slice()));
}
