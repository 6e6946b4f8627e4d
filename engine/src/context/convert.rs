//! Pi's `convertToLlm`: session-level messages to the messages a provider gets.

use super::{
    BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX, COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
};
use crate::js::{self, to_js_string};
use serde_json::{json, Value};

/// The text a `bashExecution` message becomes for the model.
pub fn bash_execution_to_text(m: &Value) -> String {
    let s = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
    let truthy = |k: &str| js::truthy(m.get(k));
    let mut text = format!("Ran `{}`\n", to_js_string(m.get("command")));
    if truthy("output") {
        text.push_str(&format!("```\n{}\n```", to_js_string(m.get("output"))));
    } else {
        text.push_str("(no output)");
    }
    if truthy("cancelled") {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = m.get("exitCode").filter(|v| !v.is_null()) {
        if code.as_f64() != Some(0.0) {
            text.push_str(&format!(
                "\n\nCommand exited with code {}",
                to_js_string(Some(code))
            ));
        }
    }
    if truthy("truncated") && truthy("fullOutputPath") {
        text.push_str(&format!(
            "\n\n[Output truncated. Full output: {}]",
            s("fullOutputPath")
        ));
    }
    text
}

fn user_text(text: String, timestamp: Option<&Value>) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("role".into(), "user".into());
    m.insert("content".into(), json!([{"type": "text", "text": text}]));
    if let Some(ts) = timestamp {
        m.insert("timestamp".into(), ts.clone());
    }
    Value::Object(m)
}

/// Converts each message; roles the model does not know are dropped.
pub fn convert_to_llm<'a>(messages: impl IntoIterator<Item = &'a Value>) -> Vec<Value> {
    messages
        .into_iter()
        .filter_map(|m| {
            let ts = m.get("timestamp");
            match m.get("role").and_then(Value::as_str) {
                Some("bashExecution") => {
                    if js::truthy(m.get("excludeFromContext")) {
                        None
                    } else {
                        Some(user_text(bash_execution_to_text(m), ts))
                    }
                }
                Some("custom") => {
                    let content = match m.get("content") {
                        Some(Value::String(s)) => json!([{"type": "text", "text": s}]),
                        Some(other) => other.clone(),
                        None => Value::Null,
                    };
                    let mut out = serde_json::Map::new();
                    out.insert("role".into(), "user".into());
                    if m.get("content").is_some() {
                        out.insert("content".into(), content);
                    }
                    if let Some(ts) = ts {
                        out.insert("timestamp".into(), ts.clone());
                    }
                    Some(Value::Object(out))
                }
                Some("branchSummary") => Some(user_text(
                    format!(
                        "{BRANCH_SUMMARY_PREFIX}{}{BRANCH_SUMMARY_SUFFIX}",
                        to_js_string(m.get("summary"))
                    ),
                    ts,
                )),
                Some("compactionSummary") => Some(user_text(
                    format!(
                        "{COMPACTION_SUMMARY_PREFIX}{}{COMPACTION_SUMMARY_SUFFIX}",
                        to_js_string(m.get("summary"))
                    ),
                    ts,
                )),
                Some("system" | "user" | "assistant" | "toolResult") => Some(m.clone()),
                _ => None,
            }
        })
        .collect()
}
