//! What tools reach of their session (`crate::tools::ToolSession`): tools that keep state
//! on the session branch, such as codemode's `store()`, read the entries of their type on the
//! current branch and append new ones, as Pi's `pi.appendEntry(customType, data)` does;
//! codemode's `models` reads the catalog.

use pi_engine::context::{EntrySource, SessionPath};
use pi_formats::entry::NewEntry;
use serde_json::Value;

use super::{lock, AgentSession};
use crate::protocol::Event;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::tools::{
    NestedCallRequest, NestedOutcome, Tool, ToolContext, ToolSession, ToolUpdateFn,
};

impl AgentSession {
    /// Appends `{type: "custom", customType, data}` at the leaf and announces it.
    pub(super) fn append_custom_entry_data(
        &self,
        custom_type: &str,
        data: Value,
    ) -> Result<(), super::AgentError> {
        let entry = NewEntry::Custom {
            custom_type: custom_type.to_string(),
            data: Some(data),
        };
        let line = {
            let mut st = lock(&self.shared.state);
            let id = super::append_locked(&mut st, &entry)?;
            st.session.find(&id).map(|idx| st.session.entry_value(idx))
        };
        if let Some(entry) = line {
            self.emit(Event::EntryAppended { entry });
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ToolSession for AgentSession {
    fn branch_custom_data(&self, custom_type: &str) -> Vec<Value> {
        let st = lock(&self.shared.state);
        let s = &st.session;
        let branch = s.branch_path();
        let path = SessionPath::of(s, &branch);
        (0..path.len())
            .filter(|&i| path.kind(i) == pi_formats::entry::kind::CUSTOM)
            .map(|i| path.value(i))
            .filter(|entry| entry.get("customType").and_then(Value::as_str) == Some(custom_type))
            .filter_map(|entry| entry.get("data").cloned())
            .collect()
    }

    fn append_custom_entry(&self, custom_type: &str, data: Value) -> Result<(), String> {
        self.append_custom_entry_data(custom_type, data)
            .map_err(|e| e.to_string())
    }

    fn catalog(&self) -> Vec<crate::llm::Model> {
        lock(&self.shared.state)
            .opts
            .registry
            .models
            .as_ref()
            .clone()
    }

    fn provider_has_credentials(&self, provider: &str) -> bool {
        self.has_credentials(provider)
    }

    async fn run_nested_call(
        &self,
        call: NestedCallRequest<'_>,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> NestedOutcome {
        AgentSession::run_nested_call(self, call, ctx, cancel, on_update).await
    }

    async fn wait_for_reach(&self, reach: &crate::tools::ToolReach) {
        if let Some(loadout) = self.tool_loadout() {
            loadout.wait_for_reach(reach).await;
        }
    }

    fn callable_tools(&self) -> Vec<Arc<dyn Tool>> {
        let active = self.tools();
        let mut callable: Vec<Arc<dyn Tool>> = Vec::new();
        let mut add = |tool: Arc<dyn Tool>| {
            if crate::codemode::is_script_callable(tool.as_ref())
                && !callable.iter().any(|t| t.name() == tool.name())
            {
                callable.push(tool);
            }
        };
        for tool in &active {
            // Codemode `only` keeps the tools it presents active in Pi (hidden declarations).
            for presented in tool.presented_tools() {
                add(presented);
            }
            add(tool.clone());
        }
        // Registered `codemode` and `deferred` tools are callable whether active or not.
        for tool in self.all_tools() {
            if tool.exposure().is_nested_only() {
                add(tool);
            }
        }
        if let Some(loadout) = self.tool_loadout() {
            for tool in loadout.callable_tools() {
                add(tool);
            }
        }
        callable
    }
}
