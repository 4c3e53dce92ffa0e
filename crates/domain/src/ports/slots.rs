//! [`ProviderSlots`]: which provider key each job was sent with, so that a key's jobs in flight are
//! counted from what the store keeps (jobs holding a slot of it and not final), never from a
//! counter that a crash could leave wrong.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::capacity::{ProviderKey, WaitingJobs};
use crate::ids::JobId;
use crate::ports::StoreError;

/// The slots of providers' keys. A job holds at most one slot; it counts against its key while
/// the job is not final, and stops counting the moment the job's final state is committed. A job
/// that found no slot is recorded as waiting for that provider, and waiting jobs take the slots
/// that free in fair order ([`crate::capacity::fair_order`]).
///
/// # Errors
/// [`StoreError`] when the store cannot answer; nothing was taken or given back then.
#[cfg_attr(feature = "mocks", mockall::automock)]
#[async_trait]
pub trait ProviderSlots: Send + Sync {
    /// Gives `job_id` a slot of `provider`'s key that [`crate::capacity::least_busy`] picks among
    /// `keys` (in the operator's order), and answers that key's [`ProviderKey::id`]; `None` when
    /// no slot is free for it: every key is at its cap, or the free slots go to waiting jobs that
    /// come before it in fair order. The job is then recorded as waiting for `provider`. Counting
    /// and taking are one atomic step across every replica on the store, so that no key ever goes
    /// over its cap. A job that holds a slot of `provider` already keeps it (and gets its key
    /// again); one holding a slot or waiting elsewhere gives that up.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot answer.
    async fn take_slot(
        &self,
        job_id: JobId,
        provider: &str,
        keys: &[ProviderKey],
    ) -> Result<Option<String>, StoreError>;

    /// The provider whose slot `job_id` holds or waits for; `None` when it has no place at any.
    /// A job that a refusal moved to its next route waits there, so that its next look goes on
    /// at that provider rather than back at the one that refused it.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot answer.
    async fn slot_provider(&self, job_id: JobId) -> Result<Option<String>, StoreError>;

    /// Gives back the slot of a job whose submission provably never reached the provider.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot answer.
    async fn release_slot(&self, job_id: JobId) -> Result<(), StoreError>;

    /// How many jobs each key of `provider` has in flight, by [`ProviderKey::id`]; a key with
    /// none may be absent. Waiting jobs hold no slot and are not counted.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot answer.
    async fn slots_in_flight(&self, provider: &str) -> Result<BTreeMap<String, u64>, StoreError>;

    /// The jobs waiting for `provider` that the slots free now among `keys` would go to, first
    /// in fair order first ([`crate::capacity::fair_order`], the rule
    /// [`ProviderSlots::take_slot`] applies), at most as many as there are free slots. Only
    /// advice: it takes nothing and locks nothing, so that a driver wakes these jobs alone when
    /// a slot frees rather than every waiting job; each still takes its slot atomically.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot answer.
    async fn next_in_line(&self, provider: &str, keys: &[ProviderKey]) -> Result<Vec<JobId>, StoreError>;

    /// How many jobs wait, unsent, for a slot of `provider`'s keys, by priority.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot answer.
    async fn slots_waiting(&self, provider: &str) -> Result<WaitingJobs, StoreError>;
}
