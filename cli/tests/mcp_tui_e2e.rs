#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MCP in the interactive mode, end to end: the real `pi` binary in tmux (the shared driver
//! in `tmux_common`) against pi-fake-llm, with stdio servers written with the official Python
//! `mcp` SDK (FastMCP, from `target/mcp-test-venv`).
//!
//! Covered: `/mcp` lists the server; its view disables it (saved to `mcp.json`, and the next
//! request no longer declares its tool) and enables it again (connected, declared again);
//! `/reload` after `mcp.json` changed outside the session stops the removed server and
//! connects the added one, and the next request declares the new tool set.
//!
//! Gated on `PI_TUI_E2E=1` (and tmux on PATH), like the other tmux tests.

mod mcp_common;
mod tmux_common;

use std::path::Path;

use mcp_common::*;
use serde_json::{json, Value};
use tmux_common::{enabled, shell_quote, Tmux};

/// A stdio server with one tool, `ping`, answering with the server's name.
const STDIO_SERVER_PY: &str = r#"
import sys
from mcp.server.fastmcp import FastMCP

name = sys.argv[1]
mcp = FastMCP(name, log_level="WARNING")

@mcp.tool()
def ping() -> str:
    """Answer pong."""
    return f"pong from {name}"

mcp.run()
"#;

fn server_entry(script: &Path, name: &str) -> Value {
    json!({
        "command": python().display().to_string(),
        "args": [script.display().to_string(), name],
        "exposure": "direct"
    })
}

fn mcp_json(s: &Setup) -> Value {
    serde_json::from_str(&std::fs::read_to_string(s.agent.join("mcp.json")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_mcp_disables_and_enables_a_server_and_reload_reads_mcp_json() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let s = Setup::new(Some(json!({"turns": [
        {"text": "Answer one."},
        {"text": "Answer two."},
        {"text": "Answer three."},
    ]})))
    .await;
    let script = s.tmp.path().join("stdio_server.py");
    std::fs::write(&script, STDIO_SERVER_PY).unwrap();
    s.write_mcp_json(json!({"alpha": server_entry(&script, "alpha")}));
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        shell_quote(&s.agent),
        shell_quote(Path::new(pi_bin())),
        shell_quote(&s.sessions)
    );
    let name = format!("pi-mcp-tui-e2e-{}", std::process::id());
    let tmux = Tmux::start(&name, &s.cwd, &command);
    tmux.wait_for("to interrupt");

    // The list, then the server's view: its tool and the actions.
    tmux.keys(&["/mcp", "Enter"]);
    tmux.wait_for("alpha  connected · 1 tool");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("mcp__alpha__ping (direct)");
    assert!(
        screen.contains("Reconnect") && screen.contains("Disable"),
        "{screen}"
    );

    // Disable: saved to the file, disconnected, and the next request lacks the tool.
    tmux.keys(&["Down", "Enter"]);
    tmux.wait_for("MCP server \"alpha\": disabled, saved to");
    assert_eq!(mcp_json(&s)["mcpServers"]["alpha"]["enabled"], false);
    tmux.keys(&["Say one", "Enter"]);
    tmux.wait_for("Answer one.");
    assert!(!declared(&s.requests()[0]).contains(&"mcp__alpha__ping".to_string()));

    // Enable again: connected, saved, declared in the next request.
    tmux.keys(&["/mcp", "Enter"]);
    tmux.wait_for("alpha  disabled · direct · global");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Enable");
    tmux.keys(&["Enter"]);
    tmux.wait_for("MCP server \"alpha\": connected · 1 tool");
    assert!(mcp_json(&s)["mcpServers"]["alpha"].get("enabled").is_none());
    tmux.keys(&["Say two", "Enter"]);
    tmux.wait_for("Answer two.");
    assert!(declared(&s.requests()[1]).contains(&"mcp__alpha__ping".to_string()));

    // Changed outside the session: alpha removed, beta added. /reload applies it.
    s.write_mcp_json(json!({"beta": server_entry(&script, "beta")}));
    tmux.keys(&["/reload", "Enter"]);
    tmux.wait_for("Reloaded keybindings");
    tmux.keys(&["/mcp", "Enter"]);
    tmux.wait_for("beta  connected · 1 tool");
    // Closed before typing: an escape followed at once by text reads as alt+key.
    tmux.keys(&["Escape"]);
    tmux.wait_until(
        |screen| !screen.contains("beta  connected"),
        "the list to close",
    );
    tmux.keys(&["Say three", "Enter"]);
    tmux.wait_for("Answer three.");
    let tools = declared(&s.requests()[2]);
    assert!(tools.contains(&"mcp__beta__ping".to_string()), "{tools:?}");
    assert!(
        !tools.contains(&"mcp__alpha__ping".to_string()),
        "{tools:?}"
    );
    s.inspect_session();
}
