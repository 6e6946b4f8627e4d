//! MCP servers (Pi 1.6.0's built-in `mcp` extension): configuration from `mcp.json`,
//! connections on the official Rust SDK `rmcp`, and server tools as ordinary agent tools.
//!
//! A run loads the configuration once ([`McpManager::load`]), starts every enabled server in
//! the background and waits (at most [`DIRECT_WAIT`]) only for servers that have `direct`
//! tools, whose tools are then declared to the model like built-in tools
//! ([`McpManager::direct_tools`]). Servers with `codemode` or `deferred` tools are listed in
//! the `mcp_servers` system-prompt section ([`McpManager::servers_section`]).

pub mod client;
pub mod config;
pub mod edit;
pub mod guard;
pub mod http;
pub mod log;
pub mod oauth;
pub mod provider_login;
pub mod resources;
pub mod status;
pub mod tool;
pub mod tool_search;
pub mod tool_set;

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use client::ConnState;
pub use client::McpServer;
pub use client::ServerStatus;
pub use config::load_mcp_config;
pub use config::Exposure;
pub use config::McpConfig;
pub use config::ServerEntry;
pub use tool::McpTool;

use crate::tools::Tool;

/// How long the first prompt waits for servers with `direct` tools.
pub const DIRECT_WAIT: Duration = Duration::from_secs(10);

/// Characters of one server description in the `mcp_servers` section.
const MAX_SERVER_DESCRIPTION_CHARS: usize = 250;
/// Characters of the whole `mcp_servers` section.
const MAX_SERVERS_SECTION_CHARS: usize = 4096;

/// The servers of one run. `/reload` reads the configuration again
/// ([`McpManager::reload`]), so both live behind a lock; readers take snapshots.
#[derive(Debug)]
pub struct McpManager {
    loaded: std::sync::RwLock<Loaded>,
    agent_dir: PathBuf,
    cwd: PathBuf,
    log: Arc<log::McpLog>,
}

/// What the config files said when last read, and a server per configured entry.
#[derive(Debug, Clone)]
struct Loaded {
    config: McpConfig,
    servers: Vec<Arc<McpServer>>,
}

/// What [`McpManager::reload`] changed: servers to stop and servers to start.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// Servers no longer configured, or configured differently: their connections close.
    pub stopped: Vec<Arc<McpServer>>,
    /// New or changed servers (enabled or not).
    pub started: Vec<Arc<McpServer>>,
}

impl Reloaded {
    /// Whether the configuration changed any server.
    pub fn is_empty(&self) -> bool {
        self.stopped.is_empty() && self.started.is_empty()
    }

    /// Closes the stopped servers and connects the started ones that are enabled, waiting up
    /// to `wait` for those with `direct` tools (as at start-up), the others in the background.
    pub async fn apply(self, wait: Duration) {
        futures::future::join_all(self.stopped.iter().map(|s| s.close())).await;
        start_servers(self.started.iter().filter(|s| s.enabled()), wait).await;
    }
}

/// Connects `servers` in the background; waits up to `wait` for those whose configuration
/// names `direct` tools.
async fn start_servers<'a>(servers: impl Iterator<Item = &'a Arc<McpServer>>, wait: Duration) {
    let mut direct = Vec::new();
    for server in servers {
        let server = server.clone();
        let wants_direct = server.configured_exposures().contains(&Exposure::Direct);
        let task = tokio::spawn(async move {
            let _ = server.connect().await;
        });
        if wants_direct {
            direct.push(task);
        }
    }
    let _ = tokio::time::timeout(wait, futures::future::join_all(direct)).await;
}

impl McpManager {
    /// Reads `mcp.json` (and the trusted project's) and prepares the servers; nothing
    /// connects yet. Server log messages go to `<agent_dir>/mcp.log`.
    pub fn load(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> McpManager {
        let config = load_mcp_config(agent_dir, cwd, project_trusted);
        let log = Arc::new(log::McpLog::new(agent_dir.join("mcp.log")));
        let manager = McpManager {
            loaded: std::sync::RwLock::new(Loaded {
                config: McpConfig::default(),
                servers: Vec::new(),
            }),
            agent_dir: agent_dir.to_path_buf(),
            cwd: cwd.to_path_buf(),
            log,
        };
        let servers = config
            .servers
            .iter()
            .map(|entry| manager.server_for(entry))
            .collect();
        *manager.loaded_mut() = Loaded { config, servers };
        manager
    }

    fn server_for(&self, entry: &ServerEntry) -> Arc<McpServer> {
        McpServer::with_credentials(
            entry.clone(),
            &self.cwd,
            self.log.clone(),
            Some(&self.agent_dir),
        )
    }

    fn loaded(&self) -> std::sync::RwLockReadGuard<'_, Loaded> {
        self.loaded.read().unwrap_or_else(|e| e.into_inner())
    }

    fn loaded_mut(&self) -> std::sync::RwLockWriteGuard<'_, Loaded> {
        self.loaded.write().unwrap_or_else(|e| e.into_inner())
    }

    /// What the config files say (servers, errors), as last read.
    pub fn config(&self) -> McpConfig {
        self.loaded().config.clone()
    }

    /// One server per configured entry (disabled ones never connect), in configuration order.
    pub fn servers(&self) -> Vec<Arc<McpServer>> {
        self.loaded().servers.clone()
    }

    /// `/reload`: reads the configuration files again. A server whose entry is unchanged
    /// keeps its connection (and what `/mcp` changed in this session); a removed server is
    /// stopped; a new one is added; a changed one is replaced by a new server (it
    /// reconnects). The next request's tool set follows the servers' state, so it reflects
    /// the change once [`Reloaded::apply`] connected them.
    pub fn reload(&self, project_trusted: bool) -> Reloaded {
        let config = load_mcp_config(&self.agent_dir, &self.cwd, project_trusted);
        let mut loaded = self.loaded_mut();
        let mut old = std::mem::take(&mut loaded.servers);
        let mut outcome = Reloaded::default();
        let mut servers = Vec::new();
        for entry in &config.servers {
            match old.iter().position(|s| &s.entry == entry) {
                Some(kept) => servers.push(old.remove(kept)),
                None => {
                    let server = self.server_for(entry);
                    outcome.started.push(server.clone());
                    servers.push(server);
                }
            }
        }
        outcome.stopped = old;
        *loaded = Loaded { config, servers };
        outcome
    }

    fn enabled(&self) -> Vec<Arc<McpServer>> {
        self.servers().into_iter().filter(|s| s.enabled()).collect()
    }

    /// Connects every enabled server at once; each records its own state and error.
    pub async fn connect_all(&self) {
        let enabled = self.enabled();
        let connects = enabled.iter().map(|server| async move {
            let _ = server.connect().await;
        });
        futures::future::join_all(connects).await;
    }

    /// Starts every enabled server in the background and waits up to `wait` for those
    /// whose configuration names `direct` tools.
    pub async fn start(&self, wait: Duration) {
        start_servers(self.enabled().iter(), wait).await;
    }

    /// Registered tool names of every connected server's tools, in configuration order:
    /// `(server, registered name, server tool)`.
    pub fn named_tools(&self) -> Vec<(Arc<McpServer>, String, rmcp::model::Tool)> {
        let mut out: Vec<(Arc<McpServer>, String, rmcp::model::Tool)> = Vec::new();
        for server in self.enabled() {
            for tool in server.status().tools {
                let name = {
                    let taken = |candidate: &str| out.iter().any(|(_, n, _)| n == candidate);
                    config::mcp_tool_name(server.name(), &tool.name, &taken)
                };
                out.push((server.clone(), name, tool));
            }
        }
        out
    }

    /// Tools with `direct` exposure of the connected servers, as agent tools.
    pub fn direct_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.named_tools()
            .into_iter()
            .filter(|(server, _, tool)| server.tool_exposure(&tool.name) == Exposure::Direct)
            .map(|(server, name, tool)| {
                Arc::new(McpTool::new(name, server, &tool)) as Arc<dyn Tool>
            })
            .collect()
    }

    /// Whether `codemode` is activated for these servers: one enabled server has tools with
    /// `codemode` exposure and `autoEnableCodemode` is not `false`.
    pub fn wants_codemode(&self) -> bool {
        let auto = self.loaded().config.auto_enable_codemode;
        auto != Some(false)
            && self
                .enabled()
                .iter()
                .any(|s| s.configured_exposures().contains(&Exposure::Codemode))
    }

    /// The `mcp_servers` system-prompt section body: enabled servers with `codemode` or
    /// `deferred` tools, how their tools are reached and a one-line summary; `None` without
    /// such servers.
    pub fn servers_section(&self) -> Option<String> {
        let enabled = self.enabled();
        let mut listed: Vec<&Arc<McpServer>> = enabled
            .iter()
            .filter(|s| {
                let exposures = s.configured_exposures();
                exposures.contains(&Exposure::Codemode) || exposures.contains(&Exposure::Deferred)
            })
            .collect();
        if listed.is_empty() {
            return None;
        }
        listed.sort_by(|a, b| a.name().cmp(b.name()));
        let reaches: Vec<&str> = listed
            .iter()
            .map(|s| {
                if s.configured_exposures().contains(&Exposure::Codemode) {
                    "codemode"
                } else {
                    "tool_search"
                }
            })
            .collect();
        let mut intro = "MCP servers whose tools are not declared to you.".to_string();
        if reaches.contains(&"codemode") {
            intro.push_str(" Call the tools of `codemode` servers from codemode scripts.");
        }
        if reaches.contains(&"tool_search") {
            intro.push_str(" Load the tools of `tool_search` servers with `tool_search`.");
        }
        let heads: Vec<String> = listed
            .iter()
            .zip(&reaches)
            .map(|(s, reach)| format!("- {} ({reach})", config::mcp_namespace(s.name())))
            .collect();
        let omitted = |count: usize| -> Vec<String> {
            if count == 0 {
                Vec::new()
            } else {
                vec![format!(
                    "- … {count} more server{}; find their tools with searchTools()",
                    if count == 1 { "" } else { "s" }
                )]
            }
        };
        let size = |kept: usize| -> usize {
            let mut lines = vec![intro.clone()];
            lines.extend(heads[..kept].iter().cloned());
            lines.extend(omitted(listed.len() - kept));
            lines.join("\n").chars().count()
        };
        let mut kept = listed.len();
        while kept > 0 && size(kept) > MAX_SERVERS_SECTION_CHARS {
            kept -= 1;
        }
        // Each description also takes a ": " separator; none fit when no server line does.
        let per_server = MAX_SERVERS_SECTION_CHARS
            .saturating_sub(size(kept))
            .checked_div(kept)
            .unwrap_or(0)
            .saturating_sub(2)
            .min(MAX_SERVER_DESCRIPTION_CHARS);
        let mut lines = vec![intro.clone()];
        for (server, head) in listed.iter().zip(&heads).take(kept) {
            let summary = if per_server > 0 {
                shorten(
                    &server_summary(
                        server.entry.config.description.as_deref(),
                        server.status().instructions.as_deref(),
                    ),
                    per_server,
                )
            } else {
                String::new()
            };
            lines.push(if summary.is_empty() {
                head.clone()
            } else {
                format!("{head}: {summary}")
            });
        }
        lines.extend(omitted(listed.len() - kept));
        Some(lines.join("\n"))
    }

    /// Stops every server.
    pub async fn shutdown(&self) {
        futures::future::join_all(self.servers().iter().map(|s| s.close())).await;
    }

    /// Configuration errors, failed connections and servers that need sign-in, one line
    /// each, for the start-up report.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .loaded()
            .config
            .errors
            .iter()
            .map(|e| format!("MCP config error: {e}"))
            .collect();
        for server in self.enabled() {
            let status = server.status();
            if status.state == ConnState::Failed {
                let error = status.error.unwrap_or_default();
                let first = error.lines().next().unwrap_or("unknown error");
                out.push(format!("MCP server \"{}\" failed: {first}", server.name()));
            }
            if status.state == ConnState::NeedsAuth {
                out.push(match server.provider_login() {
                    Some(login) => login.sign_in_message(server.name()),
                    None => format!(
                        "MCP server \"{0}\" needs sign-in: run pi mcp login {0}",
                        server.name()
                    ),
                });
            }
        }
        out
    }
}

/// Which MCP tools the tool options keep (Pi's rules): `--tools` filters MCP tools only
/// when one of its entries starts with `mcp__`; `--no-tools` drops every MCP tool it does
/// not name; `--exclude-tools` patterns apply to MCP tools too.
pub fn select_mcp_tools(
    tools: Vec<Arc<dyn Tool>>,
    selection: &crate::tools::ToolSelection,
) -> Vec<Arc<dyn Tool>> {
    let matches =
        |entries: &[String], name: &str| entries.iter().any(|e| config::wildcard_match(e, name));
    let plain: Vec<String> = selection
        .tools
        .iter()
        .flatten()
        .filter(|e| !e.starts_with('+') && !e.starts_with('-'))
        .cloned()
        .collect();
    let filters_mcp = plain.iter().any(|e| e.starts_with("mcp__"));
    let excluded = selection.exclude_tools.clone().unwrap_or_default();
    tools
        .into_iter()
        .filter(|tool| {
            let name = tool.name();
            if matches(&excluded, name) {
                return false;
            }
            if filters_mcp || selection.no_tools == crate::tools::NoTools::All {
                return matches(&plain, name);
            }
            true
        })
        .collect()
}

/// The first line of the configured description, else of the server's instructions.
fn server_summary(description: Option<&str>, instructions: Option<&str>) -> String {
    let text = description
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .or(instructions.map(str::trim))
        .unwrap_or("");
    text.split('\n').next().unwrap_or("").trim().to_string()
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    if max <= 1 {
        return String::new();
    }
    let head: String = text.chars().take(max - 1).collect();
    format!("{}…", head.trim_end())
}

/// Where the user config lives, for messages.
pub fn user_config_path(agent_dir: &Path) -> PathBuf {
    config::global_config_path(agent_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reload_keeps_unchanged_servers_and_replaces_changed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let write = |servers: serde_json::Value| {
            std::fs::write(
                dir.path().join("mcp.json"),
                json!({ "mcpServers": servers }).to_string(),
            )
            .unwrap();
        };
        write(json!({
            "same": {"command": "a"},
            "changed": {"command": "b"},
            "removed": {"url": "http://127.0.0.1:1/mcp"}
        }));
        let manager = McpManager::load(dir.path(), dir.path(), false);
        let before = manager.servers();
        assert!(manager.reload(false).is_empty());
        assert!(Arc::ptr_eq(&before[0], &manager.servers()[0]));

        write(json!({
            "same": {"command": "a"},
            "changed": {"command": "b", "args": ["--new"]},
            "added": {"command": "c", "enabled": false},
            "broken": {"type": "sse", "url": "http://127.0.0.1:1/sse"}
        }));
        let reloaded = manager.reload(false);
        let names = |servers: &[Arc<McpServer>]| -> Vec<String> {
            servers.iter().map(|s| s.name().to_string()).collect()
        };
        assert_eq!(names(&reloaded.stopped), ["changed", "removed"]);
        assert_eq!(names(&reloaded.started), ["changed", "added"]);
        let after = manager.servers();
        assert_eq!(names(&after), ["same", "changed", "added"]);
        assert!(Arc::ptr_eq(&before[0], &after[0]));
        assert!(!Arc::ptr_eq(&before[1], &after[1]));
        assert_eq!(manager.config().errors.len(), 1, "{:?}", manager.config());
        assert!(!after[2].enabled());
    }

    #[test]
    fn servers_section_lists_indirect_servers_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mcp.json"),
            json!({"mcpServers": {
                "zeta": {"command": "x", "exposure": "deferred", "description": "Zeta tools\nmore"},
                "alpha-one": {"command": "x"},
                "direct": {"command": "x", "exposure": "direct"},
                "off": {"command": "x", "enabled": false}
            }})
            .to_string(),
        )
        .unwrap();
        let manager = McpManager::load(dir.path(), dir.path(), false);
        assert_eq!(
            manager.servers_section().unwrap(),
            "MCP servers whose tools are not declared to you. Call the tools of `codemode` servers from codemode scripts. Load the tools of `tool_search` servers with `tool_search`.\n\
             - mcp__alpha_one (codemode)\n\
             - mcp__zeta (tool_search): Zeta tools"
        );
    }
}
