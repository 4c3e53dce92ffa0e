//! The provider slots port over Postgres: a job's place is two columns of its row
//! (`slot_provider`, and `slot_key` once it holds a slot; without it the job waits), and a key's
//! jobs in flight are the rows that name it and are not final (the partial index
//! `jobs_slots_in_flight` holds only rows not final). Taking a slot counts, ranks the waiting jobs
//! (the domain's [`fair_order`], written in SQL) and writes in one transaction under an advisory
//! lock per provider, so that two replicas taking slots at once never both see the last free one.

use std::collections::BTreeMap;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
#[cfg(doc)]
use genjobs_domain::capacity::fair_order;
use genjobs_domain::capacity::{ProviderKey, WaitingJobs, free_slots, least_busy};
use genjobs_domain::ids::JobId;
use genjobs_domain::ports::{ProviderSlots, StoreError};

use super::PgStore;
use crate::error::from_diesel;
use crate::schema::jobs;

/// Serialises the takers of one provider's slots across every replica, until the transaction ends.
const LOCK_PROVIDER: &str = "SELECT pg_advisory_xact_lock(hashtextextended('genjobs_slots:' || $1, 0))";

/// The jobs in flight of each key of a provider, read through `jobs_slots_in_flight`.
const IN_FLIGHT: &str = "SELECT slot_key, count(*) AS jobs FROM jobs
    WHERE slot_provider = $1 AND slot_key IS NOT NULL AND state IN ('queued', 'running') GROUP BY slot_key";

/// The fair order of the jobs waiting for provider `$1`, as two CTEs (`busy`, then `waiting` with
/// each job's `low` and `load`): normal jobs before low ones; a user's waiting jobs oldest first,
/// each counting as one more of that user's jobs in flight, and across users the lower count
/// first, the older job on a tie. Written once, so that the wake ([`NEXT_IN_LINE`]) and the take
/// ([`AHEAD`]) never rank apart.
macro_rules! fair_rank {
    () => {
        "busy AS (
            SELECT user_id, count(*) AS jobs FROM jobs
            WHERE slot_provider = $1 AND slot_key IS NOT NULL AND state IN ('queued', 'running')
            GROUP BY user_id
        ), waiting AS (
            SELECT w.id, w.priority = 'low' AS low,
                coalesce(busy.jobs, 0) + row_number() OVER (PARTITION BY w.user_id, w.priority ORDER BY w.id) AS load
            FROM jobs w LEFT JOIN busy ON busy.user_id = w.user_id
            WHERE w.slot_provider = $1 AND w.slot_key IS NULL AND w.state IN ('queued', 'running')
        )"
    };
}

/// How many jobs waiting for provider `$1` come before job `$2` in fair order (`fair_rank!`).
const AHEAD: &str = concat!(
    "WITH ",
    fair_rank!(),
    " SELECT count(*) AS ahead FROM waiting, waiting AS me
    WHERE me.id = $2 AND (waiting.low, waiting.load, waiting.id) < (me.low, me.load, me.id)"
);

/// The jobs waiting for provider `$1` that the free slots of its keys (ids `$2`, caps `$3`, 0 for
/// none) go to, in fair order as [`AHEAD`] ranks them: one read, under no lock.
const NEXT_IN_LINE: &str = concat!(
    "WITH caps AS (
        SELECT * FROM unnest($2::text[], $3::bigint[]) AS key(id, cap)
    ), in_flight AS (
        SELECT slot_key, count(*) AS jobs FROM jobs
        WHERE slot_provider = $1 AND slot_key IS NOT NULL AND state IN ('queued', 'running')
        GROUP BY slot_key
    ), free AS (
        SELECT CASE WHEN bool_or(caps.cap = 0) THEN NULL
            ELSE sum(greatest(caps.cap - coalesce(in_flight.jobs, 0), 0))::bigint END AS slots
        FROM caps LEFT JOIN in_flight ON in_flight.slot_key = caps.id
    ), ",
    fair_rank!(),
    " SELECT id FROM waiting ORDER BY low, load, id LIMIT (SELECT slots FROM free)"
);

/// The jobs waiting for provider `$1`, by priority.
const WAITING: &str = "SELECT count(*) FILTER (WHERE priority = 'normal') AS normal,
        count(*) FILTER (WHERE priority = 'low') AS low
    FROM jobs WHERE slot_provider = $1 AND slot_key IS NULL AND state IN ('queued', 'running')";

#[derive(QueryableByName)]
struct Waiting {
    #[diesel(sql_type = BigInt)]
    normal: i64,
    #[diesel(sql_type = BigInt)]
    low: i64,
}

#[derive(QueryableByName)]
struct Ahead {
    #[diesel(sql_type = BigInt)]
    ahead: i64,
}

#[derive(QueryableByName)]
struct NextInLine {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: uuid::Uuid,
}

#[derive(QueryableByName)]
struct KeyInFlight {
    #[diesel(sql_type = Text)]
    slot_key: String,
    #[diesel(sql_type = BigInt)]
    jobs: i64,
}

async fn in_flight(conn: &mut AsyncPgConnection, provider: &str) -> QueryResult<BTreeMap<String, u64>> {
    let rows: Vec<KeyInFlight> = diesel::sql_query(IN_FLIGHT).bind::<Text, _>(provider).load(conn).await?;
    Ok(rows.into_iter().map(|row| (row.slot_key, u64::try_from(row.jobs).unwrap_or(0))).collect())
}

#[async_trait]
impl ProviderSlots for PgStore {
    async fn take_slot(
        &self,
        job_id: JobId,
        provider: &str,
        keys: &[ProviderKey],
    ) -> Result<Option<String>, StoreError> {
        self.within(async {
            let mut conn = self.conn().await?;
            conn.transaction(async |conn| -> QueryResult<Option<String>> {
                diesel::sql_query(LOCK_PROVIDER).bind::<Text, _>(provider).execute(conn).await?;
                let held: Option<(Option<String>, Option<String>)> = jobs::table
                    .find(job_id.as_uuid())
                    .select((jobs::slot_provider, jobs::slot_key))
                    .first(conn)
                    .await
                    .optional()?;
                if let Some((Some(held_at), Some(key))) = &held
                    && held_at == provider
                {
                    return Ok(Some(key.clone()));
                }
                // A job that waits here already (a re-look) costs no write.
                let waits_here = matches!(&held, Some((Some(waits_at), None)) if waits_at == provider);
                if !waits_here {
                    diesel::update(jobs::table.find(job_id.as_uuid()))
                        .set((jobs::slot_provider.eq(provider), jobs::slot_key.eq(None::<String>)))
                        .execute(conn)
                        .await?;
                }
                let counts = in_flight(conn, provider).await?;
                let per_key: Vec<u64> = keys.iter().map(|key| counts.get(&key.id).copied().unwrap_or(0)).collect();
                let free = free_slots(keys, &per_key);
                if free == 0 {
                    return Ok(None);
                }
                let ahead: Ahead = diesel::sql_query(AHEAD)
                    .bind::<Text, _>(provider)
                    .bind::<diesel::sql_types::Uuid, _>(job_id.as_uuid())
                    .get_result(conn)
                    .await?;
                if u64::try_from(ahead.ahead).unwrap_or(u64::MAX) >= free {
                    return Ok(None);
                }
                let Some(key) = least_busy(keys, &per_key).map(|index| keys[index].id.clone()) else {
                    return Ok(None);
                };
                diesel::update(jobs::table.find(job_id.as_uuid()))
                    .set((jobs::slot_provider.eq(provider), jobs::slot_key.eq(&key)))
                    .execute(conn)
                    .await?;
                Ok(Some(key))
            })
            .await
            .map_err(from_diesel)
        })
        .await
    }

    async fn slot_provider(&self, job_id: JobId) -> Result<Option<String>, StoreError> {
        let provider: Option<Option<String>> = self
            .repeatable(move |conn: &mut AsyncPgConnection| {
                async move {
                    jobs::table
                        .find(job_id.as_uuid())
                        .filter(jobs::state.eq_any(["queued", "running"]))
                        .select(jobs::slot_provider)
                        .first(conn)
                        .await
                        .optional()
                }
                .boxed()
            })
            .await?;
        Ok(provider.flatten())
    }

    async fn release_slot(&self, job_id: JobId) -> Result<(), StoreError> {
        self.repeatable(|conn: &mut AsyncPgConnection| {
            async move {
                diesel::update(jobs::table.find(job_id.as_uuid()))
                    .set((jobs::slot_provider.eq(None::<String>), jobs::slot_key.eq(None::<String>)))
                    .execute(conn)
                    .await
            }
            .boxed()
        })
        .await
        .map(|_| ())
    }

    async fn next_in_line(&self, provider: &str, keys: &[ProviderKey]) -> Result<Vec<JobId>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let provider = provider.to_owned();
        let ids: Vec<String> = keys.iter().map(|key| key.id.clone()).collect();
        let caps: Vec<i64> = keys.iter().map(|key| i64::from(key.max_in_flight)).collect();
        let next: Vec<NextInLine> = self
            .repeatable(move |conn: &mut AsyncPgConnection| {
                let (provider, ids, caps) = (provider.clone(), ids.clone(), caps.clone());
                async move {
                    diesel::sql_query(NEXT_IN_LINE)
                        .bind::<Text, _>(provider)
                        .bind::<Array<Text>, _>(ids)
                        .bind::<Array<BigInt>, _>(caps)
                        .load(conn)
                        .await
                }
                .boxed()
            })
            .await?;
        Ok(next.into_iter().map(|row| JobId::from_uuid(row.id)).collect())
    }

    async fn slots_waiting(&self, provider: &str) -> Result<WaitingJobs, StoreError> {
        let provider = provider.to_owned();
        let waiting: Waiting = self
            .repeatable(move |conn: &mut AsyncPgConnection| {
                let provider = provider.clone();
                async move { diesel::sql_query(WAITING).bind::<Text, _>(provider).get_result(conn).await }.boxed()
            })
            .await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(WaitingJobs { normal: count(waiting.normal), low: count(waiting.low) })
    }

    async fn slots_in_flight(&self, provider: &str) -> Result<BTreeMap<String, u64>, StoreError> {
        let provider = provider.to_owned();
        self.repeatable(move |conn: &mut AsyncPgConnection| {
            let provider = provider.clone();
            async move { in_flight(conn, &provider).await }.boxed()
        })
        .await
    }
}
