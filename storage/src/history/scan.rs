//! Refreshing the index from a store: which sessions changed, and feeding their new lines.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use pi_formats::jsonl::is_blank;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

use super::extract::extract;
use super::{delete_rows, delete_session, HistoryIndex, Progress};
use crate::error::{StoreError, StoreResult};
use crate::ids::{EntryId, SessionId};
use crate::jsonl::{JsonlLayout, JsonlStore};
use crate::paths::resolve_cwd;
use crate::record::SessionHeader;
use crate::store::SessionStore;
use crate::summary::{ListScope, SummaryState};

/// How much of a file is compared to tell an append from a rewrite.
const HEAD_BYTES: usize = 4096;
/// Read size for session files; lines longer than this grow the buffer.
const CHUNK: u64 = 8 << 20;

/// What a JSONL refresh brings up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Parts {
    /// The summary columns only (listing).
    Summaries,
    /// Summaries, full-text rows and statistics.
    All,
}

/// What a refresh did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RefreshReport {
    /// Sessions (files) looked at.
    pub sessions_seen: u64,
    /// Sessions read from, incrementally or whole.
    pub sessions_updated: u64,
    /// Sessions indexed again from the start (new, rewritten or shrunk).
    pub sessions_reindexed: u64,
    /// Sessions gone from the store and dropped from the index.
    pub sessions_removed: u64,
    /// Entry lines read.
    pub lines_read: u64,
    /// Bytes of session files read (JSONL only).
    pub bytes_read: u64,
}

/// The running part of a session's index row, carried from one refresh to the next so an
/// appended tail continues where the last refresh stopped.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RunState {
    summary: SummaryState,
    /// The model of the latest `model_change` or assistant message: what user and tool rows
    /// are attributed to.
    provider: Option<String>,
    model: Option<String>,
    /// The first parsed line was not a header: Pi does not read such a file as a session.
    not_session: bool,
}

/// The stored row of one session, as a refresh needs it.
struct Known {
    sid: i64,
    size: i64,
    mtime_ns: i64,
    offset: i64,
    text_offset: i64,
    head: Vec<u8>,
    boundary: Option<i64>,
    cursor: Option<String>,
    state: RunState,
    header: Option<Vec<u8>>,
}

fn read_known(conn: &Connection, key: &str) -> rusqlite::Result<Option<Known>> {
    conn.query_row(
        "SELECT sid, size, mtime_ns, offset, head, boundary, cursor, state, header, text_offset
         FROM sessions WHERE key = ?1",
        [key],
        |r| {
            Ok(Known {
                sid: r.get(0)?,
                size: r.get(1)?,
                mtime_ns: r.get(2)?,
                offset: r.get(3)?,
                head: r.get::<_, Option<Vec<u8>>>(4)?.unwrap_or_default(),
                boundary: r.get(5)?,
                cursor: r.get(6)?,
                // A state we cannot read only costs a re-index of the session.
                state: serde_json::from_str(&r.get::<_, String>(7)?).unwrap_or_default(),
                header: r.get(8)?,
                text_offset: r.get(9)?,
            })
        },
    )
    .optional()
}

/// Where the text and statistics rows a [`Feeder`] makes go.
trait RowSink {
    fn row(&mut self, sid: i64, row: Row) -> rusqlite::Result<()>;
}

/// One entry's rows, ready to write: what [`extract`] found and the model it is
/// attributed to.
struct Row {
    x: super::extract::Extracted,
    provider: Option<String>,
    model: Option<String>,
    /// Where the entry's line starts in its session file, and its length (JSONL only).
    at: Option<(u64, usize)>,
}

/// Rows are written at once, on this thread.
impl RowSink for Inserts<'_> {
    fn row(&mut self, sid: i64, row: Row) -> rusqlite::Result<()> {
        self.row(sid, &row)
    }
}

/// Summaries only: no rows are made.
struct NoRows;

impl RowSink for NoRows {
    fn row(&mut self, _: i64, _: Row) -> rusqlite::Result<()> {
        Ok(())
    }
}

/// Rows handed in batches to the thread that writes them (see [`feed_pipelined`] and
/// [`parse_ahead`]).
struct Queue {
    to: std::sync::mpsc::SyncSender<Piece>,
    batch: Vec<Row>,
    /// Bytes of entry lines behind the rows in `batch`.
    batch_bytes: usize,
}

/// Rows per batch: large enough that the channel costs nothing per row.
const BATCH_ROWS: usize = 256;
/// Bytes of entry lines per batch, at most (one larger line makes a batch of its own):
/// what bounds the memory a file parsed ahead holds, with [`PIECES_AHEAD`].
const BATCH_LINE_BYTES: usize = 256 << 10;

impl Queue {
    fn new(to: std::sync::mpsc::SyncSender<Piece>) -> Queue {
        Queue {
            to,
            batch: Vec::with_capacity(BATCH_ROWS),
            batch_bytes: 0,
        }
    }

    fn flush(&mut self) {
        if !self.batch.is_empty() {
            self.batch_bytes = 0;
            // A closed channel means the writer stopped (an error, or it indexes the
            // file itself); it reports what needs reporting.
            let _ = self.to.send(Piece::Rows(std::mem::take(&mut self.batch)));
        }
    }
}

impl RowSink for Queue {
    fn row(&mut self, _: i64, row: Row) -> rusqlite::Result<()> {
        self.batch_bytes += row.at.map_or(0, |(_, len)| len);
        self.batch.push(row);
        if self.batch.len() >= BATCH_ROWS || self.batch_bytes >= BATCH_LINE_BYTES {
            self.flush();
        }
        Ok(())
    }
}

/// The statements that write an entry's rows, taken from the connection's cache once per
/// file rather than once per row (looking a statement up hashes its SQL: 4% of a build).
pub(super) struct Inserts<'c> {
    docs: rusqlite::CachedStatement<'c>,
    fts: rusqlite::CachedStatement<'c>,
    entries: rusqlite::CachedStatement<'c>,
    pub(super) call: rusqlite::CachedStatement<'c>,
    pub(super) answer: rusqlite::CachedStatement<'c>,
}

impl<'c> Inserts<'c> {
    fn new(conn: &'c Connection) -> rusqlite::Result<Inserts<'c>> {
        let (call, answer) = super::views::statements(conn)?;
        Ok(Inserts {
            docs: conn.prepare_cached(
                "INSERT INTO docs(sid, entry_id, ts_ms, role, kind, provider, model,
                                  tool_name, is_error, line_offset, line_len, part, text)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )?,
            fts: conn.prepare_cached("INSERT INTO fts(rowid, text) VALUES (?1, ?2)")?,
            entries: conn.prepare_cached(
                "INSERT INTO entries(sid, entry_id, ts_ms, role, provider, model, tool_calls,
                     tool_errors, errors, input, output, cache_read, cache_write, cost)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )?,
            call,
            answer,
        })
    }

    /// Writes one entry's text rows, tool uses and statistics row.
    fn row(&mut self, sid: i64, row: &Row) -> rusqlite::Result<()> {
        let Row {
            x,
            provider,
            model,
            at,
        } = row;
        for (i, part) in x.parts.iter().enumerate() {
            let rowid = self.docs.insert(params![
                sid,
                x.id,
                x.timestamp_ms,
                part.role,
                part.kind,
                provider,
                model,
                part.tool_name,
                part.is_error,
                at.map(|(a, _)| a as i64),
                at.map(|(_, len)| len as i64),
                i as i64,
                if at.is_none() { Some(&part.text) } else { None },
            ])?;
            self.fts.execute(params![rowid, part.text])?;
        }
        super::views::record(self, sid, x, provider.as_deref(), model.as_deref())?;
        if x.has_stats() {
            let u = x.usage.unwrap_or_default();
            self.entries.execute(params![
                sid,
                x.id,
                x.timestamp_ms,
                x.message_role,
                provider,
                model,
                x.tool_calls,
                x.tool_errors,
                x.error,
                u.input,
                u.output,
                u.cache_read,
                u.cache_write,
                u.cost
            ])?;
        }
        Ok(())
    }
}

/// Folds a session's lines into its summary and running state, and turns them into rows
/// for a [`RowSink`]. It holds no connection, so it can run on another thread than the
/// one writing the rows.
struct Feeder {
    sid: i64,
    state: RunState,
    header: Option<SessionHeader>,
    cursor: Option<String>,
    lines: u64,
    /// Fold lines into the summary.
    summary: bool,
    /// Put lines into the text rows and statistics.
    text: bool,
}

impl Feeder {
    /// One line of a session file that starts at byte `at`.
    fn line(&mut self, line: &[u8], at: u64, sink: &mut dyn RowSink) -> rusqlite::Result<()> {
        self.lines += 1;
        if self.header.is_none() {
            if self.state.not_session || is_blank(line) {
                return Ok(());
            }
            match SessionHeader::parse(line.to_vec()) {
                Ok(h) => self.header = Some(h),
                // Like Pi: unparsable lines before the header are skipped; a parsed line that
                // is not a header means the file is not a session.
                Err(_) if serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok() => {
                    self.state.not_session = true
                }
                Err(_) => {}
            }
            return Ok(());
        }
        if self.summary {
            self.state.summary.observe(line);
        }
        if self.text {
            self.entry(line, Some(at), sink)?;
        }
        Ok(())
    }

    /// Turns one entry line into its text rows and statistics. `at` is where the line
    /// starts in its session file, which is all a text row needs to find its text again; a
    /// line from a database store (`None`) has no such place, and its rows keep the text.
    fn entry(
        &mut self,
        line: &[u8],
        at: Option<u64>,
        sink: &mut dyn RowSink,
    ) -> rusqlite::Result<()> {
        let Some(x) = extract(line) else {
            return Ok(());
        };
        if let Some(id) = &x.id {
            self.cursor = Some(id.clone());
        }
        if let Some((p, m)) = &x.model_change {
            self.state.provider = Some(p.clone());
            self.state.model = Some(m.clone());
        }
        let provider = x.provider.clone().or_else(|| self.state.provider.clone());
        let model = x.model.clone().or_else(|| self.state.model.clone());
        if x.message_role == Some("assistant") && x.model.is_some() {
            self.state.provider = provider.clone();
            self.state.model = model.clone();
        }
        sink.row(
            self.sid,
            Row {
                x,
                provider,
                model,
                at: at.map(|a| (a, line.len())),
            },
        )
    }

    /// Writes the session row's summary columns and running state.
    fn finish(
        &self,
        conn: &Connection,
        location: &str,
        fallback_modified_ms: i64,
    ) -> rusqlite::Result<()> {
        let summary = self.header.as_ref().and_then(|h| {
            self.state
                .summary
                .finish(h, location.to_string(), fallback_modified_ms)
        });
        let cwd = self.header.as_ref().and_then(|h| h.cwd()).unwrap_or("");
        let state = serde_json::to_string(&self.state).unwrap_or_else(|_| "{}".into());
        conn.prepare_cached(
            "UPDATE sessions SET session_id = ?2, cwd = ?3, cwd_key = ?4, header = ?5,
                     cursor = ?6, state = ?7, listable = ?8, name = ?9, parent_session = ?10,
                     created_ms = ?11, modified_ms = ?12, entry_count = ?13,
                     message_count = ?14, first_message = ?15
                 WHERE sid = ?1",
        )?
        .execute(params![
            self.sid,
            self.header.as_ref().map(|h| h.id().as_str()),
            cwd,
            if cwd.is_empty() {
                String::new()
            } else {
                resolve_cwd(cwd)
            },
            self.header.as_ref().map(|h| h.line()),
            self.cursor,
            state,
            summary.is_some(),
            summary.as_ref().and_then(|s| s.name.clone()),
            summary.as_ref().and_then(|s| s.parent_session.clone()),
            summary.as_ref().and_then(|s| s.created_ms),
            summary
                .as_ref()
                .map_or(fallback_modified_ms, |s| s.modified_ms),
            self.state.summary.entry_count as i64,
            self.state.summary.message_count as i64,
            summary.as_ref().and_then(|s| s.first_message.clone()),
        ])?;
        Ok(())
    }
}

/// A session file, its directory and (for a plain file) its metadata, taken while listing.
type Listed = (PathBuf, String, Option<fs::Metadata>);

/// Every `*.jsonl` file of a layout with its directory, as [`JsonlStore`] lists them
/// (symlinks leading out of the store are skipped, see `crate::walk`).
fn list_files(layout: &JsonlLayout) -> StoreResult<Vec<Listed>> {
    let (root, dirs) = match layout {
        JsonlLayout::Flat { dir } => (dir, vec![dir.clone()]),
        JsonlLayout::PerCwd { root } => (root, crate::walk::cwd_dirs(root)?),
    };
    let mut files = Vec::new();
    let per_cwd = matches!(layout, JsonlLayout::PerCwd { .. });
    for dir in dirs {
        let name = dir.display().to_string();
        let mut paths = match crate::walk::session_files_stat(root, &dir) {
            Ok(paths) => paths,
            // Like Pi's listAll: one unreadable cwd directory hides its sessions, not all.
            Err(_) if per_cwd => continue,
            Err(e) => return Err(e),
        };
        // The directories come sorted; sorting each one's files by their bytes gives the
        // order of sorting every path by components, without comparing components (which
        // was a tenth of a search over 1,000 sessions).
        paths.sort_unstable_by(|a, b| a.0.as_os_str().cmp(b.0.as_os_str()));
        files.extend(
            paths
                .into_iter()
                .map(|(path, meta)| (path, name.clone(), meta)),
        );
    }
    Ok(files)
}

fn db_err(index: &HistoryIndex, action: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    let index = index.location();
    move |e| StoreError::db(action, index.clone(), e)
}

/// (sid, size, mtime_ns, whether the text rows lag behind the summary) per file key.
type KnownMarks = HashMap<String, (i64, i64, i64, bool)>;

/// The watermarks a refresh starts from, and the `data_version` they were read at.
#[derive(Debug)]
pub(super) struct Marks {
    data_version: i64,
    known: KnownMarks,
}

fn read_marks(conn: &Connection, key: Option<&str>) -> rusqlite::Result<KnownMarks> {
    let sql = "SELECT key, sid, size, mtime_ns, text_offset < offset FROM sessions";
    let map = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)));
    match key {
        None => conn.prepare_cached(sql)?.query_map([], map)?.collect(),
        Some(key) => conn
            .prepare_cached(&format!("{sql} WHERE key = ?1"))?
            .query_map([key], map)?
            .collect(),
    }
}

/// Which files of a JSONL store a refresh looks at.
#[derive(Clone, Copy)]
pub(super) enum Scope<'a> {
    /// Every file of the store (a walk of its directories and a `stat` per file).
    Every,
    /// Only these paths, reported changed (created, written, renamed or deleted) since the
    /// last refresh; no other file is looked at.
    Only(&'a [PathBuf]),
}

/// The session files among `paths` that exist, as [`list_files`] lists them: `*.jsonl` files
/// directly in a store directory (the flat directory, or a cwd directory under the root).
fn list_only(layout: &JsonlLayout, paths: &[PathBuf]) -> Vec<Listed> {
    let in_store = |dir: &Path| match layout {
        JsonlLayout::Flat { dir: flat } => dir == flat,
        JsonlLayout::PerCwd { root } => dir.parent() == Some(root.as_path()),
    };
    let mut files: Vec<Listed> = paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|p| {
            let dir = p.parent().filter(|d| in_store(d))?;
            // Not a symlink: the walk skips those that lead out of the store, and a
            // watcher's report does not say where one leads.
            let meta = fs::symlink_metadata(p).ok().filter(|m| m.is_file())?;
            Some((p.clone(), dir.display().to_string(), Some(meta)))
        })
        .collect();
    files.sort_unstable_by(|a, b| a.0.as_os_str().cmp(b.0.as_os_str()));
    files.dedup_by(|a, b| a.0 == b.0);
    files
}

pub(super) fn refresh_jsonl(
    index: &mut HistoryIndex,
    store: &JsonlStore,
    parts: Parts,
    scope: Scope<'_>,
) -> StoreResult<RefreshReport> {
    let files = match scope {
        Scope::Every => list_files(store.layout())?,
        Scope::Only(paths) => list_only(store.layout(), paths),
    };
    let mut report = RefreshReport::default();
    let err = db_err(index, "read history index");
    let data_version: i64 = index
        .conn
        .pragma_query_value(None, "data_version", |r| r.get(0))
        .map_err(&err)?;
    // Another connection committed since the last refresh through this handle (or there
    // was none): read every watermark; else the ones kept from last time are current.
    let cached = index.marks.take();
    let mut known = match cached {
        Some(m) if m.data_version == data_version => m.known,
        _ => read_marks(&index.conn, None).map_err(&err)?,
    };
    // Each file's key, made once (`to_string_lossy` is what `display` prints, without
    // the formatting machinery: a tenth of an unchanged refresh went to making keys).
    let keys: Vec<String> = files
        .iter()
        .map(|(p, ..)| p.to_string_lossy().into_owned())
        .collect();
    let on_disk: HashSet<&str> = keys.iter().map(String::as_str).collect();
    // With a list of changed paths, only those can be gone.
    let looked_at: Option<HashSet<String>> = match scope {
        Scope::Every => None,
        Scope::Only(paths) => Some(
            paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
        ),
    };
    let gone: Vec<(String, i64)> = known
        .iter()
        .filter(|(key, _)| !on_disk.contains(key.as_str()))
        .filter(|(key, _)| looked_at.as_ref().is_none_or(|l| l.contains(key.as_str())))
        .map(|(key, &(sid, ..))| (key.clone(), sid))
        .collect();
    for (key, sid) in gone {
        remove(index, sid)?;
        known.remove(&key);
        report.sessions_removed += 1;
    }
    let mut todo: Vec<Todo<'_>> = Vec::new();
    let mut to_read = 0u64;
    for ((path, dir, listed), key) in files.iter().zip(keys) {
        report.sessions_seen += 1;
        // A file that vanished or cannot be read is not a session (as in Pi's listing).
        let meta = match listed {
            Some(meta) => meta.clone(),
            None => match fs::metadata(path) {
                Ok(meta) => meta,
                Err(_) => continue,
            },
        };
        let size = meta.len() as i64;
        let mtime_ns = mtime_ns(&meta);
        if let Some(&(_, s, m, text_behind)) = known.get(&key) {
            if s == size && m == mtime_ns && (parts == Parts::Summaries || !text_behind) {
                continue;
            }
        }
        // What this file adds to the bytes to read: from its last size, or from the start
        // when its text rows are behind (a listing folded it, nothing indexed its text).
        let from = match known.get(&key) {
            Some(&(_, s, _, text_behind)) if parts == Parts::Summaries || !text_behind => s,
            _ => 0,
        };
        to_read += (size - from).max(0) as u64;
        todo.push((path, key, dir, size, mtime_ns));
    }
    // Summaries only: the files are read and folded on every core, and only the short
    // row updates are serialized. Text rows are inserted on one thread, in order, and
    // parsed ahead of it on others (`index_text`).
    let mut folded = if parts == Parts::Summaries && todo.len() > 1 {
        fold_summaries(index, &todo).map_err(&err)?
    } else {
        Vec::new()
    };
    folded.resize_with(todo.len(), || None);
    let mut batch = WriteBatch::default();
    let mut told = Told {
        progress: index.progress.take(),
        done: 0,
        total: to_read,
    };
    let indexed = (|| {
        if parts == Parts::All {
            index_text(index, &todo, &mut batch, &mut report, &mut known, &mut told)?;
            return batch.commit(index);
        }
        for ((path, key, dir, size, mtime_ns), fold) in todo.into_iter().zip(folded) {
            let applied = match fold {
                Some(fold) => {
                    // A folded summary is written in a transaction of its own.
                    batch.commit(index)?;
                    apply_summary(index, &key, fold, &mut report)?
                }
                None => false,
            };
            if !applied {
                batch.begin(index)?;
                let before = report.bytes_read;
                index_file(index, path, &key, dir, size, mtime_ns, parts, &mut report)?;
                batch.wrote(index, report.bytes_read - before)?;
            }
            match read_marks(&index.conn, Some(&key))
                .map_err(&err)?
                .remove(&key)
            {
                Some(mark) => known.insert(key, mark),
                None => known.remove(&key),
            };
        }
        batch.commit(index)
    })();
    index.progress = told.progress;
    if let Err(e) = indexed {
        batch.roll_back(index);
        return Err(e);
    }
    // Our own commits leave `data_version` as it was; kept for the next refresh.
    index.marks = Some(Marks {
        data_version,
        known,
    });
    Ok(report)
}

/// A file to bring up to date: path, key, directory, size, mtime (ns).
type Todo<'a> = (&'a Path, String, &'a str, i64, i64);

/// Checkpoints the index's WAL on a connection and thread of their own after each batch the
/// writer commits (`PASSIVE`: it copies what is committed and never waits for the writer),
/// instead of the writer's automatic checkpoints, which stopped its inserts for the copy:
/// 4% of a build's time on the writer. [`Checkpoints::finish`] gives them back.
struct Checkpoints {
    to: std::sync::mpsc::SyncSender<()>,
}

impl Checkpoints {
    fn start<'scope>(
        scope: &'scope std::thread::Scope<'scope, '_>,
        index: &HistoryIndex,
    ) -> Option<Checkpoints> {
        let own = Connection::open(&index.path).ok()?;
        own.busy_timeout(std::time::Duration::from_secs(10)).ok()?;
        index
            .conn
            .pragma_update(None, "wal_autocheckpoint", 0)
            .ok()?;
        let (to, from) = std::sync::mpsc::sync_channel::<()>(1);
        scope.spawn(move || {
            for () in from {
                // A checkpoint that cannot finish now is finished by a later one, or when
                // the last connection closes.
                let _ = own.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        });
        Some(Checkpoints { to })
    }

    /// A batch was committed: copy it over (unless a copy is under way already).
    fn committed(&self) {
        let _ = self.to.try_send(());
    }
}

impl Checkpoints {
    /// Gives the checkpoints back to `writer` (its automatic ones) and ends the thread.
    fn finish(self, writer: &Connection) {
        let _ = writer.pragma_update(None, "wal_autocheckpoint", super::WAL_AUTOCHECKPOINT);
    }
}

/// How far a refresh's reading has come, for the index's [`Progress`] (text refreshes).
struct Told {
    progress: Option<Progress>,
    done: u64,
    total: u64,
}

impl Told {
    /// `bytes` more were read.
    fn add(&mut self, bytes: u64) {
        self.done += bytes;
        if let Some(progress) = &mut self.progress {
            progress.tell(self.done.min(self.total), self.total);
        }
    }
}

/// Files handed to the parsing threads ahead of the one being written, at most.
const AHEAD_FILES: usize = 64;
/// What the files handed out ahead may hold in memory together, at most: each counts for
/// its size up to what its channel holds ([`PIECES_AHEAD`] batches).
const AHEAD_BYTES: u64 = 16 << 20;
/// Batches of rows a parsing thread makes of a file ahead of the writer before it waits.
const PIECES_AHEAD: usize = 16;

/// A file handed to a parsing thread, and where its pieces go.
struct ParseJob {
    path: PathBuf,
    size: i64,
    mtime_ns: i64,
    known: Option<Known>,
    to: std::sync::mpsc::SyncSender<Piece>,
}

/// A file handed out to be parsed: the row its plan was made from, and where its pieces
/// arrive.
struct Ahead {
    mark: Option<Mark>,
    from: std::sync::mpsc::Receiver<Piece>,
}

/// Indexes the text of `todo` in order, in [`WriteBatch`]es. Files are read, parsed and
/// extracted on parsing threads, up to [`AHEAD_FILES`] ahead and streamed in batches of
/// rows, and this thread, which holds the transaction, only inserts the rows, in the order
/// of `todo`: rows, rowids and sids are the ones indexing each file in turn makes. The
/// writer never waits at a file's start while a parsing thread keeps ahead. A single file
/// is indexed by [`index_file`] (on two threads of its own when it is large).
fn index_text(
    index: &mut HistoryIndex,
    todo: &[Todo<'_>],
    batch: &mut WriteBatch,
    report: &mut RefreshReport,
    known: &mut KnownMarks,
    told: &mut Told,
) -> StoreResult<()> {
    let err = db_err(index, "read history index");
    let parsers = if todo.len() > 1 {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .saturating_sub(1)
            .clamp(1, 3)
    } else {
        0
    };
    // What a file parsed ahead holds in memory at most (see [`AHEAD_BYTES`]).
    let held = |size: i64| (size.max(0) as u64).min(((PIECES_AHEAD + 1) * BATCH_LINE_BYTES) as u64);
    std::thread::scope(|scope| {
        let (jobs, queue) = std::sync::mpsc::sync_channel::<ParseJob>(AHEAD_FILES);
        let queue = std::sync::Arc::new(std::sync::Mutex::new(queue));
        for _ in 0..parsers {
            let queue = queue.clone();
            scope.spawn(move || loop {
                let job = match queue.lock() {
                    Ok(queue) => queue.recv(),
                    Err(_) => break,
                };
                let Ok(job) = job else { break };
                parse_ahead(&job.path, job.size, job.mtime_ns, job.known, &job.to);
            });
        }
        // Only the parsing threads hold the queue now: were they all gone, the jobs and
        // their senders would be dropped and the writer would index on its own.
        drop(queue);
        // Written rows are freed on a thread of their own: freeing what another thread
        // allocated takes that thread's allocator lock, which cost the writer ~4%.
        let (trash, bin) = std::sync::mpsc::channel::<Vec<Row>>();
        if parsers > 0 {
            scope.spawn(move || bin.into_iter().for_each(drop));
        } else {
            drop(bin);
        }
        // Per file handed out, in order (`None`: not handed out).
        let mut ahead: std::collections::VecDeque<Option<Ahead>> = Default::default();
        let mut ahead_bytes = 0u64;
        let mut next = 0;
        // With files parsed ahead there is a build's worth of work: committed batches are
        // copied into the database file on another connection and thread, while this one
        // goes on inserting.
        let checkpoints = (parsers > 0)
            .then(|| Checkpoints::start(scope, index))
            .flatten();
        let written = (|| -> StoreResult<()> {
            for &(path, ref key, dir, size, mtime_ns) in todo {
                while next < todo.len()
                    && ahead.len() < AHEAD_FILES
                    && (ahead_bytes < AHEAD_BYTES || ahead.is_empty())
                {
                    let (path, key, _, size, mtime_ns) = &todo[next];
                    next += 1;
                    let mut handed = None;
                    if parsers > 0 {
                        let k = read_known(&index.conn, key).map_err(&err)?;
                        if !up_to_date(k.as_ref(), *size, *mtime_ns, true) {
                            let (to, from) = std::sync::mpsc::sync_channel(PIECES_AHEAD);
                            let mark = k.as_ref().map(mark_of);
                            let job = ParseJob {
                                path: path.to_path_buf(),
                                size: *size,
                                mtime_ns: *mtime_ns,
                                known: k,
                                to,
                            };
                            if jobs.send(job).is_ok() {
                                ahead_bytes += held(*size);
                                handed = Some(Ahead { mark, from });
                            }
                        }
                    }
                    ahead.push_back(handed);
                }
                let handed = ahead.pop_front().flatten();
                batch.begin(index)?;
                let before = report.bytes_read;
                let told_before = told.done;
                match handed {
                    Some(handed) => {
                        ahead_bytes -= held(size);
                        let written = Written {
                            trash: &trash,
                            told: &mut *told,
                        };
                        write_ahead(
                            index, handed, written, path, key, dir, size, mtime_ns, report,
                        )?
                    }
                    None => index_file(index, path, key, dir, size, mtime_ns, Parts::All, report)?,
                }
                let read = report.bytes_read - before;
                if batch.wrote(index, read)? {
                    if let Some(checkpoints) = &checkpoints {
                        checkpoints.committed();
                    }
                }
                // The batches told counted lines; the file's own count is exact.
                told.done = told_before;
                told.add(read);
                match read_marks(&index.conn, Some(key))
                    .map_err(&err)?
                    .remove(key)
                {
                    Some(mark) => known.insert(key.clone(), mark),
                    None => known.remove(key),
                };
            }
            Ok(())
        })();
        if let Some(checkpoints) = checkpoints {
            checkpoints.finish(&index.conn);
        }
        written
    })
}

/// Bytes of session files indexed in one transaction. Every commit flushes FTS5's pending
/// terms into a new segment that later merges rewrite, and writes a WAL commit: a file a
/// transaction left most of a build's segments small and most of its time in merges.
/// (Tests commit every 64 KB, so that their builds span many batches and checkpoints.)
const BATCH_BYTES: u64 = if cfg!(test) { 64 << 10 } else { 64 << 20 };

/// The transaction that files are indexed in, spanning files until [`BATCH_BYTES`] were
/// read. It is `IMMEDIATE`, as a file's own was: two processes refreshing at once take
/// turns per batch, and the second one sees the first one's watermarks.
#[derive(Default)]
struct WriteBatch {
    open: bool,
    bytes: u64,
}

impl WriteBatch {
    fn begin(&mut self, index: &HistoryIndex) -> StoreResult<()> {
        if !self.open {
            index
                .conn
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(db_err(index, "update history index"))?;
            self.open = true;
        }
        Ok(())
    }

    /// Counts `bytes` read into the batch; commits it once it holds [`BATCH_BYTES`], and
    /// then says so.
    fn wrote(&mut self, index: &HistoryIndex, bytes: u64) -> StoreResult<bool> {
        self.bytes += bytes;
        if self.bytes >= BATCH_BYTES {
            self.commit(index)?;
            return Ok(true);
        }
        Ok(false)
    }

    fn commit(&mut self, index: &HistoryIndex) -> StoreResult<()> {
        if std::mem::take(&mut self.open) {
            self.bytes = 0;
            index
                .conn
                .execute_batch("COMMIT")
                .map_err(db_err(index, "update history index"))?;
        }
        Ok(())
    }

    /// After a failure: nothing of the batch stays (the files are indexed again next time).
    fn roll_back(&mut self, index: &HistoryIndex) {
        if std::mem::take(&mut self.open) {
            let _ = index.conn.execute_batch("ROLLBACK");
        }
    }
}

/// A file's summary folded off the database thread: what its row said when the fold
/// started, and the row's new summary and watermark.
struct Folded {
    /// (sid, size, mtime_ns, offset) of the row the fold continued; `None` for a new file.
    from: Option<(i64, i64, i64, i64)>,
    /// The indexed prefix was not the file's any more: the fold started over at 0.
    restarted: bool,
    dir: String,
    location: String,
    size: i64,
    mtime_ns: i64,
    state: RunState,
    header: Option<SessionHeader>,
    cursor: Option<String>,
    lines: u64,
    consumed: u64,
    boundary: Option<i64>,
    head: Vec<u8>,
}

/// Reads and folds the summaries of `todo` on every core; `None` where a file could not
/// be read (it is then handled like before, by [`index_file`]).
fn fold_summaries(
    index: &HistoryIndex,
    todo: &[Todo<'_>],
) -> rusqlite::Result<Vec<Option<Folded>>> {
    let mut knowns = Vec::with_capacity(todo.len());
    for (_, key, ..) in todo {
        knowns.push(std::sync::Mutex::new(read_known(&index.conn, key)?));
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4)
        .min(todo.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Folded>>> =
        todo.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(path, _, dir, size, mtime_ns)) = todo.get(i) else {
                    break;
                };
                let known = knowns[i].lock().map(|mut k| k.take()).unwrap_or(None);
                let fold = fold_one(path, dir, size, mtime_ns, known);
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = fold;
                }
            });
        }
    });
    Ok(slots
        .into_iter()
        .map(|s| s.into_inner().unwrap_or(None))
        .collect())
}

fn fold_one(
    path: &Path,
    dir: &str,
    size: i64,
    mtime_ns: i64,
    known: Option<Known>,
) -> Option<Folded> {
    let mut file = File::open(path).ok()?;
    let (from, restarted, offset, state, header, cursor, head) = match known {
        Some(k) if same_prefix(&mut file, &k, size, mtime_ns) => {
            let header = k.header.and_then(|h| SessionHeader::parse(h).ok());
            let from = Some((k.sid, k.size, k.mtime_ns, k.offset));
            (from, false, k.offset, k.state, header, k.cursor, k.head)
        }
        Some(k) => (
            Some((k.sid, k.size, k.mtime_ns, k.offset)),
            true,
            0,
            RunState::default(),
            None,
            None,
            Vec::new(),
        ),
        None => (None, false, 0, RunState::default(), None, None, Vec::new()),
    };
    let mut feeder = Feeder {
        sid: from.map_or(0, |f| f.0),
        state,
        header,
        cursor,
        lines: 0,
        summary: true,
        text: false,
    };
    let (consumed, boundary) = feed_tail(
        &mut file,
        offset as u64,
        size as u64,
        &mut feeder,
        &mut NoRows,
    )
    .ok()?;
    let want_head = (consumed as usize).min(HEAD_BYTES);
    let head = if head.len() < want_head {
        let mut h = vec![0; want_head];
        file.seek(SeekFrom::Start(0)).ok()?;
        file.read_exact(&mut h).ok()?;
        h
    } else {
        head
    };
    Some(Folded {
        from,
        restarted,
        dir: dir.to_string(),
        location: path.display().to_string(),
        size,
        mtime_ns,
        state: feeder.state,
        header: feeder.header,
        cursor: feeder.cursor,
        lines: feeder.lines,
        consumed,
        boundary,
        head,
    })
}

/// Writes a folded summary in one transaction, if the row is still the one the fold
/// started from (else another process got there first: `false`, and the caller indexes
/// the file the ordinary way).
fn apply_summary(
    index: &mut HistoryIndex,
    key: &str,
    fold: Folded,
    report: &mut RefreshReport,
) -> StoreResult<bool> {
    let location = index.location();
    let err = |e| StoreError::db("update history index", location.clone(), e);
    let tx = index
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let now = read_known(&tx, key)
        .map_err(err)?
        .map(|k| (k.sid, k.size, k.mtime_ns, k.offset));
    if now != fold.from {
        return Ok(false);
    }
    let sid = match fold.from {
        Some((sid, ..)) => {
            if fold.restarted {
                delete_rows(&tx, sid).map_err(err)?;
                report.sessions_reindexed += 1;
            }
            sid
        }
        None => {
            tx.execute(
                "INSERT INTO sessions(key, dir, location) VALUES (?1, ?2, ?3)",
                params![key, fold.dir, fold.location],
            )
            .map_err(err)?;
            report.sessions_reindexed += 1;
            tx.last_insert_rowid()
        }
    };
    report.sessions_updated += 1;
    report.lines_read += fold.lines;
    let start = match fold.from {
        Some((_, _, _, offset)) if !fold.restarted => offset as u64,
        _ => 0,
    };
    report.bytes_read += fold.consumed - start;
    let feeder = Feeder {
        sid,
        state: fold.state,
        header: fold.header,
        cursor: fold.cursor,
        lines: fold.lines,
        summary: true,
        text: false,
    };
    feeder
        .finish(&tx, &fold.location, fold.mtime_ns / 1_000_000)
        .map_err(err)?;
    // A restarted file's text rows are gone: its text starts over at 0 too.
    tx.execute(
        "UPDATE sessions SET size = ?2, mtime_ns = ?3, offset = ?4, head = ?5,
             boundary = coalesce(?6, boundary),
             text_offset = CASE WHEN ?7 THEN 0 ELSE text_offset END
         WHERE sid = ?1",
        params![
            sid,
            fold.size,
            fold.mtime_ns,
            fold.consumed as i64,
            fold.head,
            fold.boundary,
            fold.restarted
        ],
    )
    .map_err(err)?;
    drop(feeder);
    tx.commit().map_err(err)?;
    Ok(true)
}

fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64)
}

fn remove(index: &mut HistoryIndex, sid: i64) -> StoreResult<()> {
    let err = db_err(index, "drop a deleted session from the history index");
    let tx = index
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(&err)?;
    delete_session(&tx, sid).map_err(&err)?;
    tx.commit().map_err(&err)
}

/// Whether the indexed part of a file is still what the file starts with.
fn same_prefix(file: &mut File, known: &Known, size: i64, mtime_ns: i64) -> bool {
    if size < known.offset || (size == known.size && mtime_ns != known.mtime_ns) {
        return false;
    }
    let mut head = vec![0; known.head.len()];
    if file.seek(SeekFrom::Start(0)).is_err() || file.read_exact(&mut head).is_err() {
        return false;
    }
    if head != known.head {
        return false;
    }
    match (known.offset, known.boundary) {
        (0, _) => true,
        (offset, Some(byte)) => {
            let mut b = [0u8];
            file.seek(SeekFrom::Start(offset as u64 - 1)).is_ok()
                && file.read_exact(&mut b).is_ok()
                && i64::from(b[0]) == byte
        }
        (_, None) => false,
    }
}

/// How a file's row is opened for new lines: continued from its watermark, emptied and
/// read again from the start (rewritten or shrunk), or made (a new file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    Continue(i64),
    Restart(i64),
    New,
}

/// What indexing a file's new lines starts from, decided from its stored row and its
/// first bytes only (no database access, so a worker thread can make it).
struct Plan {
    opening: Opening,
    feeder: Feeder,
    job: TailJob,
    /// The watermark the read starts at (0 when the file is read from the start).
    offset: u64,
    text_offset: i64,
    /// The stored first bytes of the file (empty when read from the start).
    head: Vec<u8>,
}

/// Whether a file's row is current: nothing to read.
fn up_to_date(known: Option<&Known>, size: i64, mtime_ns: i64, text: bool) -> bool {
    known.is_some_and(|k| {
        k.size == size && k.mtime_ns == mtime_ns && (!text || k.text_offset >= k.offset)
    })
}

/// The fields of a row that tell whether it is still the one a plan was made from.
/// The columns of a file's row a refresh plans from: a parse planned from another mark is
/// stale.
type Mark = (i64, i64, i64, i64, i64);

fn mark_of(known: &Known) -> Mark {
    (
        known.sid,
        known.size,
        known.mtime_ns,
        known.offset,
        known.text_offset,
    )
}

fn plan(file: &mut File, known: Option<Known>, size: i64, mtime_ns: i64, text: bool) -> Plan {
    let (opening, offset, text_offset, state, header, cursor, head) = match known {
        Some(k) if same_prefix(file, &k, size, mtime_ns) => {
            let header = k.header.and_then(|h| SessionHeader::parse(h).ok());
            (
                Opening::Continue(k.sid),
                k.offset,
                k.text_offset,
                k.state,
                header,
                k.cursor,
                k.head,
            )
        }
        Some(k) => (
            Opening::Restart(k.sid),
            0,
            0,
            RunState::default(),
            None,
            None,
            Vec::new(),
        ),
        None => (
            Opening::New,
            0,
            0,
            RunState::default(),
            None,
            None,
            Vec::new(),
        ),
    };
    let catch_up = text && text_offset < offset;
    let feeder = Feeder {
        sid: match opening {
            Opening::Continue(sid) | Opening::Restart(sid) => sid,
            Opening::New => 0,
        },
        state,
        // Text rows from the start re-read the header line as the first pass did.
        header: if catch_up && text_offset == 0 {
            None
        } else {
            header
        },
        cursor,
        lines: 0,
        summary: false,
        text: true,
    };
    Plan {
        opening,
        feeder,
        job: TailJob {
            catch_up: catch_up.then_some((text_offset as u64, offset as u64)),
            offset: offset as u64,
            size: size as u64,
            text,
        },
        offset: offset as u64,
        text_offset,
        head,
    }
}

impl TailJob {
    /// Where the read starts: the text rows' watermark when they catch up.
    fn from(&self) -> u64 {
        self.catch_up.map_or(self.offset, |(from, _)| from)
    }
}

/// Empties or makes a file's row as `opening` says; returns its sid.
fn open_row(
    tx: &Connection,
    opening: Opening,
    key: &str,
    dir: &str,
    location: &str,
    report: &mut RefreshReport,
) -> rusqlite::Result<i64> {
    let sid = match opening {
        Opening::Continue(sid) => sid,
        Opening::Restart(sid) => {
            delete_rows(tx, sid)?;
            report.sessions_reindexed += 1;
            sid
        }
        Opening::New => {
            tx.execute(
                "INSERT INTO sessions(key, dir, location) VALUES (?1, ?2, ?3)",
                params![key, dir, location],
            )?;
            report.sessions_reindexed += 1;
            tx.last_insert_rowid()
        }
    };
    report.sessions_updated += 1;
    Ok(sid)
}

/// The first bytes of a file kept in its row: `head` if it holds them already, else read.
fn head_of(file: &mut File, head: Vec<u8>, consumed: u64) -> std::io::Result<Vec<u8>> {
    let want_head = (consumed as usize).min(HEAD_BYTES);
    if head.len() < want_head {
        let mut h = vec![0; want_head];
        file.seek(SeekFrom::Start(0))?;
        file.read_exact(&mut h)?;
        Ok(h)
    } else {
        Ok(head)
    }
}

/// What reading a file's new lines ended with, for its row.
struct ReadEnd {
    consumed: u64,
    boundary: Option<i64>,
    head: Vec<u8>,
}

/// Writes a file's summary columns, running state and watermarks after its new lines.
#[allow(clippy::too_many_arguments)]
fn close_row(
    tx: &Connection,
    feeder: &Feeder,
    plan_offset: u64,
    text_offset: i64,
    text: bool,
    read: ReadEnd,
    location: &str,
    size: i64,
    mtime_ns: i64,
    report: &mut RefreshReport,
) -> rusqlite::Result<()> {
    let text_offset = if text {
        read.consumed as i64
    } else {
        text_offset
    };
    report.lines_read += feeder.lines;
    report.bytes_read += read.consumed - plan_offset;
    feeder.finish(tx, location, mtime_ns / 1_000_000)?;
    tx.execute(
        "UPDATE sessions SET size = ?2, mtime_ns = ?3, offset = ?4, head = ?5,
             boundary = coalesce(?6, boundary), text_offset = ?7
         WHERE sid = ?1",
        params![
            feeder.sid,
            size,
            mtime_ns,
            read.consumed as i64,
            read.head,
            read.boundary,
            text_offset
        ],
    )?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn index_file(
    index: &mut HistoryIndex,
    path: &Path,
    key: &str,
    dir: &str,
    size: i64,
    mtime_ns: i64,
    parts: Parts,
    report: &mut RefreshReport,
) -> StoreResult<()> {
    let location = index.location();
    let err = |e| StoreError::db("update history index", location.clone(), e);
    let Ok(mut file) = File::open(path) else {
        return Ok(());
    };
    // Inside the caller's IMMEDIATE [`WriteBatch`]: a second process refreshing at once
    // waits for it and sees the watermark below instead of indexing the same tail twice.
    // No savepoint of its own: FTS5 flushes its pending terms at every savepoint, which
    // would cut the batch into a segment per file again; a failure rolls the batch back.
    let tx = &index.conn;
    let known = read_known(tx, key).map_err(err)?;
    let text = parts == Parts::All;
    if up_to_date(known.as_ref(), size, mtime_ns, text) {
        return Ok(());
    }
    let path_display = path.display().to_string();
    let mut plan = plan(&mut file, known, size, mtime_ns, text);
    plan.feeder.sid = open_row(tx, plan.opening, key, dir, &path_display, report).map_err(err)?;
    let io = |e| StoreError::Io {
        action: "read",
        path: path.to_path_buf(),
        source: e,
    };
    let tail_err = |e| match e {
        TailError::Io(e) => io(e),
        TailError::Db(e) => err(e),
    };
    let job = plan.job;
    let (feeder, consumed, boundary) =
        if text && job.size.saturating_sub(job.from()) >= PIPELINE_BYTES {
            feed_pipelined(tx, &mut file, plan.feeder, job)
        } else {
            let mut inserts = Inserts::new(tx).map_err(err)?;
            feed_job(&mut file, plan.feeder, job, &mut inserts)
        }
        .map_err(tail_err)?;
    let head = head_of(&mut file, plan.head, consumed).map_err(io)?;
    let read = ReadEnd {
        consumed,
        boundary,
        head,
    };
    close_row(
        tx,
        &feeder,
        plan.offset,
        plan.text_offset,
        text,
        read,
        &path_display,
        size,
        mtime_ns,
        report,
    )
    .map_err(err)
}

/// Where [`write_ahead`] puts rows it wrote (freed on another thread) and tells progress.
struct Written<'a> {
    trash: &'a std::sync::mpsc::Sender<Vec<Row>>,
    told: &'a mut Told,
}

/// What a parsing thread sends of a file handed to it, in this order: `Start` (or
/// `Unopened`), `Rows` as they are made, then `End`; `Failed` stops the file anywhere.
enum Piece {
    /// The file could not be opened: the writer does what [`index_file`] does with it.
    Unopened,
    /// The plan made from the row as it was when the file was handed out.
    Start {
        plan_offset: u64,
        text_offset: i64,
        opening: Opening,
    },
    Rows(Vec<Row>),
    End {
        feeder: Box<Feeder>,
        read: ReadEnd,
    },
    Failed(std::io::Error),
}

/// Reads and parses a file's new lines from the row `known` (text rows and summary) on a
/// parsing thread, and sends what it makes to `to` (see [`Piece`]); stops early when the
/// writer no longer listens.
fn parse_ahead(
    path: &Path,
    size: i64,
    mtime_ns: i64,
    known: Option<Known>,
    to: &std::sync::mpsc::SyncSender<Piece>,
) {
    let Ok(mut file) = File::open(path) else {
        let _ = to.send(Piece::Unopened);
        return;
    };
    let plan = plan(&mut file, known, size, mtime_ns, true);
    let start = Piece::Start {
        plan_offset: plan.offset,
        text_offset: plan.text_offset,
        opening: plan.opening,
    };
    if to.send(start).is_err() {
        return;
    }
    let mut queue = Queue::new(to.clone());
    let fed = feed_job(&mut file, plan.feeder, plan.job, &mut queue);
    queue.flush();
    let end = match fed {
        Ok((feeder, consumed, boundary)) => match head_of(&mut file, plan.head, consumed) {
            Ok(head) => Piece::End {
                feeder: Box::new(feeder),
                read: ReadEnd {
                    consumed,
                    boundary,
                    head,
                },
            },
            Err(e) => Piece::Failed(e),
        },
        Err(TailError::Io(e)) => Piece::Failed(e),
        // A [`Queue`] takes every row.
        Err(TailError::Db(e)) => Piece::Failed(std::io::Error::other(e)),
    };
    let _ = to.send(end);
}

/// Writes what [`parse_ahead`] makes of a file as it arrives, if the file's row is still
/// the one the parse started from; else (another process indexed it meanwhile) indexes it
/// the ordinary way.
#[allow(clippy::too_many_arguments)]
fn write_ahead(
    index: &mut HistoryIndex,
    handed: Ahead,
    written: Written<'_>,
    path: &Path,
    key: &str,
    dir: &str,
    size: i64,
    mtime_ns: i64,
    report: &mut RefreshReport,
) -> StoreResult<()> {
    let location = index.location();
    let err = |e| StoreError::db("update history index", location.clone(), e);
    let io = |source| StoreError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let tx = &index.conn;
    let known = read_known(tx, key).map_err(err)?;
    if up_to_date(known.as_ref(), size, mtime_ns, true) {
        return Ok(());
    }
    if known.as_ref().map(mark_of) != handed.mark {
        return index_file(index, path, key, dir, size, mtime_ns, Parts::All, report);
    }
    let (plan_offset, text_offset, opening) = match handed.from.recv() {
        Ok(Piece::Start {
            plan_offset,
            text_offset,
            opening,
        }) => (plan_offset, text_offset, opening),
        Ok(Piece::Failed(e)) => return Err(io(e)),
        // Unopened, or the parsing thread panicked before starting: do it here.
        _ => return index_file(index, path, key, dir, size, mtime_ns, Parts::All, report),
    };
    let path_display = path.display().to_string();
    let sid = open_row(tx, opening, key, dir, &path_display, report).map_err(err)?;
    let mut inserts = Inserts::new(tx).map_err(err)?;
    let (mut feeder, read) = loop {
        match handed.from.recv() {
            Ok(Piece::Rows(rows)) => {
                let mut lines = 0;
                for row in &rows {
                    inserts.row(sid, row).map_err(err)?;
                    lines += row.at.map_or(0, |(_, len)| len as u64 + 1);
                }
                written.told.add(lines);
                // No one to free them only when the writer is ending anyway.
                let _ = written.trash.send(rows);
            }
            Ok(Piece::End { feeder, read }) => break (feeder, read),
            Ok(Piece::Failed(e)) => return Err(io(e)),
            // Rows are written already: the batch is rolled back with this error.
            Ok(Piece::Unopened | Piece::Start { .. }) | Err(_) => {
                return Err(io(std::io::Error::other("the parsing thread stopped")))
            }
        }
    };
    drop(inserts);
    feeder.sid = sid;
    close_row(
        tx,
        &feeder,
        plan_offset,
        text_offset,
        true,
        read,
        &path_display,
        size,
        mtime_ns,
        report,
    )
    .map_err(err)
}

/// What [`index_file`] reads of a file: the lines a listing folded into the summary only
/// (`catch_up`, text rows only), then the new lines from `offset` to `size`.
#[derive(Clone, Copy)]
struct TailJob {
    catch_up: Option<(u64, u64)>,
    offset: u64,
    size: u64,
    text: bool,
}

/// From how many bytes to read on a file's text rows are made on a second thread (see
/// [`feed_pipelined`]); an appended tail is smaller and is not worth the thread.
const PIPELINE_BYTES: u64 = 1 << 20;

/// Feeds a [`TailJob`]'s lines to `feeder` and its rows to `sink`; returns the feeder,
/// the offset after the last line and that line's last byte (see [`feed_tail`]).
fn feed_job(
    file: &mut File,
    mut feeder: Feeder,
    job: TailJob,
    sink: &mut dyn RowSink,
) -> Result<(Feeder, u64, Option<i64>), TailError> {
    if let Some((from, to)) = job.catch_up {
        // `to` ends a complete line, so this feeds exactly the lines listings folded.
        feed_tail(file, from, to, &mut feeder, sink)?;
    }
    feeder.summary = true;
    feeder.text = job.text;
    let (consumed, boundary) = feed_tail(file, job.offset, job.size, &mut feeder, sink)?;
    Ok((feeder, consumed, boundary))
}

/// [`feed_job`] with the reading, JSON parsing, summary fold and extraction on a second
/// thread, and only the SQLite inserts on this one (which holds the transaction). The
/// rows arrive in file order through a bounded channel, so the rows and their rowids are
/// the ones [`feed_job`] writes; the build is bound by FTS5's inserts, and this takes the
/// parsing (about a fifth of the work) off their thread.
fn feed_pipelined(
    conn: &Connection,
    file: &mut File,
    feeder: Feeder,
    job: TailJob,
) -> Result<(Feeder, u64, Option<i64>), TailError> {
    let sid = feeder.sid;
    let (to, from) = std::sync::mpsc::sync_channel::<Piece>(16);
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || {
            let mut queue = Queue::new(to);
            let fed = feed_job(file, feeder, job, &mut queue);
            queue.flush();
            fed
        });
        let written = (|| {
            let mut inserts = Inserts::new(conn)?;
            for piece in &from {
                if let Piece::Rows(rows) = piece {
                    rows.iter().try_for_each(|row| inserts.row(sid, row))?;
                }
            }
            Ok(())
        })();
        // If writing failed, the reader's sends fail from here on instead of waiting.
        drop(from);
        let fed = match reader.join() {
            Ok(fed) => fed,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        written.map_err(TailError::Db)?;
        fed
    })
}

enum TailError {
    Io(std::io::Error),
    Db(rusqlite::Error),
}

/// Feeds the complete lines between `offset` and `size`; returns the offset after the last
/// line fed and that line's last byte. An unterminated last line is fed only when it is
/// whole JSON (a writer that omits the final newline); a torn one waits for the rest.
fn feed_tail(
    file: &mut File,
    offset: u64,
    size: u64,
    feeder: &mut Feeder,
    sink: &mut dyn RowSink,
) -> Result<(u64, Option<i64>), TailError> {
    file.seek(SeekFrom::Start(offset)).map_err(TailError::Io)?;
    let mut reader = (&*file).take(size.saturating_sub(offset));
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK as usize);
    let mut pos = offset;
    let mut boundary = None;
    loop {
        let n = (&mut reader)
            .take(CHUNK)
            .read_to_end(&mut buf)
            .map_err(TailError::Io)?;
        let mut start = 0;
        while let Some(nl) = memchr::memchr(b'\n', &buf[start..]) {
            feeder
                .line(&buf[start..start + nl], pos + start as u64, sink)
                .map_err(TailError::Db)?;
            start += nl + 1;
            boundary = Some(i64::from(b'\n'));
        }
        if n == 0 {
            let rest = &buf[start..];
            if !rest.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(rest).is_ok() {
                feeder
                    .line(rest, pos + start as u64, sink)
                    .map_err(TailError::Db)?;
                boundary = rest.last().map(|&b| i64::from(b));
                start = buf.len();
            }
            return Ok((pos + start as u64, boundary));
        }
        buf.drain(..start);
        pos += start as u64;
    }
}

pub(super) fn refresh_store(
    index: &mut HistoryIndex,
    store: &dyn SessionStore,
) -> StoreResult<RefreshReport> {
    let mut report = RefreshReport::default();
    let ids = store.session_ids()?;
    let summaries: HashMap<SessionId, (u64, u64, i64, String)> = store
        .list_sessions(&ListScope::All)?
        .into_iter()
        .map(|s| {
            (
                s.id,
                (s.entry_count, s.message_count, s.modified_ms, s.location),
            )
        })
        .collect();
    let known: HashMap<String, (i64, i64, i64, bool)> = {
        let err = db_err(index, "read history index");
        let mut stmt = index
            .conn
            .prepare_cached("SELECT key, sid, entry_count, message_count, listable FROM sessions")
            .map_err(&err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<_>>())
            .map_err(&err)?;
        rows
    };
    let wanted: HashSet<&str> = ids.iter().map(SessionId::as_str).collect();
    for (key, (sid, ..)) in &known {
        if !wanted.contains(key.as_str()) {
            remove(index, *sid)?;
            report.sessions_removed += 1;
        }
    }
    for id in &ids {
        report.sessions_seen += 1;
        let summary = summaries.get(id);
        if let (Some(&(_, e, m, listable)), Some((se, sm, ..))) = (known.get(id.as_str()), summary)
        {
            // Appends only grow the counts a database store keeps per session.
            if listable && e as u64 == *se && m as u64 == *sm {
                continue;
            }
        }
        let (fallback, location) = summary
            .map(|(_, _, ms, loc)| (*ms, loc.clone()))
            .unwrap_or_else(|| (0, format!("{}#{id}", store.describe())));
        index_session(index, store, id, &location, fallback, &mut report)?;
    }
    Ok(report)
}

fn index_session(
    index: &mut HistoryIndex,
    store: &dyn SessionStore,
    id: &SessionId,
    location: &str,
    fallback_modified_ms: i64,
    report: &mut RefreshReport,
) -> StoreResult<()> {
    let loc = index.location();
    let err = |e| StoreError::db("update history index", loc.clone(), e);
    let tx = index
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    let known = read_known(&tx, id.as_str()).map_err(err)?;
    let tail = match known
        .as_ref()
        .and_then(|k| k.cursor.clone().map(|c| (k, c)))
    {
        Some((k, cursor)) => match store.read_after(id, &EntryId::new(cursor)) {
            Ok(entries) => Some((k, entries)),
            Err(StoreError::EntryNotFound { .. }) => None,
            Err(StoreError::SessionNotFound { .. }) => return tx.commit().map_err(err),
            Err(e) => return Err(e),
        },
        None => None,
    };
    let (feeder_parts, entries) = match tail {
        Some((k, entries)) => {
            let header = k.header.clone().and_then(|h| SessionHeader::parse(h).ok());
            ((k.sid, k.state.clone(), header, k.cursor.clone()), entries)
        }
        None => {
            let data = match store.read_session(id) {
                Ok(data) => data,
                Err(StoreError::SessionNotFound { .. }) => return tx.commit().map_err(err),
                Err(e) => return Err(e),
            };
            let sid = match &known {
                Some(k) => {
                    delete_rows(&tx, k.sid).map_err(err)?;
                    k.sid
                }
                None => {
                    tx.execute(
                        "INSERT INTO sessions(key, location) VALUES (?1, ?2)",
                        params![id.as_str(), location],
                    )
                    .map_err(err)?;
                    tx.last_insert_rowid()
                }
            };
            report.sessions_reindexed += 1;
            (
                (sid, RunState::default(), Some(data.header), None),
                data.entries,
            )
        }
    };
    let (sid, state, header, cursor) = feeder_parts;
    report.sessions_updated += 1;
    let mut feeder = Feeder {
        sid,
        state,
        header,
        cursor,
        lines: 0,
        summary: true,
        text: true,
    };
    let mut inserts = Inserts::new(&tx).map_err(err)?;
    for entry in &entries {
        feeder.lines += 1;
        feeder.state.summary.observe(entry.line());
        feeder
            .entry(entry.line(), None, &mut inserts)
            .map_err(err)?;
    }
    drop(inserts);
    report.lines_read += feeder.lines;
    feeder
        .finish(&tx, location, fallback_modified_ms)
        .map_err(err)?;
    tx.commit().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::SearchQuery;
    use crate::store::FsyncPolicy;

    fn user(id: &str, text: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}"}}}}"#
        )
    }

    fn append(path: &Path, line: &str) {
        use std::io::Write;
        let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
        writeln!(f, "{line}").unwrap();
    }

    fn stat(path: &Path) -> (i64, i64) {
        let meta = fs::metadata(path).unwrap();
        (meta.len() as i64, mtime_ns(&meta))
    }

    /// A file parsed ahead whose row another process wrote before the parse's rows were
    /// inserted: the parse is dropped, and the rows are neither lost nor doubled.
    #[test]
    fn a_parse_overtaken_by_another_process_is_not_written_twice() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("sessions");
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("s.jsonl");
        fs::write(
            &file,
            format!(
                "{}\n{}\n",
                r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
                user("u1", "first okapi")
            ),
        )
        .unwrap();
        let store = JsonlStore::open(JsonlLayout::Flat { dir: dir.clone() }, FsyncPolicy::Never);
        let at = tmp.path().join("history.sqlite");
        let mut a = HistoryIndex::open(&at, &store.describe()).unwrap();
        let mut b = HistoryIndex::open(&at, &store.describe()).unwrap();
        let key = file.to_string_lossy().into_owned();
        let dir_name = dir.display().to_string();
        let count =
            |index: &HistoryIndex, word: &str| index.search(&SearchQuery::new(word)).unwrap().len();
        let write = |a: &mut HistoryIndex, parsed: Ahead, (size, mtime): (i64, i64)| {
            let mut report = RefreshReport::default();
            a.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            let trash = std::sync::mpsc::channel().0;
            let mut told = Told {
                progress: None,
                done: 0,
                total: 0,
            };
            let written = Written {
                trash: &trash,
                told: &mut told,
            };
            write_ahead(
                a,
                parsed,
                written,
                &file,
                &key,
                &dir_name,
                size,
                mtime,
                &mut report,
            )
            .unwrap();
            a.conn.execute_batch("COMMIT").unwrap();
            report
        };
        // The file parsed whole, as a parsing thread does; returns it and its rows' count.
        let parse = |(size, mtime): (i64, i64), known: Option<Known>| {
            let mark = known.as_ref().map(mark_of);
            let (to, from) = std::sync::mpsc::sync_channel(64);
            parse_ahead(&file, size, mtime, known, &to);
            let pieces: Vec<Piece> = from.try_iter().collect();
            let rows: usize = pieces
                .iter()
                .map(|p| match p {
                    Piece::Rows(rows) => rows.len(),
                    _ => 0,
                })
                .sum();
            for piece in pieces {
                to.send(piece).unwrap();
            }
            (Ahead { mark, from }, rows)
        };

        // Parsed as a new file, which the other handle then indexes whole.
        let (size, mtime) = stat(&file);
        let (parsed, _) = parse((size, mtime), None);
        b.refresh_jsonl(&store).unwrap();
        let report = write(&mut a, parsed, (size, mtime));
        assert_eq!(report.sessions_updated, 0, "already current: {report:?}");
        assert_eq!(count(&a, "okapi"), 1);

        // Parsed as an append, overtaken by the other handle indexing a longer tail.
        append(&file, &user("u2", "second walrus"));
        let grown = stat(&file);
        let known = read_known(&a.conn, &key).unwrap();
        let (parsed, rows) = parse(grown, known);
        assert_eq!(rows, 1);
        append(&file, &user("u3", "third narwhal"));
        b.refresh_jsonl(&store).unwrap();
        let report = write(&mut a, parsed, grown);
        assert_eq!(report.sessions_updated, 1, "{report:?}");
        a.refresh_jsonl(&store).unwrap();
        for word in ["okapi", "walrus", "narwhal"] {
            assert_eq!((word, count(&a, word)), (word, 1));
            assert_eq!((word, count(&b, word)), (word, 1));
        }
    }
}
