//! Entries we write, laid out key for key as Pi 1.6 writes them.
//!
//! Entries read from a file are never rebuilt from these types: they keep their
//! original bytes. These builders only serve entries this program appends, so
//! that Pi (and a byte-level diff) cannot tell our lines from its own.

use serde_json::{Map, Value};

/// Entry types Pi 1.6 knows. Anything else is kept verbatim and ignored by context building.
pub mod kind {
    pub const SESSION: &str = "session";
    pub const MESSAGE: &str = "message";
    pub const THINKING_LEVEL_CHANGE: &str = "thinking_level_change";
    pub const MODEL_CHANGE: &str = "model_change";
    pub const COMPACTION: &str = "compaction";
    pub const BRANCH_SUMMARY: &str = "branch_summary";
    pub const CUSTOM: &str = "custom";
    pub const CUSTOM_MESSAGE: &str = "custom_message";
    pub const LABEL: &str = "label";
    pub const SESSION_INFO: &str = "session_info";
    pub const CONTEXT_EDIT: &str = "context_edit";
    pub const USAGE: &str = "usage";

    pub const ALL: &[&str] = &[
        SESSION,
        MESSAGE,
        THINKING_LEVEL_CHANGE,
        MODEL_CHANGE,
        COMPACTION,
        BRANCH_SUMMARY,
        CUSTOM,
        CUSTOM_MESSAGE,
        LABEL,
        SESSION_INFO,
        CONTEXT_EDIT,
        USAGE,
    ];

    pub fn is_known(kind: &str) -> bool {
        ALL.contains(&kind)
    }
}

/// Message roles Pi 1.6 knows.
pub mod role {
    pub const SYSTEM: &str = "system";
    pub const USER: &str = "user";
    pub const ASSISTANT: &str = "assistant";
    pub const TOOL_RESULT: &str = "toolResult";
    pub const BASH_EXECUTION: &str = "bashExecution";
    pub const CUSTOM: &str = "custom";
    pub const BRANCH_SUMMARY: &str = "branchSummary";
    pub const COMPACTION_SUMMARY: &str = "compactionSummary";

    pub const ALL: &[&str] = &[
        SYSTEM,
        USER,
        ASSISTANT,
        TOOL_RESULT,
        BASH_EXECUTION,
        CUSTOM,
        BRANCH_SUMMARY,
        COMPACTION_SUMMARY,
    ];

    pub fn is_known(role: &str) -> bool {
        ALL.contains(&role)
    }
}

/// The base every entry carries.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryBase {
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
}

/// The payload of an entry to append. `None` fields are omitted, as JS omits `undefined`.
#[derive(Debug, Clone, PartialEq)]
pub enum NewEntry {
    Message {
        message: Value,
    },
    ThinkingLevelChange {
        thinking_level: String,
    },
    ModelChange {
        provider: String,
        model_id: String,
    },
    Usage {
        kind: String,
        provider: String,
        model: String,
        usage: Value,
        note: Option<String>,
    },
    Compaction {
        summary: String,
        first_kept_entry_id: Option<String>,
        tokens_before: u64,
        details: Option<Value>,
        usage: Option<Value>,
        from_hook: Option<bool>,
        system_message: Option<Value>,
    },
    BranchSummary {
        from_id: String,
        summary: String,
        details: Option<Value>,
        usage: Option<Value>,
        from_hook: Option<bool>,
    },
    Custom {
        custom_type: String,
        data: Option<Value>,
    },
    CustomMessage {
        custom_type: String,
        content: Value,
        display: bool,
        details: Option<Value>,
    },
    Label {
        target_id: String,
        label: Option<String>,
    },
    SessionInfo {
        name: String,
    },
    ContextEdit {
        target_id: String,
        replacement: Value,
    },
}

impl NewEntry {
    /// A `session_info` entry; like Pi, line breaks become spaces and the name is trimmed.
    pub fn session_info(name: &str) -> NewEntry {
        let mut flat = String::with_capacity(name.len());
        let mut in_break = false;
        for c in name.chars() {
            if c == '\r' || c == '\n' {
                if !in_break {
                    flat.push(' ');
                }
                in_break = true;
            } else {
                flat.push(c);
                in_break = false;
            }
        }
        NewEntry::SessionInfo {
            name: crate::jsonl::js_trim(&flat).to_string(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            NewEntry::Message { .. } => kind::MESSAGE,
            NewEntry::ThinkingLevelChange { .. } => kind::THINKING_LEVEL_CHANGE,
            NewEntry::ModelChange { .. } => kind::MODEL_CHANGE,
            NewEntry::Usage { .. } => kind::USAGE,
            NewEntry::Compaction { .. } => kind::COMPACTION,
            NewEntry::BranchSummary { .. } => kind::BRANCH_SUMMARY,
            NewEntry::Custom { .. } => kind::CUSTOM,
            NewEntry::CustomMessage { .. } => kind::CUSTOM_MESSAGE,
            NewEntry::Label { .. } => kind::LABEL,
            NewEntry::SessionInfo { .. } => kind::SESSION_INFO,
            NewEntry::ContextEdit { .. } => kind::CONTEXT_EDIT,
        }
    }

    /// The full entry object, keys in Pi's order.
    pub fn to_value(&self, base: &EntryBase) -> Value {
        let mut m = Map::new();
        let put_base = |m: &mut Map<String, Value>| {
            m.insert("id".into(), Value::String(base.id.clone()));
            m.insert(
                "parentId".into(),
                base.parent_id.clone().map_or(Value::Null, Value::String),
            );
            m.insert("timestamp".into(), Value::String(base.timestamp.clone()));
        };
        let opt = |m: &mut Map<String, Value>, key: &str, v: &Option<Value>| {
            if let Some(v) = v {
                m.insert(key.into(), v.clone());
            }
        };
        m.insert("type".into(), Value::String(self.kind().into()));
        match self {
            NewEntry::Message { message } => {
                put_base(&mut m);
                m.insert("message".into(), message.clone());
            }
            NewEntry::ThinkingLevelChange { thinking_level } => {
                put_base(&mut m);
                m.insert("thinkingLevel".into(), thinking_level.clone().into());
            }
            NewEntry::ModelChange { provider, model_id } => {
                put_base(&mut m);
                m.insert("provider".into(), provider.clone().into());
                m.insert("modelId".into(), model_id.clone().into());
            }
            NewEntry::Usage {
                kind,
                provider,
                model,
                usage,
                note,
            } => {
                put_base(&mut m);
                m.insert("kind".into(), kind.clone().into());
                m.insert("provider".into(), provider.clone().into());
                m.insert("model".into(), model.clone().into());
                m.insert("usage".into(), usage.clone());
                if let Some(note) = note.as_ref().filter(|n| !n.is_empty()) {
                    m.insert("note".into(), note.clone().into());
                }
            }
            NewEntry::Compaction {
                summary,
                first_kept_entry_id,
                tokens_before,
                details,
                usage,
                from_hook,
                system_message,
            } => {
                put_base(&mut m);
                m.insert("summary".into(), summary.clone().into());
                // Pi 1.6 never writes a missing firstKeptEntryId: "retain nothing"
                // is spelled as the compaction's own id.
                let first_kept = first_kept_entry_id.clone().unwrap_or(base.id.clone());
                m.insert("firstKeptEntryId".into(), first_kept.into());
                m.insert("tokensBefore".into(), (*tokens_before).into());
                opt(&mut m, "details", details);
                opt(&mut m, "usage", usage);
                opt(&mut m, "fromHook", &from_hook.map(Value::Bool));
                if let Some(system) = system_message {
                    // Pi stamps the replayed prompt with the compaction's own time.
                    let mut system = system.clone();
                    if let (Some(obj), Some(ms)) = (
                        system.as_object_mut(),
                        crate::time::parse_millis(&base.timestamp),
                    ) {
                        obj.insert("timestamp".into(), (ms as i64).into());
                    }
                    m.insert("systemMessage".into(), system);
                }
            }
            NewEntry::BranchSummary {
                from_id,
                summary,
                details,
                usage,
                from_hook,
            } => {
                put_base(&mut m);
                m.insert("fromId".into(), from_id.clone().into());
                m.insert("summary".into(), summary.clone().into());
                opt(&mut m, "details", details);
                opt(&mut m, "usage", usage);
                opt(&mut m, "fromHook", &from_hook.map(Value::Bool));
            }
            NewEntry::Custom { custom_type, data } => {
                m.insert("customType".into(), custom_type.clone().into());
                opt(&mut m, "data", data);
                put_base(&mut m);
            }
            NewEntry::CustomMessage {
                custom_type,
                content,
                display,
                details,
            } => {
                m.insert("customType".into(), custom_type.clone().into());
                m.insert("content".into(), content.clone());
                m.insert("display".into(), (*display).into());
                opt(&mut m, "details", details);
                put_base(&mut m);
            }
            NewEntry::Label { target_id, label } => {
                put_base(&mut m);
                m.insert("targetId".into(), target_id.clone().into());
                if let Some(label) = label {
                    m.insert("label".into(), label.clone().into());
                }
            }
            NewEntry::SessionInfo { name } => {
                put_base(&mut m);
                m.insert("name".into(), name.clone().into());
            }
            NewEntry::ContextEdit {
                target_id,
                replacement,
            } => {
                put_base(&mut m);
                m.insert("targetId".into(), target_id.clone().into());
                m.insert("replacement".into(), replacement.clone());
            }
        }
        Value::Object(m)
    }

    /// The JSONL line (without the LF).
    pub fn to_line(&self, base: &EntryBase) -> String {
        // A `Value` always prints (its keys are strings).
        self.to_value(base).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> EntryBase {
        EntryBase {
            id: "abcd1234".into(),
            parent_id: None,
            timestamp: "2026-01-01T00:00:00.000Z".into(),
        }
    }

    #[test]
    fn custom_puts_payload_before_base_like_pi() {
        let line = NewEntry::Custom {
            custom_type: "x".into(),
            data: Some(json!({"k":1})),
        }
        .to_line(&base());
        assert_eq!(
            line,
            r#"{"type":"custom","customType":"x","data":{"k":1},"id":"abcd1234","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}"#
        );
    }

    #[test]
    fn cleared_label_has_no_label_key() {
        let line = NewEntry::Label {
            target_id: "t".into(),
            label: None,
        }
        .to_line(&base());
        assert!(!line.contains("\"label\":"));
    }

    #[test]
    fn retain_none_compaction_points_at_itself() {
        let v = NewEntry::Compaction {
            summary: "s".into(),
            first_kept_entry_id: None,
            tokens_before: 5,
            details: None,
            usage: None,
            from_hook: Some(false),
            system_message: None,
        }
        .to_value(&base());
        assert_eq!(v["firstKeptEntryId"], "abcd1234");
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "type",
                "id",
                "parentId",
                "timestamp",
                "summary",
                "firstKeptEntryId",
                "tokensBefore",
                "fromHook"
            ]
        );
    }
}
