//! LLM providers: model catalog, models.json, and streaming chat over the wire APIs
//! `openai-completions`, `anthropic-messages`, `openai-responses` (and Azure's),
//! `google-generative-ai`, `google-vertex`, `mistral-conversations` and
//! `bedrock-converse-stream`.
//!
//! The contract (Pi's `AssistantMessageEventStream`): [`stream`] returns at once; the
//! request runs in a spawned task that emits `start`, then `*_start/_delta/_end` per content
//! block carrying the live partial message, and always ends with exactly one `done` or
//! `error` event. Failures never surface as Rust errors: an HTTP error, a cut stream or a
//! bad event becomes an `error` event whose message has `stopReason: "error"` and an
//! `errorMessage`; cancelling [`StreamOptions::cancel`] drops the HTTP connection and ends
//! with `stopReason: "aborted"`. This keeps the agent loop's handling of a turn uniform: the
//! final message is persisted whatever happened.
//!
//! ```no_run
//! # async fn demo() {
//! use pi_agent::llm::{self, Context, StreamOptions};
//! let model = llm::builtin_models().into_iter().next().expect("catalog");
//! let ctx = Context { system_prompt: Some("Be brief.".into()), messages: vec![
//!     llm::transform::user_text("hi", 0)], tools: vec![] };
//! let mut s = llm::stream(&model, ctx, StreamOptions::default());
//! while let Some(ev) = s.next().await { println!("{ev:?}"); }
//! # }
//! ```

pub mod anthropic;
pub mod aws;
pub mod bedrock;
pub mod catalog;
pub mod external;
pub mod google;
pub mod google_auth;
pub mod google_vertex;
mod http;
pub mod json_stream;
pub mod llama_cpp;
pub mod mistral;
pub mod model;
pub mod models_json;
pub mod oauth;
pub mod openai_codex_responses;
pub mod openai_completions;
pub mod openai_responses;
pub mod overflow;
pub mod pi_messages;
pub mod provider_auth;
pub mod radius_catalog;
pub mod sse;
pub mod strict_schema;
#[cfg(test)]
mod tests_e2e;
pub mod transform;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use pi_formats::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ThinkingContent, ThinkingLevel, Tool,
    ToolCall, Usage,
};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use catalog::{builtin_catalog, builtin_provider, BuiltinProvider, Catalog};
pub use http::settings_client;
pub(crate) use http::{error_chain, SseReader};
pub use model::{api, builtin_models, find_model, InputKind, Model, ModelCost};
pub use models_json::{
    apply_provider, load_models, resolve_config_value, ModelRegistry, ModelsJsonError,
};
pub use overflow::is_context_overflow;

/// What is sent to the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    /// The system prompt (Pi's `Context.systemPrompt`).
    pub system_prompt: Option<String>,
    /// The conversation: user, assistant, toolResult and system messages.
    pub messages: Vec<AgentMessage>,
    /// Tools the model may call.
    pub tools: Vec<Tool>,
}

/// Prompt-cache retention preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheRetention {
    /// No cache markers.
    None,
    /// Provider default (Anthropic: 5 minutes).
    #[default]
    Short,
    /// Long retention (Anthropic `ttl: "1h"`, OpenAI `24h`).
    Long,
}

/// Token budgets per thinking level for budget-based APIs (defaults 1024/2048/8192/16384).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThinkingBudgets {
    /// Budget for `minimal`.
    pub minimal: Option<u64>,
    /// Budget for `low`.
    pub low: Option<u64>,
    /// Budget for `medium`.
    pub medium: Option<u64>,
    /// Budget for `high` (also used for `xhigh`/`max`).
    pub high: Option<u64>,
}

impl ThinkingBudgets {
    /// The budget for `level` (Pi's `thinkingBudgetForLevel`; xhigh/max count as high).
    pub fn for_level(&self, level: ThinkingLevel) -> u64 {
        match level {
            ThinkingLevel::Off => 0,
            ThinkingLevel::Minimal => self.minimal.unwrap_or(1024),
            ThinkingLevel::Low => self.low.unwrap_or(2048),
            ThinkingLevel::Medium => self.medium.unwrap_or(8192),
            ThinkingLevel::High | ThinkingLevel::Xhigh | ThinkingLevel::Max => {
                self.high.unwrap_or(16384)
            }
        }
    }
}

/// Per-request options (Pi's `SimpleStreamOptions`).
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// API key (already resolved; see [`resolve_config_value`]).
    pub api_key: Option<String>,
    /// Extra headers, applied last (each replaces a header of the same name).
    pub headers: BTreeMap<String, String>,
    /// Headers left out of the request whoever adds them (names, any case): those an
    /// extension's `before_provider_headers` handler set to `null`.
    pub removed_headers: Vec<String>,
    /// Output token cap; default: the model's, clamped to the context window.
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Requested thinking level; `None`/`Off` disables reasoning. Clamped per model.
    pub reasoning: Option<ThinkingLevel>,
    /// Budget overrides for budget-based thinking.
    pub thinking_budgets: ThinkingBudgets,
    /// Session id for prompt caching / affinity.
    pub session_id: Option<String>,
    /// Cache retention; `None` means Pi's default (short, or long with `PI_CACHE_RETENTION`).
    pub cache_retention: Option<CacheRetention>,
    /// `auto` / `none` / …, passed through to the API.
    pub tool_choice: Option<String>,
    /// Cancels the request: the stream ends with `stopReason: "aborted"`.
    pub cancel: CancellationToken,
    /// HTTP client to use (a shared default otherwise).
    pub client: Option<reqwest::Client>,
    /// Request timeout.
    pub timeout: Option<Duration>,
    /// Extensions' hooks around the HTTP exchange (Pi's `before_provider_request`,
    /// `after_provider_response` and `provider_stream_event`); `None` costs nothing.
    pub provider_hooks: Option<std::sync::Arc<dyn ProviderHooks>>,
}

/// What runs around a model request's HTTP exchange, for every wire API: the payload as
/// built may be replaced before it is sent, and the response's status and headers are seen
/// before its body is read. Only the stages a hook [`wants`](ProviderHooks::wants_payload)
/// cost anything (the payload is copied only for a hook that reads it).
#[async_trait::async_trait]
pub trait ProviderHooks: Send + Sync + std::fmt::Debug {
    /// Whether [`ProviderHooks::payload`] should see the request bodies.
    fn wants_payload(&self) -> bool;

    /// The request body as built: `Some` replaces it on the wire.
    async fn payload(&self, payload: Value) -> Option<Value>;

    /// Whether [`ProviderHooks::response`] should see the responses.
    fn wants_response(&self) -> bool;

    /// The response's status and headers (lower-case names; repeated headers joined with
    /// `, `), before its body is read; error statuses included.
    async fn response(&self, status: u16, headers: BTreeMap<String, String>);

    /// Whether [`ProviderHooks::stream_event`] should see the response's stream events.
    fn wants_stream_events(&self) -> bool {
        false
    }

    /// One parsed event of the response stream (the JSON of an SSE event, a Bedrock
    /// event-stream message), before it is applied to the message; awaited, so the hooks
    /// see the events in stream order.
    async fn stream_event(&self, _model: &Model, _data: &Value) {}
}

/// One event of a streaming response (Pi's `AssistantMessageEvent`); serializes with Pi's
/// `type` names and camelCase fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum AssistantMessageEvent {
    /// The response started.
    #[serde(rename = "start")]
    Start {
        /// The (empty) partial.
        partial: AssistantMessage,
    },
    /// A text block opened.
    #[serde(rename = "text_start")]
    TextStart {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// Text arrived.
    #[serde(rename = "text_delta")]
    TextDelta {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The new text.
        delta: String,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// A text block closed.
    #[serde(rename = "text_end")]
    TextEnd {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The block's full text.
        content: String,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// A thinking block opened.
    #[serde(rename = "thinking_start")]
    ThinkingStart {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// Reasoning arrived.
    #[serde(rename = "thinking_delta")]
    ThinkingDelta {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The new reasoning text.
        delta: String,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// A thinking block closed.
    #[serde(rename = "thinking_end")]
    ThinkingEnd {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The block's full reasoning text.
        content: String,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// A tool call opened.
    #[serde(rename = "toolcall_start")]
    ToolCallStart {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// A fragment of the tool call's JSON arguments arrived.
    #[serde(rename = "toolcall_delta")]
    ToolCallDelta {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// Raw JSON fragment.
        delta: String,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// A tool call closed with its final arguments.
    #[serde(rename = "toolcall_end")]
    ToolCallEnd {
        /// Index in `partial.content`.
        #[serde(rename = "contentIndex")]
        content_index: usize,
        /// The finished call.
        #[serde(rename = "toolCall")]
        tool_call: ToolCall,
        /// The partial message.
        partial: AssistantMessage,
    },
    /// The response completed (`stop`, `length` or `toolUse`).
    #[serde(rename = "done")]
    Done {
        /// Final stop reason.
        reason: StopReason,
        /// The final message.
        message: AssistantMessage,
    },
    /// The response failed (`error`) or was cancelled (`aborted`).
    #[serde(rename = "error")]
    Error {
        /// `error` or `aborted`.
        reason: StopReason,
        /// The final message, with `errorMessage`.
        error: AssistantMessage,
    },
}

impl AssistantMessageEvent {
    /// The final message, for `done`/`error` events.
    pub fn final_message(&self) -> Option<&AssistantMessage> {
        match self {
            AssistantMessageEvent::Done { message, .. } => Some(message),
            AssistantMessageEvent::Error { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The receiving end of a streaming response. Dropping it cancels the request.
pub struct AssistantStream {
    rx: mpsc::Receiver<AssistantMessageEvent>,
    template: AssistantMessage,
    finished: bool,
    last: Option<AssistantMessage>,
}

impl AssistantStream {
    /// The next event; `None` after the terminal `done`/`error` event.
    pub async fn next(&mut self) -> Option<AssistantMessageEvent> {
        if self.finished {
            return None;
        }
        match self.rx.recv().await {
            Some(ev) => {
                if let Some(m) = ev.final_message() {
                    self.finished = true;
                    self.last = Some(m.clone());
                }
                Some(ev)
            }
            None => {
                // The task ended without a terminal event (it panicked): report it as an
                // error rather than leaving the caller without a final message.
                self.finished = true;
                let mut m = self.template.clone();
                m.stop_reason = StopReason::Error;
                m.error_message = Some("Provider stream ended unexpectedly".to_string());
                self.last = Some(m.clone());
                Some(AssistantMessageEvent::Error {
                    reason: StopReason::Error,
                    error: m,
                })
            }
        }
    }

    /// Drain the stream and return the final message.
    pub async fn result(mut self) -> AssistantMessage {
        while self.next().await.is_some() {}
        self.last.take().unwrap_or(self.template)
    }
}

impl futures::Stream for AssistantStream {
    type Item = AssistantMessageEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.finished {
            return Poll::Ready(None);
        }
        match this.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(ev)) => {
                if let Some(m) = ev.final_message() {
                    this.finished = true;
                    this.last = Some(m.clone());
                }
                Poll::Ready(Some(ev))
            }
            Poll::Ready(None) => {
                this.finished = true;
                let mut m = this.template.clone();
                m.stop_reason = StopReason::Error;
                m.error_message = Some("Provider stream ended unexpectedly".to_string());
                Poll::Ready(Some(AssistantMessageEvent::Error {
                    reason: StopReason::Error,
                    error: m,
                }))
            }
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Start a streaming request for `model` (dispatching on `model.api`). Must be called
/// inside a tokio runtime.
/// The context is taken by value: the provider task reads it while the caller goes on, and a
/// huge context must not be held twice.
pub fn stream(model: &Model, context: Context, options: StreamOptions) -> AssistantStream {
    let template = AssistantMessage::empty(&model.api, &model.provider, &model.id, now_ms());
    // Small buffer: a slow consumer slows the network read rather than growing memory.
    let (tx, rx) = mpsc::channel(64);
    let mut model = model.clone();
    let mut options = options;
    if model.provider == "github-copilot" {
        oauth::github_copilot::prepare_request(&mut model, &context, &mut options);
    }
    let partial = template.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let closed = tx.clone();
        let cancel = options.cancel.clone();
        let mut em = Emitter {
            tx,
            partial,
            started,
            sent_start: false,
        };
        let res = {
            let run = async {
                // A provider whose auth an extension owns resolves it per request.
                let (mut model, mut options) = (model.clone(), options.clone());
                provider_auth::prepare(&mut model, &mut options).await?;
                run_api(&model, &context, &options, &mut em).await
            };
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(ABORTED.to_string()),
                // Nobody listens any more: stop and drop the connection.
                _ = closed.closed() => return,
                r = run => r,
            }
        };
        em.finish(res, cancel.is_cancelled()).await;
    });
    AssistantStream {
        rx,
        template,
        finished: false,
        last: None,
    }
}

const ABORTED: &str = "Request was aborted";

async fn run_api(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    match model.api.as_str() {
        api::OPENAI_COMPLETIONS => openai_completions::run(model, context, options, em).await,
        api::ANTHROPIC_MESSAGES => anthropic::run(model, context, options, em).await,
        api::OPENAI_RESPONSES => openai_responses::run(model, context, options, em).await,
        api::AZURE_OPENAI_RESPONSES => {
            openai_responses::run_azure(model, context, options, em).await
        }
        api::GOOGLE_GENERATIVE_AI => google::run(model, context, options, em).await,
        api::MISTRAL_CONVERSATIONS => mistral::run(model, context, options, em).await,
        api::GOOGLE_VERTEX => google_vertex::run(model, context, options, em).await,
        api::BEDROCK_CONVERSE_STREAM => bedrock::run(model, context, options, em).await,
        api::OPENAI_CODEX_RESPONSES => {
            openai_codex_responses::run(model, context, options, em).await
        }
        api::PI_MESSAGES => pi_messages::run(model, context, options, em).await,
        api::VIRTUAL => Err(format!(
            "Virtual model {}/{} must be routed before streaming",
            model.provider, model.id
        )),
        other => match external::lookup(other) {
            Some(function) => external::run(function, model, context, options, em).await,
            None => Err(format!("No API provider registered for api: {other}")),
        },
    }
}

/// Builds the partial message and sends events; owned by the provider task.
pub(crate) struct Emitter {
    tx: mpsc::Sender<AssistantMessageEvent>,
    pub(crate) partial: AssistantMessage,
    started: Instant,
    sent_start: bool,
}

impl Emitter {
    async fn send(&self, ev: AssistantMessageEvent) {
        // A closed receiver is noticed by the task's select on `closed()`.
        let _ = self.tx.send(ev).await;
    }

    /// Emit `start` (once).
    pub(crate) async fn start(&mut self) {
        if !self.sent_start {
            self.sent_start = true;
            self.send(AssistantMessageEvent::Start {
                partial: self.partial.clone(),
            })
            .await;
        }
    }

    pub(crate) fn usage_mut(&mut self) -> &mut Usage {
        &mut self.partial.usage
    }

    /// Open a text block; returns its content index.
    pub(crate) async fn text_start(&mut self, text: &str) -> usize {
        self.partial.content.push(ContentBlock::text(text));
        let idx = self.partial.content.len() - 1;
        self.send(AssistantMessageEvent::TextStart {
            content_index: idx,
            partial: self.partial.clone(),
        })
        .await;
        idx
    }

    pub(crate) async fn text_delta(&mut self, idx: usize, delta: &str) {
        if let Some(ContentBlock::Text(t)) = self.partial.content.get_mut(idx) {
            t.text.push_str(delta);
        } else {
            return;
        }
        self.send(AssistantMessageEvent::TextDelta {
            content_index: idx,
            delta: delta.to_string(),
            partial: self.partial.clone(),
        })
        .await;
    }

    pub(crate) async fn text_end(&mut self, idx: usize) {
        let content = match self.partial.content.get(idx) {
            Some(ContentBlock::Text(t)) => t.text.clone(),
            _ => return,
        };
        self.send(AssistantMessageEvent::TextEnd {
            content_index: idx,
            content,
            partial: self.partial.clone(),
        })
        .await;
    }

    /// Open a thinking block; returns its content index.
    pub(crate) async fn thinking_start(&mut self, block: ThinkingContent) -> usize {
        self.partial.content.push(ContentBlock::Thinking(block));
        let idx = self.partial.content.len() - 1;
        self.send(AssistantMessageEvent::ThinkingStart {
            content_index: idx,
            partial: self.partial.clone(),
        })
        .await;
        idx
    }

    pub(crate) fn thinking_block(&mut self, idx: usize) -> Option<&mut ThinkingContent> {
        match self.partial.content.get_mut(idx) {
            Some(ContentBlock::Thinking(t)) => Some(t),
            _ => None,
        }
    }

    pub(crate) async fn thinking_delta(&mut self, idx: usize, delta: &str) {
        if let Some(t) = self.thinking_block(idx) {
            t.thinking.push_str(delta);
        } else {
            return;
        }
        self.send(AssistantMessageEvent::ThinkingDelta {
            content_index: idx,
            delta: delta.to_string(),
            partial: self.partial.clone(),
        })
        .await;
    }

    pub(crate) async fn thinking_end(&mut self, idx: usize) {
        let content = match self.partial.content.get(idx) {
            Some(ContentBlock::Thinking(t)) => t.thinking.clone(),
            _ => return,
        };
        self.send(AssistantMessageEvent::ThinkingEnd {
            content_index: idx,
            content,
            partial: self.partial.clone(),
        })
        .await;
    }

    /// Open a tool call; returns its content index.
    pub(crate) async fn toolcall_start(&mut self, id: &str, name: &str, arguments: Value) -> usize {
        self.partial.content.push(ContentBlock::ToolCall(ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments,
            thought_signature: None,
            extra: Map::new(),
        }));
        let idx = self.partial.content.len() - 1;
        self.send(AssistantMessageEvent::ToolCallStart {
            content_index: idx,
            partial: self.partial.clone(),
        })
        .await;
        idx
    }

    pub(crate) fn tool_call(&mut self, idx: usize) -> Option<&mut ToolCall> {
        match self.partial.content.get_mut(idx) {
            Some(ContentBlock::ToolCall(t)) => Some(t),
            _ => None,
        }
    }

    /// Record a raw argument fragment and the re-parsed partial arguments.
    pub(crate) async fn toolcall_delta(&mut self, idx: usize, delta: &str, partial_args: Value) {
        if let Some(tc) = self.tool_call(idx) {
            tc.arguments = partial_args;
        } else {
            return;
        }
        self.send(AssistantMessageEvent::ToolCallDelta {
            content_index: idx,
            delta: delta.to_string(),
            partial: self.partial.clone(),
        })
        .await;
    }

    /// Close a tool call with the final parse of its argument text.
    pub(crate) async fn toolcall_end(&mut self, idx: usize, args_text: Option<&str>) {
        let Some(tc) = self.tool_call(idx) else {
            return;
        };
        if let Some(text) = args_text {
            match json_stream::parse_tool_arguments(text) {
                Ok(v) => tc.arguments = v,
                Err((fallback, msg)) => {
                    tc.arguments = fallback;
                    tc.extra.insert("argumentsError".into(), Value::String(msg));
                }
            }
        }
        let tool_call = tc.clone();
        self.send(AssistantMessageEvent::ToolCallEnd {
            content_index: idx,
            tool_call,
            partial: self.partial.clone(),
        })
        .await;
    }

    /// Send the terminal event.
    async fn finish(mut self, res: Result<(), String>, aborted: bool) {
        self.partial.duration_ms = Some(self.started.elapsed().as_millis() as u64);
        let ev = match res {
            Ok(()) if !aborted => AssistantMessageEvent::Done {
                reason: self.partial.stop_reason,
                message: self.partial.clone(),
            },
            Ok(()) => self.error_event(ABORTED.to_string(), true),
            Err(msg) => self.error_event(msg, aborted),
        };
        let _ = self.tx.send(ev).await;
    }

    fn error_event(&mut self, msg: String, aborted: bool) -> AssistantMessageEvent {
        let reason = if aborted {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        self.partial.stop_reason = reason;
        self.partial.error_message = Some(if aborted { ABORTED.to_string() } else { msg });
        AssistantMessageEvent::Error {
            reason,
            error: self.partial.clone(),
        }
    }
}

/// `cost = price / 1e6 * tokens`, with Pi's whole-request tiers and Anthropic's 2× input
/// price for 1h cache writes (Pi's `calculateCost`).
pub fn calculate_cost(model: &Model, usage: &mut Usage) {
    let input_tokens = usage.input + usage.cache_read + usage.cache_write;
    let (mut input, mut output, mut cache_read, mut cache_write) = (
        model.cost.input,
        model.cost.output,
        model.cost.cache_read,
        model.cost.cache_write,
    );
    let mut matched: Option<u64> = None;
    for tier in &model.cost.tiers {
        let better = match matched {
            None => true,
            Some(m) => tier.input_tokens_above > m,
        };
        if input_tokens > tier.input_tokens_above && better {
            (input, output, cache_read, cache_write) =
                (tier.input, tier.output, tier.cache_read, tier.cache_write);
            matched = Some(tier.input_tokens_above);
        }
    }
    let long_write = usage.cache_write_1h.unwrap_or(0) as f64;
    let short_write = usage.cache_write as f64 - long_write;
    usage.cost.input = input / 1e6 * usage.input as f64;
    usage.cost.output = output / 1e6 * usage.output as f64;
    usage.cost.cache_read = cache_read / 1e6 * usage.cache_read as f64;
    usage.cost.cache_write = (cache_write * short_write + input * 2.0 * long_write) / 1e6;
    usage.cost.total =
        usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write;
    usage.cost.total_from_provider = Some(false);
}

/// Rough token estimate of a context (Pi's `estimateContextTokens`: the last usable usage
/// plus 3.5 UTF-16 units per token for what follows).
pub fn estimate_context_tokens(
    system_prompt: &str,
    tools: &[Tool],
    messages: &[&AgentMessage],
) -> u64 {
    fn units(s: &str) -> u64 {
        s.encode_utf16().count() as u64
    }
    fn tokens(chars: u64) -> u64 {
        (chars as f64 / 3.5).ceil() as u64
    }
    fn blocks_chars(blocks: &[ContentBlock]) -> u64 {
        blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text(t) => units(&t.text),
                ContentBlock::Thinking(t) => units(&t.thinking),
                ContentBlock::ToolCall(tc) => {
                    units(&tc.name)
                        + units(&serde_json::to_string(&tc.arguments).unwrap_or_default())
                }
                ContentBlock::Image(_) => 4800,
                ContentBlock::Unknown(_) => 0,
            })
            .sum()
    }
    fn message_tokens(m: &AgentMessage) -> u64 {
        match m {
            AgentMessage::User(u) => match &u.content {
                pi_formats::message::Content::Text(s) => tokens(units(s)),
                pi_formats::message::Content::Blocks(b) => tokens(blocks_chars(b)),
            },
            AgentMessage::ToolResult(r) => tokens(blocks_chars(&r.content)),
            AgentMessage::Assistant(a) => tokens(blocks_chars(&a.content)),
            _ => 0,
        }
    }
    let mut head = tokens(units(system_prompt));
    if !tools.is_empty() {
        head += tokens(units(&serde_json::to_string(tools).unwrap_or_default()));
    }
    let last_usage = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m {
            AgentMessage::Assistant(a)
                if !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) =>
            {
                let u = &a.usage;
                let t = if u.total_tokens > 0 {
                    u.total_tokens
                } else {
                    u.input + u.output + u.cache_read + u.cache_write
                };
                (t > 0).then_some((i, t))
            }
            _ => None,
        });
    match last_usage {
        Some((i, t)) => {
            t + messages[i + 1..]
                .iter()
                .map(|m| message_tokens(m))
                .sum::<u64>()
        }
        None => head + messages.iter().map(|m| message_tokens(m)).sum::<u64>(),
    }
}

/// Fit the output cap into the context window, leaving a margin for estimation error
/// (Pi's `clampMaxTokensToContext`).
pub fn clamp_max_tokens_to_context(model: &Model, estimated_input: u64, max_tokens: u64) -> u64 {
    const SAFETY: i64 = 4096;
    const MIN_OUTPUT_WITH_RATIO: i64 = 32768;
    if model.context_window == 0 {
        return max_tokens.max(1);
    }
    let window = model.context_window as i64;
    let input = estimated_input as i64;
    let margin = SAFETY.max((input as f64 * 0.15).ceil() as i64);
    let mut room = window - input - margin;
    if room < MIN_OUTPUT_WITH_RATIO {
        room = MIN_OUTPUT_WITH_RATIO.min(window - input - SAFETY);
    }
    (max_tokens as i64).min(room.max(1)).max(1) as u64
}

/// The output cap for a request: explicit option or model max, clamped to the window.
pub(crate) fn base_max_tokens(
    model: &Model,
    norm: &transform::NormalizedContext,
    options: &StreamOptions,
) -> u64 {
    let est = estimate_context_tokens(&norm.system_prompt, &norm.tools, &norm.messages);
    clamp_max_tokens_to_context(model, est, options.max_tokens.unwrap_or(model.max_tokens))
}

/// The effective reasoning level: `None` when off or unsupported.
pub(crate) fn effective_reasoning(model: &Model, options: &StreamOptions) -> Option<ThinkingLevel> {
    let level = options.reasoning?;
    if level == ThinkingLevel::Off {
        return None;
    }
    let clamped = model.clamp_thinking_level(level);
    (clamped != ThinkingLevel::Off).then_some(clamped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_per_million_with_tiers() {
        let model: Model = serde_json::from_value(serde_json::json!({
            "id":"m","name":"m","api":"x","provider":"p","baseUrl":"u",
            "cost":{"input":3,"output":15,"cacheRead":0.3,"cacheWrite":3.75,
                "tiers":[{"inputTokensAbove":1000,"input":6,"output":30,"cacheRead":0.6,"cacheWrite":7.5}]}
        }))
        .expect("model");
        let mut u = Usage {
            input: 1388,
            output: 17,
            ..Usage::default()
        };
        calculate_cost(&model, &mut u);
        assert!((u.cost.input - 6.0 * 1388.0 / 1e6).abs() < 1e-12);
        let mut u = Usage {
            input: 100,
            output: 17,
            cache_write: 10,
            cache_write_1h: Some(4),
            ..Usage::default()
        };
        calculate_cost(&model, &mut u);
        assert!((u.cost.input - 0.0003).abs() < 1e-12);
        assert!((u.cost.output - 0.000255).abs() < 1e-12);
        assert!((u.cost.cache_write - (3.75 * 6.0 + 3.0 * 2.0 * 4.0) / 1e6).abs() < 1e-12);
        assert_eq!(u.cost.total_from_provider, Some(false));
    }

    #[test]
    fn max_tokens_clamp() {
        let model: Model = serde_json::from_value(serde_json::json!({
            "id":"m","name":"m","api":"x","provider":"p","baseUrl":"u","contextWindow":128000,"maxTokens":4096
        }))
        .expect("model");
        assert_eq!(clamp_max_tokens_to_context(&model, 1400, 4096), 4096);
        assert_eq!(clamp_max_tokens_to_context(&model, 126_000, 4096), 1);
        let mut small = model.clone();
        small.context_window = 6000;
        assert_eq!(clamp_max_tokens_to_context(&small, 1000, 4096), 904);
    }
}
