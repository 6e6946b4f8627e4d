//! What the runtime tells its front ends: one typed [`Event`] per thing that happened.
//!
//! The serde form of each variant is Pi's wire JSON, byte for byte: `--mode json` and RPC
//! print it as it is, with `type` first and the fields in Pi's order (declaration order
//! here). Message payloads (`message`, `entry`, tool results) stay `serde_json::Value`: they
//! are Pi's message objects, passed through. The TUI matches on the variants instead of
//! parsing JSON back.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    AgentStart,
    /// The run is over; `messages` are the ones it added.
    #[serde(rename_all = "camelCase")]
    AgentEnd {
        messages: Vec<Value>,
        will_retry: bool,
    },
    /// After every run, also one that failed before `agent_start`: RPC clients and the TUI
    /// learn here that the agent is idle again (and why a run failed late).
    AgentSettled {
        aborted: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    TurnStart,
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        message: Value,
        tool_results: Vec<Value>,
    },
    MessageStart {
        message: Value,
    },
    /// A streaming step of the assistant message, without the cumulative partial (which
    /// would make every line grow with the message), plus the partial's usage.
    #[serde(rename_all = "camelCase")]
    MessageUpdate {
        usage: Value,
        assistant_message_event: Value,
    },
    MessageEnd {
        message: Value,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        tool_call_id: String,
        tool_name: String,
        args: Value,
        /// The call whose tool made this one (`ctx.executeTool()`, a codemode script).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        tool_call_id: String,
        tool_name: String,
        args: Value,
        partial_result: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        tool_call_id: String,
        tool_name: String,
        result: Value,
        is_error: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
    },
    /// The steering and follow-up queues as the agent holds them now.
    #[serde(rename_all = "camelCase")]
    QueueUpdate {
        steering: Vec<String>,
        follow_up: Vec<String>,
    },
    CompactionStart {
        reason: String,
    },
    /// `result` on success; `error_message` when it failed or was aborted.
    #[serde(rename_all = "camelCase")]
    CompactionEnd {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        aborted: bool,
        will_retry: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    /// A failed request will be retried after `delay_ms`.
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    #[serde(rename_all = "camelCase")]
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    /// A summary request (compaction or branch summary) failed and will be retried.
    #[serde(rename_all = "camelCase")]
    SummarizationRetryScheduled {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    /// The retried summary request starts; `source` is `compaction` (with its `reason`)
    /// or `branchSummary`.
    SummarizationRetryAttemptStart {
        source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    SummarizationRetryFinished,
    ThinkingLevelChanged {
        level: String,
    },
    SessionInfoChanged {
        name: String,
    },
    /// An entry the agent wrote that no message event carries (a `context_edit`).
    EntryAppended {
        entry: Value,
    },
    /// Output of a running `bash` command; `id` is the RPC command's.
    BashExecutionUpdate {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<Value>,
        delta: String,
    },
    /// Something went wrong that did not stop the run, e.g. a context message that cannot
    /// be read and was left out of a request. Also written to stderr.
    Warning {
        message: String,
    },
}

impl Event {
    /// The event's wire JSON as a value (for callers that keep events as JSON).
    pub fn to_value(&self) -> Value {
        // Every field is a string, number, bool or an already valid `Value`.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The wire name (`type`) of the event.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::AgentStart => "agent_start",
            Event::AgentEnd { .. } => "agent_end",
            Event::AgentSettled { .. } => "agent_settled",
            Event::TurnStart => "turn_start",
            Event::TurnEnd { .. } => "turn_end",
            Event::MessageStart { .. } => "message_start",
            Event::MessageUpdate { .. } => "message_update",
            Event::MessageEnd { .. } => "message_end",
            Event::ToolExecutionStart { .. } => "tool_execution_start",
            Event::ToolExecutionUpdate { .. } => "tool_execution_update",
            Event::ToolExecutionEnd { .. } => "tool_execution_end",
            Event::QueueUpdate { .. } => "queue_update",
            Event::CompactionStart { .. } => "compaction_start",
            Event::CompactionEnd { .. } => "compaction_end",
            Event::AutoRetryStart { .. } => "auto_retry_start",
            Event::AutoRetryEnd { .. } => "auto_retry_end",
            Event::SummarizationRetryScheduled { .. } => "summarization_retry_scheduled",
            Event::SummarizationRetryAttemptStart { .. } => "summarization_retry_attempt_start",
            Event::SummarizationRetryFinished => "summarization_retry_finished",
            Event::ThinkingLevelChanged { .. } => "thinking_level_changed",
            Event::SessionInfoChanged { .. } => "session_info_changed",
            Event::EntryAppended { .. } => "entry_appended",
            Event::BashExecutionUpdate { .. } => "bash_execution_update",
            Event::Warning { .. } => "warning",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every variant's JSON, as Pi writes it, survives a round trip byte for byte, and
    /// `kind` names the `type` it serializes to.
    #[test]
    fn wire_json_round_trips_byte_for_byte() {
        let lines = [
            r#"{"type":"agent_start"}"#,
            r#"{"type":"agent_end","messages":[{"role":"user","content":"hi","timestamp":1}],"willRetry":false}"#,
            r#"{"type":"agent_settled","aborted":false}"#,
            r#"{"type":"agent_settled","aborted":true,"error":"disk full"}"#,
            r#"{"type":"turn_start"}"#,
            r#"{"type":"turn_end","message":{"role":"assistant"},"toolResults":[]}"#,
            r#"{"type":"message_start","message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"message_update","usage":{"input":1},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"H"}}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[]}}"#,
            r#"{"type":"tool_execution_start","toolCallId":"t1","toolName":"bash","args":{"command":"ls"}}"#,
            r#"{"type":"tool_execution_update","toolCallId":"t1","toolName":"bash","args":{},"partialResult":{"content":[]}}"#,
            r#"{"type":"tool_execution_end","toolCallId":"t1","toolName":"bash","result":{"content":[]},"isError":false,"durationMs":12}"#,
            r#"{"type":"tool_execution_end","toolCallId":"t1","toolName":"nope","result":{"content":[]},"isError":true}"#,
            r#"{"type":"queue_update","steering":["a"],"followUp":[]}"#,
            r#"{"type":"compaction_start","reason":"manual"}"#,
            r#"{"type":"compaction_end","reason":"manual","result":{"summary":"s"},"aborted":false,"willRetry":false}"#,
            r#"{"type":"compaction_end","reason":"threshold","aborted":true,"willRetry":false,"errorMessage":"Compaction failed: x"}"#,
            r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"overloaded"}"#,
            r#"{"type":"auto_retry_end","success":true,"attempt":1}"#,
            r#"{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"overloaded"}"#,
            r#"{"type":"summarization_retry_scheduled","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"503"}"#,
            r#"{"type":"summarization_retry_attempt_start","source":"compaction","reason":"manual"}"#,
            r#"{"type":"summarization_retry_attempt_start","source":"branchSummary"}"#,
            r#"{"type":"summarization_retry_finished"}"#,
            r#"{"type":"thinking_level_changed","level":"high"}"#,
            r#"{"type":"session_info_changed","name":"n"}"#,
            r#"{"type":"entry_appended","entry":{"type":"context_edit"}}"#,
            r#"{"type":"bash_execution_update","id":"r1","delta":"x\n"}"#,
            r#"{"type":"bash_execution_update","delta":"x"}"#,
            r#"{"type":"warning","message":"m"}"#,
        ];
        for line in lines {
            let event: Event = match serde_json::from_str(line) {
                Ok(e) => e,
                Err(e) => panic!("{line}: {e}"),
            };
            let again = serde_json::to_string(&event).unwrap_or_default();
            assert_eq!(again, line);
            let kind = event.to_value()["type"].clone();
            assert_eq!(kind, json!(event.kind()), "{line}");
        }
    }
}
