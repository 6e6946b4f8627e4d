//! Tool-call arguments arrive as JSON text in fragments. While they stream, the partial
//! message should show the arguments parsed so far (a UI renders the file being written as it
//! arrives), so every fragment is re-parsed with a tolerant parser that closes whatever is
//! open at the end of the text. At the end of the block one strict parse decides.

use serde_json::{Map, Value};

/// Accumulates the argument text of one tool call.
#[derive(Debug, Default, Clone)]
pub struct ToolArgs {
    text: String,
}

impl ToolArgs {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// The raw text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Append a fragment and return the partial arguments (always an object).
    pub fn append(&mut self, delta: &str) -> Value {
        self.text.push_str(delta);
        partial_object(&self.text)
    }

    /// Replace the text with the provider's complete arguments (Google/Responses send them
    /// whole); returns the appended part when it continues the old text.
    pub fn replace(&mut self, text: &str) -> Option<String> {
        let delta = text.strip_prefix(self.text.as_str()).map(str::to_string);
        self.text = text.to_string();
        delta
    }

    /// Final arguments: `Ok(object)`, or `Err((fallback, message))` when the text is not a
    /// JSON object (the fallback is what could be recovered, else `{}`).
    pub fn finish(&self) -> Result<Value, (Value, String)> {
        parse_tool_arguments(&self.text)
    }
}

/// Strictly parse complete tool-call arguments (Pi's `parseToolCallArguments`).
pub fn parse_tool_arguments(text: &str) -> Result<Value, (Value, String)> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err((
            Value::Object(Map::new()),
            format!("Tool arguments must be a JSON object\n\nReceived arguments:\n{text}"),
        )),
        Err(e) => {
            // A truncated object (stream cut inside the arguments) is still worth showing.
            let recovered = partial_object(text);
            Err((recovered, format!("{e}\n\nReceived arguments:\n{text}")))
        }
    }
}

/// Parse possibly-incomplete JSON; anything that is not an object yields `{}`.
pub fn partial_object(text: &str) -> Value {
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        return v;
    }
    match parse_partial(text) {
        Some(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// Parse the longest meaningful prefix of `text` as JSON, closing open strings, arrays and
/// objects. Incomplete literals, numbers and keys without a value are dropped. Returns
/// `None` when no value could be started or the text has a syntax error before its end.
pub fn parse_partial(text: &str) -> Option<Value> {
    let mut p = Partial {
        s: text.as_bytes(),
        i: 0,
        src: text,
        depth: 0,
    };
    match p.value() {
        Step::Done(v) | Step::Eof(Some(v)) => Some(v),
        Step::Eof(None) | Step::Bad => None,
    }
}

enum Step {
    /// A complete value.
    Done(Value),
    /// Input ended inside the value; the part that could be salvaged, if any.
    Eof(Option<Value>),
    /// Syntax error.
    Bad,
}

/// Arrays and objects nested deeper than this are a syntax error. The parser recurses
/// per level, so the bound keeps hostile input (`[[[[…`) from overflowing the stack;
/// serde_json stops at the same depth, so the strict parse could never accept more.
const MAX_DEPTH: usize = 128;

struct Partial<'a> {
    s: &'a [u8],
    i: usize,
    src: &'a str,
    /// Arrays and objects currently open.
    depth: usize,
}

impl Partial<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Step {
        self.ws();
        let Some(&c) = self.s.get(self.i) else {
            return Step::Eof(None);
        };
        match c {
            b'{' | b'[' => {
                if self.depth == MAX_DEPTH {
                    return Step::Bad;
                }
                self.depth += 1;
                let step = if c == b'{' {
                    self.object()
                } else {
                    self.array()
                };
                self.depth -= 1;
                step
            }
            b'"' => match self.string() {
                Ok(s) => Step::Done(Value::String(s)),
                Err(Some(s)) => Step::Eof(Some(Value::String(s))),
                Err(None) => Step::Bad,
            },
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Step::Bad,
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Step {
        let rest = &self.s[self.i..];
        if rest.starts_with(word.as_bytes()) {
            self.i += word.len();
            Step::Done(v)
        } else if word.as_bytes().starts_with(rest) {
            self.i = self.s.len();
            Step::Eof(None)
        } else {
            Step::Bad
        }
    }

    fn number(&mut self) -> Step {
        let start = self.i;
        while self.i < self.s.len()
            && matches!(
                self.s[self.i],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.i += 1;
        }
        let text = &self.src[start..self.i];
        let at_end = self.i == self.s.len();
        match serde_json::from_str::<serde_json::Number>(text) {
            // A number touching the end may still grow ("12" → "123"); keep it anyway: the
            // next fragment re-parses from scratch.
            Ok(n) => Step::Done(Value::Number(n)),
            Err(_) if at_end => Step::Eof(None),
            Err(_) => Step::Bad,
        }
    }

    /// `Ok(complete)`, `Err(Some(partial))` at end of input, `Err(None)` on a bad escape.
    fn string(&mut self) -> Result<String, Option<String>> {
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i] != b'"' && self.s[self.i] != b'\\' {
                self.i += 1;
            }
            out.push_str(&self.src[start..self.i]);
            let Some(&c) = self.s.get(self.i) else {
                return Err(Some(out));
            };
            if c == b'"' {
                self.i += 1;
                return Ok(out);
            }
            // Backslash escape.
            let Some(&e) = self.s.get(self.i + 1) else {
                self.i = self.s.len();
                return Err(Some(out));
            };
            self.i += 2;
            match e {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => match self.unicode_escape() {
                    Ok(ch) => out.push(ch),
                    Err(true) => return Err(Some(out)),
                    Err(false) => return Err(None),
                },
                _ => return Err(None),
            }
        }
    }

    /// After `\u`: one code point, pairing surrogates. `Err(true)` = input ended.
    fn unicode_escape(&mut self) -> Result<char, bool> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) {
            if self.i >= self.s.len() {
                return Err(true);
            }
            if self.s[self.i..].starts_with(b"\\u") {
                self.i += 2;
                let lo = self.hex4()?;
                if (0xDC00..0xE000).contains(&lo) {
                    let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    return Ok(char::from_u32(cp).unwrap_or('\u{fffd}'));
                }
                return Ok('\u{fffd}');
            }
            if self.s[self.i..] == b"\\"[..] {
                self.i = self.s.len();
                return Err(true);
            }
            return Ok('\u{fffd}');
        }
        Ok(char::from_u32(hi).unwrap_or('\u{fffd}'))
    }

    fn hex4(&mut self) -> Result<u32, bool> {
        let avail = self.s.len() - self.i;
        let take = avail.min(4);
        let digits = &self.src.get(self.i..self.i + take).ok_or(false)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(false);
        }
        if take < 4 {
            self.i = self.s.len();
            return Err(true);
        }
        self.i += 4;
        u32::from_str_radix(digits, 16).map_err(|_| false)
    }

    fn array(&mut self) -> Step {
        self.i += 1;
        let mut items = Vec::new();
        loop {
            self.ws();
            match self.s.get(self.i) {
                None => return Step::Eof(Some(Value::Array(items))),
                Some(b']') => {
                    self.i += 1;
                    return Step::Done(Value::Array(items));
                }
                _ => {}
            }
            match self.value() {
                Step::Done(v) => items.push(v),
                Step::Eof(v) => {
                    items.extend(v);
                    return Step::Eof(Some(Value::Array(items)));
                }
                Step::Bad => return Step::Bad,
            }
            self.ws();
            match self.s.get(self.i) {
                None => return Step::Eof(Some(Value::Array(items))),
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Step::Done(Value::Array(items));
                }
                Some(_) => return Step::Bad,
            }
        }
    }

    fn object(&mut self) -> Step {
        self.i += 1;
        let mut map = Map::new();
        loop {
            self.ws();
            match self.s.get(self.i) {
                None => return Step::Eof(Some(Value::Object(map))),
                Some(b'}') => {
                    self.i += 1;
                    return Step::Done(Value::Object(map));
                }
                Some(b'"') => {}
                Some(_) => return Step::Bad,
            }
            let key = match self.string() {
                Ok(k) => k,
                Err(Some(_)) => return Step::Eof(Some(Value::Object(map))),
                Err(None) => return Step::Bad,
            };
            self.ws();
            match self.s.get(self.i) {
                None => return Step::Eof(Some(Value::Object(map))),
                Some(b':') => self.i += 1,
                Some(_) => return Step::Bad,
            }
            match self.value() {
                Step::Done(v) => {
                    map.insert(key, v);
                }
                Step::Eof(v) => {
                    if let Some(v) = v {
                        map.insert(key, v);
                    }
                    return Step::Eof(Some(Value::Object(map)));
                }
                Step::Bad => return Step::Bad,
            }
            self.ws();
            match self.s.get(self.i) {
                None => return Step::Eof(Some(Value::Object(map))),
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Step::Done(Value::Object(map));
                }
                Some(_) => return Step::Bad,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_prefix_of_an_object_parses_to_an_object() {
        let full = r#"{"path":"a\"b\\c\u00e9\ud83d\ude00.txt","n":-12.5e3,"ok":true,"none":null,"list":[1,{"x":"y"}],"o":{}}"#;
        for i in 0..=full.len() {
            if !full.is_char_boundary(i) {
                continue;
            }
            let v = partial_object(&full[..i]);
            assert!(v.is_object(), "prefix {i}: {v}");
        }
        assert_eq!(
            partial_object(full),
            serde_json::from_str::<Value>(full).expect("valid")
        );
    }

    #[test]
    fn partial_values() {
        assert_eq!(partial_object(r#"{"command":"ec"#), json!({"command":"ec"}));
        assert_eq!(
            partial_object(r#"{"command":"echo hi","ti"#),
            json!({"command":"echo hi"})
        );
        assert_eq!(partial_object(r#"{"a":tr"#), json!({}));
        assert_eq!(partial_object(r#"{"a":[1,2"#), json!({"a":[1,2]}));
        assert_eq!(partial_object(r#"{"a":"x\"#), json!({"a":"x"}));
        assert_eq!(partial_object(r#"{"a":"\u00"#), json!({"a":""}));
        assert_eq!(partial_object("[1,2]"), json!({}));
        assert_eq!(partial_object("garbage"), json!({}));
        assert_eq!(partial_object(""), json!({}));
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        // The parser recurses per level; before the bound this overflowed the stack.
        let deep = format!(r#"{{"a":{}"#, "[".repeat(1_000_000));
        assert_eq!(partial_object(&deep), json!({}));
        let ok = format!(r#"{{"a":{}"#, "[".repeat(MAX_DEPTH - 1));
        assert!(partial_object(&ok)["a"].is_array());
    }

    #[test]
    fn finish_reports_malformed_arguments() {
        let mut a = ToolArgs::new();
        a.append(r#"{"command":"ls""#);
        let (fallback, msg) = a.finish().expect_err("truncated");
        assert_eq!(fallback, json!({"command":"ls"}));
        assert!(
            msg.contains("Received arguments:\n{\"command\":\"ls\""),
            "{msg}"
        );
        assert_eq!(parse_tool_arguments("  ").expect("empty is {}"), json!({}));
        assert!(parse_tool_arguments("[1]").is_err());
    }
}
