//! Keys as this store keeps them (a revoked key stays, marked), and what a key's jobs hold or
//! were charged, counted from the jobs themselves under the store's one lock, plus what
//! retention removed of their charges.

use std::collections::{BTreeMap, HashMap};

use genjobs_domain::credits::Credits;
use genjobs_domain::ids::KeyPrefix;
use genjobs_domain::job::{Job, JobState};
use genjobs_domain::keys::check_budget;
use genjobs_domain::ports::{AcceptError, KeyRecord, StoredKey};
use time::{Date, OffsetDateTime};

use super::State;
use crate::usage::utc_day;

/// A stored key and when it was revoked.
#[derive(Debug, Clone)]
pub(crate) struct MemoryKey {
    pub(crate) stored: StoredKey,
    pub(crate) revoked_at: Option<OffsetDateTime>,
    pub(crate) last_used_at: Option<OffsetDateTime>,
}

impl MemoryKey {
    pub(crate) fn record(&self) -> KeyRecord {
        let key = &self.stored;
        KeyRecord {
            prefix: key.prefix.clone(),
            user_id: key.user_id,
            settings: key.settings.clone(),
            created_at: key.created_at,
            revoked_at: self.revoked_at,
            last_used_at: self.last_used_at,
        }
    }
}

/// What a job counts against its key's budget: its hold until final, then its charge.
fn counted(job: &Job) -> u64 {
    match job.state() {
        JobState::Queued | JobState::Running => job.credits_held().get(),
        JobState::Succeeded => job.credits_actual().map_or(0, Credits::get),
        JobState::Failed | JobState::Canceled => 0,
    }
}

/// The charges of each key's jobs that retention removed, by the UTC day they were created: a
/// budget period starts at a day's 00:00 UTC, so whole days count exactly for every period.
#[derive(Debug, Default)]
pub(crate) struct PurgedCharges(HashMap<KeyPrefix, BTreeMap<Date, u64>>);

impl PurgedCharges {
    /// Keeps what `job`, a final job being removed, counted against its key's budget.
    pub(crate) fn add(&mut self, job: &Job) {
        let (Some(prefix), charged) = (job.key_prefix(), counted(job)) else { return };
        if charged > 0 {
            let day = self.0.entry(prefix.clone()).or_default().entry(utc_day(job.created_at())).or_default();
            *day = day.saturating_add(charged);
        }
    }

    /// What the removed jobs of the key of `prefix` created since `since` were charged.
    fn since(&self, prefix: &KeyPrefix, since: Option<OffsetDateTime>) -> u64 {
        let Some(days) = self.0.get(prefix) else { return 0 };
        let first = since.map_or(Date::MIN, utc_day);
        days.range(first..).map(|(_, credits)| *credits).fold(0, u64::saturating_add)
    }
}

impl State {
    /// The jobs submitted with the key of `prefix`.
    fn jobs_of_key<'s>(&'s self, prefix: &'s KeyPrefix) -> impl Iterator<Item = &'s Job> + 's {
        let owner = self.keys.get(prefix).map(|key| key.stored.user_id);
        owner
            .and_then(|owner| self.jobs_by_user.get(&owner))
            .into_iter()
            .flatten()
            .filter_map(|id| self.jobs.get(id).map(|row| &row.job))
            .filter(move |job| job.key_prefix() == Some(prefix))
    }

    /// What the key's jobs accepted since `since` hold or were charged, those retention removed
    /// included.
    pub(crate) fn key_used(&self, prefix: &KeyPrefix, since: Option<OffsetDateTime>) -> Credits {
        let used = self
            .jobs_of_key(prefix)
            .filter(|job| since.is_none_or(|since| job.created_at() >= since))
            .map(counted)
            .fold(self.purged_key_charges.since(prefix, since), u64::saturating_add);
        Credits::new(used)
    }

    /// Refuses `job` when its key's budget for the period that holds `now` does not take it.
    pub(crate) fn check_key_budget(&self, job: &Job, now: OffsetDateTime) -> Result<(), AcceptError> {
        let Some(prefix) = job.key_prefix() else { return Ok(()) };
        let Some(settings) = self.keys.get(prefix).map(|key| &key.stored.settings) else { return Ok(()) };
        if let Some(budget) = settings.budget {
            let used = self.key_used(prefix, budget.period.start(now));
            check_budget(budget, used, job.credits_held()).map_err(AcceptError::KeyBudgetExceeded)?;
        }
        Ok(())
    }

    /// Refuses `job` when its key has as many jobs not yet final as its limit.
    pub(crate) fn check_key_concurrency(&self, job: &Job) -> Result<(), AcceptError> {
        let Some(prefix) = job.key_prefix() else { return Ok(()) };
        let Some(limit) = self.keys.get(prefix).and_then(|key| key.stored.settings.max_concurrent_jobs) else {
            return Ok(());
        };
        let active = self.jobs_of_key(prefix).filter(|job| !job.state().is_final()).count();
        if u32::try_from(active).unwrap_or(u32::MAX) >= limit {
            return Err(AcceptError::KeyConcurrencyLimit { limit });
        }
        Ok(())
    }
}
