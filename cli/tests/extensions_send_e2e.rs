//! `pi.sendMessage` and `pi.sendUserMessage` delivery, end to end against the fake LLM with
//! fixtures/extensions/send-message.ts: custom messages queued while the agent streams
//! (steering after the tool calls, follow-ups once it would stop, `triggerTurn: false` at
//! the end of the turn), runs started by a custom message (`triggerTurn: true`), in print
//! mode and over RPC. Needs `node` (>= 20) on PATH, as CI installs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

/// The conversation entries of a session: `role` for messages, `custom:<type>` for custom
/// messages.
fn kinds(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| match e["type"].as_str()? {
            "message" => Some(e["message"]["role"].as_str()?.to_string()),
            "custom_message" => Some(format!("custom:{}", e["customType"].as_str()?)),
            _ => None,
        })
        .collect()
}

/// A tool that queues messages while the agent streams: the steering note is delivered
/// after the tool results (the held `triggerTurn: false` note first, at the turn's end),
/// then the follow-ups one per stop, custom and user alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_while_streaming_are_queued_like_pi() {
    let s = Setup::new(json!([
        {"text": "Queueing.", "tool_calls": [tc("queue_notes", json!({}))]},
        {"text": "After steer."},
        {"text": "After follow-up note."},
        {"text": "Done."},
    ]))
    .await;
    let (code, out, err) = s.pi(&["-e", &fixture("send-message.ts"), "-p", "go"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Done.\n", "{err}");
    let entries = s.session_entries();
    assert_eq!(
        kinds(&entries),
        [
            "system",
            "user",
            "assistant",
            "toolResult",
            "custom:later-note",
            "custom:steer-note",
            "assistant",
            "custom:follow-note",
            "assistant",
            "user",
            "assistant",
        ]
    );
    let later = entries
        .iter()
        .find(|e| e["customType"] == "later-note")
        .unwrap();
    assert_eq!(later["display"], false);
    assert_eq!(later["content"], "Later note.");
    let requests = s.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(message_texts(["user"], &requests[0]), ["go"]);
    assert_eq!(
        message_texts(["user"], &requests[1]),
        ["go", "Later note.", "Steered note."]
    );
    assert_eq!(
        message_texts(["user"], &requests[2]),
        ["go", "Later note.", "Steered note.", "Follow-up note."]
    );
    assert_eq!(
        message_texts(["user"], &requests[3]),
        [
            "go",
            "Later note.",
            "Steered note.",
            "Follow-up note.",
            "User follow-up."
        ]
    );
    // The steering note went in after the tool result, never between call and result.
    let roles: Vec<&str> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .filter(|r| *r != "system" && *r != "developer")
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user", "user"]);
}

/// `triggerTurn: true` while idle: the custom message is recorded and starts a run the
/// model answers; a message without it is only recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_message_with_trigger_turn_starts_a_run() {
    let s = Setup::new(json!([{"text": "Triggered."}])).await;
    let (code, out, err) = s.pi(&[
        "-e",
        &fixture("send-message.ts"),
        "-p",
        "/note A plain note.",
        "/trigger",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Triggered.\n", "{err}");
    // The note is appended when sent; the run's system message comes with the run, as in
    // Pi (the prompt is recorded when a run starts).
    let entries = s.session_entries();
    assert_eq!(
        kinds(&entries),
        [
            "custom:plain-note",
            "system",
            "custom:trigger-note",
            "assistant"
        ]
    );
    let trigger = entries
        .iter()
        .find(|e| e["customType"] == "trigger-note")
        .unwrap();
    assert_eq!(trigger["content"], "Triggered note.");
    assert_eq!(trigger["details"], json!({"from": "trigger"}));
    let requests = s.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        message_texts(["user"], &requests[0]),
        ["A plain note.", "Triggered note."]
    );
}

/// Over RPC: the command's `triggerTurn` message becomes the run the prompt starts, with
/// the custom message announced like Pi's (`message_start` with `role: "custom"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triggered_custom_message_runs_over_rpc() {
    let s = Setup::new(json!([{"text": "Heard you."}])).await;
    let mut rpc = Rpc::start(&s, &["-e", &fixture("send-message.ts")]);
    rpc.send(json!({"id": "1", "type": "prompt", "message": "/note Before."}));
    assert_eq!(rpc.response("1")["data"]["disposition"], "handled");
    rpc.send(json!({"id": "2", "type": "prompt", "message": "/trigger From RPC."}));
    assert_eq!(rpc.response("2")["data"]["disposition"], "started");
    let (_, seen) = rpc.until(|r| r["type"] == "agent_settled");
    let custom_start = seen
        .iter()
        .find(|r| r["type"] == "message_start" && r["message"]["role"] == "custom")
        .expect("the custom message announced");
    assert_eq!(custom_start["message"]["customType"], "trigger-note");
    assert_eq!(custom_start["message"]["content"], "From RPC.");
    assert!(rpc.finish());
    assert_eq!(
        kinds(&s.session_entries()),
        [
            "custom:plain-note",
            "system",
            "custom:trigger-note",
            "assistant"
        ]
    );
    assert_eq!(
        message_texts(["user"], &s.requests()[0]),
        ["Before.", "From RPC."]
    );
}

/// The session files of the run, each with its entries (header first).
fn session_files(s: &Setup) -> Vec<(std::path::PathBuf, Vec<Value>)> {
    let mut files: Vec<_> = std::fs::read_dir(&s.sessions)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| {
            let entries = std::fs::read_to_string(&p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            (p, entries)
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// The one session file holding a user message with `text`.
fn file_with(s: &Setup, text: &str) -> (std::path::PathBuf, Vec<Value>) {
    let mut found: Vec<_> = session_files(s)
        .into_iter()
        .filter(|(_, entries)| {
            entries.iter().any(|e| {
                e["message"]["role"] == "user" && e["message"]["content"][0]["text"] == text
            })
        })
        .collect();
    assert_eq!(found.len(), 1, "one session with {text:?}");
    found.remove(0)
}

/// A command's `ctx.waitForIdle()` resolves after the run its message started, with the
/// answer readable; `ctx.newSession`, `ctx.switchSession` and `ctx.fork` replace the
/// session the way /new, /resume and /fork do, and the next prompt goes into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_context_waits_and_replaces_the_session() {
    let s = Setup::new(json!([
        {"text": "Hi."},
        {"text": "Fresh answer."},
        {"text": "Back again."},
        {"text": "Forked answer."},
    ]))
    .await;
    let ext = fixture("session-control.ts");

    let (code, _, err) = s.pi(&["-e", &ext, "-p", "/ask-and-wait hello"]);
    assert_eq!(code, 0, "{err}");
    let (first, entries) = file_with(&s, "hello");
    let after = entries
        .iter()
        .find(|e| e["customType"] == "after-wait")
        .expect("the command recorded what it saw");
    assert_eq!(
        after["data"],
        json!({"idle": true, "lastRole": "assistant", "lastText": "Hi."})
    );

    let (code, out, err) = s.pi(&["-e", &ext, "-c", "-p", "/fresh", "second"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Fresh answer.\n");
    let (fresh, entries) = file_with(&s, "second");
    assert_ne!(fresh, first);
    assert_eq!(entries[0]["parentSession"], first.display().to_string());
    let start = entries
        .iter()
        .find(|e| e["customType"] == "fresh-start")
        .expect("withSession ran in the new session");
    assert_eq!(start["data"]["parent"], first.display().to_string());
    assert_eq!(start["data"]["file"], fresh.display().to_string());

    let target = first.display().to_string();
    let switch = format!("/switch-to {target}");
    let (code, out, err) = s.pi(&["-e", &ext, "-p", &switch, "third"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Back again.\n");
    let (again, _) = file_with(&s, "third");
    assert_eq!(again, first);

    let (code, out, err) = s.pi(&[
        "-e",
        &ext,
        "--session",
        &target,
        "-p",
        "/fork-first",
        "fourth",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Forked answer.\n");
    let (forked, entries) = file_with(&s, "fourth");
    assert_ne!(forked, first);
    assert_eq!(entries[0]["parentSession"], target);

    let requests = s.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(message_texts(["user"], &requests[0]), ["hello"]);
    assert_eq!(message_texts(["user"], &requests[1]), ["second"]);
    assert_eq!(message_texts(["user"], &requests[2]), ["hello", "third"]);
    // Forked from before the first user message: nothing of the original goes along.
    assert_eq!(message_texts(["user"], &requests[3]), ["fourth"]);
}
