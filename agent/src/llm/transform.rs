//! What every provider does to the context before converting it to its wire format
//! (Pi's `normalizeContext` + `collapseSystemMessages` + `transformMessages`).
//!
//! * System messages are replayed into one leading prompt and tool set. None of the APIs
//!   implemented here accepts system messages mid-conversation, so later ones fold into it.
//! * Assistant messages that ended in `error`/`aborted` are dropped: they are incomplete
//!   turns, and replaying them makes some APIs reject the request.
//! * A tool call with no result before the next assistant/user message gets a synthetic
//!   error result "No result provided", because every API requires each call answered.
//! * Thinking from another model (provider, api or model differ) is dropped, and cross-model
//!   `thoughtSignature`s are stripped: signatures only verify for the model that made them.
//! * Cross-model tool-call ids pass through the provider's normaliser (Anthropic allows only
//!   `[a-zA-Z0-9_-]{1,64}`), and the matching results are rewritten.
//! * Images sent to a text-only model become a placeholder text.

use std::collections::{HashMap, HashSet};

use pi_formats::message::{
    AgentMessage, Content, ContentBlock, StopReason, Tool, ToolResultMessage, UserMessage,
};
use serde_json::{Map, Value};

use super::model::Model;
use super::Context;

const NON_VISION_USER_IMAGE_PLACEHOLDER: &str = "(image omitted: model does not support images)";
const NON_VISION_TOOL_IMAGE_PLACEHOLDER: &str =
    "(tool image omitted: model does not support images)";

/// The context with all system messages folded into one prompt and tool set. The
/// messages are borrowed: a huge context is not copied to be normalized.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NormalizedContext<'a> {
    /// The full system prompt text (content followed by sections), possibly empty.
    pub system_prompt: String,
    /// The tools available at the end of the transcript.
    pub tools: Vec<Tool>,
    /// User, assistant and tool-result messages, in order.
    pub messages: Vec<&'a AgentMessage>,
}

/// Fold `context.system_prompt`, `context.tools` and every system message in
/// `context.messages` into one prompt and tool set. Roles other than user, assistant and
/// toolResult are not LLM messages (the caller's `convert_to_llm` maps them) and are skipped.
pub fn normalize_context(context: &Context) -> NormalizedContext<'_> {
    let mut content_parts: Vec<String> = Vec::new();
    let mut sections: Map<String, Value> = Map::new();
    let mut tools: Vec<Tool> = Vec::new();
    let mut messages = Vec::new();

    if let Some(p) = context.system_prompt.as_deref().filter(|p| !p.is_empty()) {
        content_parts.push(p.to_string());
    }
    tools.extend(context.tools.iter().cloned());

    for m in &context.messages {
        match m {
            AgentMessage::System(s) => {
                let text = s.content.text("\n");
                if !text.is_empty() {
                    content_parts.push(text);
                }
                for (name, value) in s.sections.iter().flatten() {
                    if value.is_null() {
                        sections.shift_remove(name);
                    } else {
                        sections.insert(name.clone(), value.clone());
                    }
                }
                for r in s.tools_removed.iter().flatten() {
                    tools.retain(|t| t.name != r.name);
                }
                for t in s.tools_added.iter().flatten() {
                    match tools.iter_mut().find(|x| x.name == t.name) {
                        Some(slot) => *slot = t.clone(),
                        None => tools.push(t.clone()),
                    }
                }
            }
            AgentMessage::User(_) | AgentMessage::Assistant(_) | AgentMessage::ToolResult(_) => {
                messages.push(m)
            }
            _ => {}
        }
    }

    let mut parts = vec![content_parts.join("\n\n")];
    for v in sections.values() {
        if let Some(s) = v.as_str() {
            parts.push(s.to_string());
        }
    }
    let system_prompt = parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    NormalizedContext {
        system_prompt,
        tools,
        messages,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn replace_images(content: &[ContentBlock], placeholder: &str) -> Vec<ContentBlock> {
    let mut out = Vec::with_capacity(content.len());
    let mut prev_placeholder = false;
    for b in content {
        if let ContentBlock::Image(_) = b {
            if !prev_placeholder {
                out.push(ContentBlock::text(placeholder));
            }
            prev_placeholder = true;
            continue;
        }
        prev_placeholder = matches!(b, ContentBlock::Text(t) if t.text == placeholder);
        out.push(b.clone());
    }
    out
}

/// Apply Pi's `transformMessages` for `model`. `normalize_tool_call_id` rewrites ids of
/// tool calls made by other models (`None` keeps them).
pub fn transform_messages(
    messages: &[&AgentMessage],
    model: &Model,
    normalize_tool_call_id: Option<&dyn Fn(&str) -> String>,
) -> Vec<AgentMessage> {
    let mut result = Vec::with_capacity(messages.len());
    let mut pending: Vec<(String, String)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let close = |result: &mut Vec<AgentMessage>,
                 pending: &mut Vec<(String, String)>,
                 answered: &mut HashSet<String>| {
        for (id, name) in pending.drain(..) {
            if !answered.contains(&id) {
                result.push(AgentMessage::ToolResult(ToolResultMessage {
                    tool_call_id: id,
                    tool_name: name,
                    content: vec![ContentBlock::text("No result provided")],
                    details: None,
                    is_error: true,
                    duration_ms: None,
                    timestamp: now_ms(),
                    extra: Map::new(),
                }));
            }
        }
        answered.clear();
    };
    let mut id_map: HashMap<String, String> = HashMap::new();
    let vision = model.supports_images();
    // One pass: transform each message, then drop failed turns and answer dangling tool
    // calls (as Pi's two passes do, without holding the context a second time).
    for &msg in messages {
        let msg = match msg {
            AgentMessage::User(u) => {
                let mut u = u.clone();
                if !vision {
                    if let Content::Blocks(b) = &u.content {
                        u.content =
                            Content::Blocks(replace_images(b, NON_VISION_USER_IMAGE_PLACEHOLDER));
                    }
                }
                AgentMessage::User(u)
            }
            AgentMessage::ToolResult(r) => {
                let mut r = r.clone();
                if !vision {
                    r.content = replace_images(&r.content, NON_VISION_TOOL_IMAGE_PLACEHOLDER);
                }
                if let Some(new_id) = id_map.get(&r.tool_call_id) {
                    r.tool_call_id = new_id.clone();
                }
                AgentMessage::ToolResult(r)
            }
            AgentMessage::Assistant(a) => {
                let same_model =
                    a.provider == model.provider && a.api == model.api && a.model == model.id;
                let mut a = a.clone();
                a.content = a
                    .content
                    .into_iter()
                    .filter_map(|block| match block {
                        ContentBlock::Thinking(t) => {
                            if !same_model {
                                return None;
                            }
                            // Signed/redacted blocks are kept even when empty: they are needed
                            // for replay (OpenAI encrypted reasoning).
                            if t.redacted == Some(true) || t.thinking_signature.is_some() {
                                return Some(ContentBlock::Thinking(t));
                            }
                            if t.thinking.trim().is_empty() {
                                return None;
                            }
                            Some(ContentBlock::Thinking(t))
                        }
                        ContentBlock::Text(mut t) => {
                            if !same_model {
                                t.text_signature = None;
                                t.extra.clear();
                            }
                            Some(ContentBlock::Text(t))
                        }
                        ContentBlock::ToolCall(mut tc) => {
                            if !same_model {
                                tc.thought_signature = None;
                                if let Some(norm) = normalize_tool_call_id {
                                    let new_id = norm(&tc.id);
                                    if new_id != tc.id {
                                        id_map.insert(tc.id.clone(), new_id.clone());
                                        tc.id = new_id;
                                    }
                                }
                            }
                            Some(ContentBlock::ToolCall(tc))
                        }
                        other => Some(other),
                    })
                    .collect();
                AgentMessage::Assistant(a)
            }
            other => other.clone(),
        };

        match &msg {
            AgentMessage::Assistant(a) => {
                close(&mut result, &mut pending, &mut answered);
                if matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) {
                    continue;
                }
                pending = a
                    .tool_calls()
                    .map(|tc| (tc.id.clone(), tc.name.clone()))
                    .collect();
                result.push(msg);
            }
            AgentMessage::ToolResult(r) => {
                answered.insert(r.tool_call_id.clone());
                result.push(msg);
            }
            AgentMessage::User(_) => {
                close(&mut result, &mut pending, &mut answered);
                result.push(msg);
            }
            _ => result.push(msg),
        }
    }
    close(&mut result, &mut pending, &mut answered);
    result
}

/// A user message with one text block (test and caller convenience).
pub fn user_text(text: &str, timestamp: i64) -> AgentMessage {
    AgentMessage::User(UserMessage {
        content: Content::Blocks(vec![ContentBlock::text(text)]),
        timestamp,
        extra: Map::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_formats::message::{AssistantMessage, SystemMessage, ThinkingContent, ToolCall};
    use serde_json::json;

    fn model() -> Model {
        serde_json::from_value(json!({"id":"m","name":"m","api":"anthropic-messages",
            "provider":"p","baseUrl":"http://x"}))
        .expect("model")
    }

    fn assistant(provider: &str, stop: StopReason, blocks: Vec<ContentBlock>) -> AgentMessage {
        let mut a = AssistantMessage::empty("anthropic-messages", provider, "m", 1);
        a.stop_reason = stop;
        a.content = blocks;
        AgentMessage::Assistant(a)
    }

    fn call(id: &str) -> ContentBlock {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: json!({}),
            thought_signature: Some("sig".into()),
            extra: Map::new(),
        })
    }

    fn thinking(text: &str) -> ContentBlock {
        ContentBlock::Thinking(ThinkingContent {
            thinking: text.into(),
            thinking_signature: None,
            redacted: None,
            extra: Map::new(),
        })
    }

    #[test]
    fn drops_failed_turns_and_answers_dangling_calls() {
        let msgs = [
            user_text("hi", 1),
            assistant("p", StopReason::Error, vec![ContentBlock::text("partial")]),
            assistant("p", StopReason::ToolUse, vec![call("a"), call("b")]),
            AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: "a".into(),
                tool_name: "bash".into(),
                content: vec![ContentBlock::text("ok")],
                details: None,
                is_error: false,
                duration_ms: None,
                timestamp: 2,
                extra: Map::new(),
            }),
            user_text("next", 3),
        ];
        let out = transform_messages(&msgs.iter().collect::<Vec<_>>(), &model(), None);
        let roles: Vec<_> = out.iter().map(|m| m.role()).collect();
        assert_eq!(
            roles,
            ["user", "assistant", "toolResult", "toolResult", "user"]
        );
        let AgentMessage::ToolResult(r) = &out[3] else {
            panic!("expected a tool result")
        };
        assert_eq!(r.tool_call_id, "b");
        assert!(r.is_error);
        assert_eq!(r.content, vec![ContentBlock::text("No result provided")]);
    }

    #[test]
    fn cross_model_thinking_dropped_and_ids_normalized() {
        let msgs = [
            assistant(
                "other",
                StopReason::ToolUse,
                vec![thinking("hmm"), call("call|x/y")],
            ),
            AgentMessage::ToolResult(ToolResultMessage {
                tool_call_id: "call|x/y".into(),
                tool_name: "bash".into(),
                content: vec![],
                details: None,
                is_error: false,
                duration_ms: None,
                timestamp: 2,
                extra: Map::new(),
            }),
            assistant(
                "p",
                StopReason::Stop,
                vec![thinking("mine"), thinking("  ")],
            ),
        ];
        let norm = |id: &str| id.replace(['|', '/'], "_");
        let out = transform_messages(&msgs.iter().collect::<Vec<_>>(), &model(), Some(&norm));
        let AgentMessage::Assistant(a) = &out[0] else {
            panic!("assistant")
        };
        assert_eq!(a.content.len(), 1);
        let ContentBlock::ToolCall(tc) = &a.content[0] else {
            panic!("tool call")
        };
        assert_eq!(tc.id, "call_x_y");
        assert_eq!(tc.thought_signature, None);
        let AgentMessage::ToolResult(r) = &out[1] else {
            panic!("result")
        };
        assert_eq!(r.tool_call_id, "call_x_y");
        let AgentMessage::Assistant(a) = &out[2] else {
            panic!("assistant")
        };
        assert_eq!(a.content, vec![thinking("mine")]);
    }

    #[test]
    fn system_messages_fold_into_one_prompt() {
        let sys: SystemMessage = serde_json::from_value(json!({
            "content": "", "sections": {"preamble": "P", "tools": "T"}, "timestamp": 0,
            "toolsAdded": [{"name":"read","description":"d","parameters":{"type":"object"}}]
        }))
        .expect("system");
        let later: SystemMessage = serde_json::from_value(json!({
            "content": "extra", "sections": {"tools": null}, "timestamp": 1,
            "toolsRemoved": [{"name":"read"}]
        }))
        .expect("system");
        let ctx = Context {
            system_prompt: None,
            messages: vec![AgentMessage::System(sys.clone()), user_text("hi", 1)],
            tools: vec![],
        };
        let n = normalize_context(&ctx);
        assert_eq!(n.system_prompt, "P\n\nT");
        assert_eq!(n.tools.len(), 1);
        assert_eq!(n.messages.len(), 1);
        let ctx = Context {
            system_prompt: None,
            messages: vec![AgentMessage::System(sys), AgentMessage::System(later)],
            tools: vec![],
        };
        let n = normalize_context(&ctx);
        assert_eq!(n.system_prompt, "extra\n\nP");
        assert!(n.tools.is_empty());
    }
}
