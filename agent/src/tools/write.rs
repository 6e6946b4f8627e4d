//! The `write` tool: create or overwrite a file, creating parent directories.

use std::sync::OnceLock;

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::fs_util::node_path_error;
use super::mutation_queue::lock_file;
use super::paths::resolve_to_cwd;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::ToolUpdateFn;

/// Pi's `write` tool.
#[derive(Debug, Default)]
pub struct WriteTool;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "required": ["path", "content"],
            "properties": {
                "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
                "content": {"type": "string", "description": "Content to write to the file"}
            }
        })
    })
}

fn string_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

#[async_trait::async_trait]
impl Tool for WriteTool {
    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories."
    }

    fn parameters(&self) -> &Value {
        schema()
    }

    fn prefers_constrained_sampling(&self) -> bool {
        true
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("Create or overwrite files")
    }

    fn prompt_guidelines(&self) -> &[&str] {
        &["Use write only for new files or complete rewrites."]
    }

    async fn execute(
        &self,
        _call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        _on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let path = string_arg(&args, "path");
        let content = string_arg(&args, "content");
        let absolute = resolve_to_cwd(path, &ctx.cwd);
        let _guard = lock_file(&absolute).await;
        // Abort is checked between steps, never mid-write, so the queue is not released while a
        // write may still land (the reason Pi gives for the same structure).
        let check = || {
            if cancel.is_cancelled() {
                Err(ToolError::aborted())
            } else {
                Ok(())
            }
        };
        check()?;
        if let Some(dir) = absolute.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| ToolError::new(node_path_error(&e, "mkdir", dir)))?;
        }
        check()?;
        tokio::fs::write(&absolute, content.as_bytes())
            .await
            .map_err(|e| ToolError::new(node_path_error(&e, "open", &absolute)))?;
        check()?;
        // Pi 1.6.0 reports no byte count (older versions did).
        Ok(ToolOutput::text(format!("Successfully wrote to {path}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ignore_updates;

    #[tokio::test]
    async fn writes_file_and_creates_parents() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        let args = json!({"path": "a/b/c.txt", "content": "héllo\n"});
        let out = WriteTool
            .execute("1", args, &ctx, CancellationToken::new(), &ignore_updates)
            .await
            .unwrap();
        assert_eq!(out.first_text(), "Successfully wrote to a/b/c.txt");
        assert_eq!(out.details, None);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "héllo\n"
        );
        // Overwrites.
        let args = json!({"path": "a/b/c.txt", "content": "x"});
        WriteTool
            .execute("2", args, &ctx, CancellationToken::new(), &ignore_updates)
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "x"
        );
    }

    #[tokio::test]
    async fn parent_that_is_a_file_fails_with_node_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        let ctx = ToolContext::new(dir.path());
        let args = json!({"path": "f/g.txt", "content": "x"});
        let err = WriteTool
            .execute("1", args, &ctx, CancellationToken::new(), &ignore_updates)
            .await
            .unwrap_err();
        assert!(
            err.message.starts_with("EEXIST: ") || err.message.starts_with("ENOTDIR: "),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn cancelled_write_does_not_touch_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        let cancel = CancellationToken::new();
        cancel.cancel();
        let args = json!({"path": "x.txt", "content": "x"});
        let err = WriteTool
            .execute("1", args, &ctx, cancel, &ignore_updates)
            .await
            .unwrap_err();
        assert_eq!(err.message, "Operation aborted");
        assert!(!dir.path().join("x.txt").exists());
    }
}
