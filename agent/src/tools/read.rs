//! The `read` tool: text files with offset/limit and truncation, images as attachments.

use std::path::Path;
use std::sync::OnceLock;

use base64::Engine;
use serde_json::json;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use super::fs_util::access;
use super::fs_util::node_fd_error;
use super::fs_util::node_path_error;
use super::image::detect_image_mime_type;
use super::image::IMAGE_SNIFF_BYTES;
use super::paths::resolve_read_path;
use super::truncate::format_size;
use super::truncate::truncate_head;
use super::truncate::TruncatedBy;
use super::truncate::TruncationResult;
use super::truncate::DEFAULT_MAX_BYTES;
use super::truncate::DEFAULT_MAX_LINES;
use super::utf8::Utf8Stream;
use super::ContentBlock;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::ToolUpdateFn;
use pi_engine::js::number_to_string;

/// Largest base64 payload Pi sends inline (headroom below Anthropic's 5 MB limit).
const MAX_IMAGE_BASE64_BYTES: usize = 4_718_592;
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Pi's `read` tool.
#[derive(Debug, Default)]
pub struct ReadTool;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
                "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
                "limit": {"type": "number", "description": "Maximum number of lines to read"}
            }
        })
    })
}

/// The selected lines of a file, gathered with memory bounded by the truncation caps.
struct Selection {
    /// Lines of the whole file as `split("\n")` counts them.
    total_file_lines: usize,
    truncation: TruncationResult,
    /// Size of the first selected line, for the "line is too long" notice.
    first_line_bytes: usize,
}

/// Streams decoded text and keeps only the selected lines truncation can show; the rest are
/// counted. Mirrors Pi's `selectLinesFromStream`, so counts and notices agree with Pi's.
struct LineSelector {
    start: usize,
    end: Option<usize>,
    line: usize,
    stored: Vec<String>,
    stored_bytes: usize,
    stored_past_caps: bool,
    selected_lines: usize,
    selected_bytes: usize,
    first_line_bytes: usize,
    last_line_empty: bool,
    piece: Option<String>,
    line_bytes: usize,
    line_has_text: bool,
}

impl LineSelector {
    fn new(start: usize, limit: Option<usize>) -> Self {
        LineSelector {
            start,
            end: limit.map(|limit| start.saturating_add(limit)),
            line: 0,
            stored: Vec::new(),
            stored_bytes: 0,
            stored_past_caps: false,
            selected_lines: 0,
            selected_bytes: 0,
            first_line_bytes: 0,
            last_line_empty: true,
            piece: Some(String::new()),
            line_bytes: 0,
            line_has_text: false,
        }
    }

    fn is_selected(&self, line: usize) -> bool {
        line >= self.start && self.end.is_none_or(|end| line < end)
    }

    fn append(&mut self, text: &str) {
        self.line_has_text = true;
        if let Some(piece) = self.piece.as_mut() {
            // A line over the byte cap is never shown, and a first line over it is only measured:
            // never store all of a huge line.
            if self.line_bytes <= DEFAULT_MAX_BYTES {
                piece.push_str(text);
            }
            self.line_bytes += text.len();
        }
    }

    fn finish_line(&mut self) {
        if let Some(piece) = self.piece.take() {
            if self.selected_lines == 0 {
                self.first_line_bytes = self.line_bytes;
            }
            // Storing goes one line past the caps: truncation ignores a trailing empty line, so the
            // line after the cap must be there for it to decide as it would on the full text.
            if self.stored.len() > DEFAULT_MAX_LINES || self.stored_bytes > DEFAULT_MAX_BYTES {
                self.stored_past_caps = true;
            }
            self.stored_bytes += piece.len() + usize::from(!self.stored.is_empty());
            self.stored.push(piece);
        }
        self.selected_lines += 1;
        self.last_line_empty = !self.line_has_text;
        self.piece = if self.stored_past_caps {
            None
        } else {
            Some(String::new())
        };
        self.line_bytes = 0;
        self.line_has_text = false;
    }

    fn feed(&mut self, mut text: &str) {
        loop {
            let selected = self.is_selected(self.line);
            match text.find('\n') {
                Some(newline) => {
                    let segment = &text[..newline];
                    if selected {
                        if !segment.is_empty() {
                            self.append(segment);
                        }
                        self.selected_bytes += segment.len();
                        self.finish_line();
                        // The newline joins this line to the next; it counts when both are selected.
                        if self.is_selected(self.line + 1) {
                            self.selected_bytes += 1;
                        }
                    }
                    self.line += 1;
                    text = &text[newline + 1..];
                }
                None => {
                    if selected && !text.is_empty() {
                        self.append(text);
                        self.selected_bytes += text.len();
                    }
                    return;
                }
            }
        }
    }

    fn finish(mut self) -> Selection {
        if self.is_selected(self.line) {
            self.finish_line();
        }
        let mut truncation = truncate_head(
            &self.stored.join("\n"),
            DEFAULT_MAX_LINES,
            DEFAULT_MAX_BYTES,
        );
        truncation.total_lines = if self.selected_bytes == 0 {
            0
        } else {
            self.selected_lines - usize::from(self.last_line_empty)
        };
        truncation.total_bytes = self.selected_bytes;
        Selection {
            total_file_lines: self.line + 1,
            truncation,
            first_line_bytes: self.first_line_bytes,
        }
    }
}

/// JavaScript's `Array.prototype.slice` index handling for a possibly fractional or negative
/// bound.
fn js_slice_index(index: f64, len: usize) -> usize {
    let index = index.trunc();
    if index < 0.0 {
        (len as f64 + index).max(0.0) as usize
    } else {
        index.min(len as f64) as usize
    }
}

/// Pi's whole-file path for ranges the stream cannot express (fractional offset or limit, negative
/// limit), whose array slicing defines what they select.
fn select_from_text(text: &str, start_line: f64, limit: Option<f64>) -> Selection {
    let all_lines: Vec<&str> = text.split('\n').collect();
    let len = all_lines.len();
    let begin = js_slice_index(start_line, len);
    let end = match limit {
        None => len,
        Some(limit) => js_slice_index((start_line + limit).min(len as f64), len),
    };
    let selected = if begin < end {
        all_lines[begin..end].join("\n")
    } else {
        String::new()
    };
    let truncation = truncate_head(&selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES);
    let first_line_bytes = if truncation.first_line_exceeds_limit {
        all_lines.get(begin).map_or(0, |line| line.len())
    } else {
        0
    };
    Selection {
        total_file_lines: len,
        truncation,
        first_line_bytes,
    }
}

async fn select_from_file(
    file: &mut tokio::fs::File,
    start: usize,
    limit: Option<usize>,
    cancel: &CancellationToken,
) -> Result<Selection, ToolError> {
    // A regular file is read up to its size when opened, so text appended meanwhile is not
    // counted and a growing file still ends; /proc-like files (size 0) are read to EOF.
    let metadata = file
        .metadata()
        .await
        .map_err(|e| ToolError::new(node_fd_error(&e, "fstat")))?;
    let mut remaining = if metadata.is_file() && metadata.len() > 0 {
        metadata.len()
    } else {
        u64::MAX
    };
    let mut selector = LineSelector::new(start, limit);
    let mut decoder = Utf8Stream::new();
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    let mut text = String::new();
    while remaining > 0 {
        if cancel.is_cancelled() {
            return Err(ToolError::aborted());
        }
        let want = buffer
            .len()
            .min(usize::try_from(remaining).unwrap_or(usize::MAX));
        let read = file
            .read(&mut buffer[..want])
            .await
            .map_err(|e| ToolError::new(node_fd_error(&e, "read")))?;
        if read == 0 {
            break;
        }
        remaining -= read as u64;
        text.clear();
        decoder.decode_into(&buffer[..read], &mut text);
        selector.feed(&text);
    }
    selector.feed(&decoder.finish());
    Ok(selector.finish())
}

fn number_arg(args: &Value, key: &str) -> Option<f64> {
    args.get(key).and_then(Value::as_f64)
}

fn read_image(bytes: &[u8], mime_type: &str, ctx: &ToolContext) -> ToolOutput {
    let (bytes, mime_type, hints) = match mime_type {
        "image/bmp" => match super::bmp::bmp_to_png(bytes) {
            Some(png) => (png, "image/png", vec!["[Image converted from image/bmp to image/png.]"]),
            None => {
                return ToolOutput::text(format!(
                    "Read image file [{mime_type}]\n[Image omitted: could not be converted to a supported inline image format.]"
                ))
            }
        },
        other => (bytes.to_vec(), other, Vec::new()),
    };
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    if data.len() >= MAX_IMAGE_BASE64_BYTES {
        // Pi would scale the image down; without an image codec the honest answer is Pi's own
        // message for an image it cannot bring under the limit.
        return ToolOutput::text(format!(
            "Read image file [{mime_type}]\n[Image omitted: could not be resized below the inline image size limit.]"
        ));
    }
    let mut note = format!("Read image file [{mime_type}]");
    for hint in hints {
        note.push('\n');
        note.push_str(hint);
    }
    let details = match &ctx.model {
        Some(model) if !model.supports_images => {
            Some(json!({ "imageUnsupportedByModel": model.id }))
        }
        _ => None,
    };
    ToolOutput {
        content: vec![
            ContentBlock::Text(note),
            ContentBlock::Image {
                data,
                mime_type: mime_type.to_string(),
            },
        ],
        details,
        is_error: false,
        structured: None,
        usage: None,
    }
}

fn text_output(
    path_arg: &str,
    offset: Option<f64>,
    limit: Option<f64>,
    selection: Selection,
) -> Result<ToolOutput, ToolError> {
    let start_line = match offset {
        Some(offset) if offset != 0.0 => (offset - 1.0).max(0.0),
        _ => 0.0,
    };
    let total = selection.total_file_lines as f64;
    if start_line >= total {
        let shown = offset.map_or_else(|| "undefined".to_string(), number_to_string);
        return Err(ToolError::new(format!(
            "Offset {shown} is beyond end of file ({} lines total)",
            selection.total_file_lines
        )));
    }
    let truncation = selection.truncation;
    let start_display = start_line + 1.0;
    let max_size = format_size(DEFAULT_MAX_BYTES);
    let user_limited = limit.map(|limit| (start_line + limit).min(total) - start_line);
    let (text, details) = if truncation.first_line_exceeds_limit {
        let line = number_to_string(start_display);
        let text = format!(
            "[Line {line} is {}, exceeds {max_size} limit. Use bash: sed -n '{line}p' {path_arg} | head -c {DEFAULT_MAX_BYTES}]",
            format_size(selection.first_line_bytes)
        );
        (text, Some(json!({ "truncation": truncation.to_json() })))
    } else if truncation.truncated {
        let end_display = start_display + truncation.output_lines as f64 - 1.0;
        let next = number_to_string(end_display + 1.0);
        let (first, last) = (
            number_to_string(start_display),
            number_to_string(end_display),
        );
        let notice = match truncation.truncated_by {
            Some(TruncatedBy::Lines) => format!(
                "\n\n[Showing lines {first}-{last} of {}. Use offset={next} to continue.]",
                selection.total_file_lines
            ),
            _ => format!(
                "\n\n[Showing lines {first}-{last} of {} ({max_size} limit). Use offset={next} to continue.]",
                selection.total_file_lines
            ),
        };
        let details = json!({ "truncation": truncation.to_json() });
        (format!("{}{notice}", truncation.content), Some(details))
    } else if let Some(user_limited) = user_limited.filter(|lines| start_line + lines < total) {
        let remaining = number_to_string(total - (start_line + user_limited));
        let next = number_to_string(start_line + user_limited + 1.0);
        (
            format!(
                "{}\n\n[{remaining} more lines in file. Use offset={next} to continue.]",
                truncation.content
            ),
            None,
        )
    } else {
        (truncation.content, None)
    };
    Ok(ToolOutput {
        content: vec![ContentBlock::Text(text)],
        details,
        is_error: false,
        structured: None,
        usage: None,
    })
}

async fn execute_read(
    args: &Value,
    ctx: &ToolContext,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let path_arg = args.get("path").and_then(Value::as_str).unwrap_or("");
    let offset = number_arg(args, "offset");
    let limit = number_arg(args, "limit");
    let absolute = resolve_read_path(path_arg, &ctx.cwd);
    access(&absolute, libc::R_OK)
        .map_err(|e| ToolError::new(node_path_error(&e, "access", &absolute)))?;
    let mut file = open(&absolute).await?;
    let mut head = vec![0u8; IMAGE_SNIFF_BYTES];
    let sniffed = read_up_to(&mut file, &mut head).await?;
    if let Some(mime_type) = detect_image_mime_type(&head[..sniffed]) {
        let bytes = tokio::fs::read(&absolute)
            .await
            .map_err(|e| ToolError::new(node_path_error(&e, "open", &absolute)))?;
        if cancel.is_cancelled() {
            return Err(ToolError::aborted());
        }
        return Ok(read_image(&bytes, mime_type, ctx));
    }
    // Reopen rather than seek: a pipe or /proc file cannot seek back over the sniffed bytes.
    let mut file = open(&absolute).await?;
    let streamable = offset.is_none_or(|o| o.fract() == 0.0)
        && limit.is_none_or(|l| l.fract() == 0.0 && l >= 0.0);
    let selection = if streamable {
        let start = match offset {
            Some(offset) if offset != 0.0 => (offset - 1.0).max(0.0) as usize,
            _ => 0,
        };
        select_from_file(&mut file, start, limit.map(|l| l as usize), cancel).await?
    } else {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .await
            .map_err(|e| ToolError::new(node_fd_error(&e, "read")))?;
        let start_line = match offset {
            Some(offset) if offset != 0.0 => (offset - 1.0).max(0.0),
            _ => 0.0,
        };
        select_from_text(&String::from_utf8_lossy(&bytes), start_line, limit)
    };
    if cancel.is_cancelled() {
        return Err(ToolError::aborted());
    }
    text_output(path_arg, offset, limit, selection)
}

async fn open(path: &Path) -> Result<tokio::fs::File, ToolError> {
    tokio::fs::File::open(path)
        .await
        .map_err(|e| ToolError::new(node_path_error(&e, "open", path)))
}

async fn read_up_to(file: &mut tokio::fs::File, buffer: &mut [u8]) -> Result<usize, ToolError> {
    let mut filled = 0;
    while filled < buffer.len() {
        let read = file
            .read(&mut buffer[filled..])
            .await
            .map_err(|e| ToolError::new(node_fd_error(&e, "read")))?;
        if read == 0 {
            break;
        }
        filled += read;
    }
    Ok(filled)
}

#[async_trait::async_trait]
impl Tool for ReadTool {
    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        "Read the contents of a file. Supports text files and images (jpg, png, gif, webp, bmp). Images are sent as attachments. For text files, output is truncated to 2000 lines or 50KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete."
    }

    fn parameters(&self) -> &Value {
        schema()
    }

    fn output_schema(&self) -> Option<&Value> {
        static OUTPUT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        Some(OUTPUT.get_or_init(|| {
            serde_json::json!({"anyOf": [
                {"type": "string"},
                {"type": "object", "properties": {
                    "type": {"const": "image", "type": "string"},
                    "data": {"type": "string"},
                    "mimeType": {"type": "string"},
                    "note": {"type": "string"}
                }, "required": ["type", "data", "mimeType", "note"]}
            ]})
        }))
    }

    fn prefers_constrained_sampling(&self) -> bool {
        true
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("Read file contents")
    }

    fn prompt_guidelines(&self) -> &[&str] {
        &["Use read to examine files instead of cat or sed."]
    }

    async fn execute(
        &self,
        _call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        _on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        if cancel.is_cancelled() {
            return Err(ToolError::aborted());
        }
        tokio::select! {
            result = execute_read(&args, ctx, &cancel) => result,
            () = cancel.cancelled() => Err(ToolError::aborted()),
        }
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
