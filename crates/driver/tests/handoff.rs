//! Submissions that hand the jobs they accept to the driver of their own process: the accept records
//! the submission's start and the driver's lease, so a fresh job costs no claim and no write
//! before it is sent. The crash rule holds (a job that may have reached the provider is never
//! sent twice), and a driver that stops withdraws what it never sent. Time is tokio's paused
//! clock, so these tests take no wall-clock time.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{PausedClock, one_image};
use genjobs_domain::catalog::Catalog;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{ApiKey, JobId, LeaseId, UserId};
use genjobs_domain::job::{Job, JobErrorCode, JobState, Transition, UpstreamRef};
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::*;
use genjobs_domain::request::{GenerationDraft, GenerationRequest, ReceivedRequest};
use genjobs_domain::usecases::{Caller, Ports, Submission, Submissions};
use genjobs_driver::{DriverSettings, JobDriver};
use genjobs_runtime::{EventHub, TokenBucketLimiter};
use genjobs_store_memory::MemoryStore;
use time::OffsetDateTime;

/// What reached the store: the leases and starts of accepts, every commit, every claimed job.
#[derive(Default)]
struct Seen {
    accepts: Vec<(bool, Option<LeaseId>)>,
    commits: Vec<(JobState, bool, bool)>,
    claimed: Vec<JobId>,
}

/// The in-memory store, recording what it is asked.
struct Recording {
    store: Arc<MemoryStore>,
    seen: Mutex<Seen>,
}

#[async_trait]
impl JobStore for Recording {
    async fn accept(
        &self,
        job: Job,
        idempotency: Option<IdempotencyClaim>,
        lease: Option<LeaseId>,
        now: OffsetDateTime,
    ) -> Result<Accepted, AcceptError> {
        self.seen.lock().unwrap().accepts.push((job.submit_attempted(), lease));
        self.store.accept(job, idempotency, lease, now).await
    }
    async fn job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        self.store.job(id).await
    }
    async fn job_by_upstream_key(&self, key: &str) -> Result<Option<Job>, StoreError> {
        self.store.job_by_upstream_key(key).await
    }
    async fn jobs_of(&self, user: UserId, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError> {
        self.store.jobs_of(user, before, limit).await
    }
    async fn find_jobs(&self, filter: &JobFilter, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError> {
        self.store.find_jobs(filter, before, limit).await
    }
    async fn commit(&self, transition: Transition) -> Result<Commit, StoreError> {
        let job = transition.job();
        self.seen.lock().unwrap().commits.push((job.state(), job.submit_attempted(), job.upstream().is_some()));
        self.store.commit(transition).await
    }
    async fn ready(&self) -> Result<(), StoreError> {
        self.store.ready().await
    }
    async fn count_unfinished(&self) -> Result<UnfinishedJobs, StoreError> {
        self.store.count_unfinished().await
    }
    async fn start_lease(&self, lease: LeaseId, now: OffsetDateTime, until: OffsetDateTime) -> Result<(), StoreError> {
        self.store.start_lease(lease, now, until).await
    }
    async fn renew_lease(
        &self,
        lease: LeaseId,
        held: Vec<JobId>,
        settled_before: OffsetDateTime,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<Option<Vec<JobId>>, StoreError> {
        self.store.renew_lease(lease, held, settled_before, now, until).await
    }
    async fn end_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.store.end_lease(lease).await
    }
    async fn claim_due(&self, lease: LeaseId, now: OffsetDateTime, limit: usize) -> Result<Vec<Job>, StoreError> {
        let claimed = self.store.claim_due(lease, now, limit).await?;
        self.seen.lock().unwrap().claimed.extend(claimed.iter().map(Job::id));
        Ok(claimed)
    }
}

struct World {
    ports: Ports,
    store: Arc<Recording>,
    submits: Arc<AtomicU64>,
    caller: Caller,
}

const LEASE: Duration = Duration::from_millis(600);

async fn world() -> World {
    let store = Arc::new(Recording { store: Arc::new(MemoryStore::new()), seen: Mutex::default() });
    let submits = Arc::new(AtomicU64::new(0));
    let mut upstream = MockUpstreamProvider::new();
    let sent = Arc::clone(&submits);
    upstream.expect_reserve().returning(|_, _| Capacity::Free(Placement::default()));
    upstream.expect_submit_placed().returning(move |id, _, _, _| {
        sent.fetch_add(1, Ordering::SeqCst);
        Ok(UpstreamRef::new("test", id.to_string()))
    });
    upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
    upstream.expect_result().returning(|_, _, _| Ok(one_image().into()));
    upstream.expect_name().return_const("scripted");
    let clock = Arc::new(PausedClock::new());
    let user = UserId::new_at(clock.now());
    let limits = Limits { rate_limit_per_minute: 1000, max_concurrent_jobs: 1000 };
    let key = StoredKey::of(&ApiKey::generate(), user, clock.now());
    store.store.create_user(user, "u".into(), Credits::new(10_000), limits, key).await.unwrap();
    let ports = Ports {
        jobs: store.clone(),
        batches: store.store.clone(),
        openai_batches: store.store.clone(),
        accounts: store.store.clone(),
        removals: store.store.clone(),
        usage: store.store.clone(),
        catalog: store.store.clone(),
        route_schemas: vec![],
        upstream: Arc::new(upstream),
        outputs: None,
        uploads: store.store.clone(),
        events: Arc::new(EventHub::new()),
        rate_limiter: Arc::new(TokenBucketLimiter::new()),
        clock,
        ids: Arc::new(RandomIds),
        traces: Arc::new(genjobs_domain::ports::NoTraces),
    };
    World { ports, store, submits, caller: Caller::user(user) }
}

impl World {
    fn driver(&self, max_in_flight: usize) -> JobDriver {
        let settings = DriverSettings {
            max_in_flight,
            ..DriverSettings::new(Duration::from_millis(20), Duration::from_secs(60)).with_lease(LEASE)
        };
        JobDriver::new(self.ports.clone(), Arc::new(Catalog::builtin().unwrap()), settings)
    }

    fn submissions(&self) -> Submissions {
        Submissions::new(&self.ports, Arc::new(Catalog::builtin().unwrap()))
    }

    async fn submit(&self, submissions: &Submissions) -> JobId {
        let catalog = Catalog::builtin().unwrap();
        let draft = GenerationDraft { prompt: Some("a fox".into()), ..GenerationDraft::default() };
        let request = GenerationRequest::validate(Modality::Image, draft, &catalog).unwrap();
        submissions
            .submit(
                &self.caller,
                Submission { request, received: ReceivedRequest::new(Default::default()), idempotency: None },
            )
            .await
            .unwrap()
            .job_id
    }

    async fn job(&self, id: JobId) -> Job {
        self.store.job(id).await.unwrap().unwrap()
    }

    async fn available(&self) -> Credits {
        self.store.store.account(self.caller.user_id).await.unwrap().unwrap().balances.available
    }

    /// Waits (in paused time) until every job in `ids` is final.
    async fn until_final(&self, ids: &[JobId]) {
        for _ in 0..200 {
            let mut all = true;
            for id in ids {
                all &= self.job(*id).await.state().is_final();
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("jobs not final in time");
    }
}

#[tokio::test(start_paused = true)]
async fn a_handed_job_is_sent_without_a_claim_and_written_twice_after_its_accept() {
    let world = world().await;
    let driver = world.driver(256);
    let submissions = world.submissions().with_handoff(driver.handoff());
    let running = tokio::spawn({
        let driver = driver.clone();
        async move { driver.run().await }
    });
    let id = world.submit(&submissions).await;
    world.until_final(&[id]).await;
    running.abort();

    assert_eq!(world.job(id).await.state(), JobState::Succeeded);
    assert_eq!(world.submits.load(Ordering::SeqCst), 1);
    let seen = world.store.seen.lock().unwrap();
    let (started, lease) = seen.accepts[0];
    assert!(started && lease.is_some(), "the accept records the start and this driver's lease");
    assert!(seen.claimed.is_empty(), "no claim round trip for a fresh job: {:?}", seen.claimed);
    assert_eq!(
        seen.commits,
        [(JobState::Queued, true, true), (JobState::Succeeded, true, true)],
        "the reference, then the end: no 'submission started' write"
    );
}

#[tokio::test(start_paused = true)]
async fn a_handed_job_whose_process_dies_before_sending_fails_after_the_lease_and_is_never_sent() {
    let world = world().await;
    let before = world.available().await;
    let dead = world.driver(256);
    let submissions = world.submissions().with_handoff(dead.handoff());
    let id = world.submit(&submissions).await;
    let survivor = world.driver(256);
    let running = tokio::spawn(async move { survivor.run().await });
    tokio::time::sleep(LEASE / 2).await;
    assert_eq!(world.job(id).await.state(), JobState::Queued, "no one takes it while its lease lasts");
    world.until_final(&[id]).await;
    running.abort();
    drop(dead);
    let job = world.job(id).await;
    assert_eq!(job.state(), JobState::Failed);
    assert_eq!(job.error().as_ref().map(|e| e.code), Some(JobErrorCode::UpstreamFailed));
    assert_eq!(world.submits.load(Ordering::SeqCst), 0, "a job that may have reached the provider is not sent");
    assert_eq!(world.available().await, before, "its credits are released");
}

#[tokio::test(start_paused = true)]
async fn a_stopping_driver_withdraws_the_handed_jobs_it_never_sent_and_another_sends_each_once() {
    let world = world().await;
    let stalled = world.driver(0);
    let submissions = world.submissions().with_handoff(stalled.handoff());
    let handed = [world.submit(&submissions).await, world.submit(&submissions).await];
    let stopping = tokio::spawn(async move { stalled.run_until(tokio::time::sleep(Duration::from_millis(100))).await });
    stopping.await.unwrap();
    for id in handed {
        let job = world.job(id).await;
        assert!(!job.submit_attempted() && job.state() == JobState::Queued, "withdrawn: {job:?}");
    }
    let after_stop = world.submit(&submissions).await;
    assert_eq!(world.store.seen.lock().unwrap().accepts[2], (false, None), "a stopped driver takes no more jobs");

    let next = world.driver(256);
    let running = tokio::spawn(async move { next.run().await });
    let all = [handed[0], handed[1], after_stop];
    world.until_final(&all).await;
    running.abort();
    for id in all {
        assert_eq!(world.job(id).await.state(), JobState::Succeeded);
    }
    assert_eq!(world.submits.load(Ordering::SeqCst), 3, "each job sent once");
}
