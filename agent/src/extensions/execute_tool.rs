//! `ctx.executeTool(name, args, {signal, onUpdate})` and `ctx.tools` of a running extension
//! tool, as Pi 1.6.0 offers them (extensions.md "Calling Other Tools"). The sidecar asks the
//! host with an `execute_tool` request naming the calling tool call; the host runs the call
//! through the session's nested-call path (`ToolSession::run_nested_call`: validation,
//! `tool_call`/`tool_result` hooks, `tool_execution_*` events with `parentToolCallId`, the
//! `nestedCalls` record) as `<caller id>/<n>`, streams the nested tool's partial results back
//! (`execute_tool_update`) and answers with Pi's outcome `{toolCall, result, isError,
//! durationMs?}`. Failures are outcomes too, never errors: the call never rejects.
//!
//! The requests are served by the calling tool's own loop ([`super::ExtensionTool`]), which
//! holds what they need: the tool context (session, recorder) and the cancellation of the call.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;

use super::Sidecar;
use crate::agent::tool_output_json;
use crate::tools::{NestedCallRequest, Tool, ToolContext, ToolError, ToolOutput};

/// What the sidecar sends a running extension tool.
#[derive(Debug)]
pub(crate) enum ToolMessage {
    /// A partial result the tool reported (`onUpdate`).
    Update(Value),
    /// `ctx.executeTool()`: the sidecar's request id (to answer) and its parameters
    /// (`key`, `name`, `args`, `aborted`).
    Execute { request: Value, params: Value },
    /// The signal of the `executeTool` call `key` fired.
    Abort { key: Value },
}

/// `ctx.tools` as the sidecar lists them.
pub(super) fn callable_infos(tools: &[Arc<dyn Tool>]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name(),
                "label": t.label(),
                "description": t.description(),
                "parameters": t.parameters(),
            })
        })
        .collect()
}

/// Pi's outcome of a nested call: `{toolCall, result, isError, durationMs?}`.
fn outcome_json(
    call_id: &str,
    name: &str,
    args: &Value,
    output: &ToolOutput,
    duration_ms: Option<u64>,
) -> Value {
    let mut outcome = json!({
        "toolCall": {"type": "toolCall", "id": call_id, "name": name, "arguments": args},
        "result": tool_output_json(output),
        "isError": output.is_error,
    });
    if let Some(ms) = duration_ms {
        outcome["durationMs"] = ms.into();
    }
    outcome
}

/// The answer when no running tool can serve the call (it already ended, or it runs
/// outside a session), as Pi answers a context without nested calls.
pub(super) fn unavailable_outcome(caller_id: &str, params: &Value) -> Value {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let output =
        ToolError::new("Nested tool calls are not available in this context").into_output();
    outcome_json(&format!("{caller_id}/0"), name, &json!({}), &output, None)
}

/// The `executeTool` calls of one running extension tool call.
pub(super) struct NestedCalls<'a> {
    caller_id: &'a str,
    ctx: &'a ToolContext,
    /// The calling tool's cancellation; each nested call gets a child of it.
    cancel: CancellationToken,
    sidecar: Arc<Sidecar>,
    /// Calls made so far (the `n` of `<caller>/<n>`).
    made: usize,
    /// The cancellation of each running call, by the sidecar's key.
    running: HashMap<String, CancellationToken>,
    /// Partial results of the running calls, by key, for the caller's `onUpdate`.
    updates_tx: UnboundedSender<PartialUpdate>,
    updates_rx: UnboundedReceiver<PartialUpdate>,
}

/// A partial result of the running call with the sidecar's key.
type PartialUpdate = (Value, ToolOutput);

/// A finished nested call: the sidecar's request id, its key and Pi's outcome.
type Finished = (Value, Value, Value);

impl<'a> NestedCalls<'a> {
    pub(super) fn new(
        caller_id: &'a str,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
        sidecar: Arc<Sidecar>,
    ) -> NestedCalls<'a> {
        let (updates_tx, updates_rx) = tokio::sync::mpsc::unbounded_channel();
        NestedCalls {
            caller_id,
            ctx,
            cancel,
            sidecar,
            made: 0,
            running: HashMap::new(),
            updates_tx,
            updates_rx,
        }
    }

    /// Starts the call the sidecar asked for; push the future into the tool's set of running
    /// calls and hand its result to [`NestedCalls::answer`].
    pub(super) fn start(
        &mut self,
        request: Value,
        params: Value,
    ) -> impl std::future::Future<Output = Finished> + Send + 'a {
        self.made += 1;
        let call_id = format!("{}/{}", self.caller_id, self.made);
        let key = params.get("key").cloned().unwrap_or(Value::Null);
        let token = self.cancel.child_token();
        if params.get("aborted").and_then(Value::as_bool) == Some(true) {
            token.cancel();
        }
        self.running.insert(key.to_string(), token.clone());
        let (ctx, caller_id, updates) = (self.ctx, self.caller_id, self.updates_tx.clone());
        async move {
            let name = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let args = match params.get("args") {
                None | Some(Value::Null) => json!({}),
                Some(args) => args.clone(),
            };
            let Some(session) = ctx.session.clone() else {
                return (request, key, unavailable_outcome(caller_id, &params));
            };
            // Pi looks the name up among the tools callable at the time of the call.
            let tool = session
                .callable_tools()
                .into_iter()
                .find(|t| t.name() == name);
            let update_key = key.clone();
            let on_update = move |partial: ToolOutput| {
                let _ = updates.send((update_key.clone(), partial));
            };
            let call = NestedCallRequest {
                parent_call_id: caller_id,
                call_id: &call_id,
                name: &name,
                tool,
                args: args.clone(),
            };
            let outcome = session.run_nested_call(call, ctx, token, &on_update).await;
            let answer = outcome_json(&call_id, &name, &args, &outcome.output, outcome.duration_ms);
            (request, key, answer)
        }
    }

    /// The signal of the call `key` fired.
    pub(super) fn abort(&self, key: &Value) {
        if let Some(token) = self.running.get(&key.to_string()) {
            token.cancel();
        }
    }

    /// The next partial result of a running call, for [`NestedCalls::forward_update`].
    pub(super) async fn next_update(&mut self) -> Option<PartialUpdate> {
        self.updates_rx.recv().await
    }

    /// Passes a nested tool's partial result to the caller's `onUpdate`.
    pub(super) async fn forward_update(&self, (key, partial): PartialUpdate) {
        self.sidecar
            .tell(
                "execute_tool_update",
                json!({"key": key, "partial": tool_output_json(&partial)}),
            )
            .await;
    }

    /// Answers a finished call, after the partial results it reported before ending.
    pub(super) async fn answer(&mut self, (request, key, outcome): Finished) {
        while let Ok(update) = self.updates_rx.try_recv() {
            self.forward_update(update).await;
        }
        self.running.remove(&key.to_string());
        self.sidecar.answer(request, outcome).await;
    }
}

/// The running calls of one tool.
pub(super) type Running<'a> =
    FuturesUnordered<std::pin::Pin<Box<dyn std::future::Future<Output = Finished> + Send + 'a>>>;

/// Waits for the next finished call; pending forever while none runs, so it can sit in a
/// `select!` next to the tool's own call.
pub(super) async fn next_finished(running: &mut Running<'_>) -> Finished {
    match running.next().await {
        Some(finished) => finished,
        None => std::future::pending().await,
    }
}
