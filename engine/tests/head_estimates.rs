//! The agent decides threshold compaction from entry heads (types, ids, timestamps
//! in the index) and parses only the context entries. Before, it parsed the whole
//! branch into values first. Both ways must agree on every fixture real Pi wrote or
//! loaded, and on generated sessions with many compactions: the token estimate, the
//! latest compaction's time, the size after a response (with and without usage,
//! with an error), and the compaction plan and the summarizer's input for several
//! `keepRecentTokens`.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_engine::compaction::{
    context_tokens_after_response, estimate_projected_context_tokens, latest_compaction_millis,
    no_preparation_reason, plan_compaction, prepare_compaction, CompactionSettings,
};
use pi_engine::context::{project, SessionPath};
use pi_engine::session::Session;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

fn fixture_files() -> Vec<PathBuf> {
    let f = root().join("fixtures");
    let mut files = jsonl_files(&f.join("realpi/sessions"));
    files.extend(jsonl_files(&f.join("realpi/tricky/inputs")));
    files.extend(jsonl_files(&f.join("expected/generated")));
    files
}

/// Every comparison on one session, at its leaf and at every entry as a leaf (so
/// the positions just before and after each compaction and context edit are hit).
fn compare(session: &mut Session, name: &str) -> usize {
    let leaves: Vec<Option<String>> = session
        .entries()
        .iter()
        .map(|r| r.id.as_deref().map(str::to_string))
        .collect();
    let mut checked = 0;
    for leaf in leaves.into_iter().flatten() {
        session.branch(&leaf).unwrap();
        let branch = session.branch_path();
        let path = SessionPath::of(session, &branch);
        let values: Vec<Value> = branch
            .entries
            .iter()
            .map(|&i| session.entry_value(i))
            .collect();
        let at = format!("{name} at {leaf}");

        let lazy = project(&path);
        let eager = project(&values);
        assert_eq!(lazy, eager, "{at}: projection");
        assert_eq!(
            estimate_projected_context_tokens(&lazy, &path),
            estimate_projected_context_tokens(&eager, &values),
            "{at}: projected estimate"
        );
        let eager_latest = values
            .iter()
            .rev()
            .find(|e| e["type"] == "compaction")
            .and_then(|e| e["timestamp"].as_str())
            .and_then(pi_formats::time::parse_millis);
        assert_eq!(
            latest_compaction_millis(&path),
            eager_latest,
            "{at}: latest compaction time"
        );
        for (usage, is_error) in [
            (
                json!({"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}),
                false,
            ),
            (
                json!({"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}),
                true,
            ),
            (
                json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}),
                false,
            ),
        ] {
            assert_eq!(
                context_tokens_after_response(&lazy, &path, &usage, is_error),
                context_tokens_after_response(&eager, &values, &usage, is_error),
                "{at}: size after a response ({usage}, error {is_error})"
            );
        }
        for keep in [20_000, 2_000, 200, 1] {
            let settings = CompactionSettings {
                keep_recent_tokens: keep,
                ..CompactionSettings::default()
            };
            let prepared = prepare_compaction(&values, &settings);
            assert_eq!(
                prepare_compaction(&path, &settings),
                prepared,
                "{at}: compaction plan, keepRecentTokens={keep}"
            );
            // The preparation written message by message (what `inspect` prints) is
            // its serialization.
            let streamed = plan_compaction(&path, &settings).map(|plan| {
                let mut out = Vec::new();
                plan.write_json(&path, &mut out).unwrap();
                String::from_utf8(out).unwrap()
            });
            assert_eq!(
                streamed,
                prepared.as_ref().map(|p| serde_json::to_string(p).unwrap()),
                "{at}: streamed preparation, keepRecentTokens={keep}"
            );
            // What the summarizer reads, streamed entry by entry (what the agent sends),
            // is the preparation's conversation text and file lists.
            assert_eq!(
                plan_compaction(&path, &settings).map(|plan| plan.input(&path)),
                prepared.map(|p| p.input()),
                "{at}: summarizer input, keepRecentTokens={keep}"
            );
        }
        assert_eq!(
            no_preparation_reason(&path),
            no_preparation_reason(&values),
            "{at}: no-preparation reason"
        );
        checked += 1;
    }
    checked
}

#[test]
fn head_based_estimates_match_full_parse_on_fixtures() {
    let mut sessions = 0;
    let mut leaves = 0;
    for file in fixture_files() {
        // Files Pi refuses (no header) are not sessions to estimate.
        let Ok(mut session) = Session::open(&file) else {
            continue;
        };
        leaves += compare(&mut session, &file.display().to_string());
        sessions += 1;
    }
    assert!(sessions >= 30, "only {sessions} fixture sessions loaded");
    assert!(leaves >= 300, "only {leaves} leaves compared");
}

#[test]
fn head_based_estimates_match_full_parse_on_generated_sessions() {
    let dir = tempfile::tempdir().unwrap();
    for (seed, compaction_every, final_compaction) in [(1, 3, true), (2, 5, false), (3, 2, true)] {
        let mut spec = pi_benches_free::Spec::new(seed);
        spec.compaction_every = compaction_every;
        spec.final_compaction = final_compaction;
        let file = dir.path().join(format!("gen{seed}.jsonl"));
        std::fs::write(&file, spec.render()).unwrap();
        let mut session = Session::open(&file).unwrap();
        assert!(compare(&mut session, &file.display().to_string()) > 20);
    }
}

/// A small generator of sessions with tool turns, compactions (some keeping a
/// tail, some keeping nothing), context edits and usage, independent of the
/// benches crate (which depends on the engine, not the other way round).
mod pi_benches_free {
    use serde_json::json;

    pub struct Spec {
        seed: u64,
        pub compaction_every: u64,
        pub final_compaction: bool,
    }

    impl Spec {
        pub fn new(seed: u64) -> Spec {
            Spec {
                seed,
                compaction_every: 3,
                final_compaction: false,
            }
        }

        pub fn render(&self) -> String {
            let mut w = Writer::default();
            w.out.push_str(&json!({"type":"session","version":3,"id":format!("0193a000-0000-7000-8000-{:012x}", self.seed),
                "timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/x"}).to_string());
            w.out.push('\n');
            let turns = 12 + self.seed * 2;
            for turn in 1..=turns {
                let words = "lorem ipsum ".repeat((turn * 7 + self.seed) as usize % 40 + 1);
                let ts = w.clock + 1000;
                w.push(json!({"type":"message","message":{"role":"user","content":[{"type":"text","text":words}],"timestamp":ts}}));
                let call = format!("call_{turn}");
                w.push(json!({"type":"message","message":{"role":"assistant","content":[
                    {"type":"thinking","thinking":words},{"type":"toolCall","id":call,"name":"read","arguments":{"path":"src/a.rs"}}],
                    "api":"openai-completions","provider":"fakeoai","model":"fake-model",
                    "usage":{"input":100 * turn,"output":20,"cacheRead":0,"cacheWrite":0,"totalTokens":100 * turn + 20},
                    "stopReason":"toolUse","timestamp":ts}}));
                w.push(json!({"type":"message","message":{"role":"toolResult","toolCallId":call,"toolName":"read",
                    "content":[{"type":"text","text":words.repeat(3)}],"isError":false,"timestamp":ts}}));
                w.push(json!({"type":"message","message":{"role":"assistant","content":[{"type":"text","text":words}],
                    "api":"openai-completions","provider":"fakeoai","model":"fake-model",
                    "usage":{"input":100 * turn + 50,"output":20,"cacheRead":0,"cacheWrite":0,"totalTokens":0},
                    "stopReason": if turn % 5 == 0 { "error" } else { "stop" },"timestamp":ts}}));
                if turn % 4 == 0 {
                    let target = w.ids[w.ids.len() - 1].clone();
                    w.push(json!({"type":"context_edit","targetId":target,"replacement":null}));
                }
                let last = turn == turns && self.final_compaction;
                if turn % self.compaction_every == 0 || last {
                    let first_kept = if turn % 2 == 0 {
                        json!(w.ids[w.ids.len().saturating_sub(5)].clone())
                    } else {
                        json!(null)
                    };
                    w.push(json!({"type":"compaction","summary":format!("summary {turn}"),
                        "firstKeptEntryId":first_kept,"tokensBefore":1000 * turn,"details":{"readFiles":["src/a.rs"],"modifiedFiles":[]}}));
                }
            }
            w.out
        }
    }

    #[derive(Default)]
    struct Writer {
        out: String,
        ids: Vec<String>,
        clock: i64,
    }

    impl Writer {
        /// Appends an entry as a child of the previous one, with a fresh id and time.
        fn push(&mut self, mut entry: serde_json::Value) {
            self.clock = self.clock.max(1_767_225_600_000) + 1000;
            let id = format!(
                "{:08x}",
                (self.ids.len() as u64 + 1).wrapping_mul(2_654_435_761) & 0xffff_ffff
            );
            entry["id"] = json!(id);
            entry["parentId"] = self.ids.last().map_or(json!(null), |p| json!(p));
            entry["timestamp"] = json!(pi_formats::time::iso_from_millis(self.clock));
            self.out.push_str(&entry.to_string());
            self.out.push('\n');
            self.ids.push(id);
        }
    }
}

/// The path to an entry as Pi walks it: parent ids resolved one by one (the last
/// entry with an id wins), stopping before a repeat.
fn naive_path(session: &Session, start: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut current = Some(start);
    while let Some(idx) = current {
        if !seen.insert(idx) {
            break;
        }
        out.push(idx);
        current = session.entry(idx).parent.id().and_then(|p| session.find(p));
    }
    out.reverse();
    out
}

/// Paths are memoized and extended when the next leaf descends from the last one;
/// whatever the order of requests, appends and shadowing ids, the path is the walk.
#[test]
fn memoized_paths_match_the_walk() {
    for file in fixture_files() {
        let Ok(mut session) = Session::open(&file) else {
            continue;
        };
        let n = session.entries().len() as u32;
        let name = file.display().to_string();
        let order: Vec<u32> = (0..n)
            .chain((0..n).rev())
            .chain((0..n).step_by(3))
            .collect();
        for &i in &order {
            assert_eq!(
                session.path_to(Some(i)).entries,
                naive_path(&session, i),
                "{name}: path to entry {i}"
            );
        }
        // Appends extend the branch from the memo.
        for k in 0..5 {
            let entry = pi_formats::entry::NewEntry::Message {
                message: json!({"role": "user", "content": format!("appended {k}"), "timestamp": 1}),
            };
            if session
                .append_with(&entry, |_| Ok::<(), std::io::Error>(()))
                .is_err()
            {
                break;
            }
            let leaf = session.leaf().unwrap();
            assert_eq!(
                session.branch_path().entries,
                naive_path(&session, leaf),
                "{name}: branch after append {k}"
            );
        }
    }
}
