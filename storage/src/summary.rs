//! Session summaries for listing, computed the way Pi 1.6's `buildSessionInfo` does.
//!
//! This is the one place the rules live. The JSONL backend folds a file's lines through
//! [`SummaryState::observe`] when it lists; the database backends fold each appended line
//! and keep the state in a row, so listing never reads entries.
//!
//! Pi's rules (dist `core/session-manager.js`, `buildSessionInfo`):
//! * `messageCount` counts every `message` entry (tool results and bash runs too);
//! * the name is the latest `session_info` entry's trimmed `name`, and an empty or missing
//!   name clears it (1.6: the latest wins);
//! * the first message is the text of the first `user` message with non-empty text;
//! * `modified` is the latest user/assistant activity (`message.timestamp` when numeric,
//!   else the entry's `timestamp`), else the header timestamp, else the file's mtime;
//! * where Pi's code would throw on a line (a `message` entry without a message, content
//!   that is neither string nor array, a non-string name), Pi leaves the session out of
//!   the listing; so do we.

use pi_formats::head::EntryHead;
use pi_formats::jsonl;
use pi_formats::time::parse_millis;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::SessionId;
use crate::record::SessionHeader;

/// Which sessions to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListScope {
    /// Sessions whose header `cwd` is this directory.
    Cwd(String),
    /// Every session in the store.
    All,
}

/// What a session list shows about one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The header id.
    pub id: SessionId,
    /// Where it lives: the file path, or `DB#session-id` for database stores.
    pub location: String,
    /// The header `cwd` (empty when it is not a string).
    pub cwd: String,
    /// The display name from the latest `session_info` entry.
    pub name: Option<String>,
    /// The header `parentSession`.
    pub parent_session: Option<String>,
    /// The header timestamp in ms since the epoch, when it parses.
    pub created_ms: Option<i64>,
    /// Latest user/assistant activity in ms since the epoch (see the module docs).
    pub modified_ms: i64,
    /// Lines after the header that parse as entries.
    pub entry_count: u64,
    /// `message` entries.
    pub message_count: u64,
    /// Text of the first user message; Pi shows `"(no messages)"` when there is none.
    pub first_message: Option<String>,
}

impl SessionSummary {
    /// The first message as Pi displays it.
    pub fn first_message_or_placeholder(&self) -> &str {
        self.first_message.as_deref().unwrap_or("(no messages)")
    }
}

/// The running part of a summary, updated one line at a time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SummaryState {
    /// Lines that parse as entries.
    pub entry_count: u64,
    /// `message` entries.
    pub message_count: u64,
    /// Current name (latest `session_info` wins).
    pub name: Option<String>,
    /// First user message text.
    pub first_message: Option<String>,
    /// Latest user/assistant activity, ms.
    pub last_activity_ms: Option<f64>,
    /// A line on which Pi's listing code would throw: the session is not listed.
    pub unlistable: bool,
}

impl SummaryState {
    /// Folds one entry line (not the header) into the summary.
    pub fn observe(&mut self, line: &[u8]) {
        if jsonl::is_blank(line) {
            return;
        }
        let Ok(head) = EntryHead::parse(line) else {
            return;
        };
        if head.falsy {
            return;
        }
        self.entry_count += 1;
        match head.kind() {
            "session_info" => self.observe_session_info(line),
            "message" => {
                self.message_count += 1;
                match head.role.as_deref() {
                    // The role says `message` is an object; nothing more to learn from others.
                    Some(role) if role != "user" && role != "assistant" => {}
                    _ => self.observe_message(line),
                }
            }
            _ => {}
        }
    }

    fn observe_session_info(&mut self, line: &[u8]) {
        let Ok(value) = jsonl::parse_value(line) else {
            return;
        };
        match value.get("name") {
            None | Some(Value::Null) => self.name = None,
            Some(Value::String(name)) => {
                let name = pi_formats::jsonl::js_trim(name);
                self.name = (!name.is_empty()).then(|| name.to_string());
            }
            // `entry.name?.trim()` throws on other types.
            Some(_) => self.unlistable = true,
        }
    }

    /// Reads a user/assistant message line without building its payload: one pass of
    /// serde_json that keeps only `message.role`, the shape of `message.content` (and its
    /// text while no first message is known), `message.timestamp` and the entry's
    /// `timestamp`; every other value is validated and dropped where it lies. It accepts
    /// and rejects exactly the lines `jsonl::parse_value` does (same parser, same
    /// `deserialize_any` walk, same lossy UTF-8 retry), so the summary is the one the full
    /// parse gives (`fast_fold_equals_full_parse` checks this on every fixture).
    fn observe_message(&mut self, line: &[u8]) {
        let Some(entry) = lite::parse_entry(line, self.first_message.is_none()) else {
            return;
        };
        let message = match entry.message {
            lite::Message::Missing => {
                // `message.role` on undefined/null throws in Pi.
                self.unlistable = true;
                return;
            }
            lite::Message::NotObject => return,
            lite::Message::Object(message) => message,
        };
        let role = match message.role {
            lite::Role::User => "user",
            lite::Role::Assistant => "assistant",
            lite::Role::OtherString | lite::Role::NotString => return,
        };
        let content = match message.content {
            None => return,
            Some(content) => content,
        };
        let activity = match message.timestamp {
            lite::Stamp::Number(n) => Some(n),
            _ => match entry.timestamp {
                lite::Stamp::String(s) => parse_millis(&s),
                lite::Stamp::Number(n) => Some(n),
                lite::Stamp::Other => None,
            },
        };
        if let Some(t) = activity {
            self.last_activity_ms = Some(self.last_activity_ms.unwrap_or(0.0).max(t));
        }
        let text = match content {
            lite::Content::String(text) => text,
            lite::Content::Array { has_null: true, .. } => {
                // `block.type` on null throws.
                self.unlistable = true;
                return;
            }
            lite::Content::Array { texts, .. } => texts.map(|t| t.join(" ")),
            // `content.filter` is not a function.
            lite::Content::Other => {
                self.unlistable = true;
                return;
            }
        };
        // The text is only collected while no first message is known.
        if let Some(text) = text {
            if !text.is_empty() && self.first_message.is_none() && role == "user" {
                self.first_message = Some(preview(text));
            }
        }
    }

    /// The summary, or `None` when Pi would not list the session.
    /// `fallback_modified_ms` stands in for the file's mtime.
    pub fn finish(
        &self,
        header: &SessionHeader,
        location: String,
        fallback_modified_ms: i64,
    ) -> Option<SessionSummary> {
        if self.unlistable {
            return None;
        }
        let created_ms = header.timestamp().and_then(parse_millis).map(|t| t as i64);
        let modified_ms = match self.last_activity_ms {
            Some(t) if t > 0.0 => t as i64,
            _ => created_ms.unwrap_or(fallback_modified_ms),
        };
        Some(SessionSummary {
            id: header.id().clone(),
            location,
            cwd: header.cwd().unwrap_or("").to_string(),
            name: self.name.clone(),
            parent_session: header.parent_session().map(str::to_string),
            created_ms,
            modified_ms,
            entry_count: self.entry_count,
            message_count: self.message_count,
            first_message: self.first_message.clone(),
        })
    }
}

#[cfg(test)]
impl SummaryState {
    /// [`Self::observe`] with the full-parse message reading.
    fn observe_full(&mut self, line: &[u8]) {
        if jsonl::is_blank(line) {
            return;
        }
        let Ok(head) = EntryHead::parse(line) else {
            return;
        };
        if head.falsy {
            return;
        }
        self.entry_count += 1;
        match head.kind() {
            "session_info" => self.observe_session_info(line),
            "message" => {
                self.message_count += 1;
                match head.role.as_deref() {
                    Some(role) if role != "user" && role != "assistant" => {}
                    _ => self.observe_message_full(line),
                }
            }
            _ => {}
        }
    }

    /// The full-parse reading [`Self::observe_message`] replaced; kept to check it.
    #[cfg(test)]
    fn observe_message_full(&mut self, line: &[u8]) {
        let Ok(entry) = jsonl::parse_value(line) else {
            return;
        };
        let message = match entry.get("message") {
            None | Some(Value::Null) => {
                // `message.role` on undefined/null throws in Pi.
                self.unlistable = true;
                return;
            }
            Some(message) => message,
        };
        let Some(role) = message.get("role").and_then(Value::as_str) else {
            return;
        };
        let Some(content) = message.get("content") else {
            return;
        };
        if role != "user" && role != "assistant" {
            return;
        }
        let activity = match message.get("timestamp") {
            Some(Value::Number(n)) => n.as_f64(),
            _ => entry.get("timestamp").and_then(|t| match t {
                Value::String(s) => parse_millis(s),
                Value::Number(n) => n.as_f64(),
                _ => None,
            }),
        };
        if let Some(t) = activity {
            self.last_activity_ms = Some(self.last_activity_ms.unwrap_or(0.0).max(t));
        }
        let text = match content {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => {
                if blocks.iter().any(Value::is_null) {
                    // `block.type` on null throws.
                    self.unlistable = true;
                    return;
                }
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .map(|b| b.get("text").map(js_string).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            // `content.filter` is not a function.
            _ => {
                self.unlistable = true;
                return;
            }
        };
        if !text.is_empty() && self.first_message.is_none() && role == "user" {
            self.first_message = Some(preview(text));
        }
    }
}

/// Characters of a session's first message kept as its preview (`pi sessions list`,
/// `/resume`, the history index's session rows). Pi keeps the whole message; a 200 MB paste
/// would then be printed whole by every listing. Longer messages end in `…`.
pub const FIRST_MESSAGE_PREVIEW_CHARS: usize = 500;

/// The first [`FIRST_MESSAGE_PREVIEW_CHARS`] characters of `text`, `…` appended when cut.
fn preview(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(FIRST_MESSAGE_PREVIEW_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Sorts as Pi does: most recently modified first (ties by location, descending, to be stable).
pub fn sort_summaries(list: &mut [SessionSummary]) {
    list.sort_by(|a, b| {
        b.modified_ms
            .cmp(&a.modified_ms)
            .then_with(|| b.location.cmp(&a.location))
    });
}

/// What `Array.prototype.join` makes of a value.
pub(crate) fn js_string(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => items.iter().map(js_string).collect::<Vec<_>>().join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

mod lite;

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(lines: &[&str]) -> SummaryState {
        let mut s = SummaryState::default();
        for l in lines {
            s.observe(l.as_bytes());
        }
        s
    }

    fn header() -> SessionHeader {
        SessionHeader::parse(
            br#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#
                .to_vec(),
        )
        .unwrap()
    }

    #[test]
    fn first_message_previews_are_capped() {
        let long = "é".repeat(FIRST_MESSAGE_PREVIEW_CHARS + 10);
        let shown = preview(long);
        assert_eq!(shown.chars().count(), FIRST_MESSAGE_PREVIEW_CHARS + 1);
        assert!(shown.ends_with('…'));
        assert_eq!(preview("short".into()), "short");
    }

    #[test]
    fn counts_names_and_first_message() {
        let s = fold(&[
            r#"{"type":"message","id":"1","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}]}}"#,
            r#"{"type":"message","id":"2","message":{"role":"user","content":[{"type":"image"},{"type":"text","text":"a"},{"type":"text","text":"b"}],"timestamp":7000}}"#,
            r#"{"type":"message","id":"3","message":{"role":"toolResult","content":[],"timestamp":99999}}"#,
            r#"{"type":"session_info","id":"4","name":"  first  "}"#,
            "",
            "{broken",
        ]);
        assert_eq!(s.message_count, 3);
        assert_eq!(s.entry_count, 4);
        assert_eq!(s.first_message.as_deref(), Some("a b"));
        assert_eq!(s.name.as_deref(), Some("first"));
        // The max over user/assistant activity; the tool result's later time does not count.
        assert_eq!(s.last_activity_ms, Some(1_767_225_605_000.0));
        let summary = s.finish(&header(), "f".into(), 1).unwrap();
        assert_eq!(summary.modified_ms, 1_767_225_605_000);
        assert_eq!(summary.created_ms, Some(1_767_225_600_000));
    }

    #[test]
    fn latest_session_info_wins_and_empty_clears() {
        let s = fold(&[
            r#"{"type":"session_info","name":"x"}"#,
            r#"{"type":"session_info","name":"  "}"#,
        ]);
        assert_eq!(s.name, None);
    }

    #[test]
    fn modified_falls_back_to_header_then_mtime() {
        let s = fold(&[]);
        assert_eq!(
            s.finish(&header(), "f".into(), 5).unwrap().modified_ms,
            1_767_225_600_000
        );
        let bare = SessionHeader::parse(br#"{"type":"session","id":"s"}"#.to_vec()).unwrap();
        assert_eq!(s.finish(&bare, "f".into(), 5).unwrap().modified_ms, 5);
    }

    #[test]
    fn lines_pi_throws_on_hide_the_session() {
        for line in [
            r#"{"type":"message","id":"1"}"#,
            r#"{"type":"message","message":{"role":"user","content":{"a":1}}}"#,
            r#"{"type":"message","message":{"role":"user","content":[null]}}"#,
            r#"{"type":"session_info","name":5}"#,
        ] {
            assert!(
                fold(&[line]).finish(&header(), "f".into(), 0).is_none(),
                "{line}"
            );
        }
    }

    /// Folds `lines` both ways and checks the states agree.
    fn assert_same_fold<'a>(what: &str, lines: impl IntoIterator<Item = &'a [u8]>) {
        let (mut fast, mut full) = (SummaryState::default(), SummaryState::default());
        for line in lines {
            fast.observe(line);
            full.observe_full(line);
            assert_eq!(
                fast,
                full,
                "{what}: after {}",
                String::from_utf8_lossy(line)
            );
        }
    }

    fn jsonl_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                jsonl_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }

    #[test]
    fn fast_fold_equals_full_parse_on_fixtures() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let mut files = Vec::new();
        jsonl_files(&root, &mut files);
        assert!(
            files.len() > 50,
            "fixtures not found under {}",
            root.display()
        );
        for file in files {
            let buf = std::fs::read(&file).unwrap();
            assert_same_fold(
                &file.display().to_string(),
                jsonl::lines(&buf).skip(1).map(|l| l.bytes),
            );
        }
    }

    #[test]
    fn fast_fold_equals_full_parse_on_tricky_lines() {
        let tricky: &[&[u8]] = &[
            br#"{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"a"}],"timestamp":5}}"#,
            br#"{"type":"message","message":{"content":[{"type":"text","text":"late role"}],"role":"user"}}"#,
            br#"{"type":"message","message":{"role":"user","content":"dup","content":[{"type":"text","text":"second wins"}]}}"#,
            br#"{"type":"message","timestamp":"2026-02-01T00:00:00Z","message":{"role":"user","content":"","timestamp":"x"}}"#,
            br#"{"type":"message","timestamp":12345,"message":{"role":"assistant","content":[]}}"#,
            br#"{"type":"message","timestamp":1e400,"message":{"role":"user","content":"out of range"}}"#,
            br#"{"type":"message","message":{"role":"user","content":"lone \ud800 surrogate"}}"#,
            br#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool","arguments":{"n":1e999}}]}}"#,
            br#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":{"o":1}},{"type":"text","text":[1,[2,null],"s"]},{"type":"text"},{"type":"text","text":true},{"type":"text","text":1.5}]}}"#,
            br#"{"type":"message","message":{"role":"user","content":[{"type":"text","type":"image","text":"not text"},{"type":"image","type":"text","text":"text"}]}}"#,
            br#"{"type":"message","message":{"role":"user","content":["s",1,[],{"type":["text"]},{"type":"text","text":"ok"}]}}"#,
            br#"{"type":"message","message":{"role":"user","content":"esc\"aped \u00e9 \n"}}"#,
            b"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"bad utf8 \xff here\"}}",
            b"{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"\xc3\x28\"}],\"timestamp\":9}}",
            br#"{"type":"message","message":{"role":"user"}}"#,
            br#"{"type":"message","message":{"role":5,"content":"x"}}"#,
            br#"{"type":"message","message":"string"}"#,
            br#"{"type":"message","message":[1,2]}"#,
            br#"{"type":"message","message":{"role":"user","content":null}}"#,
            br#"{"type":"message","message":{"role":"user","content":[{"type":"text","text":"t"},null]}}"#,
            br#"{"type":"message","message":{"role":"user","content":{"type":"text"}}}"#,
            br#"{"type":"message","message":null}"#,
            br#"{"type":"message"}"#,
            br#"{"type":"message","message":{"role":"user","content":"trailing"}} x"#,
            br#"{"type":"message","message":{"role":"user","content":"x","timestamp":-3}}"#,
            br#"{"type":"message","message":{"role":"user","content":"x","timestamp":18446744073709551615}}"#,
            br#"{"type":"message","message":{"role":"user","content":"x","timestamp":-9223372036854775808}}"#,
            br#"{"type":"message","message":{"role":"user","content":"x","timestamp":0.1e2}}"#,
            br#"{"type":"session_info","name":" n "}"#,
            br#"{"type":"message","message":{"role":"toolResult","content":{"bad":1}}}"#,
        ];
        // Each line alone (the ones that hide a session included), then all in a row and
        // in reverse, so the first-message and activity rules meet each other.
        for line in tricky {
            assert_same_fold("one line", [*line]);
        }
        assert_same_fold("in order", tricky.iter().copied());
        assert_same_fold("reversed", tricky.iter().rev().copied());
        let listable: Vec<&[u8]> = tricky
            .iter()
            .copied()
            .filter(|l| {
                let mut s = SummaryState::default();
                s.observe_full(l);
                !s.unlistable
            })
            .collect();
        assert_same_fold("listable, in order", listable.iter().copied());
        assert_same_fold("listable, reversed", listable.iter().rev().copied());
    }
}
