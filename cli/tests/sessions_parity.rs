//! `pi sessions …` fixes of issue 14 item 16, through the real binary: `retainedTail`
//! compactions, warnings apart from errors in `verify`, `show` on a parent cycle, `inspect`
//! by session id, and the first `search` index build saying what it does.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(rel)
}

/// `pi` with its agent dir in `agent` (nothing from the machine's own agent dir).
fn pi(agent: &Path) -> Command {
    let mut c = Command::cargo_bin("pi").unwrap();
    c.env("PI_CODING_AGENT_DIR", agent)
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .env_remove("PI_SESSION_STORE");
    c
}

fn line(v: Value) -> String {
    format!("{v}\n")
}

fn message(id: &str, parent: Option<&str>, role: &str, text: &str) -> String {
    line(json!({"type": "message", "id": id, "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}}))
}

const HEADER: &str = r#"{"type":"session","version":3,"id":"0198c1d2-aaaa-7bbb-8ccc-0123456789ab","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/project"}
"#;

#[test]
fn retained_tail_compaction_projects_to_summary_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tail.jsonl");
    let mut text = HEADER.to_string();
    text += &message("a1", None, "user", "old question");
    text += &message("a2", Some("a1"), "assistant", "old answer");
    text += &line(json!({"type": "compaction", "id": "c1", "parentId": "a2",
    "timestamp": "2026-01-01T00:00:01.000Z", "summary": "Earlier work.", "tokensBefore": 500,
    "retainedTail": [
        {"role": "user", "content": "latest request"},
        {"role": "assistant", "content": [{"type": "text", "text": "latest reply"}],
         "provider": "fakeoai", "model": "fake-model", "stopReason": "stop"}
    ]}));
    text += &message("a3", Some("c1"), "user", "after the compaction");
    std::fs::write(&file, text).unwrap();

    let out = pi(dir.path())
        .args(["sessions", "inspect", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Entries before the compaction are not walked.
    assert_eq!(v["contextEntryIds"], json!(["c1", "a3"]));
    let messages = v["context"]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["compactionSummary", "user", "assistant", "user"]);
    assert_eq!(messages[1]["content"], "latest request");
    // Such a compaction needs no firstKeptEntryId: verify finds nothing to say.
    pi(dir.path())
        .args(["sessions", "verify"])
        .arg(&file)
        .assert()
        .success()
        .stdout(format!("{}: ok\n", file.display()));
}

#[test]
fn verify_separates_warnings_from_errors() {
    let dir = tempfile::tempdir().unwrap();
    // What Pi writes after /tree: a compaction on one branch whose kept entry lies on
    // another (Pi then keeps nothing before it). Pi reads the file fine: a warning.
    let file = dir.path().join("off_path.jsonl");
    let mut text = HEADER.to_string();
    text += &message("u1", None, "user", "q1");
    text += &message("r1", Some("u1"), "assistant", "a1");
    text += &message("u2", Some("r1"), "user", "q2 on branch one");
    text += &message("u3", Some("r1"), "user", "q2 on branch two");
    text += &line(json!({"type": "compaction", "id": "c1", "parentId": "u3",
        "timestamp": "2026-01-01T00:00:01.000Z", "summary": "S", "firstKeptEntryId": "u2",
        "tokensBefore": 10}));
    std::fs::write(&file, text).unwrap();
    let out = pi(dir.path())
        .args(["sessions", "verify"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("ok (1 warning)"), "{stdout}");
    assert!(
        stdout.contains(":6: warning: firstKeptEntryId u2 is not an ancestor"),
        "{stdout}"
    );

    // JSON: ok with the warning listed and counted apart.
    let out = pi(dir.path())
        .args(["sessions", "verify", "--json"])
        .arg(&file)
        .arg(fixture("realpi/tricky/inputs/duplicate_ids.jsonl"))
        .output()
        .unwrap();
    // An error in any file still fails the run.
    assert_eq!(out.status.code(), Some(1));
    let reports: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports[0]["ok"], true);
    assert_eq!(reports[0]["errors"], 0);
    assert_eq!(reports[0]["warnings"], 1);
    assert_eq!(reports[0]["problems"][0]["severity"], "warning");
    assert_eq!(reports[1]["ok"], false);
    assert!(reports[1]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["kind"] == "duplicate_id" && p["severity"] == "error"));
}

#[test]
fn show_lists_entries_under_a_parent_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let out = pi(dir.path())
        .args(["sessions", "show"])
        .arg(fixture("realpi/tricky/inputs/parent_cycle.jsonl"))
        .timeout(std::time::Duration::from_secs(10))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("warning: 2 entries are on or under a parent cycle"),
        "{text}"
    );
    assert!(text.contains("! c001  user"), "{text}");
    assert!(text.contains("! c002  assistant"), "{text}");
}

#[test]
fn inspect_takes_a_session_id_like_session_does() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let src = fixture("realpi/sessions/rpc_main.jsonl");
    let text = std::fs::read_to_string(&src).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap().to_string();
    std::fs::write(
        sessions.join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl")),
        &text,
    )
    .unwrap();

    let by_file = pi(dir.path())
        .args(["sessions", "inspect", "--json"])
        .arg(&src)
        .output()
        .unwrap();
    assert!(by_file.status.success());
    let by_id = pi(dir.path())
        .args(["sessions", "--session-dir"])
        .arg(&sessions)
        .args(["inspect", "--json", &id[..8]])
        .output()
        .unwrap();
    assert!(
        by_id.status.success(),
        "{}",
        String::from_utf8_lossy(&by_id.stderr)
    );
    let a: Value = serde_json::from_slice(&by_file.stdout).unwrap();
    let b: Value = serde_json::from_slice(&by_id.stdout).unwrap();
    assert_eq!(a["contextEntryIds"], b["contextEntryIds"]);
    assert_eq!(a["leafId"], b["leafId"]);
}

#[test]
fn first_search_index_build_says_what_it_does() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let src = fixture("realpi/sessions/rpc_main.jsonl");
    std::fs::copy(&src, sessions.join("one.jsonl")).unwrap();
    let search = || {
        pi(dir.path())
            .args(["sessions", "--session-dir"])
            .arg(&sessions)
            .args(["search", "zzzz-not-there"])
            .output()
            .unwrap()
    };
    let first = search();
    let err = String::from_utf8(first.stderr).unwrap();
    assert!(err.contains("building the history index"), "{err}");
    assert!(err.contains("indexed 1 session(s)"), "{err}");
    // Later searches refresh quietly.
    let again = search();
    assert_eq!(String::from_utf8(again.stderr).unwrap(), "");
}
