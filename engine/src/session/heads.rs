//! A persisted index of a session file's entry heads, so that opening a large
//! session does not scan it again.
//!
//! A cold open ([`Session::open`]) reads every line and validates it as
//! `JSON.parse` would, because a line Pi skips must be skipped here too. That
//! pass runs at about 1 GB/s per core; for a 100 MB session it is most of the
//! open. Its result is small: per entry the head fields (type, id, parentId,
//! role, timestamp, label target and text, session name) and the byte range of
//! the line, plus the header's range and the skipped lines. [`HeadCache`] writes
//! exactly that state to a file and [`Session::open_cached`] restores it, so a
//! warm open reads the cache file, maps the session, and touches only the lines
//! something asks for (the active path; after a compaction, only the kept part).
//!
//! The cache is derived data and never a source of truth:
//!
//! * it lives outside the session directory (`<agentDir>/cache/session-heads/`,
//!   one file per session, named by a hash of the session's canonical path), and
//!   nothing is ever written into the session file;
//! * it is written to a temporary file and renamed into place, and carries a
//!   checksum of its own bytes: a torn, truncated or corrupt cache file fails the
//!   checksum and is ignored (then rewritten);
//! * it is used only when the session file is the one it describes: same inode
//!   and device, and the same bytes at the start (first 4 KB), just before the end
//!   of the last complete line (4 KB), and at the end (last 4 KB). If, in
//!   addition, the size and modification time are unchanged, the cached state is
//!   the file's state. If the file only grew, the cached state is kept up to the
//!   end of its last complete line and only the new tail is scanned (the last
//!   line may have been a torn write that the append completed). Anything else —
//!   shorter, same size but another mtime, other bytes, another inode — is a full
//!   rescan. A rewrite that keeps the size, the mtime (to the nanosecond), the
//!   inode and all three sampled ranges while changing bytes in between is not
//!   detected; no writer of session files does that.
//! * a cache that cannot be read or written (a read-only or missing directory)
//!   only costs the scan: errors are ignored and the open proceeds cold.
//!
//! Migrated (v1/v2) and empty files are not cached: their in-memory text is not
//! the file's bytes.

use super::load::{io_error, open_file, Loader};
use super::text::Text;
use super::{EntryRecord, Kind, LoadError, LoadReport, Parent, Session};
use pi_formats::jsonl::{LineError, LineErrorKind};
use std::path::{Path, PathBuf};

/// Bumped whenever the file layout or what a cold scan records changes.
const FORMAT: &[u8; 8] = b"PIHEADS3";

/// How many bytes each sampled range covers.
const SAMPLE: usize = 4096;

/// Where the head index of each session file is kept, and from what size on.
#[derive(Debug, Clone)]
pub struct HeadCache {
    dir: PathBuf,
    min_bytes: u64,
}

/// How [`Session::open_cached`] produced the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenedFrom {
    /// Every line was scanned (no usable cache, or the file is below the size limit).
    Scan,
    /// The cached heads describe the file as it is.
    Cache,
    /// The file grew since it was cached: the cached heads plus a scan of the tail.
    CacheAndTail,
}

impl HeadCache {
    /// Files smaller than this open faster by scanning than by reading a cache file.
    pub const DEFAULT_MIN_BYTES: u64 = 1 << 20;

    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> HeadCache {
        HeadCache {
            dir: dir.into(),
            min_bytes: Self::DEFAULT_MIN_BYTES,
        }
    }

    /// The cache of an agent dir: `<agentDir>/cache/session-heads`.
    pub fn in_agent_dir(agent_dir: &Path) -> HeadCache {
        HeadCache::new(agent_dir.join("cache").join("session-heads"))
    }

    /// The cache of the agent dir the environment names (`PI_CODING_AGENT_DIR`, else
    /// `~/.pi/agent`).
    pub fn from_env() -> HeadCache {
        HeadCache::in_agent_dir(&pi_storage::paths::agent_dir_from_env())
    }

    /// Caches only files of at least `bytes` bytes (0: every file).
    pub fn with_min_bytes(mut self, bytes: u64) -> HeadCache {
        self.min_bytes = bytes;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache file for a session file (by its canonical path).
    pub fn entry_path(&self, session_file: &Path) -> PathBuf {
        let key = canonical(session_file);
        let hash = hash64(key.as_os_str().as_encoded_bytes());
        self.dir.join(format!("{hash:016x}.heads"))
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Session {
    /// Opens a session file read-only, through `cache` when given: a warm open
    /// restores the entry heads from the cache and scans at most the appended
    /// tail; otherwise every line is scanned, as [`Session::open`] does, and the
    /// cache is written for next time. The session is the same either way
    /// (tree, leaf, labels, skipped lines, context). The session file is never
    /// written; a cache that cannot be read or written is ignored.
    pub fn open_cached(
        path: &Path,
        cache: Option<&HeadCache>,
    ) -> Result<(Session, OpenedFrom), LoadError> {
        let (file, meta) = open_file(path)?;
        let text = Text::from_file(&file, meta.len()).map_err(|source| io_error(path, source))?;
        let cache = match cache {
            Some(cache) if meta.len() >= cache.min_bytes && meta.len() > 0 => cache,
            _ => {
                let mut session = Session::from_text(text, path)?;
                session.path = Some(path.to_path_buf());
                return Ok((session, OpenedFrom::Scan));
            }
        };
        let stamp = Stamp::of(&meta);
        let key = canonical(path);
        let cache_file = cache.entry_path(&key);
        let cached = std::fs::read(&cache_file)
            .ok()
            .and_then(|bytes| Cached::decode(&bytes, &key));
        let fit = cached
            .as_ref()
            .map_or(Fit::None, |c| c.fit(&stamp, text.base()));
        let (mut session, newlines, from) = match (cached, fit) {
            (Some(cached), Fit::Same) => {
                let newlines = cached.newlines;
                let loader = cached.into_loader(None);
                (loader.finish(text, path)?, newlines, OpenedFrom::Cache)
            }
            (Some(cached), Fit::Grew) => {
                let (scanned_to, lines_before) = (cached.scanned_to, cached.newlines);
                let mut loader = cached.into_loader(Some((scanned_to, lines_before)));
                loader.scan(&text, scanned_to as usize, lines_before, path)?;
                let newlines = loader.newlines;
                (
                    loader.finish(text, path)?,
                    newlines,
                    OpenedFrom::CacheAndTail,
                )
            }
            _ => {
                let mut loader = Loader::fresh();
                loader.scan(&text, 0, 0, path)?;
                let newlines = loader.newlines;
                (loader.finish(text, path)?, newlines, OpenedFrom::Scan)
            }
        };
        session.path = Some(path.to_path_buf());
        if from != OpenedFrom::Cache
            && session.report.migrated_from.is_none()
            && !session.report.was_empty
        {
            // A cache that cannot be written only costs the next open a scan.
            let _ = write_atomically(&cache_file, &encode(&session, &key, &stamp, newlines));
        }
        Ok((session, from))
    }
}

/// What identifies the file's version on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
    ino: u64,
    dev: u64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        #[cfg(unix)]
        let (ino, dev) = {
            use std::os::unix::fs::MetadataExt;
            (meta.ino(), meta.dev())
        };
        #[cfg(not(unix))]
        let (ino, dev) = (0, 0);
        Stamp {
            size: meta.len(),
            mtime_ns,
            ino,
            dev,
        }
    }
}

enum Fit {
    /// The cached state is the file's state.
    Same,
    /// The file grew after the cached state's last complete line.
    Grew,
    None,
}

/// The state of a cold scan, as read back from a cache file.
struct Cached {
    stamp: Stamp,
    /// The end of the last LF in the file (everything after is an unterminated line).
    scanned_to: u64,
    /// LFs before `scanned_to`.
    newlines: u64,
    head_hash: u64,
    before_hash: u64,
    end_hash: u64,
    header_span: (usize, usize),
    header_line: u64,
    skipped: Vec<LineError>,
    entries: Vec<EntryRecord>,
}

/// The sampled ranges: the start, the bytes before `scanned_to`, the end.
fn samples(bytes: &[u8], scanned_to: usize) -> (u64, u64, u64) {
    let head = &bytes[..scanned_to.min(SAMPLE)];
    let before = &bytes[scanned_to.saturating_sub(SAMPLE)..scanned_to];
    let end = &bytes[bytes.len().saturating_sub(SAMPLE)..];
    (hash64(head), hash64(before), hash64(end))
}

fn scanned_to(bytes: &[u8]) -> usize {
    memchr::memrchr(b'\n', bytes).map_or(0, |n| n + 1)
}

impl Cached {
    fn fit(&self, stamp: &Stamp, bytes: &[u8]) -> Fit {
        let to = self.scanned_to as usize;
        if stamp.ino != self.stamp.ino || stamp.dev != self.stamp.dev || bytes.len() < to {
            return Fit::None;
        }
        let (head, before, end) = samples(bytes, to);
        if head != self.head_hash || before != self.before_hash {
            return Fit::None;
        }
        if stamp == &self.stamp && end == self.end_hash {
            Fit::Same
        } else if stamp.size > self.stamp.size {
            Fit::Grew
        } else {
            Fit::None
        }
    }

    /// The loader as the cold scan left it; with `cut`, only the part before the
    /// unterminated last line, which a tail scan reads again.
    fn into_loader(self, cut: Option<(u64, u64)>) -> Loader {
        let mut session = Session::empty();
        session.header_span = Some(self.header_span);
        session.header_line = self.header_line;
        session.entries = self.entries;
        let mut report = LoadReport {
            skipped_lines: self.skipped,
            ..LoadReport::default()
        };
        if let Some((scanned_to, lines)) = cut {
            session.entries.retain(|r| (r.start as u64) < scanned_to);
            report.skipped_lines.retain(|e| e.line <= lines);
        }
        let mut loader = Loader::resumed(session, report);
        loader.newlines = self.newlines;
        loader
    }

    fn decode(bytes: &[u8], key: &Path) -> Option<Cached> {
        let body_len = bytes.len().checked_sub(8)?;
        let (body, sum) = bytes.split_at(body_len);
        if hash64(body) != u64::from_le_bytes(sum.try_into().ok()?) {
            return None;
        }
        let mut r = Reader { bytes: body };
        if r.take(FORMAT.len())? != FORMAT {
            return None;
        }
        if r.bytes_field()? != key.as_os_str().as_encoded_bytes() {
            return None;
        }
        let stamp = Stamp {
            size: r.uint()?,
            mtime_ns: r.uint()? as i128 | ((r.uint()? as i128) << 64),
            ino: r.uint()?,
            dev: r.uint()?,
        };
        let scanned_to = r.uint()?;
        let newlines = r.uint()?;
        let (head_hash, before_hash, end_hash) = (r.u64()?, r.u64()?, r.u64()?);
        let header_span = (r.uint()? as usize, r.uint()? as usize);
        let header_line = r.uint()?;
        let skipped_count = r.uint()? as usize;
        let mut skipped = Vec::with_capacity(skipped_count.min(1 << 20));
        for _ in 0..skipped_count {
            let line = r.uint()?;
            let torn = r.uint()? == 1;
            let reason = r.string()?.into_string();
            skipped.push(LineError {
                line,
                kind: if torn {
                    LineErrorKind::Torn(reason)
                } else {
                    LineErrorKind::Malformed(reason)
                },
            });
        }
        let count = r.uint()? as usize;
        let mut blocks = Vec::new();
        for _ in 0..count.div_ceil(BLOCK) {
            blocks.push(r.bytes_field()?);
        }
        let entries = decode_blocks(&blocks)?;
        if entries.len() != count {
            return None;
        }
        if !r.bytes.is_empty() {
            return None;
        }
        Some(Cached {
            stamp,
            scanned_to,
            newlines,
            head_hash,
            before_hash,
            end_hash,
            header_span,
            header_line,
            skipped,
            entries,
        })
    }
}

fn encode(session: &Session, key: &Path, stamp: &Stamp, newlines: u64) -> Vec<u8> {
    let bytes = session.text.base();
    let to = scanned_to(bytes);
    let (head, before, end) = samples(bytes, to);
    let mut w = Writer(Vec::with_capacity(64 + session.entries.len() * 64));
    w.0.extend_from_slice(FORMAT);
    w.bytes_field(key.as_os_str().as_encoded_bytes());
    w.uint(stamp.size);
    w.uint(stamp.mtime_ns as u64);
    w.uint((stamp.mtime_ns >> 64) as u64);
    w.uint(stamp.ino);
    w.uint(stamp.dev);
    w.uint(to as u64);
    w.uint(newlines);
    for h in [head, before, end] {
        w.0.extend_from_slice(&h.to_le_bytes());
    }
    let (start, len) = session.header_span.unwrap_or((0, 0));
    w.uint(start as u64);
    w.uint(len as u64);
    w.uint(session.header_line);
    w.uint(session.report.skipped_lines.len() as u64);
    for e in &session.report.skipped_lines {
        w.uint(e.line);
        let (torn, reason) = match &e.kind {
            LineErrorKind::Malformed(r) => (0, r),
            LineErrorKind::Torn(r) => (1, r),
        };
        w.uint(torn);
        w.bytes_field(reason.as_bytes());
    }
    w.uint(session.entries.len() as u64);
    let mut block = Writer(Vec::new());
    for records in session.entries.chunks(BLOCK) {
        block.0.clear();
        for r in records {
            block.record(r);
        }
        w.bytes_field(&block.0);
    }
    let sum = hash64(&w.0);
    w.0.extend_from_slice(&sum.to_le_bytes());
    w.0
}

/// Writes `bytes` to a temporary file beside `path` and renames it over `path`, so
/// a reader sees the old file or the new one, never a part. No fsync: after a
/// crash the checksum rejects a file whose data did not reach the disk.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A fast 64-bit hash for change and corruption detection (not cryptographic).
fn hash64(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (bytes.len() as u64) ^ 0xcbf2_9ce4_8422_2325;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        let w = u64::from_le_bytes(word);
        h = (h ^ w).wrapping_mul(K).rotate_left(31);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(K).rotate_left(31);
    }
    (h ^ (h >> 29)).wrapping_mul(K) ^ (h >> 32)
}

/// Records are stored in blocks of this many, each prefixed with its length, so
/// that a warm open decodes them on every core.
const BLOCK: usize = 8192;

fn decode_blocks(blocks: &[&[u8]]) -> Option<Vec<EntryRecord>> {
    let decode = |block: &[u8]| -> Option<Vec<EntryRecord>> {
        let mut r = Reader { bytes: block };
        let mut out = Vec::with_capacity(BLOCK);
        while !r.bytes.is_empty() {
            out.push(r.record()?);
        }
        Some(out)
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4)
        .min(blocks.len());
    let decoded: Vec<Option<Vec<EntryRecord>>> = if threads < 2 {
        blocks.iter().map(|b| decode(b)).collect()
    } else {
        // Thread t decodes blocks t, t + threads, …; results are put back in order.
        let per_thread: Vec<Vec<(usize, Option<Vec<EntryRecord>>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        (t..blocks.len())
                            .step_by(threads)
                            .map(|i| (i, decode(blocks[i])))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                // A decoder that panicked is a bug: carry its panic on, unchanged.
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut slots: Vec<Option<Vec<EntryRecord>>> = (0..blocks.len()).map(|_| None).collect();
        for (i, block) in per_thread.into_iter().flatten() {
            slots[i] = block;
        }
        slots
    };
    let mut entries = Vec::with_capacity(decoded.iter().flatten().map(Vec::len).sum());
    for block in decoded {
        entries.extend(block?);
    }
    Some(entries)
}

struct Writer(Vec<u8>);

impl Writer {
    fn record(&mut self, r: &EntryRecord) {
        self.opt(r.id.as_deref());
        match &r.parent {
            Parent::Root => self.uint(0),
            Parent::Id(id) => {
                self.uint(1);
                self.bytes_field(id.as_bytes());
            }
            Parent::Missing => self.uint(2),
            Parent::Other => self.uint(3),
        }
        self.opt(r.kind.as_str());
        self.opt(r.role.as_deref());
        self.opt(r.timestamp.as_deref());
        self.opt(r.target_id.as_deref());
        self.opt(r.label.as_deref());
        self.opt(r.name.as_deref());
        self.uint(r.line);
        self.uint(r.start as u64);
        self.uint(r.len as u64);
    }

    /// LEB128.
    fn uint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn bytes_field(&mut self, b: &[u8]) {
        self.uint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    /// 0 for None, else length + 1 and the bytes.
    fn opt(&mut self, s: Option<&str>) {
        match s {
            None => self.uint(0),
            Some(s) => {
                self.uint(s.len() as u64 + 1);
                self.0.extend_from_slice(s.as_bytes());
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn record(&mut self) -> Option<EntryRecord> {
        let id = self.opt_string()?;
        let parent = match self.uint()? {
            0 => Parent::Root,
            1 => Parent::Id(self.string()?),
            2 => Parent::Missing,
            _ => Parent::Other,
        };
        let kind = Kind::parse(self.opt_str()?);
        Some(EntryRecord {
            id,
            parent,
            kind,
            role: self.opt_string()?,
            timestamp: self.opt_string()?,
            target_id: self.opt_string()?,
            label: self.opt_string()?,
            name: self.opt_string()?,
            line: self.uint()?,
            start: self.uint()? as usize,
            len: self.uint()? as usize,
        })
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    fn uint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.bytes.split_first()?;
            self.bytes = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes_field(&mut self) -> Option<&'a [u8]> {
        let n = self.uint()? as usize;
        self.take(n)
    }

    fn string(&mut self) -> Option<Box<str>> {
        std::str::from_utf8(self.bytes_field()?)
            .ok()
            .map(Into::into)
    }

    fn opt_str(&mut self) -> Option<Option<&'a str>> {
        match self.uint()? {
            0 => Some(None),
            n => {
                let b = self.take(n as usize - 1)?;
                Some(Some(std::str::from_utf8(b).ok()?))
            }
        }
    }

    fn opt_string(&mut self) -> Option<Option<Box<str>>> {
        match self.uint()? {
            0 => Some(None),
            n => {
                let b = self.take(n as usize - 1)?;
                Some(Some(std::str::from_utf8(b).ok()?.into()))
            }
        }
    }
}

#[cfg(test)]
mod tests;
