//! What only the PostgreSQL store has to show (it also runs the whole conformance suite and
//! the multi-process tests): the migration round trip through it, its locks as the server
//! sees them, and use from inside an async runtime.

use std::time::{Duration, Instant};

use pi_storage::{
    copy_sessions, FsyncPolicy, PgUrl, PostgresStore, SessionId, SessionStore, StoreError,
};

use super::common::{data, distinct_session_fixtures, Backend};
use super::conformance::{header, line};

fn raw(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// Advisory locks held in the database `url` names.
fn advisory_locks(url: &str) -> i64 {
    raw(url)
        .query_one(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
             WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()",
            &[],
        )
        .unwrap()
        .get(0)
}

/// Waits until no advisory lock is held in the database (a killed client's connection has
/// been cleaned up by the server).
pub fn wait_for_no_advisory_locks(url: &str) {
    let start = Instant::now();
    while advisory_locks(url) > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the server kept a dead client's lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn copy_all(from: &dyn SessionStore, to: &dyn SessionStore) {
    let report = copy_sessions(from, to, false, &mut |_| {}).unwrap();
    for (id, outcome) in &report.sessions {
        assert!(outcome.is_ok(), "{id}: {outcome:?}");
    }
}

/// Every fixture: JSONL files → PostgreSQL → SQLite → JSONL files, byte-identical.
#[test]
fn jsonl_postgres_sqlite_jsonl_byte_identical() {
    if !Backend::Postgres.available() {
        return;
    }
    let (src, mid, out) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let jsonl = Backend::JsonlFlat.open(src.path());
    let fixtures = distinct_session_fixtures();
    for f in &fixtures {
        pi_storage::transfer::put_session(&*jsonl, data(f), false).unwrap();
    }
    let pg = Backend::Postgres.open(mid.path());
    copy_all(&*jsonl, &*pg);
    let sqlite = Backend::Sqlite.open(mid.path());
    copy_all(&*pg, &*sqlite);
    let back = Backend::JsonlFlat.open(out.path());
    copy_all(&*sqlite, &*back);
    assert_eq!(pg.session_ids().unwrap().len(), fixtures.len());
    for f in &fixtures {
        let id = data(f).header.id();
        let file = |root: &std::path::Path| {
            std::fs::read_dir(root.join("flat"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.to_string_lossy().ends_with(&format!("_{id}.jsonl")))
                .unwrap_or_else(|| panic!("{id} not in {}", root.display()))
        };
        let (before, after) = (file(src.path()), file(out.path()));
        assert_eq!(
            std::fs::read(&before).unwrap(),
            f.expected_export(),
            "{}",
            f.name()
        );
        assert_eq!(
            std::fs::read(&after).unwrap(),
            std::fs::read(&before).unwrap(),
            "{} via PostgreSQL and SQLite",
            f.name()
        );
    }
}

/// Lines PostgreSQL's TEXT could not hold (NUL, bytes that are not UTF-8) and ids with NUL.
#[test]
fn bytes_text_columns_could_not_hold() {
    if !Backend::Postgres.available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Backend::Postgres.open(dir.path());
    let lines = vec![
        line(
            r#"{"type":"message","id":"a\u0000b","parentId":null,"message":{"role":"user","content":"nul \u0000 here"}}"#,
        ),
        pi_storage::StoredEntry::from_line(
            b"{\"type\":\"x\",\"id\":\"c\",\"parentId\":\"a\\u0000b\",\"bad\":\"\xff\xfe\"}"
                .to_vec(),
        ),
        line(""),
    ];
    let h = header("bytes-1", "/p");
    drop(store.create_session(&h, &lines).unwrap());
    assert_eq!(store.read_session(h.id()).unwrap().entries, lines);
    let path = store
        .read_path(h.id(), &pi_storage::EntryId::new("c"))
        .unwrap();
    assert_eq!(path, lines[..2]);
}

/// The session lock is a server-side advisory lock: held while a writer lives, on the
/// writer's own connection, given back when it is dropped.
#[test]
fn writer_holds_an_advisory_lock_on_the_server() {
    if !Backend::Postgres.available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = Backend::Postgres.spec(dir.path());
    let store = Backend::Postgres.open(dir.path());
    let h = header("adv-1", "/p");
    let writer = store.create_session(&h, &[]).unwrap();
    assert_eq!(advisory_locks(&url), 1);
    let err = store.open_writer(h.id()).unwrap_err();
    assert!(matches!(err, StoreError::SessionLocked { .. }));
    assert!(err.to_string().contains("adv-1"), "{err}");
    drop(writer);
    assert_eq!(advisory_locks(&url), 0);
}

/// A database written by a newer build is refused rather than misread.
#[test]
fn newer_schema_is_refused() {
    if !Backend::Postgres.available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = Backend::Postgres.spec(dir.path());
    drop(Backend::Postgres.open(dir.path()));
    raw(&url)
        .execute(
            "INSERT INTO pi_schema_migrations (version, applied_ms) VALUES (99, 0)",
            &[],
        )
        .unwrap();
    let err =
        PostgresStore::open(&PgUrl::parse(&url).unwrap(), FsyncPolicy::default()).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
}

/// The engine calls stores from async code; the blocking client must work there too.
#[test]
fn usable_inside_an_async_runtime() {
    if !Backend::Postgres.available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The test's own admin client (which creates the database) is the blocking kind.
    let url = PgUrl::parse(&Backend::Postgres.spec(dir.path())).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = PostgresStore::open(&url, FsyncPolicy::TurnEnd).unwrap();
        let h = header("async-1", "/p");
        let mut w = store.create_session(&h, &[]).unwrap();
        w.append(&[line(r#"{"type":"x","id":"1"}"#)]).unwrap();
        w.sync().unwrap();
        drop(w);
        assert_eq!(store.read_session(h.id()).unwrap().entries.len(), 1);
        assert!(store.contains(&SessionId::new("async-1")).unwrap());
    });
}

/// An unreachable server is a clear error naming the store, without the password.
#[test]
fn unreachable_server_is_reported() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = PgUrl::parse(&format!("postgres://pi:hunter2@127.0.0.1:{port}/db")).unwrap();
    let err = PostgresStore::open(&url, FsyncPolicy::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!("postgres://pi@127.0.0.1:{port}/db")),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("connect"), "{text}");
}

/// Ends the server side of every connection of this database except the caller's.
fn terminate_connections(url: &str) {
    let ended: i64 = raw(url)
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()) t",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(ended > 0);
}

/// The store's shared connection comes back after the server dropped it (a restart, a cut);
/// a writer's does not: its appends fail, and its lock is free for the next writer.
#[test]
fn lost_connections() {
    if !Backend::Postgres.available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = Backend::Postgres.spec(dir.path());
    let store = Backend::Postgres.open(dir.path());
    let h = header("lost-1", "/p");
    let mut writer = store
        .create_session(&h, &[line(r#"{"type":"x","id":"1"}"#)])
        .unwrap();
    terminate_connections(&url);
    // The call that meets the closed connection may fail; the next one reconnects.
    let _ = store.read_session(h.id());
    assert_eq!(store.read_session(h.id()).unwrap().entries.len(), 1);
    let err = writer
        .append(&[line(r#"{"type":"x","id":"2"}"#)])
        .unwrap_err();
    assert!(matches!(err, StoreError::Database { .. }), "{err}");
    wait_for_no_advisory_locks(&url);
    let mut next = store.open_writer(h.id()).unwrap();
    next.append(&[line(r#"{"type":"x","id":"3"}"#)]).unwrap();
    drop(writer);
    let ids: Vec<_> = store
        .read_session(h.id())
        .unwrap()
        .entries
        .iter()
        .map(|e| e.id().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["1", "3"], "the lost writer appended nothing");
}
