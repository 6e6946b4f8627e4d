//! Property tests: random sequences of appends, branches, labels, compactions,
//! names and forks, checked against a small reference model of Pi's tree; and
//! serialize → parse → serialize is the identity.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_engine::session::{LeafChoice, Session};
use pi_formats::entry::NewEntry;
use pi_formats::header::NewHeader;
use proptest::prelude::*;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;

#[derive(Debug, Clone)]
enum Op {
    User(String),
    Assistant,
    ToolRound,
    /// Branch to the entry at this (wrapped) position.
    Branch(usize),
    ResetLeaf,
    Label(usize, Option<String>),
    Compaction(usize),
    Name(String),
    BranchSummary(Option<usize>),
    /// Fork the path to this entry into a new session and keep going there.
    Fork(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => "[a-z \\n\u{2028}é😀]{0,12}".prop_map(Op::User),
        3 => Just(Op::Assistant),
        2 => Just(Op::ToolRound),
        2 => any::<usize>().prop_map(Op::Branch),
        1 => Just(Op::ResetLeaf),
        2 => (any::<usize>(), proptest::option::of("[a-z]{0,5}")).prop_map(|(i, l)| Op::Label(i, l)),
        1 => any::<usize>().prop_map(Op::Compaction),
        1 => "[ a-z\\r\\n]{0,8}".prop_map(Op::Name),
        1 => proptest::option::of(any::<usize>()).prop_map(Op::BranchSummary),
        1 => any::<usize>().prop_map(Op::Fork),
    ]
}

/// The reference: entries as (id, parent), labels, leaf, name.
#[derive(Default, Clone)]
struct Model {
    entries: Vec<(String, Option<String>)>,
    labels: HashMap<String, String>,
    leaf: Option<String>,
    name: Option<String>,
}

impl Model {
    fn parent_of(&self, id: &str) -> Option<String> {
        self.entries
            .iter()
            .find(|(i, _)| i == id)
            .and_then(|(_, p)| p.clone())
    }
    fn path(&self, from: Option<&str>) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = from.map(str::to_string);
        while let Some(id) = cur {
            cur = self.parent_of(&id);
            out.push(id);
        }
        out.reverse();
        out
    }
    fn push(&mut self, id: String) {
        self.entries.push((id.clone(), self.leaf.clone()));
        self.leaf = Some(id);
    }
}

/// Each run of CR/LF becomes one space (the model's own reading of Pi's regex).
fn collapse_line_breaks(s: &str) -> String {
    let mut out = String::new();
    let mut in_break = false;
    for c in s.chars() {
        if c == '\r' || c == '\n' {
            if !in_break {
                out.push(' ');
            }
            in_break = true;
        } else {
            out.push(c);
            in_break = false;
        }
    }
    out
}

fn header() -> NewHeader {
    NewHeader::new(
        "s".into(),
        "2026-01-01T00:00:00.000Z".into(),
        "/w".into(),
        None,
    )
}

fn user(text: &str) -> NewEntry {
    NewEntry::Message {
        message: json!({"role":"user","content":[{"type":"text","text":text}],"timestamp":1}),
    }
}

fn check(session: &Session, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(session.leaf_id(), model.leaf.as_deref());
    let path: Vec<String> = session
        .branch_path()
        .entries
        .iter()
        .map(|&i| session.entry(i).id.as_deref().unwrap().to_string())
        .collect();
    prop_assert_eq!(path, model.path(model.leaf.as_deref()));
    let labels: HashMap<String, String> = session
        .labels()
        .map(|(k, l)| (k.to_string(), l.text.to_string()))
        .collect();
    prop_assert_eq!(&labels, &model.labels);
    prop_assert_eq!(session.session_name(), model.name.clone());
    // Every entry's parent is the model's.
    for (id, parent) in &model.entries {
        let idx = session.find(id).expect("entry present");
        prop_assert_eq!(session.entry(idx).parent.id(), parent.as_deref());
    }
    Ok(())
}

fn pick(model: &Model, i: usize) -> Option<String> {
    (!model.entries.is_empty()).then(|| model.entries[i % model.entries.len()].0.clone())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn session_follows_the_reference_model(ops in proptest::collection::vec(op(), 1..60)) {
        let mut session = Session::create(&header());
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::User(text) => {
                    let id = session.append(&user(&text)).unwrap();
                    model.push(id);
                }
                Op::Assistant => {
                    let id = session.append(&NewEntry::Message { message: json!({"role":"assistant","content":[{"type":"text","text":"ok"}],
                        "api":"x","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
                        "stopReason":"stop","timestamp":2}) }).unwrap();
                    model.push(id);
                }
                Op::ToolRound => {
                    let id = session.append(&NewEntry::Message { message: json!({"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}}],
                        "api":"x","provider":"p","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
                        "stopReason":"toolUse","timestamp":3}) }).unwrap();
                    model.push(id);
                    let id = session.append(&NewEntry::Message { message: json!({"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"x"}],"isError":false,"timestamp":4}) }).unwrap();
                    model.push(id);
                }
                Op::Branch(i) => {
                    if let Some(id) = pick(&model, i) {
                        session.branch(&id).unwrap();
                        model.leaf = Some(id);
                    }
                }
                Op::ResetLeaf => {
                    session.reset_leaf();
                    model.leaf = None;
                }
                Op::Label(i, label) => {
                    if let Some(target) = pick(&model, i) {
                        let id = session.append(&NewEntry::Label { target_id: target.clone(), label: label.clone() }).unwrap();
                        model.push(id);
                        match label.filter(|l| !l.is_empty()) {
                            Some(l) => { model.labels.insert(target, l); }
                            None => { model.labels.remove(&target); }
                        }
                    }
                }
                Op::Compaction(i) => {
                    let path = model.path(model.leaf.as_deref());
                    let first_kept = (!path.is_empty()).then(|| path[i % path.len()].clone());
                    let entry = session.compaction_entry("summary".into(), first_kept, 10, None, Some(false), None);
                    let id = session.append(&entry).unwrap();
                    model.push(id);
                }
                Op::Name(name) => {
                    let id = session.append(&NewEntry::session_info(&name)).unwrap();
                    model.push(id);
                    // Pi: name.replace(/[\r\n]+/g, " ").trim()
                    let flat = collapse_line_breaks(&name);
                    let trimmed = flat.trim();
                    model.name = (!trimmed.is_empty()).then(|| trimmed.to_string());
                }
                Op::BranchSummary(target) => {
                    let target = target.and_then(|i| pick(&model, i));
                    let id = session
                        .branch_with_summary_with(target.as_deref(), "s".into(), None, None, None, |_| Ok::<(), std::io::Error>(()))
                        .unwrap();
                    model.entries.push((id.clone(), target));
                    model.leaf = Some(id);
                }
                Op::Fork(i) => {
                    let Some(at) = pick(&model, i) else { continue };
                    let lines = session.branched_lines(&at, &header()).unwrap();
                    let bytes = (lines.join("\n") + "\n").into_bytes();
                    let forked = Session::from_bytes(bytes, Path::new("fork.jsonl")).unwrap();
                    // The fork holds exactly the non-label entries of the path, chained.
                    let kept: Vec<String> = model
                        .path(Some(&at))
                        .into_iter()
                        .filter(|id| session.entry(session.find(id).unwrap()).kind != pi_engine::session::Kind::Label)
                        .collect();
                    let forked_ids: Vec<String> = forked
                        .entries()
                        .iter()
                        .filter(|r| r.kind != pi_engine::session::Kind::Label)
                        .map(|r| r.id.as_deref().unwrap().to_string())
                        .collect();
                    prop_assert_eq!(&forked_ids, &kept);
                    if let Some(last) = kept.last() {
                        let fork_path = forked.context_path(LeafChoice::Id(last));
                        prop_assert_eq!(fork_path.entries.len(), kept.len());
                    }
                    for (target, label) in &model.labels {
                        if kept.contains(target) {
                            prop_assert_eq!(forked.label(target).map(|l| l.text.to_string()), Some(label.clone()));
                        }
                    }
                    // Continue in the fork, as Pi's fork does.
                    let mut m = Model::default();
                    for r in forked.entries() {
                        m.entries.push((r.id.as_deref().unwrap().to_string(), r.parent.id().map(str::to_string)));
                    }
                    m.leaf = forked.leaf_id().map(str::to_string);
                    m.labels = forked.labels().map(|(k, l)| (k.to_string(), l.text.to_string())).collect();
                    m.name = forked.session_name();
                    session = forked;
                    model = m;
                }
            }
            check(&session, &model)?;
        }
        // Serialize → parse → serialize is the identity, and the reload is the same tree.
        let bytes = session.to_jsonl();
        let reloaded = Session::from_bytes(bytes.clone(), Path::new("x.jsonl")).unwrap();
        prop_assert_eq!(reloaded.to_jsonl(), bytes);
        prop_assert_eq!(reloaded.entries().len(), session.entries().len());
        // After a reload the leaf is the last line, as in Pi.
        prop_assert_eq!(reloaded.leaf_id(), session.entries().last().and_then(|r| r.id.as_deref()));
    }
}
