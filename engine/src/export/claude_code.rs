//! The active branch as a Claude Code transcript (`~/.claude/projects/<cwd>/<id>.jsonl`), so a
//! Pi session can be resumed with `claude --resume <id>`.
//!
//! What is written is the conversation the model sees at the leaf (Pi's `convertToLlm` of the
//! context): after a compaction, its summary is the first user message, as it is for Pi's
//! model. Each message becomes one record chained by `parentUuid`: user text and images, and
//! assistant text, signed thinking and tool calls (`tool_use`, names and arguments as Pi's
//! tools had them), tool results as user `tool_result` blocks, usage and the stop reason.
//! Not written: the rest of the tree (Claude Code resumes one chain), labels, model and
//! thinking-level changes, extension entries, unsigned thinking (Anthropic refuses it), and
//! assistant messages left without content by an error or an abort.
//!
//! Record ids are derived from the session id and the message's position, so the same
//! session always exports the same bytes.

use std::io::Write;

use serde_json::{json, Map, Value};

use crate::context::{self, SessionPath};
use crate::session::Session;

/// The Claude Code version the records claim; the format of the 2.1 series.
const CLAUDE_CODE_VERSION: &str = "2.1.332";

/// Writes the transcript, one record a line.
pub fn render_to(session: &Session, out: &mut dyn Write) -> std::io::Result<()> {
    let header = session.header().unwrap_or(Value::Null);
    let text = |k: &str| header.get(k).and_then(Value::as_str).unwrap_or("");
    let session_id = text("id").to_string();
    let cwd = text("cwd").to_string();
    let walk = session.branch_path();
    let mut writer = RecordWriter {
        out,
        session_id,
        cwd,
        parent: None,
        count: 0,
        error: None,
    };
    context::project_each(&SessionPath::of(session, &walk), |_, messages| {
        for message in context::convert_to_llm(&messages) {
            writer.message(&message);
        }
    });
    match writer.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The transcript being written: the last record's uuid chains the next one.
struct RecordWriter<'a> {
    out: &'a mut dyn Write,
    session_id: String,
    cwd: String,
    parent: Option<String>,
    count: u64,
    /// The first write error; later records are skipped.
    error: Option<std::io::Error>,
}

impl RecordWriter<'_> {
    fn message(&mut self, m: &Value) {
        let timestamp = timestamp_of(m);
        let record = match m.get("role").and_then(Value::as_str) {
            Some("user") => json!({
                "type": "user",
                "message": {"role": "user", "content": user_content(m.get("content"))},
            }),
            Some("toolResult") => json!({
                "type": "user",
                "message": {"role": "user", "content": [tool_result(m)]},
            }),
            Some("assistant") => {
                let content = assistant_content(m);
                if content.is_empty() {
                    return;
                }
                let id = format!("msg_{}", self.uuid_at(self.count).replace('-', ""));
                json!({
                    "type": "assistant",
                    "message": {
                        "id": id,
                        "type": "message",
                        "role": "assistant",
                        "model": m.get("model").cloned().unwrap_or(Value::Null),
                        "content": content,
                        "stop_reason": stop_reason(m),
                        "stop_sequence": null,
                        "usage": usage(m.get("usage")),
                    },
                })
            }
            _ => return,
        };
        self.write(record, timestamp);
    }

    fn write(&mut self, body: Value, timestamp: String) {
        if self.error.is_some() {
            return;
        }
        let uuid = self.uuid_at(self.count);
        self.count += 1;
        let mut record = Map::new();
        record.insert("parentUuid".into(), json!(self.parent));
        record.insert("isSidechain".into(), json!(false));
        record.insert("userType".into(), json!("external"));
        record.insert("cwd".into(), json!(self.cwd));
        record.insert("sessionId".into(), json!(self.session_id));
        record.insert("version".into(), json!(CLAUDE_CODE_VERSION));
        if let Value::Object(body) = body {
            record.extend(body);
        }
        record.insert("uuid".into(), json!(uuid));
        record.insert("timestamp".into(), json!(timestamp));
        self.parent = Some(uuid);
        let line = Value::Object(record).to_string();
        if let Err(e) = writeln!(self.out, "{line}") {
            self.error = Some(e);
        }
    }

    /// A UUID-shaped id from the session id and a position.
    fn uuid_at(&self, n: u64) -> String {
        super::ids::derived_uuid(&self.session_id, n)
    }
}

/// Pi keeps message times as Unix milliseconds; Claude Code as ISO 8601.
fn timestamp_of(m: &Value) -> String {
    let ms = m.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0);
    pi_formats::time::iso_from_millis(ms as i64)
}

fn user_content(content: Option<&Value>) -> Value {
    match content {
        Some(Value::String(s)) => json!(s),
        Some(Value::Array(blocks)) => Value::Array(blocks.iter().filter_map(media_block).collect()),
        _ => json!(""),
    }
}

/// A text or image block in the Messages API's shape.
fn media_block(b: &Value) -> Option<Value> {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => {
            Some(json!({"type": "text", "text": b.get("text").cloned().unwrap_or(json!(""))}))
        }
        Some("image") => Some(json!({
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": b.get("mimeType").cloned().unwrap_or(json!("image/png")),
                "data": b.get("data").cloned().unwrap_or(json!("")),
            },
        })),
        _ => None,
    }
}

fn tool_result(m: &Value) -> Value {
    let content: Vec<Value> = m
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| blocks.iter().filter_map(media_block).collect())
        .unwrap_or_default();
    json!({
        "tool_use_id": m.get("toolCallId").cloned().unwrap_or(json!("")),
        "type": "tool_result",
        "content": content,
        "is_error": m.get("isError").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn assistant_content(m: &Value) -> Vec<Value> {
    let Some(blocks) = m.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => b
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(|t| json!({"type": "text", "text": t})),
            Some("thinking") => {
                let signature = b
                    .get("thinkingSignature")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())?;
                Some(json!({
                    "type": "thinking",
                    "thinking": b.get("thinking").cloned().unwrap_or(json!("")),
                    "signature": signature,
                }))
            }
            Some("toolCall") => Some(json!({
                "type": "tool_use",
                "id": b.get("id").cloned().unwrap_or(json!("")),
                "name": b.get("name").cloned().unwrap_or(json!("")),
                "input": b.get("arguments").cloned().unwrap_or(json!({})),
            })),
            _ => None,
        })
        .collect()
}

fn stop_reason(m: &Value) -> &'static str {
    match m.get("stopReason").and_then(Value::as_str) {
        Some("toolUse") => "tool_use",
        Some("length") => "max_tokens",
        _ => "end_turn",
    }
}

fn usage(u: Option<&Value>) -> Value {
    let n = |k: &str| {
        u.and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    json!({
        "input_tokens": n("input"),
        "output_tokens": n("output"),
        "cache_read_input_tokens": n("cacheRead"),
        "cache_creation_input_tokens": n("cacheWrite"),
    })
}
