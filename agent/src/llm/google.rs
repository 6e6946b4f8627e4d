//! `google-generative-ai`: Gemini over the REST API
//! (`POST {baseUrl}/models/{id}:streamGenerateContent?alt=sse`, key in `x-goog-api-key`).
//!
//! Parts with `thought: true` are thinking; a `functionCall` part is a complete tool call,
//! emitted as start + one delta (its JSON) + end. Missing or duplicate call ids are made
//! up as `<name>_<millis>_<counter>`, as Pi does. Thought signatures are replayed only to
//! the model that produced them, and only when they look like base64.

use std::sync::atomic::{AtomicU64, Ordering};

use pi_formats::message::{
    AgentMessage, Content, ContentBlock, StopReason, ThinkingContent, ThinkingLevel, Tool,
};
use serde_json::{json, Map, Value};

use super::http::{self, ErrorStyle, SseReader};
use super::model::Model;
use super::transform::{normalize_context, transform_messages};
use super::{
    base_max_tokens, calculate_cost, effective_reasoning, now_ms, Context, Emitter, StreamOptions,
};

fn gemini_major(id: &str) -> Option<u32> {
    let lower = id.to_lowercase();
    let rest = lower
        .strip_prefix("gemini-live-")
        .or_else(|| lower.strip_prefix("gemini-"))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Gemini 3+, Claude and gpt-oss via Google need ids on calls and responses.
fn requires_tool_call_id(id: &str) -> bool {
    id.starts_with("claude-")
        || id.starts_with("gpt-oss-")
        || gemini_major(id).is_some_and(|v| v >= 3)
}

/// Models configured by thinking level rather than token budget.
fn uses_thinking_level(id: &str) -> bool {
    let id = id.to_lowercase();
    let g3 = ["gemini-3-pro", "gemini-3-flash"]
        .iter()
        .any(|p| id.starts_with(p))
        || (id.starts_with("gemini-3.") && (id.contains("-pro") || id.contains("-flash")));
    g3 || gemini_major(&id).is_some_and(|v| v >= 4)
        || id == "gemini-flash-latest"
        || id == "gemini-flash-lite-latest"
        || id.contains("gemma-4")
        || id.contains("gemma4")
}

fn valid_signature(sig: Option<&str>) -> Option<&str> {
    let s = sig?;
    let body = s.trim_end_matches('=');
    let ok = !s.is_empty()
        && s.len() % 4 == 0
        && s.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/');
    ok.then_some(s)
}

/// Convert the transcript to Gemini `contents`.
pub fn convert_contents(model: &Model, context: &Context) -> Vec<Value> {
    let norm = normalize_context(context);
    let need_ids = requires_tool_call_id(&model.id);
    let normalize = |id: &str| -> String {
        if !need_ids {
            return id.to_string();
        }
        id.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect()
    };
    let msgs = transform_messages(&norm.messages, model, Some(&normalize));
    // Gemini before 3 cannot take images inside a functionResponse; non-Gemini ids can.
    let multimodal_response = gemini_major(&model.id).is_none_or(|v| v >= 3);
    let mut contents: Vec<Value> = Vec::new();
    for msg in &msgs {
        match msg {
            AgentMessage::User(u) => {
                let parts: Vec<Value> = match &u.content {
                    Content::Text(s) => vec![json!({"text": s})],
                    Content::Blocks(b) => b
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text(t) => Some(json!({"text": t.text})),
                            ContentBlock::Image(i) => Some(
                                json!({"inlineData": {"mimeType": i.mime_type, "data": i.data}}),
                            ),
                            _ => None,
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            AgentMessage::Assistant(a) => {
                let same = a.provider == model.provider && a.model == model.id;
                let sig = |s: Option<&str>| {
                    if same {
                        valid_signature(s).map(str::to_string)
                    } else {
                        None
                    }
                };
                let mut parts = Vec::new();
                for b in &a.content {
                    match b {
                        ContentBlock::Text(t) => {
                            let s = sig(t.text_signature.as_deref());
                            if t.text.trim().is_empty() && s.is_none() {
                                continue;
                            }
                            let mut p = Map::new();
                            p.insert("text".into(), json!(t.text));
                            if let Some(s) = s {
                                p.insert("thoughtSignature".into(), json!(s));
                            }
                            parts.push(Value::Object(p));
                        }
                        ContentBlock::Thinking(t) => {
                            let s = sig(t.thinking_signature.as_deref());
                            if t.thinking.trim().is_empty() && s.is_none() {
                                continue;
                            }
                            let mut p = Map::new();
                            if same {
                                p.insert("thought".into(), json!(true));
                            }
                            p.insert("text".into(), json!(t.thinking));
                            if let Some(s) = s {
                                p.insert("thoughtSignature".into(), json!(s));
                            }
                            parts.push(Value::Object(p));
                        }
                        ContentBlock::ToolCall(tc) => {
                            let mut fc = Map::new();
                            fc.insert("name".into(), json!(tc.name));
                            fc.insert(
                                "args".into(),
                                if tc.arguments.is_null() {
                                    json!({})
                                } else {
                                    tc.arguments.clone()
                                },
                            );
                            if need_ids {
                                fc.insert("id".into(), json!(tc.id));
                            }
                            let mut p = Map::new();
                            p.insert("functionCall".into(), Value::Object(fc));
                            if let Some(s) = sig(tc.thought_signature.as_deref()) {
                                p.insert("thoughtSignature".into(), json!(s));
                            }
                            parts.push(Value::Object(p));
                        }
                        _ => {}
                    }
                }
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
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
                let images: Vec<Value> = if model.supports_images() {
                    r.content
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Image(i) => Some(
                                json!({"inlineData": {"mimeType": i.mime_type, "data": i.data}}),
                            ),
                            _ => None,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let value = if !text.trim().is_empty() {
                    text
                } else if !images.is_empty() {
                    "(see attached image)".into()
                } else {
                    String::new()
                };
                let mut fr = Map::new();
                fr.insert("name".into(), json!(r.tool_name));
                fr.insert(
                    "response".into(),
                    if r.is_error {
                        json!({"error": value})
                    } else {
                        json!({"output": value})
                    },
                );
                if !images.is_empty() && multimodal_response {
                    fr.insert("parts".into(), Value::Array(images.clone()));
                }
                if need_ids {
                    fr.insert("id".into(), json!(r.tool_call_id));
                }
                let part = json!({"functionResponse": fr});
                let merge = contents.last().is_some_and(|c| {
                    c["role"] == "user"
                        && c["parts"]
                            .as_array()
                            .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_some()))
                });
                match contents.last_mut().and_then(|c| c["parts"].as_array_mut()) {
                    Some(parts) if merge => parts.push(part),
                    _ => contents.push(json!({"role": "user", "parts": [part]})),
                }
                if !images.is_empty() && !multimodal_response {
                    let mut parts = vec![json!({"text": "Tool result image:"})];
                    parts.extend(images);
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            _ => {}
        }
    }
    contents
}

fn convert_tools(tools: &[Tool]) -> Value {
    json!([{"functionDeclarations": tools.iter().map(|t| json!({"name": t.name,
        "description": t.description, "parametersJsonSchema": t.parameters})).collect::<Vec<_>>()}])
}

/// Token budget for budget-based Gemini models (Pi's `getGoogleBudget`); -1 = dynamic.
fn google_budget(model: &Model, level: ThinkingLevel, options: &StreamOptions) -> i64 {
    let custom = match level {
        ThinkingLevel::Minimal => options.thinking_budgets.minimal,
        ThinkingLevel::Low => options.thinking_budgets.low,
        ThinkingLevel::Medium => options.thinking_budgets.medium,
        _ => options.thinking_budgets.high,
    };
    if let Some(b) = custom {
        return b as i64;
    }
    let table: Option<[i64; 4]> = if model.id.contains("2.5-pro") {
        Some([128, 2048, 8192, 32768])
    } else if model.id.contains("2.5-flash-lite") {
        Some([512, 2048, 8192, 24576])
    } else if model.id.contains("2.5-flash") {
        Some([128, 2048, 8192, 24576])
    } else {
        None
    };
    let Some(t) = table else { return -1 };
    match level {
        ThinkingLevel::Minimal => t[0],
        ThinkingLevel::Low => t[1],
        ThinkingLevel::Medium => t[2],
        _ => t[3],
    }
}

fn google_level(model: &Model, level: ThinkingLevel) -> &'static str {
    let mapped = model.level_value(level).to_lowercase();
    match mapped.as_str() {
        "minimal" => "MINIMAL",
        "low" => "LOW",
        "medium" => "MEDIUM",
        _ => "HIGH",
    }
}

/// Build the REST request body.
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let norm = normalize_context(context);
    let mut p = Map::new();
    p.insert(
        "contents".into(),
        Value::Array(convert_contents(model, context)),
    );
    if !norm.system_prompt.is_empty() {
        p.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": norm.system_prompt}]}),
        );
    }
    if !norm.tools.is_empty() {
        p.insert("tools".into(), convert_tools(&norm.tools));
        if let Some(choice) = options.tool_choice.as_deref() {
            let mode = match choice {
                "none" => "NONE",
                "any" => "ANY",
                _ => "AUTO",
            };
            p.insert(
                "toolConfig".into(),
                json!({"functionCallingConfig": {"mode": mode}}),
            );
        }
    }
    let mut gen = Map::new();
    if let Some(t) = options.temperature {
        gen.insert("temperature".into(), json!(t));
    }
    gen.insert(
        "maxOutputTokens".into(),
        json!(base_max_tokens(model, &norm, options)),
    );
    if model.reasoning {
        match effective_reasoning(model, options) {
            Some(level) => {
                let cfg = if uses_thinking_level(&model.id) {
                    json!({"includeThoughts": true, "thinkingLevel": google_level(model, level)})
                } else {
                    json!({"includeThoughts": true, "thinkingBudget": google_budget(model, level, options)})
                };
                gen.insert("thinkingConfig".into(), cfg);
            }
            None => {
                let cfg = if uses_thinking_level(&model.id)
                    && model.clamp_thinking_level(ThinkingLevel::Off) != ThinkingLevel::Off
                {
                    json!({"thinkingLevel": google_level(model, model.clamp_thinking_level(ThinkingLevel::Off))})
                } else {
                    json!({"thinkingBudget": 0})
                };
                gen.insert("thinkingConfig".into(), cfg);
            }
        }
    }
    p.insert("generationConfig".into(), Value::Object(gen));
    Value::Object(p)
}

/// Map a finish reason (Pi's `mapStopReason`): STOP/MAX_TOKENS, everything else an error.
pub fn map_finish_reason(reason: &str) -> StopReason {
    match reason {
        "STOP" => StopReason::Stop,
        "MAX_TOKENS" | "CONTINUATION" => StopReason::Length,
        _ => StopReason::Error,
    }
}

static TOOL_CALL_COUNTER: AtomicU64 = AtomicU64::new(0);

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
    let mut headers = vec![("x-goog-api-key".to_string(), key.to_string())];
    http::extend_custom_headers(&mut headers, model, options);
    let url = http::join_url(
        &model.base_url,
        &format!("models/{}:streamGenerateContent?alt=sse", model.id),
    );
    let resp = http::post_json(options, &url, &headers, &body, ErrorStyle::Google).await?;
    consume_stream(model, options, resp, em, "Google").await
}

/// Read a `streamGenerateContent?alt=sse` response into `em` (shared with Vertex AI, whose
/// chunks are the same `GenerateContentResponse`). `label` names the API in the error for a
/// stream without a finish reason.
pub(crate) async fn consume_stream(
    model: &Model,
    options: &StreamOptions,
    resp: reqwest::Response,
    em: &mut Emitter,
    label: &str,
) -> Result<(), String> {
    em.start().await;
    let mut reader = SseReader::new(resp);
    // (content index, is_thinking) of the open text/thinking block.
    let mut current: Option<(usize, bool)> = None;
    while let Some(sse) = reader.next().await? {
        if sse.data.trim().is_empty() {
            continue;
        }
        let chunk: Value = serde_json::from_str(&sse.data)
            .map_err(|e| format!("Could not parse Google chunk: {e}; data={}", sse.data))?;
        http::observe_stream_event(options, model, &chunk).await;
        if let Some(err) = chunk.get("error").filter(|e| e.is_object()) {
            return Err(err["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string()));
        }
        if em.partial.response_id.is_none() {
            em.partial.response_id = chunk["responseId"].as_str().map(str::to_string);
        }
        let cand = &chunk["candidates"][0];
        for part in cand
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                let thinking = part["thought"] == true;
                let idx = match current {
                    Some((i, t)) if t == thinking => i,
                    other => {
                        if let Some((i, t)) = other {
                            if t {
                                em.thinking_end(i).await
                            } else {
                                em.text_end(i).await
                            }
                        }
                        let i = if thinking {
                            em.thinking_start(ThinkingContent {
                                thinking: String::new(),
                                thinking_signature: None,
                                redacted: None,
                                extra: Map::new(),
                            })
                            .await
                        } else {
                            em.text_start("").await
                        };
                        current = Some((i, thinking));
                        i
                    }
                };
                let sig = part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                if thinking {
                    if let (Some(s), Some(t)) = (sig, em.thinking_block(idx)) {
                        t.thinking_signature = Some(s.to_string());
                    }
                    em.thinking_delta(idx, text).await;
                } else {
                    if let (Some(s), Some(ContentBlock::Text(t))) =
                        (sig, em.partial.content.get_mut(idx))
                    {
                        t.text_signature = Some(s.to_string());
                    }
                    em.text_delta(idx, text).await;
                }
            }
            if let Some(fc) = part.get("functionCall") {
                if let Some((i, t)) = current.take() {
                    if t {
                        em.thinking_end(i).await
                    } else {
                        em.text_end(i).await
                    }
                }
                let name = fc["name"].as_str().unwrap_or("");
                let provided = fc["id"].as_str().filter(|s| !s.is_empty());
                let duplicate =
                    provided.is_some_and(|p| em.partial.tool_calls().any(|t| t.id == p));
                let id = match provided {
                    Some(p) if !duplicate => p.to_string(),
                    _ => format!(
                        "{name}_{}_{}",
                        now_ms(),
                        TOOL_CALL_COUNTER.fetch_add(1, Ordering::Relaxed) + 1
                    ),
                };
                let args = fc
                    .get("args")
                    .cloned()
                    .filter(|a| !a.is_null())
                    .unwrap_or_else(|| json!({}));
                let i = em.toolcall_start(&id, name, json!({})).await;
                if let (Some(s), Some(tc)) = (
                    part.get("thoughtSignature").and_then(Value::as_str),
                    em.tool_call(i),
                ) {
                    tc.thought_signature = Some(s.to_string());
                }
                em.toolcall_delta(i, &args.to_string(), args.clone()).await;
                em.toolcall_end(i, None).await;
            }
        }
        if let Some(reason) = cand.get("finishReason").and_then(Value::as_str) {
            em.partial.raw_stop_reason = Some(reason.to_string());
            em.partial.stop_reason = map_finish_reason(reason);
            if em.partial.stop_reason == StopReason::Stop
                && em.partial.tool_calls().next().is_some()
            {
                em.partial.stop_reason = StopReason::ToolUse;
            }
        }
        if let Some(u) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            let cached = n("cachedContentTokenCount");
            let usage = em.usage_mut();
            usage.input = n("promptTokenCount").saturating_sub(cached);
            usage.output = n("candidatesTokenCount") + n("thoughtsTokenCount");
            usage.cache_read = cached;
            usage.cache_write = 0;
            usage.reasoning = Some(n("thoughtsTokenCount"));
            usage.total_tokens = n("totalTokenCount");
            calculate_cost(model, usage);
        }
    }
    if let Some((i, t)) = current.take() {
        if t {
            em.thinking_end(i).await
        } else {
            em.text_end(i).await
        }
    }
    match em.partial.stop_reason {
        StopReason::Pending => Err(format!("{label} stream ended without a finish reason")),
        StopReason::Error | StopReason::Aborted => Err(match &em.partial.raw_stop_reason {
            Some(r) => format!("Provider stopped with: {r}"),
            None => "An unknown error occurred".into(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_families() {
        assert!(requires_tool_call_id("gemini-3-pro-preview"));
        assert!(!requires_tool_call_id("gemini-2.5-flash"));
        assert!(uses_thinking_level("gemini-3.1-pro-preview"));
        assert!(!uses_thinking_level("gemini-2.5-pro"));
        assert_eq!(map_finish_reason("SAFETY"), StopReason::Error);
        assert_eq!(map_finish_reason("MAX_TOKENS"), StopReason::Length);
        assert_eq!(valid_signature(Some("YWJj")), Some("YWJj"));
        assert_eq!(valid_signature(Some("fakesig")), None);
    }
}
