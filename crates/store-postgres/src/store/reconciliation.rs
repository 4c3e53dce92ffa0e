//! The reconciliation on Postgres: bills per day, provider and provider key, sealed hours from the
//! `usage_key_rollup` rows alone and the others summed over the `jobs_created_at` index; and the
//! jobs billed more units than charged, from the partial index `jobs_units_mismatch`.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Date as SqlDate, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use genjobs_domain::decimal::Decimal;
use genjobs_domain::ids::JobId;
use genjobs_domain::ports::{
    MAX_MISMATCHES, Reconciliation, ReconciliationQuery, ReconciliationRow, StoreError, UnitsMismatch,
};
use time::{Date, Time};

use super::PgStore;
use super::usage::{LIVE_PROVIDER_KEY, live_floor};
use crate::error::from_diesel;

/// The bills of the jobs created in `[$1, $2)`, of the provider `$3` (all when NULL), per day,
/// provider and provider key (public for the benchmarks' `EXPLAIN`); `$4` is the first instant
/// not sealed ([`crate::LIVE_FLOOR`], read before; no earlier than `$1`).
#[must_use]
pub fn reconciliation_statement() -> String {
    format!(
        "SELECT day, provider, nullif(provider_key, '') AS key_hint, sum(billed)::int8 AS jobs,
            sum(provider_units)::int8 AS units, sum(provider_cost)::int8 AS cost
         FROM (
            SELECT (created_at AT TIME ZONE 'UTC')::date AS day, upstream ->> 'provider' AS provider,
                {LIVE_PROVIDER_KEY} AS provider_key, count(*) AS billed,
                sum(provider_units) AS provider_units, sum(provider_cost) AS provider_cost
            FROM jobs
            WHERE created_at >= greatest($1, (SELECT sealed_before FROM usage_sealed))
                AND created_at >= $4 AND created_at < $2 AND provider_cost IS NOT NULL
                AND ($3::text IS NULL OR upstream ->> 'provider' = $3)
            GROUP BY 1, 2, 3
            UNION ALL
            SELECT day, provider, provider_key, billed, provider_units, provider_cost
            FROM usage_key_rollup
            WHERE day >= ($1 AT TIME ZONE 'UTC')::date AND day < ($2 AT TIME ZONE 'UTC')::date AND billed > 0
                AND ($3::text IS NULL OR provider = $3)
         ) billed
         GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 NULLS FIRST"
    )
}

/// The jobs created in `[$1, $2)` of the provider `$3` (all when NULL) billed more units than
/// charged, oldest first, at most `$4`.
pub const MISMATCHES: &str = "
SELECT id, model, units_charged, provider_units FROM jobs
WHERE provider_units > units_charged AND created_at >= $1 AND created_at < $2
    AND ($3::text IS NULL OR upstream ->> 'provider' = $3)
ORDER BY created_at, id LIMIT $4";

#[derive(QueryableByName)]
struct Billed {
    #[diesel(sql_type = SqlDate)]
    day: Date,
    #[diesel(sql_type = Text)]
    provider: String,
    #[diesel(sql_type = Nullable<Text>)]
    key_hint: Option<String>,
    #[diesel(sql_type = BigInt)]
    jobs: i64,
    #[diesel(sql_type = BigInt)]
    units: i64,
    #[diesel(sql_type = BigInt)]
    cost: i64,
}

#[derive(QueryableByName)]
struct Mismatched {
    #[diesel(sql_type = SqlUuid)]
    id: uuid::Uuid,
    #[diesel(sql_type = Text)]
    model: String,
    #[diesel(sql_type = BigInt)]
    units_charged: i64,
    #[diesel(sql_type = BigInt)]
    provider_units: i64,
}

pub(super) async fn reconcile(store: &PgStore, query: ReconciliationQuery) -> Result<Reconciliation, StoreError> {
    let start = query.from.with_time(Time::MIDNIGHT).assume_utc();
    let end = query.to.next_day().unwrap_or(query.to).with_time(Time::MIDNIGHT).assume_utc();
    let mut session = store.session().await?;
    let floor = live_floor(&mut session, start).await.map_err(from_diesel)?;
    let billed: Vec<Billed> = diesel::sql_query(reconciliation_statement())
        .bind::<Timestamptz, _>(start)
        .bind::<Timestamptz, _>(end)
        .bind::<Nullable<Text>, _>(query.provider.clone())
        .bind::<Timestamptz, _>(floor)
        .load(&mut *session)
        .await
        .map_err(from_diesel)?;
    let mismatched: Vec<Mismatched> = diesel::sql_query(MISMATCHES)
        .bind::<Timestamptz, _>(start)
        .bind::<Timestamptz, _>(end)
        .bind::<Nullable<Text>, _>(query.provider)
        .bind::<BigInt, _>(i64::try_from(MAX_MISMATCHES).unwrap_or(i64::MAX))
        .load(&mut *session)
        .await
        .map_err(from_diesel)?;
    session.finish().await?;
    Ok(Reconciliation {
        rows: billed
            .into_iter()
            .map(|row| ReconciliationRow {
                day: row.day,
                provider: row.provider,
                key_hint: row.key_hint,
                jobs: u64::try_from(row.jobs).unwrap_or(0),
                units: Decimal::from_billionths(row.units),
                cost_usd: Decimal::from_billionths(row.cost),
            })
            .collect(),
        mismatches: mismatched
            .into_iter()
            .map(|row| UnitsMismatch {
                job_id: JobId::from_uuid(row.id),
                model: row.model,
                units_charged: Decimal::from_billionths(row.units_charged),
                units_reported: Decimal::from_billionths(row.provider_units),
            })
            .collect(),
    })
}
