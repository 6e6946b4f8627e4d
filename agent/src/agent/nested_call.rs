//! Calls a tool makes while it runs (a codemode script's `tools.x()`, an extension tool's
//! `ctx.executeTool()`), run as Pi's session runs them: through argument validation and the
//! extensions' `tool_call` and `tool_result` hooks like a model-issued call, announced by
//! `tool_execution_start`/`_update`/`_end` events that carry `parentToolCallId`, and recorded
//! with their usage for the model-issued call's result message (`ctx.nested_calls`). They add
//! nothing to the transcript: the result goes back to the calling tool only.

use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::run::tool_output_json;
use super::AgentSession;
use crate::protocol::Event;
use crate::tools::{
    validate_tool_arguments, NestedCallRequest, NestedOutcome, ToolContext, ToolError, ToolOutput,
    ToolUpdateFn,
};

impl AgentSession {
    /// Runs `call` and returns what the calling tool receives. Never fails: an unknown tool, a
    /// validation error, a blocked call or a thrown error comes back as an error result.
    pub(crate) async fn run_nested_call(
        &self,
        call: NestedCallRequest<'_>,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> NestedOutcome {
        let name = call.name.to_string();
        let parent = Some(call.parent_call_id.to_string());
        let recorder = ctx.nested_calls.clone();
        let slot = recorder
            .as_ref()
            .map(|r| r.start(call.call_id, &name, &call.args));
        self.emit(Event::ToolExecutionStart {
            tool_call_id: call.call_id.to_string(),
            tool_name: name.clone(),
            args: call.args.clone(),
            parent_tool_call_id: parent.clone(),
        });
        let announce_update = |partial: ToolOutput| {
            self.emit(Event::ToolExecutionUpdate {
                tool_call_id: call.call_id.to_string(),
                tool_name: name.clone(),
                args: call.args.clone(),
                partial_result: tool_output_json(&partial),
                parent_tool_call_id: parent.clone(),
            });
            on_update(partial);
        };
        // A call of a sequential tool runs alone (see `super::nested_queue`).
        let sequential = call.tool.as_ref().is_some_and(|t| t.sequential());
        let admission = self
            .shared
            .nested_queue
            .admit(call.parent_call_id, call.call_id, sequential, &cancel)
            .await;
        let (output, duration_ms) = match admission {
            Some(_admission) => {
                self.validated_nested_call(&call, ctx, cancel, &announce_update)
                    .await
            }
            None => (ToolError::aborted().into_output(), None),
        };
        if let (Some(recorder), Some(slot)) = (&recorder, slot) {
            recorder.finish(slot, output.is_error, &output.texts());
        }
        // Nested results are not stored, so their usage counts only through the recorder.
        if let (Some(recorder), Some(usage)) = (&recorder, &output.usage) {
            recorder.add_usage(usage);
        }
        self.emit(Event::ToolExecutionEnd {
            tool_call_id: call.call_id.to_string(),
            tool_name: name,
            result: tool_output_json(&output),
            is_error: output.is_error,
            duration_ms,
            parent_tool_call_id: parent,
        });
        NestedOutcome {
            output,
            duration_ms,
        }
    }

    /// Lookup, validation, `tool_call`, execution and `tool_result`; the duration only when
    /// the tool ran.
    async fn validated_nested_call(
        &self,
        call: &NestedCallRequest<'_>,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> (ToolOutput, Option<u64>) {
        let NestedCallRequest {
            parent_call_id,
            call_id,
            name,
            tool,
            args,
        } = call;
        let Some(tool) = tool else {
            return (
                ToolError::new(format!("Tool {name} not found")).into_output(),
                None,
            );
        };
        if cancel.is_cancelled() {
            return (ToolError::aborted().into_output(), None);
        }
        let prepared = tool.prepare_arguments(args.clone());
        let args = match validate_tool_arguments(name, tool.parameters(), &prepared) {
            Ok(args) => args,
            Err(error) => return (error.into_output(), None),
        };
        if let Some(hooks) = self.hooks() {
            if let Some(reason) = hooks
                .tool_call(call_id, Some(parent_call_id), name, &args)
                .await
            {
                return (ToolError::new(reason).into_output(), None);
            }
        }
        let started = Instant::now();
        let output = match tool
            .execute(call_id, args.clone(), ctx, cancel, on_update)
            .await
        {
            Ok(output) => output,
            Err(error) => error.into_output(),
        };
        let duration = started.elapsed().as_millis() as u64;
        let output = self
            .reshaped_result(call_id, Some(parent_call_id), name, &args, output)
            .await;
        (output, Some(duration))
    }
}
