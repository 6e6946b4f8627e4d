//! The extension API beyond tools and dialogs, end to end with Pi's own example extensions
//! (copied unchanged into fixtures/extensions from the 1.6.0 npm package) and two small ones
//! of ours: `ctx.sessionManager` across a resume (todo.ts), tools registered after loading
//! (dynamic-tools.ts), labels and names (bookmark.ts, session-name.ts), status per turn
//! over RPC (status-line.ts), a replaced system prompt (pirate.ts), `sendUserMessage` from a
//! command (send-user-message.ts), `tool_result` and `context` handlers (result-shaper.ts)
//! and `setActiveTools` (read-only-mode.ts), the theme methods outside the TUI
//! (themes-ui.ts). Needs `node` (>= 20) on PATH, as CI installs.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

/// The system prompt text of an OpenAI chat-completions request.
fn system_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system" || m["role"] == "developer")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn declared_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todo_state_is_rebuilt_from_the_session_on_resume() {
    let s = Setup::new(json!([
        {"text": "Adding.", "tool_calls": [tc("todo", json!({"action": "add", "text": "buy milk"}))]},
        {"text": "Added."},
        {"text": "Listing.", "tool_calls": [tc("todo", json!({"action": "list"}))]},
        {"text": "Adding more.", "tool_calls": [tc("todo", json!({"action": "add", "text": "eggs"}))]},
        {"text": "Done."},
    ]))
    .await;
    let ext = fixture("todo.ts");
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-p", "add milk"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // A new process: the todos come back only through `ctx.sessionManager.getBranch()`
    // read in `session_start`.
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-c", "-p", "what is left?"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Done.\n");
    let requests = s.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(tool_messages(&requests[1]), ["Added todo #1: buy milk"]);
    assert_eq!(
        tool_messages(&requests[3]).last().unwrap(),
        "[ ] #1: buy milk"
    );
    assert_eq!(
        tool_messages(&requests[4]).last().unwrap(),
        "Added todo #2: eggs"
    );
    let entries = s.session_entries();
    let results = tool_results(&entries);
    assert_eq!(results.len(), 3);
    assert_eq!(results[2]["details"]["nextId"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_registered_after_loading_are_declared_and_called() {
    let s = Setup::new(json!([
        {"text": "Echo.", "tool_calls": [tc("echo_session", json!({"message": "one"}))]},
        {"text": "Shout.", "tool_calls": [tc("shout", json!({"message": "two"}))]},
        {"text": "Done."},
    ]))
    .await;
    let (code, stdout, stderr) = s.pi(&[
        "-e",
        &fixture("dynamic-tools.ts"),
        "-p",
        "/add-echo-tool shout",
        "echo twice",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stderr.contains("Extension error"), "{stderr}");
    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    // `echo_session` was registered in `session_start`, `shout` by the command.
    let names = declared_names(&requests[0]);
    assert!(names.contains(&"echo_session".to_string()), "{names:?}");
    assert!(names.contains(&"shout".to_string()), "{names:?}");
    assert_eq!(
        declared(&requests[0], "shout").unwrap()["description"],
        "Echo a message with prefix: [shout] "
    );
    assert_eq!(tool_messages(&requests[1]), ["[session] one"]);
    assert_eq!(tool_messages(&requests[2]).last().unwrap(), "[shout] two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_label_entries_and_name_the_session() {
    let s = Setup::new(json!([{"text": "Hello there."}])).await;
    let bookmark = fixture("bookmark.ts");
    let name = fixture("session-name.ts");
    let (code, stdout, stderr) = s.pi(&["-e", &bookmark, "-e", &name, "-p", "hello"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = s.pi(&[
        "-e",
        &bookmark,
        "-e",
        &name,
        "-c",
        "-p",
        "/bookmark greeting",
        "/session-name Greetings",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(s.requests().len(), 1, "commands never reach the model");
    let entries = s.session_entries();
    let assistant = entries
        .iter()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .unwrap();
    let label = entries.iter().find(|e| e["type"] == "label").unwrap();
    assert_eq!(label["targetId"], assistant["id"]);
    assert_eq!(label["label"], "greeting");
    let info = entries
        .iter()
        .find(|e| e["type"] == "session_info")
        .unwrap();
    assert_eq!(info["name"], "Greetings");

    // `/unbookmark` reads the label back through `ctx.sessionManager.getLabel()`.
    let (code, stdout, stderr) = s.pi(&["-e", &bookmark, "-c", "-p", "/unbookmark"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let entries = s.session_entries();
    let labels: Vec<&Value> = entries.iter().filter(|e| e["type"] == "label").collect();
    assert_eq!(labels.len(), 2);
    assert_eq!(labels[1]["targetId"], assistant["id"]);
    assert!(
        labels[1].get("label").is_none_or(Value::is_null),
        "{}",
        labels[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_line_follows_turns_over_rpc() {
    let s = Setup::new(json!([
        {"text": "Reading.", "tool_calls": [tc("ls", json!({}))]},
        {"text": "Read."},
    ]))
    .await;
    let mut child = s
        .command(&["-e", &fixture("status-line.ts"), "--mode", "rpc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    writeln!(stdin, r#"{{"id":"1","type":"prompt","message":"look"}}"#).unwrap();
    let mut statuses = Vec::new();
    while let Some(Ok(line)) = lines.next() {
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "extension_ui_request" && v["method"] == "setStatus" {
            assert_eq!(v["statusKey"], "status-demo");
            statuses.push(v["statusText"].as_str().unwrap().to_string());
        }
        if v["type"] == "agent_settled" {
            break;
        }
    }
    // The events reach the handlers in order, after the run goes on without them: wait
    // for the last status before closing.
    while statuses.last().map(String::as_str) != Some("✓ Turn 2 complete") {
        let Some(Ok(line)) = lines.next() else { break };
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["method"] == "setStatus" {
            statuses.push(v["statusText"].as_str().unwrap().to_string());
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert_eq!(
        statuses,
        [
            "Ready",
            "● Turn 1...",
            "✓ Turn 1 complete",
            "● Turn 2...",
            "✓ Turn 2 complete"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pirate_mode_replaces_the_system_prompt_for_the_run() {
    let s = Setup::new(json!([{"text": "Arr."}, {"text": "Plain."}])).await;
    let ext = fixture("pirate.ts");
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-p", "/pirate", "hello"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-c", "-p", "hello again"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let requests = s.requests();
    let pirate = system_text(&requests[0]);
    assert!(pirate.contains("You are now in PIRATE MODE"), "{pirate}");
    // The replaced prompt keeps Pi's own prompt ahead of the addition, and the tools.
    assert!(pirate.contains("<tools>"), "{pirate}");
    assert!(declared(&requests[0], "read").is_some());
    // Only for that run: the session file keeps Pi's prompt, the next process has no pirate.
    assert!(!system_text(&requests[1]).contains("PIRATE"));
    let entries = s.session_entries();
    assert!(!serde_json::to_string(&entries).unwrap().contains("PIRATE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_sends_a_user_message_turns_into_that_prompt() {
    let s = Setup::new(json!([{"text": "Four."}])).await;
    let (code, stdout, stderr) = s.pi(&[
        "-e",
        &fixture("send-user-message.ts"),
        "-p",
        "/ask what is 2+2?",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Four.\n");
    let requests = s.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(message_texts(["user"], &requests[0]), ["what is 2+2?"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_result_and_context_handlers_shape_what_the_model_sees() {
    let s = Setup::new(json!([
        {"text": "Noted."},
        {"text": "Reading.", "tool_calls": [tc("read", json!({"path": "a.txt"}))]},
        {"text": "Done."},
    ]))
    .await;
    std::fs::write(s.cwd.join("a.txt"), "the SECRET is 42\n").unwrap();
    let (code, stdout, stderr) = s.pi(&[
        "-e",
        &fixture("result-shaper.ts"),
        "-p",
        "please forget me later",
        "read a.txt",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert!(
            !message_texts(["user"], r)
                .iter()
                .any(|t| t.contains("forget me")),
            "{r}"
        );
    }
    assert_eq!(message_texts(["user"], &requests[2]), ["read a.txt"]);
    assert_eq!(tool_messages(&requests[2]), ["the [redacted] is 42\n"]);
    // The result is recorded as the handler left it; the filtered prompt stays in the file.
    let entries = s.session_entries();
    let results = tool_results(&entries);
    assert_eq!(results[0]["content"][0]["text"], "the [redacted] is 42\n");
    assert_eq!(results[0]["details"], json!({"redacted": true}));
    // The second handler's usage, as Pi records a result's usage.
    assert_eq!(results[0]["usage"]["totalTokens"], 10);
    assert_eq!(results[0]["usage"]["cost"]["total"], 0.3);
    assert!(entries.iter().any(|e| e["message"]["role"] == "user"
        && e["message"]["content"].to_string().contains("forget me")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_active_tools_patches_the_declared_tools() {
    let s = Setup::new(json!([{"text": "One."}, {"text": "Two."}, {"text": "Three."}])).await;
    let ext = fixture("read-only-mode.ts");
    let (code, stdout, stderr) = s.pi(&[
        "-e",
        &ext,
        "-p",
        "first",
        "/readonly",
        "second",
        "/readwrite",
        "third",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    let all = declared_names(&requests[0]);
    assert!(all.len() > 1, "{all:?}");
    assert_eq!(declared_names(&requests[1]), ["read"]);
    assert_eq!(declared_names(&requests[2]), all);
    // The extension saw only the known tool become active.
    let entries = s.session_entries();
    let mode = entries.iter().find(|e| e["type"] == "custom").unwrap();
    assert_eq!(mode["data"]["active"], json!(["read"]));
    // Pi's transcript form: one system message per change, naming what went and came.
    let patches: Vec<&Value> = entries
        .iter()
        .filter(|e| e["message"]["role"] == "system")
        .skip(1)
        .map(|e| &e["message"])
        .collect();
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert!(patches[0]["toolsRemoved"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "bash"));
    assert!(patches[0].get("toolsAdded").is_none());
    assert!(patches[1]["toolsAdded"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "bash"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_restricts_tools_and_its_context_leaves_with_it() {
    let s = Setup::new(json!([
        {"text": "Cleaning first.", "tool_calls": [tc("bash", json!({"command": "rm -rf build"}))]},
        {"text": "Plan:\n1. Read the code\n2. Change it"},
        {"text": "Executing."},
    ]))
    .await;
    std::fs::create_dir_all(s.cwd.join("build")).unwrap();
    let ext = format!("{}/index.ts", fixture("plan-mode"));
    let (code, stdout, stderr) = s.pi(&[
        "-e",
        &ext,
        "-p",
        "/plan",
        "make a plan",
        "/plan",
        "now do it",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stderr.contains("Extension error"), "{stderr}");
    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    let planning = declared_names(&requests[0]);
    assert!(planning.contains(&"read".to_string()), "{planning:?}");
    assert!(!planning.contains(&"edit".to_string()), "{planning:?}");
    assert!(!planning.contains(&"write".to_string()), "{planning:?}");
    assert!(message_texts(["user"], &requests[0])
        .iter()
        .any(|t| t.contains("[PLAN MODE ACTIVE]")));
    // The allowlist blocked the destructive command.
    assert!(tool_messages(&requests[1])[0].starts_with("Plan mode: command blocked"));
    assert!(s.cwd.join("build").exists());
    // Plan mode off: every tool is back and the plan-mode context is filtered out.
    let after = declared_names(&requests[2]);
    assert!(after.contains(&"edit".to_string()), "{after:?}");
    assert!(!message_texts(["user"], &requests[2])
        .iter()
        .any(|t| t.contains("[PLAN MODE ACTIVE]")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_flags_come_from_the_command_line() {
    let s = Setup::new(json!([{"text": "Planned."}])).await;
    let ext = format!("{}/index.ts", fixture("plan-mode"));
    // `--plan` is plan-mode's `pi.registerFlag("plan")`: it starts in plan mode.
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "--plan", "-p", "look around"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let requests = s.requests();
    assert!(!declared_names(&requests[0]).contains(&"edit".to_string()));
    assert!(message_texts(["user"], &requests[0])
        .iter()
        .any(|t| t.contains("[PLAN MODE ACTIVE]")));
    // A flag nobody registers is an error, as an unknown option always was.
    let (code, _, stderr) = s.pi(&["-e", &ext, "--no-such-flag", "-p", "hi"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown option --no-such-flag"), "{stderr}");
    let (code, _, stderr) = s.pi(&["--no-such-flag", "-p", "hi"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown option --no-such-flag"), "{stderr}");
}

/// `deliverAs: "nextTurn"`: the message sent before any prompt is recorded after the next
/// prompt's user message (not at once) and reaches the model with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_turn_message_goes_in_after_the_next_prompt() {
    let s = Setup::new(json!([{"text": "Noted."}])).await;
    let (code, out, err) = s.pi(&["-e", &fixture("next-turn.ts"), "-p", "hello"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Noted."), "{out}");
    let entries = s.session_entries();
    let kinds: Vec<String> = entries
        .iter()
        .filter(|e| e["type"] == "message" || e["type"] == "custom_message")
        .map(|e| match e["type"].as_str().unwrap() {
            "message" => e["message"]["role"].as_str().unwrap().to_string(),
            other => format!("{other}:{}", e["customType"].as_str().unwrap_or("")),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "system",
            "user",
            "custom_message:next-turn-note",
            "assistant"
        ]
    );
    let request = &s.requests()[0];
    let texts: Vec<String> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].contains("hello") && texts[1].contains("Remember the note."),
        "{texts:?}"
    );
}

/// `ctx.ui.getAllThemes()`, `getTheme()` and `setTheme()` outside the interactive mode
/// answer as Pi's do (themes-ui.ts): no themes and no theme in print and RPC mode;
/// `setTheme` fails with "UI not available" in print mode and "Theme switching not
/// supported in RPC mode" over RPC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn themes_are_not_available_in_print_and_rpc_mode() {
    let s = Setup::new(json!([])).await;
    let ext = fixture("themes-ui.ts");
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-p", "/themes-list", "/theme-set dark"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for line in [
        "themes: \n",
        "getTheme dark: undefined none \n",
        "setTheme dark: {\"success\":false,\"error\":\"UI not available\"}",
    ] {
        assert!(stderr.contains(line), "{line:?} missing:\n{stderr}");
    }

    let mut rpc = Rpc::start(&s, &["-e", &ext]);
    let mut notices = Vec::new();
    // One command at a time: RPC runs commands concurrently, so their notices would
    // interleave.
    for (id, command, wanted) in [("1", "/themes-list", 3), ("2", "/theme-set dark", 4)] {
        rpc.send(json!({"id": id, "type": "prompt", "message": command}));
        while notices.len() < wanted {
            let (notice, _) =
                rpc.until(|v| v["type"] == "extension_ui_request" && v["method"] == "notify");
            notices.push(notice["message"].as_str().unwrap().to_string());
        }
    }
    assert!(rpc.finish());
    assert_eq!(
        notices,
        [
            "themes: ",
            "getTheme dark: undefined none ",
            "getTheme nosuch: undefined",
            "setTheme dark: {\"success\":false,\"error\":\"Theme switching not supported in RPC mode\"}",
        ]
    );
}

/// Pi's subagent example (copied unchanged from the 1.6.0 package) starts Pi again from
/// `process.execPath` and `process.argv[1]`: here that starts this `pi` binary, whose
/// `--mode json` run with the agent's prompt answers the task, and the answer comes back
/// as the tool's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subagent_example_delegates_to_this_pi() {
    let s = Setup::new(json!([
        {"text": "", "tool_calls": [tc("subagent", json!({"agent": "helper", "task": "Say the word."}))]},
        {"text": "The word is ready."},
        {"text": "Delegated."},
    ]))
    .await;
    std::fs::create_dir_all(s.agent.join("agents")).unwrap();
    std::fs::write(
        s.agent.join("agents/helper.md"),
        "---\nname: helper\ndescription: Helps out\ntools: read\n---\nYou are the helper (marker 5150).\n",
    )
    .unwrap();
    let ext = format!("{}/index.ts", fixture("subagent"));
    let (code, stdout, stderr) = s.pi(&["-e", &ext, "-p", "delegate"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "Delegated.\n", "{stderr}");
    let requests = s.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    // The subagent's own run: the agent's prompt appended, its tools only, the task.
    let sub = &requests[1];
    assert!(sub.to_string().contains("marker 5150"), "{sub}");
    assert!(sub.to_string().contains("Say the word."), "{sub}");
    assert!(
        declared(sub, "subagent").is_none() && declared(sub, "read").is_some(),
        "{sub}"
    );
    let results = tool_messages(&requests[2]);
    assert!(results[0].contains("The word is ready."), "{results:?}");
}
