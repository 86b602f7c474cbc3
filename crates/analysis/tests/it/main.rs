//! Integration tests for forge-analysis (being written).
