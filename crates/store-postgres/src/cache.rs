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
///
/// Every [`TtlCache::forget`] and [`TtlCache::clear`] starts a new generation: a value read from
/// the database before one, and put after it with [`TtlCache::put_if_current`], is dropped, since
/// it may be what was just forgotten (a key read as valid while its revocation committed).
#[derive(Debug)]
pub struct TtlCache<K, V> {
    ttl: Duration,
    entries: Mutex<Entries<K, V>>,
}

#[derive(Debug)]
struct Entries<K, V> {
    map: HashMap<K, (Instant, V)>,
    generation: u64,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// An empty cache trusting entries for `ttl`.
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(Entries { map: HashMap::new(), generation: 0 }) }
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current generation: take it before reading what will be put.
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Puts `value` under `key` unless something was forgotten since `generation`.
    pub fn put_if_current(&self, generation: u64, key: K, value: V) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.lock();
        if entries.generation == generation {
            Self::insert(&mut entries.map, self.ttl, key, value);
        }
    }

    fn insert(map: &mut HashMap<K, (Instant, V)>, ttl: Duration, key: K, value: V) {
        if map.len() > SWEEP_ABOVE {
            map.retain(|_, (at, _)| at.elapsed() < ttl);
        }
        map.insert(key, (Instant::now(), value));
    }

    /// The live entry of `key`.
    pub fn get(&self, key: &K) -> Option<V> {
        self.lock().map.get(key).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, v)| v.clone())
    }

    /// Changes the live entry of `key` in place; `None` when there is none.
    pub fn update<R>(&self, key: &K, change: impl FnOnce(&mut V) -> R) -> Option<R> {
        let ttl = self.ttl;
        self.lock().map.get_mut(key).filter(|(at, _)| at.elapsed() < ttl).map(|(_, v)| change(v))
    }

    /// Puts `value` under `key` unless `keep_current` says the live entry there is to stay.
    pub fn put_unless(&self, key: K, value: V, keep_current: impl FnOnce(&V) -> bool) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.lock();
        if entries.map.get(&key).is_some_and(|(at, current)| at.elapsed() < self.ttl && keep_current(current)) {
            return;
        }
        Self::insert(&mut entries.map, self.ttl, key, value);
    }

    /// Puts `value` under `key`.
    pub fn put(&self, key: K, value: V) {
        self.put_unless(key, value, |_| false);
    }

    /// Forgets `key`, so that its next use asks the database.
    pub fn forget(&self, key: &K) {
        let mut entries = self.lock();
        entries.map.remove(key);
        entries.generation += 1;
    }

    /// Forgets everything (after the listener lost notifications while reconnecting).
    pub fn clear(&self) {
        let mut entries = self.lock();
        entries.map.clear();
        entries.generation += 1;
    }
}

/// Credentials looked up recently, so that authentication does not cost a round trip on every
/// request; an empty list caches that no key has the prefix, so that a flood of made-up keys
/// costs one query per prefix, not one per request. Shared with the event listener, which drops
/// revoked keys as `NOTIFY` announces them.
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
    fn a_value_read_before_a_forget_is_not_put_after_it() {
        let cache = TtlCache::new(Duration::from_secs(60));
        let before = cache.generation();
        cache.forget(&"key");
        cache.put_if_current(before, "key", "read before the revocation");
        assert_eq!(cache.get(&"key"), None);
        cache.put_if_current(cache.generation(), "key", "read after");
        assert_eq!(cache.get(&"key"), Some("read after"));
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
