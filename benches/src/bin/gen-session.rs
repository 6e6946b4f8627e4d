//! Writes one reproducible generated session, for the per-turn benchmarks of
//! `benches/compare-pi/turns.py`: `gen-session FILE MB [compacted|open]`.
//!
//! `compacted` (the default) ends the session with a compaction that keeps its last
//! few turns, so the context is the same small size whatever the file's size: the
//! case where per-turn work must follow the context, not the file. `open` has no
//! compaction at all (the context is the whole branch), for inspect and export.

use pi_benches::{generate_file, SessionSpec};
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (file, mb, shape) = match args.as_slice() {
        [file, mb] => (file, mb, "compacted"),
        [file, mb, shape] => (file, mb, shape.as_str()),
        _ => {
            eprintln!("usage: gen-session FILE MB [compacted|open]");
            std::process::exit(2);
        }
    };
    let Ok(mb) = mb.parse::<f64>() else {
        eprintln!("gen-session: MB must be a number, not {mb}");
        std::process::exit(2);
    };
    let mut spec = SessionSpec::new(7, (mb * (1 << 20) as f64) as usize);
    match shape {
        "compacted" => spec.final_compaction = true,
        "open" => spec.compaction_every = usize::MAX,
        other => {
            eprintln!("gen-session: unknown shape {other} (compacted or open)");
            std::process::exit(2);
        }
    }
    let file = PathBuf::from(file);
    match generate_file(&spec, &file) {
        Ok((bytes, entries)) => println!("{} {bytes} bytes, {entries} entries", file.display()),
        Err(e) => {
            eprintln!("gen-session: {}: {e}", file.display());
            std::process::exit(1);
        }
    }
}
