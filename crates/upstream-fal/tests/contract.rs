//! The provider contract (`genjobs-upstream-contract`) for the fal adapter, against the fal
//! simulator.

use std::sync::Arc;
use std::time::Duration;

use genjobs_domain::catalog::Model;
use genjobs_domain::input::GenerationInput;
use genjobs_domain::ports::UpstreamProvider;
use genjobs_upstream_contract::{Fixture, Outcome, builtin_request, upstream_contract_tests};
use genjobs_upstream_fal::{FalConfig, FalUpstream};
use genjobs_upstream_sim::{RunningSim, SimConfig};

struct Simulated {
    sim: RunningSim,
}

impl Simulated {
    async fn start() -> Self {
        let config = SimConfig {
            queue: Duration::from_millis(20),
            run: Duration::from_millis(200),
            api_key: Some("k".into()),
            ..SimConfig::default()
        };
        Self { sim: genjobs_upstream_sim::spawn(config).expect("the simulator starts") }
    }
}

impl Fixture for Simulated {
    fn adapter(&self) -> Arc<dyn UpstreamProvider> {
        Arc::new(FalUpstream::new(FalConfig::new(self.sim.base_url.clone(), Some("k".into()))).expect("the adapter"))
    }

    fn model(&self) -> Model {
        builtin_request("nano-banana", "a fox").0
    }

    fn input(&self, outcome: Outcome) -> GenerationInput {
        let prompt = match outcome {
            Outcome::Succeeds => "a fox",
            Outcome::Fails => "a fox [sim:fail]",
            Outcome::RunsLong => "a fox [sim:run=60000]",
        };
        builtin_request("nano-banana", prompt).1
    }
}

upstream_contract_tests!(Simulated::start());
