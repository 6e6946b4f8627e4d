//! Calls a codemode script makes, end to end: they pass through the extensions' `tool_call`
//! and `tool_result` hooks and are announced by `tool_execution_*` events carrying
//! `parentToolCallId`, with ids `<parent>/<n>`, as extensions.md "Calling Other Tools" says
//! Pi 1.6.0 does; they add no tool results to the transcript. Our `pi` binary with the
//! extension `fixtures/extensions/nested-calls.ts` (it records what it sees, blocks a bash
//! command, rewrites a nested `read` result) and the fake LLM on 127.0.0.1 scripted to call
//! `codemode`. Needs `node` (>= 20) on PATH, as CI installs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

const SCRIPT: &str = r#"const notes = await tools.read({ path: "notes.txt" });
let shell;
try {
  shell = await tools.bash({ command: "echo forbidden" });
} catch (error) {
  shell = `rejected: ${error.message}`;
}
console.log(notes);
console.log(shell);"#;

/// `(type, toolCallId, parentToolCallId)` of each record, in the order given.
fn rows(records: &[Value]) -> Vec<(String, String, Option<String>)> {
    records
        .iter()
        .map(|r| {
            (
                r["type"].as_str().unwrap().to_string(),
                r["toolCallId"].as_str().unwrap().to_string(),
                r["parentToolCallId"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn has(rows: &[(String, String, Option<String>)], kind: &str, id: &str, parent: Option<&str>) {
    assert!(
        rows.iter()
            .any(|(k, i, p)| k == kind && i == id && p.as_deref() == parent),
        "no {kind} for {id} with parent {parent:?} in {rows:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn codemode_calls_pass_through_extension_hooks_and_carry_their_parent() {
    let s = Setup::new(json!([
        {"tool_calls": [{"name": "codemode", "id": "call_cm", "arguments": {"code": SCRIPT}}]},
        {"text": "done"}
    ]))
    .await;
    std::fs::write(s.cwd.join("notes.txt"), "hello notes\n").unwrap();
    let extension = fixture("nested-calls.ts");
    let (code, stdout, stderr) = s.pi(&[
        "-e",
        &extension,
        "--tools",
        "read,bash,codemode",
        "--mode",
        "json",
        "-p",
        "go",
    ]);
    assert_eq!(code, 0, "{stderr}");

    // The events a JSON-mode client sees.
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &Value| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("tool_execution_"))
        })
        .collect();
    let seen = rows(&events);
    has(&seen, "tool_execution_start", "call_cm", None);
    has(&seen, "tool_execution_end", "call_cm", None);
    for nested in ["call_cm/1", "call_cm/2"] {
        has(&seen, "tool_execution_start", nested, Some("call_cm"));
        has(&seen, "tool_execution_end", nested, Some("call_cm"));
    }
    let end = |id: &str| {
        events
            .iter()
            .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == id)
            .unwrap()
    };
    assert_eq!(end("call_cm/1")["isError"], false);
    assert!(end("call_cm/1")["durationMs"].is_u64());
    // Blocked: an error result, and no duration since the tool never ran.
    assert_eq!(end("call_cm/2")["isError"], true);
    assert!(end("call_cm/2").get("durationMs").is_none());
    assert_eq!(end("call_cm/1")["toolName"], "read");

    // What the extension's handlers received.
    let recorded: Vec<Value> = std::fs::read_to_string(s.cwd.join("nested-events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let hooks = rows(&recorded);
    has(&hooks, "tool_call", "call_cm", None);
    has(&hooks, "tool_call", "call_cm/1", Some("call_cm"));
    has(&hooks, "tool_call", "call_cm/2", Some("call_cm"));
    has(&hooks, "tool_result", "call_cm/1", Some("call_cm"));
    has(&hooks, "tool_result", "call_cm", None);
    has(&hooks, "tool_execution_start", "call_cm/1", Some("call_cm"));
    has(&hooks, "tool_execution_end", "call_cm/2", Some("call_cm"));
    // A blocked call skips `tool_result`.
    assert!(
        !hooks
            .iter()
            .any(|(k, i, _)| k == "tool_result" && i == "call_cm/2"),
        "{hooks:#?}"
    );
    // The hooks ran in call order: the script's first call was checked before its second.
    let position = |kind: &str, id: &str| {
        hooks
            .iter()
            .position(|(k, i, _)| k == kind && i == id)
            .unwrap()
    };
    assert!(position("tool_call", "call_cm") < position("tool_call", "call_cm/1"));
    assert!(position("tool_result", "call_cm/1") < position("tool_call", "call_cm/2"));

    // The script got the rewritten read and the block reason; the model gets the script's
    // result in the one tool result of the transcript.
    let entries = s.session_entries();
    let results = tool_results(&entries);
    assert_eq!(results.len(), 1, "{results:#?}");
    let result = results[0];
    assert_eq!(result["toolCallId"], "call_cm");
    let text = result["content"].to_string();
    assert!(
        text.contains("[seen by the hook] hello notes"),
        "the nested read was not rewritten by tool_result: {text}"
    );
    assert!(
        text.contains("blocked by nested-calls: echo forbidden"),
        "the nested bash was not blocked by tool_call: {text}"
    );
    let nested = &result["nestedCalls"]["calls"];
    assert_eq!(nested[0]["id"], "call_cm/1");
    assert_eq!(nested[0]["status"], "ok");
    assert_eq!(nested[1]["id"], "call_cm/2");
    assert_eq!(nested[1]["status"], "error");
}
