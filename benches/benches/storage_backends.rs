//! Storage backends side by side: durable append, load, path to root, listing.
//!
//! Run with `cargo bench -p pi-benches --bench storage_backends`. Sample sizes are small so
//! the whole run takes a few minutes on two cores; figures are recorded in docs/storage.md.

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pi_storage::{
    EntryId, FsyncPolicy, JsonlLayout, JsonlStore, ListScope, RedbStore, SessionHeader, SessionId,
    SessionStore, SqliteStore, StoredEntry,
};

const BACKENDS: [&str; 3] = ["jsonl", "redb", "sqlite"];

fn open(backend: &str, dir: &Path, fsync: FsyncPolicy) -> Box<dyn SessionStore> {
    match backend {
        "jsonl" => Box::new(JsonlStore::open(
            JsonlLayout::PerCwd {
                root: dir.join("sessions"),
            },
            fsync,
        )),
        "redb" => Box::new(RedbStore::open(&dir.join("s.redb"), fsync).unwrap()),
        "sqlite" => Box::new(SqliteStore::open(&dir.join("s.sqlite"), fsync).unwrap()),
        other => panic!("unknown backend {other}"),
    }
}

fn header(id: &str) -> SessionHeader {
    SessionHeader::parse(
        format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/home/user/project"}}"#
        )
        .into_bytes(),
    )
    .unwrap()
}

/// A message entry of roughly the size Pi writes for a short turn (~450 bytes).
fn entry(i: usize, parent: Option<&str>) -> StoredEntry {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    let parent = parent.map_or("null".to_string(), |p| format!("\"{p}\""));
    StoredEntry::from_line(
        format!(
            r#"{{"type":"message","id":"{i:08x}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"{role}","content":[{{"type":"text","text":"entry {i}: Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat."}}],"timestamp":{ts}}}}}"#,
            ts = 1_767_225_600_000u64 + i as u64
        )
        .into_bytes(),
    )
}

/// A linear session of `n` entries.
fn chain(n: usize) -> Vec<StoredEntry> {
    (0..n)
        .map(|i| {
            let parent = (i > 0).then(|| format!("{:08x}", i - 1));
            entry(i, parent.as_deref())
        })
        .collect()
}

/// A deep tree: a 10,000-entry main line with a 5-entry side branch every 100 entries.
fn deep_tree() -> (Vec<StoredEntry>, EntryId) {
    let mut out = Vec::new();
    let mut next = 0usize;
    let mut main_parent: Option<String> = None;
    for depth in 0..10_000 {
        let id = next;
        next += 1;
        out.push(entry(id, main_parent.as_deref()));
        if depth % 100 == 50 {
            let mut p = format!("{id:08x}");
            for _ in 0..5 {
                let b = next;
                next += 1;
                out.push(entry(b, Some(&p)));
                p = format!("{b:08x}");
            }
        }
        main_parent = Some(format!("{id:08x}"));
    }
    (out, EntryId::new(main_parent.unwrap_or_default()))
}

fn durable_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("storage/durable_append");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let store = open(backend, dir.path(), FsyncPolicy::EveryEntry);
        let mut writer = store.create_session(&header("append"), &[]).unwrap();
        let line = entry(1, Some("00000000"));
        group.bench_function(BenchmarkId::from_parameter(backend), |b| {
            b.iter(|| writer.append(std::slice::from_ref(&line)).unwrap())
        });
    }
    group.finish();
}

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("storage/load");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for n in [10_000usize, 100_000] {
        let entries = chain(n);
        for backend in BACKENDS {
            let dir = tempfile::tempdir().unwrap();
            let store = open(backend, dir.path(), FsyncPolicy::Never);
            let id = SessionId::new(format!("load-{n}"));
            drop(
                store
                    .create_session(&header(id.as_str()), &entries)
                    .unwrap(),
            );
            group.bench_function(BenchmarkId::new(backend, n), |b| {
                b.iter(|| assert_eq!(store.read_session(&id).unwrap().entries.len(), n))
            });
        }
    }
    group.finish();
}

fn path_to_root(c: &mut Criterion) {
    let mut group = c.benchmark_group("storage/path_to_root_depth_10k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    let (entries, leaf) = deep_tree();
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let store = open(backend, dir.path(), FsyncPolicy::Never);
        let id = SessionId::new("deep");
        drop(store.create_session(&header("deep"), &entries).unwrap());
        group.bench_function(BenchmarkId::from_parameter(backend), |b| {
            b.iter(|| assert_eq!(store.read_path(&id, &leaf).unwrap().len(), 10_000))
        });
    }
    group.finish();
}

/// A short path in a big session: where an index pays off (JSONL must read the whole file).
fn short_path_in_big_session(c: &mut Criterion) {
    let mut group = c.benchmark_group("storage/path_to_root_depth_100_of_100k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    let entries = chain(100_000);
    let leaf = EntryId::new(format!("{:08x}", 99));
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let store = open(backend, dir.path(), FsyncPolicy::Never);
        let id = SessionId::new("big");
        drop(store.create_session(&header("big"), &entries).unwrap());
        group.bench_function(BenchmarkId::from_parameter(backend), |b| {
            b.iter(|| assert_eq!(store.read_path(&id, &leaf).unwrap().len(), 100))
        });
    }
    group.finish();
}

fn list_1000(c: &mut Criterion) {
    let mut group = c.benchmark_group("storage/list_1000_sessions");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    let entries = chain(20);
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let store = open(backend, dir.path(), FsyncPolicy::Never);
        for i in 0..1000 {
            drop(
                store
                    .create_session(&header(&format!("list-{i:04}")), &entries)
                    .unwrap(),
            );
        }
        group.bench_function(BenchmarkId::from_parameter(backend), |b| {
            b.iter(|| assert_eq!(store.list_sessions(&ListScope::All).unwrap().len(), 1000))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    durable_append,
    load,
    path_to_root,
    short_path_in_big_session,
    list_1000
);
criterion_main!(benches);
