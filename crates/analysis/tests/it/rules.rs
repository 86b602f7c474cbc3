//! The rules: they compile, and each one's examples behave, in each of its languages.

use forge_analysis::{Language, Severity, check_rules, rules, validate};
use serde_json::json;

#[test]
fn rules_compile_with_unique_ids() {
    assert_eq!(check_rules(), Vec::<String>::new());
}

#[test]
fn every_language_has_rules() {
    for language in Language::ALL {
        assert!(
            rules()
                .iter()
                .any(|rule| rule.languages.contains(&language)),
            "no rule for {language}"
        );
    }
}

#[test]
fn examples_match_and_do_not_match() {
    let mut failures = Vec::new();
    for rule in rules() {
        assert!(
            !rule.examples.matches.is_empty(),
            "{} has no positive example",
            rule.id
        );
        assert!(
            !rule.examples.not_matches.is_empty(),
            "{} has no negative example",
            rule.id
        );
        for &language in &rule.languages {
            for example in &rule.examples.matches {
                let report = validate(language, example).unwrap();
                if !report.valid {
                    failures.push(format!(
                        "{} ({language}): example does not parse: {example}",
                        rule.id
                    ));
                }
                if !report.findings.iter().any(|f| f.rule == rule.id) {
                    failures.push(format!("{} ({language}): missed {example}", rule.id));
                }
            }
            for example in &rule.examples.not_matches {
                let report = validate(language, example).unwrap();
                if report.findings.iter().any(|f| f.rule == rule.id) {
                    failures.push(format!(
                        "{} ({language}): wrongly matched {example}",
                        rule.id
                    ));
                }
            }
        }
    }
    assert_eq!(failures, Vec::<String>::new());
}

/// The catalogue as reviewers see it: id, languages, severity and message.
#[test]
fn catalogue() {
    let catalogue: Vec<_> = rules()
        .iter()
        .map(|rule| {
            json!({
                "id": rule.id,
                "languages": rule.languages,
                "severity": rule.severity,
                "message": rule.message,
            })
        })
        .collect();
    insta::assert_json_snapshot!(catalogue);
    assert!(rules().iter().any(|r| r.severity == Severity::Warning));
}
