//! What only the JSONL backend promises: Pi's layout, torn tails, files never rewritten.

use std::fs;

use pi_storage::{
    verify_session, FsyncPolicy, JsonlLayout, JsonlStore, ListScope, SessionId, SessionStore,
};

use super::common::{data, session_fixtures};
use super::conformance::{header, line};

#[test]
fn files_go_where_pi_puts_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let store = JsonlStore::open(
        JsonlLayout::PerCwd { root: root.clone() },
        FsyncPolicy::EveryEntry,
    );
    let h = header("0192a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "/Users/a/b c/d");
    drop(store.create_session(&h, &[]).unwrap());
    let expected = root
        .join("--Users-a-b c-d--")
        .join("2026-01-01T00-00-00-000Z_0192a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl");
    assert_eq!(store.session_path(h.id()).unwrap(), expected);
    let mut want = h.line().to_vec();
    want.push(b'\n');
    assert_eq!(fs::read(&expected).unwrap(), want);
    // Listing one cwd reads only its directory.
    assert_eq!(
        store
            .list_sessions(&ListScope::Cwd("/Users/a/b c/d".into()))
            .unwrap()
            .len(),
        1
    );
    assert!(store
        .list_sessions(&ListScope::Cwd("/Users/a".into()))
        .unwrap()
        .is_empty());
}

#[test]
fn sessions_are_found_by_header_when_names_do_not_say() {
    let dir = tempfile::tempdir().unwrap();
    let flat = dir.path().join("flat");
    fs::create_dir_all(&flat).unwrap();
    let h = header("renamed", "/p");
    let mut bytes = h.line().to_vec();
    bytes.extend_from_slice(b"\n{\"type\":\"x\",\"id\":\"1\"}\n");
    fs::write(flat.join("whatever.jsonl"), &bytes).unwrap();
    fs::write(flat.join("notes.txt"), b"not a session").unwrap();
    fs::write(flat.join("garbage.jsonl"), b"hello\n").unwrap();
    let store = JsonlStore::open(JsonlLayout::Flat { dir: flat }, FsyncPolicy::EveryEntry);
    assert_eq!(store.read_session(h.id()).unwrap().entries.len(), 1);
    assert_eq!(store.session_ids().unwrap(), [h.id().clone()]);
    assert_eq!(store.list_sessions(&ListScope::All).unwrap().len(), 1);
}

/// A crash left half a line: it stays, and new entries start on a fresh line after it.
#[test]
fn torn_tail_is_kept_and_next_append_starts_a_new_line() {
    let f = session_fixtures()
        .into_iter()
        .find(|f| f.name() == "truncated_last_line.jsonl")
        .unwrap();
    assert_ne!(f.bytes.last(), Some(&b'\n'));
    let dir = tempfile::tempdir().unwrap();
    let flat = dir.path().join("flat");
    fs::create_dir_all(&flat).unwrap();
    let path = flat.join("2025-11-30T10-53-20-000Z_trunc-last.jsonl");
    fs::write(&path, &f.bytes).unwrap();
    let store = JsonlStore::open(JsonlLayout::Flat { dir: flat }, FsyncPolicy::EveryEntry);
    let id = SessionId::new("trunc-last");

    let before = store.read_session(&id).unwrap();
    assert!(before.torn_tail);
    assert_eq!(before, *data(&f));
    let report = verify_session(&store, &id).unwrap();
    assert!(report.torn_tail);
    assert_eq!(report.malformed_lines, [5]);

    // Opening a writer changes nothing on disk.
    let mut w = store.open_writer(&id).unwrap();
    assert_eq!(fs::read(&path).unwrap(), f.bytes);
    let next = line(r#"{"type":"x","id":"n1","parentId":"e003"}"#);
    w.append(std::slice::from_ref(&next)).unwrap();
    w.append(&[line(r#"{"type":"x","id":"n2","parentId":"n1"}"#)])
        .unwrap();
    let after = fs::read(&path).unwrap();
    assert!(
        after.starts_with(&f.bytes),
        "torn bytes are never rewritten"
    );
    let mut want = f.bytes.clone();
    want.extend_from_slice(b"\n{\"type\":\"x\",\"id\":\"n1\",\"parentId\":\"e003\"}\n");
    want.extend_from_slice(b"{\"type\":\"x\",\"id\":\"n2\",\"parentId\":\"n1\"}\n");
    assert_eq!(after, want);
    let reread = store.read_session(&id).unwrap();
    assert!(!reread.torn_tail);
    assert_eq!(reread.entries.len(), before.entries.len() + 2);
    let path_ids: Vec<_> = store
        .read_path(&id, &pi_storage::EntryId::new("n2"))
        .unwrap()
        .iter()
        .map(|e| e.id().unwrap().to_string())
        .collect();
    assert_eq!(path_ids, ["e001", "e002", "e003", "n1", "n2"]);
}

/// Opening, reading, listing and verifying never touch a file.
#[test]
fn files_are_never_rewritten_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let flat = dir.path().join("flat");
    fs::create_dir_all(&flat).unwrap();
    let fixtures = session_fixtures();
    for (i, f) in fixtures.iter().enumerate() {
        fs::write(flat.join(format!("{i:02}_{}", f.name())), &f.bytes).unwrap();
    }
    let snapshot = || {
        let mut files: Vec<_> = fs::read_dir(&flat)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let m = fs::metadata(&p).unwrap();
                (p.clone(), fs::read(&p).unwrap(), m.modified().unwrap())
            })
            .collect();
        files.sort();
        files
    };
    let before = snapshot();
    let store = JsonlStore::open(
        JsonlLayout::Flat { dir: flat.clone() },
        FsyncPolicy::EveryEntry,
    );
    for id in store.session_ids().unwrap() {
        store.read_session(&id).unwrap();
        verify_session(&store, &id).unwrap();
        drop(store.open_writer(&id).unwrap());
    }
    store.list_sessions(&ListScope::All).unwrap();
    assert_eq!(snapshot(), before);
}

/// A flat (custom) directory is shared by every cwd; listing one cwd filters on the header.
#[test]
fn flat_directory_filters_by_header_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(
        JsonlLayout::Flat {
            dir: dir.path().into(),
        },
        FsyncPolicy::Never,
    );
    drop(store.create_session(&header("a1", "/x"), &[]).unwrap());
    drop(store.create_session(&header("b1", "/y"), &[]).unwrap());
    drop(store.create_session(&header("c1", "/x/"), &[]).unwrap());
    let ids = |cwd: &str| -> Vec<String> {
        let mut ids: Vec<_> = store
            .list_sessions(&ListScope::Cwd(cwd.into()))
            .unwrap()
            .into_iter()
            .map(|s| s.id.to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids("/x"), ["a1", "c1"]);
    assert_eq!(ids("/y"), ["b1"]);
}

/// Files written under a layout Pi uses are readable by Pi's rules: header first, one entry
/// per line, each followed by a line feed (checked against the Pi-written fixtures' framing).
#[test]
fn pi_written_files_come_back_unchanged_after_appends() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let store = JsonlStore::open(JsonlLayout::PerCwd { root }, FsyncPolicy::TurnEnd);
    for f in session_fixtures()
        .into_iter()
        .filter(|f| f.path.to_string_lossy().contains("realpi/sessions"))
    {
        let d = data(&f);
        let (head, tail) = d.entries.split_at(d.entries.len() / 2);
        let mut w = store.create_session(&d.header, head).unwrap();
        for e in tail {
            w.append(std::slice::from_ref(e)).unwrap();
        }
        w.sync().unwrap();
        let path = store.session_path(d.header.id()).unwrap();
        assert_eq!(fs::read(&path).unwrap(), f.bytes, "{}", f.name());
    }
}
