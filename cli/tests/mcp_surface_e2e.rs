//! MCP surface end to end: `tool_search` with `deferred` exposure and the resource tools,
//! our `pi` binary against the real `@modelcontextprotocol/server-everything` (npm, as the
//! other MCP tests install it) and the fake LLM.
//!
//! The expectations are what real Pi 1.6.0 did with the same scripts and server, recorded in
//! `fixtures/realpi/mcp/` (see their `_about`): the `tool_search` declaration, its result and
//! the system message that declares the loaded tools, the resource tools' declarations, the
//! listings and the read results.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod mcp_common;

use mcp_common::*;
use serde_json::{json, Value};

fn everything(extra: Value) -> Value {
    let mut entry = json!({"command": "node", "args": [everything_script(), "stdio"]});
    for (k, v) in extra.as_object().unwrap() {
        entry[k] = v.clone();
    }
    json!({"everything": entry})
}

/// The system messages of a session, in order.
fn system_messages(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["message"]["role"] == "system")
        .map(|e| e["message"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_search_loads_deferred_tools_and_the_transcript_keeps_them() {
    let pi = recorded("tool_search_everything");
    let mut script = pi["script"].clone();
    let turns = script["turns"].as_array().unwrap().clone();
    script["turns"] = Value::from(turns[..3].to_vec());
    let s = Setup::new(Some(script)).await;
    s.write_mcp_json(everything(json!({"exposure": "deferred"})));
    let out = s.prompt(&[], "find echo");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "done\n");

    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    let expected: Vec<Vec<String>> = serde_json::from_value(pi["request_tools"].clone()).unwrap();
    // The first request declares tool_search, not the deferred tools; the next two carry
    // the two tools it loaded, as Pi's did.
    for (i, request) in requests.iter().enumerate() {
        assert_eq!(declared(request), expected[i], "request {i}");
    }
    let ours = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "tool_search")
        .unwrap();
    assert_eq!(
        ours.to_string(),
        pi["tool_search_request_declaration"].to_string()
    );
    let prompt = requests[0]["messages"][0]["content"].as_str().unwrap();
    for line in pi["system_prompt_tools_line"].as_array().unwrap() {
        assert!(
            prompt.contains(line.as_str().unwrap()),
            "{line} in {prompt}"
        );
    }

    // The tool_search result and the system message recording the loading, as Pi wrote them.
    let entries = s.session_entries();
    let result = entries
        .iter()
        .find(|e| e["message"]["toolName"] == "tool_search")
        .unwrap();
    assert_eq!(
        result["message"]["content"],
        pi["tool_search_result"]["content"]
    );
    assert_eq!(
        result["message"]["details"],
        pi["tool_search_result"]["details"]
    );
    let systems = system_messages(&entries);
    assert_eq!(systems.len(), 2, "{systems:?}");
    let loaded = &systems[1];
    let keys: Vec<&String> = loaded.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["role", "content", "timestamp", "toolsAdded"]);
    assert_eq!(
        loaded["toolsAdded"].to_string(),
        pi["loaded_system_message"]["toolsAdded"].to_string()
    );
    assert_eq!(
        s.tool_results()[1],
        (
            "mcp__everything__echo".to_string(),
            false,
            "Echo: hi".to_string()
        )
    );
    s.inspect_session();

    // Resumed: the transcript still declares the loaded tools and their calls run. (Pi 1.6.0
    // in print mode drops them with a `toolsRemoved` message when the server is still
    // connecting as the prompt starts, against its own docs; see docs/mcp.md.)
    s.fake
        .as_ref()
        .unwrap()
        .set_script(serde_json::from_value(json!({"turns": turns[3..].to_vec()})).unwrap());
    let file = s.session_file().display().to_string();
    let out = s.pi(&["--session", &file, "-p", "again"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "done2\n");
    let requests = s.requests();
    for request in &requests[3..] {
        assert_eq!(declared(request), expected[1]);
    }
    assert_eq!(
        s.tool_results().last().unwrap(),
        &(
            "mcp__everything__echo".to_string(),
            false,
            "Echo: again".to_string()
        )
    );
    assert_eq!(system_messages(&s.session_entries()).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_search_without_match_and_bad_arguments() {
    let script = json!({"turns": [
        {"tool_calls": [tc("tool_search", json!({"query": "zzzqqq"}))]},
        {"tool_calls": [tc("tool_search", json!({"query": "  "}))]},
        {"tool_calls": [tc("tool_search", json!({"query": "echo", "limit": 0}))]},
        {"tool_calls": [tc("mcp__everything__echo", json!({"message": "x"}))]},
        {"text": "ok"}
    ]});
    let s = Setup::new(Some(script)).await;
    s.write_mcp_json(everything(json!({"exposure": "deferred"})));
    let out = s.prompt(&[], "go");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    assert_eq!(
        s.tool_results(),
        [
            (
                "tool_search".to_string(),
                false,
                "No matching tools found.".to_string()
            ),
            (
                "tool_search".to_string(),
                true,
                "query must not be empty".to_string()
            ),
            (
                "tool_search".to_string(),
                true,
                "limit must be a positive integer".to_string()
            ),
            // Not loaded: a deferred tool cannot be called before tool_search loads it.
            (
                "mcp__everything__echo".to_string(),
                true,
                "Tool mcp__everything__echo not found".to_string()
            ),
        ]
    );
    // Nothing was loaded, so no system message declares tools after the first.
    assert_eq!(system_messages(&s.session_entries()).len(), 1);
    // `--exclude-tools tool_search` leaves it out.
    s.fake
        .as_ref()
        .unwrap()
        .set_script(serde_json::from_value(json!({"turns": [{"text": "ok"}]})).unwrap());
    let out = s.prompt(&["--exclude-tools", "tool_search"], "hi");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        declared(&s.requests().pop().unwrap()),
        ["read", "bash", "edit", "write"]
    );
}

/// Read results carry the time the server made them (`10:04:05 AM` in the server's
/// locale): the clock and its AM/PM become `TIME`, so the test passes at any hour.
fn without_time(text: &str) -> String {
    let is_clock = |word: &str| {
        let parts: Vec<&str> = word.split(':').collect();
        parts.len() == 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    };
    let mut out: Vec<&str> = Vec::new();
    let mut words = text.split(' ').peekable();
    while let Some(word) = words.next() {
        if is_clock(word) {
            out.push("TIME");
            if words.peek().is_some_and(|w| *w == "AM" || *w == "PM") {
                words.next();
            }
        } else {
            out.push(word);
        }
    }
    out.join(" ")
}

#[test]
fn without_time_ignores_the_clock_and_its_half_of_the_day() {
    assert_eq!(
        without_time("a blob created at 1:02:03 PM today"),
        without_time("a blob created at 11:22:33 AM today")
    );
    assert_eq!(without_time("at 1:02:03 PM"), "at TIME");
    assert_eq!(without_time("ratio 1:2 AM"), "ratio 1:2 AM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_tools_list_and_read_like_pi() {
    let pi = recorded("resources_everything");
    let s = Setup::new(Some(pi["list_script"].clone())).await;
    s.write_mcp_json(everything(pi["mcp_json_entry_extra"].clone()));
    let out = s.prompt(&[], "list");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    let requests = s.requests();
    let expected: Vec<String> = serde_json::from_value(pi["request_tools"].clone()).unwrap();
    assert_eq!(declared(&requests[0]), expected);
    for theirs in pi["declarations"].as_array().unwrap() {
        let name = &theirs["function"]["name"];
        let ours = requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| &t["function"]["name"] == name)
            .unwrap();
        assert_eq!(ours.to_string(), theirs.to_string(), "{name}");
    }
    // Listings: the same JSON (the server's key order is not kept), compact on one line.
    let results: Vec<String> = requests[1..]
        .iter()
        .map(|r| tool_messages(r).pop().unwrap())
        .collect();
    let theirs = pi["list_results"].as_array().unwrap();
    assert_eq!(results.len(), theirs.len());
    for (ours, theirs) in results.iter().zip(theirs) {
        assert!(!ours.contains('\n'));
        let ours: Value = serde_json::from_str(ours).unwrap();
        let theirs: Value = serde_json::from_str(theirs.as_str().unwrap()).unwrap();
        assert_eq!(ours, theirs);
    }

    // Reads: text, a text blob, an unknown server, a cursor without a server.
    s.fake
        .as_ref()
        .unwrap()
        .set_script(serde_json::from_value(pi["read_script"].clone()).unwrap());
    let out = s.prompt(&[], "read");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    let requests = s.requests();
    let results: Vec<String> = requests[requests.len() - 4..]
        .iter()
        .map(|r| without_time(&tool_messages(r).pop().unwrap()))
        .collect();
    let theirs: Vec<String> = pi["read_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| without_time(t.as_str().unwrap()))
        .collect();
    assert_eq!(results, theirs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_resource_tools_are_found_by_tool_search() {
    let script = json!({"turns": [
        {"tool_calls": [tc("tool_search", json!({"query": "read resource uri", "limit": 1}))]},
        {"tool_calls": [tc("read_mcp_resource", json!({"server": "everything", "uri": "demo://resource/static/document/features.md"}))]},
        {"text": "ok"}
    ]});
    let s = Setup::new(Some(script)).await;
    s.write_mcp_json(everything(json!({"exposure": "deferred"})));
    let out = s.prompt(&[], "go");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
    let results = s.tool_results();
    assert_eq!(
        results[0].2,
        "Loaded 1 tool. They are available from your next call:\n- read_mcp_resource: Read a specific resource from an MCP server given the server name and resource URI."
    );
    assert_eq!(results[1].0, "read_mcp_resource");
    assert!(!results[1].1, "{results:?}");
    assert!(!results[1].2.is_empty());
    assert!(declared(&s.requests()[1]).contains(&"read_mcp_resource".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_mcp_in_rpc_mode_reports_status_and_reconnects_like_pi() {
    let s = Setup::new(None).await;
    s.write_mcp_json(json!({
        "everything": {"command": "node", "args": [everything_script(), "stdio"], "exposure": "deferred"},
        "broken": {"command": "/nonexistent/bin"},
        "off": {"command": "x", "enabled": false},
        "bad name": {"command": "x"}
    }));
    let prompt = |text: &str| json!({"type": "prompt", "message": text});
    let records = rpc_session(
        &s,
        &[
            prompt("/mcp"),
            prompt("/mcp reconnect everything"),
            prompt("/mcp login everything"),
            prompt("/mcp frobnicate"),
        ],
    );
    let notices: Vec<(String, String)> = records
        .iter()
        .filter(|r| r["type"] == "extension_ui_request" && r["method"] == "notify")
        .map(|r| {
            (
                r["notifyType"].as_str().unwrap().to_string(),
                r["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let config = s.agent.join("mcp.json").display().to_string();
    let bad_name = format!(
        "{config}: invalid server name \"bad name\" (use letters, digits, \"_\" and \"-\")"
    );
    // Pi's texts, recorded from real Pi 1.6.0 over RPC with the same mcp.json.
    let expected = [
        (
            "warning",
            format!("MCP servers need attention:\n  config: {bad_name}\n  broken: failed: spawn /nonexistent/bin ENOENT\nRun /mcp to fix."),
        ),
        (
            "info",
            format!("everything: connected, 14 tools (deferred)\nbroken: failed (codemode)\n    spawn /nonexistent/bin ENOENT\noff: disabled (codemode)\nconfig error: {bad_name}"),
        ),
        (
            "info",
            "Reconnected to MCP server \"everything\" (connected · 14 tools · resources).".to_string(),
        ),
        (
            "error",
            "No enabled MCP server uses OAuth. Only HTTP servers without an Authorization header do.".to_string(),
        ),
        (
            "warning",
            "Usage: /mcp, /mcp login [server], /mcp logout [server], /mcp reconnect [server]"
                .to_string(),
        ),
    ];
    for (kind, message) in &expected {
        assert!(
            notices.iter().any(|(k, m)| k == kind && m == message),
            "missing {kind}: {message}\nin {notices:#?}"
        );
    }
    assert_eq!(notices.len(), expected.len(), "{notices:#?}");
    let responses: Vec<&Value> = records.iter().filter(|r| r["type"] == "response").collect();
    assert_eq!(responses.len(), 4);
    for r in responses {
        assert_eq!(r["data"], json!({"disposition": "handled"}), "{r}");
    }

    // Print mode prints the status (Pi's docs; Pi 1.6.0 itself drops the notice there) and
    // reports the failed server and the config error on stderr; nothing reaches a model.
    let sessions = s.sessions.display().to_string();
    let out = s.pi(&["--session-dir", &sessions, "-p", "/mcp"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, format!("{}\n", expected[1].1));
    assert!(
        stderr.contains(&format!("Warning: MCP config error: {bad_name}")),
        "{stderr}"
    );
    assert!(
        stderr.contains("Warning: MCP server \"broken\" failed: spawn /nonexistent/bin ENOENT"),
        "{stderr}"
    );
}
