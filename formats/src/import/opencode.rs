//! OpenCode sessions → Pi entries.
//!
//! OpenCode (1.x) keeps its sessions in a SQLite database, `$XDG_DATA_HOME/opencode/opencode.db`:
//! a `session` row per session (`parent_id` set for a subagent's session), a `message` row per
//! user prompt or model response, and a `part` row per piece of a message (`text`,
//! `reasoning`, `tool` with the call's whole state, `step-start` / `step-finish` around each
//! model request with its tokens and cost, `file`, `patch`, `compaction`, …), each holding
//! OpenCode's JSON in `data`. `opencode export <id>` writes the same records as one JSON
//! document, `{info, messages: [{info, parts}]}`. The caller reads either (the database needs
//! SQLite, which is not this crate's business) into a [`Session`]; this module maps it.
//!
//! The mapping (docs/import.md has the table):
//! * the session's title → a `session_info` entry (the row whole in `importedFrom.records`);
//! * a user message → a Pi `user` message with its text parts (OpenCode's synthetic ones too:
//!   that is what the model saw) and images;
//! * each step of an assistant message (from a `step-start` to its `step-finish`) → one Pi
//!   `assistant` message: `reasoning` → `thinking`, `text`, `tool` → `toolCall`; usage and
//!   cost from the `step-finish`; stop reason from it, or the message's error; then one
//!   `toolResult` per tool part (its output, or its error);
//! * a `model_change` entry before a response whose provider/model differs from the one in
//!   effect;
//! * a user message holding a `compaction` part and the `summary` assistant message answering
//!   it → one Pi `compaction` whose summary is that answer;
//! * a subagent's session (`parentID`, launched by a `task` tool call whose metadata names it)
//!   → a branch hanging off the assistant message with that call, written before the main line
//!   goes on, so the main conversation stays the leaf;
//! * every other part (`patch`, `snapshot`, `file` that is not an image, `agent`, `subtask`,
//!   `retry`, unknown types) → a `custom` entry `opencode/<type>` holding the part whole.
//!
//! Ids: each entry's id is hashed from the session and OpenCode's id of the record it comes
//! from, so the database and an export of the same session give the same ids, and a re-import
//! writes the same lines. Every entry carries `importedFrom: {format, file, keys}` where `keys`
//! name the records it was made from (`message/<id>` in the database, a JSON pointer in an
//! export); every record is named by exactly one entry.

use serde_json::{json, Map, Value};

use super::{stable_hex, Converted, Counts, ImportError, SourceFile};
use crate::entry::{EntryBase, NewEntry};
use crate::header::NewHeader;
use crate::id::is_valid_session_id;
use crate::message::{AgentMessage, AssistantMessage, ContentBlock, StopReason, Usage};
use crate::time::iso_from_millis;

/// The `format` written into `importedFrom`.
pub const FORMAT: &str = "opencode";

/// One stored OpenCode record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Where the record is in its file: `session/<id>`, `message/<id>` or `part/<id>` (table and
    /// key in the database), or a JSON pointer (in an export).
    pub key: String,
    /// OpenCode's id of the record (`ses_…`, `msg_…`, `prt_…`).
    pub id: String,
    /// The record: the row's `data` (for a session, its columns), or the export's object.
    pub value: Value,
}

/// A message and its parts, in OpenCode's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub record: Record,
    pub parts: Vec<Record>,
}

/// One OpenCode session as read from its file.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The file it was read from, for errors and `importedFrom`.
    pub label: String,
    /// The session record.
    pub info: Record,
    /// Its messages in OpenCode's order (by id, which OpenCode makes ascending in time).
    pub messages: Vec<Message>,
}

impl Session {
    /// OpenCode's session id.
    pub fn id(&self) -> &str {
        &self.info.id
    }

    /// The session this one is a subagent of (`parentID` in an export, `parent_id` in the
    /// database).
    pub fn parent_id(&self) -> Option<&str> {
        let v = &self.info.value;
        v.get("parentID")
            .or_else(|| v.get("parent_id"))
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
    }

    fn directory(&self) -> String {
        str_at(&self.info.value, &["directory"]).unwrap_or_default()
    }

    fn created(&self) -> Option<i64> {
        let v = &self.info.value;
        v.pointer("/time/created")
            .or_else(|| v.get("time_created"))
            .and_then(Value::as_i64)
    }

    fn title(&self) -> Option<String> {
        str_at(&self.info.value, &["title"]).filter(|t| !t.trim().is_empty())
    }
}

/// Reads an `opencode export` document: `{info, messages: [{info, parts}]}`.
pub fn from_export(file: &SourceFile<'_>) -> Result<Session, ImportError> {
    let err = |reason: String| ImportError {
        file: file.label.to_string(),
        line: 0,
        reason,
    };
    let doc: Value = serde_json::from_slice(file.bytes)
        .map_err(|e| err(format!("not an OpenCode export (JSON): {e}")))?;
    let info = doc
        .get("info")
        .filter(|i| i.get("id").and_then(Value::as_str).is_some())
        .ok_or_else(|| err("not an OpenCode export: no `info` with a session id".into()))?;
    let record = |key: String, v: &Value| -> Result<Record, ImportError> {
        let id = v
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| err(format!("{key}: a record without an id")))?;
        Ok(Record {
            key,
            id: id.to_string(),
            value: v.clone(),
        })
    };
    let mut messages = Vec::new();
    let list = match doc.get("messages") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(list)) => list.as_slice(),
        Some(_) => return Err(err("`messages` is not a list".into())),
    };
    for (i, m) in list.iter().enumerate() {
        let info = m
            .get("info")
            .ok_or_else(|| err(format!("/messages/{i}: no `info`")))?;
        let parts = match m.get("parts") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(p)) => p.as_slice(),
            Some(_) => return Err(err(format!("/messages/{i}/parts is not a list"))),
        };
        messages.push(Message {
            record: record(format!("/messages/{i}/info"), info)?,
            parts: parts
                .iter()
                .enumerate()
                .map(|(k, p)| record(format!("/messages/{i}/parts/{k}"), p))
                .collect::<Result<_, _>>()?,
        });
    }
    Ok(Session {
        label: file.label.to_string(),
        info: record("/info".into(), info)?,
        messages,
    })
}

/// Converts one OpenCode session, with its subagents' sessions (any depth, any order), to a
/// Pi session. Fails when the session id cannot be a Pi session id, or a record is not an
/// object, naming the file and the record.
pub fn convert(root: &Session, descendants: &[Session]) -> Result<Converted, ImportError> {
    let session_id = root.id().to_string();
    if !is_valid_session_id(&session_id) {
        return Err(ImportError {
            file: root.label.clone(),
            line: 0,
            reason: format!("{}: not a usable session id: {session_id:?}", root.info.key),
        });
    }
    for s in std::iter::once(root).chain(descendants) {
        check_objects(s)?;
    }
    let started = root
        .created()
        .map_or_else(|| "1970-01-01T00:00:00.000Z".to_string(), iso_from_millis);
    let header =
        NewHeader::new(session_id.clone(), started.clone(), root.directory(), None).to_line();
    let records = std::iter::once(root)
        .chain(descendants)
        .map(|s| 1 + s.messages.iter().map(|m| 1 + m.parts.len()).sum::<usize>())
        .sum();
    let mut out = Out {
        session_id,
        entries: Vec::new(),
        counts: Counts {
            records,
            ..Counts::default()
        },
        parent: None,
        model: None,
        context_tokens: 0,
        last_ts: started,
        children: descendants.iter().collect(),
    };
    out.session(root, None, true)?;
    // Subagent sessions no tool call names: branches off the title entry, before the main line.
    while let Some(child) = out.children.first().copied() {
        out.children.remove(0);
        let anchor = out
            .entries
            .first()
            .and_then(|e| e["id"].as_str())
            .map(str::to_string);
        out.session(child, anchor, false)?;
    }
    Ok(Converted {
        session_id: out.session_id,
        header,
        lines: out.entries.iter().map(Value::to_string).collect(),
        counts: out.counts,
    })
}

fn check_objects(s: &Session) -> Result<(), ImportError> {
    let records = std::iter::once(&s.info).chain(
        s.messages
            .iter()
            .flat_map(|m| std::iter::once(&m.record).chain(&m.parts)),
    );
    for r in records {
        if !r.value.is_object() {
            return Err(ImportError {
                file: s.label.clone(),
                line: 0,
                reason: format!("{}: not a JSON object", r.key),
            });
        }
    }
    Ok(())
}

fn str_at(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    cur.as_str().map(str::to_string)
}

fn part_type(p: &Record) -> &str {
    p.value.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Pi's name of the API behind an OpenCode provider (OpenCode records the provider, not the
/// wire protocol): the provider's own for the known ones, else OpenAI-compatible chat.
fn api_for(provider: &str) -> &'static str {
    match provider {
        "anthropic" => "anthropic-messages",
        "openai" => "openai-responses",
        "google" => "google-generative-ai",
        "amazon-bedrock" => "bedrock-converse-stream",
        _ => "openai-completions",
    }
}

/// A record as `importedFrom.records` keeps it: without the content the entry itself holds.
fn without_content(r: &Record) -> Value {
    let mut v = r.value.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("text");
        if let Some(state) = m.get_mut("state").and_then(Value::as_object_mut) {
            state.remove("output");
        }
    }
    v
}

/// A `file` part (or a tool's attachment) that is an image as a data URL → an image block.
fn image_block(part: &Value) -> Option<Value> {
    let url = part.get("url")?.as_str()?;
    let rest = url.strip_prefix("data:")?;
    let (mime, data) = rest.split_once(";base64,")?;
    mime.starts_with("image/")
        .then(|| json!({"type": "image", "data": data, "mimeType": mime}))
}

/// The conversion in progress.
struct Out<'a> {
    session_id: String,
    entries: Vec<Value>,
    counts: Counts,
    /// The last entry written on the current line: the next one's parent.
    parent: Option<String>,
    /// The (provider, model) in effect on the current line.
    model: Option<(String, String)>,
    /// Tokens of the last response: the context size before a compaction.
    context_tokens: u64,
    last_ts: String,
    /// Subagent sessions not written yet.
    children: Vec<&'a Session>,
}

/// A `compaction` request (the user message with the part) waiting for its summary.
struct PendingCompaction<'a> {
    message: &'a Message,
    ts: String,
}

impl<'a> Out<'a> {
    fn id_for(&self, record: &Record, k: usize) -> String {
        stable_hex(&[&self.session_id, &record.id, &k.to_string()])
    }

    fn ts_of(&mut self, created: Option<i64>) -> String {
        if let Some(ms) = created {
            self.last_ts = iso_from_millis(ms);
        }
        self.last_ts.clone()
    }

    fn origin(&self, s: &Session, recs: &[&Record], with_records: bool) -> Value {
        let mut m = Map::new();
        m.insert("format".into(), FORMAT.into());
        m.insert("file".into(), s.label.clone().into());
        m.insert(
            "keys".into(),
            recs.iter().map(|r| Value::from(r.key.clone())).collect(),
        );
        if with_records {
            m.insert(
                "records".into(),
                recs.iter().map(|r| without_content(r)).collect(),
            );
        }
        Value::Object(m)
    }

    fn emit(&mut self, id: String, ts: &str, entry: NewEntry, from: Value) -> String {
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
        self.parent = Some(id.clone());
        self.entries.push(v);
        id
    }

    /// A record Pi has no equivalent for, kept whole.
    fn custom(&mut self, s: &Session, r: &Record, kind: &str, ts: &str) {
        let entry = NewEntry::Custom {
            custom_type: format!("{FORMAT}/{kind}"),
            data: Some(r.value.clone()),
        };
        let from = self.origin(s, &[r], false);
        self.emit(self.id_for(r, 0), ts, entry, from);
    }

    /// One session's entries, starting under `anchor`. The root's record becomes its title.
    fn session(
        &mut self,
        s: &'a Session,
        anchor: Option<String>,
        root: bool,
    ) -> Result<(), ImportError> {
        self.parent = anchor;
        let saved_model = self.model.take();
        let ts = self.ts_of(s.created());
        match s.title().filter(|_| root) {
            Some(title) => {
                let from = self.origin(s, &[&s.info], true);
                self.emit(
                    self.id_for(&s.info, 0),
                    &ts,
                    NewEntry::session_info(&title),
                    from,
                );
            }
            None => self.custom(s, &s.info, "session", &ts),
        }
        let mut pending: Option<PendingCompaction<'a>> = None;
        for m in &s.messages {
            self.counts.message_records += 1;
            let created = m
                .record
                .value
                .pointer("/time/created")
                .and_then(Value::as_i64);
            let ts = self.ts_of(created);
            let role = m
                .record
                .value
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or("");
            let is_summary = m.record.value.get("summary").and_then(Value::as_bool) == Some(true);
            match role {
                "user" if m.parts.iter().any(|p| part_type(p) == "compaction") => {
                    if let Some(p) = pending.take() {
                        self.compaction(s, &p, None)?;
                    }
                    pending = Some(PendingCompaction { message: m, ts });
                }
                "assistant" if is_summary => {
                    let request = pending.take().unwrap_or(PendingCompaction {
                        message: m,
                        ts: ts.clone(),
                    });
                    self.compaction(s, &request, Some(m))?;
                }
                "user" => {
                    if let Some(p) = pending.take() {
                        self.compaction(s, &p, None)?;
                    }
                    self.user(s, m, &ts)?;
                }
                "assistant" => {
                    if let Some(p) = pending.take() {
                        self.compaction(s, &p, None)?;
                    }
                    self.assistant(s, m, &ts)?;
                }
                _ => {
                    self.custom(s, &m.record, "message", &ts);
                    for p in &m.parts {
                        let kind = format!("part/{}", part_type(p));
                        self.custom(s, p, &kind, &ts);
                    }
                }
            }
        }
        if let Some(p) = pending.take() {
            self.compaction(s, &p, None)?;
        }
        self.model = saved_model;
        Ok(())
    }

    fn user(&mut self, s: &Session, m: &Message, ts: &str) -> Result<(), ImportError> {
        let mut content = Vec::new();
        let mut used: Vec<&Record> = vec![&m.record];
        let mut rest = Vec::new();
        for p in &m.parts {
            let v = &p.value;
            match part_type(p) {
                "text" if v.get("ignored").and_then(Value::as_bool) != Some(true) => {
                    content.push(
                        json!({"type": "text", "text": str_at(v, &["text"]).unwrap_or_default()}),
                    );
                    used.push(p);
                }
                "file" => match image_block(v) {
                    Some(img) => {
                        content.push(img);
                        used.push(p);
                    }
                    None => rest.push(p),
                },
                _ => rest.push(p),
            }
        }
        let created = m
            .record
            .value
            .pointer("/time/created")
            .and_then(Value::as_i64);
        let message = json!({
            "role": "user",
            "content": content,
            "timestamp": created.unwrap_or(0),
        });
        let from = self.origin(s, &used, true);
        self.emit(
            self.id_for(&m.record, 0),
            ts,
            NewEntry::Message { message },
            from,
        );
        for p in rest {
            self.custom(s, p, part_type(p), ts);
        }
        Ok(())
    }

    /// An assistant message: one Pi response per step, each followed by its tool results and
    /// then the parts Pi has no place for.
    fn assistant(&mut self, s: &Session, m: &'a Message, ts: &str) -> Result<(), ImportError> {
        let info = &m.record.value;
        let provider = str_at(info, &["providerID"]).unwrap_or_else(|| "unknown".into());
        let model = str_at(info, &["modelID"]).unwrap_or_else(|| "unknown".into());
        if self.model.as_ref() != Some(&(provider.clone(), model.clone())) {
            self.model = Some((provider.clone(), model.clone()));
            let entry = NewEntry::ModelChange {
                provider: provider.clone(),
                model_id: model.clone(),
            };
            // Made from the message, which its first response accounts for: no keys here.
            let mut from = self.origin(s, &[], false);
            from["of"] = m.record.key.clone().into();
            self.emit(self.id_for(&m.record, 1000), ts, entry, from);
        }
        // Steps: a new one at each `step-start` (parts before the first belong to the first).
        let mut steps: Vec<Vec<&Record>> = vec![Vec::new()];
        for p in &m.parts {
            if part_type(p) == "step-start" && steps.last().is_some_and(|s| !s.is_empty()) {
                steps.push(Vec::new());
            }
            if let Some(last) = steps.last_mut() {
                last.push(p);
            }
        }
        let n = steps.len();
        for (k, step) in steps.into_iter().enumerate() {
            self.step(s, m, &step, k, k + 1 == n, (&provider, &model), ts)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        s: &Session,
        m: &'a Message,
        parts: &[&Record],
        k: usize,
        last: bool,
        (provider, model): (&str, &str),
        ts: &str,
    ) -> Result<(), ImportError> {
        let info = &m.record.value;
        let mut used: Vec<&Record> = Vec::new();
        if k == 0 {
            used.push(&m.record);
        }
        let mut content: Vec<Value> = Vec::new();
        let mut tools: Vec<&Record> = Vec::new();
        let mut rest: Vec<&Record> = Vec::new();
        let mut finish: Option<&Value> = None;
        for p in parts {
            let v = &p.value;
            match part_type(p) {
                "step-start" => used.push(p),
                "step-finish" => {
                    finish = Some(v);
                    used.push(p);
                }
                "text" if v.get("ignored").and_then(Value::as_bool) != Some(true) => {
                    content.push(
                        json!({"type": "text", "text": str_at(v, &["text"]).unwrap_or_default()}),
                    );
                    used.push(p);
                }
                "reasoning" => {
                    let mut b = json!({"type": "thinking", "thinking": str_at(v, &["text"]).unwrap_or_default()});
                    let signature = v
                        .get("metadata")
                        .and_then(Value::as_object)
                        .and_then(|md| md.values().find_map(|pm| pm.get("signature")?.as_str()));
                    if let Some(sig) = signature {
                        b["thinkingSignature"] = sig.into();
                    }
                    content.push(b);
                    used.push(p);
                }
                "tool" => {
                    self.counts.tool_calls += 1;
                    let args = v
                        .pointer("/state/input")
                        .filter(|i| i.is_object())
                        .cloned()
                        .unwrap_or_else(|| json!({}));
                    content.push(json!({
                        "type": "toolCall",
                        "id": str_at(v, &["callID"]).unwrap_or_else(|| p.id.clone()),
                        "name": str_at(v, &["tool"]).unwrap_or_default(),
                        "arguments": args,
                    }));
                    used.push(p);
                    tools.push(p);
                }
                _ => rest.push(p),
            }
        }
        let created = info
            .pointer("/time/created")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let mut message = AssistantMessage::empty(api_for(provider), provider, model, created);
        message.content = content
            .into_iter()
            .map(|b| serde_json::from_value(b.clone()).unwrap_or(ContentBlock::Unknown(b)))
            .collect();
        let reason = finish
            .and_then(|f| f.get("reason"))
            .and_then(Value::as_str)
            .or_else(|| {
                last.then(|| info.get("finish").and_then(Value::as_str))
                    .flatten()
            });
        message.stop_reason = match reason {
            Some("tool-calls") => StopReason::ToolUse,
            Some("length") => StopReason::Length,
            Some("error") => StopReason::Error,
            _ if !tools.is_empty() => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        message.raw_stop_reason = reason.map(str::to_string);
        if let Some(error) = info.get("error").filter(|e| e.is_object() && last) {
            let name = str_at(error, &["name"]).unwrap_or_else(|| "error".into());
            message.stop_reason = if name == "MessageAbortedError" {
                StopReason::Aborted
            } else {
                StopReason::Error
            };
            message.error_message = Some(str_at(error, &["data", "message"]).unwrap_or(name));
        }
        match finish {
            Some(f) => {
                message.usage = usage_of(f);
                self.context_tokens = message.usage.total_tokens;
            }
            None => message.usage.cost.total_from_provider = Some(false),
        }
        let value =
            serde_json::to_value(AgentMessage::Assistant(message)).map_err(|e| ImportError {
                file: s.label.clone(),
                line: 0,
                reason: format!("{}: cannot write the message: {e}", m.record.key),
            })?;
        let from = self.origin(s, &used, true);
        let id = if k == 0 {
            self.id_for(&m.record, 0)
        } else {
            self.id_for(used.first().map_or(&m.record, |r| *r), 0)
        };
        let at = self.emit(id, ts, NewEntry::Message { message: value }, from);
        for t in tools {
            self.subagents_of(t, &at)?;
            self.tool_result(s, t, ts);
        }
        for p in rest {
            self.custom(s, p, part_type(p), ts);
        }
        Ok(())
    }

    /// The sessions a `task` call launched, as branches off the message that made the call.
    fn subagents_of(&mut self, tool: &Record, at: &str) -> Result<(), ImportError> {
        let Some(child_id) = tool
            .value
            .pointer("/state/metadata/sessionId")
            .and_then(Value::as_str)
        else {
            return Ok(());
        };
        while let Some(i) = self.children.iter().position(|c| c.id() == child_id) {
            let child = self.children.remove(i);
            self.session(child, Some(at.to_string()), false)?;
        }
        self.parent = Some(at.to_string());
        Ok(())
    }

    fn tool_result(&mut self, s: &Session, t: &Record, ts: &str) {
        self.counts.tool_results += 1;
        let v = &t.value;
        let state = v.get("state").cloned().unwrap_or(Value::Null);
        let status = str_at(&state, &["status"]).unwrap_or_default();
        let (text, is_error) = match status.as_str() {
            "completed" => (str_at(&state, &["output"]).unwrap_or_default(), false),
            "error" => (str_at(&state, &["error"]).unwrap_or_default(), true),
            // What OpenCode tells the model about a call that never finished.
            _ => ("[Tool execution was interrupted]".to_string(), true),
        };
        let mut content = vec![json!({"type": "text", "text": text})];
        content.extend(
            state
                .get("attachments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(image_block),
        );
        let ended = state.pointer("/time/end").and_then(Value::as_i64);
        let mut message = json!({
            "role": "toolResult",
            "toolCallId": str_at(v, &["callID"]).unwrap_or_else(|| t.id.clone()),
            "toolName": str_at(v, &["tool"]).unwrap_or_default(),
            "content": content,
            "isError": is_error,
            "timestamp": ended.unwrap_or_else(|| crate::time::parse_millis(ts).map_or(0, |ms| ms as i64)),
        });
        if let Some(md) = state.get("metadata").filter(|m| !m.is_null()) {
            message["details"] = md.clone();
        }
        // The part is the assistant message's; the result names it again without claiming it.
        let mut from = self.origin(s, &[], false);
        from["of"] = t.key.clone().into();
        let ts = ended.map_or_else(|| ts.to_string(), iso_from_millis);
        self.emit(self.id_for(t, 1), &ts, NewEntry::Message { message }, from);
    }

    /// A compaction: OpenCode's request (a user message with a `compaction` part) and, when
    /// there is one, the `summary` assistant message that answered it.
    fn compaction(
        &mut self,
        s: &Session,
        request: &PendingCompaction<'_>,
        summary: Option<&Message>,
    ) -> Result<(), ImportError> {
        let same = summary.is_some_and(|m| std::ptr::eq(m, request.message));
        let answer = summary.filter(|_| !same);
        let used: Vec<&Record> = std::iter::once(request.message)
            .chain(answer)
            .flat_map(|m| std::iter::once(&m.record).chain(&m.parts))
            .collect();
        let mut text = String::new();
        if let Some(m) = summary {
            text = m
                .parts
                .iter()
                .filter(|p| part_type(p) == "text")
                .filter_map(|p| str_at(&p.value, &["text"]))
                .collect::<Vec<_>>()
                .join("\n");
        }
        if text.trim().is_empty() {
            text = "OpenCode compacted the conversation here; its summary was not saved.".into();
        }
        let entry = NewEntry::Compaction {
            summary: text,
            first_kept_entry_id: None,
            tokens_before: self.context_tokens,
            details: None,
            usage: None,
            from_hook: None,
            system_message: None,
        };
        let from = self.origin(s, &used, true);
        // Counted as a message record above; the summary message too.
        self.emit(
            self.id_for(&request.message.record, 0),
            &request.ts,
            entry,
            from,
        );
        Ok(())
    }
}

/// Pi usage from a `step-finish` part: OpenCode's `input` excludes cached tokens and its
/// `output` excludes reasoning; the cost is the one OpenCode computed from its catalog.
fn usage_of(finish: &Value) -> Usage {
    let n = |p: &str| finish.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let reasoning = n("/tokens/reasoning");
    let (input, output) = (n("/tokens/input"), n("/tokens/output") + reasoning);
    let (cache_read, cache_write) = (n("/tokens/cache/read"), n("/tokens/cache/write"));
    let mut u = Usage {
        input,
        output,
        reasoning: (reasoning > 0).then_some(reasoning),
        cache_read,
        cache_write,
        total_tokens: finish
            .pointer("/tokens/total")
            .and_then(Value::as_u64)
            .unwrap_or(input + output + cache_read + cache_write),
        ..Usage::default()
    };
    u.cost.total = finish.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
    u.cost.total_from_provider = Some(false);
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(text: &str) -> Result<Session, ImportError> {
        from_export(&SourceFile {
            label: "/x/ses_a.json",
            bytes: text.as_bytes(),
        })
    }

    fn entries(c: &Converted) -> Vec<Value> {
        c.lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn a_bad_export_names_the_file() {
        let e = export("{oops").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/x/ses_a.json: not an OpenCode export"),
            "{e}"
        );
        let e = export(r#"{"info":{"id":"ses_a"},"messages":[{"info":{"id":"m"},"parts":[3]}]}"#)
            .unwrap_err();
        assert!(e.to_string().contains("/messages/0/parts/0"), "{e}");
    }

    #[test]
    fn steps_tools_errors_and_compactions() {
        let text = r#"{"info":{"id":"ses_a","directory":"/p","title":"T","time":{"created":1000}},
 "messages":[
  {"info":{"id":"m1","role":"user","time":{"created":1001}},"parts":[{"id":"p1","type":"text","text":"hi"}]},
  {"info":{"id":"m2","role":"assistant","providerID":"fake","modelID":"f1","time":{"created":1002}},"parts":[
    {"id":"p2","type":"step-start"},
    {"id":"p3","type":"reasoning","text":"think"},
    {"id":"p4","type":"tool","tool":"read","callID":"c1","state":{"status":"error","input":{"filePath":"x"},"error":"nope"}},
    {"id":"p5","type":"step-finish","reason":"tool-calls","tokens":{"input":10,"output":2,"reasoning":1,"cache":{"read":5,"write":0},"total":18},"cost":0.5},
    {"id":"p6","type":"patch","hash":"h","files":[]}]},
  {"info":{"id":"m3","role":"assistant","providerID":"fake","modelID":"f1","time":{"created":1003},"error":{"name":"APIError","data":{"message":"refused"}}},"parts":[]},
  {"info":{"id":"m4","role":"user","time":{"created":1004}},"parts":[{"id":"p7","type":"compaction","auto":true}]},
  {"info":{"id":"m5","role":"assistant","summary":true,"providerID":"fake","modelID":"f1","time":{"created":1005}},"parts":[{"id":"p8","type":"text","text":"sum"}]}
 ]}"#;
        let s = export(text).unwrap();
        let c = convert(&s, &[]).unwrap();
        let v = entries(&c);
        let kinds: Vec<&str> = v.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "session_info",
                "message",
                "model_change",
                "message",
                "message",
                "custom",
                "message",
                "compaction"
            ]
        );
        assert_eq!(v[3]["message"]["content"][1]["name"], "read");
        assert_eq!(v[3]["message"]["usage"]["output"], 3);
        assert_eq!(v[3]["message"]["usage"]["cost"]["total"], 0.5);
        assert_eq!(v[4]["message"]["isError"], true);
        assert_eq!(v[4]["message"]["toolCallId"], "c1");
        assert_eq!(v[5]["customType"], "opencode/patch");
        assert_eq!(v[6]["message"]["stopReason"], "error");
        assert_eq!(v[6]["message"]["errorMessage"], "refused");
        assert_eq!(v[7]["summary"], "sum");
        assert_eq!(v[7]["tokensBefore"], 18);
        // Every record named once.
        let mut keys: Vec<String> = v
            .iter()
            .flat_map(|e| e["importedFrom"]["keys"].as_array().unwrap().clone())
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n);
        assert_eq!(n, c.counts.records);
        for pair in v.windows(2) {
            assert_eq!(pair[1]["parentId"], pair[0]["id"]);
        }
        assert_eq!(convert(&s, &[]).unwrap(), c, "same source, same lines");
    }
}
