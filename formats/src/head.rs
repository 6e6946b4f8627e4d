//! The few fields of an entry line the tree needs, read without building the payload.
//!
//! Opening a session only has to know, per line, its type, id, parent, timestamp,
//! message role and (for labels and names) a couple of small fields. Everything
//! else (message content, tool output, images) is skipped by the JSON parser
//! without allocation. Lines the fast path cannot take (duplicate keys, fields
//! of unexpected types) fall back to a full `serde_json::Value` parse and read
//! the same fields with JavaScript's loose semantics.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

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
    /// Reads the head of a line that is known to be valid JSON, or returns the parse error.
    pub fn parse(bytes: &'a [u8]) -> Result<EntryHead<'a>, String> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        match FastHead::deserialize(&mut de).and_then(|h| de.end().map(|_| h)) {
            // Skipped payloads are not depth-checked by serde_json (`IgnoredAny`), the full
            // parse is (128 levels): a line nested that deep must be refused here too, or it
            // would be indexed as an entry whose value then cannot be read.
            Ok(FastHead(head)) if !may_nest_deeper_than(bytes, FAST_PATH_MAX_DEPTH) => Ok(head),
            _ => {
                let value = crate::jsonl::parse_value(bytes)?;
                let mut head = EntryHead::from_value(&value).into_owned();
                head.falsy = is_js_falsy(&value);
                Ok(head)
            }
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

/// Lines that may nest deeper than this take the full parse, which decides with
/// serde_json's own limit (128). Below it, no real session line comes close.
const FAST_PATH_MAX_DEPTH: usize = 100;

/// Whether JSON `bytes` may nest arrays and objects deeper than `limit`: first a
/// count of opening brackets anywhere (memchr, no parsing), and only when there
/// are that many, a scan that skips strings.
fn may_nest_deeper_than(bytes: &[u8], limit: usize) -> bool {
    if memchr::memchr2_iter(b'[', b'{', bytes).nth(limit).is_none() {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
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

/// The fast path: a hand-written visitor so unknown keys are skipped, not collected.
struct FastHead<'a>(EntryHead<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for FastHead<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(HeadVisitor(std::marker::PhantomData))
    }
}

struct HeadVisitor<'a>(std::marker::PhantomData<&'a ()>);

/// Any duplicate key means the slow path must decide (JS: the last one wins).
fn set_once<T, E: de::Error>(slot: &mut Option<T>, v: T, key: &str) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::custom(format!("duplicate key {key}")));
    }
    *slot = Some(v);
    Ok(())
}

impl<'de: 'a, 'a> Visitor<'de> for HeadVisitor<'a> {
    type Value = FastHead<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut head = EntryHead::default();
        let mut parent: Option<ParentRef<'a>> = None;
        let mut version: Option<f64> = None;
        let mut message_seen = false;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "type" => set_once(&mut head.kind, map.next_value::<Str<'a>>()?.0, "type")?,
                "id" => set_once(&mut head.id, map.next_value::<Str<'a>>()?.0, "id")?,
                "timestamp" => set_once(
                    &mut head.timestamp,
                    map.next_value::<Str<'a>>()?.0,
                    "timestamp",
                )?,
                "targetId" => set_once(
                    &mut head.target_id,
                    map.next_value::<Str<'a>>()?.0,
                    "targetId",
                )?,
                "label" => set_once(&mut head.label, map.next_value::<Str<'a>>()?.0, "label")?,
                "name" => set_once(&mut head.name, map.next_value::<Str<'a>>()?.0, "name")?,
                "version" => set_once(&mut version, map.next_value::<f64>()?, "version")?,
                "parentId" => {
                    let p = match map.next_value::<Option<Str<'a>>>()? {
                        None => ParentRef::Null,
                        Some(s) => ParentRef::Id(s.0),
                    };
                    set_once(&mut parent, p, "parentId")?
                }
                "message" => {
                    if message_seen {
                        return Err(de::Error::custom("duplicate key message"));
                    }
                    message_seen = true;
                    head.role = map.next_value::<MessageRole<'a>>()?.0;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        head.parent = parent.unwrap_or(ParentRef::Missing);
        head.version = version;
        Ok(FastHead(head))
    }
}

/// A string field; any other JSON type fails the fast path.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Cow::<'de, str>::deserialize(d).map(Str)
    }
}

/// `message.role`, skipping the rest of the message.
struct MessageRole<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for MessageRole<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = MessageRole<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut role = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "role" {
                        set_once(&mut role, map.next_value::<Str<'a>>()?.0, "role")?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(MessageRole(role))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
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

    /// Found by engine/tests/bounded.rs: the fast path skipped a payload nested a
    /// million levels deep (serde_json's `IgnoredAny` has no depth limit), so the
    /// line became an entry whose value `parse_value` then refused.
    #[test]
    fn deep_nesting_is_judged_like_the_full_parse() {
        for depth in [1, 99, 100, 101, 126, 127, 128, 129, 1000, 100_000] {
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
