//! # genjobs-upstream-contract
//!
//! The contract every provider adapter passes, written once: an adapter's test file implements
//! [`Fixture`] (the adapter pointed at its provider's simulator, a model routed to it, and inputs
//! that succeed, fail or run long there) and calls [`upstream_contract_tests!`], which expands to
//! one `#[tokio::test]` per case of [`cases`], so that a failure names the rule that broke. The
//! rules are the port's, as the driver relies on them: a submission is answered with a reference
//! that names the adapter; polls end in `Completed` or `Failed`; a completed job's outputs are
//! fetchable files; a failure is reported as one, never as outputs; a running job can be canceled.
//!
//! ```text
//! genjobs_upstream_contract::upstream_contract_tests!(Simulated::start());
//! ```

#![allow(clippy::unwrap_used, reason = "a test suite: a failed unwrap is a failed test")]

use std::sync::Arc;

use genjobs_domain::catalog::{Catalog, Model};
use genjobs_domain::input::GenerationInput;
use genjobs_domain::modality::Modality;
use genjobs_domain::ports::UpstreamProvider;
use genjobs_domain::request::{GenerationDraft, GenerationRequest};

pub mod cases;

/// What a job should do at the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Run briefly and succeed with one image or more.
    Succeeds,
    /// Run and fail.
    Fails,
    /// Run for longer than any case waits.
    RunsLong,
}

/// An adapter pointed at its provider's simulator.
pub trait Fixture: Send + Sync {
    /// The adapter under test.
    fn adapter(&self) -> Arc<dyn UpstreamProvider>;
    /// An image model routed to the adapter's provider.
    fn model(&self) -> Model;
    /// An input of [`Fixture::model`] that does `outcome` at the simulator.
    fn input(&self, outcome: Outcome) -> GenerationInput;
}

/// The built-in model `model`, and the input of an image request to it with `prompt`, as the
/// edge would validate it: what a fixture's [`Fixture::model`] and [`Fixture::input`] give.
#[must_use]
pub fn builtin_request(model: &str, prompt: &str) -> (Model, GenerationInput) {
    let catalog = Catalog::builtin().unwrap();
    let draft =
        GenerationDraft { prompt: Some(prompt.into()), model: Some(model.into()), ..GenerationDraft::default() };
    let input = GenerationRequest::validate(Modality::Image, draft, &catalog).unwrap().input;
    (catalog.model(model).unwrap().clone(), input)
}

/// Expands to one test per contract case for the fixture built by `$make`, an async expression
/// giving a [`Fixture`].
#[macro_export]
macro_rules! upstream_contract_tests {
    ($make:expr) => {
        $crate::upstream_contract_tests!(@cases $make;
            a_submission_is_referenced_by_the_adapters_own_name,
            a_job_runs_to_outputs_that_are_real_files,
            a_failed_run_is_reported_as_a_failure,
            a_running_job_can_be_canceled,
        );
    };
    (@cases $make:expr; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                $crate::cases::$case(&$make.await).await;
            }
        )+
    };
}
