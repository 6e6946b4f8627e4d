//! The JSONL backend: Pi's own files, so Pi and this program can share a session directory.
//!
//! * Layout: per-cwd directories under `<agentDir>/sessions`, or one flat override directory
//!   (see [`crate::paths`]). File names carry the session id, so a lookup by id reads
//!   directory listings, and opens headers only when names do not match.
//! * Appends open the file with `O_APPEND` and write whole lines in a single `write_all`, so a
//!   crash leaves at most one torn line at the end, never a line interleaved with another.
//! * A torn last line (no final line feed) is left in place — the file is never rewritten or
//!   truncated — and the next append starts with a line feed so new entries begin on a fresh
//!   line. The torn bytes stay a malformed line that `verify` reports.
//! * The one exception is our own failed append: a write that fails part-way (file size
//!   limit, disk full) is cut back to the length the file had before it, so only a crash can
//!   leave a torn line (`cli/tests/durability.rs`).
//! * The write lock is `flock` on the session file itself, so no lock files litter Pi's
//!   directory; Pi itself does not lock and is not disturbed by ours.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use pi_formats::id::is_valid_session_id;
use pi_formats::jsonl;

use crate::error::{IoResultExt, StoreError, StoreResult};
use crate::ids::SessionId;
use crate::lock::try_lock;
use crate::paths::{resolve_cwd, session_dir_name, session_file_name};
use crate::record::{check_lines, SessionData, SessionHeader, StoredEntry};
use crate::store::{FsyncPolicy, SessionStore, SessionWriter};
use crate::summary::{sort_summaries, ListScope, SessionSummary, SummaryState};

/// How session files are arranged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonlLayout {
    /// Pi's default: `<root>/--<cwd>--/<file>.jsonl`, root = `<agentDir>/sessions`.
    PerCwd {
        /// The sessions root.
        root: PathBuf,
    },
    /// One directory for every cwd (Pi's `--session-dir` / `sessionDir`); listing by cwd
    /// filters on the header's `cwd`.
    Flat {
        /// The directory.
        dir: PathBuf,
    },
}

/// Sessions as Pi's JSONL files.
#[derive(Debug)]
pub struct JsonlStore {
    layout: JsonlLayout,
    fsync: FsyncPolicy,
    /// Where sessions were last seen; checked for existence before use.
    known: Mutex<HashMap<SessionId, PathBuf>>,
    /// Header ids of session files already read. A valid header never changes (files are only
    /// appended to), so each session file's first line is read once, and looking up many
    /// missing ids (a copy into this store) does not reread every file. Files without a valid
    /// header are not cached: Pi may yet write a header into an empty file.
    header_ids: Mutex<HashMap<PathBuf, SessionId>>,
}

impl JsonlStore {
    /// A store over `layout`. Nothing is created until the first session is written.
    pub fn open(layout: JsonlLayout, fsync: FsyncPolicy) -> JsonlStore {
        JsonlStore {
            layout,
            fsync,
            known: Mutex::new(HashMap::new()),
            header_ids: Mutex::new(HashMap::new()),
        }
    }

    /// The layout.
    pub fn layout(&self) -> &JsonlLayout {
        &self.layout
    }

    /// The file a session lives in.
    pub fn session_path(&self, id: &SessionId) -> StoreResult<PathBuf> {
        self.locate(id)
    }

    /// Where a new session with this header goes.
    fn new_session_dir(&self, header: &SessionHeader) -> PathBuf {
        match &self.layout {
            JsonlLayout::PerCwd { root } => root.join(session_dir_name(header.cwd().unwrap_or(""))),
            JsonlLayout::Flat { dir } => dir.clone(),
        }
    }

    /// The directories holding the sessions in scope.
    fn dirs(&self, scope: &ListScope) -> StoreResult<Vec<PathBuf>> {
        match (&self.layout, scope) {
            (JsonlLayout::Flat { dir }, _) => Ok(vec![dir.clone()]),
            (JsonlLayout::PerCwd { root }, ListScope::Cwd(cwd)) => {
                Ok(vec![root.join(session_dir_name(cwd))])
            }
            // Like Pi: directories and symlinks to directories, but only links that stay
            // inside the store (crate::walk).
            (JsonlLayout::PerCwd { root }, ListScope::All) => crate::walk::cwd_dirs(root),
        }
    }

    /// The store's root: the per-cwd root or the flat directory.
    fn root(&self) -> &Path {
        match &self.layout {
            JsonlLayout::PerCwd { root } => root,
            JsonlLayout::Flat { dir } => dir,
        }
    }

    /// Every `*.jsonl` file in scope, sorted by name (symlinks out of the store skipped).
    fn files(&self, scope: &ListScope) -> StoreResult<Vec<PathBuf>> {
        let mut files = Vec::new();
        for dir in self.dirs(scope)? {
            files.extend(crate::walk::session_files(self.root(), &dir)?);
        }
        files.sort();
        Ok(files)
    }

    /// Finds a session's file: cached path, then file names (`…_<id>.jsonl`), then headers.
    fn locate(&self, id: &SessionId) -> StoreResult<PathBuf> {
        if let Some(path) = self.known().get(id).cloned() {
            if path.exists() {
                return Ok(path);
            }
        }
        let files = self.files(&ListScope::All)?;
        let suffix = format!("_{id}.jsonl");
        let by_name = files.iter().filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix))
        });
        let others = files.iter().filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix))
        });
        for path in by_name.chain(others) {
            if self.header_id(path).as_ref() == Some(id) {
                self.known().insert(id.clone(), path.clone());
                return Ok(path.clone());
            }
        }
        Err(StoreError::SessionNotFound {
            id: id.clone(),
            store: self.describe(),
        })
    }

    /// The header id of a file, read once.
    fn header_id(&self, path: &Path) -> Option<SessionId> {
        let mut cache = self.header_ids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = cache.get(path) {
            return Some(id.clone());
        }
        let id = read_header_line(path).ok().map(|h| h.id().clone())?;
        cache.insert(path.to_path_buf(), id.clone());
        Some(id)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, PathBuf>> {
        // A panic while holding this lock leaves only a cache behind; keep using it.
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn summarize(&self, path: &Path) -> StoreResult<Option<SessionSummary>> {
        summarize_file(path)
    }
}

/// The summary of one session file; `None` when it has no valid header.
pub(crate) fn summarize_file(path: &Path) -> StoreResult<Option<SessionSummary>> {
    let buf = fs::read(path).context("read", path)?;
    let mut lines = jsonl::lines(&buf);
    let Some(first) = lines.next() else {
        return Ok(None);
    };
    let Ok(header) = SessionHeader::parse(first.bytes) else {
        return Ok(None);
    };
    let mut state = SummaryState::default();
    for line in lines {
        state.observe(line.bytes);
    }
    let mtime = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64);
    Ok(state.finish(&header, path.display().to_string(), mtime))
}

/// Reads only the first line of a file as a header.
pub(crate) fn read_header_line(path: &Path) -> StoreResult<SessionHeader> {
    let file = File::open(path).context("open", path)?;
    let mut first = Vec::new();
    // Headers are small; the cap keeps a huge garbage file from being read whole.
    BufReader::new(file)
        .take(1 << 20)
        .read_until(b'\n', &mut first)
        .context("read", path)?;
    if first.last() == Some(&b'\n') {
        first.pop();
    }
    SessionHeader::parse(first).map_err(|reason| StoreError::InvalidHeader {
        location: path.display().to_string(),
        line: 1,
        reason,
    })
}

pub(crate) fn sync_dir(dir: &Path) -> StoreResult<()> {
    // Makes a new file's directory entry durable; directories cannot be opened on Windows.
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .context("sync directory", dir)?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

impl SessionStore for JsonlStore {
    fn name(&self) -> &'static str {
        "jsonl"
    }

    fn describe(&self) -> String {
        match &self.layout {
            JsonlLayout::PerCwd { root } => format!("jsonl (per-cwd under {})", root.display()),
            JsonlLayout::Flat { dir } => format!("jsonl:{}", dir.display()),
        }
    }

    fn create_session(
        &self,
        header: &SessionHeader,
        entries: &[StoredEntry],
    ) -> StoreResult<Box<dyn SessionWriter>> {
        let id = header.id();
        if !is_valid_session_id(id.as_str()) {
            return Err(StoreError::InvalidSessionId {
                id: id.to_string(),
                reason: "a JSONL session id must be letters, digits, '.', '_' or '-' \
                         and start and end with a letter or digit",
            });
        }
        check_lines(id, entries)?;
        match self.locate(id) {
            Ok(path) => {
                return Err(StoreError::SessionExists {
                    id: id.clone(),
                    location: path.display().to_string(),
                })
            }
            Err(StoreError::SessionNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let dir = self.new_session_dir(header);
        if crate::walk::leaves_store(self.root(), &dir) {
            return Err(std::io::Error::other(
                "the session directory is a symlink leading outside the session store",
            ))
            .context("create directory", &dir);
        }
        fs::create_dir_all(&dir).context("create directory", &dir)?;
        let stamp = header
            .timestamp()
            .map(str::to_string)
            .unwrap_or_else(pi_formats::time::now_iso);
        let path = dir.join(session_file_name(&stamp, id.as_str()));
        let writer = JsonlWriter::create_at(&path, header, entries, self.fsync, CreateMode::New)?;
        if self.fsync == FsyncPolicy::EveryEntry {
            sync_dir(&dir)?;
        }
        self.known().insert(id.clone(), path);
        Ok(Box::new(writer))
    }

    fn open_writer(&self, id: &SessionId) -> StoreResult<Box<dyn SessionWriter>> {
        let path = self.locate(id)?;
        Ok(Box::new(JsonlWriter::open_at(&path, id, self.fsync)?))
    }

    fn read_header(&self, id: &SessionId) -> StoreResult<SessionHeader> {
        read_header_line(&self.locate(id)?)
    }

    fn read_session(&self, id: &SessionId) -> StoreResult<SessionData> {
        let path = self.locate(id)?;
        let buf = fs::read(&path).context("read", &path)?;
        SessionData::from_jsonl(&path.display().to_string(), &buf)
    }

    fn list_sessions(&self, scope: &ListScope) -> StoreResult<Vec<SessionSummary>> {
        let files = self.files(scope)?;
        // Pi filters on the header cwd only for a custom (flat) directory.
        let want_cwd = match (&self.layout, scope) {
            (JsonlLayout::Flat { .. }, ListScope::Cwd(cwd)) => Some(resolve_cwd(cwd)),
            _ => None,
        };
        let mut out = Vec::with_capacity(files.len());
        for path in files {
            // Like Pi: a file that vanished or cannot be read is not a session.
            let Ok(Some(summary)) = self.summarize(&path) else {
                continue;
            };
            if let Some(want) = &want_cwd {
                if summary.cwd.is_empty() || &resolve_cwd(&summary.cwd) != want {
                    continue;
                }
            }
            out.push(summary);
        }
        sort_summaries(&mut out);
        Ok(out)
    }

    fn session_ids(&self) -> StoreResult<Vec<SessionId>> {
        let mut ids = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for path in self.files(&ListScope::All)? {
            if let Some(id) = self.header_id(&path) {
                if seen.insert(id.clone()) {
                    self.known().insert(id.clone(), path);
                    ids.push(id);
                }
            }
        }
        Ok(ids)
    }

    fn delete_session(&self, id: &SessionId) -> StoreResult<()> {
        let path = self.locate(id)?;
        let file = OpenOptions::new()
            .read(true)
            .open(&path)
            .context("open", &path)?;
        try_lock(&file, id, &path)?;
        fs::remove_file(&path).context("delete", &path)?;
        self.known().remove(id);
        self.header_ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&path);
        Ok(())
    }
}

/// What we know about the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    EndsWithNewline,
    Torn,
    /// Not looked yet, or a write failed half-way: look before the next append.
    Unknown,
}

/// Appends to one session file, holding its lock.
#[derive(Debug)]
pub struct JsonlWriter {
    id: SessionId,
    path: PathBuf,
    file: File,
    fsync: FsyncPolicy,
    tail: Tail,
}

/// How [`JsonlWriter::create_at`] treats a file already at the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CreateMode {
    /// The file must not exist (`O_EXCL`; Pi opens new sessions with "wx").
    New,
    /// The file may exist if it is empty: Pi turns an empty file named by `--session` into a
    /// fresh session in place. Checked under the lock, so a racing writer cannot be overwritten.
    NewOrEmpty,
}

impl JsonlWriter {
    /// Creates the session file at `path` with its header and `entries`, holding its lock.
    pub(crate) fn create_at(
        path: &Path,
        header: &SessionHeader,
        entries: &[StoredEntry],
        fsync: FsyncPolicy,
        mode: CreateMode,
    ) -> StoreResult<JsonlWriter> {
        let id = header.id();
        let mut options = OpenOptions::new();
        options.append(true).read(true);
        match mode {
            CreateMode::New => options.create_new(true),
            CreateMode::NewOrEmpty => options.create(true),
        };
        let file = match options.open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::SessionExists {
                    id: id.clone(),
                    location: path.display().to_string(),
                })
            }
            Err(e) => return Err(e).context("create", path),
        };
        try_lock(&file, id, path)?;
        if file.metadata().context("stat", path)?.len() != 0 {
            return Err(StoreError::SessionExists {
                id: id.clone(),
                location: path.display().to_string(),
            });
        }
        let mut buf = Vec::with_capacity(
            header.line().len() + 1 + entries.iter().map(|e| e.line().len() + 1).sum::<usize>(),
        );
        buf.extend_from_slice(header.line());
        buf.push(b'\n');
        for entry in entries {
            buf.extend_from_slice(entry.line());
            buf.push(b'\n');
        }
        if let Err(e) = (&file).write_all(&buf) {
            // We hold the lock and the file was empty: a file cut off inside its header is no
            // session. A file we created goes (a later append creates it again); a file that
            // was there empty is emptied again.
            match mode {
                CreateMode::New => {
                    let _ = fs::remove_file(path);
                }
                CreateMode::NewOrEmpty => {
                    let _ = file.set_len(0);
                }
            }
            return Err(e).context("write", path);
        }
        if fsync == FsyncPolicy::EveryEntry {
            file.sync_data().context("sync", path)?;
        }
        Ok(JsonlWriter {
            id: id.clone(),
            path: path.to_path_buf(),
            file,
            fsync,
            tail: Tail::EndsWithNewline,
        })
    }

    /// Opens the existing session file at `path` for appending, holding its lock.
    pub(crate) fn open_at(
        path: &Path,
        id: &SessionId,
        fsync: FsyncPolicy,
    ) -> StoreResult<JsonlWriter> {
        let file = OpenOptions::new()
            .append(true)
            .read(true)
            .open(path)
            .context("open for appending", path)?;
        try_lock(&file, id, path)?;
        Ok(JsonlWriter {
            id: id.clone(),
            path: path.to_path_buf(),
            file,
            fsync,
            tail: Tail::Unknown,
        })
    }
}

impl JsonlWriter {
    fn check_tail(&mut self) -> StoreResult<Tail> {
        let mut file = &self.file;
        let len = file.seek(SeekFrom::End(0)).context("seek", &self.path)?;
        if len == 0 {
            return Ok(Tail::EndsWithNewline);
        }
        file.seek(SeekFrom::End(-1)).context("seek", &self.path)?;
        let mut last = [0u8; 1];
        file.read_exact(&mut last).context("read", &self.path)?;
        Ok(if last[0] == b'\n' {
            Tail::EndsWithNewline
        } else {
            Tail::Torn
        })
    }
}

impl JsonlWriter {
    /// After a failed append: drops what the kernel wrote of it (EFBIG and ENOSPC write what
    /// fits, then fail), so a failure the process survives leaves whole lines only. We hold
    /// the lock, so bytes past `start` are ours. If the cut fails too, the bytes stay a torn
    /// tail that readers skip and the next append starts after a line feed.
    fn cut_back(&self, start: u64) {
        let grew = self.file.metadata().is_ok_and(|m| m.len() > start);
        if grew {
            let _ = self.file.set_len(start);
        }
    }
}

impl SessionWriter for JsonlWriter {
    fn session_id(&self) -> &SessionId {
        &self.id
    }

    fn append(&mut self, entries: &[StoredEntry]) -> StoreResult<()> {
        check_lines(&self.id, entries)?;
        if entries.is_empty() {
            return Ok(());
        }
        if self.tail == Tail::Unknown {
            self.tail = self.check_tail()?;
        }
        let torn = self.tail == Tail::Torn;
        let mut buf = Vec::with_capacity(
            usize::from(torn) + entries.iter().map(|e| e.line().len() + 1).sum::<usize>(),
        );
        if torn {
            buf.push(b'\n');
        }
        for entry in entries {
            buf.extend_from_slice(entry.line());
            buf.push(b'\n');
        }
        let start = self.file.metadata().context("stat", &self.path)?.len();
        if let Err(e) = (&self.file).write_all(&buf) {
            self.tail = Tail::Unknown;
            self.cut_back(start);
            return Err(e).context("append to", &self.path);
        }
        self.tail = Tail::EndsWithNewline;
        if self.fsync == FsyncPolicy::EveryEntry {
            self.file.sync_data().context("sync", &self.path)?;
        }
        Ok(())
    }

    fn sync(&mut self) -> StoreResult<()> {
        if self.fsync == FsyncPolicy::Never {
            return Ok(());
        }
        self.file.sync_data().context("sync", &self.path)
    }
}
