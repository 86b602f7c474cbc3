//! Helpers shared by Forge's test suites.
