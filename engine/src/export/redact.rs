//! Masking secrets before a session is shared (`pi sessions export --redact`).
//!
//! Sessions collect secrets easily: a user pastes a key, `cat .env` lands in a tool result.
//! The patterns below are the formats that are both common and recognisable without context
//! (provider key prefixes, AWS key ids, bearer tokens, PEM private keys). Each match keeps a
//! short prefix naming what it was, so the reader still understands the transcript.
//!
//! Redaction works on parsed values: every string of an entry is masked, except the fields
//! that hold the tree's structure (ids, parent links, types, timestamps), which are never
//! secrets and must stay intact for the export to remain a valid session. Lines that are not
//! JSON are masked as plain text. Lines without a match keep their exact bytes.

use std::sync::OnceLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// Keys whose string values are structure, not content.
const STRUCTURAL_KEYS: &[&str] = &[
    "type",
    "id",
    "parentId",
    "targetId",
    "fromId",
    "firstKeptEntryId",
    "timestamp",
    "toolCallId",
    "role",
];

struct Pattern {
    regex: Regex,
    /// Replacement; `$p` is the kept prefix group where a pattern has one.
    replacement: &'static str,
    /// A match this rejects is left as it is (what a regex without look-around cannot say).
    accept: fn(&str) -> bool,
}

/// One row of the pattern table: regex, replacement, acceptance check.
type PatternRow = (&'static str, &'static str, fn(&str) -> bool);

fn any_match(_: &str) -> bool {
    true
}

/// Generated keys mix in digits; words such as `sk-learn` or `sk-hynix` do not.
fn has_digit(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_digit())
}

fn patterns() -> &'static [Pattern] {
    static PATTERNS: OnceLock<Vec<Pattern>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        // Most specific first: `sk-ant-` must win over the generic `sk-`.
        let table: &[PatternRow] = &[
            (
                r"(?s)(?P<p>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----).*?(?P<e>-----END [A-Z0-9 ]*PRIVATE KEY-----)",
                "${p}[REDACTED]${e}",
                any_match,
            ),
            (r"\bsk-ant-[A-Za-z0-9_\-]{8,}", "sk-ant-[REDACTED]", any_match),
            (r"\bsk-[A-Za-z0-9_\-]{16,}", "sk-[REDACTED]", any_match),
            // Short keys (self-hosted gateways, old formats): only with a digit in them.
            (r"\bsk-[A-Za-z0-9_\-]{6,}", "sk-[REDACTED]", has_digit),
            (r"\bAIza[0-9A-Za-z_\-]{30,}", "AIza[REDACTED]", any_match),
            (r"\bgithub_pat_[A-Za-z0-9_]{20,}", "github_pat_[REDACTED]", any_match),
            (r"\b(?P<p>gh[pousr]_)[A-Za-z0-9]{20,}", "${p}[REDACTED]", any_match),
            (r"\b(?P<p>xox[abposr]-)[A-Za-z0-9\-]{8,}", "${p}[REDACTED]", any_match),
            (r"\b(?P<p>AKIA|ASIA)[0-9A-Z]{16}\b", "${p}[REDACTED]", any_match),
            (
                r"(?i)\b(?P<p>bearer\s+)[A-Za-z0-9\-._~+/]{12,}=*",
                "${p}[REDACTED]",
                any_match,
            ),
            // Assignments whose name says secret, as in `.env` files, shell exports, YAML and
            // JSON: `aws_secret_access_key=…`, `NPM_TOKEN=…`, `password: …`, `"db_password":
            // "…"`. The name must end in the word, so `max_tokens=4096` stays.
            (
                r#"(?i)(?P<p>\b[A-Za-z0-9_]*(?:_token|_secret|secret_access_key|secret_key|_api_key|apikey|password|passwd)["']?\s*[:=]\s*["']?)[^\s"'`,;]+"#,
                "${p}[REDACTED]",
                |value| !value.ends_with("[REDACTED]"),
            ),
        ];
        table
            .iter()
            .filter_map(|(re, replacement, accept)| {
                // The table is constant and covered by tests; a pattern that failed to
                // compile would only lose its own masking, never panic an export.
                Regex::new(re).ok().map(|regex| Pattern {
                    regex,
                    replacement,
                    accept: *accept,
                })
            })
            .collect()
    })
}

/// Masks every known secret format in `text`. `None` when nothing matched.
pub fn redact_text(text: &str) -> Option<String> {
    let mut current: Option<String> = None;
    for pattern in patterns() {
        let source = current.as_deref().unwrap_or(text);
        if pattern.regex.is_match(source) {
            let replaced = pattern
                .regex
                .replace_all(source, |caps: &Captures<'_>| {
                    let mut out = String::new();
                    if (pattern.accept)(&caps[0]) {
                        caps.expand(pattern.replacement, &mut out);
                    } else {
                        out.push_str(&caps[0]);
                    }
                    out
                })
                .into_owned();
            if replaced != source {
                current = Some(replaced);
            }
        }
    }
    current
}

/// Masks secrets in every content string of `value`; returns whether anything changed.
pub fn redact_value(value: &mut Value) -> bool {
    // Iterative: entries nest arbitrarily deep (tool arguments, custom data).
    let mut changed = false;
    let mut stack: Vec<&mut Value> = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => {
                if let Some(masked) = redact_text(s) {
                    *s = masked;
                    changed = true;
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    if child.is_string() && STRUCTURAL_KEYS.contains(&key.as_str()) {
                        continue;
                    }
                    stack.push(child);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    changed
}

/// Masks secrets in one JSONL line. Lines without secrets come back unchanged (same bytes).
pub fn redact_line(line: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(line) {
        Ok(mut value) => {
            if redact_value(&mut value) {
                serde_json::to_vec(&value).unwrap_or_else(|_| line.to_vec())
            } else {
                line.to_vec()
            }
        }
        Err(_) => {
            let text = String::from_utf8_lossy(line);
            match redact_text(&text) {
                Some(masked) => masked.into_bytes(),
                None => line.to_vec(),
            }
        }
    }
}

/// Masks secrets in a whole JSONL session (every line after the first; the header holds no
/// content). Line structure and untouched lines are kept byte for byte.
pub fn redact_jsonl(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    let mut first = true;
    while !rest.is_empty() {
        let (line, tail, newline) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], &rest[i + 1..], true),
            None => (rest, &rest[rest.len()..], false),
        };
        if first {
            out.extend_from_slice(line);
        } else {
            out.extend_from_slice(&redact_line(line));
        }
        if newline {
            out.push(b'\n');
        }
        first = false;
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_each_format() {
        let cases = [
            (
                "key sk-ant-api03-abcdefghijklmnop done",
                "key sk-ant-[REDACTED] done",
            ),
            (
                "OPENAI=sk-proj-ABCDEFGHIJKLMNOPQRST",
                "OPENAI=sk-[REDACTED]",
            ),
            ("AIzaSyA1234567890abcdefghijklmnopqrstu", "AIza[REDACTED]"),
            ("ghp_0123456789abcdefghijABCDEFGHIJ", "ghp_[REDACTED]"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijkl",
                "github_pat_[REDACTED]",
            ),
            ("xoxb-1234567890-abcdefghij", "xoxb-[REDACTED]"),
            ("id AKIAIOSFODNN7EXAMPLE.", "id AKIA[REDACTED]."),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----",
                "-----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY-----",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact_text(input).as_deref(), Some(want), "{input}");
        }
        assert_eq!(redact_text("skip sk-short and task-list"), None);
    }

    #[test]
    fn masks_short_keys_and_secret_assignments() {
        let cases = [
            ("key sk-abc123def4 here", "key sk-[REDACTED] here"),
            (
                "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key=[REDACTED]",
            ),
            (
                "export AWS_SECRET_ACCESS_KEY = \"wJalrXUtnFEMI\"",
                "export AWS_SECRET_ACCESS_KEY = \"[REDACTED]\"",
            ),
            ("NPM_TOKEN=abcd1234 next", "NPM_TOKEN=[REDACTED] next"),
            ("GITHUB_TOKEN: xyz", "GITHUB_TOKEN: [REDACTED]"),
            ("password=hunter2", "password=[REDACTED]"),
            (
                r#"{"db_password": "s3cret"}"#,
                r#"{"db_password": "[REDACTED]"}"#,
            ),
            (
                "OPENAI_API_KEY=sk-proj-ABCDEFGHIJKLMNOPQRST",
                "OPENAI_API_KEY=sk-[REDACTED]",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact_text(input).as_deref(), Some(want), "{input}");
        }
        for clean in [
            "max_tokens=4096",
            "pip install sk-learn",
            "tokens: 12",
            "the password is",
        ] {
            assert_eq!(redact_text(clean), None, "{clean}");
        }
    }

    #[test]
    fn keeps_structure_and_clean_lines() {
        let mut v = json!({"type": "message", "id": "sk-ant-api03-abcdefghijklmnop",
            "message": {"role": "user", "content": [{"type": "text", "text": "sk-ant-api03-abcdefghijklmnop"}]}});
        assert!(redact_value(&mut v));
        assert_eq!(v["id"], "sk-ant-api03-abcdefghijklmnop");
        assert_eq!(v["message"]["content"][0]["text"], "sk-ant-[REDACTED]");
        let clean = br#"{"type":"message",  "id":"a"}"#;
        assert_eq!(redact_line(clean), clean.to_vec());
        let file = b"{\"type\":\"session\",\"id\":\"s\"}\n{bad sk-ant-api03-abcdefghijklmnop\n";
        assert_eq!(
            redact_jsonl(file),
            b"{\"type\":\"session\",\"id\":\"s\"}\n{bad sk-ant-[REDACTED]\n".to_vec()
        );
    }
}
