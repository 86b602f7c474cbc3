//! Code analysis for the tool gateway's code and project tools: `validate_code`,
//! `functions_mapping`, `bracket_tracker`, `search_in_files` and `detect_stack`.
//!
//! This crate is pure: the gateway reads files out of the sandbox through the sandbox
//! backend and hands over bytes and paths; nothing here touches the file system, the network
//! or a process. Every output is plain data that serializes to the tool result's JSON.
//!
//! Source comes from untrusted agents and is parsed in the server's process, so parsing is
//! bounded: at most [`MAX_SOURCE_BYTES`], within [`PARSE_TIME_LIMIT`] (tree-sitter's progress
//! callback abandons a parse, or a rule query, that runs longer), and walked without
//! recursion so deep nesting cannot overflow the stack.
//!
//! - [`validate`]: syntax errors (tree-sitter ERROR and MISSING nodes, with positions, the
//!   offending text and what was expected) and rule findings. The rules are tree-sitter
//!   queries kept as data in `src/rules.toml` ([`rules()`]), so strings and comments never
//!   trigger them, and each carries examples the tests check.
//! - [`functions`]: functions, methods and the types holding them, with one-line signatures.
//! - [`brackets`]: bracket balance, skipping strings and comments.
//! - [`SearchQuery`]: a ripgrep matcher compiled once and run over each file's bytes, with
//!   caps, binary files skipped and [`is_ignored`] folders left out.
//! - [`detect_stack`]: languages, package managers, frameworks and suggested commands from a
//!   file listing and manifest contents.
//!
//! ```
//! use forge_analysis::{Language, validate};
//!
//! let source = "import subprocess\nsubprocess.run(cmd, shell=True)\nprint('eval(x)'\n";
//! let report = validate(Language::from_name("py")?, source)?;
//! assert!(!report.valid);
//! assert_eq!(report.syntax_errors[0].start.line, 3);
//! assert_eq!(report.findings[0].rule, "python.subprocess-shell");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod brackets;
pub mod language;
pub mod parse;
pub mod rules;
pub mod search;
pub mod stack;
pub mod symbols;
pub mod syntax;
pub mod validate;

pub use brackets::{
    BracketIssue, BracketReport, IssueKind, MAX_BRACKET_ISSUES, ScanMethod, brackets,
};
pub use language::{Language, LanguageError};
pub use parse::{AnalysisError, MAX_SOURCE_BYTES, PARSE_TIME_LIMIT, Position};
pub use rules::{Examples, Finding, MAX_FINDINGS, Rule, Severity, check_rules, rules};
pub use search::{
    FileMatches, IGNORED_DIRS, Match, Search, SearchError, SearchQuery, SearchResults, is_ignored,
};
pub use stack::{
    Detected, LanguageFiles, MAX_MANIFEST_BYTES, Purpose, Stack, StackInput, SuggestedCommand,
    detect_stack, manifests_wanted, wants_contents,
};
pub use symbols::{MAX_SYMBOLS, Symbol, SymbolKind, functions};
pub use syntax::{MAX_SYNTAX_ERRORS, SyntaxError};
pub use validate::{Validation, validate};
