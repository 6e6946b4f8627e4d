//! `bedrock-converse-stream`: Amazon Bedrock's ConverseStream
//! (`POST {endpoint}/model/{modelId}/converse-stream`, answered in the binary
//! `application/vnd.amazon.eventstream` framing, see [`super::aws`]).
//!
//! Request shape follows what real Pi 1.6.0 (through the AWS SDK) sends: `messages` with
//! typed content blocks (`text`, `image`, `toolUse`, `toolResult`, `reasoningContent`),
//! consecutive tool results in one user message, `system` blocks, `inferenceConfig`,
//! `toolConfig` (strict schemas where the model supports them) and, for reasoning,
//! `additionalModelRequestFields` (Claude thinking, or OpenAI-style effort). Claude models
//! that support prompt caching get a `cachePoint` after the system prompt and on the last
//! user message.
//!
//! Auth, as Pi: a bearer token (`AWS_BEARER_TOKEN_BEDROCK` or the provider's API key) as
//! `Authorization: Bearer`, else SigV4 with keys from the environment or an `AWS_PROFILE`
//! in the shared credentials file; `AWS_BEDROCK_SKIP_AUTH=1` signs with dummy keys for
//! proxies that do not check. Region: from an inference-profile ARN, `AWS_REGION`,
//! `AWS_DEFAULT_REGION`, the endpoint host, the profile's config, else `us-east-1`.

use base64::Engine;
use futures::StreamExt;
use pi_formats::message::{
    AgentMessage, Content, ContentBlock, StopReason, ThinkingContent, ThinkingLevel,
};
use serde_json::{json, Map, Value};

use super::anthropic::normalize_tool_call_id;
use super::aws::{self, Credentials, EventStreamDecoder, SignRequest};
use super::http;
use super::json_stream::ToolArgs;
use super::model::Model;
use super::strict_schema;
use super::transform::{normalize_context, transform_messages};
use super::{
    base_max_tokens, calculate_cost, clamp_max_tokens_to_context, estimate_context_tokens,
    CacheRetention, Context, Emitter, StreamOptions,
};

const EMPTY_TEXT: &str = "<empty>";
const REDACTED_THINKING: &str = "[Reasoning redacted]";
const THINKING_BINDING_BETA: &str = "thinking-binding-controls-2026-08-01";

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Lower-cased id and name, also with separators folded to `-` (Pi's match candidates), so
/// application inference profiles can be recognised by their name.
fn candidates(model: &Model) -> Vec<String> {
    let mut out = Vec::new();
    for v in [&model.id, &model.name] {
        let lower = v.to_lowercase();
        let mut folded = String::with_capacity(lower.len());
        let mut in_sep = false;
        for c in lower.chars() {
            if c.is_whitespace() || matches!(c, '_' | '.' | ':') {
                if !in_sep {
                    folded.push('-');
                }
                in_sep = true;
            } else {
                folded.push(c);
                in_sep = false;
            }
        }
        out.push(lower);
        out.push(folded);
    }
    out
}

fn any_candidate(model: &Model, needles: &[&str]) -> bool {
    candidates(model)
        .iter()
        .any(|c| needles.iter().any(|n| c.contains(n)))
}

/// Anthropic Claude on Bedrock (by id, or by name for inference-profile ARNs).
fn is_claude(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    let name = model.name.to_lowercase();
    id.contains("anthropic.claude")
        || id.contains("anthropic/claude")
        || name.contains("anthropic.claude")
        || name.contains("anthropic/claude")
        || name.contains("claude")
}

fn supports_adaptive_thinking(model: &Model) -> bool {
    any_candidate(
        model,
        &[
            "opus-4-6",
            "opus-4-7",
            "opus-4-8",
            "opus-5",
            "sonnet-4-6",
            "sonnet-5",
            "haiku-5",
            "fable-5",
        ],
    )
}

fn supports_block_binding(model: &Model) -> bool {
    any_candidate(
        model,
        &[
            "opus-4-7", "opus-4-8", "opus-5", "sonnet-5", "haiku-5", "fable-5",
        ],
    )
}

fn supports_prompt_caching(model: &Model) -> bool {
    if !any_candidate(model, &["claude"]) {
        // Inference-profile ARNs do not name the model: caching can be forced.
        return env("AWS_BEDROCK_FORCE_CACHE").as_deref() == Some("1");
    }
    any_candidate(
        model,
        &[
            "fable-5",
            "opus-5",
            "sonnet-5",
            "haiku-5",
            "-4-",
            "claude-3-7-sonnet",
            "claude-3-5-haiku",
        ],
    )
}

fn cache_retention(options: &StreamOptions) -> CacheRetention {
    options.cache_retention.unwrap_or_else(|| {
        if env("PI_CACHE_RETENTION").as_deref() == Some("long") {
            CacheRetention::Long
        } else {
            CacheRetention::Short
        }
    })
}

fn cache_point(model: &Model, options: &StreamOptions) -> Option<Value> {
    let retention = cache_retention(options);
    if retention == CacheRetention::None || !supports_prompt_caching(model) {
        return None;
    }
    Some(if retention == CacheRetention::Long {
        json!({"cachePoint": {"type": "default", "ttl": "1h"}})
    } else {
        json!({"cachePoint": {"type": "default"}})
    })
}

fn non_blank_text(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({ "text": text }))
}

fn image_block(mime: &str, data: &str) -> Result<Value, String> {
    let format = match mime {
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        other => return Err(format!("Unknown image type: {other}")),
    };
    // Blobs travel base64-encoded in the JSON body.
    Ok(json!({"image": {"source": {"bytes": data}, "format": format}}))
}

/// JSON documents may not have empty keys.
fn sanitize_document(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(sanitize_document).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.clone(), sanitize_document(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Convert the transcript to Converse `messages`.
pub fn convert_messages(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<Vec<Value>, String> {
    let norm = normalize_context(context);
    let msgs = transform_messages(&norm.messages, model, Some(&normalize_tool_call_id));
    let claude = is_claude(model);
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < msgs.len() {
        match &msgs[i] {
            AgentMessage::User(u) => {
                let mut content = Vec::new();
                match &u.content {
                    Content::Text(s) => content
                        .push(non_blank_text(s).unwrap_or_else(|| json!({"text": EMPTY_TEXT}))),
                    Content::Blocks(blocks) => {
                        for b in blocks {
                            match b {
                                ContentBlock::Text(t) => content.extend(non_blank_text(&t.text)),
                                ContentBlock::Image(img) => {
                                    content.push(image_block(&img.mime_type, &img.data)?)
                                }
                                _ => {}
                            }
                        }
                        if content.is_empty() {
                            content.push(json!({"text": EMPTY_TEXT}));
                        }
                    }
                }
                out.push(json!({"role": "user", "content": content}));
            }
            AgentMessage::Assistant(a) => {
                let mut content = Vec::new();
                for b in &a.content {
                    match b {
                        ContentBlock::Text(t) => content.extend(non_blank_text(&t.text)),
                        ContentBlock::ToolCall(tc) => content.push(json!({"toolUse": {
                            "toolUseId": tc.id, "name": tc.name,
                            "input": sanitize_document(&tc.arguments)}})),
                        ContentBlock::Thinking(t) => {
                            if t.redacted == Some(true) {
                                // Opaque encrypted reasoning goes back as it came.
                                if let Some(sig) = t.thinking_signature.as_deref().filter(|s| {
                                    !s.is_empty()
                                        && base64::engine::general_purpose::STANDARD
                                            .decode(s)
                                            .is_ok()
                                }) {
                                    content.push(
                                        json!({"reasoningContent": {"redactedContent": sig}}),
                                    );
                                }
                                continue;
                            }
                            if t.thinking.trim().is_empty() {
                                continue;
                            }
                            let sig = t
                                .thinking_signature
                                .as_deref()
                                .filter(|s| !s.trim().is_empty());
                            if claude {
                                // Unsigned reasoning would be rejected: send it as text.
                                match sig {
                                    None => content.push(json!({"text": t.thinking})),
                                    Some(s) => content.push(json!({"reasoningContent": {
                                        "reasoningText": {"text": t.thinking, "signature": s}}})),
                                }
                            } else {
                                content.push(json!({"reasoningContent": {
                                    "reasoningText": {"text": t.thinking}}}));
                            }
                        }
                        _ => {}
                    }
                }
                if !content.is_empty() {
                    out.push(json!({"role": "assistant", "content": content}));
                }
            }
            AgentMessage::ToolResult(_) => {
                // All consecutive results go in one user message.
                let mut results = Vec::new();
                while let Some(AgentMessage::ToolResult(r)) = msgs.get(i) {
                    let mut content = Vec::new();
                    for b in &r.content {
                        match b {
                            ContentBlock::Image(img) => {
                                content.push(image_block(&img.mime_type, &img.data)?)
                            }
                            ContentBlock::Text(t) => content.extend(non_blank_text(&t.text)),
                            _ => {}
                        }
                    }
                    if content.is_empty() {
                        content.push(json!({"text": EMPTY_TEXT}));
                    }
                    results.push(json!({"toolResult": {"toolUseId": r.tool_call_id,
                        "content": content, "status": if r.is_error { "error" } else { "success" }}}));
                    i += 1;
                }
                out.push(json!({"role": "user", "content": results}));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(cp) = cache_point(model, options) {
        if let Some(last) = out.last_mut().filter(|m| m["role"] == "user") {
            if let Some(c) = last["content"].as_array_mut() {
                c.push(cp);
            }
        }
    }
    Ok(out)
}

fn effort_for(model: &Model, level: ThinkingLevel) -> String {
    if level == ThinkingLevel::Xhigh
        && any_candidate(
            model,
            &[
                "opus-4-7", "opus-4-8", "opus-5", "sonnet-5", "haiku-5", "fable-5",
            ],
        )
    {
        return "xhigh".into();
    }
    if let Some(Value::String(s)) = model
        .thinking_level_map
        .as_ref()
        .and_then(|m| m.get(level.as_str()))
    {
        return s.clone();
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .into()
}

fn configured_region() -> Option<String> {
    env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION"))
}

fn is_gov_cloud(model: &Model) -> bool {
    let id = model.id.to_lowercase();
    configured_region().is_some_and(|r| r.to_lowercase().starts_with("us-gov-"))
        || id.starts_with("us-gov.")
        || id.starts_with("arn:aws-us-gov:")
}

/// `(additionalModelRequestFields, maxTokens)`.
fn reasoning_fields(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    max_tokens: u64,
) -> (Option<Value>, u64) {
    let Some(level) = options.reasoning.filter(|l| *l != ThinkingLevel::Off) else {
        return (None, max_tokens);
    };
    if !model.reasoning {
        return (None, max_tokens);
    }
    if is_claude(model) {
        let gov = is_gov_cloud(model);
        let mut thinking = Map::new();
        let mut fields = Map::new();
        let mut max = max_tokens;
        if supports_adaptive_thinking(model) {
            let binding = !gov && supports_block_binding(model);
            thinking.insert("type".into(), json!("adaptive"));
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            if binding {
                thinking.insert(
                    "block_binding".into(),
                    json!({"prefix_mismatch_behavior": "drop_block"}),
                );
            }
            fields.insert("thinking".into(), Value::Object(thinking));
            fields.insert(
                "output_config".into(),
                json!({"effort": effort_for(model, level)}),
            );
            if binding {
                fields.insert("anthropic_beta".into(), json!([THINKING_BINDING_BETA]));
            }
        } else {
            // Pi's adjustMaxTokensForThinking: the budget comes on top of the answer room,
            // capped by the model, then fitted into the context window.
            let mut budget = options.thinking_budgets.for_level(level);
            let adjusted = (max_tokens + budget).min(model.max_tokens);
            if adjusted <= budget {
                budget = adjusted.saturating_sub(1024);
            }
            let norm = normalize_context(context);
            let est = estimate_context_tokens(&norm.system_prompt, &norm.tools, &norm.messages);
            max = clamp_max_tokens_to_context(model, est, adjusted);
            budget = budget.min(max.saturating_sub(1024));
            thinking.insert("type".into(), json!("enabled"));
            thinking.insert("budget_tokens".into(), json!(budget));
            if !gov {
                thinking.insert("display".into(), json!("summarized"));
            }
            fields.insert("thinking".into(), Value::Object(thinking));
            fields.insert(
                "anthropic_beta".into(),
                json!(["interleaved-thinking-2025-05-14"]),
            );
        }
        return (Some(Value::Object(fields)), max);
    }
    if any_candidate(model, &["gpt-oss"]) {
        let effort = match level {
            ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            _ => "high",
        };
        return (Some(json!({"reasoning_effort": effort})), max_tokens);
    }
    if any_candidate(model, &["gpt-"]) {
        let effort = match model
            .thinking_level_map
            .as_ref()
            .and_then(|m| m.get(level.as_str()))
        {
            Some(Value::String(s)) => s.clone(),
            _ => match level {
                ThinkingLevel::Minimal => "low".to_string(),
                other => other.as_str().to_string(),
            },
        };
        return (Some(json!({"reasoning": {"effort": effort}})), max_tokens);
    }
    (None, max_tokens)
}

/// Build the ConverseStream body (the model id goes in the path).
pub fn build_request(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Result<Value, String> {
    let norm = normalize_context(context);
    let mut body = Map::new();
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(model, context, options)?),
    );
    if !norm.system_prompt.is_empty() {
        let mut system = vec![json!({"text": norm.system_prompt})];
        system.extend(cache_point(model, options));
        body.insert("system".into(), Value::Array(system));
    }
    let base = base_max_tokens(model, &norm, options);
    let (fields, max_tokens) = reasoning_fields(model, context, options, base);
    let mut inference = Map::new();
    inference.insert("maxTokens".into(), json!(max_tokens));
    if let Some(t) = options.temperature {
        inference.insert("temperature".into(), json!(t));
    }
    body.insert("inferenceConfig".into(), Value::Object(inference));
    let choice = options.tool_choice.as_deref();
    if !norm.tools.is_empty() && choice != Some("none") {
        let supports_strict = model.compat_bool("supportsStrictMode").unwrap_or(false);
        let mut tools = Vec::new();
        for t in &norm.tools {
            let strict = strict_schema::resolve(t, supports_strict)?;
            let mut spec = Map::new();
            spec.insert("name".into(), json!(t.name));
            spec.insert(
                "inputSchema".into(),
                json!({"json": strict.clone().unwrap_or_else(|| t.parameters.clone())}),
            );
            spec.insert("description".into(), json!(t.description));
            if strict.is_some() {
                spec.insert("strict".into(), json!(true));
            }
            tools.push(json!({ "toolSpec": spec }));
        }
        let mut config = Map::new();
        config.insert("tools".into(), Value::Array(tools));
        match choice {
            Some("auto") => {
                config.insert("toolChoice".into(), json!({"auto": {}}));
            }
            Some("any") => {
                config.insert("toolChoice".into(), json!({"any": {}}));
            }
            _ => {}
        }
        body.insert("toolConfig".into(), Value::Object(config));
    }
    if let Some(f) = fields {
        body.insert("additionalModelRequestFields".into(), f);
    }
    Ok(Value::Object(body))
}

/// The region of a standard `bedrock-runtime[-fips].{region}.amazonaws.com[.cn]` URL.
fn endpoint_region(base_url: &str) -> Option<String> {
    let host = reqwest::Url::parse(base_url)
        .ok()?
        .host_str()?
        .to_lowercase();
    let rest = host
        .strip_prefix("bedrock-runtime-fips.")
        .or_else(|| host.strip_prefix("bedrock-runtime."))?;
    let region = rest
        .strip_suffix(".amazonaws.com.cn")
        .or_else(|| rest.strip_suffix(".amazonaws.com"))?;
    (!region.is_empty()
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
    .then(|| region.to_string())
}

/// `(endpoint base URL, signing region)`, resolved as Pi does.
pub fn endpoint(model: &Model) -> (String, String) {
    let configured = configured_region();
    let profile = env("AWS_PROFILE");
    let standard_region = endpoint_region(&model.base_url);
    // A custom endpoint (proxy, VPC) is always used; the catalog's standard one only when
    // neither a region nor a profile says otherwise.
    let explicit = standard_region.is_none() || (configured.is_none() && profile.is_none());
    // arn:aws[-partition]:bedrock:REGION:…
    let arn_region = model
        .id
        .strip_prefix("arn:aws")
        .and_then(|rest| {
            let mut parts = rest.split(':');
            parts.next();
            (parts.next() == Some("bedrock"))
                .then(|| parts.next())
                .flatten()
        })
        .filter(|r| !r.is_empty())
        .map(str::to_string);
    let region = arn_region
        .or(configured)
        .or_else(|| standard_region.filter(|_| explicit))
        .or_else(|| {
            profile
                .as_deref()
                .and_then(|p| aws::profile_region(&env, p))
        })
        .unwrap_or_else(|| "us-east-1".into());
    let base = if explicit {
        model.base_url.trim_end_matches('/').to_string()
    } else {
        format!("https://bedrock-runtime.{region}.amazonaws.com")
    };
    (base, region)
}

/// Pi's error prefixes for the modeled exceptions (retry and overflow checks read them).
fn error_prefix(name: &str) -> &str {
    match name {
        "InternalServerException" => "Internal server error",
        "ModelStreamErrorException" => "Model stream error",
        "ValidationException" => "Validation error",
        "ThrottlingException" => "Throttling error",
        "ServiceUnavailableException" => "Service unavailable",
        other => other,
    }
}

fn with_retention_hint(msg: String) -> String {
    if msg.to_lowercase().contains("data retention mode") {
        format!("{msg} See https://docs.aws.amazon.com/bedrock/latest/userguide/data-retention.html for supported data retention modes.")
    } else {
        msg
    }
}

/// The error of a non-2xx answer: `x-amzn-errortype` names the exception.
fn http_error(status: u16, error_type: Option<&str>, body: &str) -> String {
    let name = error_type
        .and_then(|t| t.split(':').next())
        .filter(|t| !t.is_empty());
    let message = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        v.get("message")
            .or_else(|| v.get("Message"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    with_retention_hint(match (name, message) {
        (Some(n), Some(m)) => format!("{}: {m}", error_prefix(n)),
        (Some(n), None) => format!("{}: {status}: {}", error_prefix(n), body.trim()),
        (None, _) => format!("Unknown: {status}: {}", body.trim()),
    })
}

fn map_stop_reason(reason: &str) -> (StopReason, Option<String>) {
    match reason {
        "end_turn" | "stop_sequence" => (StopReason::Stop, None),
        "max_tokens" | "model_context_window_exceeded" => (StopReason::Length, None),
        "tool_use" => (StopReason::ToolUse, None),
        other => (
            StopReason::Error,
            Some(format!("Provider stopped with: {other}")),
        ),
    }
}

/// What a content block index of the stream is.
enum Open {
    Text(usize),
    Thinking(usize, Vec<u8>),
    Tool(usize, ToolArgs),
}

pub(crate) async fn run(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let body = build_request(model, context, options)?;
    // Hooks see the payload before it is signed: the signature covers what is sent.
    let body = http::hooked_payload(options, &body).await;
    let bytes = serde_json::to_vec(body.as_ref()).map_err(|e| e.to_string())?;
    let (base, region) = endpoint(model);
    let path_model = aws::uri_encode(&model.id, false);
    let url = format!("{base}/model/{path_model}/converse-stream");
    let parsed =
        reqwest::Url::parse(&url).map_err(|e| format!("Invalid Bedrock URL {url}: {e}"))?;

    let skip_auth = env("AWS_BEDROCK_SKIP_AUTH").as_deref() == Some("1");
    let bearer = options
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty() && !is_placeholder(k))
        .map(str::to_string)
        .or_else(|| env("AWS_BEARER_TOKEN_BEDROCK"));
    let mut headers: Vec<(String, String)> =
        vec![("content-type".into(), "application/json".into())];
    // Caller headers may not touch what SigV4 or the bearer token own.
    for (k, v) in &options.headers {
        let lower = k.to_lowercase();
        if !(lower.starts_with("x-amz-") || lower == "authorization" || lower == "host") {
            headers.push((lower, v.clone()));
        }
    }
    match bearer.filter(|_| !skip_auth) {
        Some(token) => headers.push(("authorization".into(), format!("Bearer {token}"))),
        None => {
            let creds = if skip_auth {
                Credentials {
                    access_key_id: "dummy-access-key".into(),
                    secret_access_key: "dummy-secret-key".into(),
                    session_token: None,
                }
            } else {
                Credentials::from_env(&env, None)?
            };
            let host = match (parsed.host_str(), parsed.port()) {
                (Some(h), Some(p)) => format!("{h}:{p}"),
                (Some(h), None) => h.to_string(),
                _ => return Err(format!("Invalid Bedrock URL {url}")),
            };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let date = aws::amz_date(now);
            let payload_hash = aws::sha256_hex(&bytes);
            headers.push(("x-amz-content-sha256".into(), payload_hash.clone()));
            headers.push(("x-amz-date".into(), date.clone()));
            if let Some(t) = &creds.session_token {
                headers.push(("x-amz-security-token".into(), t.clone()));
            }
            let mut signed = headers.clone();
            signed.push(("host".into(), host));
            let auth = aws::sign_v4(
                &SignRequest {
                    method: "POST",
                    path: parsed.path(),
                    query: parsed.query().unwrap_or(""),
                    headers: &signed,
                    payload_hash: &payload_hash,
                    amz_date: &date,
                    region: &region,
                    service: "bedrock",
                },
                &creds,
            );
            headers.push(("authorization".into(), auth));
        }
    }

    let mut req = http::client(options).post(parsed).body(bytes);
    for (k, v) in &headers {
        req = req.header(k.as_str(), v.as_str());
    }
    if let Some(t) = options.timeout {
        req = req.timeout(t);
    }
    let resp = req.send().await.map_err(|e| http::error_chain(&e))?;
    http::observe_response(options, &resp).await;
    let status = resp.status();
    if !status.is_success() {
        let error_type = resp
            .headers()
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = resp.text().await.unwrap_or_default();
        return Err(http_error(status.as_u16(), error_type.as_deref(), &text));
    }

    let mut decoder = EventStreamDecoder::default();
    let mut body = resp.bytes_stream();
    let mut open: Vec<(u64, Open)> = Vec::new();
    let mut error_message: Option<String> = None;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| http::error_chain(&e))?;
        for msg in decoder.feed(&chunk)? {
            let payload: Value = serde_json::from_slice(&msg.payload).unwrap_or(Value::Null);
            if options
                .provider_hooks
                .as_ref()
                .is_some_and(|h| h.wants_stream_events())
            {
                // The AWS SDK's item: the event keyed by its type.
                let kind = msg
                    .header(":event-type")
                    .or_else(|| msg.header(":exception-type"))
                    .unwrap_or("");
                let item = json!({ kind: payload.clone() });
                http::observe_stream_event(options, model, &item).await;
            }
            match msg.header(":message-type") {
                Some("exception") => {
                    let kind = msg.header(":exception-type").unwrap_or("UnknownException");
                    let mut name = kind.to_string();
                    if let Some(first) = name.get_mut(0..1) {
                        first.make_ascii_uppercase();
                    }
                    let text = payload["message"]
                        .as_str()
                        .or_else(|| payload["Message"].as_str())
                        .unwrap_or("")
                        .to_string();
                    flush_redacted(em, &mut open);
                    return Err(with_retention_hint(format!(
                        "{}: {text}",
                        error_prefix(&name)
                    )));
                }
                Some("error") => {
                    let code = msg.header(":error-code").unwrap_or("Unknown");
                    let text = msg.header(":error-message").unwrap_or("");
                    flush_redacted(em, &mut open);
                    return Err(with_retention_hint(format!("{code}: {text}")));
                }
                _ => {}
            }
            let index = payload["contentBlockIndex"].as_u64().unwrap_or(0);
            match msg.header(":event-type").unwrap_or("") {
                "messageStart" => {
                    if payload["role"] != "assistant" {
                        return Err(
                            "Unexpected assistant message start but got user message start instead"
                                .into(),
                        );
                    }
                    em.start().await;
                }
                "contentBlockStart" => {
                    if let Some(tu) = payload.pointer("/start/toolUse") {
                        em.start().await;
                        let id = tu["toolUseId"].as_str().unwrap_or("");
                        let name = tu["name"].as_str().unwrap_or("");
                        let idx = em.toolcall_start(id, name, json!({})).await;
                        open.push((index, Open::Tool(idx, ToolArgs::new())));
                    }
                }
                "contentBlockDelta" => {
                    em.start().await;
                    let delta = &payload["delta"];
                    let pos = open.iter().position(|(i, _)| *i == index);
                    if let Some(text) = delta.get("text").and_then(Value::as_str) {
                        let idx = match pos.map(|p| &open[p].1) {
                            Some(Open::Text(i)) => Some(*i),
                            Some(_) => None,
                            None => {
                                let i = em.text_start("").await;
                                open.push((index, Open::Text(i)));
                                Some(i)
                            }
                        };
                        if let Some(i) = idx {
                            em.text_delta(i, text).await;
                        }
                    } else if let Some(tu) = delta.get("toolUse") {
                        if let Some((_, Open::Tool(i, args))) = pos.map(|p| &mut open[p]) {
                            let fragment = tu["input"].as_str().unwrap_or("");
                            let partial = args.append(fragment);
                            let i = *i;
                            em.toolcall_delta(i, fragment, partial).await;
                        }
                    } else if let Some(rc) = delta.get("reasoningContent") {
                        let pos = match pos {
                            Some(p) => p,
                            None => {
                                let i = em
                                    .thinking_start(ThinkingContent {
                                        thinking: String::new(),
                                        thinking_signature: Some(String::new()),
                                        redacted: None,
                                        extra: Map::new(),
                                    })
                                    .await;
                                open.push((index, Open::Thinking(i, Vec::new())));
                                open.len() - 1
                            }
                        };
                        if let (_, Open::Thinking(i, _)) = &open[pos] {
                            let i = *i;
                            if let Some(t) = rc["text"].as_str().filter(|t| !t.is_empty()) {
                                em.thinking_delta(i, t).await;
                            }
                            let redacted = em
                                .thinking_block(i)
                                .is_some_and(|b| b.redacted == Some(true));
                            if let Some(sig) = rc["signature"].as_str().filter(|s| !s.is_empty()) {
                                if let (Some(b), false) = (em.thinking_block(i), redacted) {
                                    b.thinking_signature
                                        .get_or_insert_with(String::new)
                                        .push_str(sig);
                                }
                            }
                            if let Some(data) =
                                rc["redactedContent"].as_str().filter(|s| !s.is_empty())
                            {
                                let bytes = base64::engine::general_purpose::STANDARD
                                    .decode(data)
                                    .unwrap_or_default();
                                if !redacted {
                                    if let Some(b) = em.thinking_block(i) {
                                        b.redacted = Some(true);
                                        b.thinking_signature = Some(String::new());
                                    }
                                    em.thinking_delta(i, REDACTED_THINKING).await;
                                }
                                if let (_, Open::Thinking(_, buf)) = &mut open[pos] {
                                    buf.extend(bytes);
                                }
                            }
                        }
                    }
                }
                "contentBlockStop" => {
                    if let Some(p) = open.iter().position(|(i, _)| *i == index) {
                        let (_, block) = open.remove(p);
                        match block {
                            Open::Text(i) => em.text_end(i).await,
                            Open::Thinking(i, buf) => {
                                set_redacted_payload(em, i, &buf);
                                em.thinking_end(i).await
                            }
                            Open::Tool(i, args) => em.toolcall_end(i, Some(args.text())).await,
                        }
                    }
                }
                "messageStop" => {
                    let reason = payload["stopReason"].as_str().unwrap_or("");
                    em.partial.raw_stop_reason = Some(reason.to_string());
                    let (stop, msg) = map_stop_reason(reason);
                    em.partial.stop_reason = stop;
                    if msg.is_some() {
                        error_message = msg;
                    }
                }
                "metadata" => {
                    if let Some(u) = payload.get("usage").filter(|u| u.is_object()) {
                        let n = |k: &str| u[k].as_u64().unwrap_or(0);
                        let usage = em.usage_mut();
                        usage.input = n("inputTokens");
                        usage.output = n("outputTokens");
                        usage.cache_read = n("cacheReadInputTokens");
                        usage.cache_write = n("cacheWriteInputTokens");
                        usage.cache_write_1h = u["cacheDetails"].as_array().map(|d| {
                            d.iter()
                                .filter(|x| x["ttl"] == "1h")
                                .map(|x| x["inputTokens"].as_u64().unwrap_or(0))
                                .sum()
                        });
                        usage.total_tokens = u["totalTokens"]
                            .as_u64()
                            .filter(|t| *t > 0)
                            .unwrap_or(usage.input + usage.output);
                        calculate_cost(model, usage);
                    }
                }
                _ => {}
            }
        }
    }
    if decoder.has_partial() {
        return Err("Bedrock event stream ended inside a frame".into());
    }
    flush_redacted(em, &mut open);
    match em.partial.stop_reason {
        StopReason::Pending => Err("Bedrock stream ended without a stop reason".into()),
        StopReason::Error | StopReason::Aborted => {
            Err(error_message.unwrap_or_else(|| "An unknown error occurred".into()))
        }
        _ => Ok(()),
    }
}

/// Pi's `<authenticated>`-style marker for ambient credentials: not a bearer token.
fn is_placeholder(key: &str) -> bool {
    key.len() >= 2 && key.starts_with('<') && key.ends_with('>')
}

/// Store buffered encrypted reasoning as base64 in the block's signature.
fn set_redacted_payload(em: &mut Emitter, idx: usize, buf: &[u8]) {
    if buf.is_empty() {
        return;
    }
    if let Some(b) = em.thinking_block(idx) {
        b.thinking_signature = Some(base64::engine::general_purpose::STANDARD.encode(buf));
    }
}

/// Blocks a stream settled without stopping still keep their redacted payload.
fn flush_redacted(em: &mut Emitter, open: &mut Vec<(u64, Open)>) {
    for (_, block) in open.drain(..) {
        if let Open::Thinking(i, buf) = block {
            set_redacted_payload(em, i, &buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str, base: &str) -> Model {
        serde_json::from_value(
            json!({"id": id, "name": id, "api": "bedrock-converse-stream",
            "provider": "amazon-bedrock", "baseUrl": base, "reasoning": true,
            "maxTokens": 64000, "contextWindow": 200000}),
        )
        .expect("model")
    }

    #[test]
    fn model_families() {
        let m = model("anthropic.claude-sonnet-4-5-20250929-v1:0", "");
        assert!(is_claude(&m) && supports_prompt_caching(&m) && !supports_adaptive_thinking(&m));
        let m = model("global.anthropic.claude-opus-4-7", "");
        assert!(supports_adaptive_thinking(&m) && supports_block_binding(&m));
        let m = model("amazon.nova-2-lite-v1:0", "");
        assert!(!is_claude(&m));
        assert_eq!(
            endpoint_region("https://bedrock-runtime.eu-west-1.amazonaws.com"),
            Some("eu-west-1".into())
        );
        assert_eq!(endpoint_region("http://127.0.0.1:9"), None);
        assert_eq!(map_stop_reason("tool_use").0, StopReason::ToolUse);
        assert_eq!(
            map_stop_reason("guardrail_intervened").1.as_deref(),
            Some("Provider stopped with: guardrail_intervened")
        );
    }

    #[test]
    fn http_errors_name_the_exception() {
        assert_eq!(
            http_error(
                400,
                Some("ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
                r#"{"message":"Input is too long for requested model."}"#
            ),
            "Validation error: Input is too long for requested model."
        );
        assert_eq!(
            http_error(403, Some("AccessDeniedException"), r#"{"Message":"no"}"#),
            "AccessDeniedException: no"
        );
        assert_eq!(
            http_error(502, None, "bad gateway"),
            "Unknown: 502: bad gateway"
        );
    }
}
