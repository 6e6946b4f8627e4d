//! Tool argument validation with Pi's coercion and error text (pi-ai `validation.ts` over
//! pi-schema's `parse`).
//!
//! Models send loosely typed arguments: `"42"` for a number, `null` for an omitted option, one
//! object where an array belongs. Pi coerces those towards the schema before checking, and reports
//! what is still wrong as
//!
//! ```text
//! Validation failed for tool "read":
//!   - path: missing
//!
//! Received arguments:
//! { … }
//! ```
//!
//! Only the JSON Schema subset the built-in tools use is implemented: `type` (one name or a list),
//! `properties`, `required` and `items`.

use serde_json::Map;
use serde_json::Value;

use super::ToolError;
use pi_engine::js;

fn schema_types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn schema_properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn schema_required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn matches_type(value: &Value, type_name: &str) -> bool {
    match type_name {
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if matches_type(value, "integer") => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn passes(schema: &Value, value: &Value) -> bool {
    let mut errors = Vec::new();
    explain(schema, value, "", &mut errors);
    errors.is_empty()
}

/// Pass 1: an optional property set to `null` whose schema rejects null is dropped.
fn drop_optional_nulls(value: Value, schema: &Value) -> Value {
    match value {
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) => Value::Array(
                items
                    .into_iter()
                    .map(|item| drop_optional_nulls(item, item_schema))
                    .collect(),
            ),
            None => Value::Array(items),
        },
        Value::Object(map) => {
            let Some(properties) = schema_properties(schema) else {
                return Value::Object(map);
            };
            let required = schema_required(schema);
            let mut out = Map::new();
            for (key, item) in map {
                match properties.get(&key) {
                    Some(property) => {
                        if item.is_null()
                            && !required.contains(&key.as_str())
                            && !passes(property, &Value::Null)
                        {
                            continue;
                        }
                        out.insert(key, drop_optional_nulls(item, property));
                    }
                    None => {
                        out.insert(key, item);
                    }
                }
            }
            Value::Object(out)
        }
        other => other,
    }
}

fn number_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        // Integral values print without ".0", as JavaScript numbers do.
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

fn try_number(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Number(n) => n.as_f64(),
        Value::Null => Some(0.0),
        Value::String(text) => {
            if let Some(n) = js::string_to_number(text).filter(|n| n.is_finite()) {
                return Some(n);
            }
            match text.to_lowercase().as_str() {
                "false" => Some(0.0),
                "true" => Some(1.0),
                // TypeBox's bigint strings: `12n`, and `12.5` truncated (caught above already).
                lower => lower
                    .strip_suffix('n')
                    .filter(|digits| {
                        let digits = digits.strip_prefix('-').unwrap_or(digits);
                        !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
                    })
                    .and_then(|digits| digits.parse::<i64>().ok())
                    .filter(|n| n.unsigned_abs() <= 9_007_199_254_740_991)
                    .map(|n| n as f64),
            }
        }
        Value::Array(_) | Value::Object(_) => None,
    }
}

fn try_string(value: &Value) -> Option<String> {
    match value {
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(js::json_number(n)),
        Value::Null => Some("null".to_string()),
        Value::String(text) => Some(text.clone()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

fn try_boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_f64() {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Value::Null => Some(false),
        Value::String(text) => {
            let lower = text.to_lowercase();
            if lower == "false" || text == "0" {
                Some(false)
            } else if lower == "true" || text == "1" {
                Some(true)
            } else {
                None
            }
        }
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// Pass 2: TypeBox's conversion rules, keyed on the schema's `type`.
fn convert(schema: &Value, value: Value) -> Value {
    let types = schema_types(schema);
    let Some(&single) = types.first().filter(|_| types.len() == 1) else {
        return value;
    };
    match single {
        "string" => try_string(&value).map_or(value, Value::String),
        "number" => try_number(&value).map_or(value, number_value),
        "integer" => try_number(&value).map_or(value, |n| number_value(n.trunc())),
        "boolean" => try_boolean(&value).map_or(value, Value::Bool),
        "array" => {
            let item_schema = schema.get("items");
            match (value, item_schema) {
                (Value::Array(items), Some(item_schema)) => Value::Array(
                    items
                        .into_iter()
                        .map(|item| convert(item_schema, item))
                        .collect(),
                ),
                (Value::Array(items), None) => Value::Array(items),
                // A single value where an array belongs becomes a one-item array.
                (single_value, Some(item_schema)) => {
                    Value::Array(vec![convert(item_schema, single_value)])
                }
                (single_value, None) => Value::Array(vec![single_value]),
            }
        }
        "object" => match (value, schema_properties(schema)) {
            (Value::Object(map), Some(properties)) => Value::Object(
                map.into_iter()
                    .map(|(key, item)| {
                        let item = match properties.get(&key) {
                            Some(property) => convert(property, item),
                            None => item,
                        };
                        (key, item)
                    })
                    .collect(),
            ),
            (other, _) => other,
        },
        _ => value,
    }
}

fn pointer(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// pi-schema's explainer: one `(path, message)` per failing keyword.
fn explain(schema: &Value, value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    let types = schema_types(schema);
    if !types.is_empty() && !types.iter().any(|t| matches_type(value, t)) {
        out.push((
            path.to_string(),
            format!("expected {}, got {}", types.join(" or "), type_name(value)),
        ));
        return;
    }
    match value {
        Value::Object(map) => {
            for key in schema_required(schema) {
                if !map.contains_key(key) {
                    out.push((pointer(path, key), "missing".to_string()));
                }
            }
            if let Some(properties) = schema_properties(schema) {
                for (key, property) in properties {
                    if let Some(item) = map.get(key) {
                        explain(property, item, &pointer(path, key), out);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    explain(item_schema, item, &format!("{path}/{index}"), out);
                }
            }
        }
        _ => {}
    }
}

/// A JSON pointer as the dotted path the model sees: `/edits/0/oldText` → `edits.0.oldText`.
fn format_path(pointer: &str) -> String {
    if pointer.is_empty() {
        return "root".to_string();
    }
    pointer[1..]
        .split('/')
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Coerces `args` towards `schema` and checks them; the coerced arguments, or Pi's validation
/// error naming every problem and echoing the arguments as received.
pub fn validate_tool_arguments(
    tool_name: &str,
    schema: &Value,
    args: &Value,
) -> Result<Value, ToolError> {
    let coerced = convert(schema, drop_optional_nulls(args.clone(), schema));
    let mut errors = Vec::new();
    explain(schema, &coerced, "", &mut errors);
    if errors.is_empty() {
        return Ok(coerced);
    }
    let lines: Vec<String> = errors
        .iter()
        .map(|(path, message)| format!("  - {}: {message}", format_path(path)))
        .collect();
    let received = serde_json::to_string_pretty(args).unwrap_or_else(|_| "null".to_string());
    Err(ToolError::new(format!(
        "Validation failed for tool \"{tool_name}\":\n{}\n\nReceived arguments:\n{received}",
        lines.join("\n")
    )))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read_schema() -> Value {
        json!({
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "number"},
                "limit": {"type": "number"}
            }
        })
    }

    #[test]
    fn missing_required_field_is_reported_with_arguments() {
        let error = validate_tool_arguments("read", &read_schema(), &json!({"offset": 2}))
            .err()
            .map(|e| e.message);
        assert_eq!(
            error.as_deref(),
            Some(
                "Validation failed for tool \"read\":\n  - path: missing\n\nReceived arguments:\n{\n  \"offset\": 2\n}"
            )
        );
    }

    #[test]
    fn wrong_type_names_expected_and_got() {
        let error = validate_tool_arguments(
            "read",
            &read_schema(),
            &json!({"path": "a", "limit": "lots"}),
        )
        .err()
        .map(|e| e.message)
        .unwrap_or_default();
        assert!(
            error.contains("  - limit: expected number, got string\n"),
            "{error}"
        );
        let error = validate_tool_arguments("read", &read_schema(), &json!("x"))
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(
            error.contains("  - root: expected object, got string\n"),
            "{error}"
        );
    }

    #[test]
    fn loose_arguments_are_coerced() {
        let value = validate_tool_arguments(
            "read",
            &read_schema(),
            &json!({"path": 12, "offset": "5", "limit": null}),
        );
        assert_eq!(value, Ok(json!({"path": "12", "offset": 5})));
        let schema = json!({"type": "object", "properties": {"flag": {"type": "boolean"}}});
        assert_eq!(
            validate_tool_arguments("t", &schema, &json!({"flag": "TRUE"})),
            Ok(json!({"flag": true}))
        );
    }

    #[test]
    fn nested_array_errors_use_dotted_paths() {
        let schema = json!({
            "type": "object",
            "required": ["edits"],
            "properties": {"edits": {"type": "array", "items": {
                "type": "object",
                "required": ["oldText", "newText"],
                "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}}
            }}}
        });
        let error = validate_tool_arguments("edit", &schema, &json!({"edits": [{"oldText": "a"}]}))
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(error.contains("  - edits.0.newText: missing"), "{error}");
        // One object where the array belongs is wrapped.
        let value = validate_tool_arguments(
            "edit",
            &schema,
            &json!({"edits": {"oldText": "a", "newText": "b"}}),
        );
        assert_eq!(
            value,
            Ok(json!({"edits": [{"oldText": "a", "newText": "b"}]}))
        );
    }
}
