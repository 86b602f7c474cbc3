//! End-to-end tests of the `forge` binary: `forge serve` on a real socket, driven by the
//! ForgeVM Python SDK, by many concurrent clients, and killed with SIGKILL mid-flight.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

mod api;
mod crash;
mod load;
mod sdk;
mod server;
mod websocket;
