//! The use cases, grouped in services by concern, each holding only the ports it uses, each use
//! case with its own error enum that the HTTP edge maps to a status and code:
//!
//! - [`Submissions`] (`submit.rs`, `quote.rs`): submit, quote.
//! - [`JobReads`] (`jobs.rs`, `watch.rs`, `outputs.rs`): read, wait, stream, list, outputs.
//! - [`Cancellations`] (`cancel.rs`): cancel.
//! - [`Batches`] (`batches.rs`, and [`Submissions::submit_batch`]): batches accepted whole,
//!   read, paged, canceled, and closed when their window passes.
//! - [`OpenAiBatches`] (`openai_batches.rs`): OpenAI's Batch API, its files and its batches
//!   made through the native batch's acceptance.
//! - [`Uploads`] (`uploads.rs`): keep the images a client uploads, read them back, forget them
//!   when their time to live is over.
//! - [`Removals`] (`removals.rs`): remove a job from a listing (canceling it when it runs), and
//!   read the jobs kept.
//! - [`Accounts`] (`accounts.rs`, `usage.rs`, `keys.rs`): authenticate, account, ledger, usage,
//!   the caller's own keys.
//! - [`ClientWebhooks`] (`webhooks.rs`): secrets, a job's events, redeliveries.
//! - [`ProviderNotifications`] (`notifications.rs`): what the provider pushes.
//! - [`Admin`] (`admin.rs`, and the operators' parts of `accounts.rs`, `keys.rs`, `catalog.rs`,
//!   `usage.rs`, `admin_jobs.rs`): users, keys, grants, the catalog, usage reports, every
//!   user's jobs, readiness.
//!
//! [`Services`] bundles them over one [`Ports`] for an edge that serves them all. The two use
//! cases a driver calls are [`JobSteps`] (one step of one job) and [`WebhookDeliveries`] (one
//! attempt at one client webhook); when and how often they run is the driver's business (the
//! `genjobs-driver` crate), not the domain's.

mod accounts;
mod admin;
mod admin_jobs;
mod batches;
mod cancel;
mod catalog;
mod client_webhooks;
mod deliveries;
mod handoff;
mod jobs;
mod keys;
mod notifications;
mod openai_batches;
mod outputs;
mod quote;
mod removals;
mod steps;
mod submit;
mod telemetry;
mod uploads;
mod usage;
mod watch;

use std::sync::Arc;
use std::time::Duration;

pub use crate::ports::RangeRequest;
pub use accounts::{
    Accounts, AdminError, AuthError, Caller, CallerKey, MAX_USER_NAME_CHARS, NewUserRequest, validate_grant,
    validate_user_change, whole_seconds,
};
pub use admin::{Admin, AdminPorts, DEFAULT_CREDIT_USD};
pub use admin_jobs::{InspectedJob, MAX_ADMIN_JOBS_PAGE};
pub use batches::{
    BatchItemRequest, BatchPage, BatchQueryError, BatchSubmission, Batches, MAX_BATCH_ITEMS_PAGE, MAX_BATCHES_PAGE,
};
pub use cancel::{CancelReceipt, Cancellations};
pub use catalog::{CatalogAdminError, PlannedChange};
pub use client_webhooks::{ClientWebhookPorts, ClientWebhooks, WebhookQueryError, WebhookSecretError};
pub use deliveries::{DeliverySettings, WebhookDeliveries};
pub use jobs::{JobEvent, JobListing, JobQueryError, JobReads, MAX_JOBS_PAGE, MAX_WAIT_SECS};
pub use keys::{KeyListing, OwnKeyError};
pub use notifications::{NotificationError, NotificationOutcome, ProviderNotifications};
pub use openai_batches::{
    LinedItem, MAX_OPENAI_BATCHES_PAGE, OpenAiBatchError, OpenAiBatchRequest, OpenAiBatches, check_openai_batch,
};
pub use outputs::{OpenedOutput, OutputContentError, OutputRead, OutputReadError};
pub use quote::Quote;
pub use removals::{KeptListing, MAX_KEPT_PAGE, Removals};
pub use steps::{Cadence, JobSteps, Moderator, StepSettings, Stepped, UnrecordedSubmission};
pub use submit::{IdempotencyKey, Receipt, Submission, Submissions, SubmitError};
pub use uploads::{UploadError, Uploads};
pub use usage::{LedgerEntry, LedgerKind, LedgerPage, MAX_LEDGER_PAGE, MAX_USAGE_DAYS, UsageError, usage_range};
pub use watch::{JobStream, LongPoll, Watch, Woke};

use crate::batch::BatchSettings;
use crate::catalog::LiveCatalog;
use crate::ids::JobId;
use crate::job::Job;
use crate::ports::{
    AccountStore, BatchStore, CatalogStore, Clock, IdSource, JobEvents, JobHandoff, JobRemovals, JobStore, Limits,
    OpenAiBatchStore, OutputStore, RateLimiter, RouteSchemas, Traces, UploadStore, UpstreamProvider,
};
use crate::upload::UploadSettings;

/// Every port the use cases use; each service takes those it needs.
#[derive(Clone)]
pub struct Ports {
    /// Jobs and their ledger movements.
    pub jobs: Arc<dyn JobStore>,
    /// Batches of jobs.
    pub batches: Arc<dyn BatchStore>,
    /// The files and batches of OpenAI's Batch API.
    pub openai_batches: Arc<dyn OpenAiBatchStore>,
    /// Users, keys and grants.
    pub accounts: Arc<dyn AccountStore>,
    /// Jobs removed from a listing.
    pub removals: Arc<dyn JobRemovals>,
    /// The ledger and usage reports.
    pub usage: Arc<dyn crate::ports::UsageStore>,
    /// The provider that runs the jobs.
    pub upstream: Arc<dyn UpstreamProvider>,
    /// The model documents.
    pub catalog: Arc<dyn CatalogStore>,
    /// What each provider knows of its endpoints, to check routes against.
    pub route_schemas: Vec<Arc<dyn RouteSchemas>>,
    /// Where succeeded jobs' outputs are copied to, and uploads kept; `None` keeps only the
    /// provider's URLs, and uploads in `uploads`.
    pub outputs: Option<Arc<dyn OutputStore>>,
    /// Uploaded images: what was uploaded, until when, and their bytes without an output store.
    pub uploads: Arc<dyn UploadStore>,
    /// Change notifications.
    pub events: Arc<dyn JobEvents>,
    /// Per-user request rate.
    pub rate_limiter: Arc<dyn RateLimiter>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// New ids and keys.
    pub ids: Arc<dyn IdSource>,
    /// Where spans go, and the trace context a job keeps.
    pub traces: Arc<dyn Traces>,
}

/// What follows the commit that made `job` final: its metrics, this process's webhook
/// dispatcher woken when the commit may have recorded an event for the client (the job's own,
/// or its batch's when it was the batch's last item: only the store knows, and one more look
/// at the outbox costs less than reading the batch), and the drivers woken when the job may have
/// held a slot of its provider's keys.
pub(crate) async fn job_ended(events: &dyn JobEvents, job: &crate::job::Job) {
    telemetry::job_finished(job);
    if crate::client_webhooks::WebhookEvent::is_recorded_for(job) || job.batch().is_some() {
        events.announce_webhook();
    }
    if job.submit_attempted() {
        events.free_capacity(job.id()).await;
    }
}

/// Settings of the use cases (the contract's configuration table).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Upstream poll interval, and interval of `progress` events.
    pub poll_interval: Duration,
    /// Limits of users created without their own.
    pub default_limits: Limits,
    /// Whether canceling a job also asks the provider to stop it.
    pub upstream_cancel: bool,
    /// Whether the provider notifies the end of every job (webhooks): waiters then tell the
    /// drivers they wait ([`crate::ports::JobEvents::watch`]), since jobs nobody watches are
    /// polled slowly (the driver's unwatched poll interval).
    pub upstream_notifies: bool,
    /// Uploads' time to live and daily quota.
    pub uploads: UploadSettings,
    /// What batch items cost.
    pub batch: BatchSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            default_limits: Limits { rate_limit_per_minute: 120, max_concurrent_jobs: 8 },
            upstream_cancel: false,
            upstream_notifies: false,
            uploads: UploadSettings::default(),
            batch: BatchSettings::default(),
        }
    }
}

/// Every service of the use cases over one set of ports, as an edge that serves them all holds
/// them. Each service holds only the ports it uses, and can be built alone: the command line's
/// administration builds an [`Admin`] over the store, with no provider at all.
#[derive(Clone)]
pub struct Services {
    /// Submissions and quotes.
    pub submissions: Submissions,
    /// Reading, waiting on, streaming and listing jobs, and their outputs.
    pub reads: JobReads,
    /// Canceling jobs.
    pub cancellations: Cancellations,
    /// Reading, canceling and closing batches.
    pub batches: Batches,
    /// OpenAI's Batch API.
    pub openai_batches: OpenAiBatches,
    /// Removing jobs from a listing, and reading those kept.
    pub removals: Removals,
    /// Images clients upload.
    pub uploads: Uploads,
    /// The caller's account: authentication, balances, ledger and usage.
    pub accounts: Accounts,
    /// Client webhooks: secrets, a job's events, redeliveries.
    pub webhooks: ClientWebhooks,
    /// What the provider pushes.
    pub notifications: ProviderNotifications,
    /// The operators' use cases: users, keys, grants, the catalog, usage reports, readiness.
    pub admin: Admin,
    settings: Settings,
    traces: Arc<dyn Traces>,
}

impl Services {
    /// Every service over `ports`, serving the models of `catalog`.
    #[must_use]
    pub fn new(ports: &Ports, catalog: impl Into<LiveCatalog>, settings: Settings) -> Self {
        let catalog = catalog.into();
        let cancellations = Cancellations::new(ports, settings.upstream_cancel);
        let submissions = Submissions::new(ports, catalog.clone()).with_batch_settings(settings.batch);
        let batches = Batches::new(ports, cancellations.clone());
        Self {
            openai_batches: OpenAiBatches::new(
                Arc::clone(&ports.openai_batches),
                Arc::clone(&ports.clock),
                submissions.clone(),
                batches.clone(),
            ),
            submissions,
            reads: JobReads::new(ports, settings.clone()),
            removals: Removals::new(ports, cancellations.clone()),
            uploads: Uploads::new(ports, settings.uploads),
            batches,
            cancellations,
            accounts: Accounts::new(ports),
            webhooks: ClientWebhooks::new(ports),
            notifications: ProviderNotifications::new(ports),
            admin: Admin::new(AdminPorts::from(ports), catalog, settings.default_limits),
            settings,
            traces: Arc::clone(&ports.traces),
        }
    }

    /// The same services, passing the jobs they accept to the driver of their own process instead
    /// of leaving them for any driver to claim ([`Submissions::with_handoff`]).
    #[must_use]
    pub fn with_handoff(self, handoff: Arc<dyn JobHandoff>) -> Self {
        let submissions = self.submissions.clone().with_handoff(handoff);
        self.with_submissions(submissions)
    }

    /// The same services, submitting through `submissions`, OpenAI's batches included.
    fn with_submissions(self, submissions: Submissions) -> Self {
        Self { openai_batches: self.openai_batches.with_submissions(submissions.clone()), submissions, ..self }
    }

    /// The same services, reading outputs the service keeps no copy of from the provider's links
    /// through `source` ([`JobReads::with_output_source`]).
    #[must_use]
    pub fn with_output_source(self, source: Arc<dyn crate::ports::OutputSource>) -> Self {
        Self { reads: self.reads.with_output_source(source), ..self }
    }

    /// The same services, taking `webhook_url` on submissions and serving webhook secrets and
    /// deliveries through `ports`.
    #[must_use]
    pub fn with_client_webhooks(self, ports: ClientWebhookPorts) -> Self {
        let submissions = self.submissions.clone().with_client_webhooks(ports.clone());
        Self { webhooks: self.webhooks.with_client_webhooks(ports), ..self }.with_submissions(submissions)
    }

    /// The same services, valuing a credit at `credit_usd` in the operators' revenue and margins
    /// ([`Admin::with_credit_usd`]).
    #[must_use]
    pub fn with_credit_usd(self, credit_usd: crate::decimal::Decimal) -> Self {
        Self { admin: self.admin.with_credit_usd(credit_usd), ..self }
    }

    /// The settings in use.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Where spans go: for an edge to continue a client's trace through its request.
    #[must_use]
    pub fn traces(&self) -> &dyn Traces {
        self.traces.as_ref()
    }
}

/// The caller's job `id`, refused when it is another user's; a restricted key's caller knows
/// nothing of its user's jobs submitted outside its subtree.
async fn owned_job(jobs: &dyn JobStore, caller: &Caller, id: JobId) -> Result<Job, JobQueryError> {
    match jobs.job(id).await? {
        None => Err(JobQueryError::NotFound),
        Some(job) if job.user_id() != caller.user_id => Err(JobQueryError::Forbidden),
        Some(job) if !caller.sees_key(job.key_prefix()) => Err(JobQueryError::NotFound),
        Some(job) => Ok(job),
    }
}
