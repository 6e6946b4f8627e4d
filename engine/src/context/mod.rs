//! What the model sees: the compaction-aware context of a path, as Pi 1.6 builds it.
//!
//! The steps mirror Pi's `buildContextEntries` → `buildSessionProjection` →
//! `buildSessionContext`, over any [`EntrySource`] (a session's path, whose
//! lines are parsed only when a step needs their payload, or plain values):
//!
//! 1. the context entries: the path, or with a compaction on it, the latest
//!    compaction, the kept entries from its `firstKeptEntryId` (system messages
//!    excluded: the compaction carries its own), and everything after it; a
//!    compaction with a `retainedTail` (the seeds' newer format) carries its kept
//!    messages itself and projects to its summary plus that tail;
//! 2. each entry projected to messages, with the latest `context_edit` per
//!    target applied;
//! 3. model and thinking level from the whole path.
//!
//! Messages are `serde_json::Value`s equal to what Pi produces, key for key.

mod convert;
mod source;
pub mod transcript;

pub use convert::{bash_execution_to_text, convert_to_llm};
pub use source::{EntrySource, SessionPath, WithAppended};

use crate::session::Mark;

use serde_json::{Map, Value};
use std::collections::HashMap;

pub const COMPACTION_SUMMARY_PREFIX: &str =
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

/// One context entry and the messages it contributes.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectedEntry {
    /// Position of the source entry in the path.
    pub pos: usize,
    pub messages: Vec<Value>,
}

/// The projected context of a path.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub entries: Vec<ProjectedEntry>,
    /// `thinkingLevel` as Pi derives it: `"off"` unless a change on the path says
    /// otherwise (`None` when that change has no level).
    pub thinking_level: Option<Value>,
    /// `{provider, modelId}` from the last model change or assistant message.
    pub model: Option<Value>,
}

impl Projection {
    pub fn messages(&self) -> impl Iterator<Item = &Value> {
        self.entries.iter().flat_map(|e| e.messages.iter())
    }

    /// Pi's `SessionContext` object: `{messages, thinkingLevel, model}`.
    pub fn context_value(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "messages".into(),
            Value::Array(self.messages().cloned().collect()),
        );
        if let Some(level) = &self.thinking_level {
            m.insert("thinkingLevel".into(), level.clone());
        }
        m.insert("model".into(), self.model.clone().unwrap_or(Value::Null));
        Value::Object(m)
    }
}

/// Positions (into the path) of Pi's context entries.
pub fn context_entry_positions<S: EntrySource + ?Sized>(path: &S) -> Vec<usize> {
    let Some(compaction_pos) = path.last_mark(Mark::Compaction) else {
        return (0..path.len()).collect();
    };
    let compaction = path.value(compaction_pos);
    // Pi locates the compaction by id (first match), not by position.
    let first_index = path
        .id(compaction_pos)
        .and_then(|id| path.position_of_id(id, 0..path.len()))
        .unwrap_or(compaction_pos);
    let mut positions = vec![compaction_pos];
    if retained_tail(&compaction).is_some() {
        // A compaction that carries its kept messages (`retainedTail`, the newer harness
        // format) is a checkpoint of its own: nothing before it is walked.
        positions.extend(first_index + 1..path.len());
        return positions;
    }
    let first_kept = compaction.get("firstKeptEntryId").and_then(Value::as_str);
    // Kept: from the first entry with the kept id before the compaction on.
    if let Some(kept) = first_kept.and_then(|id| path.position_of_id(id, 0..first_index)) {
        positions.extend((kept..first_index).filter(|&i| {
            let is_system = path.kind(i) == "message" && path.role(i) == Some("system");
            !is_system
        }));
    }
    positions.extend(first_index + 1..path.len());
    positions
}

/// Pi's `buildSessionProjection` over a path (root-first).
pub fn project<S: EntrySource + ?Sized>(path: &S) -> Projection {
    let (thinking_level, model) = context_settings(path);
    let mut entries = Vec::new();
    project_each(path, |pos, messages| {
        entries.push(ProjectedEntry { pos, messages });
    });
    Projection {
        entries,
        thinking_level,
        model,
    }
}

/// The projection one context entry at a time, in order: `each(pos, messages)`.
/// Nothing is kept between calls, so a caller that writes each entry's messages
/// out holds one entry's values at a time, whatever the context's size.
pub fn project_each<S: EntrySource + ?Sized>(path: &S, each: impl FnMut(usize, Vec<Value>)) {
    project_each_where(path, |_| true, each);
}

/// [`project_each`] for the context entries whose index (in context order, the
/// index into `Projection::entries`) `wanted` accepts; the others are not parsed.
pub fn project_each_where<S: EntrySource + ?Sized>(
    path: &S,
    mut wanted: impl FnMut(usize) -> bool,
    mut each: impl FnMut(usize, Vec<Value>),
) {
    let positions = context_entry_positions(path);
    let mut edits: HashMap<String, usize> = HashMap::new();
    for &pos in &positions {
        if path.kind(pos) == "context_edit" {
            if let Some(target) = path.value(pos).get("targetId").and_then(Value::as_str) {
                edits.insert(target.to_string(), pos);
            }
        }
    }
    for (n, &pos) in positions.iter().enumerate() {
        if !wanted(n) {
            continue;
        }
        // An older compaction inside the kept range contributes nothing: its
        // summary is already folded into the newest one at position zero.
        let messages = if path.kind(pos) == "compaction" && n > 0 {
            Vec::new()
        } else {
            let entry = path.value(pos);
            let edit = path
                .id(pos)
                .and_then(|id| edits.get(id))
                .map(|&e| path.value(e));
            project_entry(&entry, edit.as_deref())
        };
        each(pos, messages);
    }
}

/// Model and thinking level from the whole path: the last `thinking_level_change`,
/// and the last `model_change` or assistant message. Over a walked session path
/// these are found from its marks, without reading the path.
pub fn context_settings<S: EntrySource + ?Sized>(path: &S) -> (Option<Value>, Option<Value>) {
    let thinking = match path.last_mark(Mark::ThinkingLevelChange) {
        Some(i) => path.value(i).get("thinkingLevel").cloned(),
        None => Some(Value::String("off".into())),
    };
    let model_change = path.last_mark(Mark::ModelChange);
    let assistant = path.last_mark(Mark::AssistantMessage);
    // Whichever came last (a change, or the model an assistant message names).
    let model = match (model_change, assistant) {
        (Some(c), a) if a.is_none_or(|a| c > a) => Some(pick(
            &path.value(c),
            &[("provider", "provider"), ("modelId", "modelId")],
        )),
        (_, Some(a)) => {
            let v = path.value(a);
            let message = v.get("message").cloned().unwrap_or(Value::Null);
            Some(pick(
                &message,
                &[("provider", "provider"), ("model", "modelId")],
            ))
        }
        _ => None,
    };
    (thinking, model)
}

/// Builds `{to: from[key]…}`, leaving out keys that are absent (JS `undefined`).
fn pick(from: &Value, keys: &[(&str, &str)]) -> Value {
    let mut m = Map::new();
    for (src, dst) in keys {
        if let Some(v) = from.get(*src) {
            m.insert((*dst).into(), v.clone());
        }
    }
    Value::Object(m)
}

/// `new Date(timestamp).getTime()` as JSON (`null` for an invalid date).
fn js_date_value(timestamp: Option<&Value>) -> Value {
    let ms = match timestamp {
        Some(Value::String(s)) => pi_formats::time::parse_millis(s),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::Null) => Some(0.0),
        _ => None,
    };
    match ms {
        Some(ms) if ms.fract() == 0.0 && ms.abs() < 9.0e15 => Value::from(ms as i64),
        Some(ms) => serde_json::Number::from_f64(ms).map_or(Value::Null, Value::Number),
        None => Value::Null,
    }
}

fn is_null_or_missing(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

/// `{...message, content}`: replaces `content` in place, or appends it.
fn with_content(message: &Value, content: Value) -> Value {
    let mut out = message.clone();
    if let Some(obj) = out.as_object_mut() {
        obj.insert("content".into(), content);
    }
    out
}

/// Pi's `sessionEntryToContextMessages`: the messages one entry contributes.
pub fn entry_messages(entry: &Value) -> Vec<Value> {
    match entry.get("type").and_then(Value::as_str) {
        Some("message") => {
            let Some(message) = entry.get("message") else {
                return Vec::new();
            };
            let role = message.get("role").and_then(Value::as_str);
            let content_missing = is_null_or_missing(message.get("content"));
            // Hand-edited or old files can hold messages without content.
            match role {
                Some("system") if content_missing => {
                    vec![with_content(message, Value::String(String::new()))]
                }
                Some("user" | "assistant" | "toolResult") if content_missing => {
                    vec![with_content(message, Value::Array(Vec::new()))]
                }
                _ => vec![message.clone()],
            }
        }
        Some("custom_message") => {
            let mut m = Map::new();
            m.insert("role".into(), "custom".into());
            for key in ["customType", "content", "display", "details"] {
                let v = entry.get(key).filter(|v| key != "content" || !v.is_null());
                match (key, v) {
                    (_, Some(v)) => {
                        m.insert(key.into(), v.clone());
                    }
                    ("content", None) => {
                        m.insert(key.into(), Value::Array(Vec::new()));
                    }
                    _ => {}
                }
            }
            m.insert("timestamp".into(), js_date_value(entry.get("timestamp")));
            vec![Value::Object(m)]
        }
        Some("branch_summary") if crate::js::truthy(entry.get("summary")) => {
            let mut m = Map::new();
            m.insert("role".into(), "branchSummary".into());
            copy_key(&mut m, entry, "summary");
            copy_key(&mut m, entry, "fromId");
            m.insert("timestamp".into(), js_date_value(entry.get("timestamp")));
            vec![Value::Object(m)]
        }
        Some("compaction") => {
            let mut m = Map::new();
            m.insert("role".into(), "compactionSummary".into());
            copy_key(&mut m, entry, "summary");
            copy_key(&mut m, entry, "tokensBefore");
            m.insert("timestamp".into(), js_date_value(entry.get("timestamp")));
            let summary = Value::Object(m);
            let mut out = match entry.get("systemMessage") {
                Some(system) if crate::js::truthy(Some(system)) => vec![system.clone(), summary],
                _ => vec![summary],
            };
            out.extend(retained_tail(entry).into_iter().flatten().cloned());
            out
        }
        _ => Vec::new(),
    }
}

/// A compaction's `retainedTail`: the messages it kept, stored with it (absent in Pi 1.6's
/// own compactions, which name the first kept entry instead).
pub fn retained_tail(compaction: &Value) -> Option<&Vec<Value>> {
    compaction.get("retainedTail").and_then(Value::as_array)
}

fn copy_key(m: &mut Map<String, Value>, from: &Value, key: &str) {
    if let Some(v) = from.get(key) {
        m.insert(key.into(), v.clone());
    }
}

/// Pi's `projectContextEntry`: an entry's messages with a context edit applied.
pub fn project_entry(entry: &Value, edit: Option<&Value>) -> Vec<Value> {
    let messages = entry_messages(entry);
    let Some(edit) = edit else {
        return messages;
    };
    let replacement = edit.get("replacement").unwrap_or(&Value::Null);
    if replacement.is_null() {
        return Vec::new();
    }
    let new_content = replacement.get("content").cloned().unwrap_or(Value::Null);
    messages
        .into_iter()
        .map(|message| {
            let role = message.get("role").and_then(Value::as_str);
            match role {
                Some("assistant" | "toolResult") if new_content.is_string() => {
                    let text = new_content.clone();
                    with_content(
                        &message,
                        Value::Array(vec![serde_json::json!({"type": "text", "text": text})]),
                    )
                }
                Some("user" | "assistant" | "toolResult" | "custom") => {
                    with_content(&message, new_content.clone())
                }
                _ => message,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
