//! What the history index takes from one entry line: searchable text parts and usage numbers.
//!
//! Pure functions over a line's bytes, so the JSONL tail reader and the generic store reader
//! feed the index the same rows. A line that is not a JSON object yields nothing.

use pi_formats::time::parse_millis;
use serde_json::{Map, Value};

/// One searchable piece of an entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Part {
    /// `user`, `assistant`, `tool`, `bash`, `summary` or `custom` (what `--role` filters on).
    pub role: &'static str,
    /// `text`, `thinking`, `tool_call`, `tool_result`, `bash`, `compaction`, `branch_summary`
    /// or `custom`.
    pub kind: &'static str,
    /// The tool of a call or result.
    pub tool_name: Option<String>,
    /// A tool result flagged `isError`.
    pub is_error: bool,
    pub text: String,
}

/// Token and cost numbers of one LLM call (assistant message, compaction or branch summary).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    pub input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
    pub cost: f64,
}

/// Everything the index keeps about one entry line.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Extracted {
    pub id: Option<String>,
    pub timestamp_ms: Option<i64>,
    /// The entry's own `timestamp` (when it was appended), even where `timestamp_ms` is the
    /// message's: a tool call's entry is appended when the model finished writing it, so
    /// tool durations are measured between entry times.
    pub appended_ms: Option<i64>,
    /// The message role mapped as in [`Part::role`], for `message` entries.
    pub message_role: Option<&'static str>,
    /// Provider and model named by the entry itself (assistant messages, usage entries).
    pub provider: Option<String>,
    pub model: Option<String>,
    /// A `model_change` entry: the session's model from here on.
    pub model_change: Option<(String, String)>,
    pub parts: Vec<Part>,
    pub usage: Option<Usage>,
    pub tool_calls: u32,
    pub tool_errors: u32,
    /// An assistant message that ended with `stopReason: "error"`.
    pub error: bool,
    /// The tool calls of an assistant message, for the `tool_uses` table (`views.rs`).
    pub calls: Vec<ToolCall>,
    /// A tool result: the call it answers, for the `tool_uses` table.
    pub result: Option<ToolResult>,
}

/// One `toolCall` block, with the arguments people ask about in SQL.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ToolCall {
    pub id: Option<String>,
    pub name: Option<String>,
    /// `path` (or `file_path`, `filePath`) argument: the file a read/edit/write works on.
    pub path: Option<String>,
    /// `command` argument (bash), cut to [`MAX_COMMAND_CHARS`].
    pub command: Option<String>,
}

/// A `toolResult` message.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ToolResult {
    pub call_id: Option<String>,
    pub is_error: bool,
}

/// Characters of a bash command kept in `tool_calls.command`: enough to tell commands
/// apart, not a second copy of a heredoc.
pub const MAX_COMMAND_CHARS: usize = 500;

impl Extracted {
    /// Whether the entry has anything for the `entries` (stats) table.
    pub fn has_stats(&self) -> bool {
        self.message_role.is_some() || self.usage.is_some()
    }
}

/// Bytes of text indexed per entry (all its parts together): search finds words in the
/// first 64 KiB of a message, tool call or result. A 200 MB paste would otherwise cost the
/// index several times its size in postings and snippets.
pub const MAX_INDEXED_BYTES_PER_ENTRY: usize = 64 * 1024;

/// Reads one entry line. `None` for blank, malformed and non-object lines.
pub(crate) fn extract(line: &[u8]) -> Option<Extracted> {
    let mut out = extract_uncapped(line)?;
    let mut budget = MAX_INDEXED_BYTES_PER_ENTRY;
    for part in &mut out.parts {
        if part.text.len() > budget {
            let mut cut = budget;
            while !part.text.is_char_boundary(cut) {
                cut -= 1;
            }
            part.text.truncate(cut);
        }
        budget -= part.text.len();
    }
    Some(out)
}

fn extract_uncapped(line: &[u8]) -> Option<Extracted> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let entry = value.as_object()?;
    fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
        m.get(key).and_then(Value::as_str)
    }
    let appended_ms = entry
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(parse_millis)
        .map(|t| t as i64);
    let mut out = Extracted {
        id: str_of(entry, "id").map(str::to_string),
        timestamp_ms: appended_ms,
        appended_ms,
        provider: str_of(entry, "provider").map(str::to_string),
        model: str_of(entry, "model")
            .or_else(|| str_of(entry, "modelId"))
            .map(str::to_string),
        usage: entry.get("usage").and_then(usage_of),
        ..Extracted::default()
    };
    let summary_part = |kind: &'static str| {
        str_of(entry, "summary").map(|s| Part {
            role: "summary",
            kind,
            tool_name: None,
            is_error: false,
            text: s.to_string(),
        })
    };
    match str_of(entry, "type").unwrap_or("") {
        "message" => {
            if let Some(message) = entry.get("message").and_then(Value::as_object) {
                observe_message(message, &mut out);
            }
        }
        "model_change" => {
            if let (Some(p), Some(m)) = (str_of(entry, "provider"), str_of(entry, "modelId")) {
                out.model_change = Some((p.to_string(), m.to_string()));
            }
            // The change names the model of later entries, not a model this entry used.
            out.provider = None;
            out.model = None;
        }
        "compaction" => out.parts.extend(summary_part("compaction")),
        "branch_summary" => out.parts.extend(summary_part("branch_summary")),
        "custom_message" => {
            let text = content_text(entry.get("content"));
            if !text.is_empty() {
                out.parts.push(Part {
                    role: "custom",
                    kind: "custom",
                    tool_name: None,
                    is_error: false,
                    text,
                });
            }
        }
        _ => {}
    }
    Some(out)
}

fn observe_message(message: &Map<String, Value>, out: &mut Extracted) {
    let role = message.get("role").and_then(Value::as_str).unwrap_or("");
    if let Some(t) = message.get("timestamp").and_then(Value::as_f64) {
        // Pi takes `message.timestamp` (ms) over the entry's ISO time for activity.
        out.timestamp_ms = Some(t as i64);
    }
    if let Some(usage) = message.get("usage").and_then(usage_of) {
        out.usage = Some(usage);
    }
    let part = |role: &'static str, kind: &'static str, text: String| Part {
        role,
        kind,
        tool_name: None,
        is_error: false,
        text,
    };
    let content = message.get("content");
    match role {
        "user" => {
            out.message_role = Some("user");
            let text = content_text(content);
            if !text.is_empty() {
                out.parts.push(part("user", "text", text));
            }
        }
        "assistant" => {
            out.message_role = Some("assistant");
            out.provider = message
                .get("provider")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(out.provider.take());
            out.model = message
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(out.model.take());
            out.error = message.get("stopReason").and_then(Value::as_str) == Some("error");
            let blocks = content.and_then(Value::as_array).map(Vec::as_slice);
            let mut text = Vec::new();
            let mut thinking = Vec::new();
            for block in blocks.unwrap_or_default() {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => text.extend(block.get("text").and_then(Value::as_str)),
                    Some("thinking") => {
                        thinking.extend(block.get("thinking").and_then(Value::as_str))
                    }
                    Some("toolCall") => {
                        out.tool_calls += 1;
                        out.calls.push(tool_call(block));
                        let mut args = String::new();
                        if let Some(a) = block.get("arguments") {
                            flatten_values(a, &mut args);
                        }
                        out.parts.push(Part {
                            role: "assistant",
                            kind: "tool_call",
                            tool_name: block
                                .get("name")
                                .and_then(Value::as_str)
                                .map(str::to_string),
                            is_error: false,
                            text: args,
                        });
                    }
                    _ => {}
                }
            }
            if let Some(s) = content.and_then(Value::as_str) {
                text.push(s);
            }
            if !text.is_empty() {
                out.parts.push(part("assistant", "text", text.join("\n")));
            }
            if !thinking.is_empty() {
                out.parts
                    .push(part("assistant", "thinking", thinking.join("\n")));
            }
        }
        "toolResult" => {
            out.message_role = Some("tool");
            let is_error = message.get("isError").and_then(Value::as_bool) == Some(true);
            out.tool_errors = u32::from(is_error);
            out.result = Some(ToolResult {
                call_id: message
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                is_error,
            });
            // Every result gets a row, text or not, so per-tool stats can count it.
            out.parts.push(Part {
                role: "tool",
                kind: "tool_result",
                tool_name: message
                    .get("toolName")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                is_error,
                text: content_text(content),
            });
        }
        "bashExecution" => {
            out.message_role = Some("bash");
            let s = |k: &str| message.get(k).and_then(Value::as_str).unwrap_or("");
            out.parts.push(part(
                "bash",
                "bash",
                format!("{}\n{}", s("command"), s("output")),
            ));
        }
        "branchSummary" | "compactionSummary" => {
            out.message_role = Some("summary");
            if let Some(s) = message.get("summary").and_then(Value::as_str) {
                out.parts.push(part("summary", "text", s.to_string()));
            }
        }
        "custom" => {
            out.message_role = Some("custom");
            let text = content_text(content);
            if !text.is_empty() {
                out.parts.push(part("custom", "custom", text));
            }
        }
        // System prompts repeat in every session and would drown every search; other roles
        // are counted as messages but hold nothing to search.
        "system" => out.message_role = Some("system"),
        _ => out.message_role = Some("other"),
    }
}

fn tool_call(block: &Value) -> ToolCall {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let args = block.get("arguments");
    let arg = |k: &str| args.and_then(|a| a.get(k));
    ToolCall {
        id: s(block.get("id")),
        name: s(block.get("name")),
        path: s(arg("path")
            .or_else(|| arg("file_path"))
            .or_else(|| arg("filePath"))),
        command: arg("command")
            .and_then(Value::as_str)
            .map(|c| c.chars().take(MAX_COMMAND_CHARS).collect()),
    }
}

/// The text of a `content` value: the string itself, or its text blocks joined by newlines.
/// (`pi_engine::js::content_text` is the engine's, with JavaScript's coercion of odd `text`
/// values; the index sits below the engine and only needs the strings.)
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}

/// Tool arguments as searchable text: every string and number value, one per line. Keys are
/// left out: they are the tool's schema (`path`, `command`), the same in every call.
fn flatten_values(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(s);
        }
        Value::Number(n) => {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&n.to_string());
        }
        Value::Array(items) => items.iter().for_each(|v| flatten_values(v, out)),
        Value::Object(map) => map.values().for_each(|v| flatten_values(v, out)),
        Value::Null | Value::Bool(_) => {}
    }
}

fn usage_of(value: &Value) -> Option<Usage> {
    let u = value.as_object()?;
    let n = |k: &str| u.get(k).and_then(Value::as_f64).unwrap_or(0.0) as i64;
    Some(Usage {
        input: n("input"),
        output: n("output"),
        cache_read: n("cacheRead"),
        cache_write: n("cacheWrite"),
        cost: u
            .get("cost")
            .and_then(|c| c.get("total"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assistant_parts_usage_and_model() {
        let e = extract(
            br#"{"type":"message","id":"a","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","provider":"p","model":"m","stopReason":"toolUse","timestamp":5,"content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"ok"},{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"ls -la","timeout":30,"flag":true}}],"usage":{"input":10,"output":2,"cacheRead":3,"cacheWrite":4,"cost":{"total":0.5}}}}"#,
        )
        .unwrap();
        assert_eq!(e.timestamp_ms, Some(5));
        assert_eq!(
            (e.provider.as_deref(), e.model.as_deref()),
            (Some("p"), Some("m"))
        );
        assert_eq!(e.tool_calls, 1);
        assert_eq!(
            e.usage,
            Some(Usage {
                input: 10,
                output: 2,
                cache_read: 3,
                cache_write: 4,
                cost: 0.5
            })
        );
        let kinds: Vec<_> = e.parts.iter().map(|p| (p.kind, p.text.as_str())).collect();
        assert_eq!(
            kinds,
            vec![
                ("tool_call", "ls -la\n30"),
                ("text", "ok"),
                ("thinking", "hmm")
            ]
        );
        assert_eq!(e.parts[0].tool_name.as_deref(), Some("bash"));
    }

    #[test]
    fn other_roles_and_entries() {
        let tool = extract(br#"{"type":"message","id":"t","message":{"role":"toolResult","toolName":"read","isError":true,"content":[{"type":"text","text":"boom"},{"type":"image"}]}}"#).unwrap();
        assert_eq!(tool.message_role, Some("tool"));
        assert_eq!(tool.tool_errors, 1);
        assert_eq!(tool.parts[0].text, "boom");
        let bash = extract(
            br#"{"type":"message","message":{"role":"bashExecution","command":"ls","output":"a"}}"#,
        )
        .unwrap();
        assert_eq!(bash.parts[0].text, "ls\na");
        let compaction = extract(
            br###"{"type":"compaction","id":"c","summary":"## Goal","usage":{"input":1}}"###,
        )
        .unwrap();
        assert_eq!(compaction.parts[0].role, "summary");
        assert_eq!(compaction.usage.map(|u| u.input), Some(1));
        let change = extract(br#"{"type":"model_change","provider":"p","modelId":"m"}"#).unwrap();
        assert_eq!(change.model_change, Some(("p".into(), "m".into())));
        assert!(extract(b"{broken").is_none());
        assert!(extract(b"[1]").is_none());
        let system =
            extract(br#"{"type":"message","message":{"role":"system","content":"x"}}"#).unwrap();
        assert!(system.parts.is_empty());
    }

    #[test]
    fn indexed_text_is_capped_per_entry() {
        let big = "word ".repeat(40_000);
        let line = serde_json::json!({"type": "message", "id": "a", "message": {"role": "assistant",
            "content": [{"type": "text", "text": big}, {"type": "thinking", "thinking": big}]}});
        let e = extract(line.to_string().as_bytes()).unwrap();
        let total: usize = e.parts.iter().map(|p| p.text.len()).sum();
        assert_eq!(total, MAX_INDEXED_BYTES_PER_ENTRY);
    }
}
