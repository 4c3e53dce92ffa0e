//! The batches port over Postgres: a batch and its items accepted in one transaction (the key
//! chain's budgets and the account checked against the sum of the items' holds, the items and
//! their ledger holds inserted by one statement), and the batch reads, whose figures one
//! aggregate over the batch's items sums.
//!
//! A batch keeps the count of its items not yet final (`unfinished`), which the
//! `jobs_batch_item_finished` trigger counts down in each item's final statement: the statement
//! that finds none left records the batch's webhook event (see the migration). A batch without
//! one has ended, and is ended no more.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::batch::{Batch, BatchEnd, BatchView, MAX_BATCH_ITEMS};
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{BatchId, JobId};
use genjobs_domain::job::{Job, JobState};
use genjobs_domain::ports::{
    AcceptError, BatchAccepted, BatchFilter, BatchStore, IDEMPOTENCY_RETENTION, IdempotencyClaim, StoreError,
};
use time::OffsetDateTime;

use super::PgStore;
use super::accept::{ACCEPT_ATTEMPTS, ChainCheck, Refusal, check_key_chain, claimed_job, count_hold, record_claim};
use crate::error::{TxError, from_diesel};
use crate::pool::{Durability, count_job_commit};
use crate::rows::{BATCH_VIEWS, BatchRow, BatchViewRow, JobRow, amount, end_name, insert_items};
use crate::schema::{batches, jobs, users};

/// The final states, for a page of final items.
const FINAL_STATES: [&str; 3] = ["succeeded", "failed", "canceled"];

/// Wakes the items waiting for admission whose owners have room now (`BatchStore::wake_admissible`):
/// the owners with waiting items found by a skip scan of the waiting items' index (one probe per
/// owner, however many items wait), each owner's first ones (as many as its room) in its batches'
/// order, and the unsent items of the batches ended early (to be ended, not admitted: no room
/// needed), at most `$1` in all; those resting (not due by `$2`, and under no lease or parked
/// until their window's end) made due then and freed of the lease of the driver that parked them
/// (a resting item is held by no driver), locked in the order of their ids as group commits lock
/// theirs. Their `version` stays: a wake is advice, and a driver holding an item still commits it.
/// An item a driver claimed since an earlier wake is due by that wake's time, so a wake whose `$2`
/// is older (read before it waited for a connection) would find it due later: the lease and the
/// window's end tell a held item from a parked one. The conditions are the lock's, so that Postgres
/// checks them again on a row changed since the statement's snapshot (an item admitted meanwhile
/// and on its way to the provider is never made claimable by a second driver).
const WAKE_ADMISSIBLE: &str = "
WITH RECURSIVE owners AS (
    (SELECT user_id FROM jobs
     WHERE batch_id IS NOT NULL AND NOT batch_admitted AND state IN ('queued', 'running')
     ORDER BY user_id LIMIT 1)
    UNION ALL
    SELECT (SELECT next.user_id FROM jobs next
            WHERE next.batch_id IS NOT NULL AND NOT next.batch_admitted AND next.state IN ('queued', 'running')
              AND next.user_id > owners.user_id
            ORDER BY next.user_id LIMIT 1)
    FROM owners WHERE owners.user_id IS NOT NULL
), picked AS (
    (SELECT item.id, item.batch_id
     FROM owners
     JOIN users ON users.id = owners.user_id AND users.active_jobs < users.max_concurrent_jobs
     CROSS JOIN LATERAL (
        SELECT jobs.id, jobs.batch_id FROM jobs
        JOIN batches ON batches.id = jobs.batch_id AND batches.ended IS NULL
        WHERE jobs.user_id = users.id
          AND jobs.batch_id IS NOT NULL AND NOT jobs.batch_admitted AND jobs.state IN ('queued', 'running')
        ORDER BY jobs.batch_id, jobs.id
        LIMIT users.max_concurrent_jobs - users.active_jobs
     ) AS item)
    UNION ALL
    (SELECT jobs.id, jobs.batch_id FROM batches
     JOIN jobs ON jobs.batch_id = batches.id
     WHERE batches.ended IS NOT NULL AND batches.unfinished > 0
       AND NOT jobs.batch_admitted AND jobs.state IN ('queued', 'running'))
    ORDER BY batch_id, id
    LIMIT $1
), woken AS (
    UPDATE jobs SET next_poll_at = $2, lease_id = NULL
    WHERE id IN (
        SELECT jobs.id FROM jobs JOIN batches ON batches.id = jobs.batch_id
        WHERE jobs.id IN (SELECT id FROM picked) AND jobs.next_poll_at > $2
          AND NOT jobs.batch_admitted AND jobs.state IN ('queued', 'running')
          AND (jobs.lease_id IS NULL OR jobs.next_poll_at >= batches.expires_at)
        ORDER BY jobs.id
        FOR NO KEY UPDATE OF jobs
    )
)
SELECT id FROM picked ORDER BY batch_id, id";

#[derive(QueryableByName)]
struct Admissible {
    #[diesel(sql_type = SqlUuid)]
    id: uuid::Uuid,
}

/// The batch `id` with its figures, or `None`.
async fn view_of(conn: &mut AsyncPgConnection, id: uuid::Uuid) -> Result<Option<BatchViewRow>, diesel::result::Error> {
    diesel::sql_query(format!("{BATCH_VIEWS} WHERE id = $1")).bind::<SqlUuid, _>(id).get_result(conn).await.optional()
}

impl PgStore {
    /// One attempt at [`BatchStore::accept_batch`]: see there.
    async fn try_accept_batch(
        &self,
        batch: &Batch,
        items: &[Job],
        idempotency: Option<&IdempotencyClaim>,
        now: OffsetDateTime,
    ) -> Result<Result<BatchAccepted, Refusal>, StoreError> {
        let record = BatchRow::from_batch(batch)?;
        let rows = items.iter().map(JobRow::from_job).collect::<Result<Vec<_>, _>>()?;
        let sum = Credits::new(items.iter().map(|job| job.credits_held().get()).fold(0, u64::saturating_add));
        let held = amount(sum)?;
        let user_id = batch.user_id.as_uuid();
        let fresh_after = now - IDEMPOTENCY_RETENTION;
        // The deadline (and the statements' timeout) of an acceptance grows with its items: a
        // unit of work's for every 5,000, the most a native batch has.
        let times = u32::try_from(items.len().div_ceil(MAX_BATCH_ITEMS)).unwrap_or(u32::MAX).max(1);
        let timeout_ms = self.db.deadline_times(times).as_millis();
        self.db
            .within_times(times, async {
                let mut conn = self.conn().await?;
                let outcome = conn
                    .transaction(async |conn| -> Result<BatchAccepted, TxError<Refusal>> {
                        let refused = |e: AcceptError| TxError::Refused(Refusal::Accept(e));
                        if times > 1 {
                            diesel::sql_query(format!("SET LOCAL statement_timeout = {timeout_ms}"))
                                .execute(conn)
                                .await?;
                        }
                        if let Some(claim) = idempotency
                            && let Some(first) = claimed_job(conn, user_id, claim, fresh_after).await?
                        {
                            let original: Option<uuid::Uuid> =
                                jobs::table.find(first).select(jobs::batch_id).first(conn).await?;
                            let Some(original) = original else {
                                return Err(refused(AcceptError::IdempotencyConflict));
                            };
                            let view = view_of(conn, original)
                                .await?
                                .ok_or_else(|| refused(AcceptError::IdempotencyConflict))?;
                            let view = view.into_view().map_err(|e| refused(e.into()))?;
                            return Ok(BatchAccepted::Replayed(view));
                        }
                        let ChainCheck { own_budget, budget_refusal, .. } =
                            check_key_chain(conn, batch.key_prefix.as_ref(), sum, now, false).await?;
                        let available: Option<i64> = users::table
                            .find(user_id)
                            .select(users::credits_available)
                            .for_update()
                            .first(conn)
                            .await
                            .optional()?;
                        let Some(available) = available else { return Err(refused(AcceptError::UnknownUser)) };
                        if available < held {
                            let available = Credits::new(u64::try_from(available).unwrap_or(0));
                            return Err(refused(AcceptError::InsufficientCredits { needed: sum, available }));
                        }
                        if let Some(refusal) = budget_refusal {
                            return Err(refused(refusal));
                        }
                        // The items count as active jobs only once admitted, each in its own commit.
                        diesel::update(users::table.find(user_id))
                            .set((
                                users::credits_available.eq(users::credits_available - held),
                                users::credits_held.eq(users::credits_held + held),
                            ))
                            .execute(conn)
                            .await?;
                        let counted_under = count_hold(conn, own_budget, batch.key_prefix.as_ref(), held).await?;
                        let unfinished = i32::try_from(items.len()).map_err(|e| {
                            refused(StoreError::Internal(format!("a batch of {} items: {e}", items.len())).into())
                        })?;
                        diesel::insert_into(batches::table)
                            .values((&record, batches::unfinished.eq(unfinished)))
                            .execute(conn)
                            .await?;
                        let rows: Vec<&JobRow> = rows.iter().collect();
                        insert_items(conn, &rows, counted_under).await?;
                        if let (Some(claim), Some(first)) = (idempotency, items.first()) {
                            record_claim(conn, user_id, claim, first.id().as_uuid(), now).await?;
                        }
                        let view = view_of(conn, record.id).await?.ok_or_else(|| {
                            refused(StoreError::Internal("the batch just inserted cannot be read".into()).into())
                        })?;
                        Ok(BatchAccepted::Created(view.into_view().map_err(|e| refused(e.into()))?))
                    })
                    .await;
                match outcome {
                    Ok(accepted) => {
                        if matches!(accepted, BatchAccepted::Created(_)) {
                            count_job_commit(Durability::Durable);
                        }
                        Ok(Ok(accepted))
                    }
                    Err(TxError::Refused(refusal)) => Ok(Err(refusal)),
                    Err(TxError::Db(e)) => Err(from_diesel(e)),
                }
            })
            .await
    }
}

#[async_trait]
impl BatchStore for PgStore {
    async fn accept_batch(
        &self,
        batch: Batch,
        items: Vec<Job>,
        idempotency: Option<IdempotencyClaim>,
        now: OffsetDateTime,
    ) -> Result<BatchAccepted, AcceptError> {
        for _ in 0..ACCEPT_ATTEMPTS {
            match self.try_accept_batch(&batch, &items, idempotency.as_ref(), now).await? {
                Ok(accepted) => return Ok(accepted),
                Err(Refusal::Accept(refusal)) => return Err(refusal),
                Err(Refusal::RetryIdempotency) => continue,
            }
        }
        Err(StoreError::Internal("idempotency key kept racing".into()).into())
    }

    async fn batch_record(&self, id: BatchId) -> Result<Option<Batch>, StoreError> {
        let row = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                batches::table
                    .find(id.as_uuid())
                    .select(BatchRow::as_select())
                    .first(conn)
                    .map(OptionalExtension::optional)
                    .boxed()
            })
            .await?;
        row.map(BatchRow::into_batch).transpose()
    }

    async fn batch(&self, id: BatchId) -> Result<Option<BatchView>, StoreError> {
        let row = self.repeatable(|conn: &mut AsyncPgConnection| view_of(conn, id.as_uuid()).boxed()).await?;
        row.map(BatchViewRow::into_view).transpose()
    }

    async fn find_batches(
        &self,
        filter: BatchFilter,
        before: Option<BatchId>,
        limit: usize,
    ) -> Result<Vec<BatchView>, StoreError> {
        let statement = format!(
            "{BATCH_VIEWS} WHERE ($1::uuid IS NULL OR user_id = $1) AND ($2::uuid IS NULL OR id < $2)
               AND ($3::text IS NULL OR state = $3)
             ORDER BY id DESC LIMIT $4"
        );
        let user_id = filter.user_id.map(|user| user.as_uuid());
        let state = filter.state.map(|state| state.as_str());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<BatchViewRow> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                diesel::sql_query(statement.clone())
                    .bind::<Nullable<SqlUuid>, _>(user_id)
                    .bind::<Nullable<SqlUuid>, _>(before.map(|id| id.as_uuid()))
                    .bind::<Nullable<Text>, _>(state)
                    .bind::<BigInt, _>(limit)
                    .load(conn)
                    .boxed()
            })
            .await?;
        rows.into_iter().map(BatchViewRow::into_view).collect()
    }

    async fn batch_items(
        &self,
        id: BatchId,
        state: Option<JobState>,
        final_only: bool,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        let rows = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let mut query = jobs::table
                    .filter(jobs::batch_id.eq(id.as_uuid()))
                    .select(JobRow::as_select())
                    .order(jobs::id)
                    .limit(i64::try_from(limit).unwrap_or(i64::MAX))
                    .into_boxed();
                if let Some(after) = after {
                    query = query.filter(jobs::id.gt(after.as_uuid()));
                }
                if let Some(state) = state {
                    query = query.filter(jobs::state.eq(state.as_str()));
                }
                if final_only {
                    query = query.filter(jobs::state.eq_any(FINAL_STATES));
                }
                query.load(conn).boxed()
            })
            .await?;
        rows.into_iter().map(JobRow::into_job).collect()
    }

    async fn end_batch(&self, id: BatchId, end: BatchEnd, at: OffsetDateTime) -> Result<Option<Batch>, StoreError> {
        let row = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                async move {
                    // Only the first end is kept, and none once every item is final; the batch is
                    // read afterwards, as its end left it.
                    let open = batches::ended.is_null().and(batches::unfinished.gt(0));
                    diesel::update(batches::table.find(id.as_uuid()).filter(open))
                        .set((batches::ended.eq(end_name(end)), batches::ended_at.eq(at)))
                        .execute(conn)
                        .await?;
                    batches::table.find(id.as_uuid()).select(BatchRow::as_select()).first(conn).await.optional()
                }
                .boxed()
            })
            .await?;
        row.map(BatchRow::into_batch).transpose()
    }

    async fn batches_past_window(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<BatchId>, StoreError> {
        let ids: Vec<uuid::Uuid> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                batches::table
                    .filter(batches::ended.is_null().and(batches::unfinished.gt(0)).and(batches::expires_at.le(now)))
                    .order(batches::id)
                    .limit(i64::try_from(limit).unwrap_or(i64::MAX))
                    .select(batches::id)
                    .load(conn)
                    .boxed()
            })
            .await?;
        Ok(ids.into_iter().map(BatchId::from_uuid).collect())
    }

    async fn wake_admissible(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<JobId>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<Admissible> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                diesel::sql_query(WAKE_ADMISSIBLE)
                    .bind::<BigInt, _>(limit)
                    .bind::<Timestamptz, _>(now)
                    .load(conn)
                    .boxed()
            })
            .await?;
        Ok(rows.into_iter().map(|row| JobId::from_uuid(row.id)).collect())
    }
}
