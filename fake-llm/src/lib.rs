//! A scripted fake LLM server for tests: real HTTP/1.1 on 127.0.0.1, speaking the streaming
//! wire formats of OpenAI Chat Completions (`POST …/chat/completions`), Anthropic Messages
//! (`POST …/messages`), OpenAI Responses (`POST …/responses`), Google Generative AI and
//! Vertex AI (`POST …/models/{id}:streamGenerateContent`), Mistral (`POST
//! /mistral/…/v1/chat/completions`: Mistral shares OpenAI's path, so the fake serves it under a
//! prefix) and Amazon Bedrock ConverseStream (`POST /model/{id}/converse-stream`, answered in
//! the binary `application/vnd.amazon.eventstream` framing with CRC-32 checksums). A `POST
//! …/token` is an OAuth token endpoint (Google service-account and refresh-token grants).
//!
//! It answers requests from a [`Script`] of turns, in order, the same script format as
//! `fixtures/realpi/fake_llm.py` (which drove real Pi for the recorded fixtures), plus a few
//! fault knobs the Python server lacks: a stream cut after N events, per-event delays, a
//! mid-stream error event. Every request is recorded ([`FakeLlm::requests`]) and, when a log
//! path is set, appended as one JSON line in the Python server's log format, so tests can
//! compare our request bodies with Pi's.
//!
//! The server hand-rolls HTTP/1.1 on tokio: one request per connection (`Connection:
//! close`), SSE bodies sent with chunked transfer encoding so that a deliberately cut stream
//! is a visible transport error to the client, not a clean end of body.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub mod llama;
pub mod oauth;

/// System-prompt marker of Pi's summarization requests; those consume `summaries`.
pub const SUMMARY_MARKER: &str = "context summarization assistant";

/// A scripted tool call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCallSpec {
    /// Tool name.
    pub name: String,
    /// Arguments: an object (serialized) or a raw string sent verbatim.
    #[serde(default)]
    pub arguments: Value,
    /// Call id; default `call_{seq}_{i}` (OpenAI) / `toolu_{seq}_{i}` (Anthropic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// An HTTP error reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpError {
    /// Status code.
    #[serde(default = "default_status")]
    pub status: u16,
    /// JSON body; default `{"error":{"message":"fake error"}}`. A string is sent raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

fn default_status() -> u16 {
    500
}

/// Token counts to report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageSpec {
    /// Prompt/input tokens (default: request bytes / 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Completion/output tokens (default: output chars / 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// Cached prompt tokens (a subset of `prompt_tokens` for OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Reasoning tokens (OpenAI `completion_tokens_details`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// One scripted answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Assistant text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Reasoning text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallSpec>,
    /// OpenAI-style finish reason (`stop`, `tool_calls`, `length`, …); default derived.
    /// Mapped to each API's own vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Usage numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageSpec>,
    /// Reply with this HTTP error instead of a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_error: Option<HttpError>,
    /// Seconds to wait before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<f64>,
    /// Milliseconds to wait before each SSE event after the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_delay_ms: Option<u64>,
    /// Close the connection abruptly after this many SSE events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_after: Option<usize>,
    /// Send an in-stream error event with this message after the content (before the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_error: Option<String>,
    /// Omit the finish reason / stop event (a stream that ends cleanly but incompletely).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub omit_finish: bool,
}

impl Turn {
    /// A text-only turn.
    pub fn text(text: &str) -> Self {
        Turn {
            text: Some(text.to_string()),
            ..Turn::default()
        }
    }
}

/// The turns to answer with.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Script {
    /// Answers to normal requests, in order.
    pub turns: Vec<Turn>,
    /// Answers to summarization requests, in order.
    pub summaries: Vec<Turn>,
    /// Text used once `turns` is exhausted.
    pub default_text: Option<String>,
}

impl<'de> Deserialize<'de> for Script {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A bare list is accepted as `{"turns": list}`, like fake_llm.py.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            List(Vec<Turn>),
            Obj {
                #[serde(default)]
                turns: Vec<Turn>,
                #[serde(default)]
                summaries: Vec<Turn>,
                #[serde(default)]
                default_text: Option<String>,
            },
        }
        Ok(match Raw::deserialize(d)? {
            Raw::List(turns) => Script {
                turns,
                ..Script::default()
            },
            Raw::Obj {
                turns,
                summaries,
                default_text,
            } => Script {
                turns,
                summaries,
                default_text,
            },
        })
    }
}

impl Script {
    /// A script of these turns.
    pub fn turns(turns: Vec<Turn>) -> Self {
        Script {
            turns,
            ..Script::default()
        }
    }
}

/// One received request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// 1-based sequence number.
    pub seq: u64,
    /// Unix time in seconds.
    pub time: f64,
    /// HTTP method.
    pub method: String,
    /// Request path including the query.
    pub path: String,
    /// `openai`, `anthropic`, `openai-responses`, `google`, `mistral`, `bedrock` or
    /// `oauth-token`.
    pub api: String,
    /// `turn` or `summary`.
    pub kind: String,
    /// Index into the matching script list.
    pub index: usize,
    /// Request headers (lower-cased names; credentials redacted).
    pub headers: Map<String, Value>,
    /// Parsed JSON body.
    pub body: Value,
    /// The turn answered with.
    pub reply: Turn,
}

#[derive(Default)]
struct State {
    script: Script,
    turn_i: usize,
    summary_i: usize,
    seq: u64,
    log: Option<PathBuf>,
    requests: Vec<RecordedRequest>,
    /// Set when the server also plays a llama.cpp router ([`FakeLlm::start_router`]).
    router: Option<llama::RouterState>,
}

/// A running fake server; stops when dropped.
pub struct FakeLlm {
    port: u16,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeLlm {
    /// Start on an ephemeral loopback port.
    pub async fn start(script: Script) -> std::io::Result<FakeLlm> {
        Self::start_with(script, 0, None).await
    }

    /// Start on `port` (0 = ephemeral), logging requests to `log` if given.
    pub async fn start_with(
        script: Script,
        port: u16,
        log: Option<PathBuf>,
    ) -> std::io::Result<FakeLlm> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(Mutex::new(State {
            script,
            log,
            ..State::default()
        }));
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    // A client that hangs up mid-reply is normal (abort tests); ignore.
                    let _ = handle(sock, st).await;
                });
            }
        });
        Ok(FakeLlm { port, state, task })
    }

    /// Start as a llama.cpp router with `models` (see [`llama`]): chat for a loaded model
    /// is answered from `script`.
    pub async fn start_router(
        script: Script,
        models: Vec<llama::RouterModelSpec>,
        autoload: bool,
    ) -> std::io::Result<FakeLlm> {
        let fake = Self::start(script).await?;
        lock(&fake.state).router = Some(llama::RouterState {
            models,
            autoload,
            ..Default::default()
        });
        Ok(fake)
    }

    /// The router's management requests so far (empty when not a router).
    pub fn router_calls(&self) -> Vec<llama::RouterCall> {
        lock(&self.state)
            .router
            .as_ref()
            .map(|r| r.calls.clone())
            .unwrap_or_default()
    }

    /// The router's models with their current states.
    pub fn router_models(&self) -> Vec<llama::RouterModelSpec> {
        lock(&self.state)
            .router
            .as_ref()
            .map(|r| r.models.clone())
            .unwrap_or_default()
    }

    /// Makes the router hang up on every connection (`true`) or answer again.
    pub fn set_router_down(&self, down: bool) {
        if let Some(r) = lock(&self.state).router.as_mut() {
            r.down = down;
        }
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT` (Anthropic-style base URL).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT/v1` (OpenAI-style base URL).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// All requests so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }

    /// Replace the script and reset the turn counters.
    pub fn set_script(&self, script: Script) {
        let mut st = lock(&self.state);
        st.script = script;
        st.turn_i = 0;
        st.summary_i = 0;
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    // A panic while holding the lock cannot leave State inconsistent in a way that matters
    // to a test server; keep serving.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

pub(crate) async fn read_request(sock: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p;
        }
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
        if buf.len() > 1 << 20 {
            return Ok(None);
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("/").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        })
        .collect();
    let mut body = buf[head_end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        // Read until the terminating chunk, then decode.
        while find(&body, b"0\r\n\r\n").is_none() {
            let n = sock.read(&mut tmp).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&tmp[..n]);
        }
        body = dechunk(&body);
    } else {
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while body.len() < len {
            let n = sock.read(&mut tmp).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&tmp[..n]);
        }
        body.truncate(len);
    }
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(p) = find(data, b"\r\n") {
        let size = std::str::from_utf8(&data[..p])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 || data.len() < p + 2 + size {
            break;
        }
        out.extend_from_slice(&data[p + 2..p + 2 + size]);
        data = &data[(p + 4 + size).min(data.len())..];
    }
    out
}

async fn send_json(sock: &mut TcpStream, status: u16, body: &Value) -> std::io::Result<()> {
    send_json_with(sock, status, body, "").await
}

/// `send_json` with extra header lines (each ending in CRLF).
async fn send_json_with(
    sock: &mut TcpStream,
    status: u16,
    body: &Value,
    extra_headers: &str,
) -> std::io::Result<()> {
    let data = match body {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra_headers}Connection: close\r\n\r\n",
        reason(status),
        data.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(data.as_bytes()).await?;
    sock.flush().await
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn system_text(api: &str, body: &Value) -> String {
    let mut out = Vec::new();
    let push_content = |out: &mut Vec<String>, c: &Value| match c {
        Value::String(s) => out.push(s.clone()),
        other => out.push(other.to_string()),
    };
    match api {
        "pi-messages" => {
            if let Some(t) = body["context"].get("systemPrompt").and_then(Value::as_str) {
                out.push(t.to_string());
            }
            for m in body["context"]["messages"].as_array().into_iter().flatten() {
                if m.get("role").and_then(Value::as_str) == Some("system") {
                    out.push(m.to_string());
                }
            }
        }
        "anthropic" => match body.get("system") {
            Some(Value::String(s)) => out.push(s.clone()),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    if let Some(t) = b.get("text").and_then(Value::as_str) {
                        out.push(t.to_string());
                    }
                }
            }
            _ => {}
        },
        "openai-responses" => {
            if let Some(i) = body.get("instructions") {
                push_content(&mut out, i);
            }
            for m in body
                .get("input")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if matches!(
                    m.get("role").and_then(Value::as_str),
                    Some("system" | "developer")
                ) {
                    push_content(&mut out, m.get("content").unwrap_or(&Value::Null));
                }
            }
        }
        "bedrock" => {
            for b in body
                .get("system")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    out.push(t.to_string());
                }
            }
        }
        "google" => {
            if let Some(parts) = body
                .pointer("/systemInstruction/parts")
                .and_then(Value::as_array)
            {
                for p in parts {
                    if let Some(t) = p.get("text").and_then(Value::as_str) {
                        out.push(t.to_string());
                    }
                }
            }
        }
        _ => {
            for m in body
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if matches!(
                    m.get("role").and_then(Value::as_str),
                    Some("system" | "developer")
                ) {
                    push_content(&mut out, m.get("content").unwrap_or(&Value::Null));
                }
            }
        }
    }
    out.join("\n")
}

async fn handle(mut sock: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let Some(req) = read_request(&mut sock).await? else {
        return Ok(());
    };
    let path = req.path.split('?').next().unwrap_or("").to_string();
    let routed = lock(&state)
        .router
        .as_mut()
        .and_then(|r| llama::handle(r, &req, &path));
    match routed {
        Some(llama::Reply::Drop) => return Ok(()),
        Some(llama::Reply::Json(status, body)) => return send_json(&mut sock, status, &body).await,
        None => {}
    }

    if req.method == "POST" && path == "/_control/reset" {
        let cfg: Value = serde_json::from_slice(&req.body).unwrap_or(json!({}));
        let script: Script =
            serde_json::from_value(cfg.get("script").cloned().unwrap_or(json!({"turns": []})))
                .unwrap_or_default();
        {
            let mut st = lock(&state);
            st.script = script;
            st.turn_i = 0;
            st.summary_i = 0;
            st.seq = 0;
            if let Some(l) = cfg.get("log").and_then(Value::as_str) {
                st.log = Some(PathBuf::from(l));
            }
        }
        return send_json(&mut sock, 200, &json!({"ok": true})).await;
    }
    if req.method == "GET" {
        if path.starts_with("/_control/state") {
            let v = {
                let st = lock(&state);
                json!({"turn_i": st.turn_i, "summary_i": st.summary_i, "seq": st.seq,
                    "n_turns": st.script.turns.len(), "n_summaries": st.script.summaries.len()})
            };
            return send_json(&mut sock, 200, &v).await;
        }
        if path.trim_end_matches('/').ends_with("/models") {
            return send_json(
                &mut sock,
                200,
                &json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}),
            )
            .await;
        }
        return send_json(&mut sock, 404, &json!({"error": "not found"})).await;
    }

    if req.method == "POST" && path.ends_with("/token") {
        return oauth_token(&mut sock, &state, &req).await;
    }
    // Mistral's native API shares OpenAI's path; the fake serves it under a `/mistral` prefix
    // (point the provider's baseUrl at `{base}/mistral`).
    let api = if path.starts_with("/mistral/") && path.ends_with("/v1/chat/completions") {
        "mistral"
    } else if path.starts_with("/model/") && path.ends_with("/converse-stream") {
        "bedrock"
    } else if path.ends_with("/chat/completions") {
        "openai"
    } else if path.ends_with("/messages") {
        "anthropic"
    } else if path.ends_with("/responses") {
        "openai-responses"
    } else if path.contains(":streamGenerateContent") || path.contains(":generateContent") {
        "google"
    } else {
        return send_json(
            &mut sock,
            404,
            &json!({"error": {"message": format!("unknown path {}", req.path)}}),
        )
        .await;
    };
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            return send_json(
                &mut sock,
                400,
                &json!({"error": {"message": format!("bad json: {e}")}}),
            )
            .await
        }
    };
    // Pi's own protocol shares Anthropic's path; its body carries Pi's context.
    let api = if api == "anthropic" && body.get("context").is_some() {
        "pi-messages"
    } else {
        api
    };
    let kind = if system_text(api, &body).contains(SUMMARY_MARKER) {
        "summary"
    } else {
        "turn"
    };
    let (seq, idx, turn, log) = {
        let mut st = lock(&state);
        st.seq += 1;
        let seq = st.seq;
        let (idx, turn) = if kind == "summary" {
            let i = st.summary_i;
            st.summary_i += 1;
            (
                i,
                st.script
                    .summaries
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| Turn::text(DEFAULT_SUMMARY)),
            )
        } else {
            let i = st.turn_i;
            st.turn_i += 1;
            let default = st
                .script
                .default_text
                .clone()
                .unwrap_or_else(|| format!("(fake default reply #{i})"));
            (
                i,
                st.script
                    .turns
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| Turn::text(&default)),
            )
        };
        (seq, idx, turn, st.log.clone())
    };
    let headers: Map<String, Value> = req
        .headers
        .iter()
        .map(|(k, v)| {
            // Access tokens the fake issued itself are not secrets: keep them, so tests
            // can see the token exchange reached the request.
            // A SigV4 signature is a one-request MAC, not a credential: keep it, so tests
            // can check what was signed against what arrived.
            let issued =
                v.starts_with("Bearer fake-access-token-") || v.starts_with("AWS4-HMAC-SHA256 ");
            let v = if (k == "authorization" && !issued)
                || k == "x-api-key"
                || k == "x-goog-api-key"
                || k == "api-key"
            {
                "<redacted>".to_string()
            } else {
                v.clone()
            };
            (k.clone(), Value::String(v))
        })
        .collect();
    let rec = RecordedRequest {
        seq,
        time: now(),
        method: req.method.clone(),
        path: req.path.clone(),
        api: api.to_string(),
        kind: kind.to_string(),
        index: idx,
        headers,
        body: body.clone(),
        reply: turn.clone(),
    };
    if let Some(log) = log {
        if let Ok(line) = serde_json::to_string(&rec) {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
            {
                let _ = writeln!(f, "{line}");
            }
        }
    }
    lock(&state).requests.push(rec);

    if let Some(d) = turn.delay.filter(|d| *d > 0.0) {
        tokio::time::sleep(Duration::from_secs_f64(d)).await;
    }
    if let Some(he) = &turn.http_error {
        let body = he
            .body
            .clone()
            .unwrap_or_else(|| json!({"error": {"message": "fake error"}}));
        if api == "bedrock" {
            // AWS names the exception in a header; the SDK turns it into the error's name.
            let kind = match he.status {
                400 => "ValidationException",
                403 => "AccessDeniedException",
                429 => "ThrottlingException",
                503 => "ServiceUnavailableException",
                _ => "InternalServerException",
            };
            let extra = format!(
                "x-amzn-errortype: {kind}:http://internal.amazon.com/coral/com.amazon.bedrock/\r\n"
            );
            return send_json_with(&mut sock, he.status, &body, &extra).await;
        }
        return send_json(&mut sock, he.status, &body).await;
    }
    let usage = resolve_usage(&turn, req.body.len());
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake-model")
        .to_string();
    if api == "bedrock" {
        let frames = bedrock_events(&turn, &usage, seq);
        return stream_body(
            &mut sock,
            "application/vnd.amazon.eventstream",
            &frames,
            &turn,
        )
        .await;
    }
    let events = match api {
        "openai" => openai_events(&turn, &usage, seq, &model),
        "mistral" => mistral_events(&turn, &usage, seq, &model),
        "anthropic" => anthropic_events(&turn, &usage, seq, &model),
        "pi-messages" => pi_messages_events(&turn, &usage, seq),
        "openai-responses" => responses_events(&turn, &usage, seq, &model),
        _ => google_events(&turn, &usage, seq, &model),
    };
    stream_sse(&mut sock, &events, &turn).await
}

/// An OAuth 2.0 token endpoint (Google's `token_uri`): records the form and answers with
/// `fake-access-token-{seq}`. It consumes no script turn.
async fn oauth_token(
    sock: &mut TcpStream,
    state: &Arc<Mutex<State>>,
    req: &Request,
) -> std::io::Result<()> {
    let text = String::from_utf8_lossy(&req.body);
    let form: Map<String, Value> = text
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (form_decode(k), Value::String(form_decode(v)))
        })
        .collect();
    let (seq, log) = {
        let mut st = lock(state);
        st.seq += 1;
        (st.seq, st.log.clone())
    };
    let mut redacted = form.clone();
    for secret in ["client_secret", "refresh_token"] {
        if redacted.contains_key(secret) {
            redacted.insert(secret.into(), json!("<redacted>"));
        }
    }
    let rec = RecordedRequest {
        seq,
        time: now(),
        method: req.method.clone(),
        path: req.path.clone(),
        api: "oauth-token".into(),
        kind: "token".into(),
        index: 0,
        headers: Map::new(),
        body: json!({ "form": redacted }),
        reply: Turn::default(),
    };
    append_log(log.as_deref(), &rec);
    lock(state).requests.push(rec);
    send_json(
        sock,
        200,
        &json!({"access_token": format!("fake-access-token-{seq}"), "expires_in": 3600,
            "token_type": "Bearer"}),
    )
    .await
}

pub(crate) fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn append_log(log: Option<&std::path::Path>, rec: &RecordedRequest) {
    let Some(log) = log else { return };
    if let Ok(line) = serde_json::to_string(rec) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

const DEFAULT_SUMMARY: &str = "## Goal\nFake goal produced by pi-fake-llm.\n\n## Constraints & Preferences\n- (none)\n\n\
## Progress\n### Done\n- [x] Fake progress item\n\n### In Progress\n- [ ] (none)\n\n### Blocked\n- (none)\n\n\
## Key Decisions\n- **Fake**: decision\n\n## Next Steps\n1. Continue\n\n## Critical Context\n- (none)";

struct Usage {
    prompt: u64,
    completion: u64,
    cached: u64,
    reasoning: u64,
}

fn resolve_usage(turn: &Turn, request_len: usize) -> Usage {
    let u = turn.usage.clone().unwrap_or_default();
    let out_len = turn.text.as_deref().map_or(0, str::len)
        + turn.thinking.as_deref().map_or(0, str::len)
        + turn
            .tool_calls
            .iter()
            .map(|t| args_string(&t.arguments).len())
            .sum::<usize>();
    Usage {
        prompt: u.prompt_tokens.unwrap_or((request_len / 4).max(1) as u64),
        completion: u.completion_tokens.unwrap_or((out_len / 4).max(1) as u64),
        cached: u.cached_tokens.unwrap_or(0),
        reasoning: u.reasoning_tokens.unwrap_or(0),
    }
}

fn args_string(args: &Value) -> String {
    match args {
        Value::String(s) => s.clone(),
        Value::Null => "{}".to_string(),
        other => other.to_string(),
    }
}

/// Split like fake_llm.py: about three pieces, on char boundaries.
fn pieces(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= 3 {
        return vec![s.to_string()];
    }
    let step = (chars.len() / 3).max(1);
    chars.chunks(step).map(|c| c.iter().collect()).collect()
}

fn halves(s: &str) -> [String; 2] {
    let chars: Vec<char> = s.chars().collect();
    let half = chars.len() / 2;
    [
        chars[..half].iter().collect(),
        chars[half..].iter().collect(),
    ]
}

fn sse(event: Option<&str>, data: &Value) -> String {
    let mut s = String::new();
    if let Some(e) = event {
        s.push_str(&format!("event: {e}\n"));
    }
    let data = match data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    s.push_str(&format!("data: {data}\n\n"));
    s
}

fn openai_events(turn: &Turn, u: &Usage, seq: u64, model: &str) -> Vec<String> {
    let id = format!("chatcmpl-fake-{seq}");
    let created = now() as u64;
    let chunk = |delta: Value, finish: Option<&str>| {
        sse(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if let Some(t) = &turn.thinking {
        out.extend(
            pieces(t)
                .into_iter()
                .map(|p| chunk(json!({"reasoning_content": p}), None)),
        );
    }
    if let Some(t) = &turn.text {
        out.extend(
            pieces(t)
                .into_iter()
                .map(|p| chunk(json!({"content": p}), None)),
        );
    }
    for (i, tc) in turn.tool_calls.iter().enumerate() {
        let tid = tc.id.clone().unwrap_or_else(|| format!("call_{seq}_{i}"));
        let [a, b] = halves(&args_string(&tc.arguments));
        out.push(chunk(
            json!({"tool_calls": [{"index": i, "id": tid, "type": "function",
            "function": {"name": tc.name, "arguments": a}}]}),
            None,
        ));
        out.push(chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": b}}]}),
            None,
        ));
    }
    if let Some(msg) = &turn.stream_error {
        out.push(sse(None, &json!({"error": {"message": msg}})));
    }
    if !turn.omit_finish {
        let finish = turn.finish_reason.clone().unwrap_or_else(|| {
            if turn.tool_calls.is_empty() {
                "stop".into()
            } else {
                "tool_calls".into()
            }
        });
        out.push(chunk(json!({}), Some(&finish)));
        let mut usage = json!({"prompt_tokens": u.prompt, "completion_tokens": u.completion,
            "total_tokens": u.prompt + u.completion});
        if u.cached > 0 {
            usage["prompt_tokens_details"] = json!({"cached_tokens": u.cached});
        }
        if u.reasoning > 0 {
            usage["completion_tokens_details"] = json!({"reasoning_tokens": u.reasoning});
        }
        out.push(sse(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [], "usage": usage}),
        ));
        out.push(sse(None, &json!("[DONE]")));
    }
    out
}

/// Mistral chat chunks: thinking as typed content chunks, whole tool calls with 9-character
/// ids, usage on the finishing chunk, then `[DONE]`.
fn mistral_events(turn: &Turn, u: &Usage, seq: u64, model: &str) -> Vec<String> {
    let id = format!("mistral-fake-{seq}");
    let created = now() as u64;
    let chunk = |delta: Value, finish: Option<&str>, usage: Option<Value>| {
        let mut v = json!({"id": id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if let Some(u) = usage {
            v["usage"] = u;
        }
        sse(None, &v)
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        None,
        None,
    )];
    if let Some(t) = &turn.thinking {
        out.extend(pieces(t).into_iter().map(|p| {
            chunk(
                json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": p}]}]}),
                None,
                None,
            )
        }));
    }
    if let Some(t) = &turn.text {
        out.extend(
            pieces(t)
                .into_iter()
                .map(|p| chunk(json!({"content": p}), None, None)),
        );
    }
    for (i, tc) in turn.tool_calls.iter().enumerate() {
        let tid = tc
            .id
            .clone()
            .unwrap_or_else(|| format!("f{:04}{:04}", seq % 10_000, i % 10_000));
        out.push(chunk(
            json!({"tool_calls": [{"id": tid, "type": "function", "index": i,
                "function": {"name": tc.name, "arguments": args_string(&tc.arguments)}}]}),
            None,
            None,
        ));
    }
    if let Some(msg) = &turn.stream_error {
        out.push(sse(
            None,
            &json!({"object": "error", "message": msg, "type": "internal_error"}),
        ));
    }
    if !turn.omit_finish {
        let finish = turn.finish_reason.clone().unwrap_or_else(|| {
            if turn.tool_calls.is_empty() {
                "stop".into()
            } else {
                "tool_calls".into()
            }
        });
        let mut usage = json!({"prompt_tokens": u.prompt, "completion_tokens": u.completion,
            "total_tokens": u.prompt + u.completion});
        if u.cached > 0 {
            usage["prompt_tokens_details"] = json!({"cached_tokens": u.cached});
        }
        out.push(chunk(json!({"content": ""}), Some(&finish), Some(usage)));
        out.push(sse(None, &json!("[DONE]")));
    }
    out
}

/// CRC-32 (IEEE), for event-stream frames.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One `application/vnd.amazon.eventstream` message: prelude (total length, headers
/// length, CRC), string headers, payload, message CRC.
pub fn event_stream_frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for (k, v) in headers {
        h.push(k.len() as u8);
        h.extend_from_slice(k.as_bytes());
        h.push(7); // string
        h.extend_from_slice(&(v.len() as u16).to_be_bytes());
        h.extend_from_slice(v.as_bytes());
    }
    let total = 12 + h.len() + payload.len() + 4;
    let mut f = Vec::with_capacity(total);
    f.extend_from_slice(&(total as u32).to_be_bytes());
    f.extend_from_slice(&(h.len() as u32).to_be_bytes());
    let c = crc32(&f);
    f.extend_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(payload);
    let c = crc32(&f);
    f.extend_from_slice(&c.to_be_bytes());
    f
}

/// Bedrock ConverseStream events as binary frames: messageStart, per block
/// contentBlockStart (tool use) / contentBlockDelta / contentBlockStop, messageStop,
/// metadata. Payloads carry AWS's `p` padding field.
fn bedrock_events(turn: &Turn, u: &Usage, seq: u64) -> Vec<Vec<u8>> {
    let event = |kind: &str, mut payload: Value| {
        payload["p"] = json!("abcdefghijklmnopqrstuvwxyzABCDEF");
        event_stream_frame(
            &[
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.to_string().as_bytes(),
        )
    };
    let mut out = vec![event("messageStart", json!({"role": "assistant"}))];
    let mut index = 0;
    if let Some(t) = &turn.thinking {
        for p in pieces(t) {
            out.push(event(
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"reasoningContent": {"text": p}}}),
            ));
        }
        out.push(event(
            "contentBlockDelta",
            json!({"contentBlockIndex": index,
                "delta": {"reasoningContent": {"signature": format!("fake-signature-{seq}")}}}),
        ));
        out.push(event(
            "contentBlockStop",
            json!({"contentBlockIndex": index}),
        ));
        index += 1;
    }
    if let Some(t) = &turn.text {
        for p in pieces(t) {
            out.push(event(
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"text": p}}),
            ));
        }
        out.push(event(
            "contentBlockStop",
            json!({"contentBlockIndex": index}),
        ));
        index += 1;
    }
    for (i, tc) in turn.tool_calls.iter().enumerate() {
        let id = tc
            .id
            .clone()
            .unwrap_or_else(|| format!("tooluse_fake_{seq}_{i}"));
        out.push(event(
            "contentBlockStart",
            json!({"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": id, "name": tc.name}}}),
        ));
        for half in halves(&args_string(&tc.arguments)) {
            out.push(event(
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": half}}}),
            ));
        }
        out.push(event(
            "contentBlockStop",
            json!({"contentBlockIndex": index}),
        ));
        index += 1;
    }
    if let Some(msg) = &turn.stream_error {
        out.push(event_stream_frame(
            &[
                (":exception-type", "modelStreamErrorException"),
                (":content-type", "application/json"),
                (":message-type", "exception"),
            ],
            json!({ "message": msg }).to_string().as_bytes(),
        ));
    }
    if !turn.omit_finish {
        let stop = match turn.finish_reason.as_deref() {
            Some("length") => "max_tokens".to_string(),
            Some("stop") => "end_turn".to_string(),
            Some("tool_calls") => "tool_use".to_string(),
            Some(other) => other.to_string(),
            None if turn.tool_calls.is_empty() => "end_turn".to_string(),
            None => "tool_use".to_string(),
        };
        out.push(event("messageStop", json!({ "stopReason": stop })));
        let mut usage = json!({"inputTokens": u.prompt.saturating_sub(u.cached),
            "outputTokens": u.completion, "totalTokens": u.prompt + u.completion});
        if u.cached > 0 {
            usage["cacheReadInputTokens"] = json!(u.cached);
        }
        out.push(event(
            "metadata",
            json!({"usage": usage, "metrics": {"latencyMs": 1}}),
        ));
    }
    out
}

fn anthropic_events(turn: &Turn, u: &Usage, seq: u64, model: &str) -> Vec<String> {
    let mut out = vec![sse(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": format!("msg_fake_{seq}"), "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": u.prompt, "output_tokens": 1, "cache_read_input_tokens": u.cached,
                "cache_creation_input_tokens": 0}}}),
    )];
    let mut idx = 0;
    let delta = |idx: usize, d: Value| {
        sse(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": idx, "delta": d}),
        )
    };
    let start = |idx: usize, b: Value| {
        sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": idx, "content_block": b}),
        )
    };
    let stop = |idx: usize| {
        sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": idx}),
        )
    };
    if let Some(t) = &turn.thinking {
        out.push(start(
            idx,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ));
        out.extend(
            pieces(t)
                .into_iter()
                .map(|p| delta(idx, json!({"type": "thinking_delta", "thinking": p}))),
        );
        out.push(delta(
            idx,
            json!({"type": "signature_delta", "signature": "fakesig"}),
        ));
        out.push(stop(idx));
        idx += 1;
    }
    if let Some(t) = &turn.text {
        out.push(start(idx, json!({"type": "text", "text": ""})));
        out.extend(
            pieces(t)
                .into_iter()
                .map(|p| delta(idx, json!({"type": "text_delta", "text": p}))),
        );
        out.push(stop(idx));
        idx += 1;
    }
    for (i, tc) in turn.tool_calls.iter().enumerate() {
        let tid = tc.id.clone().unwrap_or_else(|| format!("toolu_{seq}_{i}"));
        out.push(start(
            idx,
            json!({"type": "tool_use", "id": tid, "name": tc.name, "input": {}}),
        ));
        for p in halves(&args_string(&tc.arguments)) {
            out.push(delta(
                idx,
                json!({"type": "input_json_delta", "partial_json": p}),
            ));
        }
        out.push(stop(idx));
        idx += 1;
    }
    if let Some(msg) = &turn.stream_error {
        out.push(sse(
            Some("error"),
            &json!({"type": "error", "error": {"type": "api_error", "message": msg}}),
        ));
    }
    if !turn.omit_finish {
        let stop_reason = match turn.finish_reason.as_deref() {
            Some("stop") => "end_turn".to_string(),
            Some("tool_calls") => "tool_use".to_string(),
            Some("length") => "max_tokens".to_string(),
            Some(other) => other.to_string(),
            None if turn.tool_calls.is_empty() => "end_turn".to_string(),
            None => "tool_use".to_string(),
        };
        out.push(sse(
            Some("message_delta"),
            &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": u.completion}}),
        ));
        out.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
    }
    out
}

/// Pi's `pi-messages` stream (the Radius gateway's): Pi's assistant-message events as
/// `data:` lines, ending with `done` (or `error` for a scripted stream error).
fn pi_messages_events(turn: &Turn, u: &Usage, seq: u64) -> Vec<String> {
    let ev = |v: Value| sse(None, &v);
    let mut out = vec![ev(json!({"type": "start"}))];
    let mut idx = 0;
    if let Some(t) = &turn.thinking {
        out.push(ev(json!({"type": "thinking_start", "contentIndex": idx})));
        for p in pieces(t) {
            out.push(ev(
                json!({"type": "thinking_delta", "contentIndex": idx, "delta": p}),
            ));
        }
        out.push(ev(
            json!({"type": "thinking_end", "contentIndex": idx, "content": t,
            "contentSignature": "fakesig"}),
        ));
        idx += 1;
    }
    if let Some(t) = &turn.text {
        out.push(ev(json!({"type": "text_start", "contentIndex": idx})));
        for p in pieces(t) {
            out.push(ev(
                json!({"type": "text_delta", "contentIndex": idx, "delta": p}),
            ));
        }
        out.push(ev(
            json!({"type": "text_end", "contentIndex": idx, "content": t}),
        ));
        idx += 1;
    }
    for (i, tc) in turn.tool_calls.iter().enumerate() {
        let id = tc.id.clone().unwrap_or_else(|| format!("call_{seq}_{i}"));
        out.push(ev(
            json!({"type": "toolcall_start", "contentIndex": idx, "id": id,
            "toolName": tc.name}),
        ));
        let args = args_string(&tc.arguments);
        for p in halves(&args) {
            out.push(ev(
                json!({"type": "toolcall_delta", "contentIndex": idx, "delta": p}),
            ));
        }
        let arguments: Value = serde_json::from_str(&args).unwrap_or(json!({}));
        out.push(ev(json!({"type": "toolcall_end", "contentIndex": idx,
            "toolCall": {"type": "toolCall", "id": id, "name": tc.name, "arguments": arguments}})));
        idx += 1;
    }
    let usage = json!({"input": u.prompt, "output": u.completion, "cacheRead": u.cached,
        "cacheWrite": 0, "totalTokens": u.prompt + u.completion,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}});
    if let Some(msg) = &turn.stream_error {
        out.push(ev(
            json!({"type": "error", "reason": "error", "errorMessage": msg,
            "usage": usage}),
        ));
        return out;
    }
    if !turn.omit_finish {
        let reason = match turn.finish_reason.as_deref() {
            Some("length") => "length",
            Some("tool_calls") => "toolUse",
            Some(_) => "stop",
            None if turn.tool_calls.is_empty() => "stop",
            None => "toolUse",
        };
        out.push(ev(json!({"type": "done", "reason": reason, "usage": usage,
            "responseId": format!("pimsg_fake_{seq}")})));
    }
    out
}

fn responses_events(turn: &Turn, u: &Usage, seq: u64, model: &str) -> Vec<String> {
    let rid = format!("resp_fake_{seq}");
    let ev = |ty: &str, mut v: Value| {
        v["type"] = json!(ty);
        sse(Some(ty), &v)
    };
    let mut out = vec![ev(
        "response.created",
        json!({"response": {"id": rid, "object": "response",
        "model": model, "status": "in_progress", "output": []}}),
    )];
    let mut oi = 0;
    if let Some(t) = &turn.thinking {
        let item_id = format!("rs_fake_{seq}");
        out.push(ev(
            "response.output_item.added",
            json!({"output_index": oi,
            "item": {"type": "reasoning", "id": item_id, "summary": []}}),
        ));
        out.push(ev(
            "response.reasoning_summary_part.added",
            json!({"item_id": item_id, "output_index": oi,
            "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        ));
        for p in pieces(t) {
            out.push(ev(
                "response.reasoning_summary_text.delta",
                json!({"item_id": item_id, "output_index": oi,
                "summary_index": 0, "delta": p}),
            ));
        }
        out.push(ev(
            "response.reasoning_summary_part.done",
            json!({"item_id": item_id, "output_index": oi,
            "summary_index": 0, "part": {"type": "summary_text", "text": t}}),
        ));
        out.push(ev("response.output_item.done", json!({"output_index": oi, "item": {"type": "reasoning",
            "id": item_id, "summary": [{"type": "summary_text", "text": t}], "encrypted_content": "fakeenc"}})));
        oi += 1;
    }
    if let Some(t) = &turn.text {
        let item_id = format!("msg_fake_{seq}");
        out.push(ev(
            "response.output_item.added",
            json!({"output_index": oi, "item": {"type": "message",
            "id": item_id, "role": "assistant", "status": "in_progress", "content": []}}),
        ));
        out.push(ev(
            "response.content_part.added",
            json!({"item_id": item_id, "output_index": oi,
            "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        ));
        for p in pieces(t) {
            out.push(ev(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": oi,
                "content_index": 0, "delta": p}),
            ));
        }
        out.push(ev(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": oi,
            "content_index": 0, "text": t}),
        ));
        out.push(ev(
            "response.output_item.done",
            json!({"output_index": oi, "item": {"type": "message",
            "id": item_id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]}}),
        ));
        oi += 1;
    }
    for (i, tc) in turn.tool_calls.iter().enumerate() {
        let call_id = tc.id.clone().unwrap_or_else(|| format!("call_{seq}_{i}"));
        let item_id = format!("fc_fake_{seq}_{i}");
        let args = args_string(&tc.arguments);
        out.push(ev("response.output_item.added", json!({"output_index": oi, "item": {"type": "function_call",
            "id": item_id, "call_id": call_id, "name": tc.name, "arguments": "", "status": "in_progress"}})));
        for p in halves(&args) {
            out.push(ev(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id,
                "output_index": oi, "delta": p}),
            ));
        }
        out.push(ev(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": oi,
            "arguments": args}),
        ));
        out.push(ev("response.output_item.done", json!({"output_index": oi, "item": {"type": "function_call",
            "id": item_id, "call_id": call_id, "name": tc.name, "arguments": args, "status": "completed"}})));
        oi += 1;
    }
    if let Some(msg) = &turn.stream_error {
        out.push(ev("error", json!({"code": "server_error", "message": msg})));
    }
    if !turn.omit_finish {
        let status = match turn.finish_reason.as_deref() {
            Some("length") => "incomplete",
            Some("error") | Some("failed") => "failed",
            _ => "completed",
        };
        out.push(ev(
            "response.completed",
            json!({"response": {"id": rid, "object": "response", "model": model,
            "status": status, "usage": {"input_tokens": u.prompt, "output_tokens": u.completion,
            "total_tokens": u.prompt + u.completion,
            "input_tokens_details": {"cached_tokens": u.cached},
            "output_tokens_details": {"reasoning_tokens": u.reasoning}}}}),
        ));
    }
    out
}

fn google_events(turn: &Turn, u: &Usage, seq: u64, model: &str) -> Vec<String> {
    let rid = format!("google_fake_{seq}");
    let chunk = |parts: Value, finish: Option<&str>, usage: bool| {
        let mut cand = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(f) = finish {
            cand["finishReason"] = json!(f);
        }
        let mut v = json!({"candidates": [cand], "responseId": rid, "modelVersion": model});
        if usage {
            v["usageMetadata"] = json!({"promptTokenCount": u.prompt, "candidatesTokenCount":
                u.completion.saturating_sub(u.reasoning), "thoughtsTokenCount": u.reasoning,
                "cachedContentTokenCount": u.cached, "totalTokenCount": u.prompt + u.completion});
        }
        sse(None, &v)
    };
    let mut out = Vec::new();
    if let Some(t) = &turn.thinking {
        out.extend(
            pieces(t)
                .into_iter()
                .map(|p| chunk(json!([{"text": p, "thought": true}]), None, false)),
        );
    }
    if let Some(t) = &turn.text {
        out.extend(
            pieces(t)
                .into_iter()
                .map(|p| chunk(json!([{"text": p}]), None, false)),
        );
    }
    for tc in &turn.tool_calls {
        let args = match &tc.arguments {
            Value::String(s) => serde_json::from_str(s).unwrap_or(json!({})),
            Value::Null => json!({}),
            v => v.clone(),
        };
        let mut fc = json!({"name": tc.name, "args": args});
        if let Some(id) = &tc.id {
            fc["id"] = json!(id);
        }
        out.push(chunk(json!([{"functionCall": fc}]), None, false));
    }
    if let Some(msg) = &turn.stream_error {
        out.push(sse(
            None,
            &json!({"error": {"code": 500, "message": msg, "status": "INTERNAL"}}),
        ));
    }
    if !turn.omit_finish {
        let finish = match turn.finish_reason.as_deref() {
            Some("length") => "MAX_TOKENS",
            Some("content_filter") => "SAFETY",
            _ => "STOP",
        };
        out.push(chunk(json!([]), Some(finish), true));
    }
    out
}

async fn stream_sse(sock: &mut TcpStream, events: &[String], turn: &Turn) -> std::io::Result<()> {
    let events: Vec<Vec<u8>> = events.iter().map(|e| e.as_bytes().to_vec()).collect();
    stream_body(sock, "text/event-stream", &events, turn).await
}

/// Send `events` one HTTP chunk each, honouring the turn's delay and cut knobs.
async fn stream_body(
    sock: &mut TcpStream,
    content_type: &str,
    events: &[Vec<u8>],
    turn: &Turn,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nCache-Control: no-cache\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).await?;
    sock.flush().await?;
    for (i, ev) in events.iter().enumerate() {
        if turn.cut_after == Some(i) {
            // Abrupt close: no terminating chunk, so the client sees a broken body.
            sock.flush().await?;
            return Ok(());
        }
        if i > 0 {
            if let Some(ms) = turn.event_delay_ms.filter(|ms| *ms > 0) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
        }
        sock.write_all(format!("{:x}\r\n", ev.len()).as_bytes())
            .await?;
        sock.write_all(ev).await?;
        sock.write_all(b"\r\n").await?;
        sock.flush().await?;
    }
    if turn.cut_after.is_some_and(|n| n >= events.len()) {
        return Ok(());
    }
    sock.write_all(b"0\r\n\r\n").await?;
    sock.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_accepts_python_format() {
        let s: Script = serde_json::from_value(json!({"turns": [
            {"text": "hi"}, {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
            {"http_error": {"status": 400, "body": {"error": {"message": "bad"}}}}]}))
        .expect("script");
        assert_eq!(s.turns.len(), 3);
        assert_eq!(s.turns[2].http_error.as_ref().map(|h| h.status), Some(400));
        let s: Script = serde_json::from_value(json!([{"text": "a"}])).expect("list form");
        assert_eq!(s.turns[0].text.as_deref(), Some("a"));
    }

    #[test]
    fn pieces_cover_the_text() {
        for s in ["", "ab", "hello world", "héllo wörld ünïcode"] {
            assert_eq!(pieces(s).concat(), s);
            assert_eq!(halves(s).concat(), s);
        }
    }

    #[test]
    fn dechunk_decodes() {
        assert_eq!(dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), b"abcde");
    }

    #[tokio::test]
    async fn serves_openai_stream_and_records_requests() {
        let srv = FakeLlm::start(Script::turns(vec![Turn::text("hello there")]))
            .await
            .expect("start");
        let client = reqwest::Client::new();
        let resp = client
            .post(format!("{}/chat/completions", srv.openai_base_url()))
            .header("authorization", "Bearer secret")
            .json(&json!({"model": "m", "messages": [{"role": "system", "content": "sys"}], "stream": true}))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 200);
        let text = resp.text().await.expect("body");
        assert!(text.contains("\"content\":\"hel\""), "{text}");
        assert!(text.trim_end().ends_with("data: [DONE]"));
        let reqs = srv.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].api, "openai");
        assert_eq!(reqs[0].headers["authorization"], "<redacted>");
        assert_eq!(reqs[0].body["model"], "m");
    }

    #[tokio::test]
    async fn http_error_and_cut_stream() {
        let srv = FakeLlm::start(Script::turns(vec![
            Turn {
                http_error: Some(HttpError {
                    status: 429,
                    body: None,
                }),
                ..Turn::default()
            },
            Turn {
                text: Some("abcdefghij".into()),
                cut_after: Some(2),
                ..Turn::default()
            },
        ]))
        .await
        .expect("start");
        let client = reqwest::Client::new();
        let url = format!("{}/v1/messages", srv.base_url());
        let r = client
            .post(&url)
            .json(&json!({"model": "c"}))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 429);
        let r = client
            .post(&url)
            .json(&json!({"model": "c"}))
            .send()
            .await
            .expect("send");
        assert!(
            r.text().await.is_err(),
            "a cut chunked body is a transport error"
        );
    }
}
