//! [`Session`]: one unit of work on a pooled connection, safe through a transaction pooler.
//!
//! diesel-async prepares every statement (`Parse`, then `Bind`/`Execute` after a `Sync`). A
//! pooler in transaction mode (PgBouncer 1.18 tracks no prepared statements) may hand the client
//! another server connection after any `Sync` outside a transaction, where the statement does not
//! exist. Inside an explicit transaction the pooler keeps one server connection, so with
//! [`Pooler::Transaction`] a session is a transaction (and connections cache no statements, see
//! `pool`). Directly, a session is the bare connection and costs nothing.

use std::ops::{Deref, DerefMut};

use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, TransactionManager};
use genjobs_domain::ports::StoreError;

use crate::error::{from_diesel, from_pool};
use crate::pool::Pooler;

/// A pooled connection for one unit of work; end it with [`Session::finish`]. Dropped without
/// finishing, a session's transaction is left open, which makes the pool discard the
/// connection (and the server roll the transaction back): an error path needs no cleanup.
pub(crate) struct Session {
    conn: Object<AsyncPgConnection>,
    in_transaction: bool,
}

impl Session {
    /// Takes a connection from `pool`, and begins a transaction when `pooler` needs one.
    pub(crate) async fn start(pool: &Pool<AsyncPgConnection>, pooler: Pooler) -> Result<Session, StoreError> {
        let mut conn = pool.get().await.map_err(from_pool)?;
        let in_transaction = pooler == Pooler::Transaction;
        if in_transaction {
            AnsiTransactionManager::begin_transaction(&mut *conn).await.map_err(from_diesel)?;
        }
        Ok(Session { conn, in_transaction })
    }

    /// Ends the unit of work: commits its transaction, if it has one.
    pub(crate) async fn finish(mut self) -> Result<(), StoreError> {
        if self.in_transaction {
            AnsiTransactionManager::commit_transaction(&mut *self.conn).await.map_err(from_diesel)?;
        }
        Ok(())
    }

    /// Runs `work` in the session and finishes it when `work` succeeded.
    pub(crate) async fn run<T>(
        pool: &Pool<AsyncPgConnection>,
        pooler: Pooler,
        work: impl AsyncFnOnce(&mut AsyncPgConnection) -> Result<T, diesel::result::Error>,
    ) -> Result<T, StoreError> {
        let mut session = Session::start(pool, pooler).await?;
        let done = work(&mut session).await.map_err(from_diesel)?;
        session.finish().await?;
        Ok(done)
    }

    /// The connection itself, taken out of the pool for good (to drop a dead one).
    pub(crate) fn discard(self) {
        drop(Object::take(self.conn));
    }
}

impl Deref for Session {
    type Target = AsyncPgConnection;

    fn deref(&self) -> &AsyncPgConnection {
        &self.conn
    }
}

impl DerefMut for Session {
    fn deref_mut(&mut self) -> &mut AsyncPgConnection {
        &mut self.conn
    }
}
