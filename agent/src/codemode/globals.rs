//! What a script reaches: the callable tools (`tools.<name>()`) and the discovery globals
//! `searchTools()`, `describeTool()` and `describeNamespace()`, as the sandbox's host.
//!
//! A nested call runs through the session's nested-call path (argument preparation,
//! validation, the extensions' `tool_call`/`tool_result` hooks, `tool_execution_*` events with
//! `parentToolCallId`; [`run_tool_call`] outside a session) and resolves as in Pi: a tool with an output schema to its structured result
//! (bash's `{output, …}`, an MCP tool's `CallToolResult`, also with `isError`), `read` of an
//! image to an image block with its note, any other tool to its text; a failed call rejects
//! with the tool's error text.

use std::sync::Arc;
use std::sync::Mutex;

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::declarations::js_identifier;
use super::sandbox::SandboxGlobal;
use super::sandbox::SandboxHost;
use super::search;
use crate::tools::run_tool_call;
use crate::tools::ContentBlock;
use crate::tools::NestedCallRequest;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolOutput;

/// A tool group as scripts see it (see [`ToolNamespace`]).
pub type Namespace = crate::tools::ToolNamespace;

/// A tool a script may call.
#[derive(Clone, Debug)]
pub struct Callable {
    pub tool: Arc<dyn Tool>,
    pub namespace: Option<Namespace>,
    /// Its description and declaration, as `ALL_TOOLS` and `describeTool()` show it.
    pub sample: String,
}

/// The state of a nested call (or a `models.*` call), for the result's failure summary and
/// `details.calls`.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRecord {
    pub id: String,
    pub name: String,
    pub args: String,
    pub status: &'static str,
    /// Milliseconds from the call's start to its end, once it ended.
    pub duration_ms: Option<f64>,
    /// The start of its error text (500 characters), for failed calls.
    pub error: Option<String>,
}

impl CallRecord {
    /// The row of `details.calls`, with Pi's keys in Pi's order.
    pub fn to_json(&self) -> Value {
        let mut row = serde_json::Map::new();
        row.insert("id".into(), self.id.clone().into());
        row.insert("name".into(), self.name.clone().into());
        row.insert("args".into(), self.args.clone().into());
        row.insert("status".into(), self.status.into());
        if let Some(ms) = self.duration_ms {
            row.insert("durationMs".into(), ms.into());
        }
        if let Some(error) = &self.error {
            row.insert("error".into(), error.clone().into());
        }
        Value::Object(row)
    }
}

/// The sandbox host of one script.
pub struct ScriptHost {
    pub tools: Vec<Callable>,
    pub ctx: ToolContext,
    pub call_id: String,
    pub calls: Arc<Mutex<Vec<CallRecord>>>,
    /// Tool calls made so far (the `n` of `<callId>/<n>`).
    pub tool_calls: std::sync::atomic::AtomicUsize,
    /// A snapshot of `calls` whenever they changed, so the tool publishes every state (a
    /// call that starts and ends between two polls is still seen running).
    pub changed: tokio::sync::mpsc::UnboundedSender<Vec<Value>>,
}

impl ScriptHost {
    fn calls_changed(&self) {
        let rows = self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(CallRecord::to_json)
            .collect();
        let _ = self.changed.send(rows);
    }
}

/// The discovery globals every script has.
pub fn discovery_globals() -> Vec<SandboxGlobal> {
    ["searchTools", "describeTool", "describeNamespace"]
        .iter()
        .map(|name| SandboxGlobal {
            name: (*name).to_string(),
            spread: true,
        })
        .collect()
}

const ARGS_PREVIEW_CHARS: usize = 200;
const ERROR_PREVIEW_CHARS: usize = 500;

/// `text` cut to `max` characters, the last three being `...`.
pub(super) fn preview(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        let head: String = text.chars().take(max - 3).collect();
        format!("{head}...")
    } else {
        text.to_string()
    }
}

fn preview_args(args: &Value) -> String {
    preview(&args.to_string(), ARGS_PREVIEW_CHARS)
}

fn text_of(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value a script receives for a nested call's output.
fn script_value(tool: &dyn Tool, output: ToolOutput) -> Result<Value, String> {
    if tool.output_schema().is_some() {
        if let Some(structured) = output.structured.clone() {
            return Ok(structured);
        }
        // `read` of an image: the image block the model would see, with its note.
        if !output.is_error {
            if let Some((data, mime_type)) = output.content.iter().find_map(|b| match b {
                ContentBlock::Image { data, mime_type } => Some((data, mime_type)),
                ContentBlock::Text(_) => None,
            }) {
                return Ok(
                    json!({"type": "image", "data": data, "mimeType": mime_type, "note": text_of(&output)}),
                );
            }
        }
    }
    let text = text_of(&output);
    if output.is_error {
        return Err(if text.is_empty() {
            format!("Tool \"{}\" failed", tool.name())
        } else {
            text
        });
    }
    Ok(Value::String(text))
}

#[async_trait::async_trait]
impl SandboxHost for ScriptHost {
    async fn call_tool(
        &self,
        name: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> Result<Value, String> {
        let Some(callable) = self.tools.iter().find(|c| c.tool.name() == name) else {
            return Err(format!("Tool {name} not found"));
        };
        let index = {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            calls.push(CallRecord {
                id: format!("{}/?", self.call_id),
                name: name.to_string(),
                args: preview_args(&args),
                status: "running",
                duration_ms: None,
                error: None,
            });
            calls.len() - 1
        };
        self.calls_changed();
        let n = self
            .tool_calls
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        let nested_id = format!("{}/{n}", self.call_id);
        let started = std::time::Instant::now();
        let output = match &self.ctx.session {
            Some(session) => {
                let call = NestedCallRequest {
                    parent_call_id: &self.call_id,
                    call_id: &nested_id,
                    name,
                    tool: Some(callable.tool.clone()),
                    args,
                };
                session
                    .run_nested_call(
                        call,
                        &self.ctx,
                        cancel.clone(),
                        &crate::tools::ignore_updates,
                    )
                    .await
                    .output
            }
            // Outside a session (tests of the sandbox alone) nobody hooks or watches calls.
            None => {
                let tools = [callable.tool.clone()];
                run_tool_call(
                    &tools,
                    &nested_id,
                    name,
                    args,
                    &self.ctx,
                    cancel.clone(),
                    &crate::tools::ignore_updates,
                )
                .await
            }
        };
        let error_text = text_of(&output);
        {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(record) = calls.get_mut(index) {
                record.id = nested_id;
                record.duration_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
                record.status = if !output.is_error {
                    "ok"
                } else if cancel.is_cancelled() {
                    "cancelled"
                } else {
                    "error"
                };
                if output.is_error {
                    let text = if error_text.is_empty() {
                        format!("Tool \"{name}\" failed")
                    } else {
                        error_text
                    };
                    record.error = Some(preview(&text, ERROR_PREVIEW_CHARS));
                }
            }
        }
        self.calls_changed();
        script_value(callable.tool.as_ref(), output)
    }

    async fn call_global(&self, name: &str, args: Value) -> Result<Option<Value>, String> {
        let args = args.as_array().cloned().unwrap_or_default();
        let arg = |i: usize| args.get(i).cloned().unwrap_or(Value::Null);
        match name {
            "searchTools" => {
                let Value::String(query) = arg(0) else {
                    return Err("searchTools() expects a query string".into());
                };
                let options = arg(1);
                let limit = match options.get("limit") {
                    None | Some(Value::Null) => search::DEFAULT_SEARCH_LIMIT,
                    Some(v) => v
                        .as_f64()
                        .filter(|f| f.fract() == 0.0 && *f > 0.0)
                        .map(|f| f as usize)
                        .ok_or("searchTools() limit must be a positive integer")?,
                };
                let namespace = match options.get("namespace") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(_) => return Err("searchTools() namespace must be a string".into()),
                };
                let documents: Vec<search::SearchDocument> = self
                    .tools
                    .iter()
                    .filter(|c| match (&namespace, &c.namespace) {
                        (Some(wanted), Some(ns)) if !wanted.is_empty() => ns.is_named(wanted),
                        (Some(wanted), None) if !wanted.is_empty() => false,
                        _ => true,
                    })
                    .map(|c| {
                        search::SearchDocument::new(
                            c.tool.name(),
                            c.tool.description(),
                            c.tool.parameters(),
                            c.namespace.as_ref().map(|ns| {
                                (
                                    ns.name.as_str(),
                                    ns.description.as_deref().unwrap_or(""),
                                    ns.instructions.as_deref().unwrap_or(""),
                                )
                            }),
                        )
                    })
                    .collect();
                let found = search::rank(&query, &documents, limit);
                Ok(Some(Value::Array(
                    found
                        .iter()
                        .map(|name| {
                            let sample = self
                                .tools
                                .iter()
                                .find(|c| c.tool.name() == name)
                                .map(|c| c.sample.clone())
                                .unwrap_or_default();
                            json!({"name": js_identifier(name), "description": sample})
                        })
                        .collect(),
                )))
            }
            "describeTool" => {
                let Value::String(wanted) = arg(0) else {
                    return Err("describeTool() expects a tool name".into());
                };
                Ok(self
                    .tools
                    .iter()
                    .find(|c| c.tool.name() == wanted || js_identifier(c.tool.name()) == wanted)
                    .map(|c| Value::String(c.sample.clone())))
            }
            "describeNamespace" => {
                let Value::String(wanted) = arg(0) else {
                    return Err("describeNamespace() expects a namespace name".into());
                };
                let mut found: Option<&Namespace> = None;
                let mut names = Vec::new();
                for callable in &self.tools {
                    let Some(ns) = callable
                        .namespace
                        .as_ref()
                        .filter(|ns| ns.is_named(&wanted))
                    else {
                        continue;
                    };
                    found.get_or_insert(ns);
                    names.push(Value::String(js_identifier(callable.tool.name())));
                }
                Ok(found.map(|ns| {
                    let mut out = serde_json::Map::new();
                    out.insert("name".into(), Value::String(ns.name.clone()));
                    if let Some(d) = ns.description.as_ref().filter(|d| !d.is_empty()) {
                        out.insert("description".into(), Value::String(d.clone()));
                    }
                    if let Some(i) = ns.instructions.as_ref().filter(|i| !i.is_empty()) {
                        out.insert("instructions".into(), Value::String(i.clone()));
                    }
                    out.insert("tools".into(), Value::Array(names));
                    Value::Object(out)
                }))
            }
            other if other.starts_with("models.") => {
                super::models::call(self.ctx.session.as_deref(), other, &args)
            }
            other => Err(format!("Unknown global {other}")),
        }
    }
}
