//! Running the summarizer: compaction summaries (history, split-turn prefix)
//! and branch summaries, behind a small [`Summarizer`] trait so the provider
//! layer plugs in later and tests script the model.
//!
//! Every request goes through [`summarize_with_retry`], which retries
//! transient provider errors with exponential backoff, as Pi's
//! `retryAssistantCall` does. A response that stopped at the token cap is
//! refused: a truncated summary must never become a session checkpoint.

use super::branch::prepare_branch_entries;
use super::file_ops::{format_file_operations, FileLists};
use super::prepare::CompactionInput;
use super::serialize::{
    branch_summary_prompt, history_summary_prompt, serialize_conversation, turn_prefix_prompt,
    BRANCH_SUMMARY_PREAMBLE, SUMMARIZATION_SYSTEM_PROMPT,
};
use crate::context::convert_to_llm;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::future::Future;
use std::time::Duration;

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    /// Hit the output token cap: the text is incomplete.
    Length,
    ToolUse,
    Error,
    Aborted,
}

/// One summarization request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRequest {
    pub system_prompt: String,
    /// The single user message.
    pub prompt: String,
    /// Output cap; `None` uses the model's own limit (what Pi 1.6 does).
    pub max_tokens: Option<u64>,
    /// Reasoning level (`"low"`, `"high"`…) when the model reasons; `None` for off.
    pub reasoning: Option<String>,
}

/// What the model answered. Provider failures are data here (`stop_reason:
/// Error` plus a message), as in Pi, so the retry policy can inspect them.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryResponse {
    /// The text blocks, joined with newlines.
    pub text: String,
    pub stop_reason: StopReason,
    pub error_message: Option<String>,
    /// The model tried to call a tool, which a summary must not do.
    pub has_tool_call: bool,
    /// Provider usage object, stored on the entry as is.
    pub usage: Option<Value>,
}

/// The model behind summaries. The provider layer implements this; tests use a
/// scripted one.
pub trait Summarizer {
    /// One request. `Err` is a failure outside the model's answer (no credentials,
    /// a bug); it is never retried.
    fn summarize(
        &self,
        request: &SummaryRequest,
    ) -> impl Future<Output = Result<SummaryResponse, SummarizeError>> + Send;

    /// Whether an error response is transient (overload, rate limit, dropped
    /// stream). The provider layer owns this classification.
    fn is_retryable(&self, response: &SummaryResponse) -> bool;

    /// Waits before a retry. Separate so tests need no timer and a caller can
    /// cancel by dropping the future.
    fn backoff(&self, delay: Duration) -> impl Future<Output = ()> + Send;

    /// Whether the caller gave up (an abort). Checked after a backoff: an abort
    /// while waiting ends the retries with an aborted response.
    fn is_cancelled(&self) -> bool {
        false
    }

    /// A retry of a transient error is scheduled: `attempt` of `max_attempts`, after
    /// `delay`. (Pi's `onRetryScheduled`; the agent turns these into events.)
    fn on_retry_scheduled(
        &self,
        _attempt: u32,
        _max_attempts: u32,
        _delay: Duration,
        _error_message: &str,
    ) {
    }

    /// The backoff is over and the retried request starts.
    fn on_retry_attempt_start(&self) {}

    /// The retry loop ended (success, final error, or abort), after at least one retry
    /// was scheduled.
    fn on_retry_finished(&self) {}
}

/// Retry settings (`retry` in settings.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RetrySettings {
    pub enabled: bool,
    pub max_retries: u32,
    pub base_delay_ms: u64,
    /// Cap on one backoff delay.
    pub max_agent_delay_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2000,
            max_agent_delay_ms: 60_000,
        }
    }
}

impl RetrySettings {
    /// Delay before retry number `attempt` (1-based): base × 2^(attempt−1), capped.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u64.saturating_pow(attempt.saturating_sub(1));
        Duration::from_millis(
            self.base_delay_ms
                .saturating_mul(factor)
                .min(self.max_agent_delay_ms),
        )
    }
}

/// Why a summary could not be produced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizeError {
    /// The provider reported an error (after any retries).
    #[error("{label} failed: {message}")]
    Provider {
        label: &'static str,
        message: String,
    },
    /// The answer hit the output cap; partial text is not kept.
    #[error("{label} failed: generation hit the token cap and the summary is incomplete")]
    Truncated { label: &'static str },
    #[error("{label} attempted to call a tool")]
    ToolCall { label: &'static str },
    /// The request was aborted.
    #[error("{label} was aborted")]
    Aborted { label: &'static str },
    /// The summarizer could not make the request at all.
    #[error("summarizer unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// One request with Pi's retry policy: success, an abort, a non-retryable error
/// or an exhausted budget ends the loop; transient errors are retried after
/// an exponentially growing delay. The summarizer hears of each scheduled retry,
/// each retried attempt and the end of a loop that retried (Pi's callbacks).
pub async fn summarize_with_retry<S: Summarizer>(
    summarizer: &S,
    request: &SummaryRequest,
    retry: &RetrySettings,
) -> Result<SummaryResponse, SummarizeError> {
    let max_attempts = if retry.enabled { retry.max_retries } else { 0 };
    let mut attempt = 0;
    loop {
        let response = match summarizer.summarize(request).await {
            Ok(r) => r,
            Err(e) => {
                if attempt > 0 {
                    summarizer.on_retry_finished();
                }
                return Err(e);
            }
        };
        if response.stop_reason != StopReason::Error
            || attempt >= max_attempts
            || !summarizer.is_retryable(&response)
        {
            if attempt > 0 {
                summarizer.on_retry_finished();
            }
            return Ok(response);
        }
        attempt += 1;
        let delay = retry.delay(attempt);
        let message = response
            .error_message
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or("Unknown error");
        summarizer.on_retry_scheduled(attempt, max_attempts, delay, message);
        summarizer.backoff(delay).await;
        if summarizer.is_cancelled() {
            // An abort while waiting: the same outcome as an aborted stream.
            summarizer.on_retry_finished();
            return Ok(SummaryResponse {
                stop_reason: StopReason::Aborted,
                error_message: None,
                ..response
            });
        }
        summarizer.on_retry_attempt_start();
    }
}

/// Turns a response into summary text, refusing what must not be stored.
fn accept(
    response: SummaryResponse,
    label: &'static str,
) -> Result<SummaryResponse, SummarizeError> {
    match response.stop_reason {
        StopReason::Error => Err(SummarizeError::Provider {
            label,
            message: response
                .error_message
                .clone()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "Unknown error".into()),
        }),
        StopReason::Length => Err(SummarizeError::Truncated { label }),
        StopReason::Aborted => Err(SummarizeError::Aborted { label }),
        StopReason::Stop | StopReason::ToolUse if response.has_tool_call => {
            Err(SummarizeError::ToolCall { label })
        }
        StopReason::Stop | StopReason::ToolUse => Ok(response),
    }
}

/// Options shared by summary requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SummaryOptions {
    /// Extra focus from the user (`/compact <instructions>`).
    pub custom_instructions: Option<String>,
    /// Reasoning level, when the model reasons and it is not off.
    pub reasoning: Option<String>,
    pub retry: RetrySettings,
}

fn request(prompt: String, options: &SummaryOptions) -> SummaryRequest {
    SummaryRequest {
        system_prompt: SUMMARIZATION_SYSTEM_PROMPT.to_string(),
        prompt,
        max_tokens: None,
        reasoning: options.reasoning.clone().filter(|r| r != "off"),
    }
}

/// Pi's `combineUsage`: the sum of two provider usages, keeping the optional
/// splits (`cacheWrite1h`, `reasoning`) when either side reports them. A cost
/// total counts as provider-reported only when both parts are.
fn combine_usage(first: Option<Value>, second: Option<Value>) -> Option<Value> {
    let (first, second) = match (first, second) {
        (Some(a), Some(b)) => (a, b),
        (a, b) => return b.or(a),
    };
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let sum = |k: &str| number_value(num(&first, k) + num(&second, k));
    let mut m = serde_json::Map::new();
    for key in ["input", "output", "cacheRead", "cacheWrite"] {
        m.insert(key.into(), sum(key));
    }
    for key in ["cacheWrite1h", "reasoning"] {
        if first.get(key).is_some() || second.get(key).is_some() {
            m.insert(key.into(), sum(key));
        }
    }
    m.insert("totalTokens".into(), sum("totalTokens"));
    let empty = Value::Null;
    let (ca, cb) = (
        first.get("cost").unwrap_or(&empty),
        second.get("cost").unwrap_or(&empty),
    );
    let mut cost = serde_json::Map::new();
    for key in ["input", "output", "cacheRead", "cacheWrite", "total"] {
        cost.insert(key.into(), number_value(num(ca, key) + num(cb, key)));
    }
    let from_provider = |c: &Value| c.get("totalFromProvider") == Some(&Value::Bool(true));
    cost.insert(
        "totalFromProvider".into(),
        Value::Bool(from_provider(ca) && from_provider(cb)),
    );
    m.insert("cost".into(), Value::Object(cost));
    Some(Value::Object(m))
}

fn number_value(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Value::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

/// The outcome of a compaction, ready to be written as a `compaction` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    /// The summary with the file lists appended.
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    /// `{readFiles, modifiedFiles}`, carried into the next compaction.
    pub details: FileLists,
    pub usage: Option<Value>,
}

/// Summarizes a history span, given as conversation text (with the update prompt when
/// there is a previous summary).
async fn history_summary<S: Summarizer>(
    summarizer: &S,
    conversation: &str,
    previous_summary: Option<&str>,
    options: &SummaryOptions,
) -> Result<SummaryResponse, SummarizeError> {
    let prompt = history_summary_prompt(
        conversation,
        previous_summary,
        options.custom_instructions.as_deref(),
    );
    let response =
        summarize_with_retry(summarizer, &request(prompt, options), &options.retry).await?;
    accept(response, "Summarization")
}

/// Pi's `compact`: one summary of the history, or for a split turn, the history
/// summary (or the previous summary, if there is no new history) and a turn
/// prefix summary joined under a separator; then the file lists.
pub async fn compact<S: Summarizer>(
    input: &CompactionInput,
    summarizer: &S,
    options: &SummaryOptions,
) -> Result<CompactionResult, SummarizeError> {
    let previous = input.previous_summary.as_deref();
    let (mut summary, usage) = match (&input.history, &input.turn_prefix) {
        (history, Some(turn_prefix)) if input.is_split_turn => {
            let (history, history_usage) = match history {
                None => (previous.unwrap_or("No prior history.").to_string(), None),
                Some(conversation) => {
                    let r = history_summary(summarizer, conversation, previous, options).await?;
                    (r.text, r.usage)
                }
            };
            let prompt = turn_prefix_prompt(turn_prefix, options.custom_instructions.as_deref());
            let response =
                summarize_with_retry(summarizer, &request(prompt, options), &options.retry).await?;
            let prefix = accept(response, "Turn prefix summarization")?;
            (
                format!(
                    "{history}\n\n---\n\n**Turn Context (split turn):**\n\n{}",
                    prefix.text
                ),
                combine_usage(history_usage, prefix.usage),
            )
        }
        (history, _) => {
            let conversation = history.as_deref().unwrap_or("");
            let r = history_summary(summarizer, conversation, previous, options).await?;
            (r.text, r.usage)
        }
    };
    let lists = &input.file_lists;
    summary.push_str(&format_file_operations(
        &lists.read_files,
        &lists.modified_files,
    ));
    Ok(CompactionResult {
        summary,
        first_kept_entry_id: input.first_kept_entry_id.clone(),
        tokens_before: input.tokens_before,
        details: lists.clone(),
        usage,
    })
}

/// A generated branch summary.
#[derive(Debug, Clone, PartialEq)]
pub enum BranchSummaryOutcome {
    /// Ready for a `branch_summary` entry (`details` = the file lists).
    Summary {
        summary: String,
        details: FileLists,
        usage: Option<Value>,
    },
    /// The branch held nothing to summarize; Pi records this text.
    NothingToSummarize,
    /// The request was aborted; navigation is cancelled.
    Aborted,
}

/// Text Pi stores when a branch had no messages to summarize.
pub const NO_CONTENT_SUMMARY: &str = "No content to summarize";

/// Branch summary settings (`branchSummary` in settings.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BranchSummarySettings {
    pub reserve_tokens: u64,
    pub skip_prompt: bool,
}

impl Default for BranchSummarySettings {
    fn default() -> Self {
        BranchSummarySettings {
            reserve_tokens: 16384,
            skip_prompt: false,
        }
    }
}

/// Pi's `generateBranchSummary`: the newest messages of the abandoned branch
/// that fit the model's window (minus `reserve_tokens`), summarized, behind a
/// preamble, with the branch's file lists appended. With
/// `replace_instructions`, the custom instructions replace the default prompt.
pub async fn generate_branch_summary<S: Summarizer>(
    entries: &[Value],
    summarizer: &S,
    context_window: Option<u64>,
    settings: &BranchSummarySettings,
    options: &SummaryOptions,
    replace_instructions: bool,
) -> Result<BranchSummaryOutcome, SummarizeError> {
    let window = context_window.filter(|&w| w > 0).unwrap_or(128_000);
    // Pi subtracts without a floor; a non-positive budget means "no limit" there too.
    let budget = window.saturating_sub(settings.reserve_tokens);
    let prepared = prepare_branch_entries(entries, budget);
    if prepared.messages.is_empty() {
        return Ok(BranchSummaryOutcome::NothingToSummarize);
    }
    let conversation = serialize_conversation(&convert_to_llm(&prepared.messages));
    let prompt = branch_summary_prompt(
        &conversation,
        options.custom_instructions.as_deref(),
        replace_instructions,
    );
    let response =
        summarize_with_retry(summarizer, &request(prompt, options), &options.retry).await?;
    if response.stop_reason == StopReason::Aborted {
        return Ok(BranchSummaryOutcome::Aborted);
    }
    let response = accept(response, "Branch summarization")?;
    let lists = prepared.file_ops.file_lists();
    let mut summary = format!("{BRANCH_SUMMARY_PREAMBLE}{}", response.text);
    summary.push_str(&format_file_operations(
        &lists.read_files,
        &lists.modified_files,
    ));
    Ok(BranchSummaryOutcome::Summary {
        summary,
        details: lists,
        usage: response.usage,
    })
}

#[cfg(test)]
mod tests;
