//! Matching and diffing for the edit tool (Pi's `edit-diff.ts`).
//!
//! Every edit is matched against the original content (LF-normalized), not incrementally. An edit
//! whose `oldText` is not found verbatim is looked for in a "fuzzy" view of the file (NFKC,
//! trailing whitespace stripped, smart quotes, dashes and special spaces made ASCII). When any
//! edit needed that, matching runs in the fuzzy view and only the lines the edits touch are
//! rewritten from it; every other line keeps its original bytes.
//!
//! Offsets here are byte offsets where Pi's are UTF-16 offsets; both only ever index the same
//! string they were computed on, so the results are the same.

use similar::Algorithm;
use similar::ChangeTag;
use similar::TextDiff;
use unicode_normalization::UnicodeNormalization;

use super::truncate::utf16_len;
use super::ToolError;
use pi_formats::jsonl::is_js_whitespace;

/// One requested replacement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EditSpec {
    pub(crate) old_text: String,
    pub(crate) new_text: String,
}

/// A replacement located in some content: replace `match_length` bytes at `match_index`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Replacement {
    pub(crate) match_index: usize,
    pub(crate) match_length: usize,
    pub(crate) new_text: String,
}

/// The edits applied to the LF-normalized content.
#[derive(Debug)]
pub(crate) struct AppliedEdits {
    pub(crate) base_content: String,
    pub(crate) new_content: String,
    /// Sorted, disjoint replacements of `base_content`.
    pub(crate) replacements: Vec<Replacement>,
}

/// The edit tool's `details`: a display diff, a unified patch and the first changed line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct EditDiff {
    pub(crate) diff: String,
    pub(crate) patch: String,
    pub(crate) first_changed_line: Option<usize>,
}

/// CRLF and lone CR become LF.
pub(crate) fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// The fuzzy view: NFKC, trailing whitespace stripped per line, smart quotes, Unicode dashes and
/// special spaces replaced by their ASCII forms.
pub(crate) fn normalize_for_fuzzy_match(text: &str) -> String {
    let nfkc: String = text.nfkc().collect();
    let trimmed: Vec<&str> = nfkc
        .split('\n')
        .map(|line| line.trim_end_matches(is_js_whitespace))
        .collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

struct FoundText {
    index: usize,
    match_length: usize,
    used_fuzzy: bool,
}

/// Exact match first, then a match in the fuzzy view (whose offsets are then fuzzy offsets).
fn fuzzy_find_text(content: &str, old_text: &str) -> Option<FoundText> {
    if let Some(index) = content.find(old_text) {
        return Some(FoundText {
            index,
            match_length: old_text.len(),
            used_fuzzy: false,
        });
    }
    let fuzzy_content = normalize_for_fuzzy_match(content);
    let fuzzy_old = normalize_for_fuzzy_match(old_text);
    fuzzy_content.find(&fuzzy_old).map(|index| FoundText {
        index,
        match_length: fuzzy_old.len(),
        used_fuzzy: true,
    })
}

/// Occurrences in the fuzzy view, counted as JavaScript's `split(x).length - 1` counts them.
fn count_occurrences(content: &str, old_text: &str) -> usize {
    let fuzzy_content = normalize_for_fuzzy_match(content);
    let fuzzy_old = normalize_for_fuzzy_match(old_text);
    if fuzzy_old.is_empty() {
        // split("") splits between every UTF-16 unit.
        return utf16_len(&fuzzy_content).saturating_sub(1);
    }
    fuzzy_content.matches(fuzzy_old.as_str()).count()
}

fn not_found_error(path: &str, index: usize, total: usize) -> ToolError {
    if total == 1 {
        return ToolError::new(format!(
            "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
        ));
    }
    ToolError::new(format!(
        "Could not find edits[{index}] in {path}. The oldText must match exactly including all whitespace and newlines."
    ))
}

fn duplicate_error(path: &str, index: usize, total: usize, occurrences: usize) -> ToolError {
    if total == 1 {
        return ToolError::new(format!(
            "Found {occurrences} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
        ));
    }
    ToolError::new(format!(
        "Found {occurrences} occurrences of edits[{index}] in {path}. Each oldText must be unique. Please provide more context to make it unique."
    ))
}

fn empty_old_text_error(path: &str, index: usize, total: usize) -> ToolError {
    if total == 1 {
        return ToolError::new(format!("oldText must not be empty in {path}."));
    }
    ToolError::new(format!(
        "edits[{index}].oldText must not be empty in {path}."
    ))
}

fn no_change_error(path: &str, total: usize) -> ToolError {
    if total == 1 {
        return ToolError::new(format!(
            "No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
        ));
    }
    ToolError::new(format!(
        "No changes made to {path}. The replacements produced identical content."
    ))
}

/// Byte spans of the lines of `content`, each with its `\n`; a last line without one only when
/// it is not empty.
fn line_spans(content: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    while start < content.len() {
        let end = content[start..]
            .find('\n')
            .map_or(content.len(), |p| start + p + 1);
        spans.push((start, end));
        start = end;
    }
    spans
}

fn apply_replacements(content: &str, replacements: &[Replacement], offset: usize) -> String {
    let mut result = content.to_string();
    for replacement in replacements.iter().rev() {
        let start = replacement.match_index - offset;
        result.replace_range(
            start..start + replacement.match_length,
            &replacement.new_text,
        );
    }
    result
}

/// Replacements matched in the fuzzy `base` turned into replacements of `original` that rewrite
/// only the touched lines (taken from the fuzzy view); every other line keeps its bytes.
fn widen_replacements_to_lines(
    original: &str,
    base: &str,
    replacements: &[Replacement],
) -> Result<Vec<Replacement>, ToolError> {
    let original_lines = line_spans(original);
    let base_lines = line_spans(base);
    if original_lines.len() != base_lines.len() {
        return Err(ToolError::new(
            "Cannot preserve unchanged lines because the base content has a different line count.",
        ));
    }
    let outside = || ToolError::new("Replacement range is outside the base content.");
    // (start line, end line exclusive, replacements)
    let mut groups: Vec<(usize, usize, Vec<Replacement>)> = Vec::new();
    let mut sorted = replacements.to_vec();
    sorted.sort_by_key(|r| r.match_index);
    for replacement in sorted {
        let start = replacement.match_index;
        let end = start + replacement.match_length;
        let start_line = base_lines
            .iter()
            .position(|&(line_start, line_end)| start >= line_start && start < line_end)
            .ok_or_else(outside)?;
        let mut end_line = start_line;
        while end_line < base_lines.len() && base_lines[end_line].1 < end {
            end_line += 1;
        }
        if end_line >= base_lines.len() {
            return Err(outside());
        }
        let end_line = end_line + 1;
        match groups.last_mut() {
            Some(group) if start_line < group.1 => {
                group.1 = group.1.max(end_line);
                group.2.push(replacement);
            }
            _ => groups.push((start_line, end_line, vec![replacement])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(start_line, end_line, group)| {
            let base_start = base_lines[start_line].0;
            let base_end = base_lines[end_line - 1].1;
            let original_start = original_lines[start_line].0;
            Replacement {
                match_index: original_start,
                match_length: original_lines[end_line - 1].1 - original_start,
                new_text: apply_replacements(&base[base_start..base_end], &group, base_start),
            }
        })
        .collect())
}

/// Applies `edits` to LF-normalized content, with Pi's checks and error texts.
pub(crate) fn apply_edits_to_normalized_content(
    normalized: &str,
    edits: &[EditSpec],
    path: &str,
) -> Result<AppliedEdits, ToolError> {
    let edits: Vec<EditSpec> = edits
        .iter()
        .map(|edit| EditSpec {
            old_text: normalize_to_lf(&edit.old_text),
            new_text: normalize_to_lf(&edit.new_text),
        })
        .collect();
    let total = edits.len();
    if let Some(index) = edits.iter().position(|edit| edit.old_text.is_empty()) {
        return Err(empty_old_text_error(path, index, total));
    }
    let used_fuzzy = edits.iter().any(|edit| {
        fuzzy_find_text(normalized, &edit.old_text).is_some_and(|found| found.used_fuzzy)
    });
    let base = if used_fuzzy {
        normalize_for_fuzzy_match(normalized)
    } else {
        normalized.to_string()
    };
    let mut matched: Vec<(usize, Replacement)> = Vec::with_capacity(total);
    for (index, edit) in edits.iter().enumerate() {
        let found = fuzzy_find_text(&base, &edit.old_text)
            .ok_or_else(|| not_found_error(path, index, total))?;
        let occurrences = count_occurrences(&base, &edit.old_text);
        if occurrences > 1 {
            return Err(duplicate_error(path, index, total, occurrences));
        }
        matched.push((
            index,
            Replacement {
                match_index: found.index,
                match_length: found.match_length,
                new_text: edit.new_text.clone(),
            },
        ));
    }
    matched.sort_by_key(|(_, replacement)| replacement.match_index);
    for pair in matched.windows(2) {
        let (previous_index, previous) = &pair[0];
        let (current_index, current) = &pair[1];
        if previous.match_index + previous.match_length > current.match_index {
            return Err(ToolError::new(format!(
                "edits[{previous_index}] and edits[{current_index}] overlap in {path}. Merge them into one edit or target disjoint regions."
            )));
        }
    }
    let matched: Vec<Replacement> = matched
        .into_iter()
        .map(|(_, replacement)| replacement)
        .collect();
    let replacements = if used_fuzzy {
        widen_replacements_to_lines(normalized, &base, &matched)?
    } else {
        matched
    };
    let new_content = apply_replacements(normalized, &replacements, 0);
    if new_content == normalized {
        return Err(no_change_error(path, total));
    }
    Ok(AppliedEdits {
        base_content: normalized.to_string(),
        new_content,
        replacements,
    })
}

/// Line ending of the line containing `offset` in the original text: its own LF or CRLF, or that
/// of the line before for an unterminated last line. A lone CR counts only in files without any
/// LF (classic Mac line endings).
fn line_ending_at(content: &str, offset: usize) -> &'static str {
    // No LF at or after `offset` means the byte at `offset` is not one either, so looking before
    // it is the same as JavaScript's lastIndexOf("\n", offset).
    let line_feed = content
        .get(offset..)
        .and_then(|rest| rest.find('\n'))
        .map(|p| offset + p)
        .or_else(|| content.get(..offset).and_then(|head| head.rfind('\n')));
    match line_feed {
        None if content.contains('\r') => "\r",
        None => "\n",
        Some(lf) if lf > 0 && content.as_bytes()[lf - 1] == b'\r' => "\r\n",
        Some(_) => "\n",
    }
}

/// Applies replacements matched in `normalize_to_lf(original)` to `original` itself: text
/// outside the replaced ranges keeps its bytes and line endings, and line breaks in new text get
/// the ending of the line where the replaced range starts.
pub(crate) fn apply_replacements_to_original(
    original: &str,
    replacements: &[Replacement],
) -> String {
    // Only CRLF changes length when normalizing: the LF of the n-th CRLF (original offset p) sits
    // at p - n in the normalized text.
    let crlf_positions: Vec<usize> = original.match_indices("\r\n").map(|(p, _)| p).collect();
    let mut crlf_before = 0usize;
    let mut to_original = |offset: usize| {
        while crlf_before < crlf_positions.len()
            && crlf_positions[crlf_before] - crlf_before < offset
        {
            crlf_before += 1;
        }
        offset + crlf_before
    };
    let mut out = String::with_capacity(original.len());
    let mut ends_with_cr = false;
    let mut push = |part: &str, out: &mut String| {
        if part.is_empty() {
            return;
        }
        // A CR before a seam and an LF after it would merge into one CRLF; an extra LF keeps the
        // line breaks the diff shows.
        if ends_with_cr && part.starts_with('\n') {
            out.push('\n');
        }
        out.push_str(part);
        ends_with_cr = part.ends_with('\r');
    };
    let mut position = 0usize;
    for replacement in replacements {
        let start = to_original(replacement.match_index);
        push(original.get(position..start).unwrap_or(""), &mut out);
        let ending = line_ending_at(original, start);
        if ending == "\n" {
            push(&replacement.new_text, &mut out);
        } else {
            push(&replacement.new_text.replace('\n', ending), &mut out);
        }
        position = to_original(replacement.match_index + replacement.match_length);
    }
    push(original.get(position..).unwrap_or(""), &mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// Diffs
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PartKind {
    Equal,
    Added,
    Removed,
}

/// A run of lines with one tag, each line with its `\n` when it has one (jsdiff's parts).
struct Part<'a> {
    kind: PartKind,
    lines: Vec<&'a str>,
}

fn diff_line_parts<'a>(old: &'a str, new: &'a str) -> Vec<Part<'a>> {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .diff_lines(old, new);
    let mut parts: Vec<Part<'a>> = Vec::new();
    for change in diff.iter_all_changes() {
        let kind = match change.tag() {
            ChangeTag::Equal => PartKind::Equal,
            ChangeTag::Insert => PartKind::Added,
            ChangeTag::Delete => PartKind::Removed,
        };
        let line = change.value();
        match parts.last_mut() {
            Some(part) if part.kind == kind => part.lines.push(line),
            _ => parts.push(Part {
                kind,
                lines: vec![line],
            }),
        }
    }
    parts
}

fn strip_newline(line: &str) -> &str {
    line.strip_suffix('\n').unwrap_or(line)
}

fn count_line_feeds(text: &str) -> usize {
    text.bytes().filter(|&b| b == b'\n').count()
}

fn push_context_lines(
    lines: &[&str],
    old_line: &mut usize,
    new_line: &mut usize,
    width: usize,
    output: &mut Vec<String>,
) {
    for line in lines {
        output.push(format!(" {:>width$} {line}", *old_line));
        *old_line += 1;
        *new_line += 1;
    }
}

/// Pi's display diff of parts: `+NN text`, `-NN text`, ` NN text` context and `   ...` skips,
/// numbered from the given 1-based lines. Returns the first changed line of the new text.
fn format_display_diff(
    parts: &[Part<'_>],
    old_start_line: usize,
    new_start_line: usize,
    width: usize,
    context: usize,
    output: &mut Vec<String>,
) -> Option<usize> {
    let mut old_line = old_start_line;
    let mut new_line = new_start_line;
    let mut last_was_change = false;
    let mut first_changed_line = None;
    let skip_marker = format!(" {} ...", " ".repeat(width));
    for (i, part) in parts.iter().enumerate() {
        let raw: Vec<&str> = part.lines.iter().map(|line| strip_newline(line)).collect();
        if part.kind != PartKind::Equal {
            first_changed_line.get_or_insert(new_line);
            for line in raw {
                if part.kind == PartKind::Added {
                    output.push(format!("+{new_line:>width$} {line}"));
                    new_line += 1;
                } else {
                    output.push(format!("-{old_line:>width$} {line}"));
                    old_line += 1;
                }
            }
            last_was_change = true;
            continue;
        }
        let next_is_change = parts
            .get(i + 1)
            .is_some_and(|next| next.kind != PartKind::Equal);
        if last_was_change && next_is_change {
            if raw.len() <= context * 2 {
                push_context_lines(&raw, &mut old_line, &mut new_line, width, output);
            } else {
                push_context_lines(&raw[..context], &mut old_line, &mut new_line, width, output);
                let skipped = raw.len() - 2 * context;
                output.push(skip_marker.clone());
                old_line += skipped;
                new_line += skipped;
                let tail = &raw[raw.len() - context..];
                push_context_lines(tail, &mut old_line, &mut new_line, width, output);
            }
        } else if last_was_change {
            let shown = raw.len().min(context);
            push_context_lines(&raw[..shown], &mut old_line, &mut new_line, width, output);
            let skipped = raw.len() - shown;
            if skipped > 0 {
                output.push(skip_marker.clone());
                old_line += skipped;
                new_line += skipped;
            }
        } else if next_is_change {
            let skipped = raw.len().saturating_sub(context);
            if skipped > 0 {
                output.push(skip_marker.clone());
                old_line += skipped;
                new_line += skipped;
            }
            push_context_lines(&raw[skipped..], &mut old_line, &mut new_line, width, output);
        } else {
            old_line += raw.len();
            new_line += raw.len();
        }
        last_was_change = false;
    }
    first_changed_line
}

struct Hunk {
    old_start: usize,
    old_lines: usize,
    new_start: usize,
    new_lines: usize,
    lines: Vec<String>,
}

/// jsdiff's `structuredPatch` hunks for parts, with `context` lines around changes.
fn patch_hunks(parts: &[Part<'_>], context: usize) -> Vec<Hunk> {
    let mut hunks = Vec::new();
    let mut range_open = false;
    let (mut old_range_start, mut new_range_start) = (0usize, 0usize);
    let mut current: Vec<String> = Vec::new();
    let (mut old_line, mut new_line) = (1usize, 1usize);
    // jsdiff appends an empty part so the last context closes the last hunk.
    let sentinel = Part {
        kind: PartKind::Equal,
        lines: Vec::new(),
    };
    let all: Vec<&Part<'_>> = parts.iter().chain(std::iter::once(&sentinel)).collect();
    for (i, part) in all.iter().enumerate() {
        if part.kind != PartKind::Equal {
            if !range_open {
                range_open = true;
                old_range_start = old_line;
                new_range_start = new_line;
                if i > 0 {
                    let previous = &all[i - 1].lines;
                    let take = if context > 0 {
                        previous.len().min(context)
                    } else {
                        0
                    };
                    current = previous[previous.len() - take..]
                        .iter()
                        .map(|l| format!(" {l}"))
                        .collect();
                    old_range_start -= current.len();
                    new_range_start -= current.len();
                }
            }
            let sign = if part.kind == PartKind::Added {
                '+'
            } else {
                '-'
            };
            current.extend(part.lines.iter().map(|l| format!("{sign}{l}")));
            if part.kind == PartKind::Added {
                new_line += part.lines.len();
            } else {
                old_line += part.lines.len();
            }
        } else {
            if range_open {
                if part.lines.len() <= context * 2 && i + 2 < all.len() {
                    current.extend(part.lines.iter().map(|l| format!(" {l}")));
                } else {
                    let size = part.lines.len().min(context);
                    current.extend(part.lines[..size].iter().map(|l| format!(" {l}")));
                    hunks.push(Hunk {
                        old_start: old_range_start,
                        old_lines: old_line - old_range_start + size,
                        new_start: new_range_start,
                        new_lines: new_line - new_range_start + size,
                        lines: std::mem::take(&mut current),
                    });
                    range_open = false;
                }
            }
            old_line += part.lines.len();
            new_line += part.lines.len();
        }
    }
    // Lines lose their "\n"; a line without one is followed by the no-newline marker.
    for hunk in &mut hunks {
        let mut fixed = Vec::with_capacity(hunk.lines.len());
        for line in hunk.lines.drain(..) {
            match line.strip_suffix('\n') {
                Some(stripped) => fixed.push(stripped.to_string()),
                None => {
                    fixed.push(line);
                    fixed.push("\\ No newline at end of file".to_string());
                }
            }
        }
        hunk.lines = fixed;
    }
    hunks
}

/// Unchanged lines diffed on each side of a replacement, well above the 4 context lines shown.
const DIFF_WINDOW_MARGIN_LINES: usize = 32;

struct DiffWindow {
    old_start: usize,
    old_end: usize,
    old_line: usize,
    new_start: usize,
    new_end: usize,
    new_line: usize,
}

fn line_start_before(text: &str, offset: usize) -> usize {
    if offset == 0 {
        0
    } else {
        text[..offset].rfind('\n').map_or(0, |p| p + 1)
    }
}

/// Whole-line windows with margin around the (sorted, disjoint) replacements; overlapping windows
/// merge.
fn diff_windows(base: &str, replacements: &[Replacement]) -> Vec<DiffWindow> {
    let mut windows: Vec<DiffWindow> = Vec::new();
    let mut offset_delta: isize = 0;
    let mut line_delta: isize = 0;
    let mut cursor_offset = 0usize;
    let mut cursor_line = 0usize;
    for replacement in replacements {
        let match_end = replacement.match_index + replacement.match_length;
        let mut start = line_start_before(base, replacement.match_index);
        for _ in 0..DIFF_WINDOW_MARGIN_LINES {
            if start == 0 {
                break;
            }
            start = line_start_before(base, start - 1);
        }
        let mut end = match_end;
        for i in 0..=DIFF_WINDOW_MARGIN_LINES {
            if end >= base.len() {
                break;
            }
            let from = if i == 0 {
                // The match's last character (Pi: its last UTF-16 unit): step back to the
                // start of a multi-byte character rather than slice inside it.
                let mut last = match_end.saturating_sub(1).max(replacement.match_index);
                while !base.is_char_boundary(last) {
                    last -= 1;
                }
                last
            } else {
                end
            };
            end = base[from..].find('\n').map_or(base.len(), |p| from + p + 1);
        }
        let offset_change = replacement.new_text.len() as isize - replacement.match_length as isize;
        let line_change = count_line_feeds(&replacement.new_text) as isize
            - count_line_feeds(&base[replacement.match_index..match_end]) as isize;
        match windows.last_mut() {
            Some(previous) if start <= previous.old_end => {
                previous.old_end = previous.old_end.max(end);
                previous.new_end =
                    (previous.old_end as isize + offset_delta + offset_change) as usize;
            }
            _ => {
                cursor_line += count_line_feeds(&base[cursor_offset..start]);
                cursor_offset = start;
                windows.push(DiffWindow {
                    old_start: start,
                    old_end: end,
                    old_line: cursor_line,
                    new_start: (start as isize + offset_delta) as usize,
                    new_end: (end as isize + offset_delta + offset_change) as usize,
                    new_line: (cursor_line as isize + line_delta) as usize,
                });
            }
        }
        offset_delta += offset_change;
        line_delta += line_change;
    }
    windows
}

/// Diffs an edit only around its replacements, so time and memory follow the size of the change
/// rather than the file (Pi's `generateEditDiff`).
pub(crate) fn generate_edit_diff(
    path: &str,
    base: &str,
    new: &str,
    replacements: &[Replacement],
) -> EditDiff {
    const CONTEXT: usize = 4;
    let width = (count_line_feeds(base).max(count_line_feeds(new)) + 1)
        .to_string()
        .len();
    let skip_marker = format!(" {} ...", " ".repeat(width));
    let mut output: Vec<String> = Vec::new();
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut first_changed_line = None;
    for window in diff_windows(base, replacements) {
        // The windows are whole lines of both texts by construction; `get` keeps a slip from
        // turning into a panic.
        let old_text = base.get(window.old_start..window.old_end).unwrap_or("");
        let new_text = new.get(window.new_start..window.new_end).unwrap_or("");
        let parts = diff_line_parts(old_text, new_text);
        let mut shown = Vec::new();
        let first = format_display_diff(
            &parts,
            window.old_line + 1,
            window.new_line + 1,
            width,
            CONTEXT,
            &mut shown,
        );
        if first_changed_line.is_none() {
            first_changed_line = first;
        }
        // Both windows around a run of unchanged lines mark it skipped; a whole-file diff has one.
        if output.last() == Some(&skip_marker) && shown.first() == Some(&skip_marker) {
            shown.remove(0);
        }
        output.extend(shown);
        for mut hunk in patch_hunks(&parts, CONTEXT) {
            hunk.old_start += window.old_line;
            hunk.new_start += window.new_line;
            hunks.push(hunk);
        }
    }
    let mut patch = vec![format!("--- {path}"), format!("+++ {path}")];
    for hunk in hunks {
        // Unified diff quirk: an empty range starts one line lower.
        let old_start = if hunk.old_lines == 0 {
            hunk.old_start.saturating_sub(1)
        } else {
            hunk.old_start
        };
        let new_start = if hunk.new_lines == 0 {
            hunk.new_start.saturating_sub(1)
        } else {
            hunk.new_start
        };
        patch.push(format!(
            "@@ -{old_start},{} +{new_start},{} @@",
            hunk.old_lines, hunk.new_lines
        ));
        patch.extend(hunk.lines);
    }
    EditDiff {
        diff: output.join("\n"),
        patch: patch.join("\n") + "\n",
        first_changed_line,
    }
}

#[cfg(test)]
#[path = "edit_diff_tests.rs"]
mod tests;
