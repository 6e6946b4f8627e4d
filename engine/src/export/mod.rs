//! Rendering a session for people: a self-contained HTML page of the whole tree, Markdown of
//! the active branch, and masking of secrets before either (or a JSONL export) leaves the
//! machine.
//!
//! Both renderers take a loaded [`crate::session::Session`] and return a `String`; they never
//! touch the file system, so the CLI (`pi sessions export`) and RPC mode (`export_html`) share
//! them. Session content is untrusted: a tool result can hold any bytes a web page could, so
//! the HTML renderer escapes every piece of it and the page runs no script at all (see
//! [`html`]).

pub mod html;
pub mod markdown;
pub mod redact;

mod content;
