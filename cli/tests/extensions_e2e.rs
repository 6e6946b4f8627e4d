//! Pi's TypeScript extensions end to end: our `pi` binary loads Pi's own example extensions
//! (copied unchanged into fixtures/extensions from the 1.6.0 npm package) in the Node
//! sidecar, against the fake LLM on 127.0.0.1. Needs `node` (>= 20) on PATH, as CI installs.
//!
//! Covered: a registered tool the model calls (declared, run, result in the next request
//! and in the session file), a `tool_call` handler blocking a write, `input` transform and
//! handled input, `ctx.ui.select` over RPC's extension-UI sub-protocol and its no-UI answer
//! in print mode, a command with `appendEntry`/`sendMessage` and a `before_agent_start`
//! message, and hostile extensions (throws on load, a hook that never resolves, a sidecar
//! that exits) that leave the agent running with a clear error.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_tool_is_declared_called_and_recorded() {
    let s = Setup::new(json!([
        {"text": "Greeting.", "tool_calls": [tc("hello", json!({"name": "World"}))]},
        {"text": "Greeted."},
    ]))
    .await;
    let (code, stdout, stderr) = s.pi(&["-e", &fixture("hello.ts"), "-p", "say hello"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Greeted.\n");
    // A normal end stops the sidecar without reporting anything.
    assert!(!stderr.contains("Extension error"), "{stderr}");
    let requests = s.requests();
    assert_eq!(requests.len(), 2);
    // Declared exactly as real Pi 1.6.0 declares it (see docs/extensions.md).
    assert_eq!(
        declared(&requests[0], "hello").unwrap(),
        &json!({
            "name": "hello",
            "description": "A simple greeting tool",
            "parameters": {"type": "object", "required": ["name"],
                           "properties": {"name": {"type": "string", "description": "Name to greet"}}},
        })
    );
    assert!(declared(&requests[0], "read").is_some());
    assert_eq!(tool_messages(&requests[1]), ["Hello, World!"]);
    let entries = s.session_entries();
    let results = tool_results(&entries);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["toolName"], "hello");
    assert_eq!(results[0]["details"], json!({"greeted": "World"}));
    assert_eq!(results[0]["isError"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_paths_blocks_a_write() {
    let s = Setup::new(json!([
        {"text": "Writing.", "tool_calls": [
            tc("write", json!({"path": ".env", "content": "SECRET=1\n"})),
            tc("write", json!({"path": "notes.txt", "content": "ok\n"})),
        ]},
        {"text": "Done."},
    ]))
    .await;
    let (code, stdout, stderr) = s.pi(&["-e", &fixture("protected-paths.ts"), "-p", "write"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!s.cwd.join(".env").exists(), "the blocked write happened");
    assert_eq!(
        std::fs::read_to_string(s.cwd.join("notes.txt")).unwrap(),
        "ok\n"
    );
    let requests = s.requests();
    let results = tool_messages(&requests[1]);
    assert_eq!(results[0], "Path \".env\" is protected");
    assert!(results[1].starts_with("Successfully wrote"), "{results:?}");
    let entries = s.session_entries();
    let recorded = tool_results(&entries);
    assert_eq!(recorded[0]["isError"], true);
    assert_eq!(recorded[1]["isError"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_handlers_transform_and_handle_prompts() {
    let s = Setup::new(json!([{"text": "Rust is a language."}])).await;
    let ext = fixture("input-transform.ts");
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-p", "?quick What is Rust?"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Rust is a language.\n");
    let requests = s.requests();
    let last_user = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .to_string();
    assert!(
        last_user.contains("Respond briefly in 1-2 sentences: What is Rust?"),
        "{last_user}"
    );
    // `ping` is handled by the extension: no model request, no answer, success.
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "--no-session", "-p", "ping"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(s.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_gate_asks_over_rpc_and_blocks_without_ui() {
    let turns = json!([
        {"text": "Cleaning.", "tool_calls": [tc("bash", json!({"command": "rm -rf build"}))]},
        {"text": "Cleaned."},
    ]);
    let s = Setup::new(turns.clone()).await;
    std::fs::create_dir_all(s.cwd.join("build")).unwrap();
    let ext = fixture("permission-gate.ts");
    // Print mode has no UI: the extension blocks by default.
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-p", "clean"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(
        tool_messages(&s.requests()[1]),
        ["Dangerous command blocked (no UI for confirmation)"]
    );
    assert!(s.cwd.join("build").exists());

    // RPC: the select dialog goes to the client; "No" blocks the command.
    s.fake
        .set_script(serde_json::from_value(json!({ "turns": turns })).unwrap());
    let mut child = s
        .command(&["-e", &ext, "--mode", "rpc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    writeln!(stdin, r#"{{"id":"1","type":"prompt","message":"clean"}}"#).unwrap();
    let mut request = None;
    let mut settled = false;
    while let Some(Ok(line)) = lines.next() {
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "extension_ui_request" && v["method"] == "select" {
            assert!(v["title"].as_str().unwrap().contains("rm -rf build"), "{v}");
            assert_eq!(v["options"], json!(["Yes", "No"]));
            writeln!(
                stdin,
                "{}",
                json!({"type": "extension_ui_response", "id": v["id"], "value": "No"})
            )
            .unwrap();
            request = Some(v.clone());
        }
        if v["type"] == "agent_settled" {
            settled = true;
            break;
        }
    }
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(request.is_some(), "no extension_ui_request");
    assert!(settled);
    assert!(status.success());
    let requests = s.requests();
    assert_eq!(tool_messages(requests.last().unwrap()), ["Blocked by user"]);
    assert!(s.cwd.join("build").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_append_entries_and_messages_pi_reads() {
    let s = Setup::new(json!([{"text": "Hi."}])).await;
    let (code, stdout, stderr) =
        s.pi(&["-e", &fixture("notes.ts"), "-p", "/note buy milk", "hello"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Hi.\n");
    let entries = s.session_entries();
    let custom = entries.iter().find(|e| e["type"] == "custom").unwrap();
    assert_eq!(custom["customType"], "note");
    assert_eq!(
        custom["data"],
        json!({"text": "buy milk", "mode": "print", "hasUI": false})
    );
    let messages: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "custom_message")
        .collect();
    assert_eq!(messages.len(), 2, "{entries:#?}");
    assert_eq!(messages[0]["customType"], "note");
    assert_eq!(messages[0]["content"], "Noted: buy milk");
    assert_eq!(messages[0]["display"], true);
    assert_eq!(messages[0]["details"], json!({"n": 1}));
    assert_eq!(messages[1]["customType"], "reminder");
    assert_eq!(messages[1]["content"], "Prompt was: hello");
    // Both custom messages reach the model, after the prompt.
    let body = s.requests()[0].to_string();
    assert!(body.contains("Noted: buy milk"), "{body}");
    assert!(body.contains("Prompt was: hello"), "{body}");
    // Our file verifies clean.
    let file = std::fs::read_dir(&s.sessions)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let out = Command::new(pi_bin())
        .args(["sessions", "verify"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_that_throws_on_load_is_reported_as_pi_reports_it() {
    let s = Setup::new(json!([{"text": "unused"}])).await;
    let ext = fixture("hostile-throws.ts");
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-p", "hi"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "Error: Failed to load extension \"{ext}\": Failed to load extension: boom at load"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("Start without extensions using \"pi -ne\""));
    assert!(s.requests().is_empty());
    // A file that is not an extension at all.
    let bad = s.cwd.join("nothing.ts");
    std::fs::write(&bad, "export const x = 1;\n").unwrap();
    let (code, _, stderr) = s.pi(&["-e", bad.to_str().unwrap(), "-p", "hi"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(&format!(
            "Extension does not export a valid factory function: {}",
            bad.display()
        )),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_never_resolves_is_cut_off_and_blocks_its_call() {
    let s = Setup::new(json!([
        {"text": "Reading.", "tool_calls": [tc("read", json!({"path": "a.txt"}))]},
        {"text": "Still here."},
    ]))
    .await;
    std::fs::write(s.cwd.join("a.txt"), "content\n").unwrap();
    let mut c = s.command(&["-e", &fixture("hostile-hangs.ts"), "-p", "read a.txt"]);
    let out = c
        .env("PI_EXTENSION_TIMEOUT_MS", "1000")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "Still here.\n");
    assert!(
        stderr.contains(
            "Extension error (<extensions>): \"tool_call\" handler did not finish within 1000 ms"
        ),
        "{stderr}"
    );
    assert_eq!(
        tool_messages(&s.requests()[1]),
        ["Extension failed, blocking execution: \"tool_call\" handler did not finish within 1000 ms"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_that_exits_leaves_the_agent_running() {
    let s = Setup::new(json!([
        {"text": "Crashing.", "tool_calls": [tc("crash", json!({}))]},
        {"text": "Carrying on.", "tool_calls": [tc("crash", json!({}))]},
        {"text": "Done."},
    ]))
    .await;
    let (code, stdout, stderr) = s.pi(&["-e", &fixture("hostile-exits.ts"), "-p", "crash"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Done.\n");
    assert!(
        stderr.contains("The extension process stopped (exit code 3)"),
        "{stderr}"
    );
    let requests = s.requests();
    assert_eq!(
        tool_messages(&requests[1]),
        ["the extension process exited (exit code 3)"]
    );
    assert_eq!(
        tool_messages(&requests[2])[1],
        "the extension process is not running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_respects_trust_and_no_extensions() {
    let s = Setup::new(json!([{"text": "A."}, {"text": "B."}, {"text": "C."}])).await;
    std::fs::create_dir_all(s.agent.join("extensions")).unwrap();
    std::fs::copy(
        fixture("hello.ts"),
        s.agent.join("extensions").join("hello.ts"),
    )
    .unwrap();
    let (code, _, stderr) = s.pi(&["-p", "one"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(declared(&s.requests()[0], "hello").is_some());
    let (code, _, stderr) = s.pi(&["-ne", "-p", "two"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(declared(&s.requests()[1], "hello").is_none());
    // A project extension loads only when the project is trusted.
    std::fs::create_dir_all(s.cwd.join(".pi/extensions")).unwrap();
    std::fs::copy(
        fixture("hostile-throws.ts"),
        s.cwd.join(".pi/extensions/x.ts"),
    )
    .unwrap();
    let (code, _, stderr) = s.pi(&["--no-approve", "-p", "three"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = s.pi(&["--approve", "-p", "four"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("boom at load"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrapped_builtin_tool_runs_in_the_host_and_streams_updates() {
    let s = Setup::new(json!([
        {"text": "Peeking.", "tool_calls": [tc("peek", json!({"path": "a.txt"}))]},
        {"text": "Seen."},
    ]))
    .await;
    std::fs::write(s.cwd.join("a.txt"), "alpha\nbeta\n").unwrap();
    let (code, stdout, stderr) =
        s.pi(&["-e", &fixture("wrapped-read.ts"), "--mode", "json", "peek"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let update = events
        .iter()
        .find(|e| e["type"] == "tool_execution_update")
        .expect("a tool_execution_update event");
    assert_eq!(update["toolName"], "peek");
    assert_eq!(
        update["partialResult"]["content"][0]["text"],
        "peeking at a.txt"
    );
    let requests = s.requests();
    // Declared with the built-in read tool's schema.
    assert_eq!(
        declared(&requests[0], "peek").unwrap()["parameters"],
        declared(&requests[0], "read").unwrap()["parameters"]
    );
    assert_eq!(tool_messages(&requests[1]), ["alpha\nbeta\n"]);
    let entries = s.session_entries();
    assert_eq!(
        tool_results(&entries)[0]["details"],
        json!({"wrapped": true})
    );
}
