//! In-process timings of the history index for `benches/compare-pi`, where a `pi`
//! subcommand would add process start-up to what is measured.
//!
//! * `history-bench list AGENT_DIR [--no-index]`: lists every session (from the refreshed
//!   index, or with `--no-index` straight from the files as `JsonlStore` does); prints the
//!   count and milliseconds.
//! * `history-bench append AGENT_DIR FILE N`: N times, appends one entry to FILE and refreshes
//!   the index; prints the median refresh time.

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
            let (index, _) = source.open_index(&index_path)?;
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
