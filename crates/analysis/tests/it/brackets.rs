//! `brackets`: balance, positions, what was expected, and brackets in strings and comments
//! left out — by the grammar for a known language, by the lexer otherwise.

use forge_analysis::{IssueKind, Language, ScanMethod, brackets};
use pretty_assertions::assert_eq;

#[test]
fn balanced_with_depth() {
    let report = brackets("f(a[0], {b: (c)})", None).unwrap();
    assert!(report.balanced);
    assert_eq!(report.max_depth, 3);
    assert_eq!(report.method, ScanMethod::Lexer);
}

#[test]
fn strings_and_comments_do_not_count_with_a_grammar() {
    let cases = [
        (
            Language::Python,
            "x = f('(', \"[\")  # )))\ns = '''\n{{{\n'''\n",
        ),
        (
            Language::JavaScript,
            "const r = /\\(/; const s = `[${a}`; // }\n/* ( */ f(r, s);\n",
        ),
        (
            Language::Rust,
            "fn f() -> char { let s = \"(\"; let c = '{'; /* ] */ c } // )\n",
        ),
        (
            Language::Go,
            "package main\nfunc f() rune { s := \"(\"; _ = s; return '[' } // }\n",
        ),
        (
            Language::Shell,
            "case $x in\n  a) echo '(' ;;\n  b) echo \"{\" ;;\nesac # )\n",
        ),
    ];
    for (language, source) in cases {
        let report = brackets(source, Some(language)).unwrap();
        assert!(report.balanced, "{language}: {report:#?}");
        assert_eq!(report.method, ScanMethod::Grammar);
    }
}

#[test]
fn strings_and_comments_do_not_count_with_the_lexer() {
    let source = "call(\"(\", ')') // )\n/* [ */ x = '''\n{\n''' # }\nitem[0]\n";
    let report = brackets(source, None).unwrap();
    assert!(report.balanced, "{report:#?}");
}

#[test]
fn problems_snapshot() {
    let source = "x = (1 + 2))\ndef f(a, b:\n    return [a, b}\ny = {'k': [1, 2\n";
    insta::assert_json_snapshot!(
        "brackets_python",
        brackets(source, Some(Language::Python)).unwrap()
    );
    insta::assert_json_snapshot!("brackets_lexer", brackets(source, None).unwrap());
}

#[test]
fn mismatch_names_the_expected_closer_and_the_opener() {
    let report = brackets("let v = [1, 2);", None).unwrap();
    assert!(!report.balanced);
    let issue = &report.issues[0];
    assert_eq!(
        (
            issue.kind,
            issue.bracket,
            issue.expected,
            issue.at.line,
            issue.at.column
        ),
        (IssueKind::Mismatched, ')', Some(']'), 1, 14)
    );
    assert_eq!(issue.opened_at.map(|p| (p.line, p.column)), Some((1, 9)));
}

#[test]
fn columns_count_characters() {
    let report = brackets("é = «(»", None).unwrap();
    assert_eq!(report.issues[0].at.column, 6);
}

#[test]
fn a_stray_closer_deep_inside_is_cheap_and_capped() {
    let source = format!("{}{}", "(".repeat(200_000), "]".repeat(200_000));
    let report = brackets(&source, None).unwrap();
    assert!(!report.balanced);
    assert!(report.truncated);
    assert_eq!(report.issues.len(), forge_analysis::MAX_BRACKET_ISSUES);
    assert_eq!(report.max_depth, 200_000);
}
