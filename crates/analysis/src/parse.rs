//! Parsing untrusted source in the server's process, bounded: a size cap checked before the
//! parser sees a byte, and a time limit enforced through tree-sitter's progress callback for
//! parsing and for query execution, so no input can hang a request.

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use serde::Serialize;
use tree_sitter::{Node, ParseOptions, Parser, Point, Tree};

use crate::language::Language;

/// The largest source, in bytes, that [`crate::validate`], [`crate::functions`] and
/// [`crate::brackets`] accept: 2 MiB, far beyond any hand-written file and small enough to
/// parse in well under a second.
pub const MAX_SOURCE_BYTES: usize = 2 * 1024 * 1024;

/// How long one parse may run before it is abandoned; queries over the tree get the same
/// budget again.
pub const PARSE_TIME_LIMIT: Duration = Duration::from_secs(2);

/// Why source could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnalysisError {
    #[error("source is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    #[error("parsing {language} source took longer than {limit_ms} ms and was abandoned")]
    TimedOut { language: Language, limit_ms: u128 },
    #[error("the {language} grammar could not be loaded: {reason}")]
    Grammar { language: Language, reason: String },
}

/// A place in the source: 1-based line, and 1-based column counted in characters (Unicode
/// scalar values), which is what an editor or a model counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// The position of a byte offset in `source` (clamped to the source, and moved back to
    /// a character boundary).
    pub fn of_offset(source: &str, offset: usize) -> Self {
        let mut offset = offset.min(source.len());
        while !source.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &source[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Self {
            line: before.bytes().filter(|b| *b == b'\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }

    /// The position of a tree-sitter point (0-based row, byte column) in `source`.
    pub(crate) fn of_point(source: &str, point: Point) -> Self {
        let line_start = line_start_offset(source, point.row);
        let line_end = source[line_start..]
            .find('\n')
            .map_or(source.len(), |i| line_start + i);
        let mut end = (line_start + point.column).min(line_end);
        while !source.is_char_boundary(end) {
            end -= 1;
        }
        Self {
            line: point.row + 1,
            column: source[line_start..end].chars().count() + 1,
        }
    }
}

/// Line starts of a text, for turning many byte offsets into [`Position`]s cheaply.
#[derive(Debug)]
pub(crate) struct LineIndex<'a> {
    source: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(source: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { source, starts }
    }

    pub(crate) fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|start| *start <= offset);
        let start = self.starts[line - 1];
        Position {
            line,
            column: self.source[start..offset].chars().count() + 1,
        }
    }
}

fn line_start_offset(source: &str, row: usize) -> usize {
    if row == 0 {
        return 0;
    }
    source
        .match_indices('\n')
        .nth(row - 1)
        .map_or(source.len(), |(i, _)| i + 1)
}

/// Checks the size cap.
pub(crate) fn check_size(source: &str) -> Result<(), AnalysisError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(AnalysisError::TooLarge {
            size: source.len(),
            limit: MAX_SOURCE_BYTES,
        });
    }
    Ok(())
}

/// Parses `source` within [`MAX_SOURCE_BYTES`] and [`PARSE_TIME_LIMIT`].
pub(crate) fn parse(language: Language, source: &str) -> Result<Tree, AnalysisError> {
    check_size(source)?;
    let mut parser = Parser::new();
    parser
        .set_language(&language.grammar())
        .map_err(|error| AnalysisError::Grammar {
            language,
            reason: error.to_string(),
        })?;
    let deadline = Deadline::start();
    let mut progress = |_: &tree_sitter::ParseState| deadline.check();
    let input = parser_input(language, source);
    let bytes: &[u8] = &input;
    let mut input = |offset: usize, _: Point| bytes.get(offset..).unwrap_or_default();
    parser
        .parse_with_options(
            &mut input,
            None,
            Some(ParseOptions::new().progress_callback(&mut progress)),
        )
        .ok_or(AnalysisError::TimedOut {
            language,
            limit_ms: PARSE_TIME_LIMIT.as_millis(),
        })
}

/// The bytes the parser sees. Shell source is parsed with every non-ASCII byte replaced by
/// `x`: tree-sitter-bash 0.25.1's external scanner hands code points to C's `isdigit`,
/// which is undefined beyond 255 and crashed the process on input such as `{` followed by
/// a CJK character (found by this crate's property tests). A non-ASCII character is a word
/// character to Bash either way, and the byte offsets are unchanged, so positions, snippets
/// and rule predicates still use the original text.
fn parser_input(language: Language, source: &str) -> Cow<'_, [u8]> {
    if language != Language::Shell || source.is_ascii() {
        return Cow::Borrowed(source.as_bytes());
    }
    Cow::Owned(
        source
            .bytes()
            .map(|b| if b.is_ascii() { b } else { b'x' })
            .collect(),
    )
}

/// A point in time after which parsing and queries stop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    pub(crate) fn start() -> Self {
        Self(Instant::now() + PARSE_TIME_LIMIT)
    }

    pub(crate) fn check(self) -> ControlFlow<()> {
        if Instant::now() >= self.0 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    pub(crate) fn passed(self) -> bool {
        Instant::now() >= self.0
    }
}

/// The text of a node, shortened to its first line and at most `max` characters, with `…`
/// where it was cut.
pub(crate) fn snippet(source: &str, node: Node<'_>, max: usize) -> String {
    let text = source.get(node.byte_range()).unwrap_or_default();
    shorten(text, max)
}

/// `text` cut to its first line and `max` characters, `…` marking a cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let cut = first.len() < text.trim_end().len();
    let mut out: String = first.chars().take(max).collect();
    if cut || first.chars().count() > max {
        out.push('…');
    }
    out
}

/// Every node of the tree in document order, without recursion (deep trees from hostile
/// input cannot overflow the stack).
pub(crate) fn walk<'t>(tree: &'t Tree, mut visit: impl FnMut(Node<'t>) -> bool) {
    let mut cursor = tree.walk();
    loop {
        let descend = visit(cursor.node());
        if descend && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}
