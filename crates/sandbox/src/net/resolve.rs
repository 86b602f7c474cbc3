//! Name resolution for the egress proxy: a static hosts map first (configuration, and the
//! tests' stand-in for DNS), then the host's resolver.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;

/// Resolves destination names to addresses. The proxy connects to exactly the addresses
/// it checked, so a name cannot change its answer between the check and the connection.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    hosts: Arc<BTreeMap<String, Vec<IpAddr>>>,
}

impl Resolver {
    /// A resolver that answers the names in `hosts` itself (case-insensitively) and asks
    /// the system for the rest.
    pub fn with_hosts(hosts: BTreeMap<String, Vec<IpAddr>>) -> Self {
        let hosts = hosts
            .into_iter()
            .map(|(name, addrs)| (name.to_ascii_lowercase(), addrs))
            .collect();
        Self {
            hosts: Arc::new(hosts),
        }
    }

    pub(crate) async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let name = bare.strip_suffix('.').unwrap_or(bare).to_ascii_lowercase();
        if let Some(addrs) = self.hosts.get(&name) {
            return Ok(addrs.clone());
        }
        let addrs: Vec<IpAddr> = tokio::net::lookup_host((name.as_str(), port))
            .await?
            .map(|a| a.ip())
            .collect();
        if addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no addresses"));
        }
        Ok(addrs)
    }
}
