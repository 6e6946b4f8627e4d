//! The tools a session registers and activates at start-up, built-in and extension tools
//! alike, as Pi 1.6.0's `createAgentSession` options reach `AgentSession._refreshToolRegistry`:
//!
//! - `--tools` plain names or patterns are an allowlist: a tool it does not match is not
//!   registered at all (`pi.getAllTools()` does not list it, the model's calls answer
//!   `Tool x not found`); a tool it matches is activated when its exposure declares it
//!   (`direct`, `model-only`), and a tool it names is activated whatever its exposure
//!   (except `hidden`).
//! - `--exclude-tools` patterns unregister the tools they match, extension tools included.
//! - `--no-tools` is an empty allowlist (only `--tools +name` entries pass); `--no-builtin-tools`
//!   only empties the default built-in selection: extension tools stay registered and active.
//! - Without an allowlist every extension tool whose exposure declares it and that does not set
//!   `defaultActive: false` is active; `+name` entries, `defaultTools` and the built-in defaults
//!   add the tools they name. A `-name` entry only removes a name from that list: an extension
//!   tool it names is still activated on registration.
//!
//! The tools of the MCP servers, `codemode` and `tool_search` are not here (see `crate::mcp`).

use std::sync::Arc;

use super::registry::tool_filter;
use super::registry::tool_list_error;
use super::registry::ToolFilter;
use super::registry::ToolSelection;
use super::Tool;
use super::ToolExposure;

/// An extension tool as registered.
#[derive(Clone, Debug)]
pub struct RegisteredTool {
    pub tool: Arc<dyn Tool>,
    /// `false` when the extension registered it with `defaultActive: false`.
    pub default_active: bool,
}

/// The session's tools: every registered one (in Pi's registry order: built-ins, an extension
/// tool that overrides a built-in in its place, then the other extension tools), and the
/// active ones, which are declared to the model, in activation order.
#[derive(Clone, Debug, Default)]
pub struct SessionTools {
    pub registered: Vec<Arc<dyn Tool>>,
    pub active: Vec<Arc<dyn Tool>>,
}

/// Whether the tool options keep a tool named `name` registered (the `--tools` allowlist,
/// `--exclude-tools`, `--no-tools`), as they keep `codemode` and `tool_search`, which Pi
/// always registers.
pub fn keeps_tool(selection: &ToolSelection, name: &str) -> bool {
    tool_filter(selection).2.keeps(name)
}

/// The registered and active tools of a session with `extension_tools` under `selection`.
///
/// Errors with Pi's `Invalid tools option: …` when `--tools` mixes names and modifiers.
pub fn select_session_tools(
    selection: &ToolSelection,
    extension_tools: &[RegisteredTool],
) -> Result<SessionTools, String> {
    if let Some(error) = selection.tools.as_deref().and_then(tool_list_error) {
        return Err(format!("Invalid tools option: {error}"));
    }
    let (defaults, selected, filter) = tool_filter(selection);
    let registered = registry(extension_tools, &filter);
    let mut names: Vec<String> = selected.unwrap_or(defaults);
    if filter.allowed.is_some() {
        // Matching the allowlist activates a tool that declares itself.
        names.extend(
            registered
                .iter()
                .filter(|t| filter.keeps(t.name()) && t.exposure().is_declarable())
                .map(|t| t.name().to_string()),
        );
    } else {
        names.extend(
            extension_tools
                .iter()
                .filter(|e| e.default_active && e.tool.exposure().is_declarable())
                .map(|e| e.tool.name().to_string()),
        );
    }
    let mut active: Vec<Arc<dyn Tool>> = Vec::new();
    for name in names {
        if active.iter().any(|t| t.name() == name) {
            continue;
        }
        let tool = registered.iter().find(|t| t.name() == name);
        // Names of unregistered tools (filtered out, or `codemode` and the like) are skipped.
        if let Some(tool) = tool.filter(|t| t.exposure() != ToolExposure::Hidden) {
            active.push(tool.clone());
        }
    }
    Ok(SessionTools { registered, active })
}

/// Every built-in tool (an extension tool of the same name in its place), then the other
/// extension tools, as far as the options keep them.
fn registry(extension_tools: &[RegisteredTool], filter: &ToolFilter) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = super::all_builtin_tools();
    for extension in extension_tools {
        match tools.iter_mut().find(|t| t.name() == extension.tool.name()) {
            Some(slot) => *slot = extension.tool.clone(),
            None => tools.push(extension.tool.clone()),
        }
    }
    tools.retain(|t| filter.keeps(t.name()));
    tools
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::registry::NoTools;
    use crate::tools::{ToolContext, ToolError, ToolOutput, ToolUpdateFn};
    use serde_json::{json, Value};
    use tokio_util::sync::CancellationToken;

    #[derive(Debug)]
    struct Probe {
        name: String,
        exposure: ToolExposure,
        parameters: Value,
    }

    #[async_trait::async_trait]
    impl Tool for Probe {
        fn name(&self) -> &str {
            &self.name
        }
        fn description(&self) -> &str {
            "probe"
        }
        fn parameters(&self) -> &Value {
            &self.parameters
        }
        fn exposure(&self) -> ToolExposure {
            self.exposure
        }
        async fn execute(
            &self,
            _: &str,
            _: Value,
            _: &ToolContext,
            _: CancellationToken,
            _: ToolUpdateFn<'_>,
        ) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("ok"))
        }
    }

    /// The probe extension of the e2e tests: one tool per exposure, and a `direct` tool
    /// registered with `defaultActive: false`.
    fn probe_tools() -> Vec<RegisteredTool> {
        [
            ("ext_direct", ToolExposure::Direct, true),
            ("ext_inactive", ToolExposure::Direct, false),
            ("ext_codemode", ToolExposure::Codemode, true),
            ("ext_deferred", ToolExposure::Deferred, true),
            ("ext_hidden", ToolExposure::Hidden, true),
            ("ext_modelonly", ToolExposure::ModelOnly, true),
        ]
        .into_iter()
        .map(|(name, exposure, default_active)| RegisteredTool {
            tool: Arc::new(Probe {
                name: name.to_string(),
                exposure,
                parameters: json!({"type": "object"}),
            }),
            default_active,
        })
        .collect()
    }

    fn list(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|s| s.to_string()).collect())
    }

    fn names(tools: &[Arc<dyn Tool>]) -> Vec<&str> {
        tools.iter().map(|t| t.name()).collect()
    }

    /// (registered, active) under `selection`.
    fn select(selection: ToolSelection) -> (Vec<String>, Vec<String>) {
        let tools = select_session_tools(&selection, &probe_tools()).unwrap();
        let own = |t: &[Arc<dyn Tool>]| names(t).iter().map(|s| s.to_string()).collect();
        (own(&tools.registered), own(&tools.active))
    }

    // The expectations are what real Pi 1.6.0 reported (`pi.getAllTools()`,
    // `pi.getActiveTools()`) with the same tools, less its Windows-only `powershell`.
    #[test]
    fn without_options_declarable_extension_tools_are_active() {
        let (registered, active) = select(ToolSelection::default());
        assert_eq!(registered.len(), 13);
        assert_eq!(
            active,
            [
                "read",
                "bash",
                "edit",
                "write",
                "ext_direct",
                "ext_modelonly"
            ]
        );
    }

    #[test]
    fn the_allowlist_registers_and_activates_what_it_names() {
        let (registered, active) = select(ToolSelection {
            tools: list(&["read", "ext_direct"]),
            ..ToolSelection::default()
        });
        assert_eq!(registered, ["read", "ext_direct"]);
        assert_eq!(active, ["read", "ext_direct"]);

        let (registered, active) = select(ToolSelection {
            tools: list(&["read", "ext_*"]),
            ..ToolSelection::default()
        });
        assert_eq!(registered.len(), 7);
        assert_eq!(
            active,
            ["read", "ext_direct", "ext_inactive", "ext_modelonly"]
        );

        // Named, a `codemode` tool is declared too; a hidden one never is.
        let (registered, active) = select(ToolSelection {
            tools: list(&["read", "ext_inactive", "ext_hidden", "ext_codemode"]),
            ..ToolSelection::default()
        });
        assert_eq!(
            registered,
            ["read", "ext_inactive", "ext_codemode", "ext_hidden"]
        );
        assert_eq!(active, ["read", "ext_inactive", "ext_codemode"]);
    }

    #[test]
    fn modifiers_exclusions_and_no_tools() {
        let (_, active) = select(ToolSelection {
            tools: list(&["+ext_inactive"]),
            ..ToolSelection::default()
        });
        assert_eq!(
            active,
            [
                "read",
                "bash",
                "edit",
                "write",
                "ext_inactive",
                "ext_direct",
                "ext_modelonly"
            ]
        );
        // `-name` does not keep an extension tool from activating on registration.
        let (_, active) = select(ToolSelection {
            tools: list(&["-ext_direct"]),
            ..ToolSelection::default()
        });
        assert_eq!(
            active,
            [
                "read",
                "bash",
                "edit",
                "write",
                "ext_direct",
                "ext_modelonly"
            ]
        );
        let (registered, active) = select(ToolSelection {
            exclude_tools: list(&["ext_direct", "ext_mo*"]),
            ..ToolSelection::default()
        });
        assert!(!registered
            .iter()
            .any(|n| n == "ext_direct" || n == "ext_modelonly"));
        assert_eq!(active, ["read", "bash", "edit", "write"]);

        let (registered, active) = select(ToolSelection {
            no_tools: NoTools::All,
            ..ToolSelection::default()
        });
        assert!(registered.is_empty() && active.is_empty());
        let (registered, active) = select(ToolSelection {
            no_tools: NoTools::All,
            tools: list(&["+ext_direct"]),
            ..ToolSelection::default()
        });
        assert_eq!(
            (registered, active),
            (
                vec!["ext_direct".to_string()],
                vec!["ext_direct".to_string()]
            )
        );

        let (registered, active) = select(ToolSelection {
            no_tools: NoTools::Builtin,
            ..ToolSelection::default()
        });
        assert_eq!(registered.len(), 13);
        assert_eq!(active, ["ext_direct", "ext_modelonly"]);

        let (_, active) = select(ToolSelection {
            default_tools: list(&["read", "ext_inactive", "ext_codemode"]),
            ..ToolSelection::default()
        });
        assert_eq!(
            active,
            [
                "read",
                "ext_inactive",
                "ext_codemode",
                "ext_direct",
                "ext_modelonly"
            ]
        );
    }
}
