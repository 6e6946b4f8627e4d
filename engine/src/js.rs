//! JavaScript semantics Pi's behaviour depends on, over `serde_json::Value`.
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

/// `String(n)` for a JavaScript number.
pub fn number_to_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".to_string();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    if n == 0.0 {
        return "0".to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, the same digits JavaScript picks; only
    // the layout differs, so rebuild the layout of Number::toString from digits and exponent.
    let formatted = format!("{:e}", n.abs());
    let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    let point = exponent + 1;
    let sign = if n < 0.0 { "-" } else { "" };
    let body = if k <= point && point <= 21 {
        format!("{digits}{}", "0".repeat((point - k) as usize))
    } else if 0 < point && point <= 21 {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    } else if -6 < point && point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else {
        let (first, rest) = digits.split_at(1);
        let exp = point - 1;
        let exp_sign = if exp >= 0 { "+" } else { "-" };
        if rest.is_empty() {
            format!("{first}e{exp_sign}{}", exp.abs())
        } else {
            format!("{first}.{rest}e{exp_sign}{}", exp.abs())
        }
    };
    format!("{sign}{body}")
}

/// A number as `JSON.stringify` prints it: like `String(n)`, but `NaN` and the
/// infinities become `null`.
pub fn number_string(x: f64) -> String {
    if x.is_finite() {
        number_to_string(x)
    } else {
        "null".into()
    }
}

/// A JSON number as JavaScript prints it (every number is a double there).
pub fn json_number(n: &Number) -> String {
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

/// `Number(text)`: `None` where JavaScript gives NaN.
pub fn string_to_number(text: &str) -> Option<f64> {
    let trimmed = pi_formats::jsonl::js_trim(text);
    if trimmed.is_empty() {
        return Some(0.0);
    }
    match trimmed {
        "Infinity" | "+Infinity" => return Some(f64::INFINITY),
        "-Infinity" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    let radix = match trimmed.get(..2) {
        Some("0x" | "0X") => Some(16),
        Some("0o" | "0O") => Some(8),
        Some("0b" | "0B") => Some(2),
        _ => None,
    };
    if let Some(radix) = radix {
        let digits = &trimmed[2..];
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        // Precision loss past 2^53 matches JavaScript closely enough for argument coercion.
        return Some(digits.chars().fold(0.0, |acc, c| {
            acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
        }));
    }
    if !is_decimal_literal(trimmed) {
        return None;
    }
    trimmed.parse::<f64>().ok()
}

/// `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`
fn is_decimal_literal(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - frac_start;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        i += 1;
        if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
            i += 1;
        }
        let exp_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == bytes.len()
}

#[cfg(test)]
mod number_tests {
    use super::*;

    #[test]
    fn numbers_print_like_javascript() {
        assert_eq!(number_to_string(5.0), "5");
        assert_eq!(number_to_string(-2.5), "-2.5");
        assert_eq!(number_to_string(0.1), "0.1");
        assert_eq!(number_to_string(1e21), "1e+21");
        assert_eq!(
            number_to_string(123456789012345680000.0),
            "123456789012345680000"
        );
        assert_eq!(number_to_string(1.5e-7), "1.5e-7");
        assert_eq!(number_to_string(0.000001), "0.000001");
    }

    #[test]
    fn strings_convert_like_number() {
        assert_eq!(string_to_number(" 42 "), Some(42.0));
        assert_eq!(string_to_number(""), Some(0.0));
        assert_eq!(string_to_number("1e3"), Some(1000.0));
        assert_eq!(string_to_number(".5"), Some(0.5));
        assert_eq!(string_to_number("0x10"), Some(16.0));
        assert_eq!(string_to_number("12px"), None);
        assert_eq!(string_to_number("inf"), None);
        assert_eq!(string_to_number("."), None);
    }
}
