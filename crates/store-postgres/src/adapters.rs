//! [`connect`]: every Postgres adapter of one replica, built from [`PgSettings`] and wired
//! together (the store with its caches, the events, the rate limiter, and the listener that keeps
//! the caches true across replicas). The binary and the tests build replicas the same way.

use std::sync::Arc;

use genjobs_domain::ports::IDEMPOTENCY_RETENTION;
use genjobs_runtime::EventHub;
use tokio::task::JoinHandle;

use crate::cache::KeyCache;
use crate::events::{Listeners, PgEvents, listen};
use crate::job_cache::JobCache;
use crate::pool::{PgSettings, SetupError, pool, relaxed_pool};
use crate::rate_limit::PgRateLimiter;
use crate::store::{IDEMPOTENCY_PRUNE_INTERVAL, PgStore};

/// One replica's Postgres adapters.
pub struct PgAdapters {
    /// The job and account store.
    pub store: Arc<PgStore>,
    /// Job change notifications across replicas.
    pub events: Arc<PgEvents>,
    /// The shared request rate limit.
    pub rate_limiter: Arc<PgRateLimiter>,
    /// The key cache, for callers that evict keys themselves.
    pub keys: Arc<KeyCache>,
    /// The job cache, which tells whether it is serving (its listener connected).
    pub jobs: Arc<JobCache>,
    /// The `LISTEN` task; it runs until aborted.
    pub listener: JoinHandle<()>,
    /// The task that prunes old idempotency records; it runs until aborted.
    pub pruner: JoinHandle<()>,
}

impl Drop for PgAdapters {
    fn drop(&mut self) {
        self.listener.abort();
        self.pruner.abort();
    }
}

fn prune_idempotency(store: Arc<PgStore>) -> JoinHandle<()> {
    tokio::spawn(async move {
        // The first prune waits one interval: replicas started together (a rolling deploy)
        // would otherwise all prune at once, and a store opened for one unit of work (the
        // command line, a test) would race its own writes with a prune it never asked for.
        let first = tokio::time::Instant::now() + IDEMPOTENCY_PRUNE_INTERVAL;
        let mut every = tokio::time::interval_at(first, IDEMPOTENCY_PRUNE_INTERVAL);
        loop {
            every.tick().await;
            let before = time::OffsetDateTime::now_utc() - IDEMPOTENCY_RETENTION;
            match store.prune_idempotency(before).await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "idempotency records older than 24 h pruned"),
                Err(error) => tracing::warn!(%error, "could not prune idempotency records; trying again later"),
            }
        }
    })
}

/// Builds the adapters of one replica. The pools connect lazily, so this succeeds while the
/// database is down; migrations are a separate step ([`crate::run_migrations`]). Must be called
/// inside a tokio runtime, which runs the listener.
///
/// # Errors
/// [`SetupError::Pool`] for settings the pool refuses.
pub fn connect(settings: &PgSettings) -> Result<PgAdapters, SetupError> {
    let pool = pool(settings)?;
    let listeners = Listeners {
        hub: Arc::new(EventHub::new()),
        keys: Arc::new(KeyCache::new(settings.key_cache_ttl)),
        jobs: Arc::new(JobCache::new(settings.job_cache_entries)),
        catalog: Arc::default(),
        origin: uuid::Uuid::new_v4().to_string(),
    };
    let listener = listen(settings.direct_url().to_owned(), listeners.clone());
    let events = Arc::new(
        PgEvents::new(&listeners, pool.clone()).with_pooler(settings.pooler).with_deadline(settings.statement_timeout),
    );
    let store = PgStore::new(pool.clone(), Arc::clone(&listeners.keys))
        .with_pooler(settings.pooler)
        .with_deadline(settings.statement_timeout)
        .with_relaxed_writes(relaxed_pool(settings)?)
        .with_job_cache(Arc::clone(&listeners.jobs))
        .with_row_announcements(Arc::clone(&events))
        .with_catalog_signal(listeners.catalog);
    let store = Arc::new(store);
    Ok(PgAdapters {
        pruner: prune_idempotency(Arc::clone(&store)),
        store,
        events,
        rate_limiter: Arc::new(
            PgRateLimiter::new(pool).with_pooler(settings.pooler).with_deadline(settings.statement_timeout),
        ),
        keys: listeners.keys,
        jobs: listeners.jobs,
        listener,
    })
}
