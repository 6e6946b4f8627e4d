//! A single-pass JSON validator that reads an entry's head on the way.
//!
//! Opening a session must decide, for every line, whether `JSON.parse` would
//! accept it (Pi drops lines it rejects) and pull out a handful of top-level
//! fields. Nearly all of a line's bytes sit inside long strings (message text,
//! tool output), so this scanner validates the grammar byte by byte only outside
//! strings and crosses string bodies eight bytes at a time, looking for the
//! quote, the backslash or a control character (SWAR). Containers are tracked
//! on an explicit stack: nesting depth costs memory, never call stack.
//!
//! Its verdict is `JSON.parse`'s, which differs from serde_json's in two corners,
//! both on purpose: invalid UTF-8 inside a string is accepted (Node decodes it to
//! U+FFFD before parsing) and so are lone surrogate escapes (`"\ud800"`, a valid
//! JavaScript string). Numbers beyond the range of a double are accepted too
//! (`JSON.parse` reads them as ±Infinity).
//!
//! One limit is ours: arrays and objects nested more than [`MAX_DEPTH`] levels
//! are refused, because the payload parser (serde_json) refuses them, and a line
//! indexed as an entry must be readable later. `JSON.parse` has no such limit;
//! no session line written by Pi comes near it.

use crate::head::{EntryHead, ParentRef};
use std::borrow::Cow;

/// Why a line is not JSON, with the byte offset where that became clear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError {
    pub offset: usize,
    pub reason: &'static str,
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

/// Outcome of scanning one line.
// Returned once per line and destructured at once; boxing the head would cost an
// allocation per line for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Scanned<'a> {
    /// A JSON object: its head.
    Object(EntryHead<'a>),
    /// Valid JSON that is not an object (Pi keeps truthy ones as field-less entries).
    Other { falsy: bool },
}

/// Validates `line` as one JSON value and reads the head of a top-level object.
pub fn scan(line: &[u8]) -> Result<Scanned<'_>, ScanError> {
    let mut s = Scanner {
        b: line,
        i: 0,
        stack: Vec::new(),
        outer_depth: 0,
    };
    s.ws();
    let first = s.peek().ok_or(s.err("empty line"))?;
    if first != b'{' {
        let falsy = s.top_level_scalar_or_array()?;
        return Ok(Scanned::Other { falsy });
    }
    let head = s.object_head()?;
    s.ws();
    if s.i != s.b.len() {
        return Err(s.err("trailing characters after the JSON value"));
    }
    Ok(Scanned::Object(head))
}

/// Deepest nesting accepted (serde_json's recursion limit, top-level value included).
pub const MAX_DEPTH: usize = 127;

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    /// Open containers below the one being read: `true` for objects.
    stack: Vec<bool>,
    /// Containers open outside `stack` (the top-level object, `message`).
    outer_depth: usize,
}

/// Which top-level field a string value belongs to.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    Type,
    Id,
    ParentId,
    Timestamp,
    TargetId,
    Label,
    Name,
    Version,
    Message,
    Other,
}

impl Field {
    fn of(key: &[u8]) -> Field {
        match key {
            b"type" => Field::Type,
            b"id" => Field::Id,
            b"parentId" => Field::ParentId,
            b"timestamp" => Field::Timestamp,
            b"targetId" => Field::TargetId,
            b"label" => Field::Label,
            b"name" => Field::Name,
            b"version" => Field::Version,
            b"message" => Field::Message,
            _ => Field::Other,
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Bytes of `w` equal to zero get their high bit set (exact, no false positives).
#[inline]
fn zero_bytes(w: u64) -> u64 {
    ((w & !HIGHS).wrapping_add(!HIGHS) | w) & HIGHS ^ HIGHS
}

/// High bits marking the quotes, backslashes and bytes below 0x20 of a word
/// (read little-endian, so the lowest set bit is the first such byte).
#[inline]
fn specials(w: u64) -> u64 {
    let quote = zero_bytes(w ^ (ONES * b'"' as u64));
    let backslash = zero_bytes(w ^ (ONES * b'\\' as u64));
    // Bytes below 0x20: the top three bits are all zero.
    let control = zero_bytes(w & (ONES * 0xe0));
    quote | backslash | control
}

impl<'a> Scanner<'a> {
    fn err(&self, reason: &'static str) -> ScanError {
        ScanError {
            offset: self.i,
            reason,
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// JSON whitespace: space, tab, LF, CR.
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8, reason: &'static str) -> Result<(), ScanError> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(reason))
        }
    }

    /// A string starting at the opening quote; returns the body's range and whether
    /// it holds escapes.
    fn string(&mut self) -> Result<(usize, usize, bool), ScanError> {
        self.expect(b'"', "expected a string")?;
        let start = self.i;
        let mut escaped = false;
        loop {
            // Skip eight plain bytes at a time, then jump straight to the special one.
            while let Some(word) = self
                .b
                .get(self.i..self.i + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
            {
                let mask = specials(u64::from_le_bytes(word));
                if mask != 0 {
                    self.i += (mask.trailing_zeros() / 8) as usize;
                    break;
                }
                self.i += 8;
            }
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    let end = self.i;
                    self.i += 1;
                    return Ok((start, end, escaped));
                }
                Some(b'\\') => {
                    escaped = true;
                    self.i += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
                        Some(b'u') => {
                            self.i += 1;
                            for _ in 0..4 {
                                match self.peek() {
                                    Some(c) if c.is_ascii_hexdigit() => self.i += 1,
                                    _ => return Err(self.err("bad \\u escape")),
                                }
                            }
                        }
                        _ => return Err(self.err("bad escape")),
                    }
                }
                Some(c) if c < 0x20 => return Err(self.err("control character in string")),
                Some(_) => self.i += 1,
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Result<(usize, usize), ScanError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("bad number")),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("bad number fraction"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("bad number exponent"));
            }
            self.digits();
        }
        Ok((start, self.i))
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), ScanError> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(self.err("unexpected character"))
        }
    }

    fn open_container(&mut self, is_object: bool) -> Result<(), ScanError> {
        if self.outer_depth + self.stack.len() >= MAX_DEPTH {
            return Err(self.err("nested deeper than 127 levels"));
        }
        self.stack.push(is_object);
        Ok(())
    }

    /// Skips any value, nested containers included, without recursion.
    fn skip_value(&mut self) -> Result<(), ScanError> {
        let base = self.stack.len();
        // `expect_value`: a value must come next (after `[`, `,` in arrays, `:`).
        let mut expect_value = true;
        loop {
            self.ws();
            if expect_value {
                match self.peek() {
                    Some(b'{') => {
                        self.open_container(true)?;
                        self.i += 1;
                        self.ws();
                        if self.peek() == Some(b'}') {
                            self.i += 1;
                            self.stack.pop();
                        } else {
                            self.string()?;
                            self.ws();
                            self.expect(b':', "expected ':'")?;
                            continue;
                        }
                    }
                    Some(b'[') => {
                        self.open_container(false)?;
                        self.i += 1;
                        self.ws();
                        if self.peek() == Some(b']') {
                            self.i += 1;
                            self.stack.pop();
                        } else {
                            continue;
                        }
                    }
                    Some(b'"') => {
                        self.string()?;
                    }
                    Some(b'-' | b'0'..=b'9') => {
                        self.number()?;
                    }
                    Some(b't') => {
                        self.literal(b"true")?;
                    }
                    Some(b'f') => {
                        self.literal(b"false")?;
                    }
                    Some(b'n') => {
                        self.literal(b"null")?;
                    }
                    Some(_) => return Err(self.err("unexpected character")),
                    None => return Err(self.err("unexpected end of line")),
                }
            }
            // After a value: close containers or move to the next element.
            if self.stack.len() == base {
                return Ok(());
            }
            self.ws();
            let Some(&in_object) = self.stack.last() else {
                return Ok(());
            };
            match (self.peek(), in_object) {
                (Some(b','), true) => {
                    self.i += 1;
                    self.ws();
                    self.string()?;
                    self.ws();
                    self.expect(b':', "expected ':'")?;
                    expect_value = true;
                }
                (Some(b','), false) => {
                    self.i += 1;
                    expect_value = true;
                }
                (Some(b'}'), true) | (Some(b']'), false) => {
                    self.i += 1;
                    self.stack.pop();
                    expect_value = false;
                }
                (None, _) => return Err(self.err("unexpected end of line")),
                _ => return Err(self.err("expected ',' or a closing bracket")),
            }
        }
    }

    /// A top-level value that is not an object; returns its JS falsiness.
    fn top_level_scalar_or_array(&mut self) -> Result<bool, ScanError> {
        let start = self.i;
        self.skip_value()?;
        let end = self.i;
        self.ws();
        if self.i != self.b.len() {
            return Err(self.err("trailing characters after the JSON value"));
        }
        let text = &self.b[start..end];
        Ok(match text {
            b"null" | b"false" | b"\"\"" => true,
            _ if text[0] == b'-' || text[0].is_ascii_digit() => {
                let s = std::str::from_utf8(text).unwrap_or("1");
                s.parse::<f64>().map(|f| f == 0.0).unwrap_or(false)
            }
            _ => false,
        })
    }

    /// Decodes a string body found by [`Self::string`].
    fn text(&self, (start, end, escaped): (usize, usize, bool)) -> Cow<'a, str> {
        let raw = &self.b[start..end];
        if !escaped {
            return match std::str::from_utf8(raw) {
                Ok(s) => Cow::Borrowed(s),
                Err(_) => Cow::Owned(String::from_utf8_lossy(raw).into_owned()),
            };
        }
        // Escapes are rare in these short fields; let serde_json decode the quoted slice
        // (lossily, for lone surrogates or invalid bytes JSON.parse would still accept).
        let quoted = &self.b[start - 1..end + 1];
        match serde_json::from_slice::<String>(quoted) {
            Ok(s) => Cow::Owned(s),
            // Invalid bytes: replace them first, as Node's decoder does before JSON.parse,
            // then decode the escapes (fuzz/fuzz_targets/jsonl_line.rs found `\n` kept raw).
            Err(_) => {
                let lossy = String::from_utf8_lossy(quoted);
                match serde_json::from_str::<String>(&lossy) {
                    Ok(s) => Cow::Owned(s),
                    // A lone surrogate escape: U+FFFD, as `jsonl::parse_value` reads it.
                    Err(_) => match serde_json::from_slice::<String>(
                        &crate::jsonl::lone_surrogates_replaced(lossy.as_bytes()),
                    ) {
                        Ok(s) => Cow::Owned(s),
                        Err(_) => Cow::Owned(String::from_utf8_lossy(raw).into_owned()),
                    },
                }
            }
        }
    }

    /// The top-level object: validated whole, with the head fields read on the way.
    fn object_head(&mut self) -> Result<EntryHead<'a>, ScanError> {
        let mut head = EntryHead::default();
        self.expect(b'{', "expected an object")?;
        self.outer_depth = 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(head);
        }
        loop {
            self.ws();
            let key = self.string()?;
            let field = if key.2 {
                Field::of(self.text(key).as_bytes())
            } else {
                Field::of(&self.b[key.0..key.1])
            };
            self.ws();
            self.expect(b':', "expected ':'")?;
            self.ws();
            self.field_value(field, &mut head)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(head);
                }
                None => return Err(self.err("unexpected end of line")),
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    /// Reads one top-level value into the head (the last occurrence of a key wins,
    /// as in `JSON.parse`), skipping values of fields the head does not keep.
    fn field_value(&mut self, field: Field, head: &mut EntryHead<'a>) -> Result<(), ScanError> {
        let c = self.peek();
        let string_slot: Option<&mut Option<Cow<'a, str>>> = match field {
            Field::Type => Some(&mut head.kind),
            Field::Id => Some(&mut head.id),
            Field::Timestamp => Some(&mut head.timestamp),
            Field::TargetId => Some(&mut head.target_id),
            Field::Label => Some(&mut head.label),
            Field::Name => Some(&mut head.name),
            _ => None,
        };
        if let Some(slot) = string_slot {
            if c == Some(b'"') {
                let s = self.string()?;
                *slot = Some(self.text(s));
            } else {
                self.skip_value()?;
                *slot = None;
            }
            return Ok(());
        }
        match field {
            Field::ParentId => {
                head.parent = match c {
                    Some(b'"') => {
                        let s = self.string()?;
                        ParentRef::Id(self.text(s))
                    }
                    Some(b'n') => {
                        self.literal(b"null")?;
                        ParentRef::Null
                    }
                    _ => {
                        self.skip_value()?;
                        ParentRef::Other
                    }
                };
            }
            Field::Version => {
                if let Some(b'-' | b'0'..=b'9') = c {
                    let (start, end) = self.number()?;
                    head.version = std::str::from_utf8(&self.b[start..end])
                        .ok()
                        .and_then(|s| s.parse().ok());
                } else {
                    self.skip_value()?;
                    head.version = None;
                }
            }
            Field::Message => {
                head.role = None;
                if c == Some(b'{') {
                    head.role = self.message_role()?;
                } else {
                    self.skip_value()?;
                }
            }
            _ => self.skip_value()?,
        }
        Ok(())
    }

    /// The `message` object: validated, with its `role` read.
    fn message_role(&mut self) -> Result<Option<Cow<'a, str>>, ScanError> {
        let mut role = None;
        self.expect(b'{', "expected an object")?;
        self.outer_depth = 2;
        let result = self.message_fields(&mut role);
        self.outer_depth = 1;
        result.map(|()| role)
    }

    fn message_fields(&mut self, role: &mut Option<Cow<'a, str>>) -> Result<(), ScanError> {
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            let key = self.string()?;
            let is_role = if key.2 {
                self.text(key) == "role"
            } else {
                &self.b[key.0..key.1] == b"role"
            };
            self.ws();
            self.expect(b':', "expected ':'")?;
            self.ws();
            if is_role {
                if self.peek() == Some(b'"') {
                    let s = self.string()?;
                    *role = Some(self.text(s));
                } else {
                    self.skip_value()?;
                    *role = None;
                }
            } else {
                self.skip_value()?;
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                None => return Err(self.err("unexpected end of line")),
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }
}

#[cfg(test)]
mod tests;
