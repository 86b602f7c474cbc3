//! Integration tests for forge-analysis, through its public API only: whole results kept as
//! snapshots per language, every rule's examples, bracket tracking, search caps, stack
//! detection on realistic listings, and properties that hold for any input.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

mod brackets;
mod language;
mod properties;
mod rules;
mod search;
mod stack;
mod symbols;
mod validate;
