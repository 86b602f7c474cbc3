//! MCP over stdin/stdout, for `forge mcp`: one client, one gateway session, until stdin ends.
//!
//! stdout carries protocol frames only; everything else (logs, notes) goes to stderr.

use std::sync::Arc;

use forge_types::tool::SessionId;
use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::host::ToolHost;
use crate::server::McpServer;

/// Why serving over stdio stopped early.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("the mcp client did not complete the handshake")]
    Handshake(#[source] Box<ServerInitializeError>),
    #[error("the mcp service stopped abnormally")]
    Service(#[source] tokio::task::JoinError),
}

/// Serves `session`'s tools on this process's stdin and stdout until the client closes stdin.
/// The caller opened `session` and closes it afterwards.
pub async fn serve_stdio<H: ToolHost>(host: Arc<H>, session: SessionId) -> Result<(), StdioError> {
    // Non-blocking pipes (as clients start servers) rather than tokio's blocking stdin: a read
    // pending on the blocking pool cannot be cancelled, so a process stopped by a signal would
    // hang in runtime shutdown until the client closed stdin.
    serve_on(host, session, rmcp::transport::stdio_pipes()).await
}

/// [`serve_stdio`] on any byte stream pair (a duplex pipe in tests).
pub async fn serve_on<H, R, W>(
    host: Arc<H>,
    session: SessionId,
    io: (R, W),
) -> Result<(), StdioError>
where
    H: ToolHost,
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running = McpServer::for_session(host, session)
        .serve(io)
        .await
        .map_err(|err| StdioError::Handshake(Box::new(err)))?;
    let reason = running.waiting().await.map_err(StdioError::Service)?;
    tracing::debug!(?reason, "mcp client went away");
    Ok(())
}
