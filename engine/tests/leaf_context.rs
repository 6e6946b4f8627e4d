//! Property: the context of the current leaf, as the agent builds it every turn,
//! equals the context rebuilt from scratch.
//!
//! Per turn the agent reads the branch from the session's memo (the path walked
//! last, extended in place by what was appended) and finds the last thinking level
//! change, model, compaction and context edit from the memo's marks instead of
//! scanning the path. Random sequences of appends (messages, setting changes,
//! compactions, context edits, labels, custom messages), moves of the leaf and
//! reloads are checked after every step against the same functions over the
//! branch parsed into values, which scan it (and against a reload of the file,
//! which walks the path afresh).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_engine::compaction::{
    estimate_projected_context_tokens, last_assistant_usage, latest_compaction_millis,
    prepare_compaction, CompactionSettings,
};
use pi_engine::context::{
    context_entry_positions, context_settings, project, EntrySource, SessionPath,
};
use pi_engine::session::{Mark, Session};
use pi_formats::entry::NewEntry;
use pi_formats::header::NewHeader;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

#[derive(Debug, Clone)]
enum Op {
    User,
    /// An assistant message naming one of a few models; with usage or not.
    Assistant(u8, bool),
    ToolRound,
    ModelChange(u8),
    Thinking(u8),
    /// A compaction keeping from this (wrapped) position of the branch, or nothing.
    Compaction(Option<usize>),
    /// A context edit of the entry at this (wrapped) position of the branch.
    ContextEdit(usize, bool),
    Label(usize),
    CustomMessage,
    /// Move the leaf to the entry at this (wrapped) position of the file.
    Branch(usize),
    ResetLeaf,
    /// Write the session out and read it back (a fresh walk, no memo).
    Reload,
}

fn op() -> impl Strategy<Value = Op> {
    let index = || any::<prop::sample::Index>().prop_map(|i| i.index(usize::MAX));
    prop_oneof![
        4 => Just(Op::User),
        4 => (0u8..3, any::<bool>()).prop_map(|(m, u)| Op::Assistant(m, u)),
        2 => Just(Op::ToolRound),
        1 => (0u8..3).prop_map(Op::ModelChange),
        1 => (0u8..4).prop_map(Op::Thinking),
        1 => prop::option::of(index()).prop_map(Op::Compaction),
        1 => (index(), any::<bool>()).prop_map(|(i, hide)| Op::ContextEdit(i, hide)),
        1 => index().prop_map(Op::Label),
        1 => Just(Op::CustomMessage),
        1 => index().prop_map(Op::Branch),
        1 => Just(Op::ResetLeaf),
        1 => Just(Op::Reload),
    ]
}

const MODELS: [(&str, &str); 3] = [("p", "a"), ("q", "b"), ("p", "c")];
const LEVELS: [&str; 4] = ["off", "low", "medium", "high"];

fn header() -> NewHeader {
    NewHeader::new(
        "s".into(),
        "2026-01-01T00:00:00.000Z".into(),
        "/w".into(),
        None,
    )
}

fn assistant(model: u8, usage: bool, content: Value) -> Value {
    let (provider, id) = MODELS[model as usize];
    let mut m = json!({"role": "assistant", "content": content, "api": "x", "provider": provider,
        "model": id, "stopReason": "stop", "timestamp": 2});
    if usage {
        m["usage"] = json!({"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": 120, "cost": {"input": 0, "output": 0, "cacheRead": 0,
            "cacheWrite": 0, "total": 0}});
    }
    m
}

fn apply(session: &mut Session, op: &Op) {
    let branch_ids: Vec<String> = session
        .branch_path()
        .entries
        .iter()
        .filter_map(|&i| session.entry(i).id.as_deref().map(str::to_string))
        .collect();
    let message = |message: Value| NewEntry::Message { message };
    match *op {
        Op::User => {
            let m = json!({"role": "user", "content": [{"type": "text", "text": "question"}], "timestamp": 1});
            session.append(&message(m)).unwrap();
        }
        Op::Assistant(model, usage) => {
            let m = assistant(model, usage, json!([{"type": "text", "text": "answer"}]));
            session.append(&message(m)).unwrap();
        }
        Op::ToolRound => {
            let call = json!([{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}}]);
            session.append(&message(assistant(0, true, call))).unwrap();
            let result = json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                "content": [{"type": "text", "text": "file"}], "isError": false, "timestamp": 3});
            session.append(&message(result)).unwrap();
        }
        Op::ModelChange(model) => {
            let (provider, id) = MODELS[model as usize];
            session
                .append(&NewEntry::ModelChange {
                    provider: provider.into(),
                    model_id: id.into(),
                })
                .unwrap();
        }
        Op::Thinking(level) => {
            session
                .append(&NewEntry::ThinkingLevelChange {
                    thinking_level: LEVELS[level as usize].into(),
                })
                .unwrap();
        }
        Op::Compaction(kept) => {
            let first_kept = kept
                .filter(|_| !branch_ids.is_empty())
                .map(|i| branch_ids[i % branch_ids.len()].clone());
            let entry =
                session.compaction_entry("summary".into(), first_kept, 1000, None, None, None);
            session.append(&entry).unwrap();
        }
        Op::ContextEdit(i, hide) => {
            if branch_ids.is_empty() {
                return;
            }
            let replacement = if hide {
                Value::Null
            } else {
                json!({"role": "user", "content": [{"type": "text", "text": "edited"}], "timestamp": 5})
            };
            // Only editable message entries are accepted; anything else is refused.
            let _ = session.append(&NewEntry::ContextEdit {
                target_id: branch_ids[i % branch_ids.len()].clone(),
                replacement,
            });
        }
        Op::Label(i) => {
            if let Some(target) = branch_ids.get(i % branch_ids.len().max(1)) {
                session
                    .append(&NewEntry::Label {
                        target_id: target.clone(),
                        label: Some("l".into()),
                    })
                    .unwrap();
            }
        }
        Op::CustomMessage => {
            session
                .append(&NewEntry::CustomMessage {
                    custom_type: "note".into(),
                    content: json!("remember"),
                    display: true,
                    details: None,
                })
                .unwrap();
        }
        Op::Branch(i) => {
            let n = session.entries().len();
            if n > 0 {
                let id = session.entries()[i % n].id.as_deref().unwrap().to_string();
                session.branch(&id).unwrap();
            }
        }
        Op::ResetLeaf => session.reset_leaf(),
        Op::Reload => {
            let leaf = session.leaf_id().map(str::to_string);
            let bytes = session.to_jsonl();
            *session = Session::from_bytes(bytes, Path::new("s.jsonl")).unwrap();
            match leaf {
                Some(id) => session.branch(&id).unwrap(),
                None => session.reset_leaf(),
            }
        }
    }
}

/// The agent's way (the memo's walk and marks) against a scan of parsed values.
fn check(session: &Session, step: usize) -> Result<(), TestCaseError> {
    let walk = session.branch_path();
    let path = SessionPath::of(session, &walk);
    let values: Vec<Value> = walk
        .entries
        .iter()
        .map(|&i| session.entry_value(i))
        .collect();
    // The walk is the one a fresh session finds.
    let fresh = Session::from_bytes(session.to_jsonl(), Path::new("f.jsonl")).unwrap();
    let mut fresh = fresh;
    match session.leaf_id() {
        Some(id) => fresh.branch(id).unwrap(),
        None => fresh.reset_leaf(),
    }
    prop_assert_eq!(
        &fresh.branch_path().entries,
        &walk.entries,
        "step {}: walk",
        step
    );
    prop_assert!(walk.marks().is_some(), "step {}: a walk has marks", step);
    for mark in [
        Mark::ThinkingLevelChange,
        Mark::ModelChange,
        Mark::AssistantMessage,
        Mark::Compaction,
        Mark::ContextEdit,
    ] {
        prop_assert_eq!(
            path.last_mark(mark),
            values.last_mark(mark),
            "step {}: last {:?}",
            step,
            mark
        );
    }
    prop_assert_eq!(
        context_settings(&path),
        context_settings(&values),
        "step {}: settings",
        step
    );
    prop_assert_eq!(
        context_entry_positions(&path),
        context_entry_positions(&values),
        "step {}: context entries",
        step
    );
    let lazy = project(&path);
    let eager = project(&values);
    prop_assert_eq!(&lazy, &eager, "step {}: projection", step);
    prop_assert_eq!(
        estimate_projected_context_tokens(&lazy, &path),
        estimate_projected_context_tokens(&eager, &values),
        "step {}: estimate",
        step
    );
    prop_assert_eq!(
        latest_compaction_millis(&path),
        latest_compaction_millis(&values),
        "step {}: latest compaction",
        step
    );
    prop_assert_eq!(last_assistant_usage(&path), last_assistant_usage(&values));
    let settings = CompactionSettings {
        keep_recent_tokens: 50,
        ..CompactionSettings::default()
    };
    prop_assert_eq!(
        prepare_compaction(&path, &settings),
        prepare_compaction(&values, &settings),
        "step {}: compaction plan",
        step
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn the_leaf_context_after_appends_equals_the_context_rebuilt(
        ops in prop::collection::vec(op(), 1..80)
    ) {
        let mut session = Session::create(&header());
        for (step, op) in ops.iter().enumerate() {
            apply(&mut session, op);
            check(&session, step)?;
        }
    }
}

/// A long branch whose thinking level was set once, at the start, then many turns:
/// the marks still name that first entry after every append.
#[test]
fn a_setting_from_the_start_of_a_long_branch_is_found_after_appends() {
    let mut session = Session::create(&header());
    session
        .append(&NewEntry::ThinkingLevelChange {
            thinking_level: "high".into(),
        })
        .unwrap();
    for turn in 0..2_000 {
        let m = json!({"role": "user", "content": [{"type": "text", "text": format!("q{turn}")}], "timestamp": 1});
        session.append(&NewEntry::Message { message: m }).unwrap();
        let m = assistant(
            (turn % 3) as u8,
            true,
            json!([{"type": "text", "text": "a"}]),
        );
        session.append(&NewEntry::Message { message: m }).unwrap();
        let walk = session.branch_path();
        let path = SessionPath::of(&session, &walk);
        let (level, model) = context_settings(&path);
        assert_eq!(level, Some(json!("high")));
        let (provider, id) = MODELS[turn % 3];
        assert_eq!(model, Some(json!({"provider": provider, "modelId": id})));
        assert_eq!(path.last_mark(Mark::ThinkingLevelChange), Some(0));
    }
}

/// A walk whose entries were changed after the fact has no marks: `SessionPath::of`
/// then scans, like `SessionPath::new`.
#[test]
fn a_changed_walk_falls_back_to_scanning() {
    let mut session = Session::create(&header());
    session
        .append(&NewEntry::ThinkingLevelChange {
            thinking_level: "low".into(),
        })
        .unwrap();
    session
        .append(&NewEntry::ThinkingLevelChange {
            thinking_level: "high".into(),
        })
        .unwrap();
    let mut walk = session.branch_path();
    walk.entries.pop();
    assert!(walk.marks().is_none());
    let (level, _) = context_settings(&SessionPath::of(&session, &walk));
    assert_eq!(level, Some(json!("low")));
}
