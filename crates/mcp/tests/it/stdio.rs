//! `forge mcp`'s transport: the server on one end of a pipe, rmcp's client on the other.

use std::sync::Arc;

use forge_mcp::ToolHost;
use pretty_assertions::assert_eq;
use rmcp::model::{CallToolRequestParams, ErrorCode, MetaObject, RequestMetaObject};
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};

use crate::fake::{Event, FakeHost};

/// The tools, as the fake's policy lets every session see them.
pub(crate) fn listed_tools() -> Value {
    json!([
        {
            "name": "echo",
            "description": "Returns its text.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
        {
            "name": "write_file",
            "description": "Writes a file.",
            "inputSchema": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            },
        },
    ])
}

pub(crate) fn arguments(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[tokio::test]
async fn a_client_lists_the_sessions_tools_and_calls_them() {
    let host = Arc::new(FakeHost::default());
    let session = host.open(None).await.unwrap();
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(forge_mcp::serve_on(
        host.clone(),
        session.clone(),
        tokio::io::split(server_io),
    ));
    let client = ().serve(client_io).await.unwrap();

    let info = client.peer_info().unwrap();
    assert_eq!(
        (
            info.server_info.as_ref().map(|server| server.name.as_str()),
            info.capabilities.tools.is_some()
        ),
        (Some("forge"), true)
    );

    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(serde_json::to_value(&tools).unwrap(), listed_tools());

    let echoed = client
        .call_tool(
            CallToolRequestParams::new("echo").with_arguments(arguments(json!({"text": "hi"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&echoed).unwrap(),
        json!({
            "content": [{"type": "text", "text": format!("{session}: hi")}],
            "structuredContent": {"session": session, "text": "hi"},
            "isError": false,
        })
    );

    // A retrying client sends its idempotency key in `_meta`; it reaches the host.
    let mut keyed =
        CallToolRequestParams::new("echo").with_arguments(arguments(json!({"text": "again"})));
    keyed.meta = Some(RequestMetaObject(MetaObject(arguments(
        json!({forge_mcp::IDEMPOTENCY_META: "retry-1"}),
    ))));
    let keyed = client.call_tool(keyed).await.unwrap();
    assert_eq!(
        keyed.structured_content,
        Some(json!({"session": session, "text": "again", "idempotency_key": "retry-1"}))
    );

    let denied = client
        .call_tool(
            CallToolRequestParams::new("write_file")
                .with_arguments(arguments(json!({"path": "/etc/passwd", "content": "x"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&denied).unwrap(),
        json!({
            "content": [{
                "type": "text",
                "text": "denied by rule writable_paths: /etc/passwd is outside /workspace",
            }],
            "isError": true,
        })
    );

    let unknown = client
        .call_tool(CallToolRequestParams::new("no_such_tool"))
        .await
        .unwrap_err();
    let ServiceError::McpError(unknown) = unknown else {
        panic!("not a protocol error: {unknown:?}");
    };
    assert_eq!(
        (unknown.code, unknown.message.as_ref()),
        (ErrorCode::INVALID_PARAMS, "no tool named \"no_such_tool\"")
    );

    // Closing stdin ends the service; the session is the caller's to close, not the server's.
    client.cancel().await.unwrap();
    server.await.unwrap().unwrap();
    assert_eq!(host.events(), vec![Event::Opened(session)]);
}
