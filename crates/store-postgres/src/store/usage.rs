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

/// The report's statement: the group's columns, then the counts over the creation range
/// `[$1, $2)` and, for one user, `user_id = $3`.
fn usage_sql(group_by: UsageGrouping, one_user: bool) -> String {
    let group = match group_by {
        UsageGrouping::Day => {
            "(created_at AT TIME ZONE 'UTC')::date AS day, NULL::text AS model, NULL::uuid AS user_id"
        }
        UsageGrouping::Model => "NULL::date AS day, model, NULL::uuid AS user_id",
        UsageGrouping::User => "NULL::date AS day, NULL::text AS model, user_id",
    };
    let user = if one_user { " AND user_id = $3" } else { "" };
    format!(
        "SELECT {group}, count(*) AS jobs,
            count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
            count(*) FILTER (WHERE state = 'failed') AS failed,
            count(*) FILTER (WHERE state = 'canceled') AS canceled,
            coalesce(sum(credits_actual), 0)::int8 AS credits_spent
         FROM jobs WHERE created_at >= $1 AND created_at < $2{user}
         GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    )
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
            query.load(&mut *self.conn().await?).await.map_err(from_diesel)?;
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
        let statement = diesel::sql_query(usage_sql(query.group_by, query.user_id.is_some()))
            .bind::<Timestamptz, _>(start)
            .bind::<Timestamptz, _>(end);
        let mut conn = self.conn().await?;
        let rows: Vec<Counted> = match query.user_id {
            Some(user) => statement.bind::<SqlUuid, _>(user.as_uuid()).load(&mut *conn).await,
            None => statement.load(&mut *conn).await,
        }
        .map_err(from_diesel)?;
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
}
