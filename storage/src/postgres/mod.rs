//! The PostgreSQL backend (`postgres://user@host:port/db`): one database shared by many
//! machines, so a team's or a fleet's agents keep their sessions in one place.
//!
//! Tables (see [`schema`]) mirror the SQLite backend's: `pi_sessions` holds each session's
//! header line and running summary (listing reads only this table); `pi_entries` holds every
//! line's bytes keyed by (session, sequence number), with an index on (session, entry id, seq)
//! so the path to the root is one recursive query. Lines are stored as given, never
//! re-serialized, so a session moves between this and the other stores byte for byte.
//!
//! **Single writer across machines.** A writer holds a session-level advisory lock
//! (`pg_try_advisory_lock`, keyed by a 64-bit hash of the session id) on a connection of its
//! own, and appends through that same connection: an append can only succeed while the lock
//! is held. The server releases the lock when the writer is dropped, its process dies, or its
//! connection is lost (TCP keepalives notice a vanished machine).
//!
//! **Durability** maps onto `synchronous_commit`: `on` for [`FsyncPolicy::EveryEntry`] (a
//! commit returns once the server flushed its WAL), `off` for `TurnEnd` (the end-of-turn
//! `sync` commits one transaction with `synchronous_commit` on, which flushes the WAL up to
//! it and so everything before) and for `Never`. The server's own `fsync` setting applies.
//!
//! **TLS** follows libpq's `sslmode` (`tls.rs`, rustls): `require`, `verify-ca` and
//! `verify-full`, the roots from `sslrootcert=`, a client certificate from `sslcert=` and
//! `sslkey=` (`tls_client.rs`).
//!
//! **Search** runs on the server (`search.rs`): each append also writes its entries'
//! searchable parts and FTS5 tokens into `pi_search` (`search_index.rs`), so `pi sessions
//! search` ranks on the server and reads back only the hits it prints.

mod conn;
mod schema;
mod search;
mod search_expr;
mod search_index;
mod tls;
mod tls_client;
mod url;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use postgres::{Config, IsolationLevel, Row};

pub use url::{PgUrl, ENV_PASSWORD};

use self::conn::{prepare, PgConn, Work};
use self::search_index::{index_lines, write_mark, SearchMark};
use self::tls::MakeRustlsConnect;
use crate::error::{BoxError, StoreError, StoreResult};
use crate::ids::{EntryId, SessionId};
use crate::paths::resolve_cwd;
use crate::record::{check_lines, SessionData, SessionHeader, StoredEntry};
use crate::store::{FsyncPolicy, SessionStore, SessionWriter};
use crate::summary::{sort_summaries, ListScope, SessionSummary, SummaryState};

/// Sessions in a PostgreSQL database.
///
/// Reads, listing and deletes share one connection, opened again after a server restart;
/// each writer has its own, which is never reopened (its lock would not come back with it).
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// Reads, listing and deletes; writers have connections of their own.
    conn: PgConn,
    config: Config,
    tls: MakeRustlsConnect,
    url: PgUrl,
    fsync: FsyncPolicy,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PostgresStore({})", self.inner.url)
    }
}

impl Inner {
    fn loc(&self) -> String {
        self.url.to_string()
    }

    fn loc_of(&self, id: &SessionId) -> String {
        format!("{}#{id}", self.url)
    }

    fn not_found(&self, id: &SessionId) -> StoreError {
        StoreError::SessionNotFound {
            id: id.clone(),
            store: self.loc(),
        }
    }

    fn locked(&self, id: &SessionId) -> StoreError {
        StoreError::SessionLocked {
            session: id.clone(),
            path: PathBuf::from(format!("advisory lock on {}", self.loc_of(id))),
        }
    }

    fn parse_header(&self, id: &SessionId, line: Vec<u8>) -> StoreResult<SessionHeader> {
        SessionHeader::parse(line).map_err(|reason| StoreError::Corrupt {
            location: self.loc_of(id),
            reason: format!("stored header does not parse: {reason}"),
        })
    }

    /// Opens a writer's connection with this store's durability setting.
    fn connect(&self, action: &'static str) -> StoreResult<PgConn> {
        connect(&self.config, &self.tls, self.fsync, false)
            .map_err(|e| StoreError::db(action, self.loc(), e))
    }

    /// Runs a unit of work on the shared connection.
    fn run<T: Send + 'static>(
        &self,
        action: &'static str,
        location: impl FnOnce() -> String,
        work: impl FnOnce(&mut conn::Session) -> Work<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.conn
            .run(work)
            .map_err(|e| StoreError::db(action, location(), e))
    }
}

/// A connection with the durability setting of `fsync`; see [`PgConn::connect`] for
/// `reconnect`.
fn connect(
    config: &Config,
    tls: &MakeRustlsConnect,
    fsync: FsyncPolicy,
    reconnect: bool,
) -> Work<PgConn> {
    let setup = match fsync {
        FsyncPolicy::EveryEntry => "SET synchronous_commit = on",
        FsyncPolicy::TurnEnd | FsyncPolicy::Never => "SET synchronous_commit = off",
    };
    PgConn::connect(config, tls, setup, reconnect)
}

/// The advisory lock key of a session: FNV-1a over a prefix and the id. Two ids that collide
/// (one chance in 2^64 per pair) would merely exclude each other's writers.
fn lock_key(id: &SessionId) -> i64 {
    let hash = b"pi-session\0"
        .iter()
        .chain(id.as_str().as_bytes())
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    i64::from_ne_bytes(hash.to_ne_bytes())
}

fn text(bytes: Vec<u8>) -> Work<String> {
    Ok(String::from_utf8(bytes)?)
}

fn opt_text(bytes: Option<Vec<u8>>) -> Work<Option<String>> {
    bytes.map(text).transpose()
}

/// Columns `entry_id, parent_id, kind, line` back into a record.
fn entry_from_row(row: &Row) -> Work<StoredEntry> {
    Ok(StoredEntry::from_parts(
        opt_text(row.try_get(0)?)?,
        opt_text(row.try_get(1)?)?,
        text(row.try_get(2)?)?,
        row.try_get(3)?,
    ))
}

fn entries_from_rows(rows: &[Row]) -> Work<Vec<StoredEntry>> {
    rows.iter().map(entry_from_row).collect()
}

/// The running per-session numbers stored in `pi_sessions`.
struct RunningRow {
    next_seq: i64,
    summary: SummaryState,
    /// The search columns; the new lines are indexed only when the earlier ones all are
    /// (`search_index::catch_up` indexes a session that is behind from where it stopped).
    search: SearchMark,
}

const READ_ROW: &str = "SELECT next_seq, entry_count, message_count, name, first_message,
        last_activity_ms, unlistable, search_next_seq, search_docs, search_tokens,
        search_provider, search_model
    FROM pi_sessions WHERE id = $1 FOR UPDATE";

fn summary_from(row: &Row, at: usize) -> Work<SummaryState> {
    Ok(SummaryState {
        entry_count: u64::try_from(row.try_get::<_, i64>(at)?)?,
        message_count: u64::try_from(row.try_get::<_, i64>(at + 1)?)?,
        name: opt_text(row.try_get(at + 2)?)?,
        first_message: opt_text(row.try_get(at + 3)?)?,
        last_activity_ms: row.try_get(at + 4)?,
        unlistable: row.try_get(at + 5)?,
    })
}

/// Inserts lines (one statement, whatever their number) and folds them into the row; the
/// caller commits.
fn append_rows(
    tx: &mut postgres::Transaction<'_>,
    statements: &mut conn::Statements,
    id: &SessionId,
    entries: &[StoredEntry],
    row: &mut RunningRow,
) -> Work<()> {
    let mut seqs = Vec::with_capacity(entries.len());
    let mut ids = Vec::with_capacity(entries.len());
    let mut parents = Vec::with_capacity(entries.len());
    let mut kinds = Vec::with_capacity(entries.len());
    let mut lines = Vec::with_capacity(entries.len());
    for entry in entries {
        seqs.push(row.next_seq);
        ids.push(entry.id().map(|e| e.as_str().as_bytes()));
        parents.push(entry.parent_id().map(|e| e.as_str().as_bytes()));
        kinds.push(entry.kind().as_bytes());
        lines.push(entry.line());
        row.summary.observe(entry.line());
        row.next_seq += 1;
    }
    let insert = prepare(
        statements,
        tx,
        "INSERT INTO pi_entries (session_id, seq, entry_id, parent_id, kind, line)
         SELECT $1, * FROM unnest($2::BIGINT[], $3::BYTEA[], $4::BYTEA[], $5::BYTEA[],
                                  $6::BYTEA[])",
    )?;
    let sid = id.as_str().as_bytes();
    tx.execute(&insert, &[&sid, &seqs, &ids, &parents, &kinds, &lines])?;
    if row.search.next_seq == seqs.first().copied().unwrap_or(row.next_seq) {
        let numbered: Vec<(i64, &[u8])> = seqs.iter().copied().zip(lines.iter().copied()).collect();
        index_lines(tx, statements, sid, &numbered, &mut row.search)?;
        write_mark(tx, statements, sid, &row.search)?;
    }
    let update = prepare(
        statements,
        tx,
        "UPDATE pi_sessions SET next_seq = $2, entry_count = $3, message_count = $4, name = $5,
                first_message = $6, last_activity_ms = $7, unlistable = $8
         WHERE id = $1",
    )?;
    let s = &row.summary;
    tx.execute(
        &update,
        &[
            &sid,
            &row.next_seq,
            &i64::try_from(s.entry_count)?,
            &i64::try_from(s.message_count)?,
            &s.name.as_deref().map(str::as_bytes),
            &s.first_message.as_deref().map(str::as_bytes),
            &s.last_activity_ms,
            &s.unlistable,
        ],
    )?;
    Ok(())
}

/// Takes a session's advisory lock on this connection; false when someone else holds it.
fn try_lock(conn: &PgConn, key: i64) -> Work<bool> {
    conn.run(move |s| {
        Ok(s.client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])?
            .try_get(0)?)
    })
}

impl PostgresStore {
    /// Connects to the database and applies missing schema migrations.
    pub fn open(url: &PgUrl, fsync: FsyncPolicy) -> StoreResult<PostgresStore> {
        let loc = url.to_string();
        let (config, tls) = url.config().map_err(|e| StoreError::InvalidSpec {
            spec: loc.clone(),
            reason: e,
        })?;
        let conn = connect(&config, &tls, fsync, true)
            .map_err(|e| StoreError::db("connect to", &loc, e))?;
        let version = conn
            .run(|s| schema::migrate(&mut s.client))
            .map_err(|e| StoreError::db("migrate schema", &loc, e))?;
        if version > schema::newest() {
            return Err(StoreError::Corrupt {
                location: loc,
                reason: format!(
                    "schema version {version}, this build knows up to {}",
                    schema::newest()
                ),
            });
        }
        Ok(PostgresStore {
            inner: Arc::new(Inner {
                conn,
                config,
                tls,
                url: url.clone(),
                fsync,
            }),
        })
    }

    /// The database URL (printed without a password).
    pub fn url(&self) -> &PgUrl {
        &self.inner.url
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> StoreResult<i64> {
        let inner = &self.inner;
        inner.run(
            "read schema version",
            || inner.loc(),
            |s| {
                Ok(s.client
                    .query_one(
                        "SELECT COALESCE(MAX(version), 0) FROM pi_schema_migrations",
                        &[],
                    )?
                    .try_get(0)?)
            },
        )
    }

    /// Opens a writer's own connection and takes the session's lock on it.
    fn locked_connection(&self, id: &SessionId, action: &'static str) -> StoreResult<PgConn> {
        let inner = &self.inner;
        let conn = inner.connect(action)?;
        match try_lock(&conn, lock_key(id)) {
            Ok(true) => Ok(conn),
            Ok(false) => Err(inner.locked(id)),
            Err(e) => Err(StoreError::db(action, inner.loc_of(id), e)),
        }
    }
}

/// A read-only transaction that sees one snapshot for all its statements.
fn snapshot(client: &mut postgres::Client) -> Work<postgres::Transaction<'_>> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?)
}

/// What a lookup inside a session found.
enum Found<T> {
    Yes(T),
    NoEntry,
    NoSession,
}

impl SessionStore for PostgresStore {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn describe(&self) -> String {
        self.inner.loc()
    }

    fn create_session(
        &self,
        header: &SessionHeader,
        entries: &[StoredEntry],
    ) -> StoreResult<Box<dyn SessionWriter>> {
        let inner = &self.inner;
        let id = header.id().clone();
        check_lines(&id, entries)?;
        // Checked before locking so that a live writer does not hide the better error;
        // checked again inside the transaction, which is what makes it safe.
        if self.contains(&id)? {
            return Err(StoreError::SessionExists {
                location: inner.loc_of(&id),
                id,
            });
        }
        let conn = self.locked_connection(&id, "create session")?;
        let writer = PostgresWriter {
            key: lock_key(&id),
            id: id.clone(),
            conn,
            inner: Arc::clone(inner),
        };
        let header_line = header.line().to_vec();
        let cwd_key = resolve_cwd(header.cwd().unwrap_or(""));
        let entries = entries.to_vec();
        let created = writer
            .conn
            .run(move |s| {
                let (client, statements) = s.parts();
                let mut tx = client.transaction()?;
                let sid = id.as_str().as_bytes();
                let exists = prepare(
                    statements,
                    &mut tx,
                    "SELECT 1 FROM pi_sessions WHERE id = $1",
                )?;
                if tx.query_opt(&exists, &[&sid])?.is_some() {
                    return Ok(false);
                }
                tx.execute(
                    "INSERT INTO pi_sessions (id, cwd_key, header, next_seq, stored_ms,
                         entry_count, message_count, unlistable)
                     VALUES ($1, $2, $3, 0, $4, 0, 0, FALSE)",
                    &[
                        &sid,
                        &cwd_key.as_bytes(),
                        &header_line,
                        &pi_formats::time::now_millis(),
                    ],
                )?;
                let mut row = RunningRow {
                    next_seq: 0,
                    summary: SummaryState::default(),
                    search: SearchMark::default(),
                };
                if !entries.is_empty() {
                    append_rows(&mut tx, statements, &id, &entries, &mut row)?;
                }
                tx.commit()?;
                Ok(true)
            })
            .map_err(|e| StoreError::db("create session", inner.loc_of(header.id()), e))?;
        if !created {
            return Err(StoreError::SessionExists {
                id: header.id().clone(),
                location: inner.loc_of(header.id()),
            });
        }
        Ok(Box::new(writer))
    }

    fn open_writer(&self, id: &SessionId) -> StoreResult<Box<dyn SessionWriter>> {
        if !self.contains(id)? {
            return Err(self.inner.not_found(id));
        }
        let conn = self.locked_connection(id, "open writer")?;
        Ok(Box::new(PostgresWriter {
            id: id.clone(),
            key: lock_key(id),
            conn,
            inner: Arc::clone(&self.inner),
        }))
    }

    fn read_header(&self, id: &SessionId) -> StoreResult<SessionHeader> {
        let inner = &self.inner;
        let sid = id.clone();
        let line = inner.run(
            "read header",
            || inner.loc_of(id),
            move |s| {
                let (client, statements) = s.parts();
                let query = prepare(
                    statements,
                    client,
                    "SELECT header FROM pi_sessions WHERE id = $1",
                )?;
                Ok(
                    match client.query_opt(&query, &[&sid.as_str().as_bytes()])? {
                        Some(row) => Some(row.try_get::<_, Vec<u8>>(0)?),
                        None => None,
                    },
                )
            },
        )?;
        inner.parse_header(id, line.ok_or_else(|| inner.not_found(id))?)
    }

    fn read_session(&self, id: &SessionId) -> StoreResult<SessionData> {
        let inner = &self.inner;
        let sid = id.clone();
        let found = inner.run(
            "read session",
            || inner.loc_of(id),
            move |s| {
                let (client, statements) = s.parts();
                let mut tx = snapshot(client)?;
                let sid = sid.as_str().as_bytes();
                let header = prepare(
                    statements,
                    &mut tx,
                    "SELECT header FROM pi_sessions WHERE id = $1",
                )?;
                let Some(header) = tx.query_opt(&header, &[&sid])? else {
                    return Ok(None);
                };
                let lines = prepare(
                    statements,
                    &mut tx,
                    "SELECT entry_id, parent_id, kind, line FROM pi_entries
                 WHERE session_id = $1 ORDER BY seq",
                )?;
                let entries = entries_from_rows(&tx.query(&lines, &[&sid])?)?;
                Ok(Some((header.try_get::<_, Vec<u8>>(0)?, entries)))
            },
        )?;
        let (header, entries) = found.ok_or_else(|| inner.not_found(id))?;
        Ok(SessionData {
            header: inner.parse_header(id, header)?,
            entries,
            torn_tail: false,
        })
    }

    fn read_path(&self, id: &SessionId, leaf: &EntryId) -> StoreResult<Vec<StoredEntry>> {
        let inner = &self.inner;
        let (sid, leaf_id) = (id.clone(), leaf.clone());
        // One recursive query: each step finds the parent's last line by the entry-id index;
        // `seen` stops the walk where a parent link would revisit an entry.
        let found = inner.run(
            "read path",
            || inner.loc_of(id),
            move |s| {
                let (client, statements) = s.parts();
                let mut tx = snapshot(client)?;
                let walk = prepare(
                    statements,
                    &mut tx,
                    "WITH RECURSIVE walk (seq, parent_id, depth, seen) AS (
                     (SELECT seq, parent_id, 0, ARRAY[seq] FROM pi_entries
                      WHERE session_id = $1 AND entry_id = $2
                      ORDER BY seq DESC LIMIT 1)
                   UNION ALL
                     SELECT p.seq, p.parent_id, w.depth + 1, w.seen || p.seq
                     FROM walk w
                     CROSS JOIN LATERAL (
                         SELECT e.seq, e.parent_id FROM pi_entries e
                         WHERE e.session_id = $1 AND e.entry_id = w.parent_id
                         ORDER BY e.seq DESC LIMIT 1
                     ) p
                     WHERE p.seq <> ALL (w.seen)
                 )
                 SELECT e.entry_id, e.parent_id, e.kind, e.line
                 FROM walk JOIN pi_entries e ON e.session_id = $1 AND e.seq = walk.seq
                 ORDER BY walk.depth DESC",
                )?;
                let sid = sid.as_str().as_bytes();
                let rows = tx.query(&walk, &[&sid, &leaf_id.as_str().as_bytes()])?;
                if !rows.is_empty() {
                    return Ok(Found::Yes(entries_from_rows(&rows)?));
                }
                let exists = prepare(
                    statements,
                    &mut tx,
                    "SELECT 1 FROM pi_sessions WHERE id = $1",
                )?;
                Ok(match tx.query_opt(&exists, &[&sid])? {
                    Some(_) => Found::NoEntry,
                    None => Found::NoSession,
                })
            },
        )?;
        match found {
            Found::Yes(path) => Ok(path),
            Found::NoEntry => Err(StoreError::EntryNotFound {
                session: id.clone(),
                entry: leaf.clone(),
            }),
            Found::NoSession => Err(inner.not_found(id)),
        }
    }

    fn read_after(&self, id: &SessionId, cursor: &EntryId) -> StoreResult<Vec<StoredEntry>> {
        let inner = &self.inner;
        let (sid, cursor_id) = (id.clone(), cursor.clone());
        let found = inner.run(
            "read entries",
            || inner.loc_of(id),
            move |s| {
                let (client, statements) = s.parts();
                let mut tx = snapshot(client)?;
                let sid = sid.as_str().as_bytes();
                let at = prepare(
                    statements,
                    &mut tx,
                    "SELECT seq FROM pi_entries WHERE session_id = $1 AND entry_id = $2
                 ORDER BY seq DESC LIMIT 1",
                )?;
                let Some(at) = tx.query_opt(&at, &[&sid, &cursor_id.as_str().as_bytes()])? else {
                    let exists = prepare(
                        statements,
                        &mut tx,
                        "SELECT 1 FROM pi_sessions WHERE id = $1",
                    )?;
                    return Ok(match tx.query_opt(&exists, &[&sid])? {
                        Some(_) => Found::NoEntry,
                        None => Found::NoSession,
                    });
                };
                let at: i64 = at.try_get(0)?;
                let after = prepare(
                    statements,
                    &mut tx,
                    "SELECT entry_id, parent_id, kind, line FROM pi_entries
                 WHERE session_id = $1 AND seq > $2 ORDER BY seq",
                )?;
                Ok(Found::Yes(entries_from_rows(
                    &tx.query(&after, &[&sid, &at])?,
                )?))
            },
        )?;
        match found {
            Found::Yes(entries) => Ok(entries),
            Found::NoEntry => Err(StoreError::EntryNotFound {
                session: id.clone(),
                entry: cursor.clone(),
            }),
            Found::NoSession => Err(inner.not_found(id)),
        }
    }

    fn list_sessions(&self, scope: &ListScope) -> StoreResult<Vec<SessionSummary>> {
        let inner = &self.inner;
        let cwd = match scope {
            ListScope::All => None,
            ListScope::Cwd(cwd) => Some(resolve_cwd(cwd)),
        };
        let rows = inner.run(
            "list sessions",
            || inner.loc(),
            move |s| {
                let (client, statements) = s.parts();
                let rows = match cwd {
                    None => {
                        let all = prepare(
                            statements,
                            client,
                            "SELECT id, header, stored_ms, entry_count, message_count, name,
                                first_message, last_activity_ms, unlistable FROM pi_sessions",
                        )?;
                        client.query(&all, &[])?
                    }
                    Some(cwd) => {
                        let mine = prepare(
                            statements,
                            client,
                            "SELECT id, header, stored_ms, entry_count, message_count, name,
                                first_message, last_activity_ms, unlistable FROM pi_sessions
                         WHERE cwd_key = $1",
                        )?;
                        client.query(&mine, &[&cwd.as_bytes()])?
                    }
                };
                rows.iter()
                    .map(|r| {
                        Ok((
                            SessionId::new(text(r.try_get(0)?)?),
                            r.try_get::<_, Vec<u8>>(1)?,
                            r.try_get::<_, i64>(2)?,
                            summary_from(r, 3)?,
                        ))
                    })
                    .collect::<Work<Vec<_>>>()
            },
        )?;
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
        inner.run(
            "list sessions",
            || inner.loc(),
            |s| {
                s.client
                    .query("SELECT id FROM pi_sessions ORDER BY id", &[])?
                    .iter()
                    .map(|r| Ok(SessionId::new(text(r.try_get(0)?)?)))
                    .collect()
            },
        )
    }

    fn delete_session(&self, id: &SessionId) -> StoreResult<()> {
        let inner = &self.inner;
        if !self.contains(id)? {
            return Err(inner.not_found(id));
        }
        let (sid, key) = (id.clone(), lock_key(id));
        // The lock is taken on the shared connection for the delete only, and given back
        // whatever happened (advisory locks outlive transactions).
        let deleted = inner.run(
            "delete session",
            || inner.loc_of(id),
            move |s| {
                let locked: bool = s
                    .client
                    .query_one("SELECT pg_try_advisory_lock($1)", &[&key])?
                    .try_get(0)?;
                if !locked {
                    return Ok(false);
                }
                let result = delete_rows(&mut s.client, &sid);
                s.client.execute("SELECT pg_advisory_unlock($1)", &[&key])?;
                result.map(|()| true)
            },
        )?;
        if deleted {
            Ok(())
        } else {
            Err(inner.locked(id))
        }
    }
}

/// Deletes a session's row; its lines go with it (`ON DELETE CASCADE`).
fn delete_rows(client: &mut postgres::Client, id: &SessionId) -> Work<()> {
    let mut tx = client.transaction()?;
    tx.execute(
        "DELETE FROM pi_sessions WHERE id = $1",
        &[&id.as_str().as_bytes()],
    )?;
    tx.commit()?;
    Ok(())
}

/// Appends to one session in a PostgreSQL store, holding its advisory lock on a connection
/// of its own.
pub struct PostgresWriter {
    id: SessionId,
    key: i64,
    conn: PgConn,
    inner: Arc<Inner>,
}

impl fmt::Debug for PostgresWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PostgresWriter({})", self.inner.loc_of(&self.id))
    }
}

impl SessionWriter for PostgresWriter {
    fn session_id(&self) -> &SessionId {
        &self.id
    }

    fn append(&mut self, entries: &[StoredEntry]) -> StoreResult<()> {
        check_lines(&self.id, entries)?;
        if entries.is_empty() {
            return Ok(());
        }
        let (id, entries) = (self.id.clone(), entries.to_vec());
        let appended = self
            .conn
            .run(move |s| {
                let (client, statements) = s.parts();
                let mut tx = client.transaction()?;
                let read = prepare(statements, &mut tx, READ_ROW)?;
                let Some(r) = tx.query_opt(&read, &[&id.as_str().as_bytes()])? else {
                    return Ok(false);
                };
                let mut row = RunningRow {
                    next_seq: r.try_get(0)?,
                    summary: summary_from(&r, 1)?,
                    search: SearchMark::from_row(&r, 7)?,
                };
                append_rows(&mut tx, statements, &id, &entries, &mut row)?;
                tx.commit()?;
                Ok(true)
            })
            .map_err(|e| StoreError::db("append entries", self.inner.loc_of(&self.id), e))?;
        if appended {
            Ok(())
        } else {
            Err(self.inner.not_found(&self.id))
        }
    }

    fn sync(&mut self) -> StoreResult<()> {
        match self.inner.fsync {
            // `on` already flushed at every commit; `Never` never asks.
            FsyncPolicy::EveryEntry | FsyncPolicy::Never => Ok(()),
            // A transaction that has an xid writes a commit record, and with synchronous_commit
            // on its commit waits until the WAL is flushed up to it: everything before is
            // durable too.
            FsyncPolicy::TurnEnd => self
                .conn
                .run(|s| {
                    let mut tx = s.client.transaction()?;
                    tx.batch_execute("SET LOCAL synchronous_commit = on; SELECT txid_current();")?;
                    tx.commit()?;
                    Ok(())
                })
                .map_err(|e: BoxError| StoreError::db("sync", self.inner.loc_of(&self.id), e)),
        }
    }
}

impl Drop for PostgresWriter {
    fn drop(&mut self) {
        // Given back before the connection closes, so that the next writer (perhaps in this
        // process, a moment later) does not race the server's clean-up of this connection.
        let key = self.key;
        let _ = self.conn.run(move |s| {
            s.client.execute("SELECT pg_advisory_unlock($1)", &[&key])?;
            Ok(())
        });
    }
}
