//! Open + build context of a generated 100 MB session, next to the physical floor:
//! reading the same bytes, and reading (or mapping) them plus finding every newline.
//! `open` is the cold open (every line validated); `open_warm` restores the entry
//! heads from the persisted head cache (`Session::open_cached`) the way `pi` does on
//! a second open, and touches only the lines it needs.
//!
//! `PI_BENCH_SESSION_MB` changes the size (default 100). The corpus is generated
//! once into the target directory and reused.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pi_benches::{generate_file, SessionSpec};
use pi_engine::context::{self, SessionPath};
use pi_engine::session::{HeadCache, Session};
use std::path::PathBuf;
use std::time::Duration;

fn corpus() -> PathBuf {
    let mb: usize = std::env::var("PI_BENCH_SESSION_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("bench-corpus");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("session-{mb}mb.jsonl"));
    if !path.exists() {
        let tmp = path.with_extension("tmp");
        generate_file(&SessionSpec::new(42, mb * 1024 * 1024), &tmp).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
    path
}

fn open_and_context(c: &mut Criterion) {
    let path = corpus();
    let len = std::fs::metadata(&path).unwrap().len();
    let mut group = c.benchmark_group("session_100mb");
    group.throughput(Throughput::Bytes(len));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    group.bench_function("read", |b| b.iter(|| std::fs::read(&path).unwrap().len()));
    group.bench_function("read+newline_scan", |b| {
        b.iter(|| {
            let bytes = std::fs::read(&path).unwrap();
            memchr::memchr_iter(b'\n', &bytes).count()
        })
    });
    group.bench_function("mmap+newline_scan", |b| {
        b.iter(|| {
            let file = std::fs::File::open(&path).unwrap();
            // SAFETY: read-only mapping of a file nothing else writes during the bench.
            let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
            memchr::memchr_iter(b'\n', &map).count()
        })
    });
    group.bench_function("open", |b| {
        b.iter(|| Session::open(&path).unwrap().entries().len())
    });
    group.bench_function("open+context", |b| {
        b.iter(|| {
            let session = Session::open(&path).unwrap();
            let branch = session.branch_path();
            let projection = context::project(&SessionPath::of(&session, &branch));
            let llm = context::convert_to_llm(projection.messages());
            llm.len()
        })
    });
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = HeadCache::new(cache_dir.path());
    // The first open writes the cache; every measured one is warm.
    Session::open_cached(&path, Some(&cache)).unwrap();
    group.bench_function("open_warm", |b| {
        b.iter(|| {
            let (session, _) = Session::open_cached(&path, Some(&cache)).unwrap();
            session.entries().len()
        })
    });
    group.bench_function("open_warm+context", |b| {
        b.iter(|| {
            let (session, _) = Session::open_cached(&path, Some(&cache)).unwrap();
            let branch = session.branch_path();
            let projection = context::project(&SessionPath::of(&session, &branch));
            let llm = context::convert_to_llm(projection.messages());
            llm.len()
        })
    });
    group.finish();
}

criterion_group!(benches, open_and_context);
criterion_main!(benches);
