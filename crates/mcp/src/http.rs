//! MCP Streamable HTTP: the service `forge serve` mounts at `/mcp`.
//!
//! Each MCP session (rmcp's session manager, keyed by `Mcp-Session-Id`) gets its own
//! [`McpServer`], which binds one gateway session: a new one, or the one the `initialize`
//! request names in `X-Forge-Session` (or `?session=`). When the MCP session ends — the client
//! sends `DELETE`, it stays idle past rmcp's keep-alive, or the server shuts down — the
//! handler is dropped and a session it created is closed.

use std::sync::Arc;

use forge_types::tool::SessionId;
use rmcp::ErrorData;
use rmcp::model::Extensions;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::host::ToolHost;
use crate::server::McpServer;

/// Header an MCP client sends to attach to an existing gateway session.
pub const ATTACH_HEADER: &str = "x-forge-session";
/// Query parameter doing the same, for clients that cannot set headers.
pub const ATTACH_QUERY: &str = "session";

/// How the endpoint is exposed.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpOptions {
    /// Accept any `Host` header. Off, only loopback names are accepted, which stops DNS
    /// rebinding from reaching a local server with no key; a server that requires an API key
    /// (as any non-loopback one must) turns it on, since a rebound page cannot know the key.
    pub any_host: bool,
}

/// The `/mcp` route and a handle to end its sessions.
#[derive(Debug, Clone)]
pub struct HttpEndpoint {
    router: axum::Router,
    shutdown: CancellationToken,
}

impl HttpEndpoint {
    pub fn new<H: ToolHost>(host: Arc<H>, options: HttpOptions) -> Self {
        let shutdown = CancellationToken::new();
        let mut config =
            StreamableHttpServerConfig::default().with_cancellation_token(shutdown.clone());
        if options.any_host {
            config = config.disable_allowed_hosts();
        }
        let service = StreamableHttpService::new(
            move || Ok(McpServer::per_client(host.clone())),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        Self {
            router: axum::Router::new().route_service("/mcp", service),
            shutdown,
        }
    }

    /// The router serving `/mcp`, to merge into the app (behind its authentication).
    pub fn router(&self) -> axum::Router {
        self.router.clone()
    }

    /// Ends every MCP session (and so closes their gateway sessions); open event streams end
    /// too, so a graceful HTTP shutdown does not wait on them.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }
}

/// The gateway session an HTTP request asks to attach to, if any.
pub(crate) fn attach_from(extensions: &Extensions) -> Result<Option<SessionId>, ErrorData> {
    let Some(parts) = extensions.get::<http::request::Parts>() else {
        return Ok(None);
    };
    let named = parts
        .headers
        .get(ATTACH_HEADER)
        .map(|value| value.to_str().unwrap_or_default().to_owned())
        .or_else(|| {
            parts.uri.query()?.split('&').find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                (key == ATTACH_QUERY).then(|| value.to_owned())
            })
        });
    named
        .map(|text| {
            SessionId::parse(&text).ok_or_else(|| {
                ErrorData::invalid_params(format!("{text:?} is not a gateway session id"), None)
            })
        })
        .transpose()
}
