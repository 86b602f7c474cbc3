//! Keeping secrets out of what leaves the gateway: known secret values and well-known token
//! shapes are replaced in every tool result and ledger line, and long outputs are cut to a
//! head and a tail.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// What replaces a secret.
pub(crate) const REDACTED: &str = "[REDACTED]";

/// Token shapes that are secrets wherever they appear: provider API keys, GitHub and Slack
/// tokens, AWS access key ids, PEM private keys. Linear-time (Rust's `regex`).
static TOKENS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
        r"|gh[pousr]_[A-Za-z0-9]{30,}",
        r"|github_pat_[A-Za-z0-9_]{30,}",
        r"|xox[abprs]-[A-Za-z0-9-]{10,}",
        r"|AKIA[0-9A-Z]{16}",
        r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    ))
    .ok()
});

/// Values shorter than this are not redacted by value: replacing every `1` or `yes` in an
/// output would destroy it and protect nothing.
const MIN_SECRET_LEN: usize = 4;

/// Replaces known secret values and token shapes in `text`.
pub(crate) fn redact_text(text: &str, secrets: &[String]) -> String {
    let mut out = std::borrow::Cow::Borrowed(text);
    for secret in secrets.iter().filter(|s| s.len() >= MIN_SECRET_LEN) {
        if out.contains(secret.as_str()) {
            out = std::borrow::Cow::Owned(out.replace(secret.as_str(), REDACTED));
        }
    }
    if let Some(tokens) = TOKENS.as_ref()
        && tokens.is_match(&out)
    {
        out = std::borrow::Cow::Owned(tokens.replace_all(&out, REDACTED).into_owned());
    }
    out.into_owned()
}

/// Redacts every string (and object key) inside a JSON value.
pub(crate) fn redact_value(value: &mut Value, secrets: &[String]) {
    match value {
        Value::String(text) => {
            let redacted = redact_text(text, secrets);
            if redacted != *text {
                *text = redacted;
            }
        }
        Value::Array(items) => {
            for item in items {
                redact_value(item, secrets);
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                redact_value(item, secrets);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `text` cut to at most `limit` bytes: its head and its tail around a marker, on character
/// boundaries. Returns whether anything was cut.
pub(crate) fn head_tail(text: &str, limit: usize) -> (String, bool) {
    if text.len() <= limit {
        return (text.to_owned(), false);
    }
    let marker = format!("\n[… {} bytes cut …]\n", text.len().saturating_sub(limit));
    let room = limit.saturating_sub(marker.len());
    let mut head_end = room / 2;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - (room - head_end);
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    (
        format!("{}{marker}{}", &text[..head_end], &text[tail_start..]),
        true,
    )
}

/// A short form of a result for the ledger: long strings become their length and a prefix,
/// long arrays their length, so the ledger says what happened without copying file contents.
pub(crate) fn summarize(value: &Value) -> Value {
    const STRING: usize = 200;
    const ITEMS: usize = 20;
    match value {
        Value::String(text) if text.len() > STRING => {
            let mut end = STRING;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            Value::String(format!("{}… ({} bytes)", &text[..end], text.len()))
        }
        Value::Array(items) if items.len() > ITEMS => {
            serde_json::json!({ "items": items.len() })
        }
        Value::Array(items) => Value::Array(items.iter().map(summarize).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), summarize(item)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn known_values_and_token_shapes_are_redacted() {
        let secrets = vec!["hunter2-password".to_owned(), "no".to_owned()];
        let text = "db=hunter2-password key=sk-abcdefghijklmnopqrstuvwxyz gh=ghp_0123456789abcdefghijklmnopqrstuvwxyz ok=no";
        assert_eq!(
            redact_text(text, &secrets),
            "db=[REDACTED] key=[REDACTED] gh=[REDACTED] ok=no"
        );
        let mut value = json!({"a": ["AKIAABCDEFGHIJKLMNOP", 3], "b": "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n"});
        redact_value(&mut value, &secrets);
        assert_eq!(value, json!({"a": ["[REDACTED]", 3], "b": "[REDACTED]\n"}));
    }

    #[test]
    fn long_text_keeps_head_and_tail() {
        let text = "a".repeat(50) + &"b".repeat(50);
        let (cut, truncated) = head_tail(&text, 60);
        assert!(truncated);
        assert!(cut.len() <= 60, "{cut}");
        assert!(cut.starts_with("aaaa") && cut.ends_with("bbbb"), "{cut}");
        assert_eq!(head_tail("short", 60), ("short".to_owned(), false));
    }

    #[test]
    fn summaries_shorten_contents() {
        let value =
            json!({"content": "x".repeat(300), "hits": (0..30).collect::<Vec<_>>(), "n": 1});
        let summary = summarize(&value);
        assert_eq!(summary["hits"], json!({"items": 30}));
        assert_eq!(summary["n"], json!(1));
        assert!(
            summary["content"]
                .as_str()
                .unwrap()
                .ends_with("… (300 bytes)")
        );
    }
}
