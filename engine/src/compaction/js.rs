//! The few JavaScript semantics compaction depends on, over `serde_json::Value`.
//!
//! Pi measures text in UTF-16 code units (`string.length`), sizes tool arguments
//! with `JSON.stringify`, and formats values with template literals. Token
//! estimates, cut points and the serialized conversation all follow from these,
//! so they are reproduced here rather than approximated.

use serde_json::{Map, Number, Value};

/// `string.length`: UTF-16 code units.
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// `text.length` of a value Pi reads as a string; anything else counts as empty.
pub fn str_len(v: Option<&Value>) -> usize {
    v.and_then(Value::as_str).map_or(0, utf16_len)
}

/// JavaScript truthiness of an optional JSON value (`undefined` is falsy).
pub fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(_)) | Some(Value::Object(_)) => true,
    }
}

/// The first `max_units` UTF-16 code units of `text`, never splitting a surrogate
/// pair (Pi's `sliceHead`): a character that straddles the cut is left out whole.
pub fn slice_head(text: &str, max_units: usize) -> &str {
    let mut units = 0;
    for (byte, ch) in text.char_indices() {
        if units + ch.len_utf16() > max_units {
            return &text[..byte];
        }
        units += ch.len_utf16();
    }
    text
}

/// UTF-16 code-unit order, the order of JavaScript's default `Array.prototype.sort`
/// on strings. It differs from byte order only between astral characters and
/// U+E000..U+FFFF.
pub fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// `Number.prototype.toString()` for finite numbers (what `JSON.stringify` and
/// template literals print). `NaN`/`Infinity` print as JSON `null`, which is what
/// `JSON.stringify` does; they cannot come from parsed JSON anyway.
pub fn number_string(x: f64) -> String {
    if !x.is_finite() {
        return "null".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` prints the shortest digits that round-trip, as JS does; only
    // the placement of the decimal point differs, so re-lay them out by JS rules.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    let n = exp + 1;
    let mut out = String::new();
    if x < 0.0 {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.push_str(&"0".repeat((n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-n) as usize));
        out.push_str(&digits);
    } else {
        let e = n - 1;
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&e.abs().to_string());
    }
    out
}

fn json_number(n: &Number) -> String {
    // JS holds every number as a double, so large integers lose precision exactly
    // as `as f64` rounds them.
    match n.as_f64() {
        Some(f) => number_string(f),
        None => n.to_string(),
    }
}

/// Whether `key` is an array index, which JS orders before other object keys.
fn is_array_index(key: &str) -> bool {
    if key == "0" {
        return true;
    }
    if key.is_empty() || key.starts_with('0') || !key.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    key.parse::<u64>().is_ok_and(|n| n < u32::MAX as u64)
}

/// An object's keys in JS property order: array indices ascending, then the
/// rest in insertion order.
pub fn object_keys(map: &Map<String, Value>) -> Vec<&String> {
    let mut indices: Vec<&String> = map.keys().filter(|k| is_array_index(k)).collect();
    indices.sort_by_key(|k| k.parse::<u64>().unwrap_or(0));
    indices.extend(map.keys().filter(|k| !is_array_index(k)));
    indices
}

/// `JSON.stringify(value)` for a value that came from JSON.
pub fn stringify(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    out
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&json_number(n)),
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, key) in object_keys(map).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(key, out);
                out.push(':');
                write_json(&map[key.as_str()], out);
            }
            out.push('}');
        }
    }
}

fn write_json_string(s: &str, out: &mut String) {
    // serde_json escapes exactly the characters JSON.stringify does (quote,
    // backslash, C0 controls with the same short forms and lowercase hex).
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// `${value}` / `String(value)` for a JSON value.
pub fn to_js_string(value: Option<&Value>) -> String {
    match value {
        None => "undefined".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => json_number(n),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items.iter().map(join_element).collect::<Vec<_>>().join(","),
        Some(Value::Object(_)) => "[object Object]".into(),
    }
}

/// How `Array.prototype.join` prints one element: `null`/`undefined` as empty.
fn join_element(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        other => to_js_string(Some(other)),
    }
}

/// Pi's `contentText(content, separator)`: a string as is, else the `text` of the
/// text blocks joined by `separator`. Content of any other shape has no text.
pub fn content_text(content: Option<&Value>, separator: &str) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .map(|b| b.get("text").map_or_else(String::new, join_element))
            .collect::<Vec<_>>()
            .join(separator),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_print_like_javascript() {
        let cases = [
            (1.0, "1"),
            (-0.0, "0"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123.456, "123.456"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (-2.5e30, "-2.5e+30"),
            (9007199254740993.0, "9007199254740992"),
        ];
        for (x, want) in cases {
            assert_eq!(number_string(x), want, "{x}");
        }
    }

    #[test]
    fn stringify_orders_index_keys_first_and_drops_float_zero() {
        let v: Value =
            serde_json::from_str(r#"{"b":1.0,"2":"x","a":[true,null],"1":{"é":"\n"}}"#).unwrap();
        assert_eq!(
            stringify(&v),
            r#"{"1":{"é":"\n"},"2":"x","b":1,"a":[true,null]}"#
        );
    }

    #[test]
    fn slice_head_keeps_surrogate_pairs_whole() {
        assert_eq!(slice_head("a😀b", 2), "a");
        assert_eq!(slice_head("a😀b", 3), "a😀");
        assert_eq!(utf16_len("a😀b"), 4);
    }

    #[test]
    fn content_text_joins_text_blocks() {
        let c = json!([{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]);
        assert_eq!(content_text(Some(&c), "\n"), "a\nb");
        assert_eq!(content_text(Some(&json!("s")), ""), "s");
        assert_eq!(content_text(None, ""), "");
    }
}
