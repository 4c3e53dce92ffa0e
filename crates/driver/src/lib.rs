//! # genjobs-driver
//!
//! The loops that move work forward on every replica, in plain async Rust on tokio: the job
//! driver, the client webhook dispatcher, the catalog follower, the retention sweep, usage
//! sealing, the upload sweep and the batch windows, all listed in [`Loops`], which starts and drains them the same way. The domain
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
//! - [`retention`]: [`RetentionSweep`], which removes final jobs past
//!   `GENJOBS_JOB_RETENTION_DAYS`.
//! - [`sealing`]: [`UsageSealing`], which seals finished hours of usage, so that reports stay cheap.
//! - [`uploads`]: [`UploadSweep`], which deletes uploads past `GENJOBS_UPLOAD_TTL_SECS` that no
//!   job not yet final needs.
//! - [`batches`]: [`BatchWindows`], which expires the items of batches whose completion window
//!   closed.
//! - [`loops`]: [`Loops`], the list of them all, started and drained the same way.
//! - [`settings`]: [`DriverSettings`] and [`DispatchSettings`], how each paces itself.
//!
//! Each loop runs its units of work as tasks of one `tokio::task::JoinSet` and waits with
//! `tokio::select!` for the first of: a task's end, its next due time, a signal, or the
//! shutdown. Time comes from the domain's `Clock` port, so the tests run on tokio's paused
//! clock and take no wall-clock time.

pub mod batches;
pub mod catalog;
pub mod client_webhooks;
pub mod jobs;
pub mod loops;
pub mod retention;
pub mod sealing;
pub mod settings;
mod telemetry;
pub mod uploads;

pub use batches::BatchWindows;
pub use catalog::{CatalogFollower, follow_catalog};
pub use client_webhooks::WebhookDispatcher;
pub use jobs::JobDriver;
pub use loops::{Loops, RunningLoops};
pub use retention::RetentionSweep;
pub use sealing::UsageSealing;
pub use settings::{DispatchSettings, DriverSettings};
pub use uploads::UploadSweep;
