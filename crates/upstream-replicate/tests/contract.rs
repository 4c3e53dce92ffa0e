//! The provider contract (`genjobs-upstream-contract`) for the Replicate adapter, against the Replicate
//! simulator.

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::catalog::Model;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::ports::UpstreamProvider;
use genjobs_upstream_contract::{Fixture, Outcome, builtin_request, upstream_contract_tests};
use genjobs_upstream_replicate::{ReplicateConfig, ReplicateUpstream};
use genjobs_upstream_replicate_sim::{RunningSim, SimConfig};

struct Simulated {
    sim: RunningSim,
}

impl Simulated {
    async fn start() -> Self {
        let config = SimConfig {
            starting: Duration::from_millis(20),
            processing: Duration::from_millis(200),
            ..SimConfig::default()
        };
        Self { sim: genjobs_upstream_replicate_sim::spawn(config).expect("the simulator starts") }
    }
}

impl Fixture for Simulated {
    fn adapter(&self) -> Arc<dyn UpstreamProvider> {
        let config = ReplicateConfig::new(self.sim.api_url(), SimConfig::default().token);
        Arc::new(ReplicateUpstream::new(config).expect("the adapter"))
    }

    fn model(&self) -> Model {
        builtin_request("flux-pro", "a fox").0
    }

    fn input(&self, outcome: Outcome) -> GenerationInput {
        let prompt = match outcome {
            Outcome::Succeeds => "a fox",
            Outcome::Fails => "a fox [sim:fail]",
            Outcome::RunsLong => "a fox [sim:run=60000]",
        };
        builtin_request("flux-pro", prompt).1
    }
}

upstream_contract_tests!(Simulated::start());
