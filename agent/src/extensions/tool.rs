//! A tool an extension registered, as an ordinary tool of the agent loop: declared to the
//! model with the extension's schema, validated like every tool, run in the sidecar. Its
//! `onUpdate` partial results become `tool_execution_update` events, and a thrown error an
//! error result with the message, as Pi's agent loop records it. While it runs, the tool's
//! `ctx.executeTool()` calls are served here (see [`super::execute_tool`]).

use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::execute_tool::{callable_infos, next_finished, NestedCalls, Running, ToolMessage};
use super::Extensions;
use crate::tools::{
    ContentBlock, LoadoutChanges, Tool, ToolContext, ToolError, ToolExposure, ToolNamespace,
    ToolOutput, ToolReach, ToolUpdateFn,
};

/// One registered extension tool.
pub struct ExtensionTool {
    name: String,
    label: String,
    description: String,
    parameters: Value,
    snippet: Option<String>,
    /// `promptGuidelines`, kept for the process's lifetime (the trait lends `&str`s).
    guidelines: Vec<&'static str>,
    /// `exposure` (`direct` when absent or unknown).
    exposure: ToolExposure,
    /// `defaultActive: false` registers it inactive.
    default_active: bool,
    /// `executionMode: "sequential"`.
    sequential: bool,
    namespace: Option<ToolNamespace>,
    annotations: Option<serde_json::Map<String, Value>>,
    /// It declares `reachesTools` (evaluated in the sidecar).
    reaches_tools: bool,
    /// The registering extension's `sourceInfo`.
    source_info: Option<Value>,
    /// It declares `prepareLoadout` (run in the sidecar when the active tools change).
    prepare_loadout: bool,
    extensions: Arc<Extensions>,
}

impl std::fmt::Debug for ExtensionTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ExtensionTool {
    /// The tool described by `info` (the sidecar's `load` answer).
    pub fn new(info: &Value, extensions: Arc<Extensions>) -> ExtensionTool {
        let text = |k: &str| info.get(k).and_then(Value::as_str).map(str::to_string);
        let name = text("name").unwrap_or_default();
        ExtensionTool {
            label: text("label").unwrap_or_else(|| name.clone()),
            description: text("description").unwrap_or_default(),
            parameters: info.get("parameters").cloned().unwrap_or(json!({})),
            snippet: text("promptSnippet"),
            guidelines: info
                .get("promptGuidelines")
                .and_then(Value::as_array)
                .map(|lines| {
                    lines
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|line| &*Box::leak(line.to_string().into_boxed_str()))
                        .collect()
                })
                .unwrap_or_default(),
            exposure: text("exposure")
                .as_deref()
                .and_then(ToolExposure::parse)
                .unwrap_or_default(),
            default_active: info.get("defaultActive").and_then(Value::as_bool) != Some(false),
            sequential: text("executionMode").as_deref() == Some("sequential"),
            namespace: info.get("namespace").and_then(ToolNamespace::from_json),
            annotations: info.get("annotations").and_then(Value::as_object).cloned(),
            source_info: info.get("sourceInfo").cloned(),
            reaches_tools: info.get("reachesTools").and_then(Value::as_bool) == Some(true),
            prepare_loadout: info.get("prepareLoadout").and_then(Value::as_bool) == Some(true),
            name,
            extensions,
        }
    }

    /// Whether registering it activates it (unless its exposure keeps it undeclared).
    pub fn default_active(&self) -> bool {
        self.default_active
    }

    /// Whether it declares a `prepareLoadout` hook.
    pub fn prepares_loadout(&self) -> bool {
        self.prepare_loadout
    }
}

/// A tool result from the extension's JSON (`content`, `details`, `isError`, `usage`).
pub(super) fn output_of(result: &Value) -> ToolOutput {
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| blocks.iter().filter_map(ContentBlock::from_json).collect())
        .unwrap_or_default();
    ToolOutput {
        content,
        details: result.get("details").cloned().filter(|d| !d.is_null()),
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
        structured: None,
        usage: result.get("usage").cloned().filter(|u| u.is_object()),
    }
}

#[async_trait::async_trait]
impl Tool for ExtensionTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn label(&self) -> &str {
        &self.label
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn prompt_snippet(&self) -> Option<&str> {
        self.snippet.as_deref()
    }

    fn prompt_guidelines(&self) -> &[&str] {
        &self.guidelines
    }

    fn exposure(&self) -> ToolExposure {
        self.exposure
    }

    fn sequential(&self) -> bool {
        self.sequential
    }

    fn namespace(&self) -> Option<&ToolNamespace> {
        self.namespace.as_ref()
    }

    fn annotations(&self) -> Option<&serde_json::Map<String, Value>> {
        self.annotations.as_ref()
    }

    fn declares_reach(&self) -> bool {
        self.reaches_tools
    }

    fn source_info(&self) -> Value {
        match &self.source_info {
            Some(info) => info.clone(),
            None => crate::config::SourceInfo::builtin_json(&self.name),
        }
    }

    fn prepares_loadout(&self) -> bool {
        self.prepare_loadout
    }

    async fn prepare_loadout(&self, loadout: &Value) -> Option<LoadoutChanges> {
        let mut params = loadout.clone();
        params["name"] = Value::String(self.name.clone());
        let changes = self
            .extensions
            .sidecar()
            .request("prepare_loadout", params)
            .await
            .ok()?;
        Some(LoadoutChanges::from_json(&changes))
    }

    async fn execute(
        &self,
        call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        // `ctx.sessionManager` inside the tool sees the assistant message that called it.
        self.extensions.sync_state().await;
        let sidecar = self.extensions.sidecar().clone();
        if let (true, Some(session)) = (self.reaches_tools, ctx.session.as_ref()) {
            // The tools the call may reach finish registering first (MCP servers still
            // connecting), as Pi's MCP extension waits in its `tool_call` handler.
            let wait = async {
                let answer = sidecar
                    .request("reaches_tools", json!({"name": self.name, "input": args}))
                    .await
                    .unwrap_or_else(|_| json!({"reach": "all"}));
                session
                    .wait_for_reach(&ToolReach::from_json(&answer["reach"]))
                    .await;
            };
            tokio::select! {
                _ = wait => {}
                _ = cancel.cancelled() => return Err(ToolError::aborted()),
            }
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ToolMessage>();
        self.extensions
            .updates()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(call_id.to_string(), tx);
        let callable = ctx
            .session
            .as_ref()
            .map(|s| s.callable_tools())
            .unwrap_or_default();
        let call = sidecar.request(
            "tool",
            json!({
                "name": self.name,
                "toolCallId": call_id,
                "params": args,
                "tools": callable_infos(&callable),
            }),
        );
        tokio::pin!(call);
        let mut nested = NestedCalls::new(call_id, ctx, cancel.clone(), sidecar.clone());
        let mut running = Running::new();
        let mut aborted = false;
        let outcome = loop {
            tokio::select! {
                outcome = &mut call => break outcome,
                Some(message) = rx.recv() => match message {
                    ToolMessage::Update(partial) => on_update(output_of(&partial)),
                    ToolMessage::Execute { request, params } => {
                        running.push(Box::pin(nested.start(request, params)));
                    }
                    ToolMessage::Abort { key } => nested.abort(&key),
                },
                Some(update) = nested.next_update() => nested.forward_update(update).await,
                finished = next_finished(&mut running) => nested.answer(finished).await,
                _ = cancel.cancelled(), if !aborted => {
                    aborted = true;
                    sidecar.tell("abort_tool", json!({"toolCallId": call_id})).await;
                }
            }
        };
        self.extensions
            .updates()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(call_id);
        let result = outcome.map_err(ToolError::new)?;
        Ok(output_of(&result))
    }
}
