//! Claude Code transcripts (`~/.claude/projects/<dir>/<session>.jsonl`) → Pi entries.
//!
//! Claude Code writes one JSON record a line. Conversation records (`user`, `assistant`,
//! `attachment`, `system`) carry `uuid` and `parentUuid`, which form a tree exactly like Pi's
//! `id`/`parentId`; resuming at an older message makes a branch. Other records (`queue-operation`,
//! `api-request`, `cost-state`, `last-prompt`, …) have no uuid. Subagent conversations
//! (`isSidechain`) live in `<session>/subagents/agent-<id>.jsonl`.
//!
//! The mapping (docs/import.md has the table):
//! * a `user` record → a Pi `user` message for its text and images, and one `toolResult`
//!   message per `tool_result` block (`toolUseResult` becomes the result's `details`);
//! * the `assistant` records of one API response (Claude Code writes one record per content
//!   block, all with the same `message.id`) → one Pi `assistant` message with thinking, text and
//!   `toolCall` blocks, usage from the response, cost from the caller's price table;
//! * a `model_change` entry before an assistant message whose model differs from its parent's;
//! * a `compact_boundary` → a Pi `compaction` whose summary is the `isCompactSummary` message
//!   that follows it and whose kept part is Claude Code's preserved segment;
//! * everything else → a `custom` entry `claude-code/<type>` holding the record whole.
//!
//! Ids: conversation records keep their uuid as the entry id; every other entry gets an id
//! hashed from the session, the file and the line, so a re-import writes the same lines.
//! Records without a uuid are spliced into the chain after the entry before them, which keeps
//! them in order without making branches. Every entry carries `importedFrom` (format, file,
//! line numbers and, for messages, the record without its content), a field Pi ignores and
//! keeps.

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
pub const FORMAT: &str = "claude-code";

/// The provider and API Claude Code talks to.
const PROVIDER: &str = "anthropic";
const API: &str = "anthropic-messages";

type Record = Map<String, Value>;

/// One parsed source line.
struct Rec {
    file: usize,
    line: usize,
    v: Record,
}

impl Rec {
    fn str(&self, key: &str) -> Option<&str> {
        self.v.get(key).and_then(Value::as_str)
    }
    fn kind(&self) -> &str {
        self.str("type").unwrap_or("")
    }
    fn uuid(&self) -> Option<&str> {
        self.str("uuid")
    }
    fn message(&self) -> Option<&Record> {
        self.v.get("message").and_then(Value::as_object)
    }
    fn message_id(&self) -> Option<&str> {
        self.message()
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
    }
}

/// Converts one Claude Code session (its main file and its subagent files) to a Pi session.
///
/// `cost` fills in the cost of a response from its model id and token counts (the caller
/// owns the price table; formats has none). Fails on the first line that is not a JSON object
/// or a conversation record without a `message`, naming the file and the line.
pub fn convert(
    main: SourceFile<'_>,
    sidechains: &[SourceFile<'_>],
    cost: &dyn Fn(&str, &mut Usage),
) -> Result<Converted, ImportError> {
    let files: Vec<SourceFile<'_>> = std::iter::once(main)
        .chain(sidechains.iter().copied())
        .collect();
    let mut recs = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        recs.push(parse_file(i, f)?);
    }
    let session_id = session_id_of(&main, &recs[0])?;
    let first = |key: &str| recs[0].iter().find_map(|r| r.str(key).map(str::to_string));
    let cwd = first("cwd").unwrap_or_default();
    let started = first("timestamp").unwrap_or_else(|| "1970-01-01T00:00:00.000Z".into());
    let header = NewHeader::new(session_id.clone(), started.clone(), cwd, None).to_line();

    let mut out = Out {
        files: &files,
        session_id,
        lines: Vec::new(),
        counts: Counts::default(),
        tail: HashMap::new(),
        entry_of: HashMap::new(),
        parent_of: HashMap::new(),
        model_at: HashMap::new(),
        tool_names: HashMap::new(),
        tool_call_entry: HashMap::new(),
        summaries: compact_summaries(&recs),
        last_ts: started,
        cursor: String::new(),
        cost,
    };
    for file in &recs {
        out.counts.records += file.len();
    }
    // Subagent files hang off the assistant message that launched them, written right after
    // the main-file record that reports the launch, so the main conversation stays the leaf.
    let (after, unanchored) = anchor_sidechains(&recs);
    for fi in unanchored {
        out.run_file(fi, &recs, &HashMap::new(), None)?;
    }
    out.run_file(0, &recs, &after, None)?;
    Ok(Converted {
        session_id: out.session_id,
        header,
        lines: out.lines,
        counts: out.counts,
    })
}

fn parse_file(index: usize, file: &SourceFile<'_>) -> Result<Vec<Rec>, ImportError> {
    let mut recs = Vec::new();
    for (line, v) in json_lines(file)? {
        let err = |reason: String| ImportError {
            file: file.label.to_string(),
            line,
            reason,
        };
        let rec = Rec {
            file: index,
            line,
            v,
        };
        if matches!(rec.kind(), "user" | "assistant") && rec.message().is_none() {
            return Err(err(format!("a {} record without a message", rec.kind())));
        }
        if rec.v.get("uuid").is_some_and(|u| !u.is_string()) {
            return Err(err("uuid is not a string".into()));
        }
        recs.push(rec);
    }
    Ok(recs)
}

/// The file's stem (Claude Code names files by session id), else the records' `sessionId`.
fn session_id_of(main: &SourceFile<'_>, recs: &[Rec]) -> Result<String, ImportError> {
    let stem = Path::new(main.label)
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| is_valid_session_id(s));
    if let Some(stem) = stem {
        return Ok(stem.to_string());
    }
    recs.iter()
        .find_map(|r| r.str("sessionId").filter(|s| is_valid_session_id(s)))
        .map(str::to_string)
        .ok_or_else(|| ImportError {
            file: main.label.to_string(),
            line: 0,
            reason: "no session id (neither the file name nor a sessionId field)".into(),
        })
}

/// Compact boundary uuid → the text of the `isCompactSummary` message written under it.
fn compact_summaries(recs: &[Vec<Rec>]) -> HashMap<String, String> {
    let mut map = HashMap::new();
    for r in recs.iter().flatten() {
        if r.v.get("isCompactSummary").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        if let (Some(parent), Some(m)) = (r.str("parentUuid"), r.message()) {
            map.insert(parent.to_string(), content_text(m.get("content")));
        }
    }
    map
}

/// Main-file record index → subagent files to write after it; and subagent files whose launch
/// is not found (written first, as roots of their own).
fn anchor_sidechains(recs: &[Vec<Rec>]) -> (HashMap<usize, Vec<usize>>, Vec<usize>) {
    let mut launched: HashMap<&str, usize> = HashMap::new();
    for (i, r) in recs[0].iter().enumerate() {
        let agent =
            r.v.get("toolUseResult")
                .and_then(|t| t.get("agentId"))
                .and_then(Value::as_str);
        if let Some(agent) = agent {
            launched.entry(agent).or_insert(i);
        }
    }
    let mut after: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut unanchored = Vec::new();
    for (fi, file) in recs.iter().enumerate().skip(1) {
        let agent = file.iter().find_map(|r| r.str("agentId"));
        match agent.and_then(|a| launched.get(a)) {
            Some(&i) => after.entry(i).or_default().push(fi),
            None => unanchored.push(fi),
        }
    }
    (after, unanchored)
}

/// All text of a message content (a string, or the text blocks joined by blank lines).
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

/// The record as kept in `importedFrom`: everything but the message content, which the entry
/// itself holds.
fn without_content(v: &Record) -> Value {
    let mut v = v.clone();
    if let Some(Value::Object(m)) = v.get_mut("message") {
        m.remove("content");
    }
    Value::Object(v)
}

/// The conversion in progress.
struct Out<'a> {
    files: &'a [SourceFile<'a>],
    session_id: String,
    lines: Vec<String>,
    counts: Counts,
    /// Source key (a uuid, or a file's root key) → the Pi entry its children hang on.
    tail: HashMap<String, String>,
    /// Source uuid → the Pi entry made from it.
    entry_of: HashMap<String, String>,
    /// Pi entry → its parent, for the ancestor checks of compactions.
    parent_of: HashMap<String, Option<String>>,
    /// Pi entry → the model in effect there.
    model_at: HashMap<String, String>,
    /// `tool_use` id → tool name, to name tool results.
    tool_names: HashMap<String, String>,
    /// `tool_use` id → the Pi assistant entry holding the call.
    tool_call_entry: HashMap<String, String>,
    summaries: HashMap<String, String>,
    last_ts: String,
    /// The source key the next uuid-less record is spliced after.
    cursor: String,
    cost: &'a dyn Fn(&str, &mut Usage),
}

fn root_key(file: usize) -> String {
    format!("\0root:{file}")
}

impl Out<'_> {
    fn run_file(
        &mut self,
        fi: usize,
        recs: &[Vec<Rec>],
        after: &HashMap<usize, Vec<usize>>,
        anchor: Option<String>,
    ) -> Result<(), ImportError> {
        let saved = std::mem::replace(&mut self.cursor, root_key(fi));
        if let Some(anchor) = anchor {
            self.tail.insert(root_key(fi), anchor);
        }
        let file = &recs[fi];
        let mut i = 0;
        while i < file.len() {
            let r = &file[i];
            let next = match r.kind() {
                "assistant" => {
                    let (group, deferred, end) = assistant_group(file, i);
                    self.assistant(&group)?;
                    for d in deferred {
                        self.custom(d);
                    }
                    end
                }
                "user" => {
                    self.user(r)?;
                    i + 1
                }
                "system" if r.str("subtype") == Some("compact_boundary") => {
                    self.compaction(r);
                    i + 1
                }
                _ => {
                    self.custom(r);
                    i + 1
                }
            };
            for (j, done) in file.iter().enumerate().take(next).skip(i) {
                for &sub in after.get(&j).into_iter().flatten() {
                    let anchor =
                        sidechain_anchor(done).and_then(|id| self.tool_call_entry.get(id).cloned());
                    self.run_file(sub, recs, &HashMap::new(), anchor)?;
                }
            }
            i = next;
        }
        self.cursor = saved;
        Ok(())
    }

    fn label(&self, r: &Rec) -> &str {
        self.files[r.file].label
    }

    fn timestamp(&mut self, r: &Rec) -> String {
        if let Some(ts) = r.str("timestamp") {
            self.last_ts = ts.to_string();
        }
        self.last_ts.clone()
    }

    /// The Pi parent of a conversation record: what its `parentUuid` (or, failing that,
    /// `fallback`) became; a missing or unknown parent means the root of the record's file.
    fn parent_of_record(&self, r: &Rec, fallback: Option<&str>) -> Option<String> {
        let known = |key: Option<&str>| key.and_then(|k| self.tail.get(k)).cloned();
        known(r.str("parentUuid"))
            .or_else(|| known(fallback))
            .or_else(|| self.tail.get(&root_key(r.file)).cloned())
    }

    /// A fresh id for entry `k` made from record `r` (its uuid for the first, when unused).
    fn id_for(&self, r: &Rec, k: usize) -> String {
        match r.uuid() {
            Some(u) if k == 0 && !self.parent_of.contains_key(u) => u.to_string(),
            _ => stable_hex(&[
                &self.session_id,
                self.label(r),
                &r.line.to_string(),
                &k.to_string(),
            ]),
        }
    }

    fn emit(&mut self, id: &str, parent: Option<String>, ts: &str, entry: NewEntry, from: Value) {
        let base = EntryBase {
            id: id.to_string(),
            parent_id: parent.clone(),
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
            NewEntry::ModelChange { model_id, .. } => {
                self.counts.model_changes += 1;
                self.model_at.insert(id.to_string(), model_id.clone());
            }
            _ => {}
        }
        if !self.model_at.contains_key(id) {
            if let Some(m) = parent.as_ref().and_then(|p| self.model_at.get(p)).cloned() {
                self.model_at.insert(id.to_string(), m);
            }
        }
        self.parent_of.insert(id.to_string(), parent);
        self.lines.push(v.to_string());
    }

    fn origin(&self, recs: &[&Rec], with_record: bool) -> Value {
        let lines: Vec<usize> = recs.iter().map(|r| r.line).collect();
        let records = with_record.then(|| recs.iter().map(|r| without_content(&r.v)).collect());
        imported_from(
            FORMAT,
            recs.first().map_or("", |r| self.label(r)),
            &lines,
            records,
        )
    }

    /// After a conversation record: its children hang on `last`, and uuid-less records that
    /// follow are spliced in after it.
    fn link(&mut self, r: &Rec, first: &str, last: &str) {
        if let Some(u) = r.uuid() {
            self.entry_of.insert(u.to_string(), first.to_string());
            self.tail.insert(u.to_string(), last.to_string());
            self.cursor = u.to_string();
        }
    }

    /// A record Pi has no equivalent for, kept whole.
    fn custom(&mut self, r: &Rec) {
        let ts = self.timestamp(r);
        let id = self.id_for(r, 0);
        let parent = if r.uuid().is_some() {
            self.parent_of_record(r, None)
        } else {
            self.tail.get(&self.cursor).cloned()
        };
        let kind = match r.kind() {
            "" => "unknown",
            k => k,
        };
        let entry = NewEntry::Custom {
            custom_type: format!("{FORMAT}/{kind}"),
            data: Some(Value::Object(r.v.clone())),
        };
        let from = self.origin(&[r], false);
        self.emit(&id, parent, &ts, entry, from);
        if r.uuid().is_some() {
            self.link(r, &id, &id);
        } else {
            self.tail.insert(self.cursor.clone(), id);
        }
    }

    fn user(&mut self, r: &Rec) -> Result<(), ImportError> {
        self.counts.message_records += 1;
        if r.v.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
            // Its text is the summary of the compaction entry just before it.
            self.custom(r);
            return Ok(());
        }
        let ts = self.timestamp(r);
        let ms = millis(&ts);
        let msg = r.message().cloned().unwrap_or_default();
        let blocks: Vec<Value> = match msg.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(a)) => a.clone(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(ImportError {
                    file: self.label(r).to_string(),
                    line: r.line,
                    reason: "message content is neither text nor a list of blocks".into(),
                })
            }
        };
        let results = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .count();
        let details = if results == 1 {
            r.v.get("toolUseResult").cloned()
        } else {
            None
        };
        let mut messages = Vec::new();
        let mut text_part = Vec::new();
        for b in &blocks {
            if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                if !text_part.is_empty() {
                    messages.push(user_message(std::mem::take(&mut text_part), ms));
                }
                self.counts.tool_results += 1;
                messages.push(self.tool_result(b, details.clone(), ms));
            } else {
                text_part.push(user_block(b));
            }
        }
        if !text_part.is_empty() || messages.is_empty() {
            messages.push(user_message(text_part, ms));
        }
        let mut parent = self.parent_of_record(r, None);
        let mut first = None;
        for (k, message) in messages.into_iter().enumerate() {
            let id = self.id_for(r, k);
            let from = self.origin(&[r], k == 0);
            self.emit(&id, parent, &ts, NewEntry::Message { message }, from);
            first.get_or_insert_with(|| id.clone());
            parent = Some(id);
        }
        if let (Some(first), Some(last)) = (first, parent) {
            self.link(r, &first, &last);
        }
        Ok(())
    }

    fn tool_result(&self, b: &Value, details: Option<Value>, ms: i64) -> Value {
        let call = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
        let content: Vec<Value> = match b.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(a)) => a.iter().map(user_block).collect(),
            _ => Vec::new(),
        };
        let mut m = Map::new();
        m.insert("role".into(), "toolResult".into());
        m.insert("toolCallId".into(), call.into());
        let name = self.tool_names.get(call).map_or("unknown", String::as_str);
        m.insert("toolName".into(), name.into());
        m.insert("content".into(), Value::Array(content));
        if let Some(d) = details {
            m.insert("details".into(), d);
        }
        let is_error = b.get("is_error").and_then(Value::as_bool) == Some(true);
        m.insert("isError".into(), is_error.into());
        m.insert("timestamp".into(), ms.into());
        Value::Object(m)
    }

    /// One API response, written by Claude Code as one record per content block.
    fn assistant(&mut self, group: &[&Rec]) -> Result<(), ImportError> {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            return Ok(());
        };
        self.counts.message_records += group.len();
        let ts = self.timestamp(first);
        let mut content = Vec::new();
        let mut raw_error = String::new();
        for r in group {
            let blocks = r.message().and_then(|m| m.get("content"));
            let blocks = match blocks {
                Some(Value::Array(a)) => a.clone(),
                Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
                _ => Vec::new(),
            };
            for b in &blocks {
                let block = self.assistant_block(b);
                if let ContentBlock::Text(t) = &block {
                    raw_error.push_str(&t.text);
                }
                content.push(block);
            }
        }
        let msg = last.message().cloned().unwrap_or_default();
        let model = msg
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let mut usage = usage_of(msg.get("usage"));
        (self.cost)(model, &mut usage);
        let raw_stop = msg.get("stop_reason").and_then(Value::as_str);
        let is_error = group
            .iter()
            .any(|r| r.v.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true));
        let has_calls = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall(_)));
        let stop_reason = match raw_stop {
            _ if is_error => StopReason::Error,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") | Some("model_context_window_exceeded") => StopReason::Length,
            Some("refusal") => StopReason::Error,
            None if has_calls => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        let mut message = AssistantMessage::empty(API, PROVIDER, model, millis(&ts));
        message.content = content;
        message.usage = usage;
        message.stop_reason = stop_reason;
        message.response_id = first.message_id().map(str::to_string);
        message.raw_stop_reason = raw_stop.map(str::to_string);
        if is_error {
            message.error_message = Some(raw_error);
        }
        let message =
            serde_json::to_value(AgentMessage::Assistant(message)).map_err(|e| ImportError {
                file: self.label(first).to_string(),
                line: first.line,
                reason: format!("cannot write the assistant message: {e}"),
            })?;

        let mut parent = self.parent_of_record(first, None);
        let synthetic = model.starts_with('<');
        let current = parent.as_ref().and_then(|p| self.model_at.get(p));
        if !synthetic && current.map(String::as_str) != Some(model) {
            let id = self.id_for(first, 1);
            let entry = NewEntry::ModelChange {
                provider: PROVIDER.into(),
                model_id: model.into(),
            };
            let from = self.origin(group, false);
            self.emit(&id, parent, &ts, entry, from);
            parent = Some(id);
        }
        let id = self.id_for(first, 0);
        let from = self.origin(group, true);
        self.emit(&id, parent, &ts, NewEntry::Message { message }, from);
        for r in group {
            self.link(r, &id, &id);
        }
        for b in content_tool_ids(group) {
            self.tool_call_entry.insert(b, id.clone());
        }
        Ok(())
    }

    fn assistant_block(&mut self, b: &Value) -> ContentBlock {
        let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let block = match b.get("type").and_then(Value::as_str) {
            Some("text") => json!({"type": "text", "text": s("text")}),
            Some("thinking") => {
                let mut m = json!({"type": "thinking", "thinking": s("thinking")});
                if !s("signature").is_empty() {
                    m["thinkingSignature"] = s("signature").into();
                }
                m
            }
            Some("redacted_thinking") => json!({
                "type": "thinking", "thinking": "", "thinkingSignature": s("data"), "redacted": true
            }),
            Some("tool_use") => {
                self.counts.tool_calls += 1;
                self.tool_names.insert(s("id"), s("name"));
                json!({
                    "type": "toolCall",
                    "id": s("id"),
                    "name": s("name"),
                    "arguments": b.get("input").cloned().unwrap_or_else(|| json!({})),
                })
            }
            // Server tools, web search results and newer block types: kept as they are.
            _ => b.clone(),
        };
        serde_json::from_value(block.clone()).unwrap_or(ContentBlock::Unknown(block))
    }

    fn compaction(&mut self, r: &Rec) {
        let ts = self.timestamp(r);
        let parent = self.parent_of_record(r, r.str("logicalParentUuid"));
        let meta = r.v.get("compactMetadata");
        let summary = r
            .uuid()
            .and_then(|u| self.summaries.get(u))
            .cloned()
            .unwrap_or_else(|| r.str("content").unwrap_or("").to_string());
        let tokens_before = meta
            .and_then(|m| m.get("preTokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        // Claude Code keeps a preserved segment verbatim after the summary; Pi keeps the
        // entries from `firstKeptEntryId` on, which must be on the path to the compaction.
        let head = meta
            .and_then(|m| m.pointer("/preservedSegment/headUuid"))
            .and_then(Value::as_str)
            .and_then(|u| self.entry_of.get(u))
            .filter(|id| self.is_ancestor(id, parent.as_deref()))
            .cloned();
        let id = self.id_for(r, 0);
        let entry = NewEntry::Compaction {
            summary,
            first_kept_entry_id: head,
            tokens_before,
            details: None,
            usage: None,
            from_hook: None,
            system_message: None,
        };
        let mut from = self.origin(&[r], true);
        if let Value::Object(m) = &mut from {
            m.insert("records".into(), json!([r.v]));
        }
        self.emit(&id, parent, &ts, entry, from);
        self.link(r, &id, &id);
    }

    fn is_ancestor<'s>(&'s self, id: &str, mut at: Option<&'s str>) -> bool {
        let mut steps = 0;
        while let Some(cur) = at {
            if cur == id {
                return true;
            }
            steps += 1;
            if steps > self.parent_of.len() {
                return false;
            }
            at = self.parent_of.get(cur).and_then(|p| p.as_deref());
        }
        false
    }
}

/// The records of one response starting at `start`: consecutive assistant records with the
/// same `message.id`, each the child of the one before. Uuid-less records in between are
/// returned apart, to be written after the response. Also the index after the group.
fn assistant_group(file: &[Rec], start: usize) -> (Vec<&Rec>, Vec<&Rec>, usize) {
    let mut group = vec![&file[start]];
    let mut between = Vec::new();
    let mut end = start + 1;
    let id = file[start].message_id();
    let mut k = start + 1;
    while k < file.len() {
        let r = &file[k];
        let last_uuid = group.last().and_then(|g| g.uuid());
        if r.kind() == "assistant"
            && id.is_some()
            && r.message_id() == id
            && r.str("parentUuid") == last_uuid
        {
            group.push(r);
            end = k + 1;
        } else if r.uuid().is_none() {
            between.push(k);
        } else {
            break;
        }
        k += 1;
    }
    let deferred = between
        .into_iter()
        .filter(|&k| k < end)
        .map(|k| &file[k])
        .collect();
    (group, deferred, end)
}

/// The `tool_use` id whose result reported a subagent launch.
fn sidechain_anchor(r: &Rec) -> Option<&str> {
    r.message()?
        .get("content")?
        .as_array()?
        .iter()
        .find_map(|b| b.get("tool_use_id").and_then(Value::as_str))
}

fn content_tool_ids(group: &[&Rec]) -> Vec<String> {
    group
        .iter()
        .filter_map(|r| r.message()?.get("content")?.as_array().cloned())
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

fn user_message(content: Vec<Value>, ms: i64) -> Value {
    json!({"role": "user", "content": content, "timestamp": ms})
}

/// A user or tool-result block: text and base64 images in Pi's shape, anything else as is.
fn user_block(b: &Value) -> Value {
    match b.get("type").and_then(Value::as_str) {
        Some("text") => json!({"type": "text", "text": b.get("text").cloned().unwrap_or_default()}),
        Some("image") if b.pointer("/source/type").and_then(Value::as_str) == Some("base64") => {
            json!({
                "type": "image",
                "data": b.pointer("/source/data").cloned().unwrap_or_default(),
                "mimeType": b.pointer("/source/media_type").cloned().unwrap_or_default(),
            })
        }
        _ => b.clone(),
    }
}

fn usage_of(u: Option<&Value>) -> Usage {
    let n = |k: &str| {
        u.and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let mut usage = Usage {
        input: n("input_tokens"),
        output: n("output_tokens"),
        cache_read: n("cache_read_input_tokens"),
        cache_write: n("cache_creation_input_tokens"),
        ..Usage::default()
    };
    usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write;
    usage.cost.total_from_provider = Some(false);
    let long = u
        .and_then(|u| u.pointer("/cache_creation/ephemeral_1h_input_tokens"))
        .and_then(Value::as_u64);
    usage.cache_write_1h = Some(long.unwrap_or(0));
    usage
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_cost(_: &str, _: &mut Usage) {}

    fn convert_str(text: &str) -> Result<Converted, ImportError> {
        convert(
            SourceFile {
                label: "/x/0b7c2a52-3c1d-4a56-9e6f-0123456789ab.jsonl",
                bytes: text.as_bytes(),
            },
            &[],
            &no_cost,
        )
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let e = convert_str("{\"type\":\"mode\"}\n\n{oops\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("0123456789ab.jsonl:3:"), "{e}");
        let e = convert_str("[1]\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = convert_str("{\"type\":\"user\",\"uuid\":\"a\"}\n").unwrap_err();
        assert!(e.reason.contains("without a message"), "{e}");
        let e = convert_str(
            "{\"type\":\"user\",\"uuid\":\"a\",\"message\":{\"role\":\"user\",\"content\":5}}\n",
        )
        .unwrap_err();
        assert!(e.reason.contains("neither text"), "{e}");
    }

    #[test]
    fn uuid_less_records_are_spliced_into_the_chain() {
        let text = r#"{"type":"user","uuid":"u1","parentUuid":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi"}}
{"type":"last-prompt","lastPrompt":"hi"}
{"type":"user","uuid":"u2","parentUuid":"u1","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"again"}}
"#;
        let c = convert_str(text).unwrap();
        let v: Vec<Value> = c
            .lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[1]["parentId"], "u1");
        assert_eq!(v[2]["parentId"], v[1]["id"]);
        assert_eq!(v[1]["customType"], "claude-code/last-prompt");
        assert_eq!(c.session_id, "0b7c2a52-3c1d-4a56-9e6f-0123456789ab");
        // Same source, same lines.
        assert_eq!(convert_str(text).unwrap(), c);
    }
}
