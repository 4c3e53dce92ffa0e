//! # genjobs-bench
//!
//! What `just bench` measures, as a library so that a short smoke run of every scenario is part of
//! `cargo test`:
//! - [`load`]: HTTP load generators with latency percentiles: a closed loop (N clients, each
//!   sending its next request when the previous one answers) for the maximum rate, and an open
//!   loop (a fixed schedule) for latencies that include queueing.
//! - [`baseline`]: the reads baseline, an actix-web handler that answers a constant job.
//! - [`scenarios`]: open streams, upstream economy, wake-up latency and driver scale.
//! - [`host`]: what the operating system says of a process (resident memory, CPU time).
//!
//! The binary orchestrates a full run (Postgres, the simulator, genjobs processes, pgbench) and
//! writes `docs/benchmarks.md`.

pub mod baseline;
pub mod host;
pub mod load;
pub mod scenarios;
