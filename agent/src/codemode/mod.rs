//! The `codemode` tool (Pi 1.6.0's built-in `codemode` extension): the model writes raw
//! JavaScript that runs as the body of an async function in a QuickJS sandbox and calls the
//! session's other tools; only the script's output reaches the model.
//!
//! - [`source`]: the optional `// @options:` first line.
//! - [`sandbox`]: the VM (rquickjs), its limits, and the bridge to the host.
//! - [`globals`]: nested tool calls and `searchTools`/`describeTool`/`describeNamespace`.
//! - [`search`]: the BM25 ranking; [`declarations`]: tools as TypeScript declarations.
//! - [`workers`]: how many scripts may run at once in the process.
//!
//! This module turns a script's outcome into Pi's result: a `Script completed` or
//! `Script failed` header block with the wall time, then the output items (several text items
//! each under `==> text N/M <==`, console lines in one `<console_output>` block), `Script
//! error:` with the error and the calls made before a failure; output over the token budget
//! keeps its start and end and the full text goes to a temp file.

pub mod catalog;
pub mod declarations;
pub mod globals;
pub mod models;
pub mod sandbox;
pub mod search;
pub mod source;
pub mod store;
pub mod workers;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;
use std::time::Instant;

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::mcp::Exposure;
use crate::mcp::McpManager;
use crate::mcp::McpTool;
use crate::tools::ContentBlock;
use crate::tools::Redeclared;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolExposure;
use crate::tools::ToolOutput;
use crate::tools::ToolUpdateFn;
pub use catalog::CodemodeMode;
pub use catalog::CodemodeOptions;
use globals::CallRecord;
use globals::Callable;
use sandbox::OutputItem;
use sandbox::SandboxTool;
use sandbox::ScriptFailure;

/// The tool's name.
pub const CODEMODE_TOOL_NAME: &str = "codemode";
/// Output budget without an options line, in estimated tokens.
const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 10_000;
const CHARS_PER_TOKEN: usize = 4;

/// Lark grammar of the input for providers with grammar-constrained tool input: it fixes only
/// the shape of the options line.
const SOURCE_GRAMMAR: &str = "\nstart: options_source | plain_source\noptions_source: OPTIONS_LINE NEWLINE SOURCE\nplain_source: SOURCE\n\nOPTIONS_LINE: /[ \\t]*\\/\\/ @options:[^\\r\\n]*/\nNEWLINE: /\\r?\\n/\nSOURCE: /[\\s\\S]+/\n";

fn codemode_parameters() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "required": ["code"],
            "properties": {"code": {"type": "string", "description": "Raw JavaScript source."}}
        })
    })
}

/// The declared tools with codemode active, as `options.mode` presents them (see
/// [`catalog`]): `codemode` comes last. Scripts may call the declared tools that are callable
/// (not `model-only`), the `nested` tools (registered with `codemode` or `deferred` exposure
/// and not declared) and every non-hidden tool of the MCP servers.
pub fn with_codemode(
    tools: Vec<Arc<dyn Tool>>,
    nested: Vec<Arc<dyn Tool>>,
    mcp: Option<Arc<McpManager>>,
    options: &CodemodeOptions,
) -> Vec<Arc<dyn Tool>> {
    let codemode: Arc<dyn Tool> = Arc::new(CodemodeTool::new(tools.clone(), nested, mcp, options));
    catalog::present_tools(tools, codemode, options.mode)
}

/// Whether scripts may call a declared tool: not `model-only` (Pi's `codemode` and
/// `tool_search` are, by name or exposure).
pub fn is_script_callable(tool: &dyn Tool) -> bool {
    tool.name() != CODEMODE_TOOL_NAME
        && tool.name() != crate::mcp::tool_search::TOOL_SEARCH_TOOL_NAME
        && !matches!(
            tool.exposure(),
            ToolExposure::ModelOnly | ToolExposure::Hidden
        )
}

/// `tool` with the codemode note appended to its description.
pub fn with_script_call_note(tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
    let output = tool
        .output_schema()
        .cloned()
        .unwrap_or_else(|| json!({"type": "string"}));
    let description = format!(
        "{}\n\nCodemode: `tools.{}(args)` resolves to {}.",
        tool.description().trim(),
        declarations::js_identifier(tool.name()),
        declarations::describe_output(tool.name(), &output)
    );
    Redeclared::wrap(tool, Some(description), None)
}

/// The `codemode` tool of one session.
#[derive(Debug)]
pub struct CodemodeTool {
    description: String,
    /// Built-in, extension (and other declared) tools scripts may call, then the `nested`
    /// ones that are not declared.
    builtins: Vec<Arc<dyn Tool>>,
    /// The declared `direct` tools mode `only` keeps off the declarations.
    presented: Vec<Arc<dyn Tool>>,
    mcp: Option<Arc<McpManager>>,
}

impl CodemodeTool {
    /// Scripts may call the callable tools of `declared`, the `nested` tools and every
    /// non-hidden tool of `mcp`'s servers. The description lists the tools with `codemode`
    /// exposure among them, and with mode `only` the declared `direct` ones too (Pi's
    /// `prepareCodemodeLoadout`: listing by exposure, never the `deferred` tools).
    pub fn new(
        declared: Vec<Arc<dyn Tool>>,
        nested: Vec<Arc<dyn Tool>>,
        mcp: Option<Arc<McpManager>>,
        options: &CodemodeOptions,
    ) -> CodemodeTool {
        let mut builtins: Vec<Arc<dyn Tool>> = declared
            .into_iter()
            .filter(|t| is_script_callable(t.as_ref()))
            .collect();
        for tool in nested {
            if is_script_callable(tool.as_ref())
                && !builtins.iter().any(|t| t.name() == tool.name())
            {
                builtins.push(tool);
            }
        }
        let presented: Vec<Arc<dyn Tool>> = match options.mode {
            CodemodeMode::On => Vec::new(),
            CodemodeMode::Only => builtins
                .iter()
                .filter(|t| t.exposure() == ToolExposure::Direct)
                .cloned()
                .collect(),
        };
        let listed: Vec<catalog::ListedTool<'_>> = builtins
            .iter()
            .filter(|tool| match tool.exposure() {
                ToolExposure::Codemode => true,
                ToolExposure::Direct => options.mode == CodemodeMode::Only,
                _ => false,
            })
            .map(|tool| catalog::ListedTool {
                tool: tool.as_ref(),
                namespace: tool.namespace().cloned(),
            })
            .collect();
        let description = catalog::codemode_description(&listed, options.inline_budget);
        CodemodeTool {
            description,
            builtins,
            presented,
            mcp,
        }
    }

    /// Waits for the MCP servers the script can reach: all of them when it uses a discovery
    /// global, else those whose namespace its words name.
    async fn wait_for_servers(&self, code: &str) {
        let Some(mcp) = &self.mcp else { return };
        // The resource tools reach every server, like the discovery globals.
        let discovery = [
            "searchTools",
            "describeNamespace",
            "describeTool",
            "ALL_TOOLS",
            crate::mcp::resources::LIST_MCP_RESOURCES_TOOL,
            crate::mcp::resources::LIST_MCP_RESOURCE_TEMPLATES_TOOL,
            crate::mcp::resources::READ_MCP_RESOURCE_TOOL,
        ]
        .iter()
        .any(|global| contains_word(code, global));
        let servers = mcp.servers();
        let waits = servers
            .iter()
            .filter(|s| s.enabled())
            .filter(|s| {
                discovery || {
                    let namespace =
                        declarations::js_identifier(&crate::mcp::config::mcp_namespace(s.name()));
                    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|word| word.starts_with(&namespace))
                }
            })
            .map(|server| async move {
                let _ = server.connect().await;
            });
        futures::future::join_all(waits).await;
    }

    /// The tools a script may call, with their namespaces and samples: those of start-up,
    /// then the session's callable tools it lacks (tools extensions registered since, as
    /// Pi's scripts reach the callable tools of the moment), then the servers' tools.
    fn callable(&self, session: Option<&Arc<dyn crate::tools::ToolSession>>) -> Vec<Callable> {
        let mut tools = self.builtins.clone();
        for tool in session.map(|s| s.callable_tools()).unwrap_or_default() {
            if is_script_callable(tool.as_ref())
                && !crate::mcp::tool_set::is_mcp_tool(tool.name())
                && !tools.iter().any(|t| t.name() == tool.name())
            {
                tools.push(tool);
            }
        }
        let mut out: Vec<Callable> = tools
            .iter()
            .map(|tool| Callable {
                sample: catalog::tool_sample(tool.as_ref()),
                tool: tool.clone(),
                namespace: tool.namespace().cloned(),
            })
            .collect();
        if let Some(mcp) = &self.mcp {
            for (server, name, tool) in mcp.named_tools() {
                // Hidden tools are unreachable; `direct` ones may already be declared.
                if server.tool_exposure(&tool.name) == Exposure::Hidden
                    || tools.iter().any(|t| t.name() == name)
                {
                    continue;
                }
                let mcp_tool: Arc<dyn Tool> = Arc::new(McpTool::new(name, server.clone(), &tool));
                out.push(Callable {
                    sample: catalog::tool_sample(mcp_tool.as_ref()),
                    namespace: mcp_tool.namespace().cloned(),
                    tool: mcp_tool,
                });
            }
            // The resource tools, once a server with resources connected.
            if crate::mcp::resources::exposure(mcp).is_some() {
                for tool in crate::mcp::resources::resource_tools(mcp) {
                    if tools.iter().any(|t| t.name() == tool.name()) {
                        continue;
                    }
                    out.push(Callable {
                        sample: catalog::tool_sample(tool.as_ref()),
                        tool,
                        namespace: None,
                    });
                }
            }
        }
        out
    }
}

fn contains_word(code: &str, word: &str) -> bool {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

#[async_trait::async_trait]
impl Tool for CodemodeTool {
    fn name(&self) -> &str {
        CODEMODE_TOOL_NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        codemode_parameters()
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("Run JavaScript that calls other tools")
    }

    fn presented_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.presented.clone()
    }

    fn declares_reach(&self) -> bool {
        true
    }

    fn exposure(&self) -> ToolExposure {
        ToolExposure::ModelOnly
    }

    fn constrained_sampling(&self) -> Option<Value> {
        // Capable models write the script as raw text instead of a JSON-escaped string.
        Some(json!({"type": "grammar", "variants": {"openai_lark": SOURCE_GRAMMAR}}))
    }

    fn prompt_guidelines(&self) -> &[&str] {
        &["Use codemode to batch independent tool calls (Promise.allSettled), chain them, or filter large output, instead of many separate calls."]
    }

    async fn execute(
        &self,
        call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let started = Instant::now();
        let input = args.get("code").and_then(Value::as_str).unwrap_or("");
        let (code, options) = source::parse_source(input).map_err(ToolError::new)?;
        self.wait_for_servers(&code).await;
        let callable = self.callable(ctx.session.as_ref());
        let calls = Arc::new(Mutex::new(Vec::new()));
        let (changed, mut changes) = tokio::sync::mpsc::unbounded_channel();
        let mut request = sandbox::SandboxRequest {
            code,
            tools: callable
                .iter()
                .map(|c| SandboxTool {
                    name: c.tool.name().to_string(),
                    js_name: declarations::js_identifier(c.tool.name()),
                    description: c.sample.clone(),
                })
                .collect(),
            globals: globals::discovery_globals()
                .into_iter()
                .chain(models::model_globals())
                .collect(),
            store: ctx
                .session
                .as_ref()
                .map(|session| store::read_store(session.as_ref()))
                .unwrap_or_default(),
            timeout: options.timeout_ms.map(Duration::from_millis),
            memory_limit_bytes: sandbox::MEMORY_LIMIT_BYTES,
        };
        let host = Arc::new(globals::ScriptHost {
            tools: callable,
            ctx: ctx.clone(),
            call_id: call_id.to_string(),
            calls: calls.clone(),
            tool_calls: Default::default(),
            changed,
        });
        // Progress: `details.calls` as the calls start and end (Pi's `onUpdate`), starting
        // with none, so a UI shows the script running before its first call.
        let publish = |rows: Vec<Value>| {
            on_update(ToolOutput {
                content: Vec::new(),
                details: Some(json!({ "calls": rows })),
                is_error: false,
                structured: None,
                usage: None,
            });
        };
        publish(Vec::new());
        // The wait for a slot counts toward the script's deadline; the slot is held until
        // the VM has stopped (`run_script` returns only then).
        let waiting = Instant::now();
        let _slot = match workers::WorkerPool::global()
            .reserve(request.timeout, &cancel)
            .await
        {
            Ok(slot) => slot,
            Err(refusal) => return Ok(not_started(&refusal, started)),
        };
        // Whole milliseconds, as Pi rounds them: a script that did not wait keeps its
        // `timeout_ms` (and its timeout message says so).
        let waited_ms = waiting.elapsed().as_secs_f64() * 1000.0;
        request.timeout = request.timeout.map(|t| {
            let remaining = (t.as_secs_f64() * 1000.0 - waited_ms).round().max(1.0);
            Duration::from_millis(remaining as u64)
        });
        let run = sandbox::run_script(request, host, cancel);
        tokio::pin!(run);
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                Some(rows) = changes.recv() => publish(rows),
            }
        };
        while let Ok(rows) = changes.try_recv() {
            publish(rows);
        }
        let calls: Vec<CallRecord> = calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .map(|mut c| {
                // Calls still running were cut off by the script's end.
                if c.status == "running" {
                    c.status = "cancelled";
                }
                c
            })
            .collect();
        let mut items = outcome.output;
        let ok = outcome.result.is_ok();
        let mut error_text = None;
        match outcome.result {
            Ok(success) => {
                if let (Some(session), Some(data)) =
                    (&ctx.session, store::entry_data(success.writes))
                {
                    // The script's tool calls already ran: a write that cannot be saved must
                    // not turn its result into a failure (the session reports its own errors).
                    let _ = session.append_custom_entry(store::STORE_ENTRY_TYPE, data);
                }
                if let Some(value) = success.value {
                    let text = match value {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    items.push(OutputItem::Text {
                        text,
                        console: false,
                    });
                }
            }
            Err(failure) => error_text = Some(format_error(&failure, &calls)),
        }
        let mut blocks = format_output(items);
        if let Some(error) = error_text {
            blocks.push(ContentBlock::Text(format!("Script error:\n{error}")));
        }
        let budget = options
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS) as usize;
        let (blocks, full_output_path) = truncate_output(join_adjacent_text(blocks), budget, ctx);
        let blocks = join_adjacent_text(save_images(blocks, ctx));
        let header = result_header(ok, started);
        let mut details =
            json!({"calls": calls.iter().map(CallRecord::to_json).collect::<Vec<_>>()});
        if let Some(path) = full_output_path {
            details["fullOutputPath"] = Value::String(path);
        }
        Ok(ToolOutput {
            content: std::iter::once(ContentBlock::Text(header))
                .chain(blocks)
                .collect(),
            details: Some(details),
            is_error: !ok,
            structured: None,
            usage: None,
        })
    }
}

fn result_header(ok: bool, started: Instant) -> String {
    format!(
        "{}\nWall time {:.1} seconds\nOutput:\n",
        if ok {
            "Script completed"
        } else {
            "Script failed"
        },
        started.elapsed().as_secs_f64()
    )
}

/// The result of a script that got no worker slot: it never ran, so no calls were made.
fn not_started(refusal: &workers::Refusal, started: Instant) -> ToolOutput {
    ToolOutput {
        content: vec![
            ContentBlock::Text(result_header(false, started)),
            ContentBlock::Text(format!(
                "Script error:\n{}\n\nThe script did not start.",
                refusal.message()
            )),
        ],
        details: Some(json!({"calls": []})),
        is_error: true,
        structured: None,
        usage: None,
    }
}

fn format_error(failure: &ScriptFailure, calls: &[CallRecord]) -> String {
    let head = match failure {
        ScriptFailure::Script {
            name,
            message,
            stack,
        } => stack
            .clone()
            .unwrap_or_else(|| format!("{}: {message}", name.as_deref().unwrap_or("Error"))),
        ScriptFailure::Timeout(m) => format!("Script timed out: {m}"),
        ScriptFailure::Aborted(m) => format!("Script aborted: {m}"),
        ScriptFailure::Sandbox(m) => format!("Script sandbox failed: {m}"),
    };
    let summary = if calls.is_empty() {
        "No tool calls were made.".to_string()
    } else {
        format!(
            "Tool calls made before the failure (they are not undone): {}",
            calls
                .iter()
                .map(|c| format!("{} ({})", c.name, c.status))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!("{head}\n\n{summary}")
}

/// Several text items each under `==> text N/M <==`; console lines in one block at the end.
fn format_output(output: Vec<OutputItem>) -> Vec<ContentBlock> {
    let total = output
        .iter()
        .filter(|i| matches!(i, OutputItem::Text { console: false, .. }))
        .count();
    let mut items = Vec::new();
    let mut console_lines = Vec::new();
    let mut index = 0;
    for item in output {
        match item {
            OutputItem::Image { data, mime_type } => {
                items.push(ContentBlock::Image { data, mime_type })
            }
            OutputItem::Text {
                text,
                console: true,
            } => console_lines.push(text),
            OutputItem::Text { text, .. } => {
                index += 1;
                items.push(ContentBlock::Text(if total > 1 {
                    format!("==> text {index}/{total} <==\n{text}")
                } else {
                    text
                }));
            }
        }
    }
    if !console_lines.is_empty() {
        items.push(ContentBlock::Text(format!(
            "<console_output>\n{}\n</console_output>",
            console_lines.join("\n")
        )));
    }
    items
}

/// Adjacent text items joined into one, each part starting on its own line.
fn join_adjacent_text(items: Vec<ContentBlock>) -> Vec<ContentBlock> {
    let mut joined = Vec::new();
    let mut current: Option<String> = None;
    let mut last_part_ends_line = true;
    for item in items {
        match item {
            ContentBlock::Text(text) => {
                let buffer = current.get_or_insert_with(String::new);
                if !last_part_ends_line {
                    buffer.push('\n');
                    last_part_ends_line = true;
                }
                buffer.push_str(&text);
                if !text.is_empty() {
                    last_part_ends_line = text.ends_with('\n');
                }
            }
            image => {
                if let Some(text) = current.take() {
                    joined.push(ContentBlock::Text(text));
                }
                last_part_ends_line = true;
                joined.push(image);
            }
        }
    }
    if let Some(text) = current {
        joined.push(ContentBlock::Text(text));
    }
    joined
}

/// Output over the budget keeps its start and end; the whole text goes to a temp file.
fn truncate_output(
    items: Vec<ContentBlock>,
    max_tokens: usize,
    ctx: &ToolContext,
) -> (Vec<ContentBlock>, Option<String>) {
    let texts: Vec<&str> = items.iter().filter_map(ContentBlock::as_text).collect();
    let combined = texts.join("\n");
    let budget = max_tokens * CHARS_PER_TOKEN;
    // Pi counts UTF-16 code units.
    let length = combined.encode_utf16().count();
    if texts.is_empty() || length <= budget {
        return (items, None);
    }
    let head_chars = budget / 2;
    let tail_chars = budget - head_chars;
    let removed = length - head_chars - tail_chars;
    let head = utf16_head(&combined, head_chars);
    let tail = utf16_tail(&combined, tail_chars);
    let mut text = format!(
        "Warning: truncated output (original token count: {})\nTotal output lines: {}\n\n{head}…{} tokens truncated…{tail}",
        length.div_ceil(CHARS_PER_TOKEN),
        combined.split('\n').count(),
        removed.div_ceil(CHARS_PER_TOKEN),
    );
    let spilled = crate::tools::output::write_output_file(
        "pi-codemode",
        ".txt",
        combined.as_bytes(),
        ctx.temp_dir.as_deref(),
    );
    let path = match spilled {
        Ok(path) => {
            let path = path.display().to_string();
            text.push_str(&format!(
                "\n\n[Full output: {path} (read with offset/limit)]"
            ));
            Some(path)
        }
        Err(error) => {
            text.push_str(&format!("\n\n[Could not save the full output: {error}]"));
            None
        }
    };
    let images = items
        .into_iter()
        .filter(|i| matches!(i, ContentBlock::Image { .. }));
    (
        std::iter::once(ContentBlock::Text(text))
            .chain(images)
            .collect(),
        path,
    )
}

/// The first `units` UTF-16 code units, not splitting a character.
fn utf16_head(text: &str, units: usize) -> &str {
    let mut count = 0;
    for (index, c) in text.char_indices() {
        if count + c.len_utf16() > units {
            return &text[..index];
        }
        count += c.len_utf16();
    }
    text
}

/// The last `units` UTF-16 code units, not splitting a character.
fn utf16_tail(text: &str, units: usize) -> &str {
    let mut count = 0;
    for (index, c) in text.char_indices().rev() {
        if count + c.len_utf16() > units {
            return &text[index + c.len_utf8()..];
        }
        count += c.len_utf16();
    }
    text
}

/// Each image saved to a temp file, its path in a text item before it (once per image).
fn save_images(items: Vec<ContentBlock>, ctx: &ToolContext) -> Vec<ContentBlock> {
    use base64::Engine as _;
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut out = Vec::new();
    for item in items {
        let ContentBlock::Image { data, mime_type } = &item else {
            out.push(item);
            continue;
        };
        let label = match labels.iter().find(|(d, _)| d == data) {
            Some((_, label)) => label.clone(),
            None => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap_or_default();
                let kind = format!("{mime_type}, {}", crate::tools::format_size(bytes.len()));
                let extension = match mime_type.as_str() {
                    "image/png" => ".png",
                    "image/jpeg" => ".jpg",
                    "image/gif" => ".gif",
                    _ => ".webp",
                };
                let label = match crate::tools::output::write_output_file(
                    "pi-codemode",
                    extension,
                    &bytes,
                    ctx.temp_dir.as_deref(),
                ) {
                    Ok(path) => format!("[Image saved to {} ({kind})]", path.display()),
                    Err(error) => format!("[Image ({kind}) could not be saved: {error}]"),
                };
                labels.push((data.clone(), label.clone()));
                label
            }
        };
        out.push(ContentBlock::Text(label));
        out.push(item);
    }
    out
}

#[cfg(test)]
mod tests;
