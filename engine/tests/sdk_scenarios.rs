//! The tree operations real Pi 1.6.0 ran through its SessionManager API
//! (`fixtures/realpi/sessions/sdk_*`, made by the harness's `sdk_sessions.mjs`),
//! replayed through ours: the files we would write have the same structure, entry
//! for entry, and the errors the same texts.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_engine::session::Session;
use pi_formats::entry::NewEntry;
use pi_formats::header::NewHeader;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

const T: i64 = 1_764_500_000_000;

struct Clock(i64);

impl Clock {
    fn user(&mut self, text: &str) -> NewEntry {
        self.0 += 1;
        NewEntry::Message {
            message: json!({"role":"user","content":[{"type":"text","text":text}],"timestamp":T + self.0 * 1000}),
        }
    }
    fn asst(&mut self, text: &str) -> NewEntry {
        self.0 += 1;
        NewEntry::Message {
            message: json!({"role":"assistant","content":[{"type":"text","text":text}],"api":"openai-completions",
                "provider":"fakeoai","model":"fake-model","usage":usage(),"stopReason":"stop","timestamp":T + self.0 * 1000}),
        }
    }
}

fn usage() -> Value {
    json!({"input":50,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":55,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}})
}

fn new_session() -> Session {
    Session::create(&NewHeader::new(
        pi_formats::id::session_id(),
        pi_formats::time::now_iso(),
        "/tmp/cwd".into(),
        None,
    ))
}

fn fixture_lines(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/realpi/sessions")
        .join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Replaces entry ids by their position, and drops what differs run to run
/// (entry times, header id/time/paths), so two sessions compare by structure.
fn normalize(lines: &[Value]) -> Vec<Value> {
    let ids: HashMap<String, String> = lines
        .iter()
        .skip(1)
        .enumerate()
        .filter_map(|(i, l)| Some((l.get("id")?.as_str()?.to_string(), format!("#{i}"))))
        .collect();
    fn sub(v: &Value, ids: &HashMap<String, String>) -> Value {
        match v {
            Value::String(s) => Value::String(ids.get(s).cloned().unwrap_or(s.clone())),
            Value::Array(a) => Value::Array(a.iter().map(|x| sub(x, ids)).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| (k.clone(), sub(x, ids))).collect())
            }
            other => other.clone(),
        }
    }
    lines
        .iter()
        .skip(1)
        .map(|l| {
            let mut l = sub(l, &ids);
            let obj = l.as_object_mut().unwrap();
            obj.remove("timestamp");
            if let Some(system) = obj.get_mut("systemMessage").and_then(Value::as_object_mut) {
                system.remove("timestamp");
            }
            l
        })
        .collect()
}

#[test]
fn multiroot_tree_and_branched_session_match_pi() {
    let mut c = Clock(0);
    let mut sm = new_session();
    let _m0 = sm
        .append(&NewEntry::ModelChange {
            provider: "fakeoai".into(),
            model_id: "fake-model".into(),
        })
        .unwrap();
    let _t0 = sm
        .append(&NewEntry::ThinkingLevelChange {
            thinking_level: "low".into(),
        })
        .unwrap();
    let u1 = sm.append(&c.user("root-1 question")).unwrap();
    let a1 = sm.append(&c.asst("root-1 answer")).unwrap();
    sm.append(&NewEntry::Label {
        target_id: u1.clone(),
        label: Some("first-question".into()),
    })
    .unwrap();
    let u2 = sm.append(&c.user("second question")).unwrap();
    let a2 = sm.append(&c.asst("second answer")).unwrap();
    sm.append(&NewEntry::Label {
        target_id: a2.clone(),
        label: Some("second-answer".into()),
    })
    .unwrap();
    sm.reset_leaf();
    sm.append(&c.user("root-2 question (after resetLeaf)"))
        .unwrap();
    sm.append(&c.asst("root-2 answer")).unwrap();
    let no_write = |_: &_| Ok::<(), std::io::Error>(());
    sm.branch_with_summary_with(
        None,
        "Summary written when branching to null (fromId = old leaf)".into(),
        None,
        None,
        None,
        no_write,
    )
    .unwrap();
    sm.append(&c.user("after branchWithSummary(null)")).unwrap();
    sm.branch(&a1).unwrap();
    sm.branch_with_summary_with(
        Some(&a1),
        "Summary when branching from a1".into(),
        Some(json!({"readFiles":[],"modifiedFiles":[]})),
        None,
        None,
        no_write,
    )
    .unwrap();
    sm.append(&c.user("third question on branch after a1"))
        .unwrap();
    sm.append(&c.asst("third answer")).unwrap();

    // Errors, word for word as Pi's (sdk_sessions.log.json).
    assert_eq!(
        sm.branch("nope1234").unwrap_err().to_string(),
        "Entry nope1234 not found"
    );
    let label_err = sm.append(&NewEntry::Label {
        target_id: "nope1234".into(),
        label: Some("x".into()),
    });
    assert_eq!(
        label_err.unwrap_err().to_string(),
        "Entry nope1234 not found"
    );
    let off_branch = sm.append(&NewEntry::ContextEdit {
        target_id: u2.clone(),
        replacement: Value::Null,
    });
    assert_eq!(
        off_branch.unwrap_err().to_string(),
        format!("Entry {u2} is not on the active branch")
    );
    let m0 = sm.entries()[0].id.as_deref().unwrap().to_string();
    let not_editable = sm.append(&NewEntry::ContextEdit {
        target_id: m0.clone(),
        replacement: Value::Null,
    });
    assert_eq!(
        not_editable.unwrap_err().to_string(),
        format!("Entry {m0} does not contribute editable model content")
    );

    // The multi-root tree: two roots, branch summaries where Pi puts them.
    let tree = sm.tree();
    assert_eq!(
        tree.roots.len(),
        3,
        "model_change root, resetLeaf root, branchWithSummary(null) root"
    );

    // createBranchedSession(a2): labels dropped from the path and re-created at the end.
    let header = NewHeader::new(
        "x".into(),
        "t".into(),
        "/tmp/cwd".into(),
        Some("/prev.jsonl".into()),
    );
    let lines: Vec<Value> = sm
        .branched_lines(&a2, &header)
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pi = fixture_lines("sdk_tree_branched_session.jsonl");
    assert_eq!(normalize(&lines), normalize(&pi));
}

#[test]
fn compactions_and_fork_from_match_pi() {
    let mut c = Clock(9); // Pi's message clock continues from the first scenario
    let mut sm = new_session();
    sm.append(&NewEntry::ModelChange {
        provider: "fakeoai".into(),
        model_id: "fake-model".into(),
    })
    .unwrap();
    sm.append(&NewEntry::Message {
        message: json!({"role":"system","content":"","sections":{"preamble":"SDK system prompt"},"toolsAdded":[],"timestamp":T}),
    })
    .unwrap();
    let mut ids = Vec::new();
    for i in 0..4 {
        let q = sm.append(&c.user(&format!("q{i}"))).unwrap();
        let a = sm.append(&c.asst(&format!("a{i}"))).unwrap();
        ids.push((q, a));
    }
    let c1 = sm.compaction_entry(
        "Compaction 1 keeps from q2".into(),
        Some(ids[2].0.clone()),
        400,
        Some(json!({"readFiles":[],"modifiedFiles":[]})),
        Some(false),
        Some(usage()),
    );
    sm.append(&c1).unwrap();
    sm.append(&c.user("after c1")).unwrap();
    sm.append(&c.asst("answer after c1")).unwrap();
    let c2 = sm.compaction_entry(
        "Compaction 2 retains nothing".into(),
        None,
        300,
        None,
        None,
        None,
    );
    sm.append(&c2).unwrap();
    sm.append(&c.user("after c2")).unwrap();
    let a = sm.append(&c.asst("answer after c2")).unwrap();
    let c3 = sm.compaction_entry(
        "Compaction 3 keeps from 'answer after c2'".into(),
        Some(a.clone()),
        200,
        None,
        Some(true),
        None,
    );
    sm.append(&c3).unwrap();
    sm.append(&c.user("after c3")).unwrap();
    sm.append(&NewEntry::ContextEdit { target_id: a.clone(), replacement: json!({"content":[{"type":"text","text":"assistant content replaced by string"}]}) }).unwrap();
    sm.append(&NewEntry::Usage {
        kind: "cache_warm".into(),
        provider: "fakeoai".into(),
        model: "fake-model".into(),
        usage: usage(),
        note: Some("note text".into()),
    })
    .unwrap();
    sm.append(&NewEntry::CustomMessage {
        custom_type: "sdk".into(),
        content: json!("custom message via SDK"),
        display: true,
        details: Some(json!({"d":1})),
    })
    .unwrap();
    sm.append(&NewEntry::Custom {
        custom_type: "sdk-state".into(),
        data: Some(json!({"k":1})),
    })
    .unwrap();
    sm.append(&NewEntry::session_info("  SDK\nname with newline  "))
        .unwrap();
    assert_eq!(sm.session_name().as_deref(), Some("SDK name with newline"));

    // forkFrom copies every entry line verbatim under a new header.
    let header = NewHeader::new(
        "n".into(),
        "t".into(),
        "/cwd2".into(),
        Some("/src.jsonl".into()),
    );
    let lines: Vec<Value> = sm
        .fork_from_lines(&header)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pi = fixture_lines("sdk_forkfrom.jsonl");
    assert_eq!(lines[0]["parentSession"], "/src.jsonl");
    assert_eq!(normalize(&lines), normalize(&pi));
}
