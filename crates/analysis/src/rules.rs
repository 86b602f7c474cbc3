//! Rule-based findings: tree-sitter queries kept as data in `rules.toml`, each with the
//! examples that prove what it matches and what it leaves alone.

use std::collections::HashSet;
use std::fmt;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Query, QueryCursor, QueryCursorOptions, StreamingIterator, Tree};

use crate::language::Language;
use crate::parse::{Deadline, Position, snippet};

/// The rules, as shipped: `src/rules.toml` in this crate.
pub const RULES_TOML: &str = include_str!("rules.toml");

/// How many findings one result reports at most.
pub const MAX_FINDINGS: usize = 200;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth a look.
    Info,
    /// Dangerous, sometimes needed.
    Warning,
    /// Runs code or a shell command built from data.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Error => "error",
        })
    }
}

/// One rule as written in `rules.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Stable id, `<language>.<what>`, reported in every finding.
    pub id: String,
    pub languages: Vec<Language>,
    pub severity: Severity,
    /// What is wrong and what to do instead.
    pub message: String,
    /// The query; it captures the reported node as `@finding`.
    pub query: String,
    /// A query that, when it captures the reported node as `@finding`, drops the finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unless: Option<String>,
    pub examples: Examples,
}

/// Snippets that must (`matches`) and must not (`not_matches`) produce the rule, in each of
/// the rule's languages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Examples {
    pub matches: Vec<String>,
    pub not_matches: Vec<String>,
}

/// A rule that matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub rule: String,
    pub severity: Severity,
    pub message: String,
    /// Where the reported node starts (`line`, `column`).
    #[serde(flatten)]
    pub start: Position,
    pub end: Position,
    /// The first line of the reported code, at most 120 characters.
    pub snippet: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    rule: Vec<Rule>,
}

struct Compiled {
    rule: &'static Rule,
    language: Language,
    query: Query,
    finding: u32,
    unless: Option<(Query, u32)>,
}

struct RuleSet {
    rules: Vec<Rule>,
}

static RULES: LazyLock<RuleSet> = LazyLock::new(|| {
    #[expect(
        clippy::expect_used,
        reason = "the embedded rules are parsed by every test run; a broken file is a build defect"
    )]
    let file: RuleFile = toml::from_str(RULES_TOML).expect("src/rules.toml parses");
    RuleSet { rules: file.rule }
});

static COMPILED: LazyLock<Vec<Compiled>> = LazyLock::new(|| {
    let mut compiled = Vec::new();
    for rule in &RULES.rules {
        for &language in &rule.languages {
            #[expect(
                clippy::expect_used,
                reason = "every rule's queries are compiled by every test run; a broken one is a build defect"
            )]
            let one = compile(rule, language).expect("rule queries compile");
            compiled.push(one);
        }
    }
    compiled
});

/// Every rule, in the order of `rules.toml`.
pub fn rules() -> &'static [Rule] {
    &RULES.rules
}

/// Compiles one rule for one language, naming the rule in any error. Exposed to tests
/// through [`check_rules`].
fn compile(rule: &'static Rule, language: Language) -> Result<Compiled, String> {
    let grammar = language.grammar();
    let query = Query::new(&grammar, &rule.query)
        .map_err(|error| format!("rule {} ({language}): query: {error}", rule.id))?;
    let finding = query
        .capture_index_for_name("finding")
        .ok_or_else(|| format!("rule {} ({language}): query captures no @finding", rule.id))?;
    let unless = match &rule.unless {
        None => None,
        Some(text) => {
            let unless = Query::new(&grammar, text)
                .map_err(|error| format!("rule {} ({language}): unless: {error}", rule.id))?;
            let index = unless.capture_index_for_name("finding").ok_or_else(|| {
                format!("rule {} ({language}): unless captures no @finding", rule.id)
            })?;
            Some((unless, index))
        }
    };
    Ok(Compiled {
        rule,
        language,
        query,
        finding,
        unless,
    })
}

/// Compiles every rule for every language it names and reports each problem (a query that
/// does not compile, a missing `@finding`, an id used twice). Empty means the rules are
/// sound; the tests assert it.
pub fn check_rules() -> Vec<String> {
    let mut problems = Vec::new();
    let mut ids = HashSet::new();
    for rule in rules() {
        if !ids.insert(rule.id.as_str()) {
            problems.push(format!("rule id {} is used twice", rule.id));
        }
        for &language in &rule.languages {
            if let Err(problem) = compile(rule, language) {
                problems.push(problem);
            }
        }
    }
    problems
}

/// Runs every rule for `language` over `tree`; the flag says whether findings were capped
/// or the time ran out.
pub(crate) fn findings(language: Language, tree: &Tree, source: &str) -> (Vec<Finding>, bool) {
    // Compiling the rules (once per process) is not the input's time.
    let compiled = LazyLock::force(&COMPILED);
    let deadline = Deadline::start();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut truncated = false;
    let root = tree.root_node();
    for compiled in compiled.iter().filter(|c| c.language == language) {
        let mut cursor = QueryCursor::new();
        cursor.set_match_limit(MATCH_LIMIT);
        let mut progress = |_: &tree_sitter::QueryCursorState| deadline.check();
        let options = QueryCursorOptions::new().progress_callback(&mut progress);
        let mut matches =
            cursor.matches_with_options(&compiled.query, root, source.as_bytes(), options);
        while let Some(found) = matches.next() {
            for capture in found
                .captures()
                .iter()
                .filter(|c| c.index == compiled.finding)
            {
                let node = capture.node;
                if !seen.insert((compiled.rule.id.as_str(), node.id())) {
                    continue;
                }
                if compiled
                    .unless
                    .as_ref()
                    .is_some_and(|(unless, index)| excused(unless, *index, node, source))
                {
                    continue;
                }
                if out.len() >= MAX_FINDINGS {
                    truncated = true;
                    continue;
                }
                out.push(Finding {
                    rule: compiled.rule.id.clone(),
                    severity: compiled.rule.severity,
                    message: compiled.rule.message.clone(),
                    start: Position::of_point(source, node.start_position()),
                    end: Position::of_point(source, node.end_position()),
                    snippet: snippet(source, node, 120),
                });
            }
        }
        if deadline.passed() {
            truncated = true;
            break;
        }
    }
    out.sort_by(|a, b| (a.start, &a.rule).cmp(&(b.start, &b.rule)));
    (out, truncated)
}

/// Matches in progress per query; more and the oldest are dropped, which bounds memory on
/// pathological trees.
const MATCH_LIMIT: u32 = 256;

fn excused(unless: &Query, index: u32, node: Node<'_>, source: &str) -> bool {
    let mut cursor = QueryCursor::new();
    cursor.set_match_limit(MATCH_LIMIT);
    let mut matches = cursor.matches(unless, node, source.as_bytes());
    while let Some(found) = matches.next() {
        if found
            .captures()
            .iter()
            .any(|c| c.index == index && c.node.id() == node.id())
        {
            return true;
        }
    }
    false
}
