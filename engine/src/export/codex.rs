//! The active branch as a Codex rollout
//! (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`), so a Pi session can be
//! continued with `codex resume <id>`.
//!
//! What is written is the conversation the model sees at the leaf (Pi's `convertToLlm` of the
//! context), as the records Codex 0.171 writes: a `session_meta`, then per turn (a user
//! message and what answers it) a `task_started` event, a `turn_context`, the `response_item`s
//! Codex sends back to the model — user `message`s (text, data-URL images), `reasoning`,
//! assistant `message`s, `function_call`s and `function_call_output`s — each with the
//! `item_completed` event Codex writes beside it, a `token_usage_record` and `token_count`
//! event per response, and `task_complete`.
//!
//! Not written, because Codex cannot take it: the rest of the tree (a rollout is one line),
//! thinking that OpenAI did not produce (the Responses API replays only its own reasoning
//! items, encrypted), Pi's provider (Codex resumes only with a provider it has configured, so
//! `model_provider` is Codex's own `openai`), labels, session names and extension entries.
//!
//! The rollout id is the Pi session id when that is a UUID (else a UUID derived from it);
//! every other id is derived from the session id and a position, so the same session always
//! exports the same bytes.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{json, Value};

use super::ids::{derived_uuid, is_uuid};
use crate::context::{self, SessionPath};
use crate::session::Session;

/// The Codex version whose rollout format is written.
const CODEX_VERSION: &str = "0.171.0";

/// Where the rollout is read from: ids and times the records carry.
struct Meta {
    pi_id: String,
    id: String,
    cwd: String,
    started: String,
}

fn meta_of(session: &Session) -> Meta {
    let header = session.header().unwrap_or(Value::Null);
    let text = |k: &str| header.get(k).and_then(Value::as_str).unwrap_or("");
    let pi_id = text("id").to_string();
    let id = if is_uuid(&pi_id) {
        pi_id.to_lowercase()
    } else {
        derived_uuid(&pi_id, u64::MAX)
    };
    let started = match pi_formats::time::parse_millis(text("timestamp")) {
        Some(ms) => pi_formats::time::iso_from_millis(ms as i64),
        None => pi_formats::time::iso_from_millis(0),
    };
    Meta {
        pi_id,
        id,
        cwd: text("cwd").to_string(),
        started,
    }
}

/// The Codex session id the rollout gets.
pub fn rollout_id(session: &Session) -> String {
    meta_of(session).id
}

/// Where Codex looks for the rollout, relative to `$CODEX_HOME/sessions`:
/// `YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl`, dated by the session's start.
pub fn rollout_path(session: &Session) -> PathBuf {
    let meta = meta_of(session);
    let t = &meta.started; // `YYYY-MM-DDThh:mm:ss.sssZ`
    let stamp = t
        .get(..19)
        .unwrap_or("1970-01-01T00:00:00")
        .replace(':', "-");
    let date = |range: std::ops::Range<usize>| t.get(range).unwrap_or("00").to_string();
    [
        date(0..4),
        date(5..7),
        date(8..10),
        format!("rollout-{stamp}-{}.jsonl", meta.id),
    ]
    .iter()
    .collect()
}

/// Writes the rollout, one record a line.
pub fn render_to(session: &Session, out: &mut dyn Write) -> std::io::Result<()> {
    let meta = meta_of(session);
    let walk = session.branch_path();
    let mut messages = Vec::new();
    context::project_each(&SessionPath::of(session, &walk), |_, projected| {
        messages.extend(context::convert_to_llm(&projected));
    });
    let mut rollout = Rollout {
        out,
        meta,
        ordinal: 0,
        ids: 0,
        turn: None,
        model: None,
        totals: TokenCounts::default(),
        error: None,
    };
    rollout.session_meta();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        // Pi's `system` messages (tool declarations) are not conversation: Codex states its
        // own tools.
        if !matches!(role, "user" | "assistant" | "toolResult") {
            continue;
        }
        if role == "user" || rollout.turn.is_none() {
            if let Some(model) = turn_model(&messages[i..]) {
                rollout.model = Some(model);
            }
            rollout.end_turn(m);
            rollout.start_turn(m);
        }
        match role {
            "user" => rollout.user(m),
            "assistant" => rollout.assistant(m),
            _ => rollout.tool_result(m),
        }
    }
    if let Some(last) = messages.last() {
        rollout.end_turn(last);
    }
    match rollout.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The model of the first answer in a turn (`messages` starts at the turn's first message).
fn turn_model(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .enumerate()
        .take_while(|(k, m)| *k == 0 || m.get("role").and_then(Value::as_str) != Some("user"))
        .find(|(_, m)| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .and_then(|(_, m)| m.get("model").and_then(Value::as_str))
        .map(str::to_string)
}

/// The turn being written.
struct Turn {
    id: String,
    started_ms: i64,
    last_agent_message: Option<String>,
}

/// Token counts as Codex reports them (input includes cached and cache-written tokens).
#[derive(Default, Clone, Copy)]
struct TokenCounts {
    input: u64,
    cached: u64,
    cache_write: u64,
    output: u64,
    reasoning: u64,
    total: u64,
}

impl TokenCounts {
    fn of(usage: Option<&Value>) -> TokenCounts {
        let n = |k: &str| {
            usage
                .and_then(|u| u.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let input = n("input") + n("cacheRead") + n("cacheWrite");
        let total = match n("totalTokens") {
            0 => input + n("output"),
            t => t,
        };
        TokenCounts {
            input,
            cached: n("cacheRead"),
            cache_write: n("cacheWrite"),
            output: n("output"),
            reasoning: n("reasoning"),
            total,
        }
    }

    fn add(&mut self, o: TokenCounts) {
        self.input += o.input;
        self.cached += o.cached;
        self.cache_write += o.cache_write;
        self.output += o.output;
        self.reasoning += o.reasoning;
        self.total += o.total;
    }

    fn json(&self) -> Value {
        json!({
            "input_tokens": self.input,
            "cached_input_tokens": self.cached,
            "cache_write_input_tokens": self.cache_write,
            "output_tokens": self.output,
            "reasoning_output_tokens": self.reasoning,
            "total_tokens": self.total,
        })
    }
}

/// The rollout being written.
struct Rollout<'a> {
    out: &'a mut dyn Write,
    meta: Meta,
    /// Codex numbers its records.
    ordinal: u64,
    /// Ids handed out so far (turns, events).
    ids: u64,
    turn: Option<Turn>,
    /// The model of the turn being written.
    model: Option<String>,
    totals: TokenCounts,
    /// The first write error; later records are skipped.
    error: Option<std::io::Error>,
}

impl Rollout<'_> {
    fn record(&mut self, timestamp: &str, kind: &str, payload: Value) {
        if self.error.is_some() {
            return;
        }
        let line = json!({
            "timestamp": timestamp,
            "ordinal": self.ordinal,
            "type": kind,
            "payload": payload,
        });
        self.ordinal += 1;
        if let Err(e) = writeln!(self.out, "{line}") {
            self.error = Some(e);
        }
    }

    fn next_id(&mut self) -> String {
        self.ids += 1;
        derived_uuid(&self.meta.pi_id, self.ids)
    }

    fn turn_id(&self) -> String {
        self.turn.as_ref().map(|t| t.id.clone()).unwrap_or_default()
    }

    fn event(&mut self, timestamp: &str, payload: Value) {
        self.record(timestamp, "event_msg", payload);
    }

    /// An `item_completed` event, as Codex writes one beside each item it records.
    fn item_completed(&mut self, ms: i64, item: Value) {
        let payload = json!({
            "type": "item_completed",
            "thread_id": self.meta.id,
            "turn_id": self.turn_id(),
            "item": item,
            "started_at_ms": ms,
            "completed_at_ms": ms,
        });
        self.event(&iso(ms), payload);
    }

    fn session_meta(&mut self) {
        let started = self.meta.started.clone();
        let payload = json!({
            "session_id": self.meta.id,
            "id": self.meta.id,
            "timestamp": started,
            "cwd": self.meta.cwd,
            "originator": "pi",
            "cli_version": CODEX_VERSION,
            "source": "cli",
            "thread_source": "user",
            "model_provider": "openai",
        });
        self.record(&started, "session_meta", payload);
    }

    fn start_turn(&mut self, first: &Value) {
        let ms = millis_of(first);
        let id = self.next_id();
        self.turn = Some(Turn {
            id: id.clone(),
            started_ms: ms,
            last_agent_message: None,
        });
        let ts = iso(ms);
        self.event(
            &ts,
            json!({
                "type": "task_started",
                "turn_id": id,
                "root_turn_id": id,
                "started_at": ms / 1000,
                "collaboration_mode_kind": "default",
            }),
        );
        // Pi ran without approvals or a sandbox; Codex's own defaults are stated instead of
        // Pi's, so a resumed session asks before it acts.
        let payload = json!({
            "turn_id": id,
            "root_turn_id": id,
            "cwd": self.meta.cwd,
            "approval_policy": "on-request",
            "sandbox_policy": {"type": "read-only"},
            "model": self.model.clone().unwrap_or_default(),
            "summary": "auto",
        });
        self.record(&ts, "turn_context", payload);
    }

    /// Closes the turn in progress, at the time of `next` (the message after it).
    fn end_turn(&mut self, next: &Value) {
        let Some(turn) = self.turn.take() else {
            return;
        };
        let ms = millis_of(next).max(turn.started_ms);
        let payload = json!({
            "type": "task_complete",
            "turn_id": turn.id,
            "root_turn_id": turn.id,
            "last_agent_message": turn.last_agent_message,
            "started_at": turn.started_ms / 1000,
            "completed_at": ms / 1000,
            "duration_ms": ms - turn.started_ms,
        });
        self.event(&iso(ms), payload);
    }

    fn user(&mut self, m: &Value) {
        let ms = millis_of(m);
        let mut content = Vec::new();
        let mut shown = Vec::new();
        for b in blocks(m.get("content")) {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let text = b.get("text").and_then(Value::as_str).unwrap_or("");
                    content.push(json!({"type": "input_text", "text": text}));
                    shown.push(json!({"type": "text", "text": text, "text_elements": []}));
                }
                Some("image") => content.push(json!({
                    "type": "input_image",
                    "image_url": data_url(&b),
                })),
                _ => {}
            }
        }
        let item = json!({"type": "message", "role": "user", "content": content});
        self.record(&iso(ms), "response_item", item);
        let id = self.next_id();
        self.item_completed(
            ms,
            json!({"type": "UserMessage", "id": id, "content": shown}),
        );
    }

    fn assistant(&mut self, m: &Value) {
        let ms = millis_of(m);
        let ts = iso(ms);
        let mut wrote_item = false;
        for b in blocks(m.get("content")) {
            match b.get("type").and_then(Value::as_str) {
                Some("thinking") => {
                    let Some(item) = openai_reasoning(&b) else {
                        continue;
                    };
                    let summary: Vec<Value> = item
                        .get("summary")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|s| s.get("text").cloned())
                        .collect();
                    let id = item.get("id").cloned().unwrap_or_default();
                    self.item_completed(
                        ms,
                        json!({"type": "Reasoning", "id": id, "summary_text": summary, "raw_content": []}),
                    );
                    self.record(&ts, "response_item", item);
                    wrote_item = true;
                }
                Some("text") => {
                    let text = b.get("text").and_then(Value::as_str).unwrap_or("");
                    if text.is_empty() {
                        continue;
                    }
                    let id = text_item_id(&b);
                    let shown_id = id.clone().unwrap_or_else(|| self.next_id());
                    self.item_completed(
                        ms,
                        json!({"type": "AgentMessage", "id": shown_id, "content": [{"type": "Text", "text": text}]}),
                    );
                    let mut item = json!({
                        "type": "message",
                        "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    });
                    if let Some(id) = id {
                        item["id"] = json!(id);
                    }
                    self.record(&ts, "response_item", item);
                    if let Some(turn) = &mut self.turn {
                        turn.last_agent_message = Some(text.to_string());
                    }
                    wrote_item = true;
                }
                Some("toolCall") => {
                    let (call_id, item_id) = split_call_id(&b);
                    let arguments = b.get("arguments").cloned().unwrap_or(json!({}));
                    let mut item = json!({
                        "type": "function_call",
                        "status": "completed",
                        "name": b.get("name").cloned().unwrap_or(json!("")),
                        "arguments": arguments.to_string(),
                        "call_id": call_id,
                    });
                    if let Some(id) = item_id {
                        item["id"] = json!(id);
                    }
                    self.record(&ts, "response_item", item);
                    wrote_item = true;
                }
                _ => {}
            }
        }
        if wrote_item {
            self.usage(m, &ts);
        }
        if m.get("stopReason").and_then(Value::as_str) == Some("error") {
            let message = m
                .get("errorMessage")
                .and_then(Value::as_str)
                .unwrap_or("The request failed.");
            self.event(&ts, json!({"type": "error", "message": message}));
        }
    }

    /// The usage of one response: Codex's per-response record and its running total.
    fn usage(&mut self, m: &Value, ts: &str) {
        let last = TokenCounts::of(m.get("usage"));
        self.totals.add(last);
        let payload = json!({
            "thread_id": self.meta.id,
            "turn_id": self.turn_id(),
            "session_id": self.meta.id,
            "root_turn_id": self.turn_id(),
            "response_id": m.get("responseId").cloned().unwrap_or(Value::Null),
            "usage": last.json(),
            "thread_token_usage": self.totals.json(),
        });
        self.record(ts, "token_usage_record", payload);
        let info = json!({
            "total_token_usage": self.totals.json(),
            "last_token_usage": last.json(),
            "last_usage_includes_reasoning": false,
        });
        self.event(ts, json!({"type": "token_count", "info": info}));
    }

    fn tool_result(&mut self, m: &Value) {
        let ms = millis_of(m);
        let call_id = m
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or("")
            .split('|')
            .next()
            .unwrap_or("")
            .to_string();
        let failed = m.get("isError").and_then(Value::as_bool).unwrap_or(false);
        let parts: Vec<Value> = blocks(m.get("content"))
            .into_iter()
            .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => Some(json!({
                    "type": "input_text",
                    "text": b.get("text").cloned().unwrap_or(json!("")),
                })),
                Some("image") => Some(json!({"type": "input_image", "image_url": data_url(&b)})),
                _ => None,
            })
            .collect();
        // One text is a plain string, as Codex writes its own tools' output.
        let output = match parts.as_slice() {
            [] => json!(""),
            [one] if one["type"] == "input_text" => one["text"].clone(),
            _ => Value::Array(parts),
        };
        // Pi's tools are not Codex's: they are recorded as Codex records tools a client
        // provides, whose event says whether the call failed.
        self.item_completed(
            ms,
            json!({
                "type": "DynamicToolCall",
                "id": call_id,
                "tool": m.get("toolName").cloned().unwrap_or(json!("")),
                "status": if failed { "failed" } else { "completed" },
                "success": !failed,
            }),
        );
        let item = json!({"type": "function_call_output", "call_id": call_id, "output": output});
        self.record(&iso(ms), "response_item", item);
    }
}

/// A message's content as blocks (a string is one text block).
fn blocks(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

/// The reasoning item OpenAI's Responses API produced, which Pi keeps whole as the thinking
/// block's signature; `None` for other providers' thinking, which OpenAI would not take back.
fn openai_reasoning(block: &Value) -> Option<Value> {
    let signature = block.get("thinkingSignature").and_then(Value::as_str)?;
    let mut item: serde_json::Map<String, Value> = serde_json::from_str(signature).ok()?;
    if item.get("type").and_then(Value::as_str) != Some("reasoning") {
        return None;
    }
    item.retain(|k, _| {
        matches!(
            k.as_str(),
            "type" | "id" | "summary" | "content" | "encrypted_content"
        )
    });
    item.entry("summary").or_insert_with(|| json!([]));
    Some(Value::Object(item))
}

/// The id OpenAI gave an output text's message (Pi's `textSignature`: `{"v":1,"id":…}` or the
/// bare id).
fn text_item_id(block: &Value) -> Option<String> {
    let signature = block.get("textSignature").and_then(Value::as_str)?;
    let id = match serde_json::from_str::<Value>(signature) {
        Ok(v) => v.get("id").and_then(Value::as_str)?.to_string(),
        Err(_) => signature.to_string(),
    };
    id.starts_with("msg_").then_some(id)
}

/// Pi's id of a call made through the Responses API is `call_id|item_id`; others are the
/// call id alone.
fn split_call_id(block: &Value) -> (String, Option<String>) {
    let id = block.get("id").and_then(Value::as_str).unwrap_or("");
    match id.split_once('|') {
        Some((call, item)) if !item.is_empty() => (call.to_string(), Some(item.to_string())),
        Some((call, _)) => (call.to_string(), None),
        None => (id.to_string(), None),
    }
}

fn data_url(image: &Value) -> String {
    let field = |k: &str| image.get(k).and_then(Value::as_str).unwrap_or("");
    let mime = match field("mimeType") {
        "" => "image/png",
        m => m,
    };
    format!("data:{mime};base64,{}", field("data"))
}

fn millis_of(m: &Value) -> i64 {
    m.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0) as i64
}

fn iso(ms: i64) -> String {
    pi_formats::time::iso_from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_calls_texts_and_reasoning_come_from_what_openai_gave() {
        let call = json!({"id": "call_1|fc_1"});
        assert_eq!(split_call_id(&call), ("call_1".into(), Some("fc_1".into())));
        assert_eq!(
            split_call_id(&json!({"id": "toolu_1"})),
            ("toolu_1".into(), None)
        );
        let text = json!({"textSignature": "{\"v\":1,\"id\":\"msg_9\"}"});
        assert_eq!(text_item_id(&text).as_deref(), Some("msg_9"));
        assert_eq!(text_item_id(&json!({"textSignature": "sig"})), None);
        let item = json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e", "metadata": {}});
        let reasoning = openai_reasoning(&json!({"thinkingSignature": item.to_string()})).unwrap();
        assert_eq!(reasoning.get("metadata"), None);
        assert_eq!(reasoning["encrypted_content"], "e");
        // Anthropic's signature is not an OpenAI item.
        assert_eq!(
            openai_reasoning(&json!({"thinkingSignature": "EqQBCkYI"})),
            None
        );
    }
}
