//! Keys' settings and what their jobs use: the listing, a change announced on the keys' `NOTIFY`
//! channel as a revocation is (every replica drops its cached credentials at once), and the
//! counts a key's budget and concurrency limit are checked against.
//!
//! A budgeted key's `used` is a counter on its row (`budget_used`, counting since
//! `budget_period_start`), kept by the statements that move credits: an accept raises it (from 0
//! when it counted an earlier period), a job's final commit gives back to it what it releases if
//! the job was counted under the counter's period. A change of the budget derives it once from
//! the jobs ([`key_used`]).

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{KeyPrefix, UserId};
use genjobs_domain::keys::{BudgetPeriod, KeySettings};
use genjobs_domain::ports::{KeyRecord, StoreError};
use time::OffsetDateTime;

use super::PgStore;
use crate::channels::KEYS_CHANNEL;
use crate::error::from_diesel;
use crate::rows::{KeySettingsRow, credits};
use crate::schema::api_keys;

/// How often a process records a key's use at most: its first use at once, then once a minute.
pub(super) const KEY_USE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// A key's columns as its listing reads them.
type KeyColumns = (
    api_keys::prefix,
    api_keys::user_id,
    api_keys::created_at,
    api_keys::revoked_at,
    api_keys::last_used_at,
    api_keys::parent,
);

const KEY_COLUMNS: KeyColumns = (
    api_keys::prefix,
    api_keys::user_id,
    api_keys::created_at,
    api_keys::revoked_at,
    api_keys::last_used_at,
    api_keys::parent,
);

type KeyValues = (String, uuid::Uuid, OffsetDateTime, Option<OffsetDateTime>, Option<OffsetDateTime>, Option<String>);

fn record(
    ((prefix, user_id, created_at, revoked_at, last_used_at, parent), settings): (KeyValues, KeySettingsRow),
) -> Result<KeyRecord, StoreError> {
    Ok(KeyRecord {
        prefix: KeyPrefix::of(&prefix),
        user_id: UserId::from_uuid(user_id),
        settings: settings.into_settings()?,
        parent: parent.as_deref().map(KeyPrefix::of),
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
    keys_used(conn, &[prefix.to_owned()], since).await
}

/// [`key_used`] summed over the keys of `prefixes`.
pub(super) async fn keys_used(
    conn: &mut AsyncPgConnection,
    prefixes: &[String],
    since: Option<OffsetDateTime>,
) -> Result<i64, diesel::result::Error> {
    let sum: Sum = diesel::sql_query(used_by("$1::text[]"))
        .bind::<Array<Text>, _>(prefixes)
        .bind::<Nullable<Timestamptz>, _>(since)
        .get_result(conn)
        .await?;
    Ok(sum.total)
}

/// [`key_used`] summed over every key below the key of `prefix`, in one statement.
pub(super) async fn descendants_used(
    conn: &mut AsyncPgConnection,
    prefix: &str,
    since: Option<OffsetDateTime>,
) -> Result<i64, diesel::result::Error> {
    let sum: Sum = diesel::sql_query(format!("{BELOW} {}", used_by("ARRAY(SELECT prefix FROM below)")))
        .bind::<Text, _>(prefix)
        .bind::<Nullable<Timestamptz>, _>(since)
        .get_result(conn)
        .await?;
    Ok(sum.total)
}

/// The statement summing what the jobs of the keys `keys` (an array) accepted since `$2` hold or
/// were charged, the charges of those retention removed included. An array, even one a subquery
/// fills, is matched with `= ANY` on the `key_prefix` index; `IN` a recursive subquery would be
/// planned as a scan of every job.
fn used_by(keys: &str) -> String {
    format!(
        "SELECT (COALESCE(SUM(CASE WHEN state IN ('queued', 'running') THEN credits_held
                                   WHEN state = 'succeeded' THEN credits_actual ELSE 0 END), 0)
                 + (SELECT COALESCE(SUM(credits), 0) FROM key_purged_charges
                    WHERE key_prefix = ANY({keys}) AND ($2::timestamptz IS NULL OR day >= ($2 AT TIME ZONE 'UTC')::date))
                )::int8 AS total
         FROM jobs WHERE key_prefix = ANY({keys}) AND ($2::timestamptz IS NULL OR created_at >= $2)"
    )
}

/// The keys below the key of `$1`, as the common table `below`.
const BELOW: &str = "WITH RECURSIVE below AS (
        SELECT prefix FROM api_keys WHERE parent = $1
        UNION ALL
        SELECT api_keys.prefix FROM api_keys JOIN below ON api_keys.parent = below.prefix
     )";

#[derive(QueryableByName)]
struct Prefix {
    #[diesel(sql_type = Text)]
    prefix: String,
}

/// The keys above a key, its parent first (`$1` the key's prefix).
const ANCESTORS: &str = "WITH RECURSIVE chain AS (
        SELECT parent, 1 AS depth FROM api_keys WHERE prefix = $1
        UNION ALL
        SELECT api_keys.parent, chain.depth + 1 FROM api_keys JOIN chain ON api_keys.prefix = chain.parent
     )
     SELECT parent AS prefix FROM chain WHERE parent IS NOT NULL ORDER BY depth";

/// Every key below a key, revoked ones included (`$1` the key's prefix).
static DESCENDANTS: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{BELOW} SELECT prefix FROM below ORDER BY prefix"));

/// The prefixes `related` (one of [`ANCESTORS`] and [`DESCENDANTS`]) finds from the key of
/// `prefix`.
async fn related_prefixes(
    conn: &mut AsyncPgConnection,
    related: &str,
    prefix: &str,
) -> Result<Vec<String>, diesel::result::Error> {
    let found: Vec<Prefix> = diesel::sql_query(related).bind::<Text, _>(prefix).load(conn).await?;
    Ok(found.into_iter().map(|row| row.prefix).collect())
}

/// The prefixes of the keys above the key of `prefix`, its parent first.
pub(super) async fn ancestor_prefixes(
    conn: &mut AsyncPgConnection,
    prefix: &str,
) -> Result<Vec<String>, diesel::result::Error> {
    related_prefixes(conn, ANCESTORS, prefix).await
}

/// The prefixes of every key below the key of `prefix`, revoked ones included.
pub(super) async fn descendant_prefixes(
    conn: &mut AsyncPgConnection,
    prefix: &str,
) -> Result<Vec<String>, diesel::result::Error> {
    related_prefixes(conn, &DESCENDANTS, prefix).await
}

/// Announces on the keys' channel that the keys of `prefixes` changed, so that every replica
/// drops their cached credentials when the transaction commits.
pub(super) async fn announce_keys(
    conn: &mut AsyncPgConnection,
    prefixes: &[String],
) -> Result<(), diesel::result::Error> {
    diesel::sql_query("SELECT pg_notify($1, prefix) FROM unnest($2::text[]) AS prefix")
        .bind::<Text, _>(KEYS_CHANNEL)
        .bind::<Array<Text>, _>(prefixes)
        .execute(conn)
        .await
        .map(|_| ())
}

/// The start of a budget's period as the counter keeps it: a `total` budget's (`None`) is the
/// Unix epoch, before every job.
pub(super) fn counter_start(period_start: Option<OffsetDateTime>) -> OffsetDateTime {
    period_start.unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// Sets the counter of the key of `prefix` (locked by the caller) to `used` since `start`, the
/// period a job accepted now is counted under; answers `start`, for the job to record.
pub(super) async fn count_against_budget(
    conn: &mut AsyncPgConnection,
    prefix: &str,
    start: OffsetDateTime,
    used: i64,
) -> Result<OffsetDateTime, diesel::result::Error> {
    diesel::update(api_keys::table.find(prefix))
        .set((api_keys::budget_period_start.eq(Some(start)), api_keys::budget_used.eq(used)))
        .execute(conn)
        .await?;
    Ok(start)
}

/// How many jobs of the key of `prefix` (and, with `with_descendants`, of every key below it)
/// are not yet final, in one statement. Batch items do not count: a key's limit, like its
/// owner's, never lets a batch stop the jobs submitted on their own.
pub(super) async fn subtree_active(
    conn: &mut AsyncPgConnection,
    prefix: &str,
    with_descendants: bool,
) -> Result<i64, diesel::result::Error> {
    let statement = if with_descendants {
        format!(
            "{BELOW} SELECT count(*)::int8 AS total FROM jobs
             WHERE key_prefix = ANY(ARRAY(SELECT prefix FROM below) || $1) AND state IN ('queued', 'running')
               AND batch_id IS NULL"
        )
    } else {
        "SELECT count(*)::int8 AS total FROM jobs
         WHERE key_prefix = $1 AND state IN ('queued', 'running') AND batch_id IS NULL"
            .to_owned()
    };
    let sum: Sum = diesel::sql_query(statement).bind::<Text, _>(prefix).get_result(conn).await?;
    Ok(sum.total)
}

/// The settings of the key of `prefix` and its budget counter (since when, how much), its row
/// locked until the transaction ends, so that accepts on one key check its budget one after the
/// other; `None` when there is no such key.
pub(super) async fn lock_key_settings(
    conn: &mut AsyncPgConnection,
    prefix: &str,
) -> Result<Option<(KeySettingsRow, (Option<OffsetDateTime>, i64))>, diesel::result::Error> {
    api_keys::table
        .find(prefix)
        .select((KeySettingsRow::as_select(), (api_keys::budget_period_start, api_keys::budget_used)))
        .for_no_key_update()
        .first(conn)
        .await
        .optional()
}

/// A key of a chain as [`lock_key_chain`] locked it.
pub(super) struct LockedKey {
    /// Its prefix.
    pub(super) prefix: String,
    /// Its own settings.
    pub(super) settings: KeySettingsRow,
    /// Its budget counter: since when, how much.
    pub(super) counter: (Option<OffsetDateTime>, i64),
    /// Whether any key was made with it (then its budget and limit count their jobs too).
    pub(super) has_children: bool,
}

/// The key of `prefix` and every key above it, each row locked until the transaction ends, the
/// root first; answered the key first. Keys are always locked root first, so that two
/// transactions locking overlapping chains (which share a path from the root) never deadlock.
pub(super) async fn lock_key_chain(
    conn: &mut AsyncPgConnection,
    prefix: &str,
) -> Result<Vec<LockedKey>, diesel::result::Error> {
    let mut chain = ancestor_prefixes(conn, prefix).await?;
    chain.insert(0, prefix.to_owned());
    let mut locked = Vec::with_capacity(chain.len());
    for key in chain.iter().rev() {
        let row: Option<(KeySettingsRow, (Option<OffsetDateTime>, i64), bool)> = api_keys::table
            .find(key)
            .select((
                KeySettingsRow::as_select(),
                (api_keys::budget_period_start, api_keys::budget_used),
                api_keys::has_children,
            ))
            .for_no_key_update()
            .first(conn)
            .await
            .optional()?;
        if let Some((settings, counter, has_children)) = row {
            locked.push(LockedKey { prefix: key.clone(), settings, counter, has_children });
        }
    }
    locked.reverse();
    Ok(locked)
}

/// Tags the jobs not yet final of the key of `prefix` created since `start` as counted under the
/// period that starts then.
async fn tag_jobs(
    conn: &mut AsyncPgConnection,
    prefix: &str,
    start: OffsetDateTime,
) -> Result<usize, diesel::result::Error> {
    diesel::sql_query(
        "UPDATE jobs SET budget_period_start = $2 WHERE key_prefix = $1 AND state IN ('queued', 'running')
           AND created_at >= $2 AND budget_period_start IS DISTINCT FROM $2",
    )
    .bind::<Text, _>(prefix)
    .bind::<Timestamptz, _>(start)
    .execute(conn)
    .await
}

/// Derives the counter of the key of `prefix` from its jobs for the budget period that starts at
/// `start`, and tags its jobs not yet final of that period with it, so that their final commits
/// give back to it. The jobs are tagged before the key is locked and again after (for one
/// accepted in between): a final commit locks its job before the key, and so does this.
async fn derive_counter(
    conn: &mut AsyncPgConnection,
    prefix: &str,
    start: OffsetDateTime,
) -> Result<(), diesel::result::Error> {
    tag_jobs(conn, prefix, start).await?;
    if lock_key_settings(conn, prefix).await?.is_none() {
        return Ok(());
    }
    tag_jobs(conn, prefix, start).await?;
    let used = key_used(conn, prefix, Some(start)).await?;
    count_against_budget(conn, prefix, start, used).await.map(|_| ())
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
        let now = OffsetDateTime::now_utc();
        self.within(async {
            let mut conn = self.conn().await?;
            // One transaction: the counter derived, the settings written and the change announced
            // (at commit) together.
            let changed = conn
                .transaction(async |conn| -> Result<(usize, Vec<String>), diesel::result::Error> {
                    if let Some(budget) = settings.budget {
                        derive_counter(conn, prefix.as_str(), counter_start(budget.period.start(now))).await?;
                    }
                    let changed = diesel::update(api_keys::table.find(prefix.as_str())).set(&row).execute(conn).await?;
                    // The key's descendants' effective settings are narrowed by its: their
                    // cached credentials go too.
                    let mut subtree = vec![prefix.as_str().to_owned()];
                    if changed > 0 {
                        subtree.extend(descendant_prefixes(conn, prefix.as_str()).await?);
                        announce_keys(conn, &subtree).await?;
                    }
                    Ok((changed, subtree))
                })
                .await
                .map_err(from_diesel)?;
            let (changed, subtree) = changed;
            for below in &subtree {
                self.keys.forget(&KeyPrefix::of(below));
            }
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

    /// What the key of `prefix` and the keys below it used since `since`: its counter when
    /// `since` starts the period its budget counts now (0 when the counter counts an earlier one:
    /// nothing was accepted in this one yet), else derived from its jobs; plus its descendants'
    /// jobs.
    pub(super) async fn used_by_key(
        &self,
        prefix: &KeyPrefix,
        since: Option<OffsetDateTime>,
    ) -> Result<Credits, StoreError> {
        let prefix = prefix.as_str().to_owned();
        let start = counter_start(since);
        let used = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let prefix = prefix.clone();
                async move {
                    let counter: Option<(Option<String>, Option<OffsetDateTime>, i64)> = api_keys::table
                        .find(&prefix)
                        .select((api_keys::budget_period, api_keys::budget_period_start, api_keys::budget_used))
                        .first(conn)
                        .await
                        .optional()?;
                    let own = match counter {
                        Some((Some(period), Some(counted_since), used))
                            if BudgetPeriod::parse(&period).is_some_and(|p| counter_start(p.start(start)) == start) =>
                        {
                            if counted_since == start {
                                used
                            } else if counted_since < start {
                                0
                            } else {
                                key_used(conn, &prefix, since).await?
                            }
                        }
                        _ => key_used(conn, &prefix, since).await?,
                    };
                    Ok(own + descendants_used(conn, &prefix, since).await?)
                }
                .boxed()
            })
            .await?;
        credits(used)
    }
}
