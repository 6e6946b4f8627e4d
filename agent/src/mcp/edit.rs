//! Saving `/mcp` changes (enable, disable, exposure) to the file that defines the server
//! (Pi 1.6.0's `updateMcpServerConfig`): only that entry's `enabled` or `exposure` key
//! changes, the rest of the file (other servers, other keys, its indentation) stays. Values
//! that are the defaults (`enabled: true`, `exposure: "codemode"`) are removed from a full
//! entry and written out in a project override, whose job is to state them.

use std::path::Path;

use serde_json::Map;
use serde_json::Value;

use super::config::edit_mcp_servers;
use super::config::is_override;
use super::config::Exposure;
use super::config::ServerEntry;

/// What `/mcp` changes of one server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerPatch {
    /// Enable or disable.
    pub enabled: Option<bool>,
    /// A new server exposure.
    pub exposure: Option<Exposure>,
}

/// Changes `name` in the `mcp.json` at `path`. With `create_override` a missing entry becomes
/// an empty project override first ("Enable in this project"); otherwise a file that does not
/// define the server is an error naming it.
pub fn update_server_config(
    path: &Path,
    name: &str,
    patch: ServerPatch,
    create_override: bool,
) -> Result<(), String> {
    let mut failure = None;
    edit_mcp_servers(path, |servers| {
        if !servers.contains_key(name) && create_override {
            servers.insert(name.to_string(), Value::Object(Map::new()));
        }
        let Some(Value::Object(server)) = servers.get_mut(name) else {
            failure = Some(format!(
                "{} does not define MCP server \"{name}\"",
                path.display()
            ));
            return false;
        };
        let keep_defaults = is_override(server);
        if let Some(enabled) = patch.enabled {
            if enabled && !keep_defaults {
                server.shift_remove("enabled");
            } else {
                server.insert("enabled".into(), Value::Bool(enabled));
            }
        }
        if let Some(exposure) = patch.exposure {
            if exposure == Exposure::Codemode && !keep_defaults {
                server.shift_remove("exposure");
            } else {
                server.insert("exposure".into(), Value::from(exposure.as_str()));
            }
        }
        true
    })?;
    match failure {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// The file a change to `entry` is saved to: its project override when it has one, else the
/// file that defines it.
pub fn target_file(entry: &ServerEntry) -> &Path {
    entry.override_source.as_deref().unwrap_or(&entry.source)
}

/// Saves `patch` for `entry` where Pi saves it; `in_project` adds (or updates) a project
/// override in `project_file` instead. Errors read `Could not update <file>: <why>`.
pub fn save_server_change(
    entry: &ServerEntry,
    patch: ServerPatch,
    in_project: Option<&Path>,
) -> Result<(), String> {
    let (file, create) = match in_project {
        Some(project) => (project, true),
        None => (target_file(entry), false),
    };
    update_server_config(file, &entry.name, patch, create)
        .map_err(|e| format!("Could not update {}: {e}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enable_disable_and_exposure_change_only_that_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        let original = "{\n    \"autoEnableCodemode\": true,\n    \"mcpServers\": {\n        \"fs\": {\n            \"command\": \"npx\",\n            \"args\": [\"-y\", \"pkg\"],\n            \"env\": {\"K\": \"${K}\"}\n        },\n        \"other\": {\"url\": \"https://example.com/mcp\", \"exposure\": \"direct\"}\n    },\n    \"x-note\": \"kept\"\n}\n";
        std::fs::write(&path, original).unwrap();
        let disable = ServerPatch {
            enabled: Some(false),
            exposure: None,
        };
        update_server_config(&path, "fs", disable, false).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["mcpServers"]["fs"]["enabled"], false);
        assert_eq!(value["mcpServers"]["fs"]["env"]["K"], "${K}");
        assert_eq!(
            value["mcpServers"]["other"]["exposure"], "direct",
            "other servers stay"
        );
        assert_eq!(value["x-note"], "kept");
        assert_eq!(value["autoEnableCodemode"], true);
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["autoEnableCodemode", "mcpServers", "x-note"]);
        assert!(
            text.contains("\n    \"mcpServers\""),
            "indentation kept: {text}"
        );
        // Defaults are removed from a full entry.
        let enable_codemode = ServerPatch {
            enabled: Some(true),
            exposure: Some(Exposure::Codemode),
        };
        update_server_config(&path, "fs", enable_codemode, false).unwrap();
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let fs = value["mcpServers"]["fs"].as_object().unwrap();
        assert!(!fs.contains_key("enabled") && !fs.contains_key("exposure"));
        let deferred = ServerPatch {
            enabled: None,
            exposure: Some(Exposure::Deferred),
        };
        update_server_config(&path, "fs", deferred, false).unwrap();
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value["mcpServers"]["fs"]["exposure"], "deferred");
        // A file that does not define the server says so and is left alone.
        let before = std::fs::read_to_string(&path).unwrap();
        let error = update_server_config(&path, "nope", deferred, false).unwrap_err();
        assert_eq!(
            error,
            format!("{} does not define MCP server \"nope\"", path.display())
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    }

    #[test]
    fn project_overrides_state_defaults_and_are_created_when_missing() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let cwd = dir.path().join("proj");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(
            agent.join("mcp.json"),
            r#"{"mcpServers": {"fs": {"command": "x"}}}"#,
        )
        .unwrap();
        let config = super::super::config::load_mcp_config(&agent, &cwd, true);
        let entry = &config.servers[0];
        let project = super::super::config::project_config_path(&cwd);
        let disable = ServerPatch {
            enabled: Some(false),
            exposure: None,
        };
        save_server_change(entry, disable, Some(&project)).unwrap();
        let value: Value =
            serde_json::from_str(&std::fs::read_to_string(&project).unwrap()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"mcpServers": {"fs": {"enabled": false}}})
        );
        // Reloaded, later changes go to the override, which keeps `enabled: true` explicit.
        let config = super::super::config::load_mcp_config(&agent, &cwd, true);
        let entry = &config.servers[0];
        assert!(!entry.config.enabled);
        assert_eq!(target_file(entry), project.as_path());
        let enable = ServerPatch {
            enabled: Some(true),
            exposure: None,
        };
        save_server_change(entry, enable, None).unwrap();
        let value: Value =
            serde_json::from_str(&std::fs::read_to_string(&project).unwrap()).unwrap();
        assert_eq!(value["mcpServers"]["fs"]["enabled"], true);
        // The user file was never touched.
        assert_eq!(
            std::fs::read_to_string(agent.join("mcp.json")).unwrap(),
            r#"{"mcpServers": {"fs": {"command": "x"}}}"#
        );
    }
}
