//! The transcript: conversation items, how each renders at a width, and a virtualized view.
//!
//! Each item's wrapped height is cached per width (and per view flags), with prefix sums, so
//! drawing a frame touches only the items on screen: finding the first visible item is a
//! binary search, and appending or streaming into the last item recomputes one height.

use super::markdown;
use super::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use std::cell::RefCell;

/// Lines of tool output shown while tool output is collapsed.
const TOOL_PREVIEW_LINES: usize = 5;

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// The startup header (shortcuts, loaded context files), hidden by quietStartup.
    Header(Vec<(String, String)>),
    User(String),
    Assistant {
        text: String,
        thinking: String,
        error: Option<String>,
    },
    Tool {
        id: String,
        name: String,
        args: String,
        output: String,
        is_error: bool,
        done: bool,
        /// The edit tool's diff (`details.diff` of its result).
        diff: Option<String>,
        /// How long the call ran (known for calls seen live, not for loaded sessions).
        duration_ms: Option<u64>,
    },
    Error(String),
    Notice(String),
    /// Output of `!cmd`.
    Bash {
        command: String,
        output: String,
        excluded: bool,
    },
    Compaction(String),
    /// A `branch_summary` on the path: the branch left in /tree, summarized.
    BranchSummary(String),
    /// `/changelog`: release notes (markdown) between two rules, under "What's New".
    Changelog(String),
}

/// What changes how items look, besides the width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ViewFlags {
    pub show_thinking: bool,
    pub tools_expanded: bool,
}

#[derive(Debug, Default)]
struct Cache {
    width: u16,
    flags: ViewFlags,
    theme_gen: u64,
    /// `prefix[i]` = total lines of items `..i`; `prefix.len() == valid + 1`.
    prefix: Vec<u64>,
}

#[derive(Debug, Default)]
pub struct Transcript {
    items: Vec<Item>,
    cache: RefCell<Cache>,
    theme_gen: u64,
    /// Items before this one are not drawn (regular mode printed them into the terminal's
    /// scrollback already).
    floor: usize,
    /// Bumped by `clear`, so regular mode knows the items it printed are gone.
    generation: u64,
}

impl Transcript {
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn push(&mut self, item: Item) {
        self.items.push(item);
    }

    pub fn extend(&mut self, items: impl IntoIterator<Item = Item>) {
        self.items.extend(items);
    }

    pub fn clear(&mut self) {
        self.items.clear();
        self.invalidate_from(0);
        self.generation += 1;
        self.floor = 0;
    }

    /// Counts `clear`s (see [`Transcript::generation`]'s field).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Draw only items from `first` on (regular mode: the rest is in the scrollback).
    pub fn set_floor(&mut self, first: usize) {
        self.floor = first;
    }

    /// Mutable access to one item; its height and everything after it are recomputed.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Item> {
        self.invalidate_from(i);
        self.items.get_mut(i)
    }

    pub fn last_mut(&mut self) -> Option<&mut Item> {
        let n = self.items.len();
        self.get_mut(n.checked_sub(1)?)
    }

    /// Finds a tool item by call id, newest first (tool calls finish near the end).
    pub fn tool_mut(&mut self, call_id: &str) -> Option<&mut Item> {
        let i = self
            .items
            .iter()
            .rposition(|it| matches!(it, Item::Tool { id, .. } if id == call_id))?;
        self.get_mut(i)
    }

    /// The theme changed: every height may change (bold/colour never change widths, but
    /// a theme is free to, so do not assume).
    pub fn theme_changed(&mut self) {
        self.theme_gen += 1;
    }

    fn invalidate_from(&mut self, i: usize) {
        let cache = self.cache.get_mut();
        if cache.prefix.len() > i + 1 {
            cache.prefix.truncate(i + 1);
        }
    }

    /// Brings the height cache up to date for `width` and returns the total line count.
    pub fn layout(&self, width: u16, flags: ViewFlags, theme: &Theme) -> u64 {
        let mut cache = self.cache.borrow_mut();
        if cache.width != width || cache.flags != flags || cache.theme_gen != self.theme_gen {
            cache.width = width;
            cache.flags = flags;
            cache.theme_gen = self.theme_gen;
            cache.prefix.clear();
        }
        if cache.prefix.is_empty() {
            cache.prefix.push(0);
        }
        while cache.prefix.len() <= self.items.len() {
            let i = cache.prefix.len() - 1;
            let h = item_lines(&self.items[i], width, flags, theme).len() as u64;
            let total = cache.prefix[i] + h;
            cache.prefix.push(total);
        }
        cache.prefix[self.items.len()]
    }

    /// Draws the lines `[top, top + area.height)` of the transcript into `buf`.
    /// `scroll` counts lines up from the bottom (0 follows new output).
    pub fn render(
        &self,
        area: Rect,
        buf: &mut Buffer,
        scroll: u64,
        flags: ViewFlags,
        theme: &Theme,
    ) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        let total = self.layout(area.width, flags, theme);
        let height = u64::from(area.height);
        let bottom = total.saturating_sub(scroll).max(height.min(total));
        let cache = self.cache.borrow();
        let floor_line = cache.prefix[self.floor.min(self.items.len())];
        let top = bottom.saturating_sub(height).max(floor_line);
        // First item whose lines reach past `top`.
        let first = cache
            .prefix
            .partition_point(|&p| p <= top)
            .saturating_sub(1);
        let mut skip = top - cache.prefix[first];
        let mut y = area.y;
        // Short transcripts sit at the top, as in a terminal.
        for item in &self.items[first.min(self.items.len())..] {
            for line in item_lines(item, area.width, flags, theme) {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                if y >= area.bottom() {
                    return;
                }
                let row = Rect {
                    x: area.x,
                    y,
                    width: area.width,
                    height: 1,
                };
                buf.set_style(row, line.style);
                buf.set_line(area.x, y, &line, area.width);
                y += 1;
            }
        }
    }
}

fn pad_style(lines: Vec<Line<'static>>, style: Style) -> Vec<Line<'static>> {
    lines.into_iter().map(|l| l.style(style)).collect()
}

fn indent(lines: Vec<Line<'static>>, prefix: &str) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .map(|mut l| {
            l.spans.insert(0, Span::raw(prefix.to_string()));
            l
        })
        .collect()
}

fn plain_lines(text: &str, style: Style) -> Vec<Line<'static>> {
    text.lines()
        .map(|l| Line::styled(l.replace('\t', "    "), style))
        .collect()
}

/// The wrapped lines of one item at `width`, including the blank line that separates it
/// from the previous one. Pure: the same input gives the same lines.
pub fn item_lines(item: &Item, width: u16, flags: ViewFlags, theme: &Theme) -> Vec<Line<'static>> {
    let w = usize::from(width.max(4));
    let inner = w.saturating_sub(2).max(1);
    let mut out = vec![Line::default()];
    match item {
        Item::Header(rows) => {
            out.push(Line::styled(
                concat!("pi v", env!("CARGO_PKG_VERSION")),
                theme.bold(theme.accent),
            ));
            for (key, what) in rows {
                let line = Line::from(vec![
                    Span::styled(key.clone(), theme.fg(theme.dim)),
                    Span::styled(format!(" {what}"), theme.fg(theme.muted)),
                ]);
                out.extend(markdown::wrap_line(&line, w));
            }
        }
        Item::User(text) => {
            let style = Style::default().bg(theme.user_bg);
            let body = markdown::wrap_all(&plain_lines(text, Style::default()), inner);
            out.extend(pad_style(indent(body, " "), style));
        }
        Item::Assistant {
            text,
            thinking,
            error,
        } => {
            if !thinking.trim().is_empty() {
                let style = theme.fg(theme.thinking).add_modifier(Modifier::ITALIC);
                if flags.show_thinking {
                    let body = markdown::wrap_all(&plain_lines(thinking.trim(), style), inner);
                    out.extend(indent(body, " "));
                } else {
                    out.push(Line::from(Span::styled(" Thinking...", style)));
                }
                if !text.trim().is_empty() {
                    out.push(Line::default());
                }
            }
            if !text.trim().is_empty() {
                let md = markdown::render(text, theme);
                out.extend(indent(markdown::wrap_all(&md, inner), " "));
            }
            if let Some(err) = error {
                let body = markdown::wrap_all(
                    &plain_lines(&format!("Error: {err}"), theme.fg(theme.error)),
                    inner,
                );
                out.extend(indent(body, " "));
            }
        }
        Item::Tool {
            name,
            args,
            output,
            is_error,
            done,
            diff,
            duration_ms,
            ..
        } => {
            let bg = if *is_error {
                theme.tool_error_bg
            } else if *done {
                theme.tool_bg
            } else {
                theme.tool_pending_bg()
            };
            let body = tool_body(name, args, output, *is_error, diff.as_deref(), flags, theme);
            let mut body = body;
            if !done {
                body.push(Line::styled("running...", theme.fg(theme.dim)));
            } else if let Some(ms) = duration_ms.filter(|_| name == "bash") {
                body.push(Line::default());
                body.push(Line::styled(
                    format!("Took {:.1}s", ms as f64 / 1000.0),
                    theme.fg(theme.dim),
                ));
            }
            let body = markdown::wrap_all(&body, inner);
            out.extend(pad_style(indent(body, " "), Style::default().bg(bg)));
        }
        Item::Error(text) => {
            out.extend(indent(
                markdown::wrap_all(&plain_lines(text, theme.fg(theme.error)), inner),
                " ",
            ));
        }
        Item::Notice(text) => {
            out.extend(indent(
                markdown::wrap_all(&plain_lines(text, theme.fg(theme.dim)), inner),
                " ",
            ));
        }
        Item::Bash {
            command,
            output,
            excluded,
        } => {
            let head = if *excluded {
                format!("$ {command}  (not sent to the model)")
            } else {
                format!("$ {command}")
            };
            let mut body = vec![Line::styled(head, theme.bold(theme.accent))];
            body.extend(plain_lines(output, theme.fg(theme.muted)));
            out.extend(indent(markdown::wrap_all(&body, inner), " "));
        }
        Item::Compaction(summary) => {
            out.push(Line::styled(" [compaction]", theme.bold(theme.warning)));
            let body = markdown::wrap_all(&plain_lines(summary, theme.fg(theme.muted)), inner);
            let preview: Vec<_> = if flags.tools_expanded {
                body
            } else {
                body.into_iter().take(3).collect()
            };
            out.extend(indent(preview, " "));
        }
        Item::Changelog(text) => {
            let rule = Line::styled("─".repeat(w), theme.fg(theme.border));
            out.push(rule.clone());
            out.push(Line::styled(" What's New", theme.bold(theme.accent)));
            out.push(Line::default());
            let md = markdown::render(text, theme);
            out.extend(indent(markdown::wrap_all(&md, inner), " "));
            out.push(Line::default());
            out.push(rule);
        }
        Item::BranchSummary(summary) => {
            // Pi's look: a label, then the summary only when expanded.
            out.push(Line::styled(" [branch]", theme.bold(theme.accent)));
            if flags.tools_expanded {
                let mut body = vec![Line::styled("Branch Summary", theme.bold(theme.text))];
                body.push(Line::default());
                body.extend(plain_lines(summary, theme.fg(theme.muted)));
                out.extend(indent(markdown::wrap_all(&body, inner), " "));
            } else {
                out.push(Line::styled(
                    " Branch summary (ctrl+o to expand)",
                    theme.fg(theme.muted),
                ));
            }
        }
    }
    out
}

/// Lines of a file body shown while tools are collapsed (Pi's read and write previews).
const FILE_PREVIEW_LINES: usize = 10;

/// The lines of a tool call, Pi's way per tool: `$ command` and the last lines of output for
/// bash, the file content for write, the diff for edit, the first lines of output otherwise.
fn tool_body(
    name: &str,
    args: &str,
    output: &str,
    is_error: bool,
    diff: Option<&str>,
    flags: ViewFlags,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let parsed: serde_json::Value = serde_json::from_str(args).unwrap_or_default();
    let arg = |k: &str| parsed.get(k).and_then(|v| v.as_str());
    let out_style = theme.fg(if is_error { theme.error } else { theme.muted });
    let more = |n: usize, tail: &str| {
        Line::styled(
            format!("... ({n} {tail}, ctrl+o to expand)"),
            theme.fg(theme.dim),
        )
    };
    let text_lines = |text: &str, style: Style| -> Vec<Line<'static>> {
        text.lines()
            .map(|l| Line::styled(l.replace('\t', "    "), style))
            .collect()
    };
    let title = |rest: String| {
        Line::from(vec![
            Span::styled(name.to_string(), theme.bold(theme.text)),
            Span::styled(format!(" {rest}"), theme.fg(theme.accent)),
        ])
    };
    let mut body = Vec::new();
    match name {
        "bash" => {
            body.push(Line::styled(
                format!("$ {}", arg("command").unwrap_or("...")),
                theme.bold(theme.text),
            ));
            let lines = text_lines(output.trim(), out_style);
            if !lines.is_empty() {
                body.push(Line::default());
            }
            // Collapsed, bash shows its last lines: that is where the result and errors are.
            if !flags.tools_expanded && lines.len() > TOOL_PREVIEW_LINES {
                let skipped = lines.len() - TOOL_PREVIEW_LINES;
                body.push(more(skipped, "earlier lines"));
                body.extend(lines.into_iter().skip(skipped));
            } else {
                body.extend(lines);
            }
        }
        "write" => {
            body.push(title(
                arg("path")
                    .or(arg("file_path"))
                    .unwrap_or("...")
                    .to_string(),
            ));
            let content = text_lines(arg("content").unwrap_or(""), theme.fg(theme.muted));
            if !content.is_empty() {
                body.push(Line::default());
                let total = content.len();
                let shown = if flags.tools_expanded {
                    total
                } else {
                    total.min(FILE_PREVIEW_LINES)
                };
                body.extend(content.into_iter().take(shown));
                if shown < total {
                    body.push(more(total - shown, &format!("more lines, {total} total")));
                }
            }
            if is_error && !output.trim().is_empty() {
                body.push(Line::default());
                body.extend(text_lines(output, theme.fg(theme.error)));
            }
        }
        "edit" => {
            body.push(title(
                arg("path")
                    .or(arg("file_path"))
                    .unwrap_or("...")
                    .to_string(),
            ));
            match diff {
                Some(d) if !is_error => {
                    body.push(Line::default());
                    body.extend(d.lines().map(|l| {
                        let color = if l.starts_with('+') {
                            theme.success
                        } else if l.starts_with('-') {
                            theme.error
                        } else {
                            theme.dim
                        };
                        Line::styled(l.replace('\t', "    "), theme.fg(color))
                    }));
                }
                _ if !output.trim().is_empty() && is_error => {
                    body.push(Line::default());
                    body.extend(text_lines(output, theme.fg(theme.error)));
                }
                _ => {}
            }
        }
        _ => {
            body.push(title(summarize_args(args)));
            let lines = text_lines(output, out_style);
            let shown = if flags.tools_expanded {
                lines.len()
            } else {
                lines.len().min(TOOL_PREVIEW_LINES)
            };
            if !lines.is_empty() {
                body.push(Line::default());
            }
            let total = lines.len();
            body.extend(lines.into_iter().take(shown));
            if shown < total {
                body.push(more(total - shown, "more lines"));
            }
        }
    }
    body
}

/// A one-line summary of tool arguments: Pi shows the path or command, not the JSON.
pub fn summarize_args(args: &str) -> String {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(args) else {
        return args.to_string();
    };
    for key in ["command", "path", "file_path", "pattern"] {
        if let Some(v) = map.get(key).and_then(|v| v.as_str()) {
            let first = v.lines().next().unwrap_or("");
            return first.to_string();
        }
    }
    args.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heights_follow_edits_and_width() {
        let theme = Theme::dark();
        let flags = ViewFlags::default();
        let mut t = Transcript::default();
        for i in 0..100 {
            t.push(Item::User(format!("message {i}")));
        }
        assert_eq!(t.layout(40, flags, &theme), 200);
        if let Some(Item::User(text)) = t.last_mut() {
            text.push_str("\nsecond line");
        }
        assert_eq!(t.layout(40, flags, &theme), 201);
        t.push(Item::User("x ".repeat(30)));
        // 60 columns of text in 38: two rows, plus the separator.
        assert_eq!(t.layout(40, flags, &theme), 204);
    }
}
