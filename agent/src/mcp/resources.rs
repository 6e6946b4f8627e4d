//! MCP resources through the tools Codex and OpenCode use (Pi 1.6.0's `resources.ts`):
//! `list_mcp_resources`, `list_mcp_resource_templates` and `read_mcp_resource`.
//!
//! They reach every enabled server with resources whose exposure is not `hidden`, and take a
//! `server` argument. Listings are compact JSON `{server?, resources: [{server, ...}],
//! nextCursor?}`: with `server` one page (`cursor` continues it), without every page of every
//! server (servers that fail are listed under `errors`). MCP App resources (`ui://` URIs,
//! `profile=mcp-app` HTML) and icons are left out. A read resource becomes text and images
//! for the model, other binary data a temp file; scripts get `{server, uri, contents}`. Their
//! exposure is the widest of the servers they reach: `direct`, then `codemode`, `deferred`.
//! They wait for every server first, and listing and reading are tried once more after a
//! transient HTTP error (they have no effects).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use serde_json::Map;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::ConnState;
use super::client::McpServer;
use super::config::Exposure;
use super::McpManager;
use crate::tools::Tool;
use crate::tools::ToolContext;
use crate::tools::ToolError;
use crate::tools::ToolOutput;
use crate::tools::ToolUpdateFn;

/// `list_mcp_resources`.
pub const LIST_MCP_RESOURCES_TOOL: &str = "list_mcp_resources";
/// `list_mcp_resource_templates`.
pub const LIST_MCP_RESOURCE_TEMPLATES_TOOL: &str = "list_mcp_resource_templates";
/// `read_mcp_resource`.
pub const READ_MCP_RESOURCE_TOOL: &str = "read_mcp_resource";

/// Whether `name` is one of the resource tools.
pub fn is_resource_tool(name: &str) -> bool {
    [
        LIST_MCP_RESOURCES_TOOL,
        LIST_MCP_RESOURCE_TEMPLATES_TOOL,
        READ_MCP_RESOURCE_TOOL,
    ]
    .contains(&name)
}

/// Connected, enabled servers with resources whose exposure is not `hidden`, in
/// configuration order.
pub fn resource_servers(mcp: &McpManager) -> Vec<Arc<McpServer>> {
    mcp.servers()
        .iter()
        .filter(|s| s.enabled() && s.exposure() != Exposure::Hidden)
        .filter(|s| {
            let status = s.status();
            status.has_resources && status.state != ConnState::Failed
        })
        .cloned()
        .collect()
}

/// The resource tools' exposure: the widest of the servers they reach (`direct`, then
/// `codemode`, then `deferred`); `None` while no server has resources.
pub fn exposure(mcp: &McpManager) -> Option<Exposure> {
    let exposures: Vec<Exposure> = resource_servers(mcp).iter().map(|s| s.exposure()).collect();
    [Exposure::Direct, Exposure::Codemode, Exposure::Deferred]
        .into_iter()
        .find(|e| exposures.contains(e))
}

/// The three resource tools over `mcp`'s servers.
pub fn resource_tools(mcp: &Arc<McpManager>) -> Vec<Arc<dyn Tool>> {
    [Kind::List, Kind::Templates, Kind::Read]
        .into_iter()
        .map(|kind| {
            Arc::new(ResourceTool {
                kind,
                mcp: mcp.clone(),
            }) as Arc<dyn Tool>
        })
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    List,
    Templates,
    Read,
}

/// One of the resource tools.
#[derive(Debug)]
pub struct ResourceTool {
    kind: Kind,
    mcp: Arc<McpManager>,
}

fn string_property(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn list_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "server": string_property("MCP server name. Omit to list every server with resources."),
            "cursor": string_property("Opaque cursor from a previous call with the same server; omit for the first page.")
        },
        "additionalProperties": false
    })
}

fn read_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "server": string_property("MCP server name exactly as configured. Must match the 'server' field returned by list_mcp_resources."),
            "uri": string_property("Resource URI to read. Must be one of the URIs returned by list_mcp_resources.")
        },
        "required": ["server", "uri"],
        "additionalProperties": false
    })
}

fn listing_errors() -> Value {
    json!({
        "type": "array",
        "description": "Servers that could not be listed",
        "items": {
            "type": "object",
            "properties": {"server": {"type": "string"}, "error": {"type": "string"}},
            "required": ["server", "error"]
        }
    })
}

fn list_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "server": {"type": "string"},
            "resources": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "server": {"type": "string"},
                    "uri": {"type": "string"},
                    "name": {"type": "string"},
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "mimeType": {"type": "string"},
                    "size": {"type": "number"}
                },
                "required": ["server", "uri", "name"]
            }},
            "nextCursor": {"type": "string"},
            "errors": listing_errors()
        },
        "required": ["resources"]
    })
}

fn templates_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "server": {"type": "string"},
            "resourceTemplates": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "server": {"type": "string"},
                    "uriTemplate": {"type": "string", "description": "RFC 6570 URI template"},
                    "name": {"type": "string"},
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "mimeType": {"type": "string"}
                },
                "required": ["server", "uriTemplate", "name"]
            }},
            "nextCursor": {"type": "string"},
            "errors": listing_errors()
        },
        "required": ["resourceTemplates"]
    })
}

fn read_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "server": {"type": "string"},
            "uri": {"type": "string"},
            "contents": {"type": "array", "items": {"anyOf": [
                {
                    "type": "object",
                    "properties": {"uri": {"type": "string"}, "mimeType": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["uri", "text"]
                },
                {
                    "type": "object",
                    "properties": {
                        "uri": {"type": "string"},
                        "mimeType": {"type": "string"},
                        "blob": {"type": "string", "description": "base64"}
                    },
                    "required": ["uri", "blob"]
                }
            ]}}
        },
        "required": ["server", "uri", "contents"]
    })
}

/// Schemas are built once per kind.
fn schemas(kind: Kind) -> &'static (Value, Value) {
    use std::sync::OnceLock;
    static LIST: OnceLock<(Value, Value)> = OnceLock::new();
    static TEMPLATES: OnceLock<(Value, Value)> = OnceLock::new();
    static READ: OnceLock<(Value, Value)> = OnceLock::new();
    match kind {
        Kind::List => LIST.get_or_init(|| (list_parameters(), list_output_schema())),
        Kind::Templates => TEMPLATES.get_or_init(|| (list_parameters(), templates_output_schema())),
        Kind::Read => READ.get_or_init(|| (read_parameters(), read_output_schema())),
    }
}

/// An optional string argument, trimmed; blank counts as absent.
fn string_argument(args: &Value, key: &str) -> Result<Option<String>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Some(_) => Err(ToolError::new(format!("{key} must be a string"))),
    }
}

/// MCP App user interfaces, which only hosts that render them can use.
fn is_mcp_app_resource(item: &Value) -> bool {
    let uri = item
        .get("uri")
        .or_else(|| item.get("uriTemplate"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mime = item
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let profile = mime.split(';').skip(1).any(|param| {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        key.trim() == "profile" && value.trim().trim_matches('"') == "mcp-app"
    });
    uri.starts_with("ui://") || profile
}

/// A listed item without `_meta` and icons, tagged with its server.
fn listed(server: &str, item: &Value) -> Value {
    let mut out = Map::new();
    out.insert("server".into(), Value::from(server));
    if let Value::Object(map) = item {
        for (key, value) in map {
            if key != "_meta" && key != "icons" {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// The message of a failed request.
fn request_error(error: &rmcp::ServiceError) -> String {
    match error {
        rmcp::ServiceError::McpError(data) => data.message.to_string(),
        rmcp::ServiceError::TransportClosed => "MCP connection closed".to_string(),
        other => other.to_string(),
    }
}

fn is_method_not_found(error: &rmcp::ServiceError) -> bool {
    matches!(error, rmcp::ServiceError::McpError(data)
        if data.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND)
}

/// One request to `server`: connects when needed, times out after the server's `timeout`,
/// and is sent once more after a transient HTTP error.
async fn request<T, F, Fut>(server: &Arc<McpServer>, send: F) -> Result<T, String>
where
    F: Fn(rmcp::Peer<rmcp::RoleClient>) -> Fut,
    Fut: std::future::Future<Output = Result<T, rmcp::ServiceError>>,
{
    let timeout = Duration::from_secs_f64(server.entry.config.timeout_secs);
    let mut attempt = 0;
    loop {
        let peer = server.connect().await?;
        match tokio::time::timeout(timeout, send(peer)).await {
            Err(_) => {
                return Err(format!(
                    "MCP request timed out after {}ms",
                    timeout.as_millis()
                ))
            }
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(e)) if attempt == 0 && super::client::is_transient(&e) => attempt += 1,
            Ok(Err(e)) => return Err(request_error(&e)),
        }
    }
}

/// One page of `server`'s resources (or templates): `(items, nextCursor)`.
async fn page(
    kind: Kind,
    server: &Arc<McpServer>,
    cursor: Option<String>,
) -> Result<(Vec<Value>, Option<String>), String> {
    let params = Some(rmcp::model::PaginatedRequestParams::default().with_cursor(cursor));
    let (value, key) = if kind == Kind::Templates {
        let result = request(server, |peer| {
            let params = params.clone();
            async move {
                match peer.list_resource_templates(params).await {
                    Err(e) if is_method_not_found(&e) => {
                        // Servers without `resources/templates/list` have no templates.
                        Ok(json!({"resourceTemplates": []}))
                    }
                    other => other.map(|r| serde_json::to_value(r).unwrap_or(Value::Null)),
                }
            }
        })
        .await?;
        (result, "resourceTemplates")
    } else {
        let result = request(server, |peer| {
            let params = params.clone();
            async move {
                peer.list_resources(params)
                    .await
                    .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            }
        })
        .await?;
        (result, "resources")
    };
    let items = value
        .get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let next = value
        .get("nextCursor")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok((items, next))
}

/// Every page of `server`'s resources (or templates).
async fn all_pages(kind: Kind, server: &Arc<McpServer>) -> Result<Vec<Value>, String> {
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let (mut found, next) = page(kind, server, cursor).await?;
        items.append(&mut found);
        match next {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(items),
        }
    }
}

impl ResourceTool {
    fn find_server(&self, name: &str) -> Result<Arc<McpServer>, ToolError> {
        let servers = resource_servers(&self.mcp);
        if let Some(server) = servers.iter().find(|s| s.name() == name) {
            return Ok(server.clone());
        }
        let available: Vec<&str> = servers.iter().map(|s| s.name()).collect();
        Err(ToolError::new(format!(
            "MCP server \"{name}\" has no resources{}",
            if available.is_empty() {
                String::new()
            } else {
                format!(". Servers with resources: {}", available.join(", "))
            }
        )))
    }

    async fn list(&self, args: &Value) -> Result<Value, ToolError> {
        let key = if self.kind == Kind::Templates {
            "resourceTemplates"
        } else {
            "resources"
        };
        let server_name = string_argument(args, "server")?;
        let cursor = string_argument(args, "cursor")?;
        let visible = |item: &&Value| !is_mcp_app_resource(item);
        if let Some(name) = server_name {
            let server = self.find_server(&name)?;
            let (items, next) = page(self.kind, &server, cursor)
                .await
                .map_err(ToolError::new)?;
            let mut payload = Map::new();
            payload.insert("server".into(), Value::from(server.name()));
            payload.insert(
                key.into(),
                items
                    .iter()
                    .filter(visible)
                    .map(|i| listed(server.name(), i))
                    .collect(),
            );
            if let Some(next) = next {
                payload.insert("nextCursor".into(), Value::from(next));
            }
            return Ok(Value::Object(payload));
        }
        if cursor.is_some() {
            return Err(ToolError::new(
                "cursor can only be used when a server is specified",
            ));
        }
        let mut servers = resource_servers(&self.mcp);
        servers.sort_by_key(|s| s.name().to_lowercase());
        let results =
            futures::future::join_all(servers.iter().map(|s| all_pages(self.kind, s))).await;
        let mut items = Vec::new();
        let mut errors = Vec::new();
        for (server, result) in servers.iter().zip(results) {
            match result {
                Ok(found) => items.extend(
                    found
                        .iter()
                        .filter(visible)
                        .map(|i| listed(server.name(), i)),
                ),
                Err(error) => errors.push(json!({"server": server.name(), "error": error})),
            }
        }
        let mut payload = Map::new();
        payload.insert(key.into(), Value::Array(items));
        if !errors.is_empty() {
            payload.insert("errors".into(), Value::Array(errors));
        }
        Ok(Value::Object(payload))
    }

    async fn read(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let server_name =
            string_argument(args, "server")?.ok_or(ToolError::new("server must be provided"))?;
        let uri = string_argument(args, "uri")?.ok_or(ToolError::new("uri must be provided"))?;
        let server = self.find_server(&server_name)?;
        let result = request(&server, |peer| {
            let uri = uri.clone();
            async move {
                peer.read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
                    .await
                    .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
            }
        })
        .await
        .map_err(ToolError::new)?;
        let contents: Vec<Value> = result
            .get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|mut c| {
                if let Value::Object(map) = &mut c {
                    map.shift_remove("_meta");
                }
                c
            })
            .collect();
        // Several contents (a directory, say) are labeled with their URIs.
        let mut blocks = Vec::new();
        for item in &contents {
            if contents.len() > 1 {
                let label = item.get("uri").and_then(Value::as_str).unwrap_or("");
                blocks.push(json!({"type": "text", "text": format!("{label}:")}));
            }
            blocks.push(json!({"type": "resource", "resource": item}));
        }
        if blocks.is_empty() {
            blocks.push(json!({"type": "text", "text": format!("Resource {uri} is empty.")}));
        }
        let converted = super::tool::convert_result(
            server.name(),
            READ_MCP_RESOURCE_TOOL,
            &json!({"content": blocks}),
            ctx.temp_dir.as_deref(),
        );
        let mut details = converted.details.unwrap_or_else(|| json!({}));
        details["server"] = Value::from(server.name());
        details["tool"] = Value::from(READ_MCP_RESOURCE_TOOL);
        Ok(ToolOutput {
            content: converted.content,
            details: Some(details),
            is_error: false,
            structured: Some(json!({"server": server.name(), "uri": uri, "contents": contents})),
            usage: None,
        })
    }
}

/// A JSON payload as the model sees it (compact, cut in the middle past 20 KB) and as
/// scripts get it.
fn json_result(tool: &str, server: Option<&str>, payload: Value, ctx: &ToolContext) -> ToolOutput {
    let text = payload.to_string();
    let converted = super::tool::convert_result(
        server.unwrap_or(""),
        tool,
        &json!({"content": [{"type": "text", "text": text}]}),
        ctx.temp_dir.as_deref(),
    );
    let mut details = json!({"server": server.unwrap_or(""), "tool": tool});
    if let Some(path) = converted
        .details
        .as_ref()
        .and_then(|d| d.get("fullOutputPath"))
    {
        details["fullOutputPath"] = path.clone();
    }
    ToolOutput {
        content: converted.content,
        details: Some(details),
        is_error: false,
        structured: Some(payload),
        usage: None,
    }
}

#[async_trait::async_trait]
impl Tool for ResourceTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::List => LIST_MCP_RESOURCES_TOOL,
            Kind::Templates => LIST_MCP_RESOURCE_TEMPLATES_TOOL,
            Kind::Read => READ_MCP_RESOURCE_TOOL,
        }
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::List => "Lists resources provided by MCP servers. Resources allow servers to share data that provides context to language models, such as files, database schemas, or application-specific information. Prefer resources over web search when possible.",
            Kind::Templates => "Lists resource templates provided by MCP servers. Parameterized resource templates allow servers to share data that takes parameters and provides context to language models, such as files, database schemas, or application-specific information. Prefer resource templates over web search when possible.",
            Kind::Read => "Read a specific resource from an MCP server given the server name and resource URI.",
        }
    }

    fn parameters(&self) -> &Value {
        &schemas(self.kind).0
    }

    fn output_schema(&self) -> Option<&Value> {
        Some(&schemas(self.kind).1)
    }

    /// Registered by Pi's built-in MCP extension.
    fn source_info(&self) -> Value {
        crate::config::SourceInfo::builtin_json("mcp")
    }

    fn annotations(&self) -> Option<&serde_json::Map<String, Value>> {
        // They only read (Pi's `{ readOnlyHint: true }`).
        static READ_ONLY: std::sync::OnceLock<serde_json::Map<String, Value>> =
            std::sync::OnceLock::new();
        Some(READ_ONLY.get_or_init(|| {
            let mut hints = serde_json::Map::new();
            hints.insert("readOnlyHint".into(), Value::Bool(true));
            hints
        }))
    }

    async fn execute(
        &self,
        _call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        _on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let work = async {
            // They reach every server, so every server's first connection is waited for.
            super::tool_search::wait_for_all_servers(&self.mcp).await;
            match self.kind {
                Kind::Read => self.read(&args, ctx).await,
                Kind::List | Kind::Templates => {
                    let server = string_argument(&args, "server")?;
                    let payload = self.list(&args).await?;
                    Ok(json_result(self.name(), server.as_deref(), payload, ctx))
                }
            }
        };
        tokio::select! {
            result = work => result,
            _ = cancel.cancelled() => Err(ToolError::aborted()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_resources_and_listing_fields() {
        assert!(is_mcp_app_resource(&json!({"uri": "ui://widget"})));
        assert!(is_mcp_app_resource(
            &json!({"uri": "x://a", "mimeType": "text/html;profile=mcp-app"})
        ));
        assert!(is_mcp_app_resource(
            &json!({"uriTemplate": "x://{a}", "mimeType": "text/html; profile=\"mcp-app\""})
        ));
        assert!(!is_mcp_app_resource(
            &json!({"uri": "x://a", "mimeType": "text/html"})
        ));
        assert_eq!(
            listed(
                "s",
                &json!({"uri": "u", "name": "n", "_meta": {}, "icons": []})
            ),
            json!({"server": "s", "uri": "u", "name": "n"})
        );
    }
}
