//! Output truncation shared by the tools (Pi's `truncate.ts`).
//!
//! Two independent limits, whichever is hit first wins: 2000 lines and 50 KB of UTF-8. Head
//! truncation (read, grep, find, ls) never returns a partial line; tail truncation (bash) returns
//! the end of the last line when that line alone is over the byte limit.

use serde::Serialize;

/// Line limit of every tool's output.
pub const DEFAULT_MAX_LINES: usize = 2000;
/// Byte limit of every tool's output (UTF-8 bytes).
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
/// Longest grep line shown, in UTF-16 code units as Pi counts `string.length`.
pub const GREP_MAX_LINE_LENGTH: usize = 500;
/// Pi's "no line limit" for grep, find and ls (`Number.MAX_SAFE_INTEGER`), which also shows up as
/// `maxLines` in their `details.truncation`.
pub const NO_LINE_LIMIT: usize = 9_007_199_254_740_991;

/// Which limit cut the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TruncatedBy {
    /// The line limit.
    Lines,
    /// The byte limit.
    Bytes,
}

/// Pi's `TruncationResult`, stored as `details.truncation` (field order as Pi writes it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TruncationResult {
    /// The kept text.
    pub content: String,
    /// Whether anything was cut.
    pub truncated: bool,
    /// Which limit cut it, `null` when nothing was cut.
    pub truncated_by: Option<TruncatedBy>,
    /// Lines of the whole input (a trailing newline does not start a line).
    pub total_lines: usize,
    /// UTF-8 bytes of the whole input.
    pub total_bytes: usize,
    /// Lines kept.
    pub output_lines: usize,
    /// UTF-8 bytes kept.
    pub output_bytes: usize,
    /// Tail truncation kept only the end of the last line.
    pub last_line_partial: bool,
    /// Head truncation kept nothing because the first line alone is over the byte limit.
    pub first_line_exceeds_limit: bool,
    /// The line limit used.
    pub max_lines: usize,
    /// The byte limit used.
    pub max_bytes: usize,
}

impl TruncationResult {
    fn untouched(content: &str, total_lines: usize, max_lines: usize, max_bytes: usize) -> Self {
        TruncationResult {
            content: content.to_string(),
            truncated: false,
            truncated_by: None,
            total_lines,
            total_bytes: content.len(),
            output_lines: total_lines,
            output_bytes: content.len(),
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines,
            max_bytes,
        }
    }

    /// The result as JSON for `details`.
    pub fn to_json(&self) -> serde_json::Value {
        // Serializing plain strings, numbers and booleans cannot fail.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// Lines as Pi counts them: split on `\n`, without the empty piece after a final newline.
fn split_lines_for_counting(content: &str) -> Vec<&str> {
    if content.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<&str> = content.split('\n').collect();
    if content.ends_with('\n') {
        lines.pop();
    }
    lines
}

/// Pi's `formatSize`: `123B`, `1.5KB`, `2.0MB`, rounding halves up as `toFixed(1)` does.
pub fn format_size(bytes: usize) -> String {
    // bytes / 1024 and bytes / 1048576 are exact in binary, so toFixed(1) of them is the exact
    // quotient rounded half up to tenths, which integer arithmetic gives without float surprises.
    let bytes = bytes as u128;
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        let tenths = (bytes * 10 + 512) / 1024;
        format!("{}.{}KB", tenths / 10, tenths % 10)
    } else {
        let tenths = (bytes * 10 + 524_288) / 1_048_576;
        format!("{}.{}MB", tenths / 10, tenths % 10)
    }
}

/// Keeps the first lines that fit both limits; never a partial line.
pub fn truncate_head(content: &str, max_lines: usize, max_bytes: usize) -> TruncationResult {
    let lines = split_lines_for_counting(content);
    let total_lines = lines.len();
    if total_lines <= max_lines && content.len() <= max_bytes {
        return TruncationResult::untouched(content, total_lines, max_lines, max_bytes);
    }
    let first_line_bytes = lines.first().map_or(0, |line| line.len());
    if first_line_bytes > max_bytes {
        return TruncationResult {
            content: String::new(),
            truncated: true,
            truncated_by: Some(TruncatedBy::Bytes),
            total_lines,
            total_bytes: content.len(),
            output_lines: 0,
            output_bytes: 0,
            last_line_partial: false,
            first_line_exceeds_limit: true,
            max_lines,
            max_bytes,
        };
    }
    let mut kept = 0usize;
    let mut kept_bytes = 0usize;
    let mut truncated_by = TruncatedBy::Lines;
    for (i, line) in lines.iter().enumerate().take(max_lines) {
        let line_bytes = line.len() + usize::from(i > 0);
        if kept_bytes + line_bytes > max_bytes {
            truncated_by = TruncatedBy::Bytes;
            break;
        }
        kept += 1;
        kept_bytes += line_bytes;
    }
    if kept >= max_lines && kept_bytes <= max_bytes {
        truncated_by = TruncatedBy::Lines;
    }
    let output = lines[..kept].join("\n");
    TruncationResult {
        output_bytes: output.len(),
        content: output,
        truncated: true,
        truncated_by: Some(truncated_by),
        total_lines,
        total_bytes: content.len(),
        output_lines: kept,
        last_line_partial: false,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// Keeps the last lines that fit both limits; when the last line alone is too long, keeps its
/// end (cut at a character boundary) and sets `last_line_partial`.
pub fn truncate_tail(content: &str, max_lines: usize, max_bytes: usize) -> TruncationResult {
    let lines = split_lines_for_counting(content);
    let total_lines = lines.len();
    if total_lines <= max_lines && content.len() <= max_bytes {
        return TruncationResult::untouched(content, total_lines, max_lines, max_bytes);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut kept_bytes = 0usize;
    let mut truncated_by = TruncatedBy::Lines;
    let mut last_line_partial = false;
    for line in lines.iter().rev() {
        if kept.len() >= max_lines {
            break;
        }
        let line_bytes = line.len() + usize::from(!kept.is_empty());
        if kept_bytes + line_bytes > max_bytes {
            truncated_by = TruncatedBy::Bytes;
            if kept.is_empty() {
                let tail = str_tail_bytes(line, max_bytes);
                kept.push(tail);
                kept_bytes = tail.len();
                last_line_partial = true;
            }
            break;
        }
        kept.push(line);
        kept_bytes += line_bytes;
    }
    if kept.len() >= max_lines && kept_bytes <= max_bytes {
        truncated_by = TruncatedBy::Lines;
    }
    kept.reverse();
    let output = kept.join("\n");
    TruncationResult {
        output_bytes: output.len(),
        content: output,
        truncated: true,
        truncated_by: Some(truncated_by),
        total_lines,
        total_bytes: content.len(),
        output_lines: kept.len(),
        last_line_partial,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// The last `max_bytes` bytes of `text`, moved forward to a character boundary.
pub(crate) fn str_tail_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut start = text.len() - max_bytes;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Length of `text` in UTF-16 code units, which is what JavaScript's `length` counts.
pub(crate) fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Pi's `truncateLine` for grep: lines over `max_chars` UTF-16 units keep their head and get
/// `... [truncated]`. Returns the text and whether it was cut.
pub(crate) fn truncate_line(line: &str, max_chars: usize) -> (String, bool) {
    if utf16_len(line) <= max_chars {
        return (line.to_string(), false);
    }
    // Whole characters only: a surrogate pair that would be split is left out, as sliceHead does.
    let mut units = 0usize;
    let mut end = 0usize;
    for (index, ch) in line.char_indices() {
        if units + ch.len_utf16() > max_chars {
            break;
        }
        units += ch.len_utf16();
        end = index + ch.len_utf8();
    }
    (format!("{}... [truncated]", &line[..end]), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_size_matches_to_fixed() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1.0KB");
        assert_eq!(format_size(51200), "50.0KB");
        // 1.25 exactly: toFixed rounds the tie up.
        assert_eq!(format_size(1280), "1.3KB");
        assert_eq!(format_size(1024 * 1024), "1.0MB");
        assert_eq!(format_size(1024 * 1024 * 5 / 2), "2.5MB");
    }

    #[test]
    fn head_untouched_when_within_limits() {
        let result = truncate_head("a\nb\n", 2, 100);
        assert!(!result.truncated);
        assert_eq!(result.total_lines, 2);
        assert_eq!(result.content, "a\nb\n");
        assert_eq!(truncate_head("", 2, 100).total_lines, 0);
    }

    #[test]
    fn head_cuts_at_line_limit() {
        let text: String = (1..=10).map(|i| format!("line{i}\n")).collect();
        let result = truncate_head(&text, 3, 1000);
        assert_eq!(result.content, "line1\nline2\nline3");
        assert_eq!(result.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!(result.output_lines, 3);
        assert_eq!(result.total_lines, 10);
        assert_eq!(result.output_bytes, 17);
    }

    #[test]
    fn head_cuts_at_byte_limit_on_whole_lines() {
        let result = truncate_head("aaaa\nbbbb\ncccc", 100, 10);
        assert_eq!(result.content, "aaaa\nbbbb");
        assert_eq!(result.truncated_by, Some(TruncatedBy::Bytes));
        let first_too_long = truncate_head("aaaaaaaaaaaa\nb", 100, 10);
        assert!(first_too_long.first_line_exceeds_limit);
        assert_eq!(first_too_long.content, "");
    }

    #[test]
    fn tail_keeps_end_and_partial_last_line() {
        let result = truncate_tail("1\n2\n3\n4\n", 2, 100);
        assert_eq!(result.content, "3\n4");
        assert_eq!(result.truncated_by, Some(TruncatedBy::Lines));
        let partial = truncate_tail("héllo wörld", 100, 5);
        assert!(partial.last_line_partial);
        assert_eq!(partial.content, "örld");
        // Cutting inside "ö" moves forward to the next character.
        assert_eq!(truncate_tail("héllo wörld", 100, 4).content, "rld");
        assert_eq!(partial.truncated_by, Some(TruncatedBy::Bytes));
    }

    #[test]
    fn truncate_line_counts_utf16_units() {
        let (text, cut) = truncate_line("abcdef", 3);
        assert_eq!(text, "abc... [truncated]");
        assert!(cut);
        // An emoji is two units; cutting between them leaves it out whole.
        let (text, cut) = truncate_line("a😀b", 2);
        assert_eq!(text, "a... [truncated]");
        assert!(cut);
        assert_eq!(truncate_line("a😀", 3), ("a😀".to_string(), false));
    }

    #[test]
    fn truncation_json_uses_pi_field_names() {
        let json = truncate_head("a\nb", 1, 100).to_json();
        assert_eq!(json["truncatedBy"], "lines");
        assert_eq!(json["firstLineExceedsLimit"], false);
        assert_eq!(json["maxLines"], 1);
    }
}
