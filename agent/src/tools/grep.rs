//! The `grep` tool, in process with ripgrep's own crates.
//!
//! Pi runs `rg --json --line-number --color=never --hidden [--ignore-case] [--fixed-strings]
//! [--glob G] [--context N] -- PATTERN .` inside the search directory and formats rg's match and
//! context events. The same walker (`ignore`), regex engine (`grep-regex`) and searcher
//! (`grep-searcher`) give the same files, matches and context lines here, so only the event
//! handling of Pi's tool has to be reproduced.

use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::OnceLock;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::BinaryDetection;
use grep_searcher::Searcher;
use grep_searcher::SearcherBuilder;
use grep_searcher::Sink;
use grep_searcher::SinkContext;
use grep_searcher::SinkMatch;
use ignore::overrides::OverrideBuilder;
use ignore::WalkBuilder;
use serde_json::json;
use serde_json::Map;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::paths::search_root;
use super::truncate::format_size;
use super::truncate::truncate_head;
use super::truncate::truncate_line;
use super::truncate::DEFAULT_MAX_BYTES;
use super::truncate::GREP_MAX_LINE_LENGTH;
use super::truncate::NO_LINE_LIMIT;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::ToolUpdateFn;

const DEFAULT_LIMIT: usize = 100;

/// Pi's `grep` tool.
#[derive(Debug, Default)]
pub struct GrepTool;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "required": ["pattern"],
            "properties": {
                "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
                "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
                "glob": {"type": "string", "description": "Filter files by glob pattern relative to path, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
                "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
                "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
                "context": {"type": "number", "description": "Number of lines to show before and after each match (default: 0)"},
                "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"}
            }
        })
    })
}

struct GrepRequest {
    pattern: String,
    search_path: PathBuf,
    is_directory: bool,
    glob: Option<String>,
    ignore_case: bool,
    literal: bool,
    context: usize,
    limit: usize,
}

/// Pi's handling of rg's events: formatting, the match limit with the last match's trailing
/// context, and the byte cap on what is stored.
struct Collector {
    limit: usize,
    context: u64,
    match_count: usize,
    match_limit_reached: bool,
    lines_truncated: bool,
    limit_hit: bool,
    trailing_context_end: u64,
    last_file: Option<PathBuf>,
    done: bool,
    output_lines: Vec<String>,
    output_bytes: usize,
    output_line_count: usize,
}

impl Collector {
    fn push_line(
        &mut self,
        file: &Path,
        display: &str,
        line_number: u64,
        text: &[u8],
        is_match: bool,
    ) {
        self.last_file = Some(file.to_path_buf());
        let text = String::from_utf8_lossy(text);
        // Strip only the line terminator: a lone CR inside a line is content.
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let (shown, cut) = truncate_line(text, GREP_MAX_LINE_LENGTH);
        if cut {
            self.lines_truncated = true;
        }
        let line = if is_match {
            format!("{display}:{line_number}: {shown}")
        } else {
            format!("{display}-{line_number}- {shown}")
        };
        // Past the byte cap truncation drops everything, so count but stop storing.
        if self.output_bytes <= DEFAULT_MAX_BYTES + 1 {
            self.output_lines.push(line.clone());
        }
        self.output_bytes += line.len() + 1;
        self.output_line_count += 1;
    }

    /// One rg event; false once the results are complete.
    fn event(
        &mut self,
        file: &Path,
        display: &str,
        line_number: u64,
        text: &[u8],
        is_match: bool,
    ) -> bool {
        if self.done {
            return false;
        }
        if !self.limit_hit {
            self.push_line(file, display, line_number, text, is_match);
            if is_match {
                self.match_count += 1;
                if self.match_count >= self.limit {
                    self.limit_hit = true;
                    self.trailing_context_end = line_number.saturating_add(self.context);
                }
            }
            return true;
        }
        let in_window =
            self.last_file.as_deref() == Some(file) && line_number <= self.trailing_context_end;
        // A match inside the last match's trailing context is shown as context.
        if in_window {
            self.push_line(file, display, line_number, text, false);
        }
        // Only another match proves the limit cut results off.
        if is_match {
            self.match_limit_reached = true;
        }
        if self.match_limit_reached && !(in_window && line_number < self.trailing_context_end) {
            self.done = true;
            return false;
        }
        true
    }
}

struct CollectorSink<'a> {
    collector: &'a mut Collector,
    file: &'a Path,
    display: &'a str,
    cancelled: &'a AtomicBool,
}

impl Sink for CollectorSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let number = mat.line_number().unwrap_or(0);
        // rg's JSON reports each matched line as its own event.
        let mut keep_going = true;
        for (offset, line) in mat.lines().enumerate() {
            keep_going =
                self.collector
                    .event(self.file, self.display, number + offset as u64, line, true);
            if !keep_going {
                break;
            }
        }
        Ok(keep_going)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let number = ctx.line_number().unwrap_or(0);
        Ok(self
            .collector
            .event(self.file, self.display, number, ctx.bytes(), false))
    }
}

enum GrepFailure {
    Aborted,
    Message(String),
}

fn run_grep(request: &GrepRequest, cancelled: &AtomicBool) -> Result<Collector, GrepFailure> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(request.ignore_case)
        .fixed_strings(request.literal)
        .line_terminator(Some(b'\n'))
        .build(&request.pattern)
        .map_err(|e| GrepFailure::Message(format!("rg: {e}")))?;
    let mut collector = Collector {
        limit: request.limit,
        context: request.context as u64,
        match_count: 0,
        match_limit_reached: false,
        lines_truncated: false,
        limit_hit: false,
        trailing_context_end: 0,
        last_file: None,
        done: false,
        output_lines: Vec::new(),
        output_bytes: 0,
        output_line_count: 0,
    };
    let mut errors: Vec<String> = Vec::new();
    let build_searcher = |binary: BinaryDetection| {
        SearcherBuilder::new()
            .line_number(true)
            .before_context(request.context)
            .after_context(request.context)
            .binary_detection(binary)
            .build()
    };
    if !request.is_directory {
        // An explicitly named file is searched even if binary, as rg does.
        let display = request
            .search_path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut searcher = build_searcher(BinaryDetection::convert(b'\x00'));
        let sink = CollectorSink {
            collector: &mut collector,
            file: &request.search_path,
            display: &display,
            cancelled,
        };
        if let Err(e) = searcher.search_path(&matcher, &request.search_path, sink) {
            errors.push(format!("rg: {}: {e}", request.search_path.display()));
        }
    } else {
        let mut walker = WalkBuilder::new(&request.search_path);
        walker
            .hidden(false)
            .add_custom_ignore_filename(".rgignore")
            .sort_by_file_name(|a, b| a.cmp(b));
        if let Some(glob) = &request.glob {
            let mut overrides = OverrideBuilder::new(&request.search_path);
            overrides
                .add(glob)
                .map_err(|e| GrepFailure::Message(format!("rg: {e}")))?;
            let overrides = overrides
                .build()
                .map_err(|e| GrepFailure::Message(format!("rg: {e}")))?;
            walker.overrides(overrides);
        }
        let mut searcher = build_searcher(BinaryDetection::quit(b'\x00'));
        for entry in walker.build() {
            if cancelled.load(Ordering::Relaxed) {
                return Err(GrepFailure::Aborted);
            }
            if collector.done {
                break;
            }
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    errors.push(format!("rg: {e}"));
                    continue;
                }
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            let relative = path.strip_prefix(&request.search_path).unwrap_or(path);
            let display = relative.to_string_lossy().replace('\\', "/");
            let sink = CollectorSink {
                collector: &mut collector,
                file: path,
                display: &display,
                cancelled,
            };
            if let Err(e) = searcher.search_path(&matcher, path, sink) {
                errors.push(format!("rg: {}: {e}", relative.display()));
            }
        }
    }
    if cancelled.load(Ordering::Relaxed) {
        return Err(GrepFailure::Aborted);
    }
    // rg exits 2 when any file failed, and Pi reports that unless it stopped rg at the limit.
    if !collector.done && !errors.is_empty() {
        return Err(GrepFailure::Message(errors.join("\n")));
    }
    Ok(collector)
}

fn format_result(collector: Collector, limit: usize) -> ToolOutput {
    if collector.match_count == 0 {
        return ToolOutput::text("No matches found");
    }
    let raw = collector.output_lines.join("\n");
    // No line limit: the match limit already capped rows.
    let mut truncation = truncate_head(&raw, NO_LINE_LIMIT, DEFAULT_MAX_BYTES);
    truncation.total_lines = collector.output_line_count;
    truncation.total_bytes = collector.output_bytes.saturating_sub(1);
    let mut text = truncation.content.clone();
    let mut details = Map::new();
    let mut notices = Vec::new();
    if collector.match_limit_reached {
        notices.push(format!(
            "{limit} matches limit reached. Use limit={} for more, or refine pattern",
            limit * 2
        ));
        details.insert("matchLimitReached".to_string(), json!(limit));
    }
    if truncation.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
        details.insert("truncation".to_string(), truncation.to_json());
    }
    if collector.lines_truncated {
        notices.push(format!(
            "Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
        ));
        details.insert("linesTruncated".to_string(), json!(true));
    }
    if !notices.is_empty() {
        text.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    let mut output = ToolOutput::text(text);
    output.details = (!details.is_empty()).then_some(Value::Object(details));
    output
}

/// Pi strips leading `./` from a glob (rg never matches it); a leading `!` negates and stays.
fn normalize_glob(glob: &str) -> String {
    let (negation, mut rest) = match glob.strip_prefix('!') {
        Some(rest) => ("!", rest),
        None => ("", glob),
    };
    while let Some(stripped) = rest.strip_prefix("./") {
        rest = stripped;
    }
    format!("{negation}{rest}")
}

#[async_trait::async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore. Output is truncated to 100 matches or 50KB (whichever is hit first). Long lines are truncated to 500 chars."
    }

    fn parameters(&self) -> &Value {
        schema()
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("Search file contents for patterns (respects .gitignore)")
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
        let search_path = search_root(&args, &ctx.cwd);
        let Ok(metadata) = tokio::fs::metadata(&search_path).await else {
            return Err(ToolError::new(format!(
                "Path not found: {}",
                search_path.display()
            )));
        };
        let context = args
            .get("context")
            .and_then(Value::as_f64)
            .filter(|c| *c > 0.0)
            .map_or(0, |c| c.floor().min(u32::MAX as f64) as usize);
        let limit = args
            .get("limit")
            .and_then(Value::as_f64)
            .unwrap_or(DEFAULT_LIMIT as f64)
            .floor()
            .max(1.0);
        let limit = limit.min(u32::MAX as f64) as usize;
        let request = GrepRequest {
            pattern: args
                .get("pattern")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            search_path,
            is_directory: metadata.is_dir(),
            glob: args
                .get("glob")
                .and_then(Value::as_str)
                .filter(|g| !g.is_empty())
                .map(normalize_glob),
            ignore_case: args
                .get("ignoreCase")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            literal: args
                .get("literal")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            context,
            limit,
        };
        let cancelled = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancelled);
        let search = tokio::task::spawn_blocking(move || run_grep(&request, &flag));
        let result = tokio::select! {
            joined = search => joined,
            () = cancel.cancelled() => {
                cancelled.store(true, Ordering::Relaxed);
                return Err(ToolError::aborted());
            }
        };
        match result {
            Ok(Ok(collector)) => Ok(format_result(collector, limit)),
            Ok(Err(GrepFailure::Aborted)) => Err(ToolError::aborted()),
            Ok(Err(GrepFailure::Message(message))) => Err(ToolError::new(message)),
            Err(join_error) => Err(ToolError::new(format!("grep failed: {join_error}"))),
        }
    }
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;
