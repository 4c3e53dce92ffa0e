//! A per-address limit on requests answered 401: the per-user rate limit applies only once a key
//! is known, so without this a flood of made-up keys or admin tokens would cost a key look-up
//! each, unbounded. Past [`Unauthenticated::new`]'s allowance in a minute, a client address is
//! answered 429 before any look-up until the minute is over, unless it presents credentials this
//! replica knows to be valid (`crate::auth` asks). IPv6 clients are counted by their /64, which
//! one host usually holds whole; an IPv4-mapped peer (`::ffff:a.b.c.d`, as a dual-stack listener
//! sees IPv4 clients) by its IPv4 address, else every IPv4 client would share one /64. Counts are
//! per replica.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The window the allowance is counted over.
const WINDOW: Duration = Duration::from_secs(60);
/// Addresses beyond which finished windows are swept, and past which new ones go uncounted
/// rather than grow memory without end.
const MAX_ADDRESSES: usize = 100_000;

/// 401s by client address, in fixed one-minute windows.
#[derive(Debug)]
pub struct Unauthenticated {
    per_minute: u32,
    counts: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl Unauthenticated {
    /// Allows `per_minute` 401s per address and minute.
    #[must_use]
    pub fn new(per_minute: u32) -> Self {
        Self { per_minute, counts: Mutex::new(HashMap::new()) }
    }

    /// How long `ip` must wait, when it has used its allowance in the current window.
    pub fn blocked(&self, ip: IpAddr) -> Option<Duration> {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let (started, count) = counts.get(&key(ip))?;
        let left = WINDOW.checked_sub(started.elapsed())?;
        (*count >= self.per_minute).then_some(left)
    }

    /// Counts one request from `ip` answered 401.
    pub fn record(&self, ip: IpAddr) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.len() >= MAX_ADDRESSES {
            counts.retain(|_, (started, _)| started.elapsed() < WINDOW);
        }
        let key = key(ip);
        if counts.len() >= MAX_ADDRESSES && !counts.contains_key(&key) {
            return;
        }
        let entry = counts.entry(key).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= WINDOW {
            *entry = (Instant::now(), 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

/// What an address is counted under: itself for IPv4 (IPv4-mapped included), its /64 for IPv6.
fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        v4 @ IpAddr::V4(_) => v4,
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !u128::from(u64::MAX);
            IpAddr::V6(prefix.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_past_its_allowance_is_blocked_and_others_are_not() {
        let limit = Unauthenticated::new(3);
        let (client, other) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        for _ in 0..3 {
            assert_eq!(limit.blocked(client), None);
            limit.record(client);
        }
        assert!(limit.blocked(client).is_some_and(|wait| wait <= WINDOW));
        assert_eq!(limit.blocked(other), None);
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let limit = Unauthenticated::new(2);
        limit.record("2001:db8:1:2::1".parse().unwrap());
        limit.record("2001:db8:1:2:ffff::9".parse().unwrap());
        assert!(limit.blocked("2001:db8:1:2::77".parse().unwrap()).is_some());
        assert_eq!(limit.blocked("2001:db8:1:3::1".parse().unwrap()), None);
    }

    #[test]
    fn ipv4_mapped_peers_are_counted_as_their_ipv4_address() {
        assert_eq!(key("::ffff:192.0.2.7".parse().unwrap()), "192.0.2.7".parse::<IpAddr>().unwrap());
        let limit = Unauthenticated::new(2);
        limit.record("::ffff:192.0.2.7".parse().unwrap());
        limit.record("192.0.2.7".parse().unwrap());
        assert!(limit.blocked("::ffff:192.0.2.7".parse().unwrap()).is_some());
        assert!(limit.blocked("192.0.2.7".parse().unwrap()).is_some(), "one bucket, however it came");
        assert_eq!(limit.blocked("::ffff:192.0.2.8".parse().unwrap()), None, "not the /64 of every IPv4 client");
    }
}
