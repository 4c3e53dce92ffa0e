//! [`PgStore`]: the job and account ports over Postgres. Every operation that moves credits is one
//! transaction: a conditional update of the account row, the job row, and an append to the ledger,
//! whose unique indexes forbid a second hold or a second final movement for one job.
//!
//! - `job_store`: the job port: accept, read, commit, and the driver's claims and leases.
//! - `job_search`: the operators' search of every user's jobs.
//! - `account_store`: the account port: users, keys, grants.
//! - `keys`: keys' settings, their changes, and what a key's jobs use.
//! - `user_admin`: a change to a user's limits and tier, and the operators' listing of users.
//! - `ledger`: credit movements as ledger rows, and the ledger's sums for checks.
//! - `usage`: the usage port: ledger pages and usage reports.
//! - `client_webhooks`: the outbox of client webhooks (written by a trigger with the final transition)
//!   and the users' sealed secrets.
//! - `removals`: the removals port: jobs their owner removed from a listing, pages of those kept.
//! - `catalog`: the catalog port: model documents, their versions and change announcements.
//! - `kept`: the keys the service makes once and keeps (`kept_secrets`).
//! - `uploads`: the uploads port: each uploaded content once, and what each user uploaded per
//!   day (`uploads`, `upload_days`), apart from the jobs.
//! - `admission`: a batch item's admission, counted in its owner's jobs in the same transaction.
//! - `batches`: the batches port: a batch and its items accepted in one transaction, its figures
//!   summed from its items when read.
//! - `slots`: the provider slots port: the key each sent job holds a slot of, counted while the
//!   job is not final.

mod accept;
mod account_store;
mod admission;
mod batches;
mod catalog;
mod client_webhooks;
mod job_search;
mod job_store;
mod kept;
mod keys;
mod ledger;
mod openai_batches;
mod reconciliation;
mod removals;
mod slots;
mod uploads;
mod usage;
mod user_admin;

use std::sync::Arc;
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use genjobs_domain::ids::{JobId, UserId};
use genjobs_domain::ports::StoreError;

pub use accept::IDEMPOTENCY_PRUNE_INTERVAL;
pub use ledger::LedgerTotals;
pub use reconciliation::reconciliation_statement;
pub use usage::{LIVE_FLOOR, usage_statement};

use crate::cache::KeyCache;
use crate::catalog_signal::CatalogSignal;
use crate::error::{from_diesel, from_pool, is_lost_connection};
use crate::events::PgEvents;
use crate::group_accept::GroupAccept;
use crate::group_commit::GroupCommit;
use crate::job_cache::JobCache;
use crate::pool::{Durability, Pooler};
use crate::rows::{JobRow, UserRow};
use crate::schema::{jobs, users};
use crate::session::Db;
use crate::session::Session;

/// The Postgres store.
#[derive(Clone)]
pub struct PgStore {
    db: Db,
    relaxed: Db,
    keys: Arc<KeyCache>,
    /// Keys whose use this process recorded within the last minute.
    key_uses: Arc<crate::cache::TtlCache<genjobs_domain::ids::KeyPrefix, ()>>,
    jobs_cache: Arc<JobCache>,
    accepts: Arc<GroupAccept>,
    durable_group: Arc<GroupCommit>,
    relaxed_group: Arc<GroupCommit>,
    relaxed_durability: Durability,
    catalog_signal: Arc<CatalogSignal>,
    row_announcements: Option<Arc<PgEvents>>,
}

impl PgStore {
    /// A store over `pool`, caching keys in `keys`, with no job cache and every write durable.
    #[must_use]
    pub fn new(pool: Pool<AsyncPgConnection>, keys: Arc<KeyCache>) -> Self {
        let db = Db::new(pool);
        Self {
            relaxed: db.clone(),
            db,
            keys,
            key_uses: Arc::new(crate::cache::TtlCache::new(keys::KEY_USE_INTERVAL)),
            jobs_cache: Arc::new(JobCache::new(0)),
            accepts: Arc::default(),
            durable_group: Arc::default(),
            relaxed_group: Arc::default(),
            relaxed_durability: Durability::Durable,
            catalog_signal: Arc::default(),
            row_announcements: None,
        }
    }

    /// Works through a pooler of kind `pooler` (see [`Pooler`]).
    #[must_use]
    pub fn with_pooler(self, pooler: Pooler) -> Self {
        Self { db: Db { pooler, ..self.db }, relaxed: Db { pooler, ..self.relaxed }, ..self }
    }

    /// Gives up each unit of work after `deadline` (see [`crate::PgSettings::statement_timeout`]).
    #[must_use]
    pub fn with_deadline(self, deadline: Duration) -> Self {
        Self { db: Db { deadline, ..self.db }, relaxed: Db { deadline, ..self.relaxed }, ..self }
    }

    /// Commits recomputable transitions through `relaxed` (connections with
    /// `synchronous_commit = off`).
    #[must_use]
    pub fn with_relaxed_writes(self, relaxed: Pool<AsyncPgConnection>) -> Self {
        Self { relaxed: Db { pool: relaxed, ..self.db.clone() }, relaxed_durability: Durability::Relaxed, ..self }
    }

    /// Serves job reads from `cache`.
    #[must_use]
    pub fn with_job_cache(self, cache: Arc<JobCache>) -> Self {
        Self { jobs_cache: cache, ..self }
    }

    /// Announces through `events` the changes of jobs that the use cases do not announce (all
    /// but new states), so that every replica's job cache drops them.
    #[must_use]
    pub fn with_row_announcements(self, events: Arc<PgEvents>) -> Self {
        Self { row_announcements: Some(events), ..self }
    }

    /// Tells the other replicas that job `id` changed without a new state.
    pub(super) async fn announce_row(&self, id: JobId) {
        if let Some(events) = &self.row_announcements {
            events.announce_row(id).await;
        }
    }

    /// The pool, for adapters that share it.
    #[must_use]
    pub fn pool(&self) -> &Pool<AsyncPgConnection> {
        &self.db.pool
    }

    /// Records both pools' connections in use and idle, and the callers waiting for one, as
    /// `genjobs_db_pool_connections{pool, state}` and `genjobs_db_pool_waiting{pool}`; `pool` is
    /// `durable` (commits wait for the disk) or `relaxed`.
    pub fn record_pool_gauges(&self) {
        for (name, pool) in [("durable", &self.db.pool), ("relaxed", &self.relaxed.pool)] {
            let status = pool.status();
            let in_use = status.size.saturating_sub(status.available);
            metrics::gauge!("genjobs_db_pool_connections", "pool" => name, "state" => "in_use").set(in_use as f64);
            metrics::gauge!("genjobs_db_pool_connections", "pool" => name, "state" => "idle")
                .set(status.available as f64);
            metrics::gauge!("genjobs_db_pool_waiting", "pool" => name).set(status.waiting as f64);
        }
    }

    /// Runs `work`, a unit of work of this store, within the deadline (see [`Db::within`]).
    pub(super) async fn within<T, E: From<StoreError>>(
        &self,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.db.within(work).await
    }

    /// A bare connection, for work that is one explicit transaction from start to end: a
    /// transaction given up half-way leaves its connection broken, and the pool drops it.
    pub(super) async fn conn(&self) -> Result<Object<AsyncPgConnection>, StoreError> {
        self.db.pool.get().await.map_err(from_pool)
    }

    /// A session on the durable pool: see [`Session`].
    pub(super) async fn session(&self) -> Result<Session, StoreError> {
        self.db.session().await
    }

    /// A session on the relaxed pool.
    pub(super) async fn relaxed_session(&self) -> Result<Session, StoreError> {
        self.relaxed.session().await
    }

    /// Runs `work` in a session of the durable pool and finishes it, within the deadline.
    pub(super) async fn in_session<T>(
        &self,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, diesel::result::Error>,
    ) -> Result<T, StoreError> {
        self.db.run(work).await
    }

    /// Runs a statement that is safe to repeat (a read, or a write of a fixed value), once more
    /// on a fresh connection when the first one turns out to have been ended by the server (a
    /// restart or failover ends every pooled session). The dead connections leave the pool.
    pub(super) async fn repeatable<T>(
        &self,
        mut statement: impl for<'c> FnMut(&'c mut AsyncPgConnection) -> BoxFuture<'c, Result<T, diesel::result::Error>>
        + Send,
    ) -> Result<T, StoreError> {
        self.within(async {
            let mut session = self.session().await?;
            let done = match statement(&mut session).await {
            Err(e) if is_lost_connection(&e) => {
                // What ends one session (a restart, a failover) ends the idle ones too: drop them
                // all, so that the retry gets a new connection rather than another dead one.
                session.discard();
                self.db.pool.retain(|_, _| false);
                tracing::warn!(error = %e, "a database session was ended; running the statement again on a new one");
                session = self.session().await?;
                statement(&mut session).await
            }
            done => done,
        }
        .map_err(from_diesel)?;
            session.finish().await?;
            Ok(done)
        })
        .await
    }

    /// The row of job `id`, as a statement [`PgStore::repeatable`] can run again.
    pub(super) fn job_row(
        conn: &mut AsyncPgConnection,
        id: JobId,
    ) -> BoxFuture<'_, Result<Option<JobRow>, diesel::result::Error>> {
        jobs::table.find(id.as_uuid()).select(JobRow::as_select()).first(conn).map(OptionalExtension::optional).boxed()
    }

    /// The row of user `user_id`, as a statement [`PgStore::repeatable`] can run again.
    pub(super) fn user_row(
        conn: &mut AsyncPgConnection,
        user_id: UserId,
    ) -> BoxFuture<'_, Result<Option<UserRow>, diesel::result::Error>> {
        users::table
            .find(user_id.as_uuid())
            .select(UserRow::as_select())
            .first(conn)
            .map(OptionalExtension::optional)
            .boxed()
    }
}
