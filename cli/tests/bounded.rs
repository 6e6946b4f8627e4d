//! The `pi` binary on sessions far larger than real ones: a linear chain of
//! 1,000,000 entries and a tree 100,000 levels deep with a branch at every level.
//! `pi sessions show`, `inspect --json` and `verify` must answer without a stack
//! overflow on the default 8 MiB main-thread stack, in memory that follows the
//! file's size, with output that follows the number of entries.
//!
//! Peak RSS of each run is measured with `/usr/bin/time -v` (when installed) and
//! printed; see docs/reliability.md for the figures. Run with output:
//!
//! ```text
//! cargo test --release -p pi-cli --test bounded -- --nocapture
//! ```

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const TS: &str = "2026-01-01T00:00:00.000Z";

fn header() -> String {
    format!(
        r#"{{"type":"session","version":3,"id":"0192f000-0000-7000-8000-00000000b0dd","timestamp":"{TS}","cwd":"/tmp/bounded"}}"#
    )
}

fn message(out: &mut Vec<u8>, id: u64, parent: Option<u64>, ts: &str, text: &str) {
    let parent = parent.map_or("null".to_string(), |p| format!("\"{p:08x}\""));
    let role = if id.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    writeln!(
        out,
        r#"{{"type":"message","id":"{id:08x}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"{role}","content":[{{"type":"text","text":"{text}"}}],"timestamp":1767225600000}}}}"#
    )
    .expect("write to a Vec");
}

fn chain(n: u64) -> Vec<u8> {
    let mut out = header().into_bytes();
    out.push(b'\n');
    for id in 0..n {
        message(&mut out, id, id.checked_sub(1), TS, "m");
    }
    out
}

/// A spine `depth` long; each spine entry also has an older side child, so the
/// spine is always the last child (the deepest indentation for a tree view).
fn deep_tree(depth: u64) -> Vec<u8> {
    let mut out = header().into_bytes();
    out.push(b'\n');
    for i in 0..depth {
        let parent = i.checked_sub(1);
        if let Some(p) = parent {
            let side = 0x8000_0000 | (p << 1);
            message(&mut out, side, Some(p), "2025-12-31T00:00:00.000Z", "side");
        }
        message(&mut out, i, parent, TS, "spine");
    }
    out
}

struct Run {
    stdout_len: u64,
    stdout_lines: u64,
    peak_rss_mb: Option<u64>,
}

/// Runs `pi args… file` with stdout to a file; fails on a non-zero exit or a panic.
fn pi(dir: &Path, args: &[&str], file: &Path) -> Run {
    let out_path = dir.join("stdout");
    let stdout = std::fs::File::create(&out_path).expect("create stdout file");
    let bin = assert_cmd::cargo::cargo_bin("pi");
    let time = Path::new("/usr/bin/time");
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-v").arg(&bin);
        c
    } else {
        Command::new(&bin)
    };
    let start = Instant::now();
    let output = cmd
        .args(args)
        .arg(file)
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::piped())
        .output()
        .expect("run pi");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "pi {args:?} failed: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let peak_rss_mb = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kb| kb / 1024);
    let text = std::fs::read(&out_path).expect("read stdout");
    let run = Run {
        stdout_len: text.len() as u64,
        stdout_lines: memchr_count(&text),
        peak_rss_mb,
    };
    eprintln!(
        "pi {} {}: {:.2} s, {} bytes out, peak RSS {} MB",
        args.join(" "),
        file.file_name().unwrap_or_default().to_string_lossy(),
        start.elapsed().as_secs_f64(),
        run.stdout_len,
        run.peak_rss_mb
            .map_or("(no /usr/bin/time)".to_string(), |m| m.to_string()),
    );
    run
}

fn memchr_count(text: &[u8]) -> u64 {
    text.iter().filter(|&&b| b == b'\n').count() as u64
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write session");
    path
}

/// show, inspect and verify on one file; `entries` is the number of entry lines.
fn all_commands(file: &Path, dir: &Path, entries: u64, inspect: bool) {
    let show = pi(dir, &["sessions", "show"], file);
    // Header block, then one line per entry.
    assert!(show.stdout_lines >= entries, "{} lines", show.stdout_lines);
    assert!(
        show.stdout_len < entries * 200,
        "show output is not linear in the entries: {} bytes",
        show.stdout_len
    );

    pi(dir, &["sessions", "verify"], file);
    if !inspect {
        return;
    }
    let inspect = pi(dir, &["sessions", "inspect", "--json"], file);
    let text = std::fs::read_to_string(dir.join("stdout")).expect("inspect output");
    assert!(text.starts_with("{\"header\":"));
    assert_eq!(
        text.matches("\"children\":[").count() as u64,
        entries,
        "every entry is a tree node"
    );
    assert!(inspect.stdout_len > 0);
}

/// `show` indents branch levels only so deep: a tree branching at every level
/// printed a staircase as deep as the tree on every line (quadratic output, many
/// gigabytes at 100,000 levels) before the indent was capped.
#[test]
fn show_output_stays_linear_on_a_tree_branching_at_every_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_file(dir.path(), "deep.jsonl", &deep_tree(2_000));
    let run = pi(dir.path(), &["sessions", "show"], &file);
    let text = std::fs::read_to_string(dir.path().join("stdout")).expect("show output");
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest < 300, "a line {widest} characters wide");
    assert!(run.stdout_lines >= 3_999);
}

#[test]
fn a_linear_chain_of_a_million_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_file(dir.path(), "chain.jsonl", &chain(1_000_000));
    all_commands(&file, dir.path(), 1_000_000, false);
}

/// `inspect --json` builds the context, token estimates and compaction plan of the
/// whole million-message branch. It streams them now (~1 GB peak RSS, ~33 s in release
/// on an idle 2-core machine; it used to take ~9 GB), so it runs with the others.
#[test]
fn inspect_on_a_linear_chain_of_a_million_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_file(dir.path(), "chain.jsonl", &chain(1_000_000));
    all_commands(&file, dir.path(), 1_000_000, true);
}

#[test]
fn a_tree_100_000_deep_with_a_branch_at_every_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = write_file(dir.path(), "deep.jsonl", &deep_tree(100_000));
    all_commands(&file, dir.path(), 199_999, true);
}
