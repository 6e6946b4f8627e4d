//! The few fields of an entry line the tree needs, read without building the payload.
//!
//! Opening a session only has to know, per line, its type, id, parent, timestamp,
//! message role and (for labels and names) a couple of small fields. Everything
//! else (message content, tool output, images) is skipped by the JSON parser
//! without allocation, by the validating scanner in [`crate::scan`].

use serde_json::Value;
use std::borrow::Cow;

/// How an entry names its parent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ParentRef<'a> {
    /// No `parentId` key (v1 entries, or hand-made files).
    #[default]
    Missing,
    /// `"parentId": null`: a root.
    Null,
    /// `"parentId": "…"`.
    Id(Cow<'a, str>),
    /// A value of another type; Pi treats truthy non-strings as an unknown parent.
    Other,
}

impl ParentRef<'_> {
    pub fn as_id(&self) -> Option<&str> {
        match self {
            ParentRef::Id(id) if !id.is_empty() => Some(id),
            _ => None,
        }
    }

    pub fn into_owned(self) -> ParentRef<'static> {
        match self {
            ParentRef::Missing => ParentRef::Missing,
            ParentRef::Null => ParentRef::Null,
            ParentRef::Id(id) => ParentRef::Id(Cow::Owned(id.into_owned())),
            ParentRef::Other => ParentRef::Other,
        }
    }
}

/// The tree-relevant fields of one line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntryHead<'a> {
    /// `type`, when it is a string.
    pub kind: Option<Cow<'a, str>>,
    /// `id`, when it is a string.
    pub id: Option<Cow<'a, str>>,
    pub parent: ParentRef<'a>,
    /// `timestamp`, when it is a string.
    pub timestamp: Option<Cow<'a, str>>,
    /// `message.role` of `message` entries.
    pub role: Option<Cow<'a, str>>,
    /// `targetId` of `label` and `context_edit` entries.
    pub target_id: Option<Cow<'a, str>>,
    /// `label` of `label` entries (only string labels; JS truthiness applies).
    pub label: Option<Cow<'a, str>>,
    /// `name` of `session_info` entries.
    pub name: Option<Cow<'a, str>>,
    /// `version` of the header, when numeric.
    pub version: Option<f64>,
    /// The line is valid JSON but a falsy value (`null`, `false`, `0`, `""`):
    /// Pi's loader drops such lines.
    pub falsy: bool,
}

impl<'a> EntryHead<'a> {
    /// Validates a line as `JSON.parse` would and reads its head; `Err` names why the
    /// line is not JSON. Non-object values have no fields (and may be falsy).
    pub fn parse(bytes: &'a [u8]) -> Result<EntryHead<'a>, String> {
        match crate::scan::scan(bytes) {
            Ok(crate::scan::Scanned::Object(head)) => Ok(head),
            Ok(crate::scan::Scanned::Other { falsy }) => Ok(EntryHead {
                falsy,
                ..EntryHead::default()
            }),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Reads the same fields from an already parsed value.
    pub fn from_value(value: &'a Value) -> EntryHead<'a> {
        let s = |key: &str| value.get(key).and_then(Value::as_str).map(Cow::Borrowed);
        let parent = match value.get("parentId") {
            None => ParentRef::Missing,
            Some(Value::Null) => ParentRef::Null,
            Some(Value::String(id)) => ParentRef::Id(Cow::Borrowed(id)),
            Some(_) => ParentRef::Other,
        };
        EntryHead {
            kind: s("type"),
            id: s("id"),
            parent,
            timestamp: s("timestamp"),
            role: value
                .get("message")
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                .map(Cow::Borrowed),
            target_id: s("targetId"),
            label: s("label"),
            name: s("name"),
            version: value.get("version").and_then(Value::as_f64),
            falsy: false,
        }
    }

    pub fn into_owned(self) -> EntryHead<'static> {
        let own = |c: Option<Cow<'a, str>>| c.map(|c| Cow::Owned(c.into_owned()));
        EntryHead {
            kind: own(self.kind),
            id: own(self.id),
            parent: self.parent.into_owned(),
            timestamp: own(self.timestamp),
            role: own(self.role),
            target_id: own(self.target_id),
            label: own(self.label),
            name: own(self.name),
            version: self.version,
            falsy: self.falsy,
        }
    }

    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("")
    }

    pub fn is_header(&self) -> bool {
        self.kind() == "session"
    }
}

/// JavaScript truthiness of a parsed JSON value.
pub fn is_js_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_and_skips_payload() {
        let line = br#"{"type":"message","id":"ab12cd34","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"content":[{"type":"text","text":"x"}],"role":"user"}}"#;
        let h = EntryHead::parse(line).unwrap();
        assert_eq!(h.kind(), "message");
        assert_eq!(h.id.as_deref(), Some("ab12cd34"));
        assert_eq!(h.parent, ParentRef::Null);
        assert_eq!(h.role.as_deref(), Some("user"));
    }

    #[test]
    fn escaped_id_is_decoded() {
        let h = EntryHead::parse(br#"{"type":"label","id":"a\u0062","parentId":"x"}"#).unwrap();
        assert_eq!(h.id.as_deref(), Some("ab"));
        assert_eq!(h.parent, ParentRef::Id("x".into()));
    }

    #[test]
    fn duplicate_keys_take_the_last_like_js() {
        let h = EntryHead::parse(br#"{"type":"message","id":"a","id":"b"}"#).unwrap();
        assert_eq!(h.id.as_deref(), Some("b"));
    }

    #[test]
    fn odd_types_fall_back() {
        let h = EntryHead::parse(br#"{"type":7,"id":"a","parentId":5,"label":true}"#).unwrap();
        assert_eq!(h.kind, None);
        assert_eq!(h.parent, ParentRef::Other);
        assert_eq!(h.label, None);
    }

    /// Found by engine/tests/bounded.rs: a payload nested a million levels deep must not
    /// become an entry whose value `parse_value` then refuses.
    #[test]
    fn deep_nesting_is_judged_like_the_full_parse() {
        for depth in [1, 99, 100, 101, 124, 125, 126, 127, 128, 129, 1000, 100_000] {
            let line = format!(
                r#"{{"type":"message","id":"a","message":{{"role":"user","content":{}{}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let full = crate::jsonl::parse_value(line.as_bytes()).is_ok();
            assert_eq!(
                EntryHead::parse(line.as_bytes()).is_ok(),
                full,
                "depth {depth}"
            );
        }
        // Brackets inside strings do not nest.
        let line = format!(
            r#"{{"type":"message","id":"a","x":"{}"}}"#,
            "[{".repeat(500)
        );
        assert_eq!(
            EntryHead::parse(line.as_bytes()).unwrap().id.as_deref(),
            Some("a")
        );
    }

    /// Found by fuzz/fuzz_targets/jsonl_line.rs: a field with both an escape and an
    /// invalid UTF-8 byte kept its escape undecoded (`\\n` instead of a newline).
    #[test]
    fn escapes_are_decoded_next_to_invalid_utf8() {
        let line = b"{\"type\":\"message\",\"id\":\"a\",\"timestamp\":\"x\\ny\xff\"}";
        let head = EntryHead::parse(line).unwrap();
        assert_eq!(head.timestamp.as_deref(), Some("x\ny\u{fffd}"));
        let value = crate::jsonl::parse_value(line).unwrap();
        assert_eq!(head.timestamp, EntryHead::from_value(&value).timestamp);
    }

    #[test]
    fn missing_parent_is_distinguished_from_null() {
        let h = EntryHead::parse(br#"{"type":"message"}"#).unwrap();
        assert_eq!(h.parent, ParentRef::Missing);
    }

    #[test]
    fn rejects_malformed() {
        assert!(EntryHead::parse(br#"{"type":"message""#).is_err());
    }

    #[test]
    fn non_objects_have_no_fields() {
        let h = EntryHead::parse(br#"[1,2]"#).unwrap();
        assert_eq!(h.kind, None);
        assert!(!h.falsy);
        assert!(EntryHead::parse(b"null").unwrap().falsy);
        assert!(EntryHead::parse(b"0").unwrap().falsy);
    }
}
