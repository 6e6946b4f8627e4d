//! After `pi auth login radius`: the Radius MCP server in the global `mcp.json`, using that
//! login (`"auth": {"provider": "radius"}`), as Pi 1.6.0 adds it. Nothing changes when a
//! global server already uses the login; a server at the Radius URL without it is switched
//! to it (its MCP OAuth settings dropped); otherwise a new server is added under the first
//! free name of `radius`, `radius-mcp`, `radius-mcp-2`, ….

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use pi_agent::mcp::config::{
    add_server_config, global_config_path, load_mcp_config, mcp_namespace, Transport,
};
use serde_json::{json, Map, Value};

/// The entry to write: `(mcp.json, server name, config)`, or `None` when a global server
/// already uses `provider`'s login.
pub fn plan(
    provider: &str,
    mcp_url: &str,
    agent_dir: &Path,
) -> Option<(PathBuf, String, Map<String, Value>)> {
    let trim = |u: &str| u.trim_end_matches('/').to_string();
    // Only the user's file counts: a project cannot be trusted to carry a login's token.
    let config = load_mcp_config(agent_dir, Path::new("/nonexistent"), false);
    let existing = config.servers.iter().find(|s| match &s.config.transport {
        Transport::Http { url, .. } => trim(url) == trim(mcp_url),
        _ => false,
    });
    if let Some(server) = existing {
        let uses_login = server
            .config
            .raw
            .get("auth")
            .and_then(|a| a.get("provider"))
            .and_then(Value::as_str)
            == Some(provider);
        if uses_login {
            return None;
        }
    }
    let (name, mut entry) = match existing {
        Some(server) => (server.name.clone(), server.config.raw.clone()),
        None => {
            let taken: HashSet<String> = config
                .servers
                .iter()
                .map(|s| mcp_namespace(&s.name))
                .collect();
            let mut name = "radius".to_string();
            let mut suffix = 1;
            while taken.contains(&mcp_namespace(&name)) {
                name = if suffix == 1 {
                    "radius-mcp".into()
                } else {
                    format!("radius-mcp-{suffix}")
                };
                suffix += 1;
            }
            let mut entry = Map::new();
            entry.insert("url".into(), json!(mcp_url));
            (name, entry)
        }
    };
    entry.insert("auth".into(), json!({"provider": provider}));
    // The login replaces the MCP OAuth sign-in.
    entry.remove("oauth");
    Some((global_config_path(agent_dir), name, entry))
}

/// Writes the plan: the line saying what changed, or why it could not.
pub fn write(
    (path, name, entry): (PathBuf, String, Map<String, Value>),
    provider_name: &str,
) -> Result<String, String> {
    match add_server_config(&path, &name, entry) {
        Ok(replaced) => Ok(format!(
            "{} MCP server \"{name}\" in {} to use the {provider_name} login.",
            if replaced { "Updated" } else { "Added" },
            path.display()
        )),
        Err(e) => Err(format!("Could not update {}: {e}", path.display())),
    }
}

/// `pi auth login`: writes the plan without asking and says what changed (stdout), or why
/// it could not (stderr). `/login` asks first (the TUI's `login` module).
pub fn configure(provider: &str, provider_name: &str, mcp_url: &str, agent_dir: &Path) {
    let Some(plan) = plan(provider, mcp_url, agent_dir) else {
        return;
    };
    match write(plan, provider_name) {
        Ok(line) => println!("{line}"),
        Err(line) => eprintln!("{line}"),
    }
}
