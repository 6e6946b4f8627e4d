//! One prompt: the agent loop (Pi's `runLoop`), retries, compaction.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use pi_formats::entry::NewEntry;
use pi_formats::message::{AgentMessage, AssistantMessage, StopReason, ThinkingLevel};
use pi_formats::time::now_millis;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::boundary::{self, Boundary};
use super::events::message_update;
use super::retry::{delay_ms, is_retryable_error};
use super::route::{limits_model, RouteReason};
use super::summarizer::{self, RetryEvents};
use super::{append_locked, lock, prompt, AgentError, AgentSession, InputMessage, RunOutcome};
use crate::llm::{self, is_context_overflow, Context, Model, StreamOptions};
use crate::protocol::Event;
use crate::tools::{validate_tool_arguments, Tool, ToolContext, ToolError, ToolOutput};
use pi_engine::compaction::{self, SummaryOptions};
use pi_engine::context::{self, SessionPath};

/// What one pass of the loop ended with.
struct LoopEnd {
    last: Option<AssistantMessage>,
    last_entry: Option<String>,
}

/// Why a compaction runs (Pi's `reason` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// `compact` command.
    Manual,
    /// The context crossed the threshold after a turn.
    Threshold,
    /// The provider rejected the context as too long.
    Overflow,
}

impl CompactionReason {
    fn as_str(self) -> &'static str {
        match self {
            CompactionReason::Manual => "manual",
            CompactionReason::Threshold => "threshold",
            CompactionReason::Overflow => "overflow",
        }
    }
}

fn user_message(text: &str, images: &[Value]) -> Value {
    let mut content = vec![json!({"type": "text", "text": text})];
    content.extend(images.iter().cloned());
    json!({"role": "user", "content": content, "timestamp": now_millis()})
}

/// Pi's `blockImages` filter on a message about to be sent: each image of a user message
/// or tool result becomes "Image reading is disabled." (repeats next to each other once).
fn block_images(message: &mut Value) {
    const BLOCKED: &str = "Image reading is disabled.";
    let role = message.get("role").and_then(Value::as_str);
    if !matches!(role, Some("user" | "toolResult")) {
        return;
    }
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return;
    };
    if !content.iter().any(|c| c["type"] == "image") {
        return;
    }
    let mut out: Vec<Value> = Vec::with_capacity(content.len());
    for block in content.drain(..) {
        let block = if block["type"] == "image" {
            json!({"type": "text", "text": BLOCKED})
        } else {
            block
        };
        let repeat = block["type"] == "text"
            && block["text"] == BLOCKED
            && out
                .last()
                .is_some_and(|p| p["type"] == "text" && p["text"] == BLOCKED);
        if !repeat {
            out.push(block);
        }
    }
    *content = out;
}

/// An assistant message as Pi writes it (with its `role`).
/// Adds `converted` (context messages already converted for the model) to `messages` as
/// the providers take them. A message of a role the model sees whose fields do not fit it
/// (say a user message whose `content` is a number) cannot be sent: it is left out, and
/// `unreadable` says which one (its position among all converted messages) and why, so the
/// front ends can warn instead of losing it silently.
fn read_context_messages(
    converted: Vec<Value>,
    messages: &mut Vec<AgentMessage>,
    unreadable: &mut Vec<String>,
) {
    for value in converted {
        let position = messages.len() + unreadable.len() + 1;
        let why = match serde_json::from_value::<AgentMessage>(value) {
            // `AgentMessage` keeps what it cannot read as `Unknown`.
            Ok(AgentMessage::Unknown(v)) => why_unreadable(&v),
            Ok(message) => {
                messages.push(message);
                continue;
            }
            Err(e) => e.to_string(),
        };
        unreadable.push(format!(
            "context message {position} cannot be read and was left out of the request: {why}"
        ));
    }
}

/// Why a message did not decode as its role's type: decoding that type alone names the
/// field at fault.
fn why_unreadable(v: &Value) -> String {
    use pi_formats::message::{SystemMessage, ToolResultMessage, UserMessage};
    let role = v.get("role").and_then(Value::as_str);
    let error = match role {
        Some("system") => serde_json::from_value::<SystemMessage>(v.clone()).err(),
        Some("user") => serde_json::from_value::<UserMessage>(v.clone()).err(),
        Some("assistant") => serde_json::from_value::<AssistantMessage>(v.clone()).err(),
        Some("toolResult") => serde_json::from_value::<ToolResultMessage>(v.clone()).err(),
        Some(other) => return format!("a {other} message is not sent to a model"),
        None => return "it has no role".to_string(),
    };
    let role = role.unwrap_or_default();
    match error {
        Some(e) => format!("{role} message: {e}"),
        None => format!("{role} message"),
    }
}

fn assistant_value(m: &AssistantMessage) -> Value {
    serde_json::to_value(AgentMessage::Assistant(m.clone())).unwrap_or(Value::Null)
}

pub(crate) fn tool_output_json(out: &ToolOutput) -> Value {
    let mut m = Map::new();
    m.insert("content".into(), out.content_json());
    if let Some(d) = &out.details {
        m.insert("details".into(), d.clone());
    }
    if let Some(usage) = &out.usage {
        m.insert("usage".into(), usage.clone());
    }
    if let Some(s) = &out.structured {
        m.insert("structuredContent".into(), s.clone());
        // A tool that returned (not threw) an error result carries its own `isError`,
        // as Pi's bash result for a non-zero exit does; only such results are structured.
        if out.is_error {
            m.insert("isError".into(), true.into());
        }
    }
    Value::Object(m)
}

impl AgentSession {
    /// Runs a prompt to the end: the loop, retries, compaction. Fails without running when
    /// a run is already in progress or there is no model.
    pub async fn prompt(&self, text: &str, images: Vec<Value>) -> Result<RunOutcome, AgentError> {
        self.run(InputMessage::User {
            text: text.to_string(),
            images,
        })
        .await
    }

    /// Runs a run started by `start`, a user prompt or an extension's custom message (Pi's
    /// `sendMessage(…, {triggerTurn: true})`), to the end.
    pub async fn run(&self, start: InputMessage) -> Result<RunOutcome, AgentError> {
        let token = self.begin_run()?;
        self.run_claimed(token, start).await
    }

    /// Claims the run, calls `on_started` (so a caller can answer "started" before any event
    /// is emitted), and runs the prompt on a task.
    pub fn spawn_prompt(
        &self,
        text: String,
        images: Vec<Value>,
        on_started: impl FnOnce(),
    ) -> Result<tokio::task::JoinHandle<Result<RunOutcome, AgentError>>, AgentError> {
        self.spawn_run(InputMessage::User { text, images }, on_started)
    }

    /// [`Self::spawn_prompt`] for any starting message.
    pub fn spawn_run(
        &self,
        start: InputMessage,
        on_started: impl FnOnce(),
    ) -> Result<tokio::task::JoinHandle<Result<RunOutcome, AgentError>>, AgentError> {
        let token = self.begin_run()?;
        on_started();
        let this = self.clone();
        Ok(tokio::spawn(
            async move { this.run_claimed(token, start).await },
        ))
    }

    async fn run_claimed(
        &self,
        token: CancellationToken,
        start: InputMessage,
    ) -> Result<RunOutcome, AgentError> {
        let result = self.prompt_inner(&start, &token).await;
        let flushed = self.finish_run();
        let result = result.and_then(|last| flushed.map(|()| last));
        let aborted = token.is_cancelled();
        // A run can fail after "started" was answered (a session write failed): RPC and the
        // TUI learn it here, since nobody else awaits the spawned task's result.
        self.emit(Event::AgentSettled {
            aborted,
            error: result.as_ref().err().map(ToString::to_string),
        });
        self.shared.idle.notify_waiters();
        result.map(|last| RunOutcome {
            last_assistant: last.map(AgentMessage::Assistant),
            aborted,
        })
    }

    /// Releases the run slot and writes the custom messages still held for the end of a
    /// turn (the run may have ended without one).
    fn finish_run(&self) -> Result<(), AgentError> {
        let held = {
            // Under the queue lock: a message sent meanwhile either sees the run and is held
            // (then taken here) or sees no run and is appended by its sender.
            let mut q = lock(&self.shared.queues);
            *lock(&self.shared.run) = None;
            std::mem::take(&mut q.after_turn)
        };
        for message in &held {
            self.append_custom_message(message)?;
        }
        Ok(())
    }

    /// Claims the run slot (checked before any event is emitted).
    pub fn begin_run(&self) -> Result<CancellationToken, AgentError> {
        let Some(model) = self.model() else {
            return Err(AgentError::NoModel);
        };
        self.check_auth(&model.provider)?;
        let mut run = lock(&self.shared.run);
        if run.is_some() {
            return Err(AgentError::Busy);
        }
        let token = CancellationToken::new();
        *run = Some(token.clone());
        Ok(token)
    }

    /// Pi's pre-flight check: a request without credentials is never sent (the provider
    /// would only answer 401, and the message would be written for nothing).
    fn check_auth(&self, provider: &str) -> Result<(), AgentError> {
        // A virtual model under a provider of its own needs none: its router's choice is
        // checked per request.
        let virtual_only = lock(&self.shared.state)
            .opts
            .registry
            .is_virtual_only_provider(provider);
        if virtual_only || self.has_credentials(provider) {
            Ok(())
        } else {
            Err(AgentError::NoApiKey(provider.to_string()))
        }
    }

    /// Pi's `agent_end.willRetry`: the run ended on a retryable error (not an overflow,
    /// which compaction handles), auto-retry is on, attempts are left and no abort came.
    fn will_retry(
        &self,
        last: Option<&AssistantMessage>,
        attempt: u32,
        token: &CancellationToken,
    ) -> bool {
        let Some(last) = last else { return false };
        if token.is_cancelled() || last.stop_reason != StopReason::Error {
            return false;
        }
        let (retry, window) = {
            let st = lock(&self.shared.state);
            let window = limits_model(&st).map_or(0, |m| m.context_window);
            (st.opts.retry, window)
        };
        retry.enabled
            && attempt < retry.max_retries
            && !is_context_overflow(last, window)
            && is_retryable_error(last.error_message.as_deref().unwrap_or_default())
    }

    async fn prompt_inner(
        &self,
        start: &InputMessage,
        token: &CancellationToken,
    ) -> Result<Option<AssistantMessage>, AgentError> {
        let mut initial = Vec::new();
        self.sync_loadout_tools();
        self.prepare_loadout().await;
        if let Some(sys) = self.pending_system_message() {
            initial.push(sys);
        }
        // Pi's `before_agent_start`: extension messages go after the prompt; a returned
        // system prompt replaces the whole prompt for this run.
        let run_start = match self.hooks() {
            Some(hooks) => {
                let prompt = self.system_prompt_text(initial.first());
                hooks.before_agent_start(start, &prompt).await
            }
            None => super::RunStart::default(),
        };
        // The starting message, then the extensions' messages (a custom starting message is
        // the first of those, as Pi records it).
        let mut custom = Vec::new();
        match start {
            InputMessage::User { text, images } => initial.push(user_message(text, images)),
            InputMessage::Custom(message) => custom.push(message.clone()),
        }
        custom.extend(run_start.messages);
        *lock(&self.shared.system_override) = run_start.system_prompt;
        let end = self.run_loop_with(initial, custom, token, None, None).await;
        let end = match end {
            Ok(end) => end,
            Err(e) => {
                *lock(&self.shared.system_override) = None;
                return Err(e);
            }
        };
        let mut outcome = self.finish_prompt(end, token).await;
        // Pi's `agent_before_settle`: handlers may write entries and ask for another run;
        // an aborted prompt settles at once.
        while let Ok(last) = &outcome {
            if token.is_cancelled() {
                break;
            }
            let stop = last.as_ref().map_or("stop", |m| m.stop_reason.as_str());
            let payload = json!({ "outcome": boundary::outcome_of(stop) });
            match self.run_boundary(Boundary::BeforeSettle, payload).await {
                Ok(true) if !token.is_cancelled() => {}
                Ok(_) => break,
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
            let (initial, custom) = self.take_all_queued();
            outcome = match self.run_loop_with(initial, custom, token, None, None).await {
                Ok(end) => self.finish_prompt(end, token).await,
                Err(e) => Err(e),
            };
        }
        *lock(&self.shared.system_override) = None;
        outcome
    }

    /// The queued steering and follow-up messages as a run's starting messages (a
    /// continuation after `agent_before_settle` answers them first).
    fn take_all_queued(&self) -> (Vec<Value>, Vec<Value>) {
        let mut initial = Vec::new();
        let mut custom = Vec::new();
        let mut queued = self.take_queued(true);
        queued.extend(self.take_queued(false));
        for message in queued {
            match message {
                InputMessage::User { text, images } => initial.push(user_message(&text, &images)),
                InputMessage::Custom(m) => custom.push(m),
            }
        }
        (initial, custom)
    }

    /// The prompt text the model gets on this branch (with `pending`, the system message
    /// about to be written): content and sections of every system message, folded as the
    /// providers fold them.
    fn system_prompt_text(&self, pending: Option<&Value>) -> String {
        let st = lock(&self.shared.state);
        let s = &st.session;
        let branch = s.branch_path();
        let path = SessionPath::of(s, &branch);
        let mut system = context::transcript::context_system_messages(&path);
        system.extend(pending.cloned());
        let Some(folded) = context::transcript::current_system_message(&system) else {
            return String::new();
        };
        let mut parts = vec![pi_engine::js::content_text(folded.get("content"), "\n")];
        if let Some(Value::Object(sections)) = folded.get("sections") {
            parts.extend(
                sections
                    .values()
                    .filter_map(Value::as_str)
                    .map(str::to_string),
            );
        }
        parts.retain(|p| !p.is_empty());
        parts.join("\n\n")
    }

    /// After a prompt's first run: Pi's recovery steps (compact and retry on overflow,
    /// retries of transient errors) and the threshold compaction.
    async fn finish_prompt(
        &self,
        mut end: LoopEnd,
        token: &CancellationToken,
    ) -> Result<Option<AssistantMessage>, AgentError> {
        let mut attempt: u32 = 0;
        let mut overflow_recovered = false;
        loop {
            let Some(last) = end.last.clone() else { break };
            if token.is_cancelled() {
                break;
            }
            let (window, max_tokens) = limits_model(&lock(&self.shared.state))
                .map_or((0, 0), |m| (m.context_window, m.max_tokens));
            let error_text = last.error_message.clone().unwrap_or_default();
            // Pi's `_checkCompaction` cases 1 and 2: a context overflow, or a length stop
            // below the model's output limit (context pressure), gets one compact-and-retry.
            let overflow = is_context_overflow(&last, window);
            let recoverable_length = last.stop_reason == StopReason::Length
                && max_tokens > 0
                && last.usage.output < max_tokens;
            if (overflow || recoverable_length) && self.auto_compaction() {
                let will_retry = last.stop_reason != StopReason::Stop;
                if !will_retry {
                    let _ = self
                        .compact_inner(CompactionReason::Overflow, None, token, false)
                        .await;
                    return Ok(end.last);
                }
                if overflow_recovered {
                    let msg = if overflow {
                        "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
                    } else {
                        "Truncated response recovery failed after one compact-and-retry attempt."
                    };
                    self.emit(Event::CompactionEnd {
                        reason: "overflow".into(),
                        result: None,
                        aborted: false,
                        will_retry: false,
                        error_message: Some(msg.into()),
                    });
                    break;
                }
                overflow_recovered = true;
                self.hide_failed(end.last_entry.as_deref())?;
                if self
                    .compact_inner(CompactionReason::Overflow, None, token, true)
                    .await
                    .is_err()
                {
                    return Ok(end.last);
                }
                end = self.run_loop(token, None, last).await?;
                continue;
            }
            if last.stop_reason != StopReason::Error {
                break;
            }
            let retry = lock(&self.shared.state).opts.retry;
            if !retry.enabled || !is_retryable_error(&error_text) || attempt >= retry.max_retries {
                if attempt > 0 {
                    self.emit(Event::AutoRetryEnd {
                        success: false,
                        attempt,
                        final_error: Some(error_text),
                    });
                }
                break;
            }
            attempt += 1;
            let delay = delay_ms(retry.base_delay_ms, attempt, retry.max_agent_delay_ms);
            self.emit(Event::AutoRetryStart {
                attempt,
                max_attempts: retry.max_retries,
                delay_ms: delay,
                error_message: if error_text.is_empty() {
                    "Unknown error".to_string()
                } else {
                    error_text.clone()
                },
            });
            self.hide_failed(end.last_entry.as_deref())?;
            let wait = CancellationToken::new();
            *lock(&self.shared.retry_wait) = Some(wait.clone());
            let cancelled = tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(delay)) => false,
                _ = wait.cancelled() => true,
                _ = token.cancelled() => true,
            };
            *lock(&self.shared.retry_wait) = None;
            if cancelled {
                self.emit(Event::AutoRetryEnd {
                    success: false,
                    attempt,
                    final_error: Some("Retry cancelled".into()),
                });
                break;
            }
            end = self.run_loop(token, Some(attempt), last).await?;
        }
        if let Some(last) = end.last.as_ref() {
            if !token.is_cancelled() && last.stop_reason != StopReason::Aborted {
                self.maybe_threshold_compaction(last, token).await;
            }
        }
        Ok(end.last)
    }

    /// Hides a failed attempt from the model: it stays in the file, and a `context_edit`
    /// with a `null` replacement removes it from the projection (Pi's
    /// `_omitRecoveryAttempt`).
    fn hide_failed(&self, entry_id: Option<&str>) -> Result<(), AgentError> {
        let Some(id) = entry_id else { return Ok(()) };
        let entry = NewEntry::ContextEdit {
            target_id: id.to_string(),
            replacement: Value::Null,
        };
        let line = {
            let mut st = lock(&self.shared.state);
            let new_id = append_locked(&mut st, &entry)?;
            st.session
                .find(&new_id)
                .map(|idx| st.session.entry_value(idx))
        };
        if let Some(v) = line {
            self.emit(Event::EntryAppended { entry: v });
        }
        Ok(())
    }

    /// The system message to write before the next user message: the whole prompt when the
    /// branch's context has none yet (a new session, or a branch that starts before it);
    /// after `/reload` picked up new context files or skills, a patch of the sections that
    /// differ from the branch's prompt (as Pi diffs before a request); else nothing.
    fn pending_system_message(&self) -> Option<Value> {
        let st = lock(&self.shared.state);
        let current = {
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            let system = context::transcript::context_system_messages(&path);
            if !system.is_empty() && !st.opts.prompt.reloaded {
                return None;
            }
            context::transcript::current_system_message(&system)
        };
        let cwd = st.opts.cwd.display().to_string();
        let tools = super::prepare_loadout::declared_tools(&st);
        let full = prompt::system_message(&tools, &cwd, &st.opts.prompt, now_millis());
        drop(st);
        match current {
            None => Some(full),
            Some(current) => self.keep_loaded_tools(prompt::sections_patch(&current, &full)?),
        }
    }

    /// A prompt patch without the removal of tools the loadout still offers (loaded by
    /// `tool_search`, so not among the session's tools); `None` when nothing else is left.
    fn keep_loaded_tools(&self, mut patch: Value) -> Option<Value> {
        let Some(loadout) = self.tool_loadout() else {
            return Some(patch);
        };
        let m = patch.as_object_mut()?;
        if let Some(Value::Array(removed)) = m.get_mut("toolsRemoved") {
            removed.retain(|t| {
                !t.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| loadout.keeps(n))
            });
            if removed.is_empty() {
                m.remove("toolsRemoved");
            }
        }
        let changes = ["sections", "toolsRemoved", "toolsAdded"];
        changes.iter().any(|k| m.contains_key(*k)).then_some(patch)
    }

    /// Makes the loadout's tool set the session's when it changed (MCP servers connected or
    /// changed their tools, `/mcp` changes), with the prompt rebuilt for it; the patch is
    /// written before the next request. Whether it changed.
    fn sync_loadout_tools(&self) -> bool {
        let Some(loadout) = self.tool_loadout() else {
            return false;
        };
        let mut st = lock(&self.shared.state);
        let Some(tools) = loadout.current_tools(&st.opts.tools) else {
            return false;
        };
        let gone: Vec<String> = st
            .opts
            .tools
            .iter()
            .filter(|t| !tools.iter().any(|n| n.name() == t.name()))
            .map(|t| t.name().to_string())
            .collect();
        st.registered
            .retain(|t| !gone.iter().any(|g| g == t.name()));
        for tool in &tools {
            match st.registered.iter_mut().find(|t| t.name() == tool.name()) {
                Some(slot) => *slot = tool.clone(),
                None => st.registered.push(tool.clone()),
            }
        }
        st.opts.tools = tools;
        prompt::rebuild_prompt(&mut st);
        true
    }

    /// Before a request inside a run: when the loadout's tool set changed since the last one,
    /// the system message declaring the difference.
    async fn declare_tool_set_changes(&self) -> Result<Option<Value>, AgentError> {
        let synced = self.sync_loadout_tools();
        // The active tools may have changed since the last request (`pi.setActiveTools()`,
        // a late registration): the `prepareLoadout` hooks run again.
        if !self.prepare_loadout().await && !synced {
            return Ok(None);
        }
        let Some(message) = self.pending_system_message() else {
            return Ok(None);
        };
        self.emit_and_persist(&message)?;
        Ok(Some(message))
    }

    /// Pi's `declareToolChanges` for tools loaded during the session: before a request, the
    /// tools the loadout loaded that the branch does not declare yet go into a system message
    /// `{role, content: "", timestamp, toolsAdded}`, written like any message.
    fn declare_loaded_tools(&self) -> Result<Option<Value>, AgentError> {
        let Some(loadout) = self.tool_loadout() else {
            return Ok(None);
        };
        let declared: Vec<String> = {
            let st = lock(&self.shared.state);
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            let system = context::transcript::context_system_messages(&path);
            context::transcript::current_system_message(&system)
                .and_then(|m| m.get("toolsAdded").and_then(Value::as_array).cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        };
        let loaded = loadout.before_request(&declared);
        if loaded.is_empty() {
            return Ok(None);
        }
        let declarations: Vec<Value> = loaded
            .iter()
            .map(|t| crate::tools::tool_declaration(t.as_ref()))
            .collect();
        let message = serde_json::json!({
            "role": "system",
            "content": "",
            "timestamp": now_millis(),
            "toolsAdded": declarations,
        });
        self.emit_and_persist(&message)?;
        Ok(Some(message))
    }

    /// Emits `message_start`, persists the message, then emits `message_end`: a client that
    /// sees `message_end` finds the message in the session file. (`message_end` comes even
    /// when the write failed; the error ends the run.) Returns the entry id.
    fn emit_and_persist(&self, message: &Value) -> Result<String, AgentError> {
        self.emit(Event::MessageStart {
            message: message.clone(),
        });
        let appended = self.append(NewEntry::Message {
            message: message.clone(),
        });
        self.emit(Event::MessageEnd {
            message: message.clone(),
        });
        appended
    }

    /// Writes a steering or follow-up message as the loop takes it, returning it as
    /// `agent_end` lists it.
    fn deliver_queued(&self, queued: InputMessage) -> Result<Value, AgentError> {
        match queued {
            InputMessage::User { text, images } => {
                let m = user_message(&text, &images);
                self.emit_and_persist(&m)?;
                Ok(m)
            }
            InputMessage::Custom(message) => Ok(self.record_custom_message(&message)?.1),
        }
    }

    /// Pi's `runLoop` (with `agent_start`/`turn_start` first) again after `failed`: a retry
    /// of a transient error or after an overflow compaction.
    async fn run_loop(
        &self,
        token: &CancellationToken,
        retry_attempt: Option<u32>,
        failed: AssistantMessage,
    ) -> Result<LoopEnd, AgentError> {
        self.run_loop_with(Vec::new(), Vec::new(), token, retry_attempt, Some(failed))
            .await
    }

    /// Pi's `runLoop`: `initial` holds the prompt messages, `custom` the extension messages
    /// written after them; `failed` is the response a retry replaces.
    async fn run_loop_with(
        &self,
        initial: Vec<Value>,
        custom: Vec<Value>,
        token: &CancellationToken,
        retry_attempt: Option<u32>,
        mut failed: Option<AssistantMessage>,
    ) -> Result<LoopEnd, AgentError> {
        // A run started by a message (not a retry): its first request answers that message.
        let prompted = !initial.is_empty() || !custom.is_empty();
        self.emit(Event::AgentStart);
        self.emit(Event::TurnStart);
        let mut new_messages: Vec<Value> = Vec::new();
        for m in initial {
            self.emit_and_persist(&m)?;
            new_messages.push(m);
        }
        for m in &custom {
            new_messages.push(self.record_custom_message(m)?.1);
        }
        let mut pending: Vec<InputMessage> = self.take_queued(true);
        let mut first = true;
        let mut last_entry = None;
        let mut last = None;
        let mut result_entries: Vec<String> = Vec::new();
        let mut explicit_continue = false;
        'outer: loop {
            let mut has_more = true;
            while has_more || !pending.is_empty() {
                if !first {
                    self.compact_before_next_turn(token).await;
                    if pending.is_empty() {
                        pending = self.take_queued(true);
                    }
                    self.emit(Event::TurnStart);
                }
                // What a virtual model's router is told about this request.
                let reason = if failed.is_some() {
                    RouteReason::Retry
                } else if (first && prompted) || !pending.is_empty() {
                    RouteReason::User
                } else {
                    RouteReason::Continuation
                };
                first = false;
                if pending.iter().any(|m| m.user_text().is_some()) {
                    self.emit_queue_update();
                }
                for queued in pending.drain(..) {
                    new_messages.push(self.deliver_queued(queued)?);
                }
                if let Some(m) = self.declare_tool_set_changes().await? {
                    new_messages.push(m);
                }
                if let Some(m) = self.declare_loaded_tools()? {
                    new_messages.push(m);
                }
                let message = self.stream_turn(token, reason, failed.take()).await?;
                let value = assistant_value(&message);
                let appended = self.append(NewEntry::Message {
                    message: value.clone(),
                });
                // After the write, as for every message (see `emit_and_persist`).
                self.emit(Event::MessageEnd {
                    message: value.clone(),
                });
                last_entry = Some(appended?);
                new_messages.push(value.clone());
                if let (Some(attempt), false) = (
                    retry_attempt,
                    matches!(message.stop_reason, StopReason::Error | StopReason::Aborted),
                ) {
                    self.emit(Event::AutoRetryEnd {
                        success: true,
                        attempt,
                        final_error: None,
                    });
                }
                last = Some(message.clone());
                let message_entry = last_entry.clone().unwrap_or_default();
                if matches!(message.stop_reason, StopReason::Error | StopReason::Aborted) {
                    // Handlers still see the turn and their entries are written; an error or
                    // an abort ends the run whatever they ask for.
                    let payload = turn_end_payload(&value, &[], &message_entry, &[]);
                    self.run_boundary(Boundary::TurnEnd, payload).await?;
                    self.emit(Event::TurnEnd {
                        message: value,
                        tool_results: Vec::new(),
                    });
                    break 'outer;
                }
                let calls: Vec<_> = message.tool_calls().cloned().collect();
                let mut results = Vec::new();
                if !calls.is_empty() {
                    results = self
                        .execute_tools(&calls, message.stop_reason == StopReason::Length, token)
                        .await;
                    for r in &results {
                        result_entries.push(self.emit_and_persist(r)?);
                        new_messages.push(r.clone());
                    }
                }
                // Pi's actionable `turn_end`: before the turn_end event, after the writes.
                let payload = turn_end_payload(&value, &results, &message_entry, &result_entries);
                let extension_continue = self.run_boundary(Boundary::TurnEnd, payload).await?;
                result_entries.clear();
                self.emit(Event::TurnEnd {
                    message: value,
                    tool_results: results,
                });
                // The turn's tool results are written: held custom messages can follow.
                self.flush_after_turn()?;
                has_more = !calls.is_empty();
                pending = self.take_queued(true);
                // Natural work (tool results, steering) satisfies a continuation request.
                explicit_continue = extension_continue && !has_more && pending.is_empty();
            }
            let follow = self.take_queued(false);
            if !follow.is_empty() {
                pending = follow;
                explicit_continue = false;
                continue;
            }
            // Nothing else asked for a request: a `turn_end` continuation gets one that
            // answers the context as it is.
            if std::mem::take(&mut explicit_continue) {
                continue;
            }
            break;
        }
        let will_retry = self.will_retry(last.as_ref(), retry_attempt.unwrap_or(0), token);
        self.emit(Event::AgentEnd {
            messages: new_messages,
            will_retry,
        });
        Ok(LoopEnd { last, last_entry })
    }

    /// Streams one assistant response over the branch's current context. With a virtual
    /// model selected, its router picks the model that answers (`reason`, `failed`: see
    /// [`RouteReason`]).
    async fn stream_turn(
        &self,
        token: &CancellationToken,
        reason: RouteReason,
        failed: Option<AssistantMessage>,
    ) -> Result<AssistantMessage, AgentError> {
        let (model, context, options, level) = {
            let st = lock(&self.shared.state);
            let model = st.opts.model.clone().ok_or(AgentError::NoModel)?;
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            let block = st.opts.requests.block_images;
            let mut messages = Vec::new();
            let mut unreadable = Vec::new();
            // One context entry at a time: a huge context is held only as the typed messages
            // the provider takes, never also as JSON values, a copy and a converted copy.
            context::project_each(&path, |_, values| {
                let mut converted = context::convert_to_llm(&values);
                drop(values);
                if block {
                    converted.iter_mut().for_each(block_images);
                }
                read_context_messages(converted, &mut messages, &mut unreadable);
            });
            for problem in unreadable {
                self.emit(Event::Warning { message: problem });
            }
            let api_key = st.opts.api_key_for(&model.provider);
            let level = st.opts.thinking;
            let options = StreamOptions {
                headers: st
                    .opts
                    .registry
                    .resolve_headers(&model.provider, api_key.as_deref()),
                api_key,
                reasoning: (level != ThinkingLevel::Off).then_some(level),
                thinking_budgets: st.opts.requests.thinking_budgets,
                client: st.opts.requests.client.clone(),
                session_id: s.session_id(),
                cancel: token.child_token(),
                ..Default::default()
            };
            (
                model,
                Context {
                    system_prompt: None,
                    messages,
                    tools: Vec::new(),
                },
                options,
                level,
            )
        };
        let context = self.shaped_context(context).await;
        let (model, options, level) = if model.is_virtual() {
            match self
                .route(&model, level, reason, failed.as_ref(), &context.messages)
                .await
            {
                Ok(dispatch) => {
                    let options = self.options_for(&dispatch.model, dispatch.level, options);
                    (dispatch.model, options, dispatch.level)
                }
                Err(error) => return Ok(self.unrouted(&model, level, error)),
            }
        } else {
            (model, options, level)
        };
        let hooks = self.hooks();
        let mut options = StreamOptions {
            provider_hooks: hooks.as_ref().and_then(|h| h.provider_hooks()),
            ..options
        };
        super::hooks::apply_provider_headers(hooks.as_deref(), &mut options).await;
        let mut stream = llm::stream(&model, context, options);
        let mut started = false;
        let mut final_message = None;
        while let Some(ev) = stream.next().await {
            match &ev {
                llm::AssistantMessageEvent::Start { partial } => {
                    started = true;
                    self.emit(Event::MessageStart {
                        message: assistant_value(partial),
                    });
                }
                llm::AssistantMessageEvent::Done { message, .. }
                | llm::AssistantMessageEvent::Error { error: message, .. } => {
                    final_message = Some(message.clone());
                }
                other => {
                    if let Some(u) = message_update(other) {
                        self.emit(u);
                    }
                }
            }
        }
        let mut message = final_message.unwrap_or_else(|| {
            let mut m =
                AssistantMessage::empty(&model.api, &model.provider, &model.id, now_millis());
            m.stop_reason = StopReason::Error;
            m.error_message = Some("Provider stream ended without a result".into());
            m
        });
        message.thinking_level = Some(level);
        if !started {
            self.emit(Event::MessageStart {
                message: assistant_value(&message),
            });
        }
        // `message_end` is the caller's, once the message is written.
        Ok(message)
    }

    /// `options` for the physical model a router chose: its key, headers and level.
    fn options_for(
        &self,
        model: &Model,
        level: ThinkingLevel,
        options: StreamOptions,
    ) -> StreamOptions {
        let st = lock(&self.shared.state);
        let api_key = st.opts.api_key_for(&model.provider);
        StreamOptions {
            headers: st
                .opts
                .registry
                .resolve_headers(&model.provider, api_key.as_deref()),
            api_key,
            reasoning: (level != ThinkingLevel::Off).then_some(level),
            ..options
        }
    }

    /// The error response of a request whose routing failed: it names the virtual model,
    /// as no physical model was asked.
    fn unrouted(&self, model: &Model, level: ThinkingLevel, error: String) -> AssistantMessage {
        let mut message =
            AssistantMessage::empty(&model.api, &model.provider, &model.id, now_millis());
        message.stop_reason = StopReason::Error;
        message.error_message = Some(error);
        message.thinking_level = Some(level);
        self.emit(Event::MessageStart {
            message: assistant_value(&message),
        });
        message
    }

    /// The request's context as extensions shape it: `context` handlers may replace the
    /// conversation (the system messages stay ahead of it), `context_with_system` handlers
    /// then the whole transcript, and a `before_agent_start` system prompt replaces the
    /// prompt text while the tools stay declared.
    async fn shaped_context(&self, mut context: Context) -> Context {
        let Some(hooks) = self.hooks() else {
            return context;
        };
        if hooks.wants_context() {
            let (system, conversation): (Vec<AgentMessage>, Vec<AgentMessage>) = context
                .messages
                .into_iter()
                .partition(|m| matches!(m, AgentMessage::System(_)));
            let values: Vec<Value> = conversation
                .iter()
                .filter_map(|m| serde_json::to_value(m).ok())
                .collect();
            context.messages = system;
            match hooks.context(values).await {
                Some(replaced) => {
                    let mut unreadable = Vec::new();
                    read_context_messages(replaced, &mut context.messages, &mut unreadable);
                    for problem in unreadable {
                        self.emit(Event::Warning {
                            message: format!("context handler: {problem}"),
                        });
                    }
                }
                None => context.messages.extend(conversation),
            }
        }
        if hooks.wants_context_with_system() {
            // The whole transcript, prompt and tool declarations included: what the
            // handlers return is the request's, as they left it.
            let values: Vec<Value> = context
                .messages
                .iter()
                .filter_map(|m| serde_json::to_value(m).ok())
                .collect();
            if let Some(replaced) = hooks.context_with_system(values).await {
                let mut messages = Vec::new();
                let mut unreadable = Vec::new();
                read_context_messages(replaced, &mut messages, &mut unreadable);
                for problem in unreadable {
                    self.emit(Event::Warning {
                        message: format!("context_with_system handler: {problem}"),
                    });
                }
                context.messages = messages;
            }
        }
        super::prepare_loadout::hide_declarations(
            &mut context.messages,
            &self.hidden_declarations(),
        );
        let forced = lock(&self.shared.system_override).clone();
        if let Some(prompt) = forced {
            context.tools = llm::transform::normalize_context(&context).tools;
            context
                .messages
                .retain(|m| !matches!(m, AgentMessage::System(_)));
            context.system_prompt = Some(prompt);
        }
        context
    }

    /// Runs an assistant message's tool calls, results in call order: concurrently, or one
    /// call after another (start, checks, execution, end) when one of them names a tool
    /// with `executionMode: "sequential"`, as Pi's agent loop does.
    async fn execute_tools(
        &self,
        calls: &[pi_formats::message::ToolCall],
        truncated: bool,
        token: &CancellationToken,
    ) -> Vec<Value> {
        let sequential = {
            let st = lock(&self.shared.state);
            // Registered tools too: a `deferred` one `tool_search` loaded is not among the
            // session's own active tools.
            calls.iter().any(|call| {
                st.opts
                    .tools
                    .iter()
                    .chain(&st.registered)
                    .any(|tool| tool.name() == call.name && tool.sequential())
            })
        };
        if !sequential {
            return self.execute_tool_batch(calls, truncated, token).await;
        }
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            results.extend(
                self.execute_tool_batch(std::slice::from_ref(call), truncated, token)
                    .await,
            );
        }
        results
    }

    /// Runs a batch of tool calls: `tool_execution_start` for each in order, execution in
    /// parallel (each `tool_execution_end` when it finishes), results in call order.
    async fn execute_tool_batch(
        &self,
        calls: &[pi_formats::message::ToolCall],
        truncated: bool,
        token: &CancellationToken,
    ) -> Vec<Value> {
        let (tools, ctx) = {
            let st = lock(&self.shared.state);
            let mut ctx = ToolContext::new(st.opts.cwd.clone());
            ctx.shell_path = st.opts.shell.shell_path.clone();
            ctx.shell_command_prefix = st.opts.shell.command_prefix.clone();
            ctx.bin_dir = st.opts.shell.bin_dir.clone();
            let model = st.opts.model.as_ref();
            let file = st.persist.file.as_ref().map(|p| p.display().to_string());
            ctx.env = ToolContext::session_env(
                &st.session.session_id().unwrap_or_default(),
                file.as_deref(),
                model.map(|m| (m.provider.as_str(), m.id.as_str())),
                Some(st.opts.thinking.as_str()),
            );
            ctx.model = model.map(|m| crate::tools::ToolModelInfo {
                id: m.id.clone(),
                supports_images: m.supports_images(),
            });
            ctx.session = Some(Arc::new(self.clone()));
            (st.opts.tools.clone(), ctx)
        };
        struct Done {
            call: pi_formats::message::ToolCall,
            output: ToolOutput,
            duration: Option<u64>,
            /// The calls the tool made through other tools (Pi's `nestedCalls`).
            nested: Option<Value>,
            /// The summed usage of those calls' results.
            nested_usage: Option<Value>,
        }
        let mut futures = Vec::new();
        let mut immediate: Vec<Option<Done>> = Vec::new();
        for call in calls {
            self.emit(Event::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
                parent_tool_call_id: None,
            });
            let prepared: Result<(Arc<dyn Tool>, Value), ToolOutput> = if truncated {
                Err(ToolError::new(format!("Tool call \"{}\" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments.", call.name)).into_output())
            } else if token.is_cancelled() {
                Err(ToolError::aborted().into_output())
            } else {
                let found = match tools.iter().find(|t| t.name() == call.name) {
                    Some(tool) => Some(tool.clone()),
                    // A tool loaded during the session (`tool_search`), declared on this branch.
                    None => match self.tool_loadout() {
                        Some(loadout) => loadout.resolve(&call.name).await,
                        None => None,
                    },
                };
                match found {
                    None => {
                        Err(ToolError::new(format!("Tool {} not found", call.name)).into_output())
                    }
                    Some(tool) => {
                        let args = tool.prepare_arguments(call.arguments.clone());
                        match validate_tool_arguments(&call.name, tool.parameters(), &args) {
                            Ok(v) => Ok((tool.clone(), v)),
                            Err(e) => Err(e.into_output()),
                        }
                    }
                }
            };
            // Pi's `beforeToolCall`: extension `tool_call` handlers may block the call.
            let prepared = match (prepared, self.hooks()) {
                (Ok((tool, args)), Some(hooks)) => {
                    match hooks.tool_call(&call.id, None, &call.name, &args).await {
                        Some(reason) => Err(ToolError::new(reason).into_output()),
                        None => Ok((tool, args)),
                    }
                }
                (other, _) => other,
            };
            match prepared {
                Err(output) => {
                    self.emit_tool_end(call, &output, None);
                    immediate.push(Some(Done {
                        call: call.clone(),
                        output,
                        duration: None,
                        nested: None,
                        nested_usage: None,
                    }));
                }
                Ok((tool, args)) => {
                    immediate.push(None);
                    let this = self.clone();
                    let mut ctx = ctx.clone();
                    let nested_calls = Arc::new(crate::tools::NestedCallRecorder::default());
                    ctx.nested_calls = Some(nested_calls.clone());
                    let call = call.clone();
                    let cancel = token.child_token();
                    futures.push(async move {
                        let started = Instant::now();
                        let on_update = {
                            let this = this.clone();
                            let call = call.clone();
                            move |partial: ToolOutput| {
                                this.emit(Event::ToolExecutionUpdate {
                                    tool_call_id: call.id.clone(),
                                    tool_name: call.name.clone(),
                                    args: call.arguments.clone(),
                                    partial_result: tool_output_json(&partial),
                                    parent_tool_call_id: None,
                                });
                            }
                        };
                        let output = match tool
                            .execute(&call.id, args.clone(), &ctx, cancel, &on_update)
                            .await
                        {
                            Ok(o) => o,
                            Err(e) => e.into_output(),
                        };
                        let duration = started.elapsed().as_millis() as u64;
                        let output = this
                            .reshaped_result(&call.id, None, &call.name, &args, output)
                            .await;
                        this.emit_tool_end(&call, &output, Some(duration));
                        Done {
                            call,
                            output,
                            duration: Some(duration),
                            nested: nested_calls.snapshot(),
                            nested_usage: nested_calls.total_usage(),
                        }
                    });
                }
            }
        }
        let mut executed = join_all(futures).await.into_iter();
        immediate
            .into_iter()
            .filter_map(|slot| slot.or_else(|| executed.next()))
            .map(|d| {
                let mut m = Map::new();
                m.insert("role".into(), "toolResult".into());
                m.insert("toolCallId".into(), d.call.id.clone().into());
                m.insert("toolName".into(), d.call.name.clone().into());
                m.insert("content".into(), d.output.content_json());
                if let Some(details) = &d.output.details {
                    m.insert("details".into(), details.clone());
                }
                // The tool's own usage plus that of its nested calls, at every depth.
                let usage = match (&d.output.usage, &d.nested_usage) {
                    (Some(own), Some(nested)) => Some(crate::tools::combine_usage(own, nested)),
                    (own, nested) => own.clone().or_else(|| nested.clone()),
                };
                if let Some(usage) = usage {
                    m.insert("usage".into(), usage);
                }
                m.insert("isError".into(), d.output.is_error.into());
                if let Some(ms) = d.duration {
                    m.insert("durationMs".into(), ms.into());
                }
                m.insert("timestamp".into(), now_millis().into());
                if let Some(nested) = d.nested {
                    m.insert("nestedCalls".into(), nested);
                }
                Value::Object(m)
            })
            .collect()
    }

    /// Pi's `afterToolCall`: `tool_result` handlers may replace the content, details,
    /// structured content, error flag or usage of a result before it is recorded.
    pub(super) async fn reshaped_result(
        &self,
        call_id: &str,
        parent: Option<&str>,
        tool_name: &str,
        args: &Value,
        mut output: ToolOutput,
    ) -> ToolOutput {
        let Some(hooks) = self.hooks() else {
            return output;
        };
        let Some(patch) = hooks
            .tool_result(call_id, parent, tool_name, args, &tool_output_json(&output))
            .await
        else {
            return output;
        };
        if let Some(content) = patch.get("content").and_then(Value::as_array) {
            output.content = content
                .iter()
                .filter_map(crate::tools::ContentBlock::from_json)
                .collect();
        }
        if let Some(details) = patch.get("details") {
            output.details = Some(details.clone()).filter(|d| !d.is_null());
        }
        if let Some(is_error) = patch.get("isError").and_then(Value::as_bool) {
            output.is_error = is_error;
        }
        // Structured content replaced, or dropped with replaced content (it may no longer
        // match); usage replaced.
        match patch.get("structuredContent") {
            Some(structured) => {
                output.structured = Some(structured.clone()).filter(|v| !v.is_null())
            }
            None if patch.get("content").is_some() => output.structured = None,
            None => {}
        }
        if let Some(usage) = patch.get("usage") {
            output.usage = Some(usage.clone()).filter(|v| !v.is_null());
        }
        output
    }

    fn emit_tool_end(
        &self,
        call: &pi_formats::message::ToolCall,
        output: &ToolOutput,
        duration: Option<u64>,
    ) {
        self.emit(Event::ToolExecutionEnd {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            result: tool_output_json(output),
            is_error: output.is_error,
            duration_ms: duration,
            parent_tool_call_id: None,
        });
    }

    /// Pi's `_checkCompaction` case 3 after a run: compacts when the context exceeds
    /// `contextWindow - reserveTokens`. The size is the last response's usage, or an
    /// estimate when context edits changed the projection or the response has no usage.
    async fn maybe_threshold_compaction(&self, last: &AssistantMessage, token: &CancellationToken) {
        let due = {
            let st = lock(&self.shared.state);
            let Some(model) = limits_model(&st) else {
                return;
            };
            // A virtual model's limits are unknown until a physical model answered.
            if !st.auto_compaction || (model.is_virtual() && model.context_window == 0) {
                return;
            }
            let s = &st.session;
            let branch = s.branch_path();
            // Types, ids and timestamps come from the index: only the context
            // entries are parsed (by the projection), never the whole branch.
            let path = SessionPath::of(s, &branch);
            if compaction::latest_compaction_millis(&path)
                .is_some_and(|c| last.timestamp as f64 <= c)
            {
                return;
            }
            let usage = serde_json::to_value(&last.usage).unwrap_or(Value::Null);
            let tokens = compaction::context_tokens_after_response(
                &context::project(&path),
                &path,
                &usage,
                last.stop_reason == StopReason::Error,
            );
            let settings = compaction::CompactionSettings {
                enabled: true,
                ..st.opts.compaction
            };
            compaction::should_compact(tokens, model.context_window, &settings)
        };
        if due {
            let _ = self
                .compact_inner(CompactionReason::Threshold, None, token, false)
                .await;
        }
    }

    /// Pi's `_compactBeforeNextAssistantResponse`: between turns of one run, compacts when
    /// the projected context already exceeds the threshold.
    async fn compact_before_next_turn(&self, token: &CancellationToken) {
        let due = {
            let st = lock(&self.shared.state);
            let Some(model) = limits_model(&st) else {
                return;
            };
            if !st.auto_compaction || model.context_window == 0 {
                return;
            }
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            let tokens =
                compaction::estimate_projected_context_tokens(&context::project(&path), &path)
                    .tokens;
            let settings = compaction::CompactionSettings {
                enabled: true,
                ..st.opts.compaction
            };
            compaction::should_compact(tokens, model.context_window, &settings)
        };
        if due {
            let _ = self
                .compact_inner(CompactionReason::Threshold, None, token, false)
                .await;
        }
    }

    /// Manual compaction (`compact` command). Returns the `compaction_end` result object.
    pub async fn compact(&self, custom_instructions: Option<String>) -> Result<Value, AgentError> {
        if self.is_streaming() {
            return Err(AgentError::Other(
                "Cannot compact while the agent is running".into(),
            ));
        }
        let token = CancellationToken::new();
        *lock(&self.shared.compaction) = Some(token.clone());
        let r = self
            .compact_inner(CompactionReason::Manual, custom_instructions, &token, false)
            .await;
        *lock(&self.shared.compaction) = None;
        r
    }

    /// A compaction with the extensions' say: `session_before_compact` may cancel it or
    /// supply the summary, and `session_compact` / `session_compact_failed` report it.
    async fn compact_inner(
        &self,
        reason: CompactionReason,
        custom_instructions: Option<String>,
        token: &CancellationToken,
        will_retry: bool,
    ) -> Result<Value, AgentError> {
        let mut from_extension = false;
        let outcome = self
            .compact_steps(
                reason,
                custom_instructions,
                token,
                will_retry,
                &mut from_extension,
            )
            .await;
        if let Some(hooks) = self.hooks() {
            match &outcome {
                Ok((_, entry)) => {
                    hooks
                        .compaction_done(
                            "session_compact",
                            json!({"compactionEntry": entry, "fromExtension": from_extension,
                                "reason": reason.as_str(), "willRetry": will_retry}),
                        )
                        .await
                }
                Err(CompactFailed::Failed { message, aborted }) => {
                    let mut payload = json!({"reason": reason.as_str(), "aborted": aborted,
                        "willRetry": will_retry, "fromExtension": from_extension});
                    if !aborted {
                        payload["errorMessage"] = message.clone().into();
                    }
                    hooks
                        .compaction_done("session_compact_failed", payload)
                        .await
                }
                Err(CompactFailed::NotStarted(_)) => {}
            }
        }
        outcome.map(|(result, _)| result).map_err(|f| match f {
            CompactFailed::Failed { message, .. } => AgentError::Other(message),
            CompactFailed::NotStarted(e) => e,
        })
    }

    /// The compaction itself: the `compaction_end` result object and the appended entry.
    async fn compact_steps(
        &self,
        reason: CompactionReason,
        custom_instructions: Option<String>,
        token: &CancellationToken,
        will_retry: bool,
        from_extension: &mut bool,
    ) -> Result<(Value, Value), CompactFailed> {
        let auto = reason != CompactionReason::Manual;
        if auto {
            // Pi's automatic compaction starts (and emits anything) only when there is
            // something to compact.
            let st = lock(&self.shared.state);
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            if st.opts.model.is_none()
                || compaction::plan_compaction(&path, &st.opts.compaction).is_none()
            {
                return Err(CompactFailed::NotStarted(AgentError::Other(
                    "nothing to compact".into(),
                )));
            }
        }
        self.emit(Event::CompactionStart {
            reason: reason.as_str().into(),
        });
        let fail = |this: &Self, msg: String, aborted: bool| {
            this.emit(Event::CompactionEnd {
                reason: reason.as_str().into(),
                result: None,
                aborted,
                will_retry: false,
                error_message: Some(format!("Compaction failed: {msg}")),
            });
            lock(&this.shared.state).is_compacting = false;
            Err(CompactFailed::Failed {
                message: msg,
                aborted,
            })
        };
        let routed = match self.direct_route().await {
            Ok(routed) => routed,
            Err(e) => return fail(self, e, false),
        };
        let hooks = self.hooks().filter(|h| h.wants_compaction());
        let header_hooks = self.hooks();
        let (prep, hook_payload, summarizer, options, no_prep_reason) = {
            let mut st = lock(&self.shared.state);
            st.is_compacting = true;
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            let plan = compaction::plan_compaction(&path, &st.opts.compaction);
            // The summarizer's text is streamed from the path: a huge span is never
            // held as messages (unless an extension asks for them).
            let prep = plan.as_ref().map(|plan| plan.input(&path));
            let hook_payload = match (&plan, &hooks) {
                (Some(plan), Some(_)) => Some(json!({
                    "preparation": plan.preparation(&path).extension_view(),
                    "branchEntries": branch.entries.iter().map(|&i| s.entry_value(i)).collect::<Vec<_>>(),
                    "customInstructions": custom_instructions,
                    "reason": reason.as_str(),
                    "willRetry": will_retry,
                })),
                _ => None,
            };
            let no_prep_reason = compaction::no_preparation_reason(&path);
            let events = RetryEvents {
                sink: self.shared.sink.clone(),
                source: "compaction",
                reason: Some(reason.as_str().to_string()),
            };
            let (summarizer, reasoning) =
                match summarizer::for_state(&st, routed, token, events, header_hooks) {
                    Some((s, r)) => (Some(s), r),
                    None => (None, None),
                };
            let options = SummaryOptions {
                custom_instructions,
                reasoning,
                retry: st.opts.retry,
            };
            (prep, hook_payload, summarizer, options, no_prep_reason)
        };
        let Some(prep) = prep else {
            return fail(self, no_prep_reason.to_string(), false);
        };
        let decision = match (hooks, hook_payload) {
            (Some(hooks), Some(payload)) => hooks.before_compact(payload, token).await,
            _ => None,
        };
        if decision
            .as_ref()
            .and_then(|d| d.get("cancel"))
            .and_then(Value::as_bool)
            == Some(true)
        {
            return fail(self, "Compaction cancelled".into(), true);
        }
        let supplied = decision
            .as_ref()
            .and_then(|d| d.get("compaction"))
            .and_then(|c| CompactionOutcome::from_json(c, &prep));
        let result = match supplied {
            Some(custom) => {
                *from_extension = true;
                custom
            }
            None => {
                let Some(summarizer) = summarizer else {
                    return fail(self, "No model selected".into(), false);
                };
                match compaction::compact(&prep, &summarizer, &options).await {
                    Ok(r) => CompactionOutcome::from_summarizer(r),
                    Err(e) => {
                        let aborted = token.is_cancelled();
                        let msg = if aborted {
                            "Compaction cancelled".to_string()
                        } else {
                            e.to_string()
                        };
                        return fail(self, msg, aborted);
                    }
                }
            }
        };
        if token.is_cancelled() {
            return fail(self, "Compaction cancelled".into(), true);
        }
        let details = result.details.clone();
        let appended = {
            let mut st = lock(&self.shared.state);
            let entry = st.session.compaction_entry(
                result.summary.clone(),
                Some(result.first_kept_entry_id.clone()),
                result.tokens_before,
                details.clone(),
                // Pi records `fromHook: false` for its own summaries, `true` for a handler's.
                Some(*from_extension),
                result.usage.clone(),
            );
            let appended = append_locked(&mut st, &entry).map(|id| {
                let s = &st.session;
                let entry = s.find(&id).map(|i| s.entry_value(i)).unwrap_or_default();
                let branch = s.branch_path();
                let path = SessionPath::of(s, &branch);
                let after =
                    compaction::estimate_projected_context_tokens(&context::project(&path), &path)
                        .tokens;
                (entry, after)
            });
            st.is_compacting = false;
            appended
        };
        let (entry, estimated_after) = match appended {
            Ok(a) => a,
            Err(e) => return fail(self, e.to_string(), false),
        };
        let mut out = Map::new();
        out.insert("summary".into(), result.summary.into());
        out.insert("firstKeptEntryId".into(), result.first_kept_entry_id.into());
        out.insert("tokensBefore".into(), result.tokens_before.into());
        out.insert("estimatedTokensAfter".into(), estimated_after.into());
        if let Some(u) = result.usage {
            out.insert("usage".into(), u);
        }
        if let Some(d) = details {
            out.insert("details".into(), d);
        }
        let out = Value::Object(out);
        self.emit(Event::CompactionEnd {
            reason: reason.as_str().into(),
            result: Some(out.clone()),
            aborted: false,
            will_retry,
            error_message: None,
        });
        Ok((out, entry))
    }
}

/// The fields of Pi's `turn_end` boundary event the loop knows (`turnIndex` is added by
/// the extension host, which counts turns).
fn turn_end_payload(
    message: &Value,
    tool_results: &[Value],
    message_entry: &str,
    result_entries: &[String],
) -> Value {
    let stop = message
        .get("stopReason")
        .and_then(Value::as_str)
        .unwrap_or("stop");
    json!({
        "message": message,
        "toolResults": tool_results,
        "messageEntryId": message_entry,
        "toolResultEntryIds": result_entries,
        "outcome": boundary::outcome_of(stop),
    })
}

/// Why a compaction did not happen.
enum CompactFailed {
    /// Nothing was started (no `compaction_start`): nothing to compact.
    NotStarted(AgentError),
    /// Started and failed or was cancelled (`compaction_end` carried it).
    Failed { message: String, aborted: bool },
}

/// What a compaction records: the summarizer's result or one an extension's
/// `session_before_compact` handler supplied.
struct CompactionOutcome {
    summary: String,
    first_kept_entry_id: String,
    tokens_before: u64,
    details: Option<Value>,
    usage: Option<Value>,
}

impl CompactionOutcome {
    fn from_summarizer(result: compaction::CompactionResult) -> Self {
        Self {
            details: serde_json::to_value(&result.details).ok(),
            summary: result.summary,
            first_kept_entry_id: result.first_kept_entry_id,
            tokens_before: result.tokens_before,
            usage: result.usage,
        }
    }

    /// Reads a handler's `{summary, firstKeptEntryId?, tokensBefore?, usage?, details?}`;
    /// the preparation's values fill what it left out. `None` without a summary.
    fn from_json(value: &Value, prep: &compaction::CompactionInput) -> Option<Self> {
        let summary = value.get("summary")?.as_str()?.to_string();
        let present = |key: &str| value.get(key).cloned().filter(|v| !v.is_null());
        Some(Self {
            summary,
            first_kept_entry_id: value
                .get("firstKeptEntryId")
                .and_then(Value::as_str)
                .unwrap_or(&prep.first_kept_entry_id)
                .to_string(),
            tokens_before: value
                .get("tokensBefore")
                .and_then(Value::as_u64)
                .unwrap_or(prep.tokens_before),
            usage: present("usage"),
            details: present("details"),
        })
    }
}
