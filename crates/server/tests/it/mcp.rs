//! `/mcp` through `app(state)`: there when the binary wires an endpoint, behind the API key.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use forge_mcp::{HostError, HttpEndpoint, HttpOptions, ToolHost, ToolReply};
use forge_server::app;
use forge_types::tool::{SessionId, ToolSpec};
use http_body_util::BodyExt;
use pretty_assertions::assert_eq;
use tower::ServiceExt;

use crate::Ctx;

/// A host with one session and no tools: enough to see requests reach MCP.
#[derive(Debug)]
struct NoTools;

impl ToolHost for NoTools {
    async fn open(&self, _attach: Option<SessionId>) -> Result<SessionId, HostError> {
        Ok(SessionId::from_random([1; 6]))
    }
    async fn tools(&self, _session: &SessionId) -> Result<Vec<ToolSpec>, HostError> {
        Ok(Vec::new())
    }
    async fn call(
        &self,
        _session: &SessionId,
        tool: &str,
        _arguments: serde_json::Map<String, serde_json::Value>,
        _idempotency_key: Option<String>,
    ) -> Result<ToolReply, HostError> {
        Err(HostError::UnknownTool(tool.to_owned()))
    }
    async fn close(&self, _session: &SessionId) {}
}

fn initialize(key: Option<&str>) -> Request<Body> {
    let mut request = Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    request
        .body(Body::from(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"0"}}}"#,
        ))
        .unwrap()
}

#[tokio::test]
async fn mcp_is_served_behind_the_api_key_only_when_wired() {
    const KEY: &str = "0123456789abcdef-key";
    let ctx = Ctx::new(|c| c.api_key = Some(KEY.into())).await;
    let bare = app(ctx.state.clone())
        .oneshot(initialize(Some(KEY)))
        .await
        .unwrap();
    assert_eq!(bare.status(), StatusCode::NOT_FOUND);

    let state = ctx.state.clone().with_mcp(HttpEndpoint::new(
        Arc::new(NoTools),
        HttpOptions { any_host: true },
    ));
    let refused = app(state.clone()).oneshot(initialize(None)).await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);

    let accepted = app(state).oneshot(initialize(Some(KEY))).await.unwrap();
    assert_eq!(
        (
            accepted.status(),
            accepted.headers().contains_key("mcp-session-id")
        ),
        (StatusCode::OK, true)
    );
    // The answer is an event stream: a priming event, then the initialize result.
    let body = accepted.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body);
    let result: serde_json::Value = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .find_map(|data| serde_json::from_str(data).ok())
        .unwrap_or_else(|| panic!("no message in {body}"));
    assert_eq!(
        (
            &result["result"]["serverInfo"]["name"],
            &result["result"]["protocolVersion"]
        ),
        (
            &serde_json::json!("forge"),
            &serde_json::json!("2025-11-25")
        )
    );
}
