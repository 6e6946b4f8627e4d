//! System-message replay: the prompt and tools in force after every `system` message.
//!
//! Pi 1.6 stores the system prompt and tool set as `system` messages in the session
//! (`content`, patchable `sections`, `toolsAdded`/`toolsRemoved`). A compaction carries
//! the replayed result as its `systemMessage`, so the kept context stays self-contained.

use crate::js;
use serde_json::{Map, Value};

/// The system messages of `path`'s context, in order. The context is projected one entry
/// at a time and everything else is dropped: a huge context is never held to find them.
pub fn context_system_messages<S: super::EntrySource + ?Sized>(path: &S) -> Vec<Value> {
    let mut system = Vec::new();
    super::project_each(path, |_, messages| {
        system.extend(
            messages
                .into_iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("system")),
        )
    });
    system
}

/// Pi's `getCurrentSystemMessage`: every system message replayed into one —
/// content appended, sections patched by name (a `null` removes one), tools
/// added and removed by name. `None` when there is no system message and no tool.
pub fn current_system_message<'a>(messages: impl IntoIterator<Item = &'a Value>) -> Option<Value> {
    let mut content: Vec<String> = Vec::new();
    // JS `Map`s: re-setting a key keeps its position; delete then set moves it last.
    let mut sections: Vec<(String, Value)> = Vec::new();
    let mut tools: Vec<(String, Value)> = Vec::new();
    let mut timestamp: Option<Value> = None;
    for message in messages {
        if message.get("role").and_then(Value::as_str) != Some("system") {
            continue;
        }
        if timestamp.is_none() {
            timestamp = message.get("timestamp").filter(|t| !t.is_null()).cloned();
        }
        let text = js::content_text(message.get("content"), "\n");
        if !text.is_empty() {
            content.push(text);
        }
        if let Some(Value::Object(patch)) = message.get("sections") {
            for key in js::object_keys(patch) {
                let value = &patch[key.as_str()];
                if value.is_null() {
                    sections.retain(|(k, _)| k != key);
                } else {
                    map_set(&mut sections, key, value.clone());
                }
            }
        }
        for removed in array_items(message.get("toolsRemoved")) {
            let name = js::to_js_string(removed.get("name"));
            tools.retain(|(k, _)| *k != name);
        }
        for added in array_items(message.get("toolsAdded")) {
            let name = js::to_js_string(added.get("name"));
            map_set(&mut tools, &name, added.clone());
        }
    }
    if timestamp.is_none() && tools.is_empty() {
        return None;
    }
    let mut m = Map::new();
    m.insert("role".into(), "system".into());
    m.insert("content".into(), Value::String(content.join("\n\n")));
    if !sections.is_empty() {
        m.insert(
            "sections".into(),
            Value::Object(sections.into_iter().collect()),
        );
    }
    if !tools.is_empty() {
        m.insert(
            "toolsAdded".into(),
            Value::Array(tools.into_iter().map(|(_, t)| t).collect()),
        );
    }
    m.insert(
        "timestamp".into(),
        timestamp.unwrap_or_else(|| Value::from(0)),
    );
    Some(Value::Object(m))
}

fn map_set(map: &mut Vec<(String, Value)>, key: &str, value: Value) {
    match map.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => map.push((key.to_string(), value)),
    }
}

fn array_items(v: Option<&Value>) -> &[Value] {
    match v {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replays_sections_and_tools() {
        let msgs = vec![
            json!({"role":"system","content":"base","sections":{"a":"1","b":"2"},"toolsAdded":[{"name":"read"},{"name":"bash"}],"timestamp":5}),
            json!({"role":"user","content":"x"}),
            json!({"role":"system","content":"","sections":{"a":null,"c":"3"},"toolsRemoved":[{"name":"read"}],"timestamp":9}),
        ];
        let m = current_system_message(&msgs).unwrap();
        assert_eq!(
            m,
            json!({"role":"system","content":"base","sections":{"b":"2","c":"3"},"toolsAdded":[{"name":"bash"}],"timestamp":5})
        );
        assert_eq!(current_system_message(&msgs[1..2]), None);
    }

    #[test]
    fn context_system_messages_are_the_system_messages_of_the_context_in_order() {
        let entry = |id: &str, parent: Option<&str>, message: Value| {
            json!({"type": "message", "id": id, "parentId": parent,
                   "timestamp": "2026-01-01T00:00:00.000Z", "message": message})
        };
        let path = [
            entry(
                "a",
                None,
                json!({"role": "system", "content": "one", "timestamp": 1}),
            ),
            entry(
                "b",
                Some("a"),
                json!({"role": "user", "content": "hi", "timestamp": 2}),
            ),
            entry(
                "c",
                Some("b"),
                json!({"role": "system", "content": "two", "timestamp": 3}),
            ),
            entry(
                "d",
                Some("c"),
                json!({"role": "user", "content": "go", "timestamp": 4}),
            ),
        ];
        let contents: Vec<Value> = context_system_messages(&path[..])
            .into_iter()
            .map(|m| m["content"].clone())
            .collect();
        assert_eq!(contents, vec![json!("one"), json!("two")]);
        assert!(context_system_messages(&path[1..2]).is_empty());
    }
}
