//! Use-case tests over mockall mocks of the ports: each pins down which port calls a use case
//! makes, with what, and how it maps their answers.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream;
use genjobs_domain::catalog::Catalog;
use genjobs_domain::credits::{CreditMovement, Credits};
use genjobs_domain::ids::{ApiKey, JobId, UserId};
use genjobs_domain::job::{Job, JobErrorCode, JobState, StoredJob, Trigger, UpstreamRef};
use genjobs_domain::keys::{
    AncestorKey, BudgetExceeded, BudgetOwner, BudgetPeriod, KeyBudget, KeyLineage, KeySettings,
};
use genjobs_domain::modality::Modality;
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use genjobs_domain::ports::*;
use genjobs_domain::request::{GenerationDraft, GenerationRequest, ReceivedRequest, WholeNumber};
use genjobs_domain::usecases::*;
use mockall::predicate::eq;
use time::OffsetDateTime;

fn t0() -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000)
}

struct Mocks {
    jobs: MockJobStore,
    accounts: MockAccountStore,
    upstream: MockUpstreamProvider,
    events: MockJobEvents,
    rate_limiter: MockRateLimiter,
    clock: MockClock,
}

impl Mocks {
    fn new() -> Self {
        let mut clock = MockClock::new();
        clock.expect_now().returning(t0);
        clock.expect_sleep().returning(|_| ());
        let mut events = MockJobEvents::new();
        events.expect_subscribe().returning(|_| stream::pending().boxed());
        events.expect_free_capacity().returning(|_| ());
        let mut upstream = MockUpstreamProvider::new();
        upstream.expect_reserve().returning(|_, _| Capacity::Free(Placement::default()));
        Self {
            jobs: MockJobStore::new(),
            accounts: MockAccountStore::new(),
            upstream,
            events,
            rate_limiter: MockRateLimiter::new(),
            clock,
        }
    }

    fn ports(self) -> Ports {
        Ports {
            jobs: Arc::new(self.jobs),
            accounts: Arc::new(self.accounts),
            removals: Arc::new(genjobs_domain::ports::MockJobRemovals::new()),
            usage: Arc::new(genjobs_domain::ports::MockUsageStore::new()),
            catalog: Arc::new(genjobs_domain::ports::MockCatalogStore::new()),
            route_schemas: vec![],
            upstream: Arc::new(self.upstream),
            outputs: None,
            uploads: Arc::new(MockUploadStore::new()),
            events: Arc::new(self.events),
            rate_limiter: Arc::new(self.rate_limiter),
            clock: Arc::new(self.clock),
            ids: Arc::new(RandomIds),
            traces: Arc::new(genjobs_domain::ports::NoTraces),
        }
    }

    fn services(self, settings: Settings) -> Services {
        Services::new(&self.ports(), Arc::new(Catalog::builtin().unwrap()), settings)
    }

    fn steps(self) -> JobSteps {
        let settings = StepSettings {
            poll_interval: Duration::from_secs(2),
            job_timeout: Duration::from_secs(1800),
            lease: Duration::from_secs(20),
        };
        JobSteps::new(self.ports(), Arc::new(Catalog::builtin().unwrap()), settings)
    }
}

fn owner() -> UserId {
    UserId::from_uuid(uuid_of(1))
}

fn uuid_of(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(n)
}

fn caller() -> Caller {
    Caller::user(owner())
}

fn image_request() -> GenerationRequest {
    let draft =
        GenerationDraft { prompt: Some("a fox".into()), n: Some(WholeNumber::Exact(3)), ..GenerationDraft::default() };
    GenerationRequest::validate(Modality::Image, draft, &Catalog::builtin().unwrap()).unwrap()
}

fn received() -> ReceivedRequest {
    ReceivedRequest::new(serde_json::json!({"prompt": "a fox", "n": 3}).as_object().cloned().unwrap())
}

fn job() -> Job {
    let request = image_request();
    Job::accept(
        JobId::new_at(t0()),
        owner(),
        request.model,
        request.modality,
        request.input,
        Rate { per: Unit::Image, credits: 4, percent: PricePercent::FULL },
        t0(),
    )
    .0
}

fn upstream_ref() -> UpstreamRef {
    UpstreamRef::new("test", "r")
}

fn submitted_job() -> Job {
    let j = job();
    let j = j.apply(Trigger::SubmitStarted { next_poll_at: t0() }, t0()).unwrap().into_job();
    j.apply(Trigger::Submitted { upstream: upstream_ref(), next_poll_at: t0() }, t0()).unwrap().into_job()
}

fn applied(transition: genjobs_domain::job::Transition) -> Result<Commit, StoreError> {
    Ok(Commit::Applied(transition.into_job()))
}

#[tokio::test]
async fn submit_holds_the_catalog_price_and_answers_queued() {
    let mut mocks = Mocks::new();
    mocks
        .jobs
        .expect_accept()
        .withf(|job, claim, lease, _| {
            job.credits_held() == Credits::new(12) && job.user_id() == owner() && claim.is_none() && lease.is_none()
        })
        .times(1)
        .returning(|job, _, _, _| Ok(Accepted::Created(job)));
    let receipt = mocks
        .services(Settings::default())
        .submissions
        .submit(&caller(), Submission { request: image_request(), received: received(), idempotency: None })
        .await;
    let receipt = receipt.unwrap();
    assert_eq!(
        (receipt.state, receipt.credits_held, receipt.model.as_str()),
        (JobState::Queued, Credits::new(12), "nano-banana")
    );
}

fn exceeded() -> BudgetExceeded {
    let budget = KeyBudget { credits: Credits::new(10), period: BudgetPeriod::Day };
    BudgetExceeded { budget, used: Credits::new(8), cost: Credits::new(12), whose: BudgetOwner::Key }
}

#[tokio::test]
async fn submit_maps_each_refusal() {
    for (refusal, expected) in [
        (
            AcceptError::InsufficientCredits { needed: Credits::new(12), available: Credits::new(3) },
            SubmitError::InsufficientCredits { needed: Credits::new(12), available: Credits::new(3) },
        ),
        (AcceptError::ConcurrencyLimit { limit: 2 }, SubmitError::ConcurrencyLimit { limit: 2 }),
        (AcceptError::KeyConcurrencyLimit { limit: 1 }, SubmitError::KeyConcurrencyLimit { limit: 1 }),
        (AcceptError::KeyBudgetExceeded(exceeded()), SubmitError::KeyBudgetExceeded(exceeded())),
        (AcceptError::IdempotencyConflict, SubmitError::IdempotencyConflict),
        (
            AcceptError::Store(StoreError::Unavailable("down".into())),
            SubmitError::Store(StoreError::Unavailable("down".into())),
        ),
    ] {
        let mut mocks = Mocks::new();
        mocks.jobs.expect_accept().return_once(move |_, _, _, _| Err(refusal));
        let result = mocks
            .services(Settings::default())
            .submissions
            .submit(&caller(), Submission { request: image_request(), received: received(), idempotency: None })
            .await;
        assert_eq!(result, Err(expected));
    }
}

#[tokio::test]
async fn submit_passes_the_idempotency_claim() {
    let mut mocks = Mocks::new();
    let fingerprint = "f1ngerpr1nt".to_owned();
    let expected = fingerprint.clone();
    mocks
        .jobs
        .expect_accept()
        .withf(move |_, claim, _, _| claim.as_ref().is_some_and(|c| c.key == "k-1" && c.fingerprint == expected))
        .returning(|job, _, _, _| Ok(Accepted::Replayed(job)));
    let submission = Submission {
        request: image_request(),
        received: received(),
        idempotency: Some((IdempotencyKey::parse("k-1").unwrap(), fingerprint)),
    };
    assert!(mocks.services(Settings::default()).submissions.submit(&caller(), submission).await.is_ok());
}

#[test]
fn idempotency_keys_are_1_to_255_characters() {
    assert!(IdempotencyKey::parse("").is_err());
    assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
    assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
}

fn credential_for(key: &ApiKey) -> Credential {
    Credential {
        hash: key.hash(),
        prefix: key.prefix(),
        user_id: owner(),
        rate_limit_per_minute: 7,
        price_percent: PricePercent::FULL,
        settings: KeySettings::default(),
        own_rate_limit_per_minute: None,
        lineage: KeyLineage::default(),
    }
}

#[tokio::test]
async fn authenticate_checks_the_hash_then_the_rate_limit() {
    let key = ApiKey::generate();
    let mut mocks = Mocks::new();
    let stored = credential_for(&key);
    mocks.accounts.expect_credentials().with(eq(key.prefix())).returning(move |_| Ok(vec![stored.clone()]));
    mocks
        .rate_limiter
        .expect_acquire()
        .with(eq(RateBucket::user(owner())), eq(7))
        .times(1)
        .returning(|_, _| Ok(RateDecision::Allowed));
    mocks.accounts.expect_record_key_use().with(eq(key.prefix()), eq(t0())).times(1).returning(|_, _| Ok(()));
    let expected =
        Caller { key: Some(CallerKey { prefix: key.prefix(), settings: Arc::default(), subtree: None }), ..caller() };
    assert_eq!(mocks.services(Settings::default()).accounts.authenticate(key.expose()).await, Ok(expected));
}

#[tokio::test]
async fn a_key_with_a_rate_limit_of_its_own_spends_its_users_allowance_then_its_own() {
    let key = ApiKey::generate();
    let mut mocks = Mocks::new();
    let limited = Credential {
        settings: KeySettings { rate_limit_per_minute: Some(2), ..KeySettings::default() },
        own_rate_limit_per_minute: Some(2),
        ..credential_for(&key)
    };
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![limited.clone()]));
    let mut order = mockall::Sequence::new();
    mocks
        .rate_limiter
        .expect_acquire()
        .with(eq(RateBucket::user(owner())), eq(7))
        .times(1)
        .in_sequence(&mut order)
        .returning(|_, _| Ok(RateDecision::Allowed));
    let retry_after = Duration::from_secs(30);
    mocks
        .rate_limiter
        .expect_acquire()
        .with(eq(RateBucket::key(&key.prefix())), eq(2))
        .times(1)
        .in_sequence(&mut order)
        .returning(move |_, _| Ok(RateDecision::Limited { retry_after }));
    let refused = mocks.services(Settings::default()).accounts.authenticate(key.expose()).await;
    assert_eq!(refused, Err(AuthError::RateLimited { retry_after }));
    assert_ne!(RateBucket::key(&key.prefix()), RateBucket::user(owner()));
}

#[tokio::test]
async fn a_child_key_spends_the_rate_of_every_ancestor_with_a_limit_and_acts_within_its_subtree() {
    let key = ApiKey::generate();
    let (parent, root, grandchild) = (
        genjobs_domain::ids::KeyPrefix::of("gj_parent"),
        genjobs_domain::ids::KeyPrefix::of("gj_root"),
        genjobs_domain::ids::KeyPrefix::of("gj_below"),
    );
    let mut mocks = Mocks::new();
    let child = Credential {
        settings: KeySettings { rate_limit_per_minute: Some(3), ..KeySettings::default() },
        lineage: KeyLineage {
            ancestors: vec![
                AncestorKey { prefix: parent.clone(), rate_limit_per_minute: None, limits_jobs: false },
                AncestorKey { prefix: root.clone(), rate_limit_per_minute: Some(3), limits_jobs: true },
            ],
            descendants: vec![grandchild.clone()],
        },
        ..credential_for(&key)
    };
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![child.clone()]));
    mocks.accounts.expect_record_key_use().returning(|_, _| Ok(()));
    let mut order = mockall::Sequence::new();
    for (bucket, limit) in [(RateBucket::user(owner()), 7), (RateBucket::key(&root), 3)] {
        mocks
            .rate_limiter
            .expect_acquire()
            .with(eq(bucket), eq(limit))
            .times(1)
            .in_sequence(&mut order)
            .returning(|_, _| Ok(RateDecision::Allowed));
    }
    let caller = mocks.services(Settings::default()).accounts.authenticate(key.expose()).await.unwrap();
    assert!(caller.is_restricted(), "a key with a parent acts within its subtree");
    assert!(caller.sees_key(Some(&key.prefix())) && caller.sees_key(Some(&grandchild)));
    assert!(!caller.sees_key(Some(&parent)) && !caller.sees_key(None), "not its parent's jobs, nor keyless ones");
}

#[tokio::test]
async fn an_expired_key_is_refused_before_its_rate_is_spent() {
    let key = ApiKey::generate();
    let mut mocks = Mocks::new();
    let expired = Credential {
        settings: KeySettings { expires_at: Some(t0()), ..KeySettings::default() },
        ..credential_for(&key)
    };
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![expired.clone()]));
    mocks.rate_limiter.expect_acquire().times(0);
    let refused = mocks.services(Settings::default()).accounts.authenticate(key.expose()).await;
    assert!(matches!(refused, Err(AuthError::KeyExpired(_))), "{refused:?}");
}

#[tokio::test]
async fn a_key_outside_its_models_is_refused_before_the_store_and_a_submission_carries_its_prefix() {
    let key = ApiKey::generate();
    let restricted = |models: &[&str]| Caller {
        key: Some(CallerKey {
            prefix: key.prefix(),
            settings: Arc::new(KeySettings {
                models: Some(models.iter().map(|m| genjobs_domain::ids::ModelId::new(*m)).collect()),
                ..KeySettings::default()
            }),
            subtree: None,
        }),
        ..caller()
    };
    let mut mocks = Mocks::new();
    let prefix = key.prefix();
    mocks
        .jobs
        .expect_accept()
        .withf(move |job, _, _, _| job.key_prefix() == Some(&prefix))
        .times(1)
        .returning(|job, _, _, _| Ok(Accepted::Created(job)));
    let submissions = mocks.services(Settings::default()).submissions;
    let submit = |caller: Caller| {
        let submissions = submissions.clone();
        async move {
            submissions
                .submit(&caller, Submission { request: image_request(), received: received(), idempotency: None })
                .await
        }
    };
    let refused = submit(restricted(&["flux-pro"])).await;
    assert!(matches!(refused, Err(SubmitError::ModelNotAllowed { .. })), "{refused:?}");
    assert!(submit(restricted(&["nano-banana"])).await.is_ok());
}

#[tokio::test]
async fn a_key_with_the_right_prefix_but_wrong_secret_is_invalid_and_costs_no_rate() {
    let key = ApiKey::generate();
    let forged = format!("{}{}", key.prefix(), "0".repeat(20));
    let mut mocks = Mocks::new();
    let stored = credential_for(&key);
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![stored.clone()]));
    mocks.rate_limiter.expect_acquire().times(0);
    assert_eq!(mocks.services(Settings::default()).accounts.authenticate(&forged).await, Err(AuthError::InvalidKey));
}

#[tokio::test]
async fn a_rate_limited_caller_is_told_when_to_retry() {
    let key = ApiKey::generate();
    let mut mocks = Mocks::new();
    let stored = credential_for(&key);
    mocks.accounts.expect_credentials().returning(move |_| Ok(vec![stored.clone()]));
    mocks
        .rate_limiter
        .expect_acquire()
        .returning(|_, _| Ok(RateDecision::Limited { retry_after: Duration::from_millis(1500) }));
    let result = mocks.services(Settings::default()).accounts.authenticate(key.expose()).await;
    assert_eq!(result, Err(AuthError::RateLimited { retry_after: Duration::from_millis(1500) }));
}

#[tokio::test]
async fn another_users_job_is_forbidden_and_a_missing_one_not_found() {
    let mut mocks = Mocks::new();
    let theirs = Job::restore(StoredJob { user_id: UserId::from_uuid(uuid_of(2)), ..job().to_stored() }).unwrap();
    let (theirs_id, missing) = (theirs.id(), JobId::from_uuid(uuid_of(3)));
    mocks.jobs.expect_job().with(eq(theirs_id)).returning(move |_| Ok(Some(theirs.clone())));
    mocks.jobs.expect_job().with(eq(missing)).returning(|_| Ok(None));
    mocks.jobs.expect_commit().times(0);
    let services = mocks.services(Settings::default());
    assert_eq!(services.reads.job(&caller(), theirs_id).await, Err(JobQueryError::Forbidden));
    assert_eq!(services.cancellations.cancel(&caller(), theirs_id).await, Err(JobQueryError::Forbidden));
    assert_eq!(services.reads.job(&caller(), missing).await, Err(JobQueryError::NotFound));
}

#[tokio::test]
async fn canceling_a_final_job_commits_nothing() {
    let mut mocks = Mocks::new();
    let done = submitted_job()
        .apply(Trigger::Succeeded { outputs: vec![], credits_actual: Credits::new(4) }, t0())
        .unwrap()
        .into_job();
    let id = done.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(done.clone())));
    mocks.jobs.expect_commit().times(0);
    let receipt = mocks.services(Settings::default()).cancellations.cancel(&caller(), id).await.unwrap();
    assert_eq!((receipt.state, receipt.canceled_at), (JobState::Succeeded, t0()));
}

#[tokio::test]
async fn cancel_retries_on_a_stale_version_releases_once_and_wakes_waiters() {
    let mut mocks = Mocks::new();
    let running = submitted_job();
    let id = running.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(running.clone())));
    let mut seq = mockall::Sequence::new();
    mocks.jobs.expect_commit().times(1).in_sequence(&mut seq).returning(|t| Ok(Commit::Stale(t.into_job())));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.movement() == Some(CreditMovement::Release(Credits::new(12))))
        .times(1)
        .in_sequence(&mut seq)
        .returning(applied);
    mocks.events.expect_publish().with(eq(id)).times(1).returning(|_| ());
    mocks.upstream.expect_cancel().times(0);
    let receipt = mocks.services(Settings::default()).cancellations.cancel(&caller(), id).await.unwrap();
    assert_eq!(receipt.state, JobState::Canceled);
}

#[tokio::test]
async fn a_job_that_ends_wakes_the_webhook_dispatcher_only_when_its_client_gave_a_url() {
    for (url, announcements) in [(Some("https://hooks.example.com/done"), 1), (None, 0)] {
        let mut mocks = Mocks::new();
        let running = submitted_job().with_webhook_url(url.map(str::to_owned));
        let id = running.id();
        mocks.jobs.expect_job().returning(move |_| Ok(Some(running.clone())));
        mocks.jobs.expect_commit().returning(applied);
        mocks.events.expect_publish().returning(|_| ());
        mocks.events.expect_announce_webhook().times(announcements).returning(|| ());
        mocks.services(Settings::default()).cancellations.cancel(&caller(), id).await.unwrap();
    }
}

#[tokio::test]
async fn cancel_asks_the_provider_to_stop_only_when_configured() {
    let mut mocks = Mocks::new();
    let running = submitted_job();
    let id = running.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(running.clone())));
    mocks.jobs.expect_commit().returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    mocks.upstream.expect_cancel().withf(|_, u| u.key() == "r").times(1).returning(|_, _| Ok(()));
    let settings = Settings { upstream_cancel: true, ..Settings::default() };
    assert!(mocks.services(settings).cancellations.cancel(&caller(), id).await.is_ok());
}

#[tokio::test]
async fn a_long_poll_waits_for_a_change_and_answers_once_the_job_is_final() {
    let mut mocks = Mocks::new();
    mocks.events = MockJobEvents::new();
    mocks.events.expect_subscribe().times(1).returning(|_| stream::iter([()]).chain(stream::pending()).boxed());
    let running = submitted_job();
    let id = running.id();
    let done = running.apply(Trigger::Cancel, t0()).unwrap().into_job();
    let mut seq = mockall::Sequence::new();
    mocks.jobs.expect_job().times(1).in_sequence(&mut seq).returning(move |_| Ok(Some(running.clone())));
    mocks.jobs.expect_job().times(1).in_sequence(&mut seq).returning(move |_| Ok(Some(done.clone())));
    mocks.clock = MockClock::new();
    mocks.clock.expect_now().returning(t0);
    let poll_interval = Settings::default().poll_interval;
    let mut poll = mocks.services(Settings::default()).reads.long_poll(&caller(), id, Duration::from_secs(30));
    assert_eq!(poll.look().await.unwrap(), Watch::Wait(poll_interval), "waits at most a poll interval");
    assert_eq!(poll.changes().next().await, Some(()));
    let Watch::Answer(job) = poll.look().await.unwrap() else { panic!("a final job is answered at once") };
    assert_eq!(job.state(), JobState::Canceled);
}

#[tokio::test]
async fn a_long_poll_answers_with_the_job_as_it_is_once_the_wait_has_passed() {
    let mut mocks = Mocks::new();
    let running = submitted_job();
    let id = running.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(running.clone())));
    let mut poll = mocks.services(Settings::default()).reads.long_poll(&caller(), id, Duration::ZERO);
    assert!(matches!(poll.look().await.unwrap(), Watch::Answer(job) if !job.state().is_final()));
}

#[tokio::test]
async fn a_stream_of_a_final_job_is_its_final_event_alone() {
    let mut mocks = Mocks::new();
    let failed = job()
        .apply(Trigger::Failed { error: genjobs_domain::job::JobError::new(JobErrorCode::UpstreamFailed, "x") }, t0())
        .unwrap()
        .into_job();
    let id = failed.id();
    mocks.jobs.expect_job().returning(move |_| Ok(Some(failed.clone())));
    let mut events = mocks.services(Settings::default()).reads.job_events(&caller(), id).await.unwrap();
    assert!(
        matches!(events.look().await, Some(Watch::Answer(JobEvent::Error(job))) if job.state() == JobState::Failed)
    );
    assert_eq!(events.look().await, None);
}

#[tokio::test]
async fn a_stream_shows_progress_at_each_tick_and_ends_with_the_final_event() {
    let mut mocks = Mocks::new();
    let running = submitted_job();
    let id = running.id();
    let done = running.apply(Trigger::Cancel, t0()).unwrap().into_job();
    let mut seq = mockall::Sequence::new();
    let first = running.clone();
    mocks.jobs.expect_job().times(2).in_sequence(&mut seq).returning(move |_| Ok(Some(first.clone())));
    mocks.jobs.expect_job().times(1).in_sequence(&mut seq).returning(move |_| Ok(Some(done.clone())));
    let poll_interval = Settings::default().poll_interval;
    let mut events = mocks.services(Settings::default()).reads.job_events(&caller(), id).await.unwrap();
    assert!(matches!(events.look().await, Some(Watch::Answer(JobEvent::Progress(_)))));
    assert_eq!(events.look().await, Some(Watch::Wait(poll_interval)), "the next tick is a poll interval away");
    events.woken(Woke::TimePassed);
    assert!(matches!(events.look().await, Some(Watch::Answer(JobEvent::Progress(_)))), "a tick shows progress");
    events.woken(Woke::Changed);
    assert!(
        matches!(events.look().await, Some(Watch::Answer(JobEvent::Error(job))) if job.state() == JobState::Canceled)
    );
    assert_eq!(events.look().await, None, "the final event ends the stream");
}

#[tokio::test]
async fn driver_submits_a_queued_job_once_recording_the_attempt_first() {
    let mut mocks = Mocks::new();
    let mut seq = mockall::Sequence::new();
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().submit_attempted() && t.job().upstream().is_none())
        .times(1)
        .in_sequence(&mut seq)
        .returning(applied);
    mocks
        .upstream
        .expect_submit_placed()
        .withf(|_, model, input, _| model.id.as_str() == "nano-banana" && input.n == Some(3))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _, _| Ok(upstream_ref()));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().upstream() == Some(&upstream_ref()))
        .times(1)
        .in_sequence(&mut seq)
        .returning(applied);
    mocks.events.expect_publish().times(0);
    advance(mocks.steps(), job()).await;
}

/// One step, as a driver that holds the job takes it; a step that asks to wait fails the test.
async fn advance(steps: JobSteps, job: Job) -> Option<Job> {
    match steps.advance(job).await {
        Stepped::Done(kept) => kept,
        Stepped::Unrecorded(unrecorded) => panic!("the step asks to record its submission again: {unrecorded:?}"),
    }
}

#[tokio::test]
async fn a_submission_is_recorded_through_a_store_outage_and_never_sent_twice() {
    let mut mocks = Mocks::new();
    let mut seq = mockall::Sequence::new();
    mocks.jobs.expect_commit().times(1).in_sequence(&mut seq).returning(applied);
    mocks.upstream.expect_submit_placed().times(1).in_sequence(&mut seq).returning(|_, _, _, _| Ok(upstream_ref()));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().upstream() == Some(&upstream_ref()))
        .times(2)
        .in_sequence(&mut seq)
        .returning(|_| Err(StoreError::Unavailable("database restarting".into())));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().upstream() == Some(&upstream_ref()))
        .times(1)
        .in_sequence(&mut seq)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    let steps = mocks.steps();
    let poll_interval = steps.settings().poll_interval;
    let Stepped::Unrecorded(first) = steps.advance(job()).await else { panic!("the outage asks for a retry") };
    assert_eq!(first.retry_in(), poll_interval * 2);
    let Stepped::Unrecorded(second) = steps.record_submission(first).await else { panic!("still out") };
    assert_eq!(second.retry_in(), poll_interval * 4, "the pause doubles");
    let Stepped::Done(Some(kept)) = steps.record_submission(second).await else {
        panic!("the driver keeps holding the job")
    };
    assert_eq!(kept.upstream(), Some(&upstream_ref()), "the provider's reference survived the outage");
}

#[tokio::test]
async fn driver_never_resubmits_after_an_ambiguous_or_interrupted_submission() {
    let mut mocks = Mocks::new();
    mocks
        .upstream
        .expect_submit_placed()
        .times(1)
        .returning(|_, _, _, _| Err(SubmitFailure::Ambiguous("timeout".into())));
    mocks.jobs.expect_commit().withf(|t| !t.job().state().is_final()).times(1).returning(applied);
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().error().as_ref().is_some_and(|e| e.code == JobErrorCode::UpstreamFailed))
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    advance(mocks.steps(), job()).await;

    let mut mocks = Mocks::new();
    let interrupted = job().apply(Trigger::SubmitStarted { next_poll_at: t0() }, t0()).unwrap().into_job();
    mocks.upstream.expect_submit_placed().times(0);
    mocks
        .jobs
        .expect_commit()
        .withf(|t| {
            t.job().state() == JobState::Failed && t.movement() == Some(CreditMovement::Release(Credits::new(12)))
        })
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    advance(mocks.steps(), interrupted).await;
}

#[tokio::test]
async fn driver_retries_a_submission_that_never_reached_the_provider() {
    let mut mocks = Mocks::new();
    mocks
        .upstream
        .expect_submit_placed()
        .times(1)
        .returning(|_, _, _, _| Err(SubmitFailure::NotReached("refused".into())));
    mocks.jobs.expect_commit().withf(|t| t.job().submit_attempted()).times(1).returning(applied);
    mocks
        .jobs
        .expect_commit()
        .withf(|t| !t.job().submit_attempted() && t.job().state() == JobState::Queued && t.job().poll_failures() == 1)
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    advance(mocks.steps(), job()).await;
}

#[tokio::test]
async fn driver_times_out_a_job_and_asks_the_provider_to_stop_it() {
    let mut mocks = Mocks::new();
    mocks.clock = MockClock::new();
    mocks.clock.expect_now().returning(|| t0() + time::Duration::hours(1));
    mocks.upstream.expect_status().times(0);
    mocks
        .upstream
        .expect_cancel_unless_done()
        .withf(|_, upstream| *upstream == upstream_ref())
        .times(1)
        .returning(|_, _| Ok(genjobs_domain::ports::CancelOutcome::Requested));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().error().as_ref().is_some_and(|e| e.code == JobErrorCode::UpstreamTimeout))
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    advance(mocks.steps(), submitted_job()).await;
}

#[tokio::test]
async fn driver_settles_a_completed_job_at_the_delivered_price() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
    let two_images = (0..2)
        .map(|i| OutputItem {
            url: format!("https://cdn/{i}.png"),
            kind: OutputKind::Image,
            meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
            copy: None,
        })
        .collect::<Vec<_>>();
    mocks.upstream.expect_result().return_once(move |_, _, _| Ok(two_images));
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.movement() == Some(CreditMovement::Settle { held: Credits::new(12), actual: Credits::new(8) }))
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().times(1).returning(|_| ());
    advance(mocks.steps(), submitted_job()).await;
}

#[tokio::test]
async fn driver_maps_result_failures_to_error_codes() {
    for (failure, code) in [
        (ResultFailure::Rejected("nsfw".into()), JobErrorCode::UpstreamRejected),
        (ResultFailure::Failed("crash".into()), JobErrorCode::UpstreamFailed),
        (ResultFailure::Invalid("shape".into()), JobErrorCode::OutputInvalid),
    ] {
        let mut mocks = Mocks::new();
        mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
        mocks.upstream.expect_result().return_once(move |_, _, _| Err(failure));
        mocks
            .jobs
            .expect_commit()
            .withf(move |t| {
                t.job().error().as_ref().is_some_and(|e| e.code == code)
                    && t.job().credits_actual() == Some(Credits::ZERO)
            })
            .times(1)
            .returning(applied);
        mocks.events.expect_publish().returning(|_| ());
        advance(mocks.steps(), submitted_job()).await;
    }
}

#[tokio::test]
async fn driver_backs_off_on_transient_poll_failures_without_writing() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Err(PollFailure::Transient("503".into())));
    mocks.jobs.expect_commit().times(0);
    let kept = advance(mocks.steps(), submitted_job()).await.unwrap();
    assert_eq!((kept.poll_failures(), kept.next_poll_at()), (1, Some(t0() + time::Duration::seconds(4))));
}

#[tokio::test]
async fn driver_discards_a_late_result_when_the_job_changed_meanwhile() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
    mocks.upstream.expect_result().returning(|_, _, _| {
        Ok(vec![OutputItem {
            url: "https://cdn/a.png".into(),
            kind: OutputKind::Image,
            meta: OutputMeta::default(),
            copy: None,
        }])
    });
    let canceled = submitted_job().apply(Trigger::Cancel, t0()).unwrap().into_job();
    mocks.jobs.expect_commit().times(1).return_once(move |_| Ok(Commit::Stale(canceled)));
    mocks.events.expect_publish().times(0);
    advance(mocks.steps(), submitted_job()).await;
}

#[tokio::test]
async fn driver_estimates_progress_when_the_provider_gives_none() {
    let mut mocks = Mocks::new();
    let started =
        submitted_job().apply(Trigger::UpstreamRunning { progress: 0, next_poll_at: t0() }, t0()).unwrap().into_job();
    mocks.clock = MockClock::new();
    mocks.clock.expect_now().returning(|| t0() + time::Duration::seconds(4));
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Running { percent: None }));
    mocks.jobs.expect_commit().withf(|t| t.job().progress() == 50 && t.is_recomputable()).times(1).returning(applied);
    mocks.events.expect_publish().times(0);
    advance(mocks.steps(), started).await;
}

#[tokio::test]
async fn driver_wakes_waiters_when_a_job_starts_running() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Running { percent: Some(5) }));
    mocks.jobs.expect_commit().withf(|t| t.job().state() == JobState::Running).times(1).returning(applied);
    mocks.events.expect_publish().times(1).returning(|_| ());
    advance(mocks.steps(), submitted_job()).await;
}

#[tokio::test]
async fn driver_keeps_the_cadence_of_the_due_time_not_of_the_answer() {
    let mut mocks = Mocks::new();
    mocks.clock = MockClock::new();
    mocks.clock.expect_now().returning(|| t0() + time::Duration::milliseconds(700));
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Queued { position: None }));
    let kept = advance(mocks.steps(), submitted_job()).await.unwrap();
    assert_eq!(kept.next_poll_at(), Some(t0() + time::Duration::seconds(2)));
}

#[tokio::test]
async fn driver_writes_nothing_for_a_poll_that_changes_nothing_visible() {
    let mut mocks = Mocks::new();
    let running =
        submitted_job().apply(Trigger::UpstreamRunning { progress: 40, next_poll_at: t0() }, t0()).unwrap().into_job();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Running { percent: Some(40) }));
    mocks.jobs.expect_commit().times(0);
    mocks.events.expect_publish().times(0);
    let kept = advance(mocks.steps(), running.clone()).await.unwrap();
    assert_eq!(kept.version(), running.version(), "nothing was written, so the version stays");
    assert_eq!(kept.next_poll_at(), Some(t0() + time::Duration::seconds(2)));
}

#[tokio::test]
async fn driver_lets_go_of_a_job_once_it_is_final() {
    let mut mocks = Mocks::new();
    mocks.upstream.expect_status().returning(|_, _| Ok(UpstreamStatus::Completed));
    mocks.upstream.expect_result().returning(|_, _, _| {
        Ok(vec![OutputItem {
            url: "https://cdn/a.png".into(),
            kind: OutputKind::Image,
            meta: OutputMeta::default(),
            copy: None,
        }])
    });
    mocks.jobs.expect_commit().returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    assert_eq!(advance(mocks.steps(), submitted_job()).await, None);
}

#[tokio::test]
async fn an_upload_is_kept_only_when_it_is_an_image_within_the_limit() {
    let png = bytes::Bytes::from_static(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let mut outputs = MockOutputStore::new();
    outputs.expect_keep_upload().times(1).returning(|_, _| Ok(()));
    let mut store = MockUploadStore::new();
    store.expect_record().times(1).returning(|batch| Ok(vec![false; batch.uploads.len()]));
    let ports = Ports { outputs: Some(Arc::new(outputs)), uploads: Arc::new(store), ..Mocks::new().ports() };
    let uploads = Uploads::new(&ports, genjobs_domain::upload::UploadSettings::default());
    let kept = uploads.keep(&caller(), png.clone()).await.unwrap();
    assert_eq!(kept.format, genjobs_domain::upload::ImageFormat::Png);
    assert_eq!(kept.digest, genjobs_domain::upload::UploadDigest::of(&png), "named by its content");
    let text = bytes::Bytes::from_static(b"<svg xmlns='http://www.w3.org/2000/svg'/>");
    assert_eq!(uploads.keep(&caller(), text).await, Err(UploadError::NotAnImage), "judged by its bytes");
    let mut large = b"\x89PNG\r\n\x1a\n".to_vec();
    large.resize(genjobs_domain::upload::MAX_UPLOAD_BYTES + 1, 0);
    assert_eq!(uploads.keep(&caller(), large.into()).await, Err(UploadError::TooLarge));
}

/// Without an output store, the upload store keeps the bytes, once per content; past the quota
/// nothing is kept.
#[tokio::test]
async fn uploads_without_an_output_store_are_kept_once_per_content_within_the_quota() {
    let png = bytes::Bytes::from_static(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let mut store = MockUploadStore::new();
    let mut answers = vec![Err(RecordUploadsError::QuotaExceeded), Ok(vec![true]), Ok(vec![false])];
    store.expect_record().times(3).returning(move |_| answers.pop().unwrap());
    store.expect_put_bytes().times(1).returning(|_, _| Ok(()));
    let ports = Ports { uploads: Arc::new(store), ..Mocks::new().ports() };
    let settings = genjobs_domain::upload::UploadSettings { bytes_per_day: 100, ..Default::default() };
    let uploads = Uploads::new(&ports, settings);
    assert!(uploads.keep(&caller(), png.clone()).await.is_ok(), "new: its bytes put");
    assert!(uploads.keep(&caller(), png.clone()).await.is_ok(), "held: not put again");
    assert_eq!(uploads.keep(&caller(), png).await, Err(UploadError::QuotaExceeded { quota: 100 }));
}

#[tokio::test]
async fn a_job_with_no_free_slot_waits_unsent_and_costs_no_write_while_it_waits() {
    let mut mocks = Mocks::new();
    mocks.upstream = MockUpstreamProvider::new();
    mocks.upstream.expect_reserve().times(2).returning(|_, _| Capacity::Full);
    mocks.upstream.expect_submit_placed().times(0);
    mocks
        .jobs
        .expect_commit()
        .withf(|t| t.job().waits_for_capacity() && !t.job().submit_attempted())
        .times(1)
        .returning(applied);
    mocks.events.expect_publish().returning(|_| ());
    let steps = mocks.steps();
    let lease = steps.settings().lease;
    let waiting = advance(steps.clone(), job()).await.expect("the driver keeps the waiting job");
    assert!(waiting.waits_for_capacity());
    assert_eq!(waiting.next_poll_at(), Some(t0() + lease), "it looks again a lease later unless a slot frees");
    let still = advance(steps, waiting).await.expect("still held");
    assert!(still.waits_for_capacity(), "a second look that finds no slot writes nothing");
}
