//! `executionMode: "sequential"` on an extension tool (Pi 1.6.0 extensions.md, "Execution
//! mode"), end to end: our `pi` binary in print mode with
//! `fixtures/extensions/sequential-tool.ts` against the fake LLM on 127.0.0.1 scripted to
//! make two tool calls in one message. Each tool answers whether another call was running
//! while it ran. Calls of ordinary tools overlap; a message that names a sequential tool
//! has all of its calls run one after another (Pi's agent loop decides per message).
//! Needs `node` (>= 20) on PATH, as CI installs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

/// The text of each tool result of the session, in call order.
async fn answers(calls: [&str; 2]) -> Vec<String> {
    let s = Setup::new(json!([
        {"tool_calls": [
            {"name": calls[0], "id": "call_1", "arguments": {}},
            {"name": calls[1], "id": "call_2", "arguments": {}}
        ]},
        {"text": "done"}
    ]))
    .await;
    let (code, _stdout, stderr) = s.pi(&["-e", &fixture("sequential-tool.ts"), "-p", "go"]);
    assert_eq!(code, 0, "{stderr}");
    let entries = s.session_entries();
    let results = tool_results(&entries);
    let ids: Vec<&Value> = results.iter().map(|r| &r["toolCallId"]).collect();
    assert_eq!(ids, ["call_1", "call_2"], "results keep the call order");
    results
        .iter()
        .map(|r| r["content"][0]["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn ordinary_extension_tools_run_concurrently() {
    assert_eq!(
        answers(["free", "free"]).await,
        ["overlapped", "overlapped"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sequential_tool_makes_its_message_run_one_call_at_a_time() {
    // The sequential tool second: the ordinary one before it waits too.
    assert_eq!(answers(["free", "guarded"]).await, ["alone", "alone"]);
    assert_eq!(answers(["guarded", "guarded"]).await, ["alone", "alone"]);
}
