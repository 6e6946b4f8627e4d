//! Pi's actionable boundaries: `turn_end` (after a turn's messages are written) and
//! `agent_before_settle` (when nothing else would run). Handlers propose session entries
//! (`custom`, `custom_message`, `context_edit`, `compaction`) and may ask for one more model
//! request; the whole proposal is checked before any of it is written, and a continuation
//! is granted only when the context then ends in something the model can answer.

use pi_formats::entry::NewEntry;
use serde_json::{json, Value};

use super::{append_locked, lock, AgentError, AgentSession, InputMessage};
use crate::protocol::Event;
use pi_engine::compaction;
use pi_engine::context::{self, SessionPath};

/// Which boundary, by Pi's event name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// After each turn's assistant message and tool results are written.
    TurnEnd,
    /// After the last run of a prompt, before it settles (not after an abort).
    BeforeSettle,
}

impl Boundary {
    pub fn event(self) -> &'static str {
        match self {
            Boundary::TurnEnd => "turn_end",
            Boundary::BeforeSettle => "agent_before_settle",
        }
    }
}

/// Pi's `outcome` of the last model response (`completed`, `error`, `aborted`).
pub fn outcome_of(stop_reason: &str) -> &'static str {
    match stop_reason {
        "aborted" => "aborted",
        "error" => "error",
        _ => "completed",
    }
}

impl AgentSession {
    /// Runs a boundary's handlers with `payload` (the event's own fields), writes the entries
    /// they proposed and says whether they asked for a continuation the context allows.
    /// `Ok(false)` when no extension handles the boundary.
    pub(super) async fn run_boundary(
        &self,
        boundary: Boundary,
        mut payload: Value,
    ) -> Result<bool, AgentError> {
        let Some(hooks) = self.hooks().filter(|h| h.wants_boundary(boundary.event())) else {
            return Ok(false);
        };
        payload["context"] = self.boundary_context(boundary);
        let Some(result) = hooks.boundary(boundary.event(), payload).await else {
            return Ok(false);
        };
        let drafts = result
            .get("entries")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let wants_continue = result.get("continue").and_then(Value::as_bool) == Some(true);
        let entries = match self.checked_drafts(&drafts) {
            Ok(entries) => entries,
            Err(why) => {
                hooks.boundary_error(
                    boundary.event(),
                    &format!("Invalid boundary entries: {why}"),
                );
                return Ok(false);
            }
        };
        for entry in entries {
            self.append_draft(entry)?;
        }
        // Before settling, messages queued meanwhile (a handler's `sendUserMessage`) also
        // make the prompt go on, as in Pi.
        let queued = boundary == Boundary::BeforeSettle && {
            let q = lock(&self.shared.queues);
            !q.steering.is_empty() || !q.follow_up.is_empty()
        };
        let go_on = wants_continue || queued;
        if go_on && !self.can_continue(boundary) {
            if wants_continue {
                hooks.boundary_error(
                    boundary.event(),
                    &format!(
                        "{} requested continuation without runnable model context",
                        boundary.event()
                    ),
                );
            }
            return Ok(false);
        }
        Ok(go_on)
    }

    /// What handlers see as `event.context` before any proposal: the context's messages,
    /// the messages waiting in the queues, and whether a request could follow.
    fn boundary_context(&self, boundary: Boundary) -> Value {
        let pending: Vec<Value> = {
            let q = lock(&self.shared.queues);
            q.steering
                .iter()
                .chain(&q.follow_up)
                .map(queued_message)
                .collect()
        };
        json!({
            "contextMessages": self.messages(),
            "pendingMessages": pending,
            "canContinue": self.can_continue(boundary),
        })
    }

    /// Pi's `canContinue`: the model context has more than system messages and does not end
    /// with an assistant message, a held custom message is waiting, or a queued message
    /// would start the request (after an assistant message, before settling).
    fn can_continue(&self, boundary: Boundary) -> bool {
        let (has_context, final_role) = {
            let st = lock(&self.shared.state);
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            let messages: Vec<Value> = context::project(&path).messages().cloned().collect();
            let llm = context::convert_to_llm(&messages);
            let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_string);
            let has_context = llm.iter().any(|m| role(m).as_deref() != Some("system"));
            (has_context, llm.last().and_then(role))
        };
        let ends_with_assistant = final_role.as_deref() == Some("assistant");
        let (queued, held) = {
            let q = lock(&self.shared.queues);
            (
                !q.steering.is_empty() || !q.follow_up.is_empty(),
                !q.after_turn.is_empty(),
            )
        };
        (has_context && !ends_with_assistant)
            || held
            || match boundary {
                Boundary::TurnEnd => queued,
                Boundary::BeforeSettle => ends_with_assistant && queued,
            }
    }

    /// The proposal as entries to write, or why it is refused (nothing is written then).
    /// As Pi's session manager, only context edits are checked (the sidecar has reported
    /// them already; this guards the file); other fields are written as given, and drafts of
    /// other types are skipped.
    fn checked_drafts(&self, drafts: &[Value]) -> Result<Vec<NewEntry>, String> {
        let st = lock(&self.shared.state);
        let s = &st.session;
        let branch = s.branch_path();
        let text = |d: &Value, key: &str| d.get(key).and_then(Value::as_str).map(str::to_string);
        let mut out = Vec::with_capacity(drafts.len());
        for draft in drafts {
            let entry = match draft.get("type").and_then(Value::as_str).unwrap_or("") {
                "custom" => NewEntry::Custom {
                    custom_type: text(draft, "customType").unwrap_or_default(),
                    data: draft.get("data").cloned(),
                },
                "custom_message" => NewEntry::CustomMessage {
                    custom_type: text(draft, "customType").unwrap_or_default(),
                    content: draft.get("content").cloned().unwrap_or_else(|| "".into()),
                    display: draft
                        .get("display")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    details: draft.get("details").cloned().filter(|d| !d.is_null()),
                },
                "context_edit" => {
                    let target = text(draft, "targetId").unwrap_or_default();
                    let replacement = draft.get("replacement").cloned().unwrap_or(Value::Null);
                    let shaped = replacement.is_null()
                        || replacement
                            .get("content")
                            .is_some_and(|c| c.is_string() || c.is_array());
                    if !shaped {
                        return Err(
                            "Context edit replacement must be null or contain string/array content"
                                .into(),
                        );
                    }
                    let Some(idx) = s.find(&target) else {
                        return Err(format!("Entry {target} not found"));
                    };
                    if !branch.entries.contains(&idx) {
                        return Err(format!("Entry {target} is not on the active branch"));
                    }
                    let value = s.entry_value(idx);
                    let role = value["message"]["role"].as_str().unwrap_or("");
                    let editable = value["type"] == "custom_message"
                        || (value["type"] == "message"
                            && matches!(role, "user" | "assistant" | "toolResult"));
                    if !editable {
                        return Err(format!(
                            "Entry {target} does not contribute editable model content"
                        ));
                    }
                    NewEntry::ContextEdit {
                        target_id: target,
                        replacement: text_blocks_for(role, replacement),
                    }
                }
                // The compaction entry is built when written (its tokensBefore and system
                // message are the context's then).
                "compaction" => NewEntry::Compaction {
                    summary: text(draft, "summary").unwrap_or_default(),
                    first_kept_entry_id: text(draft, "firstKeptEntryId"),
                    tokens_before: 0,
                    details: draft.get("details").cloned().filter(|d| !d.is_null()),
                    usage: draft.get("usage").cloned().filter(|u| !u.is_null()),
                    from_hook: Some(true),
                    system_message: None,
                },
                _ => continue,
            };
            out.push(entry);
        }
        Ok(out)
    }

    /// Writes one checked draft and announces it (`entry_appended`), as Pi commits drafts.
    fn append_draft(&self, entry: NewEntry) -> Result<(), AgentError> {
        let value = {
            let mut st = lock(&self.shared.state);
            let entry = match entry {
                NewEntry::Compaction {
                    summary,
                    first_kept_entry_id,
                    details,
                    usage,
                    ..
                } => {
                    let s = &st.session;
                    let branch = s.branch_path();
                    let path = SessionPath::of(s, &branch);
                    let before = compaction::estimate_projected_context_tokens(
                        &context::project(&path),
                        &path,
                    )
                    .tokens;
                    s.compaction_entry(
                        summary,
                        first_kept_entry_id,
                        before,
                        details,
                        Some(true),
                        usage,
                    )
                }
                other => other,
            };
            let id = append_locked(&mut st, &entry)?;
            st.session.find(&id).map(|i| st.session.entry_value(i))
        };
        if let Some(entry) = value {
            self.emit(Event::EntryAppended { entry });
        }
        Ok(())
    }
}

/// Pi's normalization of a replacement for an assistant or tool result: string content
/// becomes one text block.
fn text_blocks_for(role: &str, mut replacement: Value) -> Value {
    if matches!(role, "assistant" | "toolResult") {
        if let Some(text) = replacement.get("content").and_then(Value::as_str) {
            let blocks = json!([{ "type": "text", "text": text }]);
            replacement["content"] = blocks;
        }
    }
    replacement
}

/// A queued message as `pendingMessages` lists it.
fn queued_message(message: &InputMessage) -> Value {
    match message {
        InputMessage::User { text, images } => {
            let mut content = vec![json!({"type": "text", "text": text})];
            content.extend(images.iter().cloned());
            json!({"role": "user", "content": content})
        }
        InputMessage::Custom(m) => {
            let mut m = m.clone();
            m["role"] = "custom".into();
            m
        }
    }
}
