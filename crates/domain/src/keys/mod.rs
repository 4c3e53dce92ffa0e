//! What one API key may do: the models it may use, the credits it may spend per period, when it
//! expires and its own limits. An operator sets them on any key; a key a user makes with another
//! is its child ([`KeyLineage`]): no wider than its parent in any field
//! ([`KeySettings::wider_than`]), inheriting what it leaves out ([`KeySettings::inheriting`]), and
//! narrowed at every use by each ancestor's settings ([`KeySettings::narrowed_by`]).
//!
//! A key's `used` is what the jobs submitted with it or any key below it in the current period
//! hold or were charged (a release gives back); stores count it in the same atomic step as a
//! job's hold, for the key and every ancestor, so that it is exact under races.

mod fields;

use time::{Date, Duration, OffsetDateTime, Time};

pub use fields::{MAX_KEY_NAME_CHARS, key_budget, key_expiry, key_limit, key_models, key_name};

use crate::credits::Credits;
use crate::ids::{KeyPrefix, ModelId};

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

    /// Whether the key limits anything at all: a key with none of its own settings but a name
    /// acts with its user's full powers, any other is restricted to its own subtree (see
    /// [`KeyLineage::is_restricted`]).
    #[must_use]
    pub fn restricts(&self) -> bool {
        self.models.is_some()
            || self.budget.is_some()
            || self.expires_at.is_some()
            || self.rate_limit_per_minute.is_some()
            || self.max_concurrent_jobs.is_some()
    }

    /// The first field in which a key with these settings would be wider than `parent` (its
    /// effective settings), named as the request names it; `None` when it is no wider in any.
    /// Wider means: a model outside the parent's, a later expiry, a higher rate or concurrency
    /// limit, or a budget of another period or more credits, where the parent has that setting.
    #[must_use]
    pub fn wider_than(&self, parent: &KeySettings) -> Option<&'static str> {
        fn wider<T: PartialOrd>(own: Option<&T>, parent: Option<&T>) -> bool {
            match (parent, own) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(parent), Some(own)) => own > parent,
            }
        }
        let models_wider = match (&parent.models, &self.models) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(allowed), Some(asked)) => asked.iter().any(|model| !allowed.contains(model)),
        };
        let budget_wider = match (parent.budget, self.budget) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(allowed), Some(asked)) => allowed.period != asked.period || asked.credits > allowed.credits,
        };
        if models_wider {
            Some("models")
        } else if wider(self.expires_at.as_ref(), parent.expires_at.as_ref()) {
            Some("expires_at")
        } else if wider(self.rate_limit_per_minute.as_ref(), parent.rate_limit_per_minute.as_ref()) {
            Some("rate_limit_per_minute")
        } else if wider(self.max_concurrent_jobs.as_ref(), parent.max_concurrent_jobs.as_ref()) {
            Some("max_concurrent_jobs")
        } else if budget_wider {
            Some("budget")
        } else {
            None
        }
    }

    /// These settings with every field left out taken from `parent`'s: what a child key made
    /// with them starts with.
    #[must_use]
    pub fn inheriting(self, parent: &KeySettings) -> KeySettings {
        KeySettings {
            name: self.name,
            models: self.models.or_else(|| parent.models.clone()),
            budget: self.budget.or(parent.budget),
            expires_at: self.expires_at.or(parent.expires_at),
            rate_limit_per_minute: self.rate_limit_per_minute.or(parent.rate_limit_per_minute),
            max_concurrent_jobs: self.max_concurrent_jobs.or(parent.max_concurrent_jobs),
        }
    }

    /// These settings narrowed by an ancestor's: the models both allow, the earlier expiry, the
    /// lower rate and concurrency limits. Budgets are not merged: a job counts against each
    /// key's own budget along the chain.
    #[must_use]
    pub fn narrowed_by(self, ancestor: &KeySettings) -> KeySettings {
        fn lowest<T: Ord + Copy>(own: Option<T>, other: Option<T>) -> Option<T> {
            match (own, other) {
                (Some(own), Some(other)) => Some(own.min(other)),
                (own, other) => own.or(other),
            }
        }
        let models = match (self.models, &ancestor.models) {
            (Some(own), Some(theirs)) => Some(own.into_iter().filter(|model| theirs.contains(model)).collect()),
            (own, theirs) => own.or_else(|| theirs.clone()),
        };
        KeySettings {
            name: self.name,
            models,
            budget: self.budget,
            expires_at: lowest(self.expires_at, ancestor.expires_at),
            rate_limit_per_minute: lowest(self.rate_limit_per_minute, ancestor.rate_limit_per_minute),
            max_concurrent_jobs: lowest(self.max_concurrent_jobs, ancestor.max_concurrent_jobs),
        }
    }
}

/// Where a key stands in its user's tree of keys: the keys above it (a key made with another key
/// is its child) and below it. A job counts against the budget and concurrency limit of its key
/// and of every ancestor; a request against the rate limit of each; revoking or expiring a key
/// stops its whole subtree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyLineage {
    /// The key's ancestors, its parent first, each with the limits of its own.
    pub ancestors: Vec<AncestorKey>,
    /// Every key below it (children, their children, …), revoked ones included: their jobs are
    /// the key's to see.
    pub descendants: Vec<KeyPrefix>,
}

/// An ancestor of a key, with what of its own settings its descendants' requests and jobs
/// count against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AncestorKey {
    /// Its prefix.
    pub prefix: KeyPrefix,
    /// Its own request rate limit.
    pub rate_limit_per_minute: Option<u32>,
    /// Whether it has a budget or a concurrency limit of its own.
    pub limits_jobs: bool,
}

impl KeyLineage {
    /// Whether a key with this lineage and `settings` (its effective ones) acts only within its
    /// own subtree: it has a parent, or any restricting setting.
    #[must_use]
    pub fn is_restricted(&self, settings: &KeySettings) -> bool {
        !self.ancestors.is_empty() || settings.restricts()
    }

    /// Whether an ancestor's budget or concurrency limit counts the key's jobs too.
    #[must_use]
    pub fn ancestors_limit_jobs(&self) -> bool {
        self.ancestors.iter().any(|ancestor| ancestor.limits_jobs)
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
        Err(BudgetExceeded { budget, used, cost, whose: BudgetOwner::Key })
    }
}

/// Whose budget refused a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetOwner {
    /// The key the request came with.
    Key,
    /// A key above it, whose budget counts its descendants' jobs too.
    Ancestor,
}

impl BudgetOwner {
    fn phrase(self) -> &'static str {
        match self {
            Self::Key => "this key's budget",
            Self::Ancestor => "the budget of the key that made this one (or one above it)",
        }
    }
}

/// A hold the key's budget does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{} is {} credits {}, {used} used; the request needs {cost}", .whose.phrase(), .budget.credits, .budget.period.phrase())]
pub struct BudgetExceeded {
    /// The key's budget.
    pub budget: KeyBudget,
    /// Held plus charged in the current period.
    pub used: Credits,
    /// The request's hold.
    pub cost: Credits,
    /// Whose budget it is.
    pub whose: BudgetOwner,
}

impl BudgetExceeded {
    /// The same refusal, by an ancestor's budget.
    #[must_use]
    pub fn by_ancestor(self) -> Self {
        Self { whose: BudgetOwner::Ancestor, ..self }
    }
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
        assert_eq!(exceeded, BudgetExceeded { budget, used: c(6), cost: c(5), whose: BudgetOwner::Key });
        assert_eq!(exceeded.to_string(), "this key's budget is 10 credits per day, 6 used; the request needs 5");
        assert!(exceeded.by_ancestor().to_string().starts_with("the budget of the key that made this one"));
    }

    #[test]
    fn a_key_is_wider_than_its_parent_by_the_first_field_that_is() {
        let model = |id: &str| ModelId::new(id.to_owned());
        let budget = |credits, period| Some(KeyBudget { credits: Credits::new(credits), period });
        let parent = KeySettings {
            models: Some(vec![model("a"), model("b")]),
            budget: budget(100, BudgetPeriod::Day),
            expires_at: Some(time::macros::datetime!(2027-01-01 0:00 UTC)),
            rate_limit_per_minute: Some(10),
            max_concurrent_jobs: Some(2),
            ..KeySettings::default()
        };
        let narrower =
            KeySettings { models: Some(vec![model("a")]), budget: budget(50, BudgetPeriod::Day), ..parent.clone() };
        assert_eq!(narrower.wider_than(&parent), None);
        assert_eq!(KeySettings { models: None, ..narrower.clone() }.wider_than(&parent), Some("models"));
        assert_eq!(KeySettings { budget: None, ..narrower.clone() }.wider_than(&parent), Some("budget"));
        let weekly = KeySettings { budget: budget(50, BudgetPeriod::Week), ..narrower.clone() };
        assert_eq!(weekly.wider_than(&parent), Some("budget"));
        let later = KeySettings { expires_at: Some(time::macros::datetime!(2027-01-02 0:00 UTC)), ..narrower.clone() };
        assert_eq!(later.wider_than(&parent), Some("expires_at"));
        let faster = KeySettings { rate_limit_per_minute: Some(11), ..narrower.clone() };
        assert_eq!(faster.wider_than(&parent), Some("rate_limit_per_minute"));
        let busier = KeySettings { max_concurrent_jobs: None, ..narrower.clone() };
        assert_eq!(busier.wider_than(&parent), Some("max_concurrent_jobs"));
        assert_eq!(KeySettings::default().wider_than(&KeySettings::default()), None);
    }

    #[test]
    fn a_child_inherits_what_it_leaves_out_and_is_narrowed_by_its_ancestors() {
        let model = |id: &str| ModelId::new(id.to_owned());
        let parent = KeySettings {
            models: Some(vec![model("a"), model("b")]),
            rate_limit_per_minute: Some(10),
            ..KeySettings::default()
        };
        let child = KeySettings { max_concurrent_jobs: Some(3), ..KeySettings::default() }.inheriting(&parent);
        assert_eq!(child.models, parent.models);
        assert_eq!((child.rate_limit_per_minute, child.max_concurrent_jobs), (Some(10), Some(3)));
        let narrowed_parent =
            KeySettings { models: Some(vec![model("b")]), rate_limit_per_minute: Some(4), ..KeySettings::default() };
        let effective = child.narrowed_by(&narrowed_parent);
        assert_eq!(effective.models, Some(vec![model("b")]));
        assert_eq!((effective.rate_limit_per_minute, effective.max_concurrent_jobs), (Some(4), Some(3)));
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
