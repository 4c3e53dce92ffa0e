//! Mapping database and pool failures onto the domain's [`StoreError`]: an unreachable or
//! overloaded database is `Unavailable` (HTTP 503, retried by clients), anything else `Internal`.

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::pooled_connection::PoolError as ConnectionError;
use diesel_async::pooled_connection::deadpool::PoolError;
use genjobs_domain::ports::StoreError;

/// SQLSTATE of a statement canceled by `statement_timeout`.
const QUERY_CANCELED: &str = "57014";

/// What Postgres says when it ends a session (an operator's `pg_terminate_backend`, a restart, a
/// failover, a crash of another backend) or refuses new ones while starting or stopping. Only the
/// message tells: diesel keeps no SQLSTATE for these (57P01, 57P02, 57P03). Through PgBouncer the
/// same event reads as its own messages for a server connection it lost.
const SESSION_ENDED: [&str; 6] = [
    "terminating connection",
    "the database system is",
    "server closed the connection",
    "connection closed",
    "invalid server parameter",
    "server conn crashed",
];

/// Whether the connection a statement ran on is gone: the statement may be run again on another.
pub(crate) fn is_lost_connection(e: &DieselError) -> bool {
    match e {
        DieselError::DatabaseError(DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand, _) => {
            true
        }
        DieselError::DatabaseError(_, info) => SESSION_ENDED.iter().any(|m| info.message().contains(m)),
        _ => false,
    }
}

pub(crate) fn from_diesel(e: DieselError) -> StoreError {
    match &e {
        _ if is_lost_connection(&e) => StoreError::Unavailable(e.to_string()),
        DieselError::DatabaseError(_, info) if info.message().contains("statement timeout") => {
            StoreError::Unavailable(e.to_string())
        }
        DieselError::DatabaseError(_, info) if info.message().contains(QUERY_CANCELED) => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Internal(e.to_string()),
    }
}

pub(crate) fn from_pool(e: PoolError) -> StoreError {
    match e {
        PoolError::Backend(ConnectionError::QueryError(e)) => from_diesel(e),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// Errors inside a transaction: the store's own refusals travel through diesel's transaction
/// as this type, so that the transaction rolls back on any of them.
#[derive(Debug)]
pub(crate) enum TxError<E> {
    Db(DieselError),
    Refused(E),
}

impl<E> From<DieselError> for TxError<E> {
    fn from(e: DieselError) -> Self {
        TxError::Db(e)
    }
}
