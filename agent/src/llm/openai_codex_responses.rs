//! `openai-codex-responses`: the Responses API of ChatGPT's Codex backend
//! (`{baseUrl}/codex/responses`), used by the `openai-codex` provider with a ChatGPT
//! subscription token from `/login`.
//!
//! The body is the Responses body with Codex's fixed choices (`store: false`, low text
//! verbosity, encrypted reasoning included, parallel tool calls). The headers carry the
//! token, the ChatGPT account id from the token's JWT claim, `originator: pi` and the
//! session id. Pi prefers a WebSocket transport and falls back to SSE; this build always
//! uses SSE, which the backend serves the same events over.

use serde_json::{json, Value};

use super::model::Model;
use super::oauth::openai_codex::account_id;
use super::openai_responses::{build_request, stream_response};
use super::{Context, Emitter, StreamOptions};

const DEFAULT_BASE_URL: &str = "https://chatgpt.com/backend-api";

/// `{base}/codex/responses`, accepting a base that already ends in `/codex` or the full path.
pub fn codex_url(base_url: &str) -> String {
    let raw = if base_url.trim().is_empty() {
        DEFAULT_BASE_URL
    } else {
        base_url
    };
    let base = raw.trim_end_matches('/');
    if base.ends_with("/codex/responses") {
        base.to_string()
    } else if base.ends_with("/codex") {
        format!("{base}/responses")
    } else {
        format!("{base}/codex/responses")
    }
}

/// The request body.
pub fn build_codex_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let mut body = build_request(model, context, options);
    body["store"] = json!(false);
    body["text"] = json!({"verbosity": "low"});
    body["include"] = json!(["reasoning.encrypted_content"]);
    if body.get("tool_choice").is_none() {
        body["tool_choice"] = json!("auto");
    }
    body["parallel_tool_calls"] = json!(true);
    body
}

/// The headers besides the model's and the caller's.
pub fn codex_headers(
    token: &str,
    account: &str,
    session_id: Option<&str>,
) -> Vec<(String, String)> {
    let mut h = vec![
        ("originator".to_string(), "pi".to_string()),
        ("OpenAI-Beta".into(), "responses=experimental".into()),
        ("accept".into(), "text/event-stream".into()),
        ("authorization".into(), format!("Bearer {token}")),
        ("chatgpt-account-id".into(), account.to_string()),
    ];
    if let Some(sid) = session_id {
        let sid: String = sid.chars().take(64).collect();
        h.push(("session-id".into(), sid.clone()));
        h.push(("x-client-request-id".into(), sid));
    }
    h
}

pub(crate) async fn run(
    model: &Model,
    context: &Context,
    options: &StreamOptions,
    em: &mut Emitter,
) -> Result<(), String> {
    let Some(token) = options.api_key.as_deref().filter(|k| !k.is_empty()) else {
        return Err(format!("No API key for provider: {}", model.provider));
    };
    let account = account_id(token).ok_or("Failed to extract accountId from token")?;
    let body = build_codex_request(model, context, options);
    let session = options
        .session_id
        .as_deref()
        .filter(|_| options.cache_retention != Some(super::CacheRetention::None));
    let headers = codex_headers(token, &account, session);
    stream_response(
        model,
        options,
        em,
        &codex_url(&model.base_url),
        headers,
        &body,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_headers() {
        assert_eq!(
            codex_url("https://chatgpt.com/backend-api/"),
            "https://chatgpt.com/backend-api/codex/responses"
        );
        assert_eq!(codex_url("http://h/codex"), "http://h/codex/responses");
        assert_eq!(
            codex_url("http://h/codex/responses"),
            "http://h/codex/responses"
        );
        assert_eq!(
            codex_url(""),
            "https://chatgpt.com/backend-api/codex/responses"
        );
        let h = codex_headers("t", "acct", Some("s1"));
        assert!(h.contains(&("chatgpt-account-id".into(), "acct".into())));
        assert!(h.contains(&("session-id".into(), "s1".into())));
    }
}
