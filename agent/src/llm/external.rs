//! Wire APIs whose stream function lives outside this crate: an extension's
//! `pi.registerProvider(name, {api, streamSimple})` (Pi's `registerApiProvider`). The
//! request goes out as Pi's `streamSimple(model, context, options)` arguments in JSON and
//! Pi's `AssistantMessageEvent` objects come back; they are replayed through the
//! [`Emitter`], so callers of [`super::stream`] see the same contract as for a built-in API.
//!
//! The registry is process-wide, like Pi's API registry: [`super::stream`] is a free
//! function dispatching on `model.api`, used by the agent loop and the summarizer alike.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use futures::future::BoxFuture;
use pi_formats::message::{AssistantMessage, ToolCall};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{AssistantMessageEvent, Context, Emitter, Model, StreamOptions};

/// A request handed to an outside stream function.
pub struct ExternalCall {
    /// Ends when the stream function finished (its stream ended) or failed.
    pub done: BoxFuture<'static, Result<(), String>>,
    /// Stops the stream function (its `signal` aborts); called when the caller goes away
    /// before `done`.
    pub abort: Box<dyn FnOnce() + Send>,
}

/// Runs Pi-style stream functions for one wire API.
pub trait StreamFunction: Send + Sync {
    /// Starts `request` (`{model, context, options}` in Pi's shapes); every event the
    /// function pushes is sent on `events` before `done` resolves.
    fn start(&self, request: Value, events: mpsc::UnboundedSender<Value>) -> ExternalCall;
}

type Registry = RwLock<HashMap<String, Arc<dyn StreamFunction>>>;

fn registry() -> &'static Registry {
    static APIS: OnceLock<Registry> = OnceLock::new();
    APIS.get_or_init(Default::default)
}

/// Makes `api` stream through `function` (replacing an earlier registration).
pub fn register(api: &str, function: Arc<dyn StreamFunction>) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(api.to_string(), function);
}

/// Forgets `api`'s stream function.
pub fn unregister(api: &str) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(api);
}

pub(super) fn lookup(api: &str) -> Option<Arc<dyn StreamFunction>> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(api)
        .cloned()
}

/// Pi's `streamSimple` arguments: the model as the catalog has it, the transcript (a
/// system prompt and tools given apart lead as a system message, as Pi's
/// `normalizeContext` folds them) and the options a stream function reads.
fn request_of(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let mut messages: Vec<Value> = Vec::with_capacity(context.messages.len() + 1);
    let prompt = context.system_prompt.clone().unwrap_or_default();
    if !prompt.is_empty() || !context.tools.is_empty() {
        let mut head = json!({"role": "system", "content": prompt, "timestamp": 0});
        if !context.tools.is_empty() {
            head["toolsAdded"] = serde_json::to_value(&context.tools).unwrap_or(Value::Null);
        }
        messages.push(head);
    }
    messages.extend(
        context
            .messages
            .iter()
            .filter_map(|m| serde_json::to_value(m).ok()),
    );
    let mut opts = serde_json::Map::new();
    if let Some(key) = &options.api_key {
        opts.insert("apiKey".into(), key.clone().into());
    }
    if let Some(level) = options.reasoning {
        opts.insert("reasoning".into(), level.as_str().into());
    }
    if let Some(max) = options.max_tokens {
        opts.insert("maxTokens".into(), max.into());
    }
    if let Some(t) = options.temperature {
        opts.insert("temperature".into(), t.into());
    }
    if let Some(id) = &options.session_id {
        opts.insert("sessionId".into(), id.clone().into());
    }
    // As Pi hands a stream function the headers `before_provider_headers` handlers left:
    // the strings, and `null` for those they removed.
    if !options.headers.is_empty() || !options.removed_headers.is_empty() {
        let mut headers: serde_json::Map<String, Value> = options
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        for name in &options.removed_headers {
            headers.entry(name.clone()).or_insert(Value::Null);
        }
        opts.insert("headers".into(), Value::Object(headers));
    }
    let b = options.thinking_budgets;
    let budgets: serde_json::Map<String, Value> = [
        ("minimal", b.minimal),
        ("low", b.low),
        ("medium", b.medium),
        ("high", b.high),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), Value::from(v?))))
    .collect();
    if !budgets.is_empty() {
        opts.insert("thinkingBudgets".into(), budgets.into());
    }
    json!({
        "model": serde_json::to_value(model).unwrap_or(Value::Null),
        "context": {"messages": messages},
        "options": opts,
    })
}

/// Aborts the outside call when the request is dropped early (the caller cancelled or
/// stopped listening), so the extension's `signal` fires.
struct AbortOnDrop(Option<Box<dyn FnOnce() + Send>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(abort) = self.0.take() {
            abort();
        }
    }
}

/// Streams `model`'s request through `function`, replaying its events on `em`.
pub(super) async fn run(
    function: Arc<dyn StreamFunction>,
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let call = function.start(request_of(model, context, options), tx);
    let mut guard = AbortOnDrop(Some(call.abort));
    let mut done = call.done;
    let outcome = loop {
        tokio::select! {
            biased;
            Some(event) = rx.recv() => {
                if let Some(end) = replay(em, event).await {
                    break end;
                }
            }
            finished = &mut done => {
                // Events sent before the answer are already queued.
                let mut end = None;
                while let Ok(event) = rx.try_recv() {
                    if let Some(e) = replay(em, event).await {
                        end = Some(e);
                        break;
                    }
                }
                break match (end, finished) {
                    (Some(end), _) => end,
                    (None, Err(e)) => Err(e),
                    (None, Ok(())) => Err("The provider's stream ended without a done or error event".into()),
                };
            }
        }
    };
    // A terminal event arrived: nothing is left to abort.
    guard.0 = None;
    outcome
}

/// Applies one of Pi's `AssistantMessageEvent`s: the partial message becomes the
/// emitter's, and the event is passed on. `Some` for the terminal `done`/`error`.
async fn replay(em: &mut Emitter, event: Value) -> Option<Result<(), String>> {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
    let message_of = |k: &str| {
        event
            .get(k)
            .cloned()
            .and_then(|m| serde_json::from_value::<AssistantMessage>(m).ok())
    };
    match kind {
        "done" => {
            if let Some(m) = message_of("message") {
                em.partial = m;
            }
            em.start().await;
            return Some(Ok(()));
        }
        "error" => {
            let message = message_of("error");
            let text = message
                .as_ref()
                .and_then(|m| m.error_message.clone())
                .unwrap_or_else(|| "An unknown error occurred".to_string());
            if let Some(m) = message {
                em.partial = m;
            }
            em.start().await;
            return Some(Err(text));
        }
        _ => {}
    }
    em.partial = message_of("partial")?;
    if kind == "start" {
        em.start().await;
        return None;
    }
    em.start().await;
    let index = event
        .get("contentIndex")
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    let text = |k: &str| {
        event
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let partial = em.partial.clone();
    let out = match kind {
        "text_start" => AssistantMessageEvent::TextStart {
            content_index: index,
            partial,
        },
        "text_delta" => AssistantMessageEvent::TextDelta {
            content_index: index,
            delta: text("delta"),
            partial,
        },
        "text_end" => AssistantMessageEvent::TextEnd {
            content_index: index,
            content: text("content"),
            partial,
        },
        "thinking_start" => AssistantMessageEvent::ThinkingStart {
            content_index: index,
            partial,
        },
        "thinking_delta" => AssistantMessageEvent::ThinkingDelta {
            content_index: index,
            delta: text("delta"),
            partial,
        },
        "thinking_end" => AssistantMessageEvent::ThinkingEnd {
            content_index: index,
            content: text("content"),
            partial,
        },
        "toolcall_start" => AssistantMessageEvent::ToolCallStart {
            content_index: index,
            partial,
        },
        "toolcall_delta" => AssistantMessageEvent::ToolCallDelta {
            content_index: index,
            delta: text("delta"),
            partial,
        },
        "toolcall_end" => {
            let tool_call = event
                .get("toolCall")
                .cloned()
                .and_then(|c| serde_json::from_value::<ToolCall>(c).ok())?;
            AssistantMessageEvent::ToolCallEnd {
                content_index: index,
                tool_call,
                partial,
            }
        }
        _ => return None,
    };
    em.send(out).await;
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pi_formats::message::Tool;

    #[test]
    fn a_separate_prompt_and_tools_lead_the_transcript() {
        let model = super::super::builtin_models().into_iter().next().unwrap();
        let context = Context {
            system_prompt: Some("Be brief.".into()),
            messages: vec![super::super::transform::user_text("hi", 5)],
            tools: vec![serde_json::from_value::<Tool>(json!({
                "name": "t", "description": "d", "parameters": {"type": "object"}
            }))
            .unwrap()],
        };
        let options = StreamOptions {
            api_key: Some("k".into()),
            ..Default::default()
        };
        let request = request_of(&model, &context, &options);
        let messages = request["context"]["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["role"], "system");
        assert_eq!(messages[0]["content"], "Be brief.");
        assert_eq!(messages[0]["toolsAdded"][0]["name"], "t");
        assert_eq!(messages[1]["role"], "user");
        assert_eq!(request["options"], json!({"apiKey": "k"}));
        assert_eq!(request["model"]["baseUrl"], json!(model.base_url));
    }
}
