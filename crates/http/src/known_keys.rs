//! The keys this replica has seen let in, by hash: what lets a client already using a live key
//! past its address's spent allowance of 401s (`crate::unauthenticated`), while every other key
//! from that address is refused without a look-up. A key found here is only a reason to look it
//! up as usual: one revoked or expired since is refused then, and forgotten.
//!
//! Only keys that authenticated are added, so a flood of made-up keys cannot grow the set; it is
//! still bounded, for a replica that serves more keys than it keeps, by letting go of the half
//! seen least recently when it is full. A key let go of is only looked up again once it is seen.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};
use std::time::{Duration, Instant};

use genjobs_domain::ids::KeyHash;

/// Keys kept at most: 32 bytes of hash and an instant each, a few MiB in all.
const CAPACITY: usize = 65_536;
/// How stale a key's last sighting may grow before a request refreshes it: a key in use costs a
/// shared lock per request, and an exclusive one only this often.
const REFRESH: Duration = Duration::from_secs(60);

/// The keys seen valid, with when each was last seen.
#[derive(Debug, Default)]
pub(crate) struct KnownKeys {
    seen: RwLock<HashMap<[u8; 32], Instant>>,
}

impl KnownKeys {
    /// Whether the key of `hash` authenticated here and has not been refused since. Comparing
    /// hashes in variable time tells a guesser nothing: finding a stored hash needs its key.
    pub(crate) fn vouch_for(&self, hash: &KeyHash) -> bool {
        self.seen.read().unwrap_or_else(PoisonError::into_inner).contains_key(hash.as_bytes())
    }

    /// Notes that the key of `hash` was just let in.
    pub(crate) fn remember(&self, hash: &KeyHash) {
        let fresh =
            |seen: &HashMap<[u8; 32], Instant>| seen.get(hash.as_bytes()).is_some_and(|at| at.elapsed() < REFRESH);
        if fresh(&self.seen.read().unwrap_or_else(PoisonError::into_inner)) {
            return;
        }
        let mut seen = self.seen.write().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= CAPACITY && !seen.contains_key(hash.as_bytes()) {
            forget_older_half(&mut seen);
        }
        seen.insert(*hash.as_bytes(), Instant::now());
    }

    /// Forgets the key of `hash`, which was just refused.
    pub(crate) fn forget(&self, hash: &KeyHash) {
        self.seen.write().unwrap_or_else(PoisonError::into_inner).remove(hash.as_bytes());
    }
}

/// Keeps the keys of `seen` seen after its median sighting: done once per half a capacity of new
/// keys, so that adding a key costs a constant amount on average.
fn forget_older_half(seen: &mut HashMap<[u8; 32], Instant>) {
    let mut sightings: Vec<Instant> = seen.values().copied().collect();
    let middle = sightings.len() / 2;
    let (_, cutoff, _) = sightings.select_nth_unstable(middle);
    let cutoff = *cutoff;
    seen.retain(|_, at| *at > cutoff);
}

#[cfg(test)]
mod tests {
    use genjobs_domain::ids::ApiKey;

    use super::*;

    #[test]
    fn a_key_is_vouched_for_from_its_first_use_until_it_is_refused() {
        let known = KnownKeys::default();
        let (key, other) = (ApiKey::generate().hash(), ApiKey::generate().hash());
        assert!(!known.vouch_for(&key));
        known.remember(&key);
        assert!(known.vouch_for(&key));
        assert!(!known.vouch_for(&other));
        known.forget(&key);
        assert!(!known.vouch_for(&key));
    }

    #[test]
    fn a_full_set_lets_go_of_the_keys_seen_least_recently() {
        let mut seen = HashMap::new();
        let start = Instant::now();
        for i in 0..10u8 {
            seen.insert([i; 32], start + Duration::from_secs(u64::from(i)));
        }
        forget_older_half(&mut seen);
        let mut kept: Vec<u8> = seen.keys().map(|hash| hash[0]).collect();
        kept.sort_unstable();
        assert_eq!(kept, [6, 7, 8, 9]);
    }
}
