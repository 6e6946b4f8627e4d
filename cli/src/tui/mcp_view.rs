//! `/mcp` in the TUI (Pi 1.6.0's MCP manager, in this UI's selector dialog): the servers with
//! their state, tool count, exposure and configuration source, those that need attention
//! first; a server's view lists its tools with their effective exposure and its connection
//! details, with the actions reconnect, enable or disable (for a global server in a trusted
//! project also "in this project", a project override), and change exposure. Changes are
//! saved to the file that defines the server ([`pi_agent::mcp::edit`]) and apply from the
//! next start; reconnecting runs on the session's runtime and reports back as a notice.
//! While a sign-in waits for its browser, a redirect URL submitted in the editor completes
//! it (for a browser that cannot reach this machine's loopback callback).

use std::path::PathBuf;
use std::sync::Arc;

use pi_agent::mcp::client::McpServer;
use pi_agent::mcp::edit::{save_server_change, target_file, ServerPatch};
use pi_agent::mcp::status::{attention_rank, describe_state};
use pi_agent::mcp::{ConnState, Exposure, McpManager};

use super::app::{App, Effect};
use super::dialogs::{Confirm, Dialog};

/// What a server's view can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpAction {
    Reconnect,
    /// OAuth sign-in (the flow of `pi mcp login`), then a reconnect.
    SignIn,
    /// Deletes the stored OAuth credentials and disconnects.
    SignOut,
    SetEnabled(bool),
    /// Enable or disable a global server for this project only (a project override).
    SetEnabledInProject(bool),
    SetExposure(Exposure),
}

const EXPOSURES: [Exposure; 4] = [
    Exposure::Codemode,
    Exposure::Deferred,
    Exposure::Direct,
    Exposure::Hidden,
];

/// Servers in the order `/mcp` lists them: needing attention first, then configuration order.
pub fn ordered(mcp: &McpManager) -> Vec<Arc<McpServer>> {
    let mut servers = mcp.servers().clone();
    servers.sort_by_key(|s| attention_rank(s));
    servers
}

/// One list row: `name  state · exposure · source`.
pub fn row(server: &McpServer) -> String {
    let source = match override_file(server) {
        Some(_) => format!("{} + project override", server.entry.scope.as_str()),
        None => server.entry.scope.as_str().to_string(),
    };
    format!(
        "{}  {} · {} · {source}",
        server.name(),
        describe_state(server),
        server.exposure().as_str()
    )
}

/// The server list (`/mcp`), or a notice when MCP is off or nothing is configured.
pub fn open_list(app: &mut App, mcp: Option<&McpManager>, agent_dir: &std::path::Path) {
    let Some(mcp) = mcp.filter(|m| !m.servers().is_empty()) else {
        app.notice(format!(
            "No MCP servers configured. Add them to {} or .pi/mcp.json.",
            agent_dir.join("mcp.json").display()
        ));
        return;
    };
    let message = mcp
        .config()
        .errors
        .iter()
        .map(|e| format!("config error: {e}"))
        .collect::<Vec<_>>()
        .join("\n");
    let options = ordered(mcp)
        .iter()
        .map(|s| (row(s), Some(Effect::OpenMcpServer(s.name().to_string()))))
        .collect();
    app.dialog = Some(Dialog::Confirm(Confirm {
        title: "MCP servers".into(),
        message,
        options,
        cancelled: String::new(),
        selected: 0,
    }));
}

/// The text of a server's view: its tools with their effective exposure, then the
/// connection details (transport, file, the whole error with a stdio server's stderr tail).
pub fn server_details(mcp: &McpManager, server: &McpServer) -> String {
    let status = server.status();
    let mut lines = vec![format!("State: {}", describe_state(server))];
    let tools: Vec<(String, String)> = mcp
        .named_tools()
        .into_iter()
        .filter(|(s, _, _)| s.name() == server.name())
        .map(|(s, name, tool)| {
            let exposure = s.tool_exposure(&tool.name);
            (name, exposure.as_str().to_string())
        })
        .collect();
    if !tools.is_empty() {
        lines.push(format!("Tools ({}):", tools.len()));
        lines.extend(tools.iter().map(|(n, e)| format!("  {n} ({e})")));
    }
    lines.push(format!(
        "Connection: {}",
        server.entry.config.describe_transport()
    ));
    lines.push(format!("Config: {}", save_file(server).display()));
    if let (Some(error), true) = (&status.error, status.state != ConnState::Connected) {
        lines.push(format!("Error: {error}"));
    }
    lines.join("\n")
}

/// A server's view with its actions; `Back` returns to the list.
pub fn open_server(app: &mut App, mcp: Option<&McpManager>, name: &str) {
    let Some((mcp, server)) = mcp.and_then(|m| {
        m.servers()
            .into_iter()
            .find(|s| s.name() == name)
            .map(|s| (m, s))
    }) else {
        app.notice(format!("No MCP server named \"{name}\"."));
        return;
    };
    let action = |action: McpAction| {
        Some(Effect::McpAction {
            server: name.to_string(),
            action,
        })
    };
    let enabled = server.enabled();
    let mut options = Vec::new();
    let needs_auth = server.status().state == ConnState::NeedsAuth;
    if enabled && server.oauth().is_some() && needs_auth {
        options.push(("Sign in".to_string(), action(McpAction::SignIn)));
    }
    if enabled {
        options.push(("Reconnect".to_string(), action(McpAction::Reconnect)));
    }
    if enabled && server.oauth().is_some() && !needs_auth {
        options.push(("Sign out".to_string(), action(McpAction::SignOut)));
    }
    options.push((
        if enabled { "Disable" } else { "Enable" }.to_string(),
        action(McpAction::SetEnabled(!enabled)),
    ));
    // Pi offers it for global servers without an override, when the project is trusted.
    let in_project = server.entry.scope == pi_agent::mcp::config::Scope::Global
        && override_file(&server).is_none()
        && mcp.config().project_config.is_some();
    if in_project {
        options.push((
            if enabled {
                "Disable in this project"
            } else {
                "Enable in this project"
            }
            .to_string(),
            action(McpAction::SetEnabledInProject(!enabled)),
        ));
    }
    let current = server.exposure();
    for exposure in EXPOSURES.into_iter().filter(|e| *e != current) {
        options.push((
            format!("Exposure: {}", exposure.as_str()),
            action(McpAction::SetExposure(exposure)),
        ));
    }
    options.push(("Back".to_string(), Some(Effect::OpenMcp)));
    app.dialog = Some(Dialog::Confirm(Confirm {
        title: format!("MCP server {name}"),
        message: server_details(mcp, &server),
        options,
        cancelled: String::new(),
        selected: 0,
    }));
}

/// Saves an enable/disable or exposure change and applies an exposure change to the running
/// session (its next request declares the tools accordingly); the notice says where, or why
/// not. Enabling and disabling connect or disconnect, which is the caller's (it is async):
/// [`McpServer::set_enabled`] after an `Ok`.
pub fn save_change(server: &McpServer, action: McpAction) -> Result<String, String> {
    if let McpAction::SetEnabledInProject(enabled) = action {
        return save_in_project(server, enabled);
    }
    let patch = match action {
        McpAction::SetEnabled(enabled) | McpAction::SetEnabledInProject(enabled) => ServerPatch {
            enabled: Some(enabled),
            exposure: None,
        },
        McpAction::SetExposure(exposure) => ServerPatch {
            enabled: None,
            exposure: Some(exposure),
        },
        McpAction::Reconnect | McpAction::SignIn | McpAction::SignOut => return Ok(String::new()),
    };
    // A project override made in this session takes the change, as one read at start-up.
    save_server_change(&server.entry, patch, override_file(server).as_deref())?;
    if let McpAction::SetExposure(exposure) = action {
        server.set_exposure(exposure);
    }
    {
        {
            let what = match action {
                McpAction::SetEnabled(true) => "enabled".to_string(),
                McpAction::SetEnabled(false) => "disabled".to_string(),
                McpAction::SetExposure(e) => format!("exposure {}", e.as_str()),
                McpAction::SetEnabledInProject(_)
                | McpAction::Reconnect
                | McpAction::SignIn
                | McpAction::SignOut => String::new(),
            };
            Ok(format!(
                "MCP server \"{}\": {what}, saved to {}.",
                server.name(),
                save_file(server).display()
            ))
        }
    }
}

/// "Enable/Disable in this project": the project's mcp.json gets (or updates) an override.
fn save_in_project(server: &McpServer, enabled: bool) -> Result<String, String> {
    let project = crate::modes::current_mcp()
        .and_then(|m| m.config().project_config.clone())
        .ok_or("This project is not trusted, so it has no mcp.json of its own.")?;
    let patch = ServerPatch {
        enabled: Some(enabled),
        exposure: None,
    };
    save_server_change(&server.entry, patch, Some(&project))?;
    SESSION_OVERRIDES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(server.name().to_string(), project.clone());
    Ok(format!(
        "MCP server \"{}\": {} in this project, saved to {}.",
        server.name(),
        if enabled { "enabled" } else { "disabled" },
        project.display()
    ))
}

/// Project overrides written by "Enable/Disable in this project" since start-up (server
/// name → project mcp.json): the running servers' entries were read before they existed.
static SESSION_OVERRIDES: std::sync::Mutex<std::collections::BTreeMap<String, PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The project file overriding `server`, read at start-up or written since.
fn override_file(server: &McpServer) -> Option<PathBuf> {
    server.entry.override_source.clone().or_else(|| {
        SESSION_OVERRIDES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(server.name())
            .cloned()
    })
}

/// Where a change to `server` is saved: its project override, else its own file.
fn save_file(server: &McpServer) -> PathBuf {
    override_file(server).unwrap_or_else(|| target_file(&server.entry).to_path_buf())
}

/// The sign-in waiting for a pasted redirect URL, if any (one at a time: the newest wins).
static PENDING_REDIRECT: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<String>>> =
    std::sync::Mutex::new(None);

/// Editor text submitted while a sign-in waits: a URL goes to that sign-in instead of the
/// model. `true` when it was taken.
pub fn take_pasted_redirect(text: &str) -> bool {
    let text = text.trim();
    if !(text.starts_with("http://") || text.starts_with("https://"))
        || text.contains(char::is_whitespace)
    {
        return false;
    }
    let mut pending = PENDING_REDIRECT.lock().unwrap_or_else(|e| e.into_inner());
    match pending.take() {
        Some(sender) => sender.send(text.to_string()).is_ok(),
        None => false,
    }
}

/// The sign-in ended (by the callback, the pasted URL or an error): a URL no longer goes to it.
pub fn end_pasted_redirect() {
    *PENDING_REDIRECT.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// How a sign-in from `/mcp` talks to the user: the authorization URL as a notice (and the
/// browser opened on it); the loopback callback completes it, or the redirect URL submitted
/// in the editor ([`take_pasted_redirect`]).
pub struct NoticePrompt {
    /// The server being signed in to.
    pub name: String,
    /// Where notices go.
    pub notices: std::sync::mpsc::Sender<super::app::Msg>,
}

impl pi_agent::mcp::oauth::SignInPrompt for NoticePrompt {
    fn show_authorization_url(&self, url: &str) {
        let _ = self.notices.send(super::app::Msg::Notice(format!(
            "Sign in to MCP server \"{}\" in your browser:\n{url}\nIf the browser cannot reach \
             this machine, paste the URL it was redirected to and press Enter.",
            self.name
        )));
        pi_agent::mcp::oauth::open_browser(url);
    }

    fn pasted_redirect_url(&self) -> Option<tokio::sync::oneshot::Receiver<String>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *PENDING_REDIRECT.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        Some(rx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tui::app::{update, Msg};
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn options(app: &App) -> Vec<String> {
        match &app.dialog {
            Some(Dialog::Confirm(c)) => c.options.iter().map(|(o, _)| o.clone()).collect(),
            other => panic!("no selector: {other:?}"),
        }
    }

    #[test]
    fn slash_mcp_lists_servers_and_a_server_view_saves_changes() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("mcp.json");
        std::fs::write(
            &config,
            r#"{"mcpServers": {"a": {"command": "x", "enabled": false}, "b": {"command": "y", "args": ["1"], "exposure": "direct", "toolExposure": {"t": "hidden"}}}, "keep": 1}"#,
        )
        .unwrap();
        let mcp = McpManager::load(dir.path(), dir.path(), false);
        let mut app = App::new(dir.path().to_path_buf());
        let mut out = Vec::new();
        for c in "/mcp".chars() {
            out.extend(update(
                &mut app,
                Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)),
            ));
        }
        out.extend(update(
            &mut app,
            Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        ));
        assert_eq!(out, vec![Effect::OpenMcp]);

        // Enabled servers (not connected here) before disabled ones.
        open_list(&mut app, Some(&mcp), dir.path());
        assert_eq!(
            options(&app),
            [
                "b  connecting… · direct · global",
                "a  disabled · codemode · global"
            ]
        );
        open_server(&mut app, Some(&mcp), "a");
        assert_eq!(
            options(&app),
            [
                "Enable",
                "Exposure: deferred",
                "Exposure: direct",
                "Exposure: hidden",
                "Back"
            ]
        );
        open_server(&mut app, Some(&mcp), "b");
        let Some(Dialog::Confirm(c)) = &app.dialog else {
            panic!("no view")
        };
        assert_eq!(c.options[0].0, "Reconnect");
        assert!(c.message.contains("Connection: y 1"), "{}", c.message);

        // Saved to the defining file; the rest of it stays.
        let a = mcp.servers().into_iter().find(|s| s.name() == "a").unwrap();
        let notice = save_change(&a, McpAction::SetEnabled(true)).unwrap();
        assert_eq!(
            notice,
            format!("MCP server \"a\": enabled, saved to {}.", config.display())
        );
        let b = mcp.servers().into_iter().find(|s| s.name() == "b").unwrap();
        save_change(&b, McpAction::SetExposure(Exposure::Deferred)).unwrap();
        assert_eq!(
            b.exposure(),
            Exposure::Deferred,
            "applied to the running session"
        );
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
        assert_eq!(
            saved,
            serde_json::json!({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "args": ["1"], "exposure": "deferred", "toolExposure": {"t": "hidden"}}}, "keep": 1})
        );
    }

    #[test]
    fn a_submitted_url_goes_to_the_waiting_sign_in_only() {
        use pi_agent::mcp::oauth::SignInPrompt;
        let (tx, _rx) = std::sync::mpsc::channel();
        let prompt = NoticePrompt {
            name: "s".into(),
            notices: tx,
        };
        // Nothing waits: text stays a prompt.
        assert!(!take_pasted_redirect("http://127.0.0.1:1/cb?code=1"));
        let mut pending = prompt.pasted_redirect_url().unwrap();
        assert!(!take_pasted_redirect("what is http://x?"));
        assert!(take_pasted_redirect(
            " http://127.0.0.1:1/cb?code=1&state=2 \n"
        ));
        assert_eq!(
            pending.try_recv().unwrap(),
            "http://127.0.0.1:1/cb?code=1&state=2"
        );
        // Taken once; an ended sign-in takes nothing.
        assert!(!take_pasted_redirect("http://127.0.0.1:1/cb?code=3"));
        let _again = prompt.pasted_redirect_url().unwrap();
        end_pasted_redirect();
        assert!(!take_pasted_redirect("http://127.0.0.1:1/cb?code=4"));
    }
}
