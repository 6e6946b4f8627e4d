//! SQL over the whole history: documented views over the index, opened read-only.
//!
//! The index's own tables change with its internals (full-text layout, watermarks); the views
//! here are the stable surface that `pi sessions query` and the Parquet export show. They
//! are `TEMP` views made on a connection of their own that opens the index read-only, so they
//! never touch the index file, and they shadow the index tables of the same names
//! (`sessions`, `entries`). Nothing but one reading statement runs: the connection is opened `SQLITE_OPEN_READ_ONLY`
//! with `PRAGMA query_only`, an authorizer refuses every action but reading (naming what was
//! refused), and `sqlite3_stmt_readonly` is checked before a statement runs.
//!
//! Built only on the stable tables: `sessions`, `entries` and `tool_uses` (which this file
//! also fills, see [`record`]), never the full-text ones.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{params, Batch, Connection, OpenFlags, Statement};

use super::extract::Extracted;

/// A value of a result row (SQLite's dynamic types).
pub use rusqlite::types::Value as SqlValue;

/// The `tool_uses` table: one row per tool call, with its result once one arrives.
/// Part of the index schema (see `SCHEMA` in `mod.rs`).
pub(super) const TABLES: &str = "
CREATE TABLE tool_uses(
    sid INTEGER NOT NULL,
    entry_id TEXT,
    call_id TEXT,
    ts_ms INTEGER,
    provider TEXT,
    model TEXT,
    name TEXT,
    path TEXT,
    command TEXT,
    answered INTEGER NOT NULL DEFAULT 0,
    result_entry_id TEXT,
    result_ts_ms INTEGER,
    is_error INTEGER
);
CREATE INDEX tool_uses_call ON tool_uses(sid, call_id);
";

/// The statements [`record`] runs: a tool call's insert and a result's update.
pub(super) fn statements(
    conn: &Connection,
) -> rusqlite::Result<(rusqlite::CachedStatement<'_>, rusqlite::CachedStatement<'_>)> {
    Ok((
        conn.prepare_cached(
            "INSERT INTO tool_uses(sid, entry_id, call_id, ts_ms, provider, model, name, path,
                                   command)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?,
        conn.prepare_cached(
            "UPDATE tool_uses SET answered = 1, result_entry_id = ?3, result_ts_ms = ?4,
                 is_error = ?5
             WHERE rowid = (SELECT rowid FROM tool_uses
                            WHERE sid = ?1 AND call_id IS ?2 AND answered = 0
                            ORDER BY rowid DESC LIMIT 1)",
        )?,
    ))
}

/// Writes the tool calls of an entry and marks the call a tool result answers (the latest
/// unanswered call with its id in the same session: calls come before their results).
pub(super) fn record(
    to: &mut super::scan::Inserts<'_>,
    sid: i64,
    x: &Extracted,
    provider: Option<&str>,
    model: Option<&str>,
) -> rusqlite::Result<()> {
    let at = x.appended_ms.or(x.timestamp_ms);
    for call in &x.calls {
        to.call.execute(params![
            sid,
            x.id,
            call.id,
            at,
            provider,
            model,
            call.name,
            call.path,
            call.command
        ])?;
    }
    if let Some(result) = &x.result {
        to.answer
            .execute(params![sid, result.call_id, x.id, at, result.is_error])?;
    }
    Ok(())
}

/// The type of a view column (for the Parquet schema and the docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// 64-bit integer.
    Integer,
    /// 64-bit float.
    Real,
    /// UTF-8 text.
    Text,
    /// 0/1 in SQL, a boolean in Parquet.
    Bool,
}

/// One column of a view.
#[derive(Debug, Clone, Copy)]
pub struct ViewColumn {
    /// Column name.
    pub name: &'static str,
    /// Its type; every column may be NULL.
    pub ty: ColumnType,
}

/// One documented view.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// View name.
    pub name: &'static str,
    /// Its columns, in order.
    pub columns: &'static [ViewColumn],
    /// `FROM …` and `WHERE …` after the column expressions.
    from: &'static str,
    /// The expression of each column, in order.
    exprs: &'static [&'static str],
}

impl View {
    fn create_sql(&self) -> String {
        let cols: Vec<String> = self
            .columns
            .iter()
            .zip(self.exprs)
            .map(|(c, e)| format!("{e} AS {}", c.name))
            .collect();
        format!(
            "CREATE TEMP VIEW {} AS SELECT {} {}",
            self.name,
            cols.join(", "),
            self.from
        )
    }
}

const fn col(name: &'static str, ty: ColumnType) -> ViewColumn {
    ViewColumn { name, ty }
}

use ColumnType::{Bool, Integer, Real, Text};

/// ISO 8601 UTC with milliseconds, from ms since the epoch.
macro_rules! iso {
    ($ms:literal) => {
        concat!(
            "strftime('%Y-%m-%dT%H:%M:%fZ', ",
            $ms,
            " / 1000.0, 'unixepoch')"
        )
    };
}

const SESSION_COLUMNS: [ViewColumn; 3] =
    [col("session_id", Text), col("file", Text), col("cwd", Text)];

/// The columns every entry-level view starts with, and the per-entry usage columns.
macro_rules! entry_view {
    ($name:literal, $where:literal) => {
        View {
            name: $name,
            columns: &[
                SESSION_COLUMNS[0],
                SESSION_COLUMNS[1],
                SESSION_COLUMNS[2],
                col("entry_id", Text),
                col("time", Text),
                col("ts_ms", Integer),
                col("day", Text),
                col("week", Text),
                col("role", Text),
                col("provider", Text),
                col("model", Text),
                col("tool_calls", Integer),
                col("tool_errors", Integer),
                col("is_error", Bool),
                col("input_tokens", Integer),
                col("output_tokens", Integer),
                col("cache_read_tokens", Integer),
                col("cache_write_tokens", Integer),
                col("total_tokens", Integer),
                col("cost", Real),
            ],
            from: concat!(
                "FROM main.entries e JOIN main.sessions s ON s.sid = e.sid ",
                $where
            ),
            exprs: &[
                "s.session_id",
                "s.location",
                "s.cwd",
                "e.entry_id",
                iso!("e.ts_ms"),
                "e.ts_ms",
                "date(e.ts_ms / 1000, 'unixepoch')",
                "date(e.ts_ms / 1000, 'unixepoch', 'weekday 0', '-6 days')",
                "e.role",
                "e.provider",
                "e.model",
                "e.tool_calls",
                "e.tool_errors",
                "e.errors",
                "e.input",
                "e.output",
                "e.cache_read",
                "e.cache_write",
                "e.input + e.output + e.cache_read + e.cache_write",
                "e.cost",
            ],
        }
    };
}

/// The views, in the order the docs and the export list them.
pub const VIEWS: &[View] = &[
    View {
        name: "sessions",
        columns: &[
            SESSION_COLUMNS[0],
            SESSION_COLUMNS[1],
            SESSION_COLUMNS[2],
            col("name", Text),
            col("parent_session", Text),
            col("created", Text),
            col("modified", Text),
            col("created_ms", Integer),
            col("modified_ms", Integer),
            col("entry_count", Integer),
            col("message_count", Integer),
            col("first_message", Text),
        ],
        from: "FROM main.sessions s WHERE s.session_id IS NOT NULL",
        exprs: &[
            "s.session_id",
            "s.location",
            "s.cwd",
            "s.name",
            "s.parent_session",
            iso!("s.created_ms"),
            iso!("s.modified_ms"),
            "s.created_ms",
            "s.modified_ms",
            "s.entry_count",
            "s.message_count",
            "s.first_message",
        ],
    },
    entry_view!("entries", ""),
    entry_view!("messages", "WHERE e.role IS NOT NULL"),
    entry_view!("usage", "WHERE e.role IS NULL OR e.role = 'assistant'"),
    View {
        name: "tool_calls",
        columns: &[
            SESSION_COLUMNS[0],
            SESSION_COLUMNS[1],
            SESSION_COLUMNS[2],
            col("entry_id", Text),
            col("call_id", Text),
            col("time", Text),
            col("ts_ms", Integer),
            col("provider", Text),
            col("model", Text),
            col("tool", Text),
            col("path", Text),
            col("command", Text),
            col("answered", Bool),
            col("result_entry_id", Text),
            col("result_time", Text),
            col("duration_ms", Integer),
            col("is_error", Bool),
        ],
        from: "FROM main.tool_uses t JOIN main.sessions s ON s.sid = t.sid",
        exprs: &[
            "s.session_id",
            "s.location",
            "s.cwd",
            "t.entry_id",
            "t.call_id",
            iso!("t.ts_ms"),
            "t.ts_ms",
            "t.provider",
            "t.model",
            "t.name",
            "t.path",
            "t.command",
            "t.answered",
            "t.result_entry_id",
            iso!("t.result_ts_ms"),
            "t.result_ts_ms - t.ts_ms",
            "t.is_error",
        ],
    },
];

/// Why a query did not run (or stopped).
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The statement would change something (or is not one statement).
    #[error("refused: {0}")]
    Refused(String),
    /// SQLite's own complaint (syntax, unknown column, …).
    #[error("{0}")]
    Sql(String),
    /// The index could not be opened.
    #[error("cannot open the history index {path}: {message}")]
    Open {
        /// The index file.
        path: String,
        /// SQLite's message.
        message: String,
    },
    /// Writing the rows out failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A read-only connection to an index with the views defined.
#[derive(Debug)]
pub struct HistorySql {
    conn: Connection,
    /// What the authorizer refused last, to name it in the error instead of SQLite's
    /// generic "not authorized".
    refused: Arc<Mutex<Option<String>>>,
}

/// A prepared, checked statement.
pub struct SqlQuery<'c> {
    stmt: Statement<'c>,
    refused: Arc<Mutex<Option<String>>>,
    /// Result column names.
    pub columns: Vec<String>,
}

impl HistorySql {
    /// Opens the index at `path` read-only. The index should be refreshed (and its handle
    /// kept open, so its WAL files exist) before.
    pub fn open(path: &Path) -> Result<HistorySql, QueryError> {
        let open_err = |e: rusqlite::Error| QueryError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(open_err)?;
        for view in VIEWS {
            conn.execute_batch(&view.create_sql()).map_err(open_err)?;
        }
        conn.pragma_update(None, "query_only", "ON")
            .map_err(open_err)?;
        let refused = Arc::new(Mutex::new(None));
        let seen = Arc::clone(&refused);
        conn.authorizer(Some(move |ctx: AuthContext<'_>| {
            match refusal(&ctx) {
                None => Authorization::Allow,
                Some(why) => {
                    if let Ok(mut slot) = seen.lock() {
                        // The first reason is the one the statement failed on.
                        slot.get_or_insert(why);
                    }
                    Authorization::Deny
                }
            }
        }));
        Ok(HistorySql { conn, refused })
    }

    /// Prepares one reading statement. Anything else (a write, a pragma, a second statement)
    /// is an error that says what was refused.
    pub fn prepare(&self, sql: &str) -> Result<SqlQuery<'_>, QueryError> {
        self.take_refusal();
        let mut batch = Batch::new(&self.conn, sql);
        let stmt = match batch.next() {
            Ok(Some(stmt)) => stmt,
            Ok(None) => return Err(QueryError::Sql("no SQL statement given".into())),
            Err(e) => return Err(self.error(e)),
        };
        match batch.next() {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => {
                return Err(QueryError::Refused(
                    "one statement at a time (found more after the first `;`)".into(),
                ))
            }
        }
        if !stmt.readonly() {
            return Err(QueryError::Refused(
                "the statement would write; the history index is read-only here".into(),
            ));
        }
        let columns = stmt.column_names().into_iter().map(String::from).collect();
        Ok(SqlQuery {
            stmt,
            refused: Arc::clone(&self.refused),
            columns,
        })
    }

    fn take_refusal(&self) -> Option<String> {
        self.refused.lock().ok().and_then(|mut r| r.take())
    }

    fn error(&self, e: rusqlite::Error) -> QueryError {
        convert(e, self.take_refusal())
    }
}

impl SqlQuery<'_> {
    /// Runs the statement, handing each row's values to `row`.
    pub fn for_each(
        &mut self,
        mut row: impl FnMut(&[SqlValue]) -> std::io::Result<()>,
    ) -> Result<(), QueryError> {
        let n = self.columns.len();
        let refused = Arc::clone(&self.refused);
        let fail = |e| convert(e, refused.lock().ok().and_then(|mut r| r.take()));
        let mut rows = self.stmt.query([]).map_err(fail)?;
        let mut values = Vec::with_capacity(n);
        while let Some(r) = rows.next().map_err(fail)? {
            values.clear();
            for i in 0..n {
                values.push(r.get::<_, SqlValue>(i).map_err(fail)?);
            }
            row(&values)?;
        }
        Ok(())
    }
}

fn convert(e: rusqlite::Error, refused: Option<String>) -> QueryError {
    if let Some(why) = refused {
        return QueryError::Refused(why);
    }
    let message = match &e {
        rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
        other => other.to_string(),
    };
    // SQLite's messages are one line already; keep it so whatever the input.
    QueryError::Sql(message.replace(['\n', '\r'], " "))
}

/// Why the authorizer refuses an action, or `None` to allow it.
fn refusal(ctx: &AuthContext<'_>) -> Option<String> {
    let read_only = "the history index is read-only here";
    match ctx.action {
        AuthAction::Select | AuthAction::Recursive | AuthAction::Function { .. } => None,
        // Reading is what queries are for. (SQLite names no view as the accessor of the
        // tables a view reads, so reads cannot be limited to the views; the index's own
        // tables are readable but undocumented, and shadowed by the views where the names
        // are the same.)
        AuthAction::Read { .. } => None,
        // Column lists of the views, nothing else.
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => match (pragma_name.to_ascii_lowercase().as_str(), pragma_value) {
            ("table_info" | "table_xinfo", Some(_)) => None,
            (name, _) => Some(format!(
                "PRAGMA {name}: only table_info(VIEW) is allowed; {read_only}"
            )),
        },
        AuthAction::Attach { .. } => Some(format!("ATTACH: {read_only}")),
        AuthAction::Detach { .. } => Some(format!("DETACH: {read_only}")),
        // CREATE and DROP show up as writes to the schema table first.
        AuthAction::Insert { table_name }
        | AuthAction::Update { table_name, .. }
        | AuthAction::Delete { table_name }
            if table_name.starts_with("sqlite_") =>
        {
            Some(format!("changing the schema: {read_only}"))
        }
        AuthAction::Insert { table_name } => Some(format!("INSERT into {table_name}: {read_only}")),
        AuthAction::Update { table_name, .. } => {
            Some(format!("UPDATE of {table_name}: {read_only}"))
        }
        AuthAction::Delete { table_name } => Some(format!("DELETE from {table_name}: {read_only}")),
        AuthAction::Transaction { .. } | AuthAction::Savepoint { .. } => {
            Some(format!("transactions: {read_only}"))
        }
        _ => Some(format!(
            "only SELECT (and WITH … SELECT) statements run; {read_only}"
        )),
    }
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
