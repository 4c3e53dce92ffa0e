//! # genjobs-api
//!
//! The wire types of the genjobs API: every request and response body of the public API
//! (`/api/v1`), the operators' API (`/api/admin`), the client webhooks and the OpenAI-compatible
//! edge (`/openai/v1`), each with its serde derives and its OpenAPI schema (utoipa).
//!
//! The service's edge (`genjobs-http`) reads requests into these types and writes its answers
//! from them; the Rust client (`genjobs-client`) writes requests and reads answers with the very
//! same types, so that the two cannot drift apart, and the OpenAPI document describes them.
//! The crate knows nothing of the domain: turning a request into the domain's values, and the
//! domain's values into a view, is the edge's work. It depends on serde and utoipa only, so that
//! a client does not pull the service in.
//!
//! Requests refuse what the contract refuses: a field the endpoint does not have is an error
//! (`deny_unknown_fields`), and so is a value of the wrong JSON type; the edge names the field at
//! fault from the serde path. Answers are read leniently: a client ignores fields it does not
//! know, so that a newer service does not break an older client.
//!
//! ## Layout
//! - [`requests`]: the generation bodies (images, video), the same for quotes.
//! - [`routing`]: the `provider` object of those bodies, a job's routing preference.
//! - [`jobs`]: a job and what it carries (outputs, error, provider's meta), its stream events,
//!   the receipts of submissions and cancels, quotes, pages of jobs.
//! - [`models`]: the models listing and each model's form fields; the operators' view of a model.
//! - [`account`]: the caller's account, ledger and usage; the operators' users, keys and grants.
//! - [`batches`]: a batch's body, a batch, pages of batches and items, a line of its results.
//! - [`admin_jobs`]: every user's jobs as operators find and inspect them.
//! - [`uploads`]: the link to an uploaded image.
//! - [`client_webhooks`]: what a client's webhook receiver gets, a job's deliveries, the signing secret.
//! - [`provider_notifications`]: the receipt of a provider's notification (its webhook).
//! - [`providers`]: the providers' keys, jobs in flight and waiting jobs, for operators.
//! - [`errors`]: the error envelope of every error response; [`Status`] of health and readiness;
//!   [`ServiceIndex`], the front page as JSON.
//! - [`openai`]: OpenAI's image, video and model shapes, as the OpenAI-compatible edge speaks them.
//! - [`openai_batches`]: OpenAI's Batch API: files, batches and the lines of their files.
//! - `schemas` and `numbers`: schemas the derives cannot infer, and how whole numbers are read.

pub mod account;
pub mod admin_batches;
pub mod admin_jobs;
pub mod batches;
pub mod client_webhooks;
pub mod errors;
pub mod jobs;
pub mod keys;
pub mod models;
mod numbers;
pub mod openai;
pub mod openai_batches;
pub mod provider_notifications;
pub mod providers;
pub mod reconciliation;
pub mod requests;
pub mod routing;
mod schemas;
pub mod uploads;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use account::{Account, CreatedUser, Grant, LedgerEntry, LedgerPage, NewUser, UsageRow, User, UserPage, UserPatch};
pub use admin_batches::{AdminBatch, AdminBatchPage};
pub use admin_jobs::{AdminJob, AdminJobDetail, AdminJobPage};
pub use batches::{Batch, BatchCounts, BatchItem, BatchItemBody, BatchItemPage, BatchPage, BatchRequest, BatchResult};
pub use client_webhooks::{BatchWebhookPayload, WebhookAttempt, WebhookDelivery, WebhookPayload, WebhookSecret};
pub use errors::{ErrorEnvelope, ErrorObject};
pub use jobs::{
    CancelReceipt, Job, JobError, JobErrorDetails, JobMeta, JobPage, JobState, Output, OutputMeta, Quote, Receipt,
    StreamEvent,
};
pub use keys::{BudgetBody, IssuedKey, KeyBudgetView, KeyPatch, KeyView, NewKey};
pub use models::{AdminModel, Field, FieldOption, Model, Price};
pub use provider_notifications::UpstreamWebhookReceipt;
pub use reconciliation::{Reconciliation, ReconciliationDay, UnitsMismatch};
pub use requests::{ImageRequest, VideoRequest};
pub use routing::ProviderPreference;
pub use schemas::EventStreamItem;
pub use uploads::Upload;

/// `{data: [...]}`: a listing of models, usage rows or webhook deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DataView<T> {
    /// The items.
    pub data: Vec<T>,
}

/// `GET /` as JSON: where the service's APIs, documentation and pages are, as paths of its origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ServiceIndex {
    /// `genjobs`.
    pub service: String,
    /// The native API's base, `/api/v1`.
    pub api: String,
    /// The OpenAI-compatible edge's base, `/openai/v1`.
    pub openai: String,
    /// The OpenAPI document.
    pub openapi: String,
    /// The interactive documentation.
    pub docs: String,
    /// The playground.
    pub playground: String,
    /// The operators' console.
    pub console: String,
}

/// `{status}` of `/healthz` and `/readyz`; `/readyz?verbose` adds each provider's breaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Status {
    /// `ok` (alive) or `ready`.
    pub status: String,
    /// With `/readyz?verbose` only: each configured provider, in the order routes try them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<ProviderStatus>,
}

/// A configured provider as the router sees it: a provider that keeps refusing connections (5
/// refusals in a row) is passed by while it cools down, then one submission probes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProviderStatus {
    /// The provider's name (`fal`, `replicate`).
    pub provider: String,
    /// `closed` (submissions go to it), `open` (cooling down: passed by) or `half_open` (the
    /// next submission probes it).
    pub breaker: String,
    /// Refusals in a row since it last answered.
    pub refusals_in_a_row: u32,
    /// While `open`: seconds until the next submission probes it again (rounded up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_in_secs: Option<u64>,
}
