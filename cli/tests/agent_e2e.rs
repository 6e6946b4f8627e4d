//! End to end: our `pi` binary against pi-fake-llm, with the scripts real Pi 1.6.0 ran in
//! `/work/shared/realpi/run_scenarios.py`, compared with what Pi recorded
//! (`fixtures/realpi/{logs,transcripts,sessions}`):
//!
//! * provider requests: the same message structure (roles, tool calls, tool results, order);
//! * events / RPC responses: the same sequence of types (streaming deltas collapsed, since
//!   chunking is the server's choice), responses in the same order with the same success;
//! * the session file: the same entry types, roles and parent chain.
//!
//! Ids, timestamps and the system prompt's wording are not compared.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");

fn pi_bin() -> &'static str {
    env!("CARGO_BIN_EXE_pi")
}

/// One scenario's folders: agent dir (models.json, settings.json), cwd, session dir.
struct Scenario {
    _tmp: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
    sessions: PathBuf,
    fake: FakeLlm,
}

impl Scenario {
    async fn new(script: Value, settings: Option<Value>) -> Scenario {
        let tmp = tempfile::tempdir().expect("tempdir");
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("cwd");
        let sessions = tmp.path().join("sessions");
        for d in [&agent, &cwd, &sessions] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script: Script = serde_json::from_value(script).expect("script");
        let fake = FakeLlm::start(script).await.expect("fake llm");
        let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
            .unwrap()
            .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
        std::fs::write(agent.join("models.json"), models).unwrap();
        if let Some(s) = settings {
            std::fs::write(agent.join("settings.json"), s.to_string()).unwrap();
        }
        Scenario {
            _tmp: tmp,
            agent,
            cwd,
            sessions,
            fake,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(pi_bin());
        c.arg("--session-dir")
            .arg(&self.sessions)
            .args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE");
        c
    }

    /// Runs pi to completion (stdin closed).
    fn run(&self, args: &[&str]) -> std::process::Output {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run pi")
    }

    fn session_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.sessions)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }
}

/// Copies a recorded Pi session with its header `cwd` set to `cwd`: the recorded directory
/// is gone here, and `--session` on such a session exits 1 as in Pi.
fn copy_into_cwd(src: &Path, dst: &Path, cwd: &Path) {
    let text = std::fs::read_to_string(src).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(first).unwrap();
    header["cwd"] = json!(cwd.display().to_string());
    std::fs::write(dst, format!("{header}\n{rest}")).unwrap();
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn tc(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

// ----------------------------------------------------------------------------- shapes

/// A provider request reduced to its structure: per message the role and its parts.
fn request_shape(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(tools) = body["tools"].as_array() {
        let names: Vec<&str> = tools
            .iter()
            .map(|t| {
                t["function"]["name"]
                    .as_str()
                    .or(t["name"].as_str())
                    .unwrap_or("?")
            })
            .collect();
        out.push(format!("tools:{}", names.join(",")));
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("?");
        let mut parts: Vec<String> = Vec::new();
        match &m["content"] {
            Value::String(_) if role == "tool" => parts.push("s".into()),
            Value::String(s) if role != "system" && role != "developer" => {
                parts.push(format!("s:{}", s.chars().take(40).collect::<String>()))
            }
            Value::Array(blocks) => {
                for b in blocks {
                    let t = b["type"].as_str().unwrap_or("?");
                    let extra = match t {
                        // Tool output mentions the run's directory; only its presence counts.
                        "text" if role == "tool" => String::new(),
                        "text" => b["text"].as_str().unwrap_or("").chars().take(40).collect(),
                        "tool_use" => b["name"].as_str().unwrap_or("").to_string(),
                        "tool_result" => b["tool_use_id"].as_str().unwrap_or("").to_string(),
                        _ => String::new(),
                    };
                    parts.push(format!("{t}:{extra}"));
                }
            }
            _ => {}
        }
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            parts.push(format!(
                "call:{}:{}",
                call["function"]["name"].as_str().unwrap_or(""),
                call["id"].as_str().unwrap_or("")
            ));
        }
        if let Some(id) = m["tool_call_id"].as_str() {
            parts.push(format!("result:{id}"));
        }
        out.push(format!("{role}[{}]", parts.join("|")));
    }
    out
}

fn pi_requests(name: &str) -> Vec<(String, Vec<String>)> {
    read_jsonl(Path::new(&format!("{FIXTURES}/logs/{name}.requests.jsonl")))
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or("").to_string(),
                request_shape(&r["body"]),
            )
        })
        .collect()
}

/// Our summarization prompt is worded differently from Pi's (the fake server recognises
/// Pi's wording), so summary requests are told apart by either wording.
fn our_kind(body: &Value) -> &'static str {
    let system = body["system"].to_string() + &body["messages"][0]["content"].to_string();
    if system.contains(pi_fake_llm::SUMMARY_MARKER)
        || system.contains(&pi_engine::compaction::SUMMARIZATION_SYSTEM_PROMPT[..40])
    {
        "summary"
    } else {
        "turn"
    }
}

fn our_requests(fake: &FakeLlm) -> Vec<(String, Vec<String>)> {
    fake.requests()
        .iter()
        .map(|r| (our_kind(&r.body).to_string(), request_shape(&r.body)))
        .collect()
}

/// A turns-only script answering requests in the order Pi made them: Pi's request log says
/// which of its requests were summaries, and our summary requests (different wording) would
/// otherwise take `turns` entries. A request order different from Pi's then shows up as
/// different request shapes.
fn script_in_pi_order(name: &str, script: &Value) -> Value {
    let mut turns = script["turns"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter();
    let mut summaries = script["summaries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter();
    let mut merged = Vec::new();
    for (kind, _) in pi_requests(name) {
        let next = if kind == "summary" {
            summaries.next()
        } else {
            turns.next()
        };
        merged.push(next.unwrap_or_else(|| json!({"text": "default"})));
    }
    json!({"turns": merged})
}

fn assert_requests_match(name: &str, fake: &FakeLlm) {
    let pi = pi_requests(name);
    let ours = our_requests(fake);
    assert_eq!(
        ours.len(),
        pi.len(),
        "{name}: request count\nours: {ours:#?}\npi: {pi:#?}"
    );
    for (i, (o, p)) in ours.iter().zip(&pi).enumerate() {
        assert_eq!(o, p, "{name}: request #{i} differs");
    }
}

/// An event's comparable label: its type, plus the streaming sub-type or message role.
fn event_label(e: &Value) -> String {
    let t = e["type"].as_str().unwrap_or("?");
    match t {
        "message_update" => format!(
            "update:{}",
            e["assistantMessageEvent"]["type"].as_str().unwrap_or("")
        ),
        "message_start" | "message_end" | "turn_end" => {
            format!("{t}:{}", e["message"]["role"].as_str().unwrap_or(""))
        }
        "response" => format!(
            "response:{}:{}",
            e["command"].as_str().unwrap_or(""),
            e["success"]
        ),
        _ => t.to_string(),
    }
}

/// Labels with runs of streaming deltas / tool or bash updates collapsed to one.
fn event_labels(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let l = event_label(e);
        let collapsible =
            l.ends_with("_delta") || l == "tool_execution_update" || l == "bash_execution_update";
        if collapsible && out.last() == Some(&l) {
            continue;
        }
        // Update events interleave with tool starts differently when timing differs; they
        // carry no structure, so they are dropped.
        if l == "tool_execution_update" || l == "bash_execution_update" {
            continue;
        }
        out.push(l);
    }
    out
}

fn assert_events_match(what: &str, ours: &[Value], pi: &[Value]) {
    let o = event_labels(ours);
    let p = event_labels(pi);
    if o != p {
        let first = o
            .iter()
            .zip(&p)
            .position(|(a, b)| a != b)
            .unwrap_or(o.len().min(p.len()));
        let lo = first.saturating_sub(5);
        panic!(
            "{what}: event sequences differ at {first} (ours {} vs pi {})\nours: {:#?}\npi:   {:#?}",
            o.len(),
            p.len(),
            &o[lo..(first + 8).min(o.len())],
            &p[lo..(first + 8).min(p.len())]
        );
    }
}

/// A session file's structure: per entry its type (and role), and its parent as an index.
fn session_shape(lines: &[Value]) -> Vec<String> {
    let mut ids: Vec<Option<String>> = Vec::new();
    let mut out = Vec::new();
    for (i, e) in lines.iter().enumerate() {
        if i == 0 {
            out.push(format!(
                "session v{} parent={}",
                e["version"],
                e.get("parentSession").is_some()
            ));
            continue;
        }
        let kind = e["type"].as_str().unwrap_or("?");
        let role = e["message"]["role"].as_str().unwrap_or("");
        let parent = e["parentId"]
            .as_str()
            .and_then(|p| ids.iter().position(|id| id.as_deref() == Some(p)))
            .map_or("root".to_string(), |p| p.to_string());
        let mut extra = String::new();
        if kind == "message" && role == "assistant" {
            extra = format!(
                " stop={} thinkingLevel={}",
                e["message"]["stopReason"], e["message"]["thinkingLevel"]
            );
        }
        if kind == "context_edit" {
            let target = e["targetId"]
                .as_str()
                .and_then(|p| ids.iter().position(|id| id.as_deref() == Some(p)));
            extra = format!(" target={target:?}");
        }
        if kind == "thinking_level_change" {
            extra = format!(" {}", e["thinkingLevel"]);
        }
        out.push(format!("{kind}:{role} parent={parent}{extra}"));
        ids.push(e["id"].as_str().map(str::to_string));
    }
    out
}

fn assert_session_matches(ours: &Path, pi_name: &str) {
    let o = session_shape(&read_jsonl(ours));
    let p = session_shape(&read_jsonl(Path::new(&format!(
        "{FIXTURES}/sessions/{pi_name}.jsonl"
    ))));
    assert_eq!(o, p, "session structure differs from Pi's {pi_name}.jsonl");
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

// ----------------------------------------------------------------------------- print / json

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_plain_matches_pi() {
    let sc = Scenario::new(
        json!({"turns": [{"text": "Hello! I am a fake model."}]}),
        None,
    )
    .await;
    let out = sc.run(&["--model", "fakeoai/fake-model", "-p", "Say hello"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pi_stdout =
        std::fs::read_to_string(format!("{FIXTURES}/transcripts/print_plain.stdout.txt")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), pi_stdout);
    assert_requests_match("print_plain", &sc.fake);
    let files = sc.session_files();
    assert_eq!(files.len(), 1);
    assert_session_matches(&files[0], "print_plain");
    // File name as Pi's layout: <timestamp>_<id>.jsonl
    let name = files[0].file_name().unwrap().to_string_lossy().to_string();
    assert!(name.ends_with(".jsonl") && name.contains('_'), "{name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_nosession_writes_nothing() {
    let sc = Scenario::new(json!({"turns": [{"text": "Ephemeral answer."}]}), None).await;
    let out = sc.run(&[
        "--model",
        "fakeoai/fake-model",
        "--no-session",
        "-p",
        "Ephemeral question",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Ephemeral answer.\n");
    assert!(sc.session_files().is_empty());
    assert_requests_match("print_nosession", &sc.fake);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_multi_and_continue_match_pi() {
    let sc = Scenario::new(
        json!({"turns": [
            {"text": "First answer: 2+2=4."},
            {"text": "Second answer: the capital of France is Paris."},
            {"text": "Third answer: continuing the same session."},
            {"thinking": "The user wants a recap. Let me think briefly.", "text": "Recap: math, geography, continue."},
        ]}),
        None,
    )
    .await;
    let r1 = sc.run(&[
        "--model",
        "fakeoai/fake-model",
        "-p",
        "What is 2+2?",
        "What is the capital of France?",
    ]);
    let r2 = sc.run(&["--model", "fakeoai/fake-model", "-c", "-p", "Keep going"]);
    let r3 = sc.run(&["-c", "--thinking", "high", "-p", "Recap please"]);
    for (i, r) in [r1, r2, r3].iter().enumerate() {
        assert_eq!(
            r.status.code(),
            Some(0),
            "run {}: {}",
            i + 1,
            String::from_utf8_lossy(&r.stderr)
        );
        let pi = std::fs::read_to_string(format!(
            "{FIXTURES}/transcripts/print_multi.{}.stdout.txt",
            i + 1
        ))
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&r.stdout),
            pi,
            "stdout of run {}",
            i + 1
        );
    }
    assert_requests_match("print_multi", &sc.fake);
    let files = sc.session_files();
    assert_eq!(files.len(), 1, "-c continues the same file");
    assert_session_matches(&files[0], "print_multi_continue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_error_matches_pi() {
    let sc = Scenario::new(
        json!({"turns": [{"http_error": {"status": 400, "body": {"error": {"message": "fake bad request", "type": "invalid_request_error"}}}}]}),
        Some(json!({"retry": {"enabled": false}})),
    )
    .await;
    let out = sc.run(&["--model", "fakeoai/fake-model", "-p", "This will fail"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let pi_err = std::fs::read_to_string(format!(
        "{FIXTURES}/transcripts/print_error.stdout.txt.stderr"
    ))
    .unwrap();
    let pi_err: String = pi_err
        .lines()
        .filter(|l| !l.starts_with("# "))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        pi_err.trim_end()
    );
    assert_requests_match("print_error", &sc.fake);
    let files = sc.session_files();
    assert_eq!(files.len(), 1, "the failed turn is persisted");
    assert_session_matches(&files[0], "print_error");
}

fn json_tools_script() -> Value {
    json!({"turns": [
        {"text": "I'll look around first.", "tool_calls": [tc("bash", json!({"command": "echo hello-from-bash && pwd"}))]},
        {"tool_calls": [tc("write", json!({"path": "notes.txt", "content": "line one\nline two\nline three\n"}))]},
        {"tool_calls": [tc("read", json!({"path": "notes.txt"}))]},
        {"tool_calls": [tc("edit", json!({"path": "notes.txt", "edits": [{"oldText": "line two", "newText": "LINE TWO"}]}))]},
        {"text": "Now some things that fail.", "tool_calls": [
            tc("read", json!({"path": "does-not-exist.txt"})),
            tc("edit", json!({"path": "notes.txt", "edits": [{"oldText": "no such text", "newText": "x"}]}))]},
        {"tool_calls": [tc("bash", json!({"command": "echo to-stderr >&2; exit 3"}))]},
        {"tool_calls": [tc("nonexistent_tool", json!({"foo": 1}))]},
        {"text": "Done: created notes.txt, edited it, and saw three failures."},
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_tools_match_pi() {
    let sc = Scenario::new(json_tools_script(), None).await;
    let out = sc.run(&[
        "--model",
        "fakeoai/fake-model",
        "--mode",
        "json",
        "Please work on notes.txt",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = json_lines(&out.stdout);
    let pi = read_jsonl(Path::new(&format!(
        "{FIXTURES}/transcripts/json_tools.events.jsonl"
    )));
    assert_eq!(ours[0]["type"], "session", "header line first");
    assert_events_match("json_tools", &ours, &pi);
    // No cumulative partial on streaming updates.
    assert!(
        ours.iter()
            .filter(|e| e["type"] == "message_update")
            .all(|e| e.get("message").is_none()
                && e["assistantMessageEvent"].get("partial").is_none())
    );
    // Tool results carry the same texts and error flags as Pi's.
    let results = |evs: &[Value]| -> Vec<(Value, Value)> {
        evs.iter()
            .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "toolResult")
            .map(|e| {
                (
                    e["message"]["isError"].clone(),
                    e["message"]["toolName"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(results(&ours), results(&pi));
    assert_eq!(
        std::fs::read_to_string(sc.cwd.join("notes.txt")).unwrap(),
        "line one\nLINE TWO\nline three\n"
    );
    assert_requests_match("json_tools", &sc.fake);
    assert_session_matches(&sc.session_files()[0], "json_tools");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_thinking_matches_pi() {
    let sc = Scenario::new(
        json!({"turns": [
            {"thinking": "I should list the directory.", "text": "Listing.", "tool_calls": [tc("bash", json!({"command": "echo anthropic-tool"}))]},
            {"thinking": "Done listing.", "text": "The directory listing printed anthropic-tool."},
            {"text": "Second prompt answered."},
        ]}),
        None,
    )
    .await;
    let out = sc.run(&[
        "--model",
        "fakeant/fake-claude",
        "--thinking",
        "low",
        "--mode",
        "json",
        "List the directory",
        "Another question",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = json_lines(&out.stdout);
    let pi = read_jsonl(Path::new(&format!(
        "{FIXTURES}/transcripts/anthropic.events.jsonl"
    )));
    assert_events_match("anthropic", &ours, &pi);
    assert_requests_match("anthropic", &sc.fake);
    assert_session_matches(&sc.session_files()[0], "anthropic_tools_thinking");
}

// ----------------------------------------------------------------------------- rpc

/// Drives `pi --mode rpc`, collecting every stdout record.
struct Rpc {
    child: Child,
    rx: mpsc::Receiver<Value>,
    records: Vec<Value>,
}

impl Rpc {
    fn start(sc: &Scenario, args: &[&str]) -> Rpc {
        let mut all = vec!["--mode", "rpc"];
        all.extend_from_slice(args);
        let mut child = sc
            .command(&all)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pi --mode rpc");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let v = serde_json::from_str(&line).unwrap_or_else(|_| json!({"_unparsed": line}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Rpc {
            child,
            rx,
            records: Vec::new(),
        }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits until `pred` holds for some record received from now on (or already counted).
    fn wait(&mut self, what: &str, mut pred: impl FnMut(&[Value]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !pred(&self.records) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => self.records.push(v),
                Err(_) => panic!(
                    "timed out waiting for {what}; last records: {:#?}",
                    &self.records[self.records.len().saturating_sub(6)..]
                ),
            }
        }
    }

    fn response(&mut self, id: &str) -> Value {
        self.wait(&format!("response {id}"), |r| {
            r.iter().any(|v| v["type"] == "response" && v["id"] == id)
        });
        self.records
            .iter()
            .find(|v| v["type"] == "response" && v["id"] == id)
            .cloned()
            .unwrap()
    }

    fn count(&self, label: &str) -> usize {
        self.records.iter().filter(|v| v["type"] == label).count()
    }

    fn close(mut self) -> (Vec<Value>, Option<i32>) {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("wait pi");
        while let Ok(v) = self.rx.recv_timeout(Duration::from_secs(5)) {
            self.records.push(v);
        }
        (self.records, status.code())
    }
}

/// Replays the commands of Pi's RPC transcript against our binary: each command is sent
/// once we have seen as many events of the type Pi had seen before it (so `steer` lands
/// during the tool run, as it did for Pi), and a started prompt waits for `agent_settled`.
/// Entry ids in commands (fork) are mapped through `get_fork_messages` positions.
fn replay(sc: &Scenario, name: &str, args: &[&str]) -> (Vec<Value>, Vec<Value>) {
    let transcript = read_jsonl(Path::new(&format!(
        "{FIXTURES}/transcripts/{name}.rpc.jsonl"
    )));
    let mut rpc = Rpc::start(sc, args);
    let mut pi_recv: Vec<Value> = Vec::new();
    let mut pi_fork_messages: Vec<Value> = Vec::new();
    let mut our_fork_messages: Vec<Value> = Vec::new();
    let mut pending_settle = false;
    for rec in &transcript {
        match rec["dir"].as_str() {
            Some("recv") => pi_recv.push(rec["rec"].clone()),
            Some("send") => {
                let mut cmd = rec["rec"].clone();
                // Wait for what Pi had already sent when this command went out.
                if let Some(last) = pi_recv.last() {
                    let t = last["type"].as_str().unwrap_or("").to_string();
                    if t != "response" {
                        let n = pi_recv.iter().filter(|v| v["type"] == t.as_str()).count();
                        rpc.wait(&format!("{n}× {t}"), |r| {
                            r.iter().filter(|v| v["type"] == t.as_str()).count() >= n
                        });
                    }
                }
                if pending_settle {
                    let n = pi_recv
                        .iter()
                        .filter(|v| v["type"] == "agent_settled")
                        .count();
                    rpc.wait("agent_settled", |r| {
                        r.iter().filter(|v| v["type"] == "agent_settled").count() >= n
                    });
                    pending_settle = false;
                }
                if cmd["type"] == "fork" {
                    let pos = pi_fork_messages
                        .iter()
                        .position(|m| m["entryId"] == cmd["entryId"])
                        .expect("fork target in Pi's get_fork_messages");
                    cmd["entryId"] = our_fork_messages[pos]["entryId"].clone();
                }
                if cmd["type"] == "export_html" {
                    cmd["outputPath"] = json!(sc.cwd.join("export.html").display().to_string());
                }
                rpc.send_line(&cmd.to_string());
                let id = cmd["id"].as_str().unwrap_or("").to_string();
                let resp = rpc.response(&id);
                if cmd["type"] == "get_fork_messages" {
                    our_fork_messages = resp["data"]["messages"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    let pi_resp = transcript
                        .iter()
                        .find(|r| {
                            r["dir"] == "recv"
                                && r["rec"]["type"] == "response"
                                && r["rec"]["id"] == id.as_str()
                        })
                        .unwrap();
                    pi_fork_messages = pi_resp["rec"]["data"]["messages"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                }
                if cmd["type"] == "prompt" && resp["data"]["disposition"] == "started" {
                    pending_settle = true;
                }
            }
            _ => {}
        }
    }
    if pending_settle {
        let n = pi_recv
            .iter()
            .filter(|v| v["type"] == "agent_settled")
            .count();
        rpc.wait("final agent_settled", |r| {
            r.iter().filter(|v| v["type"] == "agent_settled").count() >= n
        });
    }
    let _ = rpc.count("agent_settled");
    let (records, code) = rpc.close();
    assert_eq!(code, Some(0), "{name}: pi --mode rpc exit code");
    (records, pi_recv)
}

/// Responses: same commands, same ids, same success, in the same order.
fn assert_responses_match(name: &str, ours: &[Value], pi: &[Value]) {
    let pick = |v: &[Value]| -> Vec<(Value, Value, Value)> {
        v.iter()
            .filter(|r| r["type"] == "response")
            .map(|r| (r["id"].clone(), r["command"].clone(), r["success"].clone()))
            .collect()
    };
    assert_eq!(pick(ours), pick(pi), "{name}: responses");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_lazy_file_matches_pi() {
    let sc = Scenario::new(json!({"turns": [{"text": "only reply"}]}), None).await;
    let (ours, pi) = replay(
        &sc,
        "rpc_lazy_file",
        &["--model", "fakeoai/fake-model", "--name", "named-at-start"],
    );
    assert_responses_match("rpc_lazy_file", &ours, &pi);
    assert_events_match("rpc_lazy_file", &ours, &pi);
    // compact on an empty session fails with Pi's message
    let compact = ours.iter().find(|r| r["command"] == "compact").unwrap();
    assert_eq!(compact["error"], "Nothing to compact (session too small)");
    assert_requests_match("rpc_lazy_file", &sc.fake);
    let files = sc.session_files();
    assert_eq!(
        files.len(),
        1,
        "new_session without a prompt writes no file"
    );
    assert_session_matches(&files[0], "rpc_lazy_file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_steer_and_follow_up_match_pi() {
    let sc = Scenario::new(
        json!({"turns": [
            {"text": "Sleeping.", "tool_calls": [tc("bash", json!({"command": "sleep 2; echo slept"}))], "delay": 0.2},
            {"text": "Handled steering message."},
            {"text": "Handled follow-up message."},
            {"text": "extra"},
        ]}),
        None,
    )
    .await;
    let (ours, pi) = replay(&sc, "rpc_steer", &["--model", "fakeoai/fake-model"]);
    assert_responses_match("rpc_steer", &ours, &pi);
    assert_events_match("rpc_steer", &ours, &pi);
    assert_requests_match("rpc_steer", &sc.fake);
    assert_session_matches(&sc.session_files()[0], "rpc_steer_followup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_errors_and_retry_match_pi() {
    let sc = Scenario::new(
        json!({"turns": [
            {"http_error": {"status": 500, "body": {"error": {"message": "fake overloaded"}}}},
            {"text": "Recovered after retry."},
            {"http_error": {"status": 400, "body": {"error": {"message": "fake invalid request"}}}},
            {"text": "Cut off by leng", "finish_reason": "length"},
            {"text": "Fine again."},
        ]}),
        Some(json!({"retry": {"enabled": true, "maxRetries": 2, "baseDelayMs": 200}})),
    )
    .await;
    let (ours, pi) = replay(&sc, "rpc_errors", &["--model", "fakeoai/fake-model"]);
    assert_responses_match("rpc_errors", &ours, &pi);
    let retry_start = ours
        .iter()
        .find(|e| e["type"] == "auto_retry_start")
        .expect("auto_retry_start");
    assert_eq!(retry_start["attempt"], 1);
    assert_eq!(retry_start["maxAttempts"], 2);
    assert_eq!(retry_start["delayMs"], 200);
    assert_eq!(
        retry_start["errorMessage"],
        "500: {\"message\":\"fake overloaded\"}"
    );
    assert_requests_match("rpc_errors", &sc.fake);
    assert_events_match("rpc_errors", &ours, &pi);
    assert_session_matches(&sc.session_files()[0], "rpc_errors");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_compact_twice_matches_pi() {
    let turns: Vec<Value> = (0..10)
        .map(|i| json!({"text": format!("Answer {i}: {}", "some moderately long answer text ".repeat(4))}))
        .collect();
    let summaries: Vec<Value> = (1..7)
        .map(|k| json!({"text": format!("## Goal\nManual summary #{k} from fake server.")}))
        .collect();
    let sc = Scenario::new(
        script_in_pi_order(
            "rpc_compact_twice",
            &json!({"turns": turns, "summaries": summaries}),
        ),
        Some(json!({"compaction": {"keepRecentTokens": 60}})),
    )
    .await;
    let (ours, pi) = replay(&sc, "rpc_compact_twice", &["--model", "fakeoai/fake-model"]);
    assert_responses_match("rpc_compact_twice", &ours, &pi);
    assert_events_match("rpc_compact_twice", &ours, &pi);
    assert_requests_match("rpc_compact_twice", &sc.fake);
    assert_session_matches(&sc.session_files()[0], "rpc_compact_twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_autocompact_matches_pi() {
    let big = "lorem ipsum dolor sit amet ".repeat(60);
    let turns: Vec<Value> = (0..20)
        .map(|i| json!({"text": format!("Reply {i}: {big}")}))
        .collect();
    let summaries: Vec<Value> = (1..10)
        .map(|k| json!({"text": format!("## Goal\nAuto summary #{k} from fake server.")}))
        .collect();
    let sc = Scenario::new(
        script_in_pi_order("rpc_autocompact", &json!({"turns": turns, "summaries": summaries})),
        Some(json!({"compaction": {"enabled": true, "reserveTokens": 1500, "keepRecentTokens": 600}})),
    )
    .await;
    let (ours, pi) = replay(&sc, "rpc_autocompact", &["--model", "fakeoai/fake-small"]);
    assert_responses_match("rpc_autocompact", &ours, &pi);
    assert_events_match("rpc_autocompact", &ours, &pi);
    assert_requests_match("rpc_autocompact", &sc.fake);
    assert_session_matches(&sc.session_files()[0], "rpc_autocompact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_main_matches_pi() {
    let sc = Scenario::new(
        script_in_pi_order("rpc_main", &json!({"turns": [
            {"text": "Let me check.", "tool_calls": [tc("bash", json!({"command": "echo rpc-bash-tool"}))]},
            {"text": "The command printed rpc-bash-tool."},
            {"text": "I see you ran ls yourself. Noted."},
            {"text": "Answer with the second model."},
            {"text": "Answer after manual compaction."},
            {"text": "Answer in the forked session."},
            {"text": "Answer in the cloned session."},
        ],
        "summaries": [{"text": "## Goal\nManual compaction summary from fake server.\n\n## Progress\n- ran echo"}]})),
        Some(json!({"compaction": {"keepRecentTokens": 40}})),
    )
    .await;
    let (ours, pi) = replay(&sc, "rpc_main", &["--model", "fakeoai/fake-model"]);
    // get_commands lists Pi's built-in extension commands; we have none yet.
    assert_responses_match("rpc_main", &ours, &pi);
    assert_events_match("rpc_main", &ours, &pi);
    assert_requests_match("rpc_main", &sc.fake);
    let state_files: Vec<String> = ours
        .iter()
        .filter(|r| r["command"] == "get_state")
        .filter_map(|r| r["data"]["sessionFile"].as_str().map(str::to_string))
        .collect();
    // main, then fork, then clone (Pi's get_state order in this transcript)
    let main_file = &state_files[state_files.len() - 3];
    let fork_file = &state_files[state_files.len() - 2];
    let clone_file = &state_files[state_files.len() - 1];
    assert_session_matches(Path::new(main_file), "rpc_main");
    assert_session_matches(Path::new(fork_file), "rpc_main_fork");
    assert_session_matches(Path::new(clone_file), "rpc_main_clone");
}

// ----------------------------------------------------------------------------- resume & errors

/// Every session real Pi wrote resumes here: `--session FILE -p continue` appends a user
/// message and the answer on the leaf, and the file stays loadable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_pi_session_resumes() {
    let dir = Path::new(FIXTURES).join("sessions");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    names.sort();
    assert!(names.len() >= 15, "fixtures present");
    for src in names {
        let sc = Scenario::new(json!({"turns": [{"text": "continued"}]}), None).await;
        let copy = sc.sessions.join(src.file_name().unwrap());
        copy_into_cwd(&src, &copy, &sc.cwd);
        let before = read_jsonl(&copy);
        let out = sc.run(&[
            "--session",
            copy.to_str().unwrap(),
            "--model",
            "fakeoai/fake-model",
            "-p",
            "continue",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "continued\n",
            "{}",
            src.display()
        );
        let after = read_jsonl(&copy);
        assert_eq!(
            &after[..before.len()],
            &before[..],
            "{}: existing lines untouched",
            src.display()
        );
        let added: Vec<&Value> = after[before.len()..].iter().collect();
        let roles: Vec<&str> = added
            .iter()
            .filter_map(|e| e["message"]["role"].as_str())
            .collect();
        assert!(
            roles.ends_with(&["user", "assistant"]),
            "{}: appended {roles:?}",
            src.display()
        );
        // The first appended entry hangs off the old leaf (Pi: the last entry in the file).
        let old_leaf = before.last().and_then(|e| e["id"].as_str());
        assert_eq!(added[0]["parentId"].as_str(), old_leaf, "{}", src.display());
        let session = pi_engine::session::Session::open(&copy).expect("reopens");
        assert_eq!(session.entries().len(), after.len() - 1);
        // The request carried the old conversation.
        let req = &sc.fake.requests()[0].body;
        let n = req["messages"].as_array().map_or(0, |m| m.len());
        assert!(n >= 2, "{}: request has the context", src.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_session_opens_and_inspects() {
    let sc = Scenario::new(json_tools_script(), None).await;
    let out = sc.run(&[
        "--model",
        "fakeoai/fake-model",
        "-p",
        "Please work on notes.txt",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let file = &sc.session_files()[0];
    let session = pi_engine::session::Session::open(file).expect("Session::open");
    assert!(session.load_report().skipped_lines.is_empty());
    let inspect = Command::new(pi_bin())
        .args(["sessions", "inspect", "--json"])
        .arg(file)
        .output()
        .expect("pi sessions inspect");
    let ours_ok = inspect.status.success();
    let pi_fixture = Path::new(FIXTURES).join("sessions/json_tools.jsonl");
    let pi_inspect = Command::new(pi_bin())
        .args(["sessions", "inspect", "--json"])
        .arg(&pi_fixture)
        .output()
        .unwrap();
    assert_eq!(ours_ok, pi_inspect.status.success());
    if ours_ok {
        let roles = |o: &[u8]| -> Vec<String> {
            let v: Value = serde_json::from_slice(o).unwrap_or(Value::Null);
            let msgs = v
                .pointer("/context/messages")
                .or(v.get("messages"))
                .cloned()
                .unwrap_or(Value::Null);
            msgs.as_array()
                .into_iter()
                .flatten()
                .map(|m| m["role"].as_str().unwrap_or("").to_string())
                .collect()
        };
        assert_eq!(
            roles(&inspect.stdout),
            roles(&pi_inspect.stdout),
            "context shape"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_bad_input_gets_clear_errors() {
    let sc = Scenario::new(
        json!({"turns": [{"text": "ok", "delay": 0.5}, {"text": "second"}]}),
        None,
    )
    .await;
    let mut rpc = Rpc::start(&sc, &["--model", "fakeoai/fake-model"]);
    rpc.send_line("this is not json");
    rpc.send_line(r#"{"id":"u1","type":"no_such_command"}"#);
    // U+2028/U+2029 inside a string are content, not record separators.
    rpc.send_line("{\"id\":\"n1\",\"type\":\"set_session_name\",\"name\":\"a\u{2028}b\u{2029}c\"}");
    rpc.send_line(r#"{"id":"p1","type":"prompt","message":"first"}"#);
    rpc.send_line(r#"{"id":"p2","type":"prompt","message":"second while busy"}"#);
    rpc.send_line(r#"{"id":"m1","type":"set_model","provider":"nope","modelId":"x"}"#);
    rpc.send_line(r#"{"id":"e1","type":"get_entries","since":"does-not-exist"}"#);
    // a burst: all answered
    for i in 0..20 {
        rpc.send_line(&format!(r#"{{"id":"s{i}","type":"get_state"}}"#));
    }
    rpc.wait("parse error", |r| r.iter().any(|v| v["command"] == "parse"));
    let parse = rpc
        .records
        .iter()
        .find(|v| v["command"] == "parse")
        .cloned()
        .unwrap();
    assert_eq!(parse["success"], false);
    assert!(parse["error"]
        .as_str()
        .unwrap()
        .starts_with("Failed to parse command"));
    let unknown = rpc.response("u1");
    assert_eq!(unknown["error"], "Unknown command: no_such_command");
    assert_eq!(rpc.response("n1")["success"], true);
    assert_eq!(rpc.response("p1")["data"]["disposition"], "started");
    let busy = rpc.response("p2");
    assert_eq!(busy["success"], false);
    assert!(busy["error"]
        .as_str()
        .unwrap()
        .contains("already processing"));
    assert_eq!(rpc.response("m1")["error"], "Model not found: nope/x");
    assert_eq!(
        rpc.response("e1")["error"],
        "Entry not found: does-not-exist"
    );
    for i in 0..20 {
        assert_eq!(rpc.response(&format!("s{i}"))["success"], true);
    }
    rpc.wait("settled", |r| {
        r.iter().any(|v| v["type"] == "agent_settled")
    });
    let (_records, code) = rpc.close();
    assert_eq!(code, Some(0));
    let file = &sc.session_files()[0];
    let session = pi_engine::session::Session::open(file).expect("valid session file");
    assert_eq!(
        session.session_name().as_deref(),
        Some("a\u{2028}b\u{2029}c")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_give_clear_errors_and_valid_files() {
    // unreachable provider
    let sc = Scenario::new(
        json!({"turns": []}),
        Some(json!({"retry": {"enabled": false}})),
    )
    .await;
    let models = std::fs::read_to_string(sc.agent.join("models.json"))
        .unwrap()
        .replace(&format!("127.0.0.1:{}", sc.fake.port()), "127.0.0.1:9");
    std::fs::write(sc.agent.join("models.json"), models).unwrap();
    let out = sc.run(&["--model", "fakeoai/fake-model", "-p", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stderr).trim().is_empty());
    pi_engine::session::Session::open(&sc.session_files()[0])
        .expect("valid after connection error");

    // HTTP 500 with retries off, and a stream cut mid-way
    for turn in [
        json!({"http_error": {"status": 500, "body": {"error": {"message": "boom"}}}}),
        json!({"text": "partial answer that is cut", "cut_after": 2}),
    ] {
        let sc = Scenario::new(
            json!({"turns": [turn]}),
            Some(json!({"retry": {"enabled": false}})),
        )
        .await;
        let out = sc.run(&["--model", "fakeoai/fake-model", "-p", "hello"]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!String::from_utf8_lossy(&out.stderr).trim().is_empty());
        let file = &sc.session_files()[0];
        let s = pi_engine::session::Session::open(file).expect("valid session");
        let last = s.entry_value(s.leaf().unwrap());
        assert_eq!(last["message"]["stopReason"], "error");
    }

    // unknown model, bad flags
    let sc = Scenario::new(json!({"turns": []}), None).await;
    let out = sc.run(&["--provider", "nosuch", "--model", "x", "-p", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Unknown provider \"nosuch\""));
    // Pi (and we) accept an unknown id on a known provider as a custom model id, with a warning.
    let out = sc.run(&["--no-session", "--model", "fakeoai/custom-id", "-p", "hi"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Using custom model id"));
    assert_eq!(
        sc.fake.requests().last().unwrap().body["model"],
        "custom-id"
    );
    let out = sc.run(&["-r", "-p", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--resume"));
    let out = sc.run(&[
        "--session",
        "no-such-session",
        "--model",
        "fakeoai/fake-model",
        "-p",
        "hi",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-session"));
}

/// A context message that cannot be sent (a user message whose `content` is a number) is
/// left out of the request with a warning on stderr and, in JSON mode, a `warning` event;
/// the rest of the context still goes out and the file keeps the line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_context_message_is_reported_not_dropped_silently() {
    let sc = Scenario::new(
        json!({"turns": [{"text": "ok"}, {"text": "ok again"}]}),
        None,
    )
    .await;
    let file = sc.sessions.join("broken.jsonl");
    let cwd = sc.cwd.display().to_string();
    let lines = [
        json!({"type":"session","version":3,"id":"s-broken","timestamp":"2026-01-01T00:00:00.000Z","cwd":cwd}),
        json!({"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",
            "message":{"role":"user","content":"earlier question","timestamp":1}}),
        json!({"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z",
            "message":{"role":"assistant","content":[{"type":"text","text":"earlier answer"}],
            "api":"openai-completions","provider":"fakeoai","model":"fake-model",
            "usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,
                "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
            "stopReason":"stop","timestamp":2}}),
        json!({"type":"message","id":"u2","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z",
            "message":{"role":"user","content":42,"timestamp":3}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &text).unwrap();
    let path = file.display().to_string();

    let out = sc.run(&[
        "--session",
        &path,
        "--model",
        "fakeoai/fake-model",
        "-p",
        "next",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Warning: context message 3 cannot be read and was left out of the request: user message"),
        "{stderr}"
    );
    let sent = sc.fake.requests()[0].body["messages"].to_string();
    assert!(
        sent.contains("earlier question")
            && sent.contains("earlier answer")
            && sent.contains("next"),
        "{sent}"
    );
    assert!(
        std::fs::read_to_string(&file).unwrap().starts_with(&text),
        "the file keeps every line"
    );

    let out = sc.run(&[
        "--session",
        &path,
        "--model",
        "fakeoai/fake-model",
        "--mode",
        "json",
        "again",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let warnings: Vec<Value> = json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["type"] == "warning")
        .collect();
    assert_eq!(warnings.len(), 1, "one warning per request");
    assert!(warnings[0]["message"]
        .as_str()
        .unwrap()
        .starts_with("context message 3 cannot be read"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_stdin_and_file_args_join_the_prompt() {
    let sc = Scenario::new(json!({"turns": [{"text": "ok"}]}), None).await;
    std::fs::write(sc.cwd.join("a.txt"), "file body").unwrap();
    let mut child = sc
        .command(&[
            "--model",
            "fakeoai/fake-model",
            "--no-session",
            "-p",
            "@a.txt",
            "question",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"piped text\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let body = &sc.fake.requests()[0].body;
    let user = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    let text = user["content"].to_string();
    assert!(
        text.contains("piped text") && text.contains("file body") && text.contains("question"),
        "{text}"
    );
}

// ----------------------------------------------------------------------------- abort, queues, stores

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_abort_stops_tools_and_stream() {
    let sc = Scenario::new(
        json!({"turns": [
            {"text": "Sleeping.", "tool_calls": [tc("bash", json!({"command": "sleep 30; echo never"}))]},
            {"text": "slow answer", "delay": 30},
            {"text": "after abort"},
        ]}),
        None,
    )
    .await;
    let mut rpc = Rpc::start(&sc, &["--model", "fakeoai/fake-model"]);
    rpc.send_line(r#"{"id":"p1","type":"prompt","message":"run something slow"}"#);
    rpc.wait("tool start", |r| {
        r.iter().any(|v| v["type"] == "tool_execution_start")
    });
    let started = Instant::now();
    rpc.send_line(r#"{"id":"a1","type":"abort"}"#);
    rpc.wait("settled", |r| {
        r.iter().any(|v| v["type"] == "agent_settled")
    });
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "abort ends the tool promptly"
    );
    let settled = rpc
        .records
        .iter()
        .find(|v| v["type"] == "agent_settled")
        .cloned()
        .unwrap();
    assert_eq!(settled["aborted"], true);
    let end = rpc
        .records
        .iter()
        .find(|v| v["type"] == "tool_execution_end")
        .cloned()
        .unwrap();
    assert_eq!(end["isError"], true);
    assert_eq!(rpc.response("a1")["success"], true);
    // The next prompt works; abort while the provider is still answering.
    rpc.send_line(r#"{"id":"p2","type":"prompt","message":"slow answer please"}"#);
    rpc.wait("second start", |r| {
        r.iter().filter(|v| v["type"] == "agent_start").count() >= 2
    });
    std::thread::sleep(Duration::from_millis(300));
    rpc.send_line(r#"{"id":"a2","type":"abort"}"#);
    rpc.wait("second settled", |r| {
        r.iter().filter(|v| v["type"] == "agent_settled").count() >= 2
    });
    let last_end = rpc
        .records
        .iter()
        .rev()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .cloned()
        .unwrap();
    assert_eq!(last_end["message"]["stopReason"], "aborted");
    let (_r, code) = rpc.close();
    assert_eq!(code, Some(0));
    let s = pi_engine::session::Session::open(&sc.session_files()[0]).expect("valid file");
    let last = s.entry_value(s.leaf().unwrap());
    assert_eq!(
        last["message"]["stopReason"], "aborted",
        "aborted answer persisted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_steering_mode_all_delivers_every_message_at_once() {
    let sc = Scenario::new(
        json!({"turns": [
            {"text": "Sleeping.", "tool_calls": [tc("bash", json!({"command": "sleep 1; echo slept"}))]},
            {"text": "Handled both."},
        ]}),
        None,
    )
    .await;
    let mut rpc = Rpc::start(&sc, &["--model", "fakeoai/fake-model"]);
    rpc.send_line(r#"{"id":"m","type":"set_steering_mode","mode":"all"}"#);
    assert_eq!(rpc.response("m")["success"], true);
    rpc.send_line(r#"{"id":"p1","type":"prompt","message":"go"}"#);
    rpc.wait("tool start", |r| {
        r.iter().any(|v| v["type"] == "tool_execution_start")
    });
    rpc.send_line(r#"{"id":"s1","type":"steer","message":"first steer"}"#);
    rpc.send_line(
        r#"{"id":"s2","type":"prompt","message":"second steer","streamingBehavior":"steer"}"#,
    );
    assert_eq!(rpc.response("s2")["data"]["disposition"], "queued");
    rpc.wait("settled", |r| {
        r.iter().any(|v| v["type"] == "agent_settled")
    });
    let (_r, code) = rpc.close();
    assert_eq!(code, Some(0));
    let reqs = our_requests(&sc.fake);
    assert_eq!(
        reqs.len(),
        2,
        "both steering messages go out with one request"
    );
    let tail: Vec<&String> = reqs[1].1.iter().rev().take(2).collect();
    assert_eq!(tail, ["user[text:second steer]", "user[text:first steer]"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_and_redb_stores_continue_sessions() {
    for kind in ["sqlite", "redb"] {
        let sc = Scenario::new(json!({"turns": [{"text": "one"}, {"text": "two"}]}), None).await;
        let db = sc.sessions.join(format!("store.{kind}"));
        let spec = format!("{kind}:{}", db.display());
        let r1 = sc.run(&[
            "--session-store",
            &spec,
            "--model",
            "fakeoai/fake-model",
            "-p",
            "first",
        ]);
        assert_eq!(
            r1.status.code(),
            Some(0),
            "{kind}: {}",
            String::from_utf8_lossy(&r1.stderr)
        );
        let r2 = sc.run(&["--session-store", &spec, "-c", "-p", "second"]);
        assert_eq!(
            r2.status.code(),
            Some(0),
            "{kind}: {}",
            String::from_utf8_lossy(&r2.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&r2.stdout), "two\n");
        let shapes = our_requests(&sc.fake);
        assert_eq!(
            shapes[1].1.iter().filter(|m| m.starts_with("user")).count(),
            2,
            "{kind}: -c continued the stored session"
        );
        assert!(db.exists(), "{kind}: database written");
    }
}

/// A context-overflow error compacts (reason `overflow`, `willRetry: true`), hides the failed
/// attempt and retries once, like Pi's `_checkCompaction` case 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_compacts_and_retries() {
    let long = "words to fill the context ".repeat(20);
    let sc = Scenario::new(
        json!({"turns": [
            {"text": format!("A1 {long}")},
            {"text": format!("A2 {long}")},
            {"http_error": {"status": 400, "body": {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."}}}},
            {"text": "## Goal\nOverflow summary."},
            // the kept part starts inside the Q3 turn: a turn-prefix summary follows
            {"text": "## Goal\nTurn prefix summary."},
            {"text": "A3 after recovery"},
        ]}),
        Some(json!({"retry": {"enabled": false}, "compaction": {"keepRecentTokens": 10}})),
    )
    .await;
    let mut rpc = Rpc::start(&sc, &["--model", "fakeoai/fake-model"]);
    for (i, q) in ["Q1", "Q2", "Q3"].iter().enumerate() {
        rpc.send_line(&format!(
            r#"{{"id":"p{i}","type":"prompt","message":"{q}"}}"#
        ));
        rpc.wait("settled", |r| {
            r.iter().filter(|v| v["type"] == "agent_settled").count() > i
        });
    }
    let (records, code) = rpc.close();
    assert_eq!(code, Some(0));
    let end = records
        .iter()
        .find(|v| v["type"] == "compaction_end")
        .expect("compaction_end");
    assert_eq!(end["reason"], "overflow");
    assert_eq!(end["willRetry"], true);
    assert!(end["result"]["summary"]
        .as_str()
        .unwrap()
        .contains("Overflow summary"));
    let kinds: Vec<String> = our_requests(&sc.fake).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        kinds,
        ["turn", "turn", "turn", "summary", "summary", "turn"]
    );
    let last_req = &our_requests(&sc.fake)[5].1;
    assert!(
        last_req.iter().any(|m| m.contains("Q3")),
        "the retry resends the prompt"
    );
    assert_eq!(
        records
            .iter()
            .rev()
            .find(|v| v["type"] == "message_end")
            .unwrap()["message"]["content"][0]["text"],
        "A3 after recovery"
    );
    let file = read_jsonl(&sc.session_files()[0]);
    let kinds: Vec<&str> = file.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(
        kinds.contains(&"context_edit") && kinds.contains(&"compaction"),
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_templates_expand_and_are_listed() {
    let sc = Scenario::new(json!({"turns": [{"text": "hi"}]}), None).await;
    std::fs::create_dir_all(sc.agent.join("prompts")).unwrap();
    std::fs::write(
        sc.agent.join("prompts/greet.md"),
        "---\ndescription: Greet someone\n---\nSay hello to $1.",
    )
    .unwrap();
    let out = sc.run(&[
        "--no-session",
        "--model",
        "fakeoai/fake-model",
        "-p",
        "/greet World",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shape = &our_requests(&sc.fake)[0].1;
    assert!(
        shape.iter().any(|m| m == "user[text:Say hello to World.]"),
        "{shape:?}"
    );
    let mut rpc = Rpc::start(&sc, &["--no-session", "--model", "fakeoai/fake-model"]);
    rpc.send_line(r#"{"id":"c","type":"get_commands"}"#);
    let r = rpc.response("c");
    // Pi lists its built-in extensions' commands first, then prompt templates.
    let commands = &r["data"]["commands"];
    assert_eq!(commands[0]["name"], "llama");
    assert_eq!(commands[1]["name"], "mcp");
    assert_eq!(commands[1]["sourceInfo"]["path"], "builtin:mcp");
    assert_eq!(commands[2]["name"], "greet");
    assert_eq!(commands[2]["source"], "prompt");
    assert_eq!(commands[2]["sourceInfo"]["source"], "auto");
    rpc.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_and_id_prefix_open_existing_sessions() {
    let sc = Scenario::new(
        json!({"turns": [{"text": "forked answer"}, {"text": "by id"}]}),
        None,
    )
    .await;
    let src = Path::new(FIXTURES).join("sessions/print_plain.jsonl");
    let copy = sc
        .sessions
        .join("2026-11-30T13-49-25-872Z_01a22cb7-b1ea-7305-9966-094fe807b477.jsonl");
    copy_into_cwd(&src, &copy, &sc.cwd);
    let before = read_jsonl(&copy);
    let out = sc.run(&["--fork", copy.to_str().unwrap(), "-p", "in the fork"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read_jsonl(&copy), before, "--fork leaves the source alone");
    let files = sc.session_files();
    assert_eq!(files.len(), 2);
    let fork = files.iter().find(|f| **f != copy).unwrap();
    let lines = read_jsonl(fork);
    assert_eq!(lines[0]["parentSession"], copy.display().to_string());
    assert_eq!(
        &lines[1..before.len()],
        &before[1..],
        "entries copied verbatim"
    );
    assert_eq!(
        lines.last().unwrap()["message"]["content"][0]["text"],
        "forked answer"
    );
    // an id prefix finds the session in the session dir
    let out = sc.run(&["--session", "01a22cb7-b1ea", "-p", "by prefix"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "by id\n");
    assert_eq!(read_jsonl(&copy).len(), before.len() + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_bash_streams_and_abort_bash_cancels() {
    let sc = Scenario::new(json!({"turns": []}), None).await;
    let mut rpc = Rpc::start(&sc, &["--model", "fakeoai/fake-model"]);
    let marker = sc.cwd.join("survived");
    rpc.send_line(&format!(
        r#"{{"id":"b1","type":"bash","command":"echo first; (sleep 2; touch {}) & sleep 30; echo never"}}"#,
        marker.display()
    ));
    rpc.wait("first output", |r| {
        r.iter()
            .any(|v| v["type"] == "bash_execution_update" && v["id"] == "b1")
    });
    let started = Instant::now();
    rpc.send_line(r#"{"id":"x","type":"abort_bash"}"#);
    let r = rpc.response("b1");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(r["data"]["cancelled"], true);
    assert_eq!(r["data"]["output"], "first\n");
    assert_eq!(rpc.response("x")["success"], true);
    let (_r, code) = rpc.close();
    assert_eq!(code, Some(0));
    // Nothing but a bash run: like Pi, no conversation yet, so no file.
    assert!(sc.session_files().is_empty());
    // The whole process group died: the background job never ran its `touch`.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!marker.exists(), "background process outlived abort_bash");
}

/// A transient provider error during a manual compaction is retried, and RPC clients see
/// Pi's `summarization_retry_*` events (attempt, budget, delay, error; then the source).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_compaction_retries_transient_summary_errors_with_events() {
    let long = |tag: &str| {
        format!(
            "{tag} {}",
            "words to make the turn long enough. ".repeat(20)
        )
    };
    let overloaded = json!({"http_error": {"status": 503,
        "body": {"error": {"message": "fake overloaded"}}}});
    let sc = Scenario::new(
        json!({"turns": [
            {"text": long("A1")},
            {"text": long("A2")},
            overloaded,
            {"text": "## Goal\nCompacted after a retry."},
            {"text": "## Goal\nTurn prefix, if the cut split a turn."},
        ]}),
        Some(json!({"compaction": {"keepRecentTokens": 60}, "retry": {"baseDelayMs": 10}})),
    )
    .await;
    let mut rpc = Rpc::start(&sc, &["--model", "fakeoai/fake-model"]);
    for (i, q) in ["Q1", "Q2"].iter().enumerate() {
        let line = json!({"id": format!("p{i}"), "type": "prompt", "message": long(q)});
        rpc.send_line(&line.to_string());
        rpc.wait("settled", |r| {
            r.iter().filter(|v| v["type"] == "agent_settled").count() > i
        });
    }
    rpc.send_line(r#"{"id":"c1","type":"compact"}"#);
    let response = rpc.response("c1");
    assert_eq!(response["success"], true, "{response}");
    let retry: Vec<Value> = rpc
        .records
        .iter()
        .filter(|v| {
            v["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("summarization_retry"))
        })
        .cloned()
        .collect();
    assert_eq!(retry.len(), 3, "{retry:#?}");
    assert_eq!(retry[0]["type"], "summarization_retry_scheduled");
    assert_eq!(retry[0]["attempt"], 1);
    assert_eq!(retry[0]["maxAttempts"], 3);
    assert_eq!(retry[0]["delayMs"], 10);
    assert!(
        retry[0]["errorMessage"]
            .as_str()
            .is_some_and(|m| m.contains("overloaded")),
        "{}",
        retry[0]
    );
    assert_eq!(
        retry[1],
        json!({"type": "summarization_retry_attempt_start", "source": "compaction", "reason": "manual"})
    );
    assert_eq!(retry[2], json!({"type": "summarization_retry_finished"}));
    // The events come between compaction_start and compaction_end.
    let position = |pred: &dyn Fn(&Value) -> bool| rpc.records.iter().position(pred);
    let start = position(&|v| v["type"] == "compaction_start").expect("compaction_start");
    let end = position(&|v| v["type"] == "compaction_end").expect("compaction_end");
    let scheduled = position(&|v| v["type"] == "summarization_retry_scheduled").expect("scheduled");
    assert!(start < scheduled && scheduled < end);
    let (_records, code) = rpc.close();
    assert_eq!(code, Some(0));
    let entries = read_jsonl(&sc.session_files()[0]);
    let compaction = entries
        .iter()
        .find(|e| e["type"] == "compaction")
        .expect("compaction entry");
    assert!(compaction["summary"]
        .as_str()
        .unwrap_or("")
        .contains("Compacted after a retry."));
}

/// `--session` on a session of another directory works there from the start (tools run in
/// it); once that directory is gone, print mode exits 1 with Pi's message instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_session_from_another_dir_works_there_or_errors_when_gone() {
    let sc = Scenario::new(
        json!({"turns": [
            {"tool_calls": [tc("bash", json!({"command": "pwd"}))]},
            {"text": "You are elsewhere."},
        ]}),
        None,
    )
    .await;
    let root = sc.cwd.parent().unwrap().canonicalize().unwrap();
    let other = root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let file = sc.sessions.join("elsewhere.jsonl");
    let header = json!({"type": "session", "version": 3, "id": "elsewhere-session",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": other.display().to_string()});
    std::fs::write(&file, format!("{header}\n")).unwrap();
    let file_arg = file.display().to_string();
    let args = [
        "--model",
        "fakeoai/fake-model",
        "--session",
        file_arg.as_str(),
        "-p",
        "Where am I?",
    ];

    let out = sc.run(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = read_jsonl(&file)
        .into_iter()
        .filter(|l| l["message"]["role"] == "toolResult")
        .collect();
    assert_eq!(results.len(), 1, "one bash result");
    let text = results[0]["message"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(text.trim(), other.display().to_string());

    std::fs::remove_dir_all(&other).unwrap();
    let before = std::fs::read(&file).unwrap();
    let out = sc.run(&args);
    assert_eq!(out.status.code(), Some(1));
    let here = sc.cwd.canonicalize().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "pi: Stored session working directory does not exist: {}\nSession file: {}\n\
             Current working directory: {}\n",
            other.display(),
            file.display(),
            here.display()
        )
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the session is untouched"
    );
}
