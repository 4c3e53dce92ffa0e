//! The outbox of client webhooks: a job's final commit records its event in the same step, once;
//! dispatchers claim due events under a lease; attempts, redeliveries and secrets are kept.

use std::sync::Arc;

use genjobs_domain::address::destination_host;
use genjobs_domain::client_webhooks::{Attempt, EventId, EventSubject, EventType};
use genjobs_domain::ids::UserId;
use genjobs_domain::job::{Job, Trigger};
use genjobs_domain::ports::{Accepted, ClaimLimits, Commit};
use time::Duration;

use super::{Store, new_job, now, step, submitted, success, user};

const HOOK: &str = "https://hooks.example.com/genjobs?token=1";

async fn accepted_with_hook<S: Store>(store: &S, user_id: UserId, url: Option<&str>) -> Job {
    let job = new_job(user_id, 10, now()).with_webhook_url(url.map(str::to_owned));
    match store.accept(job, None, None, now()).await {
        Ok(Accepted::Created(job)) => job,
        other => panic!("expected a created job, got {other:?}"),
    }
}

async fn succeeded_with_hook<S: Store>(store: &S) -> Job {
    let id = user(store, 100).await;
    let job = submitted(store, &accepted_with_hook(store, id, Some(HOOK)).await).await;
    step(store, &job, success(7)).await
}

fn failed(at: time::OffsetDateTime) -> Attempt {
    Attempt { at, status: Some(500), error: Some("HTTP 500".into()) }
}

/// Only the final commit of a job with a `webhook_url` records an event, exactly once, with the
/// job's end time, due at once; a stale commit records nothing.
pub async fn a_final_commit_records_one_webhook_event<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let job = accepted_with_hook(&*store, id, Some(HOOK)).await;
    assert_eq!(store.job(job.id()).await.unwrap().unwrap().webhook_url(), Some(HOOK));
    let running = submitted(&*store, &job).await;
    assert!(store.webhook_events(EventId::of_job(job.id())).await.unwrap().is_empty(), "not final yet");
    let canceled = step(&*store, &running, Trigger::Cancel).await;
    assert!(matches!(store.commit(running.apply(success(3), now()).unwrap()).await.unwrap(), Commit::Stale(_)));
    let events = store.webhook_events(EventId::of_job(job.id())).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(
        (event.subject, event.user_id, event.event_type),
        (EventSubject::Job(job.id()), id, EventType::Canceled)
    );
    assert_eq!((event.url.as_str(), Some(event.occurred_at)), (HOOK, canceled.finished_at()));
    assert_eq!(event.next_attempt_at, Some(event.occurred_at));
    assert!(event.attempts.is_empty() && event.delivered_at.is_none() && event.body.is_none());

    let quiet = submitted(&*store, &accepted_with_hook(&*store, id, None).await).await;
    step(&*store, &quiet, success(2)).await;
    assert!(store.webhook_events(EventId::of_job(quiet.id())).await.unwrap().is_empty(), "no webhook_url, no event");
}

/// A due event is claimed by one dispatcher until its lease runs out or it is handed back.
pub async fn webhook_events_are_claimed_once_until_their_lease_ends<S: Store>(store: Arc<S>) {
    let job = succeeded_with_hook(&*store).await;
    let t0 = now() + Duration::seconds(1);
    let lease = t0 + Duration::seconds(30);
    let claimed = store.claim_due_events(t0, lease, ClaimLimits::up_to(10)).await.unwrap();
    assert_eq!(claimed.iter().map(|e| e.subject).collect::<Vec<_>>(), vec![EventSubject::Job(job.id())]);
    assert!(store.claim_due_events(t0, lease, ClaimLimits::up_to(10)).await.unwrap().is_empty(), "leased");
    assert_eq!(store.outbox_state().await.unwrap().next_claimable_at, Some(lease));
    let after = lease + Duration::seconds(1);
    assert_eq!(
        store.claim_due_events(after, after + Duration::seconds(30), ClaimLimits::up_to(10)).await.unwrap().len(),
        1
    );

    let back = after + Duration::seconds(40);
    store.defer_events(vec![EventId::of_job(job.id())], back).await.unwrap();
    assert!(
        store.claim_due_events(back - Duration::seconds(1), back, ClaimLimits::up_to(10)).await.unwrap().is_empty()
    );
    assert_eq!(
        store.claim_due_events(back, back + Duration::seconds(30), ClaimLimits::up_to(10)).await.unwrap().len(),
        1
    );
}

/// A claim takes no more events of a host than its free slots, and takes other hosts' events
/// past those of a host at its limit; hosts are named as `destination_host` names them.
pub async fn a_claim_leaves_hosts_at_their_limit_alone<S: Store>(store: Arc<S>) {
    let id = user(&*store, 100).await;
    let busy_url = "https://User:pw@Busy.Example.com:8443/hook?n=1";
    let busy = destination_host(busy_url);
    let mut busy_jobs = Vec::new();
    for _ in 0..3 {
        let job = submitted(&*store, &accepted_with_hook(&*store, id, Some(busy_url)).await).await;
        busy_jobs.push(step(&*store, &job, success(1)).await.id());
    }
    let other = submitted(&*store, &accepted_with_hook(&*store, id, Some(HOOK)).await).await;
    let other = step(&*store, &other, success(1)).await.id();
    let t0 = now() + Duration::seconds(1);
    let lease = t0 + Duration::seconds(30);

    let at_limit = ClaimLimits { total: 10, per_host: 2, in_flight: [(busy.clone(), 2)].into() };
    let claimed: Vec<_> =
        store.claim_due_events(t0, lease, at_limit).await.unwrap().iter().map(|e| e.subject).collect();
    assert_eq!(
        claimed,
        vec![EventSubject::Job(other)],
        "the busy host's events wait, the other host's is taken past them"
    );

    let one_free = ClaimLimits { total: 10, per_host: 2, in_flight: [(busy.clone(), 1)].into() };
    let claimed = store.claim_due_events(t0, lease, one_free).await.unwrap();
    assert_eq!(
        claimed.iter().map(|e| e.subject).collect::<Vec<_>>(),
        vec![EventSubject::Job(busy_jobs[0])],
        "one free slot, the earliest"
    );

    let idle = ClaimLimits { total: 1, per_host: 2, in_flight: Default::default() };
    assert_eq!(store.claim_due_events(t0, lease, idle.clone()).await.unwrap().len(), 1, "the total caps the claim");
    assert_eq!(store.claim_due_events(t0, lease, idle).await.unwrap().len(), 1);
    assert!(store.claim_due_events(t0, lease, ClaimLimits::up_to(10)).await.unwrap().is_empty(), "all leased");
}

/// Attempts are appended; a failed one schedules the next, a delivered one ends the schedule; the
/// first body kept is the body for good.
pub async fn webhook_attempts_are_recorded_and_a_delivery_ends_them<S: Store>(store: Arc<S>) {
    let job = succeeded_with_hook(&*store).await;
    let t0 = now() + Duration::seconds(1);
    store.claim_due_events(t0, t0 + Duration::seconds(30), ClaimLimits::up_to(10)).await.unwrap();
    assert_eq!(store.fix_event_body(EventId::of_job(job.id()), b"first".to_vec()).await.unwrap(), b"first");
    assert_eq!(store.fix_event_body(EventId::of_job(job.id()), b"second".to_vec()).await.unwrap(), b"first");
    let retry_at = t0 + Duration::seconds(5);
    store.record_attempt(EventId::of_job(job.id()), failed(t0), Some(retry_at)).await.unwrap();
    let state = store.outbox_state().await.unwrap();
    assert_eq!(state.next_claimable_at, Some(retry_at), "the lease ended with the attempt");
    assert!(state.oldest_pending_since.is_some());
    assert!(
        store
            .claim_due_events(retry_at - Duration::seconds(1), retry_at, ClaimLimits::up_to(10))
            .await
            .unwrap()
            .is_empty()
    );
    let again =
        store.claim_due_events(retry_at, retry_at + Duration::seconds(30), ClaimLimits::up_to(10)).await.unwrap();
    assert_eq!(again[0].body.as_deref(), Some(&b"first"[..]));
    assert_eq!(again[0].attempts, vec![failed(t0)]);

    let delivered = Attempt { at: retry_at, status: Some(204), error: None };
    store.record_attempt(EventId::of_job(job.id()), delivered.clone(), None).await.unwrap();
    let event = store.webhook_events(EventId::of_job(job.id())).await.unwrap().remove(0);
    assert_eq!(event.attempts, vec![failed(t0), delivered]);
    assert_eq!((event.delivered_at, event.next_attempt_at), (Some(retry_at), None));
    assert_eq!(store.outbox_state().await.unwrap().next_claimable_at, None);
    assert!(
        store
            .claim_due_events(retry_at + Duration::days(2), retry_at + Duration::days(3), ClaimLimits::up_to(10))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A redelivery makes a delivered or given-up event due again, keeping its attempts and body.
pub async fn a_redelivered_webhook_event_is_due_again<S: Store>(store: Arc<S>) {
    let job = succeeded_with_hook(&*store).await;
    let t0 = now() + Duration::seconds(1);
    store.claim_due_events(t0, t0 + Duration::seconds(30), ClaimLimits::up_to(10)).await.unwrap();
    store.fix_event_body(EventId::of_job(job.id()), b"body".to_vec()).await.unwrap();
    store.record_attempt(EventId::of_job(job.id()), failed(t0), None).await.unwrap();
    assert!(
        store
            .claim_due_events(t0 + Duration::days(9), t0 + Duration::days(10), ClaimLimits::up_to(10))
            .await
            .unwrap()
            .is_empty()
    );
    let t1 = t0 + Duration::seconds(2);
    assert!(store.redeliver(EventId::of_job(job.id()), t1).await.unwrap());
    let other = new_job(job.user_id(), 1, now());
    assert!(!store.redeliver(EventId::of_job(other.id()), t1).await.unwrap(), "no such event");
    let claimed = store.claim_due_events(t1, t1 + Duration::seconds(30), ClaimLimits::up_to(10)).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!((claimed[0].attempts.len(), claimed[0].body.as_deref()), (1, Some(&b"body"[..])));
}

/// A user's first secret is kept against a concurrent first; a rotation replaces it.
pub async fn webhook_secrets_are_made_once_and_replaced_on_rotation<S: Store>(store: Arc<S>) {
    let id = user(&*store, 1).await;
    assert_eq!(store.webhook_secret(id).await.unwrap(), None);
    assert_eq!(store.keep_webhook_secret(id, b"one".to_vec(), false).await.unwrap(), b"one");
    assert_eq!(store.keep_webhook_secret(id, b"two".to_vec(), false).await.unwrap(), b"one", "the first wins");
    assert_eq!(store.keep_webhook_secret(id, b"three".to_vec(), true).await.unwrap(), b"three");
    assert_eq!(store.webhook_secret(id).await.unwrap().as_deref(), Some(&b"three"[..]));
}
