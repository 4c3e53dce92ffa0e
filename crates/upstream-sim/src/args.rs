//! The simulator's flags and variables, flattened into the `genjobs` binary's command line.

use std::time::Duration;

use clap::Args;

use crate::SimConfig;

/// The built-in simulator's limit of requests in progress per key: 4, as a small fal account
/// runs, so that a burst on the embedded default shows jobs waiting in fal's queue. The
/// simulator's own default (tests, benchmarks) has none.
pub const EMBEDDED_IN_PROGRESS_PER_KEY: u32 = 4;

/// The built-in simulator's loopback port: fixed, so that a restart over a durable store finds
/// the simulator where the jobs it ran say it is (their status URLs and output links name it).
/// The simulator's own default (tests, benchmarks) takes any free port.
pub const EMBEDDED_PORT: u16 = 8788;

/// The built-in simulator's times, limit and port.
#[derive(Debug, Clone, Args)]
#[allow(missing_docs, reason = "each field's doc comment is its --help line")]
pub struct SimArgs {
    /// Queue time of the built-in simulator.
    #[arg(long, env = "GENJOBS_SIM_QUEUE_MS", default_value_t = millis(SimConfig::default().queue),
        help_heading = "Built-in simulator")]
    pub sim_queue_ms: u64,
    /// Run time of the built-in simulator.
    #[arg(long, env = "GENJOBS_SIM_RUN_MS", default_value_t = millis(SimConfig::default().run),
        help_heading = "Built-in simulator")]
    pub sim_run_ms: u64,
    /// Requests of one key in progress at once at the built-in simulator, as a fal account's
    /// concurrency limit (0: none); the rest wait `IN_QUEUE` with their place in the queue.
    #[arg(long, env = "GENJOBS_SIM_MAX_IN_PROGRESS_PER_KEY", default_value_t = EMBEDDED_IN_PROGRESS_PER_KEY,
        help_heading = "Built-in simulator")]
    pub sim_max_in_progress_per_key: u32,
    /// Loopback port of the built-in simulator, kept across restarts so that jobs running at a
    /// restart and earlier output links still reach it (0: any free port, which changes at every
    /// start).
    #[arg(long, env = "GENJOBS_SIM_PORT", default_value_t = EMBEDDED_PORT, help_heading = "Built-in simulator")]
    pub sim_port: u16,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl SimArgs {
    /// The simulator these flags describe, the defaults for the rest.
    #[must_use]
    pub fn config(&self) -> SimConfig {
        SimConfig {
            queue: Duration::from_millis(self.sim_queue_ms),
            run: Duration::from_millis(self.sim_run_ms),
            max_in_progress_per_key: self.sim_max_in_progress_per_key,
            port: self.sim_port,
            ..SimConfig::default()
        }
    }
}
