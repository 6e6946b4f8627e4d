//! `---`-delimited YAML frontmatter of skills and prompt templates.
//!
//! Pi parses it with a full YAML library. Skills and templates only use a flat mapping of
//! scalars (`name`, `description`, `argument-hint`, `disable-model-invocation`), so this is a
//! small parser for the subset that appears in practice: plain, quoted and multi-line plain
//! scalars, `|`/`>` block scalars, booleans, numbers, null, flow and block lists, and one level
//! of nested mapping. Anything it cannot read is an error, which callers report the way Pi
//! reports a YAML error.

use serde_json::Map;
use serde_json::Number;
use serde_json::Value;

/// Parsed frontmatter and the body after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frontmatter {
    /// The mapping (empty without frontmatter).
    pub fields: Map<String, Value>,
    /// The text after the closing `---`, trimmed; the whole text without frontmatter.
    pub body: String,
}

impl Frontmatter {
    /// A string field.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }
}

/// Splits `content` into frontmatter and body (Pi's `parseFrontmatter`): line endings are
/// normalized to `\n`, a byte order mark is dropped, and frontmatter exists only when the
/// text starts with `---` and a later line starts with `---`.
pub fn parse_frontmatter(content: &str) -> Result<Frontmatter, String> {
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    let normalized = content.replace("\r\n", "\n").replace('\r', "\n");
    if !normalized.starts_with("---") {
        return Ok(Frontmatter {
            fields: Map::new(),
            body: normalized,
        });
    }
    let Some(end) = normalized[3..].find("\n---").map(|i| i + 3) else {
        return Ok(Frontmatter {
            fields: Map::new(),
            body: normalized,
        });
    };
    let yaml = normalized.get(4..end).unwrap_or("");
    let body = normalized[end + 4..].trim().to_string();
    Ok(Frontmatter {
        fields: parse_mapping(yaml)?,
        body,
    })
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

fn parse_mapping(yaml: &str) -> Result<Map<String, Value>, String> {
    let lines: Vec<&str> = yaml.split('\n').collect();
    let mut map = Map::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if is_blank_or_comment(line) {
            i += 1;
            continue;
        }
        if indent_of(line) > 0 || line.starts_with('\t') {
            return Err(format!("unexpected indentation at line {}", i + 1));
        }
        let (key, rest) =
            split_key(line).ok_or_else(|| format!("expected `key: value` at line {}", i + 1))?;
        i += 1;
        // The indented lines that belong to this key.
        let start = i;
        while i < lines.len() && (lines[i].trim().is_empty() || indent_of(lines[i]) > 0) {
            i += 1;
        }
        let block = &lines[start..i];
        let value = parse_value(rest, block, start)?;
        map.insert(key, value);
    }
    Ok(map)
}

fn split_key(line: &str) -> Option<(String, &str)> {
    if let Some(quote) = line.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let end = line[1..].find(quote)? + 1;
        let rest = line[end + 1..].strip_prefix(':')?;
        return Some((line[1..end].to_string(), rest.trim()));
    }
    // `key:` followed by a space or the end of the line; a colon inside a word is not one.
    let mut search = 0;
    while let Some(pos) = line[search..].find(':').map(|p| p + search) {
        let after = &line[pos + 1..];
        if after.is_empty() || after.starts_with(' ') || after.starts_with('\t') {
            return Some((line[..pos].trim().to_string(), after.trim()));
        }
        search = pos + 1;
    }
    None
}

fn parse_value(rest: &str, block: &[&str], first_line: usize) -> Result<Value, String> {
    let rest = strip_comment(rest);
    if let Some(header) = rest.strip_prefix('|').or_else(|| rest.strip_prefix('>')) {
        let folded = rest.starts_with('>');
        return Ok(Value::String(block_scalar(block, folded, header.trim())));
    }
    if rest.is_empty() {
        let content: Vec<&str> = block
            .iter()
            .copied()
            .filter(|l| !is_blank_or_comment(l))
            .collect();
        if content.is_empty() {
            return Ok(Value::Null);
        }
        if content[0].trim_start().starts_with("- ") || content[0].trim() == "-" {
            return content
                .iter()
                .map(|l| {
                    let item = l.trim_start().strip_prefix('-').ok_or_else(|| {
                        format!("mixed list and mapping near line {}", first_line + 1)
                    })?;
                    scalar(item.trim())
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array);
        }
        let dedented: Vec<String> = block
            .iter()
            .map(|l| l.get(indent_of(content[0])..).unwrap_or("").to_string())
            .collect();
        return parse_mapping(&dedented.join("\n")).map(Value::Object);
    }
    if rest.starts_with('"') || rest.starts_with('\'') {
        return scalar(rest);
    }
    if rest.starts_with('[') {
        let inner = rest
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| format!("unterminated flow list at line {first_line}"))?;
        if inner.trim().is_empty() {
            return Ok(Value::Array(Vec::new()));
        }
        return inner
            .split(',')
            .map(|item| scalar(item.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    // A plain scalar may continue on more-indented lines; YAML folds them with spaces.
    let mut text = rest.to_string();
    for line in block {
        let t = line.trim();
        if t.is_empty() {
            text.push('\n');
        } else {
            if !text.ends_with('\n') {
                text.push(' ');
            }
            text.push_str(t);
        }
    }
    if block.iter().all(|l| l.trim().is_empty()) {
        return scalar(rest);
    }
    Ok(Value::String(text.trim_end().to_string()))
}

fn strip_comment(text: &str) -> &str {
    if text.starts_with('"') || text.starts_with('\'') {
        return text;
    }
    match text.find(" #") {
        Some(i) => text[..i].trim_end(),
        None if text.starts_with('#') => "",
        None => text,
    }
}

fn block_scalar(block: &[&str], folded: bool, header: &str) -> String {
    let indent = block
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent_of(l))
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = block
        .iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect();
    let mut text = if folded {
        let mut out = String::new();
        for (n, line) in lines.iter().enumerate() {
            if n > 0 {
                let prev_empty = lines[n - 1].is_empty();
                out.push(if line.is_empty() || prev_empty {
                    '\n'
                } else {
                    ' '
                });
            }
            out.push_str(line);
        }
        out
    } else {
        lines.join("\n")
    };
    let body_len = text.trim_end_matches('\n').len();
    match header {
        h if h.starts_with('-') => text.truncate(body_len),
        h if h.starts_with('+') => text.push('\n'),
        _ => {
            text.truncate(body_len);
            if !text.is_empty() {
                text.push('\n');
            }
        }
    }
    text
}

fn scalar(text: &str) -> Result<Value, String> {
    let text = text.trim();
    if text.starts_with('"') || text.starts_with('\'') {
        return quoted(text).map(Value::String);
    }
    let text = strip_comment(text);
    Ok(match text {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => {
            if let Ok(n) = text.parse::<i64>() {
                Value::Number(n.into())
            } else if let Some(n) = text
                .parse::<f64>()
                .ok()
                .filter(|_| {
                    text.chars()
                        .all(|c| c.is_ascii_digit() || ".eE+-".contains(c))
                })
                .and_then(Number::from_f64)
            {
                Value::Number(n)
            } else {
                Value::String(text.to_string())
            }
        }
    })
}

/// A quoted scalar, which may be followed only by a comment.
fn quoted(text: &str) -> Result<String, String> {
    let quote = text.chars().next().unwrap_or('"');
    let body = &text[1..];
    let mut end = None;
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if quote == '"' && c == '\\' {
            chars.next();
        } else if c == quote {
            // In single quotes, `''` is an escaped quote.
            if quote == '\'' && chars.peek().map(|(_, n)| *n) == Some('\'') {
                chars.next();
                continue;
            }
            end = Some(i);
            break;
        }
    }
    let end = end.ok_or_else(|| format!("unterminated quoted string: {text}"))?;
    let rest = body[end + 1..].trim();
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err(format!("unexpected text after quoted string: {rest}"));
    }
    let inner = &body[..end];
    if quote == '"' {
        unescape_double(inner)
    } else {
        Ok(inner.replace("''", "'"))
    }
}

fn unescape_double(inner: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let c = u32::from_str_radix(&hex, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("invalid escape \\u{hex}"))?;
                out.push(c);
            }
            Some(other) => return Err(format!("invalid escape \\{other}")),
            None => return Err("string ends with a backslash".into()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subset_of_yaml_used_by_skills_and_templates() {
        let text = "---\r\nname: my-skill\r\ndescription: \"Does \\\"x\\\"\" # c\r\nargument-hint: '<a> ''b'''\r\ndisable-model-invocation: true\r\nn: 3\r\ntags: [a, b]\r\nlist:\r\n  - one\r\n  - 'two'\r\nlong: first\r\n  second\r\nblock: |\r\n  l1\r\n  l2\r\nfold: >-\r\n  a\r\n  b\r\n---\r\n\r\nBody here\r\n";
        let fm = parse_frontmatter(text).unwrap();
        assert_eq!(
            Value::Object(fm.fields.clone()),
            json!({"name":"my-skill","description":"Does \"x\"","argument-hint":"<a> 'b'",
                   "disable-model-invocation":true,"n":3,"tags":["a","b"],"list":["one","two"],
                   "long":"first second","block":"l1\nl2\n","fold":"a b"})
        );
        assert_eq!(fm.body, "Body here");
    }

    #[test]
    fn no_frontmatter_and_errors() {
        let fm = parse_frontmatter("just text\n").unwrap();
        assert!(fm.fields.is_empty());
        assert_eq!(fm.body, "just text\n");
        // An opening marker without a closing one is body.
        assert_eq!(
            parse_frontmatter("---\nname: x\n").unwrap().body,
            "---\nname: x\n"
        );
        assert!(parse_frontmatter("---\nnot a mapping\n---\n").is_err());
        assert!(parse_frontmatter("---\ndescription: \"open\n---\n").is_err());
        let nested = parse_frontmatter("---\nmeta:\n  a: 1\n  b: x\n---\nB").unwrap();
        assert_eq!(nested.fields["meta"], json!({"a":1,"b":"x"}));
    }
}
