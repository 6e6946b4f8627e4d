//! MCP end to end: our `pi` binary against MCP servers nobody here wrote, the reference
//! servers `@modelcontextprotocol/server-filesystem` and `@modelcontextprotocol/server-everything`
//! from the npm registry, run with Node. The first run installs them with `npm` into
//! `target/mcp-test-servers` (cached for later runs; CI's `.ci/run` installs Node and npm).
//! Without `npm` the tests fail with a message saying so: they never skip.
//!
//! Covered: `pi mcp add/list/remove`, a `direct` tool called by the model through the fake
//! LLM (declared, result in the next request, ordinary toolCall/toolResult entries in the
//! session file), `--no-mcp`, the `mcp_servers` prompt section, a server that dies mid-call
//! and a server that does not answer in time (clear errors, nothing hangs).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");
const SERVER_VERSION: &str = "2026.8.31";

fn pi_bin() -> &'static str {
    env!("CARGO_BIN_EXE_pi")
}

static INSTALL: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The npm packages' directory, installed on first use.
fn servers_dir() -> PathBuf {
    let mut installed = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(dir) = installed.as_ref() {
        return dir.clone();
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-test-servers");
    let marker = dir.join(format!("installed-{SERVER_VERSION}"));
    if !marker.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new("npm")
            .args(["install", "--prefix"])
            .arg(&dir)
            .args(["--no-audit", "--no-fund", "--silent"])
            .arg(format!(
                "@modelcontextprotocol/server-filesystem@{SERVER_VERSION}"
            ))
            .arg(format!(
                "@modelcontextprotocol/server-everything@{SERVER_VERSION}"
            ))
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "the MCP tests need npm and Node (>= 20) to install the reference MCP \
                     servers, but `npm` cannot run: {e}. Install Node.js and npm."
                )
            });
        assert!(
            status.success(),
            "npm install of the MCP reference servers failed"
        );
        std::fs::write(&marker, "").unwrap();
    }
    *installed = Some(dir.clone());
    dir
}

fn server_script(package: &str) -> String {
    servers_dir()
        .join(format!(
            "node_modules/@modelcontextprotocol/{package}/dist/index.js"
        ))
        .display()
        .to_string()
}

struct Setup {
    _tmp: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
    sessions: PathBuf,
    fake: Option<FakeLlm>,
}

impl Setup {
    async fn new(script: Option<Value>) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("cwd");
        let sessions = tmp.path().join("sessions");
        for d in [&agent, &cwd, &sessions] {
            std::fs::create_dir_all(d).unwrap();
        }
        let fake = match script {
            Some(script) => {
                let script: Script = serde_json::from_value(script).unwrap();
                let fake = FakeLlm::start(script).await.unwrap();
                let models =
                    std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
                        .unwrap()
                        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
                std::fs::write(agent.join("models.json"), models).unwrap();
                Some(fake)
            }
            None => None,
        };
        Setup {
            _tmp: tmp,
            agent,
            cwd,
            sessions,
            fake,
        }
    }

    fn pi(&self, args: &[&str]) -> std::process::Output {
        Command::new(pi_bin())
            .args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE")
            .stdin(Stdio::null())
            .output()
            .expect("run pi")
    }

    fn prompt(&self, extra: &[&str], message: &str) -> std::process::Output {
        let sessions = self.sessions.display().to_string();
        let mut args = vec!["--session-dir", &sessions, "--model", "fakeoai/fake-model"];
        args.extend_from_slice(extra);
        args.extend(["-p", message]);
        self.pi(&args)
    }

    fn write_mcp_json(&self, servers: Value) {
        std::fs::write(
            self.agent.join("mcp.json"),
            json!({"mcpServers": servers}).to_string(),
        )
        .unwrap();
    }

    fn session_entries(&self) -> Vec<Value> {
        let file = std::fs::read_dir(&self.sessions)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .expect("a session file");
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn requests(&self) -> Vec<Value> {
        self.fake
            .as_ref()
            .unwrap()
            .requests()
            .into_iter()
            .map(|r| r.body)
            .collect()
    }
}

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tc(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

/// The tool names a provider request declares.
fn declared(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Tool result texts in a provider request (OpenAI-style `tool` messages).
fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_add_list_remove_against_real_servers() {
    let s = Setup::new(None).await;
    let fs = server_script("server-filesystem");
    let everything = server_script("server-everything");
    let cwd = s.cwd.display().to_string();
    let out = s.pi(&["mcp", "add", "fs", "--", "node", &fs, &cwd]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let global = s.agent.join("mcp.json");
    assert_eq!(
        stdout,
        format!(
            "Added global MCP server \"fs\" in {}.\nCheck it with: pi mcp list\n",
            global.display()
        )
    );
    let out = s.pi(&[
        "mcp",
        "add",
        "everything",
        "--exposure",
        "direct",
        "--env",
        "A=b",
        "--",
        "node",
        &everything,
        "stdio",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    let config: Value = serde_json::from_str(&std::fs::read_to_string(&global).unwrap()).unwrap();
    assert_eq!(
        config["mcpServers"]["everything"],
        json!({"command": "node", "args": [everything, "stdio"], "env": {"A": "b"}, "exposure": "direct"})
    );

    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("fs: connected, "), "{stdout}");
    assert!(lines[0].ends_with(" tools (codemode, global)"), "{stdout}");
    assert_eq!(lines[1], format!("  node {fs} {cwd}"));
    assert!(
        lines[2].starts_with("  tools: ") && lines[2].contains("read_text_file"),
        "{stdout}"
    );
    let everything_line = lines
        .iter()
        .position(|l| l.starts_with("everything: "))
        .unwrap();
    assert!(
        lines[everything_line].starts_with("everything: connected, ")
            && lines[everything_line].ends_with(" tools (direct, global)"),
        "{stdout}"
    );
    assert!(stdout.contains("get-sum"), "{stdout}");
    assert!(stdout.contains("  offers resources"), "{stdout}");

    // A broken server and a bad entry: reported, the others still connect, exit 1.
    let mut config = config;
    config["mcpServers"]["broken"] = json!({"command": "/nonexistent/mcp-server"});
    config["mcpServers"]["old"] = json!({"type": "sse", "url": "http://127.0.0.1:1/sse"});
    std::fs::write(&global, config.to_string()).unwrap();
    let out = s.pi(&["mcp", "list"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("fs: connected"), "{stdout}");
    assert!(stdout.contains("broken: failed (codemode, global)\n  /nonexistent/mcp-server\n  spawn /nonexistent/mcp-server ENOENT"), "{stdout}");
    assert!(stdout.contains(&format!(
        "config error: {}: server \"old\": legacy SSE transport is not supported; use the streamable HTTP URL",
        global.display()
    )), "{stdout}");
    let out = s.pi(&["mcp", "list", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["servers"][2]["name"], "broken");
    assert_eq!(report["servers"][2]["state"], "failed");

    let out = s.pi(&["mcp", "remove", "broken"]);
    assert_eq!(
        text(&out).0,
        format!(
            "Removed global MCP server \"broken\" from {}.\n",
            global.display()
        )
    );
    let out = s.pi(&["mcp", "remove", "broken"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out).1,
        format!(
            "No global MCP server named \"broken\" in {}.\n",
            global.display()
        )
    );
    let out = s.pi(&["mcp", "add", "x", "--url", "http://h/mcp", "--env", "A=b"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out).1, "--env only applies to stdio servers.\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_a_direct_mcp_tool_and_the_session_records_it() {
    let s = Setup::new(Some(json!({"turns": [
        {"text": "Reading.", "tool_calls": [tc("mcp__fs__read_text_file", json!({"path": "PLACEHOLDER"}))]},
        {"text": "The file says hello."},
    ]})))
    .await;
    let file = s.cwd.join("hello.txt");
    std::fs::write(&file, "hello-from-an-mcp-server\n").unwrap();
    // The script needs the absolute path the filesystem server allows.
    let script: Script = serde_json::from_value(json!({"turns": [
        {"text": "Reading.", "tool_calls": [tc("mcp__fs__read_text_file", json!({"path": file.display().to_string()}))]},
        {"text": "The file says hello."},
    ]}))
    .unwrap();
    s.fake.as_ref().unwrap().set_script(script);
    s.write_mcp_json(json!({
        "fs": {"command": "node", "args": [server_script("server-filesystem"), s.cwd.display().to_string()],
               "exposure": "hidden", "toolExposure": {"read_text_file": "direct"}},
        "everything": {"command": "node", "args": [server_script("server-everything"), "stdio"],
                       "description": "Everything, for tests"}
    }));
    let out = s.prompt(&[], "What does hello.txt say?");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "The file says hello.\n");
    let requests = s.requests();
    assert_eq!(requests.len(), 2);
    let tools = declared(&requests[0]);
    assert!(
        tools.contains(&"mcp__fs__read_text_file".to_string()),
        "{tools:?}"
    );
    assert!(
        !tools.iter().any(|t| t == "mcp__fs__write_file"),
        "hidden tools are not declared"
    );
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__everything")),
        "codemode tools are not declared"
    );
    assert_eq!(tool_messages(&requests[1]), ["hello-from-an-mcp-server\n"]);
    // The system prompt lists the codemode server with its description.
    let system = requests[0]["messages"][0]["content"].to_string();
    assert!(
        system.contains("- mcp__everything (codemode): Everything, for tests"),
        "{system}"
    );

    let entries = s.session_entries();
    let call = entries
        .iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .flat_map(|e| {
            e["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|b| b["type"] == "toolCall")
        .expect("a toolCall block");
    assert_eq!(call["name"], "mcp__fs__read_text_file");
    let result = entries
        .iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .expect("a toolResult");
    assert_eq!(result["message"]["toolName"], "mcp__fs__read_text_file");
    assert_eq!(result["message"]["toolCallId"], call["id"]);
    assert_eq!(result["message"]["isError"], false);
    assert_eq!(
        result["message"]["content"],
        json!([{"type": "text", "text": "hello-from-an-mcp-server\n"}])
    );
    assert_eq!(
        result["message"]["details"],
        json!({"server": "fs", "tool": "read_text_file"})
    );

    // --tools keeps MCP tools unless an entry starts with mcp__; --exclude-tools removes them.
    let declared_with = |flags: &[&str]| -> Vec<String> {
        s.fake
            .as_ref()
            .unwrap()
            .set_script(serde_json::from_value(json!({"turns": [{"text": "ok"}]})).unwrap());
        let out = s.prompt(flags, "hi");
        assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
        declared(&s.requests().pop().unwrap())
    };
    assert_eq!(
        declared_with(&["--tools", "read"]),
        ["read", "mcp__fs__read_text_file"]
    );
    assert_eq!(declared_with(&["--tools", "read,mcp__x*"]), ["read"]);
    assert_eq!(
        declared_with(&["--exclude-tools", "mcp__*", "--tools", "read"]),
        ["read"]
    );

    // --no-mcp: no server, no MCP tool declared.
    s.fake
        .as_ref()
        .unwrap()
        .set_script(serde_json::from_value(json!({"turns": [{"text": "ok"}]})).unwrap());
    let out = s.prompt(&["--no-mcp"], "hi");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    let last = s.requests().pop().unwrap();
    assert!(!declared(&last).iter().any(|t| t.starts_with("mcp__")));
}

/// A server that answers `initialize` and `tools/list`, then misbehaves on `tools/call`:
/// `die` exits mid-call, `hang` never answers.
fn misbehaving_server(dir: &Path) -> PathBuf {
    let path = dir.join("bad-server.js");
    std::fs::write(
        &path,
        r#"
const mode = process.argv[2];
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (line) => {
  const m = JSON.parse(line);
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion,
      capabilities: { tools: {} }, serverInfo: { name: "bad", version: "1" } } });
  } else if (m.method === "tools/list") {
    send({ jsonrpc: "2.0", id: m.id, result: { tools: [{ name: "work",
      inputSchema: { type: "object", properties: {} } }] } });
  } else if (m.method === "tools/call") {
    if (mode === "die") { process.stderr.write("bad-server: crashing now\n"); process.exit(3); }
  }
});
"#,
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dying_and_silent_servers_give_clear_errors() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__dies__work", json!({})), tc("mcp__hangs__work", json!({}))]},
        {"tool_calls": [tc("mcp__dies__work", json!({}))]},
        {"text": "Both failed."},
    ]})))
    .await;
    let bad = misbehaving_server(&s.cwd).display().to_string();
    s.write_mcp_json(json!({
        "dies": {"command": "node", "args": [bad, "die"], "exposure": "direct"},
        "hangs": {"command": "node", "args": [bad, "hang"], "exposure": "direct", "timeout": 1}
    }));
    let out = s.prompt(&[], "Work.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "Both failed.\n");
    let requests = s.requests();
    assert_eq!(
        tool_messages(&requests[1]),
        [
            "MCP connection closed",
            "MCP request timed out after 1000ms"
        ]
    );
    // The next call starts the dead server again (it dies again: the same clear error).
    assert_eq!(
        tool_messages(&requests[2]).last().unwrap(),
        "MCP connection closed"
    );
    let errors: Vec<Value> = s
        .session_entries()
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| e["message"]["isError"].clone())
        .collect();
    assert_eq!(errors, vec![json!(true); 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_keep_a_slow_call_alive() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__everything__trigger_long_running_operation", json!({"duration": 6, "steps": 12}))]},
        {"text": "Finished."},
    ]})))
    .await;
    // A 3 s timeout, a 6 s call with progress every 0.5 s: progress resets the timeout.
    s.write_mcp_json(json!({
        "everything": {"command": "node", "args": [server_script("server-everything"), "stdio"],
                       "exposure": "direct", "timeout": 3}
    }));
    let out = s.prompt(&[], "Run it.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let results = tool_messages(&s.requests()[1]);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].contains("Long running operation completed"),
        "{results:?}"
    );
}
