//! TypeScript declarations of tools for scripts (Pi's `@earendil-works/pi-codemode`
//! declarations): script identifiers, JSON Schema rendered as TypeScript types, and a tool's
//! "sample" (description plus `declare const tools: { name(args: …): Promise<…>; };`) that the
//! codemode description, `ALL_TOOLS` and `describeTool()` show.

use serde_json::Value;

const INDENT: &str = "  ";
/// Longest rendered input type before it becomes `unknown`.
const INPUT_MAX_CHARS: usize = 16_000;
/// Local `$ref` expansions per rendered schema.
const MAX_REF_EXPANSIONS: usize = 32;
/// Longest constraint tag; longer ones are left out.
const MAX_TAG_CHARS: usize = 80;
const TAG_KEYWORDS: &[&str] = &[
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
];
const LOWER_BOUNDS: &[&str] = &["minimum", "exclusiveMinimum", "minLength", "minItems"];
const UPPER_BOUNDS: &[&str] = &["maximum", "exclusiveMaximum", "maxLength", "maxItems"];

/// The identifier a script uses for a tool: characters not valid in a JavaScript identifier
/// become `_` (`mcp__dev-radius__search` → `mcp__dev_radius__search`).
pub fn js_identifier(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let valid = if out.is_empty() {
            c.is_ascii_alphabetic() || c == '_' || c == '$'
        } else {
            c.is_ascii_alphanumeric() || c == '_' || c == '$'
        };
        out.push(if valid { c } else { '_' });
    }
    if out.is_empty() {
        "_".into()
    } else {
        out
    }
}

/// What a tool looks like to scripts.
#[derive(Clone, Debug)]
pub struct ToolDeclaration {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// `{"type":"string"}` for tools that resolve to their text.
    pub output_schema: Value,
}

/// `name(args: In): Promise<Out>;` with the script identifier as the name.
pub fn render_tool_signature(tool: &ToolDeclaration) -> String {
    let input = schema_to_type(&tool.input_schema, Some(INPUT_MAX_CHARS));
    let output = schema_to_type(&tool.output_schema, None);
    format!(
        "{}(args: {input}): Promise<{output}>;",
        js_identifier(&tool.name)
    )
}

/// The description followed by the tool's declaration, as `ALL_TOOLS` and listings show it.
pub fn render_tool_sample(tool: &ToolDeclaration) -> String {
    format!(
        "{}\n\ncodemode tool declaration:\n```ts\ndeclare const tools: {{ {} }};\n```",
        tool.description.trim(),
        render_tool_signature(tool)
    )
}

/// The subschema the local `$ref` chain of `schema` leads to in `root` (cycles and dangling
/// references stop where they are).
fn follow_ref<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut current = schema;
    let mut seen: Vec<&str> = Vec::new();
    while let Some(reference) = current.get("$ref").and_then(Value::as_str) {
        if seen.contains(&reference) {
            break;
        }
        let Some(target) = resolve_ref(reference, root) else {
            break;
        };
        seen.push(reference);
        current = target;
    }
    current
}

/// `{ output, truncated, full_output_path? }`: the field names of an object schema, with the
/// fields of object fields `depth` levels deep and the value of `const` fields.
fn describe_fields(schema: &Value, root: &Value, depth: usize) -> Option<String> {
    let resolved = follow_ref(schema, root);
    if resolved.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    let properties = resolved.get("properties")?.as_object()?;
    let required: Vec<&str> = resolved
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, field)| {
            let nested = match follow_ref(field, root).get("const") {
                Some(constant) => Some(constant.to_string()),
                None if depth > 0 => describe_fields(field, root, depth - 1),
                None => None,
            };
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            match nested {
                Some(nested) => format!("{name}{optional}: {nested}"),
                None => format!("{name}{optional}"),
            }
        })
        .collect();
    Some(format!("{{ {} }}", fields.join(", ")))
}

/// The field names of each object variant of an `anyOf`/`oneOf`, joined by `|`.
fn describe_union_fields(schema: &Value, root: &Value) -> Option<String> {
    let resolved = follow_ref(schema, root);
    let variants = resolved
        .get("anyOf")
        .or_else(|| resolved.get("oneOf"))?
        .as_array()?;
    if variants.is_empty() {
        return None;
    }
    let described: Option<Vec<String>> = variants
        .iter()
        .map(|v| describe_fields(v, root, 0))
        .collect();
    described.map(|d| d.join(" | "))
}

/// What a script call resolves to, in one line (Pi's `describeOutput`): `a string`, the
/// field names of an object, the type when it fits on one line, or a pointer to
/// `describeTool()`.
pub fn describe_output(name: &str, schema: &Value) -> String {
    let typed = schema_to_type(schema, None);
    if typed == "string" {
        return "a string".into();
    }
    if let Some(fields) =
        describe_fields(schema, schema, 1).or_else(|| describe_union_fields(schema, schema))
    {
        return format!("`{fields}`");
    }
    if !typed.contains('\n') {
        return format!("`{typed}`");
    }
    format!(
        "a value; `await describeTool({})` shows its type",
        Value::from(name)
    )
}

/// The subschema a local `$ref` (`#`, `#/$defs/Item`) names in `root`.
pub fn resolve_ref<'a>(reference: &str, root: &'a Value) -> Option<&'a Value> {
    if reference != "#" && !reference.starts_with("#/") {
        return None;
    }
    let mut current = root;
    for segment in reference
        .get(2..)
        .unwrap_or("")
        .split('/')
        .filter(|s| !s.is_empty())
    {
        let key = percent_decode(segment)?
            .replace("~1", "/")
            .replace("~0", "~");
        current = current.as_object()?.get(&key)?;
    }
    (current.is_object() || current.is_boolean()).then_some(current)
}

fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

struct Render<'a> {
    root: &'a Value,
    resolving: Vec<String>,
    expansions: usize,
    tags: bool,
}

/// A JSON Schema as a TypeScript type: objects on one line with sorted properties, or one
/// property per line with `//` comments for descriptions and constraints the type cannot say.
/// Past `max_chars` it is rendered without constraint tags, then as `unknown`.
pub fn schema_to_type(schema: &Value, max_chars: Option<usize>) -> String {
    let render = |tags| {
        to_type(
            schema,
            &mut Render {
                root: schema,
                resolving: Vec::new(),
                expansions: 0,
                tags,
            },
        )
    };
    let typed = render(true);
    let Some(max) = max_chars else { return typed };
    if typed.chars().count() <= max {
        return typed;
    }
    let untagged = render(false);
    if untagged.chars().count() <= max {
        untagged
    } else {
        "unknown".into()
    }
}

fn union(types: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for t in types {
        if !unique.contains(&t) {
            unique.push(t);
        }
    }
    if unique.iter().any(|t| t == "unknown") {
        return "unknown".into();
    }
    if unique.is_empty() {
        "never".into()
    } else {
        unique.join(" | ")
    }
}

fn to_type(schema: &Value, r: &mut Render<'_>) -> String {
    let object = match schema {
        Value::Bool(true) => return "unknown".into(),
        Value::Bool(false) => return "never".into(),
        Value::Object(object) => object,
        _ => return "unknown".into(),
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        if r.resolving.iter().any(|x| x == reference) || r.expansions >= MAX_REF_EXPANSIONS {
            return "unknown".into();
        }
        let Some(target) = resolve_ref(reference, r.root) else {
            return "unknown".into();
        };
        r.expansions += 1;
        r.resolving.push(reference.to_string());
        let out = to_type(target, r);
        r.resolving.pop();
        return out;
    }
    if let Some(constant) = object.get("const") {
        return constant.to_string();
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        return union(values.iter().map(Value::to_string).collect());
    }
    let variants = object
        .get("anyOf")
        .and_then(Value::as_array)
        .or_else(|| object.get("oneOf").and_then(Value::as_array));
    if let Some(variants) = variants {
        return union(variants.iter().map(|v| to_type(v, r)).collect());
    }
    if let Some(parts) = object.get("allOf").and_then(Value::as_array) {
        let parts: Vec<String> = parts
            .iter()
            .map(|p| to_type(p, r))
            .filter(|p| p != "unknown")
            .collect();
        if parts.is_empty() {
            return "unknown".into();
        }
        return parts
            .iter()
            .map(|p| {
                if p.contains(" | ") {
                    format!("({p})")
                } else {
                    p.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" & ");
    }
    match object.get("type") {
        Some(Value::Array(types)) => union(
            types
                .iter()
                .map(|t| {
                    let mut copy = object.clone();
                    copy.insert("type".into(), t.clone());
                    to_type(&Value::Object(copy), r)
                })
                .collect(),
        ),
        Some(Value::String(t)) => match t.as_str() {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => array_type(object, r),
            "object" => object_type(object, r),
            _ => "unknown".into(),
        },
        None => {
            if ["properties", "additionalProperties", "required"]
                .iter()
                .any(|k| object.contains_key(*k))
            {
                object_type(object, r)
            } else if object.contains_key("items") || object.contains_key("prefixItems") {
                array_type(object, r)
            } else {
                "unknown".into()
            }
        }
        Some(_) => "unknown".into(),
    }
}

fn array_type(object: &serde_json::Map<String, Value>, r: &mut Render<'_>) -> String {
    if let Some(items) = object.get("items").filter(|i| !i.is_array()) {
        return format!("Array<{}>", to_type(items, r));
    }
    let tuple = object
        .get("prefixItems")
        .and_then(Value::as_array)
        .or_else(|| object.get("items").and_then(Value::as_array));
    match tuple {
        Some(items) if !items.is_empty() => format!(
            "[{}]",
            items
                .iter()
                .map(|i| to_type(i, r))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => "unknown[]".into(),
    }
}

fn property_key(name: &str) -> String {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if valid {
        name.to_string()
    } else {
        Value::from(name).to_string()
    }
}

/// A number as JavaScript prints it.
fn js_number(value: &Value) -> String {
    match value.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{}", f as i64),
        _ => value.to_string(),
    }
}

/// Constraints a TypeScript type cannot express, as `@integer @minimum 1 @default 20`.
fn constraint_tags(schema: &Value) -> String {
    let Some(property) = schema.as_object() else {
        return String::new();
    };
    let variants = property
        .get("anyOf")
        .and_then(Value::as_array)
        .or_else(|| property.get("oneOf").and_then(Value::as_array));
    let non_null: Vec<&Value> = variants
        .into_iter()
        .flatten()
        .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
        .collect();
    let mut branches: Vec<serde_json::Map<String, Value>> = vec![property.clone()];
    if let [branch] = non_null.as_slice() {
        if let Some(branch) = branch.as_object() {
            branches.push(branch.clone());
        }
    }
    for schema in &mut branches {
        for (flag, bound) in [
            ("exclusiveMinimum", "minimum"),
            ("exclusiveMaximum", "maximum"),
        ] {
            if schema.get(flag) == Some(&Value::Bool(true)) {
                let value = schema.remove(bound).unwrap_or(Value::Null);
                schema.insert(flag.into(), value);
            }
        }
    }
    let mut tags: Vec<String> = Vec::new();
    let is_integer = |t: Option<&Value>| match t {
        Some(Value::String(s)) => s == "integer",
        Some(Value::Array(a)) => a.iter().any(|x| x == "integer"),
        _ => false,
    };
    if branches.iter().any(|s| is_integer(s.get("type"))) {
        tags.push("@integer".into());
    }
    for keyword in TAG_KEYWORDS {
        let values: Vec<&Value> = branches.iter().filter_map(|s| s.get(*keyword)).collect();
        if LOWER_BOUNDS.contains(keyword) || UPPER_BOUNDS.contains(keyword) {
            let numbers: Vec<&Value> = values.into_iter().filter(|v| v.is_number()).collect();
            let pick = if LOWER_BOUNDS.contains(keyword) {
                numbers.into_iter().max_by(|a, b| {
                    a.as_f64()
                        .partial_cmp(&b.as_f64())
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
            } else {
                numbers.into_iter().min_by(|a, b| {
                    a.as_f64()
                        .partial_cmp(&b.as_f64())
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
            };
            if let Some(value) = pick {
                tags.push(format!("@{keyword} {}", js_number(value)));
            }
            continue;
        }
        let mut seen: Vec<&Value> = Vec::new();
        for value in values {
            if seen.contains(&value) {
                continue;
            }
            seen.push(value);
            match value {
                Value::Number(_) => tags.push(format!("@{keyword} {}", js_number(value))),
                Value::String(s) => tags.push(format!("@{keyword} {s}")),
                _ => {}
            }
        }
    }
    if branches
        .iter()
        .any(|s| s.get("uniqueItems") == Some(&Value::Bool(true)))
    {
        tags.push("@uniqueItems".into());
    }
    if let Some(default) = property.get("default").filter(|d| !d.is_null()) {
        tags.push(format!("@default {default}"));
    }
    if property.get("deprecated") == Some(&Value::Bool(true)) {
        tags.push("@deprecated".into());
    }
    tags.into_iter()
        .filter(|t| t.chars().count() <= MAX_TAG_CHARS)
        .map(|t| {
            t.chars()
                .map(|c| match c {
                    '\r' | '\n' | '\u{2028}' | '\u{2029}' => format!("\\u{:04x}", c as u32),
                    c => c.to_string(),
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn object_type(object: &serde_json::Map<String, Value>, r: &mut Render<'_>) -> String {
    let empty = serde_json::Map::new();
    let properties = object
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut names: Vec<&String> = properties.keys().collect();
    // JavaScript's default sort compares UTF-16 code units; for the ASCII names of schemas
    // that is byte order.
    names.sort();
    let mut members: Vec<String> = names
        .iter()
        .map(|name| {
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            format!(
                "{}{optional}: {};",
                property_key(name),
                to_type(&properties[name.as_str()], r)
            )
        })
        .collect();
    match object.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => members.push("[key: string]: unknown;".into()),
        Some(other) => {
            let t = to_type(other, r);
            members.push(format!("[key: string]: {t};"));
        }
        None if names.is_empty() => members.push("[key: string]: unknown;".into()),
        None => {}
    }
    if members.is_empty() {
        return "{}".into();
    }
    let comments: Vec<Vec<String>> = names
        .iter()
        .map(|name| {
            let property = &properties[name.as_str()];
            let mut lines: Vec<String> = property
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim()
                .split(['\r', '\n', '\u{2028}', '\u{2029}'])
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            if r.tags {
                let tags = constraint_tags(property);
                if !tags.is_empty() {
                    lines.push(tags);
                }
            }
            lines
        })
        .collect();
    if comments.iter().all(Vec::is_empty) {
        return format!("{{ {} }}", members.join(" "));
    }
    let mut lines = vec!["{".to_string()];
    for (index, comment) in comments.iter().enumerate() {
        for line in comment {
            lines.push(format!("{INDENT}// {line}"));
        }
        lines.push(format!(
            "{INDENT}{}",
            members[index].replace('\n', &format!("\n{INDENT}"))
        ));
    }
    for member in &members[names.len()..] {
        lines.push(format!("{INDENT}{member}"));
    }
    lines.push("}".into());
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identifiers_replace_invalid_characters() {
        assert_eq!(
            js_identifier("mcp__dev-radius__search"),
            "mcp__dev_radius__search"
        );
        assert_eq!(js_identifier("9lives"), "_lives");
        assert_eq!(js_identifier(""), "_");
    }

    #[test]
    fn schemas_render_as_typescript() {
        let schema = json!({"type": "object", "properties": {
            "b": {"type": "integer", "minimum": 1, "description": "Count"},
            "a": {"type": "string"},
            "c": {"type": "array", "items": {"enum": ["x", "y"]}}
        }, "required": ["a"]});
        assert_eq!(
            schema_to_type(&schema, None),
            "{\n  a: string;\n  // Count\n  // @integer @minimum 1\n  b?: number;\n  c?: Array<\"x\" | \"y\">;\n}"
        );
        assert_eq!(
            schema_to_type(
                &json!({"type": "object", "properties": {"x": {"type": ["string", "null"]}}}),
                None
            ),
            "{ x?: string | null; }"
        );
        assert_eq!(
            schema_to_type(&json!({"type": "object"}), None),
            "{ [key: string]: unknown; }"
        );
        let recursive = json!({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"});
        assert_eq!(schema_to_type(&recursive, None), "{ next?: unknown; }");
    }

    #[test]
    fn sample_has_description_and_declaration() {
        let tool = ToolDeclaration {
            name: "mcp__e__echo".into(),
            description: "Echoes back the input ".into(),
            input_schema: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            output_schema: json!({"type": "string"}),
        };
        assert_eq!(
            render_tool_sample(&tool),
            "Echoes back the input\n\ncodemode tool declaration:\n```ts\ndeclare const tools: { mcp__e__echo(args: { message: string; }): Promise<string>; };\n```"
        );
    }
}
