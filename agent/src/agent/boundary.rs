//! Pi's actionable boundaries: `turn_end` (after a turn's messages are written) and
//! `agent_before_settle` (when nothing else would run). Handlers propose session entries
//! (`custom`, `custom_message`, `context_edit`, `compaction`) and may ask for one more model
//! request; the whole proposal is checked before any of it is written, and a continuation
//! is granted only when the context then ends in something the model can answer.

use pi_formats::entry::{EntryBase, NewEntry};
use serde_json::{json, Value};

use super::{append_locked, lock, AgentError, AgentSession, InputMessage};
use crate::protocol::Event;
use pi_engine::compaction;
use pi_engine::context::{self, EntrySource, SessionPath, WithAppended};
use pi_engine::session::Session;

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

    fn from_event(event: &str) -> Option<Boundary> {
        [Boundary::TurnEnd, Boundary::BeforeSettle]
            .into_iter()
            .find(|b| b.event() == event)
    }
}

/// What waits in the queues, for `canContinue`.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    /// A steering or follow-up message.
    queued: bool,
    /// A custom message held for the next turn.
    held: bool,
}

/// Pi's `canContinue`: the model context (`llm`) has more than system messages and does not
/// end with an assistant message, a held custom message is waiting, or a queued message
/// would start the request (at a turn's end; before settling, after an assistant message).
fn continuable(llm: &[Value], waiting: Waiting, boundary: Boundary) -> bool {
    fn role(m: &Value) -> Option<&str> {
        m.get("role").and_then(Value::as_str)
    }
    let has_context = llm.iter().any(|m| role(m) != Some("system"));
    let ends_with_assistant = llm.last().and_then(role) == Some("assistant");
    (has_context && !ends_with_assistant)
        || waiting.held
        || match boundary {
            Boundary::TurnEnd => waiting.queued,
            Boundary::BeforeSettle => ends_with_assistant && waiting.queued,
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
        payload["context"] = self
            .boundary_context(boundary.event(), &[])
            .unwrap_or(Value::Null);
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

    /// Pi's `event.context` for a boundary's handlers: the context as it would be with
    /// `drafts` written (`contextEntries` with each `sourceEntry`, `contextMessages`,
    /// `llmMessages`), the messages waiting in the queues, and whether a request could
    /// follow. The sidecar asks again after each handler, as Pi rebuilds it from the
    /// proposal so far. `Err`: why the drafts cannot be applied (Pi's session manager's
    /// message); nothing is written either way.
    pub fn boundary_context(&self, event: &str, drafts: &[Value]) -> Result<Value, String> {
        let boundary = Boundary::from_event(event)
            .ok_or_else(|| format!("{event} is not an actionable boundary"))?;
        let drafted = self.checked_drafts(drafts)?;
        let (pending, waiting) = self.waiting_messages();
        let st = lock(&self.shared.state);
        let s = &st.session;
        let branch = s.branch_path();
        let path = SessionPath::of(s, &branch);
        let mut appended: Vec<Value> = Vec::with_capacity(drafted.len());
        for entry in drafted {
            // As written: `tokensBefore` is the context's with the drafts before it.
            let entry = hook_compaction_measured(
                entry,
                s,
                &WithAppended {
                    path: &path,
                    appended: &appended,
                },
            );
            let base = EntryBase {
                id: pi_formats::id::entry_id(|id| {
                    s.find(id).is_some() || appended.iter().any(|e| e["id"] == id)
                }),
                parent_id: appended
                    .last()
                    .and_then(|e| e["id"].as_str())
                    .or(s.leaf_id())
                    .map(str::to_string),
                timestamp: pi_formats::time::now_iso(),
            };
            let line = entry.to_line(&base);
            appended.push(serde_json::from_str(&line).map_err(|e| e.to_string())?);
        }
        let source = WithAppended {
            path: &path,
            appended: &appended,
        };
        let projection = context::project(&source);
        let context_entries: Vec<Value> = projection
            .entries
            .iter()
            .map(|e| json!({"sourceEntry": source.value(e.pos), "messages": e.messages}))
            .collect();
        let messages: Vec<Value> = projection.messages().cloned().collect();
        let llm = context::convert_to_llm(&messages);
        let can_continue = continuable(&llm, waiting, boundary);
        Ok(json!({
            "contextEntries": context_entries,
            "contextMessages": messages,
            "llmMessages": llm,
            "pendingMessages": pending,
            "canContinue": can_continue,
        }))
    }

    /// The queued messages as `pendingMessages` lists them, and what waits.
    fn waiting_messages(&self) -> (Vec<Value>, Waiting) {
        let q = lock(&self.shared.queues);
        let pending = q
            .steering
            .iter()
            .chain(&q.follow_up)
            .map(queued_message)
            .collect();
        let waiting = Waiting {
            queued: !q.steering.is_empty() || !q.follow_up.is_empty(),
            held: !q.after_turn.is_empty(),
        };
        (pending, waiting)
    }

    /// Pi's `canContinue` for the session as it is.
    fn can_continue(&self, boundary: Boundary) -> bool {
        let (_, waiting) = self.waiting_messages();
        let llm = {
            let st = lock(&self.shared.state);
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            let messages: Vec<Value> = context::project(&path).messages().cloned().collect();
            context::convert_to_llm(&messages)
        };
        continuable(&llm, waiting, boundary)
    }

    /// The proposal as entries to write, or why it is refused (nothing is written then).
    /// As Pi's session manager, only context edits are checked (the sidecar has reported
    /// them already, from [`AgentSession::boundary_context`]; this guards the file); other fields are written as given, and drafts of
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
            let entry = {
                let s = &st.session;
                let branch = s.branch_path();
                hook_compaction_measured(entry, s, &SessionPath::of(s, &branch))
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

/// A hook's compaction draft as written after `path`: its `tokensBefore` is the estimate
/// of that path's context and its system message the session's. Other drafts are unchanged.
fn hook_compaction_measured<S: EntrySource + ?Sized>(
    entry: NewEntry,
    session: &Session,
    path: &S,
) -> NewEntry {
    match entry {
        NewEntry::Compaction {
            summary,
            first_kept_entry_id,
            details,
            usage,
            ..
        } => {
            let before =
                compaction::estimate_projected_context_tokens(&context::project(path), path).tokens;
            session.compaction_entry(
                summary,
                first_kept_entry_id,
                before,
                details,
                Some(true),
                usage,
            )
        }
        other => other,
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
