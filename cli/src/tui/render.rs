//! Drawing: pure functions from `&App` into a ratatui frame.

use super::app::{App, CompletionKind};
use super::dialogs::{
    Confirm, Dialog, ForkPicker, RefreshStatus, ResumeMode, ResumePicker, ResumeScope, ResumeSort,
    BRANCH_OPTIONS, HOTKEYS,
};
use super::markdown::line_width;
use super::theme::Theme;
use super::tree::{NodeKind, TreeNav};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};
use ratatui::Frame;

use crate::visible::visible_line;

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Draws the whole screen.
pub fn draw(app: &App, frame: &mut Frame<'_>) {
    let area = frame.area();
    draw_into(app, area, frame.buffer_mut());
    if app.dialog.is_none() {
        if let Some((x, y)) = cursor_position(app, area) {
            frame.set_cursor_position((x, y));
        }
    }
}

struct Areas {
    /// Extension lines: `setHeader`, widgets above and below the editor, status and
    /// `setFooter`.
    ext_header: Rect,
    transcript: Rect,
    status: Rect,
    ext_above: Rect,
    bottom: Rect,
    ext_below: Rect,
    footer: Rect,
    ext_footer: Rect,
}

fn editor_height(app: &App, area: Rect) -> u16 {
    let lines = app.editor.lines().len() as u16;
    (lines + 2).min((area.height / 2).max(3))
}

fn bottom_height(app: &App, area: Rect) -> u16 {
    let max = area.height.saturating_sub(4).max(3);
    match &app.dialog {
        Some(Dialog::Tree(_)) | Some(Dialog::Resume(_)) => max,
        Some(Dialog::ModelPicker(_)) | Some(Dialog::ScopedModels(_)) => 14.min(max),
        Some(Dialog::Hotkeys(_)) => (HOTKEYS.len() as u16 + 2).min(max),
        Some(Dialog::Settings(s)) => (s.items.len() as u16 + 4).min(max),
        Some(Dialog::BranchPrompt(_)) => 8.min(max),
        Some(Dialog::Fork(_)) => 16.min(max),
        Some(Dialog::Confirm(c)) => confirm_height(c, area.width).min(max),
        Some(Dialog::Extension(d)) => confirm_height(&d.view(), area.width).min(max),
        Some(Dialog::Login(d)) => confirm_height(&d.view(), area.width).min(max),
        None => {
            let popup = app
                .completion
                .as_ref()
                .map(|c| c.items.len().min(8) as u16)
                .unwrap_or(0);
            editor_height(app, area) + popup
        }
    }
}

fn areas(app: &App, area: Rect) -> Areas {
    let queued = (app.steering.len() + app.follow_up.len()) as u16;
    let status = queued + u16::from(app.working || app.compacting || app.summarizing_branch);
    let ext = &app.ext_ui;
    let len = |n: usize| Constraint::Length(u16::try_from(n).unwrap_or(u16::MAX).min(8));
    let [ext_header, transcript, status, ext_above, bottom, ext_below, footer, ext_footer] =
        Layout::vertical([
            len(ext.header.len()),
            Constraint::Min(1),
            Constraint::Length(status),
            len(ext.above_lines().len()),
            Constraint::Length(bottom_height(app, area)),
            len(ext.below_lines().len()),
            Constraint::Length(2),
            len(ext.footer.len()),
        ])
        .areas(area);
    Areas {
        ext_header,
        transcript,
        status,
        ext_above,
        bottom,
        ext_below,
        footer,
        ext_footer,
    }
}

/// Draws into a buffer (what tests and the bench call).
pub fn draw_into(app: &App, area: Rect, buf: &mut Buffer) {
    let a = areas(app, area);
    let theme = &app.theme;
    let total = app.transcript.layout(a.transcript.width, app.flags, theme);
    app.view.set((a.transcript.height, total));
    app.transcript
        .render(a.transcript, buf, app.scroll, app.flags, theme);
    draw_status(app, a.status, buf);
    match &app.dialog {
        Some(d) => draw_dialog(app, d, a.bottom, buf),
        None => draw_editor(app, a.bottom, buf),
    }
    draw_footer(app, a.footer, buf);
    let ext = &app.ext_ui;
    draw_ext_lines(app, &ext.header, a.ext_header, buf);
    draw_ext_lines(app, &ext.above_lines(), a.ext_above, buf);
    draw_ext_lines(app, &ext.below_lines(), a.ext_below, buf);
    draw_ext_lines(app, &ext.footer, a.ext_footer, buf);
    show_controls(area, buf);
}

/// Lines an extension set, one per row, cut at the width.
fn draw_ext_lines(app: &App, lines: &[String], area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let lines: Vec<Line<'_>> = lines
        .iter()
        .map(|l| Line::styled(truncate(l, usize::from(area.width)), theme.fg(theme.muted)))
        .collect();
    paint_lines(lines, area, buf);
}

/// The last line of defence: a control character that reached a screen cell (a widget that
/// draws text as it is given, e.g. `Paragraph`) is replaced by its one-column picture, so no
/// text from a session, a model or a project file is ever sent to the terminal as a command.
/// Text drawn through [`super::markdown::wrap_line`], [`truncate`] and [`first_line`] was
/// made visible (`^[`) before layout; this catches whatever else there is.
pub fn show_controls(area: Rect, buf: &mut Buffer) {
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let cell = &mut buf[(x, y)];
            if cell.symbol().chars().any(char::is_control) {
                let shown: String = cell
                    .symbol()
                    .chars()
                    .map(crate::visible::control_picture)
                    .collect();
                cell.set_symbol(&shown);
            }
        }
    }
}

fn draw_status(app: &App, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let mut lines = Vec::new();
    for s in &app.steering {
        lines.push(Line::from(vec![
            Span::styled("Steering: ", theme.fg(theme.warning)),
            Span::styled(first_line(s), theme.fg(theme.muted)),
        ]));
    }
    for s in &app.follow_up {
        lines.push(Line::from(vec![
            Span::styled("Follow-up: ", theme.fg(theme.accent)),
            Span::styled(first_line(s), theme.fg(theme.muted)),
        ]));
    }
    if app.working || app.compacting || app.summarizing_branch {
        let spin = SPINNER[(app.tick % SPINNER.len() as u64) as usize];
        let retrying;
        let (what, verb) = if let Some(r) = app.retry.filter(|_| app.working) {
            retrying = format!(
                "Retrying ({}/{}) in {}s...",
                r.attempt,
                r.max_attempts,
                r.seconds_left(app.now_ms)
            );
            (retrying.as_str(), "cancel")
        } else if app.summarizing_branch {
            ("Summarizing branch...", "cancel")
        } else if app.compacting {
            ("Compacting context...", "interrupt")
        } else {
            ("Working...", "interrupt")
        };
        let hint = format!(" ({} to {verb})", app.keys.hint("app.interrupt"));
        lines.push(Line::from(vec![
            Span::styled(format!("{spin} {what}"), theme.fg(theme.accent)),
            Span::styled(hint, theme.fg(theme.dim)),
        ]));
    }
    Paragraph::new(lines).render(area, buf);
}

fn first_line(s: &str) -> String {
    let mut l = visible_line(s.lines().next().unwrap_or("")).into_owned();
    if s.lines().count() > 1 {
        l.push_str(" …");
    }
    l
}

fn thinking_color(app: &App) -> ratatui::style::Color {
    use super::driver::ThinkingLevel as T;
    app.theme.thinking_border(match app.thinking {
        T::Off => 0,
        T::Minimal => 1,
        T::Low => 2,
        T::Medium => 3,
        T::High => 4,
        T::Xhigh => 5,
        T::Max => 6,
    })
}

fn draw_editor(app: &App, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let popup = app
        .completion
        .as_ref()
        .map(|c| c.items.len().min(8) as u16)
        .unwrap_or(0);
    let [popup_area, editor_area] =
        Layout::vertical([Constraint::Length(popup), Constraint::Min(0)]).areas(area);
    if let Some(c) = &app.completion {
        let start = c.selected.saturating_sub(7);
        let lines: Vec<Line<'_>> = c
            .items
            .iter()
            .enumerate()
            .skip(start)
            .take(8)
            .map(|(i, (text, desc))| {
                let style = if i == c.selected {
                    theme.bold(theme.accent)
                } else {
                    Style::default()
                };
                let mut spans = vec![Span::styled(format!(" {text}"), style)];
                if !desc.is_empty() && c.kind == CompletionKind::Command {
                    spans.push(Span::styled(format!("  {desc}"), theme.fg(theme.dim)));
                }
                Line::from(spans)
            })
            .collect();
        Paragraph::new(lines).render(popup_area, buf);
    }
    let color = thinking_color(app);
    let mut block = Block::default()
        .borders(Borders::TOP | Borders::BOTTOM)
        .border_style(theme.fg(color));
    if app.model.as_ref().is_some_and(|m| m.reasoning)
        || app.thinking != super::driver::ThinkingLevel::Off
    {
        block = block.title_top(
            Line::styled(
                format!(" thinking: {} ", app.thinking.as_str()),
                theme.fg(color),
            )
            .right_aligned(),
        );
    }
    let inner = block.inner(editor_area);
    block.render(editor_area, buf);
    let (row, _) = app.editor.cursor();
    let h = usize::from(inner.height.max(1));
    let first = row.saturating_sub(h - 1);
    let lines: Vec<Line<'_>> = app
        .editor
        .lines()
        .iter()
        .skip(first)
        .take(h)
        .map(|l| Line::raw(l.as_str()))
        .collect();
    Paragraph::new(lines).render(inner, buf);
}

/// Where the terminal cursor goes (inside the editor).
pub fn cursor_position(app: &App, area: Rect) -> Option<(u16, u16)> {
    let a = areas(app, area);
    let popup = app
        .completion
        .as_ref()
        .map(|c| c.items.len().min(8) as u16)
        .unwrap_or(0);
    let inner_y = a.bottom.y + popup + 1;
    let h = a.bottom.height.saturating_sub(popup + 2).max(1);
    let (row, col) = app.editor.cursor();
    let first = row.saturating_sub(usize::from(h) - 1);
    let line = app.editor.lines().get(row)?;
    let before: String = line.chars().take(col).collect();
    let x = unicode_width::UnicodeWidthStr::width(before.as_str()) as u16;
    Some((
        a.bottom.x + x.min(a.bottom.width.saturating_sub(1)),
        inner_y + (row - first) as u16,
    ))
}

fn human(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else if n < 10_000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else if n < 1_000_000 {
        format!("{}k", n / 1000)
    } else {
        format!("{:.1}M", n as f64 / 1_000_000.0)
    }
}

fn draw_footer(app: &App, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let f = &app.footer;
    let home = std::env::var("HOME").unwrap_or_default();
    let mut cwd = if !home.is_empty() && f.cwd.starts_with(&home) {
        format!("~{}", &f.cwd[home.len()..])
    } else {
        f.cwd.clone()
    };
    if let Some(b) = &f.git_branch {
        cwd.push_str(&format!(" ({b})"));
    }
    if let Some(n) = &f.session_name {
        cwd.push_str(&format!(" • {n}"));
    }
    let t = &f.totals;
    let mut stats = Vec::new();
    if t.input > 0 {
        stats.push(format!("↑{}", human(t.input)));
    }
    if t.output > 0 {
        stats.push(format!("↓{}", human(t.output)));
    }
    if t.cache_read > 0 {
        stats.push(format!("R{}", human(t.cache_read)));
    }
    if t.cache_write > 0 {
        stats.push(format!("W{}", human(t.cache_write)));
    }
    if t.cost > 0.0 {
        stats.push(format!("${:.3}", t.cost));
    }
    let window = context_window(app);
    if window > 0 {
        let pct = f.context_tokens as f64 * 100.0 / window as f64;
        let auto = if f.auto_compact { " (auto)" } else { "" };
        stats.push(format!("{pct:.1}%/{}{auto}", human(window)));
    }
    let left = stats.join(" ");
    let right = model_label(app);
    let width = usize::from(area.width);
    let gap = width
        .saturating_sub(left.chars().count() + right.chars().count())
        .max(1);
    let lines = vec![
        Line::styled(truncate(&cwd, width), theme.fg(theme.dim)),
        Line::styled(
            truncate(&format!("{left}{}{right}", " ".repeat(gap)), width),
            theme.fg(theme.dim),
        ),
    ];
    Paragraph::new(lines).render(area, buf);
}

/// The footer's model: `id • level`; for a virtual model followed by the physical model
/// that answered last, as Pi shows it (`auto • high → gpt-5.6-luna • medium`).
fn model_label(app: &App) -> String {
    let Some(m) = &app.model else {
        return "no model".to_string();
    };
    let mut label = if m.reasoning {
        format!("{} • {}", m.id, app.thinking.as_str())
    } else {
        m.id.clone()
    };
    if let Some(d) = app.footer.dispatched.as_ref().filter(|_| m.is_virtual) {
        label.push_str(&format!(" → {}", d.model));
        if let Some(level) = d.thinking.as_deref().filter(|l| *l != "off") {
            label.push_str(&format!(" • {level}"));
        }
    }
    label
}

/// The context window the usage percentage is of: for a virtual model, that of the
/// physical model of the latest response (its own declared one before any; 0 = unknown).
fn context_window(app: &App) -> u64 {
    let Some(m) = &app.model else {
        return 0;
    };
    if !m.is_virtual {
        return m.context_window;
    }
    app.footer
        .dispatched
        .as_ref()
        .and_then(|d| {
            app.models
                .iter()
                .find(|x| x.provider == d.provider && x.id == d.model)
        })
        .map_or(m.context_window, |physical| physical.context_window)
}

/// Cuts to `width` characters, ending in `…`; control characters are shown (`^[`) first.
fn truncate(s: &str, width: usize) -> String {
    let s = visible_line(s);
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn dialog_block<'a>(theme: &Theme, title: &'a str) -> Block<'a> {
    Block::default()
        .borders(Borders::TOP | Borders::BOTTOM)
        .border_style(theme.fg(theme.border))
        .title(Span::styled(format!(" {title} "), theme.bold(theme.accent)))
}

/// Scrolls a list so `selected` stays visible; returns the first visible index.
fn window_start(selected: usize, len: usize, height: usize) -> usize {
    if height == 0 || len <= height {
        return 0;
    }
    selected.saturating_sub(height / 2).min(len - height)
}

fn select_line<'a>(theme: &Theme, selected: bool, spans: Vec<Span<'a>>) -> Line<'a> {
    let mut all = vec![Span::styled(
        if selected { "→ " } else { "  " },
        theme.fg(theme.accent),
    )];
    all.extend(spans);
    let line = Line::from(all);
    if selected {
        line.style(Style::default().bg(theme.selected_bg))
    } else {
        line
    }
}

fn draw_dialog(app: &App, d: &Dialog, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    Clear.render(area, buf);
    match d {
        Dialog::Hotkeys(scroll) => {
            let block = dialog_block(theme, "Keyboard shortcuts");
            let inner = block.inner(area);
            block.render(area, buf);
            let fits = usize::from(inner.height);
            let start = (*scroll).min(HOTKEYS.len().saturating_sub(fits));
            let lines: Vec<Line<'_>> = HOTKEYS
                .iter()
                .skip(start)
                .map(|(id, what)| {
                    Line::from(vec![
                        Span::styled(format!("{:<16}", app.keys.hint(id)), theme.fg(theme.accent)),
                        Span::raw(*what),
                    ])
                })
                .collect();
            Paragraph::new(lines).render(inner, buf);
        }
        Dialog::ModelPicker(p) => {
            let block = dialog_block(theme, "Select model");
            let inner = block.inner(area);
            block.render(area, buf);
            let list = p.filtered();
            let status_rows = if p.refresh_status.is_some() { 2 } else { 0 };
            let h = usize::from(inner.height.saturating_sub(2 + status_rows));
            let start = window_start(p.selected, list.len(), h);
            let mut lines = vec![
                Line::from(vec![
                    Span::styled("Search: ", theme.fg(theme.dim)),
                    Span::raw(p.query.as_str()),
                ]),
                Line::default(),
            ];
            for (i, m) in list.iter().enumerate().skip(start).take(h) {
                let current = p.current.as_deref() == Some(m.key().as_str());
                let mut spans = vec![
                    Span::raw(m.id.clone()),
                    Span::styled(format!(" [{}]", m.provider), theme.fg(theme.dim)),
                ];
                if current {
                    spans.push(Span::styled(" ✓", theme.fg(theme.success)));
                }
                lines.push(select_line(theme, i == p.selected, spans));
            }
            if list.is_empty() {
                lines.push(Line::styled("  No matching models", theme.fg(theme.dim)));
            }
            if let Some(status) = &p.refresh_status {
                lines.push(Line::default());
                let color = match status {
                    RefreshStatus::Running => theme.muted,
                    RefreshStatus::Refreshed => theme.success,
                    RefreshStatus::Failed(_) => theme.error,
                };
                lines.push(Line::styled(
                    format!("  {}", status.text()),
                    theme.fg(color),
                ));
            }
            paint_lines(lines, inner, buf);
        }
        Dialog::ScopedModels(s) => {
            let block = dialog_block(theme, "Scoped models (space toggles, ctrl+s saves)");
            let inner = block.inner(area);
            block.render(area, buf);
            let h = usize::from(inner.height);
            let start = window_start(s.selected, s.models.len(), h);
            let lines = s
                .models
                .iter()
                .zip(&s.enabled)
                .enumerate()
                .skip(start)
                .take(h)
                .map(|(i, (m, on))| {
                    select_line(
                        theme,
                        i == s.selected,
                        vec![Span::raw(format!(
                            "[{}] {}",
                            if *on { "x" } else { " " },
                            m.key()
                        ))],
                    )
                })
                .collect();
            paint_lines(lines, inner, buf);
        }
        Dialog::Settings(s) => {
            let block = dialog_block(theme, "Settings");
            let inner = block.inner(area);
            block.render(area, buf);
            // A short screen shows a window that follows the selection.
            let rows = usize::from(inner.height);
            let start = window_start(s.selected, s.items.len(), rows);
            let lines = s
                .items
                .iter()
                .enumerate()
                .skip(start)
                .take(rows)
                .map(|(i, it)| {
                    let v = it.options.get(it.value).map(String::as_str).unwrap_or("");
                    select_line(
                        theme,
                        i == s.selected,
                        vec![
                            Span::raw(format!("{:<28}", it.label)),
                            Span::styled(v.to_string(), theme.fg(theme.accent)),
                        ],
                    )
                })
                .collect();
            paint_lines(lines, inner, buf);
        }
        Dialog::Fork(f) => draw_fork(app, f, area, buf),
        Dialog::Confirm(c) => draw_confirm(theme, c, area, buf),
        Dialog::Extension(d) => draw_confirm(theme, &d.view(), area, buf),
        Dialog::Login(d) => draw_confirm(theme, &d.view(), area, buf),
        Dialog::Resume(r) => draw_resume(app, r, area, buf),
        Dialog::Tree(t) => draw_tree(app, t, area, buf),
        Dialog::BranchPrompt(b) => {
            let block = dialog_block(theme, "Summarize the branch you are leaving?");
            let inner = block.inner(area);
            block.render(area, buf);
            let mut lines: Vec<Line<'_>> = BRANCH_OPTIONS
                .iter()
                .enumerate()
                .map(|(i, o)| select_line(theme, i == b.selected, vec![Span::raw(*o)]))
                .collect();
            if let Some(f) = &b.focus {
                lines.push(Line::default());
                lines.push(Line::from(vec![
                    Span::styled("Focus: ", theme.fg(theme.dim)),
                    Span::raw(f.as_str()),
                    Span::styled("█", theme.fg(theme.accent)),
                ]));
            }
            paint_lines(lines, inner, buf);
        }
    }
}

fn paint_lines(lines: Vec<Line<'_>>, area: Rect, buf: &mut Buffer) {
    for (i, mut line) in lines.into_iter().enumerate().take(usize::from(area.height)) {
        // `set_line` would drop control characters silently; show them instead.
        for span in &mut line.spans {
            if let std::borrow::Cow::Owned(text) = visible_line(&span.content) {
                span.content = text.into();
            }
        }
        let y = area.y + i as u16;
        buf.set_style(
            Rect {
                x: area.x,
                y,
                width: area.width,
                height: 1,
            },
            line.style,
        );
        buf.set_line(area.x, y, &line, area.width);
    }
}

fn age(now_ms: i64, then_ms: i64) -> String {
    let s = (now_ms - then_ms).max(0) / 1000;
    match s {
        0..=59 => "now".into(),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// /fork: each user message on one line, then "Message i of n", as Pi's selector shows them.
fn draw_fork(app: &App, f: &ForkPicker, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let block = dialog_block(theme, "Fork from Message");
    let inner = block.inner(area);
    block.render(area, buf);
    let mut lines: Vec<Line<'_>> = wrap_words(
        "Select a user message to copy the active path up to that point into a new session",
        usize::from(inner.width),
    )
    .into_iter()
    .map(|l| Line::styled(l, theme.fg(theme.dim)))
    .collect();
    lines.push(Line::default());
    let head = lines.len();
    let n = f.rows.len();
    // Three lines per message; one line at the bottom for the position when scrolled.
    let fits = (usize::from(inner.height).saturating_sub(head + 1) / 3).max(1);
    let start = window_start(f.selected, n, fits);
    let width = usize::from(inner.width).saturating_sub(2);
    for (i, row) in f.rows.iter().enumerate().skip(start).take(fits) {
        let text = row.text.replace('\n', " ");
        let selected = i == f.selected;
        let style = if selected {
            theme.bold(theme.accent)
        } else {
            Style::default()
        };
        lines.push(select_line(
            theme,
            selected,
            vec![Span::styled(truncate(text.trim(), width), style)],
        ));
        lines.push(Line::styled(
            format!("  Message {} of {n}", i + 1),
            theme.fg(theme.dim),
        ));
        lines.push(Line::default());
    }
    if start > 0 || start + fits < n {
        lines.push(Line::styled(
            format!("  ({}/{n})", f.selected + 1),
            theme.fg(theme.dim),
        ));
    }
    paint_lines(lines, inner, buf);
}

/// Breaks `text` at spaces into lines of at most `width` characters (a longer word gets a
/// line of its own and is cut when drawn).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let wanted = cur.chars().count() + usize::from(!cur.is_empty()) + word.chars().count();
        if !cur.is_empty() && wanted > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

fn draw_resume(app: &App, r: &ResumePicker, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    // Pi's session selector header: the scope in the title, then scope, name filter and
    // sort on one line.
    let title = match r.scope {
        ResumeScope::Current => "Resume Session (Current Folder)",
        ResumeScope::All => "Resume Session (All)",
    };
    let block = dialog_block(theme, title);
    let inner = block.inner(area);
    block.render(area, buf);
    let list = r.filtered();
    let (current, all) = match r.scope {
        ResumeScope::Current => ("◉ Current Folder", "○ All"),
        ResumeScope::All => ("○ Current Folder", "◉ All"),
    };
    let on = |active: bool| {
        if active {
            theme.fg(theme.accent)
        } else {
            theme.fg(theme.muted)
        }
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(current, on(r.scope == ResumeScope::Current)),
        Span::styled(" | ", theme.fg(theme.muted)),
        Span::styled(all, on(r.scope == ResumeScope::All)),
        Span::styled("  Name: ", theme.fg(theme.muted)),
        Span::styled(
            if r.named_only { "Named" } else { "All" },
            theme.fg(theme.accent),
        ),
        Span::styled("  Sort: ", theme.fg(theme.muted)),
        Span::styled(
            match r.sort {
                ResumeSort::Recent => "Recent",
                ResumeSort::Relevance => "Fuzzy",
            },
            theme.fg(theme.accent),
        ),
    ])];
    match &r.mode {
        ResumeMode::Rename(name) => lines.push(Line::from(vec![
            Span::styled("New name: ", theme.fg(theme.warning)),
            Span::raw(name.as_str()),
            Span::styled("█", theme.fg(theme.accent)),
        ])),
        ResumeMode::ConfirmDelete => lines.push(Line::styled(
            "Delete this session? (y/enter to confirm, any other key cancels)",
            theme.bold(theme.error),
        )),
        ResumeMode::Browse => match &r.error {
            Some(e) => lines.push(Line::styled(e.as_str(), theme.fg(theme.error))),
            None => {
                // Pi's two hint lines.
                lines.push(Line::styled(
                    "tab scope · \"phrase\" exact",
                    theme.fg(theme.dim),
                ));
                lines.push(Line::styled(
                    format!(
                        "ctrl+s sort · ctrl+n named · ctrl+d delete · ctrl+p path ({}) · ctrl+r rename",
                        if r.show_path { "on" } else { "off" }
                    ),
                    theme.fg(theme.dim),
                ));
            }
        },
    }
    lines.push(Line::from(vec![
        Span::styled("Search: ", theme.fg(theme.dim)),
        Span::raw(r.query.as_str()),
    ]));
    let h = usize::from(inner.height).saturating_sub(lines.len());
    let start = window_start(r.selected, list.len(), h);
    let width = usize::from(inner.width);
    for (i, row) in list.iter().enumerate().skip(start).take(h) {
        let meta = format!(
            " {} · {} msgs",
            age(r.now_ms, row.modified_ms),
            row.message_count
        );
        let title = ResumePicker::title_of(row)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let extra = if r.show_path {
            format!("  {}", row.location)
        } else {
            format!("  {}", row.cwd)
        };
        let budget = width.saturating_sub(meta.chars().count() + 2);
        let title_style = if row.name.is_some() {
            theme.bold(theme.accent)
        } else {
            Style::default()
        };
        let mut spans = vec![Span::styled(truncate(&title, budget.min(60)), title_style)];
        let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
        spans.push(Span::styled(
            truncate(&extra, budget.saturating_sub(used)),
            theme.fg(theme.dim),
        ));
        let used: usize = spans
            .iter()
            .map(|s| s.content.chars().count())
            .sum::<usize>()
            + 2;
        spans.push(Span::raw(
            " ".repeat(width.saturating_sub(used + meta.chars().count())),
        ));
        spans.push(Span::styled(meta, theme.fg(theme.dim)));
        lines.push(select_line(theme, i == r.selected, spans));
    }
    if list.is_empty() {
        // Pi's wording: the way out of an empty list.
        let empty = match (r.named_only, r.scope) {
            (true, ResumeScope::All) => "  No named sessions found. Press ctrl+n to show all.",
            (true, ResumeScope::Current) => {
                "  No named sessions in current folder. Press ctrl+n to show all, or Tab to view all."
            }
            (false, ResumeScope::All) => "  No sessions found",
            (false, ResumeScope::Current) => "  No sessions in current folder. Press Tab to view all.",
        };
        lines.push(Line::styled(empty, theme.fg(theme.dim)));
    }
    paint_lines(lines, inner, buf);
}

fn draw_tree(app: &App, t: &TreeNav, area: Rect, buf: &mut Buffer) {
    let theme = &app.theme;
    let title = format!("Session tree · filter: {}", t.filter.name());
    let block = dialog_block(theme, &title);
    let inner = block.inner(area);
    block.render(area, buf);
    let mut lines = Vec::new();
    let hint = match &t.label_edit {
        Some(l) => Line::from(vec![Span::styled("Label: ", theme.fg(theme.warning)), Span::raw(l.as_str()), Span::styled("█", theme.fg(theme.accent))]),
        None if !t.search.is_empty() => Line::from(vec![Span::styled("Search: ", theme.fg(theme.dim)), Span::raw(t.search.as_str()), Span::styled(" (escape clears)", theme.fg(theme.dim))]),
        None => Line::styled("↑↓ move · ←→ page · ctrl+←/→ fold · ctrl+o filter · shift+l label · shift+t label time · enter select", theme.fg(theme.dim)),
    };
    lines.push(hint);
    let h = usize::from(inner.height.saturating_sub(1));
    let start = window_start(t.selected, t.rows.len(), h);
    let width = usize::from(inner.width);
    for (i, row) in t.rows.iter().enumerate().skip(start).take(h) {
        let node = &t.nodes[row.node];
        let on_path = t.active.contains(&row.node);
        let (who, color) = match &node.kind {
            NodeKind::User => ("user: ", theme.accent),
            NodeKind::Assistant => ("assistant: ", theme.success),
            NodeKind::ToolResult => ("", theme.muted),
            NodeKind::Compaction | NodeKind::BranchSummary => ("", theme.warning),
            NodeKind::Meta(_) => ("", theme.dim),
        };
        let marker = if row.folded {
            "⊞ "
        } else if on_path {
            "• "
        } else {
            "  "
        };
        let mut spans = vec![
            Span::raw("  ".repeat(row.indent)),
            Span::styled(marker, theme.fg(theme.accent)),
        ];
        if let Some(l) = &node.label {
            let mut text = format!("[{l}");
            if t.show_label_time {
                if let Some(ts) = &node.label_time {
                    text.push_str(&format!(" {}", ts.get(..16).unwrap_or(ts)));
                }
            }
            text.push_str("] ");
            spans.push(Span::styled(text, theme.bold(theme.warning)));
        }
        spans.push(Span::styled(who, theme.fg(color)));
        let mut text_style = if on_path {
            Style::default()
        } else {
            theme.fg(theme.muted)
        };
        if t.leaf == Some(row.node) {
            text_style = text_style.add_modifier(Modifier::BOLD);
        }
        let used = line_width(&Line::from(spans.clone())) + 2;
        let suffix = if t.leaf == Some(row.node) {
            " ← active"
        } else {
            ""
        };
        let budget = width.saturating_sub(used + suffix.len());
        spans.push(Span::styled(truncate(&node.text, budget), text_style));
        if !suffix.is_empty() {
            spans.push(Span::styled(suffix, theme.fg(theme.accent)));
        }
        lines.push(select_line(theme, i == t.selected, spans));
    }
    if t.rows.is_empty() {
        lines.push(Line::styled(
            "  (no entries match this filter)",
            theme.fg(theme.dim),
        ));
    }
    paint_lines(lines, inner, buf);
}

/// Rows a [`Confirm`] needs at `width`: borders, the wrapped message and a blank line, the
/// options.
pub fn confirm_height(c: &Confirm, width: u16) -> u16 {
    let message = confirm_message(c, width).len();
    let gap = usize::from(message > 0);
    (2 + message + gap + c.options.len()) as u16
}

/// The message wrapped at spaces (blank lines kept).
fn confirm_message(c: &Confirm, width: u16) -> Vec<String> {
    let mut out = Vec::new();
    for line in c.message.lines() {
        if line.trim().is_empty() {
            out.push(String::new());
        } else {
            out.extend(wrap_words(line, usize::from(width.max(10))));
        }
    }
    out
}

/// A question with its answers (also the whole screen of the start-up trust prompt).
pub fn draw_confirm(theme: &Theme, c: &Confirm, area: Rect, buf: &mut Buffer) {
    let block = dialog_block(theme, &c.title);
    let inner = block.inner(area);
    block.render(area, buf);
    let mut lines: Vec<Line<'_>> = confirm_message(c, inner.width)
        .into_iter()
        .map(Line::raw)
        .collect();
    if !lines.is_empty() {
        lines.push(Line::default());
    }
    lines.extend(
        c.options
            .iter()
            .enumerate()
            .map(|(i, (o, _))| select_line(theme, i == c.selected, vec![Span::raw(o.as_str())])),
    );
    paint_lines(lines, inner, buf);
}
