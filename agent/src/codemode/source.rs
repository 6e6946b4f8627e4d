//! The codemode input: JavaScript, optionally preceded by one `// @options: {…}` line
//! (Pi's `parseCodemodeSource`, with its error texts).

use serde_json::Value;

const OPTIONS_PREFIX: &str = "// @options:";
const SUPPORTED: &str = "`max_output_tokens` and `timeout_ms`";
/// Largest `timeout_ms` (the largest delay JavaScript timers support).
const MAX_TIMEOUT_MS: u64 = 2_147_483_647;
/// `Number.MAX_SAFE_INTEGER`.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The options line's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceOptions {
    pub max_output_tokens: Option<u64>,
    pub timeout_ms: Option<u64>,
}

/// Splits the options line from the script; the error is the text the model sees.
pub fn parse_source(input: &str) -> Result<(String, SourceOptions), String> {
    if input.trim().is_empty() {
        return Err("Expected JavaScript source text (non-empty). Provide JS only, optionally with a first line `// @options: {\"max_output_tokens\": 1000}`.".into());
    }
    if let Some(misplaced) = input
        .split('\n')
        .enumerate()
        .skip(1)
        .find(|(_, line)| line.trim_start().starts_with(OPTIONS_PREFIX))
        .map(|(index, _)| index + 1)
    {
        return Err(format!(
            "The {OPTIONS_PREFIX} line must be the first line of the input; found one on line {misplaced}"
        ));
    }
    let first = input.split('\n').next().unwrap_or("");
    let first = first.strip_suffix('\r').unwrap_or(first);
    let trimmed = first.trim_start();
    let Some(directive) = trimmed.strip_prefix(OPTIONS_PREFIX) else {
        return Ok((input.to_string(), SourceOptions::default()));
    };
    let code = input.find('\n').map(|i| &input[i..]).unwrap_or("");
    if code.trim().is_empty() {
        return Err(
            "The @options line must be followed by JavaScript source on subsequent lines".into(),
        );
    }
    Ok((code.to_string(), parse_options(directive.trim())?))
}

fn parse_options(directive: &str) -> Result<SourceOptions, String> {
    let not_object = || format!("@options must be a JSON object with supported fields {SUPPORTED}");
    if directive.is_empty() {
        return Err(not_object());
    }
    let value: Value = serde_json::from_str(directive).map_err(|e| {
        format!("@options must be valid JSON with supported fields {SUPPORTED}: {e}")
    })?;
    let Value::Object(fields) = value else {
        return Err(not_object());
    };
    if let Some(key) = fields
        .keys()
        .find(|k| *k != "max_output_tokens" && *k != "timeout_ms")
    {
        return Err(format!("@options only supports {SUPPORTED}; got `{key}`"));
    }
    let safe_integer = |v: &Value| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= MAX_SAFE_INTEGER)
            .map(|f| f as u64)
    };
    let mut options = SourceOptions::default();
    if let Some(value) = fields.get("max_output_tokens") {
        options.max_output_tokens = Some(safe_integer(value).ok_or(
            "@options field `max_output_tokens` must be a non-negative safe integer".to_string(),
        )?);
    }
    if let Some(value) = fields.get("timeout_ms") {
        let ms = safe_integer(value)
            .filter(|ms| *ms > 0 && *ms <= MAX_TIMEOUT_MS)
            .ok_or(format!(
                "@options field `timeout_ms` must be a positive integer up to {MAX_TIMEOUT_MS}"
            ))?;
        options.timeout_ms = Some(ms);
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_line_is_split_from_the_code() {
        let (code, options) =
            parse_source("// @options: {\"max_output_tokens\": 5, \"timeout_ms\": 100}\nreturn 1")
                .unwrap();
        assert_eq!(code, "\nreturn 1");
        assert_eq!(options.max_output_tokens, Some(5));
        assert_eq!(options.timeout_ms, Some(100));
        assert_eq!(parse_source("return 2").unwrap().0, "return 2");
    }

    #[test]
    fn bad_options_fail_with_pi_texts() {
        assert_eq!(
            parse_source("x()\n// @options: {}").unwrap_err(),
            "The // @options: line must be the first line of the input; found one on line 2"
        );
        assert_eq!(
            parse_source("// @options: {\"foo\": 1}\nx()").unwrap_err(),
            "@options only supports `max_output_tokens` and `timeout_ms`; got `foo`"
        );
        assert_eq!(
            parse_source("// @options: {\"timeout_ms\": 0}\nx()").unwrap_err(),
            "@options field `timeout_ms` must be a positive integer up to 2147483647"
        );
        assert_eq!(
            parse_source("// @options: {}").unwrap_err(),
            "The @options line must be followed by JavaScript source on subsequent lines"
        );
        assert!(parse_source("  \n")
            .unwrap_err()
            .starts_with("Expected JavaScript source text"));
    }
}
