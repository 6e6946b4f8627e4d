//! A warm open (through the head cache) gives exactly the cold open's session.

use super::*;
use crate::context::{self, SessionPath};
use std::io::Write;

/// Everything a caller can observe of an opened session.
fn snapshot(s: &Session) -> String {
    let branch = s.branch_path();
    let path = SessionPath::new(s, &branch.entries);
    let projection = context::project(&path);
    let llm = context::convert_to_llm(projection.messages());
    let mut labels: Vec<_> = s.labels().map(|(k, v)| format!("{k}={v:?}")).collect();
    labels.sort();
    let tree = s.tree();
    let lines: Vec<&[u8]> = (0..s.entries().len() as u32)
        .map(|i| s.entry_line(i))
        .collect();
    format!(
        "header {:?}\nentries {:?}\nlines {:?}\nleaf {:?}\ncount {}\nlabels {labels:?}\nname {:?}\nreport {:?}\nbranch {:?}\ntree {:?} {:?}\ncontext {}\nllm {:?}",
        s.header(),
        s.entries(),
        lines,
        s.leaf_id(),
        s.entry_count(),
        s.session_name(),
        s.load_report(),
        branch,
        tree.roots,
        tree.children,
        projection.context_value(),
        llm,
    )
}

/// Compares two snapshots, naming the first differing field (they can be megabytes).
#[track_caller]
fn same(expected: &str, got: &str, what: &str) {
    if expected == got {
        return;
    }
    for (e, g) in expected.lines().zip(got.lines()) {
        if e != g {
            let at = e.bytes().zip(g.bytes()).take_while(|(a, b)| a == b).count();
            let from = at.saturating_sub(200);
            panic!(
                "{what}: differs at byte {at} of\n  cold: {}\n  warm: {}",
                e.get(from..(at + 200).min(e.len())).unwrap_or(e),
                g.get(from..(at + 200).min(g.len())).unwrap_or(g)
            );
        }
    }
    panic!("{what}: different line counts");
}

fn cold(path: &Path) -> Result<String, String> {
    Session::open(path)
        .map(|s| snapshot(&s))
        .map_err(|e| e.to_string())
}

fn warm(path: &Path, cache: &HeadCache) -> Result<(String, OpenedFrom), String> {
    Session::open_cached(path, Some(cache))
        .map(|(s, from)| (snapshot(&s), from))
        .map_err(|e| e.to_string())
}

fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            jsonl_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "jsonl") {
            out.push(p);
        }
    }
}

fn fixtures() -> Vec<PathBuf> {
    let mut files = Vec::new();
    jsonl_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures"),
        &mut files,
    );
    assert!(files.len() > 50, "fixtures found: {}", files.len());
    files
}

fn cache_in(dir: &Path) -> HeadCache {
    HeadCache::new(dir.join("cache")).with_min_bytes(0)
}

#[test]
fn session_warm_open_equals_cold_open_for_every_fixture() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = cache_in(tmp.path());
    let mut warm_opens = 0;
    for (n, fixture) in fixtures().iter().enumerate() {
        let file = tmp.path().join(format!("{n}.jsonl"));
        std::fs::copy(fixture, &file).unwrap();
        let expected = cold(&file);
        let first = warm(&file, &cache);
        let second = warm(&file, &cache);
        let name = fixture.display();
        // Migration makes up ids, so two opens of a v1/v2 file differ; such files
        // are never cached.
        let migrated = Session::open(&file).is_ok_and(|s| s.load_report().migrated_from.is_some());
        match (&expected, &first, &second) {
            (Ok(_), Ok((_, OpenedFrom::Scan)), Ok((_, OpenedFrom::Scan))) if migrated => {}
            (Ok(e), Ok((f, OpenedFrom::Scan)), Ok((s, from))) if !migrated => {
                same(e, f, &format!("{name}: first open"));
                same(e, s, &format!("{name}: second open"));
                let empty = Session::open(&file).unwrap().load_report().was_empty;
                if empty {
                    assert_eq!(*from, OpenedFrom::Scan, "{name}");
                } else {
                    assert_eq!(*from, OpenedFrom::Cache, "{name}");
                    warm_opens += 1;
                }
            }
            (Err(e), Err(f), Err(s)) => {
                assert_eq!(e, f, "{name}");
                assert_eq!(e, s, "{name}");
            }
            _ => panic!(
                "{name}: cold ok {}, first {:?}, second {:?}",
                expected.is_ok(),
                first.as_ref().map(|r| r.1),
                second.as_ref().map(|r| r.1)
            ),
        }
    }
    assert!(warm_opens > 50, "warm opens: {warm_opens}");
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/realpi/sessions")
            .join(name),
    )
    .unwrap()
}

fn append(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

fn assert_same(path: &Path, cache: &HeadCache, from: OpenedFrom, what: &str) {
    let (got, how) = warm(path, cache).unwrap();
    same(&cold(path).unwrap(), &got, what);
    assert_eq!(how, from, "{what}");
}

#[test]
fn session_appended_after_indexing_scans_only_the_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = cache_in(tmp.path());
    let file = tmp.path().join("s.jsonl");
    std::fs::write(&file, fixture("rpc_compact_twice.jsonl")).unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "first open");
    assert_same(&file, &cache, OpenedFrom::Cache, "unchanged");

    let leaf = Session::open(&file).unwrap().leaf_id().unwrap().to_string();
    append(
        &file,
        format!(
            "{{\"type\":\"message\",\"id\":\"tail0001\",\"parentId\":\"{leaf}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"more\",\"timestamp\":1}}}}\n{{not json\n\n"
        )
        .as_bytes(),
    );
    assert_same(
        &file,
        &cache,
        OpenedFrom::CacheAndTail,
        "one entry and a bad line",
    );
    assert_same(
        &file,
        &cache,
        OpenedFrom::Cache,
        "after the tail was cached",
    );

    // A torn write: the last line has no LF and is not JSON yet.
    let line = "{\"type\":\"label\",\"id\":\"tail0002\",\"parentId\":\"tail0001\",\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"targetId\":\"tail0001\",\"label\":\"here\"}";
    let (a, b) = line.split_at(40);
    append(&file, a.as_bytes());
    assert_same(&file, &cache, OpenedFrom::CacheAndTail, "torn tail");
    assert_same(&file, &cache, OpenedFrom::Cache, "torn tail, cached");
    // The write completes, without the final LF: the line now parses.
    append(&file, b.as_bytes());
    assert_same(
        &file,
        &cache,
        OpenedFrom::CacheAndTail,
        "completed, unterminated",
    );
    // And the next append puts the LF before its own line.
    append(&file, b"\n{\"type\":\"session_info\",\"id\":\"tail0003\",\"parentId\":\"tail0002\",\"timestamp\":\"2026-01-01T00:00:02.000Z\",\"name\":\"renamed\"}\n");
    assert_same(&file, &cache, OpenedFrom::CacheAndTail, "next entry");
    let session = Session::open(&file).unwrap();
    assert_eq!(session.session_name().as_deref(), Some("renamed"));
    assert_eq!(session.label("tail0001").map(|l| &*l.text), Some("here"));
}

#[test]
fn session_rewritten_or_truncated_file_is_rescanned() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = cache_in(tmp.path());
    let file = tmp.path().join("s.jsonl");
    let original = fixture("rpc_compact_twice.jsonl");
    std::fs::write(&file, &original).unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "first open");

    // Same size, other bytes (an id changed in the last line), same inode; the
    // modification time is put back, so only the sampled bytes can tell.
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let mut changed = original.clone();
    let last_id = changed.len() - 30;
    changed[last_id] = if changed[last_id] == b'x' { b'y' } else { b'x' };
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .write_all(&changed)
        .unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_same(
        &file,
        &cache,
        OpenedFrom::Scan,
        "same size, same mtime, other bytes",
    );

    // Same size and bytes, new modification time: rescanned (nothing cheaper is safe).
    std::fs::write(&file, &original).unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "rewritten, same size");
    assert_same(&file, &cache, OpenedFrom::Cache, "rewritten, cached");

    // Truncated in the middle of a line.
    std::fs::write(&file, &original[..original.len() * 2 / 3]).unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "truncated");
    assert_same(&file, &cache, OpenedFrom::Cache, "truncated, cached");

    // Replaced by another file (new inode) that is longer than the cached one.
    let other = tmp.path().join("other.jsonl");
    let mut longer = original.clone();
    longer.extend_from_slice(b"\n\n");
    std::fs::write(&other, &longer).unwrap();
    std::fs::rename(&other, &file).unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "replaced by rename");
}

#[test]
fn session_corrupt_or_unwritable_cache_falls_back_to_a_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = cache_in(tmp.path());
    let file = tmp.path().join("s.jsonl");
    std::fs::write(&file, fixture("rpc_compact_twice.jsonl")).unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "first open");
    let entry = cache.entry_path(&file);
    let good = std::fs::read(&entry).unwrap();

    // Every single flipped byte, at a few positions, and a truncated file.
    for pos in [
        0,
        9,
        good.len() / 3,
        good.len() / 2,
        good.len() - 9,
        good.len() - 1,
    ] {
        let mut bad = good.clone();
        bad[pos] ^= 0x55;
        std::fs::write(&entry, &bad).unwrap();
        assert_same(
            &file,
            &cache,
            OpenedFrom::Scan,
            &format!("flipped byte {pos}"),
        );
        assert_eq!(std::fs::read(&entry).unwrap(), good, "rewritten");
    }
    std::fs::write(&entry, &good[..good.len() / 2]).unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "truncated cache");
    std::fs::write(&entry, b"").unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "empty cache");
    assert_same(&file, &cache, OpenedFrom::Cache, "rewritten cache");

    // A cache dir that cannot be created (its parent is a file): every open scans.
    let blocker = tmp.path().join("not-a-dir");
    std::fs::write(&blocker, b"x").unwrap();
    let unwritable = HeadCache::new(blocker.join("cache")).with_min_bytes(0);
    assert_same(&file, &unwritable, OpenedFrom::Scan, "unwritable");
    assert_same(&file, &unwritable, OpenedFrom::Scan, "unwritable, again");

    // A cache file for another session at this name is not used.
    let second = tmp.path().join("t.jsonl");
    std::fs::write(&second, fixture("rpc_compact_twice.jsonl")).unwrap();
    std::fs::copy(&entry, cache.entry_path(&second)).unwrap();
    assert_same(&second, &cache, OpenedFrom::Scan, "other session's cache");
}

#[test]
fn session_below_the_size_limit_is_not_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = HeadCache::new(tmp.path().join("cache"));
    let file = tmp.path().join("s.jsonl");
    std::fs::write(&file, fixture("rpc_compact_twice.jsonl")).unwrap();
    assert_same(&file, &cache, OpenedFrom::Scan, "small");
    assert_same(&file, &cache, OpenedFrom::Scan, "small, again");
    assert!(!cache.entry_path(&file).exists());
}
