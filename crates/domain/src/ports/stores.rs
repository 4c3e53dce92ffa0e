//! The store ports: jobs (with their credit movements) and accounts.

use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::catalog::PricePercent;
use crate::credits::{Balances, Credits};
use crate::ids::{ApiKey, JobId, KeyHash, KeyPrefix, LeaseId, ModelId, UserId};
use crate::job::{Job, JobState, Transition};
use crate::keys::{BudgetExceeded, KeyLineage, KeySettings};

/// A store that cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or timed out; worth retrying later (HTTP 503).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Anything else: a bug, a broken invariant, corrupt data (HTTP 500).
    #[error("store failure: {0}")]
    Internal(String),
}

/// Per-user limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests per minute on `/api/v1`.
    pub rate_limit_per_minute: u32,
    /// Jobs not yet final at once. Batch items waiting to be admitted do not count; admitted
    /// ones do, yet never refuse a job submitted on its own: those are checked against the
    /// owner's counted jobs other than admitted batch items.
    pub max_concurrent_jobs: u32,
}

/// A user's account as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The user.
    pub user_id: UserId,
    /// Display name given by the operator.
    pub name: String,
    /// Where the credits are.
    pub balances: Balances,
    /// The user's limits.
    pub limits: Limits,
    /// The user's price tier.
    pub price_percent: PricePercent,
    /// Jobs not yet final.
    pub active_jobs: u32,
    /// When the user was created.
    pub created_at: OffsetDateTime,
}

/// A change to a user's limits and tier; `None` keeps a field as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserChange {
    /// Requests per minute.
    pub rate_limit_per_minute: Option<u32>,
    /// Jobs not yet final at once.
    pub max_concurrent_jobs: Option<u32>,
    /// The price tier.
    pub price_percent: Option<PricePercent>,
}

/// Which users a listing shows: newest first, older than `before` when given, whose name
/// begins with `q` or who has a key whose prefix begins with `q`, at most `limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserQuery {
    /// The beginning of a name or of a key prefix.
    pub q: Option<String>,
    /// Only users created before this one.
    pub before: Option<UserId>,
    /// At most this many.
    pub limit: usize,
}

/// A key to store: only its prefix and hash, never the key.
#[derive(Debug, Clone)]
pub struct StoredKey {
    /// Public prefix, unique among keys.
    pub prefix: KeyPrefix,
    /// SHA-256 of the key.
    pub hash: KeyHash,
    /// The key's owner.
    pub user_id: UserId,
    /// When it was issued.
    pub created_at: OffsetDateTime,
    /// What it may do.
    pub settings: KeySettings,
    /// The key that made it, for a key a user made with another; `None` for an operator's.
    pub parent: Option<KeyPrefix>,
}

impl StoredKey {
    /// The stored form of `key`, without restrictions of its own and without a parent.
    #[must_use]
    pub fn of(key: &ApiKey, user_id: UserId, created_at: OffsetDateTime) -> Self {
        Self {
            prefix: key.prefix(),
            hash: key.hash(),
            user_id,
            created_at,
            settings: KeySettings::default(),
            parent: None,
        }
    }

    /// The same key, restricted by `settings`.
    #[must_use]
    pub fn with_settings(self, settings: KeySettings) -> Self {
        Self { settings, ..self }
    }

    /// The same key, a child of the key of `parent`.
    #[must_use]
    pub fn with_parent(self, parent: Option<KeyPrefix>) -> Self {
        Self { parent, ..self }
    }
}

/// A key as its listing shows it (never its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// Public prefix.
    pub prefix: KeyPrefix,
    /// The key's owner.
    pub user_id: UserId,
    /// What it may do, as set on it (its ancestors may narrow it further).
    pub settings: KeySettings,
    /// The prefix of the key that made it, if a key did.
    pub parent: Option<KeyPrefix>,
    /// When it was issued.
    pub created_at: OffsetDateTime,
    /// When it was revoked; a revoked key stays listed.
    pub revoked_at: Option<OffsetDateTime>,
    /// When it was last let in, to within a minute; `None` before its first use.
    pub last_used_at: Option<OffsetDateTime>,
}

/// What authentication needs to know about a key, in one look-up.
#[derive(Debug, Clone)]
pub struct Credential {
    /// SHA-256 of the key, to compare in constant time.
    pub hash: KeyHash,
    /// The key's prefix.
    pub prefix: KeyPrefix,
    /// The key's owner.
    pub user_id: UserId,
    /// The owner's request rate limit.
    pub rate_limit_per_minute: u32,
    /// The owner's price tier.
    pub price_percent: PricePercent,
    /// What the key may do: its own settings narrowed by every ancestor's
    /// ([`KeySettings::narrowed_by`]), so the earliest expiry of the chain among them.
    pub settings: KeySettings,
    /// Its own request rate limit (the effective one in `settings` may be an ancestor's).
    pub own_rate_limit_per_minute: Option<u32>,
    /// Its ancestors and descendants.
    pub lineage: KeyLineage,
}

/// Why an account operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    /// No user with that id.
    #[error("no such user")]
    UnknownUser,
    /// Another key has the same prefix; the caller generates a new key and tries again.
    #[error("key prefix already in use")]
    KeyPrefixTaken,
    /// A grant that would take the account past [`crate::credits::MAX_CREDITS`].
    #[error("the grant of {amount} would take the account past {max} credits", max = crate::credits::MAX_CREDITS)]
    GrantTooLarge {
        /// The grant.
        amount: i64,
    },
    /// A negative grant larger than what is available.
    #[error("the grant would leave {available} + ({amount}) credits available")]
    GrantBelowZero {
        /// Available before the grant.
        available: Credits,
        /// The grant.
        amount: i64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Users, keys and credit grants.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] (inside [`AccountError::Store`] where the
/// method returns [`AccountError`]) when the backing store cannot be reached, and
/// [`StoreError::Internal`] for anything else unexpected.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Creates a user with an opening grant of `credits` and a first key.
    ///
    /// # Errors
    /// [`AccountError::KeyPrefixTaken`] when `key.prefix` is in use.
    async fn create_user(
        &self,
        user_id: UserId,
        name: String,
        credits: Credits,
        limits: Limits,
        key: StoredKey,
    ) -> Result<Account, AccountError>;

    /// Adds a key to an existing user; a key with a [`StoredKey::parent`] joins its parent's
    /// subtree, for every reader of the ancestors' credentials at once (their
    /// [`KeyLineage::descendants`] grow).
    ///
    /// # Errors
    /// [`AccountError::UnknownUser`], [`AccountError::KeyPrefixTaken`].
    async fn add_key(&self, key: StoredKey) -> Result<(), AccountError>;

    /// Revokes the key with this prefix and every key below it at once, for every reader of
    /// their credentials (other replicas evict their cached copies); `false` when there was no
    /// such key not yet revoked. A revoked key stays listed, with the time of its revocation.
    async fn revoke_key(&self, prefix: &KeyPrefix) -> Result<bool, StoreError>;

    /// The key with this prefix, revoked or not, or `None`.
    async fn key(&self, prefix: &KeyPrefix) -> Result<Option<KeyRecord>, StoreError>;

    /// A user's keys, revoked ones included, oldest first.
    async fn keys_of(&self, user_id: UserId) -> Result<Vec<KeyRecord>, StoreError>;

    /// Records that the key of `prefix` was let in at `at`: its first use at once, later ones at
    /// least once a minute (a store may skip writes within a minute of its last).
    async fn record_key_use(&self, prefix: &KeyPrefix, at: OffsetDateTime) -> Result<(), StoreError>;

    /// Replaces the settings of the key with this prefix, effective for every reader of its
    /// credentials and its descendants' at once (other replicas evict their cached copies as on a
    /// revocation); `false` when there is no such key.
    async fn set_key_settings(&self, prefix: &KeyPrefix, settings: KeySettings) -> Result<bool, StoreError>;

    /// What the jobs submitted with the key of `prefix` or any key below it since `since`
    /// (ever, when `None`) hold or were charged: a job not yet final counts its hold, a succeeded one its charge, a
    /// failed or canceled one nothing. Jobs retention removed still count their charge, kept by
    /// the UTC day they were created: `since` is a budget period's start, a day's 00:00 UTC.
    async fn key_used(&self, prefix: &KeyPrefix, since: Option<OffsetDateTime>) -> Result<Credits, StoreError>;

    /// The credentials stored under a prefix (zero or one; a list so that the caller compares
    /// hashes itself, in constant time): none for a revoked key or one with a revoked ancestor;
    /// the key's settings narrowed by its ancestors' and its [`KeyLineage`].
    async fn credentials(&self, prefix: &KeyPrefix) -> Result<Vec<Credential>, StoreError>;

    /// Adds `amount` (negative to take away) to the user's available credits.
    ///
    /// # Errors
    /// [`AccountError::UnknownUser`], [`AccountError::GrantBelowZero`],
    /// [`AccountError::GrantTooLarge`] (nothing changes on any of them).
    async fn grant(&self, user_id: UserId, amount: i64) -> Result<Account, AccountError>;

    /// The account, or `None` when there is no such user.
    async fn account(&self, user_id: UserId) -> Result<Option<Account>, StoreError>;

    /// Changes a user's limits and tier, for every reader of the user's keys' credentials at once
    /// (other replicas evict them as on a revocation); the account after, or `None` when there
    /// is no such user.
    async fn change_user(&self, user_id: UserId, change: UserChange) -> Result<Option<Account>, StoreError>;

    /// The users `query` selects, newest first.
    async fn users(&self, query: &UserQuery) -> Result<Vec<Account>, StoreError>;
}

/// An `Idempotency-Key` claim: the key and a fingerprint of the request it was first used with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    /// The client's key, 1 to 255 characters.
    pub key: String,
    /// Hex SHA-256 of the endpoint and the body.
    pub fingerprint: String,
}

/// How long idempotency records are kept at least.
pub const IDEMPOTENCY_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// A job accepted now, or the job an earlier request with the same idempotency key created.
#[derive(Debug, Clone, PartialEq)]
pub enum Accepted {
    /// A new job; its credits are held.
    Created(Job),
    /// The job of an earlier request with the same key and body; nothing was held.
    Replayed(Job),
}

/// Why a job was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    /// Fewer credits available than the hold.
    #[error("needs {needed} credits, {available} available")]
    InsufficientCredits {
        /// The hold.
        needed: Credits,
        /// Available credits.
        available: Credits,
    },
    /// The user has `limit` jobs not yet final.
    #[error("{limit} jobs are already running")]
    ConcurrencyLimit {
        /// The user's concurrent-job limit.
        limit: u32,
    },
    /// The hold would take the key's `used` for the current period past its budget.
    #[error(transparent)]
    KeyBudgetExceeded(BudgetExceeded),
    /// The key has `limit` jobs not yet final.
    #[error("{limit} jobs of this key are already running")]
    KeyConcurrencyLimit {
        /// The key's concurrent-job limit.
        limit: u32,
    },
    /// The idempotency key was used with another body.
    #[error("idempotency key reused with a different body")]
    IdempotencyConflict,
    /// The job's owner does not exist.
    #[error("no such user")]
    UnknownUser,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Result of committing a transition.
#[derive(Debug, Clone, PartialEq)]
pub enum Commit {
    /// Applied: the job as stored now.
    Applied(Job),
    /// Another change came first; the job as stored now. The caller decides again from it.
    Stale(Job),
    /// No such job.
    Missing,
    /// The transition [takes a slot](Transition::takes_slot) (a batch item's admission) and the
    /// owner has as many jobs counted as their concurrent-job limit allows: nothing changed; the
    /// job as stored, still at the version the transition expected (a job changed meanwhile is
    /// [`Commit::Stale`]), so that the driver parks the very job it stepped.
    OwnerAtLimit(Job),
}

/// How many jobs are not yet final, by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnfinishedJobs {
    /// Jobs `queued`.
    pub queued: u64,
    /// Jobs `running`.
    pub running: u64,
}

/// Which jobs an operator looks for: every condition given must hold, none given finds every job.
/// A condition is one more field here and one more clause in each store's search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this user's jobs.
    pub user_id: Option<UserId>,
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs of this model.
    pub model: Option<ModelId>,
    /// Only jobs sent to this provider ([`crate::job::UpstreamRef::provider`]).
    pub upstream: Option<String>,
    /// Only jobs submitted with the key of this prefix.
    pub key: Option<KeyPrefix>,
    /// Only jobs submitted with one of these keys (a restricted key's subtree).
    pub keys: Option<Vec<KeyPrefix>>,
}

impl JobFilter {
    /// Whether `job` meets every condition: the rule each store's search follows.
    #[must_use]
    pub fn matches(&self, job: &Job) -> bool {
        self.user_id.is_none_or(|user_id| job.user_id() == user_id)
            && self.state.is_none_or(|state| job.state() == state)
            && self.model.as_ref().is_none_or(|model| job.model() == model)
            && self.upstream.as_deref().is_none_or(|name| job.upstream().is_some_and(|at| at.provider() == name))
            && self.key.as_ref().is_none_or(|key| job.key_prefix() == Some(key))
            && self.keys.as_ref().is_none_or(|keys| job.key_prefix().is_some_and(|key| keys.contains(key)))
    }
}

/// Jobs: acceptance, reads, transitions and the driver's work queue.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] (inside [`AcceptError::Store`] for
/// [`JobStore::accept`]) when the backing store cannot be reached, and [`StoreError::Internal`]
/// for anything else unexpected, including a ledger movement the balances cannot take.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Accepts a job in one atomic step: replays an idempotent retry, checks the credits
    /// (first), then, for a job with a [`Job::key_prefix`], the budget for the current period
    /// ([`crate::keys::BudgetPeriod::start`] at `now`, counted as [`AccountStore::key_used`]
    /// counts it, over the jobs of the key's whole subtree) of the key and of every ancestor
    /// that has one, the user's and then the concurrent-job limit of the key and of every
    /// ancestor (counting the jobs not yet final of each one's subtree),
    /// holds `job.credits_held`, inserts the job and records the idempotency claim. The key's
    /// checks read its settings as stored and run in the same atomic step as the hold, so that
    /// concurrent accepts on one key never take its `used` past its budget. With `lease`, the new job is put under the caller's
    /// driver's lease in the same step, as [`JobStore::claim_due`] would claim it; a replayed
    /// job stays under whatever lease it is.
    ///
    /// # Errors
    /// [`AcceptError::InsufficientCredits`], [`AcceptError::KeyBudgetExceeded`],
    /// [`AcceptError::ConcurrencyLimit`], [`AcceptError::KeyConcurrencyLimit`],
    /// [`AcceptError::IdempotencyConflict`], [`AcceptError::UnknownUser`].
    async fn accept(
        &self,
        job: Job,
        idempotency: Option<IdempotencyClaim>,
        lease: Option<LeaseId>,
        now: OffsetDateTime,
    ) -> Result<Accepted, AcceptError>;

    /// The job, or `None`.
    async fn job(&self, id: JobId) -> Result<Option<Job>, StoreError>;

    /// The job whose [`crate::job::UpstreamRef::key`] is `key`, or `None`.
    async fn job_by_upstream_key(&self, key: &str) -> Result<Option<Job>, StoreError>;

    /// A user's jobs, newest first, older than `before` when given, at most `limit`.
    async fn jobs_of(&self, user_id: UserId, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError>;

    /// Every user's jobs that `filter` [matches](JobFilter::matches), newest first (by id),
    /// older than `before` when given, at most `limit`.
    async fn find_jobs(&self, filter: &JobFilter, before: Option<JobId>, limit: usize) -> Result<Vec<Job>, StoreError>;

    /// Commits a transition if the stored job still has [`Transition::expected_version`], in one
    /// atomic step with what it implies:
    /// - its [`Transition::movement`], if any, applied to the owner's balances (a settle moves
    ///   the charge from held to spent and releases the rest; a release returns all that was
    ///   held). A transition never carries a hold: only [`JobStore::accept`] holds.
    /// - when [`Transition::frees_slot`], one fewer non-final job counted against the owner's
    ///   concurrent-job limit (and, when [`Transition::frees_batch_slot`], one fewer admitted
    ///   batch item);
    /// - when [`Transition::takes_slot`] (a batch item's admission), one more job counted and
    ///   one more admitted batch item, only while the owner's counted jobs are below the limit:
    ///   [`Commit::OwnerAtLimit`] otherwise, nothing written.
    ///
    /// Whether the write waits for the disk may follow [`Transition::is_recomputable`]. The job
    /// stays under its lease: the driver holding it keeps it.
    ///
    /// # Errors
    /// [`StoreError::Internal`] when the movement does not fit the balances (a broken ledger).
    async fn commit(&self, transition: Transition) -> Result<Commit, StoreError>;

    /// Whether the store can serve: it answers, and its schema is the one this build expects.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when it cannot answer or its schema is not current.
    async fn ready(&self) -> Result<(), StoreError>;

    /// The jobs not yet final, counted by state, across every replica of the store.
    async fn count_unfinished(&self) -> Result<UnfinishedJobs, StoreError>;

    /// Starts `lease`, a driver's new lease, until `until`: the jobs it claims or is handed under
    /// it are that driver's while the lease lives. Forgets the leases that ran out more than a day
    /// before `now` (a driver that died does not end its own).
    async fn start_lease(&self, lease: LeaseId, now: OffsetDateTime, until: OffsetDateTime) -> Result<(), StoreError>;

    /// Extends `lease` to `until` if it still lives at `now`, and reconciles it with `held`, the
    /// jobs the caller holds: an open job under the lease that the caller does not hold (it let
    /// it go after a failed or stale commit) and that was accepted before `settled_before` is
    /// freed, for any driver to claim at its next poll time (a job accepted since may still be on
    /// its way to the caller, handed over); and the jobs of `held` that are not open under the
    /// lease (final, or taken over) are returned, for the caller to let go. `None` when the lease
    /// ran out, ended or never started: the jobs under it are no longer the caller's (another
    /// driver may have claimed them), and the lease never lives again.
    async fn renew_lease(
        &self,
        lease: LeaseId,
        held: Vec<JobId>,
        settled_before: OffsetDateTime,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<Option<Vec<JobId>>, StoreError>;

    /// Ends `lease` at once, for a driver that stops: every open job under it is claimable at its
    /// next poll time rather than after the lease would have run out.
    async fn end_lease(&self, lease: LeaseId) -> Result<(), StoreError>;

    /// Claims up to `limit` non-final jobs whose `next_poll_at` has come and which are under no
    /// lease that lives at `now`, putting them under `lease`, so that no other driver takes them
    /// while it lives. Claims nothing unless `lease` itself lives at `now`.
    async fn claim_due(&self, lease: LeaseId, now: OffsetDateTime, limit: usize) -> Result<Vec<Job>, StoreError>;
}
