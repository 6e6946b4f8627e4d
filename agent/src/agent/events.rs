//! Agent events as Pi's JSON (`--mode json` lines, RPC events).
//!
//! Events are plain `serde_json::Value`s: their shapes are Pi's wire format, and every mode
//! prints them as they are.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::llm::AssistantMessageEvent;

/// Where events go. Called from the agent's task; must not block.
pub type EventSink = Arc<dyn Fn(Value) + Send + Sync>;

/// A sink that drops everything.
pub fn null_sink() -> EventSink {
    Arc::new(|_| {})
}

/// `{"type": kind}` plus fields.
pub fn event(kind: &str, fields: Value) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), kind.into());
    if let Value::Object(f) = fields {
        m.extend(f);
    }
    Value::Object(m)
}

/// `message_update`: Pi's modes send the streaming event without the cumulative partial
/// (which would make every line grow with the message), plus the partial's usage.
/// `toolcall_start` carries the call's id and name instead.
pub fn message_update(ev: &AssistantMessageEvent) -> Option<Value> {
    let partial = match ev {
        AssistantMessageEvent::TextStart { partial, .. }
        | AssistantMessageEvent::TextDelta { partial, .. }
        | AssistantMessageEvent::TextEnd { partial, .. }
        | AssistantMessageEvent::ThinkingStart { partial, .. }
        | AssistantMessageEvent::ThinkingDelta { partial, .. }
        | AssistantMessageEvent::ThinkingEnd { partial, .. }
        | AssistantMessageEvent::ToolCallStart { partial, .. }
        | AssistantMessageEvent::ToolCallDelta { partial, .. }
        | AssistantMessageEvent::ToolCallEnd { partial, .. } => partial,
        _ => return None,
    };
    let mut inner = serde_json::to_value(ev).ok()?;
    if let Value::Object(m) = &mut inner {
        m.shift_remove("partial");
        if let AssistantMessageEvent::ToolCallStart { content_index, .. } = ev {
            if let Some(pi_formats::message::ContentBlock::ToolCall(tc)) =
                partial.content.get(*content_index)
            {
                m.insert("id".into(), tc.id.clone().into());
                m.insert("toolName".into(), tc.name.clone().into());
            }
        }
    }
    let usage = serde_json::to_value(&partial.usage).unwrap_or(Value::Null);
    Some(json!({"type": "message_update", "usage": usage, "assistantMessageEvent": inner}))
}
