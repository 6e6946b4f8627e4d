//! Pi's `prepareLoadout` hooks: an active tool that orchestrates other tools adjusts what the
//! model is declared whenever the active tools change. Each hook gets the declared tools, the
//! callable tools and every registered tool (exposure, namespace, prompt guidelines); what
//! they return (replacement descriptions, hidden declarations) shapes the declarations the
//! system messages carry and the system prompt's tool list and rules. Hidden tools stay
//! active and callable; requests leave their declarations out ([`hide_declarations`]).

use std::sync::Arc;

use serde_json::{json, Value};

use super::lock;
use crate::tools::{LoadoutChanges, Redeclared, Tool, ToolExposure};
use pi_formats::message::AgentMessage;

/// The active tools as the system message declares them: with the descriptions the hooks
/// gave and their hidden declarations marked.
pub(super) fn declared_tools(st: &super::State) -> Vec<Arc<dyn Tool>> {
    let changes = &st.loadout_changes;
    if changes.is_empty() {
        return st.opts.tools.clone();
    }
    st.opts
        .tools
        .iter()
        .map(|tool| {
            let description = changes.description(tool.name()).map(str::to_string);
            let hidden = changes.is_hidden(tool.name());
            if description.is_none() && !hidden {
                return tool.clone();
            }
            Redeclared::wrap(tool.clone(), description, Some(hidden))
        })
        .collect()
}

/// A tool's declaration as a hook sees it (`{name, label, description, parameters}`).
fn declaration(tool: &dyn Tool) -> Value {
    json!({
        "name": tool.name(),
        "label": tool.label(),
        "description": tool.description(),
        "parameters": tool.parameters(),
    })
}

/// Leaves the hidden tools out of the declarations of every system message of a request's
/// context (the whole transcript is filtered with the current set, as Pi does).
pub(super) fn hide_declarations(messages: &mut [AgentMessage], hidden: &[String]) {
    if hidden.is_empty() {
        return;
    }
    let keep = |t: &pi_formats::message::Tool| !hidden.contains(&t.name);
    for message in messages {
        if let AgentMessage::System(system) = message {
            if let Some(added) = &mut system.tools_added {
                added.retain(keep);
                if added.is_empty() {
                    system.tools_added = None;
                }
            }
            if let Some(removed) = &mut system.tools_removed {
                removed.retain(|t| !hidden.contains(&t.name));
                if removed.is_empty() {
                    system.tools_removed = None;
                }
            }
        }
    }
}

impl super::AgentSession {
    /// Runs the `prepareLoadout` hooks of the active tools when the active or registered tools
    /// changed since the last time, and rebuilds the prompt when what they return changed.
    /// Whether it changed.
    pub(super) async fn prepare_loadout(&self) -> bool {
        let (active, registered) = {
            let st = lock(&self.shared.state);
            (st.opts.tools.clone(), st.registered.clone())
        };
        let key: Vec<String> = active
            .iter()
            .map(|t| format!("+{}", t.name()))
            .chain(
                registered
                    .iter()
                    .map(|t| format!("{}:{}", t.name(), t.exposure().as_str())),
            )
            .collect();
        if lock(&self.shared.state).loadout_key.as_ref() == Some(&key) {
            return false;
        }
        let hooks: Vec<Arc<dyn Tool>> = active
            .iter()
            .filter(|t| t.prepares_loadout())
            .cloned()
            .collect();
        let mut changes = LoadoutChanges::default();
        if !hooks.is_empty() {
            let is_active = |name: &str| active.iter().any(|t| t.name() == name);
            // Pi's callable tools: the active `direct` ones and every `codemode` or
            // `deferred` one, in registration order.
            let callable: Vec<Value> = registered
                .iter()
                .filter(|t| match t.exposure() {
                    ToolExposure::Codemode | ToolExposure::Deferred => true,
                    ToolExposure::Direct => is_active(t.name()),
                    _ => false,
                })
                .map(|t| declaration(t.as_ref()))
                .collect();
            let registered_info: Vec<Value> = registered
                .iter()
                .map(|t| {
                    let mut info = declaration(t.as_ref());
                    info["exposure"] = json!(t.exposure().as_str());
                    info["promptGuidelines"] = json!(t.prompt_guidelines());
                    if let Some(namespace) = t.namespace() {
                        info["namespace"] = namespace.to_json();
                    }
                    info
                })
                .collect();
            let loadout = json!({
                "declared": active.iter().map(|t| declaration(t.as_ref())).collect::<Vec<_>>(),
                "callable": callable,
                "registered": registered_info,
            });
            for hook in hooks {
                if let Some(found) = hook.prepare_loadout(&loadout).await {
                    changes.merge(found);
                }
            }
        }
        let mut st = lock(&self.shared.state);
        st.loadout_key = Some(key);
        if st.loadout_changes == changes {
            return false;
        }
        st.loadout_changes = changes;
        super::prompt::rebuild_prompt(&mut st);
        true
    }

    /// The declarations `prepareLoadout` hooks hide from requests.
    pub(super) fn hidden_declarations(&self) -> Vec<String> {
        lock(&self.shared.state).loadout_changes.hidden.clone()
    }
}
