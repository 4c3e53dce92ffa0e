//! Keys' settings and what their jobs use: the listing, a change announced on the keys' `NOTIFY`
//! channel as a revocation is (every replica drops its cached credentials at once), and the
//! counts a key's budget and concurrency limit are checked against.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{KeyPrefix, UserId};
use genjobs_domain::keys::KeySettings;
use genjobs_domain::ports::{KeyRecord, StoreError};
use time::OffsetDateTime;

use super::PgStore;
use super::account_store::KEYS_CHANNEL;
use crate::error::from_diesel;
use crate::rows::{KeySettingsRow, credits};
use crate::schema::api_keys;

/// How often a process records a key's use at most: its first use at once, then once a minute.
pub(super) const KEY_USE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// A key's columns as its listing reads them.
type KeyColumns =
    (api_keys::prefix, api_keys::user_id, api_keys::created_at, api_keys::revoked_at, api_keys::last_used_at);

const KEY_COLUMNS: KeyColumns =
    (api_keys::prefix, api_keys::user_id, api_keys::created_at, api_keys::revoked_at, api_keys::last_used_at);

type KeyValues = (String, uuid::Uuid, OffsetDateTime, Option<OffsetDateTime>, Option<OffsetDateTime>);

fn record(
    ((prefix, user_id, created_at, revoked_at, last_used_at), settings): (KeyValues, KeySettingsRow),
) -> Result<KeyRecord, StoreError> {
    Ok(KeyRecord {
        prefix: KeyPrefix::of(&prefix),
        user_id: UserId::from_uuid(user_id),
        settings: settings.into_settings()?,
        created_at,
        revoked_at,
        last_used_at,
    })
}

#[derive(QueryableByName)]
struct Sum {
    #[diesel(sql_type = BigInt)]
    total: i64,
}

/// What the jobs of the key of `prefix` accepted since `since` hold or were charged: a job not
/// yet final counts its hold, a succeeded one its charge, a failed or canceled one nothing; and
/// the charges of those retention removed, kept by the day they were created (a period starts at
/// a day's 00:00 UTC).
pub(super) async fn key_used(
    conn: &mut AsyncPgConnection,
    prefix: &str,
    since: Option<OffsetDateTime>,
) -> Result<i64, diesel::result::Error> {
    let sum: Sum = diesel::sql_query(
        "SELECT (COALESCE(SUM(CASE WHEN state IN ('queued', 'running') THEN credits_held
                                   WHEN state = 'succeeded' THEN credits_actual ELSE 0 END), 0)
                 + (SELECT COALESCE(SUM(credits), 0) FROM key_purged_charges
                    WHERE key_prefix = $1 AND ($2::timestamptz IS NULL OR day >= ($2 AT TIME ZONE 'UTC')::date))
                )::int8 AS total
         FROM jobs WHERE key_prefix = $1 AND ($2::timestamptz IS NULL OR created_at >= $2)",
    )
    .bind::<Text, _>(prefix)
    .bind::<Nullable<Timestamptz>, _>(since)
    .get_result(conn)
    .await?;
    Ok(sum.total)
}

/// How many jobs of the key of `prefix` are not yet final.
pub(super) async fn key_active(conn: &mut AsyncPgConnection, prefix: &str) -> Result<i64, diesel::result::Error> {
    let sum: Sum = diesel::sql_query(
        "SELECT count(*)::int8 AS total FROM jobs WHERE key_prefix = $1 AND state IN ('queued', 'running')",
    )
    .bind::<Text, _>(prefix)
    .get_result(conn)
    .await?;
    Ok(sum.total)
}

/// The settings of the key of `prefix`, its row locked until the transaction ends, so that
/// accepts on one key check its budget one after the other; `None` when there is no such key.
pub(super) async fn lock_key_settings(
    conn: &mut AsyncPgConnection,
    prefix: &str,
) -> Result<Option<KeySettingsRow>, diesel::result::Error> {
    api_keys::table.find(prefix).select(KeySettingsRow::as_select()).for_no_key_update().first(conn).await.optional()
}

impl PgStore {
    pub(super) async fn key_record(&self, prefix: &KeyPrefix) -> Result<Option<KeyRecord>, StoreError> {
        let prefix = prefix.as_str().to_owned();
        let row = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                api_keys::table
                    .find(prefix.clone())
                    .select((KEY_COLUMNS, KeySettingsRow::as_select()))
                    .first(conn)
                    .map(OptionalExtension::optional)
                    .boxed()
            })
            .await?;
        row.map(record).transpose()
    }

    pub(super) async fn key_records(&self, user_id: UserId) -> Result<Vec<KeyRecord>, StoreError> {
        let rows = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                api_keys::table
                    .filter(api_keys::user_id.eq(user_id.as_uuid()))
                    .order((api_keys::created_at, api_keys::prefix))
                    .select((KEY_COLUMNS, KeySettingsRow::as_select()))
                    .load(conn)
                    .boxed()
            })
            .await?;
        rows.into_iter().map(record).collect()
    }

    pub(super) async fn write_key_settings(
        &self,
        prefix: &KeyPrefix,
        settings: &KeySettings,
    ) -> Result<bool, StoreError> {
        let row = KeySettingsRow::of(settings)?;
        self.within(async {
            let mut session = self.session().await?;
            let changed = diesel::update(api_keys::table.find(prefix.as_str()))
                .set(&row)
                .execute(&mut *session)
                .await
                .map_err(from_diesel)?;
            if changed > 0 {
                diesel::sql_query("SELECT pg_notify($1, $2)")
                    .bind::<Text, _>(KEYS_CHANNEL)
                    .bind::<Text, _>(prefix.as_str())
                    .execute(&mut *session)
                    .await
                    .map_err(from_diesel)?;
            }
            session.finish().await?;
            self.keys.forget(prefix);
            Ok(changed > 0)
        })
        .await
    }

    pub(super) async fn record_use(&self, prefix: &KeyPrefix, at: OffsetDateTime) -> Result<(), StoreError> {
        if self.key_uses.get(prefix).is_some() {
            return Ok(());
        }
        self.key_uses.put(prefix.clone(), ());
        let touch = diesel::update(
            api_keys::table
                .find(prefix.as_str())
                .filter(api_keys::last_used_at.is_null().or(api_keys::last_used_at.lt(at))),
        )
        .set(api_keys::last_used_at.eq(Some(at)));
        self.in_session(async |conn| touch.execute(conn).await).await.map(|_| ())
    }

    pub(super) async fn used_by_key(
        &self,
        prefix: &KeyPrefix,
        since: Option<OffsetDateTime>,
    ) -> Result<Credits, StoreError> {
        let prefix = prefix.as_str().to_owned();
        let used = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let prefix = prefix.clone();
                async move { key_used(conn, &prefix, since).await }.boxed()
            })
            .await?;
        credits(used)
    }
}
