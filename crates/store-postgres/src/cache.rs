//! [`TtlCache`]: the pattern behind the per-process caches of the Postgres adapters that trust an
//! entry for a fixed time (API keys, leased rate-limit tokens), evicted early by `NOTIFY` where
//! another replica can change what they hold. Jobs are kept differently, see `job_cache`.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use genjobs_domain::ids::KeyPrefix;
use genjobs_domain::ports::Credential;

/// Entries beyond which expired ones are swept on the next insert, bounding memory.
const SWEEP_ABOVE: usize = 100_000;

/// A map whose entries live `ttl` after they are put. A zero `ttl` caches nothing.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    ttl: Duration,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// An empty cache trusting entries for `ttl`.
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<K, (Instant, V)>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live entry of `key`.
    pub fn get(&self, key: &K) -> Option<V> {
        self.entries().get(key).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, v)| v.clone())
    }

    /// Changes the live entry of `key` in place; `None` when there is none.
    pub fn update<R>(&self, key: &K, change: impl FnOnce(&mut V) -> R) -> Option<R> {
        let ttl = self.ttl;
        self.entries().get_mut(key).filter(|(at, _)| at.elapsed() < ttl).map(|(_, v)| change(v))
    }

    /// Puts `value` under `key` unless `keep_current` says the live entry there is to stay.
    pub fn put_unless(&self, key: K, value: V, keep_current: impl FnOnce(&V) -> bool) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.entries();
        if entries.len() > SWEEP_ABOVE {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
        }
        if entries.get(&key).is_some_and(|(at, current)| at.elapsed() < self.ttl && keep_current(current)) {
            return;
        }
        entries.insert(key, (Instant::now(), value));
    }

    /// Puts `value` under `key`.
    pub fn put(&self, key: K, value: V) {
        self.put_unless(key, value, |_| false);
    }

    /// Forgets `key`, so that its next use asks the database.
    pub fn forget(&self, key: &K) {
        self.entries().remove(key);
    }

    /// Forgets everything (after the listener lost notifications while reconnecting).
    pub fn clear(&self) {
        self.entries().clear();
    }
}

/// Credentials looked up recently, so that authentication does not cost a round trip on every
/// request. Shared with the event listener, which drops revoked keys as `NOTIFY` announces them.
pub type KeyCache = TtlCache<KeyPrefix, Vec<Credential>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_live_their_ttl_and_a_zero_ttl_caches_nothing() {
        let cache = TtlCache::new(Duration::from_millis(30));
        cache.put(1, "a");
        assert_eq!(cache.get(&1), Some("a"));
        assert_eq!(cache.update(&1, |v| *v = "b"), Some(()));
        assert_eq!(cache.get(&1), Some("b"));
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(cache.get(&1), None);
        assert_eq!(cache.update(&1, |v| *v = "c"), None);
        let off = TtlCache::new(Duration::ZERO);
        off.put(1, "a");
        assert_eq!(off.get(&1), None);
    }

    #[test]
    fn put_unless_keeps_what_it_is_told_to() {
        let cache = TtlCache::new(Duration::from_secs(60));
        cache.put("job", 3);
        cache.put_unless("job", 2, |kept| *kept > 2);
        assert_eq!(cache.get(&"job"), Some(3));
        cache.put_unless("job", 4, |kept| *kept > 4);
        assert_eq!(cache.get(&"job"), Some(4));
        cache.forget(&"job");
        assert_eq!(cache.get(&"job"), None);
    }
}
