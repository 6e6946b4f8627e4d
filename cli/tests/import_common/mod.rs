//! What the `pi sessions import --from <agent>` test files share: a temporary HOME with an
//! agent directory and a working directory, runs of the real `pi sessions` binary there, the
//! imported session files, and reading JSONL and `inspect --json` output.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

/// Where the other agents look for their sessions; removed from every run so the tests only
/// see the temporary HOME (and whatever a test sets itself).
const AGENT_HOMES: &[&str] = &[
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
    "XDG_DATA_HOME",
];

/// A temporary HOME: `agent/` is Pi's agent directory, `work/` the working directory.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("agent")).unwrap();
        fs::create_dir_all(dir.path().join("work")).unwrap();
        Env { dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `pi sessions ARGS…` with extra environment variables.
    pub fn run_with(&self, args: &[&str], vars: &[(&str, &Path)]) -> Output {
        let mut cmd = Command::cargo_bin("pi").unwrap();
        cmd.current_dir(self.path("work"))
            .env("HOME", self.dir.path())
            .env("PI_CODING_AGENT_DIR", self.path("agent"))
            .env_remove("PI_SESSION_STORE")
            .env_remove("PI_CODING_AGENT_SESSION_DIR");
        for var in AGENT_HOMES {
            cmd.env_remove(var);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.arg("sessions").args(args).output().unwrap()
    }

    /// `pi sessions ARGS…`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[])
    }

    /// `pi sessions ARGS…`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "pi sessions {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The imported session files, by session id.
    pub fn imported(&self) -> HashMap<String, PathBuf> {
        let mut out = HashMap::new();
        let mut dirs = vec![self.path("agent/sessions")];
        while let Some(dir) = dirs.pop() {
            for e in fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    let head: Value = serde_json::from_str(
                        fs::read_to_string(&p).unwrap().lines().next().unwrap(),
                    )
                    .unwrap();
                    out.insert(head["id"].as_str().unwrap().to_string(), p);
                }
            }
        }
        out
    }
}

/// The non-blank lines of a JSONL file, parsed.
pub fn lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A field of `pi sessions inspect --json` output, read from where it starts (the tree in
/// this output nests deeper than serde_json's recursion limit).
pub fn inspect_field(inspect: &str, key: &str) -> Value {
    let at = inspect.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
    let mut values = serde_json::Deserializer::from_str(&inspect[at..]).into_iter::<Value>();
    values.next().unwrap().unwrap()
}

/// `v`, sorted (to compare collections whose order the mapping may change).
pub fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

/// The `text` of every block of a content array, one per line.
pub fn texts(content: &Value) -> String {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `pi --store sqlite:<tmp>/s.sqlite sessions import --from AGENT --all`, run twice: the first
/// run imports `count` sessions, the second finds them all there. Returns the ids the store
/// then lists.
pub fn import_all_into_sqlite(env: &Env, agent: &str, count: usize) -> HashSet<String> {
    let store = format!("sqlite:{}", env.path("s.sqlite").display());
    let args = ["--store", &store, "import", "--from", agent, "--all"];
    let out = env.ok(&args);
    assert!(out.contains(&format!("{count} imported")), "{out}");
    let out = env.ok(&args);
    assert!(out.contains(&format!("{count} already there")), "{out}");
    let list = env.ok(&["--store", &store, "list", "--all", "--json"]);
    let list: Value = serde_json::from_str(&list).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// A session file real Pi 1.6.0 wrote (fixtures/realpi/sessions).
pub fn realpi_session(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../fixtures/realpi/sessions/{name}.jsonl"))
}

/// What the model sees of a conversation: role, texts, tool calls with arguments, images,
/// results and whether they failed. Pi's `system` messages (tool declarations, `toolsAdded`)
/// are not conversation: the other agents have no record for them.
pub fn conversation(llm_messages: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in llm_messages.as_array().unwrap() {
        let role = m["role"].as_str().unwrap();
        if role == "system" {
            continue;
        }
        match &m["content"] {
            Value::String(s) => out.push(format!("{role}: {s}")),
            content => {
                let text = texts(content);
                if !text.is_empty() {
                    out.push(format!("{role}: {text}"));
                }
                for b in content.as_array().unwrap() {
                    match b["type"].as_str() {
                        Some("toolCall") => {
                            out.push(format!("call {} {} {}", b["id"], b["name"], b["arguments"]))
                        }
                        Some("image") => out.push(format!("{role}: image {}", b["mimeType"])),
                        _ => {}
                    }
                }
            }
        }
        if role == "toolResult" {
            out.push(format!("result {} error={}", m["toolCallId"], m["isError"]));
        }
    }
    out
}
