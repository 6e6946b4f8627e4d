//! Decoding one RPC stdin record into a typed command, without I/O.
//!
//! [`decode_record`] is the whole path from the bytes of one line to either a [`Request`] or
//! the error response Pi would send, so the RPC loop only reads lines and hands requests to the host,
//! and the fuzz target `rpc_command` drives exactly what the loop does. [`Request::to_value`]
//! writes a request back as Pi's client would send it; decoding that gives the same request.

use crate::agent::QueueMode;
use pi_formats::message::ThinkingLevel;
use serde_json::{Map, Value};

/// What to do with a prompt that arrives while the agent is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamingBehavior {
    /// Deliver it as a steering message.
    Steer,
    /// Queue it as a follow-up.
    FollowUp,
}

impl StreamingBehavior {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "steer" => Some(Self::Steer),
            "followUp" => Some(Self::FollowUp),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Steer => "steer",
            Self::FollowUp => "followUp",
        }
    }
}

/// One RPC command with its arguments checked (Pi's rpc.md).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `prompt`: start a run, or queue while one is running (`streamingBehavior`).
    Prompt {
        /// The user's text (slash commands and templates are expanded later).
        message: String,
        /// Image blocks as sent; a non-array `images` reads as none.
        images: Vec<Value>,
        /// `steer` / `followUp`; any other value means "refuse while busy".
        streaming_behavior: Option<StreamingBehavior>,
    },
    /// `steer`: a message delivered during the current run.
    Steer {
        /// The text.
        message: String,
    },
    /// `follow_up`: a message delivered after the current run.
    FollowUp {
        /// The text.
        message: String,
    },
    /// `abort`.
    Abort,
    /// `clear_queue`.
    ClearQueue,
    /// `new_session`, optionally naming the parent session file.
    NewSession {
        /// `parentSession`.
        parent_session: Option<String>,
    },
    /// `get_state`.
    GetState,
    /// `set_model`; missing fields read as empty (and then match no model).
    SetModel {
        /// `provider`.
        provider: String,
        /// `modelId`.
        model_id: String,
    },
    /// `cycle_model`.
    CycleModel,
    /// `get_available_models`.
    GetAvailableModels,
    /// `set_thinking_level`.
    SetThinkingLevel {
        /// The level.
        level: ThinkingLevel,
    },
    /// `cycle_thinking_level`.
    CycleThinkingLevel,
    /// `get_available_thinking_levels`.
    GetAvailableThinkingLevels,
    /// `set_steering_mode`.
    SetSteeringMode {
        /// The mode.
        mode: QueueMode,
    },
    /// `set_follow_up_mode`.
    SetFollowUpMode {
        /// The mode.
        mode: QueueMode,
    },
    /// `compact`, with optional instructions for the summary.
    Compact {
        /// `customInstructions`.
        custom_instructions: Option<String>,
    },
    /// `set_auto_compaction`.
    SetAutoCompaction {
        /// `enabled`.
        enabled: bool,
    },
    /// `set_auto_retry`.
    SetAutoRetry {
        /// `enabled`.
        enabled: bool,
    },
    /// `abort_retry`.
    AbortRetry,
    /// `bash`: run a shell command for the user.
    Bash {
        /// The command line.
        command: String,
        /// `excludeFromContext`.
        exclude_from_context: bool,
    },
    /// `abort_bash`.
    AbortBash,
    /// `get_session_stats`.
    GetSessionStats,
    /// `export_html`, to `outputPath` or a default name.
    ExportHtml {
        /// `outputPath`.
        output_path: Option<String>,
    },
    /// `switch_session` to a session file.
    SwitchSession {
        /// `sessionPath`.
        session_path: String,
    },
    /// `fork` at a user message.
    Fork {
        /// `entryId`.
        entry_id: String,
    },
    /// `clone` the current branch into a new session.
    Clone,
    /// `get_fork_messages`.
    GetForkMessages,
    /// `get_entries`, optionally only those after `since`.
    GetEntries {
        /// `since`.
        since: Option<String>,
    },
    /// `get_tree`.
    GetTree,
    /// `get_last_assistant_text`.
    GetLastAssistantText,
    /// `set_session_name`; the name is trimmed and never empty.
    SetSessionName {
        /// The trimmed name.
        name: String,
    },
    /// `get_messages`.
    GetMessages,
    /// `get_commands`.
    GetCommands,
}

/// A decoded command and the `id` its response must carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The client's `id`, any JSON value, echoed as sent.
    pub id: Option<Value>,
    /// The command.
    pub command: Command,
}

/// A record that cannot be run: the error response Pi's RPC gives for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The `id` of the record, when it had one.
    pub id: Option<Value>,
    /// The response's `command`: the record's `type`, `parse` or `unknown`.
    pub command: String,
    /// The response's `error`.
    pub message: String,
}

/// What one stdin record asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// Empty or whitespace only: ignored, no response.
    Blank,
    /// A command to run.
    Command(Request),
    /// Answered with an error response at once.
    Rejected(Rejected),
}

/// The content of a record read up to and including its `\n`: the `\n` and then one `\r`
/// are dropped (strict LF framing; U+2028/U+2029 are content).
pub fn record_content(mut line: &[u8]) -> &[u8] {
    if let Some(rest) = line.strip_suffix(b"\n") {
        line = rest;
    }
    if let Some(rest) = line.strip_suffix(b"\r") {
        line = rest;
    }
    line
}

/// Decodes one record as read from stdin (with or without its line ending).
pub fn decode_record(line: &[u8]) -> Decoded {
    let line = record_content(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Decoded::Blank;
    }
    // Read as JSON.parse reads it (Pi's client side is JavaScript): invalid UTF-8 decoded
    // lossily, lone surrogate escapes as U+FFFD, numbers beyond f64 as null.
    match pi_formats::jsonl::parse_value(line) {
        Ok(v) => decode_value(&v),
        Err(e) => Decoded::Rejected(Rejected {
            id: None,
            command: "parse".into(),
            message: format!("Failed to parse command: {e}"),
        }),
    }
}

/// Decodes a parsed record.
pub fn decode_value(cmd: &Value) -> Decoded {
    let id = cmd.get("id").cloned();
    let Some(kind) = cmd.get("type").and_then(Value::as_str) else {
        return Decoded::Rejected(Rejected {
            id,
            command: "unknown".into(),
            message: "Command has no \"type\"".into(),
        });
    };
    match decode_command(kind, cmd) {
        Ok(command) => Decoded::Command(Request { id, command }),
        Err(message) => Decoded::Rejected(Rejected {
            id,
            command: kind.to_string(),
            message,
        }),
    }
}

fn str_field(cmd: &Value, key: &str) -> Option<String> {
    cmd.get(key).and_then(Value::as_str).map(str::to_string)
}

fn required(cmd: &Value, key: &str, message: impl FnOnce() -> String) -> Result<String, String> {
    str_field(cmd, key).ok_or_else(message)
}

fn decode_command(kind: &str, cmd: &Value) -> Result<Command, String> {
    let message = || {
        required(cmd, "message", || {
            format!("{kind} needs a \"message\" string")
        })
    };
    let enabled = || {
        cmd.get("enabled")
            .and_then(Value::as_bool)
            .ok_or_else(|| "enabled must be true or false".to_string())
    };
    let mode = || {
        cmd.get("mode")
            .and_then(Value::as_str)
            .and_then(QueueMode::parse)
            .ok_or_else(|| "mode must be \"all\" or \"one-at-a-time\"".to_string())
    };
    Ok(match kind {
        "prompt" => Command::Prompt {
            message: message()?,
            images: cmd
                .get("images")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            streaming_behavior: cmd
                .get("streamingBehavior")
                .and_then(Value::as_str)
                .and_then(StreamingBehavior::parse),
        },
        "steer" => Command::Steer {
            message: message()?,
        },
        "follow_up" => Command::FollowUp {
            message: message()?,
        },
        "abort" => Command::Abort,
        "clear_queue" => Command::ClearQueue,
        "new_session" => Command::NewSession {
            parent_session: str_field(cmd, "parentSession"),
        },
        "get_state" => Command::GetState,
        "set_model" => Command::SetModel {
            provider: str_field(cmd, "provider").unwrap_or_default(),
            model_id: str_field(cmd, "modelId").unwrap_or_default(),
        },
        "cycle_model" => Command::CycleModel,
        "get_available_models" => Command::GetAvailableModels,
        "set_thinking_level" => Command::SetThinkingLevel {
            level: cmd
                .get("level")
                .and_then(Value::as_str)
                .and_then(ThinkingLevel::parse)
                .ok_or("level must be off, minimal, low, medium, high, xhigh or max")?,
        },
        "cycle_thinking_level" => Command::CycleThinkingLevel,
        "get_available_thinking_levels" => Command::GetAvailableThinkingLevels,
        "set_steering_mode" => Command::SetSteeringMode { mode: mode()? },
        "set_follow_up_mode" => Command::SetFollowUpMode { mode: mode()? },
        "compact" => Command::Compact {
            custom_instructions: str_field(cmd, "customInstructions"),
        },
        "set_auto_compaction" => Command::SetAutoCompaction {
            enabled: enabled()?,
        },
        "set_auto_retry" => Command::SetAutoRetry {
            enabled: enabled()?,
        },
        "abort_retry" => Command::AbortRetry,
        "bash" => Command::Bash {
            command: required(cmd, "command", || "bash needs a \"command\" string".into())?,
            exclude_from_context: cmd
                .get("excludeFromContext")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        },
        "abort_bash" => Command::AbortBash,
        "get_session_stats" => Command::GetSessionStats,
        "export_html" => Command::ExportHtml {
            output_path: str_field(cmd, "outputPath"),
        },
        "switch_session" => Command::SwitchSession {
            session_path: required(cmd, "sessionPath", || {
                "switch_session needs \"sessionPath\"".into()
            })?,
        },
        "fork" => Command::Fork {
            entry_id: required(cmd, "entryId", || "fork needs \"entryId\"".into())?,
        },
        "clone" => Command::Clone,
        "get_fork_messages" => Command::GetForkMessages,
        "get_entries" => Command::GetEntries {
            since: str_field(cmd, "since"),
        },
        "get_tree" => Command::GetTree,
        "get_last_assistant_text" => Command::GetLastAssistantText,
        "set_session_name" => {
            let name = str_field(cmd, "name").unwrap_or_default();
            let name = name.trim();
            if name.is_empty() {
                return Err("Session name cannot be empty".into());
            }
            Command::SetSessionName {
                name: name.to_string(),
            }
        }
        "get_messages" => Command::GetMessages,
        "get_commands" => Command::GetCommands,
        other => return Err(format!("Unknown command: {other}")),
    })
}

impl Command {
    /// The wire `type`, also the `command` of the response.
    pub fn kind(&self) -> &'static str {
        match self {
            Command::Prompt { .. } => "prompt",
            Command::Steer { .. } => "steer",
            Command::FollowUp { .. } => "follow_up",
            Command::Abort => "abort",
            Command::ClearQueue => "clear_queue",
            Command::NewSession { .. } => "new_session",
            Command::GetState => "get_state",
            Command::SetModel { .. } => "set_model",
            Command::CycleModel => "cycle_model",
            Command::GetAvailableModels => "get_available_models",
            Command::SetThinkingLevel { .. } => "set_thinking_level",
            Command::CycleThinkingLevel => "cycle_thinking_level",
            Command::GetAvailableThinkingLevels => "get_available_thinking_levels",
            Command::SetSteeringMode { .. } => "set_steering_mode",
            Command::SetFollowUpMode { .. } => "set_follow_up_mode",
            Command::Compact { .. } => "compact",
            Command::SetAutoCompaction { .. } => "set_auto_compaction",
            Command::SetAutoRetry { .. } => "set_auto_retry",
            Command::AbortRetry => "abort_retry",
            Command::Bash { .. } => "bash",
            Command::AbortBash => "abort_bash",
            Command::GetSessionStats => "get_session_stats",
            Command::ExportHtml { .. } => "export_html",
            Command::SwitchSession { .. } => "switch_session",
            Command::Fork { .. } => "fork",
            Command::Clone => "clone",
            Command::GetForkMessages => "get_fork_messages",
            Command::GetEntries { .. } => "get_entries",
            Command::GetTree => "get_tree",
            Command::GetLastAssistantText => "get_last_assistant_text",
            Command::SetSessionName { .. } => "set_session_name",
            Command::GetMessages => "get_messages",
            Command::GetCommands => "get_commands",
        }
    }
}

impl Request {
    /// The request as Pi's client sends it (the inverse of [`decode_value`]).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if let Some(id) = &self.id {
            m.insert("id".into(), id.clone());
        }
        m.insert("type".into(), self.command.kind().into());
        let mut put = |k: &str, v: Value| {
            m.insert(k.into(), v);
        };
        match &self.command {
            Command::Prompt {
                message,
                images,
                streaming_behavior,
            } => {
                put("message", message.as_str().into());
                if !images.is_empty() {
                    put("images", Value::Array(images.clone()));
                }
                if let Some(b) = streaming_behavior {
                    put("streamingBehavior", b.as_str().into());
                }
            }
            Command::Steer { message } | Command::FollowUp { message } => {
                put("message", message.as_str().into())
            }
            Command::NewSession { parent_session } => {
                if let Some(p) = parent_session {
                    put("parentSession", p.as_str().into());
                }
            }
            Command::SetModel { provider, model_id } => {
                put("provider", provider.as_str().into());
                put("modelId", model_id.as_str().into());
            }
            Command::SetThinkingLevel { level } => put("level", level.as_str().into()),
            Command::SetSteeringMode { mode } | Command::SetFollowUpMode { mode } => {
                put("mode", mode.as_str().into())
            }
            Command::Compact {
                custom_instructions,
            } => {
                if let Some(c) = custom_instructions {
                    put("customInstructions", c.as_str().into());
                }
            }
            Command::SetAutoCompaction { enabled } | Command::SetAutoRetry { enabled } => {
                put("enabled", (*enabled).into())
            }
            Command::Bash {
                command,
                exclude_from_context,
            } => {
                put("command", command.as_str().into());
                if *exclude_from_context {
                    put("excludeFromContext", true.into());
                }
            }
            Command::ExportHtml { output_path } => {
                if let Some(p) = output_path {
                    put("outputPath", p.as_str().into());
                }
            }
            Command::SwitchSession { session_path } => {
                put("sessionPath", session_path.as_str().into())
            }
            Command::Fork { entry_id } => put("entryId", entry_id.as_str().into()),
            Command::GetEntries { since } => {
                if let Some(s) = since {
                    put("since", s.as_str().into());
                }
            }
            Command::SetSessionName { name } => put("name", name.as_str().into()),
            Command::Abort
            | Command::ClearQueue
            | Command::GetState
            | Command::CycleModel
            | Command::GetAvailableModels
            | Command::CycleThinkingLevel
            | Command::GetAvailableThinkingLevels
            | Command::AbortRetry
            | Command::AbortBash
            | Command::GetSessionStats
            | Command::Clone
            | Command::GetForkMessages
            | Command::GetTree
            | Command::GetLastAssistantText
            | Command::GetMessages
            | Command::GetCommands => {}
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(s: &str) -> Decoded {
        decode_record(s.as_bytes())
    }

    #[test]
    fn framing_drops_one_lf_then_one_cr_only() {
        assert_eq!(record_content(b"a\r\n"), b"a");
        assert_eq!(record_content(b"a\r\r\n"), b"a\r");
        assert_eq!(record_content(b"a"), b"a");
        assert_eq!(decode(" \t\r\n"), Decoded::Blank);
        assert_eq!(decode(""), Decoded::Blank);
    }

    #[test]
    fn commands_from_pi_docs_decode() {
        assert_eq!(
            decode(r#"{"id": "req-1", "type": "prompt", "message": "Hello, world!"}"#),
            Decoded::Command(Request {
                id: Some(json!("req-1")),
                command: Command::Prompt {
                    message: "Hello, world!".into(),
                    images: vec![],
                    streaming_behavior: None,
                },
            })
        );
        assert_eq!(
            decode(r#"{"type": "set_steering_mode", "mode": "one-at-a-time"}"#),
            Decoded::Command(Request {
                id: None,
                command: Command::SetSteeringMode {
                    mode: QueueMode::OneAtATime
                },
            })
        );
    }

    #[test]
    fn rejections_carry_the_id_and_pis_messages() {
        assert_eq!(
            decode(r#"{"id": 7, "type": "bash"}"#),
            Decoded::Rejected(Rejected {
                id: Some(json!(7)),
                command: "bash".into(),
                message: "bash needs a \"command\" string".into(),
            })
        );
        assert_eq!(
            decode(r#"{"id": [1], "type": "set_session_name", "name": "  "}"#),
            Decoded::Rejected(Rejected {
                id: Some(json!([1])),
                command: "set_session_name".into(),
                message: "Session name cannot be empty".into(),
            })
        );
        let Decoded::Rejected(r) = decode("{not json") else {
            panic!("not json must be rejected");
        };
        assert_eq!((r.id, r.command.as_str()), (None, "parse"));
        let Decoded::Rejected(r) = decode(r#"{"type": 3}"#) else {
            panic!("a non-string type must be rejected");
        };
        assert_eq!(r.command, "unknown");
    }

    /// `JSON.parse` accepts a lone surrogate escape; serde_json alone refused the command.
    #[test]
    fn a_lone_surrogate_is_read_like_json_parse_reads_it() {
        assert_eq!(
            decode("{\"type\":\"steer\",\"message\":\"a\\ud800b\"}"),
            Decoded::Command(Request {
                id: None,
                command: Command::Steer {
                    message: "a\u{fffd}b".into()
                },
            })
        );
    }

    #[test]
    fn a_request_written_back_decodes_to_itself() {
        let line = r#"{"id":{"n":1},"type":"prompt","message":"m","images":[{"type":"image"}],"streamingBehavior":"followUp"}"#;
        let Decoded::Command(req) = decode(line) else {
            panic!("prompt must decode");
        };
        assert_eq!(decode_value(&req.to_value()), Decoded::Command(req));
    }
}
