//! The ports: what the domain needs from the outside world. Adapters implement them (the
//! in-memory and Postgres stores, the provider adapter, the in-process event hub and rate limiter, the
//! system clock); tests replace them with the mockall mocks of the `mocks` feature.
//!
//! Every store adapter must pass the contract suite of `genjobs-store-contract`.
//!
//! - `catalog`: [`CatalogStore`], where model documents are kept, and [`RouteSchemas`], what a
//!   provider checks a route against.
//! - `stores`: [`JobStore`] and [`AccountStore`], what a database adapter implements.
//! - `batches`: [`BatchStore`], batches accepted whole and what their items add up to.
//! - `upstream`: [`UpstreamProvider`], what a provider adapter implements; `reported_usage`:
//!   [`ReportedUsage`], what a provider says it billed for a job, with its result or its failure.
//! - `outputs`: [`OutputStore`], where outputs are copied to and served from, and
//!   [`OutputSource`], which reads an output from the provider's link.
//! - `removals`: [`JobRemovals`], jobs their owner removed from a listing (OpenAI's
//!   `videos.delete`), and pages of those kept.
//! - `usage`: [`UsageStore`], the ledger and the jobs counted for usage reports.
//! - `runtime`: [`JobEvents`], [`JobHandoff`], [`RateLimiter`], [`Clock`], [`IdSource`], [`Traces`]:
//!   in-process services.
//! - `client_webhooks`: [`WebhookStore`] (the outbox, users' secrets), [`WebhookTransport`],
//!   [`SecretVault`], [`WebhookRenderer`]: client webhooks.
//! - `openai_batches`: [`OpenAiBatchStore`], the files and batches of OpenAI's Batch API.
//! - `kept`: [`KeptSecrets`], the keys the service makes once and keeps with its store.
//! - `moderation`: [`ModerationService`], which checks a job's content before it is sent.
//! - `uploads`: [`UploadStore`], uploaded images: each content once, until when, what each user
//!   uploaded per day, and their bytes when there is no output store.
//! - `slots`: [`ProviderSlots`], which provider key each sent job holds a slot of, counted while
//!   the job is not final.

mod batches;
mod catalog;
mod client_webhooks;
mod kept;
mod moderation;
mod openai_batches;
mod outputs;
mod removals;
mod reported_usage;
mod runtime;
mod slots;
mod stores;
mod uploads;
mod upstream;
mod usage;

pub use batches::*;
pub use catalog::*;
pub use client_webhooks::*;
pub use kept::*;
pub use moderation::*;
pub use openai_batches::*;
pub use outputs::*;
pub use removals::*;
pub use reported_usage::*;
pub use runtime::*;
pub use slots::*;
pub use stores::*;
pub use uploads::*;
pub use upstream::*;
pub use usage::*;
