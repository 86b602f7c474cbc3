//! The MCP server: an rmcp [`ServerHandler`] over a [`ToolHost`].

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use forge_types::tool::{SessionId, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Extensions,
    Implementation, InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::OnceCell;

use crate::host::{HostError, ToolHost, ToolReply};
use crate::http::attach_from;

const INSTRUCTIONS: &str = "Forge's tool gateway: every tool runs in this session's sandbox under \
its policy, and every call is recorded in an audit ledger. A call the policy denies comes back \
as an error result naming the rule that decided.";

/// The `_meta` key of `tools/call` that carries an idempotency key: a call repeated with the
/// same key in a session returns the recorded reply without running the tool again.
pub const IDEMPOTENCY_META: &str = "forge/idempotencyKey";

/// Answers MCP for one client, with the tools of one gateway session.
pub struct McpServer<H: ToolHost> {
    host: Arc<H>,
    session: Binding<H>,
    versions: &'static [ProtocolVersion],
}

enum Binding<H: ToolHost> {
    /// A session the caller opened and will close (`forge mcp`).
    Fixed(SessionId),
    /// Opened on the client's first request, from what its HTTP request names, and closed
    /// when the MCP session ends (the handler is dropped with it).
    PerClient(OnceCell<SessionGuard<H>>),
}

impl<H: ToolHost> McpServer<H> {
    /// A server whose every request uses `session`, speaking every protocol version rmcp
    /// knows: a stdio process serves one client, so even the sessionless 2026 revision has
    /// exactly one gateway session to use.
    pub fn for_session(host: Arc<H>, session: SessionId) -> Self {
        Self {
            host,
            session: Binding::Fixed(session),
            versions: ProtocolVersion::KNOWN_VERSIONS,
        }
    }

    /// A server that opens its gateway session on the first request (attaching to the one
    /// the HTTP request names in [`crate::ATTACH_HEADER`] or `?session=`, if any) and closes
    /// a session it created when it is dropped.
    ///
    /// It offers only the revisions with an `initialize` handshake: those have MCP sessions
    /// to hang a gateway session on, while 2026-07-28 requests stand alone.
    pub fn per_client(host: Arc<H>) -> Self {
        Self {
            host,
            session: Binding::PerClient(OnceCell::new()),
            versions: ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25),
        }
    }

    /// The gateway session this client's requests use, opening it on first use.
    async fn session(&self, extensions: &Extensions) -> Result<SessionId, ErrorData> {
        match &self.session {
            Binding::Fixed(id) => Ok(id.clone()),
            Binding::PerClient(slot) => slot
                .get_or_try_init(|| async {
                    let attach = attach_from(extensions)?;
                    let owned = attach.is_none();
                    let id = self.host.open(attach).await.map_err(protocol_error)?;
                    tracing::debug!(session = %id, owned, "mcp client bound to a gateway session");
                    Ok(SessionGuard {
                        host: self.host.clone(),
                        id,
                        owned,
                    })
                })
                .await
                .map(|guard| guard.id.clone()),
        }
    }
}

impl<H: ToolHost> fmt::Debug for McpServer<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let session = match &self.session {
            Binding::Fixed(id) => Some(id),
            Binding::PerClient(slot) => slot.get().map(|guard| &guard.id),
        };
        f.debug_struct("McpServer")
            .field("session", &session)
            .finish_non_exhaustive()
    }
}

impl<H: ToolHost> ServerHandler for McpServer<H> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("forge", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(self.versions)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // Binding the session here, not on the first tool request, makes a bad
        // `X-Forge-Session` fail the handshake, where the client reports it.
        self.session(&context.extensions).await?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let session = self.session(&context.extensions).await?;
        let tools = self.host.tools(&session).await.map_err(protocol_error)?;
        Ok(ListToolsResult::with_all_items(
            tools.into_iter().map(mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = self.session(&context.extensions).await?;
        // MCP has no idempotency field; a client that retries sends its key in `_meta`.
        // (rmcp may have moved the request's `_meta` into the context.)
        let idempotency_key = [request.meta.as_deref(), Some(&*context.meta)]
            .into_iter()
            .flatten()
            .find_map(|meta| meta.get(IDEMPOTENCY_META)?.as_str().map(str::to_owned));
        let reply = self
            .host
            .call(
                &session,
                &request.name,
                request.arguments.unwrap_or_default(),
                idempotency_key,
            )
            .await
            .map_err(protocol_error)?;
        Ok(tool_result(reply).into())
    }
}

/// A tool as `tools/list` shows it.
fn mcp_tool(spec: ToolSpec) -> Tool {
    let schema = match spec.input_schema {
        serde_json::Value::Object(schema) => schema,
        other => {
            // MCP requires an object schema; a host that gives anything else is wrong, but
            // the tool should still be callable, so it is announced as taking any object.
            tracing::warn!(tool = spec.name, schema = %other, "tool schema is not an object");
            JsonObject::from_iter([("type".to_owned(), "object".into())])
        }
    };
    Tool::new(spec.name, spec.description, schema)
}

fn tool_result(reply: ToolReply) -> CallToolResult {
    let content = vec![ContentBlock::text(reply.text)];
    let mut result = if reply.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = reply.structured;
    result
}

/// The JSON-RPC error for a request the host could not route.
fn protocol_error(err: HostError) -> ErrorData {
    match err {
        HostError::UnknownSession(_) | HostError::UnknownTool(_) => {
            ErrorData::invalid_params(err.to_string(), None)
        }
        HostError::Internal(cause) => {
            // The client gets this layer's message; the cause is for the operator.
            tracing::error!(cause = %cause, "mcp request failed in the tool gateway");
            ErrorData::internal_error("the tool gateway failed", None)
        }
    }
}

/// A gateway session bound to one MCP client; closes it on drop when it created it.
struct SessionGuard<H: ToolHost> {
    host: Arc<H>,
    id: SessionId,
    owned: bool,
}

impl<H: ToolHost> Drop for SessionGuard<H> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let (host, id) = (self.host.clone(), self.id.clone());
        // No runtime only when it is itself going away, and the host's sessions with it.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(session = %id, "no runtime to close a gateway session");
            return;
        };
        runtime.spawn(async move {
            host.close(&id).await;
            tracing::debug!(session = %id, "mcp session ended; gateway session closed");
        });
    }
}
