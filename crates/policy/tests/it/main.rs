//! Integration tests for forge-policy, through its public API only: parsing policy files,
//! a snapshot of verdicts over representative calls, and properties of the evaluator.
#![expect(
    clippy::tests_outside_test_module,
    clippy::unwrap_used,
    reason = "an integration test crate is all tests, and a test fails by panicking"
)]

mod parse;
mod properties;
mod table;
