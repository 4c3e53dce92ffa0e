//! The domain's provider notifications and output copies over this store, with every other port
//! mocked: a delivery ends its job once whatever else happens, and a copy that keeps failing
//! leaves the provider's URL. (It lives here rather than in the domain so that the domain's own
//! tests reach no adapter crate.)

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

use genjobs_domain::catalog::{PricePercent, Rate, Unit};
use std::sync::Arc;

use genjobs_domain::catalog::Catalog;
use genjobs_domain::credits::{Balances, Credits};
use genjobs_domain::ids::{ApiKey, JobId, UserId};
use genjobs_domain::job::{Job, JobState, Trigger, UpstreamRef};
use genjobs_domain::modality::Modality;
use genjobs_domain::output::{OutputCopy, OutputItem, OutputKind, OutputMeta, StoredFile};
use genjobs_domain::ports::*;
use genjobs_domain::request::{GenerationDraft, GenerationRequest};
use genjobs_domain::usecases::*;
use genjobs_store_memory::MemoryStore;
use time::OffsetDateTime;

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

struct World {
    store: Arc<MemoryStore>,
    notifications: ProviderNotifications,
    user: UserId,
    job: Job,
}

fn image(url: &str) -> OutputItem {
    OutputItem {
        url: url.into(),
        kind: OutputKind::Image,
        meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
        copy: None,
    }
}

/// A user with 100 credits and one job submitted upstream as `req-1`.
async fn world(upstream: MockUpstreamProvider, outputs: Option<MockOutputStore>) -> World {
    let store = Arc::new(MemoryStore::new());
    let user = UserId::new_at(now());
    let limits = Limits { rate_limit_per_minute: 60, max_concurrent_jobs: 4 };
    let key = StoredKey::of(&ApiKey::generate(), user, now());
    store.create_user(user, "u".into(), Credits::new(100), limits, key).await.unwrap();
    let catalog = Catalog::builtin().unwrap();
    let draft = GenerationDraft { prompt: Some("a fox".into()), ..GenerationDraft::default() };
    let request = GenerationRequest::validate(Modality::Image, draft, &catalog).unwrap();
    let (job, _) = Job::accept(
        JobId::new_at(now()),
        user,
        request.model,
        request.modality,
        request.input,
        Rate { per: Unit::Image, credits: 10, percent: PricePercent::FULL, batch_percent: PricePercent::FULL },
        now(),
    );
    store.accept(job.clone(), None, None, now()).await.unwrap();
    let mut job = job;
    for trigger in [
        Trigger::SubmitStarted { next_poll_at: now() },
        Trigger::Submitted { upstream: UpstreamRef::new("test", "req-1"), next_poll_at: now(), billing: None },
    ] {
        job = match store.commit(job.apply(trigger, now()).unwrap()).await.unwrap() {
            Commit::Applied(job) => job,
            other => panic!("{other:?}"),
        };
    }
    let mut clock = MockClock::new();
    clock.expect_now().returning(now);
    clock.expect_sleep().returning(|_| ());
    let mut events = MockJobEvents::new();
    events.expect_publish().returning(|_| ());
    events.expect_free_capacity().returning(|_| ());
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
        outputs: outputs.map(|o| Arc::new(o) as Arc<dyn OutputStore>),
        uploads: store.clone(),
        events: Arc::new(events),
        rate_limiter: Arc::new(MockRateLimiter::new()),
        clock: Arc::new(clock),
        ids: Arc::new(RandomIds),
        traces: Arc::new(genjobs_domain::ports::NoTraces),
    };
    World { store, notifications: ProviderNotifications::new(&ports), user, job }
}

fn reporting(key: &'static str, outcome: Result<Vec<OutputItem>, ResultFailure>) -> MockUpstreamProvider {
    let mut upstream = MockUpstreamProvider::new();
    upstream.expect_read_notification().returning(move |_, _| {
        Ok(UpstreamReport { key: key.into(), outcome: outcome.clone().map(UpstreamResult::from), delivery_id: None })
    });
    upstream
}

async fn balances(world: &World) -> Balances {
    world.store.account(world.user).await.unwrap().unwrap().balances
}

#[tokio::test]
async fn a_delivery_ends_its_job_once_however_often_it_comes() {
    let world = world(reporting("req-1", Ok(vec![image("https://cdn/a.png")])), None).await;
    let delivery = Delivery::default();
    let first = world.notifications.upstream_notification(&delivery).await.unwrap();
    assert_eq!(first, NotificationOutcome::Applied(JobState::Succeeded));
    let again = world.notifications.upstream_notification(&delivery).await.unwrap();
    assert_eq!(again, NotificationOutcome::AlreadyFinal(JobState::Succeeded));
    let stored = world.store.job(world.job.id()).await.unwrap().unwrap();
    let spent = stored.credits_actual().unwrap();
    let expected = Balances { available: Credits::new(100 - spent.get()), held: Credits::new(0), spent };
    assert_eq!(balances(&world).await, expected);
}

/// A provider whose deliveries report `key` as ended, each signed with the delivery id `id`.
fn reporting_as(key: &'static str, id: &'static str) -> MockUpstreamProvider {
    let mut upstream = MockUpstreamProvider::new();
    upstream.expect_read_notification().returning(move |_, _| {
        Ok(UpstreamReport {
            key: key.into(),
            outcome: Ok(vec![image("https://cdn/a.png")].into()),
            delivery_id: Some(id.into()),
        })
    });
    upstream
}

#[tokio::test]
async fn a_signed_delivery_answered_once_is_refused_as_a_replay() {
    let world = world(reporting_as("req-1", "msg_1"), None).await;
    let first = world.notifications.upstream_notification(&Delivery::default()).await;
    assert_eq!(first, Ok(NotificationOutcome::Applied(JobState::Succeeded)));
    let replay = world.notifications.upstream_notification(&Delivery::default()).await;
    assert!(
        matches!(replay, Err(NotificationError::Rejected(NotificationRejected::InvalidSignature(_)))),
        "{replay:?}"
    );
}

#[tokio::test]
async fn a_delivery_refused_for_an_unknown_job_is_read_again_when_it_comes_again() {
    let world = world(reporting_as("req-early", "msg_2"), None).await;
    for _ in 0..2 {
        let early = world.notifications.upstream_notification(&Delivery::default()).await;
        assert_eq!(early, Err(NotificationError::UnknownJob), "not remembered: the job may be recorded by then");
    }
}

#[tokio::test]
async fn a_failure_delivered_releases_the_credits() {
    let world = world(reporting("req-1", Err(ResultFailure::Rejected("no".into()))), None).await;
    let outcome = world.notifications.upstream_notification(&Delivery::default()).await.unwrap();
    assert_eq!(outcome, NotificationOutcome::Applied(JobState::Failed));
    assert_eq!(balances(&world).await.available, Credits::new(100));
}

#[tokio::test]
async fn unknown_rejected_or_transient_deliveries_change_nothing() {
    let world = world(reporting("req-2", Ok(vec![image("https://cdn/a.png")])), None).await;
    let unknown = world.notifications.upstream_notification(&Delivery::default()).await;
    assert_eq!(unknown, Err(NotificationError::UnknownJob));

    let mut forged = MockUpstreamProvider::new();
    forged.expect_read_notification().returning(|_, _| Err(NotificationRejected::InvalidSignature("bad".into())));
    let world = world_with(forged).await;
    let refused = world.notifications.upstream_notification(&Delivery::default()).await;
    assert!(matches!(refused, Err(NotificationError::Rejected(NotificationRejected::InvalidSignature(_)))));

    let world = world_with(reporting("req-1", Err(ResultFailure::Transient("later".into())))).await;
    assert_eq!(world.notifications.upstream_notification(&Delivery::default()).await, Ok(NotificationOutcome::Ignored));
    assert_eq!(world.store.job(world.job.id()).await.unwrap().unwrap().state(), JobState::Queued);
    assert_eq!(balances(&world).await.held, Credits::new(10));
}

async fn world_with(upstream: MockUpstreamProvider) -> World {
    world(upstream, None).await
}

#[tokio::test]
async fn a_copy_that_fails_leaves_the_providers_url_and_the_job_succeeds() {
    let mut outputs = MockOutputStore::new();
    outputs
        .expect_copy()
        .withf(|_, index, _, _| *index == 0)
        .times(1)
        .returning(|_, _, _, _| Err(CopyFailure::Transient("the store is down".into())));
    let file = StoredFile { size: 9, content_type: "image/png".into(), sha256: "00".repeat(32) };
    let kept = file.clone();
    outputs.expect_copy().withf(|_, index, _, _| *index == 1).times(1).returning(move |_, _, _, _| Ok(kept.clone()));
    let upstream = reporting("req-1", Ok(vec![image("https://cdn/a.png"), image("https://cdn/b.png")]));
    let world = world(upstream, Some(outputs)).await;
    world.notifications.upstream_notification(&Delivery::default()).await.unwrap();
    let job = world.store.job(world.job.id()).await.unwrap().unwrap();
    let copies: Vec<_> = job.outputs().unwrap().iter().map(|o| o.copy.clone()).collect();
    assert_eq!(copies, [Some(OutputCopy::Failed), Some(OutputCopy::Stored(file))]);
    assert_eq!(job.outputs().unwrap()[0].url, "https://cdn/a.png", "the provider's URL is kept either way");
}
