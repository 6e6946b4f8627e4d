//! In-process timings of the history index for `benches/compare-pi`, where a `pi`
//! subcommand would add process start-up to what is measured.
//!
//! * `history-bench list AGENT_DIR [--no-index]`: lists every session as `pi sessions list`
//!   does (from the index with its summary rows refreshed, no text indexed; or with
//!   `--no-index` straight from the files as `JsonlStore` does); prints the count and
//!   milliseconds.
//! * `history-bench append AGENT_DIR FILE N`: N times, appends one entry to FILE and refreshes
//!   the index; prints the median refresh time.
//! * `history-bench open FILE [N]`: in-process medians of N runs (default 7) of opening one
//!   session: an mmap + newline count of the file (the physical floor), the cold open
//!   (`Session::open`, every line validated), the warm open through the head cache ("ready to
//!   interact": tree indexed, leaf and active path known), and the warm open plus the full
//!   context (`project` + `convert_to_llm`). The cache lives in a temporary directory. Prints
//!   one JSON object (milliseconds, and the entry and context message counts as a check).

use std::io::Write;
use std::time::Instant;

use pi_storage::history::{HistorySource, SearchQuery};
use pi_storage::{ListScope, StoreOptions, StoreSpec};

fn main() {
    if let Err(e) = run() {
        eprintln!("history-bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("open") {
        return open(&args[1..]);
    }
    let agent = std::path::PathBuf::from(args.get(1).ok_or("missing AGENT_DIR")?);
    let options = StoreOptions::new(&agent);
    let spec = StoreSpec::Jsonl(None);
    let source = HistorySource::open(&spec, &options)?;
    let index_path = source.index_path(&spec, &options);
    match args.first().map(String::as_str) {
        Some("list") if args.get(2).map(String::as_str) == Some("--no-index") => {
            let t = Instant::now();
            let list = source.store().list_sessions(&ListScope::All)?;
            println!("{} {:.2}", list.len(), t.elapsed().as_secs_f64() * 1e3);
        }
        Some("list") => {
            let t = Instant::now();
            let (index, _) = source.open_index_for_listing(&index_path)?;
            let list = index.sessions(&ListScope::All, source.layout())?;
            println!("{} {:.2}", list.len(), t.elapsed().as_secs_f64() * 1e3);
        }
        Some("search") => {
            let t = Instant::now();
            let (index, _) = source.open_index(&index_path)?;
            let hits = index.search(&SearchQuery::new(args.get(2).ok_or("missing QUERY")?))?;
            println!("{} {:.2}", hits.len(), t.elapsed().as_secs_f64() * 1e3);
        }
        Some("append") => {
            let file = args.get(2).ok_or("missing FILE")?;
            let n: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(20);
            let (mut index, _) = source.open_index(&index_path)?;
            let mut times = Vec::with_capacity(n);
            for i in 0..n {
                let mut f = std::fs::OpenOptions::new().append(true).open(file)?;
                writeln!(
                    f,
                    r#"{{"type":"message","id":"app{i:05}","parentId":null,"timestamp":"2026-03-02T00:00:00.000Z","message":{{"role":"user","content":"appended entry {i} zanzibarite"}}}}"#
                )?;
                drop(f);
                let t = Instant::now();
                let report = source.refresh(&mut index)?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
                if report.sessions_updated != 1 {
                    return Err(format!("expected one updated session, got {report:?}").into());
                }
            }
            times.sort_by(f64::total_cmp);
            println!("{n} {:.3}", times[n / 2]);
        }
        _ => return Err("usage: history-bench list|search|append AGENT_DIR …".into()),
    }
    Ok(())
}

fn median(
    mut f: impl FnMut() -> Result<usize, Box<dyn std::error::Error>>,
    n: usize,
) -> Result<(f64, usize), Box<dyn std::error::Error>> {
    let mut times = Vec::with_capacity(n);
    let mut check = 0;
    for _ in 0..n {
        let t = Instant::now();
        check = f()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[n / 2], check))
}

fn open(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    use pi_engine::context::{self, SessionPath};
    use pi_engine::session::{HeadCache, OpenedFrom, Session};
    let file = std::path::PathBuf::from(args.first().ok_or("missing FILE")?);
    let n: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(7);
    let dir = std::env::temp_dir().join(format!("history-bench-heads-{}", std::process::id()));
    let cache = HeadCache::new(&dir);
    let scan = median(
        || {
            let f = std::fs::File::open(&file)?;
            // SAFETY: read-only map of a file nothing else writes during the benchmark.
            let map = unsafe { memmap2::Mmap::map(&f)? };
            Ok(memchr::memchr_iter(b'\n', &map).count())
        },
        n,
    )?;
    let cold = median(|| Ok(Session::open(&file)?.entries().len()), n)?;
    let (_, first) = Session::open_cached(&file, Some(&cache))?;
    if first != OpenedFrom::Scan {
        return Err(format!("first open through an empty cache: {first:?}").into());
    }
    let warm_open = || -> Result<Session, Box<dyn std::error::Error>> {
        let (session, from) = Session::open_cached(&file, Some(&cache))?;
        if from != OpenedFrom::Cache {
            return Err(format!("warm open: {from:?}").into());
        }
        Ok(session)
    };
    let warm = median(
        || {
            let session = warm_open()?;
            Ok(session.branch_path().entries.len())
        },
        n,
    )?;
    let warm_context = median(
        || {
            let session = warm_open()?;
            let branch = session.branch_path();
            let projection = context::project(&SessionPath::of(&session, &branch));
            Ok(context::convert_to_llm(projection.messages()).len())
        },
        n,
    )?;
    let cache_bytes = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum::<u64>();
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{{\"runs\":{n},\"file_bytes\":{},\"cache_bytes\":{cache_bytes},\"lines\":{},\"entries\":{},\"branch\":{},\"llm_messages\":{},\"scan_ms\":{:.2},\"cold_ms\":{:.2},\"warm_ms\":{:.2},\"warm_context_ms\":{:.2}}}",
        std::fs::metadata(&file)?.len(),
        scan.1,
        cold.1,
        warm.1,
        warm_context.1,
        scan.0,
        cold.0,
        warm.0,
        warm_context.0
    );
    Ok(())
}
