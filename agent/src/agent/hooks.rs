//! Points where extensions shape a run (Pi's `beforeToolCall`, `afterToolCall`,
//! `before_agent_start`, `context`, `context_with_system`, `before_provider_headers`), as a
//! trait so the agent loop knows nothing about how extensions run. Every method but
//! `tool_call` has a default that changes nothing, so a hook set implements only what it
//! uses.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::llm::StreamOptions;
use crate::protocol::Event;

/// Runs `before_provider_headers` over a request's options when a hook wants it: the
/// headers become the edited set and the ones set to `null` are left out of the request
/// (also when the wire API or the model adds them). Nothing is done for other hooks.
pub(crate) async fn apply_provider_headers(
    hooks: Option<&dyn AgentHooks>,
    options: &mut StreamOptions,
) {
    let Some(hooks) = hooks.filter(|h| h.wants_provider_headers()) else {
        return;
    };
    let Some(edited) = hooks.provider_headers(&options.headers).await else {
        return;
    };
    let mut headers = BTreeMap::new();
    for (name, value) in edited {
        match value {
            Value::String(v) => {
                headers.insert(name, v);
            }
            Value::Null => options.removed_headers.push(name),
            Value::Number(n) => {
                headers.insert(name, n.to_string());
            }
            Value::Bool(b) => {
                headers.insert(name, b.to_string());
            }
            _ => {}
        }
    }
    options.headers = headers;
}

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

    /// Whether [`AgentHooks::context_with_system`] wants the transcript.
    fn wants_context_with_system(&self) -> bool {
        false
    }

    /// After [`AgentHooks::context`], with the request's whole transcript, system messages
    /// (prompt, sections, tool declarations) included (Pi's `context_with_system`): `Some`
    /// is sent as it is, for this request only.
    async fn context_with_system(&self, _messages: Vec<Value>) -> Option<Vec<Value>> {
        None
    }

    /// Whether [`AgentHooks::provider_headers`] wants each request's headers.
    fn wants_provider_headers(&self) -> bool {
        false
    }

    /// Once per model request (the agent's and the summaries'), with the headers the
    /// request options carry (Pi's `before_provider_headers`): `Some` is the edited set, a
    /// string setting a header, `null` removing it from the request whoever adds it.
    async fn provider_headers(
        &self,
        _headers: &BTreeMap<String, String>,
    ) -> Option<serde_json::Map<String, Value>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers `before_provider_headers` with a fixed edit.
    struct Headers(serde_json::Map<String, Value>);

    #[async_trait::async_trait]
    impl AgentHooks for Headers {
        async fn tool_call(&self, _: &str, _: Option<&str>, _: &str, _: &Value) -> Option<String> {
            None
        }

        fn wants_provider_headers(&self) -> bool {
            true
        }

        async fn provider_headers(
            &self,
            headers: &BTreeMap<String, String>,
        ) -> Option<serde_json::Map<String, Value>> {
            let mut edited = self.0.clone();
            for (k, v) in headers {
                edited.entry(k.clone()).or_insert_with(|| v.clone().into());
            }
            Some(edited)
        }
    }

    #[tokio::test]
    async fn header_edits_set_remove_and_stringify() {
        let mut options = StreamOptions::default();
        options.headers.insert("x-keep".into(), "k".into());
        options.headers.insert("x-gone".into(), "g".into());
        let edit = serde_json::json!({"x-added": "a", "x-gone": null, "x-count": 5});
        let hooks = Headers(edit.as_object().cloned().unwrap_or_default());
        apply_provider_headers(Some(&hooks), &mut options).await;
        let expected: BTreeMap<String, String> =
            [("x-added", "a"), ("x-count", "5"), ("x-keep", "k")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(options.headers, expected);
        assert_eq!(options.removed_headers, ["x-gone"]);
        // Without a hook that wants them, the options stay as they are.
        let mut untouched = StreamOptions::default();
        untouched.headers.insert("x".into(), "1".into());
        apply_provider_headers(None, &mut untouched).await;
        assert_eq!(untouched.headers.len(), 1);
        assert!(untouched.removed_headers.is_empty());
    }
}
