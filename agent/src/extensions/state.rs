//! What the sidecar knows of the session, kept current before every call into it.
//!
//! Extensions read the session synchronously (`ctx.sessionManager.getEntries()`,
//! `getBranch()`, `getLabel()`, `ctx.model`, `pi.getActiveTools()`), so the sidecar holds a
//! copy. Sessions are append-only: each sync sends only the entries appended since the
//! last one, as their raw lines, so the cost of a call follows what changed, not the file.
//! A different session (a switch, `/new`) or a shorter one (never appended to) resets the
//! copy.

use std::fmt::Write as _;

use serde_json::{json, Value};

use std::sync::Arc;

use crate::agent::AgentSession;
use crate::tools::Tool;

/// How far the sidecar's copy has got.
#[derive(Debug, Default)]
pub(super) struct SyncMark {
    session_id: Option<String>,
    sent: usize,
    /// The tool names last sent with their definitions.
    tools: Vec<String>,
    models_sent: bool,
    /// What the context usage last sent was computed for: (entries, leaf, model).
    usage_for: Option<(usize, Option<String>, Option<String>)>,
    /// The generation of the UI's theme list last sent (0: none sent).
    themes_sent: u64,
    /// The host's commands last sent (`pi.getCommands()` after the extensions').
    host_commands: Option<Value>,
}

/// The themes the interactive mode can show, as it last listed them (`[{name, path}]`),
/// with a generation that grows at every change. `ctx.ui.getAllThemes()` and `getTheme()`
/// are synchronous, so every sidecar of the process gets the list with its state.
static UI_THEMES: std::sync::Mutex<(u64, Option<Value>)> = std::sync::Mutex::new((0, None));

/// Sets the theme list the extensions' `ctx.ui.getAllThemes()` sees (the TUI, at start-up
/// and after a reload): `[{"name", "path"}]`, `path` null for a built-in theme.
pub fn set_ui_themes(themes: Value) {
    let mut slot = UI_THEMES.lock().unwrap_or_else(|e| e.into_inner());
    if slot.1.as_ref() != Some(&themes) {
        slot.0 += 1;
        slot.1 = Some(themes);
    }
}

/// The `set_state` parameters that bring the sidecar's copy up to date, as JSON text
/// (entry lines go in verbatim).
pub(super) fn state_update(
    agent: &AgentSession,
    mark: &mut SyncMark,
    host_commands: &Value,
) -> String {
    let mut out = String::from("{");
    agent.with_session(|s| {
        let id = s.session_id();
        let count = s.entry_count();
        let reset = id != mark.session_id || count < mark.sent;
        if reset {
            mark.session_id = id.clone();
            mark.sent = 0;
            mark.usage_for = None;
        }
        let _ = write!(out, "\"reset\":{reset},\"entries\":[");
        for (n, idx) in s.indices().skip(mark.sent).enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&String::from_utf8_lossy(s.entry_line(idx)));
        }
        mark.sent = count;
        out.push_str("],\"header\":");
        match s.header_line() {
            Some(line) => out.push_str(&String::from_utf8_lossy(line)),
            None => out.push_str("null"),
        }
        let _ = write!(
            out,
            ",\"leafId\":{},\"sessionId\":{},\"sessionName\":{}",
            json!(s.leaf_id()),
            json!(id),
            json!(s.session_name())
        );
    });
    let file = agent.session_file().map(|p| p.display().to_string());
    let model = agent.model().map(|m| crate::host::views::model_json(&m));
    let _ = write!(
        out,
        ",\"sessionFile\":{},\"model\":{},\"thinkingLevel\":{},\"isIdle\":{}",
        json!(file),
        model.unwrap_or(Value::Null),
        json!(agent.thinking_level().as_str()),
        !agent.is_streaming()
    );
    // Tools codemode presents instead of declaring them (mode `only`) stay active in Pi.
    let mut active: Vec<String> = Vec::new();
    for tool in agent.tools() {
        for name in tool
            .presented_tools()
            .iter()
            .map(|t| t.name().to_string())
            .chain(std::iter::once(tool.name().to_string()))
        {
            if !active.contains(&name) {
                active.push(name);
            }
        }
    }
    let _ = write!(out, ",\"activeTools\":{}", json!(active));
    let all = all_tools(agent);
    let names: Vec<String> = all.iter().map(|t| t.name().to_string()).collect();
    if names != mark.tools {
        let infos: Vec<Value> = all.iter().map(Listed::info).collect();
        let _ = write!(out, ",\"allTools\":{}", Value::Array(infos));
        mark.tools = names;
    }
    // `ctx.getContextUsage()` is synchronous: the sidecar keeps the latest figures. They
    // change only with the branch or the model, so they are recomputed only then.
    let usage_for = Some((
        agent.with_session(|s| s.entry_count()),
        agent.with_session(|s| s.leaf_id().map(str::to_string)),
        agent.model().map(|m| format!("{}/{}", m.provider, m.id)),
    ));
    if usage_for != mark.usage_for {
        let usage = agent.context_usage().map(|u| {
            json!({"tokens": u.tokens, "contextWindow": u.context_window, "percent": u.percent})
        });
        let _ = write!(out, ",\"contextUsage\":{}", usage.unwrap_or(Value::Null));
        mark.usage_for = usage_for;
    }
    if mark.host_commands.as_ref() != Some(host_commands) {
        let _ = write!(out, ",\"hostCommands\":{host_commands}");
        mark.host_commands = Some(host_commands.clone());
    }
    {
        let slot = UI_THEMES.lock().unwrap_or_else(|e| e.into_inner());
        if let (true, Some(themes)) = (slot.0 != mark.themes_sent, &slot.1) {
            let _ = write!(out, ",\"themes\":{themes}");
            mark.themes_sent = slot.0;
        }
    }
    if !mark.models_sent {
        let models: Vec<Value> = agent
            .registry()
            .models
            .iter()
            .map(crate::host::views::model_json)
            .collect();
        let _ = write!(out, ",\"models\":{}", Value::Array(models));
        mark.models_sent = true;
    }
    out.push('}');
    out
}

/// A tool `pi.getAllTools()` lists.
enum Listed {
    Tool(Arc<dyn Tool>),
    /// `codemode` or `tool_search` while the session has no such tool: Pi registers both
    /// always (inactive unless something activates them).
    Placeholder(&'static str, crate::tools::ToolSelection),
}

impl Listed {
    fn name(&self) -> &str {
        match self {
            Listed::Tool(tool) => tool.name(),
            Listed::Placeholder(name, _) => name,
        }
    }

    fn info(&self) -> Value {
        match self {
            Listed::Tool(t) => tool_info(t.as_ref()),
            Listed::Placeholder(name, selection) => {
                let tool: Arc<dyn Tool> = if *name == crate::codemode::CODEMODE_TOOL_NAME {
                    Arc::new(crate::codemode::CodemodeTool::new(
                        Vec::new(),
                        Vec::new(),
                        None,
                        &selection.codemode,
                    ))
                } else {
                    let (description, parameters) =
                        crate::mcp::tool_search::tool_search_declaration();
                    return json!({
                        "name": name,
                        "description": description,
                        "parameters": parameters,
                        "exposure": "model-only",
                        "reachesTools": true,
                        "sourceInfo": crate::config::SourceInfo::builtin_json("tool-search"),
                    });
                };
                Listed::Tool(tool).info()
            }
        }
    }
}

/// One tool as `pi.getAllTools()` reports it: `name`, `description`, `parameters`,
/// `promptGuidelines` (when it has any), `exposure`, then `namespace`, `annotations` and
/// `reachesTools` when set (`true` here; the sidecar puts the function in its place).
fn tool_info(t: &dyn Tool) -> Value {
    let mut info = serde_json::Map::new();
    info.insert("name".into(), json!(t.name()));
    info.insert("description".into(), json!(t.description()));
    info.insert("parameters".into(), t.parameters().clone());
    if !t.prompt_guidelines().is_empty() {
        info.insert("promptGuidelines".into(), json!(t.prompt_guidelines()));
    }
    info.insert("exposure".into(), json!(t.exposure().as_str()));
    if let Some(namespace) = t.namespace() {
        info.insert("namespace".into(), namespace.to_json());
    }
    if let Some(annotations) = t.annotations() {
        info.insert("annotations".into(), Value::Object(annotations.clone()));
    }
    if t.declares_reach() {
        info.insert("reachesTools".into(), Value::Bool(true));
    }
    info.insert("sourceInfo".into(), t.source_info());
    Value::Object(info)
}

/// `pi.getAllTools()`: the registered tools, then `codemode` and `tool_search` as Pi
/// registers them after the others (placeholders for the ones the session lacks, as far as
/// the tool options keep them).
fn all_tools(agent: &AgentSession) -> Vec<Listed> {
    let mut all = agent.all_tools();
    let Some(selection) = agent.tool_selection() else {
        return all.into_iter().map(Listed::Tool).collect();
    };
    let mut last = Vec::new();
    for name in [
        crate::codemode::CODEMODE_TOOL_NAME,
        crate::mcp::tool_search::TOOL_SEARCH_TOOL_NAME,
    ] {
        match all.iter().position(|t| t.name() == name) {
            Some(index) => last.push(Listed::Tool(all.remove(index))),
            None if crate::tools::keeps_tool(&selection, name) => {
                last.push(Listed::Placeholder(name, selection.clone()));
            }
            None => {}
        }
    }
    all.into_iter().map(Listed::Tool).chain(last).collect()
}
