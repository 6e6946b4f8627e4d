//! The system message the agent writes before the first user message of a branch, and the
//! patch it writes after `/reload` changed the prompt. The sections themselves are built
//! in one place, [`crate::config::build_system_message`].

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{build_system_message, Resources, SystemPromptInput};
use crate::tools::Tool;

/// What shapes the system prompt besides the tools.
#[derive(Debug, Clone, Default)]
pub struct PromptOptions {
    /// `--system-prompt`: replaces the preamble.
    pub system_prompt: Option<String>,
    /// `--append-system-prompt`: an extra `append` section at the end.
    pub append_system_prompt: Option<String>,
    /// A complete system message built by [`crate::config::build_system_message`] (context
    /// files, skills, SYSTEM.md…). When set it is used as is (with a fresh timestamp) and the
    /// two fields above are ignored: config already applied them.
    pub system_message: Option<Value>,
    /// Set by [`super::AgentSession::set_system_message`] (`/reload`): from then on a branch
    /// that already has a system message gets a patch of the sections that differ. Before
    /// any reload the first system message of a branch stands, so resuming a session that
    /// another build wrote does not rewrite its prompt.
    pub reloaded: bool,
    /// Rebuilds `system_message` for another tool set (`pi.setActiveTools`, a tool an
    /// extension registers later). The front end that built the message supplies it.
    pub builder: Option<PromptBuilder>,
}

/// Builds the complete system message for a tool set.
pub type BuildPrompt = dyn Fn(&[Arc<dyn Tool>]) -> Value + Send + Sync;

/// A shared [`BuildPrompt`].
#[derive(Clone)]
pub struct PromptBuilder(pub Arc<BuildPrompt>);

impl std::fmt::Debug for PromptBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PromptBuilder")
    }
}

/// The `system` message Pi 1.6 stores before the first user message of a branch: the
/// prebuilt one when the front end made it from the resources, else the same builder over
/// the tools and the two prompt flags alone.
pub fn system_message(
    tools: &[Arc<dyn Tool>],
    cwd: &str,
    options: &PromptOptions,
    timestamp: i64,
) -> Value {
    if let Some(Value::Object(prebuilt)) = &options.system_message {
        let mut m = prebuilt.clone();
        m.insert("timestamp".into(), timestamp.into());
        return Value::Object(m);
    }
    let resources = Resources {
        system_prompt: options.system_prompt.clone(),
        append_system_prompt: options.append_system_prompt.clone().into_iter().collect(),
        ..Resources::default()
    };
    build_system_message(&SystemPromptInput {
        tools,
        cwd: Path::new(cwd),
        resources: &resources,
        docs: None,
        timestamp_ms: timestamp,
    })
}

impl super::AgentSession {
    /// The active tools (what the system message declares).
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        super::lock(&self.shared.state).opts.tools.clone()
    }

    /// Every configured tool, active or not (`pi.getAllTools()`).
    pub fn all_tools(&self) -> Vec<Arc<dyn Tool>> {
        super::lock(&self.shared.state).registered.clone()
    }

    /// Adds a tool registered after start-up, or replaces the one with its name; it is
    /// active from the next prompt on, as Pi activates newly registered extension tools.
    pub fn register_tool(&self, tool: Arc<dyn Tool>) {
        let mut st = super::lock(&self.shared.state);
        let name = tool.name().to_string();
        match st.registered.iter_mut().find(|t| t.name() == name) {
            Some(slot) => *slot = tool.clone(),
            None => st.registered.push(tool.clone()),
        }
        match st.opts.tools.iter_mut().find(|t| t.name() == name) {
            Some(slot) => *slot = tool,
            None => st.opts.tools.push(tool),
        }
        rebuild_prompt(&mut st);
    }

    /// Registers `tool` (or replaces the one with its name) without activating it: a tool
    /// whose exposure is not declared or that asks to start inactive. An active tool of that
    /// name is replaced, or deactivated when the new one is `hidden` (Pi's way to withdraw a
    /// tool).
    pub fn register_tool_inactive(&self, tool: Arc<dyn Tool>) {
        let mut st = super::lock(&self.shared.state);
        let name = tool.name().to_string();
        match st.registered.iter_mut().find(|t| t.name() == name) {
            Some(slot) => *slot = tool.clone(),
            None => st.registered.push(tool.clone()),
        }
        if let Some(index) = st.opts.tools.iter().position(|t| t.name() == name) {
            if tool.exposure() == crate::tools::ToolExposure::Hidden {
                st.opts.tools.remove(index);
            } else {
                st.opts.tools[index] = tool;
            }
            rebuild_prompt(&mut st);
        }
    }

    /// The tool options (`--tools`, `--exclude-tools`, `--no-tools`, `defaultTools`): tools
    /// registered after start-up ([`Self::register_extension_tool`]) are filtered and
    /// activated by them as the start-up ones were.
    pub fn set_tool_selection(&self, selection: crate::tools::ToolSelection) {
        super::lock(&self.shared.state).selection = Some(selection);
    }

    /// The tool options set with [`Self::set_tool_selection`].
    pub fn tool_selection(&self) -> Option<crate::tools::ToolSelection> {
        super::lock(&self.shared.state).selection.clone()
    }

    /// A tool an extension registered after start-up (from a command, an event handler), or
    /// registered again: as at start-up, the tool options decide whether it is registered at
    /// all and whether it is active (see `crate::tools::select_session_tools`); without
    /// options, a `direct` or `model-only` tool not registered with `defaultActive: false` is
    /// active. A registered `codemode` or `deferred` tool becomes callable from codemode
    /// scripts and loadable by `tool_search`. Returns whether it was registered.
    pub fn register_extension_tool(&self, tool: Arc<dyn Tool>, default_active: bool) -> bool {
        let selection = super::lock(&self.shared.state).selection.clone();
        let activate = match &selection {
            None => tool.exposure().is_declarable() && default_active,
            Some(selection) => {
                let registered = crate::tools::RegisteredTool {
                    tool: tool.clone(),
                    default_active,
                };
                let Ok(picked) = crate::tools::select_session_tools(selection, &[registered])
                else {
                    return false;
                };
                let ours = |tools: &[Arc<dyn Tool>]| tools.iter().any(|t| t.name() == tool.name());
                if !ours(&picked.registered) {
                    return false;
                }
                ours(&picked.active)
            }
        };
        if activate {
            self.register_tool(tool.clone());
        } else {
            self.register_tool_inactive(tool.clone());
        }
        if let Some(loadout) = self.tool_loadout() {
            loadout.tool_registered(tool);
        }
        true
    }

    /// A reload replaced the extensions, as Pi rebuilds its tool registry: the tools named
    /// `old` (the previous extensions') leave, except a built-in one of them replaced,
    /// which comes back in its place; then `new` register through the tool options
    /// ([`Self::register_extension_tool`]), a tool active before the reload staying active.
    pub fn replace_extension_tools(&self, old: &[String], new: &[crate::tools::RegisteredTool]) {
        let was_active: Vec<String> = self.tools().iter().map(|t| t.name().to_string()).collect();
        let returning = |name: &str| new.iter().any(|r| r.tool.name() == name);
        let builtins = crate::tools::all_builtin_tools();
        let mut removed = Vec::new();
        {
            let mut guard = super::lock(&self.shared.state);
            let st = &mut *guard;
            for name in old.iter().map(String::as_str).filter(|n| !returning(n)) {
                match builtins.iter().find(|b| b.name() == name) {
                    Some(builtin) => {
                        for slot in st.registered.iter_mut().chain(st.opts.tools.iter_mut()) {
                            if slot.name() == name {
                                *slot = builtin.clone();
                            }
                        }
                    }
                    None => {
                        st.registered.retain(|t| t.name() != name);
                        st.opts.tools.retain(|t| t.name() != name);
                        removed.push(name.to_string());
                    }
                }
            }
            rebuild_prompt(st);
        }
        if let Some(loadout) = self.tool_loadout() {
            for name in &removed {
                loadout.tool_removed(name);
            }
        }
        for registered in new {
            let active_before = was_active.iter().any(|n| n == registered.tool.name());
            self.register_extension_tool(
                registered.tool.clone(),
                registered.default_active || active_before,
            );
        }
    }

    /// Registers the tools of `registry` that are not registered yet without activating
    /// them (tools the options or their exposure keep inactive at start-up), in its order:
    /// `pi.getAllTools()` lists them as Pi's registry does, `pi.setActiveTools()` and
    /// `tool_search` may activate them. Registered tools it lacks (`codemode`, MCP tools)
    /// follow.
    pub fn register_tools_in_order(&self, registry: &[Arc<dyn Tool>]) {
        let mut st = super::lock(&self.shared.state);
        let mut ordered: Vec<Arc<dyn Tool>> = registry
            .iter()
            .map(|tool| {
                st.registered
                    .iter()
                    .find(|t| t.name() == tool.name())
                    .cloned()
                    .unwrap_or_else(|| tool.clone())
            })
            .collect();
        for tool in &st.registered {
            if !ordered.iter().any(|t| t.name() == tool.name()) {
                ordered.push(tool.clone());
            }
        }
        st.registered = ordered;
    }

    /// Makes exactly the named tools active (unknown names are ignored, as Pi ignores
    /// them), in the order they were configured. Returns the active names.
    pub fn set_active_tools(&self, names: &[String]) -> Vec<String> {
        let mut st = super::lock(&self.shared.state);
        let active: Vec<Arc<dyn Tool>> = st
            .registered
            .iter()
            .filter(|t| names.iter().any(|n| n == t.name()))
            .filter(|t| t.exposure() != crate::tools::ToolExposure::Hidden)
            .cloned()
            .collect();
        let changed = active.len() != st.opts.tools.len()
            || active
                .iter()
                .zip(&st.opts.tools)
                .any(|(a, b)| a.name() != b.name());
        st.opts.tools = active;
        if changed {
            rebuild_prompt(&mut st);
        }
        st.opts.tools.iter().map(|t| t.name().to_string()).collect()
    }

    /// `/reload` read the tool options again (`before` → `after`): as in Pi, built-in tools
    /// newly selected (added to `defaultTools`) become active, tools removed from it or
    /// turned off stay as they are, and the loadout (MCP tools, `codemode`, `tool_search`)
    /// follows the new options from the next request on.
    pub fn reselect_tools(
        &self,
        before: &crate::tools::ToolSelection,
        after: &crate::tools::ToolSelection,
    ) {
        use crate::tools::select_builtin_tools;
        let had: Vec<String> = select_builtin_tools(before)
            .unwrap_or_default()
            .iter()
            .map(|t| t.name().to_string())
            .collect();
        for tool in select_builtin_tools(after).unwrap_or_default() {
            let active = self.tools().iter().any(|t| t.name() == tool.name());
            if !had.iter().any(|n| n == tool.name()) && !active {
                self.register_tool(tool);
            }
        }
        if let Some(loadout) = self.tool_loadout() {
            loadout.reselect(after);
        }
        let mut st = super::lock(&self.shared.state);
        if st.selection.is_some() {
            st.selection = Some(after.clone());
        }
    }

    /// A new way to build the system message (its resources changed: a reload, skills an
    /// extension contributed), used now and whenever the tool set changes. The session
    /// writes the new message (or a patch of the sections that changed) before the next
    /// user message, as after [`Self::set_system_message`].
    pub fn set_prompt_builder(&self, builder: PromptBuilder) {
        let mut st = super::lock(&self.shared.state);
        st.opts.prompt.builder = Some(builder);
        rebuild_prompt(&mut st);
    }

    /// Replaces the prebuilt system message, for Pi's `/reload` after context files, skills
    /// or prompt templates changed on disk. The session writes it before the next user
    /// message of a branch, as it does for the first one.
    pub fn set_system_message(&self, message: Value) {
        let mut st = super::lock(&self.shared.state);
        st.opts.prompt.system_message = Some(message);
        st.opts.prompt.reloaded = true;
    }
}

/// After the tool set changed: a new prebuilt system message, diffed against the branch's
/// prompt before the next user message (as after `/reload`).
pub(super) fn rebuild_prompt(st: &mut super::State) {
    if let Some(builder) = st.opts.prompt.builder.clone() {
        let tools = super::prepare_loadout::declared_tools(st);
        let rebuilt = (builder.0)(&tools);
        // The same prompt again (a new session in the same directory with nothing changed
        // on disk) gives the session nothing to patch.
        if st.opts.prompt.system_message.as_ref() == Some(&rebuilt) {
            return;
        }
        st.opts.prompt.system_message = Some(rebuilt);
    }
    st.opts.prompt.reloaded = true;
}

/// A system message patching `current` (the prompt the model has, replayed from the
/// transcript) into `full`: the sections that differ, the tools that are gone
/// (`toolsRemoved`, by name) and the tools that are new or changed (`toolsAdded`), in Pi's
/// key order; `None` when nothing differs.
pub fn sections_patch(current: &Value, full: &Value) -> Option<Value> {
    let empty = Map::new();
    let sections = |v: &Value| v.get("sections").and_then(Value::as_object).cloned();
    let previous = sections(current).unwrap_or_else(|| empty.clone());
    let wanted = sections(full).unwrap_or(empty);
    let patch = crate::config::diff_system_sections(&previous, &wanted);
    let tools = |v: &Value| {
        v.get("toolsAdded")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let name_of = |t: &Value| t.get("name").cloned().unwrap_or(Value::Null);
    let (had, want) = (tools(current), tools(full));
    let removed: Vec<Value> = had
        .iter()
        .filter(|h| !want.iter().any(|w| name_of(w) == name_of(h)))
        .map(|h| serde_json::json!({ "name": name_of(h) }))
        .collect();
    let added: Vec<Value> = want.into_iter().filter(|w| !had.contains(w)).collect();
    if patch.is_none() && removed.is_empty() && added.is_empty() {
        return None;
    }
    let mut m = Map::new();
    m.insert("role".into(), "system".into());
    m.insert("content".into(), "".into());
    if let Some(patch) = patch {
        m.insert("sections".into(), Value::Object(patch));
    }
    if !removed.is_empty() {
        m.insert("toolsRemoved".into(), Value::Array(removed));
    }
    if !added.is_empty() {
        m.insert("toolsAdded".into(), Value::Array(added));
    }
    m.insert(
        "timestamp".into(),
        full.get("timestamp").cloned().unwrap_or(Value::Null),
    );
    Some(Value::Object(m))
}

#[cfg(test)]
mod patch_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sections_patch_carries_only_what_changed() {
        let current = json!({"role": "system", "content": "",
            "sections": {"preamble": "p", "context": "old", "gone": "x"}});
        let full = json!({"role": "system", "content": "", "timestamp": 7,
            "sections": {"preamble": "p", "context": "new"}});
        let patch = sections_patch(&current, &full);
        assert_eq!(
            patch,
            Some(json!({"role": "system", "content": "", "timestamp": 7,
                "sections": {"context": "new", "gone": null}}))
        );
        assert_eq!(sections_patch(&full, &full), None);
    }

    #[test]
    fn a_changed_tool_set_is_patched_by_name() {
        let tool = |name: &str, d: &str| json!({"name": name, "description": d, "parameters": {}});
        let current = json!({"role": "system", "content": "", "sections": {"tools": "a b"},
            "toolsAdded": [tool("a", "A"), tool("b", "B")]});
        let full = json!({"role": "system", "content": "", "timestamp": 3,
            "sections": {"tools": "a b"}, "toolsAdded": [tool("a", "A2"), tool("c", "C")]});
        assert_eq!(
            sections_patch(&current, &full),
            Some(
                json!({"role": "system", "content": "", "toolsRemoved": [{"name": "b"}],
                "toolsAdded": [tool("a", "A2"), tool("c", "C")], "timestamp": 3})
            )
        );
        let keys: Vec<String> = sections_patch(&current, &full)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            keys,
            ["role", "content", "toolsRemoved", "toolsAdded", "timestamp"]
        );
    }
}
