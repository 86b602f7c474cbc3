//! Syntax errors: the ERROR and MISSING nodes of a tree-sitter parse, each with where it
//! starts and ends, the offending text, and what the grammar would have accepted there.

use serde::Serialize;
use tree_sitter::{Node, Tree};

use crate::parse::{Position, shorten, snippet, walk};

/// How many syntax errors one result reports at most; later ones are counted as truncation.
pub const MAX_SYNTAX_ERRORS: usize = 50;

/// One syntax error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SyntaxError {
    /// Where the error starts (`line`, `column`).
    #[serde(flatten)]
    pub start: Position,
    pub end: Position,
    /// What is wrong: `unexpected `)``, `missing `:``, with the tokens expected when the
    /// grammar names few enough of them to be useful.
    pub message: String,
    /// The offending text (the first line of it, at most 80 characters), or for a missing
    /// token the line where it is missing.
    pub snippet: String,
    /// Tokens or constructs the grammar would have accepted at the start of the error,
    /// when there are at most [`MAX_EXPECTED`] of them; empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expected: Vec<String>,
}

/// More possibilities than this and a list of expected tokens says nothing useful.
pub const MAX_EXPECTED: usize = 8;

const SNIPPET_CHARS: usize = 80;

/// The syntax errors of a tree, in document order, at most [`MAX_SYNTAX_ERRORS`]; the flag
/// says whether more were left out.
pub(crate) fn syntax_errors(tree: &Tree, source: &str) -> (Vec<SyntaxError>, bool) {
    let mut errors = Vec::new();
    let mut truncated = false;
    if !tree.root_node().has_error() {
        return (errors, truncated);
    }
    walk(tree, |node| {
        if !node.has_error() {
            return false;
        }
        let error = if node.is_missing() {
            Some(missing(node, source))
        } else if node.is_error() {
            Some(unexpected(node, source))
        } else {
            None
        };
        match error {
            Some(_) if errors.len() >= MAX_SYNTAX_ERRORS => {
                truncated = true;
                false
            }
            Some(error) => {
                errors.push(error);
                // MISSING nodes inside an ERROR node add nothing the ERROR does not say.
                false
            }
            None => true,
        }
    });
    (errors, truncated)
}

fn missing(node: Node<'_>, source: &str) -> SyntaxError {
    let start = Position::of_point(source, node.start_position());
    let what = display_kind(node.kind(), node.is_named());
    SyntaxError {
        start,
        end: Position::of_point(source, node.end_position()),
        message: format!("missing {what}"),
        snippet: line_snippet(source, node.start_position().row),
        expected: vec![what],
    }
}

fn unexpected(node: Node<'_>, source: &str) -> SyntaxError {
    let start = Position::of_point(source, node.start_position());
    let end = Position::of_point(source, node.end_position());
    let text = snippet(source, node, SNIPPET_CHARS);
    let (snippet, message) = if text.trim().is_empty() {
        (
            line_snippet(source, node.start_position().row),
            "unexpected end of input".to_owned(),
        )
    } else {
        // A short error is shown whole (`->`), a long one by the token it starts with.
        let shown = if text.chars().count() <= 24 && !text.ends_with('…') {
            text.trim().to_owned()
        } else {
            first_leaf_text(node, source)
        };
        (text, format!("unexpected `{shown}`"))
    };
    let expected = expected_tokens(node);
    let message = if expected.is_empty() {
        message
    } else {
        format!("{message}; expected {}", expected.join(", "))
    };
    SyntaxError {
        start,
        end,
        message,
        snippet,
        expected,
    }
}

/// The text of the first token inside an ERROR node, which is what the parser stumbled on.
fn first_leaf_text(node: Node<'_>, source: &str) -> String {
    let mut leaf = node;
    while let Some(child) = leaf.child(0) {
        leaf = child;
    }
    let text = source.get(leaf.byte_range()).unwrap_or_default();
    if text.trim().is_empty() {
        shorten(source.get(node.byte_range()).unwrap_or_default(), 40)
    } else {
        shorten(text, 40)
    }
}

/// What the grammar accepted right before the error: the lookahead symbols of the parse
/// state after the preceding node.
fn expected_tokens(node: Node<'_>) -> Vec<String> {
    let state = match node.prev_sibling() {
        Some(previous) => previous.next_parse_state(),
        None => match node.parent() {
            Some(parent) if !parent.is_error() => node.parse_state(),
            _ => return Vec::new(),
        },
    };
    let language = node.language();
    let Some(lookahead) = language.lookahead_iterator(state) else {
        return Vec::new();
    };
    let mut expected: Vec<String> = Vec::new();
    for symbol in lookahead {
        if symbol == 0 || !language.node_kind_is_visible(symbol) {
            continue;
        }
        let Some(kind) = language.node_kind_for_id(symbol) else {
            continue;
        };
        if kind == "ERROR" || kind == "comment" || kind.starts_with('_') {
            continue;
        }
        let shown = display_kind(kind, language.node_kind_is_named(symbol));
        if !expected.contains(&shown) {
            expected.push(shown);
        }
        if expected.len() > MAX_EXPECTED {
            return Vec::new();
        }
    }
    expected
}

/// A token as people write it (`` `)` ``), a construct by its grammar name with spaces
/// (`identifier`, `block`).
fn display_kind(kind: &str, named: bool) -> String {
    if named {
        kind.replace('_', " ")
    } else {
        format!("`{kind}`")
    }
}

/// The text of line `row`, or when that is blank (a token missing at the end of the
/// input), of the last non-blank line before it.
fn line_snippet(source: &str, row: usize) -> String {
    let line = source
        .lines()
        .take(row + 1)
        .filter(|line| !line.trim().is_empty())
        .last()
        .unwrap_or_default()
        .trim();
    shorten(line, SNIPPET_CHARS)
}
