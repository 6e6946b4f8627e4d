#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MCP servers that misbehave, end to end through our `pi` binary: each a small Node script
//! written here, spoken to over stdio. Every case ends with a clear result or error, nothing
//! hangs (each `pi` run is bounded by the server `timeout`), and the session file stays valid
//! (`pi sessions inspect --json` opens it).
//!
//! Covered: a server that dies mid-call and one that never answers (Pi's texts), a 1 MB tool
//! result (Pi's 20 KB middle truncation and the full-output file), tool names with odd
//! characters (sanitised, colliding names get hash suffixes), 5,000 tools over several
//! `tools/list` pages, and junk lines between the JSON-RPC messages on stdout.

mod mcp_common;

use std::path::{Path, PathBuf};

use mcp_common::*;
use serde_json::{json, Value};

/// One scriptable server: `node hostile.js <mode>`.
const HOSTILE_JS: &str = r#"
const mode = process.argv[2];
const rl = require("readline").createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const schema = { type: "object", properties: {} };
const PAGE = 1000;
let tools = [{ name: "work", inputSchema: schema }];
if (mode === "odd") {
  tools = ["weird.name/with spaces", "a.b", "a_b", "ünïcode-tool", "x".repeat(100), "emoji🙂"]
    .map((name) => ({ name, description: "odd \u001b[31mred\u001b[0m", inputSchema: schema }));
}
if (mode === "many") {
  tools = Array.from({ length: 5000 }, (_, i) => ({ name: `tool_${i}`, description: `Tool number ${i}`, inputSchema: schema }));
}
rl.on("line", (line) => {
  if (mode === "junk") {
    process.stdout.write("this is not JSON\n");
    process.stdout.write('{"jsonrpc":"2.0","id":"nobody-asked","result":{}}\n');
    process.stdout.write('{"hello":"world"}\n\n');
  }
  const m = JSON.parse(line);
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion,
      capabilities: { tools: {} }, serverInfo: { name: "hostile", version: "1" } } });
  } else if (m.method === "tools/list") {
    const start = Number((m.params && m.params.cursor) || 0);
    const page = tools.slice(start, start + PAGE);
    const next = start + PAGE < tools.length ? String(start + PAGE) : undefined;
    send({ jsonrpc: "2.0", id: m.id, result: { tools: page, ...(next ? { nextCursor: next } : {}) } });
  } else if (m.method === "tools/call") {
    const name = m.params.name;
    if (mode === "die") { process.stderr.write("hostile: crashing now\n"); process.exit(3); }
    if (mode === "hang") return;
    let text = `called ${name}`;
    if (mode === "huge") {
      const lines = [];
      for (let i = 0; lines.join("\n").length < 1024 * 1024; i += 1000) {
        for (let j = i; j < i + 1000; j++) lines.push(`line ${String(j).padStart(6, "0")} ${"x".repeat(40)}`);
      }
      text = lines.join("\n").slice(0, 1024 * 1024);
    }
    send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text }] } });
  }
});
"#;

fn hostile_server(dir: &Path) -> PathBuf {
    let path = dir.join("hostile.js");
    std::fs::write(&path, HOSTILE_JS).unwrap();
    path
}

fn server(script: &Path, mode: &str, extra: Value) -> Value {
    let mut entry = json!({"command": "node", "args": [script.display().to_string(), mode], "exposure": "direct"});
    for (k, v) in extra.as_object().unwrap() {
        entry[k] = v.clone();
    }
    entry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dying_and_silent_servers_leave_a_valid_session() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__dies__work", json!({})), tc("mcp__hangs__work", json!({}))]},
        {"text": "Both failed."},
    ]})))
    .await;
    let script = hostile_server(&s.cwd);
    s.write_mcp_json(json!({
        "dies": server(&script, "die", json!({})),
        "hangs": server(&script, "hang", json!({"timeout": 1.5}))
    }));
    let out = s.prompt(&[], "Work.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "Both failed.\n");
    assert_eq!(
        s.tool_results(),
        [
            (
                "mcp__dies__work".to_string(),
                true,
                "MCP connection closed".to_string()
            ),
            (
                "mcp__hangs__work".to_string(),
                true,
                "MCP request timed out after 1500ms".to_string()
            )
        ]
    );
    let inspect = s.inspect_session();
    assert!(inspect.is_object(), "{inspect}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_megabyte_result_is_truncated_as_pi_does() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__huge__work", json!({}))]},
        {"text": "Big."},
    ]})))
    .await;
    let script = hostile_server(&s.cwd);
    s.write_mcp_json(json!({"huge": server(&script, "huge", json!({}))}));
    let out = s.prompt(&[], "Fetch.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let sent = tool_messages(&s.requests()[1]);
    assert_eq!(sent.len(), 1);
    let result = &sent[0];
    assert!(
        result.starts_with(
            "Warning: truncated output (original token count: 262144)\nTotal output lines: 19785\n\nline 000000 "
        ),
        "{}",
        &result[..200]
    );
    assert!(result.contains(" chars truncated…"), "the middle is cut");
    // Real Pi 1.6.0 sends the same text, up to the temp file's name (compared by hand).
    let (shown, saved) = result.split_once("\n\n[Full output: ").unwrap();
    assert_eq!(shown.chars().count(), 20589);
    assert!(
        saved.ends_with(".txt (read it with offset/limit)]"),
        "{saved}"
    );
    let entries = s.session_entries();
    let recorded = entries
        .iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .unwrap();
    assert_eq!(recorded["message"]["content"][0]["text"], result.as_str());
    assert!(recorded["message"]["details"]["fullOutputPath"].is_string());
    s.inspect_session();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_tool_names_are_sanitised_and_stay_unique() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__odd__weird_name_with_spaces", json!({}))]},
        {"text": "Odd."},
    ]})))
    .await;
    let script = hostile_server(&s.cwd);
    s.write_mcp_json(json!({"odd": server(&script, "odd", json!({}))}));
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("odd: connected, 6 tools (direct, global)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains('\u{1b}'),
        "no live escape sequences: {stdout:?}"
    );

    let out = s.prompt(&[], "Call it.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let names: Vec<String> = declared(&s.requests()[0])
        .into_iter()
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), 6, "{names:?}");
    for name in &names {
        assert!(
            name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{name}"
        );
    }
    assert!(names.contains(&"mcp__odd__weird_name_with_spaces".to_string()));
    assert_eq!(
        s.tool_results(),
        [(
            "mcp__odd__weird_name_with_spaces".to_string(),
            false,
            "called weird.name/with spaces".to_string()
        )]
    );
    s.inspect_session();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_tools_over_several_pages() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__many__tool_4999", json!({}))]},
        {"text": "Found it."},
    ]})))
    .await;
    let script = hostile_server(&s.cwd);
    s.write_mcp_json(json!({"many": server(&script, "many", json!({
        "exposure": "codemode", "toolExposure": {"tool_4999": "direct"}
    }))}));
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("many: connected, 5000 tools (codemode, global)"),
        "{}",
        &stdout[..stdout.len().min(300)]
    );
    let out = s.prompt(&[], "Find it.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let names = declared(&s.requests()[0]);
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("mcp__"))
            .collect::<Vec<_>>(),
        ["mcp__many__tool_4999"]
    );
    assert_eq!(
        s.tool_results(),
        [(
            "mcp__many__tool_4999".to_string(),
            false,
            "called tool_4999".to_string()
        )]
    );
    s.inspect_session();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_lines_on_stdout_are_skipped() {
    let s = Setup::new(Some(json!({"turns": [
        {"tool_calls": [tc("mcp__junk__work", json!({}))]},
        {"text": "Survived."},
    ]})))
    .await;
    let script = hostile_server(&s.cwd);
    s.write_mcp_json(json!({"junk": server(&script, "junk", json!({"timeout": 5}))}));
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("junk: connected, 1 tool ("), "{stdout}");
    let out = s.prompt(&[], "Work.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        s.tool_results(),
        [(
            "mcp__junk__work".to_string(),
            false,
            "called work".to_string()
        )]
    );
    s.inspect_session();
}
