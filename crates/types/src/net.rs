//! What a sandbox's network did: one [`Connection`] per outbound attempt (allowed or
//! refused), and the sandbox ports exposed on the host ([`PortForward`]).

use serde::{Deserialize, Serialize};

use crate::SandboxId;

/// How a connection reached Forge's egress proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionKind {
    /// An HTTP `CONNECT` tunnel (HTTPS and anything else a client tunnels).
    Connect,
    /// A plain HTTP request with an absolute URI.
    Http,
}

/// Whether the proxy let a connection through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Allowed,
    Refused,
}

/// One outbound connection attempt of a sandbox, as its egress proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub sandbox_id: SandboxId,
    /// Milliseconds since the Unix epoch when the request reached the proxy.
    pub started_at_ms: u64,
    pub kind: ConnectionKind,
    /// The destination as the client named it (a host name or an address).
    pub host: String,
    pub port: u16,
    /// The address the proxy connected to (or would have), once it resolved the host.
    pub address: Option<String>,
    pub verdict: Verdict,
    /// Why the attempt was refused, or why an allowed one failed.
    pub reason: Option<String>,
    /// Bytes from the sandbox to the destination, after the request head.
    pub bytes_up: u64,
    /// Bytes from the destination back to the sandbox.
    pub bytes_down: u64,
    /// How long the connection lasted, in milliseconds.
    pub duration_ms: u64,
}

/// A sandbox port reachable from the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortForward {
    /// The port inside the sandbox (on its loopback).
    pub port: u16,
    /// Where the host listens for it, `address:port`.
    pub host_address: String,
}
