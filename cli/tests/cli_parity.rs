//! Command-line parity with Pi 1.6.0 (issue 14, items 10–14): the real `pi` binary against
//! pi-fake-llm on 127.0.0.1, checked against what real Pi does with the same flags
//! (observed with `/work/shared/realpi`'s harness; quoted in each test).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use pi_fake_llm::{FakeLlm, RecordedRequest, Script};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");

/// An agent dir with the fixture providers (`fakeoai`, `fakeant`, both with keys) plus
/// `nokey`, a provider without any key; a project dir; a session dir.
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
        let text = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
            .unwrap()
            .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
        let mut models: Value = serde_json::from_str(&text).unwrap();
        models["providers"]["nokey"] = json!({
            "baseUrl": fake.openai_base_url(),
            "api": "openai-completions",
            "models": [{"id": "nokey-model", "reasoning": false, "contextWindow": 64000, "maxTokens": 2048}]
        });
        std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
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
        let mut c = Command::new(env!("CARGO_BIN_EXE_pi"));
        c.arg("--session-dir")
            .arg(&self.sessions)
            .args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE");
        // Only the keys this test writes count: none from the machine running it.
        for (k, _) in std::env::vars() {
            if k.ends_with("_API_KEY") || k.ends_with("_TOKEN") {
                c.env_remove(k);
            }
        }
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run pi")
    }

    /// Every line of every session file written so far.
    fn session_lines(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.sessions).unwrap().flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap();
            out.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
        }
        out
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The system prompt text of an OpenAI chat request.
fn system_prompt(req: &RecordedRequest) -> String {
    req.body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "system"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

fn tool_names(req: &RecordedRequest) -> Vec<String> {
    req.body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

// ------------------------------------------------------------------------------ item 10

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_letter_short_flags_parse_as_pis() {
    let sc = Scenario::new(json!({"default_text": "ok"}), None).await;
    std::fs::write(sc.cwd.join("AGENTS.md"), "PROJECT-RULES-MARKER").unwrap();
    let model = ["--model", "fakeoai/fake-model"];

    // Without the flag AGENTS.md is in the system prompt.
    let o = sc.run(&[&model[..], &["-p", "hello"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(system_prompt(&sc.fake.requests()[0]).contains("PROJECT-RULES-MARKER"));

    // `-nc` is `--no-context-files` (Pi), not `-n c` (a session named "c").
    let o = sc.run(&[&model[..], &["-nc", "-p", "hello"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let req = sc.fake.requests().pop().unwrap();
    assert!(!system_prompt(&req).contains("PROJECT-RULES-MARKER"));
    assert!(
        !sc.session_lines()
            .iter()
            .any(|l| l["type"] == "session_info"),
        "-nc named the session"
    );

    // `-nt`, `-nbt`, `-xt LIST`, `-na`.
    let o = sc.run(&[&model[..], &["-nt", "-p", "hello"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tool_names(&sc.fake.requests().pop().unwrap()).is_empty());
    let o = sc.run(&[&model[..], &["-nbt", "-p", "hello"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tool_names(&sc.fake.requests().pop().unwrap()).is_empty());
    let o = sc.run(&[&model[..], &["-xt", "bash,edit", "-na", "-p", "hello"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        tool_names(&sc.fake.requests().pop().unwrap()),
        ["read", "write"]
    );

    // A flag's value and text after `--` are never rewritten: this session is named "-nc"
    // and the prompt is "-nt" literally.
    let o = sc.run(&[&model[..], &["--name", "-nc", "-p", "--", "-nt"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(sc
        .session_lines()
        .iter()
        .any(|l| l["type"] == "session_info" && l["name"] == "-nc"));
    let req = sc.fake.requests().pop().unwrap();
    assert!(req.body.to_string().contains("\"-nt\""), "{}", req.body);
    assert!(!tool_names(&req).is_empty());

    // `-ne`, `-ns`, `-np` never name a session after their second letter.
    for flag in ["-ne", "-ns", "-np"] {
        let _ = sc.run(&[&model[..], &[flag, "-p", "hello"]].concat());
        let letter = &flag[2..];
        assert!(
            !sc.session_lines()
                .iter()
                .any(|l| l["type"] == "session_info" && l["name"] == letter),
            "{flag} was read as -n {letter}"
        );
    }
}

// ------------------------------------------------------------------------------ item 12

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_flags_are_accepted() {
    let sc = Scenario::new(json!({"default_text": "ok"}), None).await;
    // Pi: `pi -v` prints the version alone and exits 0.
    for flag in ["-v", "--version"] {
        let o = sc.run(&[flag]);
        assert!(o.status.success(), "{flag}: {}", stderr(&o));
        assert_eq!(stdout(&o).trim(), env!("CARGO_PKG_VERSION"));
    }
    let o = sc.run(&[
        "--model",
        "fakeoai/fake-model",
        "--verbose",
        "--tui-mode",
        "regular",
        "--no-context-files",
        "-p",
        "hello",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "ok");
    // Pi: `Invalid TUI mode "sideways". Valid values: regular, fullscreen`.
    let o = sc.run(&["--tui-mode", "sideways", "-p", "hello"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Invalid TUI mode \"sideways\". Valid values: regular, fullscreen"),
        "{}",
        stderr(&o)
    );

    // `--export FILE`: Pi writes `pi-session-<name>.html` in the cwd and says where.
    let file = sc.cwd.join("s.jsonl");
    std::fs::copy(format!("{FIXTURES}/sessions/rpc_main.jsonl"), &file).unwrap();
    let o = sc.run(&["--export", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "Exported to: pi-session-s.html");
    let html = std::fs::read_to_string(sc.cwd.join("pi-session-s.html")).unwrap();
    assert!(html.contains("<html"), "{}", &html[..200.min(html.len())]);
    // `--export FILE OUTPUT`.
    let o = sc.run(&["--export", file.to_str().unwrap(), "out.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "Exported to: out.html");
    assert!(sc.cwd.join("out.html").is_file());
    // A missing file: Pi's "File not found: <absolute path>", exit 1.
    let o = sc.run(&["--export", "gone.jsonl"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("File not found:"), "{}", stderr(&o));
}

// ------------------------------------------------------------------------------ item 13

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_keys_and_prompt_flags_behave_as_pis() {
    let sc = Scenario::new(json!({"default_text": "ok"}), None).await;

    // Pi: `Error: --provider requires --model (for example: --provider nokey --model
    // <pattern>)`, exit 1, nothing sent.
    let o = sc.run(&["--provider", "fakeoai", "-p", "hello"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--provider requires --model"),
        "{}",
        stderr(&o)
    );
    assert!(sc.fake.requests().is_empty());

    // Pi: `No API key found for nokey.`, exit 1, no request and no message written.
    let o = sc.run(&["--model", "nokey/nokey-model", "-p", "hello"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("No API key found for nokey"),
        "{}",
        stderr(&o)
    );
    assert!(sc.fake.requests().is_empty());
    assert!(!sc.session_lines().iter().any(|l| l["type"] == "message"));

    // An auth.json readable by others is used (Pi uses it), with one warning.
    let auth = sc.agent.join("auth.json");
    std::fs::write(
        &auth,
        r#"{"nokey":{"type":"api_key","key":"from-auth-json"}}"#,
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&auth, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let o = sc.run(&["--model", "nokey/nokey-model", "-p", "hello"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let req = sc.fake.requests().pop().expect("the request was sent");
    assert!(
        req.headers.contains_key("authorization"),
        "{:?}",
        req.headers
    );
    #[cfg(unix)]
    assert_eq!(stderr(&o).matches("chmod 600").count(), 1, "{}", stderr(&o));

    // `--append-system-prompt` is repeatable; an unknown `--thinking` only warns.
    let o = sc.run(&[
        "--model",
        "fakeoai/fake-model",
        "--append-system-prompt",
        "FIRST-APPEND",
        "--append-system-prompt",
        "SECOND-APPEND",
        "--thinking",
        "bogus",
        "-p",
        "hello",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Warning: Invalid thinking level \"bogus\""),
        "{}",
        stderr(&o)
    );
    let prompt = system_prompt(&sc.fake.requests().pop().unwrap());
    assert!(
        prompt.contains("FIRST-APPEND") && prompt.contains("SECOND-APPEND"),
        "{prompt}"
    );
}

// ------------------------------------------------------------------------------ item 14

/// A `pi --mode rpc` child with its output lines on a channel.
struct Rpc {
    child: std::process::Child,
    rx: std::sync::mpsc::Receiver<Value>,
    seen: Vec<Value>,
    next_id: u64,
}

impl Rpc {
    fn start(sc: &Scenario, args: &[&str]) -> Rpc {
        let mut child = sc
            .command(&[&["--mode", "rpc"], args].concat())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pi --mode rpc");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        Rpc {
            child,
            rx,
            seen: Vec::new(),
            next_id: 0,
        }
    }

    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(v) = self.seen.iter().find(|v| pred(v)) {
                return v.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("timed out waiting for {what}: {:#?}", self.seen),
            }
        }
    }

    /// Sends a command and returns its response's `data`.
    fn call(&mut self, mut command: Value) -> Value {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        command["id"] = json!(id);
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        let r = self.wait_for(&id, |v| v["type"] == "response" && v["id"] == id);
        assert_eq!(r["success"], true, "{r}");
        r["data"].clone()
    }

    fn close(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn model_ref(v: &Value) -> String {
    format!(
        "{}/{}",
        v["provider"].as_str().unwrap(),
        v["id"].as_str().unwrap()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_models_follow_credentials_and_scope() {
    // `enabledModels` scopes cycling when `--models` is not given.
    let sc = Scenario::new(
        json!({"default_text": "ok"}),
        Some(json!({"enabledModels": ["fakeoai/fake-model", "fakeant/fake-claude"]})),
    )
    .await;
    let mut rpc = Rpc::start(&sc, &["--model", "fakeoai/fake-model"]);
    // Only models with credentials: the four fixture models, not `nokey` nor the built-in
    // catalog (Pi lists 4 here).
    let models = rpc.call(json!({"type": "get_available_models"}));
    let refs: Vec<String> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(model_ref)
        .collect();
    assert_eq!(
        refs,
        [
            "fakeoai/fake-model",
            "fakeoai/fake-model-2",
            "fakeoai/fake-small",
            "fakeant/fake-claude"
        ]
    );
    let first = rpc.call(json!({"type": "cycle_model"}));
    assert_eq!(model_ref(&first["model"]), "fakeant/fake-claude");
    assert_eq!(first["isScoped"], true);
    let second = rpc.call(json!({"type": "cycle_model"}));
    assert_eq!(model_ref(&second["model"]), "fakeoai/fake-model");
    rpc.close();

    // `--models a:high,b`: a keeps its level after a round trip.
    let mut rpc = Rpc::start(
        &sc,
        &["--models", "fakeoai/fake-model:high,fakeoai/fake-model-2"],
    );
    let state = rpc.call(json!({"type": "get_state"}));
    assert_eq!(model_ref(&state["model"]), "fakeoai/fake-model");
    assert_eq!(state["thinkingLevel"], "high");
    let b = rpc.call(json!({"type": "cycle_model"}));
    assert_eq!(model_ref(&b["model"]), "fakeoai/fake-model-2");
    assert_eq!(b["thinkingLevel"], "off");
    let a = rpc.call(json!({"type": "cycle_model"}));
    assert_eq!(model_ref(&a["model"]), "fakeoai/fake-model");
    assert_eq!(a["thinkingLevel"], "high");
    rpc.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_carry_will_retry_and_structured_content() {
    let sc = Scenario::new(
        json!({"turns": [
            {"http_error": {"status": 500, "body": {"error": {"message": "fake overloaded"}}}},
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi; exit 3"}}]},
            {"text": "done"},
        ]}),
        Some(json!({"retry": {"enabled": true, "maxRetries": 2, "baseDelayMs": 1}})),
    )
    .await;
    let o = sc.run(&["--mode", "json", "--model", "fakeoai/fake-model", "go"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let events: Vec<Value> = stdout(&o)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // Pi: the failed attempt's agent_end says a retry follows; the last one says none.
    let ends: Vec<&Value> = events.iter().filter(|e| e["type"] == "agent_end").collect();
    assert_eq!(ends.len(), 2, "{events:#?}");
    assert_eq!(ends[0]["willRetry"], true);
    assert_eq!(ends[1]["willRetry"], false);
    // Pi's bash result: structuredContent {output, truncated, exit_code, wall_time_seconds},
    // and the returned error's own isError.
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("tool_execution_end");
    let structured = &end["result"]["structuredContent"];
    assert_eq!(structured["output"], "hi\n");
    assert_eq!(structured["truncated"], false);
    assert_eq!(structured["exit_code"], 3);
    assert!(structured["wall_time_seconds"].is_number(), "{structured}");
    assert_eq!(end["result"]["isError"], true);
    // Only events carry it: the session's tool result is as Pi stores it.
    let stored = sc
        .session_lines()
        .into_iter()
        .find(|l| l["message"]["role"] == "toolResult")
        .unwrap();
    assert!(stored["message"].get("structuredContent").is_none());
}

// ------------------------------------------------------------------------------ item 11

/// A valid 1x1 PNG.
const TINY_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Adds `fakeoai/vision-model`, a model that takes images.
fn add_vision_model(sc: &Scenario) {
    let path = sc.agent.join("models.json");
    let mut models: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    models["providers"]["fakeoai"]["models"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"id": "vision-model", "reasoning": false, "input": ["text", "image"],
            "contextWindow": 64000, "maxTokens": 2048}),
        );
    std::fs::write(path, models.to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_image_is_attached_and_block_images_honoured() {
    let sc = Scenario::new(json!({"default_text": "a dot"}), None).await;
    add_vision_model(&sc);
    std::fs::write(sc.cwd.join("pic.png"), TINY_PNG).unwrap();
    std::fs::write(sc.cwd.join("notes.txt"), "some notes").unwrap();
    std::fs::write(sc.cwd.join("empty.txt"), "").unwrap();
    let args = [
        "--model",
        "fakeoai/vision-model",
        "-p",
        "@pic.png",
        "@notes.txt",
        "@empty.txt",
        "what is it?",
    ];
    let o = sc.run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "a dot");
    let req = sc.fake.requests().pop().unwrap();
    let body = req.body.to_string();
    assert!(body.contains("data:image/png;base64,iVBORw0KGgo"), "{body}");
    // Pi names files by their absolute path; an empty file is left out.
    let cwd = &sc.cwd;
    let user = sc
        .session_lines()
        .into_iter()
        .find(|l| l["message"]["role"] == "user")
        .unwrap();
    let text = user["message"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let pic = format!("<file name=\"{}\"></file>\n", cwd.join("pic.png").display());
    let notes = format!(
        "<file name=\"{}\">\nsome notes\n</file>\n",
        cwd.join("notes.txt").display()
    );
    assert_eq!(text, format!("{pic}{notes}what is it?"));
    assert_eq!(user["message"]["content"][1]["type"], "image");
    assert_eq!(user["message"]["content"][1]["mimeType"], "image/png");

    // A missing file: Pi's "File not found: <absolute path>", exit 1, nothing sent.
    let before = sc.fake.requests().len();
    let o = sc.run(&["--model", "fakeoai/vision-model", "-p", "@gone.png", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("File not found:"), "{}", stderr(&o));
    assert_eq!(sc.fake.requests().len(), before);

    // `images.blockImages`: the model gets Pi's placeholder; the session keeps the image.
    std::fs::write(
        sc.agent.join("settings.json"),
        json!({"images": {"blockImages": true}}).to_string(),
    )
    .unwrap();
    let o = sc.run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let body = sc.fake.requests().pop().unwrap().body.to_string();
    assert!(!body.contains("data:image/png"), "{body}");
    assert!(body.contains("Image reading is disabled."), "{body}");
}

// ------------------------------------------------------------------------------ item 15

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_budgets_and_idle_timeout_take_effect() {
    let sc = Scenario::new(
        json!({"turns": [{"text": "thought"}, {"text": "late", "delay": 5.0}]}),
        Some(json!({"thinkingBudgets": {"medium": 5000}})),
    )
    .await;
    // Pi sends the configured budget (5000), not the default clamped to the output limit.
    let o = sc.run(&[
        "--model",
        "fakeant/fake-claude",
        "--thinking",
        "medium",
        "-p",
        "q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let req = sc.fake.requests().pop().unwrap();
    assert_eq!(req.body["thinking"]["budget_tokens"], 5000, "{}", req.body);

    // `httpIdleTimeoutMs`: a server that sends no headers for longer fails the request.
    std::fs::write(
        sc.agent.join("settings.json"),
        json!({"httpIdleTimeoutMs": 300, "retry": {"enabled": false}}).to_string(),
    )
    .unwrap();
    let o = sc.run(&["--model", "fakeoai/fake-model", "-p", "q"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stderr(&o).to_lowercase().contains("timed out")
            || stderr(&o).to_lowercase().contains("timeout"),
        "{}",
        stderr(&o)
    );
    assert!(!stdout(&o).contains("late"));
}
