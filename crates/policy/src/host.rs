//! Network destinations: host patterns for allowlists and rules, and the classification of a
//! destination as loopback (always reachable), internal (never reachable) or ordinary.
//!
//! Destinations are judged as seen from inside the sandbox: the gateway makes every
//! connection (health checks, port checks, clones) from the sandbox's own network namespace,
//! where loopback is the sandbox's own services, not the host's. Host names are judged by
//! their spelling only; the egress proxy resolves them and checks the addresses again.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::pattern::PatternError;

/// A destination host once parsed: an address or a lower-case DNS name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    Ip(IpAddr),
    Name(String),
}

impl Host {
    /// Parses a host as a client might spell it: a DNS name (any case, optional trailing dot),
    /// an IPv4 address in dotted-quad form, or an IPv6 address with or without brackets.
    ///
    /// Numeric spellings that only some resolvers accept (`2130706433`, `0x7f.1`, `127.1`)
    /// are refused rather than guessed at, because each of them is loopback to `inet_aton`.
    pub(crate) fn parse(text: &str) -> Result<Self, &'static str> {
        let bare = text
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Self::Ip(canonical_ip(ip)));
        }
        let name = bare.strip_suffix('.').unwrap_or(bare).to_ascii_lowercase();
        check_name(&name)?;
        Ok(Self::Name(name))
    }

    /// Loopback stays inside the sandbox's own network namespace.
    pub(crate) fn is_loopback(&self) -> bool {
        match self {
            Self::Ip(ip) => ip.is_loopback(),
            Self::Name(name) => name == "localhost" || name.ends_with(".localhost"),
        }
    }

    /// Why this destination is internal, if it is: private, link-local (where cloud metadata
    /// services live), multicast and other non-public space, and names that only resolve on a
    /// local network. A session policy can never grant these.
    pub(crate) fn internal(&self) -> Option<&'static str> {
        match self {
            Self::Ip(ip) => INTERNAL_NETWORKS
                .iter()
                .find(|(net, _)| net.contains(*ip))
                .map(|(_, why)| *why),
            Self::Name(name) => {
                if !name.contains('.') && name != "localhost" {
                    Some("a single-label name, resolved through local search domains")
                } else if INTERNAL_SUFFIXES
                    .iter()
                    .any(|suffix| name.ends_with(suffix) || name == &suffix[1..])
                {
                    Some("a name reserved for local networks")
                } else {
                    None
                }
            }
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ip(ip) => ip.fmt(f),
            Self::Name(name) => f.write_str(name),
        }
    }
}

/// Why an address is not a public internet destination (loopback, private, link-local
/// where cloud metadata services live, …), or `None` for an ordinary address.
pub fn special_address(ip: IpAddr) -> Option<&'static str> {
    let host = Host::Ip(canonical_ip(ip));
    if host.is_loopback() {
        return Some("a loopback address");
    }
    host.internal()
}

/// Name suffixes that only resolve on local networks (RFC 6762 mDNS, RFC 8375, and the
/// `.internal` top-level domain reserved for private use, where cloud metadata names live).
const INTERNAL_SUFFIXES: [&str; 3] = [".local", ".internal", ".home.arpa"];

/// Address space that is not the public internet. Loopback is absent on purpose: it is
/// checked first and always allowed.
const INTERNAL_NETWORKS: [(Cidr, &str); 19] = [
    (Cidr::v4([0, 0, 0, 0], 8), "\"this network\" space"),
    (Cidr::v4([10, 0, 0, 0], 8), "a private address"),
    (Cidr::v4([100, 64, 0, 0], 10), "a carrier-grade NAT address"),
    (
        Cidr::v4([169, 254, 0, 0], 16),
        "a link-local address, where cloud metadata services live",
    ),
    (Cidr::v4([172, 16, 0, 0], 12), "a private address"),
    (Cidr::v4([192, 0, 0, 0], 24), "an IETF protocol address"),
    (Cidr::v4([192, 168, 0, 0], 16), "a private address"),
    (Cidr::v4([198, 18, 0, 0], 15), "a benchmarking address"),
    (Cidr::v4([224, 0, 0, 0], 4), "a multicast address"),
    (
        Cidr::v4([240, 0, 0, 0], 4),
        "a reserved or broadcast address",
    ),
    // `::1` is loopback and handled before this table; the rest of ::/96 is unspecified or
    // IPv4-compatible, both of which reach places they should not.
    (Cidr::v6(0, 96), "an unspecified or IPv4-compatible address"),
    (Cidr::v6(0x0064_ff9b << 96, 96), "a NAT64 address"),
    (Cidr::v6(0x0064_ff9b_0001 << 80, 48), "a NAT64 address"),
    (Cidr::v6(0x0100 << 112, 64), "a discard address"),
    (Cidr::v6(0x2002 << 112, 16), "a 6to4 address"),
    (
        Cidr::v6(0xfc00 << 112, 7),
        "a unique local address, where cloud metadata services live",
    ),
    (Cidr::v6(0xfe80 << 112, 10), "a link-local address"),
    (Cidr::v6(0xfec0 << 112, 10), "a site-local address"),
    (Cidr::v6(0xff00 << 112, 8), "a multicast address"),
];

/// IPv4-mapped IPv6 addresses reach IPv4 hosts, so they are judged as those hosts.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// A DNS name: dot-separated labels of letters, digits, `-` and `_`, whose last label is not
/// a number (that would be an IPv4 address in a spelling only some resolvers read).
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty host");
    }
    if name.len() > 253 {
        return Err("host name longer than 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("host name label is empty or longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err("host name has a character other than letters, digits, '-', '_'");
        }
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    let hex = last.strip_prefix("0x").unwrap_or("z");
    if last.bytes().all(|b| b.is_ascii_digit()) || hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("numeric host that is not a dotted-quad IPv4 address");
    }
    Ok(())
}

/// An address block: `10.0.0.0/8`, `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    const fn v4(octets: [u8; 4], prefix: u8) -> Self {
        Self {
            addr: IpAddr::V4(Ipv4Addr::new(octets[0], octets[1], octets[2], octets[3])),
            prefix,
        }
    }

    const fn v6(bits: u128, prefix: u8) -> Self {
        Self {
            addr: IpAddr::V6(Ipv6Addr::from_bits(bits)),
            prefix,
        }
    }

    fn contains(self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask_v4(self.prefix);
                net.to_bits() & mask == ip.to_bits() & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask_v6(self.prefix);
                net.to_bits() & mask == ip.to_bits() & mask
            }
            _ => false,
        }
    }

    fn covers(self, other: Self) -> bool {
        self.prefix <= other.prefix && self.contains(other.addr)
    }

    fn parse(text: &str) -> Result<Self, &'static str> {
        let (addr, prefix) = text.split_once('/').ok_or("missing '/'")?;
        let addr: IpAddr = addr.parse().map_err(|_| "not an IP network")?;
        let prefix: u8 = prefix.parse().map_err(|_| "invalid prefix length")?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err("prefix length too long for the address");
        }
        if canonical_ip(addr) != addr {
            return Err("write IPv4 networks in IPv4 form");
        }
        let host_bits = match addr {
            IpAddr::V4(v4) => u128::from(v4.to_bits() & !mask_v4(prefix)),
            IpAddr::V6(v6) => v6.to_bits() & !mask_v6(prefix),
        };
        if host_bits != 0 {
            return Err("address has bits set beyond the prefix length");
        }
        Ok(Self { addr, prefix })
    }
}

fn mask_v4(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask_v6(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

/// A destination pattern, in an allowlist or a rule:
///
/// - `example.org` — exactly that host;
/// - `*.example.org` — any subdomain of it, at any depth, but not `example.org` itself
///   (list both when both are meant);
/// - `203.0.113.7`, `2001:db8::1`, `[2001:db8::1]` — exactly that address;
/// - `203.0.113.0/24`, `2001:db8::/32` — any address in the block;
/// - any of the host or address forms followed by `:port` (`[v6]:port` for IPv6) — only
///   that port.
///
/// Internal addresses and names never become reachable by being listed; see the
/// `network.internal` rule.
#[derive(Clone)]
pub struct HostPattern {
    source: String,
    kind: PatternKind,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PatternKind {
    Name(String),
    Subdomains(String),
    Ip(IpAddr),
    Net(Cidr),
}

impl HostPattern {
    pub fn new(source: &str) -> Result<Self, PatternError> {
        let invalid = |reason| PatternError::Host {
            pattern: source.to_owned(),
            reason,
        };
        let (kind, port) = Self::parse(source).map_err(invalid)?;
        Ok(Self {
            source: source.to_owned(),
            kind,
            port,
        })
    }

    fn parse(text: &str) -> Result<(PatternKind, Option<u16>), &'static str> {
        if text.contains('/') {
            return Ok((PatternKind::Net(Cidr::parse(text)?), None));
        }
        if let Some(rest) = text.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or("missing ']'")?;
            let ip: Ipv6Addr = inside.parse().map_err(|_| "not an IPv6 address")?;
            let port = match after {
                "" => None,
                _ => Some(parse_port(
                    after.strip_prefix(':').ok_or("expected ':port'")?,
                )?),
            };
            return Ok((PatternKind::Ip(canonical_ip(IpAddr::V6(ip))), port));
        }
        if text.matches(':').count() > 1 {
            let ip: Ipv6Addr = text.parse().map_err(|_| "not an IPv6 address")?;
            return Ok((PatternKind::Ip(canonical_ip(IpAddr::V6(ip))), None));
        }
        let (host, port) = match text.split_once(':') {
            Some((host, port)) => (host, Some(parse_port(port)?)),
            None => (text, None),
        };
        if let Some(parent) = host.strip_prefix("*.") {
            let parent = parent
                .strip_suffix('.')
                .unwrap_or(parent)
                .to_ascii_lowercase();
            check_name(&parent)?;
            return Ok((PatternKind::Subdomains(parent), port));
        }
        if host.contains('*') {
            return Err("'*' is only allowed as a leading '*.'");
        }
        match Host::parse(host)? {
            Host::Ip(ip) => Ok((PatternKind::Ip(ip), port)),
            Host::Name(name) => Ok((PatternKind::Name(name), port)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether a destination, spelled as a client sent it (`Example.org`, `[::1]`), on `port`
    /// matches. A destination that is not a valid host matches nothing.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        Host::parse(host).is_ok_and(|host| self.matches(&host, Some(port)))
    }

    /// Whether an address on `port` matches an address or network pattern. Name patterns
    /// never match addresses: listing a name does not vouch for where it resolves.
    pub fn allows_address(&self, ip: IpAddr, port: u16) -> bool {
        matches!(self.kind, PatternKind::Ip(_) | PatternKind::Net(_))
            && self.matches(&Host::Ip(canonical_ip(ip)), Some(port))
    }

    /// Whether a destination matches. A pattern with a port does not match a destination
    /// without one: an unknown port is not the listed port.
    pub(crate) fn matches(&self, host: &Host, port: Option<u16>) -> bool {
        if self.port.is_some() && self.port != port {
            return false;
        }
        match (&self.kind, host) {
            (PatternKind::Name(want), Host::Name(name)) => want == name,
            (PatternKind::Subdomains(parent), Host::Name(name)) => is_subdomain(name, parent),
            (PatternKind::Ip(want), Host::Ip(ip)) => want == ip,
            (PatternKind::Net(net), Host::Ip(ip)) => net.contains(*ip),
            _ => false,
        }
    }

    /// Whether every destination `other` matches is also matched by `self`. Used to
    /// intersect allowlists; it may answer `false` for some covered pairs, which only ever
    /// makes an intersection smaller, never wider.
    pub(crate) fn covers(&self, other: &Self) -> bool {
        if self.port.is_some() && self.port != other.port {
            return false;
        }
        match (&self.kind, &other.kind) {
            (PatternKind::Name(a), PatternKind::Name(b)) => a == b,
            (PatternKind::Subdomains(a), PatternKind::Name(b)) => is_subdomain(b, a),
            (PatternKind::Subdomains(a), PatternKind::Subdomains(b)) => {
                a == b || is_subdomain(b, a)
            }
            (PatternKind::Ip(a), PatternKind::Ip(b)) => a == b,
            (PatternKind::Net(a), PatternKind::Ip(b)) => a.contains(*b),
            (PatternKind::Net(a), PatternKind::Net(b)) => a.covers(*b),
            _ => false,
        }
    }
}

fn is_subdomain(name: &str, parent: &str) -> bool {
    name.strip_suffix(parent)
        .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
}

fn parse_port(text: &str) -> Result<u16, &'static str> {
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err("port must be a number from 1 to 65535"),
        Ok(port) => Ok(port),
    }
}

impl FromStr for HostPattern {
    type Err = PatternError;

    fn from_str(source: &str) -> Result<Self, Self::Err> {
        Self::new(source)
    }
}

impl PartialEq for HostPattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for HostPattern {}

impl fmt::Debug for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HostPattern").field(&self.source).finish()
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Serialize for HostPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for HostPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = String::deserialize(deserializer)?;
        Self::new(&source).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn host(text: &str) -> Host {
        Host::parse(text).unwrap()
    }

    fn pattern(text: &str) -> HostPattern {
        HostPattern::new(text).unwrap()
    }

    #[test]
    fn hosts_parse_to_one_canonical_form() {
        assert_eq!(host("Example.ORG."), Host::Name("example.org".to_owned()));
        assert_eq!(host("[::1]"), Host::Ip("::1".parse().unwrap()));
        assert_eq!(
            host("::ffff:169.254.169.254"),
            Host::Ip("169.254.169.254".parse().unwrap())
        );
        for bad in [
            "",
            "2130706433",
            "0x7f000001",
            "127.1",
            "0x7f.1",
            "01.02.03.04",
            "a..b",
            "exa mple.org",
            "fe80::1%eth0",
            "host:80",
            ".",
        ] {
            assert!(Host::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn loopback_and_internal_destinations() {
        for loopback in [
            "localhost",
            "app.localhost",
            "127.0.0.1",
            "127.9.9.9",
            "::1",
        ] {
            assert!(host(loopback).is_loopback(), "{loopback}");
        }
        let internal: Vec<_> = [
            "169.254.169.254",
            "10.1.2.3",
            "172.31.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::",
            "::ffff:10.0.0.1",
            "fd00:ec2::254",
            "fe80::1",
            "64:ff9b::a00:1",
            "metadata",
            "metadata.google.internal",
            "printer.local",
            "nas.home.arpa",
            "internal",
        ]
        .into_iter()
        .filter(|h| host(h).internal().is_none())
        .collect();
        assert_eq!(internal, Vec::<&str>::new(), "these should be internal");
        for public in [
            "example.org",
            "8.8.8.8",
            "2606:4700::1111",
            "172.32.0.1",
            "localhost",
        ] {
            assert_eq!(host(public).internal(), None, "{public}");
        }
    }

    #[test]
    fn patterns_match_hosts_ports_and_networks() {
        let cases = [
            ("example.org", "example.org", None, true),
            ("example.org", "EXAMPLE.org.", Some(443), true),
            ("example.org", "www.example.org", None, false),
            ("*.example.org", "www.example.org", None, true),
            ("*.example.org", "a.b.example.org", None, true),
            ("*.example.org", "example.org", None, false),
            ("*.example.org", "badexample.org", None, false),
            ("example.org:443", "example.org", Some(443), true),
            ("example.org:443", "example.org", Some(80), false),
            ("example.org:443", "example.org", None, false),
            ("203.0.113.0/24", "203.0.113.9", None, true),
            ("203.0.113.0/24", "203.0.114.9", None, false),
            ("2001:db8::/32", "2001:db8:1::1", None, true),
            ("[2001:db8::1]:8443", "2001:db8::1", Some(8443), true),
            ("2001:db8::1", "[2001:db8::1]", Some(1), true),
            ("203.0.113.7", "::ffff:203.0.113.7", None, true),
            ("0.0.0.0/0", "example.org", None, false),
        ];
        let wrong: Vec<_> = cases
            .iter()
            .filter(|(p, h, port, want)| pattern(p).matches(&host(h), *port) != *want)
            .collect();
        assert_eq!(wrong, Vec::<&(&str, &str, Option<u16>, bool)>::new());
    }

    #[test]
    fn addresses_match_only_address_patterns() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let got = [
            pattern("127.0.0.2/32").allows_address(ip("127.0.0.2"), 80),
            pattern("127.0.0.2:80").allows_address(ip("127.0.0.2"), 81),
            pattern("localhost").allows_address(ip("127.0.0.1"), 80),
            pattern("*.example.org").allows("WWW.example.org", 443),
            pattern("example.org").allows("not a host", 443),
        ];
        assert_eq!(got, [true, false, false, true, false]);
        let special: Vec<_> = [
            "127.0.0.1",
            "::1",
            "169.254.169.254",
            "fd00:ec2::254",
            "8.8.8.8",
        ]
        .into_iter()
        .map(|text| special_address(ip(text)))
        .collect();
        assert_eq!(
            special,
            [
                Some("a loopback address"),
                Some("a loopback address"),
                Some("a link-local address, where cloud metadata services live"),
                Some("a unique local address, where cloud metadata services live"),
                None
            ]
        );
    }

    #[test]
    fn bad_patterns_say_why() {
        let cases = [
            ("", "empty host"),
            ("*", "'*' is only allowed as a leading '*.'"),
            ("ex*ample.org", "'*' is only allowed as a leading '*.'"),
            ("example.org:0", "port must be a number from 1 to 65535"),
            ("example.org:http", "port must be a number from 1 to 65535"),
            (
                "10.0.0.1/8",
                "address has bits set beyond the prefix length",
            ),
            ("10.0.0.0/33", "prefix length too long for the address"),
            ("::ffff:10.0.0.0/104", "write IPv4 networks in IPv4 form"),
            ("[::1", "missing ']'"),
            (
                "*.127.1",
                "numeric host that is not a dotted-quad IPv4 address",
            ),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(text, _)| HostPattern::new(text).unwrap_err())
            .collect();
        let want: Vec<_> = cases
            .iter()
            .map(|(text, reason)| PatternError::Host {
                pattern: (*text).to_owned(),
                reason,
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn covering_is_containment() {
        let cases = [
            ("*.org", "*.example.org", true),
            ("*.org", "example.org", true),
            ("*.example.org", "*.org", false),
            ("example.org", "example.org:443", true),
            ("example.org:443", "example.org", false),
            ("10.0.0.0/8", "10.1.0.0/16", true),
            ("10.1.0.0/16", "10.0.0.0/8", false),
            ("10.0.0.0/8", "10.9.9.9", true),
            ("10.9.9.9", "10.9.9.9/32", false),
        ];
        let wrong: Vec<_> = cases
            .iter()
            .filter(|(a, b, want)| pattern(a).covers(&pattern(b)) != *want)
            .collect();
        assert_eq!(wrong, Vec::<&(&str, &str, bool)>::new());
    }
}
