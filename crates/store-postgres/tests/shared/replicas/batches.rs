//! Batches under load and races: the largest batch accepted in one transaction with its items and
//! holds written by one statement, and admissions racing on two replicas never passing the
//! owner's limit.

use genjobs_store_contract::cases::{batch_of, now};

use super::*;

/// A batch of 5,000 items (the most one may have) is accepted whole: every item and its hold
/// kept, the sum held, and its figures read back by one aggregate. The time it took is printed
/// (`--nocapture`), not asserted: a shared test machine's clock is no measure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_batch_is_accepted_whole() {
    let db = crate::database().await;
    let adapters = replica(&db);
    let (owner, _) = user(&adapters.store, 100_000, 3).await;
    let holds = vec![2; genjobs_domain::batch::MAX_BATCH_ITEMS];
    let (batch, items) = batch_of(owner, None, &holds, now());
    let started = std::time::Instant::now();
    let accepted = adapters.store.accept_batch(batch.clone(), items.clone(), None, now()).await.unwrap();
    let took = started.elapsed();
    eprintln!("accepted a batch of {} items in {took:?} (pooled: {})", items.len(), crate::POOLED);
    assert!(matches!(accepted, BatchAccepted::Created(_)), "{accepted:?}");
    let view = adapters.store.batch(batch.id).await.unwrap().unwrap();
    assert_eq!((view.figures.counts.total, view.figures.counts.queued), (5_000, 5_000));
    assert_eq!(view.figures.credits_held, Credits::new(10_000));
    let account = adapters.store.account(owner).await.unwrap().unwrap();
    assert_eq!(
        (account.balances.available, account.balances.held, account.active_jobs),
        (Credits::new(90_000), Credits::new(10_000), 0)
    );
    let holds = adapters.store.ledger(owner, None, None, 10_000).await.unwrap();
    assert_eq!(holds.iter().filter(|record| matches!(record.movement, LedgerMovement::Hold(_))).count(), 5_000);
    let last = adapters.store.batch_items(batch.id, None, false, Some(items[4_998].id()), 10).await.unwrap();
    assert_eq!(last, items[4_999..]);
}

/// Two replicas admitting every item of a batch at once admit exactly as many as the owner's
/// limit allows; the rest are told the owner is at the limit, and nothing of theirs is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_admissions_never_pass_the_owners_limit() {
    let db = crate::database().await;
    let (a, b) = (replica(&db), replica(&db));
    let (owner, _) = user(&a.store, 1_000, 3).await;
    let (batch, items) = batch_of(owner, None, &[1; 24], now());
    a.store.accept_batch(batch, items.clone(), None, now()).await.unwrap();
    let stores = [a.store.clone(), b.store.clone()];
    let admissions = items.iter().enumerate().map(|(i, item)| {
        let store = stores[i % 2].clone();
        let admission = item.apply(Trigger::Admitted, now()).unwrap();
        tokio::spawn(async move { store.commit(admission).await.unwrap() })
    });
    let outcomes: Vec<Commit> = join_all(admissions).await.into_iter().map(Result::unwrap).collect();
    let admitted = outcomes.iter().filter(|outcome| matches!(outcome, Commit::Applied(_))).count();
    let waiting = outcomes.iter().filter(|outcome| matches!(outcome, Commit::OwnerAtLimit(_))).count();
    assert_eq!((admitted, waiting), (3, 21), "{outcomes:?}");
    assert_eq!(a.store.account(owner).await.unwrap().unwrap().active_jobs, 3);
    let awaiting = join_all(items.iter().map(|item| a.store.job(item.id()))).await;
    let still_waiting =
        awaiting.into_iter().filter(|job| job.as_ref().unwrap().as_ref().unwrap().awaits_admission()).count();
    assert_eq!(still_waiting, 21);
}
