//! An extension tool's `ctx.executeTool()` and `ctx.tools`, end to end (Pi 1.6.0
//! extensions.md "Calling Other Tools"): our `pi` binary in `--mode json` with
//! `fixtures/extensions/execute-tool.ts` (its `orchestrate` tool calls `read`, a bash command
//! `fixtures/extensions/nested-calls.ts` blocks, an unknown tool, `read` without arguments,
//! `read` with an aborted signal and the extension tool `shout`, which itself reads a file)
//! against the fake LLM on 127.0.0.1 scripted to call `orchestrate`. Needs `node` (>= 20) on
//! PATH, as CI installs. `scripts/execute-tool-side-by-side.sh` runs the same scenario with
//! real Pi 1.6.0: the same result message, events and hook calls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

/// The events of `kind` for `id` in a JSON-mode stdout.
fn events<'a>(all: &'a [Value], kind: &str, id: &str) -> Vec<&'a Value> {
    all.iter()
        .filter(|e| e["type"] == kind && e["toolCallId"] == id)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn extension_tools_run_other_tools_through_the_nested_call_path() {
    let s = Setup::new(json!([
        {"tool_calls": [{"name": "orchestrate", "id": "call_o", "arguments": {}}]},
        {"text": "done"}
    ]))
    .await;
    std::fs::write(s.cwd.join("notes.txt"), "hello notes\n").unwrap();
    let (code, stdout, stderr) = s.pi(&[
        "-e",
        &fixture("execute-tool.ts"),
        "-e",
        &fixture("nested-calls.ts"),
        // Real Pi's `--tools` filters extension tools too, so they are named.
        "--tools",
        "read,bash,codemode,orchestrate,shout",
        "--mode",
        "json",
        "-p",
        "go",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let all: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();

    // What the tool got back: one outcome per call, ids `<caller>/<n>` in call order, and
    // failures as error results rather than rejections.
    let entries = s.session_entries();
    let results = tool_results(&entries);
    assert_eq!(results.len(), 1, "nested calls added results: {results:#?}");
    let result = results[0];
    assert_eq!(result["toolCallId"], "call_o");
    assert_eq!(result["isError"], false, "{result:#?}");
    let details = &result["details"];
    let outcomes = details["outcomes"].as_array().unwrap();
    let row = |n: usize| &outcomes[n];
    let expected = [
        ("call_o/1", "read", false, true),
        ("call_o/2", "bash", true, false),
        ("call_o/3", "no_such_tool", true, false),
        ("call_o/4", "read", true, false),
        ("call_o/5", "read", true, false),
        ("call_o/6", "shout", false, true),
    ];
    for (n, (id, name, is_error, ran)) in expected.iter().enumerate() {
        assert_eq!(row(n)["id"], *id, "{outcomes:#?}");
        assert_eq!(row(n)["name"], *name);
        assert_eq!(row(n)["isError"], *is_error, "{:#?}", row(n));
        assert_eq!(row(n)["ran"], *ran, "{:#?}", row(n));
    }
    let text = |n: usize| row(n)["text"].as_str().unwrap().to_string();
    // nested-calls.ts marks what nested reads return, so the hooks saw this call.
    assert_eq!(text(0), "[seen by the hook] hello notes\n");
    assert_eq!(text(1), "blocked by nested-calls: echo forbidden");
    assert_eq!(text(2), "Tool no_such_tool not found");
    assert!(
        text(3).starts_with("Validation failed for tool \"read\""),
        "{}",
        text(3)
    );
    assert_eq!(text(4), "Operation aborted");
    assert_eq!(text(5), "QUIET [SEEN BY THE HOOK] HELLO NOTES\n");

    // `ctx.tools`: the active tools others may call, in real Pi's order; codemode
    // (model-only) is not one.
    assert_eq!(
        details["tools"],
        json!(["read", "bash", "orchestrate", "shout"])
    );

    // `onUpdate` of executeTool got the nested tool's partial result.
    let partials = details["partials"].to_string();
    assert!(partials.contains("shouting"), "{partials}");

    // Events: nested calls, two levels deep, carry their parent.
    for (id, parent) in [
        ("call_o/1", "call_o"),
        ("call_o/2", "call_o"),
        ("call_o/3", "call_o"),
        ("call_o/6", "call_o"),
        ("call_o/6/1", "call_o/6"),
    ] {
        for kind in ["tool_execution_start", "tool_execution_end"] {
            let found = events(&all, kind, id);
            assert_eq!(found.len(), 1, "{kind} of {id}: {found:#?}");
            assert_eq!(found[0]["parentToolCallId"], parent, "{:#?}", found[0]);
        }
    }
    let update = events(&all, "tool_execution_update", "call_o/6");
    assert_eq!(update.len(), 1, "{update:#?}");
    assert_eq!(update[0]["parentToolCallId"], "call_o");
    assert_eq!(update[0]["partialResult"]["details"]["step"], 1);
    let end = |id: &str| events(&all, "tool_execution_end", id)[0].clone();
    assert_eq!(end("call_o/3")["isError"], true);
    assert!(end("call_o/3").get("durationMs").is_none());
    assert!(end("call_o/1")["durationMs"].is_u64());
    // The shout tool's own usage is in its result as it ended.
    assert_eq!(end("call_o/6")["result"]["usage"]["totalTokens"], 20);
    // The calling tool's events have no parent.
    assert!(events(&all, "tool_execution_end", "call_o")[0]
        .get("parentToolCallId")
        .is_none_or(Value::is_null));

    // The session keeps the bounded record, the deeper call included, and the usage of the
    // tool plus its nested results at every depth.
    let calls = result["nestedCalls"]["calls"].as_array().unwrap();
    let ids: Vec<&str> = calls.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "call_o/1",
            "call_o/2",
            "call_o/3",
            "call_o/4",
            "call_o/5",
            "call_o/6",
            "call_o/6/1"
        ]
    );
    assert_eq!(result["nestedCalls"]["complete"], true);
    let status: Vec<&str> = calls
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        status,
        ["ok", "error", "error", "error", "error", "ok", "ok"]
    );
    assert_eq!(calls[2]["error"], "Tool no_such_tool not found");
    assert_eq!(calls[0]["arguments"], json!({"path": "notes.txt"}));
    assert_eq!(
        result["usage"],
        json!({"input": 110, "output": 110, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": 220, "cost": {"input": 0.75, "output": 0.75, "cacheRead": 0,
            "cacheWrite": 0, "total": 1.5, "totalFromProvider": false}})
    );
    let keys: Vec<&String> = result.as_object().unwrap().keys().collect();
    let position = |k: &str| keys.iter().position(|key| *key == k).unwrap();
    assert!(position("details") < position("usage") && position("usage") < position("isError"));

    // The model saw one tool result, the orchestrating tool's.
    let requests = s.requests();
    let last = requests.last().unwrap();
    let tool_messages: Vec<&Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 1, "{tool_messages:#?}");
    assert_eq!(tool_messages[0]["tool_call_id"], "call_o");
}

/// A codemode script calling an extension tool that runs a tool itself: the calls two levels
/// deep are recorded on the codemode result, and the extension tool's usage is added to it.
#[tokio::test(flavor = "multi_thread")]
async fn codemode_results_carry_the_usage_of_nested_extension_tools() {
    let script = r#"console.log(await tools.shout({ text: "hi" }));"#;
    let s = Setup::new(json!([
        {"tool_calls": [{"name": "codemode", "id": "call_cm", "arguments": {"code": script}}]},
        {"text": "done"}
    ]))
    .await;
    std::fs::write(s.cwd.join("notes.txt"), "hello notes\n").unwrap();
    let (code, _stdout, stderr) = s.pi(&[
        "-e",
        &fixture("execute-tool.ts"),
        "--tools",
        "read,codemode,shout",
        "-p",
        "go",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let entries = s.session_entries();
    let results = tool_results(&entries);
    assert_eq!(results.len(), 1, "{results:#?}");
    let result = results[0];
    assert!(
        result["content"].to_string().contains("HI HELLO NOTES"),
        "{result:#?}"
    );
    let ids: Vec<&str> = result["nestedCalls"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_cm/1", "call_cm/1/1"]);
    assert_eq!(
        result["usage"],
        json!({"input": 10, "output": 10, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": 20, "cost": {"input": 0.25, "output": 0.25, "cacheRead": 0,
            "cacheWrite": 0, "total": 0.5}})
    );
}
