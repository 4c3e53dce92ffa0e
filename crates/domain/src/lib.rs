//! # genjobs-domain
//!
//! The heart of genjobs, the gateway for asynchronous image and video generation: what a job is,
//! how it moves, what it costs, and the use cases that the HTTP edge calls. It does no I/O: every
//! database, provider, clock and notification is reached through a port trait, which is why
//! other tools can reuse it and why its tests run without a network.
//!
//! A tool that reuses the domain supplies one adapter per port (see the crate README and
//! `examples/drive_a_job.rs`, which drives a job with a store, a provider and a clock written in
//! the example itself).
//!
//! ## Layout
//! - [`modality`], [`input`], [`output`]: leaf types the others share (what a model produces,
//!   a validated request's inputs, a delivered output).
//! - [`decimal`]: exact decimals for money and provider units (no floating point in sums).
//! - [`ids`]: job, user and model ids; API keys, hashed and compared in constant time.
//! - [`credits`]: credits and balances; the hold / settle / release rules.
//! - [`keys`]: what one API key may do (models, budget per period, expiry, its own limits).
//! - [`job`]: the job and its state machine ([`job::next_state`] is the table). Every change is
//!   a [`job::Transition`]: the new job, the version it replaces (for compare-and-set) and the
//!   credit movement to commit with it. Fields are private: no caller can fabricate a settlement.
//! - [`catalog`]: the model catalog, one document per model (the built-in ones in
//!   `catalog/models/`): form fields, limits, defaults, prices, and routes whose data only the
//!   named provider's adapter reads. The operator changes it while the service runs.
//! - [`request`]: a typed [`request::GenerationDraft`] validated into a
//!   [`request::GenerationRequest`]; each refusal names its `param`. Parsing JSON is the edge's
//!   job: no type here is a wire or storage format.
//! - [`ports`]: the traits adapters implement, each documenting the errors it must return.
//!   With the `mocks` feature, mockall mocks of each (`MockJobStore`, …).
//! - [`usecases`]: the services of the use cases, each over only the ports it uses
//!   ([`usecases::Submissions`], [`usecases::JobReads`], [`usecases::Cancellations`],
//!   [`usecases::Accounts`], [`usecases::ClientWebhooks`], [`usecases::ProviderNotifications`],
//!   [`usecases::Admin`]; [`usecases::Services`] bundles them), [`usecases::JobSteps`] (one step of one job from the provider's answer) and
//!   [`usecases::WebhookDeliveries`] (one attempt at one client webhook). Which step runs when
//!   is a driver's business: the domain has no loop, no timer and no runtime (the workspace's
//!   driver is `genjobs-driver`).
//! - [`trace`]: the trace context a job keeps, for its trace to go on wherever it is driven.
//! - [`upload`]: what an uploaded image is (by its bytes) and how large it may be.
//! - [`client_webhooks`]: client webhooks: the event a job's end records, its id, the retry schedule.
//! - [`address`]: which addresses the service may call out to (outputs, client webhooks).
//! - [`routing`]: a job's routing preference over its model's routes, and spill-over to a provider
//!   with a free slot.
//! - [`batch`]: batches: many jobs submitted as one unit at the batch price, each an ordinary
//!   job that knows its place, admitted to be sent only while its owner has room.
//! - [`openai_batch`]: OpenAI's Batch API over batches: the input files, the batches made from
//!   them (or refused line by line), and their status in OpenAI's terms.
//! - [`capacity`]: a provider's keys, each with its cap of jobs in flight, and which key a job goes on.
//!
//! ## Why it is shaped this way
//! Credits must move exactly once per job even with several replicas, retries and a cancel
//! racing a completion. So the rules are pure functions here, and a store only has to commit a
//! transition atomically when the job's version is still the expected one.

pub mod address;
pub mod batch;
pub mod capacity;
pub mod catalog;
pub mod client_webhooks;
pub mod credits;
pub mod decimal;
pub mod ids;
pub mod input;
pub mod invalid;
pub mod job;
pub mod keys;
pub mod modality;
pub mod moderation;
pub mod openai_batch;
pub mod output;
pub mod ports;
pub mod request;
pub mod routing;
pub mod trace;
pub mod upload;
pub mod usecases;
