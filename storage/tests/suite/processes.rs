//! Tests across processes: write locks between processes, and SIGKILL during appends.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use pi_storage::StoreError;

use super::common::Backend;
use super::conformance::{header, line};

fn spawn_child(
    mode: &str,
    backend: Backend,
    dir: &Path,
    session: &str,
) -> (Child, BufReader<ChildStdout>) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "suite::child::child_main",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PI_STORAGE_CHILD", mode)
        .env("PI_STORAGE_CHILD_STORE", backend.spec(dir))
        .env("PI_STORAGE_CHILD_SESSION", session)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdout)
}

/// Reads child output until a line containing `marker`; the lines' tails after it.
fn wait_for(out: &mut BufReader<ChildStdout>, marker: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "child ended before printing {marker}");
        if let Some(at) = line.find(marker) {
            return line[at + marker.len()..].trim().to_string();
        }
    }
}

fn two_process_lock(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let h = header("shared-1", "/p");
    {
        let store = backend.open(dir.path());
        drop(
            store
                .create_session(&h, &[line(r#"{"type":"x","id":"1"}"#)])
                .unwrap(),
        );
    }
    let (mut child, mut out) = spawn_child("hold-lock", backend, dir.path(), "shared-1");
    wait_for(&mut out, "LOCKED");
    if backend == Backend::Redb {
        // redb: one process per database file.
        assert!(matches!(
            pi_storage::RedbStore::open(&dir.path().join("sessions.redb"), Default::default()),
            Err(StoreError::StoreLocked { .. })
        ));
    } else {
        let store = backend.open(dir.path());
        match store.open_writer(h.id()) {
            Err(e @ StoreError::SessionLocked { .. }) => {
                assert!(e.to_string().contains("shared-1"), "{e}")
            }
            other => panic!("expected SessionLocked, got {other:?}"),
        }
        // Readers never need the lock.
        assert_eq!(store.read_session(h.id()).unwrap().entries.len(), 1);
    }
    child.stdin.take().unwrap().write_all(b"done\n").unwrap();
    assert!(child.wait().unwrap().success());
    let store = backend.open(dir.path());
    let mut w = store.open_writer(h.id()).unwrap();
    w.append(&[line(r#"{"type":"x","id":"2"}"#)]).unwrap();
}

#[test]
fn two_process_lock_jsonl() {
    two_process_lock(Backend::JsonlFlat)
}

#[test]
fn two_process_lock_sqlite() {
    two_process_lock(Backend::Sqlite)
}

#[test]
fn two_process_lock_redb() {
    two_process_lock(Backend::Redb)
}

#[test]
fn two_process_lock_postgres() {
    if Backend::Postgres.available() {
        two_process_lock(Backend::Postgres)
    }
}

/// A child appends in a loop and is SIGKILLed; every acknowledged entry is there afterwards,
/// the lock died with the child, and the session takes new appends.
fn crash_keeps_acknowledged_entries(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let h = header("crash-1", "/p");
    {
        let store = backend.open(dir.path());
        drop(store.create_session(&h, &[]).unwrap());
    }
    let (mut child, mut out) = spawn_child("append-forever", backend, dir.path(), "crash-1");
    let mut acked = Vec::new();
    while acked.len() < 150 {
        acked.push(wait_for(&mut out, "ACK "));
    }
    child.kill().unwrap(); // SIGKILL on unix
    child.wait().unwrap();
    if backend == Backend::Postgres {
        // The server drops a dead client's lock when it reads the closed socket: wait for
        // that, as a restarted agent would meet it some moments later.
        super::postgres::wait_for_no_advisory_locks(&backend.spec(dir.path()));
    }
    // Acknowledgements already in the pipe were also complete appends.
    let mut rest = String::new();
    while out.read_line(&mut rest).unwrap_or(0) > 0 {
        if let Some(at) = rest.find("ACK ") {
            acked.push(rest[at + 4..].trim().to_string());
        }
        rest.clear();
    }

    let store = backend.open(dir.path());
    let data = store.read_session(h.id()).unwrap();
    let stored: Vec<String> = data
        .entries
        .iter()
        .filter_map(|e| e.id().map(ToString::to_string))
        .collect();
    assert!(
        stored.len() >= acked.len(),
        "{} acknowledged, {} stored",
        acked.len(),
        stored.len()
    );
    assert_eq!(
        stored[..acked.len()],
        acked[..],
        "acknowledged entries in order"
    );
    // At most one more complete entry (appended, killed before the ACK), and for JSONL at most
    // one torn line after it.
    assert!(stored.len() <= acked.len() + 1);
    let unparsed = data.entries.len() - stored.len();
    assert!(unparsed <= 1 && (unparsed == 0 || data.torn_tail));
    let mut w = store.open_writer(h.id()).unwrap();
    w.append(&[line(r#"{"type":"x","id":"after-crash"}"#)])
        .unwrap();
    let last = store.read_session(h.id()).unwrap().entries.pop().unwrap();
    assert_eq!(last.id().unwrap().as_str(), "after-crash");
}

#[test]
fn crash_keeps_acknowledged_entries_jsonl() {
    crash_keeps_acknowledged_entries(Backend::JsonlFlat)
}

#[test]
fn crash_keeps_acknowledged_entries_sqlite() {
    crash_keeps_acknowledged_entries(Backend::Sqlite)
}

#[test]
fn crash_keeps_acknowledged_entries_redb() {
    crash_keeps_acknowledged_entries(Backend::Redb)
}

#[test]
fn crash_keeps_acknowledged_entries_postgres() {
    if Backend::Postgres.available() {
        crash_keeps_acknowledged_entries(Backend::Postgres)
    }
}
