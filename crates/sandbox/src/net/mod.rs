//! Sandbox networking on the host's side.
//!
//! - `allowlist`: the sandbox keeps a network namespace with only loopback, so nothing in
//!   it can route anywhere. Its init makes a TCP listener on `127.0.0.1:`[`PROXY_PORT`] in
//!   that namespace and hands the descriptor to the host, where the egress proxy
//!   ([`proxy`]) accepts on it: every connection out is an HTTP request or `CONNECT` tunnel
//!   the proxy checks against the [`Allowlist`], resolves itself ([`Resolver`]) and logs.
//! - `open`: a userspace network stack (`pasta`, [`pasta`]) attached to the namespace, with
//!   the host's loopback left unmapped and metadata addresses unreachable.
//! - inbound ([`ports`]): a host listener per exposed port; each connection asks the init
//!   for a connection to the sandbox's port on its own loopback.

mod allow;
pub(crate) mod pasta;
pub(crate) mod ports;
pub(crate) mod proxy;
mod resolve;
mod splice;
mod tls;

use std::collections::BTreeMap;

pub use allow::Allowlist;
pub use resolve::Resolver;

/// The port the egress proxy answers on inside every allowlist sandbox.
pub const PROXY_PORT: u16 = 3128;

/// How many connection records wait for slow subscribers before the oldest are dropped.
pub(crate) const LOG_CAPACITY: usize = 4096;

/// The environment that points HTTP clients and package managers at the egress proxy.
pub(crate) fn proxy_env() -> BTreeMap<String, String> {
    let proxy = format!("http://127.0.0.1:{PROXY_PORT}");
    let local = "localhost,127.0.0.1,::1".to_owned();
    [
        ("HTTP_PROXY", proxy.clone()),
        ("HTTPS_PROXY", proxy.clone()),
        ("http_proxy", proxy.clone()),
        ("https_proxy", proxy.clone()),
        ("NO_PROXY", local.clone()),
        ("no_proxy", local),
        ("PIP_PROXY", proxy.clone()),
        ("npm_config_proxy", proxy.clone()),
        ("npm_config_https_proxy", proxy),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}
