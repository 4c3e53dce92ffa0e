//! [`PgStore`]: the job and account ports over Postgres. Every operation that moves credits is one
//! transaction: a conditional update of the account row, the job row, and an append to the ledger,
//! whose unique indexes forbid a second hold or a second final movement for one job.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Integer, Jsonb, Nullable, SmallInt, Text, Timestamptz, Uuid as SqlUuid};
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use genjobs_domain::credits::{CreditMovement, Credits};
use genjobs_domain::ids::{JobId, KeyPrefix, UserId};
use genjobs_domain::job::{Job, Transition};
use genjobs_domain::ports::{
    AcceptError, Accepted, Account, AccountError, AccountStore, Commit, Credential, IDEMPOTENCY_RETENTION,
    IdempotencyClaim, JobStore, Limits, StoreError, StoredKey,
};
use time::OffsetDateTime;

use crate::batch::GroupCommit;
use crate::error::{TxError, from_diesel, from_pool};
use crate::rows::{JobRow, UserRow, amount, key_hash};
use crate::schema::{api_keys, idempotency_keys, jobs, ledger, users};

/// Credentials looked up recently, so that authentication does not cost a round trip on every
/// request. Shared with the event listener, which drops revoked keys as `NOTIFY` announces them.
#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    entries: Mutex<HashMap<KeyPrefix, (Instant, Vec<Credential>)>>,
}

impl KeyCache {
    /// An empty cache trusting entries for `ttl`.
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    fn get(&self, prefix: &KeyPrefix) -> Option<Vec<Credential>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(prefix).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, c)| c.clone())
    }

    fn put(&self, prefix: KeyPrefix, credentials: Vec<Credential>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() > 100_000 {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
        }
        entries.insert(prefix, (Instant::now(), credentials));
    }

    /// Forgets a key, so that its next use asks the database.
    pub fn forget(&self, prefix: &KeyPrefix) {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).remove(prefix);
    }

    /// Forgets every key (after the listener lost notifications while reconnecting).
    pub fn clear(&self) {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

/// Jobs read recently, so that many waiters of one job (streams ticking, long-polls woken)
/// cost one database read per job rather than one each. Local commits refresh it; the event
/// listener evicts a job as soon as another replica announces a new state.
#[derive(Debug)]
pub struct JobCache {
    ttl: Duration,
    entries: Mutex<HashMap<JobId, (Instant, Job)>>,
}

impl JobCache {
    /// An empty cache serving entries for `ttl`; a zero `ttl` caches nothing.
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    fn get(&self, id: JobId) -> Option<Job> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(&id).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, job)| job.clone())
    }

    /// Keeps `job` unless a newer version is already kept: a slow read never overwrites a
    /// commit that finished after it started.
    fn put(&self, job: &Job) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() > 100_000 {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
        }
        match entries.get(&job.id()) {
            Some((at, kept)) if kept.version() > job.version() && at.elapsed() < self.ttl => {}
            _ => {
                entries.insert(job.id(), (Instant::now(), job.clone()));
            }
        }
    }

    /// Evicts a job another replica changed.
    pub fn forget(&self, id: JobId) {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
    }

    /// Evicts everything (after the listener lost notifications while reconnecting).
    pub fn clear(&self) {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

/// The `NOTIFY` channel of revoked key prefixes.
pub const KEYS_CHANNEL: &str = "genjobs_keys";

/// The Postgres store.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool<AsyncPgConnection>,
    relaxed: Pool<AsyncPgConnection>,
    keys: Arc<KeyCache>,
    jobs_cache: Arc<JobCache>,
    durable_group: Arc<GroupCommit>,
    relaxed_group: Arc<GroupCommit>,
}

/// How often an accept races another request with the same idempotency key before giving up.
const ACCEPT_ATTEMPTS: usize = 3;

enum Refusal {
    Accept(AcceptError),
    RetryIdempotency,
}

impl PgStore {
    /// A store over `pool`, caching keys in `keys`, with no job cache and every write durable.
    #[must_use]
    pub fn new(pool: Pool<AsyncPgConnection>, keys: Arc<KeyCache>) -> Self {
        Self {
            relaxed: pool.clone(),
            pool,
            keys,
            jobs_cache: Arc::new(JobCache::new(Duration::ZERO)),
            durable_group: Arc::default(),
            relaxed_group: Arc::default(),
        }
    }

    /// Commits recomputable transitions through `relaxed` (connections with
    /// `synchronous_commit = off`).
    #[must_use]
    pub fn with_relaxed_writes(self, relaxed: Pool<AsyncPgConnection>) -> Self {
        Self { relaxed, ..self }
    }

    /// Serves job reads from `cache`.
    #[must_use]
    pub fn with_job_cache(self, cache: Arc<JobCache>) -> Self {
        Self { jobs_cache: cache, ..self }
    }

    /// The pool, for adapters that share it.
    #[must_use]
    pub fn pool(&self) -> &Pool<AsyncPgConnection> {
        &self.pool
    }

    async fn conn(&self) -> Result<Object<AsyncPgConnection>, StoreError> {
        self.pool.get().await.map_err(from_pool)
    }

    async fn load_job(conn: &mut AsyncPgConnection, id: JobId) -> Result<Option<Job>, StoreError> {
        jobs::table
            .find(id.as_uuid())
            .select(JobRow::as_select())
            .first(conn)
            .await
            .optional()
            .map_err(from_diesel)?
            .map(JobRow::into_job)
            .transpose()
    }

    async fn load_account(conn: &mut AsyncPgConnection, user_id: UserId) -> Result<Option<Account>, StoreError> {
        users::table
            .find(user_id.as_uuid())
            .select(UserRow::as_select())
            .first(conn)
            .await
            .optional()
            .map_err(from_diesel)?
            .map(UserRow::into_account)
            .transpose()
    }

    async fn try_accept(
        &self,
        job: &Job,
        idempotency: Option<&IdempotencyClaim>,
        now: OffsetDateTime,
    ) -> Result<Result<Accepted, Refusal>, StoreError> {
        let mut conn = self.conn().await?;
        let row = JobRow::from_job(job)?;
        let held = amount(job.credits_held())?;
        let user_id = job.user_id().as_uuid();
        let fresh_after = now - IDEMPOTENCY_RETENTION;
        let outcome = conn
            .transaction(async |conn| -> Result<Accepted, TxError<Refusal>> {
                if let Some(claim) = idempotency {
                    let earlier: Option<(String, uuid::Uuid, OffsetDateTime)> = idempotency_keys::table
                        .find((user_id, &claim.key))
                        .select((idempotency_keys::fingerprint, idempotency_keys::job_id, idempotency_keys::created_at))
                        .first(conn)
                        .await
                        .optional()?;
                    if let Some((_, _, created_at)) = earlier.as_ref().filter(|(_, _, at)| *at <= fresh_after) {
                        diesel::delete(
                            idempotency_keys::table
                                .find((user_id, &claim.key))
                                .filter(idempotency_keys::created_at.eq(*created_at)),
                        )
                        .execute(conn)
                        .await?;
                    } else if let Some((fingerprint, job_id, _)) = earlier {
                        if fingerprint != claim.fingerprint {
                            return Err(TxError::Refused(Refusal::Accept(AcceptError::IdempotencyConflict)));
                        }
                        let original = jobs::table.find(job_id).select(JobRow::as_select()).first(conn).await?;
                        let original = original.into_job().map_err(|e| TxError::Refused(Refusal::Accept(e.into())))?;
                        return Ok(Accepted::Replayed(original));
                    }
                }
                let hold = diesel::update(
                    users::table
                        .find(user_id)
                        .filter(users::credits_available.ge(held))
                        .filter(users::active_jobs.lt(users::max_concurrent_jobs)),
                )
                .set((
                    users::credits_available.eq(users::credits_available - held),
                    users::credits_held.eq(users::credits_held + held),
                    users::active_jobs.eq(users::active_jobs + 1),
                ))
                .execute(conn)
                .await?;
                if hold == 0 {
                    let refusal = Self::refusal(conn, job.user_id(), job.credits_held()).await?;
                    return Err(TxError::Refused(Refusal::Accept(refusal)));
                }
                diesel::insert_into(jobs::table).values(&row).execute(conn).await?;
                diesel::insert_into(ledger::table)
                    .values((
                        ledger::user_id.eq(user_id),
                        ledger::job_id.eq(Some(row.id)),
                        ledger::kind.eq("hold"),
                        ledger::amount.eq(held),
                    ))
                    .execute(conn)
                    .await?;
                if let Some(claim) = idempotency {
                    let recorded = diesel::insert_into(idempotency_keys::table)
                        .values((
                            idempotency_keys::user_id.eq(user_id),
                            idempotency_keys::key.eq(&claim.key),
                            idempotency_keys::fingerprint.eq(&claim.fingerprint),
                            idempotency_keys::job_id.eq(row.id),
                            idempotency_keys::created_at.eq(now),
                        ))
                        .on_conflict_do_nothing()
                        .execute(conn)
                        .await?;
                    if recorded == 0 {
                        return Err(TxError::Refused(Refusal::RetryIdempotency));
                    }
                }
                Ok(Accepted::Created(job.clone()))
            })
            .await;
        match outcome {
            Ok(accepted) => Ok(Ok(accepted)),
            Err(TxError::Refused(refusal)) => Ok(Err(refusal)),
            Err(TxError::Db(e)) => Err(from_diesel(e)),
        }
    }

    /// Why a hold was refused, read after the conditional update found no row: the credits
    /// first, then the concurrent-job limit. If neither holds any more (a job finished meanwhile),
    /// the refusal is still reported as the limit that was hit a moment ago.
    async fn refusal(
        conn: &mut AsyncPgConnection,
        user_id: UserId,
        needed: Credits,
    ) -> Result<AcceptError, diesel::result::Error> {
        let account: Option<(i64, i32)> = users::table
            .find(user_id.as_uuid())
            .select((users::credits_available, users::max_concurrent_jobs))
            .first(conn)
            .await
            .optional()?;
        Ok(match account {
            None => AcceptError::UnknownUser,
            Some((available, _)) if available < needed.get() as i64 => AcceptError::InsufficientCredits {
                needed,
                available: Credits::new(u64::try_from(available).unwrap_or(0)),
            },
            Some((_, limit)) => AcceptError::ConcurrencyLimit { limit: u32::try_from(limit).unwrap_or(0) },
        })
    }

    /// Accepts a job without an idempotency key in one statement (so one round trip and one
    /// implicit transaction): the conditional hold on the account row, the job and its ledger
    /// row are written only if the hold matched.
    async fn accept_in_one_statement(&self, job: Job) -> Result<Accepted, AcceptError> {
        let row = JobRow::from_job(&job)?;
        let mut conn = self.conn().await?;
        let inserted = diesel::sql_query(ACCEPT)
            .bind::<SqlUuid, _>(row.id)
            .bind::<SqlUuid, _>(row.user_id)
            .bind::<BigInt, _>(row.credits_held)
            .bind::<Text, _>(&row.model)
            .bind::<Text, _>(&row.modality)
            .bind::<Text, _>(&row.state)
            .bind::<SmallInt, _>(row.progress)
            .bind::<Nullable<Jsonb>, _>(&row.outputs)
            .bind::<Nullable<Jsonb>, _>(&row.error)
            .bind::<Timestamptz, _>(row.created_at)
            .bind::<Nullable<Timestamptz>, _>(row.started_at)
            .bind::<Nullable<Timestamptz>, _>(row.finished_at)
            .bind::<Nullable<Timestamptz>, _>(row.canceled_at)
            .bind::<Nullable<BigInt>, _>(row.credits_actual)
            .bind::<Jsonb, _>(&row.input)
            .bind::<Nullable<Jsonb>, _>(&row.upstream)
            .bind::<Bool, _>(row.submit_attempted)
            .bind::<Nullable<Timestamptz>, _>(row.next_poll_at)
            .bind::<Integer, _>(row.poll_failures)
            .bind::<BigInt, _>(row.version)
            .execute(&mut conn)
            .await
            .map_err(from_diesel)?;
        if inserted == 1 {
            self.jobs_cache.put(&job);
            return Ok(Accepted::Created(job));
        }
        Err(Self::refusal(&mut conn, job.user_id(), job.credits_held()).await.map_err(from_diesel)?)
    }

    fn movement_columns(movement: CreditMovement) -> Result<(&'static str, i64, i64, i64, i64), StoreError> {
        // (ledger kind, ledger amount, released, Δheld, Δspent); Δavailable = released.
        Ok(match movement {
            CreditMovement::Settle { held, actual } => {
                let released =
                    held.checked_sub(actual).ok_or_else(|| StoreError::Internal("settle above hold".into()))?;
                ("settle", amount(actual)?, amount(released)?, amount(held)?, amount(actual)?)
            }
            CreditMovement::Release(held) => ("release", amount(held)?, amount(held)?, amount(held)?, 0),
            CreditMovement::Hold(_) => return Err(StoreError::Internal("a hold is only made by accept".into())),
        })
    }
}

#[async_trait]
impl JobStore for PgStore {
    async fn accept(
        &self,
        job: Job,
        idempotency: Option<IdempotencyClaim>,
        now: OffsetDateTime,
    ) -> Result<Accepted, AcceptError> {
        if idempotency.is_none() {
            return self.accept_in_one_statement(job).await;
        }
        for _ in 0..ACCEPT_ATTEMPTS {
            match self.try_accept(&job, idempotency.as_ref(), now).await? {
                Ok(accepted) => return Ok(accepted),
                Err(Refusal::Accept(refusal)) => return Err(refusal),
                Err(Refusal::RetryIdempotency) => continue,
            }
        }
        Err(StoreError::Internal("idempotency key kept racing".into()).into())
    }

    async fn job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        if let Some(job) = self.jobs_cache.get(id) {
            return Ok(Some(job));
        }
        let job = Self::load_job(&mut *self.conn().await?, id).await?;
        if let Some(job) = &job {
            self.jobs_cache.put(job);
        }
        Ok(job)
    }

    async fn jobs_of(&self, user_id: UserId, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError> {
        let mut query = jobs::table
            .filter(jobs::user_id.eq(user_id.as_uuid()))
            .select(JobRow::as_select())
            .order(jobs::id.desc())
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .into_boxed();
        if let Some(before) = before {
            query = query.filter(jobs::id.lt(before.as_uuid()));
        }
        let rows = query.load(&mut *self.conn().await?).await.map_err(from_diesel)?;
        rows.into_iter().map(JobRow::into_job).collect()
    }

    async fn commit(&self, transition: Transition) -> Result<Commit, StoreError> {
        let row = JobRow::from_job(transition.job())?;
        let expected = i64::try_from(transition.expected_version()).unwrap_or(i64::MAX);
        let frees_slot = transition.frees_slot();
        let movement = transition.movement().map(Self::movement_columns).transpose()?;
        let (job_id, user_id) = (row.id, row.user_id);
        // A change that moves no credits joins a group commit (one statement for every change
        // waiting on the same flush); a recomputable one goes through connections that do not
        // wait for the disk. One that moves credits is a transaction of its own.
        let applied = match movement {
            None if transition.is_recomputable() => self.relaxed_group.commit(&self.relaxed, row, expected).await?,
            None => self.durable_group.commit(&self.pool, row, expected).await?,
            Some((kind, amount, released, held, spent)) => {
                let update =
                    diesel::update(jobs::table.find(job_id).filter(jobs::version.eq(expected))).set(row.update());
                self.conn()
                    .await?
                    .transaction(async |conn| -> Result<bool, diesel::result::Error> {
                        if update.execute(conn).await? == 0 {
                            return Ok(false);
                        }
                        let finished = i32::from(frees_slot);
                        diesel::update(users::table.find(user_id))
                            .set((
                                users::credits_available.eq(users::credits_available + released),
                                users::credits_held.eq(users::credits_held - held),
                                users::credits_spent.eq(users::credits_spent + spent),
                                users::active_jobs.eq(users::active_jobs - finished),
                            ))
                            .execute(conn)
                            .await?;
                        diesel::insert_into(ledger::table)
                            .values((
                                ledger::user_id.eq(user_id),
                                ledger::job_id.eq(Some(job_id)),
                                ledger::kind.eq(kind),
                                ledger::amount.eq(amount),
                                ledger::released.eq(released),
                            ))
                            .execute(conn)
                            .await?;
                        Ok(true)
                    })
                    .await
                    .map_err(from_diesel)?
            }
        };
        let job = transition.into_job();
        if applied {
            self.jobs_cache.put(&job);
            return Ok(Commit::Applied(job));
        }
        Ok(match Self::load_job(&mut *self.conn().await?, job.id()).await? {
            Some(current) => {
                self.jobs_cache.put(&current);
                Commit::Stale(current)
            }
            None => Commit::Missing,
        })
    }

    async fn claim_due(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limit: usize,
    ) -> Result<Vec<Job>, StoreError> {
        let rows: Vec<JobRow> = diesel::sql_query(CLAIM_DUE)
            .bind::<Timestamptz, _>(lease_until)
            .bind::<Timestamptz, _>(now)
            .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
            .load(&mut *self.conn().await?)
            .await
            .map_err(from_diesel)?;
        rows.into_iter().map(JobRow::into_job).collect()
    }

    async fn renew_leases(
        &self,
        jobs: Vec<JobId>,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
    ) -> Result<Vec<JobId>, StoreError> {
        let ids: Vec<uuid::Uuid> = jobs.iter().map(JobId::as_uuid).collect();
        // A lost renewal only lets another driver take a job over early, so it need not wait
        // for the disk.
        let mut conn = self.relaxed.get().await.map_err(from_pool)?;
        let renewed: Vec<uuid::Uuid> = diesel::update(
            jobs::table
                .filter(jobs::id.eq_any(ids))
                .filter(jobs::lease_until.gt(now))
                .filter(jobs::state.eq_any(OPEN_STATES)),
        )
        .set(jobs::lease_until.eq(Some(lease_until)))
        .returning(jobs::id)
        .get_results(&mut conn)
        .await
        .map_err(from_diesel)?;
        Ok(renewed.into_iter().map(JobId::from_uuid).collect())
    }
}

/// Jobs a driver may still hold: not final.
const OPEN_STATES: [&str; 2] = ["queued", "running"];

/// Holds credits on the account row if it has enough and a free slot, then inserts the job and
/// its ledger row only if the hold matched; one statement, so one implicit transaction.
const ACCEPT: &str = "
WITH held AS (
    UPDATE users
    SET credits_available = credits_available - $3, credits_held = credits_held + $3, active_jobs = active_jobs + 1
    WHERE id = $2 AND credits_available >= $3 AND active_jobs < max_concurrent_jobs
    RETURNING id
), job AS (
    INSERT INTO jobs (id, user_id, credits_held, model, modality, state, progress, outputs, error, created_at,
                      started_at, finished_at, canceled_at, credits_actual, input, upstream, submit_attempted,
                      next_poll_at, poll_failures, version)
    SELECT $1, held.id, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20 FROM held
    RETURNING id, user_id
)
INSERT INTO ledger (user_id, job_id, kind, amount) SELECT job.user_id, job.id, 'hold', $3 FROM job";

/// Leases due jobs that no other driver holds; `SKIP LOCKED` lets replicas claim side by side.
const CLAIM_DUE: &str = "
UPDATE jobs SET lease_until = $1
WHERE id IN (
    SELECT id FROM jobs
    WHERE next_poll_at <= $2 AND (lease_until IS NULL OR lease_until < $2)
    ORDER BY next_poll_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
RETURNING *";

fn key_row(key: &StoredKey) -> (uuid::Uuid, Vec<u8>) {
    (key.user_id.as_uuid(), key.hash.as_bytes().to_vec())
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
        let granted = amount(credits_granted)?;
        let (owner, hash) = key_row(&key);
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
                let inserted = diesel::insert_into(api_keys::table)
                    .values((
                        api_keys::prefix.eq(key.prefix.as_str()),
                        api_keys::key_hash.eq(&hash),
                        api_keys::user_id.eq(owner),
                        api_keys::created_at.eq(key.created_at),
                    ))
                    .on_conflict_do_nothing()
                    .execute(conn)
                    .await?;
                if inserted == 0 {
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
        self.keys.forget(&key.prefix);
        Self::load_account(&mut conn, user_id).await?.ok_or(AccountError::UnknownUser)
    }

    async fn add_key(&self, key: StoredKey) -> Result<(), AccountError> {
        let (owner, hash) = key_row(&key);
        let mut conn = self.conn().await?;
        let exists: i64 = users::table.find(owner).count().get_result(&mut conn).await.map_err(from_diesel)?;
        if exists == 0 {
            return Err(AccountError::UnknownUser);
        }
        let inserted = diesel::insert_into(api_keys::table)
            .values((
                api_keys::prefix.eq(key.prefix.as_str()),
                api_keys::key_hash.eq(&hash),
                api_keys::user_id.eq(owner),
                api_keys::created_at.eq(key.created_at),
            ))
            .on_conflict_do_nothing()
            .execute(&mut conn)
            .await
            .map_err(from_diesel)?;
        if inserted == 0 {
            return Err(AccountError::KeyPrefixTaken);
        }
        self.keys.forget(&key.prefix);
        Ok(())
    }

    async fn revoke_key(&self, prefix: &KeyPrefix) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let revoked = diesel::update(api_keys::table.find(prefix.as_str()).filter(api_keys::revoked_at.is_null()))
            .set(api_keys::revoked_at.eq(Some(OffsetDateTime::now_utc())))
            .execute(&mut conn)
            .await
            .map_err(from_diesel)?;
        self.keys.forget(prefix);
        if revoked > 0 {
            diesel::sql_query("SELECT pg_notify($1, $2)")
                .bind::<diesel::sql_types::Text, _>(KEYS_CHANNEL)
                .bind::<diesel::sql_types::Text, _>(prefix.as_str())
                .execute(&mut conn)
                .await
                .map_err(from_diesel)?;
        }
        Ok(revoked > 0)
    }

    async fn credentials(&self, prefix: &KeyPrefix) -> Result<Vec<Credential>, StoreError> {
        if let Some(cached) = self.keys.get(prefix) {
            return Ok(cached);
        }
        let rows: Vec<(Vec<u8>, uuid::Uuid, i32)> = api_keys::table
            .inner_join(users::table)
            .filter(api_keys::prefix.eq(prefix.as_str()))
            .filter(api_keys::revoked_at.is_null())
            .select((api_keys::key_hash, api_keys::user_id, users::rate_limit_per_minute))
            .load(&mut *self.conn().await?)
            .await
            .map_err(from_diesel)?;
        let found = rows
            .into_iter()
            .map(|(hash, user_id, rate)| {
                Ok(Credential {
                    hash: key_hash(&hash)?,
                    user_id: UserId::from_uuid(user_id),
                    rate_limit_per_minute: u32::try_from(rate).unwrap_or(1),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        if !found.is_empty() {
            self.keys.put(prefix.clone(), found.clone());
        }
        Ok(found)
    }

    async fn grant(&self, user_id: UserId, grant: i64) -> Result<Account, AccountError> {
        let mut conn = self.conn().await?;
        let applied = conn
            .transaction(async |conn| -> Result<bool, diesel::result::Error> {
                let updated = diesel::update(
                    users::table.find(user_id.as_uuid()).filter((users::credits_available + grant).ge(0)),
                )
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
                    .values((ledger::user_id.eq(user_id.as_uuid()), ledger::kind.eq("grant"), ledger::amount.eq(grant)))
                    .execute(conn)
                    .await?;
                Ok(true)
            })
            .await
            .map_err(from_diesel)?;
        let account = Self::load_account(&mut conn, user_id).await?.ok_or(AccountError::UnknownUser)?;
        if applied {
            Ok(account)
        } else {
            Err(AccountError::GrantBelowZero { available: account.balances.available, amount: grant })
        }
    }

    async fn account(&self, user_id: UserId) -> Result<Option<Account>, StoreError> {
        Self::load_account(&mut *self.conn().await?, user_id).await
    }
}

/// Sums of the ledger for one user, to check it against the account row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerTotals {
    /// All grants, net.
    pub granted: i64,
    /// All holds.
    pub held: i64,
    /// All charges of settled jobs.
    pub spent: i64,
    /// All credits returned by settles and releases.
    pub released: i64,
}

impl PgStore {
    /// The ledger's sums for a user: `granted - held + released` must equal what is available,
    /// `held - spent - released` what is held, `spent` what is spent.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn ledger_totals(&self, user_id: UserId) -> Result<LedgerTotals, StoreError> {
        let rows: Vec<(String, i64, i64)> = ledger::table
            .filter(ledger::user_id.eq(user_id.as_uuid()))
            .select((ledger::kind, ledger::amount, ledger::released))
            .load(&mut *self.conn().await?)
            .await
            .map_err(from_diesel)?;
        let mut totals = LedgerTotals { granted: 0, held: 0, spent: 0, released: 0 };
        for (kind, amount, released) in rows {
            match kind.as_str() {
                "grant" => totals.granted += amount,
                "hold" => totals.held += amount,
                "settle" => totals.spent += amount,
                _ => {}
            }
            totals.released += released;
        }
        Ok(totals)
    }
}
