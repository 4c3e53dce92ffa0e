//! What one API key may do: the models it may use, the credits it may spend per period, when it
//! expires and its own limits. An operator sets them on any key; a user may give a new key no
//! more than the key it calls with ([`KeySettings::within`]).
//!
//! A key's `used` is what the jobs submitted with it in the current period hold or were charged
//! (a release gives back); stores count it in the same atomic step as a job's hold, from the
//! jobs themselves, so that it is exact under races and needs no counter of its own.

mod fields;

use time::{Date, Duration, OffsetDateTime, Time};

pub use fields::{MAX_KEY_NAME_CHARS, key_budget, key_expiry, key_limit, key_models, key_name};

use crate::credits::Credits;
use crate::ids::ModelId;

/// The span a key's budget is counted over, in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetPeriod {
    /// From 00:00 UTC.
    Day,
    /// From Monday 00:00 UTC.
    Week,
    /// From the 1st, 00:00 UTC.
    Month,
    /// The key's whole life.
    Total,
}

impl BudgetPeriod {
    /// Every period, for messages that list them.
    pub const ALL: [BudgetPeriod; 4] = [Self::Day, Self::Week, Self::Month, Self::Total];

    /// The period named `text`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|period| period.as_str() == text)
    }

    /// Its name in the API and in storage.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Total => "total",
        }
    }

    /// How a message says "per this period".
    #[must_use]
    pub fn phrase(self) -> &'static str {
        match self {
            Self::Day => "per day",
            Self::Week => "per week",
            Self::Month => "per month",
            Self::Total => "in total",
        }
    }

    /// When the period that holds `now` began; `None` for [`BudgetPeriod::Total`], which has no
    /// beginning but the key's.
    #[must_use]
    pub fn start(self, now: OffsetDateTime) -> Option<OffsetDateTime> {
        let today = now.to_offset(time::UtcOffset::UTC).date();
        let first_day = match self {
            Self::Day => today,
            Self::Week => today - Duration::days(i64::from(today.weekday().number_days_from_monday())),
            Self::Month => today.replace_day(1).unwrap_or(today),
            Self::Total => return None,
        };
        Some(midnight(first_day))
    }

    /// When the period that holds `now` ends and the key's `used` starts again from 0; `None` for
    /// [`BudgetPeriod::Total`].
    #[must_use]
    pub fn resets_at(self, now: OffsetDateTime) -> Option<OffsetDateTime> {
        let start = self.start(now)?.date();
        let next = match self {
            Self::Day => start.next_day(),
            Self::Week => Some(start + Duration::days(7)),
            Self::Month => first_of_next_month(start),
            Self::Total => None,
        };
        next.map(midnight)
    }
}

fn midnight(day: Date) -> OffsetDateTime {
    day.with_time(Time::MIDNIGHT).assume_utc()
}

fn first_of_next_month(first: Date) -> Option<Date> {
    let (year, month) = match first.month() {
        time::Month::December => (first.year() + 1, time::Month::January),
        month => (first.year(), month.next()),
    };
    Date::from_calendar_date(year, month, 1).ok()
}

/// The credits a key may spend per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyBudget {
    /// At most this much held plus charged per period.
    pub credits: Credits,
    /// The period.
    pub period: BudgetPeriod,
}

/// What a key may do. Every field absent means "no restriction of the key's own".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeySettings {
    /// A name for the people who manage it.
    pub name: Option<String>,
    /// The models it may use; all when absent.
    pub models: Option<Vec<ModelId>>,
    /// What it may spend per period.
    pub budget: Option<KeyBudget>,
    /// When it stops working.
    pub expires_at: Option<OffsetDateTime>,
    /// Requests per minute, in addition to its user's limit.
    pub rate_limit_per_minute: Option<u32>,
    /// Jobs not yet final at once, in addition to its user's limit.
    pub max_concurrent_jobs: Option<u32>,
}

impl KeySettings {
    /// Whether a job of `model` may be submitted with the key.
    #[must_use]
    pub fn allows_model(&self, model: &ModelId) -> bool {
        self.models.as_ref().is_none_or(|models| models.contains(model))
    }

    /// Whether the key has stopped working at `now`.
    #[must_use]
    pub fn is_expired(&self, now: OffsetDateTime) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// Whether accepting a job must count what the key has in flight (a budget or a concurrency
    /// limit of its own), which costs the store a look at the key's jobs.
    #[must_use]
    pub fn limits_jobs(&self) -> bool {
        self.budget.is_some() || self.max_concurrent_jobs.is_some()
    }

    /// Whether a key with these settings is no wider than `caller`'s: its models a subset of the
    /// caller's, and its budget no larger for the same period, where the caller has either.
    #[must_use]
    pub fn within(&self, caller: &KeySettings) -> bool {
        let models_within = match (&caller.models, &self.models) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(allowed), Some(asked)) => asked.iter().all(|model| allowed.contains(model)),
        };
        let budget_within = match (caller.budget, self.budget) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(allowed), Some(asked)) => allowed.period == asked.period && asked.credits <= allowed.credits,
        };
        models_within && budget_within
    }
}

/// A change to a key's settings: for each field, `None` keeps it, `Some(None)` removes it and
/// `Some(Some(v))` sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(clippy::option_option, reason = "absent, null and a value are three different requests")]
pub struct KeyChange {
    /// The name.
    pub name: Option<Option<String>>,
    /// The models.
    pub models: Option<Option<Vec<ModelId>>>,
    /// The budget.
    pub budget: Option<Option<KeyBudget>>,
    /// The expiry.
    pub expires_at: Option<Option<OffsetDateTime>>,
    /// The request rate limit.
    pub rate_limit_per_minute: Option<Option<u32>>,
    /// The concurrency limit.
    pub max_concurrent_jobs: Option<Option<u32>>,
}

impl KeyChange {
    /// `settings` with this change applied.
    #[must_use]
    pub fn apply(&self, settings: &KeySettings) -> KeySettings {
        fn pick<T: Clone>(change: &Option<Option<T>>, current: &Option<T>) -> Option<T> {
            change.as_ref().map_or_else(|| current.clone(), Clone::clone)
        }
        KeySettings {
            name: pick(&self.name, &settings.name),
            models: pick(&self.models, &settings.models),
            budget: pick(&self.budget, &settings.budget),
            expires_at: pick(&self.expires_at, &settings.expires_at),
            rate_limit_per_minute: pick(&self.rate_limit_per_minute, &settings.rate_limit_per_minute),
            max_concurrent_jobs: pick(&self.max_concurrent_jobs, &settings.max_concurrent_jobs),
        }
    }
}

/// A key's budget as its listing shows it: the budget, what the current period has used, and
/// when that period ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetStanding {
    /// The budget.
    pub budget: KeyBudget,
    /// Held plus charged in the current period.
    pub used: Credits,
    /// When `used` starts again from 0; `None` for a total budget.
    pub resets_at: Option<OffsetDateTime>,
}

/// Whether `budget` takes a hold of `cost` on top of `used`.
///
/// # Errors
/// [`BudgetExceeded`] naming the budget and the two amounts.
pub fn check_budget(budget: KeyBudget, used: Credits, cost: Credits) -> Result<(), BudgetExceeded> {
    if used.checked_add(cost).is_some_and(|after| after <= budget.credits) {
        Ok(())
    } else {
        Err(BudgetExceeded { budget, used, cost })
    }
}

/// A hold the key's budget does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this key's budget is {} credits {}, {used} used; the request needs {cost}", .budget.credits, .budget.period.phrase())]
pub struct BudgetExceeded {
    /// The key's budget.
    pub budget: KeyBudget,
    /// Held plus charged in the current period.
    pub used: Credits,
    /// The request's hold.
    pub cost: Credits,
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn periods_start_and_reset_at_utc_boundaries() {
        let now = datetime!(2026-12-31 23:30 UTC);
        assert_eq!(BudgetPeriod::Day.start(now), Some(datetime!(2026-12-31 0:00 UTC)));
        assert_eq!(BudgetPeriod::Day.resets_at(now), Some(datetime!(2027-01-01 0:00 UTC)));
        assert_eq!(BudgetPeriod::Week.start(now), Some(datetime!(2026-12-28 0:00 UTC)), "a Monday");
        assert_eq!(BudgetPeriod::Week.resets_at(now), Some(datetime!(2027-01-04 0:00 UTC)));
        assert_eq!(BudgetPeriod::Month.start(now), Some(datetime!(2026-12-01 0:00 UTC)));
        assert_eq!(BudgetPeriod::Month.resets_at(now), Some(datetime!(2027-01-01 0:00 UTC)));
        assert_eq!(BudgetPeriod::Total.start(now), None);
        assert_eq!(BudgetPeriod::Total.resets_at(now), None);
        let elsewhere = datetime!(2026-12-01 01:00 +03:00);
        assert_eq!(BudgetPeriod::Month.start(elsewhere), Some(datetime!(2026-11-01 0:00 UTC)), "UTC, not local");
    }

    #[test]
    fn periods_parse_their_names_only() {
        for period in BudgetPeriod::ALL {
            assert_eq!(BudgetPeriod::parse(period.as_str()), Some(period));
        }
        assert_eq!(BudgetPeriod::parse("year"), None);
    }

    #[test]
    fn a_budget_takes_a_hold_up_to_its_credits() {
        let c = Credits::new;
        let budget = KeyBudget { credits: c(10), period: BudgetPeriod::Day };
        assert_eq!(check_budget(budget, c(6), c(4)), Ok(()));
        let exceeded = check_budget(budget, c(6), c(5)).unwrap_err();
        assert_eq!(exceeded, BudgetExceeded { budget, used: c(6), cost: c(5) });
        assert_eq!(exceeded.to_string(), "this key's budget is 10 credits per day, 6 used; the request needs 5");
    }

    #[test]
    fn a_key_is_within_another_by_models_and_budget() {
        let model = |id: &str| ModelId::new(id.to_owned());
        let budget = |credits, period| Some(KeyBudget { credits: Credits::new(credits), period });
        let caller = KeySettings {
            models: Some(vec![model("a"), model("b")]),
            budget: budget(100, BudgetPeriod::Day),
            ..KeySettings::default()
        };
        let narrower = KeySettings {
            models: Some(vec![model("a")]),
            budget: budget(50, BudgetPeriod::Day),
            ..KeySettings::default()
        };
        assert!(narrower.within(&caller));
        assert!(!KeySettings { models: None, ..narrower.clone() }.within(&caller), "all models is wider");
        assert!(!KeySettings { budget: None, ..narrower.clone() }.within(&caller), "no budget is wider");
        assert!(!KeySettings { budget: budget(50, BudgetPeriod::Week), ..narrower.clone() }.within(&caller));
        assert!(!KeySettings { models: Some(vec![model("c")]), ..narrower.clone() }.within(&caller));
        assert!(KeySettings::default().within(&KeySettings::default()), "an unrestricted caller may create anything");
    }

    #[test]
    fn a_change_keeps_removes_or_sets_each_field() {
        let settings = KeySettings { name: Some("ci".into()), max_concurrent_jobs: Some(2), ..KeySettings::default() };
        let change = KeyChange { name: Some(None), rate_limit_per_minute: Some(Some(5)), ..KeyChange::default() };
        let changed = change.apply(&settings);
        assert_eq!(
            (changed.name, changed.rate_limit_per_minute, changed.max_concurrent_jobs),
            (None, Some(5), Some(2))
        );
    }

    #[test]
    fn a_key_expires_at_its_time() {
        let settings = KeySettings { expires_at: Some(datetime!(2026-01-01 0:00 UTC)), ..KeySettings::default() };
        assert!(!settings.is_expired(datetime!(2025-12-31 23:59 UTC)));
        assert!(settings.is_expired(datetime!(2026-01-01 0:00 UTC)));
        assert!(settings.allows_model(&ModelId::new("any".to_owned())));
    }
}
