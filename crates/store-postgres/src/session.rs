//! [`Session`]: one unit of work on a pooled connection, safe through a transaction pooler, and
//! [`Db`]: a pool with what every unit of work on it obeys (the pooler's kind, the deadline).
//!
//! diesel-async prepares every statement (`Parse`, then `Bind`/`Execute` after a `Sync`). A
//! pooler in transaction mode (PgBouncer 1.18 tracks no prepared statements) may hand the client
//! another server connection after any `Sync` outside a transaction, where the statement does not
//! exist. Inside an explicit transaction the pooler keeps one server connection, so with
//! [`Pooler::Transaction`] a session is a transaction (and connections cache no statements, see
//! `pool`). Directly, a session is the bare connection and costs nothing.
//!
//! The deadline is the client's own: with the database out of reach, PgBouncer accepts the
//! connection and queues its first statement for as long as its `query_wait_timeout` (minutes),
//! where no server-side `statement_timeout` can act. So each unit of work is bounded by
//! [`Db::within`], and a session given up half-way leaves the pool with its connection: what the
//! connection still waits for would otherwise answer the next unit of work.

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, TransactionManager};
use genjobs_domain::ports::StoreError;

use crate::error::{from_diesel, from_pool};
use crate::pool::{PgSettings, Pooler};

/// A pool, the kind of pooler in front of its database, and the deadline of a unit of work.
#[derive(Clone)]
pub(crate) struct Db {
    pub(crate) pool: Pool<AsyncPgConnection>,
    pub(crate) pooler: Pooler,
    pub(crate) deadline: Duration,
}

impl Db {
    /// Units of work on `pool` directly, with the default deadline.
    pub(crate) fn new(pool: Pool<AsyncPgConnection>) -> Self {
        Self { pool, pooler: Pooler::None, deadline: PgSettings::default().statement_timeout }
    }

    /// Runs `work`, a unit of work on this pool, or gives it up at the deadline as
    /// [`StoreError::Unavailable`] (a 503).
    pub(crate) async fn within<T, E: From<StoreError>>(
        &self,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.within_times(1, work).await
    }

    /// As [`Db::within`], with `times` the deadline: for a unit of work that grows with what it
    /// writes, a batch of up to 50,000 items accepted in one transaction.
    pub(crate) async fn within_times<T, E: From<StoreError>>(
        &self,
        times: u32,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let deadline = self.deadline.saturating_mul(times.max(1));
        tokio::time::timeout(deadline, work).await.unwrap_or_else(|_| Err(missed_deadline(deadline).into()))
    }

    /// The deadline of a unit of work, `times` over.
    pub(crate) fn deadline_times(&self, times: u32) -> Duration {
        self.deadline.saturating_mul(times.max(1))
    }

    /// A session on this pool: see [`Session::start`].
    pub(crate) async fn session(&self) -> Result<Session, StoreError> {
        Session::start(&self.pool, self.pooler).await
    }

    /// Runs `work` in a session and finishes it when `work` succeeded, all within the deadline.
    pub(crate) async fn run<T>(
        &self,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, diesel::result::Error>,
    ) -> Result<T, StoreError> {
        self.within(async {
            let mut session = self.session().await?;
            let done = work(&mut session).await.map_err(from_diesel)?;
            session.finish().await?;
            Ok(done)
        })
        .await
    }
}

/// A pooled connection for one unit of work; end it with [`Session::finish`]. Dropped without
/// finishing (an error, a deadline, a canceled request) it takes its connection out of the pool
/// and closes it, since the connection may be half-way through a statement or a transaction (the
/// server or the pooler then rolls back and forgets what it queued): an error path needs no
/// cleanup.
pub(crate) struct Session {
    /// Always there until the session ends; `None` only inside `finish` and `drop`.
    conn: Option<Object<AsyncPgConnection>>,
    in_transaction: bool,
}

impl Session {
    /// Takes a connection from `pool`, and begins a transaction when `pooler` needs one.
    pub(crate) async fn start(pool: &Pool<AsyncPgConnection>, pooler: Pooler) -> Result<Session, StoreError> {
        let conn = pool.get().await.map_err(from_pool)?;
        let in_transaction = pooler == Pooler::Transaction;
        let mut session = Session { conn: Some(conn), in_transaction };
        if in_transaction {
            AnsiTransactionManager::begin_transaction(&mut *session).await.map_err(from_diesel)?;
        }
        Ok(session)
    }

    /// Ends the unit of work: commits its transaction, if it has one, and gives the connection
    /// back to the pool.
    pub(crate) async fn finish(mut self) -> Result<(), StoreError> {
        if self.in_transaction {
            AnsiTransactionManager::commit_transaction(&mut *self).await.map_err(from_diesel)?;
        }
        drop(self.conn.take());
        Ok(())
    }

    /// Ends the session and closes its connection (a dead one).
    pub(crate) fn discard(self) {
        drop(self);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            drop(Object::take(conn));
        }
    }
}

impl Deref for Session {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        match &self.conn {
            Some(conn) => conn,
            None => unreachable!("a session has its connection until it ends"),
        }
    }
}

impl DerefMut for Session {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        match &mut self.conn {
            Some(conn) => conn,
            None => unreachable!("a session has its connection until it ends"),
        }
    }
}

/// What a unit of work given up at its `deadline` fails with, counted as
/// `genjobs_db_deadlines_missed_total`.
fn missed_deadline(deadline: Duration) -> StoreError {
    metrics::counter!("genjobs_db_deadlines_missed_total").increment(1);
    tracing::warn!(deadline_ms = deadline.as_millis(), "a unit of work on the database missed its deadline");
    StoreError::Unavailable(format!("the database did not answer within {} ms", deadline.as_millis()))
}
