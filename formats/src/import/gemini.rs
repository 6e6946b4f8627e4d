//! Gemini CLI chat recordings (`~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`, or
//! the `.json` files older versions wrote) → Pi entries.
//!
//! Gemini CLI 0.61 appends one JSON record a line: a metadata record first (`sessionId`,
//! `projectHash`, `startTime`, `kind`; written again on every resume), message records (`id`,
//! `timestamp`, `type`: `user`, `gemini`, `info`, `warning`, `error`), `{"$set": {…}}` updates
//! of the metadata (`lastUpdated` after every message; `messages`, a snapshot of the whole
//! history that replaces what came before; `sessionId`, `summary`, …) and `{"$rewindTo": id}`
//! (the history from that message on was dropped). A message is written again, whole, each
//! time it grows (a `gemini` message first without, then with its `toolCalls`); the last
//! record with an id is the message. Older versions wrote one JSON object: the metadata with
//! the messages in a `messages` array.
//!
//! The mapping (docs/import.md has the table):
//! * a `user` message → a Pi `user` message (text, inline images), and its `functionResponse`
//!   parts → one `toolResult` each;
//! * a `gemini` message → a Pi `assistant` message: `thoughts` → `thinking`, the text, its
//!   `toolCalls` → `toolCall` blocks; `tokens` → usage, cost from the caller's price table; a
//!   `model_change` before it when its model differs from the one in effect. A call whose
//!   result no `user` record carries (older files) gets its `toolResult` from the call's own
//!   `result` right after;
//! * an `error` message → an `assistant` message with `stopReason: error`;
//! * a history snapshot (`$set.messages`) that drops the newest messages (a failed turn), or a
//!   `$rewindTo`, moves the branch point back: what follows hangs off the entry before the
//!   first dropped message, as in Pi's own tree;
//! * a history snapshot that brings a new `<state_snapshot>` user message (Gemini CLI compressed
//!   the chat: `/compress`, or automatically near the context limit) → a Pi `compaction` whose
//!   summary is that message and whose first kept entry is the message Gemini CLI kept first;
//! * `$set`s of `lastUpdated` alone are folded into the entry before them (`importedFrom`);
//!   everything else (metadata, other `$set`s, `$rewindTo`, `info` / `warning` messages,
//!   unknown records) → a `custom` entry `gemini/<kind>` holding the record whole.
//!
//! Every source record is in exactly one entry's `importedFrom.lines` (1-based JSONL lines); a
//! second entry made from the same record (the next `toolResult` of a record, a result taken
//! from a call, a model change) names it in `part: {line, pointer}` instead, `pointer` being a
//! JSON pointer into the record. Records of an older `.json` file have no lines: they are
//! named by JSON pointers into the file (`""` the metadata, `/messages/3` a message) in
//! `pointers`.

use std::collections::{HashMap, HashSet};
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
pub const FORMAT: &str = "gemini";

/// The API Gemini CLI speaks with an API key (Pi's name for it), and its provider.
const API: &str = "google-generative-ai";
const PROVIDER: &str = "google";

/// Message fields a message entry holds itself, left out of `importedFrom.records`.
const CONTENT_FIELDS: &[&str] = &["content", "thoughts", "toolCalls", "displayContent"];

/// One source record: a JSONL line (`line` ≥ 1, `pointer` empty), or in an older `.json` file
/// the metadata (`line` 0, pointer `""`) or a message (`line` 0, pointer `/messages/<k>`).
struct Rec {
    line: usize,
    pointer: String,
    v: Map<String, Value>,
}

impl Rec {
    fn str(&self, key: &str) -> Option<&str> {
        self.v.get(key).and_then(Value::as_str)
    }
    /// A message record (Gemini CLI's own test: a string `id`).
    fn message_id(&self) -> Option<&str> {
        self.str("id")
    }
    fn kind(&self) -> &str {
        self.str("type").unwrap_or("")
    }
    fn is_metadata(&self) -> bool {
        self.str("sessionId").is_some() && self.str("projectHash").is_some()
    }
    fn set(&self) -> Option<&Map<String, Value>> {
        self.v.get("$set").and_then(Value::as_object)
    }
    /// Where a part of this record is, for `importedFrom`.
    fn part(&self, pointer: &str) -> Value {
        if self.line > 0 {
            json!({"part": {"line": self.line, "pointer": pointer}})
        } else {
            json!({"pointers": [format!("{}{pointer}", self.pointer)]})
        }
    }
}

/// The session id of a recording (its metadata's `sessionId`), for finding files.
pub fn session_id(file: &SourceFile<'_>) -> Option<String> {
    parse(file).ok()?.iter().find_map(|r| {
        r.is_metadata()
            .then(|| r.str("sessionId").map(str::to_string))
            .flatten()
    })
}

/// Converts one Gemini CLI chat recording to a Pi session. `cwd` is the project folder (Gemini
/// CLI keeps it beside the chats, in `.project_root`; the recording itself only has a hash).
///
/// `cost` fills in the cost of a response from the provider, the model id and the token counts.
/// Fails when the file is neither JSONL nor one JSON object, naming the file and the line, or
/// when it has no session id.
pub fn convert(
    file: SourceFile<'_>,
    cwd: Option<&str>,
    cost: &dyn Fn(&str, &str, &mut Usage),
) -> Result<Converted, ImportError> {
    let recs = parse(&file)?;
    let whole = |reason: &str| ImportError {
        file: file.label.to_string(),
        line: 0,
        reason: reason.to_string(),
    };
    let meta = recs.iter().find(|r| r.is_metadata());
    let session_id = meta
        .and_then(|m| m.str("sessionId"))
        .filter(|id| is_valid_session_id(id))
        .ok_or_else(|| whole("no session id (no metadata record with a valid sessionId)"))?
        .to_string();
    let started = meta
        .and_then(|m| m.str("startTime"))
        .unwrap_or("1970-01-01T00:00:00.000Z")
        .to_string();
    let header = NewHeader::new(
        session_id.clone(),
        started.clone(),
        cwd.unwrap_or_default().to_string(),
        None,
    )
    .to_line();

    // Calls whose result a `user` record carries; the others take it from the call.
    let answered: HashSet<String> = recs
        .iter()
        .filter(|r| r.kind() == "user")
        .flat_map(|r| function_responses(&r.v))
        .filter_map(|(_, fr)| fr.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    let file_name = Path::new(file.label)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(file.label)
        .to_string();
    let mut out = Out {
        label: file.label,
        file_name,
        session_id,
        entries: Vec::new(),
        counts: Counts {
            records: recs.len(),
            ..Counts::default()
        },
        parent: None,
        path: Vec::new(),
        by_message: HashMap::new(),
        model: None,
        answered,
        calls: HashSet::new(),
        compressions: HashSet::new(),
        prompt_tokens: 0,
        last_ts: started,
    };
    for r in &recs {
        out.record(r)?;
    }
    out.counts.tool_calls = out.calls.len();
    // Prices last, from each message's final usage and model.
    for e in &mut out.entries {
        let Some(m) = e.get_mut("message").filter(|m| m["role"] == "assistant") else {
            continue;
        };
        let Some(model) = m["model"].as_str().map(str::to_string) else {
            continue;
        };
        if let Ok(mut usage) = serde_json::from_value::<Usage>(m["usage"].clone()) {
            cost(PROVIDER, &model, &mut usage);
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

/// The records of a recording: its JSONL lines, or, for an older single-object `.json` file,
/// the metadata and each message.
fn parse(file: &SourceFile<'_>) -> Result<Vec<Rec>, ImportError> {
    // A whole-file object with a `messages` list is the older format, even on one line.
    if let Ok(Value::Object(mut whole)) = serde_json::from_slice::<Value>(file.bytes) {
        if let Some(Value::Array(messages)) = whole.remove("messages") {
            return legacy(file, whole, messages);
        }
    }
    Ok(json_lines(file)?
        .into_iter()
        .map(|(line, v)| Rec {
            line,
            pointer: String::new(),
            v,
        })
        .collect())
}

/// The records of an older `.json` recording: the metadata, then each message.
fn legacy(
    file: &SourceFile<'_>,
    meta: Map<String, Value>,
    messages: Vec<Value>,
) -> Result<Vec<Rec>, ImportError> {
    let mut recs = vec![Rec {
        line: 0,
        pointer: String::new(),
        v: meta,
    }];
    for (k, m) in messages.into_iter().enumerate() {
        let Value::Object(v) = m else {
            return Err(ImportError {
                file: file.label.to_string(),
                line: 0,
                reason: format!("/messages/{k} is not a JSON object"),
            });
        };
        recs.push(Rec {
            line: 0,
            pointer: format!("/messages/{k}"),
            v,
        });
    }
    Ok(recs)
}

/// The `functionResponse` parts of a message's content, with their index.
fn function_responses(v: &Map<String, Value>) -> Vec<(usize, &Value)> {
    v.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(k, p)| p.get("functionResponse").map(|fr| (k, fr)))
        .collect()
}

/// Text of a message content: a string, or its text parts joined.
/// A compression found in a history snapshot.
struct Compression {
    /// The `<state_snapshot>` message's id.
    id: String,
    /// Its text: the summary.
    summary: String,
    /// The text of the first message kept after it (after Gemini's acknowledgement), when that
    /// is a user message.
    first_kept_text: Option<String>,
}

/// The `<state_snapshot>` user message Gemini CLI puts into the history when it compresses
/// (followed by its own "Got it." answer, then the messages it kept), unless already `seen`.
fn compression_in(history: &[Value], seen: &HashSet<String>) -> Option<Compression> {
    let at = history.iter().position(|m| {
        m.get("type").and_then(Value::as_str) == Some("user")
            && text_of(m.get("content"))
                .trim_start()
                .starts_with("<state_snapshot>")
    })?;
    let id = history[at].get("id").and_then(Value::as_str)?.to_string();
    if seen.contains(&id) {
        return None;
    }
    let first_kept_text = history
        .get(at + 2)
        .filter(|m| m.get("type").and_then(Value::as_str) == Some("user"))
        .map(|m| text_of(m.get("content")))
        .filter(|t| !t.is_empty());
    Some(Compression {
        id,
        summary: text_of(history[at].get("content")),
        first_kept_text,
    })
}

/// The text blocks of a Pi message's content, joined as `text_of` joins Gemini's parts.
fn texts_of_blocks(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// A user content part in Pi's shape: text, inline images; anything else as it is.
fn user_part(p: &Value) -> Value {
    if let Some(t) = p.get("text").and_then(Value::as_str) {
        return json!({"type": "text", "text": t});
    }
    match p.get("inlineData") {
        Some(d)
            if d.get("mimeType")
                .and_then(Value::as_str)
                .is_some_and(|m| m.starts_with("image/")) =>
        {
            json!({"type": "image", "data": d.get("data").cloned().unwrap_or_default(), "mimeType": d["mimeType"]})
        }
        _ => p.clone(),
    }
}

/// Gemini's token counts → Pi's usage, as Pi's Google provider reads them.
fn usage_of(t: &Value) -> Usage {
    let n = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cached");
    let mut usage = Usage {
        input: n("input").saturating_sub(cached),
        output: n("output") + n("thoughts"),
        cache_read: cached,
        reasoning: Some(n("thoughts")),
        total_tokens: n("total"),
        ..Usage::default()
    };
    usage.cost.total_from_provider = Some(false);
    usage
}

/// The record as kept in `importedFrom.records`: without the content the entry holds.
fn without_content(r: &Rec) -> Value {
    let mut v = r.v.clone();
    for f in CONTENT_FIELDS {
        v.remove(*f);
    }
    Value::Object(v)
}

/// The conversion in progress.
struct Out<'a> {
    label: &'a str,
    file_name: String,
    session_id: String,
    entries: Vec<Value>,
    counts: Counts,
    /// The entry the next one hangs off.
    parent: Option<String>,
    /// The current branch: each entry's id and the Gemini message it was made from.
    path: Vec<(String, Option<String>)>,
    /// Gemini message id → its (first) entry, to update it when the message is written again.
    by_message: HashMap<String, usize>,
    /// The model in effect.
    model: Option<String>,
    /// Calls whose result a `user` record carries.
    answered: HashSet<String>,
    /// Every tool call id seen.
    calls: HashSet<String>,
    /// Ids of the `<state_snapshot>` messages already made compactions (every later snapshot,
    /// e.g. on resume, carries them again).
    compressions: HashSet<String>,
    /// The prompt tokens of the latest response: what Gemini CLI compares with its limit.
    prompt_tokens: u64,
    last_ts: String,
}

impl Out<'_> {
    fn timestamp(&mut self, r: &Rec) -> String {
        let ts = r
            .str("timestamp")
            .or_else(|| r.str("startTime"))
            .or_else(|| r.set().and_then(|s| s.get("lastUpdated")?.as_str()));
        if let Some(ts) = ts {
            self.last_ts = ts.to_string();
        }
        self.last_ts.clone()
    }

    /// The id of entry `k` made from record `r`: a message's from the session and its Gemini
    /// id (the same in a `.json` file and the `.jsonl` Gemini CLI rewrites it to), anything
    /// else's from the session, the file's name and the record's place.
    fn id_for(&self, r: &Rec, k: usize) -> String {
        match r.message_id() {
            Some(id) => stable_hex(&[&self.session_id, "message", id, &k.to_string()]),
            None => stable_hex(&[
                &self.session_id,
                &self.file_name,
                &r.line.to_string(),
                &r.pointer,
                &k.to_string(),
            ]),
        }
    }

    /// `importedFrom` for an entry that accounts for record `r`.
    fn origin(&self, r: &Rec, with_record: bool) -> Value {
        let lines: Vec<usize> = (r.line > 0).then_some(r.line).into_iter().collect();
        let mut from = imported_from(
            FORMAT,
            self.label,
            &lines,
            with_record.then(|| vec![without_content(r)]),
        );
        if r.line == 0 {
            from["pointers"] = json!([r.pointer]);
        }
        from
    }

    /// `importedFrom` for a further entry made from part `pointer` of record `r`.
    fn part_origin(&self, r: &Rec, pointer: &str) -> Value {
        let mut from = imported_from(FORMAT, self.label, &[], None);
        if let (Value::Object(m), Value::Object(p)) = (&mut from, r.part(pointer)) {
            m.extend(p);
        }
        from
    }

    fn emit(
        &mut self,
        id: String,
        ts: &str,
        entry: NewEntry,
        from: Value,
        message: Option<&str>,
    ) -> usize {
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
            NewEntry::ModelChange { .. } => self.counts.model_changes += 1,
            NewEntry::Compaction { .. } => self.counts.compactions += 1,
            _ => {}
        }
        self.path.push((id.clone(), message.map(str::to_string)));
        self.parent = Some(id);
        self.entries.push(v);
        self.entries.len() - 1
    }

    fn message_value(&self, r: &Rec, message: AgentMessage) -> Result<Value, ImportError> {
        serde_json::to_value(message).map_err(|e| ImportError {
            file: self.label.to_string(),
            line: r.line,
            reason: format!("cannot write the message: {e}"),
        })
    }

    fn record(&mut self, r: &Rec) -> Result<(), ImportError> {
        if let Some(id) = r.message_id() {
            if let Some(&at) = self.by_message.get(id) {
                return self.rewritten(r, at);
            }
            return match r.kind() {
                "user" => self.user(r),
                "gemini" => self.gemini(r),
                "error" => self.error(r),
                _ => {
                    self.custom(r, r.kind());
                    Ok(())
                }
            };
        }
        if let Some(set) = r.set() {
            if set.keys().all(|k| k == "lastUpdated") && !self.entries.is_empty() {
                self.fold(r);
                return Ok(());
            }
            if let Some(Value::Array(history)) = set.get("messages") {
                if let Some(found) = compression_in(history, &self.compressions) {
                    self.compaction(r, found);
                    return Ok(());
                }
                let ids: HashSet<&str> = history
                    .iter()
                    .filter_map(|m| m.get("id").and_then(Value::as_str))
                    .collect();
                self.snapshot(&ids);
            }
            self.custom(r, "set");
            return Ok(());
        }
        if let Some(to) = r.str("$rewindTo") {
            if let Some(k) = self.path.iter().position(|(_, m)| m.as_deref() == Some(to)) {
                self.back_to(k);
            }
            self.custom(r, "rewind");
            return Ok(());
        }
        if r.is_metadata() {
            self.custom(r, "session");
        } else {
            self.custom(r, "unknown");
        }
        Ok(())
    }

    /// Hangs what follows off the entry before path position `k`.
    fn back_to(&mut self, k: usize) {
        if k == 0 {
            return;
        }
        self.path.truncate(k);
        self.parent = self.path.last().map(|(id, _)| id.clone());
    }

    /// A history snapshot: when it keeps the oldest messages of the branch but not the newest
    /// (Gemini CLI drops the prompt of a failed turn), the branch goes back to where they
    /// start. A snapshot that knows none of them (the one written before a resume loads the
    /// history) changes nothing.
    fn snapshot(&mut self, ids: &HashSet<&str>) {
        let mut kept_any = false;
        for k in 0..self.path.len() {
            let Some(m) = self.path[k].1.as_deref() else {
                continue;
            };
            if ids.contains(m) {
                kept_any = true;
            } else if kept_any {
                self.back_to(k);
                return;
            } else {
                return;
            }
        }
    }

    /// A compression: a `compaction` after the current entry. Gemini CLI keeps the newest
    /// messages (copied under new ids), so the first kept one is found on the branch by its
    /// text; when it is not there, nothing is kept (the compaction itself is the first kept
    /// entry, as Pi writes a compaction that keeps nothing).
    fn compaction(&mut self, r: &Rec, found: Compression) {
        self.compressions.insert(found.id);
        let ts = self.timestamp(r);
        let id = self.id_for(r, 0);
        let kept = found
            .first_kept_text
            .and_then(|text| self.user_entry_with_text(&text))
            .unwrap_or_else(|| id.clone());
        let entry = NewEntry::Compaction {
            summary: found.summary,
            first_kept_entry_id: Some(kept),
            tokens_before: self.prompt_tokens,
            details: None,
            usage: None,
            from_hook: None,
            system_message: None,
        };
        let from = self.origin(r, true);
        self.emit(id, &ts, entry, from, None);
    }

    fn note_prompt_tokens(&mut self, r: &Rec) {
        if let Some(n) =
            r.v.get("tokens")
                .and_then(|t| t.get("input"))
                .and_then(Value::as_u64)
        {
            self.prompt_tokens = n;
        }
    }

    /// The newest user message entry on the branch whose text is `text`.
    fn user_entry_with_text(&self, text: &str) -> Option<String> {
        self.path.iter().rev().find_map(|(entry_id, message)| {
            let at = *self.by_message.get(message.as_deref()?)?;
            let m = &self.entries[at]["message"];
            let same = m["role"] == "user" && texts_of_blocks(&m["content"]) == text;
            (same && self.entries[at]["id"] == entry_id.as_str()).then(|| entry_id.clone())
        })
    }

    /// A `$set` of `lastUpdated` alone: accounted for by the entry before it.
    fn fold(&mut self, r: &Rec) {
        let Some(e) = self.entries.last_mut() else {
            return;
        };
        let from = &mut e["importedFrom"];
        if r.line > 0 {
            if let Some(lines) = from["lines"].as_array_mut() {
                lines.push(r.line.into());
            }
        } else if let Some(p) = from["pointers"].as_array_mut() {
            p.push(r.pointer.clone().into());
        }
        match from["records"].as_array_mut() {
            Some(recs) => recs.push(Value::Object(r.v.clone())),
            None => from["records"] = json!([r.v]),
        }
    }

    /// A record Pi has no equivalent for, kept whole.
    fn custom(&mut self, r: &Rec, kind: &str) {
        let ts = self.timestamp(r);
        let kind = if kind.is_empty() { "unknown" } else { kind };
        let entry = NewEntry::Custom {
            custom_type: format!("{FORMAT}/{kind}"),
            data: Some(Value::Object(r.v.clone())),
        };
        let from = self.origin(r, false);
        self.emit(self.id_for(r, 0), &ts, entry, from, None);
    }

    /// A message written again (it grew): the entry takes the new version.
    fn rewritten(&mut self, r: &Rec, at: usize) -> Result<(), ImportError> {
        if r.kind() == "gemini" {
            self.note_prompt_tokens(r);
            let message = self.assistant_message(r)?;
            self.entries[at]["message"] = message;
        }
        let from = &mut self.entries[at]["importedFrom"];
        if r.line > 0 {
            if let Some(lines) = from["lines"].as_array_mut() {
                lines.push(r.line.into());
            }
        } else if let Some(p) = from["pointers"].as_array_mut() {
            p.push(r.pointer.clone().into());
        }
        if let Some(recs) = from["records"].as_array_mut() {
            recs.push(without_content(r));
        }
        Ok(())
    }

    fn user(&mut self, r: &Rec) -> Result<(), ImportError> {
        self.counts.message_records += 1;
        let ts = self.timestamp(r);
        let id = r.message_id().unwrap_or("").to_string();
        let content: Vec<Value> = match r.v.get("content") {
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            Some(Value::Array(parts)) => parts
                .iter()
                .filter(|p| p.get("functionResponse").is_none())
                .map(user_part)
                .collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(ImportError {
                    file: self.label.to_string(),
                    line: r.line,
                    reason: "message content is neither text nor a list of parts".into(),
                })
            }
        };
        let responses = function_responses(&r.v);
        let mut k = 0;
        if !content.is_empty() || responses.is_empty() {
            let message = json!({"role": "user", "content": content, "timestamp": millis(&ts)});
            let from = self.origin(r, true);
            let at = self.emit(
                self.id_for(r, k),
                &ts,
                NewEntry::Message { message },
                from,
                Some(&id),
            );
            self.by_message.insert(id.clone(), at);
            k += 1;
        }
        for (part, fr) in responses {
            let from = if k == 0 {
                self.origin(r, true)
            } else {
                self.part_origin(r, &format!("/content/{part}"))
            };
            let at = self.tool_result(r, k, fr, None, &ts, from, Some(&id));
            if k == 0 {
                self.by_message.insert(id.clone(), at);
            }
            k += 1;
        }
        Ok(())
    }

    /// A `toolResult` from a `functionResponse` part; `failed` from the call's status, when
    /// known.
    #[allow(clippy::too_many_arguments)]
    fn tool_result(
        &mut self,
        r: &Rec,
        k: usize,
        fr: &Value,
        failed: Option<bool>,
        ts: &str,
        from: Value,
        message: Option<&str>,
    ) -> usize {
        self.counts.tool_results += 1;
        let response = fr.get("response").unwrap_or(&Value::Null);
        let text = match (response.get("output"), response.get("error")) {
            (Some(Value::String(s)), _) => s.clone(),
            (_, Some(Value::String(s))) => s.clone(),
            _ => response.to_string(),
        };
        let mut content = vec![json!({"type": "text", "text": text})];
        content.extend(
            fr.get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(user_part),
        );
        let is_error = failed.unwrap_or(false) || response.get("error").is_some();
        let message_v = json!({
            "role": "toolResult",
            "toolCallId": fr.get("id").cloned().unwrap_or_default(),
            "toolName": fr.get("name").cloned().unwrap_or_else(|| "unknown".into()),
            "content": content,
            "isError": is_error,
            "timestamp": millis(ts),
        });
        self.emit(
            self.id_for(r, k),
            ts,
            NewEntry::Message { message: message_v },
            from,
            message,
        )
    }

    fn assistant_message(&mut self, r: &Rec) -> Result<Value, ImportError> {
        let ts = r.str("timestamp").unwrap_or(&self.last_ts).to_string();
        let model = r
            .str("model")
            .map(str::to_string)
            .or_else(|| self.model.clone())
            .unwrap_or_else(|| "unknown".into());
        let mut message = AssistantMessage::empty(API, PROVIDER, &model, millis(&ts));
        let mut content = Vec::new();
        for t in
            r.v.get("thoughts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        {
            let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
            let thinking = match (s("subject"), s("description")) {
                ("", d) => d.to_string(),
                (subject, d) => format!("**{subject}** {d}"),
            };
            content.push(json!({"type": "thinking", "thinking": thinking}));
        }
        let text = text_of(r.v.get("content"));
        if !text.is_empty() {
            content.push(json!({"type": "text", "text": text}));
        }
        let calls = r.v.get("toolCalls").and_then(Value::as_array);
        for c in calls.into_iter().flatten() {
            let id = c.get("id").and_then(Value::as_str).unwrap_or("");
            self.calls.insert(id.to_string());
            content.push(json!({
                "type": "toolCall",
                "id": id,
                "name": c.get("name").cloned().unwrap_or_default(),
                "arguments": c.get("args").cloned().filter(Value::is_object).unwrap_or_else(|| json!({})),
            }));
        }
        let has_calls = calls.is_some_and(|c| !c.is_empty());
        message.content = content
            .into_iter()
            .map(|b| serde_json::from_value(b.clone()).unwrap_or(ContentBlock::Unknown(b)))
            .collect();
        message.stop_reason = if has_calls {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        };
        match r.v.get("tokens").filter(|t| t.is_object()) {
            Some(t) => message.usage = usage_of(t),
            None => message.usage.cost.total_from_provider = Some(false),
        }
        self.message_value(r, AgentMessage::Assistant(message))
    }

    fn gemini(&mut self, r: &Rec) -> Result<(), ImportError> {
        self.counts.message_records += 1;
        self.note_prompt_tokens(r);
        let ts = self.timestamp(r);
        let id = r.message_id().unwrap_or("").to_string();
        if let Some(model) = r.str("model").filter(|m| self.model.as_deref() != Some(*m)) {
            self.model = Some(model.to_string());
            let entry = NewEntry::ModelChange {
                provider: PROVIDER.into(),
                model_id: model.to_string(),
            };
            let from = self.part_origin(r, "/model");
            let change_id = stable_hex(&[&self.session_id, "model", &id]);
            self.emit(change_id, &ts, entry, from, None);
        }
        let message = self.assistant_message(r)?;
        let from = self.origin(r, true);
        let at = self.emit(
            self.id_for(r, 0),
            &ts,
            NewEntry::Message { message },
            from,
            Some(&id),
        );
        self.by_message.insert(id.clone(), at);
        // Results no user record carries (older files): from the calls themselves.
        let calls = r.v.get("toolCalls").and_then(Value::as_array).cloned();
        for (k, c) in calls.into_iter().flatten().enumerate() {
            let call_id = c.get("id").and_then(Value::as_str).unwrap_or("");
            if self.answered.contains(call_id) {
                continue;
            }
            let failed = Some(c.get("status").and_then(Value::as_str) == Some("error"));
            let results = c.get("result").and_then(Value::as_array).cloned();
            let fr = results
                .into_iter()
                .flatten()
                .find_map(|p| p.get("functionResponse").cloned())
                .unwrap_or_else(|| {
                    json!({"id": call_id, "name": c.get("name"), "response": {"output": c.get("resultDisplay").cloned().unwrap_or_default()}})
                });
            let ts = c
                .get("timestamp")
                .and_then(Value::as_str)
                .unwrap_or(&ts)
                .to_string();
            let from = self.part_origin(r, &format!("/toolCalls/{k}/result"));
            self.tool_result(r, k + 1, &fr, failed, &ts, from, Some(&id));
        }
        Ok(())
    }

    /// An error Gemini CLI showed: an assistant message with `stopReason: error`.
    fn error(&mut self, r: &Rec) -> Result<(), ImportError> {
        let ts = self.timestamp(r);
        let model = self.model.clone().unwrap_or_else(|| "unknown".into());
        let mut message = AssistantMessage::empty(API, PROVIDER, &model, millis(&ts));
        message.stop_reason = StopReason::Error;
        message.error_message = Some(text_of(r.v.get("content")));
        message.usage.cost.total_from_provider = Some(false);
        let message = self.message_value(r, AgentMessage::Assistant(message))?;
        let mut from = self.origin(r, false);
        from["records"] = json!([r.v]);
        let at = self.emit(
            self.id_for(r, 0),
            &ts,
            NewEntry::Message { message },
            from,
            None,
        );
        if let Some(id) = r.message_id() {
            self.by_message.insert(id.to_string(), at);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_cost(_: &str, _: &str, _: &mut Usage) {}

    const ID: &str = "0b7c2a52-3c1d-4a56-9e6f-0123456789ab";

    fn convert_str(label: &str, text: &str) -> Result<Converted, ImportError> {
        let file = SourceFile {
            label,
            bytes: text.as_bytes(),
        };
        convert(file, Some("/p"), &no_cost)
    }

    fn entries(c: &Converted) -> Vec<Value> {
        c.lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn an_older_json_file_takes_results_from_the_calls_and_names_records_by_pointer() {
        // The single-object shape older Gemini CLI versions wrote: no functionResponse user
        // records, the results only in the calls.
        let text = json!({
            "sessionId": ID, "projectHash": "h", "startTime": "2026-01-01T00:00:00.000Z",
            "lastUpdated": "2026-01-01T00:00:09.000Z",
            "messages": [
                {"id": "u1", "timestamp": "2026-01-01T00:00:01.000Z", "type": "user",
                 "content": "hi"},
                {"id": "g1", "timestamp": "2026-01-01T00:00:02.000Z", "type": "gemini",
                 "content": "Looking.", "model": "gemini-2.5-pro",
                 "thoughts": [{"subject": "Plan", "description": "look"}],
                 "tokens": {"input": 100, "output": 5, "cached": 40, "thoughts": 2, "total": 107},
                 "toolCalls": [{"id": "c1", "name": "read_file", "args": {"file_path": "x"},
                   "status": "error", "timestamp": "2026-01-01T00:00:03.000Z",
                   "result": [{"functionResponse": {"id": "c1", "name": "read_file",
                     "response": {"error": "File not found."}}}]}]},
                {"id": "i1", "timestamp": "2026-01-01T00:00:04.000Z", "type": "info",
                 "content": "Switched model."},
                {"id": "e1", "timestamp": "2026-01-01T00:00:05.000Z", "type": "error",
                 "content": "Quota exceeded."}
            ]
        })
        .to_string();
        let c = convert_str("/x/session-old.json", &text).unwrap();
        let v = entries(&c);
        assert_eq!(c.session_id, ID);
        let kinds: Vec<&str> = v
            .iter()
            .map(|e| {
                e["customType"]
                    .as_str()
                    .or(e["message"]["role"].as_str())
                    .or(e["type"].as_str())
                    .unwrap()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "gemini/session",
                "user",
                "model_change",
                "assistant",
                "toolResult",
                "gemini/info",
                "assistant"
            ]
        );
        assert_eq!(v[0]["importedFrom"]["pointers"], json!([""]));
        assert_eq!(v[1]["importedFrom"]["pointers"], json!(["/messages/0"]));
        assert_eq!(v[1]["importedFrom"]["lines"], json!([]));
        let a = &v[3]["message"];
        assert_eq!(a["content"][0]["thinking"], "**Plan** look");
        assert_eq!(a["content"][2]["id"], "c1");
        assert_eq!(a["usage"]["input"], 60);
        assert_eq!(a["usage"]["output"], 7);
        let r = &v[4];
        assert_eq!(r["message"]["toolCallId"], "c1");
        assert_eq!(r["message"]["isError"], true);
        assert_eq!(r["message"]["content"][0]["text"], "File not found.");
        assert_eq!(
            r["importedFrom"]["pointers"],
            json!(["/messages/1/toolCalls/0/result"])
        );
        assert_eq!(v[6]["message"]["stopReason"], "error");
        assert_eq!(v[6]["message"]["errorMessage"], "Quota exceeded.");
        for pair in v.windows(2) {
            assert_eq!(pair[1]["parentId"], pair[0]["id"]);
        }
        assert_eq!(
            convert_str("/x/session-old.json", &text).unwrap(),
            c,
            "same source, same lines"
        );
    }

    #[test]
    fn a_rewind_branches_from_the_entry_before_the_dropped_message() {
        let lines = [
            json!({"sessionId": ID, "projectHash": "h", "startTime": "2026-01-01T00:00:00.000Z"}),
            json!({"id": "u1", "timestamp": "2026-01-01T00:00:01.000Z", "type": "user", "content": [{"text": "one"}]}),
            json!({"$set": {"lastUpdated": "2026-01-01T00:00:01.000Z"}}),
            json!({"id": "g1", "timestamp": "2026-01-01T00:00:02.000Z", "type": "gemini", "content": "first"}),
            json!({"id": "u2", "timestamp": "2026-01-01T00:00:03.000Z", "type": "user", "content": [{"text": "two"}]}),
            json!({"$rewindTo": "u2"}),
            json!({"id": "u3", "timestamp": "2026-01-01T00:00:04.000Z", "type": "user", "content": [{"text": "two again"}]}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let c = convert_str("/x/session-r.jsonl", &text).unwrap();
        let v = entries(&c);
        assert_eq!(
            v[1]["importedFrom"]["lines"],
            json!([2, 3]),
            "lastUpdated folded"
        );
        let g1 = &v[2];
        let rewind = v
            .iter()
            .find(|e| e["customType"] == "gemini/rewind")
            .unwrap();
        assert_eq!(rewind["parentId"], g1["id"]);
        assert_eq!(v.last().unwrap()["parentId"], rewind["id"]);
        assert_eq!(
            v.last().unwrap()["message"]["content"][0]["text"],
            "two again"
        );
    }

    #[test]
    fn bad_input_names_the_file() {
        let e = convert_str("/x/s.jsonl", "{\"id\":\"a\"}\n{oops\n").unwrap_err();
        assert!(e.to_string().starts_with("/x/s.jsonl:2:"), "{e}");
        let e = convert_str("/x/s.json", "{\"messages\": [1]}").unwrap_err();
        assert!(e.to_string().contains("/messages/0"), "{e}");
        let e = convert_str("/x/s.jsonl", "{\"id\":\"a\",\"type\":\"user\"}\n").unwrap_err();
        assert!(e.to_string().contains("no session id"), "{e}");
    }
}
