//! Group commit of job transitions that move no credits. Drivers commit many such transitions
//! at once (a submission recorded, a new state); each durable commit waits for the disk, and
//! the disk takes a few thousand flushes a second. So transitions that arrive while a flush is
//! running wait for it and then go together: the first to arrive leads and writes the whole
//! group in one statement, with the same compare-and-set on each job's version.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use diesel::sql_types::{Array, BigInt, Bool, Integer, Jsonb, Nullable, SmallInt, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use genjobs_domain::ports::StoreError;
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::error::{from_diesel, from_pool};
use crate::rows::JobRow;

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

#[derive(diesel::QueryableByName)]
struct Updated {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
}

/// Applies each row whose stored version is still the expected one.
const UPDATE_MANY: &str = "
UPDATE jobs SET state = t.state, progress = t.progress, outputs = t.outputs, error = t.error,
    started_at = t.started_at, finished_at = t.finished_at, canceled_at = t.canceled_at,
    credits_actual = t.credits_actual, upstream = t.upstream, submit_attempted = t.submit_attempted,
    next_poll_at = t.next_poll_at, poll_failures = t.poll_failures, version = t.version
FROM unnest($1::uuid[], $2::int8[], $3::text[], $4::int2[], $5::jsonb[], $6::jsonb[], $7::timestamptz[],
            $8::timestamptz[], $9::timestamptz[], $10::int8[], $11::jsonb[], $12::bool[], $13::timestamptz[],
            $14::int4[], $15::int8[])
    AS t(id, expected, state, progress, outputs, error, started_at, finished_at, canceled_at, credits_actual,
         upstream, submit_attempted, next_poll_at, poll_failures, version)
WHERE jobs.id = t.id AND jobs.version = t.expected
RETURNING jobs.id";

impl GroupCommit {
    /// Commits `row` if the stored job still has `expected_version`; whether it applied.
    pub(crate) async fn commit(
        &self,
        pool: &Pool<AsyncPgConnection>,
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
            let written = write(pool, &group).await;
            for pending in group {
                let applied = written.as_ref().map(|ids| ids.contains(&pending.row.id)).map_err(Clone::clone);
                let _ = pending.applied.send(applied);
            }
        }
        outcome.await.unwrap_or_else(|_| Err(StoreError::Unavailable("the group commit was interrupted".into())))
    }
}

async fn write(pool: &Pool<AsyncPgConnection>, group: &[Pending]) -> Result<HashSet<Uuid>, StoreError> {
    let rows = || group.iter().map(|p| &p.row);
    let mut conn = pool.get().await.map_err(from_pool)?;
    let updated: Vec<Updated> = diesel::sql_query(UPDATE_MANY)
        .bind::<Array<SqlUuid>, _>(rows().map(|r| r.id).collect::<Vec<_>>())
        .bind::<Array<BigInt>, _>(group.iter().map(|p| p.expected_version).collect::<Vec<_>>())
        .bind::<Array<Text>, _>(rows().map(|r| r.state.clone()).collect::<Vec<_>>())
        .bind::<Array<SmallInt>, _>(rows().map(|r| r.progress).collect::<Vec<_>>())
        .bind::<Array<Nullable<Jsonb>>, _>(rows().map(|r| r.outputs.clone()).collect::<Vec<_>>())
        .bind::<Array<Nullable<Jsonb>>, _>(rows().map(|r| r.error.clone()).collect::<Vec<_>>())
        .bind::<Array<Nullable<Timestamptz>>, _>(rows().map(|r| r.started_at).collect::<Vec<_>>())
        .bind::<Array<Nullable<Timestamptz>>, _>(rows().map(|r| r.finished_at).collect::<Vec<_>>())
        .bind::<Array<Nullable<Timestamptz>>, _>(rows().map(|r| r.canceled_at).collect::<Vec<_>>())
        .bind::<Array<Nullable<BigInt>>, _>(rows().map(|r| r.credits_actual).collect::<Vec<_>>())
        .bind::<Array<Nullable<Jsonb>>, _>(rows().map(|r| r.upstream.clone()).collect::<Vec<_>>())
        .bind::<Array<Bool>, _>(rows().map(|r| r.submit_attempted).collect::<Vec<_>>())
        .bind::<Array<Nullable<Timestamptz>>, _>(rows().map(|r| r.next_poll_at).collect::<Vec<_>>())
        .bind::<Array<Integer>, _>(rows().map(|r| r.poll_failures).collect::<Vec<_>>())
        .bind::<Array<BigInt>, _>(rows().map(|r| r.version).collect::<Vec<_>>())
        .load(&mut conn)
        .await
        .map_err(from_diesel)?;
    Ok(updated.into_iter().map(|u| u.id).collect())
}
