//! Forge's tool gateway over the Model Context Protocol, with the official Rust SDK (`rmcp`).
//!
//! The gateway stays behind one narrow seam, [`ToolHost`]: open (or attach to) a session, list
//! the tools its policy allows, call one, close it. [`McpServer`] answers MCP on top of any
//! host — `initialize` announces a tools-only server, `tools/list` is the session's own list
//! (a client never sees a tool its policy refuses), and `tools/call` turns a denied or failed
//! call into a tool result with `isError: true` and the reason, so the model reads why; only a
//! call the protocol cannot route (an unknown tool, a session that does not exist) is a
//! JSON-RPC error.
//!
//! Two transports: [`serve_stdio`] for `forge mcp` (one process, one session) and
//! [`HttpEndpoint`], the Streamable HTTP service `forge serve` mounts at `/mcp` (one gateway
//! session per MCP session). [`GatewayHost`] is the host over the real gateway; the tests here
//! use a fake one, the CLI's tests the real one.
//!
//! This crate knows nothing about HTTP authentication or where sessions come from: the server
//! puts `/mcp` behind its API key, the CLI picks the host.

mod gateway;
mod host;
mod http;
mod server;
mod stdio;

pub use crate::gateway::GatewayHost;
pub use crate::host::{HostError, ToolHost, ToolReply};
pub use crate::http::{ATTACH_HEADER, ATTACH_QUERY, HttpEndpoint, HttpOptions};
pub use crate::server::{IDEMPOTENCY_META, McpServer};
pub use crate::stdio::{StdioError, serve_on, serve_stdio};
