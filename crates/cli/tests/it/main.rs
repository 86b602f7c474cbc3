//! End-to-end tests of the `forge` binary: `forge serve` on a real socket, driven by the
//! ForgeVM Python SDK, by many concurrent clients, and killed with SIGKILL mid-flight; the tool
//! gateway through the official MCP Python SDK, over `forge mcp` and `/mcp`.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

/// HTTP clients here share the binary's TLS provider choice (see
/// `forge_image::install_tls_provider`); it is made before any test runs.
#[ctor::ctor(unsafe)]
fn install_tls_provider() {
    forge_image::install_tls_provider();
}

mod api;
mod crash;
mod doctor;
mod gateway;
mod images;
mod load;
mod mcp;
mod python;
mod sdk;
mod server;
mod websocket;
