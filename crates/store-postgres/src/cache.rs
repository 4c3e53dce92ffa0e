//! [`TtlCache`]: the pattern behind the per-process caches of the Postgres adapters that trust an
//! entry for a fixed time (leased rate-limit tokens, key use records), and [`KeyCache`], which
//! trusts a key found for as long as the listener hears every change of keys. Jobs are kept
//! differently, see `job_cache`.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use genjobs_domain::ids::KeyPrefix;
use genjobs_domain::ports::Credential;
// tokio's clock is std's, except in a test whose clock is paused: time passes there unwaited.
use tokio::time::Instant;

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

/// Credentials looked up, so that authentication does not cost a round trip on every request.
/// Shared with the event listener, which drops a prefix as `NOTIFY` announces a change of its key
/// (revocation, new settings, its user's new limits or tier).
///
/// A key found is trusted until such an announcement for as long as the listener is connected
/// ([`KeyCache::listening`]): every change of what a credential holds is announced, so a steady
/// client's requests cost no key look-up at all (with a time-to-live they cost one per key per
/// `ttl`). While the listener is lost, and for an empty list (no key has the prefix, cached so
/// that a flood of made-up keys costs one query per prefix; creations are not announced), an
/// entry lives `ttl` only. A zero `ttl` caches nothing.
#[derive(Debug)]
pub struct KeyCache {
    entries: TtlCache<KeyPrefix, Vec<Credential>>,
    ttl: Duration,
    /// Since when the listener has heard every announcement; `None` while it is lost.
    listening_since: Mutex<Option<Instant>>,
}

/// How long a key found is trusted while the listener is connected: its announcements are what
/// keep it current, this only bounds the life of an entry whose key is no longer presented.
const TRUSTED_WHILE_LISTENING: Duration = Duration::from_secs(24 * 60 * 60);

impl KeyCache {
    /// An empty cache; entries live `ttl` until the listener says it is
    /// [`listening`](KeyCache::listening).
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        let kept = if ttl.is_zero() { Duration::ZERO } else { ttl.max(TRUSTED_WHILE_LISTENING) };
        Self { entries: TtlCache::new(kept), ttl, listening_since: Mutex::new(None) }
    }

    fn listening_since(&self) -> Option<Instant> {
        *self.listening_since.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The credentials of `prefix`, while they are trusted: for `ttl`, or, when a key was found
    /// since the listener last connected, until it is forgotten.
    pub fn get(&self, prefix: &KeyPrefix) -> Option<Vec<Credential>> {
        let since = self.listening_since();
        let mut entries = self.entries.lock();
        let (at, found) = entries.map.get(prefix)?;
        let announced = since.is_some_and(|since| *at >= since) && !found.is_empty();
        if announced || at.elapsed() < self.ttl {
            return Some(found.clone());
        }
        entries.map.remove(prefix);
        None
    }

    /// The current generation: take it before reading what will be put.
    pub fn generation(&self) -> u64 {
        self.entries.generation()
    }

    /// Puts the credentials of `prefix` unless something was forgotten since `generation`.
    pub fn put_if_current(&self, generation: u64, prefix: KeyPrefix, found: Vec<Credential>) {
        self.entries.put_if_current(generation, prefix, found);
    }

    /// Forgets `prefix`, so that its next use asks the database.
    pub fn forget(&self, prefix: &KeyPrefix) {
        self.entries.forget(prefix);
    }

    /// Forgets everything.
    pub fn clear(&self) {
        self.entries.clear();
    }

    /// The listener is connected and hears every announcement from now on: keys found from now
    /// are trusted until announced. What was kept before lives `ttl` only, and a look-up begun
    /// before keeps nothing (it may have read what a missed announcement changed).
    pub fn listening(&self) {
        let mut since = self.listening_since.lock().unwrap_or_else(PoisonError::into_inner);
        self.entries.lock().generation += 1;
        *since = Some(Instant::now());
    }

    /// The listener is lost: announcements may be missed, so entries live `ttl` only.
    pub fn lost(&self) {
        *self.listening_since.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn entries_live_their_ttl_and_a_zero_ttl_caches_nothing() {
        let cache = TtlCache::new(Duration::from_millis(30));
        cache.put(1, "a");
        assert_eq!(cache.get(&1), Some("a"));
        assert_eq!(cache.update(&1, |v| *v = "b"), Some(()));
        assert_eq!(cache.get(&1), Some("b"));
        tokio::time::advance(Duration::from_millis(40)).await;
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

    fn credential(prefix: &KeyPrefix) -> Credential {
        let key = genjobs_domain::ids::ApiKey::generate();
        let user = genjobs_domain::ids::UserId::new_at(time::OffsetDateTime::now_utc());
        let stored = genjobs_domain::ports::StoredKey::of(&key, user, time::OffsetDateTime::now_utc());
        Credential {
            hash: stored.hash,
            prefix: prefix.clone(),
            user_id: user,
            rate_limit_per_minute: 60,
            price_percent: genjobs_domain::catalog::PricePercent::FULL,
            settings: stored.settings,
            own_rate_limit_per_minute: None,
            lineage: genjobs_domain::keys::KeyLineage::default(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_found_is_trusted_while_listening_until_forgotten() {
        let cache = KeyCache::new(Duration::from_millis(30));
        let (found, made_up) = (KeyPrefix::of("gj_found"), KeyPrefix::of("gj_madeup"));
        cache.listening();
        cache.put_if_current(cache.generation(), found.clone(), vec![credential(&found)]);
        cache.put_if_current(cache.generation(), made_up.clone(), Vec::new());
        tokio::time::advance(Duration::from_millis(40)).await;
        assert_eq!(cache.get(&found).map(|c| c.len()), Some(1), "trusted past the ttl while listening");
        assert!(cache.get(&made_up).is_none(), "a prefix no key has lives the ttl only");
        cache.forget(&found);
        assert!(cache.get(&found).is_none(), "an announcement drops it");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_listener_brings_back_the_ttl_and_only_keys_found_while_listening_are_trusted() {
        let cache = KeyCache::new(Duration::from_millis(30));
        let prefix = KeyPrefix::of("gj_found");
        cache.listening();
        cache.put_if_current(cache.generation(), prefix.clone(), vec![credential(&prefix)]);
        cache.lost();
        assert!(cache.get(&prefix).is_some(), "young enough for the ttl");
        tokio::time::advance(Duration::from_millis(40)).await;
        assert!(cache.get(&prefix).is_none(), "announcements may have been missed");
        cache.put_if_current(cache.generation(), prefix.clone(), vec![credential(&prefix)]);
        let begun_while_deaf = cache.generation();
        // The listener connects after that look-up, if only by a tick.
        tokio::time::advance(Duration::from_millis(1)).await;
        cache.listening();
        assert!(cache.get(&prefix).is_some(), "what was found while deaf lives its ttl");
        tokio::time::advance(Duration::from_millis(40)).await;
        assert!(cache.get(&prefix).is_none(), "but is not trusted beyond it");
        cache.put_if_current(begun_while_deaf, prefix.clone(), vec![credential(&prefix)]);
        assert!(cache.get(&prefix).is_none(), "a look-up begun while deaf keeps nothing");
        let off = KeyCache::new(Duration::ZERO);
        off.listening();
        off.put_if_current(off.generation(), prefix.clone(), vec![credential(&prefix)]);
        assert!(off.get(&prefix).is_none(), "a zero ttl caches nothing");
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
