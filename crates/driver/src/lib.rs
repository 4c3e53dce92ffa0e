//! # genjobs-driver
//!
//! The loops that move work forward on every replica, in plain async Rust on tokio: the job
//! driver, the client webhook dispatcher and the catalog follower. The domain
//! (`genjobs-domain`) decides what one step of a job or one attempt at a webhook does; this
//! crate decides which one runs when, how many at once, and what happens on shutdown. That is
//! why it may use tokio and the domain may not.
//!
//! ## Layout
//! - [`jobs`]: [`JobDriver`], which claims due jobs under a lease of its own, holds them in
//!   memory with their schedule, steps each at its time, renews its one lease, takes the jobs
//!   this process's gateway hands over, and ends its lease when it stops so that others take
//!   everything over at once.
//! - [`client_webhooks`]: [`WebhookDispatcher`], which claims due client webhook events within each
//!   destination host's slots and delivers them.
//! - [`catalog`]: [`follow_catalog`], which reloads the catalog in effect when the store
//!   announces a change.
//! - [`settings`]: [`DriverSettings`] and [`DispatchSettings`], how each paces itself.
//!
//! Each loop runs its units of work as tasks of one `tokio::task::JoinSet` and waits with
//! `tokio::select!` for the first of: a task's end, its next due time, a signal, or the
//! shutdown. Time comes from the domain's `Clock` port, so the tests run on tokio's paused
//! clock and take no wall-clock time.

pub mod catalog;
pub mod client_webhooks;
pub mod jobs;
pub mod retention;
pub mod sealing;
pub mod settings;
mod telemetry;

pub use catalog::follow_catalog;
pub use client_webhooks::WebhookDispatcher;
pub use jobs::JobDriver;
pub use settings::{DispatchSettings, DriverSettings};
