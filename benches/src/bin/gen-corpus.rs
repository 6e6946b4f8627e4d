//! Writes a reproducible corpus of generated sessions in Pi's per-cwd layout, for
//! `benches/compare-pi`: `gen-corpus OUT_AGENT_DIR SESSIONS TOTAL_MB BIG_MB`.
//!
//! One session is `BIG_MB` large; the others share the rest, sizes varying ±75% around the
//! mean. Every session has branches and (from a few hundred KB on) compactions. A rare word
//! (`quokkaflux`) and a rare phrase (`purple elephant migration`) are appended as user
//! messages to 3 sessions, so searches have a known answer.

use std::io::Write;
use std::path::PathBuf;

use pi_benches::{write_session, SessionSpec};
use rand::{Rng, SeedableRng};

fn main() {
    if let Err(e) = run() {
        eprintln!("gen-corpus: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, sessions, total_mb, big_mb] = args.as_slice() else {
        return Err("usage: gen-corpus OUT_AGENT_DIR SESSIONS TOTAL_MB BIG_MB".into());
    };
    let sessions: usize = sessions.parse()?;
    let total = total_mb.parse::<usize>()? << 20;
    let big = big_mb.parse::<usize>()? << 20;
    if sessions < 2 || big >= total {
        return Err("need at least 2 sessions and BIG_MB < TOTAL_MB".into());
    }
    let dir = PathBuf::from(out)
        .join("sessions")
        .join(pi_storage::paths::session_dir_name("/home/user/project"));
    std::fs::create_dir_all(&dir)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mean = (total - big) / (sessions - 1);
    let (mut bytes, mut entries) = (0usize, 0usize);
    for i in 0..sessions {
        let target = if i == 0 {
            big
        } else {
            (mean as f64 * rng.gen_range(0.25..1.75)) as usize
        };
        let mut spec = SessionSpec::new(1000 + i as u64, target);
        // Compactions in ordinary-sized sessions too, not only in the big one.
        spec.compaction_every = 40;
        spec.branch_every = 23;
        let id = format!("0193a000-0000-7000-8000-{:012x}", spec.seed);
        let path = dir.join(pi_storage::paths::session_file_name(
            "2026-01-01T00:00:00.000Z",
            &id,
        ));
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let (b, e) = write_session(&spec, &mut file)?;
        if i % 337 == 5 {
            let line = format!(
                r#"{{"type":"message","id":"rare{i:04}","parentId":null,"timestamp":"2026-03-01T00:00:00.000Z","message":{{"role":"user","content":[{{"type":"text","text":"where did the quokkaflux go? the purple elephant migration test"}}],"timestamp":1772323200000}}}}"#
            );
            writeln!(file, "{line}")?;
        }
        file.flush()?;
        bytes += b;
        entries += e;
    }
    println!(
        "{sessions} sessions, {:.1} MB, {entries} entries in {}",
        bytes as f64 / 1e6,
        dir.display()
    );
    Ok(())
}
