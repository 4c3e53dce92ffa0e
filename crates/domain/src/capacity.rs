//! Provider capacity: the keys a provider account is called with, each with its cap of jobs in
//! flight (sent with that key and not final), and the rule that picks the key a job is sent on.
//!
//! When slots free, waiting jobs take them in fair order ([`fair_order`]): the user with the
//! fewest jobs in flight at that provider first, a user's own jobs oldest first, and on a tie the
//! job waiting longest.
//!
//! A key is known to stores and jobs by a fingerprint of its secret ([`ProviderKey::id`]), never by
//! its place in the operator's list: reordering the list, or adding a key, leaves every job on the
//! key that submitted it. Operators see only its last characters ([`ProviderKey::hint`]).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::ids::{JobId, UserId};

/// How soon a job goes to its provider when slots are scarce.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Sent in fair order with the other normal jobs.
    #[default]
    Normal,
    /// Sent only while no normal job waits for the same provider; a provider that takes a queue
    /// priority is asked to run it after its normal requests too.
    Low,
}

impl Priority {
    /// `normal` or `low`, as the API and stores name it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }

    /// The priority named `text`, if it is one.
    #[must_use]
    pub fn parse(text: &str) -> Option<Priority> {
        [Priority::Normal, Priority::Low].into_iter().find(|p| p.as_str() == text)
    }
}

/// What one key of a provider carries now, for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLoad {
    /// The key's last 4 characters.
    pub hint: String,
    /// Its jobs sent and not final.
    pub in_flight: u64,
    /// Its cap; 0 means none.
    pub max_in_flight: u32,
}

/// The jobs waiting, unsent, for a slot of one provider's keys, by priority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitingJobs {
    /// Normal jobs waiting.
    pub normal: u64,
    /// Low jobs waiting.
    pub low: u64,
}

/// A provider's keys and the jobs waiting for them, for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderLoad {
    /// The provider's name.
    pub provider: String,
    /// Each key, in the operator's order; none for a provider of one key without a cap, whose
    /// jobs take no slot.
    pub keys: Vec<KeyLoad>,
    /// The jobs waiting for a slot.
    pub waiting: WaitingJobs,
}

/// How many characters of a key operators see.
const HINT_CHARS: usize = 4;

/// One key of a provider account, as the service names it without showing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderKey {
    /// What a job records of the key that submitted it: the first 16 hex digits of the SHA-256
    /// of the secret.
    pub id: String,
    /// The key's last 4 characters.
    pub hint: String,
    /// Most jobs sent with this key and not final; 0 means no cap.
    pub max_in_flight: u32,
}

impl ProviderKey {
    /// The key `secret`, capped at `max_in_flight` jobs (0: no cap).
    #[must_use]
    pub fn of(secret: &str, max_in_flight: u32) -> Self {
        let digest = Sha256::digest(secret.as_bytes());
        let id = digest.iter().take(8).map(|byte| format!("{byte:02x}")).collect();
        let skip = secret.chars().count().saturating_sub(HINT_CHARS);
        Self { id, hint: secret.chars().skip(skip).collect(), max_in_flight }
    }

    /// Whether one more job may be sent with this key while `in_flight` are.
    #[must_use]
    pub fn has_room(&self, in_flight: u64) -> bool {
        self.max_in_flight == 0 || in_flight < u64::from(self.max_in_flight)
    }
}

/// The index of the key a new job is sent on, given how many jobs each key has in flight (in the
/// same order): the one with the fewest among those under their cap, the first listed on a tie;
/// `None` when every key is at its cap.
#[must_use]
pub fn least_busy(keys: &[ProviderKey], in_flight: &[u64]) -> Option<usize> {
    keys.iter()
        .zip(in_flight)
        .enumerate()
        .filter(|(_, (key, count))| key.has_room(**count))
        .min_by_key(|(index, (_, count))| (**count, *index))
        .map(|(index, _)| index)
}

/// How many more jobs `keys` take while each has `in_flight` (same order); `u64::MAX` when a key
/// has no cap.
#[must_use]
pub fn free_slots(keys: &[ProviderKey], in_flight: &[u64]) -> u64 {
    keys.iter()
        .zip(in_flight)
        .map(|(key, count)| match key.max_in_flight {
            0 => u64::MAX,
            cap => u64::from(cap).saturating_sub(*count),
        })
        .fold(0, u64::saturating_add)
}

/// The order in which `waiting` jobs (each with its owner and priority) take the slots that
/// free at one provider, given how many jobs each user has in flight there (`busy`): every
/// normal job before any low one; among them a user's own jobs oldest first, and across users
/// the job whose owner would have the fewest in flight once it runs, the older job first on a
/// tie. So a user with a burst gets one slot in turn with every user who has fewer, never all of
/// them. Job ids order by acceptance time.
#[must_use]
pub fn fair_order(waiting: &[(JobId, UserId, Priority)], busy: &HashMap<UserId, u64>) -> Vec<JobId> {
    let mut by_user: HashMap<(Priority, UserId), Vec<JobId>> = HashMap::new();
    for (job, user, priority) in waiting {
        by_user.entry((*priority, *user)).or_default().push(*job);
    }
    let mut ranked: Vec<(Priority, u64, JobId)> = Vec::with_capacity(waiting.len());
    for ((priority, user), mut jobs) in by_user {
        jobs.sort_unstable();
        let running = busy.get(&user).copied().unwrap_or(0);
        ranked.extend(jobs.into_iter().zip(running..).map(|(job, load)| (priority, load, job)));
    }
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, _, job)| job).collect()
}

/// A setting of keys or caps that the service refuses to start with; the message names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapacitySettingError {
    /// An item of a comma-separated list of keys is empty.
    #[error("{setting}: item {position} of the comma-separated list of keys is empty")]
    EmptyKey {
        /// The setting's name (its environment variable).
        setting: &'static str,
        /// The empty item's place in the list, from 1.
        position: usize,
    },
    /// A cap is negative or too large.
    #[error("{setting}: {value} is not a cap of jobs in flight (0 for none, or a positive number)")]
    Cap {
        /// The setting's name (its environment variable).
        setting: &'static str,
        /// What it was set to.
        value: i64,
    },
}

/// The keys of a comma-separated `value` of `setting`, each trimmed of surrounding blanks.
///
/// # Errors
/// [`CapacitySettingError::EmptyKey`] naming the setting when an item is empty.
pub fn key_list(setting: &'static str, value: &str) -> Result<Vec<String>, CapacitySettingError> {
    value
        .split(',')
        .map(str::trim)
        .enumerate()
        .map(|(index, key)| {
            if key.is_empty() {
                Err(CapacitySettingError::EmptyKey { setting, position: index + 1 })
            } else {
                Ok(key.to_owned())
            }
        })
        .collect()
}

/// The cap of jobs in flight per key that `value` of `setting` sets (0: none).
///
/// # Errors
/// [`CapacitySettingError::Cap`] naming the setting when it is negative or too large.
pub fn cap(setting: &'static str, value: i64) -> Result<u32, CapacitySettingError> {
    u32::try_from(value).map_err(|_| CapacitySettingError::Cap { setting, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(caps: &[u32]) -> Vec<ProviderKey> {
        caps.iter().enumerate().map(|(i, cap)| ProviderKey::of(&format!("secret-{i}"), *cap)).collect()
    }

    #[test]
    fn the_least_busy_key_under_its_cap_wins_and_ties_go_to_the_first_listed() {
        assert_eq!(least_busy(&keys(&[0, 0]), &[0, 0]), Some(0));
        assert_eq!(least_busy(&keys(&[0, 0]), &[3, 1]), Some(1));
        assert_eq!(least_busy(&keys(&[2, 4]), &[2, 3]), Some(1), "the first is full");
        assert_eq!(least_busy(&keys(&[2, 2]), &[2, 2]), None, "every key at its cap");
        assert_eq!(least_busy(&keys(&[3, 3, 3]), &[1, 0, 0]), Some(1));
    }

    #[test]
    fn a_key_is_named_by_a_fingerprint_and_shown_by_its_last_characters() {
        let key = ProviderKey::of("account-key-abcd1234", 4);
        assert_eq!(key.hint, "1234");
        assert_eq!(key.id.len(), 16);
        assert_ne!(key.id, ProviderKey::of("account-key-abcd1235", 4).id);
        assert_eq!(ProviderKey::of("ab", 0).hint, "ab");
    }

    #[test]
    fn a_list_with_an_empty_item_is_refused_naming_the_setting() {
        assert_eq!(key_list("GENJOBS_UPSTREAM_KEY", "a, b"), Ok(vec!["a".to_owned(), "b".to_owned()]));
        let refused = key_list("GENJOBS_UPSTREAM_KEY", "a,,b").unwrap_err();
        assert_eq!(refused, CapacitySettingError::EmptyKey { setting: "GENJOBS_UPSTREAM_KEY", position: 2 });
        assert!(refused.to_string().contains("GENJOBS_UPSTREAM_KEY"));
        assert!(key_list("GENJOBS_REPLICATE_TOKEN", "a,").is_err());
    }

    #[test]
    fn free_slots_add_up_and_a_key_without_a_cap_never_runs_out() {
        assert_eq!(free_slots(&keys(&[2, 3]), &[1, 3]), 1);
        assert_eq!(free_slots(&keys(&[2, 0]), &[2, 40]), u64::MAX);
        assert_eq!(free_slots(&keys(&[1]), &[4]), 0, "over a lowered cap is none free");
    }

    #[test]
    fn the_user_with_fewer_jobs_in_flight_comes_first_and_each_user_oldest_first() {
        let at = time::OffsetDateTime::now_utc();
        let ids: Vec<JobId> = (0..5).map(|i| JobId::new_at(at + time::Duration::milliseconds(i))).collect();
        let (big, small) = (UserId::new_at(at), UserId::new_at(at + time::Duration::SECOND));
        let normal = Priority::Normal;
        let waiting = [
            (ids[0], big, normal),
            (ids[1], big, normal),
            (ids[2], big, normal),
            (ids[3], small, normal),
            (ids[4], small, normal),
        ];
        let busy = HashMap::from([(big, 2)]);
        assert_eq!(fair_order(&waiting, &busy), [ids[3], ids[4], ids[0], ids[1], ids[2]]);
        let even = HashMap::from([(big, 1), (small, 1)]);
        assert_eq!(
            fair_order(&waiting, &even),
            [ids[0], ids[3], ids[1], ids[4], ids[2]],
            "turns alternate, the older job first on a tie"
        );
        let low = [(ids[0], small, Priority::Low), (ids[1], big, normal), (ids[2], small, normal)];
        assert_eq!(fair_order(&low, &busy), [ids[2], ids[1], ids[0]], "a low job only after every normal one");
    }

    #[test]
    fn a_negative_cap_is_refused_naming_the_setting() {
        assert_eq!(cap("GENJOBS_UPSTREAM_MAX_IN_FLIGHT", 0), Ok(0));
        assert_eq!(cap("GENJOBS_UPSTREAM_MAX_IN_FLIGHT", 4), Ok(4));
        let refused = cap("GENJOBS_REPLICATE_MAX_IN_FLIGHT", -1).unwrap_err();
        assert!(refused.to_string().starts_with("GENJOBS_REPLICATE_MAX_IN_FLIGHT"));
    }
}
