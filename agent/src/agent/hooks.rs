//! Points where extensions shape a run (Pi's `beforeToolCall`, `afterToolCall`,
//! `before_agent_start` and `context`), as a trait so the agent loop knows nothing about how
//! extensions run. Every method but `tool_call` has a default that changes nothing, so a
//! hook set implements only what it uses.

use serde_json::Value;

use crate::protocol::Event;

/// What `before_agent_start` handlers decided for a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunStart {
    /// Custom messages (`{customType, content, display, details}`) to add after the prompt.
    pub messages: Vec<Value>,
    /// A system prompt that replaces the whole prompt for this run.
    pub system_prompt: Option<String>,
}

/// Hooks the agent loop calls; set with [`super::AgentSession::set_hooks`].
#[async_trait::async_trait]
pub trait AgentHooks: Send + Sync {
    /// Before a validated tool call runs: `Some(reason)` blocks it (the reason becomes the
    /// error result the model sees, or the calling tool gets). `parent` is the call whose
    /// tool made this one (`ctx.executeTool()`, a codemode script).
    async fn tool_call(
        &self,
        call_id: &str,
        parent: Option<&str>,
        tool_name: &str,
        input: &Value,
    ) -> Option<String>;

    /// Before a run's starting message (a prompt, or an extension's custom message) is
    /// written. `system_prompt` is the prompt text the model would get.
    async fn before_agent_start(
        &self,
        _start: &super::InputMessage,
        _system_prompt: &str,
    ) -> RunStart {
        RunStart::default()
    }

    /// After a tool ran: `Some` replaces the result (`{content, details, structuredContent,
    /// isError, usage}`, each field optional) before it is recorded.
    async fn tool_result(
        &self,
        _call_id: &str,
        _parent: Option<&str>,
        _tool_name: &str,
        _input: &Value,
        _result: &Value,
    ) -> Option<Value> {
        None
    }

    /// The hooks around a model request's HTTP exchange (`before_provider_request`,
    /// `after_provider_response`), asked before each request; `None` when nothing listens.
    fn provider_hooks(&self) -> Option<std::sync::Arc<dyn crate::llm::ProviderHooks>> {
        None
    }

    /// Whether [`AgentHooks::context`] wants the messages (serializing them costs a pass
    /// over the context, so it is done only for a hook that uses them).
    fn wants_context(&self) -> bool {
        false
    }

    /// Before each model request, with the conversation without its system messages:
    /// `Some` replaces it for this request only.
    async fn context(&self, _messages: Vec<Value>) -> Option<Vec<Value>> {
        None
    }

    /// Whether [`AgentHooks::before_compact`] wants the preparation (building it reads the
    /// summarized messages and the branch, so it is done only for a hook that uses them).
    fn wants_compaction(&self) -> bool {
        false
    }

    /// Before a compaction is summarized (Pi's `session_before_compact`), with
    /// `{preparation, branchEntries, customInstructions, reason, willRetry}`: `{cancel: true}`
    /// stops it; `{compaction: {summary, firstKeptEntryId, tokensBefore, usage?, details?}}`
    /// is recorded instead of asking the model. `abort` fires when the compaction is
    /// aborted (the handlers' `event.signal`).
    async fn before_compact(
        &self,
        _payload: Value,
        _abort: &tokio_util::sync::CancellationToken,
    ) -> Option<Value> {
        None
    }

    /// After a compaction: `session_compact` with `{compactionEntry, fromExtension, reason,
    /// willRetry}` or `session_compact_failed` with `{reason, errorMessage?, aborted,
    /// willRetry, fromExtension}`.
    async fn compaction_done(&self, _event: &'static str, _payload: Value) {}

    /// Whether [`AgentHooks::before_tree`] is wanted (Pi emits `session_before_tree` only
    /// when a handler exists).
    fn wants_tree(&self) -> bool {
        false
    }

    /// Before a tree navigation moves the leaf (Pi's `session_before_tree`), with
    /// `{preparation}`: `{cancel: true}` stops it; `summary` (`{summary, details?,
    /// usage?}`) replaces the model's branch summary when one was asked for;
    /// `customInstructions`, `replaceInstructions` and `label` override the options.
    async fn before_tree(&self, _payload: Value) -> Option<Value> {
        None
    }

    /// After a tree navigation: `session_tree` with `{newLeafId, oldLeafId, summaryEntry?,
    /// fromExtension?}`.
    async fn tree_done(&self, _payload: Value) {}

    /// Routes a request made with a virtual model (Pi's `route(request, ctx)`), with the
    /// request Pi passes (`model`, `thinkingLevel`, `reason`, `previous`, `failed`,
    /// `state`, `messages`): `{provider, id, thinkingLevel?, state?, stateChanged}`, or why
    /// routing failed.
    async fn route(&self, request: Value) -> Result<Value, String> {
        let model = request.get("model").cloned().unwrap_or(Value::Null);
        Err(format!(
            "No router is registered for virtual model {}/{}",
            model.get("provider").and_then(Value::as_str).unwrap_or(""),
            model.get("id").and_then(Value::as_str).unwrap_or("")
        ))
    }

    /// Whether an extension handles the actionable boundary `event` (`turn_end`,
    /// `agent_before_settle`); only then is [`AgentHooks::boundary`] called.
    fn wants_boundary(&self, _event: &str) -> bool {
        false
    }

    /// Runs an actionable boundary's handlers, each seeing the proposal so far (Pi's
    /// `emitBoundary`): `{entries, continue}` as they left it. `payload` holds the event's
    /// fields and `context` (`{contextMessages, pendingMessages, canContinue}`).
    async fn boundary(&self, _event: &str, _payload: Value) -> Option<Value> {
        None
    }

    /// A boundary's proposal was refused (invalid entries, a continuation with nothing to
    /// answer): reported as Pi reports it, from `<boundary>`.
    fn boundary_error(&self, _event: &str, _message: &str) {}

    /// Every event the agent emits, in order. Must not block.
    fn observe(&self, _event: &Event) {}
}
