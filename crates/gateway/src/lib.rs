//! Forge's tool gateway: typed tools an agent calls in a session, under a policy the server
//! enforces, each call recorded in a tamper-evident ledger.
//!
//! Every call takes the same four steps, in this order, whatever happens in any of them:
//!
//! 1. **validate** the arguments against the tool's JSON Schema (generated from the typed
//!    argument struct), naming the field at fault;
//! 2. **decide** with the session's [`forge_policy::Policy`] (allow < ask < deny, with the
//!    rule that decided);
//! 3. **run** the tool in the session's sandbox, through the [`forge_sandbox::Backend`]:
//!    file operations, commands and network probes all happen inside the sandbox, never on
//!    the host;
//! 4. **record** the call in the ledger — SQLite and an append-only, hash-chained JSONL file
//!    in the data directory — with secrets redacted.
//!
//! A session owns a sandbox (created from its policy: memory, network) or attaches to an
//! existing one; its policy is the client's request narrowed by the operator's
//! [`forge_policy::Ceilings`], so a client can never widen it.
//!
//! [`Gateway`] is the API the HTTP routes and the MCP adapter share: open or attach a
//! session, list the tools it may call as [`forge_types::ToolSpec`]s, call one with JSON
//! arguments, reset and close it.

mod analysis;
mod error;
mod gateway;
pub mod ledger;
mod redact;
mod reply;
mod schema;
mod session;
mod tools;

pub use error::GatewayError;
pub use gateway::{Artifact, Gateway, GatewayConfig};
pub use ledger::{LedgerEntry, VerifyError, VerifyReport, verify};
pub use reply::{Outcome, ToolError, ToolReply};
pub use session::{SessionInfo, SessionRequest};
