#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `/mcp` in the TUI: "Disable in this project" / "Enable in this project" for a global
//! server in a trusted project, as Pi 1.6.0's MCP manager offers them. The real `pi` binary
//! in tmux (gated on `PI_TUI_E2E=1`) with a stdio server written with the Python `mcp` SDK:
//! the choice writes a project override to `<cwd>/.pi/mcp.json` and leaves the global file
//! alone; the next request no longer declares the server's tool; once overridden the view
//! offers the plain Enable (saved to the override), as Pi's does.

mod mcp_common;
mod tmux_common;

use std::path::Path;

use mcp_common::*;
use serde_json::{json, Value};
use tmux_common::{enabled, shell_quote, Tmux};

const STDIO_SERVER_PY: &str = r#"
from mcp.server.fastmcp import FastMCP

mcp = FastMCP("alpha", log_level="WARNING")

@mcp.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"

mcp.run()
"#;

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_server_is_disabled_and_enabled_in_this_project_only() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let s = Setup::new(Some(json!({"turns": [{"text": "Answer one."}]}))).await;
    let script = s.tmp.path().join("stdio_server.py");
    std::fs::write(&script, STDIO_SERVER_PY).unwrap();
    let global = json!({"alpha": {
        "command": python().display().to_string(),
        "args": [script.display().to_string()],
        "exposure": "direct"
    }});
    s.write_mcp_json(global.clone());
    let global_text = std::fs::read_to_string(s.agent.join("mcp.json")).unwrap();
    // --approve: the project is trusted for this run, so it may carry its own mcp.json.
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --approve --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        shell_quote(&s.agent),
        shell_quote(Path::new(pi_bin())),
        shell_quote(&s.sessions)
    );
    let name = format!("pi-mcp-project-tui-e2e-{}", std::process::id());
    let tmux = Tmux::start(&name, &s.cwd, &command);
    tmux.wait_for("to interrupt");

    tmux.keys(&["/mcp", "Enter"]);
    tmux.wait_for("alpha  connected · 1 tool");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Disable in this project");
    // Reconnect, Disable, Disable in this project, …
    assert!(screen.contains("Reconnect"), "{screen}");
    tmux.keys(&["Down", "Down", "Enter"]);
    let project_file = s.cwd.join(".pi").join("mcp.json");
    tmux.wait_for("MCP server \"alpha\": disabled in this project, saved to");
    assert_eq!(
        read(&project_file),
        json!({"mcpServers": {"alpha": {"enabled": false}}})
    );
    assert_eq!(
        std::fs::read_to_string(s.agent.join("mcp.json")).unwrap(),
        global_text
    );
    tmux.wait_for("MCP server \"alpha\": disabled.");
    tmux.keys(&["Say one", "Enter"]);
    tmux.wait_for("Answer one.");
    assert!(!declared(&s.requests()[0]).contains(&"mcp__alpha__ping".to_string()));

    // Overridden now: the view offers Enable, saved to the project's file.
    tmux.keys(&["/mcp", "Enter"]);
    tmux.wait_for("alpha  disabled · direct · global + project override");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Enable");
    assert!(!screen.contains("Enable in this project"), "{screen}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("MCP server \"alpha\": connected · 1 tool");
    assert_eq!(
        read(&project_file),
        json!({"mcpServers": {"alpha": {"enabled": true}}})
    );
    assert_eq!(
        std::fs::read_to_string(s.agent.join("mcp.json")).unwrap(),
        global_text
    );
}
