//! `executionMode: "sequential"` on an extension tool (Pi 1.6.0 extensions.md, "Execution
//! mode"), end to end: our `pi` binary in print mode with
//! `fixtures/extensions/sequential-tool.ts` against the fake LLM on 127.0.0.1. Each probe
//! tool answers whether another probe call ran at the same time (it waits for one to start,
//! so overlapping calls are always seen).
//!
//! - An assistant message's calls of ordinary tools overlap; a message that names a
//!   sequential tool has all of its calls run one after another (Pi's agent loop decides
//!   per message).
//! - Nested calls (a codemode script's `tools.x()` under `Promise.all`, an extension tool's
//!   `ctx.executeTool()` under `Promise.all`) of ordinary tools overlap; a nested call of a
//!   sequential tool runs alone (Pi's nested-call runner).
//!
//! Needs `node` (>= 20) on PATH, as CI installs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

/// A tool result's text blocks, one after another (codemode puts its output after a header
/// block).
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

use extensions_common::*;

/// The text of each tool result of a session whose model makes `calls` in one message.
async fn answers(calls: &[Value], extra_args: &[&str]) -> Vec<String> {
    let s = Setup::new(json!([{"tool_calls": calls}, {"text": "done"}])).await;
    let fixture = fixture("sequential-tool.ts");
    let mut args = vec!["-e", fixture.as_str()];
    args.extend(extra_args);
    args.extend(["-p", "go"]);
    let (code, _stdout, stderr) = s.pi(&args);
    assert_eq!(code, 0, "{stderr}");
    let entries = s.session_entries();
    let results = tool_results(&entries);
    let ids: Vec<&Value> = results.iter().map(|r| &r["toolCallId"]).collect();
    let wanted: Vec<&Value> = calls.iter().map(|c| &c["id"]).collect();
    assert_eq!(ids, wanted, "results keep the call order");
    results.iter().map(|r| text_of(r)).collect()
}

/// Two calls without arguments in one message.
async fn pair(names: [&str; 2]) -> Vec<String> {
    let calls = [
        json!({"name": names[0], "id": "call_1", "arguments": {}}),
        json!({"name": names[1], "id": "call_2", "arguments": {}}),
    ];
    answers(&calls, &[]).await
}

/// What a codemode script that calls `names` at once through `tools.*` returns.
async fn script(names: [&str; 2]) -> String {
    let code = format!(
        "const answers = await Promise.all([tools.{}({{}}), tools.{}({{}})]);\nreturn \"answers=\" + answers.join(\",\");",
        names[0], names[1]
    );
    let calls = [json!({"name": "codemode", "id": "cm_1", "arguments": {"code": code}})];
    let texts = answers(&calls, &["--tools", "+codemode"]).await;
    let text = &texts[0];
    let start = text.find("answers=").unwrap_or_else(|| panic!("{text}"));
    text[start + "answers=".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// What `fanout` answers when it runs `names` at once through `ctx.executeTool()`.
async fn fanout(names: [&str; 2]) -> String {
    let calls = [json!({"name": "fanout", "id": "fo_1", "arguments": {"names": names}})];
    answers(&calls, &[]).await.remove(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn ordinary_extension_tools_run_concurrently() {
    assert_eq!(pair(["free", "free"]).await, ["overlapped", "overlapped"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sequential_tool_makes_its_message_run_one_call_at_a_time() {
    // The sequential tool second: the ordinary one before it runs alone too.
    assert_eq!(pair(["free", "guarded"]).await, ["alone", "alone"]);
    assert_eq!(pair(["guarded", "guarded"]).await, ["alone", "alone"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn codemode_script_calls_overlap_unless_one_is_sequential() {
    assert_eq!(script(["free", "free"]).await, "overlapped,overlapped");
    assert_eq!(script(["free", "guarded"]).await, "alone,alone");
    assert_eq!(script(["guarded", "free"]).await, "alone,alone");
    assert_eq!(script(["guarded", "guarded"]).await, "alone,alone");
}

#[tokio::test(flavor = "multi_thread")]
async fn execute_tool_calls_overlap_unless_one_is_sequential() {
    assert_eq!(fanout(["free", "free"]).await, "overlapped,overlapped");
    assert_eq!(fanout(["free", "guarded"]).await, "alone,alone");
    assert_eq!(fanout(["guarded", "guarded"]).await, "alone,alone");
}
