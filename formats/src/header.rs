//! The `session` header line.

use serde::Serialize;
use serde_json::Value;

/// The session format version this crate writes.
pub const CURRENT_VERSION: u64 = 3;

/// A header we create, in Pi's key order.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NewHeader {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub version: u64,
    pub id: String,
    pub timestamp: String,
    pub cwd: String,
    #[serde(rename = "parentSession", skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
}

impl NewHeader {
    pub fn new(id: String, timestamp: String, cwd: String, parent_session: Option<String>) -> Self {
        NewHeader {
            kind: "session",
            version: CURRENT_VERSION,
            id,
            timestamp,
            cwd,
            parent_session,
        }
    }

    pub fn to_line(&self) -> String {
        // Strings and an integer only: serialization cannot fail.
        #[allow(clippy::expect_used)]
        serde_json::to_string(self).expect("header serializes")
    }
}

/// Pi accepts a file only if its first parsed line is `type: "session"` with a string `id`.
pub fn is_valid_header(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str) == Some("session")
        && value.get("id").is_some_and(Value::is_string)
}

/// The header's `version`; absent means version 1.
pub fn version_of(value: &Value) -> f64 {
    value.get("version").and_then(Value::as_f64).unwrap_or(1.0)
}
