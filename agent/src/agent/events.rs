//! Where the agent's [`Event`]s go, and the one event built from a provider stream step.

use std::sync::Arc;

use crate::llm::AssistantMessageEvent;
use crate::protocol::Event;

/// Where events go. Called from the agent's task; must not block.
pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;

/// A sink that drops everything.
pub fn null_sink() -> EventSink {
    Arc::new(|_| {})
}

/// `message_update`: Pi's modes send the streaming event without the cumulative partial
/// (which would make every line grow with the message), plus the partial's usage.
/// `toolcall_start` carries the call's id and name instead.
pub fn message_update(ev: &AssistantMessageEvent) -> Option<Event> {
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
    if let serde_json::Value::Object(m) = &mut inner {
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
    Some(Event::MessageUpdate {
        usage: serde_json::to_value(&partial.usage).unwrap_or_default(),
        assistant_message_event: inner,
    })
}
