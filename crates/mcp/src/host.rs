//! The seam between MCP and the tool gateway: what a server needs from whatever runs tools.
//!
//! The gateway implements it for real ([`crate::GatewayHost`]); tests implement it with a
//! fake, so the MCP side is tested without sandboxes.

use std::future::Future;

use forge_types::tool::{SessionId, ToolSpec};

/// Runs tools for MCP clients, one gateway session per client.
pub trait ToolHost: Send + Sync + 'static {
    /// A session for one MCP client: a new one under the host's policy, or `attach` to an
    /// existing gateway session (which stays its owner's: the MCP side never closes it).
    fn open(
        &self,
        attach: Option<SessionId>,
    ) -> impl Future<Output = Result<SessionId, HostError>> + Send;

    /// The tools `session` may call, as its policy allows them.
    fn tools(
        &self,
        session: &SessionId,
    ) -> impl Future<Output = Result<Vec<ToolSpec>, HostError>> + Send;

    /// Calls `tool`. A call the policy denies, whose arguments fail the schema, or that fails
    /// in the sandbox is still `Ok`, with [`ToolReply::is_error`] set and the reason in its
    /// text: that is the model's to read. `Err` is for calls that cannot be routed at all.
    /// A repeated `idempotency_key` in a session answers the first call's reply again.
    fn call(
        &self,
        session: &SessionId,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        idempotency_key: Option<String>,
    ) -> impl Future<Output = Result<ToolReply, HostError>> + Send;

    /// Ends a session [`ToolHost::open`] created (its sandbox goes with it).
    fn close(&self, session: &SessionId) -> impl Future<Output = ()> + Send;
}

/// What a tool call produced, as MCP returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    /// The call was denied, refused or failed; `text` says why (and which rule decided).
    pub is_error: bool,
    /// What the model reads.
    pub text: String,
    /// The same result as JSON, for clients that use `structuredContent`.
    pub structured: Option<serde_json::Value>,
}

impl ToolReply {
    pub fn ok(text: impl Into<String>, structured: Option<serde_json::Value>) -> Self {
        Self {
            is_error: false,
            text: text.into(),
            structured,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            is_error: true,
            text: text.into(),
            structured: None,
        }
    }
}

/// A request the host cannot route. Everything else is a [`ToolReply`].
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("no gateway session {0}")]
    UnknownSession(SessionId),
    #[error("no tool named {0:?}")]
    UnknownTool(String),
    /// The host itself failed (the store, the sandbox backend); the client sees a generic
    /// message and the cause is logged.
    #[error("the tool gateway failed")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}
