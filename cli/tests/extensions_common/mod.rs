//! Scaffolding shared by the extension end-to-end tests: a temp agent dir, cwd and session
//! dir, the fake LLM on 127.0.0.1 with real Pi's models.json pointed at it, our `pi` binary,
//! and readers for provider requests and the session file.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

const REALPI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");
const EXTENSIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/extensions");

pub fn pi_bin() -> &'static str {
    env!("CARGO_BIN_EXE_pi")
}

/// A file of fixtures/extensions by its plain absolute path (without `..`, as Pi and this
/// host resolve and report extension paths).
pub fn fixture(name: &str) -> String {
    let dir = Path::new(EXTENSIONS).canonicalize().unwrap();
    dir.join(name).display().to_string()
}

pub struct Setup {
    pub _tmp: tempfile::TempDir,
    pub agent: PathBuf,
    pub cwd: PathBuf,
    pub sessions: PathBuf,
    pub fake: FakeLlm,
}

impl Setup {
    pub async fn new(turns: Value) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("cwd");
        let sessions = tmp.path().join("sessions");
        for d in [&agent, &cwd, &sessions] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script: Script = serde_json::from_value(json!({ "turns": turns })).unwrap();
        let fake = FakeLlm::start(script).await.unwrap();
        let models = std::fs::read_to_string(format!("{REALPI}/tricky/agent/models.json"))
            .unwrap()
            .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
        std::fs::write(agent.join("models.json"), models).unwrap();
        Setup {
            _tmp: tmp,
            agent,
            cwd,
            sessions,
            fake,
        }
    }

    /// The fake LLM's OpenAI-compatible base URL (`…/v1`), for fixtures that take one.
    pub fn fake_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.fake.port())
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut all = vec!["--model", "fakeoai/fake-model"];
        all.extend(args);
        self.command_without_model(&all)
    }

    /// [`Setup::command`] where the test chooses the model (or none).
    pub fn command_without_model(&self, args: &[&str]) -> Command {
        let mut c = Command::new(pi_bin());
        c.arg("--session-dir")
            .arg(&self.sessions)
            .args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env("XDG_CACHE_HOME", self.agent.join("cache"))
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE");
        c
    }

    pub fn pi(&self, args: &[&str]) -> (i32, String, String) {
        outcome(self.command(args))
    }

    pub fn session_entries(&self) -> Vec<Value> {
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

    pub fn requests(&self) -> Vec<Value> {
        self.fake.requests().into_iter().map(|r| r.body).collect()
    }
}

/// Runs `command` with no stdin to its end: (exit code, stdout, stderr).
pub fn outcome(mut command: Command) -> (i32, String, String) {
    let out = command.stdin(Stdio::null()).output().expect("run pi");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn tc(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

/// A declared tool of a provider request (OpenAI chat completions).
pub fn declared<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body["tools"]
        .as_array()?
        .iter()
        .find(|t| t["function"]["name"] == name)
        .map(|t| &t["function"])
}

/// Tool result texts in a provider request.
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

/// The texts of the messages with one of `roles` in an OpenAI chat-completions request, in
/// order (a content array's text blocks joined by newlines).
pub fn message_texts<const N: usize>(roles: [&str; N], body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"].as_str().is_some_and(|r| roles.contains(&r)))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        })
        .collect()
}

pub fn tool_results(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .map(|e| &e["message"])
        .collect()
}

/// `pi --mode rpc` as a child: records written to its stdin, records read from its stdout
/// by a thread, so a record that never comes fails the test instead of hanging it.
pub struct Rpc {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    records: std::sync::mpsc::Receiver<Value>,
    /// Commands [`Rpc::model_ids`] sent, for their ids.
    asked: usize,
}

impl Rpc {
    pub fn start(setup: &Setup, args: &[&str]) -> Rpc {
        Rpc::start_with_env(setup, args, &[])
    }

    /// [`Rpc::start`] with extra environment variables for the process.
    pub fn start_with_env(setup: &Setup, args: &[&str], env: &[(&str, &str)]) -> Rpc {
        let mut all = args.to_vec();
        all.extend(["--mode", "rpc"]);
        let mut command = setup.command(&all);
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, records) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).unwrap();
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Rpc {
            child,
            stdin,
            records,
            asked: 0,
        }
    }

    pub fn send(&mut self, record: Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{record}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next record `wanted` accepts; the ones before it are returned too.
    pub fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut skipped = Vec::new();
        loop {
            let record = self
                .records
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no matching record ({e}); seen: {skipped:#?}"));
            if wanted(&record) {
                return (record, skipped);
            }
            skipped.push(record);
        }
    }

    /// The response to the command sent with `id`.
    pub fn response(&mut self, id: &str) -> Value {
        self.until(|r| r["type"] == "response" && r["id"] == id).0
    }

    /// The ids of `provider`'s models as `get_available_models` lists them now.
    pub fn model_ids(&mut self, provider: &str) -> Vec<String> {
        self.asked += 1;
        let id = format!("models-{}", self.asked);
        self.send(serde_json::json!({"type": "get_available_models", "id": id}));
        self.response(&id)["data"]["models"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["provider"] == provider)
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// Asks for `provider`'s models until they are `wanted` (a background refresh replaced
    /// them); when `meanwhile` is given, every earlier answer must be it. Gives up after
    /// about 30 s (a loaded CI machine runs the refresh's processes slowly).
    pub fn wait_for_models(&mut self, provider: &str, wanted: &[&str], meanwhile: Option<&[&str]>) {
        for asked in 1.. {
            let ids = self.model_ids(provider);
            if ids == wanted {
                return;
            }
            assert!(
                meanwhile.is_none_or(|m| ids == m) && asked < 600,
                "{ids:?} after {asked} asks"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Closes stdin and waits: whether `pi` exited successfully.
    pub fn finish(mut self) -> bool {
        drop(self.stdin.take());
        self.child.wait().unwrap().success()
    }
}

/// A JSON fixture of fixtures/extensions (recorded cases, real Pi's answers).
pub fn fixture_json(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{EXTENSIONS}/{name}")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Codemode's text without what changes from run to run: `Wall time 0.4 seconds` →
/// `Wall time <t>`, its docs path → `<docs>`.
pub fn normalized_codemode(text: &str) -> String {
    let wall = replace_between(text, "Wall time ", " seconds", "<t>");
    replace_between(&wall, "Read ", "/codemode.md first", "<docs>")
}

/// Replaces what lies between each `start` and the next `end` (on one line) by `with`.
pub fn replace_between(text: &str, start: &str, end: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(start) {
        let after = &rest[i + start.len()..];
        match after.find(end) {
            Some(j) if !after[..j].contains('\n') => {
                out.push_str(&rest[..i + start.len()]);
                out.push_str(with);
                rest = &after[j..];
            }
            _ => {
                out.push_str(&rest[..i + start.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Compares a run's provider requests with a case real Pi recorded
/// (scripts/tool-cases-record.sh): the tools declared in each request, and the tool results
/// the last one carries (codemode's timings and docs path aside).
pub fn assert_same_requests(name: &str, requests: &[Value], real: &Value) {
    let tool_names: Vec<Vec<String>> = requests
        .iter()
        .map(|b| {
            b["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .collect();
    let real_names: Vec<Vec<String>> = serde_json::from_value(real["requests"].clone()).unwrap();
    assert_eq!(tool_names, real_names, "{name}: declared tools per request");

    let results: Vec<String> = tool_messages(requests.last().unwrap())
        .iter()
        .map(|t| normalized_codemode(t))
        .collect();
    let real_results: Vec<String> = real["toolResults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| normalized_codemode(t.as_str().unwrap()))
        .collect();
    assert_eq!(results, real_results, "{name}: tool results");
}
