//! Points where extensions shape a run (Pi's `beforeToolCall` and `before_agent_start`),
//! as a trait so the agent loop knows nothing about how extensions run.

use serde_json::Value;

/// Hooks the agent loop calls; set with [`super::AgentSession::set_hooks`].
#[async_trait::async_trait]
pub trait AgentHooks: Send + Sync {
    /// Before a validated tool call runs: `Some(reason)` blocks it (the reason becomes the
    /// error result the model sees).
    async fn tool_call(&self, call_id: &str, tool_name: &str, input: &Value) -> Option<String>;

    /// After the user message of a prompt is written, before the model is asked: custom
    /// messages (`{customType, content, display, details}`) to add to the context.
    async fn before_agent_start(&self, prompt: &str, images: &[Value]) -> Vec<Value>;
}
