//! # genjobs-runtime
//!
//! Adapters of the ports that every deployment runs inside its own process, whatever its store:
//! - [`SystemClock`]: the wall clock and tokio's timer.
//! - [`EventHub`]: job change notifications between the tasks of one process (the Postgres
//!   adapter feeds it from `LISTEN/NOTIFY` to span replicas).
//! - [`TokenBucketLimiter`]: a per-user token bucket for the request rate limit.
//! - [`RetriedCopies`]: an output store decorator that tries transient copy failures again.
//! - [`MeteredUpstream`]: a provider decorator that counts and times every upstream call.
//! - [`RoutedUpstream`]: one provider port over several providers, following each model's routes
//!   with a safe fallback.
//! - [`OtelTraces`]: the traces port over OpenTelemetry, through `tracing`'s spans.

mod clock;
mod copies;
mod events;
mod metered;
mod rate_limit;
mod routing;
mod traces;

pub use clock::SystemClock;
pub use copies::RetriedCopies;
pub use events::EventHub;
pub use metered::MeteredUpstream;
pub use rate_limit::TokenBucketLimiter;
pub use routing::{COOL_DOWN, REFUSED_RETRY_PAUSE, RoutedUpstream, TRIP_AFTER};
pub use traces::OtelTraces;
