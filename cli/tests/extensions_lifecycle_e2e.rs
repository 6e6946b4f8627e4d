//! Events around a run's start and its model requests: `before_provider_request` and
//! `after_provider_response` on every request (two wire APIs, an HTTP error included),
//! `resources_discover` (skills and prompt templates an extension points at, at start-up and
//! after a reload) and `project_trust` (user and `-e` extensions decide a project's trust
//! before anything project-local loads). Fixtures: provider-hooks.ts, discover-resources.ts,
//! trust-decider.ts (ours). Needs `node` (>= 20) on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn system_text(body: &Value) -> String {
    message_texts(["system", "developer"], body).join("\n")
}

/// Runs `pi` with `args` (model included) and `env`; (exit code, stderr).
fn run(s: &Setup, args: &[&str], env: &[(&str, &Path)]) -> (i32, String) {
    let mut command = s.command_without_model(args);
    command.envs(env.iter().copied());
    let (code, _, stderr) = outcome(command);
    (code, stderr)
}

/// The payload handlers return is what the provider receives, on OpenAI chat completions and
/// Anthropic messages alike: the second handler saw the first's result, the third (which
/// returns nothing) kept it. `after_provider_response` saw each status before the body was
/// read, a 400 included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_hooks_rewrite_the_payload_and_see_each_response() {
    let turns = json!([
        {"text": "From chat completions."},
        {"text": "From messages."},
        {"http_error": {"status": 400, "body": {"error": {"message": "bad request"}}}}
    ]);
    let s = Setup::new(turns).await;
    let log = s.cwd.join("hooks.log");
    let hooks = fixture("provider-hooks.ts");
    for model in ["fakeoai/fake-model", "fakeant/fake-claude"] {
        let (code, stderr) = run(
            &s,
            &["--model", model, "-e", &hooks, "-p", "hi"],
            &[("PROVIDER_HOOKS_LOG", &log)],
        );
        assert_eq!(code, 0, "{model}: {stderr}");
    }
    let (code, _) = run(
        &s,
        &["--model", "fakeoai/fake-model", "-e", &hooks, "-p", "hi"],
        &[("PROVIDER_HOOKS_LOG", &log)],
    );
    assert_ne!(code, 0, "the 400 ends the run with an error");

    let recorded = s.fake.requests();
    assert_eq!(recorded.len(), 3);
    assert_eq!(
        recorded.iter().map(|r| r.api.as_str()).collect::<Vec<_>>(),
        ["openai", "anthropic", "openai"]
    );
    for r in &recorded {
        assert_eq!(r.body["max_tokens"], 77, "{}", r.body);
        assert_eq!(r.body["pi_rewritten"], "first");
        assert_eq!(r.body["pi_chain_saw"], "first");
        // The rest of the payload is the one the wire API built.
        assert_eq!(r.body["stream"], true);
        assert!(r.body["messages"].as_array().is_some_and(|m| !m.is_empty()));
    }
    let seen = jsonl(&log);
    assert_eq!(
        seen.iter().map(|r| r["status"].clone()).collect::<Vec<_>>(),
        [json!(200), json!(200), json!(400)]
    );
    assert!(
        seen[0]["contentType"]
            .as_str()
            .is_some_and(|t| t.starts_with("text/event-stream")),
        "{seen:?}"
    );
}

/// Without a handler for them, requests go out as built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_provider_handlers_the_payload_is_unchanged() {
    let s = Setup::new(json!([{"text": "ok"}])).await;
    let (code, stderr) = run(
        &s,
        &[
            "--model",
            "fakeoai/fake-model",
            "-e",
            &fixture("discover-resources.ts"),
            "-p",
            "hi",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let body = &s.requests()[0];
    assert!(body.get("pi_rewritten").is_none());
    assert_ne!(body["max_tokens"], 77);
}

/// Writes a skill and a prompt template under `dir` (the fixture's $DISCOVER_DIR).
fn discoverable(dir: &Path) {
    let skill = dir.join("skills/ext-skill");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: ext-skill\ndescription: Skill an extension discovered (marker 4711).\n---\n\nDo the thing.\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    std::fs::write(
        dir.join("prompts/ext-prompt.md"),
        "---\ndescription: Prompt an extension discovered\n---\nDiscovered template says $1 (marker 0815).\n",
    )
    .unwrap();
}

/// `resources_discover` runs after `session_start` with `reason: "startup"`: the skill it
/// points at is listed in the system prompt and its prompt template expands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_discover_adds_skills_and_prompt_templates() {
    let s = Setup::new(json!([{"text": "ok"}])).await;
    let dir = s.agent.parent().unwrap().join("discovered");
    discoverable(&dir);
    let (code, stderr) = run(
        &s,
        &[
            "--model",
            "fakeoai/fake-model",
            "-e",
            &fixture("discover-resources.ts"),
            "-p",
            "/ext-prompt alpha",
        ],
        &[("DISCOVER_DIR", &dir)],
    );
    assert_eq!(code, 0, "{stderr}");
    let body = &s.requests()[0];
    let system = system_text(body);
    assert!(system.contains("ext-skill"), "{system}");
    assert!(system.contains("marker 4711"), "{system}");
    let user = message_texts(["user"], body).join("\n");
    assert!(
        user.contains("Discovered template says alpha (marker 0815)."),
        "{user}"
    );
    let reasons = lines(&dir.join("reasons.log"));
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].starts_with("startup "), "{reasons:?}");
}

/// A command's `ctx.reload()` asks again (`reason: "reload"`): the reloaded resources keep
/// the discovered skill alongside a context file written since start-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_discover_runs_again_after_a_reload() {
    let s = Setup::new(json!([{"text": "First."}, {"text": "Second."}])).await;
    let dir = s.agent.parent().unwrap().join("discovered");
    discoverable(&dir);
    let dir_text = dir.display().to_string();
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &fixture("discover-resources.ts")],
        &[("DISCOVER_DIR", &dir_text)],
    );
    rpc.send(json!({"id": "p0", "type": "prompt", "message": "hi"}));
    rpc.until(|r| r["type"] == "agent_settled");
    std::fs::write(s.cwd.join("AGENTS.md"), "Always answer in haiku.\n").unwrap();
    rpc.send(json!({"id": "r", "type": "prompt", "message": "/reload-now"}));
    assert_eq!(rpc.response("r")["success"], true);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "again"}));
    rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());

    let reasons: Vec<String> = lines(&dir.join("reasons.log"))
        .iter()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(reasons, ["startup", "reload"]);
    let requests = s.requests();
    assert_eq!(requests.len(), 2);
    assert!(system_text(&requests[0]).contains("marker 4711"));
    let second = requests[1].to_string();
    assert!(second.contains("Always answer in haiku."), "{second}");
    assert!(second.contains("marker 4711"), "{second}");
}

/// A project whose `.pi` needs trust: a SYSTEM.md (used only when trusted) and a project
/// extension that marks every payload (loaded only when trusted).
fn untrusted_project(s: &Setup) {
    let pi = s.cwd.join(".pi");
    std::fs::create_dir_all(pi.join("extensions")).unwrap();
    std::fs::write(
        pi.join("SYSTEM.md"),
        "Project system prompt (marker 2357).\n",
    )
    .unwrap();
    std::fs::write(
        pi.join("extensions/project-marker.ts"),
        "export default function (pi: any) {\n  pi.on(\"before_provider_request\", (event: any) => ({ ...event.payload, project_ext: true }));\n}\n",
    )
    .unwrap();
}

fn trust_json(s: &Setup) -> Value {
    std::fs::read_to_string(s.agent.join("trust.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null)
}

fn canonical_cwd(s: &Setup) -> String {
    std::fs::canonicalize(&s.cwd).unwrap().display().to_string()
}

/// One print run in an untrusted project with trust-decider.ts answering `answer`;
/// (whether the project's resources were used, the decider's log).
fn trust_run(s: &Setup, answer: &str, remember: bool, extra: &[&str]) -> (bool, Vec<String>) {
    let log = s.cwd.parent().unwrap().join("trust.log");
    let _ = std::fs::remove_file(&log);
    let decider = fixture("trust-decider.ts");
    let mut args = vec!["--model", "fakeoai/fake-model", "-e", &decider];
    args.extend(extra);
    args.extend(["-p", "hi"]);
    let mut command = s.command_without_model(&args);
    command
        .env("TRUST_LOG", &log)
        .env("TRUST_ANSWER", answer)
        .env("TRUST_REMEMBER", if remember { "1" } else { "0" });
    let out = command.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = s.requests().last().cloned().unwrap();
    let system = system_text(&body);
    let project_used = system.contains("marker 2357");
    assert_eq!(
        body.get("project_ext") == Some(&json!(true)),
        project_used,
        "SYSTEM.md and the project extension follow the same decision: {body}"
    );
    (project_used, lines(&log))
}

/// A `-e` extension's "yes" with `remember` trusts the project (its SYSTEM.md and
/// extension load) and is saved in trust.json; the extension loaded once, without UI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_trust_yes_trusts_and_remembers() {
    let s = Setup::new(json!([{"text": "ok"}])).await;
    untrusted_project(&s);
    let (trusted, log) = trust_run(&s, "yes", true, &[]);
    assert!(trusted);
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0], "load");
    assert!(
        log[1].starts_with("project_trust ") && log[1].ends_with(" hasUI=false"),
        "{log:?}"
    );
    assert_eq!(trust_json(&s), json!({ canonical_cwd(&s): true }));
}

/// The handler decides before trust.json: its "no" wins over a saved "trusted", and without
/// `remember` trust.json stays as it was. "undecided" falls through to the saved decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_trust_no_wins_and_undecided_falls_through() {
    let s = Setup::new(json!([{"text": "one"}, {"text": "two"}])).await;
    untrusted_project(&s);
    let saved = json!({ canonical_cwd(&s): true });
    std::fs::write(s.agent.join("trust.json"), saved.to_string()).unwrap();

    let (trusted, log) = trust_run(&s, "no", false, &[]);
    assert!(!trusted);
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(trust_json(&s), saved);

    let (trusted, _) = trust_run(&s, "undecided", false, &[]);
    assert!(trusted, "trust.json decides when the handler does not");
}

/// `--no-approve` decides outright: no `project_trust` event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_trust_is_not_asked_when_the_command_line_decides() {
    let s = Setup::new(json!([{"text": "ok"}])).await;
    untrusted_project(&s);
    let (trusted, log) = trust_run(&s, "yes", true, &["--no-approve"]);
    assert!(!trusted);
    assert_eq!(log, ["load"]);
    assert_eq!(trust_json(&s), Value::Null);
}

/// A session replacement entering another directory asks the user-level extensions'
/// `project_trust` handlers there, as Pi's new runtime does (without dialogs: over RPC
/// `ctx.hasUI` is false): a "yes" loads that project's SYSTEM.md and extension for the
/// resumed session, and the deciding extension goes on in the process it loaded in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_in_another_directory_asks_project_trust() {
    let s = Setup::new(json!([{"text": "there"}, {"text": "back"}])).await;
    let other = s.cwd.parent().unwrap().join("other-project");
    std::fs::create_dir_all(other.join(".pi/extensions")).unwrap();
    std::fs::write(
        other.join(".pi/SYSTEM.md"),
        "Other project's prompt (marker 8642).\n",
    )
    .unwrap();
    std::fs::write(
        other.join(".pi/extensions/project-marker.ts"),
        "export default function (pi: any) {\n  pi.on(\"before_provider_request\", (event: any) => ({ ...event.payload, project_ext: true }));\n}\n",
    )
    .unwrap();
    // A session of that project, written without deciding its trust.
    let out = s
        .command(&["--no-approve", "-p", "hi"])
        .current_dir(&other)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!system_text(&s.requests()[0]).contains("marker 8642"));
    let file = std::fs::read_dir(&s.sessions)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("the other project's session");

    let log = s.cwd.parent().unwrap().join("trust.log");
    let decider = fixture("trust-decider.ts");
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &decider],
        &[
            ("TRUST_LOG", &log.display().to_string()),
            ("TRUST_ANSWER", "yes"),
        ],
    );
    rpc.send(json!({"id": "s", "type": "switch_session", "sessionPath": file}));
    assert_eq!(rpc.response("s")["success"], true);
    rpc.send(json!({"id": "p", "type": "prompt", "message": "again"}));
    rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());

    let body = s.requests()[1].clone();
    assert!(system_text(&body).contains("marker 8642"), "{body}");
    assert_eq!(body["project_ext"], true, "{body}");
    let other = std::fs::canonicalize(&other).unwrap();
    assert_eq!(
        lines(&log),
        [
            "load".to_string(),
            "load".to_string(),
            format!("project_trust {} hasUI=false", other.display()),
        ]
    );
    // Not remembered: trust.json has no decision for it.
    assert_eq!(trust_json(&s), Value::Null);
}
