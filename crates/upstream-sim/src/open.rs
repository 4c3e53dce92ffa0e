//! The requests of each key that have not completed, counted without walking every request.
//! A request stays in the simulator's map after it ends (its result is fetched later), so a
//! count by walking the map made each submission cost as many steps as there were requests
//! before it: under a load test that grew to most of the simulator's time. Here each open
//! request is filed under the instant it completes, or as endless while that is not known (it
//! waits for a slot, or hangs), and a count first lets go of those whose instant has passed.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// The open requests of every key.
#[derive(Default)]
pub(crate) struct OpenRequests {
    keys: HashMap<Option<String>, KeyOpen>,
    /// Where each open request is filed: its key and the instant it completes.
    filed: HashMap<String, (Option<String>, Option<Instant>)>,
}

/// The open requests of one key.
#[derive(Default)]
struct KeyOpen {
    ending: BTreeSet<(Instant, String)>,
    endless: u64,
}

impl OpenRequests {
    /// Files request `id` of `key` as open until `end` (`None`: not known yet), in place of
    /// where it was filed before.
    pub(crate) fn file(&mut self, id: &str, key: Option<&str>, end: Option<Instant>) {
        self.close(id);
        let key = key.map(str::to_owned);
        let open = self.keys.entry(key.clone()).or_default();
        match end {
            Some(end) => {
                open.ending.insert((end, id.to_owned()));
            }
            None => open.endless += 1,
        }
        self.filed.insert(id.to_owned(), (key, end));
    }

    /// Lets go of request `id`: it ended before its time (a cancel).
    pub(crate) fn close(&mut self, id: &str) {
        let Some((key, end)) = self.filed.remove(id) else { return };
        let Some(open) = self.keys.get_mut(&key) else { return };
        match end {
            Some(end) => {
                open.ending.remove(&(end, id.to_owned()));
            }
            None => open.endless = open.endless.saturating_sub(1),
        }
    }

    /// How many requests of `key` have not completed at `now`.
    pub(crate) fn count(&mut self, key: Option<&str>, now: Instant) -> u64 {
        let Some(open) = self.keys.get_mut(&key.map(str::to_owned)) else { return 0 };
        while open.ending.first().is_some_and(|(end, _)| *end <= now) {
            if let Some((_, id)) = open.ending.pop_first() {
                self.filed.remove(&id);
            }
        }
        u64::try_from(open.ending.len()).unwrap_or(u64::MAX) + open.endless
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_key_counts_its_requests_until_each_one_s_end_and_endless_ones_until_refiled_or_closed() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut open = OpenRequests::default();
        open.file("a0", Some("a"), Some(at(100)));
        open.file("a1", Some("a"), Some(at(200)));
        open.file("a2", Some("a"), None);
        open.file("b0", Some("b"), Some(at(100)));
        assert_eq!(open.count(Some("a"), at(50)), 3);
        assert_eq!(open.count(Some("a"), at(100)), 2, "a0 completed at its end");
        open.file("a2", Some("a"), Some(at(300)));
        assert_eq!(open.count(Some("a"), at(250)), 1, "a2 took a slot and runs until 300");
        open.close("a2");
        assert_eq!(open.count(Some("a"), at(250)), 0, "a2 was canceled");
        assert_eq!(open.count(Some("b"), at(50)), 1, "another key's requests are its own");
        assert_eq!(open.count(None, at(50)), 0);
        let filed: Vec<&String> = open.filed.keys().collect();
        assert_eq!(filed, ["b0"], "completed and closed requests are let go of");
    }
}
