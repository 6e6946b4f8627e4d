//! Strict JSON-schema tools (Pi's `makeStrictJsonSchema` / `resolveJsonSchemaStrictSampling`):
//! a tool that declares `constrainedSampling: {type: "json_schema", strict: "prefer"|"require"}`
//! is sent in the provider's strict mode when the model supports it and the schema fits the
//! strict subset: every property listed in `required` (optional ones become
//! `anyOf: [schema, {type: "null"}]`) and `additionalProperties: false` on every object.

use pi_formats::message::Tool;
use serde_json::{json, Map, Value};

const UNSUPPORTED_KEYS: [&str; 16] = [
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "oneOf",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "propertyNames",
    "contains",
    "prefixItems",
    "not",
    "if",
    "then",
    "else",
];

fn is_structured(schema: &Value) -> bool {
    let Some(o) = schema.as_object() else {
        return false;
    };
    let has_type = |t: &str| match o.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(a)) => a.iter().any(|x| x == t),
        _ => false,
    };
    has_type("object")
        || has_type("array")
        || o.contains_key("properties")
        || o.contains_key("items")
}

fn allows_null(schema: &Value) -> bool {
    let Some(o) = schema.as_object() else {
        return false;
    };
    match o.get("type") {
        Some(Value::String(s)) if s == "null" => return true,
        Some(Value::Array(a)) if a.iter().any(|x| x == "null") => return true,
        _ => {}
    }
    if o.get("const") == Some(&Value::Null)
        || o.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.contains(&Value::Null))
    {
        return true;
    }
    o.get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(allows_null))
}

fn make_node_strict(schema: &mut Value) -> Result<(), String> {
    let Some(o) = schema.as_object_mut() else {
        return Err("boolean schemas are unsupported".into());
    };
    if let Some(k) = UNSUPPORTED_KEYS.iter().find(|k| o.contains_key(**k)) {
        return Err(format!("{k} schemas are unsupported"));
    }
    if !o.contains_key("type") && !o.contains_key("anyOf") && !o.contains_key("enum") {
        return Err("schemas without a type are unsupported".into());
    }
    if let Some(any) = o.get_mut("anyOf") {
        let variants = any
            .as_array_mut()
            .filter(|a| !a.is_empty())
            .ok_or("anyOf must contain at least one schema")?;
        for v in variants {
            if is_structured(v) {
                return Err("object and array unions are unsupported".into());
            }
            make_node_strict(v)?;
        }
    }
    if let Some(items) = o.get_mut("items") {
        if items.is_array() {
            return Err("tuple schemas are unsupported".into());
        }
        make_node_strict(items)?;
    }
    let is_object = o.get("type").and_then(Value::as_str) == Some("object");
    if o.contains_key("properties") && !is_object {
        return Err("properties require type object".into());
    }
    if !is_object {
        return Ok(());
    }
    if o.get("additionalProperties")
        .is_some_and(|a| *a != Value::Bool(false))
    {
        return Err("schema-valued or true additionalProperties is unsupported".into());
    }
    let required: Vec<String> = match o.get("required") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|k| k.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("object required must be a string array")?,
        Some(_) => return Err("object required must be a string array".into()),
    };
    // Cloned and re-inserted rather than removed: re-inserting an existing key keeps its place.
    let mut properties = match o.get("properties").cloned() {
        None => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err("object properties must be a schema map".into()),
    };
    if required.iter().any(|k| !properties.contains_key(k)) {
        return Err("required contains an unknown property".into());
    }
    for (key, prop) in properties.iter_mut() {
        make_node_strict(prop)?;
        if !required.contains(key) && !allows_null(prop) {
            *prop = json!({"anyOf": [prop.take(), {"type": "null"}]});
        }
    }
    let names: Vec<Value> = properties.keys().map(|k| json!(k)).collect();
    o.insert("properties".into(), Value::Object(properties));
    o.insert("required".into(), Value::Array(names));
    o.insert("additionalProperties".into(), json!(false));
    Ok(())
}

/// The strict form of `schema`, or why it cannot be strict.
pub fn make_strict(schema: &Value) -> Result<Value, String> {
    let mut s = schema.clone();
    if !s.is_object() {
        return Err("root schema must have type object".into());
    }
    make_node_strict(&mut s)?;
    if s.get("type").and_then(Value::as_str) != Some("object") {
        return Err("root schema must have type object".into());
    }
    Ok(s)
}

/// `Some(strict schema)` when `tool` asks for JSON-schema constrained sampling, the model
/// supports strict mode and the schema fits; `Err` when the tool requires it and it cannot
/// be had.
pub fn resolve(tool: &Tool, supports_strict: bool) -> Result<Option<Value>, String> {
    let Some(cfg) = tool.extra.get("constrainedSampling") else {
        return Ok(None);
    };
    if cfg["type"] != "json_schema" {
        return Ok(None);
    }
    let require = cfg["strict"] == "require";
    if supports_strict {
        return match make_strict(&tool.parameters) {
            Ok(s) => Ok(Some(s)),
            Err(_) if !require => Ok(None),
            Err(e) => Err(format!(
                "Tool \"{}\" requires JSON-schema constrained sampling, but {e}.",
                tool.name
            )),
        };
    }
    if require {
        return Err(format!(
            "Tool \"{}\" requires JSON-schema constrained sampling, but strict tools are unsupported.",
            tool.name
        ));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_properties_become_nullable_and_required() {
        // The read tool's schema and the strict form real Pi 1.6.0 sent to Bedrock.
        let schema = json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"}, "offset": {"type": "number"}}});
        let strict = make_strict(&schema).unwrap();
        assert_eq!(
            strict,
            json!({"type": "object", "required": ["path", "offset"], "properties": {
                "path": {"type": "string"},
                "offset": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
                "additionalProperties": false})
        );
        assert!(make_strict(&json!({"type": "object", "oneOf": []})).is_err());
        assert!(make_strict(&json!({"type": "object", "additionalProperties": true})).is_err());
    }
}
