//! Rendering a session for people: a self-contained HTML page of the whole tree, Markdown of
//! the active branch, and masking of secrets before either (or a JSONL export) leaves the
//! machine.
//!
//! [`render`] is the one entry point: `pi sessions export`, `pi --export`, the TUI's
//! `/export` and RPC mode's `export_html` all call it, so they produce the same bytes for the
//! same session. It never touches the file system. Session content is untrusted: a tool
//! result can hold any bytes a web page could, so the HTML page keeps the session in an
//! inert data block and runs only its own, hash-pinned script (see [`html`]), and the
//! Markdown escapes HTML in text (see [`markdown`]).

pub mod claude_code;
pub mod codex;
pub mod html;
pub mod markdown;
pub mod redact;

mod content;
mod ids;

use crate::session::Session;

/// What an export is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The session's lines (header and indexed entries).
    Jsonl,
    /// One self-contained page: the whole tree, search, filters and totals.
    Html,
    /// The active branch as Markdown.
    Markdown,
    /// The active branch as a Claude Code transcript (see [`claude_code`]).
    ClaudeCode,
    /// The active branch as a Codex rollout (see [`codex`]).
    Codex,
}

impl Format {
    /// The format a file name asks for, as `/export FILE` reads it: `.jsonl`, `.md`, else HTML.
    pub fn for_path(path: &std::path::Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => Format::Jsonl,
            Some("md") => Format::Markdown,
            _ => Format::Html,
        }
    }
}

/// Renders `session` as `format`.
pub fn render(session: &Session, format: Format) -> Vec<u8> {
    in_memory(|out| render_to(session, format, out))
}

/// What a writer-driven renderer produces, collected in memory. The renderers fail only
/// when their writer does, and writing to a `Vec` does not fail.
pub(crate) fn in_memory(render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = render(&mut out);
    out
}

/// Writes `session` as `format` to `out` as it is rendered: the same bytes as [`render`],
/// without holding them (a page or document as large as the session).
pub fn render_to(
    session: &Session,
    format: Format,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match format {
        Format::Jsonl => session.write_jsonl(out),
        Format::Html => html::render_to(session, out),
        Format::Markdown => markdown::render_to(session, out),
        Format::ClaudeCode => claude_code::render_to(session, out),
        Format::Codex => codex::render_to(session, out),
    }
}
