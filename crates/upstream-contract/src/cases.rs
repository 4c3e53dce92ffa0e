//! The cases of the contract, each a rule the driver relies on.

use std::time::Duration;

use genjobs_domain::ids::JobId;
use genjobs_domain::job::UpstreamRef;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::{CancelOutcome, ResultFailure, UpstreamStatus};
use genjobs_test_wait::wait_until;

use crate::{Fixture, Outcome};

/// How long a short run may take at a simulator on a loaded machine.
const RUN_LIMIT: Duration = Duration::from_secs(30);

fn job() -> JobId {
    JobId::new_at(time::OffsetDateTime::now_utc())
}

async fn submitted(fixture: &impl Fixture, outcome: Outcome) -> (JobId, UpstreamRef) {
    let id = job();
    let upstream = fixture.adapter().submit(id, &fixture.model(), &fixture.input(outcome)).await.unwrap();
    (id, upstream)
}

/// Polls until the job leaves the queue and its run.
async fn final_status(fixture: &impl Fixture, id: JobId, upstream: &UpstreamRef) -> UpstreamStatus {
    let adapter = fixture.adapter();
    let poll = async || adapter.status(id, upstream).await;
    let polled = wait_until(RUN_LIMIT, "the run's end", poll, |status| {
        matches!(status, Ok(UpstreamStatus::Completed | UpstreamStatus::Failed(_)))
    })
    .await;
    polled.unwrap()
}

/// The reference names the adapter, so that later calls and webhooks reach it.
pub async fn a_submission_is_referenced_by_the_adapters_own_name(fixture: &impl Fixture) {
    let (_, upstream) = submitted(fixture, Outcome::Succeeds).await;
    assert_eq!(upstream.provider(), fixture.adapter().name());
    assert!(!upstream.key().is_empty(), "a reference has a key");
}

/// A completed job's result is its outputs, each a file its URL serves, and what the provider
/// reports of its billing (billable units, or compute time), as both providers report it.
pub async fn a_job_runs_to_outputs_that_are_real_files(fixture: &impl Fixture) {
    let (id, upstream) = submitted(fixture, Outcome::Succeeds).await;
    assert_eq!(final_status(fixture, id, &upstream).await, UpstreamStatus::Completed);
    let result = fixture.adapter().result(id, &upstream, Modality::Image).await.unwrap();
    assert!(!result.outputs.is_empty(), "a completed job has outputs");
    assert!(result.usage.is_reported(), "the provider reports what it bills: {result:?}");
    for output in result.outputs {
        let response = reqwest::get(&output.url).await.unwrap();
        assert!(response.status().is_success(), "{} answers {}", output.url, response.status());
        let bytes = response.bytes().await.unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is a PNG", output.url);
    }
}

/// A run that fails is reported as failed, by its status or its result, never as outputs (billed
/// or not: a provider may bill the time a failed run took).
pub async fn a_failed_run_is_reported_as_a_failure(fixture: &impl Fixture) {
    let (id, upstream) = submitted(fixture, Outcome::Fails).await;
    let failure = match final_status(fixture, id, &upstream).await {
        UpstreamStatus::Failed(failure) => failure,
        UpstreamStatus::Completed => match fixture.adapter().result(id, &upstream, Modality::Image).await {
            Err(failure) => failure,
            Ok(result) => panic!("a failed run gave a result: {result:?}"),
        },
        other => panic!("not final: {other:?}"),
    };
    let failure = match failure {
        ResultFailure::Billed { failure, .. } => *failure,
        unbilled => unbilled,
    };
    assert!(matches!(failure, ResultFailure::Failed(_) | ResultFailure::Rejected(_)), "{failure:?}");
}

/// A job still running can be canceled, and a cancel at its deadline says it was asked to stop.
pub async fn a_running_job_can_be_canceled(fixture: &impl Fixture) {
    let (id, upstream) = submitted(fixture, Outcome::RunsLong).await;
    let adapter = fixture.adapter();
    assert_eq!(adapter.cancel_unless_done(id, &upstream).await, Ok(CancelOutcome::Requested));
}
