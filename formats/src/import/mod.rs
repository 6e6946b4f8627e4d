//! Sessions of other coding agents, turned into Pi session lines.
//!
//! Each source format has one module that maps its records to Pi entries and nothing else:
//! no I/O (the caller reads the files and writes the result through a session store), no
//! randomness and no clock, so the same source always gives the same lines and a re-import
//! is recognised as already there.

pub mod claude_code;
pub mod codex;
pub mod gemini;
pub mod opencode;

use std::fmt;

use serde_json::{Map, Value};

/// A source file handed to a converter: a name for messages and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct SourceFile<'a> {
    /// How the file is named in errors and in each entry's `importedFrom`.
    pub label: &'a str,
    /// The file's bytes.
    pub bytes: &'a [u8],
}

/// Why a source could not be converted: the file and 1-based line, and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    /// The source file's label.
    pub file: String,
    /// 1-based line number (0 when the problem is the whole file).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.reason)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.reason)
        }
    }
}

impl std::error::Error for ImportError {}

/// What a conversion produced: a Pi v3 session as lines, and what went into it.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The session id (derived from the source, so a re-import finds the same session).
    pub session_id: String,
    /// The `session` header line.
    pub header: String,
    /// Entry lines in file order, each without its line feed.
    pub lines: Vec<String>,
    /// Counts of what was read and what was written.
    pub counts: Counts,
}

/// Source records by kind and the Pi entries made from them, for the user and for tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Source records read (all files): non-blank lines, or for Gemini CLI's older `.json`
    /// files the metadata and each message.
    pub records: usize,
    /// Source records holding a conversation message.
    pub message_records: usize,
    /// Tool calls in the source (Claude Code's `tool_use` blocks, Codex's `function_call` and
    /// `custom_tool_call` items, Gemini CLI's `toolCalls`).
    pub tool_calls: usize,
    /// Tool results in the source (`tool_result` blocks, `*_call_output` items, Gemini's
    /// `functionResponse` parts).
    pub tool_results: usize,
    /// Pi `message` entries written.
    pub messages: usize,
    /// Pi `custom` entries written (records kept whole that have no Pi equivalent).
    pub custom: usize,
    /// Pi `compaction` entries written.
    pub compactions: usize,
    /// Pi `model_change` entries written.
    pub model_changes: usize,
}

/// A short stable hash (FNV-1a, 64 bit) as 16 hex digits, for ids derived from a source
/// position. Not for security: only so the same source gives the same ids.
pub(crate) fn stable_hex(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0u8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// One non-blank line of a JSONL source: its 1-based number and its object.
pub(crate) type JsonLine = (usize, Map<String, Value>);

/// The non-blank lines of a JSONL source as (1-based line number, object). Fails on the first
/// line that is not a JSON object, naming the file and the line.
pub(crate) fn json_lines(file: &SourceFile<'_>) -> Result<Vec<JsonLine>, ImportError> {
    let mut out = Vec::new();
    for (n, raw) in file.bytes.split(|&b| b == b'\n').enumerate() {
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let err = |reason: String| ImportError {
            file: file.label.to_string(),
            line: n + 1,
            reason,
        };
        let v: Value =
            serde_json::from_slice(raw).map_err(|e| err(format!("not a JSON record: {e}")))?;
        let Value::Object(v) = v else {
            return Err(err("not a JSON object".into()));
        };
        out.push((n + 1, v));
    }
    Ok(out)
}

/// Milliseconds since the epoch of an ISO timestamp (0 when it does not parse).
pub(crate) fn millis(ts: &str) -> i64 {
    crate::time::parse_millis(ts).map_or(0, |ms| ms as i64)
}

/// The `importedFrom` field every imported entry carries: the source format, file and line
/// numbers, and optionally the source records themselves.
pub(crate) fn imported_from(
    format: &str,
    file: &str,
    lines: &[usize],
    records: Option<Vec<Value>>,
) -> Value {
    let mut m = Map::new();
    m.insert("format".into(), format.into());
    m.insert("file".into(), file.into());
    m.insert(
        "lines".into(),
        lines.iter().map(|&l| Value::from(l)).collect(),
    );
    if let Some(records) = records {
        m.insert("records".into(), Value::Array(records));
    }
    Value::Object(m)
}
