//! The usage port: a user's ledger rows newest first (index `ledger_user_id_id`), and jobs
//! counted per day, model, user, provider, key or provider key over a range of creation days:
//! the sealed hours from the rollups alone (`usage_key_rollup` for provider keys, `usage_rollup`
//! for the rest), the jobs created since grouped in SQL over the `jobs_user_id_created_at` or
//! `jobs_created_at` index. Hours are sealed in one transaction that holds the `usage_sealed` row,
//! which a purge shares, so that no job is rolled up twice.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Date as SqlDate, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use genjobs_domain::credits::Credits;
use genjobs_domain::decimal::Decimal;
use genjobs_domain::ids::{JobId, KeyPrefix, UserId};
use genjobs_domain::ports::{
    LedgerMovement, LedgerRecord, Reconciliation, ReconciliationQuery, SealStretch, StoreError, UsageGrouping,
    UsageQuery, UsageRow, UsageStore,
};
use time::{Date, OffsetDateTime, Time};

use super::PgStore;
use crate::error::from_diesel;
use crate::schema::{jobs, ledger};

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
    #[diesel(sql_type = Nullable<SqlDate>)]
    day: Option<Date>,
    #[diesel(sql_type = Nullable<Text>)]
    model: Option<String>,
    #[diesel(sql_type = Nullable<SqlUuid>)]
    user_id: Option<uuid::Uuid>,
    #[diesel(sql_type = Nullable<Text>)]
    provider: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    key_prefix: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    provider_key: Option<String>,
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
    #[diesel(sql_type = BigInt)]
    provider_cost: i64,
    #[diesel(sql_type = BigInt)]
    content_refused: i64,
}

/// The first instant the rollups do not count, as sealed now (public for the benchmarks'
/// `EXPLAIN`).
pub const LIVE_FLOOR: &str = "SELECT sealed_before AS floor FROM usage_sealed";

#[derive(QueryableByName)]
struct Floor {
    /// None while nothing is sealed.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    floor: Option<OffsetDateTime>,
}

/// The first instant of `[start, …)` the rollups do not count, as last sealed: a report binds it
/// as a constant beside its own look at `usage_sealed` (which a day sealed meanwhile moves
/// later), so that the planner sees how few live jobs it reads. Without it the planner estimates
/// a range bounded by a subquery as a third of the table, and plans a parallel scan whose
/// workers cost more than the few rows it finds.
pub(super) async fn live_floor(
    conn: &mut AsyncPgConnection,
    start: OffsetDateTime,
) -> Result<OffsetDateTime, diesel::result::Error> {
    let sealed: Option<Floor> = diesel::sql_query(LIVE_FLOOR).get_result(conn).await.optional()?;
    Ok(sealed.and_then(|sealed| sealed.floor).map_or(start, |floor| floor.max(start)))
}

/// The report's statement (public for the benchmarks' `EXPLAIN`): the group's columns, then the
/// counts over the creation range `[$1, $2)` and, for one user, `user_id = $3` (and, for some of
/// its keys, `key_prefix = ANY($4)`): the rollup (purged jobs and sealed hours), plus the live jobs
/// created since the last seal, grouped over the `jobs_user_id_created_at` or `jobs_created_at` index.
/// The last parameter is the first instant not sealed ([`LIVE_FLOOR`], read before; no earlier
/// than `$1`).
/// Grouped by provider key, the rollup is `usage_key_rollup`, which keeps no key prefix: that
/// report is the operators', never of some keys.
#[must_use]
pub fn usage_statement(group_by: UsageGrouping, one_user: bool, some_keys: bool) -> String {
    let (by_day, by_model, by_user, by_provider, by_key) = match group_by {
        UsageGrouping::Day => (true, false, false, false, false),
        UsageGrouping::Model => (false, true, false, false, false),
        UsageGrouping::User => (false, false, true, false, false),
        UsageGrouping::DayAndModel => (true, true, false, false, false),
        UsageGrouping::Provider => (false, false, false, true, false),
        UsageGrouping::Key => (false, false, false, false, true),
        UsageGrouping::ProviderKey => (false, false, false, false, false),
    };
    let by_provider_key = group_by == UsageGrouping::ProviderKey;
    // Each group column as the live jobs and the rollup give it, or a typed NULL when the report
    // is not grouped by it.
    let column = |grouped: bool, live: &'static str, rolled: &'static str, null: &'static str| {
        if grouped { (live, rolled) } else { (null, null) }
    };
    let (live_day, day) = column(by_day, "(created_at AT TIME ZONE 'UTC')::date", "day", "NULL::date");
    let (live_model, model) = column(by_model, "model", "model", "NULL::text");
    let (live_user, user) = column(by_user, "user_id", "user_id", "NULL::uuid");
    let (live_provider, provider) =
        column(by_provider, "coalesce(upstream ->> 'provider', '')", "provider", "NULL::text");
    let (live_key, key) = column(by_key, "coalesce(key_prefix, '')", "key_prefix", "NULL::text");
    let (live_provider_key, provider_key) = column(by_provider_key, LIVE_PROVIDER_KEY, "provider_key", "NULL::text");
    let rollup = if by_provider_key { "usage_key_rollup" } else { "usage_rollup" };
    let (one, floor) = match (one_user, some_keys) {
        (true, true) => (" AND user_id = $3 AND key_prefix = ANY($4)", "$5"),
        (true, false) => (" AND user_id = $3", "$4"),
        (false, _) => ("", "$3"),
    };
    format!(
        "SELECT day, model, user_id, nullif(provider, '') AS provider, nullif(key_prefix, '') AS key_prefix,
            nullif(provider_key, '') AS provider_key, sum(jobs)::int8 AS jobs,
            sum(succeeded)::int8 AS succeeded, sum(failed)::int8 AS failed, sum(canceled)::int8 AS canceled,
            sum(credits_spent)::int8 AS credits_spent, sum(provider_cost)::int8 AS provider_cost,
            sum(content_refused)::int8 AS content_refused
         FROM (
            SELECT {live_day} AS day, {live_model} AS model, {live_user} AS user_id, {live_provider} AS provider,
                {live_key} AS key_prefix, {live_provider_key} AS provider_key, count(*) AS jobs,
                count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                count(*) FILTER (WHERE state = 'failed') AS failed,
                count(*) FILTER (WHERE state = 'canceled') AS canceled,
                coalesce(sum(credits_actual), 0)::int8 AS credits_spent,
                coalesce(sum(provider_cost), 0)::int8 AS provider_cost,
                count(*) FILTER (WHERE {CONTENT_REFUSED}) AS content_refused
            FROM jobs
            WHERE created_at >= greatest($1, (SELECT sealed_before FROM usage_sealed))
                AND created_at >= {floor} AND created_at < $2{one}
            GROUP BY 1, 2, 3, 4, 5, 6
            UNION ALL
            SELECT {day}, {model}, {user}, {provider}, {key}, {provider_key}, jobs, succeeded, failed, canceled,
                credits_spent, provider_cost, content_refused
            FROM {rollup}
            WHERE day >= ($1 AT TIME ZONE 'UTC')::date AND day < ($2 AT TIME ZONE 'UTC')::date{one}
         ) counted
         GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4 NULLS FIRST, 5 NULLS FIRST, 6 NULLS FIRST"
    )
}

/// A live job's provider key, as the rollup keeps it ('' for none).
pub(crate) const LIVE_PROVIDER_KEY: &str = "coalesce(billing ->> 'key_hint', '')";

/// Whether a job failed `CONTENT_REFUSED`, in the terms of its `state` and `error` columns.
const CONTENT_REFUSED: &str = "state = 'failed' AND error ->> 'code' = 'CONTENT_REFUSED'";

/// What the rollups count of the jobs `counted` yields (`created_at`, `user_id`, `model`,
/// `upstream`, `key_prefix`, `state`, `credits_actual`, `error`, `billing` and the bill's columns):
/// the counted columns of both, after their group's.
fn counted_columns() -> String {
    format!(
        "count(*), count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'failed'),
            count(*) FILTER (WHERE state = 'canceled'), coalesce(sum(credits_actual), 0),
            count(provider_cost), coalesce(sum(provider_units), 0), coalesce(sum(provider_cost), 0),
            count(*) FILTER (WHERE {CONTENT_REFUSED})"
    )
}

/// Adds each counted column of the rollup `r` to what it already holds.
const ADD_COUNTED: &str = "jobs = r.jobs + excluded.jobs, succeeded = r.succeeded + excluded.succeeded,
    failed = r.failed + excluded.failed, canceled = r.canceled + excluded.canceled,
    credits_spent = r.credits_spent + excluded.credits_spent, billed = r.billed + excluded.billed,
    provider_units = r.provider_units + excluded.provider_units,
    provider_cost = r.provider_cost + excluded.provider_cost,
    content_refused = r.content_refused + excluded.content_refused";

/// The `usage_rollup` rows (per day, user, model, provider and key prefix) for the jobs `counted`
/// yields, added to the rows already there.
fn roll_up(counted: &str) -> String {
    format!(
        "INSERT INTO usage_rollup AS r
            (day, user_id, model, provider, key_prefix, jobs, succeeded, failed, canceled,
             credits_spent, billed, provider_units, provider_cost, content_refused)
        SELECT (created_at AT TIME ZONE 'UTC')::date, user_id, model, coalesce(upstream ->> 'provider', ''),
            coalesce(key_prefix, ''), {}
        FROM {counted} GROUP BY 1, 2, 3, 4, 5
        ON CONFLICT (day, user_id, model, provider, key_prefix) DO UPDATE SET {ADD_COUNTED}",
        counted_columns()
    )
}

/// The `usage_key_rollup` rows (per day, user, provider and provider key) for the jobs `counted`
/// yields, added to the rows already there.
fn roll_up_by_provider_key(counted: &str) -> String {
    format!(
        "INSERT INTO usage_key_rollup AS r
            (day, user_id, provider, provider_key, jobs, succeeded, failed, canceled,
             credits_spent, billed, provider_units, provider_cost, content_refused)
        SELECT (created_at AT TIME ZONE 'UTC')::date, user_id, coalesce(upstream ->> 'provider', ''),
            {LIVE_PROVIDER_KEY}, {}
        FROM {counted} GROUP BY 1, 2, 3, 4
        ON CONFLICT (day, user_id, provider, provider_key) DO UPDATE SET {ADD_COUNTED}",
        counted_columns()
    )
}

/// Seals the jobs created in `[$1, $2)`: read once, added to both rollups' rows of their days.
fn seal_statement() -> String {
    format!(
        "WITH sealed_jobs AS (
            SELECT created_at, user_id, model, upstream, key_prefix, state, credits_actual, error, billing,
                provider_units, provider_cost
            FROM jobs
            WHERE created_at >= $1 AND created_at < $2
        ), rolled AS (
            {}
        )
        {}",
        roll_up("sealed_jobs"),
        roll_up_by_provider_key("sealed_jobs")
    )
}

/// The purged jobs that no seal counts yet (`$3`, the first instant not sealed; NULL while
/// nothing is).
const UNSEALED_REMOVED: &str = "removed WHERE $3::timestamptz IS NULL OR created_at >= $3";

/// Removes up to `$2` final jobs that finished before `$1`, oldest first, skipping rows another
/// transaction holds and jobs whose client webhook is still to be delivered; drops their
/// idempotency records and delivered webhook events, adds what usage counted of them to the
/// rollups unless they were created before `$3` (the first instant not sealed: the rollups count
/// them already) and their
/// charges to their keys' purged charges (which budgets count), all in one statement, and announces each removed job so that every replica's job cache drops it. Returns
/// one row per job removed.
fn purge_final_jobs_statement() -> String {
    format!(
        "WITH doomed AS (
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
            RETURNING jobs.id, jobs.user_id, jobs.model, jobs.upstream, jobs.key_prefix, jobs.state, jobs.credits_actual,
                jobs.created_at, jobs.error, jobs.billing, jobs.provider_units, jobs.provider_cost
        ), rolled AS (
            {}
        ), rolled_by_provider_key AS (
            {}
        ), charged AS (
            INSERT INTO key_purged_charges AS c (key_prefix, day, credits)
            SELECT key_prefix, (created_at AT TIME ZONE 'UTC')::date, sum(credits_actual) FROM removed
            WHERE key_prefix IS NOT NULL AND state = 'succeeded' AND credits_actual > 0
            GROUP BY 1, 2
            ON CONFLICT (key_prefix, day) DO UPDATE SET credits = c.credits + excluded.credits
        )
        SELECT removed.id FROM removed
        CROSS JOIN LATERAL (SELECT pg_notify('{}', removed.id::text)) AS announced",
        roll_up(UNSEALED_REMOVED),
        roll_up_by_provider_key(UNSEALED_REMOVED),
        crate::channels::JOB_ROWS_CHANNEL
    )
}

/// Locks the one `usage_sealed` row for the transaction, unless another transaction holds it.
const LOCK_SEALED: &str = "SELECT sealed_before FROM usage_sealed FOR UPDATE SKIP LOCKED";

/// Locks what is sealed against a seal for the transaction (a purge reads it).
const SHARE_SEALED: &str = "SELECT sealed_before FROM usage_sealed FOR SHARE";

/// The oldest job's creation, while nothing is sealed.
const OLDEST_JOB: &str = "SELECT min(created_at) AS at FROM jobs";

/// The creation of the oldest job created in `[$1, $2)` not final yet.
const FIRST_OPEN: &str = "
SELECT min(created_at) AS at FROM jobs
WHERE created_at >= $1 AND created_at < $2 AND state NOT IN ('succeeded', 'failed', 'canceled')";

#[derive(QueryableByName)]
struct Sealed {
    #[diesel(sql_type = Nullable<Timestamptz>)]
    sealed_before: Option<OffsetDateTime>,
}

#[derive(QueryableByName)]
struct Moment {
    #[diesel(sql_type = Nullable<Timestamptz>)]
    at: Option<OffsetDateTime>,
}

#[derive(QueryableByName)]
struct Removed {
    #[diesel(sql_type = SqlUuid)]
    id: uuid::Uuid,
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A ledger row as the reads select it: id, job, kind, amount, released, time.
type LedgerColumns = (i64, Option<uuid::Uuid>, String, i64, i64, OffsetDateTime);

fn ledger_record((sequence, job_id, kind, amount, released, at): LedgerColumns) -> Result<LedgerRecord, StoreError> {
    Ok(LedgerRecord {
        sequence,
        job_id: job_id.map(JobId::from_uuid),
        movement: movement(&kind, amount, released)?,
        at,
    })
}

#[async_trait]
impl UsageStore for PgStore {
    async fn ledger(
        &self,
        user_id: UserId,
        keys: Option<Vec<KeyPrefix>>,
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
        if let Some(keys) = keys {
            let keys: Vec<String> = keys.iter().map(|key| key.as_str().to_owned()).collect();
            let of_keys = jobs::table.filter(jobs::key_prefix.eq_any(keys)).select(jobs::id.nullable());
            query = query.filter(ledger::job_id.eq_any(of_keys));
        }
        let rows: Vec<LedgerColumns> = self.in_session(async |conn| query.load(conn).await).await?;
        rows.into_iter().map(ledger_record).collect()
    }

    async fn job_ledger(&self, id: JobId) -> Result<Vec<LedgerRecord>, StoreError> {
        // Every movement of a job is a hold, a settle or a release. Spelled so, with constants
        // (a plan for any parameter could not use them), the two unique indexes on `job_id` that
        // forbid a second of each answer it, one arm each.
        let query = ledger::table
            .filter(ledger::job_id.eq(id.as_uuid()))
            .filter(diesel::dsl::sql::<diesel::sql_types::Bool>(
                "(ledger.kind = 'hold' OR ledger.kind IN ('settle', 'release'))",
            ))
            .select((ledger::id, ledger::job_id, ledger::kind, ledger::amount, ledger::released, ledger::created_at))
            .order(ledger::id.asc());
        let rows: Vec<LedgerColumns> = self.in_session(async |conn| query.load(conn).await).await?;
        rows.into_iter().map(ledger_record).collect()
    }

    async fn usage(&self, query: UsageQuery) -> Result<Vec<UsageRow>, StoreError> {
        self.within(async {
            let start = query.from.with_time(Time::MIDNIGHT).assume_utc();
            let end = query.to.next_day().unwrap_or(query.to).with_time(Time::MIDNIGHT).assume_utc();
            let keys: Option<Vec<String>> =
                query.keys.as_ref().map(|keys| keys.iter().map(|key| key.as_str().to_owned()).collect());
            if query.group_by == UsageGrouping::ProviderKey && keys.is_some() {
                return Err(StoreError::Internal("usage by provider key is not kept per key prefix".to_owned()));
            }
            let statement = diesel::sql_query(usage_statement(query.group_by, query.user_id.is_some(), keys.is_some()))
                .bind::<Timestamptz, _>(start)
                .bind::<Timestamptz, _>(end);
            let mut session = self.session().await?;
            let floor = live_floor(&mut session, start).await.map_err(from_diesel)?;
            let rows: Vec<Counted> = match (query.user_id, keys) {
                (Some(user), Some(keys)) => {
                    statement
                        .bind::<SqlUuid, _>(user.as_uuid())
                        .bind::<diesel::sql_types::Array<Text>, _>(keys)
                        .bind::<Timestamptz, _>(floor)
                        .load(&mut *session)
                        .await
                }
                (Some(user), None) => {
                    statement.bind::<SqlUuid, _>(user.as_uuid()).bind::<Timestamptz, _>(floor).load(&mut *session).await
                }
                (None, _) => statement.bind::<Timestamptz, _>(floor).load(&mut *session).await,
            }
            .map_err(from_diesel)?;
            session.finish().await?;
            Ok(rows
                .into_iter()
                .map(|row| UsageRow {
                    day: row.day,
                    model: row.model,
                    user_id: row.user_id.map(UserId::from_uuid),
                    provider: row.provider,
                    key: row.key_prefix,
                    provider_key: row.provider_key,
                    jobs: count(row.jobs),
                    succeeded: count(row.succeeded),
                    failed: count(row.failed),
                    canceled: count(row.canceled),
                    credits_spent: count(row.credits_spent),
                    provider_cost_usd: Decimal::from_billionths(row.provider_cost),
                    content_refused: count(row.content_refused),
                })
                .collect())
        })
        .await
    }

    async fn reconciliation(&self, query: ReconciliationQuery) -> Result<Reconciliation, StoreError> {
        self.within(super::reconciliation::reconcile(self, query)).await
    }

    async fn purge_final_jobs(&self, before: OffsetDateTime, limit: usize) -> Result<usize, StoreError> {
        self.within(async {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let mut conn = self.conn().await?;
            let removed = conn
                .transaction(async |conn| -> Result<Vec<Removed>, diesel::result::Error> {
                    // Held until the purge commits, so that no seal counts these jobs meanwhile.
                    let sealed: Sealed = diesel::sql_query(SHARE_SEALED).get_result(conn).await?;
                    diesel::sql_query(purge_final_jobs_statement())
                        .bind::<Timestamptz, _>(before)
                        .bind::<BigInt, _>(limit)
                        .bind::<Nullable<Timestamptz>, _>(sealed.sealed_before)
                        .load(conn)
                        .await
                })
                .await
                .map_err(from_diesel)?;
            for job in &removed {
                self.jobs_cache.forget(&JobId::from_uuid(job.id));
            }
            Ok(removed.len())
        })
        .await
    }

    async fn seal_usage(&self, now: OffsetDateTime) -> Result<Option<OffsetDateTime>, StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            conn.transaction(async |conn| -> Result<Option<OffsetDateTime>, diesel::result::Error> {
                let Some(sealed) = diesel::sql_query(LOCK_SEALED).get_result::<Sealed>(conn).await.optional()? else {
                    return Ok(None);
                };
                let floor = match sealed.sealed_before {
                    Some(floor) => floor,
                    None => match diesel::sql_query(OLDEST_JOB).get_result::<Moment>(conn).await?.at {
                        Some(oldest) => oldest,
                        None => return Ok(None),
                    },
                };
                let Some(ready) = SealStretch::ready(floor, now) else { return Ok(None) };
                let open: Moment = diesel::sql_query(FIRST_OPEN)
                    .bind::<Timestamptz, _>(ready.from)
                    .bind::<Timestamptz, _>(ready.until)
                    .get_result(conn)
                    .await?;
                let Some(stretch) = ready.before_open(open.at) else { return Ok(None) };
                diesel::sql_query(seal_statement())
                    .bind::<Timestamptz, _>(stretch.from)
                    .bind::<Timestamptz, _>(stretch.until)
                    .execute(conn)
                    .await?;
                diesel::sql_query("UPDATE usage_sealed SET sealed_before = $1")
                    .bind::<Timestamptz, _>(stretch.until)
                    .execute(conn)
                    .await?;
                Ok(Some(stretch.until))
            })
            .await
            .map_err(from_diesel)
        })
        .await
    }
}
