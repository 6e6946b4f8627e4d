//! End to end: Pi's `--session-id ID` (cli.md "Sessions"): opens this directory's session
//! with that id or creates it with the id, names a fork's id with `--fork`, refuses
//! `--session`/`--continue`/`--resume` beside it and ids Pi refuses.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

/// The session files of `s` by header id, with their entries.
fn sessions_by_id(s: &Setup) -> Vec<(String, Vec<Value>)> {
    let mut out: Vec<(String, Vec<Value>)> = std::fs::read_dir(&s.sessions)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| {
            let lines: Vec<Value> = std::fs::read_to_string(&p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            (lines[0]["id"].as_str().unwrap().to_string(), lines)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn user_texts(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .map(|e| {
            e["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_id_creates_then_reopens_and_names_a_fork() {
    let s = Setup::new(json!([{"text": "one"}, {"text": "two"}, {"text": "three"}])).await;
    let (code, out, err) = s.pi(&["--session-id", "my-task.1", "-p", "first"]);
    assert_eq!((code, out.as_str()), (0, "one\n"), "{err}");
    assert!(
        err.contains(
            "Warning: No project session found with id 'my-task.1'; creating a new session with that id."
        ),
        "{err}"
    );
    let (code, _, err) = s.pi(&["--session-id", "my-task.1", "-p", "second"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("No project session found"), "{err}");
    let sessions = sessions_by_id(&s);
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].0, "my-task.1");
    assert_eq!(user_texts(&sessions[0].1), ["first", "second"]);

    // A fork may take a new id, not one this directory has.
    let (code, _, err) = s.pi(&[
        "--fork",
        "my-task.1",
        "--session-id",
        "my-task.1",
        "-p",
        "x",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Session already exists with id 'my-task.1'"),
        "{err}"
    );
    let (code, _, err) = s.pi(&[
        "--fork",
        "my-task.1",
        "--session-id",
        "copy-2",
        "-p",
        "third",
    ]);
    assert_eq!(code, 0, "{err}");
    let sessions = sessions_by_id(&s);
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions[0].0, "copy-2");
    assert_eq!(user_texts(&sessions[0].1), ["first", "second", "third"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_id_refuses_what_pi_refuses() {
    let s = Setup::new(json!([])).await;
    for (args, wanted) in [
        (
            &["--session-id", "-bad"][..],
            "Error: Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', and start and end with an alphanumeric character",
        ),
        (&["--session-id", "bad."][..], "Error: Session id must be non-empty"),
        (&["--session-id", "a/b"][..], "Error: Session id must be non-empty"),
        (
            &["--session-id", "ok", "-c", "--session", "x"][..],
            "Error: --session-id cannot be combined with --session, --continue",
        ),
    ] {
        let mut all = args.to_vec();
        all.extend(["-p", "hi"]);
        let (code, _, err) = s.pi(&all);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(wanted), "{args:?}: {err}");
    }
    assert!(sessions_by_id(&s).is_empty());
}
