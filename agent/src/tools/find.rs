//! The `find` tool, in process with the `ignore` walker and `globset`.
//!
//! Pi runs `fd --color=never --hidden [--no-require-git] --glob --max-results N+1 [--full-path]
//! [--ignore-case] -- PATTERN PATH`. fd is built on the same walker and glob crates, so this
//! reproduces its matching: a pattern without `/` matches file names at any depth; one with `/`
//! matches the whole path, anchored at the search directory, where `*` does not cross `/`;
//! an all-lowercase pattern matches case-insensitively (fd's smart case).

use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::OnceLock;

use globset::GlobBuilder;
use ignore::WalkBuilder;
use serde_json::json;
use serde_json::Map;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

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

const DEFAULT_LIMIT: usize = 1000;

/// Pi's `find` tool.
#[derive(Debug, Default)]
pub struct FindTool;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "required": ["pattern"],
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern relative to the search directory, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
                "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
                "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"}
            }
        })
    })
}

struct FindResults {
    /// Results within the limit, stored up to the first one past the byte cap.
    stored: Vec<String>,
    count: usize,
    output_bytes: usize,
    limit_reached: bool,
}

fn inside_git_repo(start: &Path) -> bool {
    start
        .ancestors()
        .any(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
}

/// Escapes glob metacharacters of the search path, which prefixes a relative path pattern.
fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn run_find(
    pattern: &str,
    search_path: &Path,
    limit: usize,
    cancelled: &AtomicBool,
) -> Result<FindResults, String> {
    if !std::fs::metadata(search_path).is_ok_and(|m| m.is_dir()) {
        return Err(format!(
            "[fd error]: Search path '{}' is not a directory.",
            search_path.display()
        ));
    }
    let mut effective = pattern;
    // fd's full paths never contain "/./", so "./src/*.ts" would find nothing; drop the "./".
    while let Some(rest) = effective.strip_prefix("./") {
        effective = rest;
    }
    let is_path_pattern = effective.contains('/');
    let ignore_case = effective == effective.to_lowercase();
    let full_pattern = if is_path_pattern && !effective.starts_with('/') {
        // Anchored at the search path, like grep's glob: 'src/*.ts' finds src/a.ts only.
        let root = search_path.to_string_lossy();
        format!("{}/{effective}", escape_glob(root.trim_end_matches('/')))
    } else {
        effective.to_string()
    };
    let matcher = GlobBuilder::new(&full_pattern)
        .literal_separator(is_path_pattern)
        .backslash_escape(true)
        .case_insensitive(ignore_case)
        .build()
        .map_err(|e| format!("[fd error]: {e}"))?
        .compile_matcher();
    let mut walker = WalkBuilder::new(search_path);
    walker
        .hidden(false)
        // Outside a git repository fd is told --no-require-git, so .gitignore still applies.
        .require_git(inside_git_repo(search_path))
        .add_custom_ignore_filename(".fdignore")
        // fd treats .git as ignored even with --hidden.
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b));
    let mut results = FindResults {
        stored: Vec::new(),
        count: 0,
        output_bytes: 0,
        limit_reached: false,
    };
    for entry in walker.build() {
        if cancelled.load(Ordering::Relaxed) {
            return Err("Operation aborted".to_string());
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let path = entry.path();
        let matched = if is_path_pattern {
            matcher.is_match(path)
        } else {
            matcher.is_match(Path::new(entry.file_name()))
        };
        if !matched {
            continue;
        }
        if results.count == limit {
            // One result past the limit tells "exactly N" from "more than N".
            results.limit_reached = true;
            break;
        }
        let relative = path.strip_prefix(search_path).unwrap_or(path);
        let mut shown = relative.to_string_lossy().replace('\\', "/");
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            shown.push('/');
        }
        results.count += 1;
        if results.output_bytes <= DEFAULT_MAX_BYTES + 1 {
            results.output_bytes += shown.len() + 1;
            results.stored.push(shown);
        } else {
            results.output_bytes += shown.len() + 1;
        }
    }
    Ok(results)
}

fn format_results(results: FindResults, limit: usize) -> ToolOutput {
    if results.count == 0 {
        return ToolOutput::text("No files found matching pattern");
    }
    let mut truncation =
        truncate_head(&results.stored.join("\n"), NO_LINE_LIMIT, DEFAULT_MAX_BYTES);
    truncation.total_lines = results.count;
    truncation.total_bytes = results.output_bytes.saturating_sub(1);
    let mut text = truncation.content.clone();
    let mut details = Map::new();
    let mut notices = Vec::new();
    if results.limit_reached {
        notices.push(format!(
            "{limit} results limit reached. Use limit={} for more, or refine pattern",
            limit * 2
        ));
        details.insert("resultLimitReached".to_string(), json!(limit));
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
    output
}

#[async_trait::async_trait]
impl Tool for FindTool {
    fn name(&self) -> &str {
        "find"
    }

    fn description(&self) -> &str {
        "Search for files by glob pattern. Returns matching file paths relative to the search directory. Respects .gitignore. Output is truncated to 1000 results or 50KB (whichever is hit first)."
    }

    fn parameters(&self) -> &Value {
        schema()
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("Find files by glob pattern (respects .gitignore)")
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
        let search_path: PathBuf = search_root(&args, &ctx.cwd);
        let pattern = args
            .get("pattern")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let limit = args
            .get("limit")
            .and_then(Value::as_f64)
            .unwrap_or(DEFAULT_LIMIT as f64)
            .floor()
            .max(1.0);
        let limit = limit.min(u32::MAX as f64) as usize;
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancelled);
        let search =
            tokio::task::spawn_blocking(move || run_find(&pattern, &search_path, limit, &flag));
        let result = tokio::select! {
            joined = search => joined,
            () = cancel.cancelled() => {
                cancelled.store(true, Ordering::Relaxed);
                return Err(ToolError::aborted());
            }
        };
        match result {
            Ok(Ok(results)) => Ok(format_results(results, limit)),
            Ok(Err(message)) => Err(ToolError::new(message)),
            Err(join_error) => Err(ToolError::new(format!("find failed: {join_error}"))),
        }
    }
}

#[cfg(test)]
#[path = "find_tests.rs"]
mod tests;
