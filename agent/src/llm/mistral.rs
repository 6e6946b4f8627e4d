//! `mistral-conversations`: Mistral's native chat endpoint
//! (`POST {baseUrl}/v1/chat/completions`, `Authorization: Bearer`, SSE ending in `[DONE]`).
//!
//! It looks like OpenAI Chat Completions but differs where it matters to a transcript:
//! * assistant content goes back as typed chunks (`text`, and `thinking` holding a list of
//!   text chunks), with `prefix: false`; tool results carry `name` and typed content, and an
//!   error result is marked in the text (`[tool error] …`) since the API has no flag for it;
//! * tool-call ids must be exactly 9 alphanumerics, so ids from other models are hashed down
//!   (Pi's `shortHash`, collisions resolved by re-hashing with an attempt counter);
//! * thinking streams as `{"type":"thinking","thinking":[{"type":"text",…}]}` content chunks;
//! * reasoning is asked for with `reasoning_effort` (models with a thinking-level map) or
//!   `prompt_mode: "reasoning"` (other reasoning models);
//! * the session id is the prompt-cache key and the `x-affinity` header.

use std::collections::HashMap;

use pi_formats::message::{AgentMessage, Content, ContentBlock, StopReason, ThinkingContent};
use serde_json::{json, Map, Value};

use super::http::{self, ErrorStyle, SseReader};
use super::json_stream::ToolArgs;
use super::model::Model;
use super::transform::{normalize_context, transform_messages};
use super::{
    base_max_tokens, calculate_cost, effective_reasoning, CacheRetention, Context, Emitter,
    StreamOptions,
};

const TOOL_CALL_ID_LENGTH: usize = 9;

/// Pi's `shortHash`: two 32-bit multiply-xor lanes over UTF-16 units, printed in base 36.
fn short_hash(s: &str) -> String {
    let mut h1: u32 = 0xdead_beef;
    let mut h2: u32 = 0x41c6_ce57;
    for ch in s.encode_utf16() {
        let ch = u32::from(ch);
        h1 = (h1 ^ ch).wrapping_mul(2_654_435_761);
        h2 = (h2 ^ ch).wrapping_mul(1_597_334_677);
    }
    h1 = (h1 ^ (h1 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h2 ^ (h2 >> 13)).wrapping_mul(3_266_489_909);
    h2 = (h2 ^ (h2 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h1 ^ (h1 >> 13)).wrapping_mul(3_266_489_909);
    format!("{}{}", base36(h2), base36(h1))
}

fn base36(mut n: u32) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// A 9-character alphanumeric id derived from `id` (attempt > 0 after a collision).
fn derive_tool_call_id(id: &str, attempt: u32) -> String {
    let normalized: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    if attempt == 0 && normalized.len() == TOOL_CALL_ID_LENGTH {
        return normalized;
    }
    let base = if normalized.is_empty() {
        id
    } else {
        normalized.as_str()
    };
    let seed = if attempt == 0 {
        base.to_string()
    } else {
        format!("{base}:{attempt}")
    };
    short_hash(&seed)
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(TOOL_CALL_ID_LENGTH)
        .collect()
}

/// Maps foreign ids to Mistral ids, keeping distinct ids distinct within one request.
#[derive(Default)]
struct IdNormalizer {
    forward: HashMap<String, String>,
    reverse: HashMap<String, String>,
}

impl IdNormalizer {
    fn normalize(&mut self, id: &str) -> String {
        if let Some(done) = self.forward.get(id) {
            return done.clone();
        }
        let mut attempt = 0;
        loop {
            let candidate = derive_tool_call_id(id, attempt);
            match self.reverse.get(&candidate) {
                Some(owner) if owner != id => attempt += 1,
                _ => {
                    self.forward.insert(id.to_string(), candidate.clone());
                    self.reverse.insert(candidate.clone(), id.to_string());
                    return candidate;
                }
            }
        }
    }
}

fn image_url(mime: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": format!("data:{mime};base64,{data}")})
}

/// The text of a tool result as Mistral gets it (Pi's `buildToolResultText`).
fn tool_result_text(text: &str, has_images: bool, vision: bool, is_error: bool) -> String {
    let trimmed = text.trim();
    let prefix = if is_error { "[tool error] " } else { "" };
    if !trimmed.is_empty() {
        let suffix = if has_images && !vision {
            "\n[tool image omitted: model does not support images]"
        } else {
            ""
        };
        return format!("{prefix}{trimmed}{suffix}");
    }
    if has_images {
        let body = if vision {
            "(see attached image)"
        } else {
            "(image omitted: model does not support images)"
        };
        return format!("{prefix}{body}");
    }
    format!("{prefix}(no tool output)")
}

/// Convert the transcript to Mistral `messages`.
pub fn convert_messages(model: &Model, context: &Context) -> Vec<Value> {
    let norm = normalize_context(context);
    let ids = std::cell::RefCell::new(IdNormalizer::default());
    let normalize = |id: &str| ids.borrow_mut().normalize(id);
    let msgs = transform_messages(&norm.messages, model, Some(&normalize));
    let vision = model.supports_images();
    let mut out = Vec::new();
    if !norm.system_prompt.is_empty() {
        out.push(json!({"role": "system", "content": norm.system_prompt}));
    }
    for msg in &msgs {
        match msg {
            AgentMessage::User(u) => match &u.content {
                Content::Text(s) => out.push(json!({"role": "user", "content": s})),
                Content::Blocks(blocks) => {
                    let had_images = blocks.iter().any(|b| matches!(b, ContentBlock::Image(_)));
                    let content: Vec<Value> = blocks
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text(t) => Some(json!({"type": "text", "text": t.text})),
                            ContentBlock::Image(i) if vision => {
                                Some(image_url(&i.mime_type, &i.data))
                            }
                            _ => None,
                        })
                        .collect();
                    if !content.is_empty() {
                        out.push(json!({"role": "user", "content": content}));
                    } else if had_images && !vision {
                        out.push(json!({"role": "user",
                            "content": "(image omitted: model does not support images)"}));
                    }
                }
            },
            AgentMessage::Assistant(a) => {
                let mut parts = Vec::new();
                let mut calls = Vec::new();
                for b in &a.content {
                    match b {
                        ContentBlock::Text(t) if !t.text.trim().is_empty() => {
                            parts.push(json!({"type": "text", "text": t.text}))
                        }
                        ContentBlock::Thinking(t) if !t.thinking.trim().is_empty() => parts.push(
                            json!({"type": "thinking", "thinking": [{"type": "text", "text": t.thinking}]}),
                        ),
                        ContentBlock::ToolCall(tc) => {
                            let args = if tc.arguments.is_null() {
                                "{}".to_string()
                            } else {
                                tc.arguments.to_string()
                            };
                            calls.push(json!({"id": tc.id, "type": "function",
                                "function": {"name": tc.name, "arguments": args}, "index": 0}));
                        }
                        _ => {}
                    }
                }
                if parts.is_empty() && calls.is_empty() {
                    continue;
                }
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                m.insert("prefix".into(), json!(false));
                if !parts.is_empty() {
                    m.insert("content".into(), Value::Array(parts));
                }
                if !calls.is_empty() {
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                out.push(Value::Object(m));
            }
            AgentMessage::ToolResult(r) => {
                let text = r
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let has_images = r
                    .content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::Image(_)));
                let mut content = vec![json!({"type": "text",
                    "text": tool_result_text(&text, has_images, vision, r.is_error)})];
                if vision {
                    content.extend(r.content.iter().filter_map(|b| match b {
                        ContentBlock::Image(i) => Some(image_url(&i.mime_type, &i.data)),
                        _ => None,
                    }));
                }
                out.push(json!({"role": "tool", "tool_call_id": r.tool_call_id,
                    "name": r.tool_name, "content": content}));
            }
            _ => {}
        }
    }
    out
}

/// Whether the session id is used as the prompt-cache key.
fn prompt_caching(options: &StreamOptions) -> Option<&str> {
    if options.cache_retention == Some(CacheRetention::None) {
        return None;
    }
    options.session_id.as_deref().filter(|s| !s.is_empty())
}

/// Build the request body (wire field names).
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let norm = normalize_context(context);
    let mut p = Map::new();
    p.insert("model".into(), json!(model.id));
    p.insert("stream".into(), json!(true));
    p.insert(
        "messages".into(),
        Value::Array(convert_messages(model, context)),
    );
    if !norm.tools.is_empty() {
        // Strict tools are opt-in: Pi sends `strict: false` unless a tool asks for constrained
        // sampling, which our tools never do.
        let tools: Vec<Value> = norm
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name,
                    "description": t.description, "parameters": t.parameters, "strict": false}})
            })
            .collect();
        p.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = options.temperature {
        p.insert("temperature".into(), json!(t));
    }
    p.insert(
        "max_tokens".into(),
        json!(base_max_tokens(model, &norm, options)),
    );
    if let Some(choice) = options.tool_choice.as_deref().filter(|c| !c.is_empty()) {
        let v = match choice {
            "auto" | "none" | "any" | "required" => json!(choice),
            name => json!({"type": "function", "function": {"name": name}}),
        };
        p.insert("tool_choice".into(), v);
    }
    let level = effective_reasoning(model, options);
    // Models with a thinking-level map take `reasoning_effort`; other reasoning models
    // `prompt_mode`.
    match model
        .thinking_level_map
        .as_ref()
        .filter(|_| model.reasoning)
    {
        Some(map) => {
            let effort = match level {
                Some(l) => Some(
                    map.get(l.as_str())
                        .and_then(Value::as_str)
                        .unwrap_or("high")
                        .to_string(),
                ),
                None => map.get("off").and_then(Value::as_str).map(str::to_string),
            };
            if let Some(e) = effort.filter(|e| !e.is_empty()) {
                p.insert("reasoning_effort".into(), json!(e));
            }
        }
        None => {
            if model.reasoning && level.is_some() {
                p.insert("prompt_mode".into(), json!("reasoning"));
            }
        }
    }
    if let Some(key) = prompt_caching(options) {
        p.insert("prompt_cache_key".into(), json!(key));
    }
    Value::Object(p)
}

/// Map a finish reason (Pi's `mapChatStopReason`); errors carry their message.
fn map_finish_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" => (StopReason::Stop, None),
        "length" | "model_length" => (StopReason::Length, None),
        "tool_calls" => (StopReason::ToolUse, None),
        // Mistral reports transient server failures this way; "server error" makes the
        // message retryable.
        "error" => (
            StopReason::Error,
            Some("Provider stopped with: error (server error)".into()),
        ),
        other => (
            StopReason::Error,
            Some(format!("Provider stopped with: {other}")),
        ),
    }
}

fn cached_prompt_tokens(usage: &Value, prompt: u64) -> u64 {
    let cached = [
        "/promptTokensDetails/cachedTokens",
        "/prompt_tokens_details/cached_tokens",
        "/promptTokenDetails/cachedTokens",
        "/prompt_token_details/cached_tokens",
        "/numCachedTokens",
        "/num_cached_tokens",
    ]
    .iter()
    .find_map(|p| usage.pointer(p).and_then(Value::as_u64))
    .unwrap_or(0);
    cached.min(prompt)
}

/// The open text or thinking block.
#[derive(Clone, Copy, PartialEq)]
enum Open {
    Text(usize),
    Thinking(usize),
}

async fn close(em: &mut Emitter, open: &mut Option<Open>) {
    match open.take() {
        Some(Open::Text(i)) => em.text_end(i).await,
        Some(Open::Thinking(i)) => em.thinking_end(i).await,
        None => {}
    }
}

async fn push_text(em: &mut Emitter, open: &mut Option<Open>, text: &str) {
    // GLM models on Mistral send empty deltas around thinking and tool calls; opening a
    // block for them would split thinking, which Mistral rejects on replay.
    if text.is_empty() {
        return;
    }
    let idx = match *open {
        Some(Open::Text(i)) => i,
        _ => {
            close(em, open).await;
            let i = em.text_start("").await;
            *open = Some(Open::Text(i));
            i
        }
    };
    em.text_delta(idx, text).await;
}

async fn push_thinking(em: &mut Emitter, open: &mut Option<Open>, text: &str) {
    if text.is_empty() {
        return;
    }
    let idx = match *open {
        Some(Open::Thinking(i)) => i,
        _ => {
            close(em, open).await;
            let i = em
                .thinking_start(ThinkingContent {
                    thinking: String::new(),
                    thinking_signature: None,
                    redacted: None,
                    extra: Map::new(),
                })
                .await;
            *open = Some(Open::Thinking(i));
            i
        }
    };
    em.thinking_delta(idx, text).await;
}

pub(crate) async fn run(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let Some(key) = options.api_key.as_deref().filter(|k| !k.is_empty()) else {
        return Err(format!("No API key for provider: {}", model.provider));
    };
    let body = build_request(model, context, options);
    let mut headers = vec![
        ("accept".to_string(), "text/event-stream".to_string()),
        ("authorization".to_string(), format!("Bearer {key}")),
    ];
    http::extend_custom_headers(&mut headers, model, options);
    let explicit_affinity = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("x-affinity"));
    if let (Some(session), false) = (prompt_caching(options), explicit_affinity) {
        headers.push(("x-affinity".to_string(), session.to_string()));
    }
    let url = http::join_url(&model.base_url, "v1/chat/completions");
    let resp = http::post_json(options, &url, &headers, &body, ErrorStyle::Mistral).await?;
    em.start().await;

    let mut reader = SseReader::new(resp);
    let mut open: Option<Open> = None;
    // Tool calls by stream index (or id), with their argument text.
    let mut calls: Vec<(String, usize, ToolArgs)> = Vec::new();
    let mut error_message: Option<String> = None;
    while let Some(sse) = reader.next().await? {
        let data = sse.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| format!("Could not parse Mistral chunk: {e}; data={data}"))?;
        http::observe_stream_event(options, model, &chunk).await;
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Err("Invalid Mistral streaming event".into());
        };
        if em.partial.response_id.is_none() {
            em.partial.response_id = chunk["id"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string);
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let prompt = u["prompt_tokens"].as_u64().unwrap_or(0);
            let cached = cached_prompt_tokens(u, prompt);
            let usage = em.usage_mut();
            usage.input = prompt - cached;
            usage.output = u["completion_tokens"].as_u64().unwrap_or(0);
            usage.cache_read = cached;
            usage.cache_write = 0;
            usage.total_tokens = u["total_tokens"]
                .as_u64()
                .filter(|t| *t > 0)
                .unwrap_or(usage.input + usage.output + usage.cache_read);
            calculate_cost(model, usage);
        }
        let Some(choice) = choices.first() else {
            continue;
        };
        if let Some(reason) = choice["finish_reason"].as_str() {
            em.partial.raw_stop_reason = Some(reason.to_string());
            let (stop, msg) = map_finish_reason(reason);
            em.partial.stop_reason = stop;
            if msg.is_some() {
                error_message = msg;
            }
        }
        let delta = &choice["delta"];
        match &delta["content"] {
            Value::String(s) => push_text(em, &mut open, s).await,
            Value::Array(items) => {
                for item in items {
                    match item {
                        Value::String(s) => push_text(em, &mut open, s).await,
                        _ if item["type"] == "thinking" => {
                            let text: String = item["thinking"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(|p| p["text"].as_str())
                                .collect();
                            push_thinking(em, &mut open, &text).await;
                        }
                        _ if item["type"] == "text" => {
                            push_text(em, &mut open, item["text"].as_str().unwrap_or("")).await
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            close(em, &mut open).await;
            let index = tc["index"].as_u64();
            let id = match tc["id"].as_str().filter(|s| !s.is_empty() && *s != "null") {
                Some(id) => id.to_string(),
                None => derive_tool_call_id(&format!("toolcall:{}", index.unwrap_or(0)), 0),
            };
            let key = index.map_or_else(|| id.clone(), |i| format!("#{i}"));
            let pos = match calls.iter().position(|(k, _, _)| *k == key) {
                Some(p) => p,
                None => {
                    let name = tc["function"]["name"].as_str().unwrap_or("");
                    let idx = em.toolcall_start(&id, name, json!({})).await;
                    calls.push((key, idx, ToolArgs::new()));
                    calls.len() - 1
                }
            };
            let args = &tc["function"]["arguments"];
            let fragment = match args {
                Value::String(s) => s.clone(),
                Value::Null => "{}".to_string(),
                other => other.to_string(),
            };
            let (_, idx, buf) = &mut calls[pos];
            let partial = buf.append(&fragment);
            let idx = *idx;
            em.toolcall_delta(idx, &fragment, partial).await;
        }
    }
    close(em, &mut open).await;
    for (_, idx, buf) in &calls {
        em.toolcall_end(*idx, Some(buf.text())).await;
    }
    match em.partial.stop_reason {
        StopReason::Pending => Err("Mistral stream ended without a finish reason".into()),
        StopReason::Error | StopReason::Aborted => {
            Err(error_message.unwrap_or_else(|| "An unknown error occurred".into()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_hash_matches_pi() {
        // Values computed with Pi 1.6.0's `shortHash` (utils/hash.js) under Node 22.
        assert_eq!(short_hash("call_1_0"), "1sfc3uglh7uq6");
        assert_eq!(short_hash("x"), "evpdwv6p0anp");
        assert_eq!(derive_tool_call_id("abcdefghi", 0), "abcdefghi");
        assert_eq!(derive_tool_call_id("call_1_0", 0).len(), 9);
        let mut n = IdNormalizer::default();
        let a = n.normalize("toolu_01ABC");
        assert_eq!(n.normalize("toolu_01ABC"), a);
        assert_ne!(n.normalize("toolu_01ABD"), a);
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(map_finish_reason("tool_calls").0, StopReason::ToolUse);
        assert_eq!(map_finish_reason("model_length").0, StopReason::Length);
        assert_eq!(
            map_finish_reason("error").1.as_deref(),
            Some("Provider stopped with: error (server error)")
        );
        assert_eq!(
            tool_result_text("", false, false, true),
            "[tool error] (no tool output)"
        );
    }
}
