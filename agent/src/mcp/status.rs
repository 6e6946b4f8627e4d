//! What `/mcp` says outside the TUI, and the start-up report (Pi 1.6.0's `formatStatus`,
//! `describeState` and `reportProblems`): one line per server with its state, tool count and
//! exposure (the error indented below), config errors, and the actions `/mcp reconnect`,
//! `/mcp login` and `/mcp logout`. Each message carries Pi's notify type.

use std::sync::Arc;

use super::client::ConnState;
use super::client::McpServer;
use super::oauth::session;
use super::oauth::SignInPrompt;
use super::McpManager;

/// Pi's usage line for a `/mcp` it does not understand.
pub const MCP_USAGE: &str =
    "Usage: /mcp, /mcp login [server], /mcp logout [server], /mcp reconnect [server]";

/// A message for the user and its kind (`info`, `warning`, `error`), as Pi's `ctx.ui.notify`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The text.
    pub message: String,
    /// `info`, `warning` or `error`.
    pub kind: &'static str,
}

impl Notice {
    fn new(message: impl Into<String>, kind: &'static str) -> Notice {
        Notice {
            message: message.into(),
            kind,
        }
    }
}

fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap_or("")
}

/// Short state for lists and the start-up report: `disabled`, `connecting…`,
/// `failed: <first line>`, `connected · N tools[ · resources]`.
pub fn describe_state(server: &McpServer) -> String {
    if !server.enabled() {
        return "disabled".to_string();
    }
    let status = server.status();
    match status.state {
        ConnState::Failed => format!(
            "failed: {}",
            first_line(status.error.as_deref().unwrap_or("unknown error"))
        ),
        ConnState::Connected => format!(
            "connected · {} tool{}{}",
            status.tools.len(),
            if status.tools.len() == 1 { "" } else { "s" },
            if status.has_resources {
                " · resources"
            } else {
                ""
            }
        ),
        ConnState::Connecting => "connecting…".to_string(),
        other => other.as_str().to_string(),
    }
}

/// Servers that need the user come first in `/mcp` (Pi's `attentionRank`).
pub fn attention_rank(server: &McpServer) -> u8 {
    if !server.enabled() {
        return 5;
    }
    match server.status().state {
        ConnState::NeedsAuth => 0,
        ConnState::Failed => 1,
        ConnState::Disconnected => 2,
        ConnState::Connecting => 3,
        ConnState::Connected => 4,
        ConnState::Closed => 4,
    }
}

/// The `/mcp` status text (Pi's `formatStatus`).
pub fn format_status(mcp: &McpManager, agent_dir: &std::path::Path) -> String {
    if mcp.servers().is_empty() && mcp.config().errors.is_empty() {
        return format!(
            "No MCP servers configured. Add them to {} or .pi/mcp.json.",
            agent_dir.join("mcp.json").display()
        );
    }
    let mut lines: Vec<String> = mcp
        .servers()
        .iter()
        .map(|server| {
            let status = server.status();
            let connected = status.state == ConnState::Connected;
            let tools = if connected && server.enabled() {
                format!(", {} tools", status.tools.len())
            } else {
                String::new()
            };
            let state = if !server.enabled() {
                "disabled"
            } else if status.state == ConnState::Disconnected {
                "disconnected, reconnects on next call"
            } else {
                status.state.as_str()
            };
            let error = match &status.error {
                Some(error) if !connected && server.enabled() => {
                    format!(
                        "\n    {}",
                        error.split('\n').collect::<Vec<_>>().join("\n    ")
                    )
                }
                _ => String::new(),
            };
            format!(
                "{}: {state}{tools} ({}){error}",
                server.name(),
                server.exposure().as_str()
            )
        })
        .collect();
    lines.extend(
        mcp.config()
            .errors
            .iter()
            .map(|e| format!("config error: {e}")),
    );
    lines.join("\n")
}

/// The start-up report (Pi's `reportProblems`): config errors, failed servers and servers
/// that need sign-in in one warning, `None` when there is nothing to report.
pub fn startup_report(mcp: &McpManager) -> Option<Notice> {
    let mut lines: Vec<String> = mcp
        .config()
        .errors
        .iter()
        .map(|e| format!("config: {e}"))
        .collect();
    for server in mcp.servers().iter().filter(|s| s.enabled()) {
        // Failed connections and required sign-ins (Pi's docs: both are reported once).
        if matches!(
            server.status().state,
            ConnState::Failed | ConnState::NeedsAuth
        ) {
            lines.push(format!("{}: {}", server.name(), describe_state(server)));
        }
    }
    if lines.is_empty() {
        return None;
    }
    Some(Notice::new(
        format!(
            "MCP servers need attention:\n{}\nRun /mcp to fix.",
            lines
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
        "warning",
    ))
}

/// Whether a prompt text is the `/mcp` command; returns its arguments.
pub fn parse_command(text: &str) -> Option<&str> {
    let rest = text.trim_start().strip_prefix("/mcp")?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some(rest.trim())
}

/// Waits for the first connection attempt of every enabled server (Pi awaits its `pending`
/// start-up before answering `/mcp`).
async fn settle(mcp: &McpManager) {
    super::tool_search::wait_for_all_servers(mcp).await;
}

/// Runs `/mcp [action [server]]` outside the TUI: the status, `reconnect`, and `login` /
/// `logout` of an OAuth server (the authorization URL goes to `prompt`; the browser's
/// redirect to the loopback callback completes the sign-in within `login_limit`).
pub async fn run_command(
    mcp: &McpManager,
    agent_dir: &std::path::Path,
    args: &str,
    prompt: &dyn SignInPrompt,
    login_limit: std::time::Duration,
) -> Notice {
    let words: Vec<&str> = args.split_whitespace().collect();
    let Some(action) = words.first() else {
        settle(mcp).await;
        return Notice::new(format_status(mcp, agent_dir), "info");
    };
    if words.len() > 2 {
        return Notice::new(MCP_USAGE, "warning");
    }
    settle(mcp).await;
    let name = words.get(1).copied();
    match *action {
        "login" | "logout" => {
            let server = match oauth_server(mcp, name) {
                Ok(server) => server,
                Err(notice) => return notice,
            };
            let done = if *action == "login" {
                session::sign_in(&server, prompt, login_limit).await
            } else {
                session::sign_out(&server).await
            };
            match done {
                session::Notice::Info(text) => Notice::new(text, "info"),
                session::Notice::Error(text) => Notice::new(text, "error"),
            }
        }
        "reconnect" => {
            let servers = mcp.servers();
            let eligible: Vec<&Arc<McpServer>> = servers.iter().filter(|s| s.enabled()).collect();
            let server = match name {
                Some(name) => match find(mcp, name) {
                    None => {
                        return Notice::new(format!("No MCP server named \"{name}\"."), "error")
                    }
                    Some(s) if !s.enabled() => {
                        return Notice::new("No enabled MCP server to reconnect.", "error")
                    }
                    Some(s) => s,
                },
                None => {
                    let preferred: Vec<&&Arc<McpServer>> = eligible
                        .iter()
                        .filter(|s| {
                            matches!(
                                s.status().state,
                                ConnState::Failed | ConnState::Disconnected
                            )
                        })
                        .collect();
                    match (eligible.len(), preferred.len()) {
                        (0, _) => {
                            return Notice::new("No enabled MCP server to reconnect.", "info")
                        }
                        (1, _) => eligible[0].clone(),
                        (_, 1) => (*preferred[0]).clone(),
                        // Pi asks which; without a dialog, the name is needed.
                        _ => return Notice::new(MCP_USAGE, "warning"),
                    }
                }
            };
            match server.reconnect().await {
                Err(error) => Notice::new(error, "error"),
                Ok(_) => Notice::new(
                    format!(
                        "Reconnected to MCP server \"{}\" ({}).",
                        server.name(),
                        describe_state(&server)
                    ),
                    "info",
                ),
            }
        }
        _ => Notice::new(MCP_USAGE, "warning"),
    }
}

/// The server `/mcp login|logout [name]` acts on: the named one, or without a name the only
/// enabled OAuth server (else the only one that needs sign-in); Pi's texts otherwise.
fn oauth_server(mcp: &McpManager, name: Option<&str>) -> Result<Arc<McpServer>, Notice> {
    let uses_oauth = |s: &Arc<McpServer>| s.enabled() && s.oauth().is_some();
    if let Some(name) = name {
        return match find(mcp, name) {
            None => Err(Notice::new(
                format!("No MCP server named \"{name}\"."),
                "error",
            )),
            Some(server) if uses_oauth(&server) => Ok(server),
            Some(_) => Err(Notice::new(session::NO_OAUTH_SERVERS, "error")),
        };
    }
    let candidates: Vec<Arc<McpServer>> = mcp
        .servers()
        .iter()
        .filter(|s| uses_oauth(s))
        .cloned()
        .collect();
    let needing: Vec<&Arc<McpServer>> = candidates
        .iter()
        .filter(|s| s.status().state == ConnState::NeedsAuth)
        .collect();
    match (candidates.len(), needing.len()) {
        (0, _) => Err(Notice::new(session::NO_OAUTH_SERVERS, "info")),
        (1, _) => Ok(candidates[0].clone()),
        (_, 1) => Ok(needing[0].clone()),
        // Pi asks which; without a dialog, the name is needed.
        _ => Err(Notice::new(MCP_USAGE, "warning")),
    }
}

fn find(mcp: &McpManager, name: &str) -> Option<Arc<McpServer>> {
    mcp.servers().iter().find(|s| s.name() == name).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_is_recognized_with_its_arguments() {
        assert_eq!(parse_command("/mcp"), Some(""));
        assert_eq!(
            parse_command("  /mcp reconnect  fs "),
            Some("reconnect  fs")
        );
        assert_eq!(parse_command("/mcpx"), None);
        assert_eq!(parse_command("tell me about /mcp"), None);
    }

    #[test]
    fn status_lists_disabled_servers_and_config_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mcp.json"),
            r#"{"mcpServers": {"off": {"command": "x", "enabled": false, "exposure": "deferred"}, "bad name": {"command": "x"}}}"#,
        )
        .unwrap();
        let mcp = McpManager::load(dir.path(), dir.path(), false);
        let path = dir.path().join("mcp.json").display().to_string();
        assert_eq!(
            format_status(&mcp, dir.path()),
            format!("off: disabled (deferred)\nconfig error: {path}: invalid server name \"bad name\" (use letters, digits, \"_\" and \"-\")")
        );
        let report = startup_report(&mcp).unwrap();
        assert_eq!(report.kind, "warning");
        assert_eq!(
            report.message,
            format!("MCP servers need attention:\n  config: {path}: invalid server name \"bad name\" (use letters, digits, \"_\" and \"-\")\nRun /mcp to fix.")
        );
        let empty = tempfile::tempdir().unwrap();
        let none = McpManager::load(empty.path(), empty.path(), false);
        assert!(startup_report(&none).is_none());
        assert_eq!(
            format_status(&none, empty.path()),
            format!(
                "No MCP servers configured. Add them to {} or .pi/mcp.json.",
                empty.path().join("mcp.json").display()
            )
        );
    }
}
