//! The conformance suite: written once against `dyn SessionStore`, run for every backend.

use pi_storage::{
    walk_path, EntryId, LazySession, ListScope, SessionData, SessionHeader, SessionId,
    SessionStore, StoreError, StoredEntry, SummaryState,
};

use super::common::{data, distinct_session_fixtures, session_fixtures, Backend};

fn assert_same_lines(store: &dyn SessionStore, expected: &SessionData, what: &str) {
    let got = store.read_session(expected.header.id()).unwrap();
    assert_eq!(got.header.line(), expected.header.line(), "{what}: header");
    assert_eq!(
        got.entries.len(),
        expected.entries.len(),
        "{what}: line count"
    );
    for (i, (a, b)) in got.entries.iter().zip(&expected.entries).enumerate() {
        assert_eq!(a, b, "{what}: line {}", i + 2);
    }
    assert!(!got.torn_tail, "{what}: a store we wrote has no torn tail");
}

/// Every fixture goes in with one create and comes back line for line, byte for byte.
pub fn fixtures_round_trip(backend: Backend) {
    for f in session_fixtures() {
        let dir = tempfile::tempdir().unwrap();
        let store = backend.open(dir.path());
        let d = data(&f);
        drop(store.create_session(&d.header, &d.entries).unwrap());
        assert_same_lines(&*store, d, &f.name());
        let mut out = Vec::new();
        pi_storage::export_jsonl(&*store, d.header.id(), &mut out).unwrap();
        assert_eq!(out, f.expected_export(), "{}: export", f.name());
        // A fresh handle (as after a restart) sees the same.
        drop(store);
        let store = backend.open(dir.path());
        assert_same_lines(&*store, d, &f.name());
    }
}

/// The same, appended in batches of growing size through a writer.
pub fn fixtures_appended_in_batches(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    for f in distinct_session_fixtures() {
        let d = data(&f);
        let mut writer = store.create_session(&d.header, &[]).unwrap();
        let mut rest = &d.entries[..];
        let mut size = 1;
        while !rest.is_empty() {
            let n = size.min(rest.len());
            writer.append(&rest[..n]).unwrap();
            rest = &rest[n..];
            size += 1;
        }
        writer.sync().unwrap();
        assert_same_lines(&*store, d, &f.name());
    }
}

/// Path to root through the store equals the reference walk over the file, for every entry.
pub fn path_to_root(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    for f in distinct_session_fixtures() {
        let d = data(&f);
        drop(store.create_session(&d.header, &d.entries).unwrap());
        for e in &d.entries {
            let Some(id) = e.id() else { continue };
            let expected = walk_path(&d.entries, id).unwrap();
            let got = store.read_path(d.header.id(), id).unwrap();
            assert_eq!(got, expected, "{}: path to {id}", f.name());
            assert_eq!(got.last().and_then(StoredEntry::id), Some(id));
        }
        let missing = store.read_path(d.header.id(), &EntryId::new("no-such-entry"));
        assert!(matches!(missing, Err(StoreError::EntryNotFound { .. })));
    }
    let missing = store.read_path(&SessionId::new("no-such-session"), &EntryId::new("x"));
    assert!(matches!(missing, Err(StoreError::SessionNotFound { .. })));
}

/// A parent cycle ends the walk instead of looping (Pi itself loops forever).
pub fn path_to_root_survives_cycles(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    let f = session_fixtures()
        .into_iter()
        .find(|f| f.name() == "parent_cycle.jsonl")
        .unwrap();
    let d = data(&f);
    drop(store.create_session(&d.header, &d.entries).unwrap());
    let path = store
        .read_path(d.header.id(), &EntryId::new("c002"))
        .unwrap();
    let ids: Vec<_> = path.iter().map(|e| e.id().unwrap().as_str()).collect();
    assert_eq!(ids, ["c001", "c002"]);
}

/// Entries after a cursor: everything after the cursor's last occurrence.
pub fn read_after_cursor(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    for f in distinct_session_fixtures() {
        let d = data(&f);
        drop(store.create_session(&d.header, &d.entries).unwrap());
        for e in &d.entries {
            let Some(id) = e.id() else { continue };
            let at = d.entries.iter().rposition(|x| x.id() == Some(id)).unwrap();
            let got = store.read_after(d.header.id(), id).unwrap();
            assert_eq!(got, d.entries[at + 1..], "{}: after {id}", f.name());
        }
        let missing = store.read_after(d.header.id(), &EntryId::new("no-such-entry"));
        assert!(matches!(missing, Err(StoreError::EntryNotFound { .. })));
    }
}

/// Listing: Pi's summary per session, by cwd and for all, newest first.
pub fn list_sessions(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    let fixtures = distinct_session_fixtures();
    for f in &fixtures {
        let d = data(f);
        drop(store.create_session(&d.header, &d.entries).unwrap());
    }
    let all = store.list_sessions(&ListScope::All).unwrap();
    assert!(all.len() >= 30, "listed {}", all.len());
    assert!(all.windows(2).all(|w| w[0].modified_ms >= w[1].modified_ms));
    for f in &fixtures {
        let d = data(f);
        let mut state = SummaryState::default();
        for e in &d.entries {
            state.observe(e.line());
        }
        let listed = all.iter().find(|s| &s.id == d.header.id());
        match state.finish(&d.header, String::new(), 0) {
            None => assert!(listed.is_none(), "{} should be hidden", f.name()),
            Some(expected) => {
                let got = listed.unwrap_or_else(|| panic!("{} not listed", f.name()));
                assert_eq!(got.cwd, expected.cwd);
                assert_eq!(got.name, expected.name, "{}", f.name());
                assert_eq!(got.first_message, expected.first_message, "{}", f.name());
                assert_eq!(got.message_count, expected.message_count, "{}", f.name());
                assert_eq!(got.entry_count, expected.entry_count, "{}", f.name());
                assert_eq!(got.created_ms, expected.created_ms);
                assert_eq!(got.parent_session, expected.parent_session);
                if state.last_activity_ms.is_some() || expected.created_ms.is_some() {
                    assert_eq!(got.modified_ms, expected.modified_ms, "{}", f.name());
                }
            }
        }
    }
    // One cwd: exactly the sessions whose header names it.
    let cwd = "/home/user/pi-oracle/tricky/cwd";
    let mine = store.list_sessions(&ListScope::Cwd(cwd.into())).unwrap();
    let want = all.iter().filter(|s| s.cwd == cwd).count();
    assert!(want > 5);
    assert_eq!(mine.len(), want);
    assert!(mine.iter().all(|s| s.cwd == cwd));
    // A trailing slash names the same directory.
    let slash = store
        .list_sessions(&ListScope::Cwd(format!("{cwd}/")))
        .unwrap();
    assert_eq!(slash.len(), want);
    assert!(store
        .list_sessions(&ListScope::Cwd("/nowhere".into()))
        .unwrap()
        .is_empty());
    // Every session is enumerable for copying, listable or not.
    assert_eq!(store.session_ids().unwrap().len(), fixtures.len());
}

/// The summary follows appends (incrementally, for the database backends).
pub fn summary_tracks_appends(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    let h = header("sum1", "/p");
    let mut w = store.create_session(&h, &[]).unwrap();
    let listed = |store: &dyn SessionStore| {
        store
            .list_sessions(&ListScope::Cwd("/p".into()))
            .unwrap()
            .pop()
            .unwrap()
    };
    let s = listed(&*store);
    assert_eq!((s.message_count, s.first_message.clone()), (0, None));
    assert_eq!(s.modified_ms, 1_767_225_600_000);
    w.append(&[line(r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello","timestamp":1767225601000}}"#)]).unwrap();
    w.append(&[
        line(r#"{"type":"session_info","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","name":" named "}"#),
        line(r#"{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"timestamp":1767225603000}}"#),
    ]).unwrap();
    let s = listed(&*store);
    assert_eq!(s.message_count, 2);
    assert_eq!(s.entry_count, 3);
    assert_eq!(s.first_message.as_deref(), Some("hello"));
    assert_eq!(s.name.as_deref(), Some("named"));
    assert_eq!(s.modified_ms, 1_767_225_603_000);
    w.append(&[line(
        r#"{"type":"session_info","id":"d","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z"}"#,
    )])
    .unwrap();
    assert_eq!(
        listed(&*store).name,
        None,
        "an empty session_info clears the name"
    );
    // A line Pi's listing would throw on hides the session.
    w.append(&[line(r#"{"type":"message","id":"e","parentId":"d"}"#)])
        .unwrap();
    assert!(store.list_sessions(&ListScope::All).unwrap().is_empty());
    assert_eq!(store.session_ids().unwrap(), [SessionId::new("sum1")]);
}

/// One writer per session: a second gets `SessionLocked` until the first is dropped.
pub fn single_writer(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    let h = header("lock1", "/p");
    let mut first = store.create_session(&h, &[]).unwrap();
    match store.open_writer(h.id()) {
        Err(StoreError::SessionLocked { session, .. }) => assert_eq!(&session, h.id()),
        other => panic!("expected SessionLocked, got {other:?}"),
    }
    // A second handle on the same store location is refused too (redb: the whole file).
    if backend != Backend::Redb {
        let other = backend.open(dir.path());
        assert!(matches!(
            other.open_writer(h.id()),
            Err(StoreError::SessionLocked { .. })
        ));
        assert!(matches!(
            other.delete_session(h.id()),
            Err(StoreError::SessionLocked { .. })
        ));
        // Readers need no lock.
        assert_eq!(other.read_session(h.id()).unwrap().entries.len(), 0);
    }
    first.append(&[line(r#"{"type":"x","id":"1"}"#)]).unwrap();
    drop(first);
    let mut second = store.open_writer(h.id()).unwrap();
    second.append(&[line(r#"{"type":"x","id":"2"}"#)]).unwrap();
    let ids: Vec<_> = store
        .read_session(h.id())
        .unwrap()
        .entries
        .iter()
        .map(|e| e.id().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["1", "2"]);
}

/// Delete removes the session everywhere; other sessions are untouched.
pub fn delete(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    let a = header("del-a", "/p");
    let b = header("del-b", "/p");
    let entries = [
        line(
            r#"{"type":"message","id":"1","parentId":null,"message":{"role":"user","content":"x"}}"#,
        ),
        line(
            r#"{"type":"message","id":"2","parentId":"1","message":{"role":"assistant","content":"y"}}"#,
        ),
    ];
    drop(store.create_session(&a, &entries).unwrap());
    drop(store.create_session(&b, &entries).unwrap());
    let held = store.open_writer(a.id()).unwrap();
    assert!(matches!(
        store.delete_session(a.id()),
        Err(StoreError::SessionLocked { .. })
    ));
    drop(held);
    store.delete_session(a.id()).unwrap();
    assert!(!store.contains(a.id()).unwrap());
    assert!(matches!(
        store.read_session(a.id()),
        Err(StoreError::SessionNotFound { .. })
    ));
    assert!(matches!(
        store.read_path(a.id(), &EntryId::new("2")),
        Err(StoreError::SessionNotFound { .. })
    ));
    assert!(matches!(
        store.delete_session(a.id()),
        Err(StoreError::SessionNotFound { .. })
    ));
    let listed: Vec<_> = store
        .list_sessions(&ListScope::All)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, [b.id().clone()]);
    assert_eq!(
        store.read_path(b.id(), &EntryId::new("2")).unwrap().len(),
        2
    );
    // The id can be used again.
    drop(store.create_session(&a, &entries[..1]).unwrap());
    assert_eq!(store.read_session(a.id()).unwrap().entries.len(), 1);
}

/// Refusals: an existing id, a line that would break framing.
pub fn refusals(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    let h = header("dup1", "/p");
    let mut w = store.create_session(&h, &[]).unwrap();
    assert!(matches!(
        store.create_session(&h, &[]),
        Err(StoreError::SessionExists { .. })
    ));
    assert!(matches!(
        w.append(&[line("{\"a\":1}\n{\"b\":2}")]),
        Err(StoreError::InvalidLine { .. })
    ));
    assert!(matches!(
        store.create_session(&header("dup2", "/p"), &[line("x\ny")]),
        Err(StoreError::InvalidLine { .. })
    ));
    assert!(!store.contains(&SessionId::new("dup2")).unwrap());
    assert_eq!(store.read_session(h.id()).unwrap().entries.len(), 0);
}

/// Pi's lazy creation: nothing stored until a user or assistant message arrives.
pub fn lazy_creation(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = backend.open(dir.path());
    let h = header("lazy1", "/p");
    let mut session = LazySession::new(h.clone());
    session
        .append(
            &*store,
            &[line(r#"{"type":"model_change","id":"m","parentId":null}"#)],
        )
        .unwrap();
    session
        .append(
            &*store,
            &[line(
                r#"{"type":"thinking_level_change","id":"t","parentId":"m"}"#,
            )],
        )
        .unwrap();
    assert!(!session.is_persisted());
    assert!(!store.contains(h.id()).unwrap());
    assert!(store.list_sessions(&ListScope::All).unwrap().is_empty());
    session
        .append(&*store, &[line(r#"{"type":"message","id":"u","parentId":"t","message":{"role":"user","content":"go"}}"#)])
        .unwrap();
    assert!(session.is_persisted());
    session
        .append(&*store, &[line(r#"{"type":"message","id":"a","parentId":"u","message":{"role":"assistant","content":[]}}"#)])
        .unwrap();
    session.sync().unwrap();
    let ids: Vec<_> = store
        .read_session(h.id())
        .unwrap()
        .entries
        .iter()
        .map(|e| e.id().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["m", "t", "u", "a"]);
    // The writer is held: nobody else may write meanwhile.
    assert!(matches!(
        store.open_writer(h.id()),
        Err(StoreError::SessionLocked { .. })
    ));
}

pub fn header(id: &str, cwd: &str) -> SessionHeader {
    SessionHeader::parse(
        format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#
        )
        .into_bytes(),
    )
    .unwrap()
}

pub fn line(text: &str) -> StoredEntry {
    StoredEntry::from_line(text.as_bytes().to_vec())
}

macro_rules! conformance {
    ($($backend:ident),*) => {$(
        #[allow(non_snake_case)]
        mod $backend {
            use super::*;
            const B: Backend = Backend::$backend;
            fn run(check: fn(Backend)) {
                if B.available() {
                    check(B)
                }
            }
            #[test] fn fixtures_round_trip() { run(super::fixtures_round_trip) }
            #[test] fn fixtures_appended_in_batches() { run(super::fixtures_appended_in_batches) }
            #[test] fn path_to_root() { run(super::path_to_root) }
            #[test] fn path_to_root_survives_cycles() { run(super::path_to_root_survives_cycles) }
            #[test] fn read_after_cursor() { run(super::read_after_cursor) }
            #[test] fn list_sessions() { run(super::list_sessions) }
            #[test] fn summary_tracks_appends() { run(super::summary_tracks_appends) }
            #[test] fn single_writer() { run(super::single_writer) }
            #[test] fn delete() { run(super::delete) }
            #[test] fn refusals() { run(super::refusals) }
            #[test] fn lazy_creation() { run(super::lazy_creation) }
        }
    )*};
}

conformance!(Jsonl, JsonlFlat, Redb, Sqlite, Postgres);
