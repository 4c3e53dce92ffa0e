//! Batches: accepted whole against the sum of their items' holds, one ledger hold per item and no
//! active job; their figures and state summed from their items; an item counted against its
//! owner's limit only once admitted, admitted only under it, and never refusing a job submitted
//! on its own; their items paged in order; ended once; found when their window closed; and the
//! items a wake makes due.

use std::collections::BTreeMap;
use std::sync::Arc;

use genjobs_domain::batch::{Batch, BatchEnd, BatchState, BatchView};
use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{BatchId, JobId, KeyPrefix, ModelId, UserId};
use genjobs_domain::job::{BatchPlace, Job, JobError, JobErrorCode, JobState, Trigger};
use genjobs_domain::keys::{BudgetPeriod, KeySettings};
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{
    AcceptError, Accepted, BatchAccepted, BatchFilter, Commit, IdempotencyClaim, LedgerMovement,
};
use time::{Duration, OffsetDateTime};

use super::{
    LIMITS, Limits, Store, accepted, b, balances, budget, input, key_with, keyed_job, new_job, now, started_lease,
    step, submitted, success, user, user_with,
};

/// The batch price of the suite's items.
fn half() -> PricePercent {
    PricePercent::new(50).expect("a percent")
}

/// A batch of `user_id` accepted at `at` with the key `key`, its items holding `holds` in order
/// (at half the price of a rate of twice as much), named `item-0`, `item-1`, ….
pub fn batch_of(user_id: UserId, key: Option<&KeyPrefix>, holds: &[u64], at: OffsetDateTime) -> (Batch, Vec<Job>) {
    let id = BatchId::new_at(at);
    let mut ids: Vec<JobId> = holds.iter().map(|_| JobId::new_at(at)).collect();
    ids.sort();
    let items = ids
        .into_iter()
        .zip(holds)
        .enumerate()
        .map(|(index, (job_id, held))| {
            let rate = Rate { per: Unit::Image, credits: held * 2, percent: PricePercent::FULL, batch_percent: half() };
            let (job, _) =
                Job::accept(job_id, user_id, ModelId::new("nano-banana"), Modality::Image, input(), rate, at);
            let place = BatchPlace { batch_id: id, custom_id: format!("item-{index}"), admitted: false };
            job.with_batch(place, at + Duration::days(1)).with_key_prefix(key.cloned())
        })
        .collect();
    let batch = Batch {
        id,
        user_id,
        key_prefix: key.cloned(),
        created_at: at,
        expires_at: at + Duration::days(1),
        webhook_url: Some("https://hooks.example/batches".into()),
        metadata: BTreeMap::from([("team".to_owned(), "render".to_owned())]),
        ended: None,
    };
    (batch, items)
}

/// `batch` and its `items`, accepted by `store`.
pub(crate) async fn created<S: Store>(store: &S, (batch, items): (Batch, Vec<Job>)) -> (BatchView, Vec<Job>) {
    match store.accept_batch(batch, items.clone(), None, now()).await {
        Ok(BatchAccepted::Created(view)) => (view, items),
        other => panic!("expected a created batch, got {other:?}"),
    }
}

/// `item` admitted, committed to `store`.
async fn admitted<S: Store>(store: &S, item: &Job) -> Job {
    step(store, item, Trigger::Admitted).await
}

fn ids(jobs: &[Job]) -> Vec<JobId> {
    jobs.iter().map(Job::id).collect()
}

pub(crate) fn failure() -> Trigger {
    Trigger::failed(JobError::new(JobErrorCode::UpstreamFailed, "boom"))
}

/// A batch holds the sum of its items' holds, each with a ledger hold of its own, and counts no
/// active job; its items are kept as given (their place and batch price included) and it reads
/// back as it was answered.
pub async fn a_batch_holds_the_sum_with_a_hold_per_item_and_no_active_job<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 100).await;
    let (view, items) = created(&*store, batch_of(owner, None, &[10, 20, 5], now())).await;
    assert_eq!(view.figures.credits_held, Credits::new(35));
    assert_eq!((view.figures.counts.total, view.figures.counts.queued), (3, 3));
    assert_eq!(view.state(), BatchState::InProgress);
    assert_eq!(balances(&*store, owner).await, (b(65, 35, 0), 0), "no item is active before its admission");
    let holds: Vec<(Option<JobId>, LedgerMovement)> = store
        .ledger(owner, None, None, 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|record| matches!(record.movement, LedgerMovement::Hold(_)))
        .map(|record| (record.job_id, record.movement))
        .collect();
    assert_eq!(holds.len(), 3, "one hold per item: {holds:?}");
    for item in &items {
        assert!(holds.contains(&(Some(item.id()), LedgerMovement::Hold(item.credits_held()))), "{holds:?}");
        assert_eq!(store.job(item.id()).await.unwrap().as_ref(), Some(item), "kept as given");
    }
    assert_eq!(store.batch(view.batch.id).await.unwrap(), Some(view.clone()));
    assert_eq!(store.batch_record(view.batch.id).await.unwrap(), Some(view.batch.clone()));
    assert_eq!(store.batch(BatchId::new_at(now())).await.unwrap(), None);
}

/// A batch its owner's credits or its key's budget cannot cover is refused whole: nothing held,
/// nothing kept. One they cover counts against the key's budget as its jobs would.
pub async fn a_batch_beyond_the_credits_or_a_keys_budget_is_refused_whole<S: Store>(store: Arc<S>) {
    let poor = user(&*store, 30).await;
    let (batch, items) = batch_of(poor, None, &[10, 10, 15], now());
    let refused = store.accept_batch(batch.clone(), items.clone(), None, now()).await;
    let needed = Credits::new(35);
    assert_eq!(refused, Err(AcceptError::InsufficientCredits { needed, available: Credits::new(30) }));
    assert_eq!(balances(&*store, poor).await, (b(30, 0, 0), 0));
    assert_eq!(store.batch(batch.id).await.unwrap(), None);
    assert_eq!(store.job(items[0].id()).await.unwrap(), None);

    let owner = user(&*store, 100).await;
    let key = key_with(&*store, owner, budget(30, BudgetPeriod::Total)).await;
    let (batch, items) = batch_of(owner, Some(&key), &[10, 25], now());
    match store.accept_batch(batch, items, None, now()).await {
        Err(AcceptError::KeyBudgetExceeded(exceeded)) => assert_eq!(exceeded.cost, Credits::new(35)),
        other => panic!("expected the key's budget to refuse the batch, got {other:?}"),
    }
    assert_eq!(balances(&*store, owner).await, (b(100, 0, 0), 0));
    assert_eq!(store.key_used(&key, None).await.unwrap(), Credits::ZERO);

    created(&*store, batch_of(owner, Some(&key), &[10, 15], now())).await;
    assert_eq!(store.key_used(&key, None).await.unwrap(), Credits::new(25));
    let over = store.accept(keyed_job(owner, &key, 6), None, None, now()).await;
    assert!(matches!(over, Err(AcceptError::KeyBudgetExceeded(_))), "{over:?}");
    assert!(matches!(store.accept(keyed_job(owner, &key, 5), None, None, now()).await, Ok(Accepted::Created(_))));
}

/// The same idempotency key and body answers the first batch and holds nothing more; another
/// body conflicts.
pub async fn an_idempotent_batch_retry_replays_it_and_another_body_conflicts<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 100).await;
    let claim = |fingerprint: &str| Some(IdempotencyClaim { key: "nightly".into(), fingerprint: fingerprint.into() });
    let (batch, items) = batch_of(owner, None, &[10, 10], now());
    let first = match store.accept_batch(batch, items, claim("f1"), now()).await {
        Ok(BatchAccepted::Created(view)) => view,
        other => panic!("{other:?}"),
    };
    let (again, again_items) = batch_of(owner, None, &[10, 10], now());
    let retry = store.accept_batch(again.clone(), again_items, claim("f1"), now()).await;
    assert_eq!(retry, Ok(BatchAccepted::Replayed(first)));
    let (other, other_items) = batch_of(owner, None, &[10], now());
    assert_eq!(store.accept_batch(other, other_items, claim("f2"), now()).await, Err(AcceptError::IdempotencyConflict));
    assert_eq!(balances(&*store, owner).await, (b(80, 20, 0), 0), "held once");
    assert_eq!(store.batch(again.id).await.unwrap(), None);
}

/// A batch's figures follow its items (admitted, sent, succeeded, canceled, failed), and its
/// state becomes final once every item is, as it was ended if it was.
pub async fn a_batchs_figures_and_state_follow_its_items<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 100).await;
    let (view, items) = created(&*store, batch_of(owner, None, &[10, 10, 10], now())).await;
    let first = submitted(&*store, &admitted(&*store, &items[0]).await).await;
    assert_eq!(balances(&*store, owner).await.1, 1, "an admitted item is active");
    let succeeded = step(&*store, &first, success(4)).await;
    step(&*store, &items[1], Trigger::Cancel).await;
    let figures = store.batch(view.batch.id).await.unwrap().expect("kept").figures;
    assert_eq!(
        (figures.counts.succeeded, figures.counts.canceled, figures.counts.queued, figures.counts.total),
        (1, 1, 1, 3)
    );
    assert_eq!((figures.credits_held, figures.credits_spent), (Credits::new(30), Credits::new(4)));
    assert_eq!(figures.started_at, first.sent_at());

    let ended_at = now();
    store.end_batch(view.batch.id, BatchEnd::Canceled, ended_at).await.unwrap();
    assert_eq!(store.batch(view.batch.id).await.unwrap().expect("kept").state(), BatchState::InProgress);
    let failed = step(&*store, &items[2], failure()).await;
    let done = store.batch(view.batch.id).await.unwrap().expect("kept");
    assert_eq!(done.state(), BatchState::Canceled);
    assert_eq!(done.figures.counts.failed, 1);
    assert_eq!(done.figures.last_finished_at, failed.finished_at().max(succeeded.finished_at()));
    assert_eq!(balances(&*store, owner).await, (b(96, 0, 4), 0));
}

/// An item is admitted only while its owner is under the limit (nothing written otherwise, and a
/// stale admission is stale first); admitted items never refuse a job submitted on its own, and
/// stop counting once final.
pub async fn an_item_is_admitted_only_under_its_owners_limit<S: Store>(store: Arc<S>) {
    let owner = user_with(&*store, 100, Limits { max_concurrent_jobs: 2, ..LIMITS }).await;
    let (_, items) = created(&*store, batch_of(owner, None, &[1, 1, 1], now())).await;
    let first = admitted(&*store, &items[0]).await;
    admitted(&*store, &items[1]).await;
    assert_eq!(balances(&*store, owner).await.1, 2);
    match store.commit(items[2].apply(Trigger::Admitted, now()).unwrap()).await.unwrap() {
        Commit::OwnerAtLimit(current) => assert_eq!(current, items[2]),
        other => panic!("expected the owner's limit to keep the item waiting, got {other:?}"),
    }
    assert_eq!(store.job(items[2].id()).await.unwrap().as_ref(), Some(&items[2]), "nothing written");
    assert_eq!(balances(&*store, owner).await.1, 2, "nothing counted");
    match store.commit(items[0].apply(Trigger::Admitted, now()).unwrap()).await.unwrap() {
        Commit::Stale(current) => assert_eq!(current, first),
        other => panic!("expected a stale admission, got {other:?}"),
    }

    accepted(&*store, owner, 1).await;
    accepted(&*store, owner, 1).await;
    assert_eq!(balances(&*store, owner).await.1, 4, "admitted items refuse no job of its own");
    let refused = store.accept(new_job(owner, 1, now()), None, None, now()).await;
    assert_eq!(refused, Err(AcceptError::ConcurrencyLimit { limit: 2 }));
    step(&*store, &first, Trigger::Cancel).await;
    assert_eq!(balances(&*store, owner).await.1, 3);
    let refused = store.accept(new_job(owner, 1, now()), None, None, now()).await;
    assert_eq!(refused, Err(AcceptError::ConcurrencyLimit { limit: 2 }), "the final item counts no more as admitted");
}

/// A key's concurrency limit counts no batch item, admitted or not.
pub async fn a_keys_concurrency_limit_counts_no_batch_item<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 100).await;
    let key = key_with(&*store, owner, KeySettings { max_concurrent_jobs: Some(1), ..KeySettings::default() }).await;
    let (_, items) = created(&*store, batch_of(owner, Some(&key), &[1, 1], now())).await;
    admitted(&*store, &items[0]).await;
    let own = store.accept(keyed_job(owner, &key, 1), None, None, now()).await;
    assert!(matches!(own, Ok(Accepted::Created(_))), "{own:?}");
    let second = store.accept(keyed_job(owner, &key, 1), None, None, now()).await;
    assert_eq!(second, Err(AcceptError::KeyConcurrencyLimit { limit: 1 }));
}

/// A batch's items are paged in its order, after a cursor, by state or final ones only.
pub async fn a_batchs_items_are_paged_in_order_by_state<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 100).await;
    let (view, items) = created(&*store, batch_of(owner, None, &[1, 1, 1, 1, 1], now())).await;
    let id = view.batch.id;
    step(&*store, &items[1], Trigger::Cancel).await;
    step(&*store, &items[3], failure()).await;
    let page = store.batch_items(id, None, false, None, 2).await.unwrap();
    assert_eq!(ids(&page), ids(&items[..2]));
    let next = store.batch_items(id, None, false, Some(items[1].id()), 2).await.unwrap();
    assert_eq!(ids(&next), ids(&items[2..4]));
    let canceled = store.batch_items(id, Some(JobState::Canceled), false, None, 10).await.unwrap();
    assert_eq!(ids(&canceled), [items[1].id()]);
    let finals = store.batch_items(id, None, true, None, 10).await.unwrap();
    assert_eq!(ids(&finals), [items[1].id(), items[3].id()]);
    let queued = store.batch_items(id, Some(JobState::Queued), false, Some(items[0].id()), 10).await.unwrap();
    assert_eq!(ids(&queued), [items[2].id(), items[4].id()]);
    assert!(store.batch_items(BatchId::new_at(now()), None, false, None, 10).await.unwrap().is_empty());
}

/// The first end of a batch stays; the batches whose window closed and that were not ended are
/// found oldest first.
pub async fn the_first_end_stays_and_closed_windows_are_found<S: Store>(store: Arc<S>) {
    let owner = user(&*store, 100).await;
    let base = now();
    let mut past = Vec::new();
    for ms in [1, 2] {
        let (mut batch, items) = batch_of(owner, None, &[1], base - Duration::days(2) + Duration::milliseconds(ms));
        batch.expires_at = base - Duration::seconds(1);
        past.push(created(&*store, (batch, items)).await.0.batch.id);
    }
    created(&*store, batch_of(owner, None, &[1], base)).await;
    assert_eq!(store.batches_past_window(base, 10).await.unwrap(), past);
    assert_eq!(store.batches_past_window(base, 1).await.unwrap(), past[..1]);

    let (expired_at, canceled_at) = (base, base + Duration::seconds(1));
    let ended = store.end_batch(past[0], BatchEnd::Expired, expired_at).await.unwrap().expect("kept");
    assert_eq!(ended.ended, Some((BatchEnd::Expired, expired_at)));
    let again = store.end_batch(past[0], BatchEnd::Canceled, canceled_at).await.unwrap().expect("kept");
    assert_eq!(again.ended, Some((BatchEnd::Expired, expired_at)), "the first end stays");
    assert_eq!(store.batch_record(past[0]).await.unwrap(), Some(again));
    assert_eq!(store.batches_past_window(base, 10).await.unwrap(), past[1..]);
    assert_eq!(store.end_batch(BatchId::new_at(base), BatchEnd::Canceled, base).await.unwrap(), None);
}

/// Batches are listed newest first, before a cursor, by owner and by state.
pub async fn batches_are_listed_newest_first_by_owner_and_state<S: Store>(store: Arc<S>) {
    let (ada, bob) = (user(&*store, 100).await, user(&*store, 100).await);
    let base = now();
    let (done, done_items) = created(&*store, batch_of(ada, None, &[1], base)).await;
    step(&*store, &done_items[0], Trigger::Cancel).await;
    let (running, _) = created(&*store, batch_of(ada, None, &[1], base + Duration::milliseconds(1))).await;
    let (other, _) = created(&*store, batch_of(bob, None, &[1], base + Duration::milliseconds(2))).await;
    let listed = |filter: BatchFilter, before: Option<BatchId>, limit: usize| {
        let store = Arc::clone(&store);
        async move {
            let found = store.find_batches(filter, before, limit).await.unwrap();
            found.into_iter().map(|view| view.batch.id).collect::<Vec<_>>()
        }
    };
    let (done, running, other) = (done.batch.id, running.batch.id, other.batch.id);
    assert_eq!(listed(BatchFilter::default(), None, 10).await, [other, running, done]);
    assert_eq!(listed(BatchFilter::default(), None, 1).await, [other]);
    let of_ada = BatchFilter { user_id: Some(ada), state: None };
    assert_eq!(listed(of_ada, None, 10).await, [running, done]);
    assert_eq!(listed(of_ada, Some(running), 10).await, [done]);
    let completed = BatchFilter { user_id: None, state: Some(BatchState::Completed) };
    assert_eq!(listed(completed, None, 10).await, [done]);
    let in_progress = BatchFilter { user_id: Some(ada), state: Some(BatchState::InProgress) };
    assert_eq!(listed(in_progress, None, 10).await, [running]);
    let found = store.find_batches(of_ada, None, 10).await.unwrap();
    assert_eq!(found[0], store.batch(running).await.unwrap().expect("kept"), "with its figures");
}

/// The items a wake makes due: each owner's first waiting items in its batches' order, as many
/// as its room under the limit, and every unsent item of a batch that was ended (to be ended, so
/// no room is needed), at most as many as asked in all. Waiting items rest until their window
/// closes: no claim takes them before a wake, and a wake's items are claimable at once.
pub async fn a_wake_makes_each_owners_first_items_within_its_room_due<S: Store>(store: Arc<S>) {
    let base = now();
    let at = |ms: i64| base + Duration::milliseconds(ms);
    let xavier = user_with(&*store, 100, Limits { max_concurrent_jobs: 2, ..LIMITS }).await;
    let yves = user_with(&*store, 100, Limits { max_concurrent_jobs: 3, ..LIMITS }).await;
    let zoe = user_with(&*store, 100, Limits { max_concurrent_jobs: 1, ..LIMITS }).await;
    let (_, x1) = created(&*store, batch_of(xavier, None, &[1, 1, 1], at(1))).await;
    let (_, x2) = created(&*store, batch_of(xavier, None, &[1, 1], at(2))).await;
    let (_, y1) = created(&*store, batch_of(yves, None, &[1, 1, 1], at(3))).await;
    accepted(&*store, yves, 1).await;
    let (_, z1) = created(&*store, batch_of(zoe, None, &[1], at(4))).await;
    accepted(&*store, zoe, 1).await;
    let (ended, e1) = created(&*store, batch_of(zoe, None, &[1], at(5))).await;
    store.end_batch(ended.batch.id, BatchEnd::Canceled, at(6)).await.unwrap();
    let claimer = started_lease(&*store, at(7), at(7) + Duration::minutes(5)).await;
    let claimed = |t: OffsetDateTime| {
        let store = Arc::clone(&store);
        async move {
            let mut ids: Vec<JobId> = store.claim_due(claimer, t, 100).await.unwrap().iter().map(Job::id).collect();
            ids.sort();
            ids
        }
    };
    let waiting: Vec<JobId> = [&x1, &x2, &y1, &z1, &e1].into_iter().flatten().map(Job::id).collect();
    let unclaimed = claimed(at(8)).await;
    assert!(unclaimed.iter().all(|id| !waiting.contains(id)), "waiting items rest until woken: {unclaimed:?}");

    let woken = store.wake_admissible(at(9), 3).await.unwrap();
    assert_eq!(woken, [x1[0].id(), x1[1].id(), y1[0].id()], "at most as many as asked");
    let woken = store.wake_admissible(at(9), 100).await.unwrap();
    assert_eq!(
        woken,
        [x1[0].id(), x1[1].id(), y1[0].id(), y1[1].id(), e1[0].id()],
        "the canceled batch's item though its owner has no room"
    );
    assert_eq!(claimed(at(10)).await, woken, "each woken item is due, and only those");
    admitted(&*store, &x1[0]).await;
    step(&*store, &x1[1], Trigger::Cancel).await;
    step(&*store, &e1[0], Trigger::Cancel).await;
    let after = store.wake_admissible(at(11), 100).await.unwrap();
    assert_eq!(after, [x1[2].id(), y1[0].id(), y1[1].id()], "room 1 left, the canceled items gone; held ones count");
    assert!(!after.contains(&x2[0].id()) && !after.contains(&z1[0].id()));
    assert_eq!(claimed(at(12)).await, [x1[2].id()], "the items a driver holds stay its own");
    let parked = Trigger::AwaitCapacity { next_poll_at: at(1) + Duration::days(1) };
    step(&*store, &x1[2], parked).await;
    assert!(claimed(at(13)).await.is_empty(), "parked by its driver, it rests");
    assert_eq!(store.wake_admissible(at(14), 100).await.unwrap(), [x1[2].id(), y1[0].id(), y1[1].id()]);
    assert_eq!(claimed(at(15)).await, [x1[2].id()], "woken, it is free of the lease that parked it");
}

/// A wake is advice that never takes an item from the driver holding it: an item claimed since
/// an earlier wake is due by that wake's time, and a wake whose time is older (a replica's that
/// waited for its connection) leaves it under its driver's lease, for no second driver to claim
/// and send it again.
pub async fn a_wake_older_than_a_claim_leaves_the_item_with_its_driver<S: Store>(store: Arc<S>) {
    let base = now();
    let at = |ms: i64| base + Duration::milliseconds(ms);
    let owner = user_with(&*store, 100, Limits { max_concurrent_jobs: 2, ..LIMITS }).await;
    let (_, items) = created(&*store, batch_of(owner, None, &[1], at(1))).await;
    let first = started_lease(&*store, at(2), at(2) + Duration::minutes(5)).await;
    let second = started_lease(&*store, at(2), at(2) + Duration::minutes(5)).await;
    assert_eq!(store.wake_admissible(at(9), 10).await.unwrap(), ids(&items));
    let claimed: Vec<JobId> = store.claim_due(first, at(10), 10).await.unwrap().iter().map(Job::id).collect();
    assert_eq!(claimed, ids(&items), "woken, the item is claimed");

    assert_eq!(store.wake_admissible(at(5), 10).await.unwrap(), ids(&items), "still waiting for admission");
    assert!(store.claim_due(second, at(11), 10).await.unwrap().is_empty(), "the older wake took it from no driver");
    assert_eq!(store.wake_admissible(at(12), 10).await.unwrap(), ids(&items));
    assert!(store.claim_due(second, at(13), 10).await.unwrap().is_empty(), "nor does a later one");
}
