//! # genjobs-store-memory
//!
//! The embedded default store: users, keys, jobs, idempotency records and the ledger behind one
//! mutex, so that every port operation is atomic by construction. Nothing survives a restart;
//! deployments that must keep their jobs use the Postgres store.
//!
//! A job's final commit records its client webhook event in the same step (`outbox`), and the
//! final commit of a batch's last item its batch's (`batches`). Usage
//! reports count the live jobs plus a rollup of purged jobs and sealed hours (`usage`).
//! Removed jobs (`removals`) are a set of ids beside the jobs, and the provider key each sent job
//! holds a slot of (`slots`) a map beside them.
//! Uploaded images (`uploads`) sit in the same lock, so that one a job not yet final names is
//! never forgotten under it.
//! The catalog's documents (`catalog`) and the kept secrets (`kept`) sit behind mutexes of
//! their own.
//!
//! Due jobs are kept in a time-ordered index, so that the driver's claim costs O(log n) per job
//! rather than a scan of every job; a job under a driver's lease (`leases`) leaves the index
//! until the lease runs out or ends.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

mod catalog;
mod kept;

use async_trait::async_trait;
use genjobs_domain::catalog::PricePercent;
use genjobs_domain::credits::{BalanceError, Balances, CreditMovement, Credits};
use genjobs_domain::ids::{JobId, KeyPrefix, LeaseId, UserId};
use genjobs_domain::job::{Job, JobState, Transition, UpstreamRef};
use genjobs_domain::keys::KeySettings;
use genjobs_domain::ports::{
    AcceptError, Accepted, Account, AccountError, AccountStore, Commit, Credential, IDEMPOTENCY_RETENTION,
    IdempotencyClaim, JobFilter, JobStore, KeyRecord, LedgerMovement, LedgerRecord, Limits, StoreError, StoredKey,
    UnfinishedJobs, UserChange, UserQuery,
};
use time::{Duration, OffsetDateTime};

mod batches;
mod keys;
mod leases;
mod openai_batches;
mod outbox;
mod reconciliation;
mod removals;
mod slots;
mod uploads;
mod usage;

/// The in-memory store.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    models: catalog::ModelsLock,
    kept: kept::KeptValues,
}

#[derive(Debug, Default)]
struct State {
    users: HashMap<UserId, User>,
    keys: HashMap<KeyPrefix, keys::MemoryKey>,
    jobs: HashMap<JobId, JobRow>,
    jobs_by_user: HashMap<UserId, BTreeSet<JobId>>,
    jobs_by_upstream_key: HashMap<String, JobId>,
    /// Jobs their owner removed from a listing (`removals`).
    removed: HashSet<JobId>,
    idempotency: HashMap<(UserId, String), IdempotencyRecord>,
    idempotency_size_after_last_prune: usize,
    due: BTreeSet<(OffsetDateTime, JobId)>,
    leases: leases::Leases,
    /// Every credit movement, oldest first; a record's sequence is its position plus one.
    ledger: Vec<(UserId, LedgerRecord)>,
    /// What usage reports count besides the live jobs: purged jobs and sealed hours.
    rollup: usage::Rollup,
    /// Client webhook events and users' secrets.
    outbox: outbox::Outbox,
    /// The provider key each sent job holds a slot of (`slots`).
    slots: slots::Slots,
    /// What retention removed of each key's charges (`keys`).
    purged_key_charges: keys::PurgedCharges,
    /// Uploaded images (`uploads`).
    uploads: uploads::Uploads,
    /// Batches and their items (`batches`).
    batches: batches::Batches,
    /// The files and batches of OpenAI's Batch API (`openai_batches`).
    openai: openai_batches::OpenAiBatches,
}

#[derive(Debug, Clone)]
struct User {
    name: String,
    balances: Balances,
    limits: Limits,
    price_percent: PricePercent,
    active_jobs: u32,
    /// The admitted batch items among `active_jobs`, which never refuse a job submitted on its own.
    admitted_batch_items: u32,
    created_at: OffsetDateTime,
}

#[derive(Debug, Clone)]
struct JobRow {
    job: Job,
    lease: Option<LeaseId>,
}

#[derive(Debug, Clone)]
struct IdempotencyRecord {
    fingerprint: String,
    job_id: JobId,
    created_at: OffsetDateTime,
}

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn account(&self, user_id: UserId) -> Option<Account> {
        self.users.get(&user_id).map(|u| Account {
            user_id,
            name: u.name.clone(),
            balances: u.balances,
            limits: u.limits,
            price_percent: u.price_percent,
            active_jobs: u.active_jobs,
            created_at: u.created_at,
        })
    }

    /// Appends a ledger record, in the same step as the movement it records.
    fn record(&mut self, user_id: UserId, job_id: Option<JobId>, movement: LedgerMovement) {
        let sequence = i64::try_from(self.ledger.len()).unwrap_or(i64::MAX - 1) + 1;
        let at = OffsetDateTime::now_utc();
        self.ledger.push((user_id, LedgerRecord { sequence, job_id, movement, at }));
    }

    fn index(&mut self, job: &Job) {
        if let (false, Some(at)) = (job.state().is_final(), job.next_poll_at()) {
            self.due.insert((at, job.id()));
        }
    }

    /// Jobs no lease covers any more: claimable at their next poll time.
    fn free(&mut self, jobs: impl IntoIterator<Item = JobId>) {
        for id in jobs {
            let Some(row) = self.jobs.get_mut(&id) else { continue };
            row.lease = None;
            let job = row.job.clone();
            self.index(&job);
        }
    }

    fn prune_idempotency(&mut self, now: OffsetDateTime) {
        if self.idempotency.len() > 2 * self.idempotency_size_after_last_prune.max(1024) {
            self.idempotency.retain(|_, r| now - r.created_at < IDEMPOTENCY_RETENTION);
            self.idempotency_size_after_last_prune = self.idempotency.len();
        }
    }
}

/// How a job's final movement is recorded; a hold is recorded by the accept.
fn ledger_movement(movement: CreditMovement) -> Option<LedgerMovement> {
    match movement {
        CreditMovement::Hold(_) => None,
        CreditMovement::Settle { held, actual } => Some(LedgerMovement::Settle {
            charged: actual,
            released: Credits::new(held.get().saturating_sub(actual.get())),
        }),
        CreditMovement::Release(held) => Some(LedgerMovement::Release(held)),
    }
}

fn inconsistent(e: BalanceError) -> StoreError {
    StoreError::Internal(e.to_string())
}

#[async_trait]
impl AccountStore for MemoryStore {
    async fn create_user(
        &self,
        user_id: UserId,
        name: String,
        credits: Credits,
        limits: Limits,
        key: StoredKey,
    ) -> Result<Account, AccountError> {
        let mut state = self.state();
        if state.keys.contains_key(&key.prefix) {
            return Err(AccountError::KeyPrefixTaken);
        }
        let balances = Balances { available: credits, ..Balances::default() };
        let user = User {
            name,
            balances,
            limits,
            price_percent: PricePercent::FULL,
            active_jobs: 0,
            admitted_batch_items: 0,
            created_at: OffsetDateTime::now_utc(),
        };
        state.users.insert(user_id, user);
        state.keys.insert(key.prefix.clone(), keys::MemoryKey { stored: key, revoked_at: None, last_used_at: None });
        state.record(user_id, None, LedgerMovement::Grant(i64::try_from(credits.get()).unwrap_or(i64::MAX)));
        state.account(user_id).ok_or(AccountError::UnknownUser)
    }

    async fn add_key(&self, key: StoredKey) -> Result<(), AccountError> {
        let mut state = self.state();
        if !state.users.contains_key(&key.user_id) {
            return Err(AccountError::UnknownUser);
        }
        if state.keys.contains_key(&key.prefix) {
            return Err(AccountError::KeyPrefixTaken);
        }
        state.keys.insert(key.prefix.clone(), keys::MemoryKey { stored: key, revoked_at: None, last_used_at: None });
        Ok(())
    }

    async fn revoke_key(&self, prefix: &KeyPrefix) -> Result<bool, StoreError> {
        let mut state = self.state();
        if state.keys.get(prefix).is_none_or(|key| key.revoked_at.is_some()) {
            return Ok(false);
        }
        let now = OffsetDateTime::now_utc();
        for below in std::iter::once(prefix.clone()).chain(state.descendants(prefix)) {
            if let Some(key) = state.keys.get_mut(&below).filter(|key| key.revoked_at.is_none()) {
                key.revoked_at = Some(now);
            }
        }
        Ok(true)
    }

    async fn record_key_use(&self, prefix: &KeyPrefix, at: OffsetDateTime) -> Result<(), StoreError> {
        if let Some(key) = self.state().keys.get_mut(prefix) {
            key.last_used_at = Some(at);
        }
        Ok(())
    }

    async fn key(&self, prefix: &KeyPrefix) -> Result<Option<KeyRecord>, StoreError> {
        Ok(self.state().keys.get(prefix).map(keys::MemoryKey::record))
    }

    async fn keys_of(&self, user_id: UserId) -> Result<Vec<KeyRecord>, StoreError> {
        let state = self.state();
        let mut records: Vec<KeyRecord> =
            state.keys.values().filter(|key| key.stored.user_id == user_id).map(keys::MemoryKey::record).collect();
        records.sort_by(|a, b| (a.created_at, &a.prefix).cmp(&(b.created_at, &b.prefix)));
        Ok(records)
    }

    async fn set_key_settings(&self, prefix: &KeyPrefix, settings: KeySettings) -> Result<bool, StoreError> {
        let mut state = self.state();
        let Some(key) = state.keys.get_mut(prefix) else { return Ok(false) };
        key.stored.settings = settings;
        Ok(true)
    }

    async fn key_used(&self, prefix: &KeyPrefix, since: Option<OffsetDateTime>) -> Result<Credits, StoreError> {
        Ok(self.state().key_used(prefix, since))
    }

    async fn credentials(&self, prefix: &KeyPrefix) -> Result<Vec<Credential>, StoreError> {
        let state = self.state();
        Ok(state.credential(prefix).into_iter().collect())
    }

    async fn grant(&self, user_id: UserId, amount: i64) -> Result<Account, AccountError> {
        let mut state = self.state();
        let user = state.users.get_mut(&user_id).ok_or(AccountError::UnknownUser)?;
        user.balances = user.balances.grant(amount).map_err(|e| match e {
            BalanceError::GrantTooLarge { amount } => AccountError::GrantTooLarge { amount },
            _ => AccountError::GrantBelowZero { available: user.balances.available, amount },
        })?;
        state.record(user_id, None, LedgerMovement::Grant(amount));
        state.account(user_id).ok_or(AccountError::UnknownUser)
    }

    async fn account(&self, user_id: UserId) -> Result<Option<Account>, StoreError> {
        Ok(self.state().account(user_id))
    }

    async fn change_user(&self, user_id: UserId, change: UserChange) -> Result<Option<Account>, StoreError> {
        let mut state = self.state();
        let Some(user) = state.users.get_mut(&user_id) else { return Ok(None) };
        if let Some(rate) = change.rate_limit_per_minute {
            user.limits.rate_limit_per_minute = rate;
        }
        if let Some(jobs) = change.max_concurrent_jobs {
            user.limits.max_concurrent_jobs = jobs;
        }
        if let Some(percent) = change.price_percent {
            user.price_percent = percent;
        }
        Ok(state.account(user_id))
    }

    async fn users(&self, query: &UserQuery) -> Result<Vec<Account>, StoreError> {
        let state = self.state();
        let q = query.q.as_deref().filter(|q| !q.is_empty());
        let matches = |id: &UserId, user: &User| {
            q.is_none_or(|q| {
                user.name.starts_with(q)
                    || state
                        .keys
                        .values()
                        .any(|key| key.stored.user_id == *id && key.stored.prefix.as_str().starts_with(q))
            })
        };
        let mut ids: Vec<UserId> = state
            .users
            .iter()
            .filter(|(id, user)| query.before.is_none_or(|before| **id < before) && matches(id, user))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        Ok(ids.into_iter().take(query.limit).filter_map(|id| state.account(id)).collect())
    }
}

#[async_trait]
impl JobStore for MemoryStore {
    async fn accept(
        &self,
        job: Job,
        idempotency: Option<IdempotencyClaim>,
        lease: Option<LeaseId>,
        now: OffsetDateTime,
    ) -> Result<Accepted, AcceptError> {
        let mut state = self.state();
        state.prune_idempotency(now);
        if let Some(claim) = &idempotency {
            let slot = (job.user_id(), claim.key.clone());
            if let Some(record) = state.idempotency.get(&slot).filter(|r| now - r.created_at < IDEMPOTENCY_RETENTION) {
                if record.fingerprint != claim.fingerprint {
                    return Err(AcceptError::IdempotencyConflict);
                }
                let original = state
                    .jobs
                    .get(&record.job_id)
                    .map(|row| row.job.clone())
                    .ok_or_else(|| StoreError::Internal("idempotency record without its job".into()))?;
                return Ok(Accepted::Replayed(original));
            }
        }
        let user = state.users.get(&job.user_id()).ok_or(AcceptError::UnknownUser)?;
        let balances = match user.balances.apply(CreditMovement::Hold(job.credits_held())) {
            Ok(b) => b,
            Err(BalanceError::Insufficient { needed, available }) => {
                return Err(AcceptError::InsufficientCredits { needed, available });
            }
            Err(e) => return Err(inconsistent(e).into()),
        };
        state.check_key_budget(&job, now)?;
        if user.active_jobs - user.admitted_batch_items >= user.limits.max_concurrent_jobs {
            return Err(AcceptError::ConcurrencyLimit { limit: user.limits.max_concurrent_jobs });
        }
        state.check_key_concurrency(&job)?;
        let user = state.users.get_mut(&job.user_id()).ok_or(AcceptError::UnknownUser)?;
        user.balances = balances;
        user.active_jobs += 1;
        if let Some(claim) = idempotency {
            state.idempotency.insert(
                (job.user_id(), claim.key),
                IdempotencyRecord { fingerprint: claim.fingerprint, job_id: job.id(), created_at: now },
            );
        }
        state.jobs_by_user.entry(job.user_id()).or_default().insert(job.id());
        match lease {
            Some(lease) => state.leases.put(lease, job.id()),
            None => state.index(&job),
        }
        state.record(job.user_id(), Some(job.id()), LedgerMovement::Hold(job.credits_held()));
        state.jobs.insert(job.id(), JobRow { job: job.clone(), lease });
        Ok(Accepted::Created(job))
    }

    async fn job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        Ok(self.state().jobs.get(&id).map(|row| row.job.clone()))
    }

    async fn jobs_of(&self, user_id: UserId, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError> {
        let state = self.state();
        let Some(ids) = state.jobs_by_user.get(&user_id) else {
            return Ok(Vec::new());
        };
        let older = match before {
            Some(before) => ids.range(..before),
            None => ids.range(..),
        };
        Ok(older.rev().take(limit).filter_map(|id| state.jobs.get(id).map(|row| row.job.clone())).collect())
    }

    /// A scan of every job: the embedded store holds no more jobs than one process keeps.
    async fn find_jobs(&self, filter: &JobFilter, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError> {
        let state = self.state();
        let mut found: Vec<&Job> = state
            .jobs
            .values()
            .map(|row| &row.job)
            .filter(|job| before.is_none_or(|before| job.id() < before) && filter.matches(job))
            .collect();
        found.sort_unstable_by_key(|job| std::cmp::Reverse(job.id()));
        Ok(found.into_iter().take(limit).cloned().collect())
    }

    async fn commit(&self, transition: Transition) -> Result<Commit, StoreError> {
        let mut state = self.state();
        let Some(row) = state.jobs.get(&transition.job().id()).cloned() else {
            return Ok(Commit::Missing);
        };
        if row.job.version() != transition.expected_version() {
            return Ok(Commit::Stale(row.job));
        }
        let (movement, frees_slot, frees_batch_slot, takes_slot) =
            (transition.movement(), transition.frees_slot(), transition.frees_batch_slot(), transition.takes_slot());
        let job = transition.into_job();
        let user =
            state.users.get_mut(&job.user_id()).ok_or_else(|| StoreError::Internal("job without its user".into()))?;
        if takes_slot {
            if user.active_jobs >= user.limits.max_concurrent_jobs {
                return Ok(Commit::OwnerAtLimit(row.job));
            }
            user.active_jobs += 1;
            user.admitted_batch_items += 1;
        }
        if let Some(movement) = movement {
            user.balances = user.balances.apply(movement).map_err(inconsistent)?;
        }
        if frees_slot {
            user.active_jobs = user.active_jobs.saturating_sub(1);
        }
        if frees_batch_slot {
            user.admitted_batch_items = user.admitted_batch_items.saturating_sub(1);
        }
        if let Some(recorded) = movement.and_then(ledger_movement) {
            state.record(job.user_id(), Some(job.id()), recorded);
        }
        if let Some(at) = row.job.next_poll_at() {
            state.due.remove(&(at, row.job.id()));
        }
        if row.lease.is_none() || job.state().is_final() {
            state.index(&job);
        }
        if job.state().is_final()
            && let Some(lease) = row.lease
        {
            state.leases.take_out(lease, job.id());
        }
        let lease = if job.state().is_final() { None } else { row.lease };
        if job.state().is_final() && !row.job.state().is_final() {
            state.outbox.record_final(&job, OffsetDateTime::now_utc());
        }
        // The reference is set once, by the submission: index it then, not on every commit.
        if row.job.upstream().is_none()
            && let Some(key) = job.upstream().map(UpstreamRef::key)
        {
            state.jobs_by_upstream_key.insert(key.to_owned(), job.id());
        }
        state.jobs.insert(job.id(), JobRow { job: job.clone(), lease });
        if job.state().is_final()
            && !row.job.state().is_final()
            && let Some(place) = job.batch()
        {
            state.batch_item_finished(place.batch_id, OffsetDateTime::now_utc());
        }
        Ok(Commit::Applied(job))
    }

    async fn job_by_upstream_key(&self, key: &str) -> Result<Option<Job>, StoreError> {
        let state = self.state();
        Ok(state.jobs_by_upstream_key.get(key).and_then(|id| state.jobs.get(id)).map(|row| row.job.clone()))
    }

    async fn ready(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn count_unfinished(&self) -> Result<UnfinishedJobs, StoreError> {
        let state = self.state();
        let mut counts = UnfinishedJobs::default();
        for row in state.jobs.values() {
            match row.job.state() {
                JobState::Queued => counts.queued += 1,
                JobState::Running => counts.running += 1,
                _ => {}
            }
        }
        Ok(counts)
    }

    async fn start_lease(&self, lease: LeaseId, now: OffsetDateTime, until: OffsetDateTime) -> Result<(), StoreError> {
        let mut state = self.state();
        let forgotten = state.leases.forget_older_than(now - Duration::DAY);
        state.free(forgotten);
        state.leases.start(lease, until);
        Ok(())
    }

    async fn renew_lease(
        &self,
        lease: LeaseId,
        held: Vec<JobId>,
        settled_before: OffsetDateTime,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<Option<Vec<JobId>>, StoreError> {
        let mut state = self.state();
        let Some((strays, not_covered)) = state.leases.renew(lease, &held, now, until) else { return Ok(None) };
        let settled: Vec<JobId> = strays
            .into_iter()
            .filter(|id| state.jobs.get(id).is_some_and(|row| row.job.created_at() < settled_before))
            .collect();
        for id in &settled {
            state.leases.take_out(lease, *id);
        }
        state.free(settled);
        Ok(Some(not_covered))
    }

    async fn end_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        let mut state = self.state();
        let covered = state.leases.end(lease);
        state.free(covered);
        Ok(())
    }

    async fn claim_due(&self, lease: LeaseId, now: OffsetDateTime, limit: usize) -> Result<Vec<Job>, StoreError> {
        let mut state = self.state();
        if !state.leases.lives(lease, now) {
            return Ok(Vec::new());
        }
        let ran_out = state.leases.run_out(now);
        state.free(ran_out);
        let due: Vec<_> = state.due.range(..=(now, JobId::from_uuid(uuid_max()))).take(limit).copied().collect();
        let mut claimed = Vec::with_capacity(due.len());
        for entry in due {
            state.due.remove(&entry);
            if let Some(row) = state.jobs.get_mut(&entry.1) {
                row.lease = Some(lease);
                claimed.push(row.job.clone());
                state.leases.put(lease, entry.1);
            }
        }
        Ok(claimed)
    }
}

fn uuid_max() -> uuid::Uuid {
    uuid::Uuid::max()
}

#[cfg(test)]
mod tests {
    use super::MemoryStore;

    genjobs_store_contract::store_contract_tests!(async { (std::sync::Arc::new(MemoryStore::new()), ()) });
}
