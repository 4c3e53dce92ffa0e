//! The provider slots port: which key each job was sent with, or which provider it waits for,
//! kept in the store's one lock next to the jobs, so that counting a key's jobs in flight,
//! ranking the waiting jobs and taking a slot are one step. A slot counts while its job is not
//! final; a count drops the entries of final or purged jobs as it goes, so nothing needs to give
//! a slot back when a job ends.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use genjobs_domain::capacity::{Priority, ProviderKey, WaitingJobs, fair_order, free_slots, least_busy};
use genjobs_domain::ids::{JobId, UserId};
use genjobs_domain::ports::{ProviderSlots, StoreError};

use crate::{MemoryStore, State};

/// A job's place at a provider: the key whose slot it holds, or none while it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    provider: String,
    key_id: Option<String>,
}

/// Every job's place, by job.
pub(crate) type Slots = HashMap<JobId, Slot>;

impl State {
    /// Drops the places of jobs that ended or are gone.
    fn prune_slots(&mut self) {
        let jobs = &self.jobs;
        self.slots.retain(|id, _| jobs.get(id).is_some_and(|row| !row.job.state().is_final()));
    }

    /// The jobs in flight of each key of `provider`, and of each user there.
    fn slots_in_flight(&self, provider: &str) -> (BTreeMap<String, u64>, HashMap<UserId, u64>) {
        let (mut by_key, mut by_user) = (BTreeMap::new(), HashMap::new());
        for (id, slot) in self.slots.iter().filter(|(_, slot)| slot.provider == provider) {
            let (Some(key), Some(row)) = (&slot.key_id, self.jobs.get(id)) else { continue };
            *by_key.entry(key.clone()).or_insert(0) += 1;
            *by_user.entry(row.job.user_id()).or_insert(0) += 1;
        }
        (by_key, by_user)
    }

    /// The jobs waiting for `provider`, each with its owner and priority.
    fn waiting_for(&self, provider: &str) -> Vec<(JobId, UserId, Priority)> {
        self.slots
            .iter()
            .filter(|(_, slot)| slot.provider == provider && slot.key_id.is_none())
            .filter_map(|(id, _)| self.jobs.get(id).map(|row| (*id, row.job.user_id(), row.job.priority())))
            .collect()
    }
}

#[async_trait]
impl ProviderSlots for MemoryStore {
    async fn take_slot(
        &self,
        job_id: JobId,
        provider: &str,
        keys: &[ProviderKey],
    ) -> Result<Option<String>, StoreError> {
        let mut state = self.state();
        if let Some(Slot { key_id: Some(key), .. }) = state.slots.get(&job_id).filter(|slot| slot.provider == provider)
        {
            return Ok(Some(key.clone()));
        }
        state.slots.insert(job_id, Slot { provider: provider.to_owned(), key_id: None });
        state.prune_slots();
        let (by_key, by_user) = state.slots_in_flight(provider);
        let in_flight: Vec<u64> = keys.iter().map(|key| by_key.get(&key.id).copied().unwrap_or(0)).collect();
        let free = free_slots(keys, &in_flight);
        let ahead = fair_order(&state.waiting_for(provider), &by_user).iter().position(|id| *id == job_id);
        let ranked_in = ahead.is_some_and(|ahead| u64::try_from(ahead).unwrap_or(u64::MAX) < free);
        let Some(key) = least_busy(keys, &in_flight).filter(|_| ranked_in).map(|index| keys[index].id.clone()) else {
            return Ok(None);
        };
        state.slots.insert(job_id, Slot { provider: provider.to_owned(), key_id: Some(key.clone()) });
        Ok(Some(key))
    }

    async fn slot_provider(&self, job_id: JobId) -> Result<Option<String>, StoreError> {
        let mut state = self.state();
        state.prune_slots();
        Ok(state.slots.get(&job_id).map(|slot| slot.provider.clone()))
    }

    async fn release_slot(&self, job_id: JobId) -> Result<(), StoreError> {
        self.state().slots.remove(&job_id);
        Ok(())
    }

    async fn slots_in_flight(&self, provider: &str) -> Result<BTreeMap<String, u64>, StoreError> {
        let mut state = self.state();
        state.prune_slots();
        Ok(state.slots_in_flight(provider).0)
    }

    async fn next_in_line(&self, provider: &str, keys: &[ProviderKey]) -> Result<Vec<JobId>, StoreError> {
        let mut state = self.state();
        state.prune_slots();
        let (by_key, by_user) = state.slots_in_flight(provider);
        let in_flight: Vec<u64> = keys.iter().map(|key| by_key.get(&key.id).copied().unwrap_or(0)).collect();
        let free = usize::try_from(free_slots(keys, &in_flight)).unwrap_or(usize::MAX);
        Ok(fair_order(&state.waiting_for(provider), &by_user).into_iter().take(free).collect())
    }

    async fn slots_waiting(&self, provider: &str) -> Result<WaitingJobs, StoreError> {
        let mut state = self.state();
        state.prune_slots();
        let waiting = state.waiting_for(provider);
        let low = waiting.iter().filter(|(_, _, priority)| *priority == Priority::Low).count();
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        Ok(WaitingJobs { normal: count(waiting.len() - low), low: count(low) })
    }
}
