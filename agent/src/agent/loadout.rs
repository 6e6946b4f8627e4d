//! Tools that join the declared set during a session (Pi's active-tool changes, as
//! `tool_search` makes them), as a trait so the agent loop knows nothing about MCP.
//!
//! Pi declares tool changes before each request: the difference between what the
//! transcript's system messages declare and what the runtime can execute becomes a system
//! message with `toolsAdded`. Here a loadout hands the loop the tools it loaded since the
//! last request; the loop writes that system message, so the transcript records the loading
//! and a resumed session (ours or Pi's) declares the tools again on that branch. Calls to a
//! declared tool that the session's fixed tool set lacks are resolved through the loadout.

use std::sync::Arc;

use crate::tools::Tool;

/// Tools loaded during a session; set with [`super::AgentSession::set_tool_loadout`].
#[async_trait::async_trait]
pub trait ToolLoadout: Send + Sync {
    /// Before each request: the names the branch's transcript declares now. Returns the tools
    /// loaded since the last call that the branch does not declare yet; the loop declares them
    /// in a system message before the request.
    fn before_request(&self, declared: &[String]) -> Vec<Arc<dyn Tool>>;

    /// Before each request (and before a prompt's system message): the session's tools as
    /// they should be now, when they declare something else than `tools` (MCP servers that
    /// connected late or changed their tool list, `/mcp` changes). The loop then makes them
    /// the session's tools and declares the difference in a system message.
    fn current_tools(&self, _tools: &[Arc<dyn Tool>]) -> Option<Vec<Arc<dyn Tool>>> {
        None
    }

    /// Whether a tool the branch declares that the session's tools lack stays declared when
    /// the tool set changes (a tool `tool_search` loaded that can still be called).
    fn keeps(&self, _name: &str) -> bool {
        false
    }

    /// Tools other tools may call although the session does not declare them (Pi's
    /// `codemode` and `deferred` exposures), for `ctx.executeTool()`.
    fn callable_tools(&self) -> Vec<Arc<dyn Tool>> {
        Vec::new()
    }

    /// A tool the branch declares (`name` was in the last `declared` list) that the session's
    /// own tools do not include, such as an MCP tool loaded by `tool_search` in an earlier run.
    async fn resolve(&self, name: &str) -> Option<Arc<dyn Tool>>;

    /// An extension registered `tool` after start-up (or again), and the tool options kept
    /// it: a `codemode` or `deferred` one joins the tools scripts call and `tool_search`
    /// loads.
    fn tool_registered(&self, _tool: Arc<dyn Tool>) {}

    /// A reload removed the extension tool `name`: it leaves the tools scripts call and
    /// `tool_search` loads.
    fn tool_removed(&self, _name: &str) {}

    /// `/reload` read the tool options again (`defaultTools`, `codemode.*`): the tool sets
    /// of later requests follow `selection`.
    fn reselect(&self, _selection: &crate::tools::ToolSelection) {}

    /// Waits for the tools a call may reach to be loadable (MCP servers still connecting
    /// whose namespace the reach names).
    async fn wait_for_reach(&self, _reach: &crate::tools::ToolReach) {}
}
