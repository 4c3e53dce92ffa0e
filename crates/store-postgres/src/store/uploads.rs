//! The uploads port over Postgres: table `uploads`, one row per content (its SHA-256), with its
//! bytes when the service has no output store, and `upload_days`, what each user uploaded per
//! UTC day. Neither is read with the jobs, so no listing, read or cache of jobs loads image bytes.
//!
//! The day's quota is one conditional upsert on the user's row of the day: concurrent uploads of
//! one user wait for each other on that row, and each sees the total the previous one left, so
//! that together they never pass the quota. A content is forgotten by a `DELETE` that checks its
//! time again on the row it locked (an upload of the same bytes meanwhile keeps it), and that
//! leaves alone a content a job not yet final names among its image inputs.

use std::collections::HashMap;

use async_trait::async_trait;
use bytes::Bytes;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Date, Text, Timestamptz, Uuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::ports::{RecordUploadsError, StoreError, UploadBatch, UploadStore};
use genjobs_domain::upload::UploadDigest;
use time::OffsetDateTime;

use super::PgStore;
use crate::schema::uploads;

#[derive(QueryableByName)]
struct RecordedRow {
    #[diesel(sql_type = Text)]
    sha256: String,
    #[diesel(sql_type = Bool)]
    held: bool,
}

#[derive(QueryableByName)]
struct DigestRow {
    #[diesel(sql_type = Text)]
    sha256: String,
}

/// Counts the batch against the user's day when it fits, and only then records its contents
/// (each once: `DISTINCT`, as one upsert may not touch a row twice).
const RECORD: &str = "\
WITH counted AS (
    INSERT INTO upload_days (user_id, day, bytes) SELECT $1, $2, $3 WHERE $3 <= $4
    ON CONFLICT (user_id, day) DO UPDATE SET bytes = upload_days.bytes + EXCLUDED.bytes
        WHERE upload_days.bytes + EXCLUDED.bytes <= $4
    RETURNING 1
)
INSERT INTO uploads (sha256, size, keep_until)
SELECT DISTINCT ON (d) d, s, $5 FROM unnest($6::text[], $7::int8[]) AS u(d, s)
WHERE EXISTS (SELECT 1 FROM counted)
ON CONFLICT (sha256) DO UPDATE SET keep_until = GREATEST(uploads.keep_until, EXCLUDED.keep_until)
RETURNING sha256, bytes IS NOT NULL AS held";

/// Forgets contents past their time that no job not yet final names (its links carry the
/// digest), oldest first; rows another sweep holds are skipped.
const REMOVE_EXPIRED: &str = "\
DELETE FROM uploads WHERE sha256 IN (
    SELECT u.sha256 FROM uploads u WHERE u.keep_until < $1
    AND NOT EXISTS (
        SELECT 1 FROM jobs j WHERE j.state IN ('queued', 'running') AND strpos(j.input::text, u.sha256) > 0
    )
    ORDER BY u.keep_until LIMIT $2 FOR UPDATE SKIP LOCKED
) AND keep_until < $1
RETURNING sha256";

fn size(size: u64) -> Result<i64, RecordUploadsError> {
    i64::try_from(size).map_err(|_| RecordUploadsError::QuotaExceeded)
}

#[async_trait]
impl UploadStore for PgStore {
    async fn record(&self, batch: &UploadBatch) -> Result<Vec<bool>, RecordUploadsError> {
        // No row back means a refusal, so an empty batch is answered before asking.
        if batch.uploads.is_empty() {
            return Ok(Vec::new());
        }
        let total = size(batch.uploads.iter().map(|upload| upload.size).sum())?;
        let quota = i64::try_from(batch.quota).unwrap_or(i64::MAX);
        let digests: Vec<String> = batch.uploads.iter().map(|upload| upload.digest.to_string()).collect();
        let sizes = batch.uploads.iter().map(|upload| size(upload.size)).collect::<Result<Vec<_>, _>>()?;
        let rows: Vec<RecordedRow> = self
            .in_session(async |conn: &mut AsyncPgConnection| {
                diesel::sql_query(RECORD)
                    .bind::<Uuid, _>(batch.user_id.as_uuid())
                    .bind::<Date, _>(batch.day)
                    .bind::<BigInt, _>(total)
                    .bind::<BigInt, _>(quota)
                    .bind::<Timestamptz, _>(batch.keep_until)
                    .bind::<Array<Text>, _>(&digests)
                    .bind::<Array<BigInt>, _>(&sizes)
                    .load(conn)
                    .await
            })
            .await?;
        if rows.is_empty() {
            return Err(RecordUploadsError::QuotaExceeded);
        }
        let held: HashMap<String, bool> = rows.into_iter().map(|row| (row.sha256, row.held)).collect();
        Ok(digests.iter().map(|digest| held.get(digest).copied().unwrap_or(false)).collect())
    }

    async fn put_bytes(&self, digest: &UploadDigest, bytes: Bytes) -> Result<(), StoreError> {
        let bytes = bytes.to_vec();
        self.in_session(async |conn: &mut AsyncPgConnection| {
            diesel::update(uploads::table.find(digest.as_str()).filter(uploads::bytes.is_null()))
                .set(uploads::bytes.eq(&bytes))
                .execute(conn)
                .await
        })
        .await
        .map(drop)
    }

    async fn bytes(&self, digest: &UploadDigest) -> Result<Option<Bytes>, StoreError> {
        let digest = digest.to_string();
        let found: Option<Option<Vec<u8>>> = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let digest = digest.clone();
                async move { uploads::table.find(digest).select(uploads::bytes).first(conn).await.optional() }.boxed()
            })
            .await?;
        Ok(found.flatten().map(Bytes::from))
    }

    async fn remove_expired(&self, now: OffsetDateTime, limit: usize) -> Result<Vec<UploadDigest>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let yesterday = now.date().previous_day().unwrap_or(time::Date::MIN);
        let rows: Vec<DigestRow> = self
            .in_session(async |conn: &mut AsyncPgConnection| {
                let rows = diesel::sql_query(REMOVE_EXPIRED)
                    .bind::<Timestamptz, _>(now)
                    .bind::<BigInt, _>(limit)
                    .load(conn)
                    .await?;
                diesel::sql_query("DELETE FROM upload_days WHERE day < $1")
                    .bind::<Date, _>(yesterday)
                    .execute(conn)
                    .await?;
                Ok(rows)
            })
            .await?;
        Ok(rows.into_iter().filter_map(|row| UploadDigest::parse(&row.sha256)).collect())
    }
}
