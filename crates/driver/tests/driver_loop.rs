//! The driver's loop over the in-memory store and the in-process event hub, with a scripted
//! provider: it claims, advances and lets go of jobs on its own. Time is tokio's paused clock:
//! it moves only when every task waits, so these tests take no wall-clock time and do not
//! depend on how loaded the machine is.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

mod common;

use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{PausedClock, one_image};
use genjobs_domain::catalog::Catalog;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, JobId, LeaseId, UserId};
use genjobs_domain::job::{Job, JobState, Trigger, UpstreamRef};
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::*;
use genjobs_domain::request::{GenerationDraft, GenerationRequest};
use genjobs_domain::usecases::Ports;
use genjobs_driver::{DriverSettings, JobDriver};
use genjobs_runtime::{EventHub, TokenBucketLimiter};
use genjobs_store_memory::MemoryStore;

struct Setup {
    clock: Arc<PausedClock>,
    store: Arc<MemoryStore>,
    events: Arc<EventHub>,
    user: UserId,
    status_calls: Arc<AtomicU64>,
}

fn setup(status: UpstreamStatus) -> (Setup, JobDriver) {
    let status_calls = Arc::new(AtomicU64::new(0));
    let mut upstream = MockUpstreamProvider::new();
    upstream.expect_reserve().returning(|_, _| Capacity::Free(Placement::default()));
    upstream.expect_submit_placed().returning(|id, _, _, _| Ok(UpstreamRef::new("test", id.to_string())));
    let calls = Arc::clone(&status_calls);
    upstream.expect_status().returning(move |_, _| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(status.clone())
    });
    upstream.expect_result().returning(|_, _, _| Ok(one_image().into()));
    setup_over(upstream, status_calls)
}

/// The driver over `upstream`, whose status calls `status_calls` counts.
fn setup_over(upstream: MockUpstreamProvider, status_calls: Arc<AtomicU64>) -> (Setup, JobDriver) {
    let store = Arc::new(MemoryStore::new());
    let events = Arc::new(EventHub::new());
    let clock = Arc::new(PausedClock::new());
    let ports = Ports {
        jobs: store.clone(),
        batches: store.clone(),
        openai_batches: store.clone(),
        accounts: store.clone(),
        removals: store.clone(),
        usage: store.clone(),
        catalog: store.clone(),
        route_schemas: vec![],
        upstream: Arc::new(upstream),
        outputs: None,
        uploads: store.clone(),
        events: events.clone(),
        rate_limiter: Arc::new(TokenBucketLimiter::new()),
        clock: clock.clone(),
        ids: Arc::new(RandomIds),
        traces: Arc::new(genjobs_domain::ports::NoTraces),
    };
    let settings =
        DriverSettings::new(Duration::from_millis(20), Duration::from_secs(60)).with_lease(Duration::from_millis(600));
    let driver = JobDriver::new(ports, Arc::new(Catalog::builtin().unwrap()), settings);
    let user = UserId::new_at(clock.now());
    (Setup { clock, store, events, user, status_calls }, driver)
}

async fn accept(setup: &Setup, n: usize) -> Vec<JobId> {
    let key = ApiKey::generate();
    let limits = Limits { rate_limit_per_minute: 1000, max_concurrent_jobs: 1000 };
    let stored = StoredKey::of(&key, setup.user, setup.clock.now());
    setup.store.create_user(setup.user, "u".into(), Credits::new(10_000), limits, stored).await.unwrap();
    let catalog = Catalog::builtin().unwrap();
    let request = GenerationRequest::validate(
        Modality::Image,
        GenerationDraft { prompt: Some("p".into()), ..GenerationDraft::default() },
        &catalog,
    )
    .unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        let now = setup.clock.now();
        let (job, _) = Job::accept(
            JobId::new_at(now),
            setup.user,
            request.model.clone(),
            Modality::Image,
            request.input.clone(),
            Rate { per: Unit::Image, credits: 4, percent: PricePercent::FULL, batch_percent: PricePercent::FULL },
            now,
        );
        ids.push(job.id());
        setup.store.accept(job, None, None, now).await.unwrap();
    }
    ids
}

/// The lease of another driver, started at `now` for long enough.
async fn another_driver(setup: &Setup, now: time::OffsetDateTime) -> LeaseId {
    let lease = LeaseId::new_at(now);
    setup.store.start_lease(lease, now, now + time::Duration::minutes(5)).await.unwrap();
    lease
}

async fn states(setup: &Setup, ids: &[JobId]) -> Vec<JobState> {
    let mut states = Vec::new();
    for id in ids {
        states.push(setup.store.job(*id).await.unwrap().unwrap().state());
    }
    states
}

#[tokio::test(start_paused = true)]
async fn the_loop_drives_every_job_to_its_end_and_settles_it() {
    let (setup, driver) = setup(UpstreamStatus::Completed);
    let ids = accept(&setup, 40).await;
    let running = tokio::spawn(async move { driver.run().await });
    let mut done = false;
    for _ in 0..100 {
        if states(&setup, &ids).await.iter().all(|s| *s == JobState::Succeeded) {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.abort();
    assert!(done, "{:?}", states(&setup, &ids).await);
    let account = setup.store.account(setup.user).await.unwrap().unwrap();
    assert_eq!(
        (account.active_jobs, account.balances.held, account.balances.spent),
        (0, Credits::ZERO, Credits::new(160))
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_canceled_while_held_stops_being_polled_at_once() {
    let (setup, driver) = setup(UpstreamStatus::Running { percent: Some(10) });
    let ids = accept(&setup, 1).await;
    let running = tokio::spawn(async move { driver.run().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(setup.status_calls.load(Ordering::SeqCst) > 3, "the job is being polled");

    let job = setup.store.job(ids[0]).await.unwrap().unwrap();
    let cancel = job.apply(Trigger::Cancel, setup.clock.now()).unwrap();
    assert!(matches!(setup.store.commit(cancel).await.unwrap(), Commit::Applied(_)));
    setup.events.publish(ids[0]).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let after_cancel = setup.status_calls.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.abort();
    assert_eq!(setup.status_calls.load(Ordering::SeqCst), after_cancel, "polled after the cancel");
}

#[tokio::test(start_paused = true)]
async fn a_held_job_keeps_its_lease_and_is_not_claimed_twice() {
    let (setup, driver) = setup(UpstreamStatus::Running { percent: Some(10) });
    let ids = accept(&setup, 3).await;
    let running = tokio::spawn(async move { driver.run().await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let now = setup.clock.now();
    let stolen = setup.store.claim_due(another_driver(&setup, now).await, now, 10).await.unwrap();
    running.abort();
    assert!(stolen.is_empty(), "renewals kept the leases past their 600 ms: {} claimable", stolen.len());
    assert_eq!(states(&setup, &ids).await, vec![JobState::Running; 3]);
}

#[tokio::test(start_paused = true)]
async fn a_stopping_driver_hands_its_jobs_back_for_another_to_claim_at_once() {
    let (setup, driver) = setup(UpstreamStatus::Running { percent: Some(10) });
    let ids = accept(&setup, 3).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        driver
            .run_until(async {
                let _ = stopped.await;
            })
            .await;
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let now = setup.clock.now();
    let other = another_driver(&setup, now).await;
    assert!(setup.store.claim_due(other, now, 10).await.unwrap().is_empty());

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(1), running).await.expect("the driver stops").unwrap();
    let polls = setup.status_calls.load(Ordering::SeqCst);
    let now = setup.clock.now() + Duration::from_millis(20);
    let taken = setup.store.claim_due(other, now, 10).await.unwrap();
    assert_eq!(taken.len(), ids.len(), "every held job is claimable one poll interval later, not a lease later");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(setup.status_calls.load(Ordering::SeqCst), polls, "a stopped driver polls nothing");
}

/// With many held jobs waiting for capacity, a freed slot steps only the job it goes to (the one
/// the provider side names next in line), not every waiting job: one reserve, not one each.
#[tokio::test(start_paused = true)]
async fn a_freed_slot_steps_only_the_job_next_in_line() {
    let next: Arc<Mutex<Vec<JobId>>> = Arc::default();
    let reserves = Arc::new(AtomicU64::new(0));
    let mut upstream = MockUpstreamProvider::new();
    let (line, calls) = (Arc::clone(&next), Arc::clone(&reserves));
    upstream.expect_reserve().returning(move |id, _| {
        calls.fetch_add(1, Ordering::SeqCst);
        if line.lock().unwrap().contains(&id) { Capacity::Free(Placement::default()) } else { Capacity::Full }
    });
    let line = Arc::clone(&next);
    upstream.expect_next_in_line().returning(move || Ok(line.lock().unwrap().clone()));
    upstream.expect_submit_placed().returning(|id, _, _, _| Ok(UpstreamRef::new("test", id.to_string())));
    upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Running { percent: None }));
    let (setup, driver) = setup_over(upstream, Arc::default());
    let ids = accept(&setup, 30).await;
    let running = tokio::spawn(async move { driver.run().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(reserves.load(Ordering::SeqCst), 30, "every job looked for a slot once");
    assert_eq!(states(&setup, &ids).await, vec![JobState::Queued; 30], "and waits");

    next.lock().unwrap().push(ids[17]);
    setup.events.free_capacity(ids[0]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    running.abort();
    assert_eq!(reserves.load(Ordering::SeqCst), 31, "only the job next in line looked again");
    let sent = setup.store.job(ids[17]).await.unwrap().unwrap();
    assert!(sent.upstream().is_some() && !sent.waits_for_capacity(), "the job next in line was sent");
}
