//! The history index: session summaries, full-text search and usage statistics over every
//! session of a store, in one SQLite file.
//!
//! It is derived data, never a source of truth. It is rebuilt from the store whenever it is
//! missing, unreadable, corrupt, of another schema version or made for another store, and
//! deleting it loses nothing. It is fed through the store:
//!
//! * **JSONL** ([`HistoryIndex::refresh_jsonl`]): each file's size, mtime and the byte offset
//!   read up to are recorded. A file whose size and mtime are unchanged is not opened; a grown
//!   file is read from that offset only (after checking its first bytes and the byte before the
//!   offset are still the same); a shrunk or rewritten file is indexed again whole. Refreshing
//!   1,000 unchanged files costs one `stat` each plus one `SELECT`.
//! * **Any other [`SessionStore`]** ([`HistoryIndex::refresh_store`]): the store's own summary
//!   entry counts tell which sessions changed, and [`SessionStore::read_after`] the last
//!   indexed entry id gives the new lines.
//!
//! Summaries are folded with [`SummaryState`] (Pi's `buildSessionInfo` rules, the same code
//! the stores list with); text rows come from [`extract`]. Searching is FTS5 with bm25 ranking
//! (`docs/history.md` has the measurements behind the choice).

mod extract;
mod figures;
mod query;
mod readback;
mod scan;
pub(crate) mod tokens;
mod views;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, ErrorCode, OptionalExtension};

pub(crate) use extract::extract;
pub use extract::MAX_INDEXED_BYTES_PER_ENTRY;
pub use figures::{session_figures, SessionFigures};
pub(crate) use query::{fts_query, snippets, RANK_WINDOW};
pub use query::{GroupBy, SearchHit, SearchQuery, Stats, StatsQuery, StatsRow};
pub use scan::RefreshReport;
pub use views::{ColumnType, HistorySql, QueryError, SqlQuery, SqlValue, View, ViewColumn, VIEWS};

use crate::error::{StoreError, StoreResult};
use crate::jsonl::{JsonlLayout, JsonlStore};
use crate::paths::{resolve_cwd, session_dir_name, sessions_root};
use crate::spec::{open_store, StoreOptions, StoreSpec};
use crate::store::SessionStore;
use crate::summary::{sort_summaries, ListScope, SessionSummary};

/// Bumped whenever the tables or what goes into them change; an index of another version is
/// rebuilt from the store.
/// 3: first-message previews and indexed text capped (an older index may hold them whole).
/// 4: `tool_uses` (one row per tool call and its result, for the SQL views).
/// 5: contentless FTS5; JSONL text is read back from the session files by byte range.
const SCHEMA_VERSION: i64 = 5;

const SCHEMA: &str = "
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- One row per session file (JSONL: key = path) or session (other stores: key = id).
CREATE TABLE sessions(
    sid INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    dir TEXT NOT NULL DEFAULT '',
    session_id TEXT,
    location TEXT NOT NULL,
    cwd TEXT NOT NULL DEFAULT '',
    cwd_key TEXT NOT NULL DEFAULT '',
    header BLOB,
    size INTEGER NOT NULL DEFAULT 0,
    mtime_ns INTEGER NOT NULL DEFAULT 0,
    offset INTEGER NOT NULL DEFAULT 0,
    -- JSONL: how far the text rows (docs, fts, entries) are; <= offset, which is how far
    -- the summary columns are. A listing advances only the summary.
    text_offset INTEGER NOT NULL DEFAULT 0,
    head BLOB,
    boundary INTEGER,
    cursor TEXT,
    state TEXT NOT NULL DEFAULT '{}',
    listable INTEGER NOT NULL DEFAULT 0,
    name TEXT,
    parent_session TEXT,
    created_ms INTEGER,
    modified_ms INTEGER NOT NULL DEFAULT 0,
    entry_count INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    first_message TEXT
);
CREATE INDEX sessions_cwd ON sessions(cwd_key);
-- What a refresh reads of every row (scan::read_marks), so it scans this narrow index and
-- not the rows, which hold each file's first 4 KB and span a page or more each.
CREATE INDEX sessions_marks ON sessions(key, sid, size, mtime_ns, text_offset, offset);
-- One row per message entry or entry with usage: what statistics add up.
CREATE TABLE entries(
    sid INTEGER NOT NULL,
    entry_id TEXT,
    ts_ms INTEGER,
    role TEXT,
    provider TEXT,
    model TEXT,
    tool_calls INTEGER NOT NULL,
    tool_errors INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    input INTEGER NOT NULL,
    output INTEGER NOT NULL,
    cache_read INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    cost REAL NOT NULL
);
CREATE INDEX entries_sid ON entries(sid);
-- One row per searchable piece of an entry. The text is not stored for JSONL sessions: the
-- row records where its entry line is in the session file (line_offset, line_len) and which
-- of the line's extracted parts it is (part), and snippets re-read and re-extract that line.
-- Other stores have no byte ranges, so their rows keep the text.
CREATE TABLE docs(
    rowid INTEGER PRIMARY KEY,
    sid INTEGER NOT NULL,
    entry_id TEXT,
    ts_ms INTEGER,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    tool_name TEXT,
    is_error INTEGER NOT NULL,
    line_offset INTEGER,
    line_len INTEGER,
    part INTEGER NOT NULL,
    text TEXT
);
CREATE INDEX docs_sid ON docs(sid);
-- Contentless: FTS5 keeps only the postings (with positions, for phrases) and each row's
-- token count (for bm25); contentless_delete lets a rewritten session's rows be deleted.
CREATE VIRTUAL TABLE fts USING fts5(
    text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
);
-- Merge segments when 16 of a level exist (FTS5's default is 4; at most 64 before a
-- write must merge): a build from scratch spent a quarter of its inserts' time merging
-- segments that later merges rewrote again. Searches over the 16 were measured as fast.
INSERT INTO fts(fts, rank) VALUES('automerge', 16);
INSERT INTO fts(fts, rank) VALUES('crisismerge', 64);
";

/// The history index of one store.
#[derive(Debug)]
pub struct HistoryIndex {
    conn: Connection,
    path: PathBuf,
    /// What the index was built from (`JsonlStore::describe` and so on); another source
    /// means another index.
    source: String,
    /// Why the last open started from an empty index, if it did (missing, corrupt, …).
    rebuilt: Option<String>,
    /// The JSONL watermarks as of the last refresh through this handle, kept while no other
    /// connection commits (`PRAGMA data_version`), so a long-lived process refreshes
    /// without reading every row again.
    marks: Option<scan::Marks>,
    /// Told how far a refresh's reading of JSONL text has come (see
    /// [`HistoryIndex::report_progress`]).
    progress: Option<Progress>,
}

/// A callback told `(bytes read, bytes to read)` while a refresh indexes JSONL text.
pub struct Progress(Box<dyn FnMut(u64, u64)>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

impl Progress {
    /// `report` is called with `(bytes read, bytes to read)`.
    pub fn new(report: impl FnMut(u64, u64) + 'static) -> Progress {
        Progress(Box::new(report))
    }

    pub(crate) fn tell(&mut self, done: u64, total: u64) {
        (self.0)(done, total)
    }
}

impl HistoryIndex {
    /// Opens the index at `path` for the store `source` describes, creating it when missing
    /// and starting over (with a note in [`HistoryIndex::rebuilt`]) when it is corrupt, of
    /// another schema version or built from another store.
    pub fn open(path: &Path, source: &str) -> StoreResult<HistoryIndex> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
                action: "create directory",
                path: dir.to_path_buf(),
                source: e,
            })?;
        }
        let existed = path.exists();
        match open_existing(path, source) {
            Ok(Some(conn)) => Ok(HistoryIndex {
                conn,
                path: path.to_path_buf(),
                source: source.to_string(),
                rebuilt: None,
                marks: Default::default(),
                progress: None,
            }),
            Ok(None) => Self::create(
                path,
                source,
                existed.then(|| "made for another store or version".into()),
            ),
            Err(e) => Self::create(path, source, Some(e.to_string())),
        }
    }

    /// Deletes the index file and starts an empty one.
    fn create(path: &Path, source: &str, why: Option<String>) -> StoreResult<HistoryIndex> {
        remove_index_files(path)?;
        let conn = connect(path)
            .map_err(|e| StoreError::db("create history index", path.display().to_string(), e))?;
        conn.execute_batch(SCHEMA)
            .and_then(|()| conn.execute_batch(views::TABLES))
            .and_then(|()| {
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('source', ?1)",
                    [source],
                )?;
                conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            })
            .map_err(|e| StoreError::db("create history index", path.display().to_string(), e))?;
        Ok(HistoryIndex {
            conn,
            path: path.to_path_buf(),
            source: source.to_string(),
            rebuilt: why,
            marks: Default::default(),
            progress: None,
        })
    }

    /// Starts over from an empty index (the store is the truth; nothing is lost).
    pub fn rebuild(&mut self, why: &str) -> StoreResult<()> {
        // Closing first: the new file must not be written through the old handle.
        let fresh = Connection::open_in_memory()
            .map_err(|e| StoreError::db("rebuild history index", self.location(), e))?;
        drop(std::mem::replace(&mut self.conn, fresh));
        let progress = self.progress.take();
        *self = Self::create(
            &self.path.clone(),
            &self.source.clone(),
            Some(why.to_string()),
        )?;
        self.progress = progress;
        Ok(())
    }

    /// Why this index was started from scratch when it was opened, if it was and was not
    /// simply missing.
    pub fn rebuilt(&self) -> Option<&str> {
        self.rebuilt.as_deref()
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }

    /// From now on, refreshes that index JSONL text tell `progress` how many of the bytes
    /// they have to read they read (after every file, and every batch of a large one).
    pub fn report_progress(&mut self, progress: Progress) {
        self.progress = Some(progress);
    }

    /// Brings the index up to date with a JSONL store; see the module docs.
    pub fn refresh_jsonl(&mut self, store: &JsonlStore) -> StoreResult<RefreshReport> {
        let report = self.retry_corrupt(|index| {
            scan::refresh_jsonl(index, store, scan::Parts::All, scan::Scope::Every)
        })?;
        self.purge_after(&report)?;
        Ok(report)
    }

    /// [`HistoryIndex::refresh_jsonl`] for the files at `paths` only: those a file watcher
    /// reported created, written, renamed or deleted since the last refresh (any other
    /// path is ignored). Nothing else is walked or `stat`ed, so a long-lived process that
    /// watches the store refreshes in time proportional to what changed. A corrupt index
    /// is rebuilt from every file.
    pub fn refresh_jsonl_files(
        &mut self,
        store: &JsonlStore,
        paths: &[PathBuf],
    ) -> StoreResult<RefreshReport> {
        let only = scan::refresh_jsonl(self, store, scan::Parts::All, scan::Scope::Only(paths));
        let report = match only {
            Err(e) if is_corrupt(&e) => {
                self.rebuild(&format!("{e}"))?;
                scan::refresh_jsonl(self, store, scan::Parts::All, scan::Scope::Every)?
            }
            other => other?,
        };
        self.purge_after(&report)?;
        Ok(report)
    }

    /// Brings only the session summaries (what [`HistoryIndex::sessions`] lists) up to date
    /// with a JSONL store: each file's new lines are folded into its summary and nothing is
    /// put into the full-text index or the statistics, so a first listing costs one read of
    /// the files and no text indexing. A later [`HistoryIndex::refresh_jsonl`] indexes the
    /// text those listings skipped.
    pub fn refresh_jsonl_summaries(&mut self, store: &JsonlStore) -> StoreResult<RefreshReport> {
        let report = self.retry_corrupt(|index| {
            scan::refresh_jsonl(index, store, scan::Parts::Summaries, scan::Scope::Every)
        })?;
        self.purge_after(&report)?;
        Ok(report)
    }

    /// Brings the index up to date with any store through the [`SessionStore`] trait.
    pub fn refresh_store(&mut self, store: &dyn SessionStore) -> StoreResult<RefreshReport> {
        let report = self.retry_corrupt(|index| scan::refresh_store(index, store))?;
        self.purge_after(&report)?;
        Ok(report)
    }

    /// After sessions were deleted from the store, their text must not live on in the
    /// index file: deleted rows are zeroed as they go (`secure_delete`, see [`connect`]),
    /// FTS5 drops the deleted documents' postings only when its segments are merged
    /// (`optimize`), and `VACUUM` then rewrites the file without free pages, the WAL
    /// truncated after it. Deleting a session is rare; a refresh without one costs nothing.
    fn purge_after(&mut self, report: &RefreshReport) -> StoreResult<()> {
        if report.sessions_removed == 0 {
            return Ok(());
        }
        self.conn
            .execute_batch(
                "INSERT INTO fts(fts) VALUES('optimize');
                 VACUUM;
                 PRAGMA wal_checkpoint(TRUNCATE);",
            )
            .map_err(|e| StoreError::db("purge deleted sessions", self.location(), e))
    }

    /// Runs `f`; if SQLite finds the file corrupt on the way, rebuilds and runs it once more.
    fn retry_corrupt<T>(
        &mut self,
        mut f: impl FnMut(&mut HistoryIndex) -> StoreResult<T>,
    ) -> StoreResult<T> {
        match f(self) {
            Err(e) if is_corrupt(&e) => {
                self.rebuild(&format!("{e}"))?;
                f(self)
            }
            other => other,
        }
    }

    /// Session summaries in scope, most recently modified first (Pi's order), as of the last
    /// refresh. `layout` decides what a cwd scope means, as it does for [`JsonlStore`]: the
    /// per-cwd directory, else the header's cwd.
    pub fn sessions(
        &self,
        scope: &ListScope,
        layout: Option<&JsonlLayout>,
    ) -> StoreResult<Vec<SessionSummary>> {
        let err = |e| StoreError::db("list sessions", self.location(), e);
        let columns = "SELECT session_id, location, cwd, name, parent_session, created_ms,
                              modified_ms, entry_count, message_count, first_message
                       FROM sessions WHERE listable = 1";
        let (sql, arg) = match (scope, layout) {
            (ListScope::All, _) => (columns.to_string(), None),
            (ListScope::Cwd(cwd), Some(JsonlLayout::PerCwd { root })) => (
                format!("{columns} AND dir = ?1"),
                Some(root.join(session_dir_name(cwd)).display().to_string()),
            ),
            (ListScope::Cwd(cwd), _) => (
                format!("{columns} AND cwd_key = ?1"),
                Some(resolve_cwd(cwd)),
            ),
        };
        let mut stmt = self.conn.prepare_cached(&sql).map_err(err)?;
        let map = |r: &rusqlite::Row<'_>| {
            Ok(SessionSummary {
                id: r.get::<_, String>(0)?.into(),
                location: r.get(1)?,
                cwd: r.get(2)?,
                name: r.get(3)?,
                parent_session: r.get(4)?,
                created_ms: r.get(5)?,
                modified_ms: r.get(6)?,
                entry_count: r.get::<_, i64>(7)? as u64,
                message_count: r.get::<_, i64>(8)? as u64,
                first_message: r.get(9)?,
            })
        };
        let rows = match &arg {
            Some(a) => stmt.query_map([a], map),
            None => stmt.query_map([], map),
        }
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(err)?;
        let mut rows = rows;
        sort_summaries(&mut rows);
        Ok(rows)
    }
}

/// A store opened for indexing, with the place its index lives.
#[derive(Debug)]
pub enum HistorySource {
    /// Pi's JSONL files: indexed incrementally by byte offset.
    Jsonl(JsonlStore),
    /// A database store: indexed through the trait.
    Store(Box<dyn SessionStore>),
}

impl HistorySource {
    /// Opens the store a spec names (as [`open_store`] does, but keeping JSONL stores concrete
    /// so their files can be read by offset).
    pub fn open(spec: &StoreSpec, options: &StoreOptions) -> StoreResult<HistorySource> {
        Ok(match spec {
            StoreSpec::Jsonl(dir) => {
                let layout = match (dir, &options.session_dir) {
                    (Some(dir), _) | (None, Some(dir)) => JsonlLayout::Flat { dir: dir.clone() },
                    (None, None) => JsonlLayout::PerCwd {
                        root: sessions_root(&options.agent_dir),
                    },
                };
                HistorySource::Jsonl(JsonlStore::open(layout, options.fsync))
            }
            other => HistorySource::Store(open_store(other, options)?),
        })
    }

    /// The store.
    pub fn store(&self) -> &dyn SessionStore {
        match self {
            HistorySource::Jsonl(s) => s,
            HistorySource::Store(s) => s.as_ref(),
        }
    }

    /// The JSONL layout, for JSONL stores.
    pub fn layout(&self) -> Option<&JsonlLayout> {
        match self {
            HistorySource::Jsonl(s) => Some(s.layout()),
            HistorySource::Store(_) => None,
        }
    }

    /// Where this store's index lives: `<agentDir>/history.sqlite` for Pi's default layout,
    /// `<agentDir>/history-<hash of dir>.sqlite` for a flat JSONL directory (Pi lists every
    /// file of a session dir, so nothing is put there), `<db>.history.sqlite` beside a
    /// database file, `<agentDir>/history-<hash of URL>.sqlite` for a PostgreSQL store.
    pub fn index_path(&self, spec: &StoreSpec, options: &StoreOptions) -> PathBuf {
        match (self, spec) {
            (HistorySource::Jsonl(s), _) => match s.layout() {
                JsonlLayout::PerCwd { .. } => options.agent_dir.join("history.sqlite"),
                JsonlLayout::Flat { dir } => options.agent_dir.join(format!(
                    "history-{:016x}.sqlite",
                    fnv1a(dir.display().to_string().as_bytes())
                )),
            },
            (HistorySource::Store(_), StoreSpec::Redb(p) | StoreSpec::Sqlite(p)) => {
                let mut name = p.as_os_str().to_owned();
                name.push(".history.sqlite");
                PathBuf::from(name)
            }
            // The server holds the sessions; their index is local derived data, one file per
            // database (keyed by the URL without its password).
            (HistorySource::Store(_), StoreSpec::Postgres(url)) => options.agent_dir.join(format!(
                "history-{:016x}.sqlite",
                fnv1a(url.to_string().as_bytes())
            )),
            (HistorySource::Store(_), StoreSpec::Jsonl(_)) => {
                options.agent_dir.join("history.sqlite")
            }
        }
    }

    /// Opens this store's index at `path` and brings it up to date.
    pub fn open_index(&self, path: &Path) -> StoreResult<(HistoryIndex, RefreshReport)> {
        self.open_index_reporting(path, None)
    }

    /// [`HistorySource::open_index`], telling `progress` how the refresh's reading goes.
    pub fn open_index_reporting(
        &self,
        path: &Path,
        progress: Option<Progress>,
    ) -> StoreResult<(HistoryIndex, RefreshReport)> {
        let mut index = HistoryIndex::open(path, &self.store().describe())?;
        if let Some(progress) = progress {
            index.report_progress(progress);
        }
        let report = self.refresh(&mut index)?;
        Ok((index, report))
    }

    /// Opens this store's index at `path` with its session summaries up to date (for
    /// listing; see [`HistoryIndex::refresh_jsonl_summaries`]). Database stores keep their
    /// summaries themselves, so for them this is [`HistorySource::open_index`].
    pub fn open_index_for_listing(
        &self,
        path: &Path,
    ) -> StoreResult<(HistoryIndex, RefreshReport)> {
        let mut index = HistoryIndex::open(path, &self.store().describe())?;
        let report = match self {
            HistorySource::Jsonl(s) => index.refresh_jsonl_summaries(s)?,
            HistorySource::Store(s) => index.refresh_store(s.as_ref())?,
        };
        Ok((index, report))
    }

    /// Brings `index` up to date with this store.
    pub fn refresh(&self, index: &mut HistoryIndex) -> StoreResult<RefreshReport> {
        match self {
            HistorySource::Jsonl(s) => index.refresh_jsonl(s),
            HistorySource::Store(s) => index.refresh_store(s.as_ref()),
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// WAL pages after which a commit checkpoints (see [`connect`]).
const WAL_AUTOCHECKPOINT: i64 = 16_384;

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    // The index holds the text of every session: only the owner may read it. A new file is
    // created 0600 before SQLite opens it (its -wal and -shm files copy the mode); an index
    // made by an older version is narrowed to 0600 too.
    private_file(path);
    let conn = Connection::open(path)?;
    // Deleted text is overwritten, not left in free pages.
    conn.pragma_update(None, "secure_delete", "ON")?;
    // Several pi processes may refresh at once; each waits for the other's transaction.
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // Derived data: a crash may lose the last refresh (redone next time) but WAL keeps the
    // file consistent, so no fsync per commit.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "cache_size", -32_000)?;
    // A refresh cycles through more distinct statements per file than rusqlite's default
    // 16 cached ones; with fewer, each file re-prepared most of them (3% of a build).
    conn.set_prepared_statement_cache_capacity(64);
    // Checkpoint every 64 MB of WAL instead of every 4 MB: a build rewrites the same FTS5
    // pages many times over, and each checkpoint copies them into the file again. Measured:
    // building from 287 MB of sessions took 7.4 s instead of 10.1 s; larger gained nothing.
    // The WAL is checkpointed and removed when the last connection closes.
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT)?;
    // Snippets are cut in a scratch table (`query::snippets`): keep it off the disk.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(conn)
}

/// Creates `path` empty with mode 0600, or narrows an existing file to 0600. Best effort: a
/// failure here shows up as SQLite's own error when it opens the file.
fn private_file(path: &Path) {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => {}
        // Only when needed: a `chmod` writes the inode, on every search otherwise.
        Err(_) => {
            if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o777 != 0o600) {
                let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            }
        }
    }
}

/// The connection if `path` holds an index of this version for this source; `None` if it
/// holds something else that is readable; an error if it is unreadable.
fn open_existing(path: &Path, source: &str) -> rusqlite::Result<Option<Connection>> {
    if !path.exists() {
        return Ok(None);
    }
    let conn = connect(path)?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version != SCHEMA_VERSION {
        return Ok(None);
    }
    let stored: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'source'", [], |r| {
            r.get(0)
        })
        .optional()?;
    // Touch every table once, so a file with the right header but broken pages fails here.
    conn.query_row(
        "SELECT (SELECT count(*) FROM sessions WHERE sid < 0) + (SELECT count(*) FROM fts WHERE rowid < 0)",
        [],
        |r| r.get::<_, i64>(0),
    )?;
    Ok((stored.as_deref() == Some(source)).then_some(conn))
}

fn remove_index_files(path: &Path) -> StoreResult<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let p = PathBuf::from(name);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(StoreError::Io {
                    action: "remove stale history index",
                    path: p,
                    source: e,
                })
            }
        }
    }
    Ok(())
}

/// Whether an error means the index file itself is damaged (so rebuilding it helps).
fn is_corrupt(e: &StoreError) -> bool {
    let StoreError::Database { source, .. } = e else {
        return false;
    };
    match source.downcast_ref::<rusqlite::Error>() {
        Some(rusqlite::Error::SqliteFailure(f, _)) => matches!(
            f.code,
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase | ErrorCode::SystemIoFailure
        ),
        _ => false,
    }
}

/// Deletes every row of one session (before indexing it again whole, or when it is gone).
fn delete_rows(conn: &Connection, sid: i64) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM fts WHERE rowid IN (SELECT rowid FROM docs WHERE sid = ?1)",
        [sid],
    )?;
    conn.execute("DELETE FROM docs WHERE sid = ?1", [sid])?;
    conn.execute("DELETE FROM entries WHERE sid = ?1", [sid])?;
    conn.execute("DELETE FROM tool_uses WHERE sid = ?1", [sid])?;
    Ok(())
}

fn delete_session(conn: &Connection, sid: i64) -> rusqlite::Result<()> {
    delete_rows(conn, sid)?;
    conn.execute("DELETE FROM sessions WHERE sid = ?1", params![sid])?;
    Ok(())
}

#[cfg(test)]
mod tests;
