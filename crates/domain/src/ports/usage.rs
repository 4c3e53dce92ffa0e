//! The usage port: the ledger as a store records it, and the jobs counted by day, model, user
//! and provider, for the reports a paying team asks for ("why is my balance 40 lower?", "what did
//! we spend on video last week?"), with the upkeep that keeps them cheap and exact (sealing days,
//! retention). Every record is written by the account and job stores in the same atomic step as
//! the credit movement it records.

use async_trait::async_trait;
use time::{Date, OffsetDateTime};

use super::StoreError;
use crate::credits::Credits;
use crate::decimal::Decimal;
use crate::ids::{JobId, KeyPrefix, UserId};

/// A credit movement as the store records it: a final movement of a succeeded job is one
/// record, which the API shows as a charge and, for what was held and not delivered, a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerMovement {
    /// Credits given (negative: taken away) by an operator; a user's opening credits are its
    /// first grant.
    Grant(i64),
    /// Held at acceptance.
    Hold(Credits),
    /// A succeeded job: `charged` spent, `released` returned.
    Settle {
        /// What was delivered, and spent.
        charged: Credits,
        /// What was held and not delivered, returned.
        released: Credits,
    },
    /// A failed or canceled job: everything held returned.
    Release(Credits),
}

/// One record of a user's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRecord {
    /// Increasing with time across the store: the newest record has the largest.
    pub sequence: i64,
    /// The job it belongs to; `None` for grants.
    pub job_id: Option<JobId>,
    /// What moved.
    pub movement: LedgerMovement,
    /// When it was recorded.
    pub at: OffsetDateTime,
}

/// How usage is grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGrouping {
    /// By the UTC day the jobs were created.
    Day,
    /// By model.
    Model,
    /// By user.
    User,
    /// By day, then by model within each day (a chart of each model's spending per day).
    DayAndModel,
    /// By the provider that took each job (operators' report); jobs no provider took form a group
    /// of their own.
    Provider,
    /// By the key each job was submitted with (its prefix); jobs from before keys were recorded
    /// form a group of their own.
    Key,
    /// By the provider key each job was sent with (its last 4 characters; operators' report);
    /// jobs of no known provider key form a group of their own.
    ProviderKey,
}

/// Which jobs a usage report counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    /// Only this user's; every user's when `None`.
    pub user_id: Option<UserId>,
    /// Only those submitted with one of these keys (a restricted key's subtree); any when `None`.
    pub keys: Option<Vec<KeyPrefix>>,
    /// First UTC day counted.
    pub from: Date,
    /// Last UTC day counted (included).
    pub to: Date,
    /// How the rows are grouped.
    pub group_by: UsageGrouping,
}

/// One group of a usage report: the jobs created in it and what they were charged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    /// The group's day, when grouped by day.
    pub day: Option<Date>,
    /// The group's model, when grouped by model.
    pub model: Option<String>,
    /// The group's user, when grouped by user.
    pub user_id: Option<UserId>,
    /// The group's provider, when grouped by provider; `None` there for the jobs no provider took.
    pub provider: Option<String>,
    /// The group's key prefix, when grouped by key; `None` there for jobs of no recorded key.
    pub key: Option<String>,
    /// The group's provider key (its last 4 characters), when grouped by provider key; `None`
    /// there for jobs of no known provider key.
    pub provider_key: Option<String>,
    /// Jobs created.
    pub jobs: u64,
    /// Of which succeeded.
    pub succeeded: u64,
    /// Of which failed.
    pub failed: u64,
    /// Of which were canceled.
    pub canceled: u64,
    /// Credits charged for them.
    pub credits_spent: u64,
    /// What their providers billed the operator for them (jobs on routes with a cost).
    pub provider_cost_usd: Decimal,
    /// Of the failed, those that failed `CONTENT_REFUSED`.
    pub content_refused: u64,
}

impl UsageRow {
    /// What the group's spent credits are worth at `credit_usd` a credit.
    #[must_use]
    pub fn revenue_usd(&self, credit_usd: Decimal) -> Decimal {
        Decimal::whole(self.credits_spent).times(credit_usd)
    }

    /// Revenue less provider cost: what the operator kept (negative when it lost).
    #[must_use]
    pub fn margin_usd(&self, credit_usd: Decimal) -> Decimal {
        self.revenue_usd(credit_usd).minus(self.provider_cost_usd)
    }
}

/// Which jobs a reconciliation counts: those created on the UTC days `from` to `to` (both
/// included), of one provider or all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconciliationQuery {
    /// First UTC day counted.
    pub from: Date,
    /// Last UTC day counted (included).
    pub to: Date,
    /// Only this provider's jobs; every provider's when `None`.
    pub provider: Option<String>,
}

/// One day of one provider key: the figures to hold against the provider's invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconciliationRow {
    /// The UTC day the jobs were created.
    pub day: Date,
    /// The provider.
    pub provider: String,
    /// The provider key's last 4 characters; `None` for jobs of no known key.
    pub key_hint: Option<String>,
    /// Jobs with a bill (final, on a route with a cost).
    pub jobs: u64,
    /// Units billed.
    pub units: Decimal,
    /// What they cost.
    pub cost_usd: Decimal,
}

/// A job whose provider reported more units than the job was charged for: the operator paid for
/// something the user did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitsMismatch {
    /// The job.
    pub job_id: JobId,
    /// Its model.
    pub model: String,
    /// Units the user paid for.
    pub units_charged: Decimal,
    /// Units the provider reported.
    pub units_reported: Decimal,
}

/// The reconciliation of a range of days: per day and provider key, and the mismatched jobs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reconciliation {
    /// Per day, provider and key, in that order.
    pub rows: Vec<ReconciliationRow>,
    /// The jobs billed more units than charged, oldest first, at most [`MAX_MISMATCHES`].
    pub mismatches: Vec<UnitsMismatch>,
}

/// Most mismatched jobs one reconciliation lists.
pub const MAX_MISMATCHES: usize = 1000;

/// Reads of the ledger and of usage, and the retention that keeps usage exact.
///
/// # Errors
/// Every method returns [`StoreError::Unavailable`] when the store cannot be reached, and
/// [`StoreError::Internal`] for anything else unexpected.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// The user's ledger records with a sequence below `before` (all when `None`), newest first,
    /// at most `limit`; with `keys`, only the records of the jobs submitted with one of them that
    /// the store still has (no grant, nothing of a job retention removed).
    async fn ledger(
        &self,
        user_id: UserId,
        keys: Option<Vec<KeyPrefix>>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<LedgerRecord>, StoreError>;

    /// The ledger records of job `id`, oldest first (its hold, then its settle or release once
    /// final); none for a job the store does not know.
    async fn job_ledger(&self, id: JobId) -> Result<Vec<LedgerRecord>, StoreError>;

    /// The jobs created on the days of `query`, counted per group, groups in ascending order
    /// (days, model ids, user ids, providers with the jobs no provider took first); a group with
    /// no job is absent.
    async fn usage(&self, query: UsageQuery) -> Result<Vec<UsageRow>, StoreError>;

    /// The bills of the jobs created on the days of `query`, per day, provider and provider key
    /// (sealed days from the rollup), and the jobs whose provider reported more units than they
    /// were charged for (those the store still has).
    async fn reconciliation(&self, query: ReconciliationQuery) -> Result<Reconciliation, StoreError>;

    /// Removes up to `limit` final jobs that finished before `before`, oldest first; returns how
    /// many. What [`UsageStore::usage`] counted of them moves into the daily rollup in the same
    /// step (unless their day is sealed, and so already there), so that every report reads the
    /// same before and after; their charges stay counted in their keys' budgets
    /// ([`AccountStore::key_used`]); their ledger records stay, with the job's id. A removed job is no longer found ([`JobStore::job`] answers `None`).
    /// Each call is short and skips jobs being changed, so that it never holds up submissions.
    ///
    /// [`JobStore::job`]: crate::ports::JobStore::job
    /// [`AccountStore::key_used`]: crate::ports::AccountStore::key_used
    async fn purge_final_jobs(&self, before: OffsetDateTime, limit: usize) -> Result<usize, StoreError>;

    /// Seals the oldest UTC day that has jobs and is not sealed yet, when it ended at least
    /// [`SEAL_AFTER`] before `now` and every job created on it is final: what
    /// [`UsageStore::usage`] counts of it moves into the daily rollup, and reports read the day
    /// from the rollup alone from then on, so that their cost no longer grows with the jobs of the
    /// days they cover. Final jobs never change, so every report reads the same before and after.
    /// Returns the day sealed, or `None` when no day is ready (or another replica is sealing one).
    async fn seal_usage_day(&self, now: OffsetDateTime) -> Result<Option<Date>, StoreError>;
}

/// How long after a UTC day ends it may be sealed ([`UsageStore::seal_usage_day`]): a job's
/// creation time comes from its replica's clock, and this covers replicas' clocks drifting apart
/// and a submission begun just before midnight.
pub const SEAL_AFTER: time::Duration = time::Duration::minutes(15);
