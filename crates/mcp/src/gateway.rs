//! [`GatewayHost`]: the [`ToolHost`] over Forge's tool gateway.
//!
//! Every MCP call goes through [`Gateway::call`] — validate, decide, run, record — so MCP
//! clients get the same audited tools as HTTP ones, and every call they make is in the
//! ledger, refused and unknown ones included.

use forge_gateway::{Gateway, GatewayError, Outcome, SessionRequest};
use forge_policy::Policy;
use forge_types::tool::{SessionId, ToolSpec};
use serde_json::{Map, Value};

use crate::host::{HostError, ToolHost, ToolReply};

/// Opens sessions under one policy (the operator's default, or `forge mcp --policy`).
#[derive(Debug, Clone)]
pub struct GatewayHost {
    gateway: Gateway,
    policy: Option<Policy>,
}

impl GatewayHost {
    /// `policy` is what new sessions ask for (the gateway's default when `None`); the gateway
    /// narrows it to the operator's ceilings either way.
    pub fn new(gateway: Gateway, policy: Option<Policy>) -> Self {
        Self { gateway, policy }
    }
}

impl ToolHost for GatewayHost {
    async fn open(&self, attach: Option<SessionId>) -> Result<SessionId, HostError> {
        if let Some(id) = attach {
            let info = self
                .gateway
                .session(id.as_str())
                .await
                .map_err(host_error)?;
            // A closed session answers too (for its record), but cannot be used.
            return if info.state == "open" {
                Ok(info.id)
            } else {
                Err(HostError::UnknownSession(id))
            };
        }
        let info = self
            .gateway
            .create_session(SessionRequest {
                policy: self.policy.clone(),
                sandbox_id: None,
            })
            .await
            .map_err(host_error)?;
        Ok(info.id)
    }

    async fn tools(&self, session: &SessionId) -> Result<Vec<ToolSpec>, HostError> {
        self.gateway
            .session_tools(session.as_str())
            .await
            .map_err(host_error)
    }

    async fn call(
        &self,
        session: &SessionId,
        tool: &str,
        arguments: Map<String, Value>,
        idempotency_key: Option<String>,
    ) -> Result<ToolReply, HostError> {
        let reply = self
            .gateway
            .call(
                session.as_str(),
                tool,
                Value::Object(arguments),
                idempotency_key,
            )
            .await
            .map_err(host_error)?;
        // The gateway records a call to a tool it does not have as invalid; MCP wants a
        // protocol error for it (the client asked for something that was never listed).
        if reply.outcome == Outcome::Invalid && !forge_policy::catalog::TOOLS.contains(&tool) {
            return Err(HostError::UnknownTool(tool.to_owned()));
        }
        Ok(ToolReply {
            is_error: reply.is_error(),
            text: reply.text(),
            // The whole reply — outcome, decision, rule, result, ledger line — for clients
            // that read structured content.
            structured: serde_json::to_value(&reply).ok(),
        })
    }

    async fn close(&self, session: &SessionId) {
        if let Err(err) = self.gateway.close(session.as_str()).await {
            tracing::warn!(session = %session, error = %err, "cannot close a gateway session");
        }
    }
}

fn host_error(err: GatewayError) -> HostError {
    match err {
        GatewayError::SessionNotFound { id } | GatewayError::SessionClosed { id, .. } => {
            SessionId::parse(&id).map_or_else(
                || HostError::Internal(format!("malformed session id {id:?}").into()),
                HostError::UnknownSession,
            )
        }
        other @ (GatewayError::Policy(_)
        | GatewayError::Sandbox { .. }
        | GatewayError::Store(_)
        | GatewayError::Ledger { .. }
        | GatewayError::DataDir { .. }) => HostError::Internal(Box::new(other)),
    }
}
