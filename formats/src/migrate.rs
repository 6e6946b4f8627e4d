//! Migration of version 1 and 2 sessions to version 3, with Pi's semantics.
//!
//! * v1 → v2: every non-header entry gets a fresh 8-hex id and the previous
//!   entry as parent (a linear chain); a compaction's `firstKeptEntryIndex`
//!   (an index into the parsed lines, header included) becomes `firstKeptEntryId`.
//! * v2 → v3: the message role `hookMessage` is renamed `custom`.
//!
//! Keys keep their positions; new keys are appended, as JavaScript objects do.
//! Migration works on parsed values in memory; writing the result to a new file
//! (temp file + rename, original kept) is the caller's job.

use crate::header::CURRENT_VERSION;
use serde_json::Value;

/// The version a session declares: the first `session` entry's `version`, or 1.
pub fn declared_version(entries: &[Value]) -> f64 {
    entries
        .iter()
        .find(|e| e.get("type").and_then(Value::as_str) == Some("session"))
        .and_then(|h| h.get("version"))
        .and_then(Value::as_f64)
        .unwrap_or(1.0)
}

/// Whether [`migrate`] would change anything.
pub fn needs_migration(entries: &[Value]) -> bool {
    declared_version(entries) < CURRENT_VERSION as f64
}

/// Migrates in place; returns whether anything was migrated.
/// `new_id` produces ids for v1 entries (Pi does not collision-check them).
pub fn migrate(entries: &mut [Value], mut new_id: impl FnMut() -> String) -> bool {
    let version = declared_version(entries);
    if version >= CURRENT_VERSION as f64 {
        return false;
    }
    if version < 2.0 {
        v1_to_v2(entries, &mut new_id);
    }
    v2_to_v3(entries);
    true
}

fn is_header(entry: &Value) -> bool {
    entry.get("type").and_then(Value::as_str) == Some("session")
}

fn v1_to_v2(entries: &mut [Value], new_id: &mut impl FnMut() -> String) {
    let mut prev: Option<String> = None;
    for i in 0..entries.len() {
        if is_header(&entries[i]) {
            if let Some(obj) = entries[i].as_object_mut() {
                obj.insert("version".into(), 2.into());
            }
            continue;
        }
        let id = new_id();
        let first_kept_index = entries[i]
            .get("firstKeptEntryIndex")
            .and_then(Value::as_f64)
            .filter(|_| entries[i].get("type").and_then(Value::as_str) == Some("compaction"));
        // The target precedes this entry, so it already has its new id.
        let first_kept_id = first_kept_index.and_then(|idx| {
            if idx < 0.0 || idx.fract() != 0.0 {
                return None;
            }
            let target = entries.get(idx as usize)?;
            if is_header(target) {
                return None;
            }
            target.get("id").cloned()
        });
        let Some(obj) = entries[i].as_object_mut() else {
            continue;
        };
        obj.insert("id".into(), Value::String(id.clone()));
        obj.insert(
            "parentId".into(),
            prev.clone().map_or(Value::Null, Value::String),
        );
        prev = Some(id);
        if first_kept_index.is_some() {
            if let Some(target_id) = first_kept_id {
                obj.insert("firstKeptEntryId".into(), target_id);
            }
            obj.shift_remove("firstKeptEntryIndex");
        }
    }
}

fn v2_to_v3(entries: &mut [Value]) {
    for entry in entries.iter_mut() {
        if is_header(entry) {
            if let Some(obj) = entry.as_object_mut() {
                obj.insert("version".into(), CURRENT_VERSION.into());
            }
            continue;
        }
        if entry.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        if let Some(message) = entry.get_mut("message").and_then(Value::as_object_mut) {
            if message.get("role").and_then(Value::as_str) == Some("hookMessage") {
                message.insert("role".into(), "custom".into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("id{n:06}")
        }
    }

    #[test]
    fn v1_becomes_a_linear_chain_with_resolved_compaction() {
        let mut entries = vec![
            json!({"type":"session","timestamp":"t","cwd":"/"}),
            json!({"type":"message","timestamp":"t","message":{"role":"user"}}),
            json!({"type":"message","timestamp":"t","message":{"role":"assistant"}}),
            json!({"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":2,"tokensBefore":1}),
        ];
        assert!(migrate(&mut entries, ids()));
        assert_eq!(entries[0]["version"], 3);
        assert_eq!(entries[1]["parentId"], Value::Null);
        assert_eq!(entries[2]["parentId"], "id000001");
        assert_eq!(entries[3]["firstKeptEntryId"], "id000002");
        let keys: Vec<_> = entries[3].as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "type",
                "timestamp",
                "summary",
                "tokensBefore",
                "id",
                "parentId",
                "firstKeptEntryId"
            ]
        );
    }

    #[test]
    fn unresolvable_index_is_dropped() {
        let mut entries = vec![
            json!({"type":"session"}),
            json!({"type":"compaction","firstKeptEntryIndex":0}),
            json!({"type":"compaction","firstKeptEntryIndex":99}),
        ];
        migrate(&mut entries, ids());
        assert!(entries[1].get("firstKeptEntryIndex").is_none());
        assert!(entries[1].get("firstKeptEntryId").is_none());
        assert!(entries[2].get("firstKeptEntryId").is_none());
    }

    #[test]
    fn v2_renames_hook_messages_only() {
        let mut entries = vec![
            json!({"type":"session","version":2,"id":"s"}),
            json!({"type":"message","id":"a","parentId":null,"message":{"role":"hookMessage"}}),
        ];
        assert!(migrate(&mut entries, ids()));
        assert_eq!(entries[1]["message"]["role"], "custom");
        assert_eq!(entries[1]["id"], "a");
    }

    #[test]
    fn v3_is_untouched() {
        let mut entries = vec![json!({"type":"session","version":3,"id":"s"})];
        let before = entries.clone();
        assert!(!migrate(&mut entries, ids()));
        assert_eq!(entries, before);
    }
}
