//! The redb backend: one database file, entries keyed by (session, sequence number).
//!
//! Tables (schema version 1, recorded in `meta`):
//! * `headers`: session id → header line;
//! * `sessions`: session id → [`SessionRow`] (JSON): cwd key, next sequence number, summary;
//! * `sessions_by_cwd`: resolved cwd → session ids (listing one cwd reads only its rows);
//! * `entries`: (session id, seq) → (entry id, parent id, type, line bytes);
//! * `entry_ids`: (session id, entry id) → seq of the last line with that id.
//!
//! A path to the root is a chain of keyed lookups (`entry_ids` then `entries`), and listing
//! reads `sessions` rows only: summaries are folded in as lines are appended.
//! redb lets one process open a file at a time; another process gets
//! [`StoreError::StoreLocked`]. Per-session writer locks are `flock`ed files in `<db>.locks/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{
    Database, Durability, MultimapTableDefinition, ReadableTable, ReadableTableMetadata,
    TableDefinition, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use crate::error::{StoreError, StoreResult};
use crate::ids::{EntryId, SessionId};
use crate::lock::{lock_dir, lock_session, LockFile};
use crate::paths::resolve_cwd;
use crate::record::{check_lines, SessionData, SessionHeader, StoredEntry};
use crate::store::{FsyncPolicy, SessionStore, SessionWriter};
use crate::summary::{sort_summaries, ListScope, SessionSummary, SummaryState};

const SCHEMA_VERSION: u64 = 1;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const HEADERS: TableDefinition<&str, &[u8]> = TableDefinition::new("headers");
const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
const BY_CWD: MultimapTableDefinition<&str, &str> = MultimapTableDefinition::new("sessions_by_cwd");
type EntryValue = (
    Option<&'static str>,
    Option<&'static str>,
    &'static str,
    &'static [u8],
);
const ENTRIES: TableDefinition<(&str, u64), EntryValue> = TableDefinition::new("entries");
const ENTRY_IDS: TableDefinition<(&str, &str), u64> = TableDefinition::new("entry_ids");

/// Per-session bookkeeping kept next to the header.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SessionRow {
    cwd_key: String,
    next_seq: u64,
    /// When the session entered this store: the listing's last-resort `modified`.
    stored_ms: i64,
    summary: SummaryState,
}

/// Sessions in a redb database file.
#[derive(Debug)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: Database,
    path: PathBuf,
    fsync: FsyncPolicy,
}

impl Inner {
    fn loc(&self) -> String {
        self.path.display().to_string()
    }

    fn loc_of(&self, id: &SessionId) -> String {
        format!("{}#{id}", self.path.display())
    }

    fn durability(&self) -> Durability {
        match self.fsync {
            FsyncPolicy::EveryEntry => Durability::Immediate,
            // Written to the file at commit (a killed process loses nothing), fsynced later.
            FsyncPolicy::TurnEnd | FsyncPolicy::Never => Durability::Eventual,
        }
    }

    fn not_found(&self, id: &SessionId) -> StoreError {
        StoreError::SessionNotFound {
            id: id.clone(),
            store: format!("redb:{}", self.path.display()),
        }
    }

    fn read_row(
        &self,
        table: &impl ReadableTable<&'static str, &'static [u8]>,
        id: &SessionId,
    ) -> StoreResult<SessionRow> {
        let loc = self.loc_of(id);
        let guard = table
            .get(id.as_str())
            .map_err(|e| StoreError::db("read session row", &loc, e))?
            .ok_or_else(|| self.not_found(id))?;
        serde_json::from_slice(guard.value()).map_err(|e| StoreError::Corrupt {
            location: loc,
            reason: format!("session row does not decode: {e}"),
        })
    }

    fn parse_header(&self, id: &SessionId, line: &[u8]) -> StoreResult<SessionHeader> {
        SessionHeader::parse(line.to_vec()).map_err(|reason| StoreError::Corrupt {
            location: self.loc_of(id),
            reason: format!("stored header does not parse: {reason}"),
        })
    }

    /// Appends inside an open write transaction; updates `row`.
    fn append_in(
        &self,
        txn: &WriteTransaction,
        id: &SessionId,
        entries: &[StoredEntry],
        row: &mut SessionRow,
    ) -> StoreResult<()> {
        let loc = self.loc_of(id);
        let err = |e: redb::Error| StoreError::db("append entries", &loc, e);
        let mut table = txn.open_table(ENTRIES).map_err(|e| err(e.into()))?;
        let mut ids = txn.open_table(ENTRY_IDS).map_err(|e| err(e.into()))?;
        for entry in entries {
            let seq = row.next_seq;
            let value = (
                entry.id().map(EntryId::as_str),
                entry.parent_id().map(EntryId::as_str),
                entry.kind(),
                entry.line(),
            );
            table
                .insert((id.as_str(), seq), value)
                .map_err(|e| err(e.into()))?;
            if let Some(entry_id) = entry.id() {
                // Last wins, like Pi's byId map.
                ids.insert((id.as_str(), entry_id.as_str()), seq)
                    .map_err(|e| err(e.into()))?;
            }
            row.summary.observe(entry.line());
            row.next_seq += 1;
        }
        let encoded =
            serde_json::to_vec(&row).map_err(|e| StoreError::db("encode row", &loc, e))?;
        txn.open_table(SESSIONS)
            .map_err(|e| err(e.into()))?
            .insert(id.as_str(), encoded.as_slice())
            .map_err(|e| err(e.into()))?;
        Ok(())
    }

    fn begin_write(&self, action: &'static str, loc: &str) -> StoreResult<WriteTransaction> {
        let mut txn = self
            .db
            .begin_write()
            .map_err(|e| StoreError::db(action, loc, e))?;
        txn.set_durability(self.durability());
        Ok(txn)
    }
}

fn entry_from(value: EntryValueRef<'_>) -> StoredEntry {
    let (id, parent, kind, line) = value;
    StoredEntry::from_parts(
        id.map(str::to_string),
        parent.map(str::to_string),
        kind.to_string(),
        line.to_vec(),
    )
}

type EntryValueRef<'a> = (Option<&'a str>, Option<&'a str>, &'a str, &'a [u8]);

impl RedbStore {
    /// Opens the database at `path`, creating it (and its tables) if missing.
    pub fn open(path: &Path, fsync: FsyncPolicy) -> StoreResult<RedbStore> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                action: "create directory",
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let loc = path.display().to_string();
        let db = match Database::create(path) {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(StoreError::StoreLocked {
                    path: path.to_path_buf(),
                })
            }
            Err(e) => return Err(StoreError::db("open database", &loc, e)),
        };
        let inner = Inner {
            db,
            path: path.to_path_buf(),
            fsync,
        };
        let txn = inner.begin_write("initialize schema", &loc)?;
        {
            let err = |e: redb::Error| StoreError::db("initialize schema", &loc, e);
            let mut meta = txn.open_table(META).map_err(|e| err(e.into()))?;
            let version = meta
                .get("schema_version")
                .map_err(|e| err(e.into()))?
                .map(|v| v.value());
            match version {
                None => {
                    meta.insert("schema_version", SCHEMA_VERSION)
                        .map_err(|e| err(e.into()))?;
                }
                Some(SCHEMA_VERSION) => {}
                Some(other) => {
                    return Err(StoreError::Corrupt {
                        location: loc,
                        reason: format!(
                            "schema version {other}, this build knows {SCHEMA_VERSION}"
                        ),
                    })
                }
            }
            txn.open_table(HEADERS).map_err(|e| err(e.into()))?;
            txn.open_table(SESSIONS).map_err(|e| err(e.into()))?;
            txn.open_multimap_table(BY_CWD).map_err(|e| err(e.into()))?;
            txn.open_table(ENTRIES).map_err(|e| err(e.into()))?;
            txn.open_table(ENTRY_IDS).map_err(|e| err(e.into()))?;
        }
        txn.commit()
            .map_err(|e| StoreError::db("initialize schema", &loc, e))?;
        Ok(RedbStore {
            inner: Arc::new(inner),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

impl SessionStore for RedbStore {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn describe(&self) -> String {
        format!("redb:{}", self.inner.path.display())
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
        let err = |e: redb::Error| StoreError::db("create session", &loc, e);
        let txn = inner.begin_write("create session", &loc)?;
        {
            let mut headers = txn.open_table(HEADERS).map_err(|e| err(e.into()))?;
            if headers
                .get(id.as_str())
                .map_err(|e| err(e.into()))?
                .is_some()
            {
                return Err(StoreError::SessionExists {
                    id: id.clone(),
                    location: loc.clone(),
                });
            }
            headers
                .insert(id.as_str(), header.line())
                .map_err(|e| err(e.into()))?;
            let cwd_key = resolve_cwd(header.cwd().unwrap_or(""));
            txn.open_multimap_table(BY_CWD)
                .map_err(|e| err(e.into()))?
                .insert(cwd_key.as_str(), id.as_str())
                .map_err(|e| err(e.into()))?;
            let mut row = SessionRow {
                cwd_key,
                next_seq: 0,
                stored_ms: pi_formats::time::now_millis(),
                summary: SummaryState::default(),
            };
            inner.append_in(&txn, id, entries, &mut row)?;
        }
        txn.commit().map_err(|e| err(e.into()))?;
        Ok(Box::new(RedbWriter {
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
        Ok(Box::new(RedbWriter {
            id: id.clone(),
            inner: Arc::clone(&self.inner),
            _lock: lock,
        }))
    }

    fn read_header(&self, id: &SessionId) -> StoreResult<SessionHeader> {
        let inner = &self.inner;
        let loc = inner.loc_of(id);
        let err = |e: redb::Error| StoreError::db("read header", &loc, e);
        let txn = inner.db.begin_read().map_err(|e| err(e.into()))?;
        let headers = txn.open_table(HEADERS).map_err(|e| err(e.into()))?;
        let line = headers
            .get(id.as_str())
            .map_err(|e| err(e.into()))?
            .ok_or_else(|| inner.not_found(id))?;
        inner.parse_header(id, line.value())
    }

    fn read_session(&self, id: &SessionId) -> StoreResult<SessionData> {
        let inner = &self.inner;
        let loc = inner.loc_of(id);
        let err = |e: redb::Error| StoreError::db("read session", &loc, e);
        // One read transaction: header and entries come from the same snapshot.
        let txn = inner.db.begin_read().map_err(|e| err(e.into()))?;
        let headers = txn.open_table(HEADERS).map_err(|e| err(e.into()))?;
        let header_line = headers
            .get(id.as_str())
            .map_err(|e| err(e.into()))?
            .ok_or_else(|| inner.not_found(id))?;
        let header = inner.parse_header(id, header_line.value())?;
        let table = txn.open_table(ENTRIES).map_err(|e| err(e.into()))?;
        let mut entries = Vec::new();
        for item in table
            .range((id.as_str(), 0u64)..=(id.as_str(), u64::MAX))
            .map_err(|e| err(e.into()))?
        {
            let (_, value) = item.map_err(|e| err(e.into()))?;
            entries.push(entry_from(value.value()));
        }
        Ok(SessionData {
            header,
            entries,
            torn_tail: false,
        })
    }

    fn read_path(&self, id: &SessionId, leaf: &EntryId) -> StoreResult<Vec<StoredEntry>> {
        let inner = &self.inner;
        let loc = inner.loc_of(id);
        let err = |e: redb::Error| StoreError::db("read path", &loc, e);
        let txn = inner.db.begin_read().map_err(|e| err(e.into()))?;
        let ids = txn.open_table(ENTRY_IDS).map_err(|e| err(e.into()))?;
        let table = txn.open_table(ENTRIES).map_err(|e| err(e.into()))?;
        let seq_of = |entry: &str| -> StoreResult<Option<u64>> {
            Ok(ids
                .get((id.as_str(), entry))
                .map_err(|e| err(e.into()))?
                .map(|g| g.value()))
        };
        let Some(mut seq) = seq_of(leaf.as_str())? else {
            if !self.contains(id)? {
                return Err(inner.not_found(id));
            }
            return Err(StoreError::EntryNotFound {
                session: id.clone(),
                entry: leaf.clone(),
            });
        };
        let mut seen = std::collections::HashSet::new();
        let mut path = Vec::new();
        while seen.insert(seq) {
            let guard = table
                .get((id.as_str(), seq))
                .map_err(|e| err(e.into()))?
                .ok_or_else(|| StoreError::Corrupt {
                    location: loc.clone(),
                    reason: format!("entry index points at missing line {seq}"),
                })?;
            let entry = entry_from(guard.value());
            let parent = entry.parent_id().cloned();
            path.push(entry);
            match parent {
                Some(parent) => match seq_of(parent.as_str())? {
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
        let err = |e: redb::Error| StoreError::db("read entries", &loc, e);
        let txn = inner.db.begin_read().map_err(|e| err(e.into()))?;
        let ids = txn.open_table(ENTRY_IDS).map_err(|e| err(e.into()))?;
        let Some(at) = ids
            .get((id.as_str(), cursor.as_str()))
            .map_err(|e| err(e.into()))?
            .map(|g| g.value())
        else {
            if !self.contains(id)? {
                return Err(inner.not_found(id));
            }
            return Err(StoreError::EntryNotFound {
                session: id.clone(),
                entry: cursor.clone(),
            });
        };
        let table = txn.open_table(ENTRIES).map_err(|e| err(e.into()))?;
        let mut out = Vec::new();
        for item in table
            .range((id.as_str(), at + 1)..=(id.as_str(), u64::MAX))
            .map_err(|e| err(e.into()))?
        {
            let (_, value) = item.map_err(|e| err(e.into()))?;
            out.push(entry_from(value.value()));
        }
        Ok(out)
    }

    fn list_sessions(&self, scope: &ListScope) -> StoreResult<Vec<SessionSummary>> {
        let inner = &self.inner;
        let loc = inner.loc();
        let err = |e: redb::Error| StoreError::db("list sessions", &loc, e);
        let txn = inner.db.begin_read().map_err(|e| err(e.into()))?;
        let sessions = txn.open_table(SESSIONS).map_err(|e| err(e.into()))?;
        let headers = txn.open_table(HEADERS).map_err(|e| err(e.into()))?;
        let ids: Vec<SessionId> = match scope {
            ListScope::All => {
                let mut ids =
                    Vec::with_capacity(sessions.len().map_err(|e| err(e.into()))? as usize);
                for item in sessions.iter().map_err(|e| err(e.into()))? {
                    let (key, _) = item.map_err(|e| err(e.into()))?;
                    ids.push(SessionId::new(key.value()));
                }
                ids
            }
            ListScope::Cwd(cwd) => {
                let by_cwd = txn.open_multimap_table(BY_CWD).map_err(|e| err(e.into()))?;
                let mut ids = Vec::new();
                for item in by_cwd
                    .get(resolve_cwd(cwd).as_str())
                    .map_err(|e| err(e.into()))?
                {
                    ids.push(SessionId::new(item.map_err(|e| err(e.into()))?.value()));
                }
                ids
            }
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let row = inner.read_row(&sessions, &id)?;
            let line = headers
                .get(id.as_str())
                .map_err(|e| err(e.into()))?
                .ok_or_else(|| inner.not_found(&id))?;
            let header = inner.parse_header(&id, line.value())?;
            if let Some(summary) = row
                .summary
                .finish(&header, inner.loc_of(&id), row.stored_ms)
            {
                out.push(summary);
            }
        }
        sort_summaries(&mut out);
        Ok(out)
    }

    fn session_ids(&self) -> StoreResult<Vec<SessionId>> {
        let inner = &self.inner;
        let loc = inner.loc();
        let err = |e: redb::Error| StoreError::db("list sessions", &loc, e);
        let txn = inner.db.begin_read().map_err(|e| err(e.into()))?;
        let headers = txn.open_table(HEADERS).map_err(|e| err(e.into()))?;
        let mut ids = Vec::new();
        for item in headers.iter().map_err(|e| err(e.into()))? {
            let (key, _) = item.map_err(|e| err(e.into()))?;
            ids.push(SessionId::new(key.value()));
        }
        Ok(ids)
    }

    fn delete_session(&self, id: &SessionId) -> StoreResult<()> {
        let inner = &self.inner;
        if !self.contains(id)? {
            return Err(inner.not_found(id));
        }
        let _lock = lock_session(&lock_dir(&inner.path), id)?;
        let loc = inner.loc_of(id);
        let err = |e: redb::Error| StoreError::db("delete session", &loc, e);
        let txn = inner.begin_write("delete session", &loc)?;
        {
            let row = {
                let sessions = txn.open_table(SESSIONS).map_err(|e| err(e.into()))?;
                inner.read_row(&sessions, id)?
            };
            txn.open_table(ENTRIES)
                .map_err(|e| err(e.into()))?
                .retain_in((id.as_str(), 0u64)..=(id.as_str(), u64::MAX), |_, _| false)
                .map_err(|e| err(e.into()))?;
            let mut ids = txn.open_table(ENTRY_IDS).map_err(|e| err(e.into()))?;
            let mut doomed = Vec::new();
            for item in ids.range((id.as_str(), "")..).map_err(|e| err(e.into()))? {
                let (key, _) = item.map_err(|e| err(e.into()))?;
                let (session, entry) = key.value();
                if session != id.as_str() {
                    break;
                }
                doomed.push(entry.to_string());
            }
            for entry in &doomed {
                ids.remove((id.as_str(), entry.as_str()))
                    .map_err(|e| err(e.into()))?;
            }
            txn.open_multimap_table(BY_CWD)
                .map_err(|e| err(e.into()))?
                .remove(row.cwd_key.as_str(), id.as_str())
                .map_err(|e| err(e.into()))?;
            txn.open_table(SESSIONS)
                .map_err(|e| err(e.into()))?
                .remove(id.as_str())
                .map_err(|e| err(e.into()))?;
            txn.open_table(HEADERS)
                .map_err(|e| err(e.into()))?
                .remove(id.as_str())
                .map_err(|e| err(e.into()))?;
        }
        txn.commit().map_err(|e| err(e.into()))?;
        Ok(())
    }
}

/// Appends to one session in a redb store, holding its lock.
#[derive(Debug)]
pub struct RedbWriter {
    id: SessionId,
    inner: Arc<Inner>,
    _lock: LockFile,
}

impl SessionWriter for RedbWriter {
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
        let txn = inner.begin_write("append entries", &loc)?;
        let mut row = {
            let sessions = txn
                .open_table(SESSIONS)
                .map_err(|e| StoreError::db("append entries", &loc, e))?;
            inner.read_row(&sessions, &self.id)?
        };
        inner.append_in(&txn, &self.id, entries, &mut row)?;
        txn.commit()
            .map_err(|e| StoreError::db("append entries", &loc, e))
    }

    fn sync(&mut self) -> StoreResult<()> {
        if self.inner.fsync == FsyncPolicy::Never {
            return Ok(());
        }
        // An empty durable commit makes every earlier non-durable commit durable too.
        let loc = self.inner.loc_of(&self.id);
        let mut txn = self
            .inner
            .db
            .begin_write()
            .map_err(|e| StoreError::db("sync", &loc, e))?;
        txn.set_durability(Durability::Immediate);
        txn.commit().map_err(|e| StoreError::db("sync", &loc, e))
    }
}
