//! Context-overflow recognition (Pi's `isContextOverflow`, `utils/overflow.ts`).
//!
//! Providers report "your prompt is too long" in many wordings; the agent needs to know it
//! to compact and retry instead of surfacing the error. The pattern list is Pi 1.6.0's.

use std::sync::OnceLock;

use pi_formats::message::{AssistantMessage, StopReason};
use regex::{Regex, RegexSet};

const OVERFLOW_PATTERNS: &[&str] = &[
    r"(?i)prompt (?:is )?too long",
    r"(?i)prompt exceeds max length",
    r"(?i)request_too_large",
    r"(?i)input is too long for requested model",
    r"(?i)exceeds the context window",
    r"(?i)exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
    r"(?i)context window exceeded",
    r"(?i)input token count.*exceeds the maximum",
    r"(?i)maximum prompt length is \d+",
    r"(?i)reduce the length of the messages",
    r"(?i)maximum context length is \d+ tokens",
    r"(?i)exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",
    r"(?i)input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
    r"(?i)exceeds the limit of \d+",
    r"(?i)exceeds the available context size",
    r"(?i)greater than the context length",
    r"(?i)context window exceeds limit",
    r"(?i)exceeded model token limit",
    r"(?i)too large for model with \d+ maximum context length",
    r"(?i)prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",
    r"(?i)model_context_window_exceeded",
    r"(?i)prompt too long; exceeded (?:max )?context length",
    r"(?i)range of input length should be",
    r"(?i)context[_ ]length[_ ]exceeded",
    r"(?i)too many tokens",
    r"(?i)token limit exceeded",
    // HTTP 413 is a request-size overflow whatever the body says; only at the start, so a
    // status quoted inside a body does not count.
    r"(?i)^(?:[\w -]+ API error \(413\):|413(?:\s|:|$))",
];

/// Errors that match an overflow pattern by accident (Bedrock throttling says "Too many
/// tokens"), excluded first.
const NON_OVERFLOW_PATTERNS: &[&str] = &[
    r"(?i)^(Throttling error|Service unavailable):",
    r"(?i)rate limit",
    r"(?i)too many requests",
];

/// Cerebras answers an oversized request with an empty 400/413.
const CEREBRAS_BODYLESS: &str = r"(?i)^4(?:00|13)\s*(?:status code)?\s*\(no body\)";

struct Patterns {
    overflow: RegexSet,
    non_overflow: RegexSet,
    cerebras: Regex,
}

fn patterns() -> Option<&'static Patterns> {
    static P: OnceLock<Option<Patterns>> = OnceLock::new();
    P.get_or_init(|| {
        Some(Patterns {
            overflow: RegexSet::new(OVERFLOW_PATTERNS).ok()?,
            non_overflow: RegexSet::new(NON_OVERFLOW_PATTERNS).ok()?,
            cerebras: Regex::new(CEREBRAS_BODYLESS).ok()?,
        })
    })
    .as_ref()
}

/// Whether an error text reads as a context overflow (ignoring rate-limit look-alikes).
pub fn is_overflow_error_text(text: &str, provider: &str) -> bool {
    let Some(p) = patterns() else { return false };
    if p.non_overflow.is_match(text) {
        return false;
    }
    p.overflow.is_match(text) || (provider == "cerebras" && p.cerebras.is_match(text))
}

/// Whether `msg` shows the context window was exceeded: an error whose text matches Pi's
/// patterns, a "successful" response whose input alone exceeds `context_window` (providers
/// that truncate silently), or a `length` stop with no output and a full window.
/// `context_window == 0` disables the usage-based checks.
pub fn is_context_overflow(msg: &AssistantMessage, context_window: u64) -> bool {
    if msg.stop_reason == StopReason::Error {
        if let Some(text) = msg.error_message.as_deref().filter(|t| !t.is_empty()) {
            if is_overflow_error_text(text, &msg.provider) {
                return true;
            }
        }
    }
    let input = msg.usage.input + msg.usage.cache_read;
    if context_window > 0 && msg.stop_reason == StopReason::Stop && input > context_window {
        return true;
    }
    if context_window > 0
        && msg.stop_reason == StopReason::Length
        && msg.usage.output == 0
        && (input as f64) >= (context_window as f64) * 0.99
    {
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str, provider: &str) -> AssistantMessage {
        let mut m = AssistantMessage::empty("openai-completions", provider, "m", 0);
        m.stop_reason = StopReason::Error;
        m.error_message = Some(text.to_string());
        m
    }

    #[test]
    fn provider_messages_are_recognized() {
        let yes = [
            "prompt is too long: 213462 tokens > 200000 maximum",
            "400 {\"type\":\"error\",\"error\":{\"type\":\"request_too_large\"}}",
            "Your input exceeds the context window of this model",
            "Requested token count exceeds the model's maximum context length of 131072 tokens",
            "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
            "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
            "Please reduce the length of the messages or completion",
            "This endpoint's maximum context length is 8192 tokens. However, you requested 9000",
            "the request exceeds the available context size, try increasing it",
            "invalid params, context window exceeds limit",
            "413: payload",
            "github-copilot API error (413): {\"message\":\"failed to parse request\"}",
            "Prompt has 9,000 tokens, but the configured context size is 8,192 tokens",
        ];
        for t in yes {
            assert!(is_context_overflow(&err(t, "x"), 0), "{t}");
        }
        let no = [
            "ThrottlingException: Too many tokens, please wait before trying again. rate limit",
            "Too many requests: too many tokens",
            "500: {\"message\":\"fake overloaded\"}",
            "400 status code (no body)",
            "body mentions 413 later",
        ];
        for t in no {
            assert!(!is_context_overflow(&err(t, "x"), 0), "{t}");
        }
        assert!(is_context_overflow(
            &err("400 status code (no body)", "cerebras"),
            0
        ));
    }

    #[test]
    fn silent_and_length_overflow() {
        let mut m = AssistantMessage::empty("a", "zai", "m", 0);
        m.stop_reason = StopReason::Stop;
        m.usage.input = 900;
        m.usage.cache_read = 200;
        assert!(is_context_overflow(&m, 1000));
        assert!(!is_context_overflow(&m, 2000));
        assert!(!is_context_overflow(&m, 0));
        m.stop_reason = StopReason::Length;
        m.usage.output = 0;
        assert!(is_context_overflow(&m, 1100));
        m.usage.output = 5;
        assert!(!is_context_overflow(&m, 1100));
    }
}
