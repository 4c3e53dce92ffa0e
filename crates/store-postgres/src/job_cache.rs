//! [`JobCache`]: the jobs a replica has seen, served without a database query for as long as the
//! replica hears every change announced on `NOTIFY`.
//!
//! An entry has no lifetime: it is right until a change of its job is announced, and every commit
//! is announced (a new state by the use cases, any other change by the store itself). What makes
//! that safe is knowing when an announcement may have been missed:
//! - while the listener is not connected the cache serves nothing and keeps nothing, and each
//!   time the listener is lost or found again the whole cache is dropped ([`JobCache::lost`],
//!   [`JobCache::listening`]);
//! - a read races the announcement of a change it did not see: the row is read, another replica
//!   commits and announces, the listener evicts (nothing yet), then the stale row is kept. So
//!   each database read or commit is bracketed by a [`Reading`]: an announcement for its job
//!   while it runs, or a change of the listener's state, makes it keep nothing.
//!
//! Memory is bounded by `capacity` entries with two generations: hits move an entry to the young
//! one; when the young one holds half the capacity the old one is dropped and the young one
//! becomes old. So a job read at least once per generation stays, and a job nobody reads any more
//! (a final job its client stopped polling) goes within two: least recently used, approximately,
//! at O(1) per read and with no list to keep in order.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use genjobs_domain::ids::JobId;
use genjobs_domain::job::Job;

/// The jobs this replica has seen, kept true by the listener.
#[derive(Debug)]
pub struct JobCache {
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    young: HashMap<JobId, Job>,
    old: HashMap<JobId, Job>,
    /// Database reads and commits under way, by job: how many, and whether a change of the job
    /// was announced since the first began.
    reading: HashMap<JobId, (usize, bool)>,
    /// Whether the listener is connected, so that every change is heard.
    listening: bool,
    /// Counts the listener's losses and recoveries: a read that began in another epoch keeps
    /// nothing.
    epoch: u64,
}

impl State {
    fn forget(&mut self, id: &JobId) {
        self.young.remove(id);
        self.old.remove(id);
    }

    fn clear(&mut self) {
        self.young.clear();
        self.old.clear();
        self.epoch += 1;
    }
}

impl JobCache {
    /// An empty cache of at most `capacity` jobs (0 caches nothing), serving nothing until
    /// the listener says it is [`listening`](JobCache::listening).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self { capacity, state: Mutex::new(State::default()) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept job `id`, while the listener is connected.
    pub fn get(&self, id: &JobId) -> Option<Job> {
        let mut state = self.state();
        if !state.listening {
            return None;
        }
        if let Some(job) = state.young.get(id) {
            return Some(job.clone());
        }
        let job = state.old.remove(id)?;
        self.put_young(&mut state, *id, job.clone());
        Some(job)
    }

    /// Marks the start of a database read or commit of job `id`; what it finds is kept through
    /// [`Reading::keep`] only if nothing may have changed meanwhile unheard.
    pub fn reading(&self, id: JobId) -> Reading<'_> {
        let mut state = self.state();
        let epoch = state.epoch;
        state.reading.entry(id).or_insert((0, false)).0 += 1;
        Reading { cache: self, id, epoch }
    }

    /// Keeps `job`, which this replica has just written and nobody else knows of yet (a job it
    /// accepted), unless a newer version is kept.
    pub fn keep_new(&self, job: &Job) {
        let mut state = self.state();
        if state.listening {
            self.put_if_newer(&mut state, job);
        }
    }

    /// Forgets job `id`: a change of it was announced.
    pub fn forget(&self, id: &JobId) {
        let mut state = self.state();
        state.forget(id);
        if let Some((_, changed)) = state.reading.get_mut(id) {
            *changed = true;
        }
    }

    /// The listener is connected and has subscribed: from now on every change is heard.
    pub fn listening(&self) {
        let mut state = self.state();
        state.clear();
        state.listening = true;
    }

    /// The listener lost its connection: changes may go unheard, so nothing is served or kept
    /// until it is [`listening`](JobCache::listening) again.
    pub fn lost(&self) {
        let mut state = self.state();
        state.clear();
        state.listening = false;
    }

    /// Whether kept jobs are served (the listener is connected).
    #[must_use]
    pub fn is_serving(&self) -> bool {
        self.state().listening
    }

    fn put_if_newer(&self, state: &mut State, job: &Job) {
        let id = job.id();
        let kept = state.young.get(&id).or_else(|| state.old.get(&id));
        if kept.is_some_and(|kept| kept.version() > job.version()) {
            return;
        }
        state.old.remove(&id);
        self.put_young(state, id, job.clone());
    }

    fn put_young(&self, state: &mut State, id: JobId, job: Job) {
        if self.capacity == 0 {
            return;
        }
        if state.young.len() >= self.capacity.div_ceil(2) {
            state.old = std::mem::take(&mut state.young);
        }
        state.young.insert(id, job);
    }
}

/// A database read or commit of one job under way (see [`JobCache::reading`]). Dropped
/// without [`keep`](Reading::keep) (an error, a canceled request), it keeps nothing.
#[must_use]
pub struct Reading<'a> {
    cache: &'a JobCache,
    id: JobId,
    epoch: u64,
}

impl Reading<'_> {
    /// Keeps `job`, what the database said of it, unless a change of it was announced since the
    /// read began, the listener was lost or found meanwhile, or a newer version is kept.
    pub fn keep(self, job: &Job) {
        let mut state = self.cache.state();
        let changed = state.reading.get(&self.id).is_some_and(|(_, changed)| *changed);
        if state.listening && state.epoch == self.epoch && !changed {
            self.cache.put_if_newer(&mut state, job);
        }
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        let mut state = self.cache.state();
        if let Some((count, _)) = state.reading.get_mut(&self.id) {
            *count -= 1;
            if *count == 0 {
                state.reading.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use genjobs_domain::ids::UserId;
    use genjobs_domain::job::Trigger;
    use time::OffsetDateTime;

    use super::*;

    fn job() -> Job {
        let now = OffsetDateTime::now_utc();
        genjobs_store_contract::cases::new_job(UserId::new_at(now), 10, now)
    }

    fn listening(capacity: usize) -> JobCache {
        let cache = JobCache::new(capacity);
        cache.listening();
        cache
    }

    #[test]
    fn nothing_is_served_or_kept_while_the_listener_is_away() {
        let cache = JobCache::new(10);
        let job = job();
        cache.reading(job.id()).keep(&job);
        assert!(cache.get(&job.id()).is_none(), "kept before the listener listened");
        cache.listening();
        cache.reading(job.id()).keep(&job);
        assert_eq!(cache.get(&job.id()).map(|j| j.id()), Some(job.id()));
        cache.lost();
        assert!(cache.get(&job.id()).is_none(), "served while the listener was away");
        cache.listening();
        assert!(cache.get(&job.id()).is_none(), "kept across a loss of the listener");
    }

    #[test]
    fn a_read_that_an_announcement_overtook_keeps_nothing() {
        let cache = listening(10);
        let job = job();
        let read = cache.reading(job.id());
        cache.forget(&job.id());
        read.keep(&job);
        assert!(cache.get(&job.id()).is_none());
        cache.reading(job.id()).keep(&job);
        assert!(cache.get(&job.id()).is_some(), "a read begun after the announcement keeps");
    }

    #[test]
    fn a_read_across_a_reconnection_keeps_nothing() {
        let cache = listening(10);
        let job = job();
        let read = cache.reading(job.id());
        cache.lost();
        cache.listening();
        read.keep(&job);
        assert!(cache.get(&job.id()).is_none());
    }

    #[test]
    fn an_older_version_never_replaces_a_newer_one() {
        let cache = listening(10);
        let queued = job();
        let now = OffsetDateTime::now_utc();
        let canceled = queued.apply(Trigger::Cancel, now).unwrap().into_job();
        cache.reading(queued.id()).keep(&canceled);
        cache.reading(queued.id()).keep(&queued);
        assert_eq!(cache.get(&queued.id()).map(|j| j.version()), Some(canceled.version()));
    }

    #[test]
    fn jobs_read_each_generation_stay_and_the_others_go() {
        let cache = listening(4);
        let polled = job();
        cache.reading(polled.id()).keep(&polled);
        let others: Vec<Job> = (0..8).map(|_| job()).collect();
        for other in &others {
            cache.reading(other.id()).keep(other);
            assert!(cache.get(&polled.id()).is_some(), "a job read every generation was evicted");
        }
        let kept = others.iter().filter(|o| cache.get(&o.id()).is_some()).count();
        assert!(kept <= 4, "{kept} kept past the capacity");
        assert!(cache.get(&others[0].id()).is_none(), "the least recently read stayed");
        assert!(JobCache::new(0).get(&polled.id()).is_none());
        let off = listening(0);
        off.reading(polled.id()).keep(&polled);
        assert!(off.get(&polled.id()).is_none(), "a capacity of 0 kept a job");
    }
}
