//! Group commit of job transitions that move no credits. Drivers commit many such transitions
//! at once (a submission recorded, a new state); each durable commit waits for the disk, and
//! the disk takes a few thousand flushes a second. So transitions that arrive while a flush is
//! running wait for it and then go together ([`Grouped`]): one of them writes the whole group in
//! one statement, with the same compare-and-set on each job's version.

use std::collections::HashSet;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool::Pool;
use genjobs_domain::ports::StoreError;
use uuid::Uuid;

use crate::group::Grouped;
use crate::pool::{Durability, Pooler, count_job_commit};
use crate::rows::{JobRow, update_rows};
use crate::session::Session;

/// A transition waiting for its group: the row to write if the stored job still has
/// `expected_version`.
struct Pending {
    row: JobRow,
    expected_version: i64,
}

/// One group commit per pool.
#[derive(Default)]
pub(crate) struct GroupCommit {
    group: Grouped<Pending, Result<bool, StoreError>>,
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
        self.group
            .join(
                Pending { row, expected_version },
                async |group: &[Pending]| {
                    let written = write(pool, pooler, group).await;
                    if written.is_ok() {
                        count_job_commit(durability);
                    }
                    written
                },
                |written, pending| written.as_ref().map(|ids| ids.contains(&pending.row.id)).map_err(Clone::clone),
            )
            .await
            .unwrap_or_else(|| Err(StoreError::Unavailable("the group commit was interrupted".into())))
    }
}

async fn write(pool: &Pool<AsyncPgConnection>, pooler: Pooler, group: &[Pending]) -> Result<HashSet<Uuid>, StoreError> {
    let rows: Vec<(&JobRow, i64)> = group.iter().map(|p| (&p.row, p.expected_version)).collect();
    let written = Session::run(pool, pooler, async |conn| update_rows(conn, &rows).await).await?;
    Ok(written.into_iter().collect())
}
