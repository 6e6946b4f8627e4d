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
}
