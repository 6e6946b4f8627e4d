//! The SQLite backend: one database file in WAL mode, with a versioned schema.
//!
//! `schema_migrations` records which numbered migrations ran; opening applies the missing ones
//! in one transaction and refuses a database from a newer build. Tables (migration 1):
//! * `sessions`: one row per session: header line, resolved cwd (indexed), next sequence number,
//!   and the running summary (folded in on append, so listing reads only this table);
//! * `entries`: (session_id, seq) → entry id, parent id, type, line bytes; an index on
//!   (session_id, entry_id, seq) finds the last line with an id, so a path to the root is one
//!   keyed lookup per step.
//!
//! Durability maps onto `PRAGMA synchronous`: FULL for [`FsyncPolicy::EveryEntry`], NORMAL
//! (WAL written at commit, fsynced at checkpoint) for `TurnEnd`, OFF for `Never`. Several
//! processes may open the file; writers of one session exclude each other through `flock`ed
//! files in `<db>.locks/`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::error::{StoreError, StoreResult};
use crate::ids::{EntryId, SessionId};
use crate::lock::{lock_dir, lock_session, LockFile};
use crate::paths::resolve_cwd;
use crate::record::{check_lines, SessionData, SessionHeader, StoredEntry};
use crate::store::{FsyncPolicy, SessionStore, SessionWriter};
use crate::summary::{sort_summaries, ListScope, SessionSummary, SummaryState};

/// Numbered schema migrations, applied in order, each at most once.
const MIGRATIONS: &[(i64, &str)] = &[(
    1,
    "CREATE TABLE sessions (
        id               TEXT PRIMARY KEY,
        cwd_key          TEXT NOT NULL,
        header           BLOB NOT NULL,
        next_seq         INTEGER NOT NULL,
        stored_ms        INTEGER NOT NULL,
        entry_count      INTEGER NOT NULL,
        message_count    INTEGER NOT NULL,
        name             TEXT,
        first_message    TEXT,
        last_activity_ms REAL,
        unlistable       INTEGER NOT NULL
    );
    CREATE INDEX sessions_by_cwd ON sessions (cwd_key);
    CREATE TABLE entries (
        session_id TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        entry_id   TEXT,
        parent_id  TEXT,
        kind       TEXT NOT NULL,
        line       BLOB NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX entries_by_id ON entries (session_id, entry_id, seq);",
)];

/// Sessions in a SQLite database file.
#[derive(Debug)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    conn: Mutex<Connection>,
    path: PathBuf,
    fsync: FsyncPolicy,
}

impl Inner {
    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic mid-transaction rolls the transaction back on drop; the connection is fine.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn loc(&self) -> String {
        self.path.display().to_string()
    }

    fn loc_of(&self, id: &SessionId) -> String {
        format!("{}#{id}", self.path.display())
    }

    fn not_found(&self, id: &SessionId) -> StoreError {
        StoreError::SessionNotFound {
            id: id.clone(),
            store: format!("sqlite:{}", self.path.display()),
        }
    }

    fn parse_header(&self, id: &SessionId, line: Vec<u8>) -> StoreResult<SessionHeader> {
        SessionHeader::parse(line).map_err(|reason| StoreError::Corrupt {
            location: self.loc_of(id),
            reason: format!("stored header does not parse: {reason}"),
        })
    }
}

/// The running per-session numbers stored in `sessions`.
struct Row {
    next_seq: i64,
    summary: SummaryState,
}

fn read_row(conn: &Connection, id: &SessionId) -> rusqlite::Result<Option<Row>> {
    conn.prepare_cached(
        "SELECT next_seq, entry_count, message_count, name, first_message, last_activity_ms,
                unlistable
         FROM sessions WHERE id = ?1",
    )?
    .query_row([id.as_str()], |r| {
        Ok(Row {
            next_seq: r.get(0)?,
            summary: SummaryState {
                entry_count: r.get::<_, i64>(1)? as u64,
                message_count: r.get::<_, i64>(2)? as u64,
                name: r.get(3)?,
                first_message: r.get(4)?,
                last_activity_ms: r.get(5)?,
                unlistable: r.get(6)?,
            },
        })
    })
    .optional()
}

/// Inserts lines and folds them into the row; the caller commits.
fn append_rows(
    conn: &Connection,
    id: &SessionId,
    entries: &[StoredEntry],
    row: &mut Row,
) -> rusqlite::Result<()> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO entries (session_id, seq, entry_id, parent_id, kind, line)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for entry in entries {
        insert.execute(params![
            id.as_str(),
            row.next_seq,
            entry.id().map(EntryId::as_str),
            entry.parent_id().map(EntryId::as_str),
            entry.kind(),
            entry.line(),
        ])?;
        row.summary.observe(entry.line());
        row.next_seq += 1;
    }
    let s = &row.summary;
    conn.prepare_cached(
        "UPDATE sessions SET next_seq = ?2, entry_count = ?3, message_count = ?4, name = ?5,
                first_message = ?6, last_activity_ms = ?7, unlistable = ?8
         WHERE id = ?1",
    )?
    .execute(params![
        id.as_str(),
        row.next_seq,
        s.entry_count as i64,
        s.message_count as i64,
        s.name,
        s.first_message,
        s.last_activity_ms,
        s.unlistable,
    ])?;
    Ok(())
}

fn entry_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEntry> {
    Ok(StoredEntry::from_parts(
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
    ))
}

fn last_seq(conn: &Connection, id: &SessionId, entry: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached(
        "SELECT seq FROM entries WHERE session_id = ?1 AND entry_id = ?2
         ORDER BY seq DESC LIMIT 1",
    )?
    .query_row(params![id.as_str(), entry], |r| r.get(0))
    .optional()
}

fn session_exists(conn: &Connection, id: &SessionId) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .query_row([id.as_str()], |_| Ok(()))
        .optional()?
        .is_some())
}

impl SqliteStore {
    /// Opens the database at `path`, creating it and applying missing schema migrations.
    pub fn open(path: &Path, fsync: FsyncPolicy) -> StoreResult<SqliteStore> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                action: "create directory",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let loc = path.display().to_string();
        let err = |action: &'static str| {
            let loc = loc.clone();
            move |e: rusqlite::Error| StoreError::db(action, loc, e)
        };
        let mut conn = Connection::open(path).map_err(err("open database"))?;
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(err("configure database"))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err("configure database"))?;
        let synchronous = match fsync {
            FsyncPolicy::EveryEntry => "FULL",
            FsyncPolicy::TurnEnd => "NORMAL",
            FsyncPolicy::Never => "OFF",
        };
        conn.pragma_update(None, "synchronous", synchronous)
            .map_err(err("configure database"))?;
        migrate(&mut conn, &loc)?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                path: path.to_path_buf(),
                fsync,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> StoreResult<i64> {
        self.inner
            .conn()
            .query_row(
                "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                [],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::db("read schema version", self.inner.loc(), e))
    }
}

fn migrate(conn: &mut Connection, loc: &str) -> StoreResult<()> {
    let err = |e: rusqlite::Error| StoreError::db("migrate schema", loc, e);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    INTEGER PRIMARY KEY,
             applied_ms INTEGER NOT NULL
         );",
    )
    .map_err(err)?;
    let current: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )
        .map_err(err)?;
    let newest = MIGRATIONS.last().map_or(0, |m| m.0);
    if current > newest {
        return Err(StoreError::Corrupt {
            location: loc.to_string(),
            reason: format!("schema version {current}, this build knows up to {newest}"),
        });
    }
    for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        tx.execute_batch(sql).map_err(err)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_ms) VALUES (?1, ?2)",
            params![version, pi_formats::time::now_millis()],
        )
        .map_err(err)?;
    }
    tx.commit().map_err(err)
}

impl SessionStore for SqliteStore {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn describe(&self) -> String {
        format!("sqlite:{}", self.inner.path.display())
    }

    fn create_session(
        &self,
        header: &SessionHeader,
        entries: &[StoredEntry],
    ) -> StoreResult<Box<dyn SessionWriter>> {
        let inner = &self.inner;
        let id = header.id();
        check_lines(id, entries)?;
        // Checked before locking so that a live writer does not hide the better error;
        // checked again inside the transaction, which is what makes it safe.
        if self.contains(id)? {
            return Err(StoreError::SessionExists {
                id: id.clone(),
                location: inner.loc_of(id),
            });
        }
        let lock = lock_session(&lock_dir(&inner.path), id)?;
        let loc = inner.loc_of(id);
        let err = |e: rusqlite::Error| StoreError::db("create session", &loc, e);
        let mut conn = inner.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        if session_exists(&tx, id).map_err(err)? {
            return Err(StoreError::SessionExists {
                id: id.clone(),
                location: loc.clone(),
            });
        }
        tx.execute(
            "INSERT INTO sessions (id, cwd_key, header, next_seq, stored_ms, entry_count,
                                   message_count, unlistable)
             VALUES (?1, ?2, ?3, 0, ?4, 0, 0, 0)",
            params![
                id.as_str(),
                resolve_cwd(header.cwd().unwrap_or("")),
                header.line(),
                pi_formats::time::now_millis(),
            ],
        )
        .map_err(err)?;
        let mut row = Row {
            next_seq: 0,
            summary: SummaryState::default(),
        };
        append_rows(&tx, id, entries, &mut row).map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(Box::new(SqliteWriter {
            id: id.clone(),
            inner: Arc::clone(inner),
            _lock: lock,
        }))
    }

    fn open_writer(&self, id: &SessionId) -> StoreResult<Box<dyn SessionWriter>> {
        if !self.contains(id)? {
            return Err(self.inner.not_found(id));
        }
        let lock = lock_session(&lock_dir(&self.inner.path), id)?;
        Ok(Box::new(SqliteWriter {
            id: id.clone(),
            inner: Arc::clone(&self.inner),
            _lock: lock,
        }))
    }

    fn read_header(&self, id: &SessionId) -> StoreResult<SessionHeader> {
        let inner = &self.inner;
        let line: Option<Vec<u8>> = inner
            .conn()
            .prepare_cached("SELECT header FROM sessions WHERE id = ?1")
            .and_then(|mut s| s.query_row([id.as_str()], |r| r.get(0)).optional())
            .map_err(|e| StoreError::db("read header", inner.loc_of(id), e))?;
        inner.parse_header(id, line.ok_or_else(|| inner.not_found(id))?)
    }

    fn read_session(&self, id: &SessionId) -> StoreResult<SessionData> {
        let inner = &self.inner;
        let loc = inner.loc_of(id);
        let err = |e: rusqlite::Error| StoreError::db("read session", &loc, e);
        let mut conn = inner.conn();
        // One read transaction: header and entries come from the same snapshot.
        let tx = conn.transaction().map_err(err)?;
        let line: Option<Vec<u8>> = tx
            .prepare_cached("SELECT header FROM sessions WHERE id = ?1")
            .and_then(|mut s| s.query_row([id.as_str()], |r| r.get(0)).optional())
            .map_err(err)?;
        let header = inner.parse_header(id, line.ok_or_else(|| inner.not_found(id))?)?;
        let entries = tx
            .prepare_cached(
                "SELECT entry_id, parent_id, kind, line FROM entries
                 WHERE session_id = ?1 ORDER BY seq",
            )
            .and_then(|mut s| {
                s.query_map([id.as_str()], entry_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(err)?;
        Ok(SessionData {
            header,
            entries,
            torn_tail: false,
        })
    }

    fn read_path(&self, id: &SessionId, leaf: &EntryId) -> StoreResult<Vec<StoredEntry>> {
        let inner = &self.inner;
        let loc = inner.loc_of(id);
        let err = |e: rusqlite::Error| StoreError::db("read path", &loc, e);
        let mut conn = inner.conn();
        let tx = conn.transaction().map_err(err)?;
        let Some(mut seq) = last_seq(&tx, id, leaf.as_str()).map_err(err)? else {
            if !session_exists(&tx, id).map_err(err)? {
                return Err(inner.not_found(id));
            }
            return Err(StoreError::EntryNotFound {
                session: id.clone(),
                entry: leaf.clone(),
            });
        };
        let mut get = tx
            .prepare_cached(
                "SELECT entry_id, parent_id, kind, line FROM entries
                 WHERE session_id = ?1 AND seq = ?2",
            )
            .map_err(err)?;
        let mut seen = std::collections::HashSet::new();
        let mut path = Vec::new();
        while seen.insert(seq) {
            let entry = get
                .query_row(params![id.as_str(), seq], entry_from_row)
                .map_err(err)?;
            let parent = entry.parent_id().cloned();
            path.push(entry);
            match parent {
                Some(parent) => match last_seq(&tx, id, parent.as_str()).map_err(err)? {
                    Some(next) => seq = next,
                    None => break,
                },
                None => break,
            }
        }
        path.reverse();
        Ok(path)
    }

    fn read_after(&self, id: &SessionId, cursor: &EntryId) -> StoreResult<Vec<StoredEntry>> {
        let inner = &self.inner;
        let loc = inner.loc_of(id);
        let err = |e: rusqlite::Error| StoreError::db("read entries", &loc, e);
        let mut conn = inner.conn();
        let tx = conn.transaction().map_err(err)?;
        let Some(at) = last_seq(&tx, id, cursor.as_str()).map_err(err)? else {
            if !session_exists(&tx, id).map_err(err)? {
                return Err(inner.not_found(id));
            }
            return Err(StoreError::EntryNotFound {
                session: id.clone(),
                entry: cursor.clone(),
            });
        };
        let out = tx
            .prepare_cached(
                "SELECT entry_id, parent_id, kind, line FROM entries
                 WHERE session_id = ?1 AND seq > ?2 ORDER BY seq",
            )
            .and_then(|mut s| {
                s.query_map(params![id.as_str(), at], entry_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(err)?;
        Ok(out)
    }

    fn list_sessions(&self, scope: &ListScope) -> StoreResult<Vec<SessionSummary>> {
        let inner = &self.inner;
        let loc = inner.loc();
        let err = |e: rusqlite::Error| StoreError::db("list sessions", &loc, e);
        let conn = inner.conn();
        let columns = "SELECT id, header, stored_ms, entry_count, message_count, name,
                              first_message, last_activity_ms, unlistable FROM sessions";
        let map = |r: &rusqlite::Row<'_>| {
            Ok((
                SessionId::new(r.get::<_, String>(0)?),
                r.get::<_, Vec<u8>>(1)?,
                r.get::<_, i64>(2)?,
                SummaryState {
                    entry_count: r.get::<_, i64>(3)? as u64,
                    message_count: r.get::<_, i64>(4)? as u64,
                    name: r.get(5)?,
                    first_message: r.get(6)?,
                    last_activity_ms: r.get(7)?,
                    unlistable: r.get(8)?,
                },
            ))
        };
        let rows = match scope {
            ListScope::All => conn
                .prepare_cached(columns)
                .and_then(|mut s| s.query_map([], map)?.collect::<rusqlite::Result<Vec<_>>>()),
            ListScope::Cwd(cwd) => conn
                .prepare_cached(&format!("{columns} WHERE cwd_key = ?1"))
                .and_then(|mut s| {
                    s.query_map([resolve_cwd(cwd)], map)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                }),
        }
        .map_err(err)?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, header, stored_ms, state) in rows {
            let header = inner.parse_header(&id, header)?;
            if let Some(summary) = state.finish(&header, inner.loc_of(&id), stored_ms) {
                out.push(summary);
            }
        }
        sort_summaries(&mut out);
        Ok(out)
    }

    fn session_ids(&self) -> StoreResult<Vec<SessionId>> {
        let inner = &self.inner;
        inner
            .conn()
            .prepare_cached("SELECT id FROM sessions ORDER BY id")
            .and_then(|mut s| {
                s.query_map([], |r| r.get::<_, String>(0).map(SessionId::new))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| StoreError::db("list sessions", inner.loc(), e))
    }

    fn delete_session(&self, id: &SessionId) -> StoreResult<()> {
        let inner = &self.inner;
        if !self.contains(id)? {
            return Err(inner.not_found(id));
        }
        let _lock = lock_session(&lock_dir(&inner.path), id)?;
        let loc = inner.loc_of(id);
        let err = |e: rusqlite::Error| StoreError::db("delete session", &loc, e);
        let mut conn = inner.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        tx.execute("DELETE FROM entries WHERE session_id = ?1", [id.as_str()])
            .map_err(err)?;
        tx.execute("DELETE FROM sessions WHERE id = ?1", [id.as_str()])
            .map_err(err)?;
        tx.commit().map_err(err)
    }
}

/// Appends to one session in a SQLite store, holding its lock.
#[derive(Debug)]
pub struct SqliteWriter {
    id: SessionId,
    inner: Arc<Inner>,
    _lock: LockFile,
}

impl SessionWriter for SqliteWriter {
    fn session_id(&self) -> &SessionId {
        &self.id
    }

    fn append(&mut self, entries: &[StoredEntry]) -> StoreResult<()> {
        check_lines(&self.id, entries)?;
        if entries.is_empty() {
            return Ok(());
        }
        let inner = &self.inner;
        let loc = inner.loc_of(&self.id);
        let err = |e: rusqlite::Error| StoreError::db("append entries", &loc, e);
        let mut conn = inner.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let mut row = read_row(&tx, &self.id)
            .map_err(err)?
            .ok_or_else(|| inner.not_found(&self.id))?;
        append_rows(&tx, &self.id, entries, &mut row).map_err(err)?;
        tx.commit().map_err(err)
    }

    fn sync(&mut self) -> StoreResult<()> {
        match self.inner.fsync {
            // FULL already synced every commit; OFF never syncs.
            FsyncPolicy::EveryEntry | FsyncPolicy::Never => Ok(()),
            // Under synchronous=NORMAL a checkpoint fsyncs the WAL first, which makes every
            // committed transaction durable.
            FsyncPolicy::TurnEnd => self
                .inner
                .conn()
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                .map_err(|e| StoreError::db("sync", self.inner.loc_of(&self.id), e)),
        }
    }
}
