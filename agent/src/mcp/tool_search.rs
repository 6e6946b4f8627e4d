//! The `tool_search` tool (Pi 1.6.0's built-in `tool-search` extension) and the loadout it
//! changes.
//!
//! `tool_search` ranks the MCP tools that are not declared to the model (`codemode` and
//! `deferred` exposure, the resource tools when theirs is one of those) with the same BM25
//! ranking as codemode's `searchTools()`, and loads the matches: the agent loop declares them
//! in a system message (`toolsAdded`) before its next request ([`McpLoadout`] is the agent's
//! [`ToolLoadout`]). That message is the record: a resumed session declares the tools again
//! on that branch, and their calls are resolved here. It waits for every server first, since
//! a query can match any server's tools. Pi activates it when a server has `deferred`
//! exposure; scripts cannot call it (it changes what the model sees, not what scripts reach).

use std::sync::Arc;
use std::sync::Mutex;

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::ConnState;
use super::config::Exposure;
use super::McpManager;
use super::McpTool;
use crate::agent::ToolLoadout;
use crate::codemode::search;
use crate::tools::ContentBlock;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolOutput;
use crate::tools::ToolSelection;
use crate::tools::ToolUpdateFn;

/// The tool's name.
pub const TOOL_SEARCH_TOOL_NAME: &str = "tool_search";

const TOOL_SEARCH_DESCRIPTION: &str = "# Tool discovery\n\nSearches over deferred tool metadata with BM25 and exposes matching tools for the next model call.\n\nSome of the tools, such as tools of MCP servers, may not have been provided to you upfront, and you should use this tool (`tool_search`) to search for the required tools. For MCP tool discovery, always use `tool_search`.";

fn parameters() -> &'static Value {
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "required": ["query"],
            "properties": {
                "query": {"type": "string", "description": "Search query for deferred tools."},
                "limit": {"type": "number", "description": format!(
                    "Maximum number of tools to return. Defaults to {}.",
                    search::DEFAULT_SEARCH_LIMIT
                )}
            }
        })
    })
}

/// `tool_search`'s description and parameters (what `pi.getAllTools()` lists of it while
/// it is inactive).
pub fn tool_search_declaration() -> (&'static str, &'static Value) {
    (TOOL_SEARCH_DESCRIPTION, parameters())
}

/// Waits for the first connection attempt of every enabled server still connecting (Pi's
/// `waitForServers` over all of them); failed servers are not tried again here.
pub async fn wait_for_all_servers(mcp: &McpManager) {
    let servers = mcp.servers();
    let waits = servers
        .iter()
        .filter(|s| s.enabled())
        .filter(|s| s.status().state == ConnState::Connecting)
        .map(|server| server.settled());
    futures::future::join_all(waits).await;
}

/// A tool `tool_search` can load.
struct Loadable {
    tool: Arc<dyn Tool>,
}

/// The session's loadout: the tools the session declares from the start, what the branch
/// declares now, and what `tool_search` loaded since the last request.
pub struct McpLoadout {
    mcp: Arc<McpManager>,
    /// The tool options; `/reload` replaces them.
    selection: Mutex<ToolSelection>,
    /// The session's tools that are not the servers' (built-in and extension tools), as they
    /// were before codemode added its note: what a changed tool set is built over.
    own: Mutex<Vec<Arc<dyn Tool>>>,
    /// Registered tools of the session with `codemode` or `deferred` exposure that are not
    /// declared (extension tools): scripts call them, `tool_search` loads them. Tools
    /// registered later join them ([`ToolLoadout::tool_registered`]).
    nested: Mutex<Vec<Arc<dyn Tool>>>,
    /// Names of the tools the session declares now (besides what `tool_search` loaded).
    fixed: Mutex<Vec<String>>,
    /// This loadout's `tool_search` tool, made once (it points back at the loadout).
    tool_search: std::sync::OnceLock<Arc<dyn Tool>>,
    state: Mutex<LoadState>,
}

#[derive(Default)]
struct LoadState {
    /// What the branch's transcript declared at the last request.
    declared: Vec<String>,
    /// Loaded by `tool_search`, not declared yet.
    pending: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for McpLoadout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpLoadout").finish_non_exhaustive()
    }
}

impl McpLoadout {
    /// A loadout over `mcp`'s servers for a session whose own tools are `fixed`; `selection`
    /// (`--tools`, `--exclude-tools`) filters MCP tools as it filters direct ones.
    /// `own` are the session's built-in and extension tools (MCP tools among them are left
    /// out: the servers' tools are computed here).
    pub fn new(
        mcp: Arc<McpManager>,
        selection: ToolSelection,
        own: &[Arc<dyn Tool>],
    ) -> Arc<McpLoadout> {
        McpLoadout::with_nested(mcp, selection, own, Vec::new())
    }

    /// [`McpLoadout::new`] for a session that also registered `nested` tools: tools with
    /// `codemode` or `deferred` exposure that are not declared, which codemode scripts call
    /// and `tool_search` loads like the servers' tools of those exposures.
    pub fn with_nested(
        mcp: Arc<McpManager>,
        selection: ToolSelection,
        own: &[Arc<dyn Tool>],
        nested: Vec<Arc<dyn Tool>>,
    ) -> Arc<McpLoadout> {
        let own: Vec<Arc<dyn Tool>> = own
            .iter()
            .filter(|t| !super::tool_set::is_mcp_tool(t.name()))
            .cloned()
            .collect();
        let loadout = Arc::new(McpLoadout {
            mcp,
            selection: Mutex::new(selection),
            fixed: Mutex::new(own.iter().map(|t| t.name().to_string()).collect()),
            own: Mutex::new(own),
            nested: Mutex::new(nested),
            tool_search: std::sync::OnceLock::new(),
            state: Mutex::new(LoadState::default()),
        });
        // A cycle, on purpose: the loadout lives as long as the session that uses it.
        let tool: Arc<dyn Tool> = Arc::new(ToolSearchTool::new(loadout.clone()));
        let _ = loadout.tool_search.set(tool);
        loadout
    }

    /// The session's tools now: its own, the servers' declared tools, `codemode` and
    /// `tool_search` as the servers' exposures and the tool options want them.
    pub fn session_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools_over(self.own())
    }

    fn tools_over(&self, own: Vec<Arc<dyn Tool>>) -> Vec<Arc<dyn Tool>> {
        let selection = self.selection();
        let nested = self.nested();
        let mut tools = super::tool_set::with_mcp_tools(own, &nested, &self.mcp, &selection);
        if super::tool_set::wants_tool_search(&selection, &self.mcp) {
            tools.extend(self.tool_search.get().cloned());
        }
        let tools = super::tool_set::in_selection_order(tools, &selection);
        *self.fixed.lock().unwrap_or_else(|e| e.into_inner()) =
            tools.iter().map(|t| t.name().to_string()).collect();
        tools
    }

    fn own(&self) -> Vec<Arc<dyn Tool>> {
        self.own.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn nested(&self) -> Vec<Arc<dyn Tool>> {
        self.nested
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn selection(&self) -> ToolSelection {
        self.selection
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether `name` is a tool the session declares now.
    fn is_fixed(&self, name: &str) -> bool {
        self.fixed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|n| n == name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LoadState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tools with `codemode` or `deferred` exposure of the connected servers (and the resource
    /// tools when theirs is one of those), as the tool options keep them.
    fn loadable(&self) -> Vec<Loadable> {
        let searchable = |e: Exposure| matches!(e, Exposure::Codemode | Exposure::Deferred);
        let mut out: Vec<Loadable> = self
            .mcp
            .named_tools()
            .into_iter()
            .filter(|(server, _, tool)| searchable(server.tool_exposure(&tool.name)))
            .map(|(server, name, tool)| Loadable {
                tool: Arc::new(McpTool::new(name, server.clone(), &tool)) as Arc<dyn Tool>,
            })
            .collect();
        if super::resources::exposure(&self.mcp).is_some_and(searchable) {
            out.extend(
                super::resources::resource_tools(&self.mcp)
                    .into_iter()
                    .map(|tool| Loadable { tool }),
            );
        }
        let kept = super::select_mcp_tools(
            out.iter().map(|l| l.tool.clone()).collect(),
            &self.selection(),
        );
        out.retain(|l| kept.iter().any(|k| k.name() == l.tool.name()));
        // The session's own, already filtered by the tool options.
        out.extend(self.nested().into_iter().map(|tool| Loadable { tool }));
        out
    }

    /// Ranks the loadable tools that are not active and loads the matches for the next request.
    fn search_and_load(&self, query: &str, limit: usize) -> Vec<Arc<dyn Tool>> {
        let mut state = self.lock();
        let active = |name: &str| {
            self.is_fixed(name)
                || state.declared.iter().any(|n| n == name)
                || state.pending.iter().any(|t| t.name() == name)
        };
        let candidates: Vec<Loadable> = self
            .loadable()
            .into_iter()
            .filter(|l| !active(l.tool.name()))
            .collect();
        let documents: Vec<search::SearchDocument> = candidates
            .iter()
            .map(|l| {
                search::SearchDocument::new(
                    l.tool.name(),
                    l.tool.description(),
                    l.tool.parameters(),
                    l.tool.namespace().map(|ns| {
                        (
                            ns.name.as_str(),
                            ns.description.as_deref().unwrap_or(""),
                            ns.instructions.as_deref().unwrap_or(""),
                        )
                    }),
                )
            })
            .collect();
        let found: Vec<Arc<dyn Tool>> = search::rank(query, &documents, limit)
            .iter()
            .filter_map(|name| candidates.iter().find(|l| l.tool.name() == name))
            .map(|l| l.tool.clone())
            .collect();
        state.pending.extend(found.iter().cloned());
        found
    }
}

#[async_trait::async_trait]
impl ToolLoadout for McpLoadout {
    fn before_request(&self, declared: &[String]) -> Vec<Arc<dyn Tool>> {
        let mut state = self.lock();
        let pending = std::mem::take(&mut state.pending);
        let loaded: Vec<Arc<dyn Tool>> = pending
            .into_iter()
            .filter(|t| !declared.iter().any(|n| n == t.name()))
            .collect();
        // The loop declares the loaded tools before this request: their calls resolve.
        state.declared = declared
            .iter()
            .cloned()
            .chain(loaded.iter().map(|t| t.name().to_string()))
            .collect();
        loaded
    }

    fn current_tools(&self, tools: &[Arc<dyn Tool>]) -> Option<Vec<Arc<dyn Tool>>> {
        // The session's own tools as they are now (an extension may have changed them),
        // without the codemode note, which `tools_over` adds again when codemode stays.
        // Tools codemode presents instead of declaring them (mode `only`) count as declared.
        let presented: Vec<Arc<dyn Tool>> =
            tools.iter().flat_map(|t| t.presented_tools()).collect();
        let own_before = self.own();
        let own: Vec<Arc<dyn Tool>> = presented
            .iter()
            .chain(tools)
            .filter(|t| !super::tool_set::is_mcp_tool(t.name()))
            .map(|t| {
                own_before
                    .iter()
                    .find(|o| o.name() == t.name())
                    .cloned()
                    .unwrap_or_else(|| t.clone())
            })
            .collect();
        let next = self.tools_over(own);
        (!super::tool_set::same_declarations(tools, &next)).then_some(next)
    }

    fn tool_registered(&self, tool: Arc<dyn Tool>) {
        // A tool registered again replaces the one of its name (as the session's own tool
        // too, which a changed tool set is built over).
        for slot in self
            .own
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .filter(|t| t.name() == tool.name())
        {
            *slot = tool.clone();
        }
        let mut nested = self.nested.lock().unwrap_or_else(|e| e.into_inner());
        nested.retain(|t| t.name() != tool.name());
        if tool.exposure().is_nested_only() {
            nested.push(tool);
        }
    }

    fn tool_removed(&self, name: &str) {
        self.own
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t| t.name() != name);
        self.nested
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t| t.name() != name);
    }

    fn reselect(&self, selection: &ToolSelection) {
        *self.selection.lock().unwrap_or_else(|e| e.into_inner()) = selection.clone();
    }

    fn keeps(&self, name: &str) -> bool {
        if self.loadable().iter().any(|l| l.tool.name() == name) {
            return true;
        }
        // A tool of a server still connecting (a resumed session's loaded tools).
        self.mcp.servers().iter().any(|s| {
            s.enabled()
                && s.status().state == ConnState::Connecting
                && name.starts_with(&format!("{}__", super::config::mcp_namespace(s.name())))
        })
    }

    async fn wait_for_reach(&self, reach: &crate::tools::ToolReach) {
        // Pi's `reachesServer`: a word containing the server's namespace (as written or as
        // a script identifier) reaches it.
        let servers = self.mcp.servers();
        let waits = servers
            .iter()
            .filter(|s| s.enabled())
            .filter(|s| s.status().state == ConnState::Connecting)
            .filter(|s| {
                let namespace = super::config::mcp_namespace(s.name());
                reach.reaches(&namespace)
                    || reach.reaches(&crate::codemode::declarations::js_identifier(&namespace))
            })
            .map(|server| server.settled());
        futures::future::join_all(waits).await;
    }

    fn callable_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.loadable().into_iter().map(|l| l.tool).collect()
    }

    async fn resolve(&self, name: &str) -> Option<Arc<dyn Tool>> {
        if !self.lock().declared.iter().any(|n| n == name) {
            return None;
        }
        let find = || {
            self.loadable()
                .into_iter()
                .find(|l| l.tool.name() == name)
                .map(|l| l.tool)
        };
        if let Some(tool) = find() {
            return Some(tool);
        }
        // Declared by an earlier run: its server may still be connecting.
        wait_for_all_servers(&self.mcp).await;
        find()
    }
}

/// The `tool_search` tool of one session.
#[derive(Debug)]
pub struct ToolSearchTool {
    loadout: Arc<McpLoadout>,
}

impl ToolSearchTool {
    /// `tool_search` loading into `loadout`.
    pub fn new(loadout: Arc<McpLoadout>) -> ToolSearchTool {
        ToolSearchTool { loadout }
    }
}

#[async_trait::async_trait]
impl Tool for ToolSearchTool {
    fn declares_reach(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        TOOL_SEARCH_TOOL_NAME
    }

    /// Pi's built-in extension is `builtin:tool-search`.
    fn source_info(&self) -> Value {
        crate::config::SourceInfo::builtin_json("tool-search")
    }

    fn exposure(&self) -> crate::tools::ToolExposure {
        crate::tools::ToolExposure::ModelOnly
    }

    fn description(&self) -> &str {
        TOOL_SEARCH_DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        parameters()
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("Search for tools that are not loaded yet and load the matches")
    }

    async fn execute(
        &self,
        _call_id: &str,
        args: Value,
        _ctx: &ToolContext,
        cancel: CancellationToken,
        _on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let query = args.get("query").and_then(Value::as_str).unwrap_or("");
        if query.trim().is_empty() {
            return Err(ToolError::new("query must not be empty"));
        }
        let limit = match args.get("limit") {
            None | Some(Value::Null) => search::DEFAULT_SEARCH_LIMIT,
            Some(v) => v
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f > 0.0)
                .map(|f| f as usize)
                .ok_or_else(|| ToolError::new("limit must be a positive integer"))?,
        };
        tokio::select! {
            _ = wait_for_all_servers(&self.loadout.mcp) => {}
            _ = cancel.cancelled() => return Err(ToolError::aborted()),
        }
        let found = self.loadout.search_and_load(query, limit);
        let text = if found.is_empty() {
            "No matching tools found.".to_string()
        } else {
            let lines: Vec<String> = found
                .iter()
                .map(|t| {
                    let first = t.description().trim().split('\n').next().unwrap_or("");
                    format!("- {}: {}", t.name(), first.trim_end_matches('\r'))
                })
                .collect();
            format!(
                "Loaded {} tool{}. They are available from your next call:\n{}",
                found.len(),
                if found.len() == 1 { "" } else { "s" },
                lines.join("\n")
            )
        };
        Ok(ToolOutput {
            content: vec![ContentBlock::Text(text)],
            details: Some(json!({"loaded": found.iter().map(|t| t.name()).collect::<Vec<_>>()})),
            is_error: false,
            structured: None,
            usage: None,
        })
    }
}

/// Whether a server's configuration gives some tool `deferred` exposure (Pi activates
/// `tool_search` for those).
pub fn wants_tool_search(mcp: &McpManager) -> bool {
    mcp.servers().iter().filter(|s| s.enabled()).any(|s| {
        s.exposure() == Exposure::Deferred
            || s.entry
                .config
                .tool_exposure
                .iter()
                .any(|(_, e)| *e == Exposure::Deferred)
    })
}
