//! Failed writes against the real `pi` binary (issue #8, "Durability"): a write that fails
//! (file size limit, an unwritable session path) is reported, the session `pi` holds in memory
//! does not move ahead of the file, and the file stays valid.
//!
//! Disk full (ENOSPC) needs a small filesystem to fill, which needs a mount this container
//! cannot make; a file size limit (`RLIMIT_FSIZE`, what `ulimit -f` sets) fails the same
//! `write` call with EFBIG after writing what fits, so the EFBIG test covers that path.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");
const MODEL: &str = "fakeoai/fake-model";

/// Agent dir, cwd and session dir next to a fake provider.
struct Scenario {
    _tmp: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
    sessions: PathBuf,
    _fake: FakeLlm,
}

impl Scenario {
    async fn new(script: Value) -> Scenario {
        let tmp = tempfile::tempdir().expect("tempdir");
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("cwd");
        let sessions = tmp.path().join("sessions");
        for d in [&agent, &cwd, &sessions] {
            std::fs::create_dir_all(d).expect("create dir");
        }
        let script: Script = serde_json::from_value(script).expect("script");
        let fake = FakeLlm::start(script).await.expect("fake llm");
        let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
            .expect("models.json fixture")
            .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
        std::fs::write(agent.join("models.json"), models).expect("write models.json");
        std::fs::write(
            agent.join("settings.json"),
            json!({"retry": {"enabled": false}}).to_string(),
        )
        .expect("write settings.json");
        Scenario {
            _tmp: tmp,
            agent,
            cwd,
            sessions,
            _fake: fake,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pi"));
        c.arg("--session-dir")
            .arg(&self.sessions)
            .args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE");
        c
    }

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

/// Sets `RLIMIT_FSIZE` to `bytes` in the child and ignores SIGXFSZ there, so a write past the
/// limit returns EFBIG (after writing what fits) instead of killing the process.
fn limit_file_size(cmd: &mut Command, bytes: u64) {
    // SAFETY: between fork and exec the closure only calls async-signal-safe functions
    // (`signal`, `setrlimit`) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: bytes as libc::rlim_t,
                rlim_max: bytes as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `pi --mode rpc` with its stdout read into records on a thread.
struct Rpc {
    child: Child,
    rx: mpsc::Receiver<Value>,
    records: Vec<Value>,
}

impl Rpc {
    fn spawn(mut cmd: Command) -> Rpc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pi --mode rpc");
        let stdout = child.stdout.take().expect("stdout");
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

    fn send(&mut self, cmd: Value) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .expect("write command");
        stdin.flush().expect("flush command");
    }

    fn wait(&mut self, what: &str, mut pred: impl FnMut(&[Value]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !pred(&self.records) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => self.records.push(v),
                Err(_) => {
                    let _ = self.child.kill();
                    let mut stderr = String::new();
                    if let Some(mut e) = self.child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
                    }
                    panic!("no {what}; records: {:#?}; stderr: {stderr}", self.records)
                }
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
            .expect("response seen")
    }

    /// Closes stdin and returns the exit code and stderr.
    fn close(mut self) -> (Option<i32>, String) {
        drop(self.child.stdin.take());
        let out = self.child.wait_with_output().expect("wait pi");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The `message` entries of a session file, by role.
fn file_roles(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("read session file");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "message")
        .map(|v| v["message"]["role"].as_str().unwrap_or("").to_string())
        .collect()
}

fn verify(sc: &Scenario, file: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(["sessions", "verify", "--json"])
        .arg(file)
        .env("PI_CODING_AGENT_DIR", &sc.agent)
        .stdin(Stdio::null())
        .output()
        .expect("run pi sessions verify")
}

/// Runs one prompt over RPC and returns the `agent_settled` event and the roles `pi` holds
/// in memory afterwards (`get_messages`), then the exit code and stderr.
fn prompt_over_rpc(cmd: Command, text: &str) -> (Value, Vec<String>, Option<i32>, String) {
    let mut rpc = Rpc::spawn(cmd);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": text}));
    assert_eq!(rpc.response("p1")["success"], true, "{:#?}", rpc.records);
    rpc.wait("agent_settled", |r| {
        r.iter().any(|v| v["type"] == "agent_settled")
    });
    let settled = rpc
        .records
        .iter()
        .find(|v| v["type"] == "agent_settled")
        .cloned()
        .expect("agent_settled seen");
    rpc.send(json!({"id": "m1", "type": "get_messages"}));
    let messages = rpc.response("m1");
    let roles = messages["data"]["messages"]
        .as_array()
        .expect("get_messages data")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("").to_string())
        .collect();
    let (code, stderr) = rpc.close();
    (settled, roles, code, stderr)
}

/// `pi sessions verify --json` on one file: its problems (empty when valid).
fn verify_problems(sc: &Scenario, file: &Path) -> Vec<Value> {
    let out = verify(sc, file);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify output ({e}): {out:?}"));
    report["problems"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_size_limit_is_reported_and_memory_stays_with_the_file() {
    let sc = Scenario::new(json!({"turns": [{"text": "first answer"}, {"text": "second answer"}]}))
        .await;
    let out = sc.run(&["--model", MODEL, "-p", "first question"]);
    assert!(out.status.success(), "first run: {out:?}");
    let files = sc.session_files();
    assert_eq!(files.len(), 1, "one session file: {files:?}");
    let file = files[0].clone();
    let path = file.display().to_string();
    let before = std::fs::read(&file).expect("read session");
    assert_eq!(file_roles(&file), ["system", "user", "assistant"]);

    // Room for 100 more bytes: the kernel writes 100 bytes of the next entry (a 4 KB user
    // message), then fails the write with EFBIG.
    let mut cmd = sc.command(&["--mode", "rpc", "--model", MODEL, "--session", &path]);
    limit_file_size(&mut cmd, before.len() as u64 + 100);
    let (settled, roles, code, stderr) = prompt_over_rpc(cmd, &"x".repeat(4096));
    let error = settled["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&path) && error.contains("File too large"),
        "the failure names the file and the cause: {settled}"
    );
    assert_eq!(code, Some(0), "pi exits normally: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Memory is not ahead of the file, and the file is as it was: whole lines or nothing.
    assert_eq!(roles, file_roles(&file), "get_messages vs the file");
    assert_eq!(std::fs::read(&file).expect("read session"), before);
    assert_eq!(verify_problems(&sc, &file), Vec::<Value>::new());

    // Without the limit (a new process) the session resumes where the file ends.
    let cmd = sc.command(&["--mode", "rpc", "--model", MODEL, "--session", &path]);
    let (settled, roles, code, stderr) = prompt_over_rpc(cmd, "second question");
    assert_eq!(settled.get("error"), None, "{settled}");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant"]);
    assert_eq!(roles, file_roles(&file));
    assert_eq!(verify_problems(&sc, &file), Vec::<Value>::new());
}

/// Running as root (CI), permission bits do not stop a write, so the unwritable session
/// directory is a regular file in its place: creating the session fails for root too.
/// Not root, a read-only (0555) session directory is tested as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_session_directory_is_reported_and_nothing_is_held_unsaved() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cases = vec!["directory replaced by a file"];
    if !root {
        cases.push("read-only directory");
    }
    for case in cases {
        let sc = Scenario::new(json!({"turns": [{"text": "answer"}]})).await;
        let mut sessions = sc.sessions.clone();
        if case == "read-only directory" {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o555))
                .expect("chmod 0555");
        } else {
            std::fs::remove_dir(&sessions).expect("remove session dir");
            std::fs::write(&sessions, "not a directory").expect("file in its place");
            sessions = sessions.join("sub");
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi"));
        cmd.arg("--session-dir")
            .arg(&sessions)
            .args(["--mode", "rpc", "--model", MODEL])
            .current_dir(&sc.cwd)
            .env("PI_CODING_AGENT_DIR", &sc.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE");
        let (settled, roles, code, stderr) = prompt_over_rpc(cmd, "question");
        let error = settled["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(&sc.sessions.display().to_string()),
            "{case}: the failure names the session path: {settled}"
        );
        assert_eq!(code, Some(0), "{case}: {stderr}");
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
        // Nothing was saved, so nothing of the conversation is held in memory either.
        assert!(
            !roles.iter().any(|r| r == "user" || r == "assistant"),
            "{case}: memory ahead of the (absent) file: {roles:?}"
        );
        if case == "read-only directory" {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(sc.session_files(), Vec::<PathBuf>::new(), "{case}");
            std::fs::set_permissions(&sc.sessions, std::fs::Permissions::from_mode(0o755))
                .expect("chmod back");
        } else {
            assert!(
                sc.sessions.is_file(),
                "{case}: the file in the way is untouched"
            );
        }
    }
}

/// The first write of a new session (header and first entries) cut off by the file size
/// limit: the part-written file is removed rather than left as a session with a torn header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_cut_off_by_the_file_size_limit_leaves_no_file() {
    let sc = Scenario::new(json!({"turns": [{"text": "answer"}]})).await;
    let mut cmd = sc.command(&["--mode", "rpc", "--model", MODEL]);
    // Less than the header and the system prompt entry (about 5 KB) together.
    limit_file_size(&mut cmd, 1000);
    let (settled, roles, code, stderr) = prompt_over_rpc(cmd, "question");
    let error = settled["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&sc.sessions.display().to_string()) && error.contains("File too large"),
        "the failure names the file and the cause: {settled}"
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !roles.iter().any(|r| r == "user" || r == "assistant"),
        "memory ahead of the (absent) file: {roles:?}"
    );
    assert_eq!(sc.session_files(), Vec::<PathBuf>::new());

    // Print mode: the same failure ends the run with exit code 1 and the message on stderr.
    let mut cmd = sc.command(&["--model", MODEL, "-p", "question"]);
    limit_file_size(&mut cmd, 1000);
    let out = cmd.stdin(Stdio::null()).output().expect("run pi -p");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&sc.sessions.display().to_string()) && stderr.contains("File too large"),
        "{stderr}"
    );
    assert_eq!(sc.session_files(), Vec::<PathBuf>::new());
}
