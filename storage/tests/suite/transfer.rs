//! Copy between stores, import of every Pi version, export, verify.

use pi_storage::{
    copy_sessions, export_to_file, import_jsonl, verify_session, CopyAction, EntryId, ListScope,
    SessionData, SessionId, SessionStore, StoreError,
};

use super::common::{all_fixtures, data, distinct_session_fixtures, Backend};
use super::conformance::line;

fn copy_all(from: &dyn SessionStore, to: &dyn SessionStore) -> pi_storage::CopyReport {
    let mut seen = 0;
    let report = copy_sessions(from, to, false, &mut |p| {
        seen += 1;
        assert_eq!(p.done, seen);
    })
    .unwrap();
    assert_eq!(seen, report.sessions.len());
    for (id, outcome) in &report.sessions {
        assert!(outcome.is_ok(), "{id}: {outcome:?}");
    }
    report
}

/// Every fixture: JSONL file → SQLite → redb → JSONL files, byte-identical; a second copy
/// changes nothing.
#[test]
fn fixtures_jsonl_sqlite_redb_jsonl_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Backend::Sqlite.open(dir.path());
    let fixtures = distinct_session_fixtures();
    for f in &fixtures {
        let action = pi_storage::transfer::put_session(&*sqlite, data(f), false).unwrap();
        assert!(matches!(action, CopyAction::Created { .. }), "{}", f.name());
    }
    let redb = Backend::Redb.open(dir.path());
    let report = copy_all(&*sqlite, &*redb);
    assert_eq!(
        report.count(|a| matches!(a, CopyAction::Created { .. })),
        fixtures.len()
    );
    let out = Backend::JsonlFlat.open(dir.path());
    copy_all(&*redb, &*out);
    for f in &fixtures {
        let id = data(f).header.id();
        let path = out_path(&*out, dir.path(), id);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            bytes,
            f.expected_export(),
            "{} via {}",
            f.name(),
            path.display()
        );
    }
    // Idempotent: everything is already there.
    for (from, to) in [(&sqlite, &redb), (&redb, &out)] {
        let again = copy_all(&**from, &**to);
        assert_eq!(again.count(|a| *a == CopyAction::Skipped), fixtures.len());
    }
}

fn out_path(store: &dyn SessionStore, dir: &std::path::Path, id: &SessionId) -> std::path::PathBuf {
    assert_eq!(store.name(), "jsonl");
    let flat = dir.join("flat");
    std::fs::read_dir(&flat)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with(&format!("_{id}.jsonl"))
        })
        .unwrap()
}

/// A session that grew in the source gets only its new lines; one that differs is a conflict;
/// a dry run writes nothing.
#[test]
fn copy_appends_missing_lines_and_reports_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let from = Backend::Sqlite.open(dir.path());
    let to = Backend::Redb.open(dir.path());
    let grow = super::conformance::header("grow", "/p");
    let clash = super::conformance::header("clash", "/p");
    let one = line(r#"{"type":"x","id":"1","parentId":null}"#);
    let two = line(r#"{"type":"x","id":"2","parentId":"1"}"#);
    let mut w = from
        .create_session(&grow, std::slice::from_ref(&one))
        .unwrap();
    drop(
        from.create_session(&clash, std::slice::from_ref(&one))
            .unwrap(),
    );
    drop(
        to.create_session(&clash, std::slice::from_ref(&two))
            .unwrap(),
    );
    copy_sessions(&*from, &*to, false, &mut |_| {}).unwrap();
    w.append(std::slice::from_ref(&two)).unwrap();

    let dry = copy_sessions(&*from, &*to, true, &mut |_| {}).unwrap();
    let action = |r: &pi_storage::CopyReport, id: &str| {
        r.sessions
            .iter()
            .find(|(s, _)| s.as_str() == id)
            .map(|(_, o)| o.as_ref().unwrap().clone())
            .unwrap()
    };
    assert_eq!(action(&dry, "grow"), CopyAction::Appended { lines: 1 });
    assert_eq!(to.read_session(grow.id()).unwrap().entries.len(), 1);
    assert!(matches!(action(&dry, "clash"), CopyAction::Conflict { .. }));

    let real = copy_sessions(&*from, &*to, false, &mut |_| {}).unwrap();
    assert_eq!(action(&real, "grow"), CopyAction::Appended { lines: 1 });
    assert_eq!(real.problems(), 1);
    assert_eq!(
        to.read_session(grow.id()).unwrap().entries,
        [one.clone(), two]
    );
    assert_eq!(to.read_session(clash.id()).unwrap().entries.len(), 1);
}

/// A session the target cannot hold (JSONL needs ids that name files) fails alone.
#[test]
fn copy_failure_of_one_session_does_not_stop_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let from = Backend::Sqlite.open(dir.path());
    let to = Backend::JsonlFlat.open(dir.path());
    drop(
        from.create_session(&super::conformance::header("bad/id", "/p"), &[])
            .unwrap(),
    );
    drop(
        from.create_session(&super::conformance::header("good", "/p"), &[])
            .unwrap(),
    );
    let report = copy_sessions(&*from, &*to, false, &mut |_| {}).unwrap();
    assert_eq!(report.problems(), 1);
    assert!(to.contains(&SessionId::new("good")).unwrap());
    let bad = report
        .sessions
        .iter()
        .find(|(id, _)| id.as_str() == "bad/id")
        .unwrap();
    assert!(matches!(bad.1, Err(StoreError::InvalidSessionId { .. })));
}

/// Import: v3 files verbatim, v1/v2 migrated as Pi does; a second import is recognised.
#[test]
fn import_every_version() {
    for backend in [Backend::Jsonl, Backend::Redb, Backend::Sqlite] {
        let dir = tempfile::tempdir().unwrap();
        let store = backend.open(dir.path());
        for f in distinct_session_fixtures() {
            let d = data(&f);
            let first = import_jsonl(&*store, &f.path).unwrap();
            assert!(
                matches!(first.action, CopyAction::Created { .. }),
                "{}",
                f.name()
            );
            let stored = store.read_session(d.header.id()).unwrap();
            if d.header.version() >= 3.0 {
                assert!(!first.migrated);
                assert_eq!(stored.to_jsonl(), f.expected_export(), "{}", f.name());
            } else {
                assert!(first.migrated, "{}", f.name());
                check_migrated(&f.name(), &stored);
            }
            let second = import_jsonl(&*store, &f.path).unwrap();
            assert_eq!(second.action, CopyAction::Skipped, "{}", f.name());
            assert_eq!(store.read_session(d.header.id()).unwrap(), stored);
        }
    }
}

fn check_migrated(name: &str, stored: &SessionData) {
    assert_eq!(stored.header.version(), 3.0, "{name}");
    let mut previous: Option<EntryId> = None;
    let v1 = name.starts_with("v1");
    for e in &stored.entries {
        let id = e.id().unwrap_or_else(|| panic!("{name}: entry without id"));
        if v1 {
            // v1 → v2 chains entries in file order.
            assert_eq!(e.parent_id(), previous.as_ref(), "{name}");
            assert_eq!(id.as_str().len(), 8);
        }
        previous = Some(id.clone());
        let text = String::from_utf8_lossy(e.line());
        assert!(!text.contains("hookMessage"), "{name}: {text}");
        assert!(!text.contains("firstKeptEntryIndex"), "{name}: {text}");
    }
}

/// Files Pi refuses are refused with the file and line named.
#[test]
fn import_refuses_what_pi_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let store = Backend::Sqlite.open(dir.path());
    let refused: Vec<_> = all_fixtures()
        .into_iter()
        .filter(|f| f.data.is_none())
        .collect();
    assert!(refused.len() >= 5);
    for f in refused {
        match import_jsonl(&*store, &f.path) {
            Err(e @ StoreError::InvalidHeader { line: 1, .. }) => {
                assert!(e.to_string().contains(&f.name()), "{e}")
            }
            other => panic!("{}: {other:?}", f.name()),
        }
    }
    assert!(store.session_ids().unwrap().is_empty());
}

#[test]
fn export_to_file_is_byte_identical_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let store = Backend::Redb.open(dir.path());
    for f in distinct_session_fixtures() {
        let d = data(&f);
        drop(store.create_session(&d.header, &d.entries).unwrap());
        let out = dir.path().join(f.name());
        export_to_file(&*store, d.header.id(), &out).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), f.expected_export());
        assert!(matches!(
            export_to_file(&*store, d.header.id(), &out),
            Err(StoreError::Io { .. })
        ));
    }
}

#[test]
fn verify_reports_without_repairing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Backend::Sqlite.open(dir.path());
    let report_for = |name: &str| {
        let f = all_fixtures()
            .into_iter()
            .find(|f| f.name() == name)
            .unwrap();
        let d = data(&f);
        if !store.contains(d.header.id()).unwrap() {
            drop(store.create_session(&d.header, &d.entries).unwrap());
        }
        verify_session(&*store, d.header.id()).unwrap()
    };
    assert_eq!(report_for("parent_cycle.jsonl").cycle_lines, [2, 3]);
    let dups = report_for("duplicate_ids.jsonl");
    assert_eq!(dups.duplicate_ids, [EntryId::new("dup1")]);
    let orphan = report_for("orphan_parent_leaf.jsonl");
    assert_eq!(orphan.orphans.len(), 1);
    let crlf = report_for("crlf_line_endings.jsonl");
    assert_eq!(crlf.blank_lines, [2, 4, 6]);
    let torn = report_for("truncated_last_line.jsonl");
    assert_eq!(torn.malformed_lines, [5]);
    assert!(!torn.torn_tail, "a database has no torn tail once copied");
    assert!(report_for("rpc_main.jsonl").is_clean());
    let _ = ListScope::All;
}
