//! Token accounting: Pi 1.6's chars/4 estimate, provider usage, and the
//! threshold that triggers automatic compaction.

use super::CompactionSettings;
use crate::context::transcript::current_system_message;
use crate::context::{EntrySource, Projection};
use crate::js::{self, str_len, truthy, utf16_len};
use crate::session::Mark;
use serde::Serialize;
use serde_json::Value;

/// What an image block counts as, in characters (Pi's `ESTIMATED_IMAGE_CHARS`).
pub const ESTIMATED_IMAGE_CHARS: usize = 4800;

/// `Math.ceil(chars / 4)`.
fn chars_to_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

/// Characters of user-style content: a string, or text blocks plus a flat
/// allowance per image block.
fn text_and_image_chars(content: Option<&Value>) -> usize {
    match content {
        Some(Value::String(s)) => utf16_len(s),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => str_len(b.get("text")),
                Some("image") => ESTIMATED_IMAGE_CHARS,
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

/// Pi's `estimateTokens`: a conservative chars/4 estimate of one message, by role.
/// Roles Pi does not know count zero. Thinking counts for assistants; a tool call
/// counts its name and its JSON-encoded arguments.
pub fn estimate_tokens(message: &Value) -> u64 {
    let chars = match message.get("role").and_then(Value::as_str) {
        Some("system") => {
            let mut chars = text_and_image_chars(message.get("content"));
            if let Some(Value::Object(sections)) = message.get("sections") {
                chars += sections
                    .values()
                    .filter(|v| truthy(Some(v)))
                    .map(|v| str_len(Some(v)))
                    .sum::<usize>();
            }
            if let Some(tools) = message.get("toolsAdded").filter(|v| truthy(Some(v))) {
                chars += utf16_len(&js::stringify(tools));
            }
            chars
        }
        Some("user" | "custom" | "toolResult") => text_and_image_chars(message.get("content")),
        Some("assistant") => match message.get("content") {
            Some(Value::Array(blocks)) => blocks.iter().map(assistant_block_chars).sum(),
            _ => 0,
        },
        Some("bashExecution") => str_len(message.get("command")) + str_len(message.get("output")),
        Some("branchSummary" | "compactionSummary") => str_len(message.get("summary")),
        _ => 0,
    };
    chars_to_tokens(chars)
}

fn assistant_block_chars(block: &Value) -> usize {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => str_len(block.get("text")),
        Some("thinking") => str_len(block.get("thinking")),
        Some("toolCall") => {
            str_len(block.get("name"))
                + block
                    .get("arguments")
                    .map_or(0, |args| utf16_len(&js::stringify(args)))
        }
        _ => 0,
    }
}

/// A usage field as JS arithmetic sees it: `null` is 0, a missing field poisons the sum.
fn usage_field(usage: &Value, key: &str) -> f64 {
    match usage.get(key) {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(Value::Null) => 0.0,
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        _ => f64::NAN,
    }
}

/// `usage.totalTokens || input + output + cacheRead + cacheWrite`, as a float
/// (NaN when fields are missing, which makes the usage count as invalid).
fn context_tokens_f64(usage: &Value) -> f64 {
    let total = usage_field(usage, "totalTokens");
    if total != 0.0 && !total.is_nan() {
        return total;
    }
    ["input", "output", "cacheRead", "cacheWrite"]
        .iter()
        .map(|k| usage_field(usage, k))
        .sum()
}

/// Pi's `calculateContextTokens`: the provider's total, or the sum of its parts.
pub fn calculate_context_tokens(usage: &Value) -> u64 {
    let t = context_tokens_f64(usage);
    if t.is_finite() && t > 0.0 {
        t as u64
    } else {
        0
    }
}

/// The usage of an assistant message that reflects a real request: not aborted,
/// not an error, and not all zero.
fn assistant_usage(message: &Value) -> Option<&Value> {
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let usage = message.get("usage")?;
    let stop = message.get("stopReason").and_then(Value::as_str);
    if stop == Some("aborted") || stop == Some("error") || !truthy(Some(usage)) {
        return None;
    }
    (context_tokens_f64(usage) > 0.0).then_some(usage)
}

/// Pi's `getLastAssistantUsage`: the last valid assistant usage among path entries.
/// Over a session path, only assistant message entries from the end back to the
/// first valid one are parsed.
pub fn last_assistant_usage<S: EntrySource + ?Sized>(entries: &S) -> Option<Value> {
    (0..entries.len()).rev().find_map(|i| {
        if entries.kind(i) != "message" || entries.role(i) != Some("assistant") {
            return None;
        }
        let entry = entries.value(i);
        assistant_usage(entry.get("message")?).cloned()
    })
}

/// A context size estimate: the last usage plus estimates of what came after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextTokens {
    pub tokens: u64,
    pub usage_tokens: u64,
    pub trailing_tokens: u64,
    /// Index (into the messages) of the assistant message whose usage was used.
    pub last_usage_index: Option<usize>,
}

/// Pi's `estimateContextTokens`: trusts the last valid assistant usage and
/// estimates only the messages after it; without usage, estimates everything.
pub fn estimate_context_tokens<'a>(messages: impl IntoIterator<Item = &'a Value>) -> ContextTokens {
    let mut acc = ContextTokensAcc::default();
    messages.into_iter().for_each(|m| {
        acc.push(m);
    });
    acc.finish()
}

/// [`estimate_context_tokens`] fed one message at a time, for callers that do not
/// hold the messages together. Keeps one number per message.
#[derive(Debug, Default)]
pub struct ContextTokensAcc {
    per_message: Vec<u64>,
    /// Index and tokens of the last valid assistant usage so far.
    usage: Option<(usize, u64)>,
}

impl ContextTokensAcc {
    /// Adds the next message; returns its own estimate (Pi's `estimateTokens`).
    pub fn push(&mut self, message: &Value) -> u64 {
        let tokens = estimate_tokens(message);
        if let Some(usage) = assistant_usage(message) {
            self.usage = Some((self.per_message.len(), calculate_context_tokens(usage)));
        }
        self.per_message.push(tokens);
        tokens
    }

    /// The estimate of each message pushed, in order.
    pub fn per_message(&self) -> &[u64] {
        &self.per_message
    }

    pub fn finish(&self) -> ContextTokens {
        match self.usage {
            None => {
                let estimated = self.per_message.iter().sum();
                ContextTokens {
                    tokens: estimated,
                    usage_tokens: 0,
                    trailing_tokens: estimated,
                    last_usage_index: None,
                }
            }
            Some((index, usage_tokens)) => {
                let trailing: u64 = self.per_message[index + 1..].iter().sum();
                ContextTokens {
                    tokens: usage_tokens + trailing,
                    usage_tokens,
                    trailing_tokens: trailing,
                    last_usage_index: Some(index),
                }
            }
        }
    }
}

/// Pi's `estimateProjectedContextTokens`: like [`estimate_context_tokens`], but a
/// usage recorded before the latest context edit or compaction on the path no
/// longer describes the context, so then every message is estimated instead
/// (system messages replayed into one, as the provider would receive them).
///
/// `path` is the branch the projection was built from (`ProjectedEntry::pos`
/// indexes it). Only the entries' ids and types are read from it, so over a
/// session path this parses no entry.
pub fn estimate_projected_context_tokens<S: EntrySource + ?Sized>(
    projection: &Projection,
    path: &S,
) -> ContextTokens {
    let mut acc = ProjectedTokensAcc::default();
    for entry in &projection.entries {
        acc.push(entry.pos, &entry.messages);
    }
    acc.finish(path)
}

/// [`estimate_projected_context_tokens`] fed one projected entry at a time (as
/// `context::project_each` yields them), for callers that do not hold the whole
/// projection. Keeps one number per message and the (few) system messages.
#[derive(Debug, Default)]
pub struct ProjectedTokensAcc {
    acc: ContextTokensAcc,
    /// The path position of the entry holding the last valid usage so far.
    usage_pos: Option<usize>,
    /// The system messages, replayed into one when the usage does not count.
    system: Vec<Value>,
    /// The estimates of every other message, summed.
    non_system: u64,
}

impl ProjectedTokensAcc {
    /// Adds the messages of the context entry at path position `pos`.
    pub fn push(&mut self, pos: usize, messages: &[Value]) {
        for message in messages {
            let tokens = self.acc.push(message);
            if assistant_usage(message).is_some() {
                self.usage_pos = Some(pos);
            }
            if message.get("role").and_then(Value::as_str) == Some("system") {
                self.system.push(message.clone());
            } else {
                self.non_system += tokens;
            }
        }
    }

    pub fn finish<S: EntrySource + ?Sized>(&self, path: &S) -> ContextTokens {
        let estimate = self.acc.finish();
        if estimate.last_usage_index.is_some() && usage_is_current(self.usage_pos, path) {
            return estimate;
        }
        let tokens = current_system_message(&self.system)
            .map_or(0, |system| estimate_tokens(&system))
            + self.non_system;
        ContextTokens {
            tokens,
            usage_tokens: 0,
            trailing_tokens: tokens,
            last_usage_index: None,
        }
    }
}

/// Whether the entry at `usage_pos` (holding the last usage) comes after the latest
/// `context_edit`/`compaction` on the path. Entries are matched by id, as Pi does.
fn usage_is_current<S: EntrySource + ?Sized>(usage_pos: Option<usize>, path: &S) -> bool {
    let usage_entry_id = usage_pos
        .filter(|&pos| pos < path.len())
        .and_then(|pos| path.id(pos));
    let usage_entry_index = usage_entry_id
        .filter(|id| !id.is_empty())
        .and_then(|id| path.position_of_id(id, 0..path.len()));
    let latest_invalidating = path
        .last_mark(Mark::ContextEdit)
        .max(path.last_mark(Mark::Compaction));
    match (usage_entry_index, latest_invalidating) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(u), Some(l)) => u > l,
    }
}

/// When the latest compaction on the path was written (its `timestamp` in
/// milliseconds). A response older than it reflects the context before it.
/// Reads only entry heads.
pub fn latest_compaction_millis<S: EntrySource + ?Sized>(path: &S) -> Option<f64> {
    path.last_mark(Mark::Compaction)
        .and_then(|i| path.timestamp(i))
        .and_then(pi_formats::time::parse_millis)
}

/// Pi's `_checkCompaction` size after a response: the response's own usage, or
/// the projected estimate when context edits changed the projection, the
/// response failed, or it has no usage. Over a session path, only the context
/// entries are parsed (by `projection`); everything else comes from the heads.
pub fn context_tokens_after_response<S: EntrySource + ?Sized>(
    projection: &Projection,
    path: &S,
    usage: &Value,
    is_error: bool,
) -> u64 {
    let has_edits = projection
        .entries
        .iter()
        .any(|e| e.pos < path.len() && path.kind(e.pos) == "context_edit");
    let direct = calculate_context_tokens(usage);
    if has_edits || is_error || direct == 0 {
        estimate_projected_context_tokens(projection, path).tokens
    } else {
        direct
    }
}

/// Pi's `shouldCompact`: enabled, and the context exceeds the window minus the reserve.
pub fn should_compact(
    context_tokens: u64,
    context_window: u64,
    settings: &CompactionSettings,
) -> bool {
    settings.enabled
        && i128::from(context_tokens)
            > i128::from(context_window) - i128::from(settings.reserve_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn per_role_estimates() {
        let user = json!({"role":"user","content":[{"type":"text","text":"hello"},{"type":"image","data":"x"}]});
        assert_eq!(estimate_tokens(&user), (5 + 4800_u64).div_ceil(4));
        let assistant = json!({"role":"assistant","content":[
            {"type":"thinking","thinking":"abcd"},
            {"type":"toolCall","name":"read","arguments":{"path":"a"}}]});
        // 4 + 4 + len({"path":"a"}) = 12
        assert_eq!(estimate_tokens(&assistant), (4 + 4 + 12_u64).div_ceil(4));
        let bash = json!({"role":"bashExecution","command":"ls","output":"ab"});
        assert_eq!(estimate_tokens(&bash), 1);
        assert_eq!(
            estimate_tokens(&json!({"role":"weird","content":"xxxxxxxx"})),
            0
        );
        assert_eq!(estimate_tokens(&json!({"role":"user","content":"😀"})), 1);
    }

    #[test]
    fn context_tokens_use_last_valid_usage() {
        let msgs = [
            json!({"role":"user","content":"12345678"}),
            json!({"role":"assistant","content":[],"usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":0},"stopReason":"stop"}),
            json!({"role":"assistant","content":[],"usage":{"totalTokens":50},"stopReason":"error"}),
            json!({"role":"user","content":"1234"}),
        ];
        let t = estimate_context_tokens(msgs.iter());
        assert_eq!(
            t,
            ContextTokens {
                tokens: 4,
                usage_tokens: 3,
                trailing_tokens: 1,
                last_usage_index: Some(1)
            }
        );
    }

    #[test]
    fn threshold() {
        let s = CompactionSettings::default();
        assert!(should_compact(200_000 - 16_384 + 1, 200_000, &s));
        assert!(!should_compact(200_000 - 16_384, 200_000, &s));
        assert!(should_compact(1, 100, &s));
        assert!(!should_compact(
            1,
            100,
            &CompactionSettings {
                enabled: false,
                ..s
            }
        ));
    }

    #[test]
    fn system_replay_patches_sections_and_tools() {
        let msgs = [
            json!({"role":"system","content":"base","sections":{"a":"1","b":"2"},"toolsAdded":[{"name":"t1"},{"name":"t2"}],"timestamp":7}),
            json!({"role":"system","content":"","sections":{"a":null},"toolsRemoved":[{"name":"t1"}],"timestamp":9}),
            json!({"role":"system","content":[{"type":"text","text":"more"}],"sections":{"a":"3"}}),
        ];
        let s = current_system_message(msgs.iter()).unwrap();
        assert_eq!(
            s,
            json!({"role":"system","content":"base\n\nmore","sections":{"b":"2","a":"3"},
                   "toolsAdded":[{"name":"t2"}],"timestamp":7})
        );
    }
}
