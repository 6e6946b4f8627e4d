//! JSONL framing exactly as Pi reads it.
//!
//! Lines are split on LF (`\n`) only. A trailing CR is harmless because JSON
//! allows it as whitespace; U+2028/U+2029 are ordinary characters inside a line.
//! A line that is blank (after JavaScript's `trim()`) is skipped, a line that
//! does not parse is reported and skipped, never dropped from the file.

use serde_json::Value;
use std::fmt;

/// One physical line: its 1-based number, where it starts and its bytes without the LF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub number: u64,
    pub start: usize,
    pub bytes: &'a [u8],
    /// Whether an LF ended this line (false only for the last line of a file
    /// that does not end in a newline, e.g. a torn write).
    pub terminated: bool,
}

impl Line<'_> {
    pub fn end(&self) -> usize {
        self.start + self.bytes.len()
    }

    pub fn is_blank(&self) -> bool {
        is_blank(self.bytes)
    }
}

/// Iterates over the physical lines of `buf`, LF-separated.
pub fn lines(buf: &[u8]) -> Lines<'_> {
    Lines {
        buf,
        pos: 0,
        number: 0,
    }
}

pub struct Lines<'a> {
    buf: &'a [u8],
    pos: usize,
    number: u64,
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        self.number += 1;
        let start = self.pos;
        match memchr::memchr(b'\n', rest) {
            Some(n) => {
                self.pos += n + 1;
                Some(Line {
                    number: self.number,
                    start,
                    bytes: &rest[..n],
                    terminated: true,
                })
            }
            None => {
                self.pos = self.buf.len();
                Some(Line {
                    number: self.number,
                    start,
                    bytes: rest,
                    terminated: false,
                })
            }
        }
    }
}

/// JavaScript's `String.prototype.trim()` emptiness test on UTF-8 bytes:
/// ASCII whitespace plus the Unicode white space and line terminators JS trims.
pub fn is_blank(bytes: &[u8]) -> bool {
    if bytes
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c))
    {
        return true;
    }
    if bytes.is_ascii() {
        return false;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => text.chars().all(is_js_whitespace),
        Err(_) => false,
    }
}

/// JavaScript's `String.prototype.trim()`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// JavaScript's white space and line terminators (what `trim()` removes).
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{0009}'..='\u{000d}'
            | ' '
            | '\u{00a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// Why a line could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineErrorKind {
    /// Not valid JSON (`JSON.parse` would throw). Pi skips such lines.
    Malformed(String),
    /// The last line of the file is cut off: no LF and not valid JSON.
    Torn(String),
}

/// A line that Pi skips, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: u64,
    pub kind: LineErrorKind,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            LineErrorKind::Malformed(reason) => {
                write!(f, "line {}: malformed JSON ({reason})", self.line)
            }
            LineErrorKind::Torn(reason) => write!(
                f,
                "line {}: torn last line without newline ({reason})",
                self.line
            ),
        }
    }
}

impl std::error::Error for LineError {}

/// Parses one line the way `JSON.parse` would.
///
/// Invalid UTF-8 is decoded lossily first, as Node's UTF-8 decoder does before
/// the JSON parser ever sees the text.
///
/// A number too large for an f64 (`1e400`) is `Infinity` to `JSON.parse`, which
/// `JSON.stringify` writes as `null`; serde_json refuses it. Such a line is read
/// with those numbers as `null`, so it is not lost (the fast head parser, which
/// skips payload numbers, accepts it too; fuzz/fuzz_targets/jsonl_line.rs).
pub fn parse_value(bytes: &[u8]) -> Result<Value, String> {
    parse_like_js(bytes, |b| serde_json::from_slice::<Value>(b))
}

/// Runs `parse` over one line with `JSON.parse`'s verdicts: when serde_json refuses
/// what `JSON.parse` accepts (invalid UTF-8, lone surrogate escapes, out-of-range
/// numbers), the line is rewritten as [`parse_value`] describes and parsed again.
///
/// `parse` is any serde deserialization of the whole line (it must reject trailing
/// bytes), so readers that keep only a few fields accept exactly the lines
/// [`parse_value`] accepts.
pub fn parse_like_js<T>(
    bytes: &[u8],
    parse: impl Fn(&[u8]) -> Result<T, serde_json::Error>,
) -> Result<T, String> {
    let e = match parse(bytes) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let lossy;
    let (text, e) = match std::str::from_utf8(bytes) {
        Ok(_) => (bytes, e),
        Err(_) => {
            lossy = String::from_utf8_lossy(bytes).into_owned();
            match parse(lossy.as_bytes()) {
                Ok(v) => return Ok(v),
                Err(e) => (lossy.as_bytes(), e),
            }
        }
    };
    // A lone surrogate escape (`"\ud800"`) is a valid JavaScript string; a Rust string cannot
    // hold it, so it reads as U+FFFD (the head scan decodes it the same way).
    let replaced;
    let (text, e) = if e.to_string().contains("hex escape") {
        replaced = lone_surrogates_replaced(text);
        match parse(&replaced) {
            Ok(v) => return Ok(v),
            Err(e) => (replaced.as_slice(), e),
        }
    } else {
        (text, e)
    };
    if e.to_string().starts_with("number out of range") {
        if let Ok(v) = parse(&infinite_numbers_as_null(text)) {
            return Ok(v);
        }
    }
    Err(e.to_string())
}

/// Rewrites every `\uXXXX` escape that is a surrogate without its partner as `\ufffd`.
pub(crate) fn lone_surrogates_replaced(bytes: &[u8]) -> Vec<u8> {
    fn unit(b: &[u8], at: usize) -> Option<u16> {
        let hex = b.get(at..at + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    }
    let is_lead = |u: u16| (0xD800..0xDC00).contains(&u);
    let is_trail = |u: u16| (0xDC00..0xE000).contains(&u);
    let mut out = Vec::with_capacity(bytes.len());
    let (mut i, mut in_string) = (0, false);
    while i < bytes.len() {
        let b = bytes[i];
        if !in_string {
            in_string = b == b'"';
            out.push(b);
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = false,
            b'\\' => match unit(bytes, i) {
                Some(u) if is_lead(u) && unit(bytes, i + 6).is_some_and(is_trail) => {
                    out.extend_from_slice(&bytes[i..i + 12]);
                    i += 12;
                    continue;
                }
                Some(u) if is_lead(u) || is_trail(u) => {
                    out.extend_from_slice(b"\\ufffd");
                    i += 6;
                    continue;
                }
                // Any other escape: copy it whole, so `\\` never starts a false escape.
                _ => {
                    out.extend_from_slice(&bytes[i..(i + 2).min(bytes.len())]);
                    i += 2;
                    continue;
                }
            },
            _ => {}
        }
        out.push(b);
        i += 1;
    }
    out
}

/// Parses one line and says whether Pi's loader keeps it: `Ok(None)` for a line whose
/// `JSON.parse` value is falsy (`null`, `false`, `0`, `""`), which Pi drops.
///
/// Truthiness is judged on what `JSON.parse` gives, not on our value: a line that is only an
/// out-of-range number (`1e999`) is `Infinity` to Pi, truthy, and kept (as `null`, which is
/// how `JSON.stringify` writes it back). Judging the `null` would drop a line Pi keeps and
/// shift every `firstKeptEntryIndex` of a v1 migration after it.
pub fn parse_truthy(bytes: &[u8]) -> Result<Option<Value>, String> {
    let value = parse_value(bytes)?;
    let falsy = match &value {
        // `parse_value` turns a top-level ±Infinity into null too; only the literal is falsy.
        Value::Null => trim_json_whitespace(bytes) == b"null",
        other => crate::head::is_js_falsy(other),
    };
    Ok((!falsy).then_some(value))
}

fn trim_json_whitespace(mut bytes: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    while bytes.first().is_some_and(ws) {
        bytes = &bytes[1..];
    }
    while bytes.last().is_some_and(ws) {
        bytes = &bytes[..bytes.len() - 1];
    }
    bytes
}

/// Replaces every number token outside strings that overflows an f64 with `null`.
pub fn infinite_numbers_as_null(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'-' || b.is_ascii_digit() {
            let end = bytes[i..]
                .iter()
                .position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .map_or(bytes.len(), |n| i + n);
            let token = &bytes[i..end];
            let infinite = std::str::from_utf8(token)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .is_some_and(f64::is_infinite);
            out.extend_from_slice(if infinite { b"null" } else { token });
            i = end;
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

/// Classifies a failed line: the unterminated last line is torn, anything else malformed.
pub fn line_error(line: &Line<'_>, reason: String) -> LineError {
    let kind = if line.terminated {
        LineErrorKind::Malformed(reason)
    } else {
        LineErrorKind::Torn(reason)
    };
    LineError {
        line: line.number,
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_lf_only() {
        let buf = "a\u{2028}b\r\nc\n\nd".as_bytes();
        let got: Vec<_> = lines(buf)
            .map(|l| (l.number, l.bytes, l.terminated))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "a\u{2028}b\r".as_bytes(), true),
                (2, "c".as_bytes(), true),
                (3, "".as_bytes(), true),
                (4, "d".as_bytes(), false),
            ]
        );
    }

    #[test]
    fn trailing_newline_adds_no_line() {
        assert_eq!(lines(b"x\n").count(), 1);
        assert_eq!(lines(b"").count(), 0);
    }

    #[test]
    fn blank_follows_js_trim() {
        assert!(is_blank(b"  \t\r"));
        assert!(is_blank("\u{feff}\u{2028}".as_bytes()));
        assert!(!is_blank(b" x "));
    }

    #[test]
    fn crlf_line_parses() {
        assert!(parse_value(b"{\"a\":1}\r").is_ok());
        assert!(parse_value("\u{feff}{}".as_bytes()).is_err());
    }

    /// Found by fuzz/fuzz_targets/jsonl_line.rs: the head parser accepted a line
    /// with `17645000E01004` in its payload, the full parse refused it, so the
    /// entry was indexed but its value read as nothing.
    /// Pi: `JSON.parse("1e999")` is Infinity, truthy, so the loader keeps the line (and a
    /// v1 migration counts it); the head scan says the same.
    #[test]
    fn a_line_that_is_only_an_infinite_number_is_truthy_like_json_parse() {
        for line in [&b"1e999"[..], b" -1e999\r", b"17645000E01004", &[b'9'; 400]] {
            assert_eq!(parse_truthy(line), Ok(Some(Value::Null)), "{line:?}");
            assert!(!crate::head::EntryHead::parse(line).unwrap().falsy);
        }
        for line in [&b"null"[..], b" null ", b"0", b"false", b"\"\"", b"-0e5"] {
            assert_eq!(parse_truthy(line), Ok(None), "{line:?}");
            assert!(crate::head::EntryHead::parse(line).unwrap().falsy);
        }
        assert_eq!(parse_truthy(b"7"), Ok(Some(Value::from(7))));
        assert!(parse_truthy(b"1e999,").is_err());
    }

    /// `JSON.parse` accepts a lone surrogate escape, and so does the head scan; the full
    /// parse refused it, so the entry was indexed but its message vanished from the context.
    #[test]
    fn lone_surrogate_escapes_read_as_replacement_characters() {
        let v = parse_value(br#"{"a":"x\ud800y","b":"\udc00","c":"\ud83d\ude00","d":"\\ud800"}"#)
            .unwrap();
        assert_eq!(v["a"], "x\u{fffd}y");
        assert_eq!(v["b"], "\u{fffd}");
        assert_eq!(v["c"], "\u{1f600}");
        assert_eq!(v["d"], "\\ud800");
        let line = br#"{"type":"message","id":"\ud800","n":1e999}"#;
        let v = parse_value(line).unwrap();
        assert_eq!(v["id"], "\u{fffd}");
        assert_eq!(v["n"], Value::Null);
        let head = crate::head::EntryHead::parse(line).unwrap();
        assert_eq!(head.id.as_deref(), Some("\u{fffd}"));
        assert!(parse_value(br#"{"a":"\ud800"#).is_err());
    }

    #[test]
    fn numbers_beyond_f64_read_as_null_like_json_stringify() {
        let v =
            parse_value(br#"{"a":17645000E01004,"b":-1e400,"c":"1e400","d":[1e999,2]}"#).unwrap();
        assert_eq!(v["a"], Value::Null);
        assert_eq!(v["b"], Value::Null);
        assert_eq!(v["c"], "1e400");
        assert_eq!(v["d"], serde_json::json!([null, 2]));
        let head = crate::head::EntryHead::parse(br#"{"type":"message","id":"x","n":1e999}"#);
        assert_eq!(head.unwrap().id.as_deref(), Some("x"));
        assert!(parse_value(br#"{"a":1e999,}"#).is_err());
    }

    #[test]
    fn invalid_utf8_inside_string_is_replaced() {
        let v = parse_value(b"{\"a\":\"\xff\"}").unwrap();
        assert_eq!(v["a"], "\u{fffd}");
    }
}
