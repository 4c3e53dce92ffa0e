//! Group commit of job transitions that move no credits. Drivers commit many such transitions
//! at once (a submission recorded, a new state); each durable commit waits for the disk, and
//! the disk takes a few thousand flushes a second. So transitions that arrive while a flush is
//! running wait for it and then go together: the first to arrive leads and writes the whole
//! group in one statement, with the same compare-and-set on each job's version.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool::Pool;
use genjobs_domain::ports::StoreError;
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::pool::{Durability, Pooler, count_job_commit};
use crate::rows::{JobRow, update_rows};
use crate::session::Session;

struct Pending {
    row: JobRow,
    expected_version: i64,
    applied: oneshot::Sender<Result<bool, StoreError>>,
}

/// One group commit per pool.
#[derive(Default)]
pub(crate) struct GroupCommit {
    pending: Mutex<Vec<Pending>>,
    flushing: tokio::sync::Mutex<()>,
}

impl GroupCommit {
    /// Commits `row` if the stored job still has `expected_version`; whether it applied.
    pub(crate) async fn commit(
        &self,
        pool: &Pool<AsyncPgConnection>,
        pooler: Pooler,
        durability: Durability,
        row: JobRow,
        expected_version: i64,
    ) -> Result<bool, StoreError> {
        let (applied, outcome) = oneshot::channel();
        let leads = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.push(Pending { row, expected_version, applied });
            pending.len() == 1
        };
        if leads {
            let _turn = self.flushing.lock().await;
            let group = std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
            let written = write(pool, pooler, &group).await;
            if written.is_ok() {
                count_job_commit(durability);
            }
            for pending in group {
                let applied = written.as_ref().map(|ids| ids.contains(&pending.row.id)).map_err(Clone::clone);
                let _ = pending.applied.send(applied);
            }
        }
        outcome.await.unwrap_or_else(|_| Err(StoreError::Unavailable("the group commit was interrupted".into())))
    }
}

async fn write(pool: &Pool<AsyncPgConnection>, pooler: Pooler, group: &[Pending]) -> Result<HashSet<Uuid>, StoreError> {
    let rows: Vec<(&JobRow, i64)> = group.iter().map(|p| (&p.row, p.expected_version)).collect();
    let written = Session::run(pool, pooler, async |conn| update_rows(conn, &rows).await).await?;
    Ok(written.into_iter().collect())
}
