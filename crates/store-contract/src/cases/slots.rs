//! Provider slots: each job goes on the least busy key under its cap, a job keeps the key it
//! took, a key's count is its jobs not final (a final commit gives the slot back with no other
//! call), and concurrent takers never pass a cap.

use std::sync::Arc;

use futures_util::future::join_all;
use genjobs_domain::capacity::ProviderKey;
use genjobs_domain::job::{JobError, JobErrorCode, Trigger};

use super::{LIMITS, Limits, Store, accepted, now, step, submitted, user_with};

fn keys(cap: u32) -> Vec<ProviderKey> {
    vec![ProviderKey::of("first-key-aaaa", cap), ProviderKey::of("second-key-bbbb", cap)]
}

/// Slots go to the key with the fewest jobs in flight (the first listed on a tie) up to each
/// key's cap; a job asking again keeps its key; a final job's slot stops counting; a released
/// slot is free again; another provider's slots are counted apart.
pub async fn slots_go_to_the_least_busy_key_up_to_its_cap<S: Store>(store: Arc<S>) {
    let user = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let keys = keys(2);
    let (first, second) = (keys[0].id.clone(), keys[1].id.clone());
    let mut jobs = Vec::new();
    for _ in 0..5 {
        jobs.push(accepted(&*store, user, 1).await);
    }
    let mut taken = Vec::new();
    for job in &jobs {
        taken.push(store.take_slot(job.id(), "fal", &keys).await.unwrap());
    }
    assert_eq!(
        taken,
        [Some(first.clone()), Some(second.clone()), Some(first.clone()), Some(second.clone()), None],
        "alternating by fewest in flight, then every key at its cap"
    );
    assert_eq!(store.take_slot(jobs[2].id(), "fal", &keys).await.unwrap(), Some(first.clone()), "kept");
    let counts = store.slots_in_flight("fal").await.unwrap();
    assert_eq!((counts.get(&first), counts.get(&second)), (Some(&2), Some(&2)));
    let waiting = store.slots_waiting("fal").await.unwrap();
    assert_eq!((waiting.normal, waiting.low), (1, 0), "the fifth job waits");

    let sent = submitted(&*store, &jobs[0]).await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
    step(&*store, &sent, Trigger::failed(error)).await;
    assert_eq!(store.slots_in_flight("fal").await.unwrap().get(&first), Some(&1), "a final job holds no slot");
    assert_eq!(store.take_slot(jobs[4].id(), "fal", &keys).await.unwrap(), Some(first.clone()));

    store.release_slot(jobs[1].id()).await.unwrap();
    assert_eq!(store.slots_in_flight("fal").await.unwrap().get(&second).copied().unwrap_or(0), 1);
    assert_eq!(store.take_slot(jobs[1].id(), "replicate", &keys).await.unwrap(), Some(first.clone()));
    assert_eq!(store.slots_in_flight("replicate").await.unwrap().get(&first), Some(&1), "counted apart");
    assert_eq!(store.slots_in_flight("fal").await.unwrap().get(&second), Some(&1));
}

/// Many takers at once (replicas, on a shared store) never give a key more than its cap.
pub async fn concurrent_takes_never_pass_a_cap<S: Store>(store: Arc<S>) {
    let user = user_with(&*store, 100, Limits { max_concurrent_jobs: 20, ..LIMITS }).await;
    let keys = keys(3);
    let mut jobs = Vec::new();
    for _ in 0..16 {
        jobs.push(accepted(&*store, user, 1).await);
    }
    let takes = jobs.iter().map(|job| {
        let (store, keys, id) = (Arc::clone(&store), keys.clone(), job.id());
        tokio::spawn(async move { store.take_slot(id, "fal", &keys).await.unwrap() })
    });
    let taken: Vec<_> = join_all(takes).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(taken.iter().flatten().count(), 6, "two keys of three slots each");
    let counts = store.slots_in_flight("fal").await.unwrap();
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [3, 3]);
}

/// A job's place is readable: the provider it waits for (a refusal may have moved it to its next
/// route) or holds a slot of, none once released or final.
pub async fn a_jobs_place_names_its_provider<S: Store>(store: Arc<S>) {
    let user = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let keys = vec![ProviderKey::of("only-key-cccc", 1)];
    let (holding, waiting) = (accepted(&*store, user, 1).await, accepted(&*store, user, 1).await);
    assert_eq!(store.slot_provider(waiting.id()).await.unwrap(), None, "no place before any take");
    assert!(store.take_slot(holding.id(), "replicate", &keys).await.unwrap().is_some());
    assert_eq!(store.take_slot(waiting.id(), "replicate", &keys).await.unwrap(), None, "the one slot is taken");
    assert_eq!(store.slot_provider(waiting.id()).await.unwrap().as_deref(), Some("replicate"), "waits there");
    assert_eq!(store.slot_provider(holding.id()).await.unwrap().as_deref(), Some("replicate"), "holds a slot there");
    store.release_slot(holding.id()).await.unwrap();
    assert_eq!(store.slot_provider(holding.id()).await.unwrap(), None, "released");
    let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
    step(&*store, &waiting, Trigger::failed(error)).await;
    assert_eq!(store.slot_provider(waiting.id()).await.unwrap(), None, "a final job has no place");
}

/// A job's start deadline is kept with it, and a job yet to start is due by then however long
/// its schedule asked to rest: a driver on any replica claims it at its deadline.
pub async fn a_start_deadline_is_kept_and_makes_the_job_due_by_then<S: Store>(store: Arc<S>) {
    let user = user_with(&*store, 100, Limits { max_concurrent_jobs: 10, ..LIMITS }).await;
    let at = now();
    let start_by = at + time::Duration::seconds(5);
    let job = super::new_job(user, 1, at).with_start_by(Some(start_by));
    let job = match store.accept(job, None, None, at).await.unwrap() {
        genjobs_domain::ports::Accepted::Created(job) => job,
        other => panic!("expected a created job, got {other:?}"),
    };
    assert_eq!(job.start_by(), Some(start_by));
    let waiting = step(&*store, &job, Trigger::AwaitCapacity { next_poll_at: at + time::Duration::minutes(5) }).await;
    let read = store.job(job.id()).await.unwrap().unwrap();
    assert_eq!((read.start_by(), read.next_poll_at()), (Some(start_by), Some(start_by)), "due at its deadline");
    assert!(!read.missed_its_start(at) && read.missed_its_start(start_by));
    let lease = genjobs_domain::ids::LeaseId::new_at(at);
    store.start_lease(lease, at, start_by + time::Duration::minutes(1)).await.unwrap();
    assert!(store.claim_due(lease, at, 10).await.unwrap().is_empty(), "not due before its deadline");
    let claimed = store.claim_due(lease, start_by, 10).await.unwrap();
    assert_eq!(claimed.iter().map(|job| job.id()).collect::<Vec<_>>(), [waiting.id()], "due at its deadline");
}

/// The jobs next in line are those the free slots go to in fair order, as many as there are
/// free slots, and asking takes nothing: the one named still takes its slot, the others wait.
pub async fn the_next_in_line_are_those_the_free_slots_go_to<S: Store>(store: Arc<S>) {
    let limits = Limits { max_concurrent_jobs: 10, ..LIMITS };
    let (busy, light) = (user_with(&*store, 100, limits).await, user_with(&*store, 100, limits).await);
    let keys = vec![ProviderKey::of("only-key-dddd", 2)];
    let mut burst = Vec::new();
    for _ in 0..4 {
        burst.push(accepted(&*store, busy, 1).await);
    }
    let trickle = accepted(&*store, light, 1).await;
    for job in burst.iter().chain([&trickle]) {
        store.take_slot(job.id(), "fal", &keys).await.unwrap();
    }
    assert_eq!(store.next_in_line("fal", &keys).await.unwrap(), [], "no slot is free");

    let sent = submitted(&*store, &burst[0]).await;
    let error = JobError::new(JobErrorCode::UpstreamFailed, "boom");
    step(&*store, &sent, Trigger::failed(error)).await;
    assert_eq!(
        store.next_in_line("fal", &keys).await.unwrap(),
        [trickle.id()],
        "one free slot, and the user with fewer jobs in flight comes first"
    );
    assert_eq!(store.next_in_line("fal", &keys).await.unwrap(), [trickle.id()], "asking takes nothing");
    assert_eq!(store.take_slot(burst[2].id(), "fal", &keys).await.unwrap(), None, "not next in line");
    assert!(store.take_slot(trickle.id(), "fal", &keys).await.unwrap().is_some(), "the one named takes it");
    assert_eq!(store.next_in_line("fal", &keys).await.unwrap(), [], "every slot is taken again");

    let wide = vec![ProviderKey::of("only-key-dddd", 4)];
    let (oldest, newest) = (burst[2].id().min(burst[3].id()), burst[2].id().max(burst[3].id()));
    assert_eq!(
        store.next_in_line("fal", &wide).await.unwrap(),
        [oldest, newest],
        "a user's own jobs oldest first, up to the free slots"
    );
    assert_eq!(store.next_in_line("replicate", &keys).await.unwrap(), [], "another provider's line is apart");
}
