//! The message union stored in `message` entries (typed view for writers and providers).
//!
//! These types mirror Pi 1.6.0's `AgentMessage` (pi-ai `Message` plus the coding agent's
//! `bashExecution`, `custom`, `branchSummary` and `compactionSummary`). Field names and the
//! order fields are written in follow the lines real Pi writes (see
//! `fixtures/realpi/sessions/*.jsonl`): the struct field order below *is* the serialization
//! order, so it must not be "tidied".
//!
//! Every struct carries `#[serde(flatten)] extra`, so fields this crate does not model (newer
//! Pi versions add some every release: `diagnostics`, `nestedCalls`, …) survive a
//! read → write round trip. Roles and content block types we do not know are kept whole as
//! [`AgentMessage::Unknown`] / [`ContentBlock::Unknown`].
//!
//! Numbers: JavaScript has one number type and writes `0`, not `0.0`. Cost fields are `f64`
//! here, so they are serialized through [`js_number`] to keep integral values integral; a
//! re-serialized line then compares equal to the original as a JSON value.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Unknown fields of a message or block, kept in their original order.
pub type Extra = Map<String, Value>;

/// One message in a session (`message` entry payload) or in an LLM context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
// Assistant messages are the largest variant and also among the most common (every turn
// has one), so boxing it would save little memory while adding a `Box` at every
// constructor and pattern site.
#[allow(clippy::large_enum_variant)]
pub enum AgentMessage {
    /// Instructions / tool-set changes (Pi 1.6.0 stores the system prompt in the transcript).
    #[serde(rename = "system")]
    System(SystemMessage),
    /// A user prompt.
    #[serde(rename = "user")]
    User(UserMessage),
    /// A model response.
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage),
    /// The result of one tool call.
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage),
    /// A `!command` run by the user.
    #[serde(rename = "bashExecution")]
    BashExecution(BashExecutionMessage),
    /// An extension-provided message.
    #[serde(rename = "custom")]
    Custom(CustomMessage),
    /// Summary of an abandoned branch (synthesized at context build).
    #[serde(rename = "branchSummary")]
    BranchSummary(BranchSummaryMessage),
    /// Summary of compacted history (synthesized at context build).
    #[serde(rename = "compactionSummary")]
    CompactionSummary(CompactionSummaryMessage),
    /// A role this crate does not know, kept verbatim (including its `role`).
    #[serde(untagged)]
    Unknown(Value),
}

impl AgentMessage {
    /// The `role` string as written in the file.
    pub fn role(&self) -> &str {
        match self {
            AgentMessage::System(_) => "system",
            AgentMessage::User(_) => "user",
            AgentMessage::Assistant(_) => "assistant",
            AgentMessage::ToolResult(_) => "toolResult",
            AgentMessage::BashExecution(_) => "bashExecution",
            AgentMessage::Custom(_) => "custom",
            AgentMessage::BranchSummary(_) => "branchSummary",
            AgentMessage::CompactionSummary(_) => "compactionSummary",
            AgentMessage::Unknown(v) => v.get("role").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// Epoch-millisecond timestamp, if the message has one.
    pub fn timestamp(&self) -> Option<i64> {
        match self {
            AgentMessage::System(m) => Some(m.timestamp),
            AgentMessage::User(m) => Some(m.timestamp),
            AgentMessage::Assistant(m) => Some(m.timestamp),
            AgentMessage::ToolResult(m) => Some(m.timestamp),
            AgentMessage::BashExecution(m) => Some(m.timestamp),
            AgentMessage::Custom(m) => Some(m.timestamp),
            AgentMessage::BranchSummary(m) => Some(m.timestamp),
            AgentMessage::CompactionSummary(m) => Some(m.timestamp),
            AgentMessage::Unknown(v) => v.get("timestamp").and_then(Value::as_i64),
        }
    }
}

/// A system message: base prompt plus named sections and tool-set changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemMessage {
    /// Instruction text (string or text blocks).
    pub content: Content,
    /// Named prompt sections in order; `null` removes a section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sections: Option<Map<String, Value>>,
    /// Epoch milliseconds. Pi's runtime writes it before `toolsAdded`.
    pub timestamp: i64,
    /// Tools that become available here.
    #[serde(
        default,
        rename = "toolsAdded",
        skip_serializing_if = "Option::is_none"
    )]
    pub tools_added: Option<Vec<Tool>>,
    /// Tools that stop being available here.
    #[serde(
        default,
        rename = "toolsRemoved",
        skip_serializing_if = "Option::is_none"
    )]
    pub tools_removed: Option<Vec<ToolReference>>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool declaration as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Tool name.
    pub name: String,
    /// Description shown to the model.
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: Value,
    /// Fields not modelled here (`constrainedSampling`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A reference to a tool by name (`toolsRemoved`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolReference {
    /// Tool name.
    pub name: String,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A user prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// Text or text/image blocks.
    pub content: Content,
    /// Epoch milliseconds.
    pub timestamp: i64,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Message content that is either a plain string or a list of blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// A plain string.
    Text(String),
    /// Content blocks.
    Blocks(Vec<ContentBlock>),
}

impl Content {
    /// All text joined with `sep` (images and other blocks skipped).
    pub fn text(&self, sep: &str) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(sep),
        }
    }

    /// The content as blocks (a string becomes one text block).
    pub fn to_blocks(&self) -> Vec<ContentBlock> {
        match self {
            Content::Text(s) => vec![ContentBlock::text(s.clone())],
            Content::Blocks(b) => b.clone(),
        }
    }
}

/// One content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ContentBlock {
    /// Text.
    #[serde(rename = "text")]
    Text(TextContent),
    /// A base64 image.
    #[serde(rename = "image")]
    Image(ImageContent),
    /// Model reasoning.
    #[serde(rename = "thinking")]
    Thinking(ThinkingContent),
    /// A tool call made by the model.
    #[serde(rename = "toolCall")]
    ToolCall(ToolCall),
    /// A block type this crate does not know, kept verbatim.
    #[serde(untagged)]
    Unknown(Value),
}

impl ContentBlock {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextContent {
            text: text.into(),
            text_signature: None,
            extra: Extra::new(),
        })
    }
}

/// `{type:"text", text, textSignature?}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Provider replay metadata (OpenAI Responses message item id/phase).
    #[serde(
        default,
        rename = "textSignature",
        skip_serializing_if = "Option::is_none"
    )]
    pub text_signature: Option<String>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `{type:"image", data, mimeType}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageContent {
    /// Base64 data.
    pub data: String,
    /// MIME type, e.g. `image/png`.
    #[serde(rename = "mimeType")]
    pub mime_type: String,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `{type:"thinking", thinking, thinkingSignature?, redacted?}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingContent {
    /// The reasoning text.
    pub thinking: String,
    /// Provider signature / replay payload.
    #[serde(
        default,
        rename = "thinkingSignature",
        skip_serializing_if = "Option::is_none"
    )]
    pub thinking_signature: Option<String>,
    /// True for provider-redacted reasoning (the signature holds the opaque payload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<bool>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `{type:"toolCall", id, name, arguments, thoughtSignature?}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider tool-call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Parsed arguments (normally a JSON object).
    pub arguments: Value,
    /// Google thought signature.
    #[serde(
        default,
        rename = "thoughtSignature",
        skip_serializing_if = "Option::is_none"
    )]
    pub thought_signature: Option<String>,
    /// Fields not modelled here (`argumentsError`, `namespace`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// Why a response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StopReason {
    /// Still streaming.
    #[serde(rename = "pending")]
    Pending,
    /// Normal end of turn.
    #[serde(rename = "stop")]
    Stop,
    /// Output token limit hit.
    #[serde(rename = "length")]
    Length,
    /// The model wants tool results.
    #[serde(rename = "toolUse")]
    ToolUse,
    /// The request or stream failed.
    #[serde(rename = "error")]
    Error,
    /// Cancelled by the caller.
    #[serde(rename = "aborted")]
    Aborted,
    /// Deferred (background) response.
    #[serde(rename = "deferred")]
    Deferred,
}

impl StopReason {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Pending => "pending",
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolUse => "toolUse",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
            StopReason::Deferred => "deferred",
        }
    }
}

/// Pi thinking levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// No reasoning.
    Off,
    /// Smallest budget.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Extra high (only where the model declares it).
    Xhigh,
    /// Maximum (only where the model declares it).
    Max,
}

impl ThinkingLevel {
    /// All levels, lowest first.
    pub const ALL: [ThinkingLevel; 7] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
        ThinkingLevel::Max,
    ];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
            ThinkingLevel::Max => "max",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// A model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks.
    pub content: Vec<ContentBlock>,
    /// Wire API (`openai-completions`, `anthropic-messages`, …).
    pub api: String,
    /// Provider id.
    pub provider: String,
    /// Model id that was requested.
    pub model: String,
    /// Token usage and cost.
    pub usage: Usage,
    /// Why the response ended.
    #[serde(rename = "stopReason")]
    pub stop_reason: StopReason,
    /// Epoch milliseconds when the request started.
    pub timestamp: i64,
    /// Provider response id.
    #[serde(
        default,
        rename = "responseId",
        skip_serializing_if = "Option::is_none"
    )]
    pub response_id: Option<String>,
    /// Model id the provider reports, when it differs from `model`.
    #[serde(
        default,
        rename = "responseModel",
        skip_serializing_if = "Option::is_none"
    )]
    pub response_model: Option<String>,
    /// Provider-native effort level used.
    #[serde(
        default,
        rename = "providerThinkingLevel",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_thinking_level: Option<String>,
    /// The provider's own stop reason string.
    #[serde(
        default,
        rename = "rawStopReason",
        skip_serializing_if = "Option::is_none"
    )]
    pub raw_stop_reason: Option<String>,
    /// Error text when `stop_reason` is `error`/`aborted`.
    #[serde(
        default,
        rename = "errorMessage",
        skip_serializing_if = "Option::is_none"
    )]
    pub error_message: Option<String>,
    /// Milliseconds from `timestamp` to the end of the response.
    #[serde(
        default,
        rename = "durationMs",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    /// Pi thinking level the agent loop requested.
    #[serde(
        default,
        rename = "thinkingLevel",
        skip_serializing_if = "Option::is_none"
    )]
    pub thinking_level: Option<ThinkingLevel>,
    /// Fields not modelled here (`diagnostics`, `endTurn`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

impl AssistantMessage {
    /// An empty response for `api`/`provider`/`model`, stop reason `pending`.
    pub fn empty(api: &str, provider: &str, model: &str, timestamp: i64) -> Self {
        AssistantMessage {
            content: Vec::new(),
            api: api.to_string(),
            provider: provider.to_string(),
            model: model.to_string(),
            usage: Usage::default(),
            stop_reason: StopReason::Pending,
            timestamp,
            response_id: None,
            response_model: None,
            provider_thinking_level: None,
            raw_stop_reason: None,
            error_message: None,
            duration_ms: None,
            thinking_level: None,
            extra: Extra::new(),
        }
    }

    /// The tool calls in this response, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolCall(tc) => Some(tc),
            _ => None,
        })
    }
}

/// Token usage and cost of one response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens (including reasoning).
    pub output: u64,
    /// Cache-read input tokens.
    #[serde(rename = "cacheRead")]
    pub cache_read: u64,
    /// Cache-write input tokens.
    #[serde(rename = "cacheWrite")]
    pub cache_write: u64,
    /// Reasoning tokens (subset of `output`), when the provider reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    /// Total tokens.
    #[serde(rename = "totalTokens")]
    pub total_tokens: u64,
    /// Cost in USD.
    pub cost: Cost,
    /// Subset of `cacheWrite` written with 1h retention (Anthropic). Pi adds it after `cost`.
    #[serde(
        default,
        rename = "cacheWrite1h",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write_1h: Option<u64>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Cost of one response in USD.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Input cost.
    #[serde(with = "js_number")]
    pub input: f64,
    /// Output cost.
    #[serde(with = "js_number")]
    pub output: f64,
    /// Cache-read cost.
    #[serde(rename = "cacheRead", with = "js_number")]
    pub cache_read: f64,
    /// Cache-write cost.
    #[serde(rename = "cacheWrite", with = "js_number")]
    pub cache_write: f64,
    /// Total cost.
    #[serde(with = "js_number")]
    pub total: f64,
    /// True when `total` is billed cost reported by the provider.
    #[serde(
        default,
        rename = "totalFromProvider",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_from_provider: Option<bool>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    /// Id of the tool call this answers.
    #[serde(rename = "toolCallId")]
    pub tool_call_id: String,
    /// Tool name.
    #[serde(rename = "toolName")]
    pub tool_name: String,
    /// Text/image blocks.
    pub content: Vec<ContentBlock>,
    /// Tool-specific details (not sent to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Whether the tool failed.
    #[serde(rename = "isError")]
    pub is_error: bool,
    /// Execution time.
    #[serde(
        default,
        rename = "durationMs",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_ms: Option<u64>,
    /// Epoch milliseconds.
    pub timestamp: i64,
    /// Fields not modelled here (`usage`, `nestedCalls`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A `!command` run by the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BashExecutionMessage {
    /// The command line.
    pub command: String,
    /// Captured output.
    pub output: String,
    /// Exit code; absent when the process did not exit normally.
    #[serde(default, rename = "exitCode", skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Whether the user cancelled it.
    pub cancelled: bool,
    /// Whether `output` was truncated.
    pub truncated: bool,
    /// Where the full output was saved when truncated.
    #[serde(
        default,
        rename = "fullOutputPath",
        skip_serializing_if = "Option::is_none"
    )]
    pub full_output_path: Option<String>,
    /// Epoch milliseconds.
    pub timestamp: i64,
    /// `!!` commands are kept out of the LLM context.
    #[serde(
        default,
        rename = "excludeFromContext",
        skip_serializing_if = "Option::is_none"
    )]
    pub exclude_from_context: Option<bool>,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An extension-provided message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomMessage {
    /// Extension-defined type tag.
    #[serde(rename = "customType")]
    pub custom_type: String,
    /// Text or blocks.
    pub content: Content,
    /// Whether the UI shows it.
    pub display: bool,
    /// Extension data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Epoch milliseconds.
    pub timestamp: i64,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Summary of an abandoned branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BranchSummaryMessage {
    /// Summary text.
    pub summary: String,
    /// Entry the branch left from.
    #[serde(rename = "fromId")]
    pub from_id: String,
    /// Epoch milliseconds.
    pub timestamp: i64,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Summary of compacted history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionSummaryMessage {
    /// Summary text.
    pub summary: String,
    /// Context tokens before compaction.
    #[serde(rename = "tokensBefore")]
    pub tokens_before: u64,
    /// Epoch milliseconds.
    pub timestamp: i64,
    /// Fields not modelled here.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Serializes an `f64` the way JavaScript's `JSON.stringify` would for integral values
/// (`0`, not `0.0`), so re-serialized lines compare equal to Pi's as JSON values.
pub mod js_number {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Largest integer a JS number represents exactly (2^53).
    const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

    /// Serialize `v`, as an integer when it is one.
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE {
            // Exact: |v| <= 2^53 fits i64 and is integral.
            s.serialize_i64(*v as i64)
        } else {
            s.serialize_f64(*v)
        }
    }

    /// Deserialize any JSON number as `f64`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        f64::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture_dirs() -> Vec<PathBuf> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/realpi");
        vec![root.join("sessions"), root.join("tricky/inputs")]
    }

    /// Every `message` payload in the real-Pi fixture sessions: (file:line, raw payload).
    fn fixture_messages() -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for dir in fixture_dirs() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut paths: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for path in paths {
                if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                for (i, line) in text.lines().enumerate() {
                    let Ok(v) = serde_json::from_str::<Value>(line.trim_start_matches('\u{feff}'))
                    else {
                        continue;
                    };
                    if v.get("type").and_then(Value::as_str) != Some("message") {
                        continue;
                    }
                    if let Some(m) = v.get("message") {
                        out.push((format!("{}:{}", path.display(), i + 1), m.clone()));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_fixture_message_round_trips_as_json_value() {
        let msgs = fixture_messages();
        assert!(
            msgs.len() > 50,
            "expected many fixture messages, found {}",
            msgs.len()
        );
        let mut unknown = 0;
        for (at, raw) in &msgs {
            let typed: AgentMessage = serde_json::from_value(raw.clone())
                .unwrap_or_else(|e| panic!("{at}: does not deserialize: {e}"));
            if matches!(typed, AgentMessage::Unknown(_)) {
                unknown += 1;
            }
            let back = serde_json::to_value(&typed).expect("serializes");
            assert_eq!(&back, raw, "{at}: round trip changed the message");
        }
        // Only the handcrafted "unknown role" input may fall through to Unknown.
        assert!(unknown <= 2, "{unknown} messages fell back to Unknown");
    }

    /// Field order matters for byte-faithful writing: check that re-serializing keeps Pi's
    /// key order for the messages the runtime writes (the one SDK-made system message that
    /// puts `toolsAdded` before `timestamp` is the known exception).
    #[test]
    fn fixture_messages_keep_key_order() {
        fn keys(v: &Value) -> Vec<String> {
            v.as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        }
        let mut mismatches = Vec::new();
        for (at, raw) in fixture_messages() {
            let typed: AgentMessage = serde_json::from_value(raw.clone()).expect("deserializes");
            let back = serde_json::to_value(&typed).expect("serializes");
            if keys(&back) != keys(&raw) {
                mismatches.push(format!("{at}: {:?} vs {:?}", keys(&back), keys(&raw)));
            }
            if let (Some(a), Some(b)) = (back.get("usage"), raw.get("usage")) {
                if keys(a) != keys(b) {
                    mismatches.push(format!("{at}: usage {:?} vs {:?}", keys(a), keys(b)));
                }
            }
        }
        // The tricky inputs are hand-written by a Python script and SDK-built sessions put
        // `toolsAdded` first; only lines Pi's runtime wrote are held to its key order.
        let unexpected: Vec<_> = mismatches
            .iter()
            .filter(|m| !m.contains("tricky/inputs") && !m.contains("/sdk_"))
            .collect();
        assert!(unexpected.is_empty(), "key order differs:\n{unexpected:#?}");
    }

    #[test]
    fn unknown_role_and_block_survive() {
        let raw = serde_json::json!({"role":"hologram","foo":[1,2],"timestamp":5});
        let m: AgentMessage = serde_json::from_value(raw.clone()).expect("deserializes");
        assert_eq!(m.role(), "hologram");
        assert_eq!(m.timestamp(), Some(5));
        assert_eq!(serde_json::to_value(&m).expect("ser"), raw);

        let raw = serde_json::json!({"role":"user","content":[{"type":"audio","data":"x"},
            {"type":"text","text":"hi","future":true}],"timestamp":1,"newField":{"a":1}});
        let m: AgentMessage = serde_json::from_value(raw.clone()).expect("deserializes");
        assert!(matches!(&m, AgentMessage::User(_)));
        assert_eq!(serde_json::to_value(&m).expect("ser"), raw);
    }

    #[test]
    fn cost_numbers_stay_integral_when_integral() {
        let u = Usage {
            cost: Cost {
                input: 3.0,
                output: 0.5,
                ..Cost::default()
            },
            ..Usage::default()
        };
        let s = serde_json::to_string(&u).expect("ser");
        assert!(
            s.contains("\"input\":3,") && s.contains("\"output\":0.5"),
            "{s}"
        );
    }

    #[test]
    fn optional_fields_are_omitted() {
        let m = AgentMessage::Assistant(AssistantMessage::empty("a", "p", "m", 7));
        let s = serde_json::to_string(&m).expect("ser");
        assert_eq!(
            s,
            r#"{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"pending","timestamp":7}"#
        );
    }
}
