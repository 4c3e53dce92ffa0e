//! The usage port: a user's ledger rows newest first (index `ledger_user_id_id`), and jobs
//! counted per day, model or user over a range of creation days, grouped in SQL over the
//! `jobs_user_id_created_at` or `jobs_created_at` index.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{JobId, UserId};
use genjobs_domain::ports::{
    LedgerMovement, LedgerRecord, StoreError, UsageGrouping, UsageQuery, UsageRow, UsageStore,
};
use time::{Date, OffsetDateTime, Time};

use super::PgStore;
use crate::error::from_diesel;
use crate::schema::ledger;

fn credits(amount: i64) -> Result<Credits, StoreError> {
    u64::try_from(amount).map(Credits::new).map_err(|_| StoreError::Internal(format!("negative amount {amount}")))
}

fn movement(kind: &str, amount: i64, released: i64) -> Result<LedgerMovement, StoreError> {
    Ok(match kind {
        "grant" => LedgerMovement::Grant(amount),
        "hold" => LedgerMovement::Hold(credits(amount)?),
        "settle" => LedgerMovement::Settle { charged: credits(amount)?, released: credits(released)? },
        "release" => LedgerMovement::Release(credits(amount)?),
        other => return Err(StoreError::Internal(format!("unknown ledger kind {other}"))),
    })
}

#[derive(QueryableByName)]
struct Counted {
    #[diesel(sql_type = Nullable<diesel::sql_types::Date>)]
    day: Option<Date>,
    #[diesel(sql_type = Nullable<Text>)]
    model: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    user_id: Option<uuid::Uuid>,
    #[diesel(sql_type = BigInt)]
    jobs: i64,
    #[diesel(sql_type = BigInt)]
    succeeded: i64,
    #[diesel(sql_type = BigInt)]
    failed: i64,
    #[diesel(sql_type = BigInt)]
    canceled: i64,
    #[diesel(sql_type = BigInt)]
    credits_spent: i64,
}

/// The report's statement (public for the benchmarks' `EXPLAIN`): the group's columns, then the counts over the creation range
/// `[$1, $2)` and, for one user, `user_id = $3`: the live jobs counted in the group, plus the
/// rollup of jobs retention removed.
#[must_use]
pub fn usage_statement(group_by: UsageGrouping, one_user: bool) -> String {
    let (live, rolled) = match group_by {
        UsageGrouping::Day => (
            "(created_at AT TIME ZONE 'UTC')::date AS day, NULL::text AS model, NULL::uuid AS user_id",
            "day, NULL::text, NULL::uuid",
        ),
        UsageGrouping::Model => ("NULL::date AS day, model, NULL::uuid AS user_id", "NULL::date, model, NULL::uuid"),
        UsageGrouping::User => ("NULL::date AS day, NULL::text AS model, user_id", "NULL::date, NULL::text, user_id"),
        UsageGrouping::DayAndModel => {
            ("(created_at AT TIME ZONE 'UTC')::date AS day, model, NULL::uuid AS user_id", "day, model, NULL::uuid")
        }
    };
    let user = if one_user { " AND user_id = $3" } else { "" };
    format!(
        "SELECT day, model, user_id, sum(jobs)::int8 AS jobs, sum(succeeded)::int8 AS succeeded,
            sum(failed)::int8 AS failed, sum(canceled)::int8 AS canceled,
            sum(credits_spent)::int8 AS credits_spent
         FROM (
            SELECT {live}, count(*) AS jobs,
                count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                count(*) FILTER (WHERE state = 'failed') AS failed,
                count(*) FILTER (WHERE state = 'canceled') AS canceled,
                coalesce(sum(credits_actual), 0)::int8 AS credits_spent
            FROM jobs WHERE created_at >= $1 AND created_at < $2{user}
            GROUP BY 1, 2, 3
            UNION ALL
            SELECT {rolled}, jobs, succeeded, failed, canceled, credits_spent
            FROM usage_rollup
            WHERE day >= ($1 AT TIME ZONE 'UTC')::date AND day < ($2 AT TIME ZONE 'UTC')::date{user}
         ) counted
         GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    )
}

/// Removes up to `$2` final jobs that finished before `$1`, oldest first, skipping rows another
/// transaction holds and jobs whose client webhook is still to be delivered; drops their
/// idempotency records and delivered webhook events, and adds what usage counted of them to the
/// rollup, all in one statement. Returns one row per job removed.
const PURGE_FINAL_JOBS: &str = "
WITH doomed AS (
    SELECT id FROM jobs
    WHERE finished_at < $1 AND NOT EXISTS (
        SELECT 1 FROM client_webhook_events e WHERE e.job_id = jobs.id AND e.next_attempt_at IS NOT NULL
    )
    ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED
), keys AS (
    DELETE FROM idempotency_keys USING doomed WHERE idempotency_keys.job_id = doomed.id
), events AS (
    DELETE FROM client_webhook_events USING doomed WHERE client_webhook_events.job_id = doomed.id
), removed AS (
    DELETE FROM jobs USING doomed WHERE jobs.id = doomed.id
    RETURNING jobs.id, jobs.user_id, jobs.model, jobs.state, jobs.credits_actual, jobs.created_at
), rolled AS (
    INSERT INTO usage_rollup AS r (day, user_id, model, jobs, succeeded, failed, canceled, credits_spent)
    SELECT (created_at AT TIME ZONE 'UTC')::date, user_id, model, count(*),
        count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'failed'),
        count(*) FILTER (WHERE state = 'canceled'), coalesce(sum(credits_actual), 0)
    FROM removed GROUP BY 1, 2, 3
    ON CONFLICT (day, user_id, model) DO UPDATE SET
        jobs = r.jobs + excluded.jobs, succeeded = r.succeeded + excluded.succeeded,
        failed = r.failed + excluded.failed, canceled = r.canceled + excluded.canceled,
        credits_spent = r.credits_spent + excluded.credits_spent
)
SELECT id FROM removed";

#[derive(QueryableByName)]
struct Removed {
    #[diesel(sql_type = SqlUuid)]
    id: uuid::Uuid,
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[async_trait]
impl UsageStore for PgStore {
    async fn ledger(
        &self,
        user_id: UserId,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<LedgerRecord>, StoreError> {
        let mut query = ledger::table
            .filter(ledger::user_id.eq(user_id.as_uuid()))
            .select((ledger::id, ledger::job_id, ledger::kind, ledger::amount, ledger::released, ledger::created_at))
            .order(ledger::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .into_boxed();
        if let Some(before) = before {
            query = query.filter(ledger::id.lt(before));
        }
        let rows: Vec<(i64, Option<uuid::Uuid>, String, i64, i64, OffsetDateTime)> =
            self.in_session(async |conn| query.load(conn).await).await?;
        rows.into_iter()
            .map(|(sequence, job_id, kind, amount, released, at)| {
                Ok(LedgerRecord {
                    sequence,
                    job_id: job_id.map(JobId::from_uuid),
                    movement: movement(&kind, amount, released)?,
                    at,
                })
            })
            .collect()
    }

    async fn usage(&self, query: UsageQuery) -> Result<Vec<UsageRow>, StoreError> {
        let start = query.from.with_time(Time::MIDNIGHT).assume_utc();
        let end = query.to.next_day().unwrap_or(query.to).with_time(Time::MIDNIGHT).assume_utc();
        let statement = diesel::sql_query(usage_statement(query.group_by, query.user_id.is_some()))
            .bind::<Timestamptz, _>(start)
            .bind::<Timestamptz, _>(end);
        let mut session = self.session().await?;
        let rows: Vec<Counted> = match query.user_id {
            Some(user) => statement.bind::<SqlUuid, _>(user.as_uuid()).load(&mut *session).await,
            None => statement.load(&mut *session).await,
        }
        .map_err(from_diesel)?;
        session.finish().await?;
        Ok(rows
            .into_iter()
            .map(|row| UsageRow {
                day: row.day,
                model: row.model,
                user_id: row.user_id.map(UserId::from_uuid),
                jobs: count(row.jobs),
                succeeded: count(row.succeeded),
                failed: count(row.failed),
                canceled: count(row.canceled),
                credits_spent: count(row.credits_spent),
            })
            .collect())
    }

    async fn purge_final_jobs(&self, before: OffsetDateTime, limit: usize) -> Result<usize, StoreError> {
        let purge = diesel::sql_query(PURGE_FINAL_JOBS)
            .bind::<Timestamptz, _>(before)
            .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX));
        let removed: Vec<Removed> = self.in_session(async |conn| purge.load(conn).await).await?;
        for job in &removed {
            self.jobs_cache.forget(&JobId::from_uuid(job.id));
        }
        Ok(removed.len())
    }
}
