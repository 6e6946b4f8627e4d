//! Which built-in tools a session starts with: `--tools`, `--exclude-tools`,
//! `--no-builtin-tools`, `--no-tools` and the `defaultTools` setting (Pi's `createAgentSession`
//! and `AgentSession._refreshToolRegistry`).

use std::sync::Arc;

use super::BashTool;
use super::EditTool;
use super::FindTool;
use super::GrepTool;
use super::LsTool;
use super::ReadTool;
use super::Tool;
use super::WriteTool;

/// Tools active when nothing says otherwise.
pub const DEFAULT_TOOL_NAMES: [&str; 4] = ["read", "bash", "edit", "write"];

/// Every built-in tool, in Pi's registration order. (Pi's Windows-only `powershell` is not built.)
pub const ALL_BUILTIN_TOOL_NAMES: [&str; 7] =
    ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// `--no-tools` / `--no-builtin-tools`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoTools {
    /// Neither flag.
    #[default]
    None,
    /// `--no-builtin-tools`: no built-in tool is active unless `--tools` names it.
    Builtin,
    /// `--no-tools`: only tools `--tools` names are allowed at all.
    All,
}

/// The tool selection options of a session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolSelection {
    /// `--tools a,b` (names or `*` patterns), or only `+name`/`-name` modifiers of the defaults.
    pub tools: Option<Vec<String>>,
    /// `--exclude-tools a,b` (names or `*` patterns).
    pub exclude_tools: Option<Vec<String>>,
    /// `--no-tools` / `--no-builtin-tools`.
    pub no_tools: NoTools,
    /// The `defaultTools` setting, already resolved to names.
    pub default_tools: Option<Vec<String>>,
    /// The `codemode.*` settings: how tools are presented while `codemode` is declared.
    pub codemode: crate::codemode::CodemodeOptions,
}

/// One built-in tool by name.
pub fn builtin_tool(name: &str) -> Option<Arc<dyn Tool>> {
    let tool: Arc<dyn Tool> = match name {
        "read" => Arc::new(ReadTool),
        "bash" => Arc::new(BashTool),
        "edit" => Arc::new(EditTool),
        "write" => Arc::new(WriteTool),
        "grep" => Arc::new(GrepTool),
        "find" => Arc::new(FindTool),
        "ls" => Arc::new(LsTool),
        _ => return None,
    };
    Some(tool)
}

/// Every built-in tool, in registration order.
pub fn all_builtin_tools() -> Vec<Arc<dyn Tool>> {
    ALL_BUILTIN_TOOL_NAMES
        .iter()
        .filter_map(|name| builtin_tool(name))
        .collect()
}

pub(super) fn is_modifier(entry: &str) -> bool {
    entry.starts_with('+') || entry.starts_with('-')
}

/// Pi's check of a `--tools` list: plain names and patterns, or only `+name`/`-name` entries with
/// exact names. The problem, if any (the CLI reports it as `--tools: <problem>`).
pub fn tool_list_error(entries: &[String]) -> Option<String> {
    let modifiers: Vec<&String> = entries.iter().filter(|entry| is_modifier(entry)).collect();
    if modifiers.is_empty() {
        return None;
    }
    if modifiers.len() < entries.len() {
        return Some("tool names cannot be mixed with +name or -name entries".to_string());
    }
    modifiers
        .iter()
        .find(|entry| entry.contains('*'))
        .map(|pattern| {
            format!("+name and -name entries take exact tool names, not patterns: {pattern}")
        })
}

pub(super) fn apply_modifiers(base: &[String], entries: &[String]) -> Vec<String> {
    let mut tools = base.to_vec();
    for entry in entries {
        let name = &entry[1..];
        let position = tools.iter().position(|tool| tool == name);
        if entry.starts_with('+') && position.is_none() && !name.is_empty() {
            tools.push(name.to_string());
        } else if let (true, Some(index)) = (entry.starts_with('-'), position) {
            tools.remove(index);
        }
    }
    tools
}

/// Whether `name` is one of `entries`, each an exact name or a pattern where `*` matches anything.
pub(super) fn matches_any(entries: &[String], name: &str) -> bool {
    entries.iter().any(|entry| wildcard_match(entry, name))
}

fn wildcard_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(index) => rest = &rest[index + part.len()..],
            None => return false,
        }
    }
    true
}

/// What the tool options allow: the allowlist (`--tools` plain names or patterns, `--no-tools`)
/// and the `--exclude-tools` patterns. Built-in and extension tools go through the same one.
pub(super) struct ToolFilter {
    pub(super) allowed: Option<Vec<String>>,
    excluded: Vec<String>,
}

impl ToolFilter {
    /// Whether the options keep a tool named `name` registered.
    pub(super) fn keeps(&self, name: &str) -> bool {
        !matches_any(&self.excluded, name)
            && self
                .allowed
                .as_ref()
                .is_none_or(|allowed| matches_any(allowed, name))
    }
}

/// What `selection` says: the default tool names, the names `--tools` selects (plain names, or
/// the defaults changed by `+name`/`-name` entries) if it does, and the filter.
pub(super) fn tool_filter(
    selection: &ToolSelection,
) -> (Vec<String>, Option<Vec<String>>, ToolFilter) {
    let defaults: Vec<String> = if selection.no_tools != NoTools::None {
        Vec::new()
    } else {
        selection
            .default_tools
            .clone()
            .unwrap_or_else(|| DEFAULT_TOOL_NAMES.iter().map(|s| s.to_string()).collect())
    };
    let modifiers = selection
        .tools
        .as_ref()
        .filter(|tools| tools.iter().any(|t| is_modifier(t)));
    let selected = match modifiers {
        Some(modifiers) => Some(apply_modifiers(&defaults, modifiers)),
        None => selection.tools.clone(),
    };
    let filter = ToolFilter {
        allowed: match modifiers {
            Some(_) if selection.no_tools == NoTools::All => selected.clone(),
            Some(_) => None,
            None => selection
                .tools
                .clone()
                .or_else(|| (selection.no_tools == NoTools::All).then(Vec::new)),
        },
        excluded: selection.exclude_tools.clone().unwrap_or_default(),
    };
    (defaults, selected, filter)
}

/// The tool names the options select before the allowlist and exclusions apply: `--tools`
/// plain names, else `defaultTools` (or the defaults) changed by `--tools` `+name`/`-name`
/// entries. Names of tools that are not built in (`codemode`, `tool_search`) are kept.
pub fn selected_tool_names(selection: &ToolSelection) -> Vec<String> {
    let (defaults, selected, _) = tool_filter(selection);
    selected.unwrap_or(defaults)
}

/// The built-in tools a session starts with, in the order Pi activates them.
///
/// Errors with Pi's `Invalid tools option: …` when `tools` mixes names and modifiers.
pub fn select_builtin_tools(selection: &ToolSelection) -> Result<Vec<Arc<dyn Tool>>, String> {
    if let Some(error) = selection.tools.as_deref().and_then(tool_list_error) {
        return Err(format!("Invalid tools option: {error}"));
    }
    let (defaults, selected, filter) = tool_filter(selection);
    let is_allowed = |name: &str| filter.keeps(name);
    let mut active: Vec<String> = selected
        .unwrap_or(defaults)
        .into_iter()
        .filter(|name| is_allowed(name))
        .collect();
    // Naming or matching a tool in the allowlist activates it even when it is not a default.
    if let Some(allowed) = &filter.allowed {
        for name in ALL_BUILTIN_TOOL_NAMES {
            if matches_any(allowed, name) && is_allowed(name) {
                active.push(name.to_string());
            }
        }
    }
    let mut seen = Vec::new();
    Ok(active
        .into_iter()
        .filter(|name| {
            let fresh = !seen.contains(name);
            seen.push(name.clone());
            fresh
        })
        .filter_map(|name| builtin_tool(&name))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(selection: ToolSelection) -> Vec<String> {
        select_builtin_tools(&selection)
            .unwrap()
            .iter()
            .map(|t| t.name().to_string())
            .collect()
    }

    fn list(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn default_set_is_read_bash_edit_write() {
        assert_eq!(
            names(ToolSelection::default()),
            ["read", "bash", "edit", "write"]
        );
        assert_eq!(all_builtin_tools().len(), 7);
    }

    #[test]
    fn tools_list_replaces_defaults_and_patterns_match() {
        assert_eq!(
            names(ToolSelection {
                tools: list(&["grep", "read"]),
                ..Default::default()
            }),
            ["grep", "read"]
        );
        assert_eq!(
            names(ToolSelection {
                tools: list(&["*"]),
                ..Default::default()
            }),
            ["read", "bash", "edit", "write", "grep", "find", "ls"]
        );
        assert_eq!(
            names(ToolSelection {
                tools: list(&["unknown"]),
                ..Default::default()
            }),
            Vec::<String>::new()
        );
    }

    #[test]
    fn modifiers_change_defaults() {
        let selection = ToolSelection {
            tools: list(&["+grep", "-bash"]),
            ..Default::default()
        };
        assert_eq!(names(selection), ["read", "edit", "write", "grep"]);
        let mixed = ToolSelection {
            tools: list(&["read", "+grep"]),
            ..Default::default()
        };
        assert_eq!(
            select_builtin_tools(&mixed).err().as_deref(),
            Some("Invalid tools option: tool names cannot be mixed with +name or -name entries")
        );
        let pattern = ToolSelection {
            tools: list(&["+gr*"]),
            ..Default::default()
        };
        assert!(select_builtin_tools(&pattern).is_err());
    }

    #[test]
    fn exclusions_and_no_tools() {
        let excluded = ToolSelection {
            exclude_tools: list(&["b*", "edit"]),
            ..Default::default()
        };
        assert_eq!(names(excluded), ["read", "write"]);
        assert!(names(ToolSelection {
            no_tools: NoTools::Builtin,
            ..Default::default()
        })
        .is_empty());
        assert!(names(ToolSelection {
            no_tools: NoTools::All,
            ..Default::default()
        })
        .is_empty());
        let only_ls = ToolSelection {
            no_tools: NoTools::All,
            tools: list(&["ls"]),
            ..Default::default()
        };
        assert_eq!(names(only_ls), ["ls"]);
        let builtin_plus = ToolSelection {
            no_tools: NoTools::Builtin,
            tools: list(&["+find"]),
            ..Default::default()
        };
        assert_eq!(names(builtin_plus), ["find"]);
        let settings = ToolSelection {
            default_tools: list(&["read", "ls"]),
            ..Default::default()
        };
        assert_eq!(names(settings), ["read", "ls"]);
    }
}

#[cfg(test)]
mod fixture_tests {
    use serde_json::Value;

    use super::*;

    /// The tool definitions real Pi 1.6.0 recorded in a session (system message `toolsAdded`)
    /// must be ours, byte for byte once serialized, key order included.
    #[test]
    fn definitions_match_real_pi_session() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/realpi/sessions/rpc_tree_labels_nav.jsonl"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let line = text
            .lines()
            .find(|line| line.contains("\"toolsAdded\""))
            .unwrap();
        let entry: Value = serde_json::from_str(line).unwrap();
        let added = entry.pointer("/message/toolsAdded").or_else(|| {
            // Wherever the list sits in the message, find it.
            fn find(value: &Value) -> Option<&Value> {
                match value {
                    Value::Object(map) => map
                        .get("toolsAdded")
                        .or_else(|| map.values().find_map(find)),
                    Value::Array(items) => items.iter().find_map(find),
                    _ => None,
                }
            }
            find(&entry)
        });
        let added = added.and_then(Value::as_array).unwrap();
        let names: Vec<&str> = added.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names, DEFAULT_TOOL_NAMES);
        for expected in added {
            let name = expected["name"].as_str().unwrap();
            let tool = builtin_tool(name).unwrap();
            assert_eq!(
                tool.description(),
                expected["description"].as_str().unwrap(),
                "{name}"
            );
            assert_eq!(
                serde_json::to_string(tool.parameters()).unwrap(),
                serde_json::to_string(&expected["parameters"]).unwrap(),
                "{name}"
            );
        }
    }
}
