//! Which network addresses the service may call out to on someone else's say-so: a provider's
//! output links and clients' webhook URLs both name hosts the service then connects to, and
//! neither may reach the service's own machine or private network.

use std::net::IpAddr;

/// Whether `ip` is a public address: not loopback, private, link-local, unique-local,
/// unspecified, multicast, broadcast or shared (carrier-grade NAT). An IPv4-mapped IPv6 address
/// is judged as its IPv4 one.
///
/// ```
/// use genjobs_domain::address::is_public;
///
/// assert!(is_public("93.184.216.34".parse().unwrap()));
/// assert!(!is_public("::ffff:10.0.0.1".parse().unwrap()));
/// ```
#[must_use]
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.octets()[0] == 100 && (64..128).contains(&v4.octets()[1]))
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => {
                let first = v6.segments()[0];
                !(v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for private in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "100.64.0.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "2606:2800:220:1::1", "::ffff:93.184.216.34"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
