//! The gateway's one error type: what stops a call from being answered at all. A denied,
//! invalid or failed tool call is not an error but a [`crate::ToolReply`] with its
//! [`crate::Outcome`], recorded like any other.

use std::path::PathBuf;

use forge_policy::PolicyError;
use forge_sandbox::SandboxError;
use forge_store::StoreError;

/// Why the gateway could not serve a request.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No session has this id (or the id is malformed).
    #[error("session {id:?} not found")]
    SessionNotFound { id: String },
    /// The session existed but was closed (by its client, or because its TTL passed).
    #[error("session {id} is closed: {reason}")]
    SessionClosed { id: String, reason: String },
    /// The policy a client sent is not a valid policy.
    #[error("invalid policy")]
    Policy(#[source] PolicyError),
    /// The session's sandbox could not be created, found or reached.
    #[error("sandbox for session {session}")]
    Sandbox {
        session: String,
        #[source]
        source: SandboxError,
    },
    #[error("the gateway's state store failed")]
    Store(#[from] StoreError),
    /// The JSONL ledger could not be written or read.
    #[error("cannot use the ledger file {}", path.display())]
    Ledger {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Files of the data directory (artifacts) could not be used.
    #[error("cannot use {}", path.display())]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
