//! The ledger and usage reports: every credit movement of a user, page by page, and the jobs
//! counted by day, model or user with what they were charged.
//!
//! A store records a succeeded job's final movement once; here it reads as a `charge` of what
//! was delivered and, when less was delivered than held, a `release` of the rest, so that summed
//! over a user's entries: available = grants − holds + releases, held = holds − releases −
//! charges, spent = charges.

use time::Date;

use super::{Accounts, Admin, Caller};
use crate::ids::JobId;
use crate::invalid::InvalidRequest;
use crate::ports::{
    LedgerMovement, LedgerRecord, Reconciliation, ReconciliationQuery, StoreError, UsageGrouping, UsageQuery, UsageRow,
    UsageStore,
};

/// Most entries on one ledger page.
pub const MAX_LEDGER_PAGE: usize = 100;
/// Longest span of one usage report, in days.
pub const MAX_USAGE_DAYS: i64 = 366;

/// What an entry of the ledger records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerKind {
    /// Credits given (or, negative, taken) by an operator, the opening credits included.
    Grant,
    /// Held when a job was accepted.
    Hold,
    /// Returned from a hold: a failed or canceled job's, or what a succeeded one did not deliver.
    Release,
    /// Spent: what a succeeded job delivered.
    Charge,
}

impl LedgerKind {
    /// `grant`, `hold`, `release` or `charge`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerKind::Grant => "grant",
            LedgerKind::Hold => "hold",
            LedgerKind::Release => "release",
            LedgerKind::Charge => "charge",
        }
    }
}

/// One entry of a user's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Increasing with time; also the cursor of the next page (`before`).
    pub id: i64,
    /// When it was recorded.
    pub at: time::OffsetDateTime,
    /// What it records.
    pub kind: LedgerKind,
    /// The job it belongs to; `None` for grants.
    pub job_id: Option<JobId>,
    /// How many credits; negative only for a negative grant.
    pub credits: i64,
}

/// A page of the ledger, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerPage {
    /// The entries.
    pub entries: Vec<LedgerEntry>,
    /// The `before` of the next page, when there is one.
    pub next: Option<i64>,
}

/// Why a usage report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// 400: the range is backwards or too long.
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn credits(amount: crate::credits::Credits) -> i64 {
    i64::try_from(amount.get()).unwrap_or(i64::MAX)
}

/// The entries a record reads as, oldest first: ids `2 × sequence` and, for the release part of
/// a settle, `2 × sequence + 1`.
pub(super) fn entries(record: &LedgerRecord) -> Vec<LedgerEntry> {
    let entry = |part: i64, kind: LedgerKind, credits: i64| LedgerEntry {
        id: record.sequence * 2 + part,
        at: record.at,
        kind,
        job_id: record.job_id,
        credits,
    };
    match record.movement {
        LedgerMovement::Grant(amount) => vec![entry(0, LedgerKind::Grant, amount)],
        LedgerMovement::Hold(held) => vec![entry(0, LedgerKind::Hold, credits(held))],
        LedgerMovement::Release(released) => vec![entry(0, LedgerKind::Release, credits(released))],
        LedgerMovement::Settle { charged, released } => {
            let mut both = vec![entry(0, LedgerKind::Charge, credits(charged))];
            if released.get() > 0 {
                both.push(entry(1, LedgerKind::Release, credits(released)));
            }
            both
        }
    }
}

/// Checks a report's days: `from` not after `to`, at most [`MAX_USAGE_DAYS`] apart.
///
/// # Errors
/// [`InvalidRequest`] naming `to` for a backwards range, `from` for one too long.
pub fn usage_range(from: Date, to: Date) -> Result<(), InvalidRequest> {
    if to < from {
        return Err(InvalidRequest::param("to", "`to` must not be before `from`"));
    }
    if (to - from).whole_days() >= MAX_USAGE_DAYS {
        return Err(InvalidRequest::param("from", format!("a report spans at most {MAX_USAGE_DAYS} days")));
    }
    Ok(())
}

impl Accounts {
    /// The caller's ledger, newest first: at most `limit` entries older than `before` (an
    /// entry id), and the cursor of the next page. A restricted key sees only its subtree's
    /// jobs' entries (no grant).
    ///
    /// # Errors
    /// When the store fails.
    pub async fn ledger(&self, caller: &Caller, before: Option<i64>, limit: usize) -> Result<LedgerPage, StoreError> {
        let limit = limit.clamp(1, MAX_LEDGER_PAGE);
        // A record reads as one or two entries, and the record `before` points into may have
        // none left past it: `limit + 2` records give `limit + 1` entries at least, unless the
        // ledger ends first; the one past the page tells that there is more.
        let keys = caller.subtree().map(<[_]>::to_vec);
        let records =
            self.ports.usage.ledger(caller.user_id, keys, before.map(|id| id.div_euclid(2) + 1), limit + 2).await?;
        let mut page: Vec<LedgerEntry> = records
            .iter()
            .flat_map(|record| entries(record).into_iter().rev())
            .filter(|entry| before.is_none_or(|before| entry.id < before))
            .collect();
        let more = page.len() > limit;
        page.truncate(limit);
        let next = if more { page.last().map(|entry| entry.id) } else { None };
        Ok(LedgerPage { entries: page, next })
    }

    /// The caller's jobs created from `from` to `to` (UTC days, both included), grouped by day,
    /// model or key; a restricted key's, only its subtree's.
    ///
    /// # Errors
    /// See [`UsageError`]; grouping by user or provider is the operators' report
    /// ([`Admin::usage_report`]).
    pub async fn usage(
        &self,
        caller: &Caller,
        from: Date,
        to: Date,
        group_by: UsageGrouping,
    ) -> Result<Vec<UsageRow>, UsageError> {
        if matches!(group_by, UsageGrouping::User | UsageGrouping::Provider | UsageGrouping::ProviderKey) {
            return Err(
                InvalidRequest::param("group_by", "`group_by` must be `day`, `model`, `day,model` or `key`").into()
            );
        }
        let keys = caller.subtree().map(<[_]>::to_vec);
        report(self.ports.usage.as_ref(), UsageQuery { user_id: Some(caller.user_id), keys, from, to, group_by }).await
    }
}

impl Admin {
    /// Usage across users (or of the one `query` names), for operators.
    ///
    /// # Errors
    /// See [`UsageError`].
    pub async fn usage_report(&self, query: UsageQuery) -> Result<Vec<UsageRow>, UsageError> {
        report(self.ports.usage.as_ref(), query).await
    }

    /// What each provider key billed per day over a range of creation days, for holding against
    /// the providers' invoices, and the jobs billed more units than they were charged for.
    ///
    /// # Errors
    /// [`UsageError::Invalid`] for a bad range (as a usage report's) or a provider the catalog's
    /// routes never name (`provider`); [`UsageError::Store`] when the store fails.
    pub async fn reconciliation(&self, query: ReconciliationQuery) -> Result<Reconciliation, UsageError> {
        usage_range(query.from, query.to)?;
        if let Some(provider) = &query.provider {
            let catalog = self.catalog.current();
            let known = self.ports.route_schemas.iter().any(|schemas| schemas.provider() == provider.as_str())
                || catalog.managed().any(|model| model.routes.iter().any(|route| &route.provider == provider));
            if !known {
                return Err(
                    InvalidRequest::param("provider", format!("no route names the provider {provider:?}")).into()
                );
            }
        }
        Ok(self.ports.usage.reconciliation(query).await?)
    }
}

/// Usage as `query` asks, once its range is checked.
async fn report(usage: &dyn UsageStore, query: UsageQuery) -> Result<Vec<UsageRow>, UsageError> {
    usage_range(query.from, query.to)?;
    Ok(usage.usage(query).await?)
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::credits::Credits;

    #[test]
    fn a_settle_reads_as_a_charge_and_a_release_of_the_rest() {
        let record =
            |movement| LedgerRecord { sequence: 7, job_id: None, movement, at: datetime!(2026-11-25 0:00 UTC) };
        let settled = entries(&record(LedgerMovement::Settle { charged: Credits::new(8), released: Credits::new(4) }));
        let kinds: Vec<_> = settled.iter().map(|e| (e.id, e.kind, e.credits)).collect();
        assert_eq!(kinds, vec![(14, LedgerKind::Charge, 8), (15, LedgerKind::Release, 4)]);
        let whole = entries(&record(LedgerMovement::Settle { charged: Credits::new(8), released: Credits::new(0) }));
        assert_eq!(whole.len(), 1, "nothing released, no release entry");
        assert_eq!(entries(&record(LedgerMovement::Grant(-5)))[0].credits, -5);
    }

    #[test]
    fn ranges_are_forward_and_bounded() {
        let day = |d: u8| Date::from_calendar_date(2026, time::Month::November, d).unwrap();
        assert!(usage_range(day(1), day(1)).is_ok());
        assert_eq!(usage_range(day(2), day(1)).unwrap_err().param.as_deref(), Some("to"));
        let long = Date::from_calendar_date(2024, time::Month::January, 1).unwrap();
        assert_eq!(usage_range(long, day(1)).unwrap_err().param.as_deref(), Some("from"));
    }
}
