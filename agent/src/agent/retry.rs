//! Which provider errors are worth retrying (Pi's `isRetryableAssistantError`).

/// Account limits that look like throttling but never clear by waiting.
const NON_RETRYABLE: &[&str] = &[
    "gousagelimiterror",
    "freeusagelimiterror",
    "monthly usage limit reached",
    "available balance",
    "insufficient_quota",
    "out of budget",
    "quota exceeded",
    "billing",
];

/// Transient failures: overload, throttling, 5xx, dropped connections.
const RETRYABLE: &[&str] = &[
    "overloaded",
    "server_busy",
    "servers are currently busy",
    "currently experiencing high demand",
    "model is at capacity",
    "rate limit",
    "rate_limit",
    "ratelimit",
    "rate-limit",
    "too many requests",
    "service unavailable",
    "service temporarily unavailable",
    "service is temporarily unavailable",
    "service_unavailable",
    "server error",
    "server_error",
    "internal error",
    "internal_error",
    "internal server error",
    "provider returned error",
    "provider returned an error",
    "unable to forward upstream",
    "upstream request failed",
    "upstream_stream_read_error",
    "stream was interrupted",
    "network error",
    "network_error",
    "connection error",
    "connection refused",
    "connection lost",
    "connection closed",
    "connection reset by peer",
    "other side closed",
    "fetch failed",
    "getaddrinfo",
    "econnreset",
    "econnaborted",
    "econnrefused",
    "etimedout",
    "epipe",
    "enotfound",
    "eai_again",
    "upstream connect",
    "stream ended unexpectedly",
    "timed out",
    "timeout",
    "terminated",
    "error sending request",
    "error decoding response body",
];

const STATUS: &[&str] = &["429", "500", "502", "503", "504", "520", "524"];

/// Whether an assistant error message describes a transient failure.
pub fn is_retryable_error(message: &str) -> bool {
    let lower = message.to_lowercase();
    if NON_RETRYABLE.iter().any(|p| lower.contains(p)) {
        return false;
    }
    RETRYABLE.iter().any(|p| lower.contains(p)) || has_status(&lower)
}

/// A retryable status code not glued to other letters or digits (Pi's look-arounds).
fn has_status(text: &str) -> bool {
    let bytes = text.as_bytes();
    STATUS.iter().any(|code| {
        text.match_indices(code).any(|(i, _)| {
            let before = i.checked_sub(1).map(|j| bytes[j]);
            let after = bytes.get(i + code.len()).copied();
            let clear = |b: Option<u8>| b.is_none_or(|b| !b.is_ascii_alphanumeric());
            clear(before) && clear(after)
        })
    })
}

/// Pi's `retryDelayMs`: base × 2^(attempt-1), capped.
pub(crate) fn delay_ms(base: u64, attempt: u32, cap: u64) -> u64 {
    let factor = 1u64
        .checked_shl(attempt.saturating_sub(1))
        .unwrap_or(u64::MAX);
    base.saturating_mul(factor).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_like_pi() {
        assert!(is_retryable_error("500: {\"message\":\"fake overloaded\"}"));
        assert!(is_retryable_error("429 Too Many Requests"));
        assert!(is_retryable_error("fetch failed"));
        assert!(!is_retryable_error(
            "400: {\"message\":\"fake invalid request\"}"
        ));
        assert!(!is_retryable_error("error 4500 in field"));
        assert!(!is_retryable_error("429 insufficient_quota"));
    }

    #[test]
    fn delays_double_and_cap() {
        assert_eq!(delay_ms(200, 1, 60_000), 200);
        assert_eq!(delay_ms(200, 3, 60_000), 800);
        assert_eq!(delay_ms(200, 80, 60_000), 60_000);
    }
}
