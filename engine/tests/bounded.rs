//! Bounded resources on inputs far larger than any real session: a linear chain
//! of 1,000,000 entries, a tree 100,000 levels deep with a branch at every level,
//! a single 50 MB line, a line nested 1,000,000 levels deep, a 200,000-entry v1
//! migration (the streaming parsers' own bounds are in pi-agent's `tests/bounded_streams.rs`). Everything the engine does with a session must
//! walk paths and trees with explicit stacks: these run on the test harness's
//! 2 MiB thread stacks, a quarter of the binary's 8 MiB main thread.
//!
//! Each test prints the process's peak RSS (VmHWM). Tests share the process, so for
//! a per-test figure run one at a time:
//!
//! ```text
//! cargo test --release -p pi-engine --test bounded -- --test-threads=1 --nocapture
//! ```

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_engine::compaction::{
    collect_entries_for_branch_summary, prepare_branch_entries, prepare_compaction,
    CompactionSettings,
};
use pi_engine::context::{convert_to_llm, project, SessionPath};
use pi_engine::session::verify::verify_bytes;
use pi_engine::session::{LeafChoice, Session};
use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

const SESSION_ID: &str = "0192f000-0000-7000-8000-00000000b0dd";
const TS: &str = "2026-01-01T00:00:00.000Z";

fn header(version: u32) -> String {
    format!(
        r#"{{"type":"session","version":{version},"id":"{SESSION_ID}","timestamp":"{TS}","cwd":"/tmp/bounded"}}"#
    )
}

/// One message entry; `parent` `None` is a root. User and assistant alternate.
fn message(out: &mut Vec<u8>, id: u64, parent: Option<u64>, ts: &str, text: &str) {
    let parent = parent.map_or("null".to_string(), |p| format!("\"{p:08x}\""));
    if id.is_multiple_of(2) {
        writeln!(
            out,
            r#"{{"type":"message","id":"{id:08x}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"user","content":[{{"type":"text","text":"{text}"}}],"timestamp":1767225600000}}}}"#
        )
    } else {
        writeln!(
            out,
            r#"{{"type":"message","id":"{id:08x}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":{{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15}},"stopReason":"stop","timestamp":1767225600000}}}}"#
        )
    }
    .expect("write to a Vec");
}

/// Header + `n` messages, each the child of the one before.
fn chain(n: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n as usize * 200);
    out.extend_from_slice(header(3).as_bytes());
    out.push(b'\n');
    for id in 0..n {
        message(&mut out, id, id.checked_sub(1), TS, "m");
    }
    out
}

/// A spine `depth` entries long where every spine entry also has a side child,
/// older than the spine child so the spine is the last child everywhere (the case
/// that indents a tree view deepest). The last line is the spine's end: the leaf.
fn deep_tree(depth: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(depth as usize * 400);
    out.extend_from_slice(header(3).as_bytes());
    out.push(b'\n');
    let side = |i: u64| 0x8000_0000 | (i << 1);
    for i in 0..depth {
        let parent = i.checked_sub(1);
        if let Some(p) = parent {
            message(
                &mut out,
                side(p),
                Some(p),
                "2025-12-31T00:00:00.000Z",
                "side",
            );
        }
        message(&mut out, i, parent, TS, "spine");
    }
    out
}

fn peak_rss_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

fn report(what: &str, start: Instant) {
    eprintln!(
        "{what}: {:.2} s, process peak RSS {} MB",
        start.elapsed().as_secs_f64(),
        peak_rss_mb()
    );
}

/// Prints the time since the last step and the process's peak RSS so far.
struct Steps {
    what: &'static str,
    last: Instant,
}

impl Steps {
    fn new(what: &'static str) -> Steps {
        Steps {
            what,
            last: Instant::now(),
        }
    }

    fn step(&mut self, name: &str) {
        eprintln!(
            "  {}: {name}: {:.2} s, peak RSS {} MB",
            self.what,
            self.last.elapsed().as_secs_f64(),
            peak_rss_mb()
        );
        self.last = Instant::now();
    }
}

/// Verify, load, tree, branch, context, LLM conversion, compaction and
/// branch-summary preparation.
/// `compaction: false` stops after the context (see the ignored test below).
fn exercise(
    what: &'static str,
    bytes: Vec<u8>,
    entries: usize,
    branch_len: usize,
    compaction: bool,
) {
    let mut steps = Steps::new(what);
    let path = Path::new("bounded.jsonl");
    let problems = verify_bytes(&bytes, path);
    assert!(
        problems.is_empty(),
        "{:?}",
        &problems[..problems.len().min(3)]
    );
    steps.step("verify");
    let session = Session::from_bytes(bytes, path).expect("loads");
    assert_eq!(session.entry_count(), entries);
    steps.step("load");
    let tree = session.tree();
    assert_eq!(tree.roots.len(), 1);
    drop(tree);
    steps.step("tree");
    let branch = session.branch_path();
    assert_eq!(branch.entries.len(), branch_len);
    assert!(branch.cycle.is_none());
    assert_eq!(session.context_path(LeafChoice::Current), branch);
    steps.step("branch");

    let source = SessionPath::new(&session, &branch.entries);
    let projection = project(&source);
    steps.step("project");
    let llm = convert_to_llm(projection.messages());
    assert_eq!(llm.len(), branch_len);
    drop(llm);
    drop(projection);
    steps.step("convert_to_llm");
    if !compaction {
        return;
    }

    let values = source.values();
    steps.step("parse the branch");
    let prep = prepare_compaction(&values, &CompactionSettings::default()).expect("cuts");
    assert!(!prep.messages_to_summarize.is_empty());
    drop(prep);
    drop(values);
    steps.step("prepare_compaction");

    // Navigating from the leaf back to the root summarizes the whole branch.
    let root_id = session.entries()[0]
        .id
        .as_deref()
        .expect("root id")
        .to_string();
    let collected = collect_entries_for_branch_summary(&session, session.leaf_id(), &root_id);
    assert_eq!(collected.entries.len(), branch_len - 1);
    steps.step("collect branch entries");
    let _ = prepare_branch_entries(&collected.entries, 20_000);
    steps.step("prepare_branch_entries");
}

#[test]
fn a_linear_chain_of_a_million_entries() {
    let start = Instant::now();
    exercise("chain", chain(1_000_000), 1_000_000, 1_000_000, false);
    report("1,000,000-entry chain", start);
}

/// Compaction and branch-summary preparation over the whole million-entry branch:
/// linear, but ~9 GB peak (every message is a `serde_json::Value`, projected twice)
/// and ~1-3 minutes, so not in the default run:
/// `cargo test --release -p pi-engine --test bounded -- --ignored --nocapture`.
#[test]
#[ignore = "slow (over 60 s in release) and ~9 GB peak RSS"]
fn a_linear_chain_of_a_million_entries_through_compaction() {
    let start = Instant::now();
    exercise("chain", chain(1_000_000), 1_000_000, 1_000_000, true);
    report("1,000,000-entry chain with compaction", start);
}

#[test]
fn a_tree_100_000_deep_with_a_branch_at_every_level() {
    let start = Instant::now();
    exercise("deep tree", deep_tree(100_000), 199_999, 100_000, true);
    report("100,000-deep tree", start);
}

#[test]
fn a_million_entry_chain_exports_through_the_jsonl_store() {
    use pi_storage::{export_jsonl, import_jsonl, FsyncPolicy, JsonlLayout, JsonlStore, SessionId};
    let start = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("chain.jsonl");
    let bytes = chain(1_000_000);
    std::fs::write(&file, &bytes).expect("write");
    let store = JsonlStore::open(
        JsonlLayout::Flat {
            dir: dir.path().join("store"),
        },
        FsyncPolicy::TurnEnd,
    );
    let outcome = import_jsonl(&store, &file).expect("import");
    let mut exported = Vec::new();
    let id: SessionId = outcome.id;
    export_jsonl(&store, &id, &mut exported).expect("export");
    assert_eq!(exported, bytes, "export is the imported file byte for byte");
    report("1,000,000-entry import + export", start);
}

#[test]
fn a_single_50_mb_line() {
    let start = Instant::now();
    let big = "x".repeat(50 << 20);
    let mut bytes = header(3).into_bytes();
    bytes.push(b'\n');
    message(&mut bytes, 0, None, TS, "q");
    message(&mut bytes, 1, Some(0), TS, &big);
    message(&mut bytes, 2, Some(1), TS, "q");
    exercise_small(bytes, 3);

    // The same line torn (no closing, no newline): skipped and reported, not fatal.
    let mut torn = header(3).into_bytes();
    torn.push(b'\n');
    message(&mut torn, 0, None, TS, "q");
    torn.extend_from_slice(br#"{"type":"message","id":"00000001","parentId":"00000000","message":{"role":"user","content":""#);
    torn.extend_from_slice(big.as_bytes());
    let session = Session::from_bytes(torn, Path::new("torn.jsonl")).expect("loads");
    assert_eq!(session.entry_count(), 1);
    assert_eq!(session.load_report().skipped_lines.len(), 1);
    report("50 MB line", start);
}

fn exercise_small(bytes: Vec<u8>, entries: usize) {
    let path = Path::new("bounded.jsonl");
    assert!(verify_bytes(&bytes, path).is_empty());
    let session = Session::from_bytes(bytes, path).expect("loads");
    assert_eq!(session.entry_count(), entries);
    let branch = session.branch_path();
    let source = SessionPath::new(&session, &branch.entries);
    let llm = convert_to_llm(project(&source).messages());
    assert_eq!(llm.len(), entries);
}

/// JSON nested far deeper than any parser's stack: the line is refused as
/// malformed (serde_json stops at depth 128), the rest of the file is kept.
#[test]
fn a_line_nested_a_million_levels_deep() {
    let start = Instant::now();
    let depth = 1_000_000;
    let mut bytes = header(3).into_bytes();
    bytes.push(b'\n');
    message(&mut bytes, 0, None, TS, "q");
    bytes.extend_from_slice(br#"{"type":"message","id":"00000001","parentId":"00000000","message":{"role":"user","content":"#);
    bytes.extend(vec![b'['; depth]);
    bytes.extend(vec![b']'; depth]);
    bytes.extend_from_slice(b"}}\n");
    let session = Session::from_bytes(bytes.clone(), Path::new("deep.jsonl")).expect("loads");
    assert_eq!(session.entry_count(), 1);
    assert_eq!(session.load_report().skipped_lines.len(), 1);
    assert!(!verify_bytes(&bytes, Path::new("deep.jsonl")).is_empty());
    report("line nested 1,000,000 deep", start);
}

#[test]
fn a_200_000_entry_v1_session_migrates() {
    let start = Instant::now();
    let n: usize = 200_000;
    let mut bytes = br#"{"type":"session","id":"0192f000-0000-7000-8000-00000000b0dd","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#.to_vec();
    bytes.push(b'\n');
    for i in 0..n {
        let role = if i.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        };
        writeln!(
            bytes,
            r#"{{"type":"message","timestamp":"{TS}","message":{{"role":"{role}","content":"m","timestamp":1}}}}"#
        )
        .expect("write");
    }
    let session = Session::from_bytes(bytes, Path::new("v1.jsonl")).expect("loads");
    assert_eq!(session.load_report().migrated_from, Some(1.0));
    assert_eq!(session.entry_count(), n);
    assert_eq!(session.branch_path().entries.len(), n);
    report("200,000-entry v1 migration", start);
}
