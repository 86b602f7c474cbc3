//! `/mcp`: the Streamable HTTP endpoint on a real socket, driven by rmcp's HTTP client.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use forge_mcp::{HttpEndpoint, HttpOptions};
use pretty_assertions::assert_eq;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::fake::{Event, FakeHost};
use crate::stdio::{arguments, listed_tools};

/// Serves the endpoint on a free loopback port; returns its URL.
async fn serve(endpoint: &HttpEndpoint) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let router = endpoint.router();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

fn client_config(url: &str, attach: Option<&str>) -> StreamableHttpClientTransportConfig {
    let mut headers = HashMap::new();
    if let Some(session) = attach {
        headers.insert(
            forge_mcp::ATTACH_HEADER.parse().unwrap(),
            session.parse().unwrap(),
        );
    }
    StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers)
}

/// Waits until `host` has seen `events` (closing happens on a task once the session ends).
async fn wait_for(host: &FakeHost, events: &[Event]) {
    for _ in 0..500 {
        if host.events() == events {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(host.events(), events);
}

#[tokio::test]
async fn each_mcp_session_gets_its_own_gateway_session_closed_when_it_ends() {
    let host = Arc::new(FakeHost::default());
    let endpoint = HttpEndpoint::new(host.clone(), HttpOptions::default());
    let url = serve(&endpoint).await;

    let first = ()
        .serve(StreamableHttpClientTransport::from_config(client_config(
            &url, None,
        )))
        .await
        .unwrap();
    let second = ()
        .serve(StreamableHttpClientTransport::from_config(client_config(
            &url, None,
        )))
        .await
        .unwrap();
    let [one, two] = [0, 1].map(|n| forge_types::tool::SessionId::from_random([0, 0, 0, 0, 0, n]));
    assert_eq!(
        host.events(),
        vec![Event::Opened(one.clone()), Event::Opened(two.clone())]
    );

    assert_eq!(
        serde_json::to_value(first.list_all_tools().await.unwrap()).unwrap(),
        listed_tools()
    );
    let echo = |text: &str| {
        CallToolRequestParams::new("echo").with_arguments(arguments(json!({"text": text})))
    };
    let from_second = second.call_tool(echo("b")).await.unwrap();
    assert_eq!(
        serde_json::to_value(&from_second.structured_content).unwrap(),
        json!({"session": two, "text": "b"})
    );

    // The client ends its MCP session (DELETE); its gateway session goes with it.
    first.cancel().await.unwrap();
    wait_for(
        &host,
        &[
            Event::Opened(one.clone()),
            Event::Opened(two.clone()),
            Event::Closed(one.clone()),
        ],
    )
    .await;

    // Shutting the endpoint down ends the rest.
    endpoint.shutdown();
    wait_for(
        &host,
        &[
            Event::Opened(one.clone()),
            Event::Opened(two.clone()),
            Event::Closed(one),
            Event::Closed(two),
        ],
    )
    .await;
    drop(second);
}

#[tokio::test]
async fn a_client_attaches_to_an_existing_session_and_leaves_it_open() {
    let host = Arc::new(FakeHost::default());
    let existing = host.existing_session();
    let endpoint = HttpEndpoint::new(host.clone(), HttpOptions::default());
    let url = serve(&endpoint).await;

    let client = ()
        .serve(StreamableHttpClientTransport::from_config(client_config(
            &url,
            Some(existing.as_str()),
        )))
        .await
        .unwrap();
    let reply = client
        .call_tool(
            CallToolRequestParams::new("echo").with_arguments(arguments(json!({"text": "x"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&reply.structured_content).unwrap(),
        json!({"session": existing, "text": "x"})
    );
    client.cancel().await.unwrap();
    endpoint.shutdown();
    // Give a (wrong) close every chance to happen before looking.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(host.events(), vec![Event::Attached(existing)]);
}

#[tokio::test]
async fn attaching_to_an_unknown_session_fails_the_handshake() {
    let host = Arc::new(FakeHost::default());
    let endpoint = HttpEndpoint::new(host.clone(), HttpOptions::default());
    let url = serve(&endpoint).await;

    let missing = forge_types::tool::SessionId::from_random([9; 6]);
    let refused = ()
        .serve(StreamableHttpClientTransport::from_config(client_config(
            &url,
            Some(missing.as_str()),
        )))
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("no gateway session ses-090909090909"),
        "{refused}"
    );
    let malformed = ()
        .serve(StreamableHttpClientTransport::from_config(client_config(
            &url,
            Some("../etc"),
        )))
        .await
        .unwrap_err();
    assert!(
        malformed
            .to_string()
            .contains("\"../etc\" is not a gateway session id"),
        "{malformed}"
    );
    assert_eq!(host.events(), vec![]);
}
