//! Which tools the MCP servers add to a session, computed at start-up and again before every
//! request, so that what the model is declared follows the servers during the run (Pi's
//! `declareToolChanges` over the runtime's tools): a server that connected after the start-up
//! wait, a `notifications/tools/list_changed`, and `/mcp` changes (enable, disable,
//! exposure, reconnect) all reach the next request without a restart.
//!
//! The MCP part of a session's tools is: the `direct` tools of the connected servers, the
//! resource tools when their exposure is `direct`, `codemode` (wrapping every declared tool
//! with its script-call note) when a server has `codemode` tools or `--tools` names it, and
//! `tool_search` when a server has `deferred` tools. Everything else (built-in and extension
//! tools) is the session's own and is kept as it is.

use std::sync::Arc;

use super::config::wildcard_match;
use super::config::Exposure;
use super::McpManager;
use crate::tools::NoTools;
use crate::tools::Tool;
use crate::tools::ToolSelection;

/// Whether a tool of the session is one the MCP servers put there (replaced on changes).
pub fn is_mcp_tool(name: &str) -> bool {
    name.starts_with("mcp__")
        || super::resources::is_resource_tool(name)
        || name == crate::codemode::CODEMODE_TOOL_NAME
        || name == super::tool_search::TOOL_SEARCH_TOOL_NAME
}

/// The declared MCP tools: `direct` tools of the connected servers, then the resource tools
/// when their exposure is `direct`, as the tool options keep them.
pub fn declared_mcp_tools(mcp: &Arc<McpManager>, selection: &ToolSelection) -> Vec<Arc<dyn Tool>> {
    let mut tools = super::select_mcp_tools(mcp.direct_tools(), selection);
    if super::resources::exposure(mcp) == Some(Exposure::Direct) {
        tools.extend(super::select_mcp_tools(
            super::resources::resource_tools(mcp),
            selection,
        ));
    }
    tools
}

/// Whether the run declares `codemode`: named in `--tools` (`codemode` or `+codemode`), or
/// activated by an MCP server with `codemode` exposure (unless `--tools` lists plain names
/// without it), and not excluded.
pub fn wants_codemode(selection: &ToolSelection, mcp: Option<&McpManager>) -> bool {
    wants_discovery_tool(
        selection,
        crate::codemode::CODEMODE_TOOL_NAME,
        mcp.is_some_and(McpManager::wants_codemode),
    )
}

/// Whether the run declares `tool_search`: as `codemode`, activated by a server with
/// `deferred` exposure.
pub fn wants_tool_search(selection: &ToolSelection, mcp: &McpManager) -> bool {
    wants_discovery_tool(
        selection,
        super::tool_search::TOOL_SEARCH_TOOL_NAME,
        super::tool_search::wants_tool_search(mcp),
    )
}

/// Whether a tool that reaches undeclared MCP tools is declared: named in `--tools`, or
/// `activated` by the servers' exposure without a `--tools` allowlist, and not excluded.
fn wants_discovery_tool(selection: &ToolSelection, name: &str, activated: bool) -> bool {
    let excluded = selection
        .exclude_tools
        .iter()
        .flatten()
        .any(|e| wildcard_match(e, name));
    // Named in `--tools` or `defaultTools` (Pi registers both tools inactive; either list
    // activates them).
    let named = crate::tools::selected_tool_names(selection)
        .iter()
        .any(|t| t == name);
    // A `--tools` allowlist of plain names keeps only what it names.
    let allowlist = selection
        .tools
        .iter()
        .flatten()
        .any(|t| !t.starts_with('+') && !t.starts_with('-'));
    let automatic = selection.no_tools == NoTools::None && !allowlist && activated;
    !excluded && (named || automatic)
}

/// The session's tools over `own` (built-in and extension tools, without codemode's note):
/// `own`, the declared MCP tools, then `codemode` (with the note on every callable declared
/// tool; scripts also reach the `nested` tools) when wanted; `tool_search` is the caller's,
/// after these.
pub fn with_mcp_tools(
    own: Vec<Arc<dyn Tool>>,
    nested: &[Arc<dyn Tool>],
    mcp: &Arc<McpManager>,
    selection: &ToolSelection,
) -> Vec<Arc<dyn Tool>> {
    let mut tools = own;
    tools.extend(declared_mcp_tools(mcp, selection));
    if wants_codemode(selection, Some(mcp)) {
        tools = crate::codemode::with_codemode(
            tools,
            nested.to_vec(),
            Some(mcp.clone()),
            &selection.codemode,
        );
    }
    tools
}

/// `tools` in Pi's activation order: the tools the options name (`--tools`, or `defaultTools`
/// and the defaults changed by `+name`/`-name` entries) in that order, then the others as they
/// are. Pi activates the named ones first, `codemode` and `tool_search` included, and the
/// tools it activates on its own (extension tools, MCP tools) after them.
pub fn in_selection_order(
    tools: Vec<Arc<dyn Tool>>,
    selection: &ToolSelection,
) -> Vec<Arc<dyn Tool>> {
    let named = crate::tools::selected_tool_names(selection);
    let position = |tool: &Arc<dyn Tool>| {
        named
            .iter()
            .position(|n| n == tool.name())
            .unwrap_or(named.len())
    };
    let mut tools = tools;
    // Stable: the tools the options do not name keep their order, after the named ones.
    tools.sort_by_key(position);
    tools
}

/// Whether two tool sets declare the same thing to the model (names and declarations, in
/// any order).
pub fn same_declarations(a: &[Arc<dyn Tool>], b: &[Arc<dyn Tool>]) -> bool {
    let declarations = |tools: &[Arc<dyn Tool>]| {
        let mut out: Vec<String> = tools
            .iter()
            .map(|t| crate::tools::tool_declaration(t.as_ref()).to_string())
            .collect();
        out.sort();
        out
    };
    a.len() == b.len() && declarations(a) == declarations(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::ToolLoadout;
    use crate::mcp::tool_search::McpLoadout;
    use serde_json::json;

    fn names(tools: &[Arc<dyn Tool>]) -> Vec<&str> {
        tools.iter().map(|t| t.name()).collect()
    }

    #[test]
    fn exposure_and_enabled_changes_change_the_session_tools() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mcp.json"),
            json!({"mcpServers": {"s": {"command": "x"}}}).to_string(),
        )
        .unwrap();
        let mcp = Arc::new(McpManager::load(dir.path(), dir.path(), false));
        let read = crate::tools::builtin_tool("read").unwrap();
        let loadout = McpLoadout::new(
            mcp.clone(),
            ToolSelection::default(),
            std::slice::from_ref(&read),
        );
        let tools = loadout.session_tools();
        assert_eq!(names(&tools), ["read", "codemode"]);
        assert!(tools[0].description().contains("Codemode: `tools.read"));
        assert!(loadout.current_tools(&tools).is_none(), "nothing changed");

        let server = mcp.servers()[0].clone();
        server.set_exposure(Exposure::Deferred);
        let tools = loadout.current_tools(&tools).unwrap();
        assert_eq!(names(&tools), ["read", "tool_search"]);
        assert_eq!(
            tools[0].description(),
            read.description(),
            "no codemode note"
        );

        server.set_exposure(Exposure::Hidden);
        let tools = loadout.current_tools(&tools).unwrap();
        assert_eq!(names(&tools), ["read"]);

        server.set_exposure(Exposure::Codemode);
        let tools = loadout.current_tools(&tools).unwrap();
        assert_eq!(names(&tools), ["read", "codemode"]);
        // Disabled, the server activates nothing (set directly: no connection to close).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(server.set_enabled(false));
        let tools = loadout.current_tools(&tools).unwrap();
        assert_eq!(names(&tools), ["read"]);
    }

    #[test]
    fn discovery_tools_follow_the_tool_options() {
        let selection = |tools: Option<&[&str]>, exclude: Option<&[&str]>| ToolSelection {
            tools: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
            exclude_tools: exclude.map(|t| t.iter().map(|s| s.to_string()).collect()),
            ..ToolSelection::default()
        };
        assert!(wants_codemode(&selection(Some(&["+codemode"]), None), None));
        assert!(!wants_codemode(&selection(None, None), None));
        assert!(!wants_codemode(
            &selection(Some(&["codemode"]), Some(&["code*"])),
            None
        ));
        assert!(is_mcp_tool("mcp__s__t") && is_mcp_tool("tool_search") && !is_mcp_tool("read"));
        // `defaultTools` names it too; `--tools` plain names or `-codemode` override that.
        let with_defaults = |tools: Option<&[&str]>| ToolSelection {
            default_tools: Some(vec!["read".into(), "codemode".into()]),
            ..selection(tools, None)
        };
        assert!(wants_codemode(&with_defaults(None), None));
        assert!(wants_codemode(&with_defaults(Some(&["+bash"])), None));
        assert!(!wants_codemode(&with_defaults(Some(&["-codemode"])), None));
        assert!(!wants_codemode(&with_defaults(Some(&["read"])), None));
    }
}
