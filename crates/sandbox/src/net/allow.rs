//! One sandbox's allowlist, as the egress proxy applies it: a destination must be listed,
//! and every address it resolves to must be public unless an address or network entry
//! names it.

use std::net::IpAddr;

use forge_policy::{HostPattern, special_address};
use forge_types::SpecError;

/// The parsed `allowed_hosts` of a sandbox spec.
#[derive(Debug, Clone, Default)]
pub struct Allowlist {
    patterns: Vec<HostPattern>,
}

impl Allowlist {
    /// Parses every entry, refusing the first that is not a host, wildcard, address or
    /// network (with an optional port).
    pub fn parse(hosts: &[String]) -> Result<Self, SpecError> {
        let patterns = hosts
            .iter()
            .map(|host| {
                HostPattern::new(host)
                    .map_err(|err| SpecError::new("allowed_hosts", err.to_string()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { patterns })
    }

    /// Whether the destination the client named is listed.
    pub fn check_destination(&self, host: &str, port: u16) -> Result<(), String> {
        if self.patterns.iter().any(|p| p.allows(host, port)) {
            Ok(())
        } else {
            Err(format!(
                "destination {host}:{port} is not in this sandbox's allowlist"
            ))
        }
    }

    /// Whether the proxy may connect to an address the destination resolved to: public
    /// addresses may, loopback, private, link-local and metadata ones only when an address
    /// or network entry lists them (so a listed name cannot be pointed at the host).
    pub fn check_address(&self, host: &str, ip: IpAddr, port: u16) -> Result<(), String> {
        match special_address(ip) {
            Some(why) if !self.patterns.iter().any(|p| p.allows_address(ip, port)) => Err(format!(
                "{host} resolves to {ip}, {why}, which is not listed as an address"
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn allowlist(hosts: &[&str]) -> Allowlist {
        Allowlist::parse(&hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn names_must_be_listed_and_resolve_publicly() {
        let list = allowlist(&["pypi.org", "*.example.org:443", "127.0.0.2/32"]);
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let got = vec![
            list.check_destination("pypi.org", 443),
            list.check_destination("a.example.org", 443),
            list.check_destination("a.example.org", 80),
            list.check_destination("127.0.0.2", 8080),
            list.check_address("pypi.org", ip("151.101.0.223"), 443),
            list.check_address("pypi.org", ip("127.0.0.1"), 443),
            list.check_address("pypi.org", ip("169.254.169.254"), 80),
            list.check_address("pypi.org", ip("127.0.0.2"), 80),
        ];
        let want = vec![
            Ok(()),
            Ok(()),
            Err("destination a.example.org:80 is not in this sandbox's allowlist".to_owned()),
            Ok(()),
            Ok(()),
            Err("pypi.org resolves to 127.0.0.1, a loopback address, which is not listed as an address".to_owned()),
            Err("pypi.org resolves to 169.254.169.254, a link-local address, where cloud metadata services live, which is not listed as an address".to_owned()),
            Ok(()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn bad_entries_name_the_field() {
        let err = Allowlist::parse(&["ex*ample.org".to_owned()]).unwrap_err();
        assert_eq!(err.field, "allowed_hosts");
    }
}
