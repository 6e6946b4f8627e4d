//! An MCP server tool as an ordinary tool of the agent loop (Pi's `createMcpToolDefinition`):
//! its calls and results are plain `toolCall`/`toolResult` entries in the session file.
//!
//! Results are converted from the wire JSON of `CallToolResult`: text and images pass
//! through, embedded resources become text or images, other blocks a short placeholder; text
//! over 20 KB keeps its start and end around a `…N chars truncated…` marker and the whole text
//! goes to a temp file named in the result. `isError` results are error results.

use std::sync::Arc;

use serde_json::json;
use serde_json::Map;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::McpServer;
use super::client::ProgressFn;
use crate::tools::ContentBlock;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolNamespace;
use crate::tools::ToolOutput;
use crate::tools::ToolUpdateFn;

/// Model-facing MCP text beyond this many bytes is cut in the middle.
pub const MCP_OUTPUT_MAX_BYTES: usize = 20 * 1024;

/// One server tool, registered as `mcp__<server>__<tool>`.
#[derive(Debug)]
pub struct McpTool {
    name: String,
    label: String,
    description: String,
    parameters: Value,
    output_schema: Value,
    server: Arc<McpServer>,
    tool: String,
    /// The server's namespace (`mcp__<server>`, alias the server name).
    namespace: ToolNamespace,
    /// The tool's boolean annotation hints, when it has any.
    annotations: Option<Map<String, Value>>,
}

impl McpTool {
    /// The tool `tool` of `server`, registered as `name`.
    pub fn new(name: String, server: Arc<McpServer>, tool: &rmcp::model::Tool) -> McpTool {
        let title = tool
            .title
            .clone()
            .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()));
        let description = tool
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .or(title)
            .unwrap_or_else(|| format!("MCP tool {} from server {}", tool.name, server.name()));
        let annotations: Map<String, Value> = tool
            .annotations
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok())
            .map(|a| {
                crate::tools::ANNOTATION_HINTS
                    .iter()
                    .filter_map(|hint| {
                        a.get(*hint)
                            .filter(|v| v.is_boolean())
                            .map(|v| (hint.to_string(), v.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        McpTool {
            namespace: server_namespace(&server),
            annotations: (!annotations.is_empty()).then_some(annotations),
            label: format!("{}/{}", server.name(), tool.name),
            name,
            description,
            parameters: normalize_input_schema(&tool.input_schema),
            output_schema: mcp_result_schema(tool.output_schema.as_deref()),
            tool: tool.name.to_string(),
            server,
        }
    }
}

/// The namespace of an MCP server's tools: `mcp__<server>` (alias the server name), its
/// configured description or the first line of its instructions, and its instructions.
pub fn server_namespace(server: &McpServer) -> ToolNamespace {
    let instructions = server.status().instructions.clone();
    let description = server
        .entry
        .config
        .description
        .clone()
        .filter(|d| !d.trim().is_empty())
        .or_else(|| {
            instructions
                .as_deref()
                .and_then(|i| i.trim().lines().next())
                .map(str::to_string)
        });
    ToolNamespace {
        name: super::config::mcp_namespace(server.name()),
        aliases: vec![server.name().to_string()],
        description,
        instructions,
    }
}

/// What codemode scripts receive from every MCP tool (Pi's `createMcpResultSchema`): the
/// `CallToolResult` with the tool's own output schema as `structuredContent`, whose local
/// references are rewritten to point below it.
pub fn mcp_result_schema(structured: Option<&Map<String, Value>>) -> Value {
    let structured = structured
        .map(|s| relocate_refs(&Value::Object(s.clone()), "#/properties/structuredContent"))
        .unwrap_or_else(|| json!({}));
    json!({
        "type": "object",
        "properties": {
            "content": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "type": {"enum": ["text", "image", "audio", "resource_link", "resource"]},
                    "text": {"type": "string"},
                    "data": {"type": "string"},
                    "mimeType": {"type": "string"}
                },
                "required": ["type"],
                "additionalProperties": true
            }},
            "structuredContent": structured,
            "isError": {"type": "boolean"}
        },
        "required": ["content"],
        "additionalProperties": true
    })
}

/// `schema` with its local `$ref`s moved below `pointer` (values of `const`, `enum`,
/// `default` and `examples` are data and stay as they are).
fn relocate_refs(schema: &Value, pointer: &str) -> Value {
    match schema {
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| relocate_refs(i, pointer)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let moved = match (key.as_str(), value) {
                        ("$ref", Value::String(r)) if r == "#" || r.starts_with("#/") => {
                            Value::String(format!("{pointer}{}", &r[1..]))
                        }
                        ("const" | "enum" | "default" | "examples", v) => v.clone(),
                        (_, v) => relocate_refs(v, pointer),
                    };
                    (key.clone(), moved)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Tool parameters must be an object schema with `properties` (some providers insist).
pub fn normalize_input_schema(schema: &Map<String, Value>) -> Value {
    let mut out = schema.clone();
    out.entry("type").or_insert_with(|| Value::from("object"));
    out.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Value::Object(out)
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn namespace(&self) -> Option<&ToolNamespace> {
        Some(&self.namespace)
    }

    fn annotations(&self) -> Option<&Map<String, Value>> {
        self.annotations.as_ref()
    }

    /// Registered by Pi's built-in MCP extension.
    fn source_info(&self) -> Value {
        crate::config::SourceInfo::builtin_json("mcp")
    }

    fn label(&self) -> &str {
        &self.label
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn output_schema(&self) -> Option<&Value> {
        Some(&self.output_schema)
    }

    async fn execute(
        &self,
        _call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let status = self.server.status();
        if status.state == super::client::ConnState::Connected
            && !status.tools.iter().any(|t| t.name == self.tool)
        {
            // The server announced a new tool list without this tool.
            return Err(ToolError::new(format!(
                "MCP tool {} is no longer offered by server {}",
                self.tool,
                self.server.name()
            )));
        }
        let arguments = match args {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<String>();
        let progress: ProgressFn = Arc::new(move |p| {
            let total = p
                .total
                .map(|t| format!("/{}", js_number(t)))
                .unwrap_or_default();
            let text = p
                .message
                .clone()
                .unwrap_or_else(|| format!("Progress {}{total}", js_number(p.progress)));
            let _ = sender.send(text);
        });
        let call = self
            .server
            .call_tool(&self.tool, arguments, cancel.clone(), progress);
        tokio::pin!(call);
        let details = json!({"server": self.server.name(), "tool": self.tool});
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                Some(text) = receiver.recv() => on_update(ToolOutput {
                    content: vec![ContentBlock::Text(text)],
                    details: Some(details.clone()),
                    is_error: false,
                    structured: None,
                    usage: None,
                }),
            }
        };
        let result = result.map_err(ToolError::new)?;
        let wire = serde_json::to_value(&result).unwrap_or(Value::Null);
        let readable = status.has_resources
            && self.server.enabled()
            && self.server.exposure() != super::config::Exposure::Hidden;
        Ok(convert_result_with(
            self.server.name(),
            &self.tool,
            &wire,
            ctx.temp_dir.as_deref(),
            readable,
        ))
    }
}

/// A number as JavaScript prints it (`3`, not `3.0`).
fn js_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// Blobs of these types are shown as text (Pi's `isTextMimeType`).
fn is_text_mime_type(mime: &str) -> bool {
    let kind = mime
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    kind.starts_with("text/")
        || kind == "application/json"
        || kind.ends_with("+json")
        || kind.ends_with("+xml")
}

/// The extension of a saved binary resource: the one its URI's path ends in, else `.bin`.
fn extension_of(uri: &str) -> String {
    let path = reqwest::Url::parse(uri)
        .map(|u| u.path().to_string())
        .unwrap_or_else(|_| uri.to_string());
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    if !ext.is_empty() && ext.len() <= 8 && ext.chars().all(|c| c.is_ascii_alphanumeric()) {
        format!(".{ext}")
    } else {
        ".bin".to_string()
    }
}

/// What a content block becomes before the generic conversion: a resource link names
/// `read_mcp_resource` when its server's resources are readable, and a binary embedded resource
/// that is not an image is shown as text (text types) or saved to a temp file (Pi's
/// `blockToContent`).
fn special_block(
    server: &str,
    block: &Value,
    temp_dir: Option<&std::path::Path>,
    readable_resources: bool,
) -> Option<ContentBlock> {
    use base64::Engine as _;
    let kind = block.get("type").and_then(Value::as_str)?;
    if kind == "resource_link" && readable_resources {
        if let ContentBlock::Text(text) = block_to_content(block) {
            let body = text.strip_suffix(']').unwrap_or(&text);
            return Some(ContentBlock::Text(format!(
                "{body}. Read it with {} (server \"{server}\")]",
                super::resources::READ_MCP_RESOURCE_TOOL
            )));
        }
    }
    let resource = block.get("resource").filter(|_| kind == "resource")?;
    let blob = resource.get("blob").and_then(Value::as_str)?;
    let mime = resource.get("mimeType").and_then(Value::as_str);
    if mime.is_some_and(|m| m.starts_with("image/")) {
        return None;
    }
    let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
    let data = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .unwrap_or_default();
    if mime.is_some_and(is_text_mime_type) {
        return Some(ContentBlock::Text(
            String::from_utf8_lossy(&data).into_owned(),
        ));
    }
    let what = format!(
        "{}, {}",
        mime.unwrap_or("unknown type"),
        crate::tools::format_size(data.len())
    );
    let saved =
        crate::tools::output::write_output_file("pi-mcp", &extension_of(uri), &data, temp_dir);
    Some(ContentBlock::Text(match saved {
        Ok(path) => format!(
            "[Binary resource {uri} ({what}) saved to {}]",
            path.display()
        ),
        Err(e) => format!("[Binary resource {uri} ({what}) could not be saved: {e}]"),
    }))
}

/// The model-facing content of one wire content block.
fn block_to_content(block: &Value) -> ContentBlock {
    let text = |s: &str| ContentBlock::Text(s.to_string());
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => text(field("text")),
        "image" => ContentBlock::Image {
            data: field("data").to_string(),
            mime_type: field("mimeType").to_string(),
        },
        "audio" => text(&format!("[audio {} omitted]", field("mimeType"))),
        "resource_link" => {
            let title = block
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or(field("name"));
            let description = block
                .get("description")
                .and_then(Value::as_str)
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            let mut facts: Vec<String> = Vec::new();
            if let Some(mime) = block.get("mimeType").and_then(Value::as_str) {
                facts.push(mime.to_string());
            }
            if let Some(size) = block.get("size").and_then(Value::as_u64) {
                facts.push(crate::tools::format_size(size as usize));
            }
            let facts = if facts.is_empty() {
                String::new()
            } else {
                format!(" ({})", facts.join(", "))
            };
            text(&format!(
                "[Resource {} \"{title}\"{facts}{description}]",
                field("uri")
            ))
        }
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let get = |name: &str| resource.get(name).and_then(Value::as_str);
            if let Some(t) = get("text") {
                return text(t);
            }
            let mime = get("mimeType").unwrap_or("");
            if mime.starts_with("image/") {
                return ContentBlock::Image {
                    data: get("blob").unwrap_or("").to_string(),
                    mime_type: mime.to_string(),
                };
            }
            text(&format!(
                "[binary resource {} ({}) omitted]",
                get("uri").unwrap_or(""),
                if mime.is_empty() {
                    "unknown type"
                } else {
                    mime
                }
            ))
        }
        other => text(&format!("[unsupported MCP content {other}]")),
    }
}

/// Converts a `CallToolResult` (wire JSON) into the tool output the model sees.
pub fn convert_result(
    server: &str,
    tool: &str,
    result: &Value,
    temp_dir: Option<&std::path::Path>,
) -> ToolOutput {
    convert_result_with(server, tool, result, temp_dir, false)
}

/// [`convert_result`]; `readable_resources` when the resource tools reach `server`, so its
/// resource links name `read_mcp_resource`.
pub fn convert_result_with(
    server: &str,
    tool: &str,
    result: &Value,
    temp_dir: Option<&std::path::Path>,
    readable_resources: bool,
) -> ToolOutput {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut content: Vec<ContentBlock> = blocks
        .iter()
        .map(|b| {
            special_block(server, b, temp_dir, readable_resources)
                .unwrap_or_else(|| block_to_content(b))
        })
        .collect();
    if content.is_empty() {
        if let Some(structured) = result.get("structuredContent") {
            let pretty = serde_json::to_string_pretty(structured).unwrap_or_default();
            content.push(ContentBlock::Text(pretty));
        }
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let text_of = |content: &[ContentBlock]| {
        content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    };
    if is_error && text_of(&content).is_empty() {
        content.push(ContentBlock::Text(format!(
            "MCP tool {server}/{tool} returned an error"
        )));
    }
    let mut details = json!({"server": server, "tool": tool});
    let combined = text_of(&content);
    if let Some(cut) = truncate_middle(&combined, MCP_OUTPUT_MAX_BYTES) {
        let saved = crate::tools::output::write_output_file(
            "pi-mcp",
            ".txt",
            combined.as_bytes(),
            temp_dir,
        );
        let where_ = match saved {
            Ok(path) => {
                details["fullOutputPath"] = Value::from(path.display().to_string());
                format!(
                    "\n\n[Full output: {} (read it with offset/limit)]",
                    path.display()
                )
            }
            Err(e) => format!("\n\n[Could not save the full output: {e}]"),
        };
        let tokens = cut.total_bytes.div_ceil(4);
        let text = format!(
            "Warning: truncated output (original token count: {tokens})\nTotal output lines: {}\n\n{}{where_}",
            cut.total_lines, cut.content
        );
        let images = content
            .into_iter()
            .filter(|b| matches!(b, ContentBlock::Image { .. }));
        content = std::iter::once(ContentBlock::Text(text))
            .chain(images)
            .collect();
    }
    let mut structured = result.clone();
    if let Value::Object(map) = &mut structured {
        map.remove("_meta");
    }
    ToolOutput {
        content,
        details: Some(details),
        is_error,
        structured: Some(structured),
        usage: None,
    }
}

/// A text cut in the middle.
#[derive(Debug, PartialEq, Eq)]
pub struct MiddleCut {
    /// Head, marker, tail.
    pub content: String,
    /// UTF-8 bytes of the whole text.
    pub total_bytes: usize,
    /// Lines of the whole text (a final newline ends the last line).
    pub total_lines: usize,
}

/// Keeps half of `max_bytes` from each end of `text` with a `…N chars truncated…` marker
/// between, cutting only at character boundaries; `None` when `text` fits.
pub fn truncate_middle(text: &str, max_bytes: usize) -> Option<MiddleCut> {
    if text.len() <= max_bytes {
        return None;
    }
    let mut head_end = max_bytes / 2;
    while head_end > 0 && !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - (max_bytes - max_bytes / 2);
    while tail_start < text.len() && !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    // Counted in characters (code points), as Pi counts them.
    let removed = text[head_end..tail_start].chars().count();
    let lines = text.split('\n').count() - usize::from(text.ends_with('\n'));
    Some(MiddleCut {
        content: format!(
            "{}…{removed} chars truncated…{}",
            &text[..head_end],
            &text[tail_start..]
        ),
        total_bytes: text.len(),
        total_lines: lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_in_the_middle_and_saved() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{}\n{}", "a".repeat(15000), "b".repeat(15000));
        let result = json!({"content": [{"type": "text", "text": text}], "_meta": {"x": 1}});
        let out = convert_result("s", "t", &result, Some(dir.path()));
        let shown = out.first_text();
        assert!(shown.starts_with(
            "Warning: truncated output (original token count: 7501)\nTotal output lines: 2\n\n"
        ));
        assert!(
            shown.contains("…9521 chars truncated…"),
            "{}",
            &shown[..200]
        );
        let path = out.details.as_ref().unwrap()["fullOutputPath"]
            .as_str()
            .unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), text);
        assert!(shown.ends_with(&format!(
            "[Full output: {path} (read it with offset/limit)]"
        )));
        assert!(out.structured.unwrap().get("_meta").is_none());
    }

    #[test]
    fn binary_resources_go_to_temp_files_and_links_name_the_resource_tool() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        let blob = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let result = json!({"content": [
            {"type": "resource", "resource": {"uri": "x://a/data.bin", "mimeType": "application/octet-stream", "blob": blob(&[0, 1, 2])}},
            {"type": "resource", "resource": {"uri": "x://b", "mimeType": "application/json; charset=utf-8", "blob": blob(b"{\"k\":1}")}},
            {"type": "resource_link", "uri": "x://c", "name": "c"}
        ]});
        let out = convert_result_with("srv", "t", &result, Some(dir.path()), true);
        let texts: Vec<&str> = out
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect();
        let saved = texts[0]
            .strip_prefix(
                "[Binary resource x://a/data.bin (application/octet-stream, 3B) saved to ",
            )
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or_else(|| panic!("{}", texts[0]));
        assert!(saved.ends_with(".bin"), "{saved}");
        assert_eq!(std::fs::read(saved).unwrap(), [0, 1, 2]);
        assert_eq!(texts[1], "{\"k\":1}");
        assert_eq!(
            texts[2],
            "[Resource x://c \"c\". Read it with read_mcp_resource (server \"srv\")]"
        );
        // Without readable resources the link is as before.
        let out = convert_result_with("srv", "t", &result, Some(dir.path()), false);
        assert_eq!(
            out.content[2],
            ContentBlock::Text("[Resource x://c \"c\"]".into())
        );
    }

    #[test]
    fn blocks_errors_and_structured_content() {
        let result = json!({"content": [], "isError": true});
        let out = convert_result("s", "t", &result, None);
        assert!(out.is_error);
        assert_eq!(out.first_text(), "MCP tool s/t returned an error");
        let result = json!({"content": [], "structuredContent": {"a": 1}});
        assert_eq!(
            convert_result("s", "t", &result, None).first_text(),
            "{\n  \"a\": 1\n}"
        );
        let result = json!({"content": [
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "u", "text": "inner"}},
            {"type": "audio", "data": "", "mimeType": "audio/wav"}
        ]});
        let out = convert_result("s", "t", &result, None);
        assert_eq!(out.content.len(), 3);
        assert_eq!(out.content[1], ContentBlock::Text("inner".into()));
        assert_eq!(
            out.content[2],
            ContentBlock::Text("[audio audio/wav omitted]".into())
        );
        assert_eq!(
            truncate_middle("é".repeat(20).as_str(), 9).unwrap().content,
            "éé…16 chars truncated…éé"
        );
    }
}
