//! The operators' service: what it holds and how it is built, and the checks of the service's
//! health. Its use cases live by concern: users, keys and grants in `accounts.rs`, the catalog in
//! `catalog.rs`, the usage report in `usage.rs`.

use std::sync::Arc;

use super::{Ports, telemetry};
use crate::catalog::{Catalog, LiveCatalog};
use crate::decimal::Decimal;
use crate::ports::{
    AccountStore, CatalogStore, Clock, IdSource, JobStore, Limits, RouteSchemas, StoreError, UnfinishedJobs, UsageStore,
};

/// The ports the operators' use cases reach: the stores, what providers know of their routes,
/// time and ids. No provider: the command line builds it over the store alone.
#[derive(Clone)]
pub struct AdminPorts {
    /// Jobs, for readiness and the count of unfinished jobs.
    pub jobs: Arc<dyn JobStore>,
    /// Users, keys and grants.
    pub accounts: Arc<dyn AccountStore>,
    /// The usage report.
    pub usage: Arc<dyn UsageStore>,
    /// The model documents.
    pub catalog: Arc<dyn CatalogStore>,
    /// What each provider knows of its endpoints, to check routes against.
    pub route_schemas: Vec<Arc<dyn RouteSchemas>>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// New ids and keys.
    pub ids: Arc<dyn IdSource>,
}

impl From<&Ports> for AdminPorts {
    fn from(ports: &Ports) -> Self {
        Self {
            jobs: Arc::clone(&ports.jobs),
            accounts: Arc::clone(&ports.accounts),
            usage: Arc::clone(&ports.usage),
            catalog: Arc::clone(&ports.catalog),
            route_schemas: ports.route_schemas.clone(),
            clock: Arc::clone(&ports.clock),
            ids: Arc::clone(&ports.ids),
        }
    }
}

/// The operators' use cases.
#[derive(Clone)]
pub struct Admin {
    pub(super) ports: AdminPorts,
    pub(super) catalog: LiveCatalog,
    pub(super) default_limits: Limits,
    pub(super) credit_usd: Decimal,
}

/// What one credit is worth when the operator says nothing (`GENJOBS_CREDIT_USD`).
pub const DEFAULT_CREDIT_USD: Decimal = Decimal::from_billionths(10_000_000);

impl Admin {
    /// The operators' use cases over `ports`, keeping `catalog` current with what they change;
    /// users created without limits of their own get `default_limits`.
    #[must_use]
    pub fn new(ports: AdminPorts, catalog: impl Into<LiveCatalog>, default_limits: Limits) -> Self {
        Self { ports, catalog: catalog.into(), default_limits, credit_usd: DEFAULT_CREDIT_USD }
    }

    /// The same use cases, valuing a credit at `credit_usd` in revenue and margins.
    #[must_use]
    pub fn with_credit_usd(self, credit_usd: Decimal) -> Self {
        Self { credit_usd, ..self }
    }

    /// What one credit is worth, in US dollars.
    #[must_use]
    pub fn credit_usd(&self) -> Decimal {
        self.credit_usd
    }

    /// The catalog in effect now: one snapshot, for one request to read throughout.
    #[must_use]
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.current()
    }

    /// Whether the service can serve requests: its store answers and is current.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when it cannot.
    pub async fn readiness(&self) -> Result<(), StoreError> {
        self.ports.jobs.ready().await
    }

    /// Counts the jobs not yet final, by state, and records them as the `genjobs_jobs` gauge
    /// for whoever reads the metrics.
    ///
    /// # Errors
    /// When the store cannot count.
    pub async fn count_unfinished(&self) -> Result<UnfinishedJobs, StoreError> {
        let jobs = self.ports.jobs.count_unfinished().await?;
        telemetry::unfinished(jobs);
        Ok(jobs)
    }
}
