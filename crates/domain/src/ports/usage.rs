//! The usage port: the ledger as a store records it, and the jobs counted by day, model, user
//! and provider, for the reports a paying team asks for ("why is my balance 40 lower?", "what did
//! we spend on video last week?"), with the upkeep that keeps them cheap and exact (sealing hours,
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
    /// (sealed hours from the rollup), and the jobs whose provider reported more units than they
    /// were charged for (those the store still has).
    async fn reconciliation(&self, query: ReconciliationQuery) -> Result<Reconciliation, StoreError>;

    /// Removes up to `limit` final jobs that finished before `before`, oldest first; returns how
    /// many. What [`UsageStore::usage`] counted of them moves into the daily rollup in the same
    /// step (unless their hour is sealed, and so already there), so that every report reads the
    /// same before and after; their charges stay counted in their keys' budgets
    /// ([`AccountStore::key_used`]); their ledger records stay, with the job's id. A removed job is no longer found ([`JobStore::job`] answers `None`).
    /// Each call is short and skips jobs being changed, so that it never holds up submissions.
    ///
    /// [`JobStore::job`]: crate::ports::JobStore::job
    /// [`AccountStore::key_used`]: crate::ports::AccountStore::key_used
    async fn purge_final_jobs(&self, before: OffsetDateTime, limit: usize) -> Result<usize, StoreError>;

    /// Seals the oldest stretch of jobs not sealed yet ([`SealStretch`]): what [`UsageStore::usage`]
    /// and [`UsageStore::reconciliation`] count of the jobs created in it moves into the daily
    /// rollups, and reports read it from the rollups alone from then on, so that their cost no
    /// longer grows with the jobs they cover: a report over today reads the jobs of the last hour
    /// or so. Final jobs never change, so every report reads the same before and after. Returns
    /// the first instant not sealed after it, or `None` when nothing is ready (or another
    /// replica is sealing).
    async fn seal_usage(&self, now: OffsetDateTime) -> Result<Option<OffsetDateTime>, StoreError>;
}

/// How long after an hour ends it may be sealed ([`UsageStore::seal_usage`]): a job's creation
/// time comes from its replica's clock, and this covers replicas' clocks drifting apart and a
/// submission begun just before the hour's end.
pub const SEAL_AFTER: time::Duration = time::Duration::minutes(15);

/// A stretch of creation times that a seal counts into the rollups: `[from, until)`, in whole
/// UTC hours of one UTC day, so that a seal adds to one day's rollup rows once, and a store with
/// a backlog (a first seal over a long history) seals it a day at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealStretch {
    /// Its first instant: the first not sealed.
    pub from: OffsetDateTime,
    /// The first instant after it.
    pub until: OffsetDateTime,
}

impl SealStretch {
    /// The stretch a seal at `now` may cover, from `floor` (the first instant not sealed; else
    /// the oldest job's creation, whose hour it starts at): up to the end of the last UTC hour
    /// that ended [`SEAL_AFTER`] before `now`, and at most to the end of `from`'s UTC day; `None`
    /// when not a whole hour is ready.
    #[must_use]
    pub fn ready(floor: OffsetDateTime, now: OffsetDateTime) -> Option<SealStretch> {
        let from = hour_start(floor);
        let day_end = from.replace_time(time::Time::MIDNIGHT) + time::Duration::days(1);
        let until = hour_start(now - SEAL_AFTER).min(day_end);
        (until > from).then_some(SealStretch { from, until })
    }

    /// The same stretch ending at the start of the hour of `first_open`, the oldest job in it not
    /// final yet, so that the rollups only ever count final jobs; `None` when no hour is left.
    #[must_use]
    pub fn before_open(self, first_open: Option<OffsetDateTime>) -> Option<SealStretch> {
        let until = first_open.map_or(self.until, |open| hour_start(open).min(self.until));
        (until > self.from).then_some(SealStretch { until, ..self })
    }
}

/// The start of the UTC hour of `at`.
#[must_use]
pub fn hour_start(at: OffsetDateTime) -> OffsetDateTime {
    let at = at.to_offset(time::UtcOffset::UTC);
    at - time::Duration::minutes(i64::from(at.minute()))
        - time::Duration::seconds(i64::from(at.second()))
        - time::Duration::nanoseconds(i64::from(at.nanosecond()))
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::{SealStretch, hour_start};

    #[test]
    fn a_stretch_ends_at_the_last_hour_over_for_a_quarter_of_an_hour() {
        let floor = datetime!(2026-11-29 10:20:31.5 UTC);
        let stretch = |from, until| Some(SealStretch { from, until });
        assert_eq!(SealStretch::ready(floor, datetime!(2026-11-29 11:14:59 UTC)), None, "10:00 not over long enough");
        assert_eq!(
            SealStretch::ready(floor, datetime!(2026-11-29 11:15 UTC)),
            stretch(datetime!(2026-11-29 10:00 UTC), datetime!(2026-11-29 11:00 UTC))
        );
        assert_eq!(
            SealStretch::ready(floor, datetime!(2026-11-29 13:40 UTC)),
            stretch(datetime!(2026-11-29 10:00 UTC), datetime!(2026-11-29 13:00 UTC))
        );
        assert_eq!(
            SealStretch::ready(floor, datetime!(2026-12-09 00:00 UTC)),
            stretch(datetime!(2026-11-29 10:00 UTC), datetime!(2026-11-30 00:00 UTC)),
            "to the end of its day at most"
        );
        assert_eq!(
            SealStretch::ready(datetime!(2026-11-30 00:00 UTC), datetime!(2026-12-09 00:00 UTC)),
            stretch(datetime!(2026-11-30 00:00 UTC), datetime!(2026-12-01 00:00 UTC)),
            "then a whole day"
        );
    }

    #[test]
    fn a_stretch_stops_at_the_hour_of_its_oldest_job_not_final() {
        let ready = SealStretch { from: datetime!(2026-11-29 10:00 UTC), until: datetime!(2026-11-29 13:00 UTC) };
        assert_eq!(ready.before_open(None), Some(ready));
        assert_eq!(
            ready.before_open(Some(datetime!(2026-11-29 12:59:59 UTC))),
            Some(SealStretch { until: datetime!(2026-11-29 12:00 UTC), ..ready })
        );
        assert_eq!(ready.before_open(Some(datetime!(2026-11-29 10:00 UTC))), None);
        assert_eq!(ready.before_open(Some(datetime!(2026-11-29 10:59 UTC))), None);
    }

    #[test]
    fn an_hour_starts_in_utc() {
        assert_eq!(hour_start(datetime!(2026-11-29 10:20:31.999_999 +02:00)), datetime!(2026-11-29 08:00 UTC));
    }
}
