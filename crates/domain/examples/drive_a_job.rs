//! Drives one image job from submission to settlement with the domain alone: the in-memory
//! store, the in-process event hub, rate limiter and clock, and a provider written right here
//! that finishes every job at once. This is what a tool reusing `genjobs-domain` supplies: one
//! implementation of each port.
//!
//! Run it with `cargo run -p genjobs-domain --example drive_a_job`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use genjobs_domain::catalog::{Catalog, Model};
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::JobId;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::output::{OutputItem, OutputKind, OutputMeta};
use genjobs_domain::ports::{PollFailure, RandomIds, ResultFailure, SubmitFailure, UpstreamProvider, UpstreamStatus};
use genjobs_domain::request::{GenerationDraft, GenerationRequest, WholeNumber};
use genjobs_domain::usecases::{DriverSettings, Gateway, JobDriver, NewUserRequest, Ports, Settings, Submission};
use genjobs_runtime::{EventHub, SystemClock, TokenBucketLimiter};
use genjobs_store_memory::MemoryStore;

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

    async fn result(&self, _: JobId, at: &UpstreamRef, _: Modality) -> Result<Vec<OutputItem>, ResultFailure> {
        let images = at.detail("images").and_then(|n| n.parse().ok()).unwrap_or(1);
        let image = |i| OutputItem {
            url: format!("https://example.invalid/{i}.png"),
            kind: OutputKind::Image,
            meta: OutputMeta { content_type: "image/png".into(), ..OutputMeta::default() },
            copy: None,
        };
        Ok((0..images).map(image).collect())
    }

    async fn cancel(&self, _: JobId, _: &UpstreamRef) -> Result<(), PollFailure> {
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = Arc::new(MemoryStore::new());
    let ports = Ports {
        jobs: store.clone(),
        accounts: store.clone(),
        usage: store.clone(),
        catalog: store,
        route_schemas: vec![],
        upstream: Arc::new(InstantProvider),
        outputs: None,
        events: Arc::new(EventHub::new()),
        rate_limiter: Arc::new(TokenBucketLimiter::new()),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
    };
    let catalog = Arc::new(Catalog::builtin()?);
    let poll = Duration::from_millis(20);
    let driver =
        JobDriver::new(ports.clone(), Arc::clone(&catalog), DriverSettings::default().with_poll_interval(poll));
    // The driver of this process sends the jobs this gateway accepts, with no claim in between.
    let gateway = Gateway::new(ports, catalog, Settings { poll_interval: poll, ..Settings::default() })
        .with_handoff(driver.handoff());
    tokio::spawn(async move { driver.run().await });

    let (account, key) = gateway.create_user(NewUserRequest::validate("example", 100, None, None)?).await?;
    println!("user {} with {} credits", account.user_id, account.balances.available);
    let caller = gateway.authenticate(key.expose()).await?;

    let draft = GenerationDraft {
        prompt: Some("a lighthouse at dusk".into()),
        n: Some(WholeNumber::Exact(2)),
        ..GenerationDraft::default()
    };
    let request = GenerationRequest::validate(Modality::Image, draft, &gateway.catalog())?;
    let receipt = gateway.submit(&caller, Submission { request, idempotency: None }).await?;
    println!("job {} {} with {} credits held", receipt.job_id, receipt.state.as_str(), receipt.credits_held);

    let job = gateway.wait_for_job(&caller, receipt.job_id, Duration::from_secs(5)).await?;
    let charged = job.credits_actual().unwrap_or(Credits::ZERO);
    println!(
        "job {} {} with {} outputs, {charged} credits charged",
        job.id(),
        job.state().as_str(),
        job.outputs().map_or(0, <[_]>::len)
    );
    let balances = gateway.account(&caller).await?.balances;
    println!("available {}, held {}, spent {}", balances.available, balances.held, balances.spent);
    Ok(())
}
