//! What the MCP end-to-end test files share: a temporary agent directory, working directory
//! and session directory, the fake LLM, runs of the real `pi` binary, and the Python `mcp`
//! SDK (for the streamable HTTP test server), installed once into `target/mcp-test-venv`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

pub const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");
/// The Python MCP SDK the HTTP test server runs on (FastMCP; 2.x renamed it).
pub const PYTHON_MCP_VERSION: &str = "1.30.0";

pub fn pi_bin() -> &'static str {
    env!("CARGO_BIN_EXE_pi")
}

static VENV: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The Python of `target/mcp-test-venv`, with `mcp` installed (by `.ci/run`, or here on
/// first use). Fails with what to install when Python, venv or pip cannot provide it.
pub fn python() -> PathBuf {
    let mut ready = VENV.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(python) = ready.as_ref() {
        return python.clone();
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-test-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(format!("installed-mcp-{PYTHON_MCP_VERSION}"));
    if !marker.exists() {
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap_or_else(|e| {
                panic!("the MCP HTTP tests need python3 (with venv) to run the Python MCP SDK, but `python3` cannot run: {e}. Install python3 and python3-venv.")
            });
        assert!(
            status.success(),
            "`python3 -m venv {}` failed: install python3-venv",
            venv.display()
        );
        let status = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(format!("mcp=={PYTHON_MCP_VERSION}"))
            .status()
            .unwrap();
        assert!(
            status.success(),
            "pip install mcp=={PYTHON_MCP_VERSION} into {} failed (network? PyPI?)",
            venv.display()
        );
        std::fs::write(&marker, "").unwrap();
    }
    *ready = Some(python.clone());
    python
}

pub struct Setup {
    pub tmp: tempfile::TempDir,
    pub agent: PathBuf,
    pub cwd: PathBuf,
    pub sessions: PathBuf,
    pub fake: Option<FakeLlm>,
}

impl Setup {
    pub async fn new(script: Option<Value>) -> Setup {
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
            tmp,
            agent,
            cwd,
            sessions,
            fake,
        }
    }

    pub fn pi_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut cmd = Command::new(pi_bin());
        cmd.args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run pi")
    }

    pub fn pi(&self, args: &[&str]) -> std::process::Output {
        self.pi_with_env(args, &[])
    }

    pub fn prompt(&self, extra: &[&str], message: &str) -> std::process::Output {
        let sessions = self.sessions.display().to_string();
        let mut args = vec!["--session-dir", &sessions, "--model", "fakeoai/fake-model"];
        args.extend_from_slice(extra);
        args.extend(["-p", message]);
        self.pi(&args)
    }

    pub fn write_mcp_json(&self, servers: Value) {
        std::fs::write(
            self.agent.join("mcp.json"),
            json!({"mcpServers": servers}).to_string(),
        )
        .unwrap();
    }

    pub fn session_file(&self) -> PathBuf {
        std::fs::read_dir(&self.sessions)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .expect("a session file")
    }

    pub fn session_entries(&self) -> Vec<Value> {
        std::fs::read_to_string(self.session_file())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The session file opened by `pi sessions inspect --json`: it must load cleanly.
    pub fn inspect_session(&self) -> Value {
        let out = Command::new(pi_bin())
            .args(["sessions", "inspect", "--json"])
            .arg(self.session_file())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pi sessions inspect failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub fn requests(&self) -> Vec<Value> {
        self.fake
            .as_ref()
            .unwrap()
            .requests()
            .into_iter()
            .map(|r| r.body)
            .collect()
    }

    /// The session's tool results: `(toolName, isError, first text)`.
    pub fn tool_results(&self) -> Vec<(String, bool, String)> {
        self.session_entries()
            .iter()
            .filter(|e| e["message"]["role"] == "toolResult")
            .map(|e| {
                let m = &e["message"];
                (
                    m["toolName"].as_str().unwrap_or_default().to_string(),
                    m["isError"].as_bool().unwrap_or_default(),
                    m["content"][0]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect()
    }
}

pub fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn tc(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

/// The tool names a provider request declares.
pub fn declared(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Tool result texts in a provider request (OpenAI-style `tool` messages).
pub fn tool_messages(body: &Value) -> Vec<String> {
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

/// The npm reference servers' version (as mcp_e2e.rs and codemode_e2e.rs install them).
pub const SERVER_VERSION: &str = "2026.8.31";

static INSTALL: Mutex<Option<PathBuf>> = Mutex::new(None);

/// `target/mcp-test-servers` with `@modelcontextprotocol/server-filesystem` and
/// `server-everything` installed (by `.ci/run`, or here with npm on first use; same marker
/// file as the other MCP test files). Fails saying what to install when npm cannot run.
pub fn servers_dir() -> PathBuf {
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
            .arg(format!("@modelcontextprotocol/server-filesystem@{SERVER_VERSION}"))
            .arg(format!("@modelcontextprotocol/server-everything@{SERVER_VERSION}"))
            .status()
            .unwrap_or_else(|e| {
                panic!("the MCP tests need npm and Node (>= 20) to install the reference MCP servers, but `npm` cannot run: {e}. Install Node.js and npm.")
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

/// `server-everything`'s entry point, for `node <it> stdio`.
pub fn everything_script() -> String {
    servers_dir()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// A recording of real Pi 1.6.0 under `fixtures/realpi/mcp/`.
pub fn recorded(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/mcp/{name}.json")).unwrap())
        .unwrap()
}

/// `pi --mode rpc` with commands sent one at a time: each waits for its response. Returns
/// every record the process wrote, in order.
pub fn rpc_session(s: &Setup, commands: &[Value]) -> Vec<Value> {
    rpc_session_with_env(s, commands, &[])
}

/// [`rpc_session`] with more environment variables.
pub fn rpc_session_with_env(s: &Setup, commands: &[Value], env: &[(&str, &str)]) -> Vec<Value> {
    use std::io::{BufRead, Write};
    let sessions = s.sessions.display().to_string();
    let mut child = std::process::Command::new(pi_bin())
        .args(["--mode", "rpc", "--session-dir", &sessions])
        .current_dir(&s.cwd)
        .env("PI_CODING_AGENT_DIR", &s.agent)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            tx.send(serde_json::from_str(&line).unwrap()).unwrap();
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    let mut records = Vec::new();
    for command in commands {
        writeln!(stdin, "{command}").unwrap();
        loop {
            let record = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("a response");
            let done = record["type"] == "response";
            records.push(record);
            if done {
                break;
            }
        }
    }
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    records.extend(rx.try_iter());
    assert!(status.success());
    records
}

/// The `notify` records of an RPC session: `(notifyType, message)`.
pub fn notices(records: &[Value]) -> Vec<(String, String)> {
    records
        .iter()
        .filter(|r| r["type"] == "extension_ui_request" && r["method"] == "notify")
        .map(|r| {
            (
                r["notifyType"].as_str().unwrap().to_string(),
                r["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}
