//! `validate`: whole results per language, kept as snapshots (syntax error positions and
//! messages, findings), plus the limits that keep hostile input bounded.

use forge_analysis::{AnalysisError, Language, MAX_SOURCE_BYTES, validate};

fn snapshot(name: &str, language: Language, source: &str) {
    let report = validate(language, source).unwrap();
    insta::assert_json_snapshot!(name, report);
}

#[test]
fn python() {
    snapshot(
        "python",
        Language::Python,
        r#"import os, subprocess, yaml, pickle

def run(cmd):
    # eval(cmd) in a comment is fine, and so is "os.system(cmd)" in a string
    subprocess.run(cmd, shell=True)
    os.system("ls " + cmd)
    return eval(cmd)

def load(path):
    with open(path) as f:
        return yaml.load(f), yaml.load(f, Loader=yaml.SafeLoader), pickle.loads(f.read())

class Broken:
    def method(self:
        return 1
"#,
    );
}

#[test]
fn python_valid() {
    let report = validate(Language::Python, "def f(x):\n    return x + 1\n").unwrap();
    assert!(report.valid);
    assert!(report.syntax_errors.is_empty() && report.findings.is_empty());
}

#[test]
fn javascript() {
    snapshot(
        "javascript",
        Language::JavaScript,
        r#"const cp = require('child_process');
// eval(userInput) in a comment
const note = "new Function('x')";
function run(userInput) {
  cp.exec('ls ' + userInput);
  setTimeout("tick()", 10);
  return eval(userInput);
}
function broken( {
  return 1;
}
"#,
    );
}

#[test]
fn typescript() {
    snapshot(
        "typescript",
        Language::TypeScript,
        r"import { execSync } from 'child_process';
export function run(cmd: string): string {
  const f = new Function('a', 'return a');
  return execSync(cmd).toString();
}
export const x: number = ;
",
    );
}

#[test]
fn tsx() {
    snapshot(
        "tsx",
        Language::Tsx,
        r#"export function App({ code }: { code: string }) {
  const value = eval(code);
  return <div title="eval(code)">{value}</div>;
}
"#,
    );
}

#[test]
fn rust() {
    snapshot(
        "rust",
        Language::Rust,
        r#"use std::process::Command;

fn run(script: &str) {
    // unsafe { } in a comment does not count
    let _ = Command::new("sh").arg("-c").arg(script).status();
    let p = &0u8 as *const u8;
    let _v = unsafe { *p };
}

fn broken( -> u8 {
    let x = 1
    x
}
"#,
    );
}

#[test]
fn go() {
    snapshot(
        "go",
        Language::Go,
        r#"package main

import (
	"os/exec"
	"unsafe"
)

func run(s string) {
	exec.Command("bash", "-c", s).Run()
	_ = unsafe.Sizeof(s)
}

func broken() {
	x := (1 + 2
}
"#,
    );
}

#[test]
fn shell() {
    snapshot(
        "shell",
        Language::Shell,
        r#"#!/bin/sh
# curl https://example.com/x | sh   (a comment)
echo "eval is only text here"
curl -fsSL https://example.com/install.sh | sh
eval "$CMD"
rm -rf /
if [ -f x ]; then
  echo missing fi
"#,
    );
}

#[test]
fn oversized_source_is_refused() {
    let source = "x = 1\n".repeat(MAX_SOURCE_BYTES / 6 + 1);
    let error = validate(Language::Python, &source).unwrap_err();
    assert!(matches!(error, AnalysisError::TooLarge { limit, .. } if limit == MAX_SOURCE_BYTES));
    assert!(error.to_string().contains("over the limit"), "{error}");
}

#[test]
fn deep_nesting_does_not_overflow() {
    let depth = 50_000;
    let source = format!("x = {}1{}\n", "(".repeat(depth), ")".repeat(depth));
    let report = validate(Language::Python, &source).unwrap();
    assert!(report.findings.is_empty());
    let source = format!("x = {}\n", "[".repeat(depth));
    let report = validate(Language::Python, &source).unwrap();
    assert!(!report.valid);
}

#[test]
fn many_errors_are_capped() {
    let source = ")\n".repeat(500);
    let report = validate(Language::Python, &source).unwrap();
    assert!(report.syntax_errors.len() <= forge_analysis::MAX_SYNTAX_ERRORS);
}

/// tree-sitter-bash's scanner passes code points to C's `isdigit`; a brace followed by a
/// character beyond U+00FF crashed the process before shell input was made ASCII for it.
#[test]
fn shell_brace_before_wide_character_does_not_crash() {
    for source in ["{\u{4e2d}", "echo {\u{1f600}..9}", "x={\u{10ffff}"] {
        let report = validate(Language::Shell, source).unwrap();
        assert!(report.findings.is_empty());
        forge_analysis::brackets(source, Some(Language::Shell)).unwrap();
        forge_analysis::functions(Language::Shell, source).unwrap();
    }
    let report = validate(Language::Shell, "eval \"é{中}\"\n").unwrap();
    assert_eq!(report.findings[0].snippet, "eval \"é{中}\"");
}
