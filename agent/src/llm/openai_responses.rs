//! `openai-responses`: OpenAI's Responses API (`POST {baseUrl}/responses`).
//!
//! Output items map to blocks: `reasoning` → thinking (summary parts joined by a blank line,
//! the whole item JSON kept as `thinkingSignature` so it can be replayed), `message` → text
//! (`textSignature` records the item id and phase), `function_call` → tool call with id
//! `call_id|item_id`. Replay reverses that. Stop reason comes from the terminal response
//! status (spec §14.4).

use std::collections::HashMap;

use pi_formats::message::{AgentMessage, Content, ContentBlock, StopReason, ThinkingContent, Tool};
use serde_json::{json, Map, Value};

use super::http::{self, ErrorStyle, SseReader};
use super::json_stream::ToolArgs;
use super::model::{LevelMapping, Model};
use super::transform::{normalize_context, transform_messages};
use super::{
    base_max_tokens, calculate_cost, effective_reasoning, Context, Emitter, StreamOptions,
};

/// Providers whose `call|item` ids are kept as-is (other ids are sanitized).
const TOOL_CALL_PROVIDERS: [&str; 4] = ["openai", "openai-codex", "opencode", "azure"];

fn sanitize_id_part(part: &str) -> String {
    let s: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    s.trim_end_matches('_').to_string()
}

fn short_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn text_signature(id: &str, phase: Option<&str>) -> String {
    let mut m = Map::new();
    m.insert("v".into(), json!(1));
    m.insert("id".into(), json!(id));
    if let Some(p) = phase {
        m.insert("phase".into(), json!(p));
    }
    Value::Object(m).to_string()
}

/// `(id, phase)` from a text signature (JSON v1 or a legacy bare id).
fn parse_text_signature(sig: &str) -> (String, Option<String>) {
    if sig.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(sig) {
            if v["v"] == 1 {
                if let Some(id) = v["id"].as_str() {
                    let phase = v["phase"]
                        .as_str()
                        .filter(|p| *p == "commentary" || *p == "final_answer");
                    return (id.to_string(), phase.map(str::to_string));
                }
            }
        }
    }
    (sig.to_string(), None)
}

fn tool_output(model: &Model, content: &[ContentBlock]) -> Value {
    let text = content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let images: Vec<_> = content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Image(i) => Some(i),
            _ => None,
        })
        .collect();
    let has_text = !text.trim().is_empty();
    if images.is_empty() || !model.supports_images() {
        let s = if has_text {
            text
        } else if !images.is_empty() {
            "(see attached image)".into()
        } else {
            "(no tool output)".into()
        };
        return json!(s);
    }
    let mut out = Vec::new();
    if has_text {
        out.push(json!({"type": "input_text", "text": text}));
    }
    for i in images {
        out.push(json!({"type": "input_image", "detail": "auto",
            "image_url": format!("data:{};base64,{}", i.mime_type, i.data)}));
    }
    Value::Array(out)
}

/// Convert the transcript to Responses `input` items.
pub fn convert_input(model: &Model, context: &Context) -> Vec<Value> {
    let norm = normalize_context(context);
    let keep_pairs = TOOL_CALL_PROVIDERS.contains(&model.provider.as_str());
    let normalize = |id: &str| -> String {
        match id.split_once('|') {
            Some((call, item)) if keep_pairs => {
                let mut item = sanitize_id_part(item);
                if !item.starts_with("fc_") {
                    item = sanitize_id_part(&format!("fc_{item}"));
                }
                format!("{}|{item}", sanitize_id_part(call))
            }
            _ => sanitize_id_part(id),
        }
    };
    let msgs = transform_messages(&norm.messages, model, Some(&normalize));
    let mut out = Vec::new();
    if !norm.system_prompt.is_empty() {
        let role = if model.reasoning && model.compat_bool("supportsDeveloperRole") != Some(false) {
            "developer"
        } else {
            "system"
        };
        out.push(json!({"role": role, "content": norm.system_prompt}));
    }
    for (msg_index, msg) in msgs.iter().enumerate() {
        match msg {
            AgentMessage::User(u) => {
                let parts: Vec<Value> = match &u.content {
                    Content::Text(s) => vec![json!({"type": "input_text", "text": s})],
                    Content::Blocks(b) => b
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text(t) => {
                                Some(json!({"type": "input_text", "text": t.text}))
                            }
                            ContentBlock::Image(i) => {
                                Some(json!({"type": "input_image", "detail": "auto",
                                "image_url": format!("data:{};base64,{}", i.mime_type, i.data)}))
                            }
                            _ => None,
                        })
                        .collect(),
                };
                if !parts.is_empty() {
                    out.push(json!({"role": "user", "content": parts}));
                }
            }
            AgentMessage::Assistant(a) => {
                let same_api = a.provider == model.provider && a.api == model.api;
                let different_model = same_api && a.model != model.id;
                let mut text_i = 0;
                for b in &a.content {
                    match b {
                        ContentBlock::Thinking(t) => {
                            if let Some(item) = t
                                .thinking_signature
                                .as_deref()
                                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                            {
                                out.push(item);
                            }
                        }
                        ContentBlock::Text(t) => {
                            let fallback = if text_i == 0 {
                                format!("msg_pi_{msg_index}")
                            } else {
                                format!("msg_pi_{msg_index}_{text_i}")
                            };
                            text_i += 1;
                            let (mut id, phase) = match t.text_signature.as_deref() {
                                Some(s) => parse_text_signature(s),
                                None => (fallback.clone(), None),
                            };
                            if id.is_empty() {
                                id = fallback;
                            } else if id.len() > 64 {
                                id = format!("msg_{}", short_hash(&id));
                            }
                            let mut item = Map::new();
                            item.insert("type".into(), json!("message"));
                            item.insert("role".into(), json!("assistant"));
                            item.insert(
                                "content".into(),
                                json!([{"type": "output_text", "text": t.text, "annotations": []}]),
                            );
                            item.insert("status".into(), json!("completed"));
                            item.insert("id".into(), json!(id));
                            if let Some(p) = phase {
                                item.insert("phase".into(), json!(p));
                            }
                            out.push(Value::Object(item));
                        }
                        ContentBlock::ToolCall(tc) => {
                            let (call_id, item_id) = match tc.id.split_once('|') {
                                Some((c, i)) => (c.to_string(), Some(i.to_string())),
                                None => (tc.id.clone(), None),
                            };
                            let item_id =
                                item_id.filter(|i| !different_model && i.starts_with("fc_"));
                            let mut item = Map::new();
                            item.insert("type".into(), json!("function_call"));
                            if let Some(i) = item_id {
                                item.insert("id".into(), json!(i));
                            }
                            item.insert("call_id".into(), json!(call_id));
                            item.insert("name".into(), json!(tc.name));
                            item.insert(
                                "arguments".into(),
                                json!(serde_json::to_string(&tc.arguments)
                                    .unwrap_or_else(|_| "{}".into())),
                            );
                            out.push(Value::Object(item));
                        }
                        _ => {}
                    }
                }
            }
            AgentMessage::ToolResult(r) => {
                let call_id = r.tool_call_id.split('|').next().unwrap_or("").to_string();
                out.push(json!({"type": "function_call_output", "call_id": call_id, "output": tool_output(model, &r.content)}));
            }
            _ => {}
        }
    }
    out
}

/// Convert tool declarations to Responses function tools.
pub fn convert_tools(model: &Model, tools: &[Tool]) -> Vec<Value> {
    let strict_supported = model.compat_bool("supportsStrictMode").unwrap_or(false);
    tools
        .iter()
        .map(|t| {
            let mut m = Map::new();
            m.insert("type".into(), json!("function"));
            m.insert("name".into(), json!(t.name));
            m.insert("description".into(), json!(t.description));
            m.insert("parameters".into(), t.parameters.clone());
            if strict_supported {
                m.insert("strict".into(), json!(false));
            }
            Value::Object(m)
        })
        .collect()
}

/// Build the request body (Pi's `buildParams`).
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let norm = normalize_context(context);
    let mut p = Map::new();
    p.insert("model".into(), json!(model.id));
    p.insert("input".into(), Value::Array(convert_input(model, context)));
    p.insert("stream".into(), json!(true));
    if let Some(sid) = options
        .session_id
        .as_deref()
        .filter(|_| options.cache_retention != Some(super::CacheRetention::None))
    {
        p.insert(
            "prompt_cache_key".into(),
            json!(sid.chars().take(64).collect::<String>()),
        );
    }
    p.insert("store".into(), json!(false));
    let max = base_max_tokens(model, &norm, options);
    if max > 0 && model.compat_bool("supportsMaxOutputTokens").unwrap_or(true) {
        p.insert("max_output_tokens".into(), json!(max.max(16)));
    }
    if let Some(t) = options.temperature {
        p.insert("temperature".into(), json!(t));
    }
    if !norm.tools.is_empty() {
        p.insert(
            "tools".into(),
            Value::Array(convert_tools(model, &norm.tools)),
        );
    }
    if let Some(c) = &options.tool_choice {
        p.insert("tool_choice".into(), json!(c));
    }
    if model.reasoning {
        match effective_reasoning(model, options) {
            Some(level) => {
                p.insert(
                    "reasoning".into(),
                    json!({"effort": model.level_value(level), "summary": "auto"}),
                );
                p.insert("include".into(), json!(["reasoning.encrypted_content"]));
            }
            None => {
                let off = model.level_mapping(pi_formats::message::ThinkingLevel::Off);
                if model.provider != "github-copilot" && off != LevelMapping::Unsupported {
                    let effort = match off {
                        LevelMapping::Value(v) => v,
                        _ => "none".into(),
                    };
                    p.insert("reasoning".into(), json!({"effort": effort}));
                }
            }
        }
        if model.provider == "xai" {
            p.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
    }
    if let Some(sp) = &model.sampling_params {
        for (k, v) in sp {
            p.insert(k.clone(), v.clone());
        }
    }
    Value::Object(p)
}

/// Map a terminal response status (Pi's `mapStopReason`).
pub fn map_status(
    status: Option<&str>,
    incomplete_reason: Option<&str>,
) -> (StopReason, Option<String>) {
    match status {
        None | Some("completed") | Some("in_progress") | Some("queued") => (StopReason::Stop, None),
        Some("incomplete") => match incomplete_reason {
            Some("max_output_tokens") => (StopReason::Length, None),
            Some(r) => (StopReason::Error, Some(format!("Response incomplete: {r}"))),
            None => (
                StopReason::Error,
                Some("Response incomplete without a provider reason".into()),
            ),
        },
        Some("failed") | Some("cancelled") => (StopReason::Error, None),
        Some(other) => (
            StopReason::Error,
            Some(format!("Unhandled stop reason: {other}")),
        ),
    }
}

enum Slot {
    Thinking(usize),
    Text(usize),
    Tool(usize, ToolArgs),
}

pub(crate) async fn run(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let body = build_request(model, context, options);
    let mut headers: Vec<(String, String)> = Vec::new();
    if let Some(key) = options.api_key.as_deref().filter(|k| !k.is_empty()) {
        headers.push(("authorization".into(), format!("Bearer {key}")));
    }
    let url = http::join_url(&model.base_url, "responses");
    stream_response(model, options, em, &url, headers, &body).await
}

/// `azure-openai-responses`: the Responses API of an Azure OpenAI resource. The endpoint is
/// `AZURE_OPENAI_BASE_URL`, else `https://$AZURE_OPENAI_RESOURCE_NAME.openai.azure.com/openai/v1`,
/// else the model's base URL; the key goes in an `api-key` header, the API version
/// (`AZURE_OPENAI_API_VERSION`, default `v1`) in the query, and the model id is replaced by
/// its deployment name from `AZURE_OPENAI_DEPLOYMENT_NAME_MAP` (`id=deployment,…`).
pub(crate) async fn run_azure(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let Some(key) = options.api_key.as_deref().filter(|k| !k.is_empty()) else {
        return Err(format!("No API key for provider: {}", model.provider));
    };
    let base = azure_base_url(
        env("AZURE_OPENAI_BASE_URL").as_deref(),
        env("AZURE_OPENAI_RESOURCE_NAME").as_deref(),
        &model.base_url,
    )?;
    let version = env("AZURE_OPENAI_API_VERSION").unwrap_or_else(|| "v1".into());
    let mut body = build_request(model, context, options);
    let deployment = azure_deployment_name(
        &model.id,
        env("AZURE_OPENAI_DEPLOYMENT_NAME_MAP").as_deref(),
    );
    body["model"] = json!(deployment);
    let headers = vec![("api-key".to_string(), key.to_string())];
    let url = format!(
        "{}?api-version={version}",
        http::join_url(&base, "responses")
    );
    stream_response(model, options, em, &url, headers, &body).await
}

/// The Azure endpoint (see [`run_azure`]). Resource roots on Azure hosts get the
/// `/openai/v1` path the Responses API lives under.
pub(crate) fn azure_base_url(
    base_url: Option<&str>,
    resource_name: Option<&str>,
    model_base_url: &str,
) -> Result<String, String> {
    let chosen = match (base_url, resource_name) {
        (Some(url), _) => url.trim().to_string(),
        (None, Some(resource)) => format!("https://{}.openai.azure.com/openai/v1", resource.trim()),
        (None, None) if !model_base_url.trim().is_empty() => model_base_url.trim().to_string(),
        (None, None) => {
            return Err(
                "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or \
                 AZURE_OPENAI_RESOURCE_NAME, or give the model a baseUrl."
                    .into(),
            )
        }
    };
    let trimmed = chosen.trim_end_matches('/');
    let url = reqwest::Url::parse(trimmed)
        .map_err(|_| format!("Invalid Azure OpenAI base URL: {chosen}"))?;
    let host = url.host_str().unwrap_or("");
    let azure_host = [
        ".openai.azure.com",
        ".cognitiveservices.azure.com",
        ".ai.azure.com",
    ]
    .iter()
    .any(|suffix| host.ends_with(suffix));
    let path = url.path().trim_end_matches('/');
    if azure_host && matches!(path, "" | "/openai" | "/openai/v1/responses") {
        let mut root = url.clone();
        root.set_path("/openai/v1");
        root.set_query(None);
        return Ok(root.to_string().trim_end_matches('/').to_string());
    }
    Ok(trimmed.to_string())
}

/// The deployment serving `model_id`: its entry in `AZURE_OPENAI_DEPLOYMENT_NAME_MAP`, else
/// the id itself.
pub(crate) fn azure_deployment_name(model_id: &str, map: Option<&str>) -> String {
    map.unwrap_or("")
        .split(',')
        .filter_map(|entry| entry.trim().split_once('='))
        .find(|(id, deployment)| id.trim() == model_id && !deployment.trim().is_empty())
        .map(|(_, deployment)| deployment.trim().to_string())
        .unwrap_or_else(|| model_id.to_string())
}

/// Sends a Responses request and turns its SSE stream into events.
pub(crate) async fn stream_response(
    model: &Model,
    options: &StreamOptions,
    em: &mut Emitter,
    url: &str,
    mut headers: Vec<(String, String)>,
    body: &Value,
) -> Result<(), String> {
    http::extend_custom_headers(&mut headers, model, options);
    let resp = http::post_json(options, url, &headers, body, ErrorStyle::OpenAi).await?;
    em.start().await;

    let mut reader = SseReader::new(resp);
    let mut slots: HashMap<u64, Slot> = HashMap::new();
    let mut unfinished: Vec<usize> = Vec::new();
    let mut terminal = false;
    while let Some(sse) = reader.next().await? {
        if sse.data.trim().is_empty() || sse.data.trim() == "[DONE]" {
            continue;
        }
        let ev: Value = serde_json::from_str(&sse.data)
            .map_err(|e| format!("Could not parse Responses event: {e}; data={}", sse.data))?;
        http::observe_stream_event(options, model, &ev).await;
        let oi = ev.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        let delta = ev.get("delta").and_then(Value::as_str).unwrap_or("");
        match ev.get("type").and_then(Value::as_str).unwrap_or("") {
            "response.created" => {
                em.partial.response_id = ev
                    .pointer("/response/id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            "response.output_item.added" => {
                let item = &ev["item"];
                match item.get("type").and_then(Value::as_str) {
                    Some("reasoning") => {
                        let i = em
                            .thinking_start(ThinkingContent {
                                thinking: String::new(),
                                thinking_signature: None,
                                redacted: None,
                                extra: Map::new(),
                            })
                            .await;
                        slots.insert(oi, Slot::Thinking(i));
                    }
                    Some("message") => {
                        if item["phase"] == "final_answer" {
                            em.partial.stop_reason = StopReason::Stop;
                        }
                        let i = em.text_start("").await;
                        slots.insert(oi, Slot::Text(i));
                    }
                    Some("function_call") => {
                        let id = format!(
                            "{}|{}",
                            item["call_id"].as_str().unwrap_or(""),
                            item["id"].as_str().unwrap_or("")
                        );
                        let mut args = ToolArgs::new();
                        let initial = item["arguments"]
                            .as_str()
                            .filter(|s| !s.is_empty())
                            .map(|s| args.append(s))
                            .unwrap_or_else(|| json!({}));
                        let i = em
                            .toolcall_start(&id, item["name"].as_str().unwrap_or(""), initial)
                            .await;
                        unfinished.push(i);
                        slots.insert(oi, Slot::Tool(i, args));
                    }
                    _ => {}
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(Slot::Thinking(i)) = slots.get(&oi) {
                    let i = *i;
                    em.thinking_delta(i, delta).await;
                }
            }
            "response.reasoning_summary_part.done" => {
                if let Some(Slot::Thinking(i)) = slots.get(&oi) {
                    let i = *i;
                    em.thinking_delta(i, "\n\n").await;
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(Slot::Text(i)) = slots.get(&oi) {
                    let i = *i;
                    em.text_delta(i, delta).await;
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(Slot::Tool(i, args)) = slots.get_mut(&oi) {
                    let i = *i;
                    let partial = args.append(delta);
                    em.toolcall_delta(i, delta, partial).await;
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(Slot::Tool(i, args)) = slots.get_mut(&oi) {
                    let i = *i;
                    let full = ev["arguments"].as_str().unwrap_or("").to_string();
                    if let Some(d) = args.replace(&full).filter(|d| !d.is_empty()) {
                        let partial = super::json_stream::partial_object(&full);
                        em.toolcall_delta(i, &d, partial).await;
                    }
                }
            }
            "response.output_item.done" => {
                let item = &ev["item"];
                if item["type"] == "message" && item["phase"] == "final_answer" {
                    em.partial.stop_reason = StopReason::Stop;
                }
                match (item.get("type").and_then(Value::as_str), slots.remove(&oi)) {
                    (Some("reasoning"), Some(Slot::Thinking(i))) => {
                        let join = |key: &str| {
                            item.get(key)
                                .and_then(Value::as_array)
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|s| s["text"].as_str())
                                        .collect::<Vec<_>>()
                                        .join("\n\n")
                                })
                                .unwrap_or_default()
                        };
                        let (summary, content) = (join("summary"), join("content"));
                        if let Some(t) = em.thinking_block(i) {
                            if !summary.is_empty() {
                                t.thinking = summary;
                            } else if !content.is_empty() {
                                t.thinking = content;
                            }
                            t.thinking_signature = Some(item.to_string());
                        }
                        em.thinking_end(i).await;
                    }
                    (Some("message"), Some(Slot::Text(i))) => {
                        let text: String = item["content"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|c| {
                                        c["text"].as_str().or_else(|| c["refusal"].as_str())
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        let sig = text_signature(
                            item["id"].as_str().unwrap_or(""),
                            item["phase"].as_str(),
                        );
                        if let Some(ContentBlock::Text(t)) = em.partial.content.get_mut(i) {
                            t.text = text;
                            t.text_signature = Some(sig);
                        }
                        em.text_end(i).await;
                    }
                    (Some("function_call"), Some(Slot::Tool(i, mut args))) => {
                        if let Some(full) = item["arguments"].as_str() {
                            args.replace(full);
                        }
                        unfinished.retain(|x| *x != i);
                        em.toolcall_end(i, Some(args.text())).await;
                    }
                    (_, Some(other)) => {
                        slots.insert(oi, other);
                    }
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                terminal = true;
                let r = &ev["response"];
                if let Some(id) = r["id"].as_str() {
                    em.partial.response_id = Some(id.to_string());
                }
                if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
                    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
                    let cached = n("/input_tokens_details/cached_tokens");
                    let write = n("/input_tokens_details/cache_write_tokens");
                    let usage = em.usage_mut();
                    usage.input = n("/input_tokens").saturating_sub(cached + write);
                    usage.output = n("/output_tokens");
                    usage.cache_read = cached;
                    usage.cache_write = write;
                    usage.reasoning = Some(n("/output_tokens_details/reasoning_tokens"));
                    usage.total_tokens = n("/total_tokens");
                }
                calculate_cost(model, em.usage_mut());
                let status = r["status"].as_str();
                let reason = r
                    .pointer("/incomplete_details/reason")
                    .and_then(Value::as_str);
                em.partial.raw_stop_reason = match (status, reason) {
                    (Some(s), Some(r)) => Some(format!("{s}.{r}")),
                    (s, _) => s.map(str::to_string),
                };
                let (stop, msg) = map_status(status, reason);
                em.partial.stop_reason = stop;
                em.partial.error_message = msg;
                if stop == StopReason::Stop && em.partial.tool_calls().next().is_some() {
                    em.partial.stop_reason = StopReason::ToolUse;
                }
            }
            "error" => {
                return Err(format!(
                    "Error Code {}: {}",
                    ev["code"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| ev["code"].to_string()),
                    ev["message"].as_str().unwrap_or("")
                ));
            }
            "response.failed" => {
                let r = &ev["response"];
                em.partial.raw_stop_reason = r["status"].as_str().map(str::to_string);
                let msg = if let Some(e) = r.get("error").filter(|e| e.is_object()) {
                    format!(
                        "{}: {}",
                        e["code"].as_str().unwrap_or("unknown"),
                        e["message"].as_str().unwrap_or("no message")
                    )
                } else if let Some(reason) = r
                    .pointer("/incomplete_details/reason")
                    .and_then(Value::as_str)
                {
                    format!("incomplete: {reason}")
                } else {
                    "Unknown error (no error details in response)".into()
                };
                return Err(msg);
            }
            _ => {}
        }
    }
    if !terminal {
        return Err("OpenAI Responses stream ended before a terminal response event".into());
    }
    if em.partial.stop_reason == StopReason::ToolUse {
        if let Some(&i) = unfinished.first() {
            let (name, id) = em
                .tool_call(i)
                .map(|t| (t.name.clone(), t.id.clone()))
                .unwrap_or_default();
            return Err(format!(
                "OpenAI Responses stream completed with an unfinished tool call: {name} ({id})"
            ));
        }
    }
    if em.partial.stop_reason == StopReason::Error {
        return Err(em
            .partial
            .error_message
            .clone()
            .unwrap_or_else(|| "Provider returned an error stop reason".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(map_status(Some("completed"), None).0, StopReason::Stop);
        assert_eq!(
            map_status(Some("incomplete"), Some("max_output_tokens")).0,
            StopReason::Length
        );
        assert_eq!(
            map_status(Some("incomplete"), Some("content_filter")),
            (
                StopReason::Error,
                Some("Response incomplete: content_filter".into())
            )
        );
        assert_eq!(map_status(Some("failed"), None).0, StopReason::Error);
    }

    #[test]
    fn text_signatures_round_trip() {
        let s = text_signature("msg_1", Some("final_answer"));
        assert_eq!(
            parse_text_signature(&s),
            ("msg_1".into(), Some("final_answer".into()))
        );
        assert_eq!(parse_text_signature("legacy"), ("legacy".into(), None));
    }
}

#[cfg(test)]
mod azure_tests {
    use super::*;

    #[test]
    fn azure_endpoint_and_deployment_follow_pi() {
        assert_eq!(
            azure_base_url(None, Some("res"), "").unwrap(),
            "https://res.openai.azure.com/openai/v1"
        );
        // An explicit URL wins; Azure resource roots are completed, other hosts kept.
        assert_eq!(
            azure_base_url(
                Some("https://x.cognitiveservices.azure.com/"),
                Some("res"),
                ""
            )
            .unwrap(),
            "https://x.cognitiveservices.azure.com/openai/v1"
        );
        assert_eq!(
            azure_base_url(None, None, "http://127.0.0.1:9/openai/v1/").unwrap(),
            "http://127.0.0.1:9/openai/v1"
        );
        assert!(azure_base_url(None, None, "")
            .unwrap_err()
            .contains("base URL is required"));
        assert!(azure_base_url(Some("not a url"), None, "")
            .unwrap_err()
            .contains("Invalid"));
        let map = Some("gpt-5.4=my-gpt, deepseek-v4-pro=ds ,broken");
        assert_eq!(azure_deployment_name("gpt-5.4", map), "my-gpt");
        assert_eq!(azure_deployment_name("deepseek-v4-pro", map), "ds");
        assert_eq!(azure_deployment_name("other", map), "other");
        assert_eq!(azure_deployment_name("other", None), "other");
    }
}
