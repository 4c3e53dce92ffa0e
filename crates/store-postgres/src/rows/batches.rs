//! A batch as `batches` keeps it, and with the figures its items add up to as the batch reads
//! sum them.

use std::collections::BTreeMap;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Jsonb, Nullable, Text, Timestamptz, Uuid as SqlUuid};
use genjobs_domain::batch::{Batch, BatchCounts, BatchEnd, BatchFigures, BatchView};
use genjobs_domain::ids::{BatchId, KeyPrefix, UserId};
use genjobs_domain::ports::StoreError;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{corrupt, credits, from_jsonb, to_jsonb};
use crate::schema::batches;

/// A row of `batches`.
#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = batches, check_for_backend(diesel::pg::Pg))]
pub(crate) struct BatchRow {
    pub id: Uuid,
    pub user_id: Uuid,
    pub key_prefix: Option<String>,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub webhook_url: Option<String>,
    pub metadata: Value,
    pub ended: Option<String>,
    pub ended_at: Option<OffsetDateTime>,
}

/// How an end is kept in `batches.ended`.
pub(crate) fn end_name(end: BatchEnd) -> &'static str {
    match end {
        BatchEnd::Canceled => "canceled",
        BatchEnd::Expired => "expired",
    }
}

impl BatchRow {
    pub(crate) fn from_batch(batch: &Batch) -> Result<Self, StoreError> {
        Ok(Self {
            id: batch.id.as_uuid(),
            user_id: batch.user_id.as_uuid(),
            key_prefix: batch.key_prefix.as_ref().map(|prefix| prefix.as_str().to_owned()),
            created_at: batch.created_at,
            expires_at: batch.expires_at,
            webhook_url: batch.webhook_url.clone(),
            metadata: to_jsonb(&batch.metadata)?,
            ended: batch.ended.map(|(end, _)| end_name(end).to_owned()),
            ended_at: batch.ended.map(|(_, at)| at),
        })
    }

    pub(crate) fn into_batch(self) -> Result<Batch, StoreError> {
        let ended = match (self.ended.as_deref(), self.ended_at) {
            (None, None) => None,
            (Some("canceled"), Some(at)) => Some((BatchEnd::Canceled, at)),
            (Some("expired"), Some(at)) => Some((BatchEnd::Expired, at)),
            (end, _) => return Err(corrupt("batch end", format!("{end:?} without its time, or unknown"))),
        };
        Ok(Batch {
            id: BatchId::from_uuid(self.id),
            user_id: UserId::from_uuid(self.user_id),
            key_prefix: self.key_prefix.as_deref().map(KeyPrefix::of),
            created_at: self.created_at,
            expires_at: self.expires_at,
            webhook_url: self.webhook_url,
            metadata: from_jsonb::<BTreeMap<String, String>>("batch metadata", self.metadata)?,
            ended,
        })
    }
}

/// A batch and its items' figures, as [`BATCH_VIEWS`] reads them.
#[derive(Debug, QueryableByName)]
pub(crate) struct BatchViewRow {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    user_id: Uuid,
    #[diesel(sql_type = Nullable<Text>)]
    key_prefix: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
    #[diesel(sql_type = Timestamptz)]
    expires_at: OffsetDateTime,
    #[diesel(sql_type = Nullable<Text>)]
    webhook_url: Option<String>,
    #[diesel(sql_type = Jsonb)]
    metadata: Value,
    #[diesel(sql_type = Nullable<Text>)]
    ended: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    ended_at: Option<OffsetDateTime>,
    #[diesel(sql_type = BigInt)]
    total: i64,
    #[diesel(sql_type = BigInt)]
    queued: i64,
    #[diesel(sql_type = BigInt)]
    running: i64,
    #[diesel(sql_type = BigInt)]
    succeeded: i64,
    #[diesel(sql_type = BigInt)]
    failed: i64,
    #[diesel(sql_type = BigInt)]
    canceled: i64,
    #[diesel(sql_type = BigInt)]
    credits_held: i64,
    #[diesel(sql_type = BigInt)]
    credits_spent: i64,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    started_at: Option<OffsetDateTime>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    last_finished_at: Option<OffsetDateTime>,
}

/// Batches with their figures, each summed by one aggregate over the batch's items (on
/// `jobs_batch_id_id`); a statement adds its `WHERE`, order and limit. `state` is the batch's
/// state as [`BatchView::state`] derives it, for a listing to filter on.
pub(crate) const BATCH_VIEWS: &str = "
SELECT * FROM (
    SELECT b.id, b.user_id, b.key_prefix, b.created_at, b.expires_at, b.webhook_url, b.metadata, b.ended,
        b.ended_at, f.total, f.queued, f.running, f.succeeded, f.failed, f.canceled, f.credits_held,
        f.credits_spent, f.started_at, f.last_finished_at,
        CASE WHEN f.queued + f.running > 0 THEN 'in_progress'
            ELSE COALESCE(b.ended, CASE WHEN f.last_finished_at >= b.expires_at THEN 'expired' ELSE 'completed' END)
        END AS state
    FROM batches b CROSS JOIN LATERAL (
        SELECT count(*)::int8 AS total,
            count(*) FILTER (WHERE state = 'queued')::int8 AS queued,
            count(*) FILTER (WHERE state = 'running')::int8 AS running,
            count(*) FILTER (WHERE state = 'succeeded')::int8 AS succeeded,
            count(*) FILTER (WHERE state = 'failed')::int8 AS failed,
            count(*) FILTER (WHERE state = 'canceled')::int8 AS canceled,
            COALESCE(sum(credits_held), 0)::int8 AS credits_held,
            COALESCE(sum(credits_actual), 0)::int8 AS credits_spent,
            min(sent_at) AS started_at,
            max(COALESCE(finished_at, canceled_at)) AS last_finished_at
        FROM jobs WHERE jobs.batch_id = b.id
    ) f
) view";

impl BatchViewRow {
    pub(crate) fn into_view(self) -> Result<BatchView, StoreError> {
        let count = |n: i64| u64::try_from(n).map_err(|e| corrupt("batch count", e));
        let batch = BatchRow {
            id: self.id,
            user_id: self.user_id,
            key_prefix: self.key_prefix,
            created_at: self.created_at,
            expires_at: self.expires_at,
            webhook_url: self.webhook_url,
            metadata: self.metadata,
            ended: self.ended,
            ended_at: self.ended_at,
        }
        .into_batch()?;
        let figures = BatchFigures {
            counts: BatchCounts {
                total: count(self.total)?,
                queued: count(self.queued)?,
                running: count(self.running)?,
                succeeded: count(self.succeeded)?,
                failed: count(self.failed)?,
                canceled: count(self.canceled)?,
            },
            credits_held: credits(self.credits_held)?,
            credits_spent: credits(self.credits_spent)?,
            started_at: self.started_at,
            last_finished_at: self.last_finished_at,
        };
        Ok(BatchView { batch, figures })
    }
}
