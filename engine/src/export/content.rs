//! Reading message content for the renderers, tolerant of every shape a file may hold.
//!
//! Content is a string or an array of blocks (`text`, `thinking`, `toolCall`, `image`); hand-
//! edited and old files hold other shapes too, which come back as [`Block::Other`] so a
//! renderer can still show them rather than drop them.

use serde_json::Value;

/// One piece of message content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block<'a> {
    Text(&'a str),
    Thinking(&'a str),
    ToolCall {
        id: &'a str,
        name: &'a str,
        arguments: &'a Value,
    },
    Image {
        mime: &'a str,
        data: &'a str,
    },
    /// Anything else (unknown block types, malformed blocks), shown as JSON.
    Other(&'a Value),
}

static NULL: Value = Value::Null;

/// The blocks of a `content` value (a string is one text block).
pub(crate) fn blocks(content: &Value) -> Vec<Block<'_>> {
    match content {
        Value::String(text) => vec![Block::Text(text)],
        Value::Array(items) => items.iter().map(block).collect(),
        Value::Null => Vec::new(),
        other => vec![Block::Other(other)],
    }
}

fn block(value: &Value) -> Block<'_> {
    let field = |key: &str| value.get(key).and_then(Value::as_str);
    match field("type") {
        Some("text") => field("text").map_or(Block::Other(value), Block::Text),
        Some("thinking") => field("thinking").map_or(Block::Other(value), Block::Thinking),
        Some("toolCall") => Block::ToolCall {
            id: field("id").unwrap_or(""),
            name: field("name").unwrap_or("?"),
            arguments: value.get("arguments").unwrap_or(&NULL),
        },
        Some("image") => match (field("mimeType"), field("data")) {
            (Some(mime), Some(data)) => Block::Image { mime, data },
            _ => Block::Other(value),
        },
        _ => Block::Other(value),
    }
}

/// The text blocks of a content value, joined by blank lines.
pub(crate) fn text_of(content: &Value) -> String {
    blocks(content)
        .into_iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The text of a `system` message: its content, or else its `sections` (Pi 1.6 records the
/// system prompt as named sections), in order, separated by blank lines.
pub(crate) fn system_text(message: &Value) -> String {
    let text = text_of(message.get("content").unwrap_or(&Value::Null));
    if !text.is_empty() {
        return text;
    }
    match message.get("sections") {
        Some(Value::Object(sections)) => sections
            .values()
            .filter_map(Value::as_str)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

/// A string field of an object, or `""`.
pub(crate) fn str_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Pretty JSON for showing arguments and unknown data.
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// What the model and provider of an assistant message were, as `provider/model`.
pub(crate) fn model_label(message: &Value) -> String {
    let provider = str_field(message, "provider");
    let model = str_field(message, "model");
    match (provider.is_empty(), model.is_empty()) {
        (false, false) => format!("{provider}/{model}"),
        (true, false) => model.to_string(),
        (false, true) => provider.to_string(),
        (true, true) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_block_shape() {
        let content = json!([
            {"type": "text", "text": "a"},
            {"type": "thinking", "thinking": "t"},
            {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "text"},
            null,
        ]);
        let got = blocks(&content);
        assert_eq!(got.len(), 6);
        assert_eq!(got[0], Block::Text("a"));
        assert_eq!(got[1], Block::Thinking("t"));
        assert!(matches!(got[2], Block::ToolCall { name: "bash", .. }));
        assert_eq!(
            got[3],
            Block::Image {
                mime: "image/png",
                data: "AAAA"
            }
        );
        assert!(matches!(got[4], Block::Other(_)));
        assert!(matches!(got[5], Block::Other(Value::Null)));
        assert_eq!(text_of(&json!("plain")), "plain");
    }

    #[test]
    fn system_text_falls_back_to_sections() {
        let m = json!({"role": "system", "content": "", "sections": {"preamble": "a", "tools": "b", "n": 1}});
        assert_eq!(system_text(&m), "a\n\nb");
        assert_eq!(system_text(&json!({"role": "system", "content": "c"})), "c");
    }
}
