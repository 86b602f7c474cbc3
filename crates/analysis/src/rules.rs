//! Rule-based findings: tree-sitter queries kept as data in `rules.toml`, each with the
//! examples that prove what it matches and what it leaves alone.

use std::collections::HashSet;
use std::fmt;
use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Query, QueryCursor, QueryCursorOptions, StreamingIterator, Tree};

use crate::language::Language;
use crate::parse::{Deadline, LineIndex, PARSE_TIME_LIMIT, Position, snippet};

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

/// One rule compiled alone: how `check_rules` proves each query sound, naming the rule.
struct Compiled {
    query: Query,
    unless: Option<(Query, u32)>,
}

/// A language's rules as one query, so a tree is walked once for all of them.
struct LanguageRules {
    query: Query,
    /// The capture index of `@finding` in `query`.
    finding: u32,
    /// For each pattern of `query`, the index of its rule in `rules`.
    pattern_rule: Vec<usize>,
    rules: Vec<(&'static Rule, Option<(Query, u32)>)>,
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

/// Each language's rules, compiled on first use of that language.
static COMPILED: [OnceLock<LanguageRules>; Language::ALL.len()] =
    [const { OnceLock::new() }; Language::ALL.len()];

fn compiled(language: Language) -> &'static LanguageRules {
    // `Language::ALL` lists the variants in declaration order.
    COMPILED[language as usize].get_or_init(|| {
        #[expect(
            clippy::expect_used,
            reason = "every language's rules are compiled by every test run; a broken query is a build defect"
        )]
        combine(language).expect("rule queries compile")
    })
}

/// Compiles every rule of `language` into one query.
fn combine(language: Language) -> Result<LanguageRules, String> {
    let mut text = String::new();
    let mut pattern_rule = Vec::new();
    let mut rules = Vec::new();
    for rule in RULES
        .rules
        .iter()
        .filter(|rule| rule.languages.contains(&language))
    {
        let alone = compile(rule, language)?;
        pattern_rule.extend(std::iter::repeat_n(
            rules.len(),
            alone.query.pattern_count(),
        ));
        rules.push((rule, alone.unless));
        text.push_str(&rule.query);
        text.push('\n');
    }
    let query = Query::new(&language.grammar(), &text)
        .map_err(|error| format!("the {language} rules together: {error}"))?;
    if query.pattern_count() != pattern_rule.len() {
        return Err(format!(
            "the {language} rules together have {} patterns, alone {}",
            query.pattern_count(),
            pattern_rule.len()
        ));
    }
    let finding = query
        .capture_index_for_name("finding")
        .ok_or_else(|| format!("the {language} rules capture no @finding"))?;
    Ok(LanguageRules {
        query,
        finding,
        pattern_rule,
        rules,
    })
}

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
    if query.capture_index_for_name("finding").is_none() {
        return Err(format!(
            "rule {} ({language}): query captures no @finding",
            rule.id
        ));
    }
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
    Ok(Compiled { query, unless })
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
    if problems.is_empty() {
        for language in Language::ALL {
            if let Err(problem) = combine(language) {
                problems.push(problem);
            }
        }
    }
    problems
}

/// Runs every rule for `language` over `tree`; the flag says whether findings were capped
/// or the time ran out.
pub(crate) fn findings(language: Language, tree: &Tree, source: &str) -> (Vec<Finding>, bool) {
    findings_within(language, tree, source, PARSE_TIME_LIMIT)
}

fn findings_within(
    language: Language,
    tree: &Tree,
    source: &str,
    limit: Duration,
) -> (Vec<Finding>, bool) {
    // Compiling the rules (once per process and language) is not the input's time.
    let compiled = compiled(language);
    let deadline = Deadline::after(limit);
    let lines = LineIndex::new(source);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut truncated = false;
    let mut cursor = QueryCursor::new();
    cursor.set_match_limit(MATCH_LIMIT);
    let mut progress = |_: &tree_sitter::QueryCursorState| deadline.check();
    let options = QueryCursorOptions::new().progress_callback(&mut progress);
    let mut matches = cursor.matches_with_options(
        &compiled.query,
        tree.root_node(),
        source.as_bytes(),
        options,
    );
    while let Some(found) = matches.next() {
        let Some(&(rule, ref unless)) = compiled
            .pattern_rule
            .get(found.pattern_index)
            .and_then(|index| compiled.rules.get(*index))
        else {
            continue;
        };
        for capture in found
            .captures()
            .iter()
            .filter(|c| c.index == compiled.finding)
        {
            let node = capture.node;
            if !seen.insert((rule.id.as_str(), node.id())) {
                continue;
            }
            if unless
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
                rule: rule.id.clone(),
                severity: rule.severity,
                message: rule.message.clone(),
                start: lines.position(node.start_byte()),
                end: lines.position(node.end_byte()),
                snippet: snippet(source, node, 120),
            });
        }
    }
    if deadline.passed() {
        truncated = true;
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
    // Only matches rooted at the node itself count, so patterns never start deeper: the
    // check costs the pattern's size, not the node's (nested calls stay linear).
    cursor.set_max_start_depth(Some(0));
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{MAX_FINDINGS, findings_within};
    use crate::language::Language;
    use crate::parse::parse;

    #[test]
    fn rules_stop_at_their_time_limit() {
        let source = "eval(x)\nos.system(y)\n".repeat(2_000);
        let tree = parse(Language::Python, &source).unwrap();
        let (found, truncated) = findings_within(Language::Python, &tree, &source, Duration::ZERO);
        assert!(truncated);
        assert!(found.len() < 4_000);
        let (found, truncated) =
            findings_within(Language::Python, &tree, &source, Duration::from_mins(1));
        assert!(truncated, "capped at {MAX_FINDINGS}");
        assert_eq!(found.len(), MAX_FINDINGS);
    }
}
