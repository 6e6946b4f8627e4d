//! HTTP plumbing shared by the wire APIs: a pooled client, JSON POST with error bodies
//! turned into Pi-style error messages, and an SSE reader over the response body.

use std::collections::VecDeque;
use std::sync::OnceLock;

use futures::StreamExt;
use serde_json::Value;

use super::sse::{SseDecoder, SseEvent};
use super::{Model, StreamOptions};
/// Appends the configured headers to a request's own: the model's (models.json, the
/// catalog), then the caller's (extensions, options). A later header replaces an earlier
/// one of the same name (any case), as Pi's header merges do, and the names
/// `options.removed_headers` lists are left out whoever added them.
pub(crate) fn extend_custom_headers(
    headers: &mut Vec<(String, String)>,
    model: &Model,
    options: &StreamOptions,
) {
    for (k, v) in model.headers.iter().chain(options.headers.iter()) {
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        headers.push((k.clone(), v.clone()));
    }
    if !options.removed_headers.is_empty() {
        headers.retain(|(name, _)| {
            !options
                .removed_headers
                .iter()
                .any(|r| r.eq_ignore_ascii_case(name))
        });
    }
}

/// One pooled client for all requests that do not bring their own.
pub(crate) fn client(options: &StreamOptions) -> reqwest::Client {
    if let Some(c) = &options.client {
        return c.clone();
    }
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .user_agent(concat!("pi-rust/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default()
        })
        .clone()
}

/// A client for the settings Pi applies to its HTTP dispatcher: `httpProxy` (used only when
/// no `HTTP_PROXY`/`HTTPS_PROXY` is set, as Pi fills those in; `NO_PROXY` still applies)
/// and `httpIdleTimeoutMs` (how long a request may wait for response headers or for the
/// next piece of the body; `0` disables it).
pub fn settings_client(
    http_proxy: Option<&str>,
    idle_timeout_ms: u64,
) -> Result<reqwest::Client, String> {
    let mut builder =
        reqwest::Client::builder().user_agent(concat!("pi-rust/", env!("CARGO_PKG_VERSION")));
    let env_proxy = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
        .iter()
        .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
    if let Some(proxy) = http_proxy.map(str::trim).filter(|p| !p.is_empty()) {
        if !env_proxy {
            let proxy = reqwest::Proxy::all(proxy)
                .map_err(|e| format!("Invalid httpProxy setting {proxy:?}: {e}"))?
                .no_proxy(reqwest::NoProxy::from_env());
            builder = builder.proxy(proxy);
        }
    }
    if idle_timeout_ms > 0 {
        builder = builder.read_timeout(std::time::Duration::from_millis(idle_timeout_ms));
    }
    builder.build().map_err(|e| error_chain(&e))
}

/// How an API's SDK words an HTTP error; Pi's error messages (and so the overflow regexes
/// that read them) follow the SDK.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ErrorStyle {
    /// OpenAI SDK via Pi's `formatProviderError`: `400: {"message":…}` (the `error` member of
    /// the body), or `400 status code (no body)`.
    OpenAi,
    /// Anthropic SDK: `400 {"type":"error","error":{…}}` (the whole body).
    Anthropic,
    /// Google: `{status}: {body}` with the inner `error.message` when present.
    Google,
    /// The Google Gen AI SDK (Vertex AI): the error body itself, re-serialized compactly.
    GenAiSdk,
    /// Pi's Mistral client: `Mistral API error ({status}): {body}` (body cut at 4,000 chars).
    Mistral,
}

pub(crate) fn format_http_error(style: ErrorStyle, status: u16, body: &str) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return format!("{status} status code (no body)");
    }
    let json: Option<Value> = serde_json::from_str(trimmed).ok();
    match style {
        ErrorStyle::GenAiSdk => match json {
            Some(v) => compact(&v),
            None => format!("{status}: {trimmed}"),
        },
        ErrorStyle::Mistral => {
            const MAX: usize = 4000;
            let n = trimmed.chars().count();
            if n <= MAX {
                format!("Mistral API error ({status}): {trimmed}")
            } else {
                let cut: String = trimmed.chars().take(MAX).collect();
                format!(
                    "Mistral API error ({status}): {cut}... [truncated {} chars]",
                    n - MAX
                )
            }
        }
        ErrorStyle::OpenAi => match json {
            Some(v) => {
                let inner = v.get("error").filter(|e| !e.is_null()).unwrap_or(&v);
                format!("{status}: {}", compact(inner))
            }
            None => format!("{status}: {trimmed}"),
        },
        ErrorStyle::Anthropic => match json {
            Some(v) => match v.get("message").and_then(Value::as_str) {
                Some(m) => format!("{status} {m}"),
                None => format!("{status} {}", compact(&v)),
            },
            None => format!("{status} {trimmed}"),
        },
        ErrorStyle::Google => {
            let msg = json
                .as_ref()
                .and_then(|v| v.pointer("/error/message"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| trimmed.to_string());
            format!("{status}: {msg}")
        }
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Error text with its source chain (what failed and why: "connection refused" is two
/// levels below reqwest's "error sending request").
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// The body to send: the payload hooks' replacement of `body`, if any (`body` itself when no
/// hook reads payloads, so nothing is copied).
pub(crate) async fn hooked_payload<'a>(
    options: &StreamOptions,
    body: &'a Value,
) -> std::borrow::Cow<'a, Value> {
    match &options.provider_hooks {
        Some(hooks) if hooks.wants_payload() => match hooks.payload(body.clone()).await {
            Some(replaced) => std::borrow::Cow::Owned(replaced),
            None => std::borrow::Cow::Borrowed(body),
        },
        _ => std::borrow::Cow::Borrowed(body),
    }
}

/// Shows the response's status and headers to the hooks that want them, before the body
/// is read.
pub(crate) async fn observe_response(options: &StreamOptions, resp: &reqwest::Response) {
    let Some(hooks) = options
        .provider_hooks
        .as_ref()
        .filter(|h| h.wants_response())
    else {
        return;
    };
    let mut headers: std::collections::BTreeMap<String, String> = Default::default();
    for (name, value) in resp.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_ascii_lowercase())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    hooks.response(resp.status().as_u16(), headers).await;
}

/// Shows one parsed event of a response stream to the hooks that want them (Pi's
/// `provider_stream_event`), awaited so they see the events in order, before the event is
/// applied. Nothing is copied or sent when no hook wants them.
pub(crate) async fn observe_stream_event(options: &StreamOptions, model: &Model, data: &Value) {
    if let Some(hooks) = options
        .provider_hooks
        .as_ref()
        .filter(|h| h.wants_stream_events())
    {
        hooks.stream_event(model, data).await;
    }
}

/// POST `body` as JSON (after the provider hooks saw it); a non-2xx answer becomes
/// `Err(message)`.
pub(crate) async fn post_json(
    options: &StreamOptions,
    url: &str,
    headers: &[(String, String)],
    body: &Value,
    style: ErrorStyle,
) -> Result<reqwest::Response, String> {
    let body = hooked_payload(options, body).await;
    let mut req = client(options).post(url).json(body.as_ref());
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    if let Some(t) = options.timeout {
        req = req.timeout(t);
    }
    let resp = req.send().await.map_err(|e| error_chain(&e))?;
    observe_response(options, &resp).await;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        return Err(format_http_error(style, status.as_u16(), &text));
    }
    Ok(resp)
}

/// SSE events read from a response body.
pub(crate) struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: SseDecoder,
    queue: VecDeque<SseEvent>,
    done: bool,
}

impl SseReader {
    pub(crate) fn new(resp: reqwest::Response) -> Self {
        SseReader {
            body: resp.bytes_stream().boxed(),
            decoder: SseDecoder::new(),
            queue: VecDeque::new(),
            done: false,
        }
    }

    /// The reconnection time the stream's `retry:` field set so far, in milliseconds.
    pub(crate) fn retry_ms(&self) -> Option<u64> {
        self.decoder.retry_ms()
    }

    /// The next event; `Ok(None)` at a clean end of the body, `Err` when the connection
    /// broke mid-body.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, String> {
        loop {
            if let Some(ev) = self.queue.pop_front() {
                return Ok(Some(ev));
            }
            if self.done {
                return Ok(None);
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.queue.extend(self.decoder.feed(&chunk)),
                Some(Err(e)) => return Err(error_chain(&e)),
                None => {
                    self.done = true;
                    self.queue.extend(self.decoder.finish());
                }
            }
        }
    }
}

/// Join a base URL and a path without doubling or dropping the slash.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_headers_replace_by_name_and_removed_ones_go() {
        let mut model: Model = serde_json::from_value(serde_json::json!({"id": "m",
            "name": "m", "api": "openai-completions", "provider": "p", "baseUrl": "http://h"}))
        .unwrap();
        model.headers.insert("X-Title".into(), "model".into());
        model.headers.insert("x-model-only".into(), "1".into());
        let mut options = StreamOptions::default();
        options.headers.insert("x-title".into(), "options".into());
        options.removed_headers = vec!["X-Model-Only".into(), "Authorization".into()];
        let mut headers = vec![
            ("authorization".to_string(), "Bearer k".to_string()),
            ("accept".to_string(), "text/event-stream".to_string()),
        ];
        extend_custom_headers(&mut headers, &model, &options);
        assert_eq!(
            headers,
            [
                ("accept".to_string(), "text/event-stream".to_string()),
                ("x-title".to_string(), "options".to_string()),
            ]
        );
    }

    #[test]
    fn error_messages_follow_the_sdks() {
        let body = r#"{"error":{"message":"fake bad request","type":"invalid_request_error"}}"#;
        assert_eq!(
            format_http_error(ErrorStyle::OpenAi, 400, body),
            r#"400: {"message":"fake bad request","type":"invalid_request_error"}"#
        );
        assert_eq!(
            format_http_error(ErrorStyle::OpenAi, 413, ""),
            "413 status code (no body)"
        );
        let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            format_http_error(ErrorStyle::Anthropic, 529, body),
            format!("529 {body}")
        );
        assert_eq!(
            format_http_error(
                ErrorStyle::Google,
                400,
                r#"{"error":{"code":400,"message":"bad"}}"#
            ),
            "400: bad"
        );
        assert_eq!(
            join_url("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
    }
}
