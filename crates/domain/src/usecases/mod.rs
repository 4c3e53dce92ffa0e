//! The use cases, one method each on [`Gateway`], each with its own error enum that the HTTP edge
//! maps to a status and code; and the two a driver calls: [`JobSteps`] (one step of one job) and
//! [`WebhookDeliveries`] (one attempt at one client webhook). When and how often they run is the
//! driver's business (the `genjobs-driver` crate), not the domain's.

mod accounts;
mod catalog;
mod deliveries;
mod handoff;
mod jobs;
mod notifications;
mod outputs;
mod quote;
mod steps;
mod submit;
mod telemetry;
mod usage;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

pub use accounts::{AdminError, AuthError, Caller, MAX_USER_NAME_CHARS, NewUserRequest, validate_grant};
pub use catalog::{CatalogAdminError, PlannedChange};
pub use deliveries::{DeliverySettings, WebhookDeliveries};
pub use jobs::{CancelReceipt, JobEvent, JobListing, JobQueryError, MAX_JOBS_PAGE, MAX_WAIT_SECS};
pub use notifications::{NotificationError, NotificationOutcome};
pub use outputs::{OutputContent, OutputContentError, OutputRead, OutputReadError, RangeRequest};
pub use quote::Quote;
pub use steps::{Cadence, JobSteps, StepSettings};
pub use submit::{IdempotencyKey, Receipt, Submission, SubmitError};
pub use usage::{LedgerEntry, LedgerKind, LedgerPage, MAX_LEDGER_PAGE, MAX_USAGE_DAYS, UsageError, usage_range};
pub use webhooks::{ClientWebhookPorts, WebhookQueryError};

use crate::catalog::{Catalog, LiveCatalog};
use crate::ports::{
    AccountStore, CatalogStore, Clock, IdSource, JobEvents, JobHandoff, JobStore, Limits, OutputStore, RateLimiter,
    RouteSchemas, UpstreamProvider,
};

/// Every port a [`Gateway`] or [`JobSteps`] uses.
#[derive(Clone)]
pub struct Ports {
    /// Jobs and their ledger movements.
    pub jobs: Arc<dyn JobStore>,
    /// Users, keys and grants.
    pub accounts: Arc<dyn AccountStore>,
    /// The ledger and usage reports.
    pub usage: Arc<dyn crate::ports::UsageStore>,
    /// The provider that runs the jobs.
    pub upstream: Arc<dyn UpstreamProvider>,
    /// The model documents.
    pub catalog: Arc<dyn CatalogStore>,
    /// What each provider knows of its endpoints, to check routes against.
    pub route_schemas: Vec<Arc<dyn RouteSchemas>>,
    /// Where succeeded jobs' outputs are copied to; `None` keeps only the provider's URLs.
    pub outputs: Option<Arc<dyn OutputStore>>,
    /// Change notifications.
    pub events: Arc<dyn JobEvents>,
    /// Per-user request rate.
    pub rate_limiter: Arc<dyn RateLimiter>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// New ids and keys.
    pub ids: Arc<dyn IdSource>,
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
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            default_limits: Limits { rate_limit_per_minute: 120, max_concurrent_jobs: 8 },
            upstream_cancel: false,
            upstream_notifies: false,
        }
    }
}

/// The service's use cases over its ports.
#[derive(Clone)]
pub struct Gateway {
    ports: Ports,
    catalog: LiveCatalog,
    settings: Settings,
    handoff: Option<Arc<dyn JobHandoff>>,
    sources: Option<Arc<dyn crate::ports::OutputSource>>,
    webhooks: Option<ClientWebhookPorts>,
}

impl Gateway {
    /// A gateway over `ports`, serving the models of `catalog`.
    #[must_use]
    pub fn new(ports: Ports, catalog: impl Into<LiveCatalog>, settings: Settings) -> Self {
        Self { ports, catalog: catalog.into(), settings, handoff: None, sources: None, webhooks: None }
    }

    /// The same gateway, passing the jobs it accepts to the driver of its own process instead of
    /// leaving them for any driver to claim.
    #[must_use]
    pub fn with_handoff(self, handoff: Arc<dyn JobHandoff>) -> Self {
        Self { handoff: Some(handoff), ..self }
    }

    /// The same gateway, reading outputs the service keeps no copy of from the provider's links
    /// through `source` ([`Gateway::output_content`]).
    #[must_use]
    pub fn with_output_source(self, source: Arc<dyn crate::ports::OutputSource>) -> Self {
        Self { sources: Some(source), ..self }
    }

    /// The catalog in effect now: one snapshot, for one request to read throughout.
    #[must_use]
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.current()
    }

    /// The name of the provider that runs the jobs, as the models list shows it.
    #[must_use]
    pub fn upstream_name(&self) -> &'static str {
        self.ports.upstream.name()
    }

    /// Whether the service can serve requests: its store answers and is current.
    ///
    /// # Errors
    /// [`crate::ports::StoreError::Unavailable`] when it cannot.
    pub async fn readiness(&self) -> Result<(), crate::ports::StoreError> {
        self.ports.jobs.ready().await
    }

    /// Counts the jobs not yet final, by state, and records them as the `genjobs_jobs` gauge
    /// for whoever reads the metrics.
    ///
    /// # Errors
    /// When the store cannot count.
    pub async fn count_unfinished(&self) -> Result<crate::ports::UnfinishedJobs, crate::ports::StoreError> {
        let jobs = self.ports.jobs.count_unfinished().await?;
        telemetry::unfinished(jobs);
        Ok(jobs)
    }

    /// The settings in use.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}
