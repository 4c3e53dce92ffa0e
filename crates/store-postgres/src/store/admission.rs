//! A batch item's admission ([`genjobs_domain::job::Transition::takes_slot`]): its owner's count
//! raised only while under the concurrent-job limit, in the same transaction as the item's
//! compare-and-set. Off the group commit's fast path: one admission per item, so a few round
//! trips more each is nothing beside the item's own run.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, RunQueryDsl};
use genjobs_domain::ports::StoreError;

use super::PgStore;
use crate::error::{TxError, from_diesel};
use crate::pool::{Durability, count_job_commit};
use crate::rows::{JobRow, update_rows};

/// How an admission went.
pub(super) enum Admission {
    /// Committed and counted.
    Admitted,
    /// The job is still at the expected version, and its owner at the limit: nothing written.
    OwnerAtLimit,
    /// The job is not at the expected version, or not there at all: nothing written.
    Stale,
}

/// Locks the job at its expected version (`$1`, `$2`; jobs before their owner, as every final
/// commit locks them), then counts it in its owner's (`$3`) jobs only while the owner is under the
/// limit. Answers whether the job was found at that version and whether it was counted.
const COUNT_ADMISSION: &str = "
WITH job AS (
    SELECT id FROM jobs WHERE id = $1 AND version = $2 FOR NO KEY UPDATE
), counted AS (
    UPDATE users SET active_jobs = active_jobs + 1, admitted_batch_items = admitted_batch_items + 1
    WHERE id = $3 AND active_jobs < max_concurrent_jobs AND EXISTS (SELECT 1 FROM job)
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM job) AS found, EXISTS (SELECT 1 FROM counted) AS counted";

#[derive(QueryableByName)]
struct Counted {
    #[diesel(sql_type = Bool)]
    found: bool,
    #[diesel(sql_type = Bool)]
    counted: bool,
}

impl PgStore {
    /// Commits `row`, a batch item's admission, if the stored job is still at `expected` and its
    /// owner under the concurrent-job limit, counting it in the owner's active jobs and admitted
    /// batch items in the same transaction.
    pub(super) async fn admit(&self, row: &JobRow, expected: i64) -> Result<Admission, StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            let outcome = conn
                .transaction(async |conn| -> Result<(), TxError<Admission>> {
                    let seen: Counted = diesel::sql_query(COUNT_ADMISSION)
                        .bind::<SqlUuid, _>(row.id)
                        .bind::<BigInt, _>(expected)
                        .bind::<SqlUuid, _>(row.user_id)
                        .get_result(conn)
                        .await?;
                    if !seen.found {
                        return Err(TxError::Refused(Admission::Stale));
                    }
                    if !seen.counted {
                        return Err(TxError::Refused(Admission::OwnerAtLimit));
                    }
                    if update_rows(conn, &[(row, expected)]).await?.is_empty() {
                        return Err(TxError::Refused(Admission::Stale));
                    }
                    Ok(())
                })
                .await;
            match outcome {
                Ok(()) => {
                    count_job_commit(Durability::Durable);
                    Ok(Admission::Admitted)
                }
                Err(TxError::Refused(admission)) => Ok(admission),
                Err(TxError::Db(e)) => Err(from_diesel(e)),
            }
        })
        .await
    }
}
