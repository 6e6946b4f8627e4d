//! Data safety end to end (issue 14, "Data and safety"): the real `pi` binary against
//! pi-fake-llm on 127.0.0.1, real files, links and processes. Each test failed before its fix.

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

/// One run's folders (agent dir, cwd, session dir) and its fake LLM.
struct Scenario {
    tmp: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
    sessions: PathBuf,
    _fake: FakeLlm,
}

impl Scenario {
    async fn new(turns: Value) -> Scenario {
        let tmp = tempfile::tempdir().expect("tempdir");
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("cwd");
        let sessions = tmp.path().join("sessions");
        for d in [&agent, &cwd, &sessions] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script: Script = serde_json::from_value(json!({ "turns": turns })).expect("script");
        let fake = FakeLlm::start(script).await.expect("fake llm");
        let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
            .unwrap()
            .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
        std::fs::write(agent.join("models.json"), models).unwrap();
        Scenario {
            tmp,
            agent,
            cwd,
            sessions,
            _fake: fake,
        }
    }

    /// `pi` in the scenario's cwd with its agent dir; no session dir flag.
    fn bare(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pi"));
        c.args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE");
        c
    }

    /// `pi --session-dir SESSIONS ARGS…`.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.bare(&["--session-dir", self.sessions.to_str().unwrap()]);
        c.args(args);
        c
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        let out = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run pi");
        out
    }
}

fn ok(out: &std::process::Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A recorded Pi session, its header `cwd` set to `cwd` (the recorded one is gone here).
fn pi_session_at(dst: &Path, cwd: &Path) {
    let text = std::fs::read_to_string(format!("{FIXTURES}/sessions/print_plain.jsonl")).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(first).unwrap();
    header["cwd"] = json!(cwd.display().to_string());
    std::fs::write(dst, format!("{header}\n{rest}")).unwrap();
}

/// The id of print_plain.jsonl.
const PLAIN_ID: &str = "01a22cb7-b1ea-7305-9966-094fe807b477";

/// A backup copy that a lookup by id finds first: its name carries the id and sorts first.
fn backup_of(sc: &Scenario, original: &Path) -> PathBuf {
    let backup = sc
        .sessions
        .join(format!("2000-01-01T00-00-00-000Z_{PLAIN_ID}.jsonl"));
    std::fs::copy(original, &backup).unwrap();
    backup
}

/// `pi --mode rpc`, one command at a time.
struct Rpc {
    child: Child,
    rx: mpsc::Receiver<Value>,
    records: Vec<Value>,
}

impl Rpc {
    fn start(mut command: Command) -> Rpc {
        let mut child = command
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
                let v = serde_json::from_str(&line).unwrap_or_else(|_| json!({"_raw": line}));
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

    fn send(&mut self, cmd: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{cmd}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits (at most a minute, a hang guard and no timing assert) for a record.
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(v) = self.records.iter().find(|v| pred(v)) {
                return v.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => self.records.push(v),
                Err(_) => panic!("timed out waiting for {what}: {:#?}", self.records),
            }
        }
    }

    fn call(&mut self, id: &str, mut cmd: Value) -> Value {
        cmd["id"] = json!(id);
        self.send(cmd);
        let resp = self.wait_for(id, |v| v["type"] == "response" && v["id"] == id);
        assert_eq!(resp["success"], true, "{resp}");
        resp
    }

    fn close(mut self) -> Vec<Value> {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("wait pi");
        while let Ok(v) = self.rx.recv_timeout(Duration::from_secs(5)) {
            self.records.push(v);
        }
        assert!(status.success(), "pi --mode rpc: {status}");
        self.records
    }
}

// ------------------------------------------------------------------ 1: the named file

/// `--session FILE` writes to FILE, not to another file of its folder with the same id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_flag_writes_to_the_named_file_not_to_a_copy_with_its_id() {
    let sc = Scenario::new(json!([{"text": "into the named file"}])).await;
    let named = sc.sessions.join("named.jsonl");
    pi_session_at(&named, &sc.cwd);
    let backup = backup_of(&sc, &named);
    let before = std::fs::read(&backup).unwrap();
    let lines = read_jsonl(&named).len();
    ok(&sc.run(&["--session", named.to_str().unwrap(), "-p", "hello"]));
    assert_eq!(
        std::fs::read(&backup).unwrap(),
        before,
        "the copy is untouched"
    );
    let after = read_jsonl(&named);
    assert_eq!(after.len(), lines + 2);
    assert_eq!(
        after.last().unwrap()["message"]["content"][0]["text"],
        "into the named file"
    );
}

/// `--session LINK` follows the link to its file, wherever that file is (Pi follows it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_flag_on_a_symlink_writes_through_it() {
    let sc = Scenario::new(json!([{"text": "through the link"}])).await;
    let elsewhere = sc.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let real = elsewhere.join("real.jsonl");
    pi_session_at(&real, &sc.cwd);
    let link = sc.sessions.join("link.jsonl");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let lines = read_jsonl(&real).len();
    ok(&sc.run(&["--session", link.to_str().unwrap(), "-p", "hello"]));
    assert!(link.is_symlink(), "the link stays a link");
    let after = read_jsonl(&real);
    assert_eq!(after.len(), lines + 2);
    assert_eq!(
        after.last().unwrap()["message"]["content"][0]["text"],
        "through the link"
    );
}

/// RPC `switch_session` writes to the named file too, and reports it as `sessionFile`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_switch_session_writes_to_the_named_file() {
    let sc = Scenario::new(json!([{"text": "switched"}])).await;
    let named = sc.sessions.join("named.jsonl");
    pi_session_at(&named, &sc.cwd);
    let backup = backup_of(&sc, &named);
    let before = std::fs::read(&backup).unwrap();
    let lines = read_jsonl(&named).len();
    let mut rpc = Rpc::start(sc.command(&["--mode", "rpc", "--model", "fakeoai/fake-model"]));
    rpc.call(
        "s",
        json!({"type": "switch_session", "sessionPath": named.display().to_string()}),
    );
    let state = rpc.call("g", json!({"type": "get_state"}));
    assert_eq!(state["data"]["sessionFile"], named.display().to_string());
    rpc.call("p", json!({"type": "prompt", "message": "hello"}));
    rpc.wait_for("agent_end", |v| v["type"] == "agent_end");
    rpc.close();
    assert_eq!(
        std::fs::read(&backup).unwrap(),
        before,
        "the copy is untouched"
    );
    assert_eq!(read_jsonl(&named).len(), lines + 2);
}

// ------------------------------------------- 4: empty files and new paths are fresh sessions

/// An empty session file is a fresh session written into that file (Pi writes its header at
/// once); a `--session` path that does not exist yet is created there with the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_file_or_a_new_path_starts_a_session_there() {
    let sc = Scenario::new(json!([{"text": "first answer"}, {"text": "second answer"}])).await;
    let empty = sc.sessions.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let out = sc.run(&["--session", empty.to_str().unwrap(), "-p", "hello"]);
    assert_eq!(ok(&out), "first answer\n");
    let lines = read_jsonl(&empty);
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["version"], 3);
    assert_eq!(
        lines[0]["cwd"],
        sc.cwd.canonicalize().unwrap().display().to_string()
    );
    assert!(lines[0]["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(
        lines.last().unwrap()["message"]["content"][0]["text"],
        "first answer"
    );

    // A relative path that does not exist: created there, nowhere else.
    let out = sc.run(&[
        "--session",
        "../sessions/new-here.jsonl",
        "-p",
        "hello again",
    ]);
    assert_eq!(ok(&out), "second answer\n");
    let created = sc.sessions.join("new-here.jsonl");
    let lines = read_jsonl(&created);
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(
        lines.last().unwrap()["message"]["content"][0]["text"],
        "second answer"
    );
    let mut names: Vec<String> = std::fs::read_dir(&sc.sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["empty.jsonl", "new-here.jsonl"]);
}

/// A file with content but no valid line is refused, named, and left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_with_only_garbage_is_refused_and_untouched() {
    let sc = Scenario::new(json!([{"text": "never"}])).await;
    let junk = sc.sessions.join("junk.jsonl");
    std::fs::write(&junk, "not json\n").unwrap();
    let out = sc.run(&["--session", junk.to_str().unwrap(), "-p", "hello"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("junk.jsonl"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&junk).unwrap(), "not json\n");
}

// ---------------------------------------------------------- 6: absolute parentSession

/// `--fork` with a relative path stores the source's absolute path, as Pi does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_stores_an_absolute_parent_session() {
    let sc = Scenario::new(json!([{"text": "forked"}])).await;
    let source = sc.sessions.join("source.jsonl");
    pi_session_at(&source, &sc.cwd);
    ok(&sc.run(&["--fork", "../sessions/./source.jsonl", "-p", "hello"]));
    let fork = std::fs::read_dir(&sc.sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| *p != source)
        .expect("the fork");
    let header = &read_jsonl(&fork)[0];
    let parent = header["parentSession"].as_str().unwrap();
    assert_eq!(
        Path::new(parent),
        sc.cwd
            .canonicalize()
            .unwrap()
            .parent()
            .unwrap()
            .join("sessions/source.jsonl")
    );
}

// ------------------------------------------------ 2: terminal escapes are shown, not obeyed

/// OSC 52 (writes the clipboard), CSI 2J (clears the screen), OSC 0 (window title), OSC 8
/// (a link hidden behind text), and the 8-bit CSI.
const HOSTILE: &str = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b]0;owned\x07\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\\u{9b}31m";

/// A session whose name, message text, label, entry ids and cwd all carry escapes.
fn hostile_session(dir: &Path) -> PathBuf {
    let file = dir.join("2026-01-01T00-00-00-000Z_hostile-1.jsonl");
    let lines = [
        json!({"type": "session", "version": 3, "id": "hostile-1",
               "timestamp": "2026-01-01T00:00:00.000Z", "cwd": format!("/tmp/x{HOSTILE}")}),
        json!({"type": "message", "id": "u1", "parentId": null,
               "timestamp": "2026-01-01T00:00:01.000Z",
               "message": {"role": "user", "content": format!("findme {HOSTILE} text"),
                           "timestamp": 1767225601000u64}}),
        json!({"type": "message", "id": format!("a1{HOSTILE}"), "parentId": "u1",
               "timestamp": "2026-01-01T00:00:02.000Z",
               "message": {"role": "assistant", "content": [{"type": "text", "text": format!("answer {HOSTILE}")}],
                           "api": "openai-completions", "provider": "p", "model": format!("m{HOSTILE}"),
                           "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                                     "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                           "stopReason": "stop", "timestamp": 1767225602000u64}}),
        json!({"type": "label", "id": "l1", "parentId": format!("a1{HOSTILE}"),
               "timestamp": "2026-01-01T00:00:03.000Z", "targetId": "u1", "label": format!("lbl{HOSTILE}")}),
        json!({"type": "session_info", "id": "n1", "parentId": "l1",
               "timestamp": "2026-01-01T00:00:04.000Z", "name": format!("name{HOSTILE}")}),
        // A parent that does not exist: `verify` quotes it.
        json!({"type": "custom", "id": "c1", "parentId": format!("gone{HOSTILE}"),
               "timestamp": "2026-01-01T00:00:05.000Z", "customType": "x"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file
}

fn assert_no_escapes(what: &str, out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let raw = String::from_utf8_lossy(bytes);
        assert!(
            !raw.chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{what}: a control character reached {stream}: {raw:?}"
        );
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_text_never_reaches_the_terminal_as_escapes() {
    let sc = Scenario::new(json!([])).await;
    let file = hostile_session(&sc.sessions);
    let file_arg = file.to_str().unwrap();
    let dir = sc.sessions.to_str().unwrap();

    let out = sc.bare(&["sessions", "show", file_arg]).output().unwrap();
    let shown = assert_no_escapes("show", &out);
    assert!(
        shown.contains("findme ^[]52;c;cm0gLXJmIH4=^G^[[2J"),
        "{shown}"
    );
    assert!(shown.contains("name    name^[]52"), "{shown}");
    assert!(shown.contains("[lbl^[]52"), "{shown}");
    assert!(shown.contains("a1^[]52"), "{shown}");
    assert!(shown.contains("cwd     /tmp/x^[]52"), "{shown}");
    assert!(shown.contains("M-^[31m"), "{shown}");

    let out = sc
        .bare(&["sessions", "list", "--all", "--session-dir", dir])
        .output()
        .unwrap();
    let listed = assert_no_escapes("list", &out);
    assert!(listed.contains("name^[]52"), "{listed}");

    let out = sc
        .bare(&["sessions", "search", "findme", "--session-dir", dir])
        .output()
        .unwrap();
    let found = assert_no_escapes("search", &out);
    assert!(found.contains("^[[2J"), "{found}");

    let out = sc.bare(&["sessions", "verify", file_arg]).output().unwrap();
    let verified = assert_no_escapes("verify", &out);
    assert!(verified.contains("gone^[]52"), "{verified}");

    let out = sc
        .bare(&["sessions", "stats", "--by", "model", "--session-dir", dir])
        .output()
        .unwrap();
    assert_no_escapes("stats", &out);
}

// ------------------------------------- 3: an untrusted project cannot move the session store

/// A cloned repository's `.pi/settings.json` names another session dir; `pi sessions list`,
/// `search` and `import` keep to the user's store until the project is trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_commands_ignore_an_untrusted_projects_store_settings() {
    let sc = Scenario::new(json!([])).await;
    let planted = sc.tmp.path().join("planted");
    std::fs::create_dir_all(&planted).unwrap();
    hostile_session(&planted);
    std::fs::create_dir_all(sc.cwd.join(".pi")).unwrap();
    std::fs::write(
        sc.cwd.join(".pi/settings.json"),
        json!({"sessionDir": planted.display().to_string()}).to_string(),
    )
    .unwrap();

    let out = sc.bare(&["sessions", "list", "--all"]).output().unwrap();
    assert!(ok(&out).is_empty(), "the planted session is not listed");
    let out = sc.bare(&["sessions", "search", "findme"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "no match outside the user's store"
    );

    let import = sc.tmp.path().join("import.jsonl");
    pi_session_at(&import, &sc.cwd);
    ok(&sc
        .bare(&["sessions", "import", import.to_str().unwrap()])
        .output()
        .unwrap());
    let user_store = sc.agent.join("sessions");
    assert!(user_store.is_dir(), "imported into the user's store");
    assert_eq!(
        std::fs::read_dir(&planted).unwrap().count(),
        1,
        "nothing written to the planted dir"
    );

    // Trusted (as the TUI's prompt records it): the project's settings apply.
    std::fs::write(
        sc.agent.join("trust.json"),
        json!({ sc.cwd.canonicalize().unwrap().display().to_string(): true }).to_string(),
    )
    .unwrap();
    let out = sc.bare(&["sessions", "list", "--all"]).output().unwrap();
    assert!(ok(&out).contains("hostile-1"));
}

// ---------------------------------------------- 8: message_end comes after the write

/// `pi --mode json`: every conversation `message_end` printed is in the session file by the
/// time the run ends in the order printed (the engine test
/// `message_end_comes_after_the_message_is_written` checks the moment of each event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_mode_message_ends_match_the_saved_messages_in_order() {
    let sc = Scenario::new(json!([
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "done"}
    ]))
    .await;
    let out = sc.run(&["--mode", "json", "--model", "fakeoai/fake-model", "hello"]);
    let stdout = ok(&out);
    let ended: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message_end")
        .map(|e| e["message"]["role"].clone())
        .collect();
    let file = std::fs::read_dir(&sc.sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let saved: Vec<Value> = read_jsonl(&file)
        .into_iter()
        .filter(|l| l["type"] == "message")
        .map(|l| l["message"]["role"].clone())
        .collect();
    assert_eq!(ended, saved);
    assert!(
        ended.ends_with(&[
            json!("user"),
            json!("assistant"),
            json!("toolResult"),
            json!("assistant")
        ]),
        "{ended:?}"
    );
}

// ------------------------------------------ 9: full-output temp files go with the process

/// A command whose output is truncated keeps its full output in `pi-bash-*.log` for the
/// model to read during the run; the file is removed when `pi` exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_output_temp_files_are_removed_when_pi_exits() {
    let sc = Scenario::new(json!([
        {"tool_calls": [{"name": "bash", "arguments": {"command": "seq 1 5000"}}]},
        {"text": "done"}
    ]))
    .await;
    let tmp = sc.tmp.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = sc
        .command(&["--model", "fakeoai/fake-model", "-p", "count"])
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    ok(&out);
    let file = std::fs::read_dir(&sc.sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let result = read_jsonl(&file)
        .into_iter()
        .find(|l| l["message"]["role"] == "toolResult")
        .expect("the bash result");
    let full = result["message"]["details"]["fullOutputPath"]
        .as_str()
        .expect("the output was truncated and saved");
    assert!(Path::new(full).starts_with(&tmp), "{full}");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

// ------------------------------------ 5: the history index is private and forgets deleted text

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The index is created 0600, and once a session file is deleted its text is gone from the
/// index file (no free page, no FTS segment, no WAL frame keeps it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_index_is_private_and_keeps_no_deleted_text() {
    use std::os::unix::fs::PermissionsExt;
    let sc = Scenario::new(json!([])).await;
    let secret = "zqxwvsecretword";
    let keep = sc.sessions.join("keep.jsonl");
    pi_session_at(&keep, &sc.cwd);
    let gone = sc.sessions.join("gone.jsonl");
    let line = json!({"type": "message", "id": "u9", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": format!("my token {secret} {}", "pad ".repeat(2000)),
                    "timestamp": 1767225601000u64}});
    std::fs::write(
        &gone,
        format!(
            "{}\n{line}\n",
            json!({"type": "session", "version": 3, "id": "gone-1",
                   "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"})
        ),
    )
    .unwrap();
    let dir = sc.sessions.to_str().unwrap();
    let out = sc
        .bare(&["sessions", "search", secret, "--session-dir", dir])
        .output()
        .unwrap();
    assert!(ok(&out).contains("gone"), "indexed");
    let indexes: Vec<PathBuf> = std::fs::read_dir(&sc.agent)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("history")
        })
        .collect();
    assert!(!indexes.is_empty());
    for index in &indexes {
        let mode = std::fs::metadata(index).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", index.display());
    }

    std::fs::remove_file(&gone).unwrap();
    let out = sc
        .bare(&["sessions", "search", secret, "--session-dir", dir])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "no match once deleted");
    for index in std::fs::read_dir(&sc.agent).unwrap() {
        let path = index.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("history")
        {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !contains(&bytes, secret.as_bytes()),
                "{} still holds the deleted text",
                path.display()
            );
        }
    }
}

// ----------------------------------- 7: a huge first message is previewed, not printed whole

/// A 4 MB first message: `pi sessions list` prints a capped preview, and the history index
/// holds at most 64 KiB of its text, yet a word near its start is still found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_first_message_is_previewed_and_indexed_in_part() {
    let sc = Scenario::new(json!([])).await;
    let huge = format!("needleword {}", "lorem ipsum ".repeat(350_000));
    assert!(huge.len() > 4_000_000);
    let file = sc.sessions.join("huge.jsonl");
    let lines = [
        json!({"type": "session", "version": 3, "id": "huge-1",
               "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/tmp"}),
        json!({"type": "message", "id": "u1", "parentId": null,
               "timestamp": "2026-01-01T00:00:01.000Z",
               "message": {"role": "user", "content": huge, "timestamp": 1767225601000u64}}),
    ];
    std::fs::write(
        &file,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let dir = sc.sessions.to_str().unwrap();

    for args in [
        vec!["sessions", "list", "--all", "--session-dir", dir],
        vec!["sessions", "list", "--all", "--json", "--session-dir", dir],
    ] {
        let out = ok(&sc.bare(&args).output().unwrap());
        assert!(out.contains("needleword lorem"), "{out}");
        // 500 characters of preview plus the row's other fields.
        assert!(out.len() < 2_000, "{} bytes printed", out.len());
    }

    let out = sc
        .bare(&["sessions", "search", "needleword", "--session-dir", dir])
        .output()
        .unwrap();
    assert!(ok(&out).contains("huge-1"));
    let index: u64 = std::fs::read_dir(&sc.agent)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("history")
        })
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(index < 1_000_000, "the index is {index} bytes");
}
