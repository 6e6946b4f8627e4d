#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MCP tool changes during a run reach the model on its next request, end to end through
//! our `pi` binary with a small Node server over stdio: a server that changes its tools and
//! sends `notifications/tools/list_changed` (print mode), and `/mcp reconnect` to a server
//! whose tools changed meanwhile (RPC mode). The transcript records each change as a system
//! message with `toolsAdded`/`toolsRemoved`, as Pi's `declareToolChanges` does.

mod mcp_common;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use mcp_common::*;
use serde_json::{json, Value};

/// `node live.js <tools file>`: the tools named in the file (comma-separated, read at start).
/// Calling `grow` adds the tool `late` and announces it; the call is answered once the client
/// listed the tools again, so the test does not depend on timing.
const LIVE_JS: &str = r#"
const fs = require("fs");
const names = fs.readFileSync(process.argv[2], "utf8").trim().split(",");
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const tool = (name) => ({ name, description: `Tool ${name}`, inputSchema: { type: "object", properties: {} } });
let tools = names.map(tool);
let growing = null;
rl.on("line", (line) => {
  const m = JSON.parse(line);
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion,
      capabilities: { tools: { listChanged: true } }, serverInfo: { name: "live", version: "1" } } });
  } else if (m.method === "tools/list") {
    send({ jsonrpc: "2.0", id: m.id, result: { tools } });
    if (growing !== null) {
      send({ jsonrpc: "2.0", id: growing, result: { content: [{ type: "text", text: "grew" }] } });
      growing = null;
    }
  } else if (m.method === "tools/call") {
    if (m.params.name === "grow") {
      tools = tools.concat([tool("late")]);
      growing = m.id;
      send({ jsonrpc: "2.0", method: "notifications/tools/list_changed" });
      return;
    }
    send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: `called ${m.params.name}` }] } });
  }
});
"#;

fn live_server(s: &Setup, tools: &str) -> (PathBuf, PathBuf) {
    let script = s.cwd.join("live.js");
    std::fs::write(&script, LIVE_JS).unwrap();
    let list = s.cwd.join("tools.txt");
    std::fs::write(&list, tools).unwrap();
    (script, list)
}

fn entry(script: &Path, list: &Path) -> Value {
    json!({"command": "node", "args": [script.display().to_string(), list.display().to_string()], "exposure": "direct"})
}

/// The system messages of the session that change the declared tools.
fn tool_changes(entries: &[Value]) -> Vec<(Vec<String>, Vec<String>)> {
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "system")
        .map(|e| &e["message"])
        // The first one is the whole prompt.
        .skip(1)
        .map(|m| (names(&m["toolsAdded"]), names(&m["toolsRemoved"])))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_a_server_adds_during_the_run_are_declared_on_the_next_request() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__live__grow", json!({}))]},
        {"tool_calls": [tc("mcp__live__late", json!({}))]},
        {"text": "Done."},
    ]})))
    .await;
    let (script, list) = live_server(&s, "grow");
    s.write_mcp_json(json!({"live": entry(&script, &list)}));
    let out = s.prompt(&[], "Grow.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "Done.\n");
    let requests = s.requests();
    let first = declared(&requests[0]);
    assert!(first.contains(&"mcp__live__grow".to_string()), "{first:?}");
    assert!(!first.contains(&"mcp__live__late".to_string()), "{first:?}");
    let second = declared(&requests[1]);
    assert!(
        second.contains(&"mcp__live__late".to_string()),
        "{second:?}"
    );
    assert_eq!(
        s.tool_results(),
        [
            ("mcp__live__grow".to_string(), false, "grew".to_string()),
            (
                "mcp__live__late".to_string(),
                false,
                "called late".to_string()
            ),
        ]
    );
    // The transcript declares the new tool after the call that added it.
    let entries = s.session_entries();
    assert_eq!(
        tool_changes(&entries),
        [(vec!["mcp__live__late".to_string()], Vec::new())]
    );
    let inspect = s.inspect_session();
    assert!(inspect.is_object(), "{inspect}");
}

/// One RPC command, with what to do before sending it.
type Step<'a> = (&'a Value, Option<&'a dyn Fn()>);

/// `pi --mode rpc`: each command waits for its response, a model prompt also for `agent_end`.
fn rpc_run(s: &Setup, steps: &[Step<'_>]) -> Vec<Value> {
    let sessions = s.sessions.display().to_string();
    let mut child = std::process::Command::new(pi_bin())
        .args(["--mode", "rpc", "--session-dir", &sessions])
        .args(["--model", "fakeoai/fake-model"])
        .current_dir(&s.cwd)
        .env("PI_CODING_AGENT_DIR", &s.agent)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            tx.send(serde_json::from_str(&line.unwrap()).unwrap())
                .unwrap();
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    let mut records = Vec::new();
    for (command, before) in steps {
        if let Some(before) = before {
            before();
        }
        writeln!(stdin, "{command}").unwrap();
        let model = !command["message"].as_str().unwrap_or("").starts_with('/');
        let (mut responded, mut ended) = (false, !model);
        while !(responded && ended) {
            let record = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("a record");
            responded |= record["type"] == "response";
            ended |= record["type"] == "agent_end";
            records.push(record);
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    reader.join().unwrap();
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_mcp_reconnect_in_rpc_mode_changes_the_next_requests_tools() {
    let s = Setup::new(Some(json!({"turns": [
        {"text": "One."},
        {"tool_calls": [tc("mcp__live__beta", json!({}))]},
        {"text": "Two."},
    ]})))
    .await;
    let (script, list) = live_server(&s, "alpha");
    s.write_mcp_json(json!({"live": entry(&script, &list)}));
    let prompt = |text: &str| json!({"type": "prompt", "message": text});
    let change = || std::fs::write(&list, "beta").unwrap();
    let records = rpc_run(
        &s,
        &[
            (&prompt("one"), None),
            (&prompt("/mcp reconnect live"), Some(&change)),
            (&prompt("two"), None),
        ],
    );
    assert!(
        records.iter().any(|r| r["type"] == "extension_ui_request"
            && r["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Reconnected to MCP server \"live\""))),
        "{records:#?}"
    );
    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    assert!(declared(&requests[0]).contains(&"mcp__live__alpha".to_string()));
    for later in &requests[1..] {
        let names = declared(later);
        assert!(names.contains(&"mcp__live__beta".to_string()), "{names:?}");
        assert!(
            !names.contains(&"mcp__live__alpha".to_string()),
            "{names:?}"
        );
    }
    assert_eq!(
        s.tool_results(),
        [(
            "mcp__live__beta".to_string(),
            false,
            "called beta".to_string()
        )]
    );
    assert_eq!(
        tool_changes(&s.session_entries()),
        [(
            vec!["mcp__live__beta".to_string()],
            vec!["mcp__live__alpha".to_string()]
        )]
    );
}
