//! Use-case tests over mockall mocks of the ports: each pins down which port calls a use case
//! makes, with what, and how it maps their answers.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap is a failed test")]

mod authenticate;
mod driver;
mod jobs;
mod routing;
mod submit;
mod uploads;

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
    batches: MockBatchStore,
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
            batches: MockBatchStore::new(),
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
            batches: Arc::new(self.batches),
            openai_batches: Arc::new(genjobs_domain::ports::MockOpenAiBatchStore::new()),
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
        Rate { per: Unit::Image, credits: 4, percent: PricePercent::FULL, batch_percent: PricePercent::FULL },
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
    j.apply(Trigger::Submitted { upstream: upstream_ref(), next_poll_at: t0(), billing: None }, t0())
        .unwrap()
        .into_job()
}

fn applied(transition: genjobs_domain::job::Transition) -> Result<Commit, StoreError> {
    Ok(Commit::Applied(transition.into_job()))
}

/// What a provider delivered for a job that made one image.
fn one_image() -> Vec<OutputItem> {
    vec![OutputItem {
        url: "https://cdn/a.png".into(),
        kind: OutputKind::Image,
        meta: OutputMeta::default(),
        copy: None,
    }]
}
