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

use super::nested_call::NestedCall;
use crate::tools::{Tool, ToolContext, ToolOutput, ToolSession};

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
        parent_call_id: &str,
        call_id: &str,
        tool: Arc<dyn Tool>,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
    ) -> ToolOutput {
        let call = NestedCall {
            parent_call_id,
            call_id,
            tool,
            args,
        };
        AgentSession::run_nested_call(self, call, ctx, cancel, &crate::tools::ignore_updates).await
    }
}
