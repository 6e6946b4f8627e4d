//! System-message replay: the prompt and tools in force after every `system` message.
//!
//! Pi 1.6 stores the system prompt and tool set as `system` messages in the session
//! (`content`, patchable `sections`, `toolsAdded`/`toolsRemoved`). A compaction carries
//! the replayed result as its `systemMessage`, so the kept context stays self-contained.

use serde_json::{Map, Value};

/// Text of a content value: a string, or its text blocks joined by `separator`.
pub fn content_text(content: &Value, separator: &str) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .map(|b| b.get("text").and_then(Value::as_str).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(separator),
        _ => String::new(),
    }
}

fn is_system(m: &Value) -> bool {
    m.get("role").and_then(Value::as_str) == Some("system")
}

/// Tools after applying every system message's removals and additions, in map order.
pub fn current_tools<'a>(messages: impl IntoIterator<Item = &'a Value>) -> Vec<Value> {
    let mut tools: Vec<(String, Value)> = Vec::new();
    for m in messages.into_iter().filter(|m| is_system(m)) {
        for removed in m
            .get("toolsRemoved")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = removed.get("name").and_then(Value::as_str) {
                tools.retain(|(n, _)| n != name);
            }
        }
        for added in m
            .get("toolsAdded")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = added
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match tools.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = added.clone(),
                None => tools.push((name.to_string(), added.clone())),
            }
        }
    }
    tools.into_iter().map(|(_, t)| t).collect()
}

/// One system message equivalent to replaying all of them (`None` if there are none).
pub fn current_system_message<'a>(
    messages: impl IntoIterator<Item = &'a Value> + Clone,
) -> Option<Value> {
    let mut content: Vec<String> = Vec::new();
    let mut sections: Vec<(String, Value)> = Vec::new();
    let mut timestamp: Option<Value> = None;
    for m in messages.clone().into_iter().filter(|m| is_system(m)) {
        if timestamp.is_none() {
            timestamp = m.get("timestamp").cloned();
        }
        let text = content_text(m.get("content").unwrap_or(&Value::Null), "\n");
        if !text.is_empty() {
            content.push(text);
        }
        for (name, value) in m
            .get("sections")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if value.is_null() {
                sections.retain(|(n, _)| n != name);
            } else {
                match sections.iter_mut().find(|(n, _)| n == name) {
                    Some(slot) => slot.1 = value.clone(),
                    None => sections.push((name.clone(), value.clone())),
                }
            }
        }
    }
    let tools = current_tools(messages);
    if timestamp.is_none() && tools.is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("role".into(), "system".into());
    out.insert("content".into(), content.join("\n\n").into());
    if !sections.is_empty() {
        out.insert(
            "sections".into(),
            Value::Object(sections.into_iter().collect()),
        );
    }
    if !tools.is_empty() {
        out.insert("toolsAdded".into(), Value::Array(tools));
    }
    out.insert("timestamp".into(), timestamp.unwrap_or(Value::from(0)));
    Some(Value::Object(out))
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
}
