//! The tables, created and upgraded by numbered migrations.
//!
//! Everything user-supplied (ids, lines, names, the cwd key) is `BYTEA`: PostgreSQL's `TEXT`
//! cannot hold a NUL character, which a JSON string may (`"\u0000"`), and the store promises
//! to give back every line as it was given. Tables are prefixed `pi_` and created in the
//! connection's current schema, so several teams can share a database by schema
//! (`?options=-csearch_path%3Dteam_a` in the URL).

use postgres::Client;

use super::conn::{pg, Work};

/// Numbered schema migrations, applied in order, each at most once.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        "CREATE TABLE pi_sessions (
        id               BYTEA PRIMARY KEY,
        cwd_key          BYTEA NOT NULL,
        header           BYTEA NOT NULL,
        next_seq         BIGINT NOT NULL,
        stored_ms        BIGINT NOT NULL,
        entry_count      BIGINT NOT NULL,
        message_count    BIGINT NOT NULL,
        name             BYTEA,
        first_message    BYTEA,
        last_activity_ms DOUBLE PRECISION,
        unlistable       BOOLEAN NOT NULL
    );
    CREATE INDEX pi_sessions_by_cwd ON pi_sessions (cwd_key);
    CREATE TABLE pi_entries (
        session_id BYTEA NOT NULL REFERENCES pi_sessions (id) ON DELETE CASCADE,
        seq        BIGINT NOT NULL,
        entry_id   BYTEA,
        parent_id  BYTEA,
        kind       BYTEA NOT NULL,
        line       BYTEA NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX pi_entries_by_id ON pi_entries (session_id, entry_id, seq);",
    ),
    // History search on the server (`search.rs`, `search_index.rs`): one row per searchable
    // part of an entry, its FTS5 tokens hex-encoded in order, and a GIN-indexed tsvector of
    // them that finds the candidates. Sessions stored before this are indexed by the next
    // search (their `search_next_seq` is 0).
    (
        2,
        "ALTER TABLE pi_sessions
        ADD COLUMN search_next_seq BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN search_docs     BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN search_tokens   BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN search_provider BYTEA,
        ADD COLUMN search_model    BYTEA;
    CREATE TABLE pi_search (
        id         BIGSERIAL PRIMARY KEY,
        session_id BYTEA NOT NULL REFERENCES pi_sessions (id) ON DELETE CASCADE,
        seq        BIGINT NOT NULL,
        part       INT NOT NULL,
        entry_id   BYTEA,
        ts_ms      BIGINT,
        role       TEXT NOT NULL,
        kind       TEXT NOT NULL,
        provider   BYTEA,
        model      BYTEA,
        tool_name  BYTEA,
        is_error   BOOLEAN NOT NULL,
        terms      TEXT[] NOT NULL,
        lexemes    TSVECTOR NOT NULL
    );
    CREATE INDEX pi_search_lexemes ON pi_search USING GIN (lexemes);
    CREATE INDEX pi_search_by_entry ON pi_search (session_id, seq, part);",
    ),
];

/// The newest schema version this build knows.
pub(crate) fn newest() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Applies the missing migrations in one transaction. A transaction-scoped advisory lock
/// serializes first opens from several machines (`CREATE TABLE IF NOT EXISTS` alone races).
/// Returns the version the database is at; one above [`newest`] means a newer build made
/// it, and nothing was changed.
pub(crate) fn migrate(client: &mut Client) -> Work<i64> {
    let mut tx = client.transaction().map_err(pg)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK_KEY])
        .map_err(pg)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS pi_schema_migrations (
             version    BIGINT PRIMARY KEY,
             applied_ms BIGINT NOT NULL
         );",
    )
    .map_err(pg)?;
    let current: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM pi_schema_migrations",
            &[],
        )
        .map_err(pg)?
        .get(0);
    if current > newest() {
        return Ok(current);
    }
    for (version, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        tx.batch_execute(sql).map_err(pg)?;
        tx.execute(
            "INSERT INTO pi_schema_migrations (version, applied_ms) VALUES ($1, $2)",
            &[version, &pi_formats::time::now_millis()],
        )
        .map_err(pg)?;
    }
    tx.commit().map_err(pg)?;
    Ok(current.max(newest()))
}

/// The advisory lock key that serializes schema migrations ("pi-schm" in ASCII).
const SCHEMA_LOCK_KEY: i64 = 0x0070_692d_7363_686d;
