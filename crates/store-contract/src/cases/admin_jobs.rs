//! What operators need of a store: every user's jobs found by owner, state, model and provider,
//! newest first in pages; the body a job was received with and its trace, read back as they
//! were; and a job's own ledger records, oldest first.

use std::sync::Arc;

use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{JobId, KeyPrefix, ModelId, UserId};
use genjobs_domain::job::{Job, JobError, JobErrorCode, JobState, Trigger, UpstreamRef};
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{JobFilter, LedgerMovement};
use genjobs_domain::request::ReceivedRequest;
use genjobs_domain::trace::TraceParent;
use time::{Duration, OffsetDateTime};

use super::{LIMITS, Limits, Store, accepted, input, new_job, now, step, success, user, user_with};

/// The body a job of `model` was received with: what the client sent, no default filled in.
fn received(model: &str) -> ReceivedRequest {
    let body = serde_json::json!({"model": model, "prompt": "a lighthouse", "extra": {"k": [1, 2]}});
    ReceivedRequest::new(body.as_object().cloned().unwrap_or_default())
}

/// The trace a job's submission started.
fn trace() -> Option<TraceParent> {
    TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
}

/// A job of `user_id` and `model` holding 1 credit, accepted by `store` at `at`, with the body
/// it was received with and its trace.
async fn job_of<S: Store>(store: &S, user_id: UserId, model: &str, at: OffsetDateTime) -> Job {
    let rate = Rate { per: Unit::Image, credits: 1, percent: PricePercent::FULL, batch_percent: PricePercent::FULL };
    let (job, _) = Job::accept(JobId::new_at(at), user_id, ModelId::new(model), Modality::Image, input(), rate, at);
    let job = job.with_request(received(model)).with_trace(trace());
    store.accept(job.clone(), None, None, now()).await.expect("accept");
    job
}

/// `job` sent to `provider`, which calls it `key`.
async fn sent_to<S: Store>(store: &S, job: &Job, provider: &str, key: &str) -> Job {
    let job = step(store, job, Trigger::SubmitStarted { next_poll_at: now() }).await;
    let upstream = UpstreamRef::new(provider, key);
    step(store, &job, Trigger::Submitted { upstream, next_poll_at: now(), billing: None }).await
}

async fn found<S: Store>(store: &S, filter: JobFilter, before: Option<JobId>, limit: usize) -> Vec<JobId> {
    store.find_jobs(&filter, before, limit).await.expect("find jobs").iter().map(Job::id).collect()
}

/// Each condition of a filter holds, all of them together, across users; pages run newest first
/// from a cursor, the cursor and the conditions together.
pub async fn jobs_are_found_by_every_filter_newest_first<S: Store>(store: Arc<S>) {
    let limits = Limits { max_concurrent_jobs: 10, ..LIMITS };
    let (ada, bob) = (user_with(&*store, 100, limits).await, user_with(&*store, 100, limits).await);
    let base = now();
    let at = |ms: i64| base + Duration::milliseconds(ms);
    let fal_queued = sent_to(&*store, &job_of(&*store, ada, "nano-banana", at(1)).await, "fal", "r-0").await;
    let failed = sent_to(&*store, &job_of(&*store, bob, "flux-pro", at(2)).await, "replicate", "r-1").await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "x");
    let failed = step(&*store, &failed, Trigger::failed(error)).await;
    let canceled = step(&*store, &job_of(&*store, ada, "flux-pro", at(3)).await, Trigger::Cancel).await;
    let succeeded = sent_to(&*store, &job_of(&*store, bob, "nano-banana", at(4)).await, "fal", "r-3").await;
    let succeeded = step(&*store, &succeeded, success(1)).await;
    let waiting = job_of(&*store, ada, "nano-banana", at(5)).await;
    let [j0, j1, j2, j3, j4] = [&fal_queued, &failed, &canceled, &succeeded, &waiting].map(|job| job.id());

    assert_eq!(found(&*store, JobFilter::default(), None, 10).await, [j4, j3, j2, j1, j0], "every job");
    let of_ada = JobFilter { user_id: Some(ada), ..JobFilter::default() };
    assert_eq!(found(&*store, of_ada.clone(), None, 10).await, [j4, j2, j0]);
    let queued = JobFilter { state: Some(JobState::Queued), ..JobFilter::default() };
    assert_eq!(found(&*store, queued, None, 10).await, [j4, j0], "queued here or at the provider");
    let flux = JobFilter { model: Some(ModelId::new("flux-pro")), ..JobFilter::default() };
    assert_eq!(found(&*store, flux, None, 10).await, [j2, j1]);
    let at_fal = JobFilter { upstream: Some("fal".into()), ..JobFilter::default() };
    assert_eq!(found(&*store, at_fal.clone(), None, 10).await, [j3, j0], "only jobs sent there");
    let at_replicate = JobFilter { upstream: Some("replicate".into()), ..JobFilter::default() };
    assert_eq!(found(&*store, at_replicate, None, 10).await, [j1]);
    let all = JobFilter {
        user_id: Some(ada),
        state: Some(JobState::Queued),
        model: Some(ModelId::new("nano-banana")),
        upstream: Some("fal".into()),
        key: None,
        keys: None,
    };
    assert_eq!(found(&*store, all, None, 10).await, [j0], "every condition at once");
    let none = JobFilter { user_id: Some(bob), state: Some(JobState::Canceled), ..JobFilter::default() };
    assert!(found(&*store, none, None, 10).await.is_empty());
    let unknown = JobFilter { model: Some(ModelId::new("no-such-model")), ..JobFilter::default() };
    assert!(found(&*store, unknown, None, 10).await.is_empty());

    assert_eq!(found(&*store, JobFilter::default(), None, 2).await, [j4, j3]);
    assert_eq!(found(&*store, JobFilter::default(), Some(j3), 2).await, [j2, j1]);
    assert_eq!(found(&*store, JobFilter::default(), Some(j1), 2).await, [j0]);
    assert_eq!(found(&*store, of_ada, Some(j4), 1).await, [j2], "a cursor with a condition");
    assert_eq!(found(&*store, at_fal, Some(j0), 10).await, Vec::<JobId>::new());
    let read = store.find_jobs(&JobFilter::default(), None, 10).await.unwrap();
    assert_eq!(read[1], succeeded, "found jobs read as stored");
}

/// Jobs are found by the key they were submitted with, newest first; a job without a key (from
/// before keys were recorded) by none.
pub async fn jobs_are_found_by_the_key_they_were_submitted_with<S: Store>(store: Arc<S>) {
    let limits = Limits { max_concurrent_jobs: 10, ..LIMITS };
    let ada = user_with(&*store, 100, limits).await;
    let (key, other) = (KeyPrefix::of("gj_0123456789ab"), KeyPrefix::of("gj_ba9876543210"));
    let base = now();
    let mut ids = Vec::new();
    for (ms, prefix) in [(1, Some(&key)), (2, Some(&other)), (3, None), (4, Some(&key))] {
        let at = base + Duration::milliseconds(ms);
        let rate =
            Rate { per: Unit::Image, credits: 1, percent: PricePercent::FULL, batch_percent: PricePercent::FULL };
        let (job, _) =
            Job::accept(JobId::new_at(at), ada, ModelId::new("flux-pro"), Modality::Image, input(), rate, at);
        let job = job.with_key_prefix(prefix.cloned());
        store.accept(job.clone(), None, None, now()).await.expect("accept");
        ids.push(job.id());
    }
    let by_key = JobFilter { key: Some(key), ..JobFilter::default() };
    assert_eq!(found(&*store, by_key.clone(), None, 10).await, [ids[3], ids[0]]);
    assert_eq!(found(&*store, by_key, Some(ids[3]), 10).await, [ids[0]], "with a cursor");
    let by_other = JobFilter { key: Some(other), user_id: Some(ada), ..JobFilter::default() };
    assert_eq!(found(&*store, by_other, None, 10).await, [ids[1]]);
    let read = store.find_jobs(&JobFilter::default(), None, 10).await.expect("find jobs");
    let keys: Vec<Option<&str>> = read.iter().map(|job| job.key_prefix().map(KeyPrefix::as_str)).collect();
    assert_eq!(keys, [Some("gj_0123456789ab"), None, Some("gj_ba9876543210"), Some("gj_0123456789ab")]);
}

/// A job keeps the body it was received with, as received, and its trace, through its
/// transitions; a job accepted without them has neither. A job's ledger is its own records,
/// oldest first.
pub async fn a_job_keeps_its_request_and_trace_and_reads_its_own_ledger<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let job = job_of(&*store, id, "nano-banana", now()).await;
    let other = accepted(&*store, id, 2).await;
    assert_eq!(store.job(job.id()).await.unwrap().expect("stored").request(), Some(&received("nano-banana")));
    assert_eq!(store.job(job.id()).await.unwrap().expect("stored").trace(), trace().as_ref());
    let plain = store.job(other.id()).await.unwrap().expect("stored");
    assert_eq!((plain.request(), plain.trace()), (None, None));
    assert_eq!(
        store.job_ledger(job.id()).await.unwrap().iter().map(|r| r.movement).collect::<Vec<_>>(),
        [LedgerMovement::Hold(Credits::new(1))]
    );

    let sent = sent_to(&*store, &job, "fal", "r-9").await;
    let settled = step(&*store, &sent, success(1)).await;
    assert_eq!(settled.request(), Some(&received("nano-banana")), "kept through every transition");
    assert_eq!(settled.trace(), trace().as_ref());
    assert_eq!(store.job(job.id()).await.unwrap().expect("stored"), settled);
    let records = store.job_ledger(job.id()).await.unwrap();
    let movements: Vec<_> = records.iter().map(|r| r.movement).collect();
    assert_eq!(
        movements,
        [
            LedgerMovement::Hold(Credits::new(1)),
            LedgerMovement::Settle { charged: Credits::new(1), released: Credits::ZERO }
        ]
    );
    assert!(records[0].sequence < records[1].sequence, "oldest first");
    assert!(records.iter().all(|r| r.job_id == Some(job.id())));
    assert_eq!(store.job_ledger(other.id()).await.unwrap().len(), 1, "the other job's hold only");
    assert!(store.job_ledger(new_job(id, 1, now()).id()).await.unwrap().is_empty(), "no such job");
}
