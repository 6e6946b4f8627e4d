//! `store()`/`load()` kept in the session as Pi keeps them: every successful script that
//! wrote values appends one `codemode-store` custom entry with `data: {set, delete}`, and a
//! script starts with the entries on the current branch applied from the root. So a resumed
//! session keeps the values, each branch sees only the writes on its own path, and session
//! files are interchangeable with Pi's.

use serde_json::Map;
use serde_json::Value;

use crate::tools::ToolSession;

/// The custom entry type of one script's store writes.
pub const STORE_ENTRY_TYPE: &str = "codemode-store";

/// The values `load()` sees: the branch's `codemode-store` entries applied in order (each
/// entry's deletions first, then its values). Entries without Pi's shape are skipped.
pub fn read_store(session: &dyn ToolSession) -> Map<String, Value> {
    apply_entries(session.branch_custom_data(STORE_ENTRY_TYPE))
}

fn apply_entries(entries: Vec<Value>) -> Map<String, Value> {
    let mut store = Map::new();
    for data in entries {
        let (Some(set), Some(deleted)) = (
            data.get("set").and_then(Value::as_object),
            data.get("delete").and_then(Value::as_array),
        ) else {
            continue;
        };
        if !deleted.iter().all(Value::is_string) {
            continue;
        }
        for key in deleted.iter().filter_map(Value::as_str) {
            store.remove(key);
        }
        for (key, value) in set {
            store.insert(key.clone(), value.clone());
        }
    }
    store
}

/// The entry data for a script's writes (`None` deletes the key), or `None` when it wrote
/// nothing.
pub fn entry_data(writes: Vec<(String, Option<Value>)>) -> Option<Value> {
    if writes.is_empty() {
        return None;
    }
    let mut set = Map::new();
    let mut deleted = Vec::new();
    for (key, value) in writes {
        match value {
            Some(value) => {
                set.insert(key, value);
            }
            None => deleted.push(Value::String(key)),
        }
    }
    Some(serde_json::json!({"set": set, "delete": deleted}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_apply_from_the_root_and_malformed_ones_are_skipped() {
        let store = apply_entries(vec![
            json!({"set": {"a": 1, "b": {"x": [1]}}, "delete": []}),
            json!({"set": {"c": 3}, "delete": ["a"]}),
            json!({"set": {"b": 2}}),
            json!({"set": {"d": 4}, "delete": [1]}),
            json!({"set": {"a": "again"}, "delete": ["c"]}),
        ]);
        assert_eq!(Value::Object(store), json!({"b": {"x": [1]}, "a": "again"}));
    }

    #[test]
    fn writes_become_pis_set_and_delete() {
        assert_eq!(entry_data(vec![]), None);
        assert_eq!(
            entry_data(vec![
                ("k".into(), Some(json!({"n": 1}))),
                ("gone".into(), None)
            ]),
            Some(json!({"set": {"k": {"n": 1}}, "delete": ["gone"]}))
        );
    }
}
