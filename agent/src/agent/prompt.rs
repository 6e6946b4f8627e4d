//! The system message the agent writes before the first user message of a branch.
//!
//! Interim default until `engine::config` (settings, AGENTS.md, SYSTEM.md, skills) lands:
//! the same section names Pi 1.6.0 uses (`preamble`, `tools`, `rules`, `cwd`), built from the
//! active tools, so sessions look like Pi's and the prompt stays small. The `docs` section is
//! left out: it points at Pi's own install directory, which we do not have.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::tools::Tool;

/// Pi's default preamble.
pub const DEFAULT_PREAMBLE: &str = "You are a coding assistant running inside pi, a coding agent harness. Help users inspect files, run commands, and modify code.";

/// What shapes the system prompt besides the tools.
#[derive(Debug, Clone, Default)]
pub struct PromptOptions {
    /// `--system-prompt`: replaces the preamble.
    pub system_prompt: Option<String>,
    /// `--append-system-prompt`: an extra `append` section at the end.
    pub append_system_prompt: Option<String>,
    /// A complete system message built by `engine::config::build_system_message` (context
    /// files, skills, SYSTEM.md…). When set it is used as is (with a fresh timestamp) and the
    /// two fields above are ignored: config already applied them.
    pub system_message: Option<Value>,
    /// Set by [`super::AgentSession::set_system_message`] (`/reload`): from then on a branch
    /// that already has a system message gets a patch of the sections that differ. Before
    /// any reload the first system message of a branch stands, so resuming a session that
    /// another build wrote does not rewrite its prompt.
    pub reloaded: bool,
}

/// The sections of the system prompt, in Pi's order.
pub fn sections(tools: &[Arc<dyn Tool>], cwd: &str, options: &PromptOptions) -> Map<String, Value> {
    let mut s = Map::new();
    let preamble = options
        .system_prompt
        .clone()
        .unwrap_or_else(|| DEFAULT_PREAMBLE.to_string());
    s.insert("preamble".into(), preamble.into());
    if !tools.is_empty() {
        let mut text = String::from("<tools>\n");
        for t in tools {
            if let Some(snippet) = t.prompt_snippet() {
                text.push_str(&format!("- {}: {}\n", t.name(), snippet));
            }
        }
        text.push_str("\nAdditional tools may be available.\n</tools>");
        s.insert("tools".into(), text.into());
    }
    let has = |n: &str| tools.iter().any(|t| t.name() == n);
    let mut rules: Vec<String> = Vec::new();
    // Pi's builder steers file exploration to bash when no dedicated search tool is active.
    if has("bash") && !has("grep") && !has("find") && !has("ls") {
        rules.push("Use bash for file operations like ls, rg, find".into());
    }
    for t in tools {
        for g in t.prompt_guidelines() {
            if !rules.iter().any(|r| r == g) {
                rules.push((*g).to_string());
            }
        }
    }
    rules.push("Be concise in your responses".into());
    rules.push("Show file paths clearly when working with files".into());
    let rules_text = format!(
        "<rules>\n{}\n</rules>",
        rules
            .iter()
            .map(|r| format!("- {r}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    s.insert("rules".into(), rules_text.into());
    if let Some(extra) = options
        .append_system_prompt
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        s.insert("append".into(), extra.into());
    }
    s.insert("cwd".into(), format!("<cwd>\n{cwd}\n</cwd>").into());
    s
}

/// A tool as declared in `toolsAdded` (Pi adds the constrained-sampling preference).
pub fn tool_declaration(tool: &dyn Tool) -> Value {
    json!({
        "name": tool.name(),
        "description": tool.description(),
        "parameters": tool.parameters(),
        "constrainedSampling": {"type": "json_schema", "strict": "prefer"},
    })
}

/// The `system` message Pi 1.6 stores before the first user message of a branch.
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
    let mut m = Map::new();
    m.insert("role".into(), "system".into());
    m.insert("content".into(), "".into());
    m.insert(
        "sections".into(),
        Value::Object(sections(tools, cwd, options)),
    );
    m.insert("timestamp".into(), timestamp.into());
    if !tools.is_empty() {
        m.insert(
            "toolsAdded".into(),
            Value::Array(tools.iter().map(|t| tool_declaration(t.as_ref())).collect()),
        );
    }
    Value::Object(m)
}

impl super::AgentSession {
    /// The active tools (what the system message declares).
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        super::lock(&self.shared.state).opts.tools.clone()
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

/// A system message patching the sections of `current` (the prompt the model has, replayed
/// from the transcript) into those of `full`; `None` when they are the same.
pub fn sections_patch(current: &Value, full: &Value) -> Option<Value> {
    let empty = Map::new();
    let sections = |v: &Value| v.get("sections").and_then(Value::as_object).cloned();
    let previous = sections(current).unwrap_or_else(|| empty.clone());
    let wanted = sections(full).unwrap_or(empty);
    let patch = crate::config::diff_system_sections(&previous, &wanted)?;
    let mut m = Map::new();
    m.insert("role".into(), "system".into());
    m.insert("content".into(), "".into());
    m.insert("sections".into(), Value::Object(patch));
    m.insert(
        "timestamp".into(),
        full.get("timestamp").cloned().unwrap_or(Value::Null),
    );
    Some(Value::Object(m))
}

#[cfg(test)]
mod patch_tests {
    use super::*;

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
}
