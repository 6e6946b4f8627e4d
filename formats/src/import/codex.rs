//! Codex rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`) → Pi entries.
//!
//! Codex writes one record a line, `{timestamp, type, payload}`: a `session_meta` first, then
//! `response_item`s (the Responses API items the model saw and produced: messages, reasoning,
//! `function_call` / `custom_tool_call` and their `*_output`s), `turn_context` at the start of
//! each turn (the model and settings in effect), `event_msg`s (what the UI showed: item
//! completions, `token_count`, `task_started` / `task_complete`, errors), `token_usage_record`
//! (one per API response), `world_state` and `compacted` (the history was replaced). A rollout
//! is one line of conversation; a fork (`codex fork`) is a new rollout whose `session_meta`
//! names the rollout it came from and how many of its records it continues.
//!
//! The mapping (docs/import.md has the table):
//! * the model items of one API response (reasoning, assistant messages, tool calls, up to the
//!   response's `token_usage_record`) → one Pi `assistant` message: `thinking` (the reasoning
//!   summary; the item itself as the signature, so the OpenAI Responses provider can replay
//!   it), `text`, `toolCall` blocks with Pi's `call_id|item_id` ids; usage from the response's
//!   usage record (or the `token_count` event after it), cost from the caller's price table;
//! * a user message → a Pi `user` message (text, data-URL images); each `*_call_output` → a
//!   `toolResult` named after its call, an error when Codex reported a failure or non-zero exit;
//! * a `turn_context` whose model differs from the one in effect → `model_change`;
//! * `compacted` → `compaction` (Codex's summary, or for a server-side compaction, whose summary
//!   is encrypted, the user messages Codex kept);
//! * an `error` event, or a `task_complete` carrying an error → an `assistant` message with
//!   `stopReason: error`;
//! * everything else (developer messages, events, usage and world-state records, other item
//!   types) → a `custom` entry `codex/<type>` (`codex/<type>/<payload type>` for events and
//!   items) holding the record whole.
//!
//! Ids: every entry's id is hashed from the session, the source file's name and the line, so a
//! re-import writes the same lines. Entries form one chain in file order. Every entry carries
//! `importedFrom` (format, file, line numbers and, for messages, the records without content).

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::{
    imported_from, json_lines, millis, stable_hex, Converted, Counts, ImportError, SourceFile,
};
use crate::entry::{EntryBase, NewEntry};
use crate::header::NewHeader;
use crate::id::is_valid_session_id;
use crate::message::{AgentMessage, AssistantMessage, ContentBlock, StopReason, Usage};

/// The `format` written into `importedFrom`.
pub const FORMAT: &str = "codex";

/// The API Codex speaks (Pi's name for it).
const API: &str = "openai-responses";

/// The item types the model produces in a response.
const MODEL_ITEMS: &[&str] = &["reasoning", "function_call", "custom_tool_call"];

/// Payload fields whose content a message entry holds itself, left out of `importedFrom`.
const CONTENT_FIELDS: &[&str] = &[
    "content",
    "summary",
    "encrypted_content",
    "arguments",
    "input",
    "output",
];

/// One parsed source line.
struct Rec {
    /// Index into the files (0: the rollout, 1: the rollout it was forked from).
    file: usize,
    line: usize,
    v: Map<String, Value>,
}

impl Rec {
    fn kind(&self) -> &str {
        self.v.get("type").and_then(Value::as_str).unwrap_or("")
    }
    fn payload(&self) -> &Value {
        self.v.get("payload").unwrap_or(&Value::Null)
    }
    fn ptype(&self) -> &str {
        self.payload()
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    fn pstr(&self, key: &str) -> Option<&str> {
        self.payload().get(key).and_then(Value::as_str)
    }
    fn timestamp(&self) -> Option<&str> {
        self.v.get("timestamp").and_then(Value::as_str)
    }
    /// A response item the model produced (part of an assistant message).
    fn is_model_item(&self) -> bool {
        self.kind() == "response_item"
            && (MODEL_ITEMS.contains(&self.ptype())
                || (self.ptype() == "message" && self.pstr("role") == Some("assistant")))
    }
    /// A record that reports on a response without being part of the conversation; written
    /// after the response it interrupts.
    fn is_passive(&self) -> bool {
        matches!(self.kind(), "event_msg" | "world_state")
    }
}

/// The id of the rollout a rollout was forked from (`session_meta.forked_from_id`), so the
/// caller can hand that rollout to [`convert`] too.
pub fn forked_from(file: &SourceFile<'_>) -> Option<String> {
    let lines = json_lines(file).ok()?;
    lines.iter().find_map(|(_, v)| {
        if v.get("type").and_then(Value::as_str) != Some("session_meta") {
            return None;
        }
        v.get("payload")?
            .get("forked_from_id")?
            .as_str()
            .map(str::to_string)
    })
}

/// The session id a rollout file name ends with (`rollout-<time>-<uuid>.jsonl`).
pub fn id_from_file_name(path: &str) -> Option<String> {
    let stem = Path::new(path).file_stem()?.to_str()?;
    let id = stem.get(stem.len().checked_sub(36)?..)?;
    is_valid_session_id(id).then(|| id.to_string())
}

/// Converts one Codex rollout to a Pi session. For a fork, `parent` is the rollout it was
/// forked from: the records the fork continues come first, as Codex's own resume reads them.
///
/// `cost` fills in the cost of a response from the provider, the model id and the token counts
/// (the caller owns the price table). Fails on the first line that is not a JSON object, or a
/// `response_item` without a payload, naming the file and the line.
pub fn convert(
    rollout: SourceFile<'_>,
    parent: Option<SourceFile<'_>>,
    cost: &dyn Fn(&str, &str, &mut Usage),
) -> Result<Converted, ImportError> {
    let own = parse_file(0, &rollout)?;
    let meta = own
        .iter()
        .find(|r| r.kind() == "session_meta")
        .map(|r| r.payload().clone())
        .unwrap_or(Value::Null);
    let meta_str = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_string);
    let session_id = meta_str("id")
        .filter(|id| is_valid_session_id(id))
        .or_else(|| id_from_file_name(rollout.label))
        .ok_or_else(|| ImportError {
            file: rollout.label.to_string(),
            line: 0,
            reason: "no session id (neither a session_meta id nor the file name)".into(),
        })?;
    let started = meta_str("timestamp")
        .or_else(|| own.iter().find_map(|r| r.timestamp().map(str::to_string)))
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".into());
    let cwd = meta_str("cwd").unwrap_or_default();
    let provider = meta_str("model_provider").unwrap_or_else(|| "openai".into());
    let header = NewHeader::new(session_id.clone(), started.clone(), cwd, None).to_line();

    // A fork continues the first `forked_from_ordinal_exclusive` records of its parent.
    let mut files = vec![rollout];
    let mut recs = Vec::new();
    if let (Some(parent), Some(_)) = (parent, meta.get("forked_from_id")) {
        let upto = meta
            .get("forked_from_ordinal_exclusive")
            .and_then(Value::as_u64)
            .map(|n| n as usize);
        files.push(parent);
        let inherited = parse_file(1, &parent)?;
        for (k, r) in inherited.into_iter().enumerate() {
            let ordinal =
                r.v.get("ordinal")
                    .and_then(Value::as_u64)
                    .map_or(k, |o| o as usize);
            if upto.is_none_or(|n| ordinal < n) {
                recs.push(r);
            }
        }
    }
    recs.extend(own);

    let mut out = Out {
        files: &files,
        session_id,
        provider,
        entries: Vec::new(),
        counts: Counts {
            records: recs.len(),
            ..Counts::default()
        },
        parent: None,
        model: None,
        tool_names: HashMap::new(),
        tool_ids: HashMap::new(),
        failed_calls: HashMap::new(),
        awaiting_usage: None,
        context_tokens: 0,
        turn_failed: false,
        last_ts: started,
    };
    let mut i = 0;
    while i < recs.len() {
        if recs[i].is_model_item() {
            let (group, usage, deferred, end) = response_group(&recs, i);
            out.assistant(&group, usage)?;
            for d in deferred {
                out.record(d)?;
            }
            i = end;
        } else {
            out.record(&recs[i])?;
            i += 1;
        }
    }
    // Prices last: the model of each message is known by now.
    for e in &mut out.entries {
        let Some(m) = e.get_mut("message").filter(|m| m["role"] == "assistant") else {
            continue;
        };
        let (Some(p), Some(model)) = (m["provider"].as_str(), m["model"].as_str()) else {
            continue;
        };
        let (p, model) = (p.to_string(), model.to_string());
        if let Ok(mut usage) = serde_json::from_value::<Usage>(m["usage"].clone()) {
            cost(&p, &model, &mut usage);
            if let Ok(u) = serde_json::to_value(&usage) {
                m["usage"] = u;
            }
        }
    }
    Ok(Converted {
        session_id: out.session_id,
        header,
        lines: out.entries.iter().map(Value::to_string).collect(),
        counts: out.counts,
    })
}

fn parse_file(index: usize, file: &SourceFile<'_>) -> Result<Vec<Rec>, ImportError> {
    let mut recs = Vec::new();
    for (line, v) in json_lines(file)? {
        let rec = Rec {
            file: index,
            line,
            v,
        };
        if rec.kind() == "response_item" && !rec.payload().is_object() {
            return Err(ImportError {
                file: file.label.to_string(),
                line,
                reason: "a response_item without a payload".into(),
            });
        }
        recs.push(rec);
    }
    Ok(recs)
}

/// The records of one API response starting at `start`: model items, each after the one
/// before with only passive records (events, world state) in between, and the usage record
/// that closes the response (`token_usage_record`, or a `token_count` event). The passive
/// records in between are returned apart, to be written after the response; also the index
/// after the group.
fn response_group(recs: &[Rec], start: usize) -> (Vec<&Rec>, Option<&Rec>, Vec<&Rec>, usize) {
    let mut group = vec![&recs[start]];
    let mut deferred = Vec::new();
    let mut usage = None;
    let mut end = start + 1;
    let mut k = start + 1;
    while k < recs.len() {
        let r = &recs[k];
        if r.is_model_item() {
            group.push(r);
            end = k + 1;
        } else if r.kind() == "token_usage_record"
            || (r.kind() == "event_msg" && r.ptype() == "token_count" && has_usage(r))
        {
            usage = Some(r);
            end = k + 1;
            break;
        } else if !r.is_passive() || (r.kind() == "event_msg" && r.ptype() == "error") {
            break;
        }
        k += 1;
    }
    for r in &recs[start + 1..end] {
        let in_group = group.iter().any(|g| std::ptr::eq(*g, r));
        let is_usage = usage.is_some_and(|u| std::ptr::eq(u, r));
        if !in_group && !is_usage {
            deferred.push(r);
        }
    }
    (group, usage, deferred, end)
}

/// A `token_count` event that reports a response (after a compaction Codex writes one with
/// all zeros).
fn has_usage(r: &Rec) -> bool {
    usage_fields(r).is_some_and(|u| {
        u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0) > 0
            || u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0) > 0
    })
}

/// The token counts of one response in a usage record or a `token_count` event.
fn usage_fields(r: &Rec) -> Option<&Value> {
    match r.kind() {
        "token_usage_record" => r.payload().get("usage"),
        _ => r.payload().pointer("/info/last_token_usage"),
    }
}

fn usage_of(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cached_input_tokens");
    let written = n("cache_write_input_tokens");
    let mut usage = Usage {
        input: n("input_tokens").saturating_sub(cached + written),
        output: n("output_tokens"),
        cache_read: cached,
        cache_write: written,
        reasoning: Some(n("reasoning_output_tokens")),
        ..Usage::default()
    };
    usage.total_tokens = match n("total_tokens") {
        0 => n("input_tokens") + usage.output,
        t => t,
    };
    usage.cost.total_from_provider = Some(false);
    usage
}

/// The record as kept in `importedFrom`: without the content the entry itself holds.
fn without_content(r: &Rec) -> Value {
    let mut v = r.v.clone();
    if let Some(Value::Object(p)) = v.get_mut("payload") {
        for f in CONTENT_FIELDS {
            p.remove(*f);
        }
    }
    Value::Object(v)
}

/// The item as the OpenAI Responses provider replays it: without Codex's own bookkeeping.
fn replayable(item: &Value) -> Value {
    let mut item = item.clone();
    if let Value::Object(m) = &mut item {
        m.retain(|k, _| !k.starts_with("internal_") && k != "metadata");
    }
    item
}

/// Text of a content list (`input_text`, `output_text`, `text` parts), joined by line feeds.
fn texts(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A user or tool-output content part in Pi's shape: text, data-URL images; anything else as
/// it is.
fn user_part(p: &Value) -> Value {
    let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "input_text" | "output_text" | "text" => {
            json!({"type": "text", "text": p.get("text").cloned().unwrap_or_default()})
        }
        "input_image" => {
            let url = p.get("image_url").and_then(Value::as_str).unwrap_or("");
            match data_url(url) {
                Some((mime, data)) => json!({"type": "image", "data": data, "mimeType": mime}),
                None => p.clone(),
            }
        }
        _ => p.clone(),
    }
}

/// `data:<mime>;base64,<data>` → (mime, data).
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let mime = head.strip_suffix(";base64")?;
    Some((mime, data))
}

/// Whether a tool output says the call failed: Codex's `success: false`, or a non-zero exit
/// code in the text it gives the model.
fn output_failed(output: &Value) -> bool {
    if output.get("success").and_then(Value::as_bool) == Some(false) {
        return true;
    }
    let text = match output {
        Value::String(s) => s.clone(),
        other => texts(other.get("content")),
    };
    for prefix in ["Process exited with code ", "Exit code: "] {
        let code = text
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|c| c.trim().parse::<i64>().ok());
        if let Some(code) = code {
            return code != 0;
        }
    }
    // Older Codex versions: a JSON string with `metadata.exit_code`.
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.pointer("/metadata/exit_code")?.as_i64())
        .is_some_and(|c| c != 0)
}

/// The conversion in progress.
struct Out<'a> {
    files: &'a [SourceFile<'a>],
    session_id: String,
    provider: String,
    entries: Vec<Value>,
    counts: Counts,
    /// The last entry written: the next one's parent.
    parent: Option<String>,
    /// The model in effect (from the last `turn_context`).
    model: Option<String>,
    /// `call_id` → tool name, to name results.
    tool_names: HashMap<String, String>,
    /// `call_id` → the Pi tool call id (`call_id|item_id`).
    tool_ids: HashMap<String, String>,
    /// `call_id` → whether Codex reported the call failed (from `item_completed` events).
    failed_calls: HashMap<String, bool>,
    /// The assistant entry whose usage has not been reported yet.
    awaiting_usage: Option<usize>,
    /// Tokens of the last conversation response: the context size before a compaction. (A
    /// usage record outside a response is the compaction request's own, and does not count.)
    context_tokens: u64,
    /// An error message was written for the current turn.
    turn_failed: bool,
    last_ts: String,
}

impl Out<'_> {
    fn label(&self, r: &Rec) -> &str {
        self.files[r.file].label
    }

    fn file_name(&self, r: &Rec) -> String {
        let label = self.label(r);
        Path::new(label)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(label)
            .to_string()
    }

    fn timestamp(&mut self, r: &Rec) -> String {
        if let Some(ts) = r.timestamp() {
            self.last_ts = ts.to_string();
        }
        self.last_ts.clone()
    }

    /// The id of entry `k` made from record `r`: hashed from the session, the file's name (not
    /// its path, so a moved `CODEX_HOME` gives the same ids) and the line.
    fn id_for(&self, r: &Rec, k: usize) -> String {
        stable_hex(&[
            &self.session_id,
            &self.file_name(r),
            &r.line.to_string(),
            &k.to_string(),
        ])
    }

    fn origin(&self, recs: &[&Rec], with_records: bool) -> Value {
        let lines: Vec<usize> = recs.iter().map(|r| r.line).collect();
        let records = with_records.then(|| recs.iter().map(|r| without_content(r)).collect());
        imported_from(
            FORMAT,
            recs.first().map_or("", |r| self.label(r)),
            &lines,
            records,
        )
    }

    fn emit(&mut self, id: String, ts: &str, entry: NewEntry, from: Value) -> usize {
        let base = EntryBase {
            id: id.clone(),
            parent_id: self.parent.take(),
            timestamp: ts.to_string(),
        };
        let mut v = entry.to_value(&base);
        if let Value::Object(m) = &mut v {
            m.insert("importedFrom".into(), from);
        }
        match &entry {
            NewEntry::Message { .. } => self.counts.messages += 1,
            NewEntry::Custom { .. } => self.counts.custom += 1,
            NewEntry::Compaction { .. } => self.counts.compactions += 1,
            NewEntry::ModelChange { .. } => self.counts.model_changes += 1,
            _ => {}
        }
        self.parent = Some(id);
        self.entries.push(v);
        self.entries.len() - 1
    }

    fn message_value(&self, r: &Rec, message: AgentMessage) -> Result<Value, ImportError> {
        serde_json::to_value(message).map_err(|e| ImportError {
            file: self.label(r).to_string(),
            line: r.line,
            reason: format!("cannot write the message: {e}"),
        })
    }

    /// Any record but the model items of a response.
    fn record(&mut self, r: &Rec) -> Result<(), ImportError> {
        match (r.kind(), r.ptype()) {
            ("response_item", "message") if r.pstr("role") == Some("user") => self.user(r),
            ("response_item", "function_call_output" | "custom_tool_call_output") => {
                self.tool_result(r)
            }
            ("turn_context", _) => {
                self.turn_context(r);
                Ok(())
            }
            ("compacted", _) => {
                self.compaction(r);
                Ok(())
            }
            ("event_msg", "error") => self.error(r, r.pstr("message").unwrap_or("error")),
            ("event_msg", "task_complete") => {
                let error = r.payload().get("error").filter(|e| !e.is_null());
                match error {
                    Some(e) if !self.turn_failed => {
                        let text = e
                            .get("message")
                            .and_then(Value::as_str)
                            .map_or_else(|| e.to_string(), str::to_string);
                        self.error(r, &text)
                    }
                    _ => {
                        self.custom(r);
                        Ok(())
                    }
                }
            }
            _ => {
                self.observe(r);
                self.custom(r);
                Ok(())
            }
        }
    }

    /// What passing records tell about the conversation: call failures, late usage, turns.
    fn observe(&mut self, r: &Rec) {
        let p = r.payload();
        match (r.kind(), r.ptype()) {
            ("event_msg", "item_completed") => {
                let item = p.get("item").unwrap_or(&Value::Null);
                if let Some(id) = item.get("id").and_then(Value::as_str) {
                    let status = item.get("status").and_then(Value::as_str);
                    let code = item.get("exit_code").and_then(Value::as_i64);
                    let failed = matches!(status, Some("failed" | "declined"))
                        || code.is_some_and(|c| c != 0);
                    self.failed_calls.insert(id.to_string(), failed);
                }
            }
            ("event_msg", "task_started") => self.turn_failed = false,
            ("event_msg", "token_count") if has_usage(r) => {
                if let (Some(i), Some(u)) = (self.awaiting_usage.take(), usage_fields(r)) {
                    let usage = usage_of(u);
                    self.context_tokens = usage.total_tokens;
                    if let Ok(u) = serde_json::to_value(&usage) {
                        self.entries[i]["message"]["usage"] = u;
                    }
                }
            }
            _ => {}
        }
    }

    /// A record Pi has no equivalent for, kept whole.
    fn custom(&mut self, r: &Rec) {
        let ts = self.timestamp(r);
        let kind = match (r.kind(), r.ptype()) {
            ("", _) => "unknown".to_string(),
            (k @ ("event_msg" | "response_item"), "") => k.to_string(),
            (k @ ("event_msg" | "response_item"), t) => format!("{k}/{t}"),
            (k, _) => k.to_string(),
        };
        let entry = NewEntry::Custom {
            custom_type: format!("{FORMAT}/{kind}"),
            data: Some(Value::Object(r.v.clone())),
        };
        let from = self.origin(&[r], false);
        self.emit(self.id_for(r, 0), &ts, entry, from);
    }

    fn user(&mut self, r: &Rec) -> Result<(), ImportError> {
        self.counts.message_records += 1;
        let ts = self.timestamp(r);
        let content: Vec<Value> = match r.payload().get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(parts)) => parts.iter().map(user_part).collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(ImportError {
                    file: self.label(r).to_string(),
                    line: r.line,
                    reason: "message content is neither text nor a list of parts".into(),
                })
            }
        };
        let message = json!({"role": "user", "content": content, "timestamp": millis(&ts)});
        let from = self.origin(&[r], true);
        self.emit(self.id_for(r, 0), &ts, NewEntry::Message { message }, from);
        self.awaiting_usage = None;
        Ok(())
    }

    /// One API response: its model items and the record reporting its usage.
    fn assistant(&mut self, group: &[&Rec], usage: Option<&Rec>) -> Result<(), ImportError> {
        let Some(first) = group.first() else {
            return Ok(());
        };
        self.counts.message_records += group.iter().filter(|r| r.ptype() == "message").count();
        let ts = self.timestamp(first);
        let mut content = Vec::new();
        for r in group {
            self.assistant_blocks(r, &mut content);
        }
        let has_calls = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall(_)));
        let model = self.model.clone().unwrap_or_else(|| "unknown".into());
        let mut message = AssistantMessage::empty(API, &self.provider, &model, millis(&ts));
        message.content = content;
        message.stop_reason = if has_calls {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        };
        if let Some(u) = usage.and_then(usage_fields) {
            message.usage = usage_of(u);
            self.context_tokens = message.usage.total_tokens;
        } else {
            message.usage.cost.total_from_provider = Some(false);
        }
        message.response_id = usage
            .and_then(|u| u.pstr("response_id"))
            .map(str::to_string);
        let message = self.message_value(first, AgentMessage::Assistant(message))?;
        let mut recs: Vec<&Rec> = group.to_vec();
        recs.extend(usage);
        let from = self.origin(&recs, true);
        let at = self.emit(
            self.id_for(first, 0),
            &ts,
            NewEntry::Message { message },
            from,
        );
        self.awaiting_usage = usage.is_none().then_some(at);
        Ok(())
    }

    fn assistant_blocks(&mut self, r: &Rec, content: &mut Vec<ContentBlock>) {
        let p = r.payload();
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let blocks: Vec<Value> = match r.ptype() {
            "reasoning" => {
                let summary = texts(p.get("summary"));
                let full = texts(p.get("content"));
                let thinking = if full.is_empty() { summary } else { full };
                let signature = replayable(p).to_string();
                vec![
                    json!({"type": "thinking", "thinking": thinking, "thinkingSignature": signature}),
                ]
            }
            "message" => {
                let signature = json!({"v": 1, "id": s("id")});
                p.get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|part| match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => json!({
                            "type": "text",
                            "text": part.get("text").cloned().unwrap_or_default(),
                            "textSignature": signature.to_string(),
                        }),
                        Some("refusal") => json!({
                            "type": "text",
                            "text": part.get("refusal").cloned().unwrap_or_default(),
                        }),
                        _ => part.clone(),
                    })
                    .collect()
            }
            "function_call" | "custom_tool_call" => {
                self.counts.tool_calls += 1;
                let call = s("call_id");
                let id = match p.get("id").and_then(Value::as_str) {
                    Some(item) if !item.is_empty() => format!("{call}|{item}"),
                    _ => call.clone(),
                };
                self.tool_names.insert(call.clone(), s("name"));
                self.tool_ids.insert(call, id.clone());
                // A freeform (custom) tool takes text, not JSON: Pi keeps it as `input`.
                let arguments = if r.ptype() == "custom_tool_call" {
                    json!({"input": s("input")})
                } else {
                    match serde_json::from_str::<Value>(&s("arguments")) {
                        Ok(v @ Value::Object(_)) => v,
                        _ => json!({"arguments": s("arguments")}),
                    }
                };
                vec![
                    json!({"type": "toolCall", "id": id, "name": s("name"), "arguments": arguments}),
                ]
            }
            _ => vec![p.clone()],
        };
        for b in blocks {
            content.push(serde_json::from_value(b.clone()).unwrap_or(ContentBlock::Unknown(b)));
        }
    }

    fn tool_result(&mut self, r: &Rec) -> Result<(), ImportError> {
        self.counts.tool_results += 1;
        let ts = self.timestamp(r);
        let p = r.payload();
        let call = p.get("call_id").and_then(Value::as_str).unwrap_or("");
        let output = p.get("output").cloned().unwrap_or(Value::Null);
        let content: Vec<Value> = match &output {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(parts) => parts.iter().map(user_part).collect(),
            Value::Object(o) => match o.get("content") {
                Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
                Some(Value::Array(parts)) => parts.iter().map(user_part).collect(),
                _ => vec![json!({"type": "text", "text": output.to_string()})],
            },
            _ => Vec::new(),
        };
        let is_error = self
            .failed_calls
            .get(call)
            .copied()
            .unwrap_or_else(|| output_failed(&output));
        let message = json!({
            "role": "toolResult",
            "toolCallId": self.tool_ids.get(call).map_or(call, String::as_str),
            "toolName": self.tool_names.get(call).map_or("unknown", String::as_str),
            "content": content,
            "isError": is_error,
            "timestamp": millis(&ts),
        });
        let from = self.origin(&[r], true);
        self.emit(self.id_for(r, 0), &ts, NewEntry::Message { message }, from);
        Ok(())
    }

    /// A failed turn: an assistant message with `stopReason: error`, as Pi writes one.
    fn error(&mut self, r: &Rec, text: &str) -> Result<(), ImportError> {
        let ts = self.timestamp(r);
        let model = self.model.clone().unwrap_or_else(|| "unknown".into());
        let mut message = AssistantMessage::empty(API, &self.provider, &model, millis(&ts));
        message.stop_reason = StopReason::Error;
        message.error_message = Some(text.to_string());
        message.usage.cost.total_from_provider = Some(false);
        let message = self.message_value(r, AgentMessage::Assistant(message))?;
        let mut from = self.origin(&[r], false);
        from["records"] = json!([r.v]);
        self.emit(self.id_for(r, 0), &ts, NewEntry::Message { message }, from);
        self.turn_failed = true;
        self.awaiting_usage = None;
        Ok(())
    }

    fn turn_context(&mut self, r: &Rec) {
        let model = r.pstr("model").map(str::to_string);
        match model {
            Some(model) if self.model.as_ref() != Some(&model) => {
                let ts = self.timestamp(r);
                self.model = Some(model.clone());
                let entry = NewEntry::ModelChange {
                    provider: self.provider.clone(),
                    model_id: model,
                };
                let mut from = self.origin(&[r], false);
                from["records"] = json!([r.v]);
                self.emit(self.id_for(r, 0), &ts, entry, from);
            }
            _ => self.custom(r),
        }
    }

    /// Codex replaced the history with a summary (a local compaction) or with an opaque
    /// `compaction` item and the user messages it kept (a compaction on the server).
    fn compaction(&mut self, r: &Rec) {
        let ts = self.timestamp(r);
        let p = r.payload();
        let summary = match r.pstr("message").filter(|m| !m.trim().is_empty()) {
            Some(m) => m.to_string(),
            None => {
                let kept: Vec<String> = p
                    .get("replacement_history")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))
                    .filter(|i| i.get("role").and_then(Value::as_str) == Some("user"))
                    .map(|i| texts(i.get("content")))
                    .filter(|t| !t.trim().is_empty())
                    .collect();
                let mut s = String::from(
                    "Codex compacted this conversation on the server; its summary is encrypted \
                     and cannot be read outside OpenAI.",
                );
                if !kept.is_empty() {
                    s.push_str(" The user messages Codex kept:\n\n");
                    s.push_str(&kept.join("\n\n"));
                }
                s
            }
        };
        let entry = NewEntry::Compaction {
            summary,
            first_kept_entry_id: None,
            tokens_before: self.context_tokens,
            details: None,
            usage: None,
            from_hook: None,
            system_message: None,
        };
        let mut from = self.origin(&[r], false);
        from["records"] = json!([r.v]);
        self.emit(self.id_for(r, 0), &ts, entry, from);
        self.awaiting_usage = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_cost(_: &str, _: &str, _: &mut Usage) {}

    const LABEL: &str = "/x/rollout-2026-01-01T00-00-00-0b7c2a52-3c1d-4a56-9e6f-0123456789ab.jsonl";

    fn convert_str(text: &str) -> Result<Converted, ImportError> {
        convert(
            SourceFile {
                label: LABEL,
                bytes: text.as_bytes(),
            },
            None,
            &no_cost,
        )
    }

    fn entries(c: &Converted) -> Vec<Value> {
        c.lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let e = convert_str("{\"type\":\"event_msg\"}\n\n{oops\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("0123456789ab.jsonl:3:"), "{e}");
        let e = convert_str("[1]\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = convert_str("{\"type\":\"response_item\",\"payload\":3}\n").unwrap_err();
        assert!(e.reason.contains("without a payload"), "{e}");
    }

    #[test]
    fn a_local_compaction_keeps_its_summary_and_late_usage_fills_the_response() {
        // The shape older Codex versions write: no usage record, a token_count event after
        // the tool output, an exit code only in the output text, a readable summary.
        let text = r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"turn_context","payload":{"model":"gpt-5"}}
{"timestamp":"2026-01-01T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}
{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{"type":"function_call","id":"fc_1","call_id":"c1","name":"shell","arguments":"{\"command\":[\"ls\"]}"}}
{"timestamp":"2026-01-01T00:00:03.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"Exit code: 2\nOutput:\nnope"}}
{"timestamp":"2026-01-01T00:00:04.000Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":7,"total_tokens":107}}}}
{"timestamp":"2026-01-01T00:00:05.000Z","type":"compacted","payload":{"message":"The user said hi."}}
"#;
        let c = convert_str(text).unwrap();
        let v = entries(&c);
        assert_eq!(c.session_id, "0b7c2a52-3c1d-4a56-9e6f-0123456789ab");
        assert_eq!(v.len(), 6);
        assert_eq!(v[0]["type"], "model_change");
        let call = &v[2]["message"]["content"][0];
        assert_eq!(call["id"], "c1|fc_1");
        assert_eq!(call["arguments"]["command"][0], "ls");
        assert_eq!(v[3]["message"]["toolCallId"], "c1|fc_1");
        assert_eq!(v[3]["message"]["toolName"], "shell");
        assert_eq!(v[3]["message"]["isError"], true);
        assert_eq!(v[4]["customType"], "codex/event_msg/token_count");
        assert_eq!(v[2]["message"]["usage"]["input"], 60);
        assert_eq!(v[2]["message"]["usage"]["cacheRead"], 40);
        assert_eq!(v[5]["type"], "compaction");
        assert_eq!(v[5]["summary"], "The user said hi.");
        assert_eq!(v[5]["tokensBefore"], 107);
        for pair in v.windows(2) {
            assert_eq!(pair[1]["parentId"], pair[0]["id"]);
        }
        assert_eq!(convert_str(text).unwrap(), c, "same source, same lines");
    }
}
