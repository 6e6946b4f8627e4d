//! Property: compacting at the prepared cut never orphans a tool result and
//! never loses an entry.
//!
//! Random sessions are built through the `Session` API (user turns, assistant
//! turns with tool calls and their results, side branches, metadata, earlier
//! compactions). Then, for a random `keepRecentTokens`, the prepared compaction is
//! applied the way Pi applies it (a `compaction` entry appended at the leaf with
//! the prepared `firstKeptEntryId`), and the new context is checked.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_engine::compaction::{prepare_compaction, CompactionSettings};
use pi_engine::context::project;
use pi_engine::session::Session;
use pi_formats::entry::NewEntry;
use pi_formats::header::NewHeader;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashSet;

#[derive(Debug, Clone)]
enum Op {
    User(usize),
    /// An assistant turn: text size, tool calls (each with a result size, or no result).
    Assistant(usize, Vec<Option<usize>>),
    /// Move the leaf to an earlier entry (by index into the entries so far).
    Branch(usize),
    Label(usize),
    ModelChange,
    /// Compact now at the prepared cut, with this keepRecentTokens.
    Compact(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..3000).prop_map(Op::User),
        5 => (0usize..2000, prop::collection::vec(prop::option::weighted(0.9, 1usize..6000), 0..3))
            .prop_map(|(n, calls)| Op::Assistant(n, calls)),
        1 => any::<prop::sample::Index>().prop_map(|i| Op::Branch(i.index(usize::MAX))),
        1 => any::<prop::sample::Index>().prop_map(|i| Op::Label(i.index(usize::MAX))),
        1 => Just(Op::ModelChange),
        1 => (0u64..3000).prop_map(Op::Compact),
    ]
}

fn message(session: &mut Session, message: Value) -> String {
    session.append(&NewEntry::Message { message }).unwrap()
}

fn branch_values(session: &Session) -> Vec<Value> {
    session
        .branch_path()
        .entries
        .iter()
        .map(|&i| session.entry_value(i))
        .collect()
}

/// Appends the prepared compaction, as Pi's `appendCompaction` does. Returns
/// false when there was nothing to compact.
fn compact(session: &mut Session, keep: u64) -> bool {
    let branch = branch_values(session);
    let settings = CompactionSettings {
        keep_recent_tokens: keep,
        ..Default::default()
    };
    let Some(prep) = prepare_compaction(&branch, &settings) else {
        return false;
    };
    session
        .append(&NewEntry::Compaction {
            summary: "summary".into(),
            first_kept_entry_id: Some(prep.first_kept_entry_id),
            tokens_before: prep.tokens_before,
            details: Some(json!({"readFiles": [], "modifiedFiles": []})),
            usage: None,
            from_hook: Some(false),
            system_message: None,
        })
        .unwrap();
    true
}

fn build(ops: &[Op]) -> Session {
    let header = NewHeader::new(
        "0190aaaa-0000-7000-8000-000000000000".into(),
        "2026-01-01T00:00:00.000Z".into(),
        "/work".into(),
        None,
    );
    let mut session = Session::create(&header);
    let mut call = 0;
    for op in ops {
        match op {
            Op::User(n) => {
                message(
                    &mut session,
                    json!({"role":"user","content":"u".repeat(*n),"timestamp":1}),
                );
            }
            Op::Assistant(n, calls) => {
                let mut content = vec![json!({"type":"text","text":"a".repeat(*n)})];
                let ids: Vec<String> = calls
                    .iter()
                    .map(|_| {
                        call += 1;
                        format!("call_{call}")
                    })
                    .collect();
                for id in &ids {
                    content.push(
                        json!({"type":"toolCall","id":id,"name":"read","arguments":{"path":"f"}}),
                    );
                }
                let stop = if ids.is_empty() { "stop" } else { "toolUse" };
                message(
                    &mut session,
                    json!({"role":"assistant","content":content,"stopReason":stop,"timestamp":2,
                           "usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15}}),
                );
                for (id, result) in ids.iter().zip(calls) {
                    if let Some(size) = result {
                        message(
                            &mut session,
                            json!({"role":"toolResult","toolCallId":id,"toolName":"read",
                                   "content":[{"type":"text","text":"r".repeat(*size)}],"isError":false,"timestamp":3}),
                        );
                    }
                }
            }
            Op::Branch(i) => {
                let count = session.entry_count();
                if count > 0 {
                    let idx = (*i % count) as u32;
                    if let Some(id) = session.entry(idx).id.as_deref().map(str::to_string) {
                        session.branch(&id).unwrap();
                    }
                }
            }
            Op::Label(i) => {
                let count = session.entry_count();
                if count > 0 {
                    let id = session
                        .entry((*i % count) as u32)
                        .id
                        .as_deref()
                        .map(str::to_string);
                    if let Some(id) = id {
                        session
                            .append(&NewEntry::Label {
                                target_id: id,
                                label: Some("l".into()),
                            })
                            .unwrap();
                    }
                }
            }
            Op::ModelChange => {
                session
                    .append(&NewEntry::ModelChange {
                        provider: "p".into(),
                        model_id: "m".into(),
                    })
                    .unwrap();
            }
            Op::Compact(keep) => {
                compact(&mut session, *keep);
            }
        }
    }
    session
}

/// Every tool result in the context follows an assistant message that made the call.
fn orphaned_tool_results(session: &Session) -> Vec<String> {
    let branch = branch_values(session);
    let projection = project(branch.as_slice());
    let mut calls: HashSet<String> = HashSet::new();
    let mut orphans = Vec::new();
    for m in projection.messages() {
        match m["role"].as_str() {
            Some("assistant") => {
                for block in m["content"].as_array().into_iter().flatten() {
                    if block["type"] == "toolCall" {
                        calls.insert(block["id"].as_str().unwrap_or_default().to_string());
                    }
                }
            }
            Some("toolResult") => {
                let id = m["toolCallId"].as_str().unwrap_or_default().to_string();
                if !calls.contains(&id) {
                    orphans.push(id);
                }
            }
            _ => {}
        }
    }
    orphans
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_tool_results_with_their_calls(
        ops in prop::collection::vec(op(), 1..60),
        keep in 0u64..4000,
    ) {
        let mut session = build(&ops);
        prop_assert!(orphaned_tool_results(&session).is_empty());
        let ids_before: Vec<Option<String>> =
            session.entries().iter().map(|r| r.id.as_deref().map(str::to_string)).collect();
        let compacted = compact(&mut session, keep);
        let orphans = orphaned_tool_results(&session);
        prop_assert!(orphans.is_empty(), "orphaned tool results {:?} after compacting", orphans);
        // Compaction only appends: every earlier entry is still there, unchanged.
        prop_assert_eq!(session.entry_count(), ids_before.len() + usize::from(compacted));
        for (i, id) in ids_before.iter().enumerate() {
            prop_assert_eq!(session.entry(i as u32).id.as_deref(), id.as_deref());
            if let Some(id) = id {
                prop_assert!(session.find(id).is_some());
            }
        }
        if compacted {
            // The kept part starts at the prepared entry, which is on the branch.
            let branch = branch_values(&session);
            let compaction = branch.last().unwrap();
            let first_kept = compaction["firstKeptEntryId"].as_str().unwrap();
            prop_assert!(branch.iter().any(|e| e["id"] == first_kept));
            let kept = branch.iter().find(|e| e["id"] == first_kept).unwrap();
            prop_assert_ne!(kept["message"]["role"].as_str(), Some("toolResult"));
            // A second compaction right away is refused as "Already compacted".
            let settings = CompactionSettings { keep_recent_tokens: keep, ..Default::default() };
            prop_assert!(prepare_compaction(&branch, &settings).is_none());
        }
    }
}
