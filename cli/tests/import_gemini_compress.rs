//! `pi sessions import --from gemini` of a recording in which the real Gemini CLI compressed
//! the chat (recorded by `fixtures/import/gemini-compress/make.sh`): the compression becomes a
//! Pi compaction with Gemini's `<state_snapshot>` summary, keeping the messages Gemini CLI kept,
//! and every message, tool call and result of the recording is still there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod import_common;

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use import_common::{inspect_field, lines, texts, Env};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/import/gemini-compress/sessions")
}

fn recording() -> PathBuf {
    let chats = fixtures().join("tmp/project/chats");
    let mut found: Vec<PathBuf> = fs::read_dir(&chats)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

/// What the recording holds: each message's last version (Gemini CLI writes a message again
/// as it grows), and the `<state_snapshot>` of the compression.
struct Source {
    users: Vec<String>,
    gemini: usize,
    calls: HashSet<String>,
    responses: usize,
    snapshot: String,
}

fn source(file: &Path) -> Source {
    let recs = lines(file);
    let mut seen = HashSet::new();
    let mut last = Vec::new();
    for r in recs.iter().rev() {
        if let Some(id) = r["id"].as_str() {
            if seen.insert(id.to_string()) {
                last.push(r);
            }
        }
    }
    last.reverse();
    let mut src = Source {
        users: Vec::new(),
        gemini: 0,
        calls: HashSet::new(),
        responses: 0,
        snapshot: String::new(),
    };
    for m in &last {
        let parts = m["content"].as_array().cloned().unwrap_or_default();
        match m["type"].as_str().unwrap() {
            "user" => {
                let responses = parts
                    .iter()
                    .filter(|p| p.get("functionResponse").is_some())
                    .count();
                src.responses += responses;
                if responses < parts.len() {
                    src.users.push(texts(&m["content"]));
                }
            }
            "gemini" => {
                src.gemini += 1;
                for c in m["toolCalls"].as_array().into_iter().flatten() {
                    src.calls.insert(c["id"].as_str().unwrap().to_string());
                }
            }
            _ => {}
        }
    }
    let history = recs
        .iter()
        .filter_map(|r| r["$set"]["messages"].as_array())
        .flatten();
    for m in history {
        let text = texts(&m["content"]);
        if text.starts_with("<state_snapshot>") {
            src.snapshot = text;
        }
    }
    assert!(!src.snapshot.is_empty(), "the recording has a compression");
    src
}

#[test]
fn gemini_compression_becomes_a_compaction_keeping_what_gemini_kept() {
    let env = Env::new();
    let file = recording();
    let src = source(&file);
    let out = env.ok(&["import", "--from", "gemini", file.to_str().unwrap()]);
    assert!(
        out.contains("1 imported") && out.contains("1 compaction(s)"),
        "{out}"
    );
    let imported = env.imported();
    assert_eq!(imported.len(), 1, "{imported:?}");
    let session = imported.values().next().unwrap();
    let entries = lines(session)[1..].to_vec();
    let verify = env.ok(&["verify", session.to_str().unwrap()]);
    assert!(verify.contains(": ok"), "{verify}");

    // Every message, call and result of the recording is there once.
    let msgs: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect();
    let role = |r: &str| msgs.iter().filter(|m| m["role"] == r).count();
    let users: Vec<String> = msgs
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| texts(&m["content"]))
        .collect();
    assert_eq!(users, src.users);
    assert_eq!(role("assistant"), src.gemini);
    assert_eq!(role("toolResult"), src.responses);
    let calls: HashSet<String> = msgs
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "toolCall")
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(calls, src.calls);

    // One compaction: Gemini's summary, the prompt tokens that set it off, and the first kept
    // entry is the prompt Gemini CLI kept (copied into its new history under a new id).
    let compactions: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "compaction")
        .collect();
    assert_eq!(compactions.len(), 1);
    let c = compactions[0];
    assert_eq!(c["summary"], src.snapshot.as_str());
    assert_eq!(c["tokensBefore"], 900_000);
    let kept = entries
        .iter()
        .find(|e| e["id"] == c["firstKeptEntryId"])
        .unwrap();
    assert_eq!(
        texts(&kept["message"]["content"]),
        "Count the lines of notes.txt [[s3]]"
    );

    // What the model sees at the leaf: the summary, the kept turn, what came after; nothing
    // from before the compression.
    let inspect = env.ok(&["inspect", session.to_str().unwrap(), "--json"]);
    let llm = inspect_field(&inspect, "llmMessages");
    let context: Vec<String> = llm
        .as_array()
        .unwrap()
        .iter()
        .map(|m| texts(&m["content"]))
        .collect();
    assert!(context[0].contains(&src.snapshot), "{context:?}");
    assert_eq!(context[1], "Count the lines of notes.txt [[s3]]");
    assert!(context.iter().any(|t| t == "notes.txt has 2 lines."));
    assert_eq!(
        context.last().unwrap(),
        "This answer comes after the compression."
    );
    assert!(
        !context
            .iter()
            .any(|t| t.contains("[[s1]]") || t.contains("[[s2]]")),
        "compressed away: {context:?}"
    );

    // Same source, same session: nothing new.
    let before = fs::read(session).unwrap();
    let again = env.ok(&["import", "--from", "gemini", file.to_str().unwrap()]);
    assert!(
        again.contains("0 imported, 0 updated, 1 already there"),
        "{again}"
    );
    assert_eq!(fs::read(session).unwrap(), before);
}
