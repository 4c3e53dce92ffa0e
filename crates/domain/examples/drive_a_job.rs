//! Drives one image job from acceptance to settlement with the domain alone: everything it
//! needs from outside is written right here, as a tool reusing `genjobs-domain` would write it.
//!
//! - `OneAccountStore`: a [`JobStore`] over one account's balances and a map of jobs. Its only
//!   duty that matters is the one every store has: commit a transition and its credit movement
//!   together, and only while the job still has the version the transition expects.
//! - `InstantProvider`: an [`UpstreamProvider`] that completes every job at once with one image
//!   per image asked for.
//! - `ChangeLog`, `SystemTime`: the change notifications and the clock.
//!
//! The use case that moves the job is [`JobSteps`]: each step asks the provider, and commits
//! what its answer does to the job. A real service runs the steps from a driver loop (the
//! `genjobs-driver` crate); here a plain loop calls them until the job is final.
//!
//! Run it with `cargo run -p genjobs-domain --example drive_a_job`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::{self, BoxStream, StreamExt};
use genjobs_domain::catalog::{Catalog, Model};
use genjobs_domain::credits::{Balances, CreditMovement, Credits};
use genjobs_domain::ids::{JobId, LeaseId, UserId};
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::{Job, Transition, UpstreamRef};
use genjobs_domain::modality::Modality;
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use genjobs_domain::ports::{
    AcceptError, Accepted, Clock, Commit, IdempotencyClaim, JobChanges, JobEvents, JobFilter, JobStore,
    MockAccountStore, MockCatalogStore, MockJobRemovals, MockRateLimiter, MockUploadStore, MockUsageStore, PollFailure,
    RandomIds, ResultFailure, StoreError, SubmitFailure, UnfinishedJobs, UpstreamProvider, UpstreamResult,
    UpstreamStatus,
};
use genjobs_domain::request::{GenerationDraft, GenerationRequest, WholeNumber};
use genjobs_domain::usecases::{JobSteps, Ports, StepSettings, Stepped};
use time::OffsetDateTime;

/// One account's balances and its jobs.
struct OneAccountStore {
    balances: Mutex<Balances>,
    jobs: Mutex<HashMap<JobId, Job>>,
}

impl OneAccountStore {
    fn with_credits(credits: u64) -> Self {
        let balances = Balances { available: Credits::new(credits), ..Balances::default() };
        Self { balances: Mutex::new(balances), jobs: Mutex::default() }
    }

    fn balances(&self) -> Balances {
        *self.balances.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies a movement to the balances; a movement they cannot take is a broken ledger.
    fn apply(&self, movement: CreditMovement) -> Result<(), StoreError> {
        let mut balances = self.balances.lock().unwrap_or_else(PoisonError::into_inner);
        *balances = balances.apply(movement).map_err(|e| StoreError::Internal(e.to_string()))?;
        Ok(())
    }
}

#[async_trait]
impl JobStore for OneAccountStore {
    async fn accept(
        &self,
        job: Job,
        _: Option<IdempotencyClaim>,
        _: Option<LeaseId>,
        _: OffsetDateTime,
    ) -> Result<Accepted, AcceptError> {
        let available = self.balances().available;
        if available < job.credits_held() {
            return Err(AcceptError::InsufficientCredits { needed: job.credits_held(), available });
        }
        self.apply(CreditMovement::Hold(job.credits_held()))?;
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).insert(job.id(), job.clone());
        Ok(Accepted::Created(job))
    }

    async fn job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        Ok(self.jobs.lock().unwrap_or_else(PoisonError::into_inner).get(&id).cloned())
    }

    async fn job_by_upstream_key(&self, key: &str) -> Result<Option<Job>, StoreError> {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(jobs.values().find(|job| job.upstream().is_some_and(|at| at.key() == key)).cloned())
    }

    async fn jobs_of(&self, _: UserId, _: Option<JobId>, _: usize) -> Result<Vec<Job>, StoreError> {
        Ok(self.jobs.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect())
    }

    async fn find_jobs(&self, filter: &JobFilter, _: Option<JobId>, _: usize) -> Result<Vec<Job>, StoreError> {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(jobs.values().filter(|job| filter.matches(job)).cloned().collect())
    }

    /// The store's one real duty: the job and its credit movement change together, and only
    /// from the version the transition was computed on.
    async fn commit(&self, transition: Transition) -> Result<Commit, StoreError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(stored) = jobs.get(&transition.job().id()) else { return Ok(Commit::Missing) };
        if stored.version() != transition.expected_version() {
            return Ok(Commit::Stale(stored.clone()));
        }
        if let Some(movement) = transition.movement() {
            self.apply(movement)?;
        }
        let job = transition.into_job();
        jobs.insert(job.id(), job.clone());
        Ok(Commit::Applied(job))
    }

    async fn ready(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn count_unfinished(&self) -> Result<UnfinishedJobs, StoreError> {
        Ok(UnfinishedJobs::default())
    }

    /// No driver holds leases here: this example steps its one job itself.
    async fn start_lease(&self, _: LeaseId, _: OffsetDateTime, _: OffsetDateTime) -> Result<(), StoreError> {
        Ok(())
    }

    async fn renew_lease(
        &self,
        _: LeaseId,
        _: Vec<JobId>,
        _: OffsetDateTime,
        _: OffsetDateTime,
        _: OffsetDateTime,
    ) -> Result<Option<Vec<JobId>>, StoreError> {
        Ok(Some(Vec::new()))
    }

    async fn end_lease(&self, _: LeaseId) -> Result<(), StoreError> {
        Ok(())
    }

    async fn claim_due(&self, _: LeaseId, _: OffsetDateTime, _: usize) -> Result<Vec<Job>, StoreError> {
        Ok(Vec::new())
    }
}

/// A provider that completes every job at once with one image per requested image.
struct InstantProvider;

#[async_trait]
impl UpstreamProvider for InstantProvider {
    fn name(&self) -> &'static str {
        "instant"
    }

    /// This provider takes no parameters beyond the request's own, so `extra` cannot raise a price.
    fn refused_extra_key(&self, _: &Model, _: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
        None
    }

    /// The reference is this provider's id of the job, with how many images it wants as a detail.
    async fn submit(&self, job_id: JobId, _: &Model, input: &GenerationInput) -> Result<UpstreamRef, SubmitFailure> {
        let images = input.n.unwrap_or(1);
        Ok(UpstreamRef::new("example", job_id.to_string()).with_detail("images", images.to_string()))
    }

    async fn status(&self, _: JobId, _: &UpstreamRef) -> Result<UpstreamStatus, PollFailure> {
        Ok(UpstreamStatus::Completed)
    }

    async fn result(&self, _: JobId, at: &UpstreamRef, _: Modality) -> Result<UpstreamResult, ResultFailure> {
        let images = at.detail("images").and_then(|n| n.parse().ok()).unwrap_or(1);
        let image = |i| OutputItem {
            url: format!("https://example.invalid/{i}.png"),
            kind: OutputKind::Image,
            meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
            copy: None,
        };
        Ok(UpstreamResult::from((0..images).map(image).collect::<Vec<_>>()))
    }

    async fn cancel(&self, _: JobId, _: &UpstreamRef) -> Result<(), PollFailure> {
        Ok(())
    }
}

/// Change notifications that nobody listens to here: the steps publish, and this example reads
/// the store instead.
struct ChangeLog;

#[async_trait]
impl JobEvents for ChangeLog {
    async fn publish(&self, job_id: JobId) {
        println!("job {job_id} changed");
    }

    fn subscribe(&self, _: JobId) -> JobChanges {
        stream::pending().boxed()
    }

    fn subscribe_all(&self) -> BoxStream<'static, JobId> {
        stream::pending().boxed()
    }

    async fn watch(&self, _: JobId) {}

    fn subscribe_watches(&self) -> BoxStream<'static, JobId> {
        stream::pending().boxed()
    }

    fn announce_webhook(&self) {}

    fn subscribe_webhooks(&self) -> BoxStream<'static, ()> {
        stream::pending().boxed()
    }

    async fn free_capacity(&self, _: JobId) {}

    fn subscribe_capacity(&self) -> BoxStream<'static, ()> {
        stream::pending().boxed()
    }
}

/// The system's time.
struct SystemTime;

#[async_trait]
impl Clock for SystemTime {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = Arc::new(OneAccountStore::with_credits(100));
    let clock = Arc::new(SystemTime);
    // The steps reach only jobs, the provider, events and time; the ports they never call are
    // mockall's mocks with no expectation, which would fail loudly if called.
    let ports = Ports {
        jobs: store.clone(),
        accounts: Arc::new(MockAccountStore::new()),
        batches: Arc::new(genjobs_domain::ports::MockBatchStore::new()),
        openai_batches: Arc::new(genjobs_domain::ports::MockOpenAiBatchStore::new()),
        removals: Arc::new(MockJobRemovals::new()),
        usage: Arc::new(MockUsageStore::new()),
        catalog: Arc::new(MockCatalogStore::new()),
        route_schemas: vec![],
        upstream: Arc::new(InstantProvider),
        outputs: None,
        uploads: Arc::new(MockUploadStore::new()),
        events: Arc::new(ChangeLog),
        rate_limiter: Arc::new(MockRateLimiter::new()),
        clock: clock.clone(),
        ids: Arc::new(RandomIds),
        traces: Arc::new(genjobs_domain::ports::NoTraces),
    };
    let catalog = Arc::new(Catalog::builtin()?);
    let settings = StepSettings {
        poll_interval: Duration::from_millis(20),
        job_timeout: Duration::from_secs(60),
        lease: Duration::from_secs(20),
    };
    let steps = JobSteps::new(ports, Arc::clone(&catalog), settings);

    let draft = GenerationDraft {
        prompt: Some("a lighthouse at dusk".into()),
        n: Some(WholeNumber::Exact(2)),
        ..GenerationDraft::default()
    };
    let request = GenerationRequest::validate(Modality::Image, draft, &catalog)?;
    let model = catalog.model(request.model.as_str()).ok_or("the built-in catalog lost its model")?;
    let now = clock.now();
    let (job, hold) = Job::accept(
        JobId::new_at(now),
        UserId::new_at(now),
        request.model,
        request.modality,
        request.input.clone(),
        model.rate(&request.input),
        now,
    );
    println!("job {} accepted: {hold:?}", job.id());
    let Accepted::Created(mut job) = store.accept(job, None, None, now).await? else {
        return Err("a job with no idempotency key is always new".into());
    };
    print_balances(store.balances());

    // This example is the job's driver: it waits wherever a step asks it to.
    let mut stepped = steps.advance(job.clone()).await;
    loop {
        match stepped {
            Stepped::Done(Some(next)) => {
                println!("job {} {}", next.id(), next.state().as_str());
                job = next;
                stepped = steps.advance(job.clone()).await;
            }
            Stepped::Done(None) => break,
            Stepped::Unrecorded(unrecorded) => {
                clock.sleep(unrecorded.retry_in()).await;
                stepped = steps.record_submission(unrecorded).await;
            }
        }
    }
    let job = store.job(job.id()).await?.ok_or("the job vanished")?;
    let charged = job.credits_actual().unwrap_or(Credits::ZERO);
    println!(
        "job {} {} with {} outputs, {charged} credits charged",
        job.id(),
        job.state().as_str(),
        job.outputs().map_or(0, <[_]>::len)
    );
    print_balances(store.balances());
    Ok(())
}

fn print_balances(balances: Balances) {
    println!("available {}, held {}, spent {}", balances.available, balances.held, balances.spent);
}
