//! The `ls` tool: one directory's entries, sorted, directories marked with `/`.

use std::sync::OnceLock;

use serde_json::json;
use serde_json::Map;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::fs_util::node_path_error;
use super::paths::search_root;
use super::truncate::format_size;
use super::truncate::truncate_head;
use super::truncate::DEFAULT_MAX_BYTES;
use super::truncate::NO_LINE_LIMIT;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::ToolUpdateFn;
use crate::collation::locale_compare;

const DEFAULT_LIMIT: usize = 500;

/// Pi's `ls` tool.
#[derive(Debug, Default)]
pub struct LsTool;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default: current directory)"},
                "limit": {"type": "number", "description": "Maximum number of entries to return (default: 500)"}
            }
        })
    })
}

#[async_trait::async_trait]
impl Tool for LsTool {
    fn name(&self) -> &str {
        "ls"
    }

    fn description(&self) -> &str {
        "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes dotfiles. Output is truncated to 500 entries or 50KB (whichever is hit first)."
    }

    fn parameters(&self) -> &Value {
        schema()
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("List directory contents")
    }

    async fn execute(
        &self,
        _call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        _on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        if cancel.is_cancelled() {
            return Err(ToolError::aborted());
        }
        let dir = search_root(&args, &ctx.cwd);
        // A limit of 0 would list nothing and report "(empty directory)", so it means 1.
        let limit = args
            .get("limit")
            .and_then(Value::as_f64)
            .unwrap_or(DEFAULT_LIMIT as f64)
            .floor()
            .max(1.0);
        let limit = limit.min(u32::MAX as f64) as usize;
        let Ok(metadata) = tokio::fs::metadata(&dir).await else {
            return Err(ToolError::new(format!("Path not found: {}", dir.display())));
        };
        if !metadata.is_dir() {
            return Err(ToolError::new(format!(
                "Not a directory: {}",
                dir.display()
            )));
        }
        let mut reader = tokio::fs::read_dir(&dir).await.map_err(|e| {
            ToolError::new(format!(
                "Cannot read directory: {}",
                node_path_error(&e, "scandir", &dir)
            ))
        })?;
        let mut names = Vec::new();
        loop {
            match reader.next_entry().await {
                Ok(Some(entry)) => names.push(entry.file_name().to_string_lossy().into_owned()),
                Ok(None) => break,
                Err(e) => {
                    return Err(ToolError::new(format!(
                        "Cannot read directory: {}",
                        node_path_error(&e, "scandir", &dir)
                    )))
                }
            }
            if cancel.is_cancelled() {
                return Err(ToolError::aborted());
            }
        }
        names.sort_by(|a, b| locale_compare(&a.to_lowercase(), &b.to_lowercase()));
        let mut results = Vec::new();
        let mut limit_reached = false;
        for name in names {
            if results.len() >= limit {
                limit_reached = true;
                break;
            }
            // Entries that cannot be stat'ed (broken links) are skipped, as in Pi.
            let Ok(entry_metadata) = tokio::fs::metadata(dir.join(&name)).await else {
                continue;
            };
            let suffix = if entry_metadata.is_dir() { "/" } else { "" };
            results.push(format!("{name}{suffix}"));
        }
        if results.is_empty() {
            return Ok(ToolOutput::text("(empty directory)"));
        }
        let truncation = truncate_head(&results.join("\n"), NO_LINE_LIMIT, DEFAULT_MAX_BYTES);
        let mut text = truncation.content.clone();
        let mut details = Map::new();
        let mut notices = Vec::new();
        if limit_reached {
            notices.push(format!(
                "{limit} entries limit reached. Use limit={} for more",
                limit * 2
            ));
            details.insert("entryLimitReached".to_string(), json!(limit));
        }
        if truncation.truncated {
            notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
            details.insert("truncation".to_string(), truncation.to_json());
        }
        if !notices.is_empty() {
            text.push_str(&format!("\n\n[{}]", notices.join(". ")));
        }
        let mut output = ToolOutput::text(text);
        output.details = (!details.is_empty()).then_some(Value::Object(details));
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ignore_updates;

    async fn ls(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        LsTool
            .execute("1", args, ctx, CancellationToken::new(), &ignore_updates)
            .await
    }

    #[tokio::test]
    async fn lists_sorted_with_dir_suffix_and_dotfiles() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.txt", "A.txt", ".hidden", "c_d", "c-d"] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", dir.path().join("broken")).unwrap();
        let ctx = ToolContext::new(dir.path());
        let out = ls(&ctx, json!({})).await.unwrap();
        // Root collation: "_" before "-", punctuation before letters; broken link skipped.
        assert_eq!(out.first_text(), ".hidden\nA.txt\nb.txt\nc_d\nc-d\nsub/");
        assert_eq!(out.details, None);
    }

    #[tokio::test]
    async fn limit_adds_notice_and_details() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("f{i}")), "x").unwrap();
        }
        let ctx = ToolContext::new(dir.path());
        let out = ls(&ctx, json!({"limit": 2})).await.unwrap();
        assert_eq!(
            out.first_text(),
            "f0\nf1\n\n[2 entries limit reached. Use limit=4 for more]"
        );
        assert_eq!(out.details, Some(json!({"entryLimitReached": 2})));
        // Exactly at the limit: no notice.
        let out = ls(&ctx, json!({"limit": 5})).await.unwrap();
        assert!(!out.first_text().contains("limit reached"));
    }

    #[tokio::test]
    async fn errors_match_pi() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        let ctx = ToolContext::new(dir.path());
        let missing = ls(&ctx, json!({"path": "nope"})).await.unwrap_err();
        assert_eq!(
            missing.message,
            format!("Path not found: {}", dir.path().join("nope").display())
        );
        let file = ls(&ctx, json!({"path": "file"})).await.unwrap_err();
        assert_eq!(
            file.message,
            format!("Not a directory: {}", dir.path().join("file").display())
        );
        let empty = ls(&ctx, json!({"path": "empty"})).await.unwrap();
        assert_eq!(empty.first_text(), "(empty directory)");
    }
}
