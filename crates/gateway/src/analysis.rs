//! The gateway's side of code analysis: bytes read through the sandbox go in, JSON results
//! come out. The analysis itself is pure and lives apart from the gateway.

use regex::bytes::Regex;
use serde_json::{Value, json};

use crate::reply::ToolError;
use crate::tools::failed;

/// Longest line content a search hit returns.
const HIT_CHARS: usize = 240;

/// A compiled search pattern.
pub(crate) struct Matcher(Regex);

impl Matcher {
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        regex::bytes::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map(Self)
            .map_err(|error| error.to_string())
    }

    /// Matching lines of one file, at most `room`; whether more were left. Binary files
    /// (a NUL byte in the first 8 KiB) are skipped.
    pub(crate) fn search(&self, path: &str, bytes: &[u8], room: usize) -> (Vec<Value>, bool) {
        if bytes.iter().take(8192).any(|b| *b == 0) {
            return (Vec::new(), false);
        }
        let mut hits = Vec::new();
        for (index, line) in bytes.split(|b| *b == b'\n').enumerate() {
            if !self.0.is_match(line) {
                continue;
            }
            if hits.len() == room {
                return (hits, true);
            }
            let text = String::from_utf8_lossy(line);
            let content: String = text
                .trim_end_matches('\r')
                .chars()
                .take(HIT_CHARS)
                .collect();
            hits.push(json!({ "file": path, "line": index + 1, "content": content }));
        }
        (hits, false)
    }
}

/// Brackets of a file: balanced, or the first mismatch, or what is left open.
pub(crate) fn brackets(_path: &str, bytes: &[u8]) -> Value {
    let text = String::from_utf8_lossy(bytes);
    let mut stack: Vec<(char, usize, usize)> = Vec::new();
    let (mut line, mut column) = (1usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut comment = false;
    for ch in text.chars() {
        column += 1;
        if ch == '\n' {
            line += 1;
            column = 0;
            comment = false;
            continue;
        }
        if comment {
            continue;
        }
        if let Some(open) = quote {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == open {
                quote = None;
            }
            continue;
        }
        match ch {
            '"' | '\'' | '`' => quote = Some(ch),
            '#' => comment = true,
            '(' | '[' | '{' => stack.push((ch, line, column)),
            ')' | ']' | '}' => {
                let expected = match ch {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                match stack.pop() {
                    Some((open, ..)) if open == expected => {}
                    other => {
                        return json!({
                            "balanced": false,
                            "error_at": { "line": line, "column": column, "char": ch.to_string() },
                            "expected_close_of": other.map(|(open, l, c)| json!({"char": open.to_string(), "line": l, "column": c})),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    let unclosed: Vec<Value> = stack
        .iter()
        .map(|(open, l, c)| json!({"char": open.to_string(), "line": l, "column": c}))
        .collect();
    json!({ "balanced": unclosed.is_empty(), "unclosed": unclosed })
}

/// Functions a file defines.
pub(crate) fn functions(path: &str, _bytes: &[u8]) -> Result<Value, ToolError> {
    Err(failed(format!(
        "functions_mapping cannot parse {path} in this build"
    )))
}

/// Syntax errors and findings of a file.
pub(crate) fn validate(path: &str, _bytes: &[u8]) -> Result<Value, ToolError> {
    Err(failed(format!(
        "validate_code cannot parse {path} in this build"
    )))
}

/// Manifest files whose contents `detect_stack` reads.
pub(crate) const MANIFESTS: &[&str] = &[
    "package.json",
    "pyproject.toml",
    "requirements.txt",
    "Cargo.toml",
    "go.mod",
];

/// A project's stack from its top-level file names and manifests.
pub(crate) fn detect_stack(names: &[String], manifests: &[(String, Vec<u8>)]) -> Value {
    let has = |name: &str| names.iter().any(|n| n == name);
    let text = |name: &str| {
        manifests
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, bytes)| String::from_utf8_lossy(bytes).to_lowercase())
            .unwrap_or_default()
    };
    let node = has("package.json");
    let python =
        has("requirements.txt") || has("pyproject.toml") || has("Pipfile") || has("setup.py");
    let mut frameworks = Vec::new();
    let package = text("package.json");
    for (needle, name) in [
        ("\"next\"", "next"),
        ("\"react\"", "react"),
        ("\"express\"", "express"),
        ("\"vue\"", "vue"),
    ] {
        if package.contains(needle) {
            frameworks.push(name);
        }
    }
    let py = text("requirements.txt") + &text("pyproject.toml");
    for name in ["django", "flask", "fastapi"] {
        if py.contains(name) {
            frameworks.push(name);
        }
    }
    json!({
        "node": node,
        "python": python,
        "docker": has("Dockerfile"),
        "rust": has("Cargo.toml"),
        "go": has("go.mod"),
        "frameworks": frameworks,
    })
}
