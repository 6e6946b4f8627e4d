//! Markdown to styled lines (pulldown-cmark), a small keyword highlighter for code blocks,
//! and word wrapping of styled lines to a width.
//!
//! Everything here is a pure function of its input and width, which is what lets the
//! transcript cache line counts per item.

use super::theme::Theme;
use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use crate::visible::visible_line;

/// Renders Markdown into unwrapped lines (one per source line of output).
pub fn render(text: &str, theme: &Theme) -> Vec<Line<'static>> {
    let mut r = Renderer {
        theme,
        lines: Vec::new(),
        cur: Vec::new(),
        styles: vec![Style::default()],
        list: Vec::new(),
        quote: 0,
        code: None,
        table: None,
        link: None,
    };
    let parser = Parser::new_ext(
        text,
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS,
    );
    for ev in parser {
        r.event(ev);
    }
    r.flush();
    while r.lines.last().is_some_and(|l| l.spans.is_empty()) {
        r.lines.pop();
    }
    r.lines
}

struct Renderer<'t> {
    theme: &'t Theme,
    lines: Vec<Line<'static>>,
    cur: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Per open list: the next number, or None for bullets.
    list: Vec<Option<u64>>,
    quote: usize,
    /// Language of the open code block.
    code: Option<String>,
    /// The table being read: drawn with borders once complete (columns need all rows).
    table: Option<Table>,
    /// The open link: its URL, and where its text starts in `cur`.
    link: Option<(String, usize)>,
}

/// A table's column alignments and its rows of cells (the header row first).
struct Table {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<Vec<Span<'static>>>>,
}

fn spans_width(spans: &[Span<'_>]) -> usize {
    spans
        .iter()
        .flat_map(|s| s.content.chars())
        .map(|c| c.width().unwrap_or(0))
        .sum()
}

impl Table {
    /// Pi's table: box-drawing borders, a rule under the header, cells padded to the
    /// column width and aligned as the delimiter row says.
    fn lines(self, border: Style) -> Vec<Line<'static>> {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|cell| spans_width(cell))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let rule = |l: &str, m: &str, r: &str| {
            let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            Line::styled(format!("{l}{}{r}", parts.join(m)), border)
        };
        let mut out = vec![rule("┌", "┬", "┐")];
        let n = self.rows.len();
        for (i, row) in self.rows.into_iter().enumerate() {
            let mut spans = vec![Span::styled("│", border)];
            let mut cells = row.into_iter();
            for (c, w) in widths.iter().enumerate() {
                let cell = cells.next().unwrap_or_default();
                let pad = w - spans_width(&cell).min(*w);
                let (left, right) = match self.aligns.get(c) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                spans.push(Span::raw(" ".repeat(left + 1)));
                spans.extend(cell);
                spans.push(Span::raw(" ".repeat(right + 1)));
                spans.push(Span::styled("│", border));
            }
            out.push(Line::from(spans));
            if i == 0 && n > 1 {
                out.push(rule("├", "┼", "┤"));
            }
        }
        out.push(rule("└", "┴", "┘"));
        out
    }
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let s = f(self.style());
        self.styles.push(s);
    }

    fn flush(&mut self) {
        if !self.cur.is_empty() {
            let mut spans = Vec::new();
            if self.quote > 0 {
                spans.push(Span::styled(
                    "│ ".repeat(self.quote),
                    self.theme.fg(self.theme.muted),
                ));
            }
            spans.append(&mut self.cur);
            self.lines.push(Line::from(spans));
        }
    }

    fn blank(&mut self) {
        self.flush();
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) {
            self.lines.push(Line::default());
        }
    }

    fn event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => {
                if let Some(lang) = self.code.clone() {
                    for line in t.split_inclusive('\n') {
                        let line = line.strip_suffix('\n').unwrap_or(line);
                        let mut spans = vec![Span::styled("  ", Style::default())];
                        spans.extend(highlight(line, &lang, self.theme));
                        self.lines.push(Line::from(spans));
                    }
                } else {
                    let style = self.style();
                    let mut first = true;
                    for part in t.split('\n') {
                        if !first {
                            self.flush();
                        }
                        first = false;
                        if !part.is_empty() {
                            self.cur.push(Span::styled(part.to_string(), style));
                        }
                    }
                }
            }
            Event::Code(t) => self.cur.push(Span::styled(
                t.to_string(),
                self.theme.fg(self.theme.md_code),
            )),
            Event::SoftBreak => self.cur.push(Span::styled(" ", self.style())),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.blank();
                self.lines.push(Line::styled(
                    "─".repeat(40),
                    self.theme.fg(self.theme.muted),
                ));
            }
            Event::TaskListMarker(done) => {
                self.cur.push(Span::raw(if done { "[x] " } else { "[ ] " }))
            }
            Event::Html(t) | Event::InlineHtml(t) => self
                .cur
                .push(Span::styled(t.trim_end().to_string(), self.style())),
            Event::FootnoteReference(t) => self.cur.push(Span::raw(format!("[{t}]"))),
            Event::InlineMath(t) | Event::DisplayMath(t) => self.cur.push(Span::raw(t.to_string())),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {}
            Tag::Heading { level, .. } => {
                self.blank();
                let theme = self.theme;
                self.push_style(|_| theme.bold(theme.md_heading));
                // Pi marks H1 by underline and H2 by bold alone; deeper levels keep `### `.
                if level as usize >= 3 {
                    let hashes = "#".repeat(level as usize);
                    self.cur
                        .push(Span::styled(format!("{hashes} "), self.style()));
                } else if level == HeadingLevel::H1 {
                    let s = self.style().add_modifier(Modifier::UNDERLINED);
                    self.styles.push(s);
                }
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote += 1;
                let muted = self.theme.fg(self.theme.muted);
                self.push_style(|s| s.patch(muted).add_modifier(Modifier::ITALIC));
            }
            Tag::CodeBlock(kind) => {
                self.blank();
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => {
                        l.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.lines.push(Line::styled(
                    format!("```{lang}"),
                    self.theme.fg(self.theme.muted),
                ));
                self.code = Some(lang);
            }
            Tag::List(start) => {
                self.flush();
                self.list.push(start);
            }
            Tag::Item => {
                self.flush();
                let depth = self.list.len().saturating_sub(1);
                let marker = match self.list.last_mut() {
                    Some(Some(n)) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "- ".to_string(),
                };
                self.cur.push(Span::raw("  ".repeat(depth)));
                self.cur
                    .push(Span::styled(marker, self.theme.fg(self.theme.accent)));
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } => {
                let c = self.theme.md_link;
                self.push_style(|s| s.fg(c).add_modifier(Modifier::UNDERLINED));
                self.link = Some((dest_url.to_string(), self.cur.len()));
            }
            Tag::Table(aligns) => {
                self.blank();
                self.table = Some(Table {
                    aligns,
                    rows: Vec::new(),
                });
            }
            Tag::TableRow | Tag::TableHead => {
                self.cur.clear();
                if let Some(t) = self.table.as_mut() {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => self.cur.clear(),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.blank(),
            TagEnd::Heading(level) => {
                self.styles.pop();
                if level == HeadingLevel::H1 {
                    self.styles.pop();
                }
                self.blank();
            }
            TagEnd::BlockQuote(_) => {
                self.styles.pop();
                self.flush();
                self.quote = self.quote.saturating_sub(1);
                self.blank();
            }
            TagEnd::CodeBlock => {
                self.code = None;
                self.lines
                    .push(Line::styled("```", self.theme.fg(self.theme.muted)));
                self.lines.push(Line::default());
            }
            TagEnd::List(_) => {
                self.list.pop();
                if self.list.is_empty() {
                    self.blank();
                } else {
                    self.flush();
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link => {
                self.styles.pop();
                // Pi prints the address after the text, unless the text is the address.
                if let Some((url, start)) = self.link.take() {
                    let text: String = self.cur[start.min(self.cur.len())..]
                        .iter()
                        .map(|s| s.content.as_ref())
                        .collect();
                    let bare = url.strip_prefix("mailto:").unwrap_or(&url);
                    if !url.is_empty() && text != url && text != bare {
                        self.cur.push(Span::styled(
                            format!(" ({url})"),
                            self.theme.fg(self.theme.dim),
                        ));
                    }
                }
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.cur);
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(cell);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {}
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    self.lines.extend(t.lines(self.theme.fg(self.theme.muted)));
                }
                self.blank();
            }
            _ => {}
        }
    }
}

const KEYWORDS: &[&str] = &[
    "fn",
    "let",
    "mut",
    "pub",
    "use",
    "mod",
    "struct",
    "enum",
    "impl",
    "trait",
    "match",
    "if",
    "else",
    "for",
    "while",
    "loop",
    "return",
    "break",
    "continue",
    "const",
    "static",
    "async",
    "await",
    "move",
    "ref",
    "self",
    "Self",
    "where",
    "type",
    "in",
    "as",
    "true",
    "false",
    "None",
    "Some",
    "Ok",
    "Err",
    "function",
    "var",
    "class",
    "import",
    "export",
    "from",
    "def",
    "elif",
    "lambda",
    "with",
    "try",
    "catch",
    "except",
    "finally",
    "throw",
    "raise",
    "new",
    "null",
    "undefined",
    "this",
    "interface",
    "extends",
    "package",
    "func",
    "go",
    "defer",
    "nil",
    "echo",
    "then",
    "fi",
    "do",
    "done",
    "case",
    "esac",
    "int",
    "void",
    "char",
    "bool",
    "string",
    "number",
    "public",
    "private",
    "protected",
];

/// A light highlighter: keywords, strings, numbers and line comments, by lexing words.
/// Good enough to tell code apart at a glance, with no grammar files to load.
pub fn highlight(line: &str, lang: &str, theme: &Theme) -> Vec<Span<'static>> {
    let comment = match lang {
        "python" | "py" | "sh" | "bash" | "zsh" | "shell" | "ruby" | "rb" | "yaml" | "yml"
        | "toml" => "#",
        "sql" | "lua" | "haskell" => "--",
        _ => "//",
    };
    let base = theme.fg(theme.md_code);
    let mut spans = Vec::new();
    let mut word = String::new();
    let flush_word = |word: &mut String, spans: &mut Vec<Span<'static>>| {
        if word.is_empty() {
            return;
        }
        let style = if KEYWORDS.contains(&word.as_str()) {
            theme.fg(theme.syntax_keyword)
        } else if word.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            theme.fg(theme.syntax_number)
        } else {
            base
        };
        spans.push(Span::styled(std::mem::take(word), style));
    };
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with(comment) {
            flush_word(&mut word, &mut spans);
            spans.push(Span::styled(
                rest.to_string(),
                theme.fg(theme.syntax_comment),
            ));
            return spans;
        }
        if c == '"' || c == '\'' || c == '`' {
            flush_word(&mut word, &mut spans);
            // Find the closing quote, skipping escaped ones.
            let mut end = rest.len();
            let mut escaped = false;
            for (i, ch) in rest.char_indices().skip(1) {
                if escaped {
                    escaped = false;
                } else if ch == '\\' {
                    escaped = true;
                } else if ch == c {
                    end = i + ch.len_utf8();
                    break;
                }
            }
            spans.push(Span::styled(
                rest[..end].to_string(),
                theme.fg(theme.syntax_string),
            ));
            rest = &rest[end..];
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush_word(&mut word, &mut spans);
            spans.push(Span::styled(c.to_string(), base));
        }
        rest = &rest[c.len_utf8()..];
    }
    flush_word(&mut word, &mut spans);
    merge_spans(spans)
}

/// Joins neighbouring spans of one style, so a code line is a handful of spans, not one per
/// punctuation character.
fn merge_spans(spans: Vec<Span<'static>>) -> Vec<Span<'static>> {
    let mut out: Vec<Span<'static>> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if last.style == s.style => last.content.to_mut().push_str(&s.content),
            _ => out.push(s),
        }
    }
    out
}

/// Display width of a line.
pub fn line_width(line: &Line<'_>) -> usize {
    line.spans
        .iter()
        .map(|s| unicode_width::UnicodeWidthStr::width(s.content.as_ref()))
        .sum()
}

/// Word-wraps one styled line to `width` columns: breaks after spaces when a word fits on
/// the next line, mid-word otherwise. An empty line stays one empty line.
///
/// Every transcript line passes here, so this is where control characters in its text (from
/// a session file or a model) are made visible (`^[`), before widths are measured.
pub fn wrap_line(line: &Line<'static>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    let shown;
    let line = if line
        .spans
        .iter()
        .any(|s| s.content.chars().any(char::is_control))
    {
        let mut copy = line.clone();
        for span in &mut copy.spans {
            if let std::borrow::Cow::Owned(text) = visible_line(&span.content) {
                span.content = text.into();
            }
        }
        shown = copy;
        &shown
    } else {
        line
    };
    if line_width(line) <= width {
        return vec![line.clone()];
    }
    // Flatten to (char, style), then cut.
    let cells: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|s| s.content.chars().map(move |c| (c, s.style)))
        .collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < cells.len() {
        let mut w = 0;
        let mut end = start;
        let mut last_space = None;
        while end < cells.len() {
            let cw = cells[end].0.width().unwrap_or(0);
            if w + cw > width {
                break;
            }
            w += cw;
            if cells[end].0 == ' ' {
                last_space = Some(end);
            }
            end += 1;
        }
        if end == start {
            // A character wider than the line: take it alone rather than loop forever.
            end = start + 1;
        } else if end < cells.len() {
            if let Some(sp) = last_space.filter(|&sp| sp > start) {
                end = sp + 1;
            }
        }
        out.push(cells_to_line(&cells[start..end]));
        start = end;
    }
    out
}

fn cells_to_line(cells: &[(char, Style)]) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    for &(c, style) in cells {
        match spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push(c),
            _ => spans.push(Span::styled(c.to_string(), style)),
        }
    }
    Line::from(spans)
}

/// Wraps many lines.
pub fn wrap_all(lines: &[Line<'static>], width: usize) -> Vec<Line<'static>> {
    lines.iter().flat_map(|l| wrap_line(l, width)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn markdown_blocks() {
        let t = Theme::dark();
        let out = plain(&render(
            "# Title\n\nSome *text* and `code`.\n\n- a\n- b\n\n```rust\nlet x = 1; // one\n```\n",
            &t,
        ));
        assert_eq!(
            out,
            vec![
                "Title",
                "",
                "Some text and code.",
                "",
                "- a",
                "- b",
                "",
                "```rust",
                "  let x = 1; // one",
                "```"
            ]
        );
    }

    #[test]
    fn tables_links_and_headings_as_pi() {
        let t = Theme::dark();
        let out = plain(&render(
            "## Results\n\n### Detail\n\n| Name | Count | Mid |\n|:-----|------:|:---:|\n| alpha | 1 | x |\n| b | 200 | yyy |\n\nSee [the docs](https://example.com/docs) or <https://example.com>.\n",
            &t,
        ));
        assert_eq!(
            out,
            vec![
                "Results",
                "",
                "### Detail",
                "",
                "┌───────┬───────┬─────┐",
                "│ Name  │ Count │ Mid │",
                "├───────┼───────┼─────┤",
                "│ alpha │     1 │  x  │",
                "│ b     │   200 │ yyy │",
                "└───────┴───────┴─────┘",
                "",
                "See the docs (https://example.com/docs) or https://example.com.",
            ]
        );
    }

    #[test]
    fn highlight_splits_kinds() {
        let t = Theme::dark();
        let spans = highlight("let s = \"a\\\"b\"; // c", "rust", &t);
        assert_eq!(spans[0].content, "let");
        assert_eq!(spans[0].style, t.fg(t.syntax_keyword));
        assert!(spans.iter().any(|s| s.content == "\"a\\\"b\""));
        assert_eq!(spans.last().map(|s| s.content.as_ref()), Some("// c"));
    }

    #[test]
    fn wrap_prefers_spaces_and_handles_wide_chars() {
        let l = Line::from("hello world again");
        assert_eq!(plain(&wrap_line(&l, 11)), vec!["hello ", "world again"]);
        assert_eq!(
            plain(&wrap_line(&Line::from("abcdef"), 4)),
            vec!["abcd", "ef"]
        );
        assert_eq!(
            plain(&wrap_line(&Line::from("日本語"), 1)),
            vec!["日", "本", "語"]
        );
        assert_eq!(wrap_line(&Line::default(), 5).len(), 1);
    }
}
