//! Compaction and branch summaries, as Pi 1.6.0 does them.
//!
//! A long session outgrows the model's window. Compaction replaces its older
//! part with a summary: [`prepare_compaction`] decides, over the projected
//! context, which entry to keep from and which messages to summarize;
//! [`compact`] asks a [`Summarizer`] for the summary; the caller appends the
//! `compaction` entry. Leaving a branch of the session tree works the same way
//! on a smaller scale ([`collect_entries_for_branch_summary`],
//! [`prepare_branch_entries`], [`generate_branch_summary`]).
//!
//! Everything except the summarizer call is a pure function of entries as
//! `serde_json::Value`s, and is checked against what real Pi computes for the
//! same session files (`tests/compaction_conformance.rs`). Pi measures text in
//! UTF-16 code units and sizes values with `JSON.stringify`; [`js`] holds those
//! semantics.
//!
//! ```
//! use pi_engine::compaction::{prepare_compaction, CompactionSettings};
//! use serde_json::json;
//!
//! let entry = |id: &str, parent: Option<&str>, role: &str, text: String| json!({
//!     "type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
//!     "message": {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
//! });
//! let path = vec![
//!     entry("a", None, "user", "x".repeat(400)),
//!     entry("b", Some("a"), "assistant", "y".repeat(400)),
//!     entry("c", Some("b"), "user", "z".repeat(400)),
//! ];
//! let settings = CompactionSettings { keep_recent_tokens: 100, ..Default::default() };
//! let prep = prepare_compaction(&path, &settings).expect("something to compact");
//! assert_eq!(prep.first_kept_entry_id, "c");
//! assert_eq!(prep.messages_to_summarize.len(), 2);
//! ```

mod branch;
mod file_ops;
mod prepare;
mod serialize;
mod summarize;
mod tokens;

pub use crate::context::transcript::current_system_message;
pub use branch::{
    collect_entries_for_branch_summary, navigation_target, prepare_branch_entries, BranchEntries,
    BranchPreparation, NavigationTarget,
};
pub use file_ops::{compute_file_lists, format_file_operations, FileLists, FileOps};
pub use prepare::{
    find_cut_point, no_preparation_reason, plan_compaction, prepare_compaction, CompactionInput,
    CompactionPlan, CompactionPreparation, CutPoint, REASON_ALREADY_COMPACTED, REASON_TOO_SMALL,
};
pub use serialize::{
    branch_summary_prompt, history_summary_prompt, serialize_conversation, turn_prefix_prompt,
    ConversationText, BRANCH_SUMMARY_PREAMBLE, BRANCH_SUMMARY_PROMPT, SUMMARIZATION_SYSTEM_PROMPT,
    TOOL_RESULT_MAX_CHARS,
};
pub use summarize::{
    compact, generate_branch_summary, summarize_with_retry, BranchSummaryOutcome,
    BranchSummarySettings, CompactionResult, RetrySettings, StopReason, SummarizeError, Summarizer,
    SummaryOptions, SummaryRequest, SummaryResponse, NO_CONTENT_SUMMARY,
};
pub use tokens::{
    calculate_context_tokens, context_tokens_after_response, estimate_context_tokens,
    estimate_projected_context_tokens, estimate_tokens, last_assistant_usage,
    latest_compaction_millis, should_compact, ContextTokens, ContextTokensAcc, ProjectedTokensAcc,
    ESTIMATED_IMAGE_CHARS,
};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Effective compaction settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionSettings {
    /// Compact automatically when the context nears the window.
    pub enabled: bool,
    /// Tokens kept free for the answer: compaction triggers above `window - reserve`.
    pub reserve_tokens: u64,
    /// Roughly how many tokens of recent conversation a compaction keeps verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            enabled: true,
            reserve_tokens: 16384,
            keep_recent_tokens: 20000,
        }
    }
}

/// The `compaction` key of settings.json, as written (every field optional,
/// token settings overridable per `provider/model-id`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSettingsFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_tokens: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_recent_tokens: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_overrides: Option<BTreeMap<String, Value>>,
}

/// A compaction setting that is not a non-negative safe integer; Pi refuses it
/// with the same message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid {setting} setting: {value}. {expected}")]
pub struct InvalidSetting {
    pub setting: String,
    pub value: String,
    pub expected: &'static str,
}

const SAFE_INTEGER: &str = "Expected a non-negative safe integer.";

fn token_setting(
    value: Option<&Value>,
    setting: impl Fn() -> String,
) -> Result<Option<u64>, InvalidSetting> {
    let Some(value) = value else { return Ok(None) };
    let max_safe = 9_007_199_254_740_991.0;
    match value.as_f64() {
        Some(f) if value.is_number() && f.fract() == 0.0 && (0.0..=max_safe).contains(&f) => {
            Ok(Some(f as u64))
        }
        _ => Err(InvalidSetting {
            setting: setting(),
            value: crate::js::to_js_string(Some(value)),
            expected: SAFE_INTEGER,
        }),
    }
}

impl CompactionSettingsFile {
    /// The effective settings for a model (`provider/id`, when one is selected):
    /// a model override wins over the plain setting, which wins over the default.
    pub fn resolve(&self, model_key: Option<&str>) -> Result<CompactionSettings, InvalidSetting> {
        let defaults = CompactionSettings::default();
        let override_entry = match (model_key, &self.model_overrides) {
            (Some(key), Some(overrides)) => match overrides.get(key) {
                Some(Value::Object(o)) => Some(o),
                None => None,
                Some(other) => {
                    return Err(InvalidSetting {
                        setting: format!("compaction.modelOverrides[\"{key}\"]"),
                        value: crate::js::to_js_string(Some(other)),
                        expected: "Expected an object.",
                    })
                }
            },
            _ => None,
        };
        let field =
            |name: &str, plain: Option<&Value>, default: u64| -> Result<u64, InvalidSetting> {
                let ordinary = token_setting(plain, || format!("compaction.{name}"))?;
                let over = token_setting(override_entry.and_then(|o| o.get(name)), || {
                    format!(
                        "compaction.modelOverrides[\"{}\"].{name}",
                        model_key.unwrap_or_default()
                    )
                })?;
                Ok(over.or(ordinary).unwrap_or(default))
            };
        Ok(CompactionSettings {
            enabled: self.enabled.unwrap_or(defaults.enabled),
            reserve_tokens: field(
                "reserveTokens",
                self.reserve_tokens.as_ref(),
                defaults.reserve_tokens,
            )?,
            keep_recent_tokens: field(
                "keepRecentTokens",
                self.keep_recent_tokens.as_ref(),
                defaults.keep_recent_tokens,
            )?,
        })
    }
}

#[cfg(test)]
mod settings_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_win_and_bad_values_are_refused() {
        let file: CompactionSettingsFile = serde_json::from_value(json!({
            "keepRecentTokens": 1000,
            "modelOverrides": {"anthropic/x": {"reserveTokens": 5}}
        }))
        .unwrap();
        assert_eq!(
            file.resolve(Some("anthropic/x")).unwrap(),
            CompactionSettings {
                enabled: true,
                reserve_tokens: 5,
                keep_recent_tokens: 1000
            }
        );
        assert_eq!(file.resolve(None).unwrap().reserve_tokens, 16384);
        let bad: CompactionSettingsFile =
            serde_json::from_value(json!({"reserveTokens": -1})).unwrap();
        assert_eq!(
            bad.resolve(None).unwrap_err().to_string(),
            "Invalid compaction.reserveTokens setting: -1. Expected a non-negative safe integer."
        );
    }
}
