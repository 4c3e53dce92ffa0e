//! Keys as this store keeps them (a revoked key stays, marked), and what a key's jobs hold or
//! were charged, counted from the jobs themselves under the store's one lock, plus what
//! retention removed of their charges.

use std::collections::{BTreeMap, HashMap};

use genjobs_domain::credits::Credits;
use genjobs_domain::ids::KeyPrefix;
use genjobs_domain::job::{Job, JobState};
use genjobs_domain::keys::{AncestorKey, KeyLineage, check_budget};
use genjobs_domain::ports::{AcceptError, Credential, KeyRecord, StoredKey};
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
            parent: key.parent.clone(),
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
    /// The keys above the key of `prefix`, its parent first.
    fn ancestors<'s>(&'s self, prefix: &KeyPrefix) -> impl Iterator<Item = &'s MemoryKey> + 's {
        let parent = self.keys.get(prefix).and_then(|key| key.stored.parent.as_ref());
        std::iter::successors(parent.and_then(|parent| self.keys.get(parent)), |key| {
            key.stored.parent.as_ref().and_then(|parent| self.keys.get(parent))
        })
    }

    /// Every key below the key of `prefix`, revoked ones included.
    pub(crate) fn descendants(&self, prefix: &KeyPrefix) -> Vec<KeyPrefix> {
        let mut found = Vec::new();
        let mut next = vec![prefix.clone()];
        while let Some(parent) = next.pop() {
            for key in self.keys.values().filter(|key| key.stored.parent.as_ref() == Some(&parent)) {
                found.push(key.stored.prefix.clone());
                next.push(key.stored.prefix.clone());
            }
        }
        found
    }

    /// Whether the key of `key` is `root` or below it.
    fn in_subtree(&self, key: &KeyPrefix, root: &KeyPrefix) -> bool {
        key == root || self.ancestors(key).any(|ancestor| &ancestor.stored.prefix == root)
    }

    /// The credentials of the key of `prefix`: none when it or an ancestor is revoked; its
    /// settings narrowed by every ancestor's.
    pub(crate) fn credential(&self, prefix: &KeyPrefix) -> Option<Credential> {
        let key = self.keys.get(prefix).filter(|key| key.revoked_at.is_none())?;
        let user = self.users.get(&key.stored.user_id)?;
        let mut settings = key.stored.settings.clone();
        let mut ancestors = Vec::new();
        for ancestor in self.ancestors(prefix) {
            if ancestor.revoked_at.is_some() {
                return None;
            }
            let own = &ancestor.stored.settings;
            settings = settings.narrowed_by(own);
            ancestors.push(AncestorKey {
                prefix: ancestor.stored.prefix.clone(),
                rate_limit_per_minute: own.rate_limit_per_minute,
                limits_jobs: own.limits_jobs(),
            });
        }
        Some(Credential {
            hash: key.stored.hash,
            prefix: prefix.clone(),
            user_id: key.stored.user_id,
            rate_limit_per_minute: user.limits.rate_limit_per_minute,
            price_percent: user.price_percent,
            own_rate_limit_per_minute: key.stored.settings.rate_limit_per_minute,
            settings,
            lineage: KeyLineage { ancestors, descendants: self.descendants(prefix) },
        })
    }

    /// The jobs submitted with the key of `prefix` or any key below it.
    fn jobs_of_subtree<'s>(&'s self, prefix: &'s KeyPrefix) -> impl Iterator<Item = &'s Job> + 's {
        let owner = self.keys.get(prefix).map(|key| key.stored.user_id);
        owner
            .and_then(|owner| self.jobs_by_user.get(&owner))
            .into_iter()
            .flatten()
            .filter_map(|id| self.jobs.get(id).map(|row| &row.job))
            .filter(move |job| job.key_prefix().is_some_and(|key| self.in_subtree(key, prefix)))
    }

    /// What the jobs of the key's subtree accepted since `since` hold or were charged, those
    /// retention removed included.
    pub(crate) fn key_used(&self, prefix: &KeyPrefix, since: Option<OffsetDateTime>) -> Credits {
        let purged = std::iter::once(prefix.clone())
            .chain(self.descendants(prefix))
            .map(|key| self.purged_key_charges.since(&key, since))
            .fold(0, u64::saturating_add);
        let used = self
            .jobs_of_subtree(prefix)
            .filter(|job| since.is_none_or(|since| job.created_at() >= since))
            .map(counted)
            .fold(purged, u64::saturating_add);
        Credits::new(used)
    }

    /// The key of `job` and every key above it, the key first.
    fn chain_of<'s>(&'s self, job: &Job) -> impl Iterator<Item = &'s MemoryKey> + 's {
        self.chain_of_key(job.key_prefix())
    }

    /// The key of `prefix` and every key above it, the key first.
    fn chain_of_key<'s>(&'s self, prefix: Option<&KeyPrefix>) -> impl Iterator<Item = &'s MemoryKey> + 's {
        let key = prefix.and_then(|prefix| self.keys.get(prefix));
        let ancestors = key.map(|key| self.ancestors(&key.stored.prefix));
        key.into_iter().chain(ancestors.into_iter().flatten())
    }

    /// Refuses `job` when the budget, for the period that holds `now`, of its key or of any key
    /// above it does not take it.
    pub(crate) fn check_key_budget(&self, job: &Job, now: OffsetDateTime) -> Result<(), AcceptError> {
        self.check_key_budget_for(job.key_prefix(), job.credits_held(), now)
    }

    /// Refuses a hold of `credits` on the key of `prefix` when the budget, for the period that
    /// holds `now`, of that key or of any key above it does not take it: one job's, or a whole
    /// batch's.
    pub(crate) fn check_key_budget_for(
        &self,
        prefix: Option<&KeyPrefix>,
        credits: Credits,
        now: OffsetDateTime,
    ) -> Result<(), AcceptError> {
        for (depth, key) in self.chain_of_key(prefix).enumerate() {
            if let Some(budget) = key.stored.settings.budget {
                let used = self.key_used(&key.stored.prefix, budget.period.start(now));
                check_budget(budget, used, credits).map_err(|exceeded| {
                    AcceptError::KeyBudgetExceeded(if depth == 0 { exceeded } else { exceeded.by_ancestor() })
                })?;
            }
        }
        Ok(())
    }

    /// Refuses `job` when its key or any key above it has as many jobs not yet final in its
    /// subtree as its limit. Batch items do not count: a key's limit, like its owner's, never
    /// lets a batch stop the jobs submitted on their own.
    pub(crate) fn check_key_concurrency(&self, job: &Job) -> Result<(), AcceptError> {
        for key in self.chain_of(job) {
            let Some(limit) = key.stored.settings.max_concurrent_jobs else { continue };
            let active = self
                .jobs_of_subtree(&key.stored.prefix)
                .filter(|job| !job.state().is_final() && job.batch().is_none())
                .count();
            if u32::try_from(active).unwrap_or(u32::MAX) >= limit {
                return Err(AcceptError::KeyConcurrencyLimit { limit });
            }
        }
        Ok(())
    }
}
