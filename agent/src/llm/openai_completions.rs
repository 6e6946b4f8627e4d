//! `openai-completions`: OpenAI Chat Completions and the many servers that copy it
//! (Ollama, vLLM, llama.cpp, OpenRouter, DeepSeek, Groq, …).
//!
//! Request shape follows Pi 1.6.0's recorded requests (`fixtures/realpi/logs`): the system
//! prompt is the first message (`system`, or `developer` for reasoning models on OpenAI
//! itself), assistant text is a plain string, thinking goes back in the field it came from
//! (`reasoning_content`, …), consecutive tool results are `tool` messages.
//! Host quirks are `compat` switches, auto-detected from provider and base URL and
//! overridable per model (models.md "OpenAI-Kompatibilität").

use std::collections::HashMap;

use pi_formats::message::{
    AgentMessage, Content, ContentBlock, StopReason, ThinkingContent, ThinkingLevel, Tool, Usage,
};
use serde_json::{json, Map, Value};

use super::http::{self, ErrorStyle, SseReader};
use super::json_stream::ToolArgs;
use super::model::{LevelMapping, Model};
use super::transform::{normalize_context, transform_messages, NormalizedContext};
use super::{
    base_max_tokens, calculate_cost, effective_reasoning, Context, Emitter, StreamOptions,
};

/// Resolved compatibility switches (Pi's `getCompat`: detection, then `model.compat`).
#[derive(Debug, Clone, PartialEq)]
pub struct Compat {
    /// Send `store: false`.
    pub supports_store: bool,
    /// Use the `developer` role for the system prompt of reasoning models.
    pub supports_developer_role: bool,
    /// Send `reasoning_effort`.
    pub supports_reasoning_effort: bool,
    /// Send `stream_options.include_usage`.
    pub supports_usage_in_streaming: bool,
    /// Streams carry `finish_reason` (else it is inferred at the end).
    pub supports_finish_reason: bool,
    /// `max_completion_tokens` or `max_tokens`.
    pub max_tokens_field: String,
    /// Tool results carry `name`.
    pub requires_tool_result_name: bool,
    /// Insert an assistant message between tool results and a user message.
    pub requires_assistant_after_tool_result: bool,
    /// Assistant `content` must not be null.
    pub requires_non_null_assistant_content: bool,
    /// Replay thinking as plain text.
    pub requires_thinking_as_text: bool,
    /// Add empty `reasoning_content` to replayed assistant messages (DeepSeek).
    pub requires_reasoning_content_on_assistant_messages: bool,
    /// How thinking is requested: `openai`, `openrouter`, `deepseek`, `zai`, `qwen`,
    /// `qwen-chat-template`, `together`, …
    pub thinking_format: String,
    /// Send `strict` on function tools.
    pub supports_strict_mode: bool,
}

/// Pi's `detectCompat` + explicit `model.compat` overrides.
pub fn compat(model: &Model) -> Compat {
    let p = model.provider.as_str();
    let url = model.base_url.as_str();
    let is_zai = p == "zai"
        || p == "zai-coding-cn"
        || url.contains("api.z.ai")
        || url.contains("open.bigmodel.cn");
    let is_together =
        p == "together" || url.contains("api.together.ai") || url.contains("api.together.xyz");
    let is_moonshot = p == "moonshotai" || p == "moonshotai-cn" || url.contains("api.moonshot.");
    let is_openrouter = p == "openrouter" || url.contains("openrouter.ai");
    let is_cf_workers = p == "cloudflare-workers-ai" || url.contains("api.cloudflare.com");
    let is_cf_gateway = p == "cloudflare-ai-gateway" || url.contains("gateway.ai.cloudflare.com");
    let is_nvidia = p == "nvidia" || url.contains("integrate.api.nvidia.com");
    let is_ant_ling = p == "ant-ling" || url.contains("api.ant-ling.com");
    let is_cerebras = p == "cerebras" || url.contains("cerebras.ai");
    let is_deepseek = p == "deepseek" || url.to_lowercase().contains("deepseek.com");
    let is_grok = p == "xai" || url.contains("api.x.ai");
    let is_non_standard = is_nvidia
        || is_cerebras
        || is_grok
        || is_together
        || url.contains("chutes.ai")
        || is_deepseek
        || is_zai
        || is_moonshot
        || p == "opencode"
        || url.contains("opencode.ai")
        || is_cf_workers
        || is_cf_gateway
        || is_ant_ling;
    let use_max_tokens = url.contains("chutes.ai")
        || is_deepseek
        || is_moonshot
        || is_cf_gateway
        || is_together
        || is_nvidia
        || is_ant_ling
        || is_zai;
    let is_openai = p == "openai" || url.contains("api.openai.com");
    let thinking_format = if is_deepseek {
        "deepseek"
    } else if is_zai {
        "zai"
    } else if is_together {
        "together"
    } else if is_ant_ling {
        "ant-ling"
    } else if is_openrouter {
        "openrouter"
    } else {
        "openai"
    };
    let b = |key: &str, default: bool| model.compat_bool(key).unwrap_or(default);
    Compat {
        supports_store: b("supportsStore", !is_non_standard),
        supports_developer_role: b("supportsDeveloperRole", is_openai),
        supports_reasoning_effort: b(
            "supportsReasoningEffort",
            !is_grok
                && !is_zai
                && !is_moonshot
                && !is_together
                && !is_cf_gateway
                && !is_nvidia
                && !is_ant_ling,
        ),
        supports_usage_in_streaming: b("supportsUsageInStreaming", true),
        supports_finish_reason: b("supportsFinishReason", true),
        max_tokens_field: model
            .compat_str("maxTokensField")
            .unwrap_or(if use_max_tokens {
                "max_tokens"
            } else {
                "max_completion_tokens"
            })
            .to_string(),
        requires_tool_result_name: b("requiresToolResultName", false),
        requires_assistant_after_tool_result: b("requiresAssistantAfterToolResult", false),
        requires_non_null_assistant_content: b("requiresNonNullAssistantContent", false),
        requires_thinking_as_text: b("requiresThinkingAsText", false),
        requires_reasoning_content_on_assistant_messages: b(
            "requiresReasoningContentOnAssistantMessages",
            is_deepseek,
        ),
        thinking_format: model
            .compat_str("thinkingFormat")
            .unwrap_or(thinking_format)
            .to_string(),
        supports_strict_mode: b("supportsStrictMode", false),
    }
}

const REASONING_FIELDS: [&str; 3] = ["reasoning_content", "reasoning", "reasoning_text"];

/// Chat Completions caps tool-call ids at 40 characters; Responses-API ids look like
/// `call_x|item_y` and are folded into one sanitized id.
fn normalize_tool_call_id(model: &Model, id: &str) -> String {
    fn sanitize(s: &str) -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
    if let Some((call, item)) = id.split_once('|') {
        let call = sanitize(call);
        let item = sanitize(item);
        let combined = if item.is_empty() {
            call.clone()
        } else {
            format!("{call}_{item}")
        };
        if combined.len() <= 40 {
            return combined;
        }
        let hash = short_hash(id);
        let keep = 40usize
            .saturating_sub(hash.len() + 1)
            .max(1)
            .min(call.len());
        return format!("{}_{hash}", &call[..keep]);
    }
    if model.provider == "openai" && id.chars().count() > 40 {
        return id.chars().take(40).collect();
    }
    id.to_string()
}

/// 8 hex chars of FNV-1a: only needs to keep distinct long ids distinct.
fn short_hash(s: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// Convert the transcript to Chat Completions `messages`.
pub fn convert_messages(model: &Model, norm: &NormalizedContext, compat: &Compat) -> Vec<Value> {
    let norm_id = |id: &str| normalize_tool_call_id(model, id);
    let msgs = transform_messages(&norm.messages, model, Some(&norm_id));
    let mut out: Vec<Value> = Vec::new();
    if !norm.system_prompt.is_empty() {
        let role = if model.reasoning && compat.supports_developer_role {
            "developer"
        } else {
            "system"
        };
        out.push(json!({"role": role, "content": norm.system_prompt}));
    }
    let mut last_role: Option<&str> = None;
    let mut i = 0;
    while i < msgs.len() {
        let msg = &msgs[i];
        if compat.requires_assistant_after_tool_result
            && last_role == Some("toolResult")
            && matches!(msg, AgentMessage::User(_))
        {
            out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
        }
        match msg {
            AgentMessage::User(u) => {
                match &u.content {
                    Content::Text(s) => out.push(json!({"role": "user", "content": s})),
                    Content::Blocks(blocks) => {
                        let parts: Vec<Value> = blocks
                            .iter()
                            .filter_map(|b| match b {
                                ContentBlock::Text(t) if !t.text.is_empty() => {
                                    Some(json!({"type": "text", "text": t.text}))
                                }
                                ContentBlock::Image(img) => Some(json!({"type": "image_url",
                                    "image_url": {"url": format!("data:{};base64,{}", img.mime_type, img.data)}})),
                                _ => None,
                            })
                            .collect();
                        if parts.is_empty() {
                            i += 1;
                            continue;
                        }
                        out.push(json!({"role": "user", "content": parts}));
                    }
                }
                last_role = Some("user");
            }
            AgentMessage::Assistant(a) => {
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                let null_content = !(compat.requires_assistant_after_tool_result
                    || compat.requires_non_null_assistant_content);
                m.insert(
                    "content".into(),
                    if null_content { Value::Null } else { json!("") },
                );
                let texts: Vec<&str> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text(t) if !t.text.trim().is_empty() => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                let text = texts.concat();
                let thinking: Vec<&ThinkingContent> = a
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Thinking(t) if !t.thinking.trim().is_empty() => Some(t),
                        _ => None,
                    })
                    .collect();
                if !thinking.is_empty() && compat.requires_thinking_as_text {
                    let joined = thinking
                        .iter()
                        .map(|t| t.thinking.as_str())
                        .collect::<Vec<_>>()
                        .join("\n\n");
                    let mut parts = vec![json!({"type": "text", "text": joined})];
                    parts.extend(texts.iter().map(|t| json!({"type": "text", "text": t})));
                    m.insert("content".into(), Value::Array(parts));
                } else {
                    if !text.is_empty() {
                        m.insert("content".into(), json!(text));
                    }
                    if let Some(first) = thinking.first() {
                        // Thinking goes back in the field it arrived in (llama.cpp gpt-oss).
                        if let Some(sig) = first.thinking_signature.as_deref() {
                            if REASONING_FIELDS.contains(&sig) {
                                let joined = thinking
                                    .iter()
                                    .map(|t| t.thinking.as_str())
                                    .collect::<Vec<_>>()
                                    .join("\n");
                                m.insert(sig.to_string(), json!(joined));
                            }
                        }
                    }
                }
                let calls: Vec<Value> = a
                    .tool_calls()
                    .map(|tc| {
                        json!({"id": tc.id, "type": "function", "function": {"name": tc.name,
                            "arguments": serde_json::to_string(&tc.arguments).unwrap_or_else(|_| "{}".into())}})
                    })
                    .collect();
                let has_calls = !calls.is_empty();
                if has_calls {
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                if compat.requires_reasoning_content_on_assistant_messages
                    && model.reasoning
                    && !m.contains_key("reasoning_content")
                {
                    m.insert("reasoning_content".into(), json!(""));
                }
                // An assistant message with neither content nor tool calls is rejected by
                // most servers (it happens for aborted responses with no output).
                let has_content = match m.get("content") {
                    Some(Value::String(s)) => !s.is_empty(),
                    Some(Value::Array(a)) => !a.is_empty(),
                    _ => false,
                };
                if has_content || has_calls {
                    out.push(Value::Object(m));
                }
                last_role = Some("assistant");
            }
            AgentMessage::ToolResult(_) => {
                let mut images = Vec::new();
                while let Some(AgentMessage::ToolResult(r)) = msgs.get(i) {
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
                    let text = if !text.trim().is_empty() {
                        text
                    } else if has_images {
                        "(see attached image)".to_string()
                    } else {
                        "(no tool output)".to_string()
                    };
                    let mut m = Map::new();
                    m.insert("role".into(), json!("tool"));
                    m.insert("content".into(), json!(text));
                    m.insert("tool_call_id".into(), json!(r.tool_call_id));
                    if compat.requires_tool_result_name && !r.tool_name.is_empty() {
                        m.insert("name".into(), json!(r.tool_name));
                    }
                    out.push(Value::Object(m));
                    if has_images && model.supports_images() {
                        for b in &r.content {
                            if let ContentBlock::Image(img) = b {
                                images.push(json!({"type": "image_url", "image_url":
                                    {"url": format!("data:{};base64,{}", img.mime_type, img.data)}}));
                            }
                        }
                    }
                    i += 1;
                }
                if images.is_empty() {
                    last_role = Some("toolResult");
                } else {
                    if compat.requires_assistant_after_tool_result {
                        out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
                    }
                    let mut parts = vec![
                        json!({"type": "text", "text": "Attached image(s) from tool result:"}),
                    ];
                    parts.extend(images);
                    out.push(json!({"role": "user", "content": parts}));
                    last_role = Some("user");
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Convert tool declarations to `{type:"function", function:{…}}`.
pub fn convert_tools(tools: &[Tool], compat: &Compat) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let mut f = Map::new();
            f.insert("name".into(), json!(t.name));
            f.insert("description".into(), json!(t.description));
            f.insert("parameters".into(), t.parameters.clone());
            if compat.supports_strict_mode {
                f.insert("strict".into(), json!(false));
            }
            json!({"type": "function", "function": f})
        })
        .collect()
}

/// Build the request body (Pi's `buildParams`, for the thinking formats in common use).
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let norm = normalize_context(context);
    let compat = compat(model);
    let max_tokens = base_max_tokens(model, &norm, options);
    let effort = effective_reasoning(model, options);
    let mut p = Map::new();
    p.insert("model".into(), json!(model.id));
    p.insert(
        "messages".into(),
        Value::Array(convert_messages(model, &norm, &compat)),
    );
    p.insert("stream".into(), json!(true));
    if compat.supports_usage_in_streaming {
        p.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.supports_store {
        p.insert("store".into(), json!(false));
    }
    if max_tokens > 0 {
        p.insert(compat.max_tokens_field.clone(), json!(max_tokens));
    }
    if let Some(t) = options.temperature {
        p.insert("temperature".into(), json!(t));
    }
    if !norm.tools.is_empty() {
        p.insert(
            "tools".into(),
            Value::Array(convert_tools(&norm.tools, &compat)),
        );
    }
    if let Some(choice) = &options.tool_choice {
        p.insert("tool_choice".into(), json!(choice));
    }
    apply_thinking(model, &compat, effort, &mut p);
    if let Some(routing) = model
        .compat_value("openRouterRouting")
        .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
    {
        p.insert("provider".into(), routing.clone());
    }
    // Model sampling parameters win over the named fields (models.md "samplingParams").
    if let Some(sp) = &model.sampling_params {
        for (k, v) in sp {
            p.insert(k.clone(), v.clone());
        }
    }
    Value::Object(p)
}

fn apply_thinking(
    model: &Model,
    compat: &Compat,
    effort: Option<ThinkingLevel>,
    p: &mut Map<String, Value>,
) {
    if !model.reasoning {
        return;
    }
    let mapped = |level: ThinkingLevel| model.level_value(level);
    let off_mapping = model.level_mapping(ThinkingLevel::Off);
    match compat.thinking_format.as_str() {
        "zai" => {
            p.insert(
                "thinking".into(),
                if effort.is_some() {
                    json!({"type": "enabled", "clear_thinking": false})
                } else {
                    json!({"type": "disabled"})
                },
            );
            if let (Some(e), true) = (effort, compat.supports_reasoning_effort) {
                if model.level_mapping(e) != LevelMapping::Unsupported {
                    p.insert("reasoning_effort".into(), json!(mapped(e)));
                }
            }
        }
        "qwen" => {
            p.insert("enable_thinking".into(), json!(effort.is_some()));
            if let (Some(e), true) = (effort, compat.supports_reasoning_effort) {
                p.insert("reasoning_effort".into(), json!(mapped(e)));
            }
        }
        "qwen-chat-template" => {
            p.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": effort.is_some(), "preserve_thinking": true}),
            );
        }
        "deepseek" => {
            if effort.is_some() {
                p.insert("thinking".into(), json!({"type": "enabled"}));
            } else if off_mapping != LevelMapping::Unsupported {
                p.insert("thinking".into(), json!({"type": "disabled"}));
            }
            if let (Some(e), true) = (effort, compat.supports_reasoning_effort) {
                p.insert("reasoning_effort".into(), json!(mapped(e)));
            }
        }
        "openrouter" => {
            if let Some(e) = effort {
                p.insert("reasoning".into(), json!({"effort": mapped(e)}));
            } else if off_mapping != LevelMapping::Unsupported {
                let off = match off_mapping {
                    LevelMapping::Value(v) => v,
                    _ => "none".to_string(),
                };
                p.insert("reasoning".into(), json!({"effort": off}));
            }
        }
        "together" => {
            p.insert("reasoning".into(), json!({"enabled": effort.is_some()}));
            if let (Some(e), true) = (effort, compat.supports_reasoning_effort) {
                p.insert("reasoning_effort".into(), json!(mapped(e)));
            }
        }
        _ => {
            if !compat.supports_reasoning_effort {
                return;
            }
            match effort {
                Some(e) => {
                    p.insert("reasoning_effort".into(), json!(mapped(e)));
                }
                None => {
                    if let LevelMapping::Value(v) = off_mapping {
                        p.insert("reasoning_effort".into(), json!(v));
                    }
                }
            }
        }
    }
}

fn parse_usage(model: &Model, raw: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let prompt = n(raw.get("prompt_tokens"));
    let cache_read = raw
        .pointer("/prompt_tokens_details/cached_tokens")
        .or_else(|| raw.get("prompt_cache_hit_tokens"))
        .or_else(|| raw.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let cache_write = n(raw.pointer("/prompt_tokens_details/cache_write_tokens"));
    let input = prompt.saturating_sub(cache_read + cache_write);
    let output = n(raw.get("completion_tokens"));
    let reasoning = raw
        .pointer("/completion_tokens_details/reasoning_tokens")
        .and_then(Value::as_u64)
        .filter(|&r| r > 0)
        .or_else(|| raw.get("reasoning_tokens").and_then(Value::as_u64))
        .unwrap_or(0);
    let mut u = Usage {
        input,
        output,
        cache_read,
        cache_write,
        reasoning: Some(reasoning),
        total_tokens: input + output + cache_read + cache_write,
        ..Usage::default()
    };
    calculate_cost(model, &mut u);
    u
}

/// Map `finish_reason` (Pi's `mapStopReason`); unknown reasons are errors.
pub fn map_stop_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "stop" | "end" => (StopReason::Stop, None),
        "length" => (StopReason::Length, None),
        "function_call" | "tool_calls" => (StopReason::ToolUse, None),
        other => (
            StopReason::Error,
            Some(format!("Provider finish_reason: {other}")),
        ),
    }
}

fn request_headers(model: &Model, options: &StreamOptions) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = Vec::new();
    if let Some(key) = options.api_key.as_deref().filter(|k| !k.is_empty()) {
        h.push(("authorization".into(), format!("Bearer {key}")));
    }
    http::extend_custom_headers(&mut h, model, options);
    h
}

enum Open {
    Text(usize),
    Thinking(usize),
}

pub(crate) async fn run(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let body = build_request(model, context, options);
    let compat = compat(model);
    let url = http::join_url(&model.base_url, "chat/completions");
    let resp = http::post_json(
        options,
        &url,
        &request_headers(model, options),
        &body,
        ErrorStyle::OpenAi,
    )
    .await?;
    em.start().await;

    let mut reader = SseReader::new(resp);
    let mut text_idx: Option<usize> = None;
    let mut thinking_idx: Option<usize> = None;
    // Tool calls by stream index and by id; their argument text.
    let mut by_index: HashMap<u64, usize> = HashMap::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut args: HashMap<usize, ToolArgs> = HashMap::new();
    let mut order: Vec<Open> = Vec::new();
    let mut has_finish = false;

    while let Some(ev) = reader.next().await? {
        let data = ev.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| format!("Could not parse stream chunk: {e}; data={data}"))?;
        http::observe_stream_event(options, model, &chunk).await;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            // Servers that fail mid-stream send `{"error":{…}}` as an event.
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            return Err(msg);
        }
        if em.partial.response_id.is_none() {
            if let Some(id) = chunk
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                em.partial.response_id = Some(id.to_string());
            }
        }
        if let Some(m) = chunk.get("model").and_then(Value::as_str) {
            if !m.is_empty() && m != model.id && em.partial.response_model.is_none() {
                em.partial.response_model = Some(m.to_string());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            *em.usage_mut() = parse_usage(model, u);
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            continue;
        };
        if chunk.get("usage").is_none_or_null() {
            if let Some(u) = choice.get("usage").filter(|u| u.is_object()) {
                *em.usage_mut() = parse_usage(model, u);
            }
        }
        if let Some(fr) = choice.get("finish_reason").and_then(Value::as_str) {
            em.partial.raw_stop_reason = Some(fr.to_string());
            let (stop, msg) = map_stop_reason(fr);
            em.partial.stop_reason = stop;
            if msg.is_some() {
                em.partial.error_message = msg;
            }
            has_finish = true;
        }
        let Some(delta) = choice.get("delta") else {
            continue;
        };

        // Reasoning before content: some proxies put both in one delta, and the thinking
        // block must come first.
        if let Some((field, text)) = REASONING_FIELDS.iter().find_map(|f| {
            delta
                .get(*f)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(|s| (*f, s))
        }) {
            let idx = match thinking_idx {
                Some(i) => i,
                None => {
                    let sig = if model.provider == "opencode-go" && field == "reasoning" {
                        "reasoning_content"
                    } else {
                        field
                    };
                    let i = em
                        .thinking_start(ThinkingContent {
                            thinking: String::new(),
                            thinking_signature: Some(sig.to_string()),
                            redacted: None,
                            extra: Map::new(),
                        })
                        .await;
                    order.push(Open::Thinking(i));
                    thinking_idx = Some(i);
                    i
                }
            };
            em.thinking_delta(idx, text).await;
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            let idx = match text_idx {
                Some(i) => i,
                None => {
                    let i = em.text_start("").await;
                    order.push(Open::Text(i));
                    text_idx = Some(i);
                    i
                }
            };
            em.text_delta(idx, text).await;
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                let stream_index = call.get("index").and_then(Value::as_u64);
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let name = call.pointer("/function/name").and_then(Value::as_str);
                let existing = stream_index
                    .and_then(|si| by_index.get(&si).copied())
                    .or_else(|| id.and_then(|id| by_id.get(id).copied()));
                let idx = match existing {
                    Some(i) => i,
                    None => {
                        let i = em
                            .toolcall_start(id.unwrap_or(""), name.unwrap_or(""), json!({}))
                            .await;
                        args.insert(i, ToolArgs::new());
                        i
                    }
                };
                if let Some(si) = stream_index {
                    by_index.entry(si).or_insert(idx);
                }
                if let Some(id) = id {
                    by_id.insert(id.to_string(), idx);
                }
                if let Some(tc) = em.tool_call(idx) {
                    if tc.id.is_empty() {
                        if let Some(id) = id {
                            tc.id = id.to_string();
                        }
                    }
                    if tc.name.is_empty() {
                        if let Some(n) = name {
                            tc.name = n.to_string();
                        }
                    }
                }
                let frag = call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let partial_args = match args.get_mut(&idx) {
                    Some(a) if !frag.is_empty() => a.append(frag),
                    _ => em
                        .tool_call(idx)
                        .map(|t| t.arguments.clone())
                        .unwrap_or_else(|| json!({})),
                };
                em.toolcall_delta(idx, frag, partial_args).await;
            }
        }
    }

    // Close blocks in content order.
    let mut tool_indices: Vec<usize> = args.keys().copied().collect();
    tool_indices.sort_unstable();
    let mut all: Vec<(usize, u8)> = order
        .iter()
        .map(|o| match o {
            Open::Text(i) => (*i, 0u8),
            Open::Thinking(i) => (*i, 1u8),
        })
        .chain(tool_indices.iter().map(|i| (*i, 2u8)))
        .collect();
    all.sort_unstable();
    for (idx, kind) in all {
        match kind {
            0 => em.text_end(idx).await,
            1 => em.thinking_end(idx).await,
            _ => {
                let text = args
                    .get(&idx)
                    .map(|a| a.text().to_string())
                    .unwrap_or_default();
                em.toolcall_end(idx, Some(&text)).await;
            }
        }
    }

    if !has_finish && !compat.supports_finish_reason {
        let has_calls = em.partial.tool_calls().next().is_some();
        em.partial.stop_reason = if has_calls {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        };
    }
    if em.partial.stop_reason == StopReason::Error {
        return Err(em
            .partial
            .error_message
            .clone()
            .unwrap_or_else(|| "Provider returned an error stop reason".into()));
    }
    if (compat.supports_finish_reason && !has_finish)
        || em.partial.stop_reason == StopReason::Pending
    {
        return Err("Stream ended without finish_reason".into());
    }
    Ok(())
}

trait NullExt {
    fn is_none_or_null(&self) -> bool;
}

impl NullExt for Option<&Value> {
    fn is_none_or_null(&self) -> bool {
        matches!(self, None | Some(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(provider: &str, url: &str) -> Model {
        serde_json::from_value(json!({"id":"m","name":"m","api":"openai-completions",
            "provider":provider,"baseUrl":url,"reasoning":true}))
        .expect("model")
    }

    #[test]
    fn compat_detection() {
        let c = compat(&model("fakeoai", "http://127.0.0.1:18765/v1"));
        assert!(c.supports_store && !c.supports_developer_role && c.supports_reasoning_effort);
        assert_eq!(c.max_tokens_field, "max_completion_tokens");
        let c = compat(&model("deepseek", "https://api.deepseek.com"));
        assert_eq!(c.thinking_format, "deepseek");
        assert_eq!(c.max_tokens_field, "max_tokens");
        assert!(!c.supports_store && c.requires_reasoning_content_on_assistant_messages);
        let c = compat(&model("openai", "https://api.openai.com/v1"));
        assert!(c.supports_developer_role);
        let mut m = model("ollama", "http://localhost:11434/v1");
        m.compat = json!({"supportsDeveloperRole": false, "maxTokensField": "max_tokens"})
            .as_object()
            .cloned();
        let c = compat(&m);
        assert_eq!(c.max_tokens_field, "max_tokens");
    }

    #[test]
    fn tool_call_ids_fit_chat_completions() {
        let m = model("openai", "https://api.openai.com/v1");
        assert_eq!(normalize_tool_call_id(&m, "call_1|fc_2"), "call_1_fc_2");
        let long = format!("call_abc|{}", "x+/=".repeat(100));
        let id = normalize_tool_call_id(&m, &long);
        assert!(id.len() <= 40 && id.starts_with("call_abc_"), "{id}");
        assert_eq!(normalize_tool_call_id(&m, &"a".repeat(50)).len(), 40);
    }

    #[test]
    fn stop_reasons() {
        assert_eq!(map_stop_reason("tool_calls").0, StopReason::ToolUse);
        assert_eq!(map_stop_reason("length").0, StopReason::Length);
        let (s, m) = map_stop_reason("content_filter");
        assert_eq!(s, StopReason::Error);
        assert_eq!(m.as_deref(), Some("Provider finish_reason: content_filter"));
    }
}
