//! The `pi-messages` API (Pi 1.6.0's own message protocol, spoken by the Radius gateway and
//! usable by any backend through models.json `"api": "pi-messages"`): one `POST
//! {baseUrl}/messages` of `{model, context, options}` with `Authorization: Bearer`, answered
//! by an SSE stream of Pi's assistant-message events (`text_start`, `text_delta`, …,
//! `toolcall_end`) ending with `done` or `error`.

use pi_formats::message::ThinkingContent;
use serde_json::{json, Value};

use super::http::{extend_custom_headers, join_url, post_json, ErrorStyle, SseReader};
use super::{CacheRetention, Context, Emitter, Model, StreamOptions};

/// The request body: Pi's context as it is, and the options the gateway applies.
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let mut ctx = json!({
        "messages": context.messages,
    });
    if let Some(system) = &context.system_prompt {
        ctx["systemPrompt"] = json!(system);
    }
    if !context.tools.is_empty() {
        ctx["tools"] = json!(context.tools);
    }
    let cache_retention = match options.cache_retention {
        Some(CacheRetention::None) => Some("none"),
        Some(CacheRetention::Short) => Some("short"),
        Some(CacheRetention::Long) => Some("long"),
        // The backend's default, unless Pi's legacy switch asks for long retention.
        None => {
            (std::env::var("PI_CACHE_RETENTION").ok().as_deref() == Some("long")).then_some("long")
        }
    };
    let mut opts = serde_json::Map::new();
    let mut put = |k: &str, v: Value| {
        if !v.is_null() {
            opts.insert(k.to_string(), v);
        }
    };
    put("temperature", json!(options.temperature));
    put("maxTokens", json!(options.max_tokens));
    put("reasoning", json!(options.reasoning));
    put("cacheRetention", json!(cache_retention));
    put("sessionId", json!(options.session_id));
    put("toolChoice", json!(options.tool_choice));
    json!({"model": model.id, "context": ctx, "options": opts})
}

pub(crate) async fn run(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let Some(key) = options.api_key.as_deref().filter(|k| !k.is_empty()) else {
        return Err(format!(
            "No API key provided for provider \"{}\"",
            model.provider
        ));
    };
    let mut headers: Vec<(String, String)> = vec![
        ("authorization".into(), format!("Bearer {key}")),
        ("accept".into(), "text/event-stream".into()),
    ];
    extend_custom_headers(&mut headers, model, options);
    let url = join_url(&model.base_url, "messages");
    let body = build_request(model, context, options);
    let resp = post_json(options, &url, &headers, &body, ErrorStyle::OpenAi).await?;
    let mut reader = SseReader::new(resp);
    em.start().await;
    // Tool-call arguments as streamed, per content index.
    let mut args_text: std::collections::HashMap<usize, String> = Default::default();
    while let Some(sse) = reader.next().await? {
        let data = sse.data.trim();
        if data.is_empty() || data == "[DONE]" {
            continue;
        }
        let event: Value =
            serde_json::from_str(data).map_err(|e| format!("Invalid pi-messages event: {e}"))?;
        super::http::observe_stream_event(options, model, &event).await;
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let text = |k: &str| {
            event
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        // The index comes from the wire: a start adds the next block, the rest need one.
        let index = event
            .get("contentIndex")
            .and_then(Value::as_u64)
            .map(|i| i as usize);
        let blocks = em.partial.content.len();
        if let Some(i) = index {
            let limit = if kind.ends_with("_start") {
                blocks
            } else {
                blocks.wrapping_sub(1)
            };
            if i > limit || (!kind.ends_with("_start") && blocks == 0) {
                return Err(format!(
                    "Invalid contentIndex {i} in pi-messages {kind} event"
                ));
            }
        }
        let idx = index.unwrap_or(0);
        match kind {
            "text_start" => {
                em.text_start("").await;
            }
            "text_delta" => em.text_delta(idx, &text("delta")).await,
            "text_end" => em.text_end(idx).await,
            "thinking_start" => {
                em.thinking_start(ThinkingContent {
                    thinking: String::new(),
                    thinking_signature: None,
                    redacted: None,
                    extra: Default::default(),
                })
                .await;
            }
            "thinking_delta" => em.thinking_delta(idx, &text("delta")).await,
            "thinking_end" => {
                if let Some(block) = em.thinking_block(idx) {
                    if let Some(signature) = event.get("contentSignature").and_then(Value::as_str) {
                        block.thinking_signature = Some(signature.to_string());
                    }
                }
                em.thinking_end(idx).await;
            }
            "toolcall_start" => {
                em.toolcall_start(&text("id"), &text("toolName"), json!({}))
                    .await;
            }
            "toolcall_delta" => {
                let delta = text("delta");
                let so_far = args_text.entry(idx).or_default();
                so_far.push_str(&delta);
                let partial = super::json_stream::partial_object(so_far);
                em.toolcall_delta(idx, &delta, partial).await;
            }
            "toolcall_end" => {
                let final_args = event
                    .get("toolCall")
                    .and_then(|t| t.get("arguments"))
                    .map(Value::to_string);
                let streamed = args_text.remove(&idx);
                em.toolcall_end(idx, final_args.as_deref().or(streamed.as_deref()))
                    .await;
            }
            "done" | "error" => {
                if let Some(usage) = event
                    .get("usage")
                    .and_then(|u| serde_json::from_value(u.clone()).ok())
                {
                    *em.usage_mut() = usage;
                }
                if let Some(id) = event.get("responseId").and_then(Value::as_str) {
                    em.partial.response_id = Some(id.to_string());
                }
                if kind == "error" {
                    return Err(event
                        .get("errorMessage")
                        .and_then(Value::as_str)
                        .unwrap_or("pi-messages error")
                        .to_string());
                }
                if let Some(reason) = event
                    .get("reason")
                    .and_then(|r| serde_json::from_value(r.clone()).ok())
                {
                    em.partial.stop_reason = reason;
                }
                return Ok(());
            }
            _ => {}
        }
    }
    Err(format!(
        "{} stream ended without a terminal event",
        model.provider
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_carries_pi_context_and_options() {
        let mut model = crate::llm::builtin_models()
            .into_iter()
            .find(|m| m.provider == "radius")
            .unwrap();
        model.id = "balanced".into();
        let context = Context {
            system_prompt: Some("sys".into()),
            ..Default::default()
        };
        let options = StreamOptions {
            max_tokens: Some(100),
            session_id: Some("s1".into()),
            ..Default::default()
        };
        let body = build_request(&model, &context, &options);
        assert_eq!(body["model"], "balanced");
        assert_eq!(body["context"]["systemPrompt"], "sys");
        assert_eq!(body["options"]["maxTokens"], 100);
        assert_eq!(body["options"]["sessionId"], "s1");
        assert!(body["options"].get("temperature").is_none());
    }
}
