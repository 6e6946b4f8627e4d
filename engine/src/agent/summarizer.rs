//! The compaction [`Summarizer`] over the session's provider.

use std::future::Future;
use std::time::Duration;

use pi_formats::message::{ContentBlock, StopReason as MsgStop, ThinkingLevel};
use tokio_util::sync::CancellationToken;

use crate::compaction::{StopReason, SummarizeError, Summarizer, SummaryRequest, SummaryResponse};
use crate::llm::{self, transform::user_text, Context, Model, ModelRegistry, StreamOptions};

/// Summaries from `model`, cancelled with `cancel`.
pub(crate) struct LlmSummarizer {
    pub model: Model,
    pub api_key: Option<String>,
    pub registry: ModelRegistry,
    pub cancel: CancellationToken,
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
        let options = StreamOptions {
            api_key: self.api_key.clone(),
            headers: self
                .registry
                .resolve_headers(&self.model.provider, self.api_key.as_deref()),
            max_tokens: request.max_tokens,
            reasoning: request.reasoning.as_deref().and_then(ThinkingLevel::parse),
            cancel: self.cancel.child_token(),
            ..Default::default()
        };
        let stream = llm::stream(&self.model, &context, options);
        async move {
            let m = stream.result().await;
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
