//! The streamable HTTP transport (MCP 2025-11-25), as Pi's client speaks it, on our reqwest
//! client and SSE decoder.
//!
//! Written against rmcp's `Transport` trait rather than its `StreamableHttpClient`: rmcp's
//! HTTP client feature brings reqwest 0.13 (a second HTTP and TLS stack beside our 0.12) and
//! its own worker with session-recovery and retry rules that differ from Pi's; this module is
//! the few rules Pi has, with Pi's error texts.
//!
//! Every outgoing message is one POST. A request's answer comes back as a JSON body (one
//! message or a batch) or as an SSE stream, which is read in the background until the
//! response arrives; a stream that ends without it answers the request with Pi's
//! `MCP response stream failed: …` error. The `Mcp-Session-Id` a response carries is sent
//! with every later message, and `MCP-Protocol-Version` once `initialize` has chosen one.
//! After `notifications/initialized` a GET stream carries server-initiated messages (a 405
//! means the server has none). Closing deletes the session.
//!
//! A server that uses OAuth gets its stored access token as `Authorization: Bearer`; a 401 is
//! answered by one refresh and one retry, after which the server needs sign-in
//! ([`HttpError::SignInRequired`]). A server with `auth.provider` gets that provider's stored
//! login instead; a 401 is retried once only when the stored login changed meanwhile.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::oauth::AuthError;
use super::oauth::ServerAuth;
use super::provider_login::ProviderLogin;
use crate::llm::error_chain;
use crate::llm::SseReader;

/// Waits before each resumption of a request's broken SSE stream when the server set no
/// `retry:` (MCP's TypeScript client's defaults: 1 s, growing 1.5 times, two attempts).
const SSE_RESUME_DELAYS: [Duration; 2] = [Duration::from_millis(1000), Duration::from_millis(1500)];
/// Bytes of an error response's body read for its message.
const MAX_ERROR_BODY_BYTES: usize = 8 * 1024;
/// Characters of that body quoted in the message.
const ERROR_MESSAGE_BODY_CHARS: usize = 500;
/// Largest JSON response or SSE event accepted (Pi's limit).
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// How long closing waits for the session's DELETE.
const DELETE_TIMEOUT: Duration = Duration::from_secs(1);
/// The GET stream is reopened after transient failures, at most this often in a row.
const GET_STREAM_MAX_RETRIES: u32 = 5;
const GET_STREAM_INITIAL_DELAY: Duration = Duration::from_secs(1);
const GET_STREAM_MAX_DELAY: Duration = Duration::from_secs(30);

/// Why an HTTP exchange failed, with Pi's texts.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HttpError {
    /// The server answered with an error status.
    #[error("{message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// Pi's text, with the start of the body.
        message: String,
    },
    /// 401 without OAuth support.
    #[error("MCP server requires authentication")]
    AuthRequired,
    /// 401 from an OAuth server whose tokens are missing, expired or rejected after a refresh:
    /// the user has to sign in.
    #[error("MCP server requires sign-in")]
    SignInRequired,
    /// Refreshing the OAuth tokens failed for another reason than a rejected grant.
    #[error("{0}")]
    Auth(String),
    /// 404 for a request carrying a session id: the server forgot the session.
    #[error("MCP session expired")]
    SessionExpired,
    /// The request did not reach the server or the response broke off.
    #[error("fetch failed: {0}")]
    Network(String),
    /// The server answered something that is not MCP.
    #[error("{0}")]
    Protocol(String),
    /// The transport is closed.
    #[error("MCP connection closed")]
    Closed,
}

impl HttpError {
    /// Network failures and overloaded or restarting servers (408, 429, 5xx but 501), which
    /// are worth another attempt.
    pub fn is_transient(&self) -> bool {
        match self {
            HttpError::Status { status, .. } => {
                *status == 408 || *status == 429 || (*status >= 500 && *status != 501)
            }
            HttpError::Network(_) => true,
            _ => false,
        }
    }

    /// The `HttpError` somewhere in an error's source chain.
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a HttpError> {
        let mut current = Some(error);
        while let Some(e) = current {
            if let Some(found) = e.downcast_ref::<HttpError>() {
                return Some(found);
            }
            current = e.source();
        }
        None
    }
}

/// Where a connection's bearer token comes from.
#[derive(Debug, Clone)]
pub enum TokenSource {
    /// MCP OAuth: tokens from `mcp-auth.json`, refreshed by the server's authorization server.
    OAuth(Arc<ServerAuth>),
    /// `auth.provider`: the provider's login from `auth.json`.
    Provider(Arc<ProviderLogin>),
}

impl TokenSource {
    async fn token(&self) -> Option<String> {
        match self {
            TokenSource::OAuth(auth) => auth.token().await,
            TokenSource::Provider(login) => login.token().await,
        }
    }

    /// After a 401 for `sent`: `Ok` when a new token is worth one more attempt.
    async fn on_unauthorized(
        &self,
        challenge: Option<&str>,
        sent: Option<&str>,
    ) -> Result<(), AuthError> {
        match self {
            TokenSource::OAuth(auth) => auth.on_unauthorized(challenge, sent).await,
            TokenSource::Provider(login) if login.changed_since(sent).await => Ok(()),
            TokenSource::Provider(_) => Err(AuthError::NeedsSignIn),
        }
    }
}

/// How far a response stream got: the last event id (to resume after) and the reconnection
/// time the server asked for with `retry:`.
#[derive(Debug, Default)]
struct StreamPosition {
    last_event_id: Option<String>,
    retry: Option<Duration>,
}

/// What every exchange of one connection shares.
struct Shared {
    client: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    auth: Option<TokenSource>,
    session_id: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    incoming: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    closed: CancellationToken,
    get_stream_started: AtomicBool,
}

/// One streamable HTTP connection.
pub struct HttpTransport {
    shared: Arc<Shared>,
    incoming: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
}

impl HttpTransport {
    /// A connection to `url` sending `headers` (already resolved) with every message.
    pub fn new(client: reqwest::Client, url: &str, headers: Vec<(String, String)>) -> Self {
        HttpTransport::with_auth(client, url, headers, None)
    }

    /// Like [`HttpTransport::new`], sending the bearer token of `auth` when given.
    pub fn with_auth(
        client: reqwest::Client,
        url: &str,
        headers: Vec<(String, String)>,
        auth: Option<TokenSource>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        HttpTransport {
            shared: Arc::new(Shared {
                client,
                url: url.to_string(),
                headers,
                auth,
                session_id: Mutex::new(None),
                protocol_version: Mutex::new(None),
                incoming: tx,
                closed: CancellationToken::new(),
                get_stream_started: AtomicBool::new(false),
            }),
            incoming: rx,
        }
    }
}

impl Drop for HttpTransport {
    /// A transport dropped without `close` (a connect that timed out) stops its background
    /// readers too.
    fn drop(&mut self) {
        self.shared.closed.cancel();
    }
}

impl Transport<RoleClient> for HttpTransport {
    type Error = HttpError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), HttpError>> + Send + 'static {
        let shared = self.shared.clone();
        async move { shared.post(item).await }
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<ServerJsonRpcMessage>> + Send {
        let closed = self.shared.closed.clone();
        let incoming = &mut self.incoming;
        async move {
            tokio::select! {
                message = incoming.recv() => message,
                _ = closed.cancelled() => None,
            }
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), HttpError>> + Send {
        let shared = self.shared.clone();
        async move {
            if shared.closed.is_cancelled() {
                return Ok(());
            }
            shared.closed.cancel();
            let session = shared.session().clone();
            if let Some(session) = session {
                let token = shared.bearer().await;
                let request = shared
                    .request(reqwest::Method::DELETE, token.as_deref())
                    .header("mcp-session-id", session)
                    .timeout(DELETE_TIMEOUT);
                let _ = request.send().await;
            }
            Ok(())
        }
    }
}

impl Shared {
    fn session(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.session_id.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bearer token to send (an OAuth token is refreshed when it is about to expire).
    async fn bearer(&self) -> Option<String> {
        match &self.auth {
            Some(auth) => auth.token().await,
            None => None,
        }
    }

    /// A request with the configured headers, the OAuth token, the session and the protocol
    /// version.
    fn request(&self, method: reqwest::Method, bearer: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, &self.url);
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(token) = bearer {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(session) = self.session().clone() {
            request = request.header("mcp-session-id", session);
        }
        let version = self
            .protocol_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(version) = version {
            request = request.header("mcp-protocol-version", version);
        }
        request
    }

    fn capture_session(&self, response: &reqwest::Response) {
        if let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
        {
            *self.session() = Some(id.to_string());
        }
    }

    /// The error for a response with an error status.
    async fn check(&self, response: reqwest::Response) -> Result<reqwest::Response, HttpError> {
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(response);
        }
        let body = read_limited(response, MAX_ERROR_BODY_BYTES)
            .await
            .map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        Err(match status {
            401 => HttpError::AuthRequired,
            404 if self.session().is_some() => HttpError::SessionExpired,
            _ => HttpError::Status {
                status,
                message: describe_failure(status, &body),
            },
        })
    }

    /// Sends one message; a request's answer arrives through `incoming`.
    async fn post(self: Arc<Self>, message: ClientJsonRpcMessage) -> Result<(), HttpError> {
        if self.closed.is_cancelled() {
            return Err(HttpError::Closed);
        }
        let value =
            serde_json::to_value(&message).map_err(|e| HttpError::Protocol(e.to_string()))?;
        let method = value
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let request_id = value.get("id").filter(|_| method.is_some()).cloned();
        let body = value.to_string();
        let mut token = self.bearer().await;
        let mut refreshed = false;
        let response = loop {
            let sent = self
                .request(reqwest::Method::POST, token.as_deref())
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body(body.clone());
            let response = tokio::select! {
                response = sent.send() => response.map_err(|e| HttpError::Network(error_chain(&e)))?,
                _ = self.closed.cancelled() => return Err(HttpError::Closed),
            };
            let Some(auth) = self
                .auth
                .as_ref()
                .filter(|_| response.status().as_u16() == 401)
            else {
                break response;
            };
            if refreshed {
                return Err(HttpError::SignInRequired);
            }
            let challenge = response
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            match auth
                .on_unauthorized(challenge.as_deref(), token.as_deref())
                .await
            {
                Ok(()) => {
                    refreshed = true;
                    token = auth.token().await;
                }
                Err(AuthError::NeedsSignIn) => return Err(HttpError::SignInRequired),
                Err(AuthError::Failed(message)) => return Err(HttpError::Auth(message)),
            }
        };
        let response = self.check(response).await?;
        self.capture_session(&response);
        let Some(request_id) = request_id else {
            // A notification or a response to the server: nothing comes back.
            if method.as_deref() == Some("notifications/initialized") {
                self.clone().start_get_stream();
            }
            return Ok(());
        };
        let status = response.status().as_u16();
        if status == 202 || status == 204 {
            return Err(HttpError::Status {
                status,
                message: format!(
                    "MCP server accepted request {} without a response",
                    method.unwrap_or_default()
                ),
            });
        }
        match content_type(&response).as_deref() {
            Some("application/json") => {
                let (bytes, truncated) = read_limited(response, MAX_MESSAGE_BYTES)
                    .await
                    .map_err(HttpError::Network)?;
                if truncated {
                    return Err(HttpError::Protocol(format!(
                        "MCP JSON response exceeds {MAX_MESSAGE_BYTES} bytes"
                    )));
                }
                let body: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| HttpError::Protocol(format!("Invalid MCP JSON response: {e}")))?;
                let items = match body {
                    Value::Array(items) => items,
                    one => vec![one],
                };
                for item in items {
                    self.deliver(item)?;
                }
                Ok(())
            }
            Some("text/event-stream") => {
                let shared = self.clone();
                tokio::spawn(
                    async move { shared.read_response_stream(response, request_id).await },
                );
                Ok(())
            }
            other => Err(HttpError::Status {
                status,
                message: format!(
                    "Unsupported MCP response content type: {}",
                    other.unwrap_or("missing")
                ),
            }),
        }
    }

    /// Hands one received message to the service; `initialize`'s answer fixes the protocol
    /// version sent from then on.
    fn deliver(&self, value: Value) -> Result<(), HttpError> {
        if let Some(version) = value
            .get("result")
            .filter(|r| r.get("serverInfo").is_some())
            .and_then(|r| r.get("protocolVersion"))
            .and_then(Value::as_str)
        {
            *self
                .protocol_version
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(version.to_string());
        }
        let message: ServerJsonRpcMessage = serde_json::from_value(value)
            .map_err(|e| HttpError::Protocol(format!("Invalid JSON-RPC message: {e}")))?;
        self.incoming.send(message).map_err(|_| HttpError::Closed)
    }

    /// Reads a request's SSE answer until its response; without one, answers the request
    /// with an error so the caller does not wait for its timeout.
    ///
    /// A stream whose events carry ids and that breaks before the response is resumed (MCP's
    /// resumability): a GET with `Last-Event-ID` set to the last id seen, at most
    /// [`SSE_RESUME_DELAYS`] times; the server replays what followed. Each resumption waits
    /// for the reconnection time the server set with `retry:`, else the default delay.
    async fn read_response_stream(&self, response: reqwest::Response, request_id: Value) {
        let mut answered = false;
        let mut position = StreamPosition::default();
        let mut response = response;
        let mut resumes = SSE_RESUME_DELAYS.iter();
        let failure = loop {
            let failure = tokio::select! {
                result = self.consume_sse_from(response, |id| answered |= id == Some(&request_id), &mut position) => result.err(),
                _ = self.closed.cancelled() => return,
            };
            if answered || self.closed.is_cancelled() {
                return;
            }
            let (Some(event_id), Some(default_delay)) =
                (position.last_event_id.clone(), resumes.next())
            else {
                break failure;
            };
            let delay = position.retry.unwrap_or(*default_delay);
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.closed.cancelled() => return,
            }
            match self.resume_stream(&event_id).await {
                Ok(resumed) => response = resumed,
                Err(error) => break Some(error),
            }
        };
        let reason = failure.unwrap_or_else(|| "stream ended without a response".to_string());
        let error = serde_json::json!({
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32603, "message": format!("MCP response stream failed: {reason}")},
        });
        let _ = self.deliver(error);
    }

    /// A GET that resumes a broken SSE stream after the event `event_id`.
    async fn resume_stream(&self, event_id: &str) -> Result<reqwest::Response, String> {
        let token = self.bearer().await;
        let response = self
            .request(reqwest::Method::GET, token.as_deref())
            .header("accept", "text/event-stream")
            .header("last-event-id", event_id)
            .send()
            .await
            .map_err(|e| error_chain(&e))?;
        let response = self.check(response).await.map_err(|e| e.to_string())?;
        if content_type(&response).as_deref() != Some("text/event-stream") {
            return Err("resumed stream is not an SSE stream".to_string());
        }
        Ok(response)
    }

    /// Delivers the messages of an SSE body; `seen` gets each message's id. Events of another
    /// type than `message` and data that is not JSON-RPC are skipped, as Pi does.
    async fn consume_sse(
        &self,
        response: reqwest::Response,
        seen: impl FnMut(Option<&Value>),
    ) -> Result<(), String> {
        self.consume_sse_from(response, seen, &mut StreamPosition::default())
            .await
    }

    /// [`Self::consume_sse`], keeping in `position` where to resume the stream and when.
    async fn consume_sse_from(
        &self,
        response: reqwest::Response,
        mut seen: impl FnMut(Option<&Value>),
        position: &mut StreamPosition,
    ) -> Result<(), String> {
        let mut reader = SseReader::new(response);
        loop {
            let next = reader.next().await;
            // Set by any block, also the data-less one a server sends before closing.
            if let Some(ms) = reader.retry_ms() {
                position.retry = Some(Duration::from_millis(ms));
            }
            let Some(event) = next? else { break };
            if event.id.as_deref().is_some_and(|id| !id.is_empty()) {
                position.last_event_id.clone_from(&event.id);
            }
            if event.data.len() > MAX_MESSAGE_BYTES {
                return Err(format!("MCP SSE event exceeds {MAX_MESSAGE_BYTES} bytes"));
            }
            if event.data.trim().is_empty()
                || event.event.as_deref().is_some_and(|e| e != "message")
            {
                continue;
            }
            let Ok(value) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            let id = value
                .get("id")
                .filter(|_| value.get("result").is_some() || value.get("error").is_some())
                .cloned();
            if self.deliver(value).is_ok() {
                seen(id.as_ref());
            }
        }
        Ok(())
    }

    /// Opens the GET stream for server-initiated messages, once per connection.
    fn start_get_stream(self: Arc<Self>) {
        if self.get_stream_started.swap(true, Ordering::SeqCst) {
            return;
        }
        tokio::spawn(async move {
            let mut attempt = 0u32;
            while !self.closed.is_cancelled() {
                let token = self.bearer().await;
                let opened = self
                    .request(reqwest::Method::GET, token.as_deref())
                    .header("accept", "text/event-stream")
                    .send()
                    .await
                    .map_err(|e| HttpError::Network(error_chain(&e)));
                let outcome = match opened {
                    Ok(response) if response.status().as_u16() == 405 => return,
                    Ok(response) => match self.check(response).await {
                        Ok(response)
                            if content_type(&response).as_deref() == Some("text/event-stream") =>
                        {
                            self.capture_session(&response);
                            let mut received = false;
                            let read = tokio::select! {
                                r = self.consume_sse(response, |_| received = true) => r,
                                _ = self.closed.cancelled() => return,
                            };
                            if received {
                                attempt = 0;
                            }
                            read.map_err(HttpError::Network)
                        }
                        Ok(_) => return,
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                };
                if let Err(error) = outcome {
                    if !error.is_transient() {
                        return;
                    }
                }
                if attempt >= GET_STREAM_MAX_RETRIES {
                    return;
                }
                let delay = GET_STREAM_INITIAL_DELAY
                    .saturating_mul(1 << attempt)
                    .min(GET_STREAM_MAX_DELAY);
                attempt += 1;
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.closed.cancelled() => return,
                }
            }
        });
    }
}

/// The media type of a response, lower case, without parameters.
fn content_type(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
}

/// Up to `max` bytes of a body, and whether it was longer.
async fn read_limited(response: reqwest::Response, max: usize) -> Result<(Vec<u8>, bool), String> {
    let mut body = response.bytes_stream();
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| error_chain(&e))?;
        if out.len() + chunk.len() > max {
            out.extend_from_slice(&chunk[..max - out.len()]);
            return Ok((out, true));
        }
        out.extend_from_slice(&chunk);
    }
    Ok((out, false))
}

/// Pi's text for an error status, with the start of the body.
fn describe_failure(status: u16, body: &str) -> String {
    let text = body.trim();
    let snippet = if text.chars().count() > ERROR_MESSAGE_BODY_CHARS {
        let head: String = text.chars().take(ERROR_MESSAGE_BODY_CHARS - 3).collect();
        format!("{head}...")
    } else {
        text.to_string()
    };
    if snippet.is_empty() {
        format!("MCP HTTP request failed with status {status}")
    } else {
        format!("MCP HTTP request failed with status {status}: {snippet}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_quote_the_start_of_the_body() {
        assert_eq!(
            describe_failure(503, "  busy \n"),
            "MCP HTTP request failed with status 503: busy"
        );
        assert_eq!(
            describe_failure(500, ""),
            "MCP HTTP request failed with status 500"
        );
        let long = "x".repeat(600);
        assert_eq!(
            describe_failure(502, &long),
            format!(
                "MCP HTTP request failed with status 502: {}...",
                "x".repeat(497)
            )
        );
    }

    #[test]
    fn transient_failures_are_pis() {
        let status = |status| HttpError::Status {
            status,
            message: String::new(),
        };
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(status(s).is_transient(), "{s}");
        }
        for s in [400, 403, 404, 501] {
            assert!(!status(s).is_transient(), "{s}");
        }
        assert!(HttpError::Network("refused".into()).is_transient());
        assert!(!HttpError::SessionExpired.is_transient());
    }
}
