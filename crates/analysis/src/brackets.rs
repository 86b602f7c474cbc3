//! `bracket_tracker`: are `()`, `[]` and `{}` balanced, and where not, which bracket is wrong
//! and what was expected. Brackets inside strings and comments do not count: with a known
//! language the grammar says where those are; otherwise a small lexer guesses (quotes,
//! `//`, `/* */` and `#` comments).

use serde::Serialize;

use crate::language::Language;
use crate::parse::{AnalysisError, LineIndex, Position, check_size, parse, walk};

/// At most this many issues are reported.
pub const MAX_BRACKET_ISSUES: usize = 100;

/// The outcome of [`brackets`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BracketReport {
    pub balanced: bool,
    /// The deepest nesting reached.
    pub max_depth: usize,
    pub issues: Vec<BracketIssue>,
    /// More than [`MAX_BRACKET_ISSUES`] issues; the rest were left out.
    pub truncated: bool,
    /// How strings and comments were found: `"grammar"` (the language's parser) or
    /// `"lexer"` (the language-agnostic guess).
    pub method: ScanMethod,
}

/// How strings and comments were told apart from code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScanMethod {
    Grammar,
    Lexer,
}

/// One problem with one bracket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BracketIssue {
    pub kind: IssueKind,
    /// The bracket at fault.
    pub bracket: char,
    /// Where it is (`line`, `column`).
    #[serde(flatten)]
    pub at: Position,
    /// The bracket that would have been right: the closer of the innermost open bracket
    /// for a mismatch, the closer this opener needs for an unclosed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<char>,
    /// For a mismatch: where the bracket it should have closed was opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened_at: Option<Position>,
    pub message: String,
}

/// What is wrong with a bracket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IssueKind {
    /// A closer with nothing open.
    Unexpected,
    /// A closer of the wrong kind for the innermost open bracket.
    Mismatched,
    /// An opener never closed.
    Unclosed,
}

/// Checks bracket balance. With `language`, strings and comments come from its grammar
/// (which also keeps shell `case` patterns' lone `)` out of the count); without, from a
/// lexer. Source over [`crate::MAX_SOURCE_BYTES`] is an error.
pub fn brackets(source: &str, language: Option<Language>) -> Result<BracketReport, AnalysisError> {
    check_size(source)?;
    let (skipped, method) = match language {
        Some(language) => (grammar_skips(language, source)?, ScanMethod::Grammar),
        None => (lexer_skips(source), ScanMethod::Lexer),
    };
    Ok(scan(source, &skipped, method))
}

/// Byte ranges, sorted and not overlapping, whose brackets do not count.
type Skips = Vec<std::ops::Range<usize>>;

fn grammar_skips(language: Language, source: &str) -> Result<Skips, AnalysisError> {
    let tree = parse(language, source)?;
    let mut skips: Skips = Vec::new();
    walk(&tree, |node| {
        let kind = node.kind();
        if is_literal_kind(kind) {
            skips.push(node.byte_range());
            return false;
        }
        // `case x in a) …;;`: the pattern's `)` is shell syntax, not a bracket.
        if language == Language::Shell && kind == ")" {
            if node.parent().is_some_and(|p| p.kind() == "case_item") {
                skips.push(node.byte_range());
            }
            return false;
        }
        true
    });
    Ok(merge(skips))
}

/// Node kinds whose text is data, across the grammars here.
fn is_literal_kind(kind: &str) -> bool {
    kind.contains("comment")
        || kind.contains("string")
        || matches!(
            kind,
            "char_literal"
                | "rune_literal"
                | "regex"
                | "regex_pattern"
                | "heredoc_body"
                | "heredoc_content"
                | "jsx_text"
        )
}

fn merge(mut skips: Skips) -> Skips {
    skips.sort_by_key(|r| (r.start, r.end));
    let mut out: Skips = Vec::with_capacity(skips.len());
    for range in skips {
        match out.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => out.push(range),
        }
    }
    out
}

/// The language-agnostic guess: `"…"` and `'…'` strings (ending at an unescaped quote or
/// the end of the line), `` `…` `` and triple-quoted strings (across lines), `//` and `#`
/// line comments (`#` only after whitespace or at a line start, and not `#[`/`#!`/`#{`),
/// and `/* */` block comments.
fn lexer_skips(source: &str) -> Skips {
    let bytes = source.as_bytes();
    let mut skips = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let rest = &bytes[i..];
        let end = if rest.starts_with(b"\"\"\"") || rest.starts_with(b"'''") {
            find(bytes, i + 3, &rest[..3]).map_or(bytes.len(), |e| e + 3)
        } else if rest.starts_with(b"//") {
            line_end(bytes, i)
        } else if rest.starts_with(b"/*") {
            find(bytes, i + 2, b"*/").map_or(bytes.len(), |e| e + 2)
        } else if rest[0] == b'#'
            && (i == 0 || bytes[i - 1].is_ascii_whitespace())
            && !matches!(rest.get(1), Some(b'[' | b'!' | b'{'))
        {
            line_end(bytes, i)
        } else if rest[0] == b'`' {
            quoted(bytes, i, b'`', true)
        } else if rest[0] == b'"' || rest[0] == b'\'' {
            quoted(bytes, i, rest[0], false)
        } else {
            i += 1;
            continue;
        };
        skips.push(start..end);
        i = end.max(start + 1);
    }
    skips
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |p| from + p)
}

/// The end of a string opened by `quote` at `start`: after the closing quote, or (for a
/// one-line string) at the end of the line, or of the text.
fn quoted(bytes: &[u8], start: usize, quote: u8, multiline: bool) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' if !multiline => return i,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The index of a bracket pair, for either of its brackets.
fn slot(bracket: char) -> usize {
    match bracket {
        '(' | ')' => 0,
        '[' | ']' => 1,
        _ => 2,
    }
}

fn closer(open: char) -> char {
    match open {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

fn scan(source: &str, skips: &Skips, method: ScanMethod) -> BracketReport {
    let lines = LineIndex::new(source);
    let mut issues = Vec::new();
    let mut truncated = false;
    // Builds an issue only while there is room, so a text of a million unclosed brackets
    // costs no more than a hundred.
    let mut push = |issues: &mut Vec<BracketIssue>, issue: &dyn Fn() -> BracketIssue| {
        if issues.len() < MAX_BRACKET_ISSUES {
            issues.push(issue());
        } else {
            truncated = true;
        }
    };
    let mut open: Vec<(char, usize)> = Vec::new();
    // How many of each opener are on the stack, so a closer that matches none of them is
    // known at once (no scan of a deep stack per stray closer).
    let mut open_counts = [0_usize; 3];
    let mut max_depth = 0;
    let mut next_skip = skips.iter().peekable();
    for (offset, ch) in source.char_indices() {
        if !matches!(ch, '(' | ')' | '[' | ']' | '{' | '}') {
            continue;
        }
        while next_skip.peek().is_some_and(|r| r.end <= offset) {
            next_skip.next();
        }
        if next_skip.peek().is_some_and(|r| r.start <= offset) {
            continue;
        }
        match ch {
            '(' | '[' | '{' => {
                open_counts[slot(ch)] += 1;
                open.push((ch, offset));
                max_depth = max_depth.max(open.len());
            }
            _ => match open.last().copied() {
                None => push(&mut issues, &|| BracketIssue {
                    kind: IssueKind::Unexpected,
                    bracket: ch,
                    at: lines.position(offset),
                    expected: None,
                    opened_at: None,
                    message: format!("`{ch}` closes nothing: no bracket is open"),
                }),
                Some((top, _)) if closer(top) == ch => {
                    open.pop();
                    open_counts[slot(top)] -= 1;
                }
                Some((top, top_offset)) => {
                    let deeper = if open_counts[slot(ch)] == 0 {
                        None
                    } else {
                        open.iter().rposition(|(o, _)| closer(*o) == ch)
                    };
                    if let Some(index) = deeper {
                        // The brackets opened after the match were never closed.
                        for (unclosed, at) in open.drain(index + 1..).rev() {
                            open_counts[slot(unclosed)] -= 1;
                            push(&mut issues, &|| BracketIssue {
                                kind: IssueKind::Unclosed,
                                bracket: unclosed,
                                at: lines.position(at),
                                expected: Some(closer(unclosed)),
                                opened_at: None,
                                message: format!(
                                    "`{unclosed}` is not closed before `{ch}` at {}",
                                    describe(lines.position(offset))
                                ),
                            });
                        }
                        open.pop();
                        open_counts[slot(ch)] -= 1;
                    } else {
                        push(&mut issues, &|| BracketIssue {
                            kind: IssueKind::Mismatched,
                            bracket: ch,
                            at: lines.position(offset),
                            expected: Some(closer(top)),
                            opened_at: Some(lines.position(top_offset)),
                            message: format!(
                                "expected `{}` to close `{top}` from {}, found `{ch}`",
                                closer(top),
                                describe(lines.position(top_offset))
                            ),
                        });
                        open.pop();
                        open_counts[slot(top)] -= 1;
                    }
                }
            },
        }
    }
    for (unclosed, at) in open {
        push(&mut issues, &|| BracketIssue {
            kind: IssueKind::Unclosed,
            bracket: unclosed,
            at: lines.position(at),
            expected: Some(closer(unclosed)),
            opened_at: None,
            message: format!("`{unclosed}` is never closed"),
        });
    }
    issues.sort_by_key(|issue| issue.at);
    BracketReport {
        balanced: issues.is_empty() && !truncated,
        max_depth,
        issues,
        truncated,
        method,
    }
}

fn describe(at: Position) -> String {
    format!("line {} column {}", at.line, at.column)
}
