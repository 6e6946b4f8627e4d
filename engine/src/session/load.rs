//! Turning the bytes of a session file into an indexed [`Session`].
//!
//! The rules are Pi 1.6's `loadEntriesFromFile` + `_loadEntries`: blank,
//! malformed and falsy lines are skipped (and reported here, never deleted),
//! the first parsed line must be a `session` header with a string `id`, and a
//! v1/v2 file is migrated in memory. Only the few fields the tree needs are read
//! from each line; payloads stay as bytes until something asks for them.

use super::text::Text;
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
    /// Opens a session file read-only, scanning every line (no cache). The file is
    /// never written. [`Session::open_cached`] does the same with a head cache.
    pub fn open(path: &Path) -> Result<Session, LoadError> {
        let (file, meta) = open_file(path)?;
        let text = Text::from_file(&file, meta.len()).map_err(|source| io_error(path, source))?;
        let mut session = Session::from_text(text, path)?;
        session.path = Some(path.to_path_buf());
        Ok(session)
    }

    /// Builds a session from a file's bytes; `path` only names the file in errors.
    pub fn from_bytes(bytes: Vec<u8>, path: &Path) -> Result<Session, LoadError> {
        Session::from_text(Text::owned(bytes), path)
    }

    /// The cold open: every line scanned and validated as `JSON.parse` would.
    pub(super) fn from_text(text: Text, path: &Path) -> Result<Session, LoadError> {
        let mut loader = Loader::fresh();
        loader.scan(&text, 0, 0, path)?;
        loader.finish(text, path)
    }
}

/// The order-dependent part of loading (header rules, skipped lines), fed line by
/// line in file order. A warm open resumes it from cached state to read a tail.
pub(super) struct Loader {
    pub(super) session: Session,
    pub(super) report: LoadReport,
    /// LFs scanned so far (the number of the last terminated line).
    pub(super) newlines: u64,
    header_seen: bool,
    first_checked: bool,
}

impl Loader {
    pub(super) fn fresh() -> Loader {
        Loader {
            session: Session::empty(),
            report: LoadReport::default(),
            newlines: 0,
            header_seen: false,
            first_checked: false,
        }
    }

    /// Continues after a prefix whose header has been seen (the cached state).
    pub(super) fn resumed(session: Session, report: LoadReport) -> Loader {
        Loader {
            session,
            report,
            newlines: 0,
            header_seen: true,
            first_checked: true,
        }
    }

    /// Scans `text.base()[from..]`, whose first line is line `lines_before + 1`.
    pub(super) fn scan(
        &mut self,
        text: &Text,
        from: usize,
        lines_before: u64,
        path: &Path,
    ) -> Result<(), LoadError> {
        let bytes = text.base();
        let mut first_line = lines_before;
        for chunk in scan_lines(text, from) {
            let newlines = chunk.newlines;
            for (mut line, scanned) in chunk.lines {
                line.number += first_line;
                self.feed(line, scanned, bytes, path)?;
            }
            first_line += newlines;
        }
        self.newlines = first_line;
        Ok(())
    }

    fn feed(
        &mut self,
        line: jsonl::Line<'_>,
        scanned: Scanned,
        bytes: &[u8],
        path: &Path,
    ) -> Result<(), LoadError> {
        let record = match scanned {
            Scanned::Blank | Scanned::Falsy => return Ok(()),
            Scanned::Unreadable(reason) => {
                self.report
                    .skipped_lines
                    .push(jsonl::line_error(&line, reason));
                return Ok(());
            }
            Scanned::Header { has_id } => {
                self.first_checked = true;
                if !has_id && !self.header_seen {
                    return Err(not_a_session(path, bytes, &line, &self.report));
                }
                // Later header lines (Pi's old duplicate-header bug) are not entries.
                if !self.header_seen {
                    self.header_seen = true;
                    self.session.header_span = Some((line.start, line.bytes.len()));
                    self.session.header_line = line.number;
                }
                return Ok(());
            }
            Scanned::Entry(mut record) => {
                record.line = line.number;
                record
            }
        };
        if !self.first_checked {
            return Err(not_a_session(path, bytes, &line, &self.report));
        }
        self.session.push_record(record);
        Ok(())
    }

    pub(super) fn finish(self, text: Text, path: &Path) -> Result<Session, LoadError> {
        let Loader {
            mut session,
            mut report,
            first_checked,
            ..
        } = self;
        let bytes = text.base();
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
        session.text = text;
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
}

pub(super) fn open_file(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), LoadError> {
    let file = std::fs::File::open(path).map_err(|source| io_error(path, source))?;
    let meta = file.metadata().map_err(|source| io_error(path, source))?;
    Ok((file, meta))
}

pub(super) fn io_error(path: &Path, source: std::io::Error) -> LoadError {
    LoadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Session {
    /// Re-reads every parsed line as a value, migrates them like Pi, and
    /// re-lays the session over the migrated lines (the original bytes are untouched).
    fn migrated(self, path: &Path) -> Result<Session, LoadError> {
        let mut values: Vec<Value> = Vec::with_capacity(self.entries.len() + 1);
        let mut lines: Vec<u64> = Vec::with_capacity(self.entries.len() + 1);
        // Migration indexes (`firstKeptEntryIndex`) count parsed lines with the header at 0,
        // so every parsed line takes part, duplicate headers included.
        for line in jsonl::lines(self.text.base()) {
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
            // A `Value` always prints (its keys are strings).
            text.extend_from_slice(value.to_string().as_bytes());
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
        session.text = Text::owned(text);
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

/// The lines of one chunk, numbered from 1 within the chunk, and how many LFs it holds.
struct ScannedChunk<'a> {
    lines: Vec<(jsonl::Line<'a>, Scanned)>,
    newlines: u64,
}

fn scan_chunk(chunk_start: usize, chunk: &[u8]) -> ScannedChunk<'_> {
    let mut newlines = 0;
    let lines = jsonl::lines(chunk)
        .map(|mut line| {
            line.start += chunk_start;
            newlines += u64::from(line.terminated);
            let scanned = scan_line(&line);
            (line, scanned)
        })
        .collect();
    ScannedChunk { lines, newlines }
}

/// Files above this size are scanned on every core.
const PARALLEL_SCAN_BYTES: usize = 4 << 20;

/// Work unit of the scan; each is released from the resident set once scanned.
const CHUNK_BYTES: usize = 8 << 20;

/// Scans every line from `from`, in chunks split at line boundaries, on every core
/// for large files. Chunks come back in file order; line numbers are relative to
/// each chunk (the caller adds the LFs before it), and the cheap, order-dependent
/// decisions (header rules, leaf, labels) stay sequential. A mapped chunk's pages
/// are released once scanned, so the resident set stays near the chunk size.
fn scan_lines(text: &Text, from: usize) -> Vec<ScannedChunk<'_>> {
    let bytes = text.base();
    let mut bounds = vec![from];
    while let Some(&last) = bounds.last() {
        if last >= bytes.len() {
            break;
        }
        let guess = last + CHUNK_BYTES;
        let cut = if guess >= bytes.len() {
            bytes.len()
        } else {
            memchr::memchr(b'\n', &bytes[guess..]).map_or(bytes.len(), |n| guess + n + 1)
        };
        bounds.push(cut);
    }
    if bounds.len() == 1 {
        bounds.push(from);
    }
    let ranges: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let scan = |&(start, end): &(usize, usize)| {
        let chunk = scan_chunk(start, &bytes[start..end]);
        text.release(start, end - start);
        chunk
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
        .min(ranges.len());
    if bytes.len() - from < PARALLEL_SCAN_BYTES || threads < 2 {
        return ranges.iter().map(scan).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<ScannedChunk<'_>>>> =
        ranges.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(range) = ranges.get(i) else { break };
                let chunk = scan(range);
                *slots[i]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(chunk);
            });
        }
    });
    // `scope` has joined every thread (and carried on any panic), so each slot is filled;
    // a chunk that is not is scanned here rather than trusted.
    slots
        .into_iter()
        .zip(&ranges)
        .map(|(slot, range)| {
            slot.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .unwrap_or_else(|| scan(range))
        })
        .collect()
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
        while text.len() < CHUNK_BYTES * 2 + 1000 {
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
        let flatten = |chunks: Vec<ScannedChunk<'_>>| -> Vec<(u64, usize, usize, String)> {
            let mut before = 0;
            let mut out = Vec::new();
            for chunk in chunks {
                for (l, s) in chunk.lines {
                    let what = match s {
                        Scanned::Blank => "blank".to_string(),
                        Scanned::Falsy => "falsy".into(),
                        Scanned::Unreadable(r) => format!("bad {r}"),
                        Scanned::Header { has_id } => format!("header {has_id}"),
                        Scanned::Entry(r) => format!("entry {:?}", r.id),
                    };
                    out.push((l.number + before, l.start, l.bytes.len(), what));
                }
                before += chunk.newlines;
            }
            out
        };
        let text = Text::owned(bytes.clone());
        let parallel = scan_lines(&text, 0);
        assert!(parallel.len() > 1);
        let whole = vec![scan_chunk(0, &bytes)];
        assert_eq!(flatten(parallel), flatten(whole));
        let session = Session::from_bytes(bytes, Path::new("big.jsonl")).unwrap();
        assert_eq!(session.entries().len(), n);
        assert!(matches!(
            session.load_report().skipped_lines.last().unwrap().kind,
            pi_formats::jsonl::LineErrorKind::Torn(_)
        ));
    }
}
