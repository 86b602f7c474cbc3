//! The MCP server against rmcp's own client, over a pipe (as `forge mcp` is used) and over
//! Streamable HTTP (as `/mcp` is), with a fake tool host standing in for the gateway.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

/// The gateway's dependencies build reqwest without a TLS provider of its own; rmcp's HTTP
/// client here shares the binary's choice (see `forge_image::install_tls_provider`).
#[ctor::ctor(unsafe)]
fn install_tls_provider() {
    forge_image::install_tls_provider();
}

mod fake;
mod http;
mod stdio;
