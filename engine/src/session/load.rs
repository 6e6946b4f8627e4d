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
        for chunk in scan_lines(&bytes) {
            for (line, scanned) in chunk {
                let record = match scanned {
                    Scanned::Blank | Scanned::Falsy => continue,
                    Scanned::Unreadable(reason) => {
                        report.skipped_lines.push(jsonl::line_error(&line, reason));
                        continue;
                    }
                    Scanned::Header { has_id } => {
                        first_checked = true;
                        if !has_id && !header_seen {
                            return Err(not_a_session(path, &bytes, &line, &report));
                        }
                        // Later header lines (Pi's old duplicate-header bug) are not entries.
                        if !header_seen {
                            header_seen = true;
                            session.header_span = Some((line.start, line.bytes.len()));
                            session.header_line = line.number;
                        }
                        continue;
                    }
                    Scanned::Entry(record) => record,
                };
                if !first_checked {
                    return Err(not_a_session(path, &bytes, &line, &report));
                }
                session.push_record(record);
            }
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
            if let Ok(Some(value)) = jsonl::parse_truthy(line.bytes) {
                values.push(value);
                lines.push(line.number);
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

/// What one physical line turned out to be.
enum Scanned {
    Blank,
    /// Valid JSON but falsy (`null`, `0`, …): Pi's loader drops it.
    Falsy,
    Unreadable(String),
    Header {
        has_id: bool,
    },
    Entry(EntryRecord),
}

fn scan_line(line: &jsonl::Line<'_>) -> Scanned {
    if line.is_blank() {
        return Scanned::Blank;
    }
    match EntryHead::parse(line.bytes) {
        Err(reason) => Scanned::Unreadable(reason),
        Ok(head) if head.falsy => Scanned::Falsy,
        Ok(head) if head.is_header() => Scanned::Header {
            has_id: head.id.is_some(),
        },
        Ok(head) => Scanned::Entry(EntryRecord::from_head(
            &head,
            line.number,
            line.start,
            line.bytes.len(),
        )),
    }
}

fn scan_chunk(
    chunk_start: usize,
    chunk: &[u8],
    first_line: u64,
) -> Vec<(jsonl::Line<'_>, Scanned)> {
    jsonl::lines(chunk)
        .map(|mut line| {
            line.start += chunk_start;
            line.number += first_line;
            let scanned = scan_line(&line);
            (line, scanned)
        })
        .collect()
}

/// Files above this size are scanned on every core.
const PARALLEL_SCAN_BYTES: usize = 4 << 20;

/// Scans every line, in parallel chunks for large files. Chunks split at line
/// boundaries and come back in file order with global line numbers; the cheap,
/// order-dependent decisions (header rules, leaf, labels) stay sequential.
fn scan_lines(bytes: &[u8]) -> Vec<Vec<(jsonl::Line<'_>, Scanned)>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if bytes.len() < PARALLEL_SCAN_BYTES || threads < 2 {
        return vec![scan_chunk(0, bytes, 0)];
    }
    let mut bounds = vec![0usize];
    for i in 1..threads {
        let guess = (bytes.len() / threads * i).max(*bounds.last().unwrap());
        let cut = memchr::memchr(b'\n', &bytes[guess..]).map_or(bytes.len(), |n| guess + n + 1);
        bounds.push(cut);
    }
    bounds.push(bytes.len());
    bounds.dedup();
    // Line numbers of each chunk start after the newlines before it.
    let mut first_lines = vec![0u64];
    for w in bounds.windows(2).take(bounds.len().saturating_sub(2)) {
        let newlines = memchr::memchr_iter(b'\n', &bytes[w[0]..w[1]]).count() as u64;
        first_lines.push(first_lines.last().unwrap() + newlines);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = bounds
            .windows(2)
            .zip(&first_lines)
            .map(|(w, &first)| {
                let (start, end) = (w[0], w[1]);
                scope.spawn(move || scan_chunk(start, &bytes[start..end], first))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("line scanner does not panic"))
            .collect()
    })
}

fn not_a_session(
    path: &Path,
    bytes: &[u8],
    line: &jsonl::Line<'_>,
    report: &LoadReport,
) -> LoadError {
    let mut reason = format!(
        "line {}: the first entry must be a \"session\" header with a string id",
        line.number
    );
    if bytes.starts_with(b"\xef\xbb\xbf") {
        reason.push_str("; line 1 starts with a UTF-8 byte order mark, which Pi does not accept");
    } else if let Some(skipped) = report.skipped_lines.first() {
        reason.push_str(&format!("; before it, {skipped}"));
    }
    LoadError::NotASession {
        path: path.to_path_buf(),
        reason,
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
            kind: Kind::parse(head.kind.as_deref()),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel scan gives exactly the sequential result: same lines, numbers, spans.
    #[test]
    fn parallel_scan_equals_sequential() {
        let mut text = String::from("{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n");
        let mut n = 0;
        while text.len() < PARALLEL_SCAN_BYTES * 2 {
            n += 1;
            text.push_str(&format!(
                "{{\"type\":\"message\",\"id\":\"{n:08x}\",\"parentId\":null,\"message\":{{\"role\":\"user\",\"content\":\"{}\"}}}}\n",
                "x".repeat(n % 300)
            ));
            if n % 997 == 0 {
                text.push_str("{not json\n\n   \r\n");
            }
        }
        text.push_str("{\"type\":\"message\",\"id\":\"torn");
        let bytes = text.into_bytes();
        let flatten =
            |chunks: Vec<Vec<(jsonl::Line<'_>, Scanned)>>| -> Vec<(u64, usize, usize, String)> {
                chunks
                    .into_iter()
                    .flatten()
                    .map(|(l, s)| {
                        let what = match s {
                            Scanned::Blank => "blank".to_string(),
                            Scanned::Falsy => "falsy".into(),
                            Scanned::Unreadable(r) => format!("bad {r}"),
                            Scanned::Header { has_id } => format!("header {has_id}"),
                            Scanned::Entry(r) => format!("entry {:?} {}", r.id, r.line),
                        };
                        (l.number, l.start, l.bytes.len(), what)
                    })
                    .collect()
            };
        let parallel = scan_lines(&bytes);
        assert!(
            parallel.len() > 1 || std::thread::available_parallelism().map_or(1, |n| n.get()) < 2
        );
        assert_eq!(flatten(parallel), flatten(vec![scan_chunk(0, &bytes, 0)]));
        let session = Session::from_bytes(bytes, Path::new("big.jsonl")).unwrap();
        assert_eq!(session.entries().len(), n);
        assert!(matches!(
            session.load_report().skipped_lines.last().unwrap().kind,
            pi_formats::jsonl::LineErrorKind::Torn(_)
        ));
    }
}
