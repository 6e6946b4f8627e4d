//! The compaction and branch-summary [`Summarizer`] over the session's provider.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pi_formats::message::{ContentBlock, StopReason as MsgStop, ThinkingLevel};
use tokio_util::sync::CancellationToken;

use super::events::EventSink;
use super::AgentHooks;
use crate::protocol::Event;

use crate::llm::{self, transform::user_text, Context, Model, ModelRegistry, StreamOptions};
use pi_engine::compaction::{
    StopReason, SummarizeError, Summarizer, SummaryRequest, SummaryResponse,
};

/// Summaries from `model`, cancelled with `cancel`.
pub(crate) struct LlmSummarizer {
    pub model: Model,
    pub api_key: Option<String>,
    pub registry: ModelRegistry,
    pub cancel: CancellationToken,
    /// Where the `summarization_retry_*` events go.
    pub events: RetryEvents,
    /// The session's hooks: `before_provider_headers` sees summary requests too, as in Pi
    /// (its summaries go through the session's stream function). The payload, response
    /// and stream-event hooks do not: Pi hands those to the agent loop's requests only.
    pub hooks: Option<Arc<dyn AgentHooks>>,
}

/// Pi's `summarization_retry_*` events for one kind of summary.
pub(crate) struct RetryEvents {
    pub sink: EventSink,
    /// What `summarization_retry_attempt_start` says is being summarized: `compaction`
    /// (with its reason) or `branchSummary`.
    pub source: &'static str,
    pub reason: Option<String>,
}

impl RetryEvents {
    fn emit(&self, event: Event) {
        (self.sink)(event);
    }
}

impl Summarizer for LlmSummarizer {
    fn summarize(
        &self,
        request: &SummaryRequest,
    ) -> impl Future<Output = Result<SummaryResponse, SummarizeError>> + Send {
        let context = Context {
            system_prompt: Some(request.system_prompt.clone()),
            messages: vec![user_text(&request.prompt, pi_formats::time::now_millis())],
            tools: vec![],
        };
        let mut options = StreamOptions {
            api_key: self.api_key.clone(),
            headers: self
                .registry
                .resolve_headers(&self.model.provider, self.api_key.as_deref()),
            max_tokens: request.max_tokens,
            reasoning: request.reasoning.as_deref().and_then(ThinkingLevel::parse),
            cancel: self.cancel.child_token(),
            ..Default::default()
        };
        let model = self.model.clone();
        let hooks = self.hooks.clone();
        async move {
            super::hooks::apply_provider_headers(hooks.as_deref(), &mut options).await;
            let m = llm::stream(&model, context, options).result().await;
            let text = m
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            let has_tool_call = m.tool_calls().next().is_some();
            let stop_reason = match m.stop_reason {
                MsgStop::Length => StopReason::Length,
                MsgStop::ToolUse => StopReason::ToolUse,
                MsgStop::Error => StopReason::Error,
                MsgStop::Aborted => StopReason::Aborted,
                _ => StopReason::Stop,
            };
            Ok(SummaryResponse {
                text,
                stop_reason,
                error_message: m.error_message.clone(),
                has_tool_call,
                usage: serde_json::to_value(&m.usage).ok(),
            })
        }
    }

    fn is_retryable(&self, response: &SummaryResponse) -> bool {
        response
            .error_message
            .as_deref()
            .is_some_and(super::retry::is_retryable_error)
    }

    fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    fn on_retry_scheduled(
        &self,
        attempt: u32,
        max_attempts: u32,
        delay: Duration,
        error_message: &str,
    ) {
        self.events.emit(Event::SummarizationRetryScheduled {
            attempt,
            max_attempts,
            delay_ms: delay.as_millis() as u64,
            error_message: error_message.to_string(),
        });
    }

    fn on_retry_attempt_start(&self) {
        self.events.emit(Event::SummarizationRetryAttemptStart {
            source: self.events.source.to_string(),
            reason: self.events.reason.clone(),
        });
    }

    fn on_retry_finished(&self) {
        self.events.emit(Event::SummarizationRetryFinished);
    }

    fn backoff(&self, delay: Duration) -> impl Future<Output = ()> + Send {
        let cancel = self.cancel.clone();
        async move {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = cancel.cancelled() => {}
            }
        }
    }
}

/// The summarizer for the session's current model (`None` without one), and the
/// reasoning level summaries use: the session's, when the model reasons and it is not off.
/// `routed` replaces a virtual model with the physical model and level its router chose
/// for this `direct` request.
pub(crate) fn for_state(
    st: &super::State,
    routed: Option<super::route::Dispatch>,
    cancel: &CancellationToken,
    events: RetryEvents,
    hooks: Option<Arc<dyn AgentHooks>>,
) -> Option<(LlmSummarizer, Option<String>)> {
    let (model, level) = match routed {
        Some(d) => (d.model, d.level),
        None => (st.opts.model.clone()?, st.opts.thinking),
    };
    let api_key = st.opts.api_key_for(&model.provider);
    let reasoning =
        (model.reasoning && level != ThinkingLevel::Off).then(|| level.as_str().to_string());
    Some((
        LlmSummarizer {
            model,
            api_key,
            registry: st.opts.registry.clone(),
            cancel: cancel.clone(),
            events,
            hooks,
        },
        reasoning,
    ))
}
