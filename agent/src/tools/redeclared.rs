//! A tool declared to the model differently from how it was registered: another
//! description (a `prepareLoadout` hook's, or codemode's note on how scripts call it), or a
//! hidden declaration. Everything else, running included, is the registered tool's.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{
    LoadoutChanges, Tool, ToolContext, ToolError, ToolExposure, ToolNamespace, ToolOutput,
    ToolUpdateFn,
};

#[derive(Debug)]
pub struct Redeclared {
    inner: Arc<dyn Tool>,
    /// The declared description; `None` keeps the tool's.
    description: Option<String>,
    /// Whether the declaration is hidden; `None` asks the tool.
    hidden: Option<bool>,
}

impl Redeclared {
    /// `inner` declared with `description` (or its own) and hidden as `hidden` says (or as
    /// it says).
    pub fn wrap(
        inner: Arc<dyn Tool>,
        description: Option<String>,
        hidden: Option<bool>,
    ) -> Arc<dyn Tool> {
        Arc::new(Redeclared {
            inner,
            description,
            hidden,
        })
    }
}

#[async_trait::async_trait]
impl Tool for Redeclared {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn label(&self) -> &str {
        self.inner.label()
    }
    fn description(&self) -> &str {
        self.description
            .as_deref()
            .unwrap_or_else(|| self.inner.description())
    }
    fn parameters(&self) -> &Value {
        self.inner.parameters()
    }
    fn prompt_snippet(&self) -> Option<&str> {
        self.inner.prompt_snippet()
    }
    fn prompt_guidelines(&self) -> &[&str] {
        self.inner.prompt_guidelines()
    }
    fn prefers_constrained_sampling(&self) -> bool {
        self.inner.prefers_constrained_sampling()
    }
    fn presented_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.inner.presented_tools()
    }
    fn constrained_sampling(&self) -> Option<Value> {
        self.inner.constrained_sampling()
    }
    fn output_schema(&self) -> Option<&Value> {
        self.inner.output_schema()
    }
    fn prepare_arguments(&self, args: Value) -> Value {
        self.inner.prepare_arguments(args)
    }
    fn exposure(&self) -> ToolExposure {
        self.inner.exposure()
    }
    fn namespace(&self) -> Option<&ToolNamespace> {
        self.inner.namespace()
    }
    fn annotations(&self) -> Option<&serde_json::Map<String, Value>> {
        self.inner.annotations()
    }
    fn declares_reach(&self) -> bool {
        self.inner.declares_reach()
    }
    fn source_info(&self) -> Value {
        self.inner.source_info()
    }
    fn prepares_loadout(&self) -> bool {
        self.inner.prepares_loadout()
    }
    async fn prepare_loadout(&self, loadout: &Value) -> Option<LoadoutChanges> {
        self.inner.prepare_loadout(loadout).await
    }
    fn hidden_declaration(&self) -> bool {
        self.hidden
            .unwrap_or_else(|| self.inner.hidden_declaration())
    }
    fn sequential(&self) -> bool {
        self.inner.sequential()
    }
    async fn execute(
        &self,
        call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        self.inner
            .execute(call_id, args, ctx, cancel, on_update)
            .await
    }
}
