#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MCP over streamable HTTP, end to end: our `pi` binary against a server written with the
//! official Python SDK (`mcp` from PyPI, FastMCP on uvicorn), started here on 127.0.0.1 on a
//! free port. The SDK lives in `target/mcp-test-venv` (installed by `.ci/run`, or by the first
//! test that needs it); without Python the tests fail saying what to install.
//!
//! Covered: `pi mcp add --url --header --bearer-token-env-var` and `pi mcp list` against a
//! stateful (SSE answers, session id) and a stateless (JSON answers) server; the headers and
//! bearer token reaching the server; a `direct` tool called by the model through the fake LLM
//! and recorded in the session file, with progress resetting the timeout; Pi's connect
//! retries after 503s (two, then the error); a call whose session expired (404) retried once
//! on a new session; a broken answer stream resumed with `Last-Event-ID`, after the delay the
//! server's `retry:` asks for; `auth.provider` sending the provider's stored login as the
//! bearer token, and a rejected or missing login naming `/login <provider>`.

mod mcp_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_common::*;
use serde_json::{json, Value};

/// FastMCP with two tools; every HTTP request is logged (method, headers) to a file, and the
/// first `fail_first` POSTs are answered 503, to exercise retries.
const SERVER_PY: &str = r#"
import json, os, socket, sys
import anyio, uvicorn
from mcp.server.fastmcp import FastMCP, Context

from mcp.server.streamable_http import EventStore, EventMessage

port_file, log_file, mode, fail_first = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stateless = mode == "stateless"

class MemoryEvents(EventStore):
    """Every event kept, so a client can resume a broken stream ("resume" mode)."""
    def __init__(self):
        self.events = []
    async def store_event(self, stream_id, message):
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id
    async def replay_events_after(self, last_event_id, send_callback):
        stream = next((s for i, s, _ in self.events if i == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in self.events:
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream

resumable = mode in ("resume", "resume-slow")
# "resume-slow": the priming event asks clients to wait a minute before resuming.
mcp = FastMCP("pyhttp", instructions="A Python test server.", stateless_http=stateless,
              json_response=stateless, log_level="WARNING",
              event_store=MemoryEvents() if resumable else None,
              retry_interval=60000 if mode == "resume-slow" else None)

async def dropped(ctx: Context) -> str:
    """Drop the answer's stream, then answer (after the client resumed it)."""
    await ctx.report_progress(1, 2)
    await ctx.close_sse_stream()
    await anyio.sleep(0.3)
    return "answered after the drop"

if resumable:
    mcp.tool()(dropped)

@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"

@mcp.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep, reporting progress every 0.5 s."""
    steps = int(seconds * 2)
    for i in range(steps):
        await ctx.report_progress(i, steps)
        await anyio.sleep(0.5)
    return "slow done"

app = mcp.streamable_http_app()
state = {"failed": 0, "posts": 0}

async def wrapped(scope, receive, send):
    if scope["type"] == "http":
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        with open(log_file, "a") as f:
            f.write(json.dumps({"method": scope["method"], "headers": headers}) + "\n")
        # "provider": only the bearer token in PI_TEST_REQUIRED_BEARER gets in.
        required = os.environ.get("PI_TEST_REQUIRED_BEARER")
        if mode == "provider" and headers.get("authorization") != f"Bearer {required}":
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        if scope["method"] == "POST" and state["failed"] < fail_first:
            state["failed"] += 1
            await send({"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"warming up"})
            return
        if scope["method"] == "POST":
            state["posts"] += 1
            # "expire": the first tools/call (4th POST) finds its session forgotten.
            if mode == "expire" and state["posts"] == 4:
                await send({"type": "http.response.start", "status": 404, "headers": []})
                await send({"type": "http.response.body", "body": b"session not found"})
                return
    await app(scope, receive, send)

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
sock.listen(64)
with open(port_file + ".tmp", "w") as f:
    f.write(str(sock.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
uvicorn.Server(uvicorn.Config(wrapped, log_level="warning", lifespan="on")).run(sockets=[sock])
"#;

/// A running Python server; killed when dropped.
struct PyServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl PyServer {
    fn start(dir: &Path, mode: &str, fail_first: u32) -> PyServer {
        PyServer::start_with_env(dir, mode, fail_first, &[])
    }

    fn start_with_env(dir: &Path, mode: &str, fail_first: u32, env: &[(&str, &str)]) -> PyServer {
        let script = dir.join("server.py");
        std::fs::write(&script, SERVER_PY).unwrap();
        let port_file = dir.join(format!("port-{mode}-{fail_first}"));
        let log = dir.join(format!("log-{mode}-{fail_first}.jsonl"));
        // The server's own log (the SDK reports a client closing its GET stream as an error).
        let stderr_path = dir.join(format!("stderr-{mode}-{fail_first}.txt"));
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut child = Command::new(python())
            .arg(&script)
            .arg(&port_file)
            .arg(&log)
            .arg(mode)
            .arg(fail_first.to_string())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start the Python MCP server");
        let started = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                break text.trim().parse().unwrap();
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "the Python MCP server exited before listening: {status}\n{}",
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the Python MCP server did not start listening within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        PyServer { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// `(method, headers)` of every request the server saw.
    fn requests(&self) -> Vec<(String, Value)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["method"].as_str().unwrap().to_string(),
                    v["headers"].clone(),
                )
            })
            .collect()
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_add_and_list_over_http_with_headers_and_bearer_token() {
    let s = Setup::new(None).await;
    let server = PyServer::start(s.tmp.path(), "stateful", 0);
    let url = server.url();
    let out = s.pi(&[
        "mcp",
        "add",
        "web",
        "--url",
        &url,
        "--header",
        "X-Team=${PI_TEST_TEAM}",
        "--bearer-token-env-var",
        "PI_TEST_TOKEN",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    let out = s.pi_with_env(
        &["mcp", "list"],
        &[("PI_TEST_TEAM", "blue"), ("PI_TEST_TOKEN", "sekrit")],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout,
        format!(
            "web: connected, 2 tools (codemode, global)\n  {url}\n  tools: echo, slow\n  offers resources\n"
        )
    );
    let requests = server.requests();
    let posts: Vec<&Value> = requests
        .iter()
        .filter(|(m, _)| m == "POST")
        .map(|(_, h)| h)
        .collect();
    assert!(
        posts.len() >= 3,
        "initialize, initialized, tools/list: {requests:?}"
    );
    for headers in &posts {
        assert_eq!(headers["x-team"], "blue");
        assert_eq!(headers["authorization"], "Bearer sekrit");
    }
    // The session the server handed out comes back with every later message, with the
    // protocol version, and the session is deleted at exit.
    assert!(posts[0].get("mcp-session-id").is_none());
    let session = posts[1]["mcp-session-id"].as_str().expect("a session id");
    assert_eq!(posts[1]["mcp-protocol-version"], "2025-11-25");
    assert!(posts[2..].iter().all(|h| h["mcp-session-id"] == session));
    assert!(
        requests
            .iter()
            .any(|(m, h)| m == "DELETE" && h["mcp-session-id"] == session),
        "{requests:?}"
    );

    // A header whose variable is not set: Pi's error, no request sent.
    let before = server.requests().len();
    let out = s.pi_with_env(&["mcp", "list"], &[("PI_TEST_TOKEN", "sekrit")]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "Failed to resolve MCP server \"web\" header \"X-Team\" from environment variable: PI_TEST_TEAM"
        ),
        "{stdout}"
    );
    assert_eq!(server.requests().len(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_json_server_lists_and_unreachable_server_fails_clearly() {
    let s = Setup::new(None).await;
    let server = PyServer::start(s.tmp.path(), "stateless", 0);
    s.write_mcp_json(json!({
        "web": {"type": "streamable-http", "url": server.url()},
        "gone": {"type": "http", "url": "http://127.0.0.1:1/mcp"}
    }));
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("web: connected, 2 tools (codemode, global)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "gone: failed (codemode, global)\n  http://127.0.0.1:1/mcp\n  fetch failed: "
        ),
        "{stdout}"
    );
    // A stateless server hands out no session.
    assert!(server
        .requests()
        .iter()
        .all(|(_, h)| h.get("mcp-session-id").is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_retried_twice_after_transient_statuses() {
    let s = Setup::new(None).await;
    // Two 503s: the third attempt connects.
    let recovers = PyServer::start(s.tmp.path(), "stateful", 2);
    // Three 503s: Pi's two retries are used up; the error quotes the status and body.
    let stays_down = PyServer::start(s.tmp.path(), "stateful", 3);
    s.write_mcp_json(json!({
        "recovers": {"url": recovers.url()},
        "down": {"url": stays_down.url()}
    }));
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("recovers: connected, 2 tools"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "down: failed (codemode, global)\n  {}\n  MCP HTTP request failed with status 503: warming up\n",
            stays_down.url()
        )),
        "{stdout}"
    );
    let posts = |server: &PyServer| {
        server
            .requests()
            .iter()
            .filter(|(m, _)| m == "POST")
            .count()
    };
    // 3 refused initializes; then initialize, initialized, tools/list.
    assert_eq!(posts(&stays_down), 3);
    assert_eq!(posts(&recovers), 2 + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_a_direct_http_tool_and_the_session_records_it() {
    let s = Setup::new(Some(json!({"turns": [
        {"text": "Echoing.", "tool_calls": [
            tc("mcp__web__echo", json!({"text": "over http"})),
            tc("mcp__web__slow", json!({"seconds": 3}))
        ]},
        {"text": "Done."},
    ]})))
    .await;
    let server = PyServer::start(s.tmp.path(), "stateful", 0);
    // A 2 s timeout and a 3 s call with progress every 0.5 s: progress resets the timeout.
    s.write_mcp_json(json!({
        "web": {"url": server.url(), "exposure": "direct", "timeout": 2}
    }));
    let out = s.prompt(&[], "Echo it.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "Done.\n");
    let requests = s.requests();
    assert_eq!(requests.len(), 2);
    let tools = declared(&requests[0]);
    assert!(tools.contains(&"mcp__web__echo".to_string()), "{tools:?}");
    assert_eq!(
        tool_messages(&requests[1]),
        ["echo: over http", "slow done"]
    );
    let results = s.tool_results();
    assert_eq!(
        results,
        [
            (
                "mcp__web__echo".to_string(),
                false,
                "echo: over http".to_string()
            ),
            ("mcp__web__slow".to_string(), false, "slow done".to_string())
        ]
    );
    let result = s
        .session_entries()
        .into_iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .unwrap();
    assert_eq!(
        result["message"]["details"],
        json!({"server": "web", "tool": "echo"})
    );
    let inspect = s.inspect_session();
    assert!(inspect.is_object(), "{inspect}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_on_an_expired_session_is_retried_on_a_new_one() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__web__echo", json!({"text": "again"}))]},
        {"text": "Done."},
    ]})))
    .await;
    let server = PyServer::start(s.tmp.path(), "expire", 0);
    s.write_mcp_json(json!({"web": {"url": server.url(), "exposure": "direct"}}));
    let out = s.prompt(&[], "Echo.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        s.tool_results(),
        [(
            "mcp__web__echo".to_string(),
            false,
            "echo: again".to_string()
        )]
    );
    // The 404 made the client initialize a new session (a POST without a session id).
    let fresh = server
        .requests()
        .iter()
        .filter(|(m, h)| m == "POST" && h.get("mcp-session-id").is_none())
        .count();
    assert_eq!(fresh, 2, "{:?}", server.requests());
    s.inspect_session();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_answer_stream_is_resumed_with_last_event_id() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__web__dropped", json!({}))]},
        {"text": "Done."},
    ]})))
    .await;
    let server = PyServer::start(s.tmp.path(), "resume", 0);
    s.write_mcp_json(json!({"web": {"url": server.url(), "exposure": "direct"}}));
    let out = s.prompt(&[], "Drop.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        s.tool_results(),
        [(
            "mcp__web__dropped".to_string(),
            false,
            "answered after the drop".to_string()
        )]
    );
    // The answer came over a GET that named the last event the broken stream carried.
    let resumed = server
        .requests()
        .iter()
        .filter(|(m, h)| m == "GET" && h.get("last-event-id").is_some())
        .count();
    assert_eq!(resumed, 1, "{:?}", server.requests());
    s.inspect_session();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_stream_waits_for_the_servers_retry_delay() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__web__dropped", json!({}))]},
        {"text": "Done."},
    ]})))
    .await;
    // The server asks for a minute before resuming: the call's 3 s timeout comes first, and
    // the stream is never resumed (with the default delay of 1 s it would be answered).
    let server = PyServer::start(s.tmp.path(), "resume-slow", 0);
    s.write_mcp_json(json!({"web": {"url": server.url(), "exposure": "direct", "timeout": 3}}));
    let out = s.prompt(&[], "Drop.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        s.tool_results(),
        [(
            "mcp__web__dropped".to_string(),
            true,
            "MCP request timed out after 3000ms".to_string()
        )]
    );
    let resumed = server
        .requests()
        .iter()
        .filter(|(m, h)| m == "GET" && h.get("last-event-id").is_some())
        .count();
    assert_eq!(resumed, 0, "{:?}", server.requests());
    s.inspect_session();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_provider_sends_the_stored_login_and_names_login_when_rejected() {
    let s = Setup::new(Some(json!({"turns": [
        {"text": "Not connected."},
        {"tool_calls": [tc("mcp__radius__echo", json!({"text": "hi"}))]},
        {"text": "Done."},
    ]})))
    .await;
    let server = PyServer::start_with_env(
        s.tmp.path(),
        "provider",
        0,
        &[("PI_TEST_REQUIRED_BEARER", "good-token")],
    );
    s.write_mcp_json(json!({"radius": {
        "url": server.url(), "exposure": "direct", "auth": {"provider": "radius"}
    }}));
    let auth_json = |credential: Value| {
        std::fs::write(
            s.agent.join("auth.json"),
            json!({ "radius": credential }).to_string(),
        )
        .unwrap();
    };
    let authorizations = || -> Vec<Value> {
        server
            .requests()
            .iter()
            .map(|(_, h)| h.get("authorization").cloned().unwrap_or(Value::Null))
            .collect()
    };

    // Not logged in: no token sent, and no OAuth discovery either.
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("radius: needs sign-in (direct, global)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  sign in with: pi auth login radius\n"),
        "{stdout}"
    );
    assert!(
        authorizations().iter().all(Value::is_null),
        "{:?}",
        server.requests()
    );
    assert!(
        server.requests().iter().all(|(m, _)| m == "POST"),
        "{:?}",
        server.requests()
    );

    // A stored key the server rejects: sent, and the session start names /login.
    auth_json(json!({"type": "api_key", "key": "stale"}));
    let out = s.prompt(&["--no-session"], "Echo.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "Warning: MCP server \"radius\" requires sign-in. Run /login radius to sign in."
        ),
        "{stderr}"
    );
    assert!(authorizations().contains(&json!("Bearer stale")));

    // After a login (an OAuth credential as /login stores it): connected, the tool called.
    let expires = 4_102_444_800_000_u64; // 2100-01-01
    auth_json(json!({"type": "oauth", "access": "good-token", "refresh": "r", "expires": expires}));
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("radius: connected, 2 tools (direct, global)"),
        "{stdout}"
    );
    let out = s.prompt(&[], "Echo.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        s.tool_results().contains(&(
            "mcp__radius__echo".to_string(),
            false,
            "echo: hi".to_string()
        )),
        "{:?}",
        s.tool_results()
    );
    assert!(authorizations().contains(&json!("Bearer good-token")));
    s.inspect_session();
}
