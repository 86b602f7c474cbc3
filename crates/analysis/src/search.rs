//! `search_in_files`: a pattern compiled once with ripgrep's matcher, run over each file's
//! bytes as the gateway reads them, with caps on matches and line length, binary files
//! skipped, and the folders nobody means to search ([`IGNORED_DIRS`]) left out.
//!
//! The regex engine runs in time linear in the input, so no pattern can backtrack
//! catastrophically; its compiled size is capped too.

use std::io;
use std::path::{Component, Path};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::Lossy};
use serde::{Deserialize, Serialize};

/// The longest pattern accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;

/// The most memory a compiled pattern may use.
const REGEX_SIZE_LIMIT: usize = 8 * 1024 * 1024;

/// Directory names never searched: version control, dependencies, build output, caches and
/// virtual environments.
pub const IGNORED_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "bower_components",
    "target",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    "dist",
    "build",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".next",
    ".nuxt",
    ".cache",
    ".gradle",
    ".idea",
    "vendor",
    "coverage",
    ".terraform",
];

/// Whether `path` lies in (or is) an ignored directory: any of its components is one of
/// [`IGNORED_DIRS`]. The path may be relative or absolute.
pub fn is_ignored(path: &Path) -> bool {
    path.components().any(|component| match component {
        Component::Normal(name) => name.to_str().is_some_and(|n| IGNORED_DIRS.contains(&n)),
        _ => false,
    })
}

/// What to search for, as a tool call sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchQuery {
    pub pattern: String,
    /// The pattern is literal text, not a regular expression.
    pub fixed_strings: bool,
    pub case_insensitive: bool,
    /// Matches must start and end at word boundaries.
    pub whole_word: bool,
    /// The most matches reported over all files (default 200).
    pub max_matches: usize,
    /// The most matches reported from one file (default 50).
    pub max_matches_per_file: usize,
    /// Longer matching lines are cut to this many characters (default 240).
    pub max_line_len: usize,
}

impl Default for SearchQuery {
    fn default() -> Self {
        Self {
            pattern: String::new(),
            fixed_strings: false,
            case_insensitive: false,
            whole_word: false,
            max_matches: 200,
            max_matches_per_file: 50,
            max_line_len: 240,
        }
    }
}

impl SearchQuery {
    /// A regex query with the default caps.
    pub fn regex(pattern: impl Into<String>) -> Self {
        Self {
            pattern: pattern.into(),
            ..Self::default()
        }
    }

    /// A literal-text query with the default caps.
    pub fn fixed(text: impl Into<String>) -> Self {
        Self {
            pattern: text.into(),
            fixed_strings: true,
            ..Self::default()
        }
    }

    /// Compiles the pattern once for every file of a search.
    pub fn compile(&self) -> Result<Search, SearchError> {
        if self.pattern.is_empty() {
            return Err(SearchError::EmptyPattern);
        }
        if self.pattern.len() > MAX_PATTERN_BYTES {
            return Err(SearchError::PatternTooLong {
                len: self.pattern.len(),
                limit: MAX_PATTERN_BYTES,
            });
        }
        let matcher = RegexMatcherBuilder::new()
            .fixed_strings(self.fixed_strings)
            .case_insensitive(self.case_insensitive)
            .word(self.whole_word)
            .line_terminator(Some(b'\n'))
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build(&self.pattern)
            .map_err(|error| SearchError::InvalidPattern {
                pattern: self.pattern.clone(),
                reason: error.to_string(),
            })?;
        Ok(Search {
            matcher,
            query: self.clone(),
        })
    }
}

/// A query that cannot be searched for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    #[error("the search pattern is empty")]
    EmptyPattern,
    #[error("the search pattern is {len} bytes, over the limit of {limit}")]
    PatternTooLong { len: usize, limit: usize },
    #[error("invalid search pattern {pattern:?}: {reason}")]
    InvalidPattern { pattern: String, reason: String },
}

/// A compiled query.
#[derive(Debug, Clone)]
pub struct Search {
    matcher: RegexMatcher,
    query: SearchQuery,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Match {
    /// The path as the caller named the file.
    pub path: String,
    /// 1-based.
    pub line: u64,
    /// 1-based, in characters, where the first match on the line starts.
    pub column: usize,
    /// The line without its terminator, cut to `max_line_len` characters (`…` marks a cut);
    /// invalid UTF-8 shows as U+FFFD.
    pub text: String,
}

/// The matches of one file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct FileMatches {
    pub matches: Vec<Match>,
    /// The file had more matching lines than `max_matches_per_file`.
    pub truncated: bool,
    /// The file holds a NUL byte, so it was taken for binary and not searched.
    pub binary: bool,
}

impl Search {
    pub fn query(&self) -> &SearchQuery {
        &self.query
    }

    /// Searches one file's contents. Binary content (any NUL byte) is skipped whole; at
    /// most `max_matches_per_file` lines are returned.
    pub fn search_bytes(&self, path: &str, bytes: &[u8]) -> FileMatches {
        self.search_capped(path, bytes, self.query.max_matches_per_file)
    }

    fn search_capped(&self, path: &str, bytes: &[u8], cap: usize) -> FileMatches {
        if bytes.contains(&0) {
            return FileMatches {
                binary: true,
                ..FileMatches::default()
            };
        }
        let mut out = FileMatches::default();
        if cap == 0 {
            out.truncated = self.matcher.is_match(bytes).unwrap_or(false);
            return out;
        }
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::none())
            .line_number(true)
            .build();
        let max_line = self.query.max_line_len;
        let result = searcher.search_slice(
            &self.matcher,
            bytes,
            Lossy(|line_number, line| {
                if out.matches.len() >= cap {
                    out.truncated = true;
                    return Ok(false);
                }
                let line = line.trim_end_matches(['\n', '\r']);
                let column = match self.matcher.find(line.as_bytes()) {
                    Ok(Some(found)) => line
                        .get(..found.start())
                        .map_or(1, |before| before.chars().count() + 1),
                    _ => 1,
                };
                out.matches.push(Match {
                    path: path.to_owned(),
                    line: line_number,
                    column,
                    text: cut(line, max_line),
                });
                Ok::<bool, io::Error>(true)
            }),
        );
        // Searching a slice performs no I/O and the sink never fails.
        debug_assert!(result.is_ok());
        out
    }

    /// An empty result set for this search, to add files to.
    pub fn results(&self) -> SearchResults {
        SearchResults::default()
    }

    /// Searches one more file into `results`, respecting both caps. Returns `false` once
    /// `max_matches` is reached, when the caller should stop reading files.
    pub fn add_file(&self, results: &mut SearchResults, path: &str, bytes: &[u8]) -> bool {
        let room = self.query.max_matches.saturating_sub(results.matches.len());
        if room == 0 {
            results.truncated = true;
            return false;
        }
        let found = self.search_capped(path, bytes, room.min(self.query.max_matches_per_file));
        results.files_searched += 1;
        results.binary_files_skipped += usize::from(found.binary);
        results.truncated |= found.truncated;
        results.matches.extend(found.matches);
        if results.matches.len() >= self.query.max_matches {
            results.truncated = true;
            return false;
        }
        true
    }
}

/// The result of a search over many files.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SearchResults {
    pub matches: Vec<Match>,
    pub files_searched: usize,
    pub binary_files_skipped: usize,
    /// A cap was reached: `max_matches_per_file` left lines of some file out, or
    /// `max_matches` was reached and the search stopped, so more may exist.
    pub truncated: bool,
}

fn cut(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let mut out: String = line.chars().take(max).collect();
    out.push('…');
    out
}
