//! Reproducible session corpora for benchmarks.
//!
//! A generated session looks like a long coding session: prompts, assistant turns
//! with thinking and tool calls, tool results of a few KB (some large), model and
//! thinking changes, labels, branches and compactions. The same seed gives the same
//! bytes, so figures from different runs and tools compare like for like.

use pi_formats::entry::{EntryBase, NewEntry};
use pi_formats::header::NewHeader;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::io::Write;

/// Shape of a generated session.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    pub seed: u64,
    /// Stop once the file reaches this many bytes.
    pub target_bytes: usize,
    /// Every this many turns, a compaction keeping the last few turns.
    pub compaction_every: usize,
    /// Every this many turns, branch back a few turns (an abandoned branch).
    pub branch_every: usize,
    /// End with a compaction keeping the last few turns (a session "compacted near
    /// its end": its context is small whatever the file's size).
    pub final_compaction: bool,
}

impl SessionSpec {
    pub fn new(seed: u64, target_bytes: usize) -> Self {
        SessionSpec {
            seed,
            target_bytes,
            compaction_every: 400,
            branch_every: 97,
            final_compaction: false,
        }
    }
}

const WORDS: &[&str] = &[
    "the",
    "session",
    "tree",
    "entry",
    "compaction",
    "branch",
    "tool",
    "result",
    "assistant",
    "context",
    "file",
    "rust",
    "parser",
    "index",
    "leaf",
    "parent",
    "summary",
    "token",
    "model",
    "fn",
    "let",
    "match",
    "impl",
    "struct",
    "error",
    "path",
    "bytes",
    "line",
    "json",
    "writer",
];

fn words(rng: &mut StdRng, n: usize) -> String {
    let mut s = String::with_capacity(n * 7);
    for i in 0..n {
        if i > 0 {
            s.push(if rng.gen_ratio(1, 12) { '\n' } else { ' ' });
        }
        s.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
    }
    s
}

fn usage(rng: &mut StdRng, context: u64) -> serde_json::Value {
    let output = rng.gen_range(20..800u64);
    json!({"input": context, "output": output, "cacheRead": context / 2, "cacheWrite": 0,
           "totalTokens": context + output,
           "cost": {"input": 0.000003 * context as f64, "output": 0.000015 * output as f64,
                    "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.000003 * context as f64 + 0.000015 * output as f64}})
}

/// Line writer with the running counters of a generated session.
struct Emitter<'a, W: Write> {
    out: &'a mut W,
    written: usize,
    entries: usize,
    counter: u64,
    time_ms: i64,
}

impl<W: Write> Emitter<'_, W> {
    fn emit(&mut self, entry: NewEntry, parent: Option<String>) -> std::io::Result<String> {
        self.counter += 1;
        self.time_ms += 1500;
        let base = EntryBase {
            // Distinct 8-hex ids in a scrambled order, like random ones.
            id: format!(
                "{:08x}",
                self.counter.wrapping_mul(2_654_435_761) & 0xffff_ffff
            ),
            parent_id: parent,
            timestamp: pi_formats::time::iso_from_millis(self.time_ms),
        };
        let mut line = entry.to_line(&base);
        line.push('\n');
        self.out.write_all(line.as_bytes())?;
        self.written += line.len();
        self.entries += 1;
        Ok(base.id)
    }
}

fn text(rng: &mut StdRng, min: usize, max: usize) -> String {
    let n = rng.gen_range(min..max);
    words(rng, n)
}

/// Writes a generated session to `out`; returns (bytes written, entries written).
pub fn write_session(spec: &SessionSpec, out: &mut impl Write) -> std::io::Result<(usize, usize)> {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let header = NewHeader::new(
        format!("0193a000-0000-7000-8000-{:012x}", spec.seed),
        "2026-01-01T00:00:00.000Z".into(),
        "/home/user/project".into(),
        None,
    );
    let mut line = header.to_line();
    line.push('\n');
    out.write_all(line.as_bytes())?;
    let mut em = Emitter {
        written: line.len(),
        out,
        entries: 0,
        counter: 0,
        time_ms: 1_767_225_600_000,
    };
    let mut path: Vec<String> = Vec::new();
    let model = em.emit(
        NewEntry::ModelChange {
            provider: "anthropic".into(),
            model_id: "claude-sonnet-4-5".into(),
        },
        None,
    )?;
    path.push(model.clone());
    let thinking = em.emit(
        NewEntry::ThinkingLevelChange {
            thinking_level: "medium".into(),
        },
        Some(model),
    )?;
    path.push(thinking);

    let mut turn = 0usize;
    let mut context_tokens: u64 = 2000;
    while em.written < spec.target_bytes {
        turn += 1;
        if turn.is_multiple_of(spec.branch_every) && path.len() > 12 {
            // Abandon the last few entries: the next prompt hangs off an earlier one.
            let back = rng.gen_range(3..10);
            path.truncate(path.len() - back);
        }
        let append = |em: &mut Emitter<'_, _>, path: &mut Vec<String>, entry: NewEntry| {
            let id = em.emit(entry, path.last().cloned())?;
            path.push(id);
            Ok::<(), std::io::Error>(())
        };
        let prompt = text(&mut rng, 5, 60);
        let time = em.time_ms;
        append(
            &mut em,
            &mut path,
            NewEntry::Message {
                message: json!({"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": time}),
            },
        )?;
        for _ in 0..rng.gen_range(1..5) {
            let call_id = format!("toolu_{turn:06}_{}", rng.gen_range(0..1_000_000));
            let path_arg = format!("src/{}.rs", WORDS[rng.gen_range(0..WORDS.len())]);
            let tool = ["read", "bash", "edit", "grep"][rng.gen_range(0..4)];
            context_tokens += rng.gen_range(200..3000);
            let thinking = text(&mut rng, 10, 120);
            let said = text(&mut rng, 5, 50);
            let usage = usage(&mut rng, context_tokens);
            let time = em.time_ms;
            append(
                &mut em,
                &mut path,
                NewEntry::Message {
                    message: json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": thinking, "thinkingSignature": "sig"},
                    {"type": "text", "text": said},
                    {"type": "toolCall", "id": call_id, "name": tool, "arguments": {"path": path_arg, "command": "cargo test"}}],
                    "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                    "usage": usage, "stopReason": "toolUse", "timestamp": time}),
                },
            )?;
            let output = if rng.gen_ratio(1, 20) {
                text(&mut rng, 2000, 8000)
            } else {
                text(&mut rng, 50, 700)
            };
            let is_error = rng.gen_ratio(1, 15);
            let time = em.time_ms;
            append(
                &mut em,
                &mut path,
                NewEntry::Message {
                    message: json!({"role": "toolResult", "toolCallId": call_id, "toolName": tool,
                    "content": [{"type": "text", "text": output}], "isError": is_error, "timestamp": time}),
                },
            )?;
        }
        let reply = text(&mut rng, 10, 200);
        let usage = usage(&mut rng, context_tokens);
        let time = em.time_ms;
        append(
            &mut em,
            &mut path,
            NewEntry::Message {
                message: json!({"role": "assistant", "content": [{"type": "text", "text": reply}],
                "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                "usage": usage, "stopReason": "stop", "timestamp": time}),
            },
        )?;
        if turn.is_multiple_of(50) {
            let target = path[rng.gen_range(0..path.len())].clone();
            append(
                &mut em,
                &mut path,
                NewEntry::Label {
                    target_id: target,
                    label: Some(format!("checkpoint-{turn}")),
                },
            )?;
        }
        let last = em.written >= spec.target_bytes && spec.final_compaction;
        if (turn.is_multiple_of(spec.compaction_every) || last) && path.len() > 40 {
            let first_kept = path[path.len() - 30].clone();
            let goal = text(&mut rng, 30, 40);
            let progress = text(&mut rng, 150, 200);
            let id = em.emit(
                NewEntry::Compaction {
                    summary: format!("## Goal\n{goal}\n\n## Progress\n{progress}"),
                    first_kept_entry_id: Some(first_kept),
                    tokens_before: context_tokens,
                    details: Some(
                        json!({"readFiles": ["src/a.rs"], "modifiedFiles": ["src/b.rs"]}),
                    ),
                    usage: None,
                    from_hook: Some(false),
                    system_message: None,
                },
                path.last().cloned(),
            )?;
            path.push(id);
            context_tokens = 8000;
        }
    }
    em.out.flush()?;
    Ok((em.written, em.entries))
}

/// Generates the session into `path` (buffered).
pub fn generate_file(
    spec: &SessionSpec,
    path: &std::path::Path,
) -> std::io::Result<(usize, usize)> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    write_session(spec, &mut out)
}
