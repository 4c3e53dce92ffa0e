//! fal's per-key concurrency: an account runs only so many requests at once, and the rest stay
//! `IN_QUEUE` until one of its requests ends. A request takes a slot of its key (the
//! `Authorization` it was submitted with) when it is accepted if one is free, else at the moment
//! one frees, oldest first; its queue time and run time count from then.
//!
//! Slots are handed out lazily, whenever the requests are looked at, but at the instant they
//! freed (not at the look), so that a request's times do not depend on how often it is polled.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use crate::requests::SimRequest;

/// A request that took a slot: its id, its key, when it gives the slot back (`None`: never), and
/// how many of that key's requests (itself included) held a slot at that instant.
pub(crate) struct Admission {
    pub(crate) id: String,
    pub(crate) key: Option<String>,
    pub(crate) end: Option<Instant>,
    pub(crate) in_progress: u64,
}

/// Gives free slots to the requests that wait for one, per key and oldest first, each at the
/// instant its slot freed (up to `now`), with `limit` slots per key (0: as many as asked for).
pub(crate) fn admit_waiting(requests: &mut HashMap<String, SimRequest>, limit: u32, now: Instant) -> Vec<Admission> {
    let waiting_keys: BTreeSet<Option<String>> =
        requests.values().filter(|r| r.waits_for_slot()).map(|r| r.key.clone()).collect();
    let mut admissions = Vec::new();
    for key in waiting_keys {
        admit_for_key(requests, &key, limit, now, &mut admissions);
    }
    admissions
}

fn admit_for_key(
    requests: &mut HashMap<String, SimRequest>,
    key: &Option<String>,
    limit: u32,
    now: Instant,
    admissions: &mut Vec<Admission>,
) {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mine = || requests.iter().filter(move |(_, r)| &r.key == key);
    let mut waiting: Vec<(Instant, String)> =
        mine().filter(|(_, r)| r.waits_for_slot()).map(|(id, r)| (r.accepted, id.clone())).collect();
    waiting.sort();
    // When each slot holder gives its slot back; `None`: never.
    let mut holders: Vec<Option<Instant>> =
        mine().filter(|(_, r)| r.admitted.is_some()).map(|(_, r)| r.end()).collect();
    for (accepted, id) in waiting {
        let mut holding: Vec<Option<Instant>> =
            holders.iter().copied().filter(|end| end.is_none_or(|end| end > accepted)).collect();
        // Ends in order, the holders that never end last.
        holding.sort_by_key(|end| (end.is_none(), *end));
        let at = if limit == 0 || holding.len() < limit {
            accepted
        } else {
            match holding[holding.len() - limit] {
                Some(freed) => freed,
                None => return,
            }
        };
        if at > now {
            return;
        }
        let still_holding = holding.iter().filter(|end| end.is_none_or(|end| end > at)).count();
        let Some(request) = requests.get_mut(&id) else { continue };
        request.admitted = Some(at);
        let end = request.end();
        holders.push(end);
        let in_progress = u64::try_from(still_holding + 1).unwrap_or(u64::MAX);
        admissions.push(Admission { id, key: key.clone(), end, in_progress });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use genjobs_upstream_fal::schema::OutputShape;
    use serde_json::json;

    use super::*;
    use crate::requests::{Directives, Phase};

    fn request(key: &str, accepted: Instant, run_ms: u64) -> SimRequest {
        SimRequest {
            shape: OutputShape::Images { dimensions: true, seed: true },
            input: json!({}),
            accepted,
            admitted: None,
            queue: Duration::ZERO,
            run: Duration::from_millis(run_ms),
            directives: Directives::default(),
            status_calls: 0,
            result_calls: 0,
            canceled: false,
            completed: false,
            ended_at: None,
            invalid: None,
            key: Some(key.to_owned()),
        }
    }

    #[test]
    fn requests_beyond_the_limit_wait_and_take_a_slot_the_instant_one_frees() {
        let start = Instant::now();
        let mut requests = HashMap::new();
        for i in 0..3u64 {
            requests.insert(format!("a{i}"), request("a", start + Duration::from_millis(i), 100));
        }
        requests.insert("b0".into(), request("b", start + Duration::from_millis(5), 100));
        let admitted = admit_waiting(&mut requests, 2, start + Duration::from_millis(10));
        assert_eq!(admitted.len(), 3, "two of a's and b's one");
        assert!(requests["a2"].admitted.is_none(), "a's third waits for a slot");
        assert!(matches!(requests["a2"].phase(), Phase::Queued));
        admit_waiting(&mut requests, 2, start + Duration::from_millis(150));
        assert_eq!(requests["a2"].admitted, Some(start + Duration::from_millis(100)), "when a0 ended");
    }

    #[test]
    fn no_limit_admits_every_request_when_accepted() {
        let start = Instant::now();
        let mut requests = HashMap::new();
        for i in 0..5u64 {
            requests.insert(format!("a{i}"), request("a", start + Duration::from_millis(i), 100));
        }
        let admitted = admit_waiting(&mut requests, 0, start + Duration::from_millis(10));
        assert_eq!(admitted.iter().map(|a| a.in_progress).max(), Some(5));
    }

    #[test]
    fn a_request_that_never_ends_keeps_its_slot() {
        let start = Instant::now();
        let mut requests = HashMap::new();
        let mut hanging = request("a", start, 100);
        hanging.directives.hang = true;
        requests.insert("a0".into(), hanging);
        requests.insert("a1".into(), request("a", start + Duration::from_millis(1), 100));
        admit_waiting(&mut requests, 1, start + Duration::from_secs(60));
        assert!(requests["a1"].admitted.is_none());
    }
}
