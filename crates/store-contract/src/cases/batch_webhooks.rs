//! A batch's one webhook: recorded by the final commit of its last item, in the same step, once
//! however its last items race, its type as the batch ended; a batch whose items are all final
//! has ended, and is ended no more.

use std::sync::Arc;

use futures_util::future::join_all;
use genjobs_domain::batch::{BatchEnd, BatchState, BatchView};
use genjobs_domain::client_webhooks::{EventId, EventSubject, EventType, WebhookEvent};
use genjobs_domain::ids::BatchId;
use genjobs_domain::job::Trigger;
use genjobs_domain::ports::{ClaimLimits, Commit};
use time::Duration;

use super::batches::{batch_of, created, failure};
use super::{Store, now, step, submitted, success, user};

/// The events recorded for batch `id`.
async fn events_of<S: Store>(store: &S, id: BatchId) -> Vec<WebhookEvent> {
    store.webhook_events(EventId::of(EventSubject::Batch(id))).await.unwrap()
}

/// The batch `id` as `store` reads it.
async fn view<S: Store>(store: &S, id: BatchId) -> BatchView {
    store.batch(id).await.unwrap().expect("kept")
}

/// Only the final commit of a batch's last item records the batch's event: one, for the batch
/// as it then reads, due at once; its items record none; a batch without `webhook_url` records
/// none. A completed batch is ended no more, nor found when its window closes.
pub async fn the_last_items_final_commit_records_the_batchs_one_event<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 100).await;
    let (accepted, items) = created(&*store, batch_of(owner, None, &[10, 10, 10], now())).await;
    let id = accepted.batch.id;
    let first = submitted(&*store, &step(&*store, &items[0], Trigger::Admitted).await).await;
    step(&*store, &first, success(4)).await;
    step(&*store, &items[1], Trigger::Cancel).await;
    assert!(events_of(&*store, id).await.is_empty(), "an item is not final yet");
    let last = step(&*store, &items[2], failure()).await;
    assert!(matches!(store.commit(items[2].apply(Trigger::Cancel, now()).unwrap()).await.unwrap(), Commit::Stale(_)));

    let ended = view(&*store, id).await;
    assert_eq!(ended.state(), BatchState::Completed);
    let events = events_of(&*store, id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!((event.subject, event.user_id), (EventSubject::Batch(id), owner));
    assert_eq!((event.event_type, event.url.as_str()), (EventType::BatchCompleted, "https://hooks.example/batches"));
    assert_eq!(Some(event.occurred_at), ended.finished_at());
    assert_eq!(Some(event.occurred_at), last.finished_at());
    assert_eq!(event.next_attempt_at, Some(event.occurred_at));
    assert!(event.attempts.is_empty() && event.delivered_at.is_none() && event.body.is_none());
    for item in &items {
        assert!(store.webhook_events(EventId::of_job(item.id())).await.unwrap().is_empty(), "items send none");
    }
    let t0 = now() + Duration::seconds(1);
    let claimed = store.claim_due_events(t0, t0 + Duration::seconds(30), ClaimLimits::up_to(10)).await.unwrap();
    assert_eq!(claimed.iter().map(|e| e.subject).collect::<Vec<_>>(), [EventSubject::Batch(id)]);

    let later = now() + Duration::days(2);
    let kept = store.end_batch(id, BatchEnd::Canceled, now()).await.unwrap().expect("kept");
    assert_eq!(kept.ended, None, "a completed batch has ended");
    assert_eq!(view(&*store, id).await.state(), BatchState::Completed);
    assert!(!store.batches_past_window(later, 10).await.unwrap().contains(&id), "its window closes on nothing");

    let (mut quiet, quiet_items) = batch_of(owner, None, &[1], now());
    quiet.webhook_url = None;
    let (quiet, quiet_items) = created(&*store, (quiet, quiet_items)).await;
    step(&*store, &quiet_items[0], Trigger::Cancel).await;
    assert_eq!(view(&*store, quiet.batch.id).await.state(), BatchState::Completed);
    assert!(events_of(&*store, quiet.batch.id).await.is_empty(), "no webhook_url, no event");
}

/// Items that become final at once, each in a commit of its own, record their batch's event
/// exactly once.
pub async fn racing_last_items_record_one_batch_event<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 1_000).await;
    for round in 0..4 {
        let at = now() + Duration::milliseconds(round);
        let (accepted, items) = created(&*store, batch_of(owner, None, &[1; 6], at)).await;
        let commits = items.into_iter().enumerate().map(|(index, item)| {
            let store = Arc::clone(&store);
            let trigger = if index % 2 == 0 { Trigger::Cancel } else { failure() };
            tokio::spawn(async move { store.commit(item.apply(trigger, now()).unwrap()).await.unwrap() })
        });
        for commit in join_all(commits).await {
            assert!(matches!(commit.unwrap(), Commit::Applied(_)));
        }
        let id = accepted.batch.id;
        assert_eq!(view(&*store, id).await.state(), BatchState::Completed);
        let events = events_of(&*store, id).await;
        assert_eq!(events.len(), 1, "round {round}: {events:?}");
        assert_eq!(events[0].event_type, EventType::BatchCompleted);
    }
    let t0 = now() + Duration::seconds(1);
    let claimed = store.claim_due_events(t0, t0 + Duration::seconds(30), ClaimLimits::up_to(100)).await.unwrap();
    assert_eq!(claimed.len(), 4, "one event per batch, none per item: {claimed:?}");
}

/// A canceled batch's event is `batch.canceled`, an expired one's `batch.expired`, recorded when
/// the last item becomes final after the end, at the later of the two; a batch not ended whose
/// last item becomes final after its window closed has expired too.
pub async fn a_canceled_or_expired_batchs_event_says_how_it_ended<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 100).await;
    for (end, event_type) in
        [(BatchEnd::Canceled, EventType::BatchCanceled), (BatchEnd::Expired, EventType::BatchExpired)]
    {
        let (accepted, items) = created(&*store, batch_of(owner, None, &[1, 1], now())).await;
        let id = accepted.batch.id;
        let first = step(&*store, &items[0], Trigger::Cancel).await;
        let ended_at = first.finished_at().or(first.canceled_at()).expect("final") + Duration::hours(1);
        store.end_batch(id, end, ended_at).await.unwrap();
        assert!(events_of(&*store, id).await.is_empty(), "an item is not final yet");
        step(&*store, &items[1], failure()).await;
        let events = events_of(&*store, id).await;
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].event_type, event_type);
        assert_eq!(events[0].occurred_at, ended_at, "ended after its items, the batch ends then");
        assert_eq!(Some(events[0].occurred_at), view(&*store, id).await.finished_at());
    }
    let (mut late, items) = batch_of(owner, None, &[1], now());
    late.expires_at = now() - Duration::seconds(1);
    let (late, items) = created(&*store, (late, items)).await;
    step(&*store, &items[0], failure()).await;
    assert_eq!(view(&*store, late.batch.id).await.state(), BatchState::Expired);
    let events = events_of(&*store, late.batch.id).await;
    assert_eq!(events.iter().map(|e| e.event_type).collect::<Vec<_>>(), [EventType::BatchExpired]);
}
