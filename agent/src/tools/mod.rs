//! Built-in tools: `read`, `write`, `edit`, `bash` (the default set) and `grep`, `find`, `ls`.
//!
//! Every tool mirrors real Pi 1.6.0 (`pi-coding-agent/dist/core/tools/*.js`): the same JSON schema,
//! description, result texts, error texts and `details` objects, because those strings end up in
//! session files and in the model's context, where a byte of difference changes what the model
//! sees and breaks cross-compatibility with Pi sessions.
//!
//! The seam is the [`Tool`] trait. A caller (the agent loop) runs a model's tool call with
//! [`run_tool_call`], which does what Pi's agent loop does around a tool: argument preparation,
//! schema validation (with Pi's coercion and error text), execution, and turning a thrown error
//! into an `isError` result whose only content is the message.
//!
//! Which tools are active comes from [`select_builtin_tools`], which implements the `--tools`,
//! `--exclude-tools`, `--no-builtin-tools` and `--no-tools` semantics of Pi's `createAgentSession`.

mod bash;
mod bmp;
mod edit;
mod edit_diff;
mod find;
mod fs_util;
mod grep;
mod image;
mod ls;
mod mutation_queue;
mod nested_calls;
pub(crate) mod output;
mod paths;
mod read;
mod redeclared;
mod registry;
mod session_tools;
mod truncate;
mod utf8;
mod validate;
mod write;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use bash::BashTool;
pub use edit::edit_text;
pub use edit::EditTool;
pub use find::FindTool;
pub use grep::GrepTool;
pub use image::prompt_image;
pub use image::PromptImage;
pub use ls::LsTool;
pub use nested_calls::{combine_usage, NestedCallRecorder};
pub use output::remove_output_files;
pub use read::ReadTool;
pub use redeclared::Redeclared;
pub use registry::all_builtin_tools;
pub use registry::builtin_tool;
pub use registry::select_builtin_tools;
pub use registry::selected_tool_names;
pub use registry::tool_list_error;
pub use registry::NoTools;
pub use registry::ToolSelection;
pub use registry::ALL_BUILTIN_TOOL_NAMES;
pub use registry::DEFAULT_TOOL_NAMES;
pub use session_tools::keeps_tool;
pub use session_tools::select_session_tools;
pub use session_tools::RegisteredTool;
pub use session_tools::SessionTools;
pub use truncate::format_size;
pub use truncate::truncate_head;
pub use truncate::truncate_tail;
pub use truncate::TruncatedBy;
pub use truncate::TruncationResult;
pub use truncate::DEFAULT_MAX_BYTES;
pub use truncate::DEFAULT_MAX_LINES;
pub use validate::validate_tool_arguments;
pub use write::WriteTool;

/// One block of a tool result's content, as Pi stores it in a `toolResult` message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentBlock {
    /// `{"type":"text","text":…}`
    Text(String),
    /// `{"type":"image","data":<base64>,"mimeType":…}`
    Image {
        /// Base64 of the image bytes.
        data: String,
        /// For example `image/png`.
        mime_type: String,
    },
}

impl ContentBlock {
    /// The block as Pi's JSON (`{"type":"text","text":…}` or `{"type":"image",…}`).
    pub fn to_json(&self) -> Value {
        match self {
            ContentBlock::Text(text) => serde_json::json!({ "type": "text", "text": text }),
            ContentBlock::Image { data, mime_type } => {
                serde_json::json!({ "type": "image", "data": data, "mimeType": mime_type })
            }
        }
    }

    /// A block from Pi's JSON; `None` for other block types.
    pub fn from_json(block: &Value) -> Option<ContentBlock> {
        let text = |k: &str| {
            block
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => Some(ContentBlock::Text(text("text"))),
            Some("image") => Some(ContentBlock::Image {
                data: text("data"),
                mime_type: text("mimeType"),
            }),
            _ => None,
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(text) => Some(text),
            ContentBlock::Image { .. } => None,
        }
    }
}

/// What a tool call produced: the content the model sees, `details` for the UI and the session
/// file, and whether it is an error result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// Content blocks sent back to the model.
    pub content: Vec<ContentBlock>,
    /// Tool-specific details (`undefined` in Pi when `None`).
    pub details: Option<Value>,
    /// Set for results that are errors without having been thrown, such as bash's non-zero exit,
    /// and for thrown errors turned into results by [`ToolError::into_output`].
    pub is_error: bool,
    /// Machine-readable result for programmatic callers (Pi's `structuredContent`, e.g.
    /// bash's output, exit code and wall time); shown in `tool_execution_end` events, never
    /// stored in the session.
    pub structured: Option<Value>,
    /// Model usage the tool reports (Pi's `usage` on a tool result: a tool that asked a model
    /// itself); recorded on the result message together with its nested calls' usage.
    pub usage: Option<Value>,
}

impl ToolOutput {
    /// A single text block, no details.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![ContentBlock::Text(text.into())],
            details: None,
            is_error: false,
            structured: None,
            usage: None,
        }
    }

    /// The text of the first text block, or `""`.
    pub fn first_text(&self) -> &str {
        self.content
            .iter()
            .find_map(ContentBlock::as_text)
            .unwrap_or("")
    }

    /// The text blocks joined by newlines (Pi's `textOf` of a result).
    pub fn texts(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The content as Pi's JSON array.
    pub fn content_json(&self) -> Value {
        Value::Array(self.content.iter().map(ContentBlock::to_json).collect())
    }
}

/// A tool failure: Pi throws, and the agent loop turns the message into an `isError` result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// The exact text the model sees.
    pub message: String,
}

impl ToolError {
    /// An error with this exact message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
        }
    }

    /// The "Operation aborted" error Pi's tools throw when their signal fires.
    pub fn aborted() -> Self {
        ToolError::new("Operation aborted")
    }

    /// The result Pi's agent loop records for a thrown error: the message as the only content,
    /// `details: {}` and `isError: true`.
    pub fn into_output(self) -> ToolOutput {
        ToolOutput {
            content: vec![ContentBlock::Text(self.message)],
            details: Some(Value::Object(serde_json::Map::new())),
            is_error: true,
            structured: None,
            usage: None,
        }
    }
}

/// What the model running the tools can take, for the read tool's image note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolModelInfo {
    /// The model id, recorded in `details.imageUnsupportedByModel`.
    pub id: String,
    /// Whether the model accepts image input.
    pub supports_images: bool,
}

/// Everything a tool needs from its session besides its arguments.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// Directory relative paths resolve against, and where bash runs.
    pub cwd: PathBuf,
    /// Variables set for bash on top of the inherited environment (see
    /// [`ToolContext::session_env`]); Pi's `PI_SESSION_*`, `PI_PROVIDER`, `PI_MODEL` and
    /// `PI_REASONING_LEVEL` are always removed from the inherited environment first, so a nested
    /// pi never sees its parent's session.
    pub env: BTreeMap<String, String>,
    /// Directory prepended to `PATH` for bash when not already on it (Pi's `<agentDir>/bin`).
    pub bin_dir: Option<PathBuf>,
    /// Where bash writes full outputs of truncated commands; the system temp dir when `None`.
    pub temp_dir: Option<PathBuf>,
    /// `shellPath` from settings.
    pub shell_path: Option<PathBuf>,
    /// `shellCommandPrefix` from settings, run before every command.
    pub shell_command_prefix: Option<String>,
    /// The current model, when there is one.
    pub model: Option<ToolModelInfo>,
    /// The running session, for tools that keep state on the branch (codemode's `store()`)
    /// or read the model catalog (codemode's `models`); `None` outside a session.
    pub session: Option<Arc<dyn ToolSession>>,
    /// Where the calls this tool makes through other tools are recorded (Pi's
    /// `nestedCalls` on the result message); `None` when nobody records them.
    pub nested_calls: Option<Arc<NestedCallRecorder>>,
}

/// What a tool may reach of its session besides the context above.
#[async_trait::async_trait]
pub trait ToolSession: Send + Sync + fmt::Debug {
    /// The `data` of every custom entry of `custom_type` on the current branch, root first.
    fn branch_custom_data(&self, custom_type: &str) -> Vec<Value>;
    /// Appends a custom entry `{type: "custom", customType, data}` to the session.
    fn append_custom_entry(&self, custom_type: &str, data: Value) -> Result<(), String>;
    /// Every model of the session's catalog, in catalog order.
    fn catalog(&self) -> Vec<crate::llm::Model>;
    /// Whether requests to `provider` can be sent (a key, or headers that authenticate).
    fn provider_has_credentials(&self, provider: &str) -> bool;
    /// Runs `tool` for the call `parent_call_id` as `call_id` (`<parent>/<n>`) the way the
    /// session runs nested calls: validated, through the extensions' `tool_call` and
    /// `tool_result` hooks, announced by `tool_execution_*` events with `parentToolCallId`,
    /// recorded in `ctx.nested_calls`. `on_update` gets the tool's partial results. Never
    /// fails: every failure is an error result.
    async fn run_nested_call(
        &self,
        call: NestedCallRequest<'_>,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> NestedOutcome;
    /// The tools other tools may call (Pi's callable tools, `ctx.tools`): the active tools
    /// except those only the model reaches (`codemode`, `tool_search`), the tools codemode
    /// presents in their place, and every `codemode` or `deferred` MCP tool.
    fn callable_tools(&self) -> Vec<Arc<dyn Tool>>;
    /// Waits until the tools a call may reach (see [`ToolReach`]) are registered: the MCP
    /// servers they belong to finished connecting (Pi's MCP extension does this in its
    /// `tool_call` handler for tools that declare `reachesTools`).
    async fn wait_for_reach(&self, _reach: &ToolReach) {}
}

/// A call a tool makes through another tool.
pub struct NestedCallRequest<'a> {
    /// The calling tool call's id.
    pub parent_call_id: &'a str,
    /// `<parent id>/<n>`.
    pub call_id: &'a str,
    /// The name the caller asked for.
    pub name: &'a str,
    /// The callable tool of that name; `None` when there is none ("Tool x not found").
    pub tool: Option<Arc<dyn Tool>>,
    pub args: Value,
}

/// How a nested call ended, as the caller receives it.
#[derive(Clone, Debug)]
pub struct NestedOutcome {
    pub output: ToolOutput,
    /// Milliseconds the tool ran; `None` when it never ran (not found, invalid, blocked).
    pub duration_ms: Option<u64>,
}

impl ToolContext {
    /// A context for `cwd` with no extra environment.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        ToolContext {
            cwd: cwd.into(),
            env: BTreeMap::new(),
            bin_dir: None,
            temp_dir: None,
            shell_path: None,
            shell_command_prefix: None,
            model: None,
            session: None,
            nested_calls: None,
        }
    }

    /// The variables Pi exposes to bash for a session: `PI_CODING_AGENT=true`, `AI_AGENT=pi`,
    /// `PI_SESSION_ID`, and `PI_SESSION_FILE`, `PI_PROVIDER`, `PI_MODEL`, `PI_REASONING_LEVEL`
    /// when known.
    pub fn session_env(
        session_id: &str,
        session_file: Option<&str>,
        provider_and_model: Option<(&str, &str)>,
        reasoning_level: Option<&str>,
    ) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        env.insert("PI_CODING_AGENT".to_string(), "true".to_string());
        env.insert("AI_AGENT".to_string(), "pi".to_string());
        env.insert("PI_SESSION_ID".to_string(), session_id.to_string());
        if let Some(file) = session_file {
            env.insert("PI_SESSION_FILE".to_string(), file.to_string());
        }
        if let Some((provider, model)) = provider_and_model {
            env.insert("PI_PROVIDER".to_string(), provider.to_string());
            env.insert("PI_MODEL".to_string(), model.to_string());
        }
        if let Some(level) = reasoning_level {
            env.insert("PI_REASONING_LEVEL".to_string(), level.to_string());
        }
        env
    }
}

/// Receives partial results while a tool runs (bash's streamed output).
pub type ToolUpdateFn<'a> = &'a (dyn Fn(ToolOutput) + Send + Sync);

/// A callback that drops every update.
pub fn ignore_updates(_: ToolOutput) {}

/// How the model and other tools reach a tool (Pi's `exposure` option of `registerTool`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolExposure {
    /// Declared to the model while active, callable from other tools while active.
    #[default]
    Direct,
    /// Declared to the model while active, never callable from other tools (`codemode`,
    /// `tool_search`).
    ModelOnly,
    /// Callable from codemode scripts (and `ctx.executeTool()`) without being declared;
    /// listed in the `codemode` description, loadable by `tool_search`.
    Codemode,
    /// Like `Codemode`, but never listed: scripts and `tool_search` find it by searching.
    Deferred,
    /// Registered but unreachable.
    Hidden,
}

impl ToolExposure {
    /// Pi's word for it (`direct`, `model-only`, `codemode`, `deferred`, `hidden`).
    pub fn parse(word: &str) -> Option<ToolExposure> {
        match word {
            "direct" => Some(ToolExposure::Direct),
            "model-only" => Some(ToolExposure::ModelOnly),
            "codemode" => Some(ToolExposure::Codemode),
            "deferred" => Some(ToolExposure::Deferred),
            "hidden" => Some(ToolExposure::Hidden),
            _ => None,
        }
    }

    /// The word, as `pi.getAllTools()` reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolExposure::Direct => "direct",
            ToolExposure::ModelOnly => "model-only",
            ToolExposure::Codemode => "codemode",
            ToolExposure::Deferred => "deferred",
            ToolExposure::Hidden => "hidden",
        }
    }

    /// Whether activating the tool declares it to the model (Pi's `_isDeclarable`).
    pub fn is_declarable(self) -> bool {
        matches!(self, ToolExposure::Direct | ToolExposure::ModelOnly)
    }

    /// Whether other tools may call it while it is not active (`codemode`, `deferred`).
    pub fn is_nested_only(self) -> bool {
        matches!(self, ToolExposure::Codemode | ToolExposure::Deferred)
    }
}

/// A group of related tools (Pi's `namespace` of a tool definition), as MCP servers make
/// them: codemode lists a namespace's tools under one heading with its `description`, and
/// scripts look it up with `describeNamespace(name)`, which also gives its `instructions`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolNamespace {
    /// `mcp__<server>` for MCP servers.
    pub name: String,
    /// Other names it answers to (an MCP server's own name).
    pub aliases: Vec<String>,
    pub description: Option<String>,
    pub instructions: Option<String>,
}

impl ToolNamespace {
    /// The namespace an extension declared (`{name, aliases?, description?, instructions?}`);
    /// `None` without a string `name`.
    pub fn from_json(value: &Value) -> Option<ToolNamespace> {
        let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
        Some(ToolNamespace {
            name: text("name")?,
            aliases: value
                .get("aliases")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            description: text("description"),
            instructions: text("instructions"),
        })
    }

    /// As `pi.getAllTools()` reports it (absent fields left out).
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("name".into(), Value::String(self.name.clone()));
        out.insert(
            "aliases".into(),
            Value::Array(self.aliases.iter().cloned().map(Value::String).collect()),
        );
        if let Some(d) = &self.description {
            out.insert("description".into(), Value::String(d.clone()));
        }
        if let Some(i) = &self.instructions {
            out.insert("instructions".into(), Value::String(i.clone()));
        }
        Value::Object(out)
    }

    /// Whether `query` names it, as written or as the same script identifier (`my-docs` and
    /// `my_docs` alike), by its name or an alias.
    pub fn is_named(&self, query: &str) -> bool {
        let wanted = crate::codemode::declarations::js_identifier(query);
        std::iter::once(&self.name)
            .chain(&self.aliases)
            .any(|name| {
                name == query || crate::codemode::declarations::js_identifier(name) == wanted
            })
    }
}

/// The MCP tool annotation hints Pi keeps (`readOnlyHint`, `destructiveHint`,
/// `idempotentHint`, `openWorldHint`).
pub const ANNOTATION_HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// Which tools a call of a tool that reaches other tools may reach (Pi's `reachesTools(input)`):
/// every tool, or the words of the input that may name them (a word refers to every tool or
/// namespace whose name it contains).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolReach {
    All,
    Words(Vec<String>),
}

impl ToolReach {
    /// Whether the call may reach a tool or namespace named `name`.
    pub fn reaches(&self, name: &str) -> bool {
        match self {
            ToolReach::All => true,
            ToolReach::Words(words) => words.iter().any(|w| w.contains(name)),
        }
    }

    /// From the JSON an extension's `reachesTools` returned: `"all"` or an array of words;
    /// anything else reaches nothing.
    pub fn from_json(value: &Value) -> ToolReach {
        match value {
            Value::String(s) if s == "all" => ToolReach::All,
            Value::Array(words) => ToolReach::Words(
                words
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            ),
            _ => ToolReach::Words(Vec::new()),
        }
    }
}

/// What a tool's `prepareLoadout` hook changes while it is active: replacement descriptions
/// of declared tools, and active tools whose declarations requests leave out (they stay
/// active and callable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadoutChanges {
    /// Tool name → the description its declaration carries.
    pub descriptions: Vec<(String, String)>,
    /// Names of the active tools requests do not declare.
    pub hidden: Vec<String>,
}

impl LoadoutChanges {
    /// From the sidecar's answer `{descriptions: {name: text}, hiddenDeclarations: [name]}`.
    pub fn from_json(value: &Value) -> LoadoutChanges {
        LoadoutChanges {
            descriptions: value
                .get("descriptions")
                .and_then(Value::as_object)
                .map(|d| {
                    d.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
            hidden: value
                .get("hiddenDeclarations")
                .and_then(Value::as_array)
                .map(|h| {
                    h.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Adds `other`'s changes (a later hook's description of a tool wins).
    pub fn merge(&mut self, other: LoadoutChanges) {
        for (name, text) in other.descriptions {
            self.descriptions.retain(|(n, _)| *n != name);
            self.descriptions.push((name, text));
        }
        for name in other.hidden {
            if !self.hidden.contains(&name) {
                self.hidden.push(name);
            }
        }
    }

    /// The replacement description of `name`, if a hook gave one.
    pub fn description(&self, name: &str) -> Option<&str> {
        self.descriptions
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.as_str())
    }

    pub fn is_hidden(&self, name: &str) -> bool {
        self.hidden.iter().any(|n| n == name)
    }

    pub fn is_empty(&self) -> bool {
        self.descriptions.is_empty() && self.hidden.is_empty()
    }
}

/// A tool the model can call.
///
/// Contract: `execute` gets arguments that already passed [`Tool::prepare_arguments`] and schema
/// validation (use [`run_tool_call`]); it returns `Err` exactly where Pi's tool throws, with Pi's
/// message, and checks `cancel` so an aborted call ends promptly with "Operation aborted" (or
/// bash's "Command aborted" text).
#[async_trait::async_trait]
pub trait Tool: Send + Sync + fmt::Debug {
    /// The name the model calls, e.g. `read`.
    fn name(&self) -> &str;

    /// Human-readable label (Pi uses the name).
    fn label(&self) -> &str {
        self.name()
    }

    /// The description sent to the model.
    fn description(&self) -> &str;

    /// The JSON Schema of the arguments, exactly as Pi sends it.
    fn parameters(&self) -> &Value;

    /// The one-line summary in the system prompt's tool list, if any.
    fn prompt_snippet(&self) -> Option<&str> {
        None
    }

    /// Lines this tool adds to the system prompt's guidelines.
    fn prompt_guidelines(&self) -> &[&str] {
        &[]
    }

    /// Whether the provider should constrain the call's arguments to the schema where it
    /// can (Pi's `constrainedSampling: {type: "json_schema", strict: "prefer"}`, which its
    /// read, bash, edit and write tools declare).
    fn prefers_constrained_sampling(&self) -> bool {
        false
    }

    /// Tools this tool keeps off the declarations and presents to the model itself
    /// (codemode with `codemode.mode: "only"`), so a recomputed tool set still has them.
    fn presented_tools(&self) -> Vec<Arc<dyn Tool>> {
        Vec::new()
    }

    /// Pi's `constrainedSampling` of the tool's declaration: `{type: "json_schema", strict:
    /// "prefer"}` for tools that prefer it, a grammar for codemode's raw source.
    fn constrained_sampling(&self) -> Option<Value> {
        self.prefers_constrained_sampling()
            .then(|| serde_json::json!({"type": "json_schema", "strict": "prefer"}))
    }

    /// The JSON Schema of the structured result codemode scripts receive (Pi's
    /// `outputSchema`); tools without one resolve to their text in scripts.
    fn output_schema(&self) -> Option<&Value> {
        None
    }

    /// Rewrites raw model arguments before validation (the edit tool folds legacy fields here).
    fn prepare_arguments(&self, args: Value) -> Value {
        args
    }

    /// How the model and other tools reach the tool (Pi's `exposure`); `direct` unless the
    /// tool says otherwise.
    fn exposure(&self) -> ToolExposure {
        ToolExposure::Direct
    }

    /// The group the tool belongs to (Pi's `namespace`): an MCP tool's server, or what an
    /// extension declared.
    fn namespace(&self) -> Option<&ToolNamespace> {
        None
    }

    /// Hints about what the tool does (Pi's `annotations`, with the meaning of MCP tool
    /// annotations), as `pi.getAllTools()` reports them.
    fn annotations(&self) -> Option<&serde_json::Map<String, Value>> {
        None
    }

    /// Whether the tool reaches other tools and says which ones a call may reach (Pi's
    /// `reachesTools`): `codemode`, `tool_search`, extension tools that declare it.
    fn declares_reach(&self) -> bool {
        false
    }

    /// Where the tool comes from, as `pi.getAllTools()` reports it (Pi's `sourceInfo`):
    /// shipped with Pi (`builtin:<name>`) unless the tool says otherwise.
    fn source_info(&self) -> Value {
        crate::config::SourceInfo::builtin_json(self.name())
    }

    /// Whether the tool has a `prepareLoadout` hook (run whenever the active tools change
    /// while it is active).
    fn prepares_loadout(&self) -> bool {
        false
    }

    /// Runs the tool's `prepareLoadout` hook over `loadout` (`{declared, callable,
    /// registered}`, see `AgentSession`'s loadout preparation); `None` changes nothing.
    async fn prepare_loadout(&self, _loadout: &Value) -> Option<LoadoutChanges> {
        None
    }

    /// Whether a `prepareLoadout` hook hides this active tool's declaration: requests leave
    /// it out, and so do the system prompt's tool list and rules.
    fn hidden_declaration(&self) -> bool {
        false
    }

    /// Pi's `executionMode: "sequential"`: an assistant message whose tool calls include
    /// this tool has all of them run one after another instead of concurrently (a tool
    /// that keeps mutable state of its own).
    fn sequential(&self) -> bool {
        false
    }

    /// Runs the tool.
    async fn execute(
        &self,
        call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError>;
}

/// Runs one tool call the way Pi's agent loop does: finds the tool (`Tool <name> not found`),
/// prepares and validates the arguments, executes, and turns a thrown error into an error result.
/// Never fails: every failure is an `is_error` output.
pub async fn run_tool_call(
    tools: &[Arc<dyn Tool>],
    call_id: &str,
    name: &str,
    args: Value,
    ctx: &ToolContext,
    cancel: CancellationToken,
    on_update: ToolUpdateFn<'_>,
) -> ToolOutput {
    if cancel.is_cancelled() {
        return ToolError::aborted().into_output();
    }
    let Some(tool) = tools.iter().find(|tool| tool.name() == name) else {
        return ToolError::new(format!("Tool {name} not found")).into_output();
    };
    let prepared = tool.prepare_arguments(args);
    let validated = match validate_tool_arguments(name, tool.parameters(), &prepared) {
        Ok(value) => value,
        Err(error) => return error.into_output(),
    };
    match tool
        .execute(call_id, validated, ctx, cancel, on_update)
        .await
    {
        Ok(output) => output,
        Err(error) => error.into_output(),
    }
}

/// The tool's definition as Pi declares it in a system message's `toolsAdded`:
/// `{name, description, parameters, constrainedSampling?}`.
pub fn tool_declaration(tool: &dyn Tool) -> Value {
    let mut declaration = serde_json::json!({
        "name": tool.name(),
        "description": tool.description(),
        "parameters": tool.parameters(),
    });
    if let Some(sampling) = tool.constrained_sampling() {
        declaration["constrainedSampling"] = sampling;
    }
    declaration
}
