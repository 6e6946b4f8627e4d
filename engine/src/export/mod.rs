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

pub mod html;
pub mod markdown;
pub mod redact;

mod content;

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
    match format {
        Format::Jsonl => session.to_jsonl(),
        Format::Html => html::render(session).into_bytes(),
        Format::Markdown => markdown::render(session).into_bytes(),
    }
}
