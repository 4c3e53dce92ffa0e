//! Which network addresses the service may call out to on someone else's say-so: a provider's
//! output links, clients' webhook URLs and image inputs all name hosts, and none may reach the
//! service's own machine, its private network or any range set aside for special use.
//!
//! The rule is an allow-list, not a deny-list: an address passes only when it is global unicast
//! by the IANA special-purpose address registries (IPv4 and IPv6). The IPv6 forms that carry an
//! IPv4 address (IPv4-mapped, IPv4-compatible, NAT64's well-known prefix, 6to4) are judged by
//! the IPv4 address they carry, since that is where a translator or relay on the path delivers
//! them. The host a URL names ([`destination_host`]) is what deliveries to it are counted by.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is global unicast: an address the registries neither reserve nor set aside
/// (loopback, private, shared, link-local, documentation, benchmarking, `192.0.0.0/24`,
/// `240.0.0.0/4`, `0.0.0.0/8`, multicast, broadcast, unique-local, site-local, discard-only,
/// the IETF protocol block, …). IPv6 addresses carrying an IPv4 one are judged by it.
///
/// ```
/// use genjobs_domain::address::is_public;
///
/// assert!(is_public("93.184.216.34".parse().unwrap()));
/// assert!(!is_public("::ffff:10.0.0.1".parse().unwrap()));
/// assert!(!is_public("64:ff9b::a00:1".parse().unwrap()));
/// ```
#[must_use]
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => match carried_v4(v6) {
            Some(v4) => is_global_v4(v4),
            None => is_global_v6(v6),
        },
    }
}

/// The IPv4 address an IPv6 one stands for: IPv4-mapped `::ffff:0:0/96`, IPv4-compatible
/// `::/96` (deprecated, but still routed by some stacks), NAT64 `64:ff9b::/96` and 6to4
/// `2002::/16` (whose next 32 bits are the relay's IPv4 address).
fn carried_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, high, low16, ..] => Some(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low16))),
        _ => None,
    }
}

/// IPv4 by the IANA IPv4 special-purpose registry: every block whose "globally reachable" is
/// not true is refused, and so are multicast and the reserved `240.0.0.0/4`.
fn is_global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, d] = ip.octets();
    let in_block = |prefix: [u8; 4], len: u32| {
        let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
        u32::from(ip) & mask == u32::from(Ipv4Addr::from(prefix)) & mask
    };
    let refused = a == 0
        || a == 10
        || a == 127
        || in_block([100, 64, 0, 0], 10)
        || in_block([169, 254, 0, 0], 16)
        || in_block([172, 16, 0, 0], 12)
        // 192.0.0.9 (PCP anycast) and 192.0.0.10 (TURN anycast) are the block's only global ones.
        || ((a, b, c) == (192, 0, 0) && d != 9 && d != 10)
        || (a, b, c) == (192, 0, 2)
        || (a, b, c) == (192, 88, 99)
        || (a, b) == (192, 168)
        || in_block([198, 18, 0, 0], 15)
        || (a, b, c) == (198, 51, 100)
        || (a, b, c) == (203, 0, 113)
        || a >= 224;
    !refused
}

/// IPv6 by the IANA IPv6 special-purpose registry: only the global unicast block `2000::/3`,
/// less the IETF protocol block `2001::/23` (bar its globally reachable entries), documentation
/// (`2001:db8::/32`, `3fff::/20`). Everything outside `2000::/3` (unspecified, loopback,
/// discard-only `100::/64`, `64:ff9b:1::/48`, SRv6 `5f00::/16`, unique-local, link-local,
/// site-local, multicast) is refused.
fn is_global_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if s[0] & 0xe000 != 0x2000 {
        return false;
    }
    let ietf_block = s[0] == 0x2001 && s[1] < 0x200;
    let ietf_global = matches!(s, [0x2001, 1, 0, 0, 0, 0, 0, 1..=3])
        || matches!(s, [0x2001, 3, ..])
        || matches!(s, [0x2001, 4, 0x112, ..])
        || matches!(s, [0x2001, 0x20..=0x3f, ..]);
    let documentation = (s[0], s[1]) == (0x2001, 0xdb8) || s[0] & 0xfff0 == 0x3ff0;
    !((ietf_block && !ietf_global) || documentation)
}

/// The host (and port) part of `url`, lower-cased, without credentials: what webhook deliveries
/// are limited by, and what a `webhook_url` must have.
#[must_use]
pub fn destination_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    host.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each address with whether it is global unicast, and the registry entry that says so.
    const TABLE: &[(&str, bool)] = &[
        // IPv4, refused
        ("0.0.0.0", false),
        ("0.1.2.3", false),
        ("0.255.255.255", false),
        ("10.0.0.1", false),
        ("10.255.255.255", false),
        ("100.64.0.1", false),
        ("100.127.255.254", false),
        ("127.0.0.1", false),
        ("127.8.9.10", false),
        ("169.254.169.254", false),
        ("172.16.5.4", false),
        ("172.31.255.255", false),
        ("192.0.0.1", false),
        ("192.0.0.8", false),
        ("192.0.0.170", false),
        ("192.0.2.2", false),
        ("192.88.99.1", false),
        ("192.168.1.1", false),
        ("198.18.0.1", false),
        ("198.19.255.255", false),
        ("198.51.100.7", false),
        ("203.0.113.9", false),
        ("224.0.0.1", false),
        ("239.255.255.250", false),
        ("240.0.0.1", false),
        ("250.1.2.3", false),
        ("255.255.255.255", false),
        // IPv4, global
        ("1.1.1.1", true),
        ("8.8.8.8", true),
        ("93.184.216.34", true),
        ("100.63.255.255", true),
        ("100.128.0.0", true),
        ("172.15.255.255", true),
        ("172.32.0.0", true),
        ("192.0.0.9", true),
        ("192.0.0.10", true),
        ("192.0.3.1", true),
        ("192.169.0.1", true),
        ("198.17.255.255", true),
        ("198.20.0.0", true),
        ("223.255.255.254", true),
        // IPv6, refused
        ("::", false),
        ("::1", false),
        ("::ffff:127.0.0.1", false),
        ("::ffff:10.0.0.1", false),
        ("::ffff:192.0.2.2", false),
        ("::10.0.0.1", false),
        ("::127.0.0.1", false),
        ("64:ff9b::a00:1", false),
        ("64:ff9b::7f00:1", false),
        ("64:ff9b::c000:202", false),
        ("64:ff9b:1::1", false),
        ("100::1", false),
        ("2001::1", false),
        ("2001:0:4136:e378::1", false),
        ("2001:2::1", false),
        ("2001:10::1", false),
        ("2001:db8::1", false),
        ("2002:a00:1::1", false),
        ("2002:7f00:1::", false),
        ("2002:c000:202::1", false),
        ("3fff::1", false),
        ("5f00::1", false),
        ("fc00::1", false),
        ("fd12:3456::1", false),
        ("fe80::1", false),
        ("fec0::1", false),
        ("feff::1", false),
        ("ff02::1", false),
        // IPv6, global
        ("2606:2800:220:1::1", true),
        ("2a00:1450:4001::200e", true),
        ("2001:4860:4860::8888", true),
        ("2001:1::1", true),
        ("2001:3::1", true),
        ("2001:4:112::1", true),
        ("2001:20::1", true),
        ("2002:5db8:d822::1", true),
        ("::ffff:93.184.216.34", true),
        ("::93.184.216.34", true),
        ("64:ff9b::5db8:d822", true),
    ];

    #[test]
    fn only_global_unicast_addresses_are_public() {
        assert!(TABLE.len() >= 60, "the table covers at least 60 addresses");
        let wrong: Vec<String> = TABLE
            .iter()
            .filter(|(address, global)| is_public(address.parse().unwrap()) != *global)
            .map(|(address, global)| format!("{address} should be {}", if *global { "global" } else { "refused" }))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn the_destination_host_has_no_credentials_path_or_case() {
        assert_eq!(destination_host("https://user:pw@Example.COM:8443/a?b"), "example.com:8443");
        assert_eq!(destination_host("http://[::1]:9/x"), "[::1]:9");
    }
}
