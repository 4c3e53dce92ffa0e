//! The account port over Postgres: users with their opening grant, keys (only prefix and hash are
//! stored; a revocation is announced with `NOTIFY`), grants and balances.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures_util::FutureExt;
use genjobs_domain::credits::Credits;
use genjobs_domain::ids::{KeyPrefix, UserId};
use genjobs_domain::keys::{AncestorKey, KeyLineage, KeySettings};
use genjobs_domain::ports::{
    Account, AccountError, AccountStore, Credential, KeyRecord, Limits, StoreError, StoredKey, UserChange, UserQuery,
};
use time::OffsetDateTime;

use super::PgStore;
use super::keys::{ancestor_prefixes, announce_keys, descendant_prefixes};
use crate::error::from_diesel;
use crate::rows::{KeySettingsRow, UserRow, amount, key_hash, price_percent};
use crate::schema::{api_keys, ledger, users};

/// A key's credentials as read: hash, owner, the owner's rate limit and tier, the key's own
/// settings, its parent and whether it has children.
type KeyRow = (Vec<u8>, uuid::Uuid, i32, i32, KeySettingsRow, Option<String>, bool);

/// An ancestor as read: its prefix, when it was revoked, its own settings.
type AncestorRow = (String, Option<OffsetDateTime>, KeySettingsRow);

/// Stores a key's prefix and hash; 0 rows when the prefix is taken.
async fn insert_key(
    conn: &mut AsyncPgConnection,
    key: &StoredKey,
    settings: KeySettingsRow,
) -> Result<usize, diesel::result::Error> {
    diesel::insert_into(api_keys::table)
        .values((
            api_keys::prefix.eq(key.prefix.as_str()),
            api_keys::key_hash.eq(key.hash.as_bytes().to_vec()),
            api_keys::user_id.eq(key.user_id.as_uuid()),
            api_keys::created_at.eq(key.created_at),
            api_keys::parent.eq(key.parent.as_ref().map(KeyPrefix::as_str)),
            settings,
        ))
        .on_conflict_do_nothing()
        .execute(conn)
        .await
}

#[async_trait]
impl AccountStore for PgStore {
    async fn create_user(
        &self,
        user_id: UserId,
        name: String,
        credits_granted: Credits,
        limits: Limits,
        key: StoredKey,
    ) -> Result<Account, AccountError> {
        self.within(async {
            let granted = amount(credits_granted)?;
            let settings = KeySettingsRow::of(&key.settings)?;
            let to_i32 = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
            let mut conn = self.conn().await?;
            let created = conn
                .transaction(async |conn| -> Result<bool, diesel::result::Error> {
                    diesel::insert_into(users::table)
                        .values((
                            users::id.eq(user_id.as_uuid()),
                            users::name.eq(&name),
                            users::credits_available.eq(granted),
                            users::credits_held.eq(0),
                            users::credits_spent.eq(0),
                            users::credits_granted.eq(granted),
                            users::rate_limit_per_minute.eq(to_i32(limits.rate_limit_per_minute)),
                            users::max_concurrent_jobs.eq(to_i32(limits.max_concurrent_jobs)),
                            users::active_jobs.eq(0),
                        ))
                        .execute(conn)
                        .await?;
                    diesel::insert_into(ledger::table)
                        .values((
                            ledger::user_id.eq(user_id.as_uuid()),
                            ledger::kind.eq("grant"),
                            ledger::amount.eq(granted),
                        ))
                        .execute(conn)
                        .await?;
                    if insert_key(conn, &key, settings).await? == 0 {
                        return Err(diesel::result::Error::RollbackTransaction);
                    }
                    Ok(true)
                })
                .await;
            match created {
                Ok(_) => {}
                Err(diesel::result::Error::RollbackTransaction) => return Err(AccountError::KeyPrefixTaken),
                Err(e) => return Err(from_diesel(e).into()),
            }
            drop(conn);
            self.keys.forget(&key.prefix);
            self.account(user_id).await?.ok_or(AccountError::UnknownUser)
        })
        .await
    }

    async fn add_key(&self, key: StoredKey) -> Result<(), AccountError> {
        self.within(async {
            let owner = key.user_id.as_uuid();
            let settings = KeySettingsRow::of(&key.settings)?;
            let mut session = self.session().await?;
            let exists: i64 = users::table.find(owner).count().get_result(&mut *session).await.map_err(from_diesel)?;
            if exists == 0 {
                return Err(AccountError::UnknownUser);
            }
            if insert_key(&mut session, &key, settings).await.map_err(from_diesel)? == 0 {
                return Err(AccountError::KeyPrefixTaken);
            }
            // The ancestors' subtrees grow: their cached credentials list their descendants, and
            // an accept on the parent counts its children's jobs from now on.
            let mut ancestors = Vec::new();
            if let Some(parent) = &key.parent {
                diesel::update(api_keys::table.find(parent.as_str()))
                    .set(api_keys::has_children.eq(true))
                    .execute(&mut *session)
                    .await
                    .map_err(from_diesel)?;
                ancestors = ancestor_prefixes(&mut session, key.prefix.as_str()).await.map_err(from_diesel)?;
                announce_keys(&mut session, &ancestors).await.map_err(from_diesel)?;
            }
            session.finish().await?;
            self.keys.forget(&key.prefix);
            for ancestor in &ancestors {
                self.keys.forget(&KeyPrefix::of(ancestor));
            }
            Ok(())
        })
        .await
    }

    async fn revoke_key(&self, prefix: &KeyPrefix) -> Result<bool, StoreError> {
        self.within(async {
            let now = OffsetDateTime::now_utc();
            let mut session = self.session().await?;
            let revoked = diesel::update(api_keys::table.find(prefix.as_str()).filter(api_keys::revoked_at.is_null()))
                .set(api_keys::revoked_at.eq(Some(now)))
                .execute(&mut *session)
                .await
                .map_err(from_diesel)?;
            let mut subtree = vec![prefix.as_str().to_owned()];
            if revoked > 0 {
                subtree.extend(descendant_prefixes(&mut session, prefix.as_str()).await.map_err(from_diesel)?);
                diesel::update(api_keys::table.filter(api_keys::prefix.eq_any(&subtree[1..])))
                    .filter(api_keys::revoked_at.is_null())
                    .set(api_keys::revoked_at.eq(Some(now)))
                    .execute(&mut *session)
                    .await
                    .map_err(from_diesel)?;
                announce_keys(&mut session, &subtree).await.map_err(from_diesel)?;
            }
            session.finish().await?;
            for below in &subtree {
                self.keys.forget(&KeyPrefix::of(below));
            }
            Ok(revoked > 0)
        })
        .await
    }

    async fn key(&self, prefix: &KeyPrefix) -> Result<Option<KeyRecord>, StoreError> {
        self.key_record(prefix).await
    }

    async fn keys_of(&self, user_id: UserId) -> Result<Vec<KeyRecord>, StoreError> {
        self.key_records(user_id).await
    }

    async fn record_key_use(&self, prefix: &KeyPrefix, at: OffsetDateTime) -> Result<(), StoreError> {
        self.record_use(prefix, at).await
    }

    async fn set_key_settings(&self, prefix: &KeyPrefix, settings: KeySettings) -> Result<bool, StoreError> {
        self.write_key_settings(prefix, &settings).await
    }

    async fn key_used(&self, prefix: &KeyPrefix, since: Option<OffsetDateTime>) -> Result<Credits, StoreError> {
        self.used_by_key(prefix, since).await
    }

    async fn credentials(&self, prefix: &KeyPrefix) -> Result<Vec<Credential>, StoreError> {
        if let Some(cached) = self.keys.get(prefix) {
            return Ok(cached);
        }
        // Boxed on its own, as `JobStore::job`'s read: every request looks its key up here.
        Box::pin(self.read_credentials(prefix)).await
    }

    async fn grant(&self, user_id: UserId, grant: i64) -> Result<Account, AccountError> {
        self.within(async {
            let mut conn = self.conn().await?;
            let applied = conn
                .transaction(async |conn| -> Result<bool, diesel::result::Error> {
                    // Bounds written so that Postgres never computes past the bigint range: a grant
                    // keeps the total within i64::MAX, a negative one keeps `available` at 0 or more.
                    let fits = users::table
                        .find(user_id.as_uuid())
                        .filter(users::credits_granted.le(i64::MAX.saturating_sub(grant.max(0))))
                        .filter(users::credits_available.ge(grant.saturating_neg().max(0)));
                    let updated = diesel::update(fits)
                        .set((
                            users::credits_available.eq(users::credits_available + grant),
                            users::credits_granted.eq(users::credits_granted + grant),
                        ))
                        .execute(conn)
                        .await?;
                    if updated == 0 {
                        return Ok(false);
                    }
                    diesel::insert_into(ledger::table)
                        .values((
                            ledger::user_id.eq(user_id.as_uuid()),
                            ledger::kind.eq("grant"),
                            ledger::amount.eq(grant),
                        ))
                        .execute(conn)
                        .await?;
                    Ok(true)
                })
                .await
                .map_err(from_diesel)?;
            drop(conn);
            let account = self.account(user_id).await?.ok_or(AccountError::UnknownUser)?;
            match (applied, grant >= 0) {
                (true, _) => Ok(account),
                (false, true) => Err(AccountError::GrantTooLarge { amount: grant }),
                (false, false) => {
                    Err(AccountError::GrantBelowZero { available: account.balances.available, amount: grant })
                }
            }
        })
        .await
    }

    async fn change_user(&self, user_id: UserId, change: UserChange) -> Result<Option<Account>, StoreError> {
        self.change_user_row(user_id, change).await
    }

    async fn users(&self, query: &UserQuery) -> Result<Vec<Account>, StoreError> {
        self.user_rows(query).await
    }

    async fn account(&self, user_id: UserId) -> Result<Option<Account>, StoreError> {
        let row = self.repeatable(|conn: &mut AsyncPgConnection| Self::user_row(conn, user_id)).await?;
        row.map(UserRow::into_account).transpose()
    }
}

impl PgStore {
    /// The credentials of the keys with `prefix` as the database has them, kept in the cache
    /// unless a change was announced meanwhile.
    async fn read_credentials(&self, prefix: &KeyPrefix) -> Result<Vec<Credential>, StoreError> {
        let generation = self.keys.generation();
        let read = self
            .repeatable(|conn: &mut AsyncPgConnection| {
                let prefix = prefix.as_str().to_owned();
                async move {
                    let key: Option<KeyRow> = api_keys::table
                        .inner_join(users::table)
                        .filter(api_keys::prefix.eq(&prefix))
                        .filter(api_keys::revoked_at.is_null())
                        .select((
                            api_keys::key_hash,
                            api_keys::user_id,
                            users::rate_limit_per_minute,
                            users::price_percent,
                            KeySettingsRow::as_select(),
                            api_keys::parent,
                            api_keys::has_children,
                        ))
                        .first(conn)
                        .await
                        .optional()?;
                    let Some(key) = key else { return Ok(None) };
                    let ancestors = match key.5 {
                        Some(_) => {
                            let chain = ancestor_prefixes(conn, &prefix).await?;
                            let mut rows: Vec<AncestorRow> = api_keys::table
                                .filter(api_keys::prefix.eq_any(&chain))
                                .select((api_keys::prefix, api_keys::revoked_at, KeySettingsRow::as_select()))
                                .load(conn)
                                .await?;
                            rows.sort_by_key(|row| chain.iter().position(|p| *p == row.0));
                            rows
                        }
                        None => Vec::new(),
                    };
                    let descendants = if key.6 { descendant_prefixes(conn, &prefix).await? } else { Vec::new() };
                    Ok(Some((key, ancestors, descendants)))
                }
                .boxed()
            })
            .await?;
        let found = match read {
            None => Vec::new(),
            Some(((hash, user_id, rate, tier, settings, _, _), ancestors, descendants)) => {
                let own = settings.into_settings()?;
                let mut effective = own.clone();
                let mut chain = Vec::new();
                for (ancestor, revoked_at, settings) in ancestors {
                    if revoked_at.is_some() {
                        return self.keep_credentials(generation, prefix, Vec::new());
                    }
                    let settings = settings.into_settings()?;
                    chain.push(AncestorKey {
                        prefix: KeyPrefix::of(&ancestor),
                        rate_limit_per_minute: settings.rate_limit_per_minute,
                        limits_jobs: settings.limits_jobs(),
                    });
                    effective = effective.narrowed_by(&settings);
                }
                vec![Credential {
                    hash: key_hash(&hash)?,
                    prefix: prefix.clone(),
                    user_id: UserId::from_uuid(user_id),
                    rate_limit_per_minute: u32::try_from(rate).unwrap_or(1),
                    price_percent: price_percent(tier)?,
                    own_rate_limit_per_minute: own.rate_limit_per_minute,
                    settings: effective,
                    lineage: KeyLineage {
                        ancestors: chain,
                        descendants: descendants.iter().map(|p| KeyPrefix::of(p)).collect(),
                    },
                }]
            }
        };
        self.keep_credentials(generation, prefix, found)
    }

    /// Keeps `found` as the credentials of `prefix` unless a change was announced since
    /// `generation`, and answers them.
    fn keep_credentials(
        &self,
        generation: u64,
        prefix: &KeyPrefix,
        found: Vec<Credential>,
    ) -> Result<Vec<Credential>, StoreError> {
        self.keys.put_if_current(generation, prefix.clone(), found.clone());
        Ok(found)
    }
}
