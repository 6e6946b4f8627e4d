//! One front door: the same command sequence sent through RPC (a real `pi --mode rpc`
//! process) and through the TUI's driver (in process, as the interactive mode builds it)
//! leaves the same sessions behind, because both are clients of one session host.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pi_agent::protocol::command::{decode_value, Decoded};
use pi_cli::modes::{build_host, Env, Settings};
use pi_cli::tui::agent::{channel_sink, AgentSessionDriver};
use pi_cli::RunArgs;
use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");

/// What both front ends are asked to do, as Pi's RPC clients write it.
fn commands() -> Vec<Value> {
    vec![
        json!({"type": "prompt", "message": "First question"}),
        json!({"type": "bash", "command": "echo shared-$((20+1))"}),
        json!({"type": "bash", "command": "echo hidden-$((3*7))", "excludeFromContext": true}),
        json!({"type": "prompt", "message": "Second question"}),
        json!({"type": "set_session_name", "name": "Front door"}),
        json!({"type": "set_thinking_level", "level": "high"}),
        json!({"type": "clone"}),
        json!({"type": "prompt", "message": "In the clone"}),
    ]
}

fn script() -> Script {
    serde_json::from_value(json!({"turns": [
        {"text": "First answer."},
        {"text": "Second answer."},
        {"text": "Clone answer."}
    ]}))
    .expect("script")
}

struct Setup {
    _tmp: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
    sessions: PathBuf,
    fake: FakeLlm,
}

async fn setup() -> Setup {
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd, &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let fake = FakeLlm::start(script()).await.expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");
    Setup {
        _tmp: tmp,
        agent,
        cwd,
        sessions,
        fake,
    }
}

/// Drives `pi --mode rpc`: each command waits for its response, a prompt also for
/// `agent_settled`.
fn through_rpc(s: &Setup) {
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args([
            "--mode",
            "rpc",
            "--model",
            "fakeoai/fake-model",
            "--session-dir",
        ])
        .arg(&s.sessions)
        .current_dir(&s.cwd)
        .env("PI_CODING_AGENT_DIR", &s.agent)
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .env_remove("PI_SESSION_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn pi --mode rpc");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                if tx.send(v).is_err() {
                    break;
                }
            }
        }
    });
    let next = |what: &str, pred: &dyn Fn(&Value) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(v) if pred(&v) => return v,
                Ok(_) => {}
                Err(_) => panic!("timed out waiting for {what}"),
            }
        }
    };
    let stdin = child.stdin.as_mut().expect("stdin");
    for (i, mut cmd) in commands().into_iter().enumerate() {
        let id = format!("c{i}");
        cmd["id"] = json!(id);
        writeln!(stdin, "{cmd}").expect("write");
        stdin.flush().expect("flush");
        let response = next("the response", &|v| {
            v["type"] == "response" && v["id"] == id
        });
        assert_eq!(response["success"], true, "{cmd} → {response}");
        if cmd["type"] == "prompt" {
            next("agent_settled", &|v| v["type"] == "agent_settled");
        }
    }
    drop(child.stdin.take());
    assert!(child.wait().expect("wait").success());
}

/// Drives the TUI's driver over the same kind of host the interactive mode builds.
fn through_tui_driver(s: &Setup, rt: &tokio::runtime::Runtime) {
    let args = RunArgs {
        model: Some("fakeoai/fake-model".into()),
        session_dir: Some(s.sessions.display().to_string()),
        ..Default::default()
    };
    let settings = Settings::load(&s.agent, &s.cwd, &args).expect("settings");
    let resources = settings.resources(&s.agent, &s.cwd, &args);
    let env = Env {
        resources,
        settings,
        registry: pi_agent::llm::load_models(&s.agent.join("models.json")).expect("models"),
        home: pi_agent::host::SessionHome {
            agent_dir: s.agent.clone(),
            cwd: s.cwd.display().to_string(),
            spec: pi_storage::StoreSpec::Jsonl(None),
            store_options: pi_storage::StoreOptions {
                agent_dir: s.agent.clone(),
                session_dir: Some(s.sessions.clone()),
                fsync: pi_storage::store::FsyncPolicy::Never,
            },
            no_session: false,
        },
    };
    let (sink, errors, events) = channel_sink();
    let host = {
        let _guard = rt.enter();
        build_host(&args, &env, sink).expect("host")
    };
    let driver = AgentSessionDriver::new(host, env, args, rt.handle().clone(), errors, events);
    for cmd in commands() {
        let Decoded::Command(request) = decode_value(&cmd) else {
            panic!("{cmd} does not decode")
        };
        let (tx, rx) = mpsc::channel();
        driver.send_then(request.command, move |record| {
            let _ = tx.send(record);
        });
        let response = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a response");
        assert_eq!(response["success"], true, "{cmd} → {response}");
        if cmd["type"] == "prompt" {
            let deadline = Instant::now() + Duration::from_secs(60);
            while driver.host().agent().is_streaming() {
                assert!(Instant::now() < deadline, "the prompt never settled");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// A session file as a comparable shape: per entry its type, role, parent (by position),
/// and the text a person would compare; ids, timestamps and paths left out.
fn shape(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("session");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let mut ids: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for e in lines.iter().skip(1) {
        let parent = e["parentId"]
            .as_str()
            .and_then(|p| ids.iter().position(|id| id == p))
            .map_or("root".to_string(), |p| p.to_string());
        let m = &e["message"];
        let detail = match m["role"].as_str() {
            Some("bashExecution") => format!(
                "{} → {:?} exit={} excluded={}",
                m["command"], m["output"], m["exitCode"], m["excludeFromContext"]
            ),
            Some("user") | Some("assistant") => m["content"].to_string(),
            _ => String::new(),
        };
        let extra = match e["type"].as_str() {
            Some("session_info") => e["name"].to_string(),
            Some("thinking_level_change") => e["thinkingLevel"].to_string(),
            Some("model_change") => format!("{}/{}", e["provider"], e["modelId"]),
            _ => String::new(),
        };
        out.push(format!(
            "{} {} parent={parent} {detail}{extra}",
            e["type"].as_str().unwrap_or("?"),
            m["role"].as_str().unwrap_or("")
        ));
        ids.push(e["id"].as_str().unwrap_or_default().to_string());
    }
    out
}

/// The sessions in a directory, the original first (the clone names it as its parent).
fn sessions_in(dir: &Path) -> Vec<Vec<String>> {
    let mut files: Vec<(bool, PathBuf)> = std::fs::read_dir(dir)
        .expect("sessions dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| {
            let header = std::fs::read_to_string(&p).expect("read");
            let first: Value =
                serde_json::from_str(header.lines().next().unwrap_or("{}")).expect("header");
            (first.get("parentSession").is_some(), p)
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| shape(&p)).collect()
}

#[test]
fn rpc_and_the_tui_driver_leave_the_same_sessions() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let rpc = rt.block_on(setup());
    through_rpc(&rpc);
    let tui = rt.block_on(setup());
    through_tui_driver(&tui, &rt);

    let (a, b) = (sessions_in(&rpc.sessions), sessions_in(&tui.sessions));
    assert_eq!(a.len(), 2, "the original and its clone: {a:#?}");
    assert_eq!(a, b);
    // The shared command reached the model, the excluded one did not, in both.
    for fake in [&rpc.fake, &tui.fake] {
        let requests = fake.requests();
        assert_eq!(requests.len(), 3);
        let second = requests[1].body["messages"].to_string();
        assert!(second.contains("shared-21"), "{second}");
        assert!(!second.contains("hidden-21"), "{second}");
    }
    // The clone holds the active path, not a copy of the whole file.
    let original = &a[0];
    let clone = &a[1];
    assert!(clone.iter().any(|l| l.contains("Clone answer.")));
    assert!(!original.iter().any(|l| l.contains("Clone answer.")));
}
