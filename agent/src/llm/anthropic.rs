//! `anthropic-messages`: Anthropic's Messages API (and compatible proxies).
//!
//! Request shape follows Pi 1.6.0's recorded requests: `POST {baseUrl}/v1/messages?beta=true`
//! (the SDK's beta client), system prompt as one text block with `cache_control`, tools with
//! `eager_input_streaming`, `cache_control` on the last tool and on the last block of the
//! last user message, consecutive tool results merged into one user message, budget-based
//! thinking (or adaptive thinking for models that force it), betas in `anthropic-beta`.

use std::collections::HashMap;

use pi_formats::message::{
    AgentMessage, Content, ContentBlock, StopReason, ThinkingContent, ThinkingLevel, Tool,
};
use serde_json::{json, Map, Value};

use super::http::{self, ErrorStyle, SseReader};
use super::json_stream::ToolArgs;
use super::model::{LevelMapping, Model};
use super::oauth;
use super::transform::{normalize_context, transform_messages, NormalizedContext};
use super::{
    base_max_tokens, calculate_cost, clamp_max_tokens_to_context, estimate_context_tokens,
    CacheRetention, Context, Emitter, StreamOptions,
};

const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";
const FINE_GRAINED_TOOL_STREAMING_BETA: &str = "fine-grained-tool-streaming-2025-05-14";

/// Anthropic tool-call ids must match `^[a-zA-Z0-9_-]{1,64}$`.
pub fn normalize_tool_call_id(id: &str) -> String {
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
}

fn cache_retention(options: &StreamOptions) -> CacheRetention {
    options.cache_retention.unwrap_or_else(|| {
        if std::env::var("PI_CACHE_RETENTION").as_deref() == Ok("long") {
            CacheRetention::Long
        } else {
            CacheRetention::Short
        }
    })
}

fn cache_control(model: &Model, options: &StreamOptions) -> Option<Value> {
    match cache_retention(options) {
        CacheRetention::None => None,
        CacheRetention::Short => Some(json!({"type": "ephemeral"})),
        CacheRetention::Long => {
            if model
                .compat_bool("supportsLongCacheRetention")
                .unwrap_or(true)
            {
                Some(json!({"type": "ephemeral", "ttl": "1h"}))
            } else {
                Some(json!({"type": "ephemeral"}))
            }
        }
    }
}

fn image_block(mime: &str, data: &str) -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
}

/// Tool-result content: a plain string without images, else blocks (with a placeholder text
/// when there is no text at all).
fn tool_result_content(content: &[ContentBlock]) -> Value {
    let has_images = content.iter().any(|b| matches!(b, ContentBlock::Image(_)));
    if !has_images {
        let text = content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        return json!(text);
    }
    let mut blocks: Vec<Value> = content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(json!({"type": "text", "text": t.text})),
            ContentBlock::Image(i) => Some(image_block(&i.mime_type, &i.data)),
            _ => None,
        })
        .collect();
    if !blocks.iter().any(|b| b["type"] == "text") {
        blocks.insert(0, json!({"type": "text", "text": "(see attached image)"}));
    }
    Value::Array(blocks)
}

/// Convert the transcript to Anthropic `messages`.
pub fn convert_messages(
    model: &Model,
    norm: &NormalizedContext,
    cache: Option<&Value>,
) -> Vec<Value> {
    let allow_empty_signature = model.compat_bool("allowEmptySignature").unwrap_or(false);
    let msgs = transform_messages(&norm.messages, model, Some(&normalize_tool_call_id));
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < msgs.len() {
        match &msgs[i] {
            AgentMessage::User(u) => match &u.content {
                Content::Text(s) => {
                    if !s.trim().is_empty() {
                        out.push(json!({"role": "user", "content": s}));
                    }
                }
                Content::Blocks(blocks) => {
                    let parts: Vec<Value> = blocks
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text(t) if !t.text.trim().is_empty() => {
                                Some(json!({"type": "text", "text": t.text}))
                            }
                            ContentBlock::Image(img) => {
                                Some(image_block(&img.mime_type, &img.data))
                            }
                            _ => None,
                        })
                        .collect();
                    if !parts.is_empty() {
                        out.push(json!({"role": "user", "content": parts}));
                    }
                }
            },
            AgentMessage::Assistant(a) => {
                let mut blocks = Vec::new();
                for b in &a.content {
                    match b {
                        ContentBlock::Text(t) if !t.text.trim().is_empty() => {
                            blocks.push(json!({"type": "text", "text": t.text}))
                        }
                        ContentBlock::Thinking(t) => {
                            if t.redacted == Some(true) {
                                blocks.push(json!({"type": "redacted_thinking",
                                    "data": t.thinking_signature.clone().unwrap_or_default()}));
                                continue;
                            }
                            let sig = t.thinking_signature.as_deref().filter(|s| !s.trim().is_empty());
                            if t.thinking.trim().is_empty() && sig.is_none() {
                                continue;
                            }
                            match sig {
                                Some(sig) => blocks.push(json!({"type": "thinking", "thinking": t.thinking, "signature": sig})),
                                // Unsigned thinking (an aborted stream) is rejected as thinking;
                                // send it as text unless the endpoint accepts empty signatures.
                                None if allow_empty_signature => {
                                    blocks.push(json!({"type": "thinking", "thinking": t.thinking, "signature": ""}))
                                }
                                None => blocks.push(json!({"type": "text", "text": t.thinking})),
                            }
                        }
                        ContentBlock::ToolCall(tc) => blocks.push(json!({"type": "tool_use", "id": tc.id,
                            "name": tc.name, "input": if tc.arguments.is_null() { json!({}) } else { tc.arguments.clone() }})),
                        _ => {}
                    }
                }
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            AgentMessage::ToolResult(_) => {
                let mut results = Vec::new();
                let mut error_images = Vec::new();
                while let Some(AgentMessage::ToolResult(r)) = msgs.get(i) {
                    // Anthropic rejects images inside error results: they follow all results.
                    let content = if r.is_error
                        && r.content
                            .iter()
                            .any(|b| matches!(b, ContentBlock::Image(_)))
                    {
                        error_images.push(json!({"type": "text", "text":
                            format!("Images from the error result of tool call {} ({}):", r.tool_call_id, r.tool_name)}));
                        let mut kept = Vec::new();
                        let mut prev_placeholder = false;
                        for b in &r.content {
                            if let ContentBlock::Image(img) = b {
                                error_images.push(image_block(&img.mime_type, &img.data));
                                if !prev_placeholder {
                                    kept.push(ContentBlock::text(
                                        "(image attached after the tool results)",
                                    ));
                                }
                                prev_placeholder = true;
                            } else {
                                prev_placeholder = false;
                                kept.push(b.clone());
                            }
                        }
                        tool_result_content(&kept)
                    } else {
                        tool_result_content(&r.content)
                    };
                    results.push(json!({"type": "tool_result", "tool_use_id": r.tool_call_id,
                        "content": content, "is_error": r.is_error}));
                    i += 1;
                }
                results.extend(error_images);
                out.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Cache the conversation so far: mark the last block of the last user message.
    if let (Some(cache), Some(last)) = (cache, out.last_mut()) {
        if last["role"] == "user" {
            let content = last["content"].take();
            last["content"] = match content {
                Value::String(s) => json!([{"type": "text", "text": s, "cache_control": cache}]),
                Value::Array(mut blocks) => {
                    if let Some(Value::Object(b)) = blocks.last_mut() {
                        if matches!(
                            b.get("type").and_then(Value::as_str),
                            Some("text" | "image" | "tool_result")
                        ) {
                            b.insert("cache_control".into(), cache.clone());
                        }
                    }
                    Value::Array(blocks)
                }
                other => other,
            };
        }
    }
    out
}

/// Convert tool declarations to `{name, description, eager_input_streaming, input_schema}`.
pub fn convert_tools(model: &Model, tools: &[Tool], cache: Option<&Value>) -> Vec<Value> {
    let eager = model
        .compat_bool("supportsEagerToolInputStreaming")
        .unwrap_or(true);
    let cache_on_tools = model
        .compat_bool("supportsCacheControlOnTools")
        .unwrap_or(true);
    let n = tools.len();
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let schema = &t.parameters;
            // Anthropic rejects root-level anyOf/oneOf/allOf: keep only the object keywords.
            let mut input_schema = Map::new();
            input_schema.insert("type".into(), json!("object"));
            input_schema.insert(
                "properties".into(),
                schema
                    .get("properties")
                    .cloned()
                    .unwrap_or_else(|| json!({})),
            );
            input_schema.insert(
                "required".into(),
                schema.get("required").cloned().unwrap_or_else(|| json!([])),
            );
            for key in ["additionalProperties", "$defs", "definitions"] {
                if let Some(v) = schema.get(key) {
                    input_schema.insert(key.into(), v.clone());
                }
            }
            let mut m = Map::new();
            m.insert("name".into(), json!(t.name));
            m.insert("description".into(), json!(t.description));
            if eager {
                m.insert("eager_input_streaming".into(), json!(true));
            }
            m.insert("input_schema".into(), Value::Object(input_schema));
            if let (Some(c), true, true) = (cache, cache_on_tools, i + 1 == n) {
                m.insert("cache_control".into(), c.clone());
            }
            Value::Object(m)
        })
        .collect()
}

/// Adaptive-thinking effort for a level (Pi's `mapThinkingLevelToEffort`).
fn effort_for(model: &Model, level: ThinkingLevel) -> String {
    if let LevelMapping::Value(v) = model.level_mapping(level) {
        return v;
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .to_string()
}

/// The request body and the beta features (sent as the `anthropic-beta` header).
pub fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> (Value, Vec<String>) {
    let norm = normalize_context(context);
    let cache = cache_control(model, options);
    let reasoning = options.reasoning.filter(|l| *l != ThinkingLevel::Off);
    let adaptive = model.compat_bool("forceAdaptiveThinking") == Some(true);
    let mut max_tokens = base_max_tokens(model, &norm, options);
    let mut thinking: Option<Value> = None;
    let mut output_config: Option<Value> = None;
    let thinking_enabled = reasoning.is_some() && model.reasoning;
    match reasoning {
        None => {
            if model.reasoning
                && model.level_mapping(ThinkingLevel::Off) != LevelMapping::Unsupported
            {
                thinking = Some(json!({"type": "disabled"}));
            }
        }
        Some(level) if model.reasoning => {
            if adaptive {
                thinking = Some(json!({"type": "adaptive", "display": "summarized"}));
                output_config = Some(json!({"effort": effort_for(model, level)}));
            } else {
                // Pi's adjustMaxTokensForThinking: the budget comes on top of the answer
                // room, capped by the model; at least 1024 answer tokens remain.
                let base = max_tokens;
                let mut budget = options.thinking_budgets.for_level(level);
                let mut total = (base + budget).min(model.max_tokens);
                if total <= budget {
                    budget = budget.min(total.saturating_sub(1024));
                }
                let est = estimate_context_tokens(&norm.system_prompt, &norm.tools, &norm.messages);
                total = clamp_max_tokens_to_context(model, est, total);
                max_tokens = total;
                budget = budget.min(total.saturating_sub(1024));
                let budget = if budget == 0 { 1024 } else { budget };
                thinking = Some(
                    json!({"type": "enabled", "budget_tokens": budget, "display": "summarized"}),
                );
            }
        }
        Some(_) => {}
    }

    let mut p = Map::new();
    p.insert("model".into(), json!(model.id));
    p.insert(
        "messages".into(),
        Value::Array(convert_messages(model, &norm, cache.as_ref())),
    );
    p.insert("max_tokens".into(), json!(max_tokens));
    p.insert("stream".into(), json!(true));
    if !norm.system_prompt.is_empty() {
        let mut block = Map::new();
        block.insert("type".into(), json!("text"));
        block.insert("text".into(), json!(norm.system_prompt));
        if let Some(c) = &cache {
            block.insert("cache_control".into(), c.clone());
        }
        p.insert("system".into(), json!([block]));
    }
    if let Some(t) = options.temperature {
        if !thinking_enabled && model.compat_bool("supportsTemperature").unwrap_or(true) {
            p.insert("temperature".into(), json!(t));
        }
    }
    if !norm.tools.is_empty() {
        p.insert(
            "tools".into(),
            Value::Array(convert_tools(model, &norm.tools, cache.as_ref())),
        );
    }
    if let Some(t) = thinking {
        p.insert("thinking".into(), t);
    }
    if let Some(o) = output_config {
        p.insert("output_config".into(), o);
    }
    if let Some(choice) = &options.tool_choice {
        p.insert("tool_choice".into(), json!({"type": choice}));
    }

    let mut betas = Vec::new();
    if !norm.tools.is_empty()
        && !model
            .compat_bool("supportsEagerToolInputStreaming")
            .unwrap_or(true)
    {
        betas.push(FINE_GRAINED_TOOL_STREAMING_BETA.to_string());
    }
    if thinking_enabled && !adaptive {
        betas.push(INTERLEAVED_THINKING_BETA.to_string());
    }
    (Value::Object(p), betas)
}

fn request_headers(
    model: &Model,
    options: &StreamOptions,
    betas: &[String],
) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = vec![
        ("anthropic-version".into(), "2023-06-01".into()),
        ("accept".into(), "application/json".into()),
        (
            "anthropic-dangerous-direct-browser-access".into(),
            "true".into(),
        ),
    ];
    let mut betas = betas.to_vec();
    if let Some(key) = options.api_key.as_deref().filter(|k| !k.is_empty()) {
        if model.provider == "github-copilot" {
            h.push(("authorization".into(), format!("Bearer {key}")));
        } else if oauth::anthropic::is_oauth_token(key) {
            // A Claude subscription token: Claude Code's identity (see oauth::anthropic).
            h.push(("authorization".into(), format!("Bearer {key}")));
            h.push((
                "user-agent".into(),
                format!("claude-cli/{}", oauth::anthropic::CLAUDE_CODE_VERSION),
            ));
            h.push(("x-app".into(), "cli".into()));
            let own = std::mem::take(&mut betas);
            betas = oauth::anthropic::OAUTH_BETAS
                .iter()
                .map(|b| b.to_string())
                .chain(own)
                .collect();
        } else {
            h.push(("x-api-key".into(), key.to_string()));
        }
    }
    // A configured anthropic-beta header replaces the computed list.
    let configured = model
        .headers
        .keys()
        .chain(options.headers.keys())
        .any(|k| k.eq_ignore_ascii_case("anthropic-beta"));
    if !betas.is_empty() && !configured {
        h.push(("anthropic-beta".into(), betas.join(",")));
    }
    http::extend_custom_headers(&mut h, model, options);
    h
}

/// Map `stop_reason` (Pi's `mapStopReason`).
pub fn map_stop_reason(
    reason: &str,
    details: Option<&Value>,
) -> Result<(StopReason, Option<String>), String> {
    Ok(match reason {
        "end_turn" | "pause_turn" | "stop_sequence" => (StopReason::Stop, None),
        "max_tokens" => (StopReason::Length, None),
        "tool_use" => (StopReason::ToolUse, None),
        "refusal" => (
            StopReason::Error,
            Some(
                details
                    .and_then(|d| d.get("explanation"))
                    .and_then(Value::as_str)
                    .unwrap_or("The model refused to complete the request")
                    .to_string(),
            ),
        ),
        "sensitive" => (
            StopReason::Error,
            Some("Provider stopped with: sensitive".into()),
        ),
        other => return Err(format!("Unhandled stop reason: {other}")),
    })
}

enum Block {
    Text(usize),
    Thinking(usize),
    Tool(usize, ToolArgs),
}

pub(crate) async fn run(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let (mut body, betas) = build_request(model, context, options);
    let oauth_identity = model.provider != "github-copilot"
        && options
            .api_key
            .as_deref()
            .is_some_and(oauth::anthropic::is_oauth_token);
    // The request's own tool names, to map Claude Code's casing back in replies.
    let tool_names: Vec<String> = body
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if oauth_identity {
        oauth::anthropic::apply_claude_code_identity(&mut body);
    }
    let url = http::join_url(&model.base_url, "v1/messages?beta=true");
    let resp = http::post_json(
        options,
        &url,
        &request_headers(model, options, &betas),
        &body,
        ErrorStyle::Anthropic,
    )
    .await?;
    em.start().await;

    let mut reader = SseReader::new(resp);
    let mut open: HashMap<u64, Block> = HashMap::new();
    let mut saw_start = false;
    let mut saw_stop = false;
    let known = [
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    ];
    while let Some(sse) = reader.next().await? {
        let name = sse.event.as_deref().unwrap_or("");
        if name == "error" {
            return Err(sse.data);
        }
        if !known.contains(&name) {
            continue;
        }
        let ev: Value = serde_json::from_str(&sse.data).map_err(|e| {
            format!(
                "Could not parse Anthropic SSE event {name}: {e}; data={}",
                sse.data
            )
        })?;
        http::observe_stream_event(options, model, &ev).await;
        let n = |v: Option<&Value>| v.and_then(Value::as_u64);
        match ev.get("type").and_then(Value::as_str).unwrap_or(name) {
            "message_start" => {
                saw_start = true;
                let msg = &ev["message"];
                em.partial.response_id = msg.get("id").and_then(Value::as_str).map(str::to_string);
                if let Some(m) = msg.get("model").and_then(Value::as_str) {
                    if m != model.id {
                        em.partial.response_model = Some(m.to_string());
                    }
                }
                let u = &msg["usage"];
                let usage = em.usage_mut();
                usage.input = n(u.get("input_tokens")).unwrap_or(0);
                usage.output = n(u.get("output_tokens")).unwrap_or(0);
                usage.cache_read = n(u.get("cache_read_input_tokens")).unwrap_or(0);
                usage.cache_write = n(u.get("cache_creation_input_tokens")).unwrap_or(0);
                usage.cache_write_1h =
                    Some(n(u.pointer("/cache_creation/ephemeral_1h_input_tokens")).unwrap_or(0));
                usage.total_tokens =
                    usage.input + usage.output + usage.cache_read + usage.cache_write;
                calculate_cost(model, usage);
            }
            "content_block_start" => {
                let index = n(ev.get("index")).unwrap_or(0);
                let cb = &ev["content_block"];
                match cb.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let i = em
                            .text_start(cb.get("text").and_then(Value::as_str).unwrap_or(""))
                            .await;
                        open.insert(index, Block::Text(i));
                    }
                    Some("thinking") => {
                        let i = em
                            .thinking_start(ThinkingContent {
                                thinking: cb
                                    .get("thinking")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_string(),
                                thinking_signature: Some(
                                    cb.get("signature")
                                        .and_then(Value::as_str)
                                        .unwrap_or("")
                                        .to_string(),
                                ),
                                redacted: None,
                                extra: Map::new(),
                            })
                            .await;
                        open.insert(index, Block::Thinking(i));
                    }
                    Some("redacted_thinking") => {
                        let i = em
                            .thinking_start(ThinkingContent {
                                thinking: "[Reasoning redacted]".into(),
                                thinking_signature: cb
                                    .get("data")
                                    .and_then(Value::as_str)
                                    .map(str::to_string),
                                redacted: Some(true),
                                extra: Map::new(),
                            })
                            .await;
                        open.insert(index, Block::Thinking(i));
                    }
                    Some("tool_use") => {
                        let input = cb
                            .get("input")
                            .cloned()
                            .filter(|v| !v.is_null())
                            .unwrap_or_else(|| json!({}));
                        let name = cb.get("name").and_then(Value::as_str).unwrap_or("");
                        let name = if oauth_identity {
                            oauth::anthropic::from_claude_code_name(name, &tool_names)
                        } else {
                            name.to_string()
                        };
                        let i = em
                            .toolcall_start(
                                cb.get("id").and_then(Value::as_str).unwrap_or(""),
                                &name,
                                input,
                            )
                            .await;
                        open.insert(index, Block::Tool(i, ToolArgs::new()));
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = n(ev.get("index")).unwrap_or(0);
                let d = &ev["delta"];
                match (d.get("type").and_then(Value::as_str), open.get_mut(&index)) {
                    (Some("text_delta"), Some(Block::Text(i))) => {
                        let i = *i;
                        em.text_delta(i, d.get("text").and_then(Value::as_str).unwrap_or(""))
                            .await;
                    }
                    (Some("thinking_delta"), Some(Block::Thinking(i))) => {
                        let i = *i;
                        em.thinking_delta(
                            i,
                            d.get("thinking").and_then(Value::as_str).unwrap_or(""),
                        )
                        .await;
                    }
                    (Some("input_json_delta"), Some(Block::Tool(i, args))) => {
                        let i = *i;
                        let frag = d.get("partial_json").and_then(Value::as_str).unwrap_or("");
                        let partial = args.append(frag);
                        em.toolcall_delta(i, frag, partial).await;
                    }
                    (Some("signature_delta"), Some(Block::Thinking(i))) => {
                        let i = *i;
                        let sig = d
                            .get("signature")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        if let Some(t) = em.thinking_block(i) {
                            t.thinking_signature
                                .get_or_insert_with(String::new)
                                .push_str(&sig);
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = n(ev.get("index")).unwrap_or(0);
                match open.remove(&index) {
                    Some(Block::Text(i)) => em.text_end(i).await,
                    Some(Block::Thinking(i)) => em.thinking_end(i).await,
                    Some(Block::Tool(i, args)) => {
                        // A tool_use block whose input came whole at start has no deltas.
                        let text = args.text().to_string();
                        em.toolcall_end(i, if text.is_empty() { None } else { Some(&text) })
                            .await;
                    }
                    None => {}
                }
            }
            "message_delta" => {
                let d = &ev["delta"];
                if let Some(reason) = d.get("stop_reason").and_then(Value::as_str) {
                    em.partial.raw_stop_reason = Some(reason.to_string());
                    let (stop, msg) = map_stop_reason(reason, d.get("stop_details"))?;
                    em.partial.stop_reason = stop;
                    if msg.is_some() {
                        em.partial.error_message = msg;
                    }
                }
                if let Some(u) = ev.get("usage").filter(|u| u.is_object()) {
                    let usage = em.usage_mut();
                    // Fields a proxy leaves out keep the message_start values.
                    if let Some(v) = n(u.get("input_tokens")) {
                        usage.input = v;
                    }
                    if let Some(v) = n(u.get("output_tokens")) {
                        usage.output = v;
                    }
                    if let Some(v) = n(u.get("cache_read_input_tokens")) {
                        usage.cache_read = v;
                    }
                    if let Some(v) = n(u.get("cache_creation_input_tokens")) {
                        usage.cache_write = v;
                    }
                    if let Some(v) = n(u.pointer("/cache_creation/ephemeral_1h_input_tokens")) {
                        usage.cache_write_1h = Some(v);
                    }
                    if let Some(v) = n(u.pointer("/output_tokens_details/thinking_tokens")) {
                        usage.reasoning = Some(v);
                    }
                }
                let usage = em.usage_mut();
                usage.total_tokens =
                    usage.input + usage.output + usage.cache_read + usage.cache_write;
                calculate_cost(model, usage);
            }
            "message_stop" => saw_stop = true,
            _ => {}
        }
    }
    if saw_start && !saw_stop {
        return Err("Anthropic stream ended before message_stop".into());
    }
    match em.partial.stop_reason {
        StopReason::Pending => Err("Anthropic stream ended without a stop reason".into()),
        StopReason::Error | StopReason::Aborted => Err(em
            .partial
            .error_message
            .clone()
            .unwrap_or_else(|| "An unknown error occurred".into())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_stop_reasons() {
        assert_eq!(normalize_tool_call_id("call|a/b+c"), "call_a_b_c");
        assert_eq!(normalize_tool_call_id(&"x".repeat(80)).len(), 64);
        assert_eq!(
            map_stop_reason("end_turn", None),
            Ok((StopReason::Stop, None))
        );
        assert_eq!(
            map_stop_reason("tool_use", None),
            Ok((StopReason::ToolUse, None))
        );
        assert_eq!(
            map_stop_reason("max_tokens", None),
            Ok((StopReason::Length, None))
        );
        assert_eq!(
            map_stop_reason("refusal", None).map(|r| r.0),
            Ok(StopReason::Error)
        );
        assert!(map_stop_reason("weird", None).is_err());
    }
}
