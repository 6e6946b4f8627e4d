//! Turning the bytes of a session file into an indexed [`Session`].
//!
//! The rules are Pi 1.6's `loadEntriesFromFile` + `_loadEntries`: blank,
//! malformed and falsy lines are skipped (and reported here, never deleted),
//! the first parsed line must be a `session` header with a string `id`, and a
//! v1/v2 file is migrated in memory. Only the few fields the tree needs are read
//! from each line; payloads stay as bytes until something asks for them.

use super::{EntryRecord, Kind, Session};
use pi_formats::head::EntryHead;
use pi_formats::jsonl::{self, LineError};
use pi_formats::{header, migrate};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Why a file cannot be opened as a session.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Pi refuses the same files: the first parsed line is not a header with an id.
    #[error("session file is not a valid pi session: {path} ({reason})")]
    NotASession { path: PathBuf, reason: String },
}

/// What loading found besides the entries.
#[derive(Debug, Default, Clone)]
pub struct LoadReport {
    /// Lines Pi skips: malformed JSON, or a torn last line.
    pub skipped_lines: Vec<LineError>,
    /// The file did not end with a newline (Pi would append one on open; we never write).
    pub missing_final_newline: bool,
    /// The file was a v1/v2 session and was migrated in memory.
    pub migrated_from: Option<f64>,
    /// The file was empty: the session is a fresh one with a new header, as in Pi.
    pub was_empty: bool,
}

impl Session {
    /// Opens a session file read-only. The file is never written.
    pub fn open(path: &Path) -> Result<Session, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut session = Session::from_bytes(bytes, path)?;
        session.path = Some(path.to_path_buf());
        Ok(session)
    }

    /// Builds a session from a file's bytes; `path` only names the file in errors.
    pub fn from_bytes(bytes: Vec<u8>, path: &Path) -> Result<Session, LoadError> {
        let mut report = LoadReport::default();
        let mut session = Session::empty();
        let mut header_seen = false;
        let mut first_checked = false;
        for line in jsonl::lines(&bytes) {
            if line.is_blank() {
                continue;
            }
            let head = match EntryHead::parse(line.bytes) {
                Ok(head) => head,
                Err(reason) => {
                    report.skipped_lines.push(jsonl::line_error(&line, reason));
                    continue;
                }
            };
            if head.falsy {
                continue;
            }
            if !first_checked {
                first_checked = true;
                if !head.is_header() || head.id.is_none() {
                    let mut reason = format!(
                        "line {}: the first entry must be a \"session\" header with a string id",
                        line.number
                    );
                    if bytes.starts_with(b"\xef\xbb\xbf") {
                        reason.push_str(
                            "; line 1 starts with a UTF-8 byte order mark, which Pi does not accept",
                        );
                    } else if let Some(skipped) = report.skipped_lines.first() {
                        reason.push_str(&format!("; before it, {skipped}"));
                    }
                    return Err(LoadError::NotASession {
                        path: path.to_path_buf(),
                        reason,
                    });
                }
            }
            if head.is_header() {
                // Later header lines (Pi's old duplicate-header bug) are not entries.
                if !header_seen {
                    header_seen = true;
                    session.header_span = Some((line.start, line.bytes.len()));
                    session.header_line = line.number;
                }
                continue;
            }
            session.push_record(EntryRecord::from_head(
                &head,
                line.number,
                line.start,
                line.bytes.len(),
            ));
        }
        if let Some(last) = bytes.last() {
            report.missing_final_newline = *last != b'\n';
        }
        if !first_checked {
            if !bytes.is_empty() {
                return Err(LoadError::NotASession {
                    path: path.to_path_buf(),
                    reason: "no parsable line".into(),
                });
            }
            report.was_empty = true;
        }
        session.text = bytes;
        if let Some(header) = session.header() {
            let version = header::version_of(&header);
            if version < header::CURRENT_VERSION as f64 {
                session = session.migrated(path)?;
                report.migrated_from = Some(version);
            }
        }
        session.report = report;
        session.rebuild_index();
        Ok(session)
    }

    /// Re-reads every parsed line as a value, migrates them like Pi, and
    /// re-lays the session over the migrated lines (the original bytes are untouched).
    fn migrated(self, path: &Path) -> Result<Session, LoadError> {
        let mut values: Vec<Value> = Vec::with_capacity(self.entries.len() + 1);
        let mut lines: Vec<u64> = Vec::with_capacity(self.entries.len() + 1);
        // Migration indexes (`firstKeptEntryIndex`) count parsed lines with the header at 0,
        // so every parsed line takes part, duplicate headers included.
        for line in jsonl::lines(&self.text) {
            if line.is_blank() {
                continue;
            }
            if let Ok(value) = jsonl::parse_value(line.bytes) {
                if !pi_formats::head::is_js_falsy(&value) {
                    values.push(value);
                    lines.push(line.number);
                }
            }
        }
        let mut taken = std::collections::HashSet::new();
        migrate::migrate(&mut values, || {
            // Pi does not collision-check migration ids; we do, it costs nothing.
            let id = pi_formats::id::entry_id(|id| taken.contains(id));
            taken.insert(id.clone());
            id
        });
        let mut text = Vec::new();
        let mut session = Session::empty();
        for (value, line_no) in values.iter().zip(lines) {
            let start = text.len();
            serde_json::to_writer(&mut text, value).expect("value serializes");
            let len = text.len() - start;
            text.push(b'\n');
            let head = EntryHead::from_value(value);
            if head.is_header() {
                if session.header_span.is_none() {
                    session.header_span = Some((start, len));
                    session.header_line = line_no;
                }
                continue;
            }
            session.push_record(EntryRecord::from_head(&head, line_no, start, len));
        }
        if session.header_span.is_none() {
            return Err(LoadError::NotASession {
                path: path.to_path_buf(),
                reason: "no header after migration".into(),
            });
        }
        session.text = text;
        Ok(session)
    }
}

impl EntryRecord {
    pub(crate) fn from_head(head: &EntryHead<'_>, line: u64, start: usize, len: usize) -> Self {
        EntryRecord {
            id: head.id.as_deref().map(Into::into),
            parent: match &head.parent {
                pi_formats::ParentRef::Null => super::Parent::Root,
                pi_formats::ParentRef::Id(id) => super::Parent::Id(id.as_ref().into()),
                pi_formats::ParentRef::Missing => super::Parent::Missing,
                pi_formats::ParentRef::Other => super::Parent::Other,
            },
            kind: Kind::from_str(head.kind.as_deref()),
            role: head.role.as_deref().map(Into::into),
            timestamp: head.timestamp.as_deref().map(Into::into),
            target_id: head.target_id.as_deref().map(Into::into),
            label: head.label.as_deref().map(Into::into),
            name: head.name.as_deref().map(Into::into),
            line,
            start,
            len,
        }
    }
}
