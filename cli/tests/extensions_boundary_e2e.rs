#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Extension handlers that act at the agent's boundaries, each checked against what real
//! Pi 1.6.0 does with the same extension and fake-LLM script: `session_before_compact`'s
//! `event.signal` (it aborts with the compaction), actionable `turn_end` and
//! `agent_before_settle` (entries and one continuation), and a command's `ctx.reload()`.

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

fn jsonl(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Three long answers, then `compact` whose `session_before_compact` handler waits on
/// `event.signal`; `abort` must abort that signal (real Pi: the handler sees an aborted
/// AbortSignal with an `AbortError` reason and the compaction fails as aborted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_before_compact_signal_aborts_with_the_compaction() {
    let big = "lorem ipsum dolor sit amet ".repeat(40);
    let turns: Vec<Value> = (0..3)
        .map(|i| json!({"text": format!("Reply {i}: {big}")}))
        .collect();
    let s = Setup::new(Value::Array(turns)).await;
    std::fs::write(
        s.agent.join("settings.json"),
        json!({"compaction": {"keepRecentTokens": 60}}).to_string(),
    )
    .unwrap();
    let mut rpc = Rpc::start(&s, &["-e", &fixture("compaction-abort.ts")]);
    for (i, text) in ["one", "two", "three"].iter().enumerate() {
        rpc.send(json!({"id": format!("p{i}"), "type": "prompt", "message": text}));
        rpc.until(|r| r["type"] == "agent_settled");
    }
    rpc.send(json!({"id": "c1", "type": "compact"}));
    rpc.until(|r| r["type"] == "extension_ui_request" && r["message"] == "compaction-waiting");
    rpc.send(json!({"id": "a1", "type": "abort"}));
    let compacted = rpc.response("c1");
    assert_eq!(compacted["success"], false, "{compacted}");
    assert_eq!(compacted["error"], "Compaction cancelled");
    assert!(rpc.finish());

    assert_eq!(
        jsonl(&s.cwd.join("compaction-abort.jsonl")),
        vec![
            json!({"event": "session_before_compact", "isAbortSignal": true, "aborted": false}),
            json!({"event": "signal_aborted", "aborted": true, "reason": "AbortError"}),
            json!({"event": "session_compact_failed", "aborted": true, "reason": "manual"}),
        ]
    );
    assert!(!s
        .session_entries()
        .iter()
        .any(|e| e["type"] == "compaction"));
}

/// `turn_end` proposes a custom entry and a hidden nudge and asks to continue (a second
/// handler sees that proposal); `agent_before_settle` adds a reminder and asks to continue;
/// a later `turn_end` proposal with a context edit of a missing entry is refused whole. What
/// the handlers saw, the session file and the requests are real Pi 1.6.0's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turn_end_and_agent_before_settle_write_entries_and_continue() {
    let turns =
        json!([{"text": "First."}, {"text": "Second."}, {"text": "Third."}, {"text": "Fourth."}]);
    let s = Setup::new(turns).await;
    let fixture_path = fixture("boundaries.ts");
    let mut rpc = Rpc::start(&s, &["-e", &fixture_path]);
    rpc.send(json!({"id": "p0", "type": "prompt", "message": "hi"}));
    let (_, seen) = rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());

    let seen_log = jsonl(&s.cwd.join("boundaries.jsonl"));
    let turn_end = |index: u64| {
        json!({"event": "turn_end", "turnIndex": index, "outcome": "completed", "hasEntryId": true,
            "toolResultEntryIds": 0, "entries": 0, "continue": false, "canContinue": false})
    };
    let settle = json!({"event": "agent_before_settle", "outcome": "completed", "entries": 0, "continue": false});
    assert_eq!(
        seen_log,
        vec![
            turn_end(0),
            json!({"event": "turn_end (second handler)", "entries": ["custom", "custom_message"], "continue": true, "canContinue": true}),
            turn_end(1),
            json!({"event": "turn_end (second handler)", "entries": [], "continue": false, "canContinue": false}),
            json!({"event": "agent_end"}),
            settle.clone(),
            turn_end(0),
            json!({"event": "turn_end (second handler)", "entries": ["custom", "context_edit"], "continue": false, "canContinue": false}),
            json!({"event": "agent_end"}),
            settle,
            json!({"event": "agent_settled", "aborted": false}),
        ]
    );

    // The refused proposal is reported after each handler, by the extension, as Pi does.
    let errors: Vec<&Value> = seen
        .iter()
        .filter(|r| r["type"] == "extension_error")
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    for e in errors {
        assert_eq!(e["event"], "turn_end");
        assert_eq!(e["extensionPath"], json!(fixture_path));
        assert_eq!(
            e["error"],
            "Invalid boundary entries: Entry no-such-entry not found"
        );
    }
    let appended: Vec<&Value> = seen
        .iter()
        .filter(|r| r["type"] == "entry_appended")
        .map(|r| &r["entry"])
        .collect();
    let appended_types: Vec<_> = appended
        .iter()
        .map(|e| e["customType"].as_str().unwrap())
        .collect();
    assert_eq!(appended_types, ["turn-note", "nudge", "review-reminder"]);

    let entries = s.session_entries();
    let shape: Vec<String> = entries
        .iter()
        .skip(1)
        .filter(|e| {
            !matches!(
                e["type"].as_str(),
                Some("model_change" | "thinking_level_change")
            )
        })
        .map(|e| match e["type"].as_str().unwrap() {
            "message" => e["message"]["role"].as_str().unwrap().to_string(),
            kind => format!("{kind}:{}", e["customType"].as_str().unwrap_or("")),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "system",
            "user",
            "assistant",
            "custom:turn-note",
            "custom_message:nudge",
            "assistant",
            "custom_message:review-reminder",
            "assistant",
        ]
    );
    let nudge = entries.iter().find(|e| e["customType"] == "nudge").unwrap();
    assert_eq!(nudge["content"], "Say more.");
    assert_eq!(nudge["display"], false);
    let note = entries
        .iter()
        .find(|e| e["customType"] == "turn-note")
        .unwrap();
    assert_eq!(note["data"], json!({"turnIndex": 0}));

    // One request per answer: the nudge and the reminder reach the model as user messages.
    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(message_texts(["user", "assistant"], &requests[0]), ["hi"]);
    assert_eq!(
        message_texts(["user", "assistant"], &requests[1]),
        ["hi", "First.", "Say more."]
    );
    assert_eq!(
        message_texts(["user", "assistant"], &requests[2]),
        [
            "hi",
            "First.",
            "Say more.",
            "Second.",
            "Review the final diff."
        ]
    );
}

/// A command's `ctx.reload()` runs `/reload`'s flow: `session_shutdown` and `session_start`
/// with `reason: "reload"` around it, the command going on afterwards, and a context file
/// written since start-up reaching the next request (real Pi 1.6.0 does the same).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_reload_rereads_resources_between_shutdown_and_start() {
    let s = Setup::new(json!([{"text": "First."}, {"text": "Second."}])).await;
    let mut rpc = Rpc::start(&s, &["-e", &fixture("reload-runtime.ts")]);
    rpc.send(json!({"id": "p0", "type": "prompt", "message": "hi"}));
    rpc.until(|r| r["type"] == "agent_settled");
    std::fs::write(s.cwd.join("AGENTS.md"), "Always answer in haiku.\n").unwrap();
    rpc.send(json!({"id": "r", "type": "prompt", "message": "/reload-now"}));
    let reloaded = rpc.response("r");
    assert_eq!(reloaded["success"], true, "{reloaded}");
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "again"}));
    rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());

    assert_eq!(
        jsonl(&s.cwd.join("reload.jsonl")),
        vec![
            json!({"event": "session_start", "reason": "startup"}),
            json!({"event": "command", "step": "before reload"}),
            json!({"event": "session_shutdown", "reason": "reload"}),
            json!({"event": "session_start", "reason": "reload"}),
            json!({"event": "command", "step": "after reload"}),
            json!({"event": "session_shutdown", "reason": "quit"}),
        ]
    );
    let requests = s.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].to_string().contains("Always answer in haiku."));
    assert!(requests[1].to_string().contains("Always answer in haiku."));
    // The reloaded prompt reaches the session as a patch of the changed section.
    let patches: Vec<Value> = s
        .session_entries()
        .into_iter()
        .filter(|e| e["message"]["role"] == "system")
        .collect();
    assert_eq!(patches.len(), 2);
    let sections = patches[1]["message"]["sections"].as_object().unwrap();
    assert!(sections["project_context"]
        .as_str()
        .unwrap()
        .contains("Always answer in haiku."));
}

/// Boundary drafts that change the model's context, as real Pi 1.6.0 writes and projects
/// them: a `turn_end` `context_edit` hides the answer and a hidden instruction asks again; an
/// `agent_before_settle` `compaction` keeps only the last answer, and the model goes on from
/// the summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boundary_context_edit_and_compaction_reshape_the_next_request() {
    let turns =
        json!([{"text": "First."}, {"text": "Second."}, {"text": "Third."}, {"text": "Fourth."}]);
    let s = Setup::new(turns).await;
    let mut rpc = Rpc::start(&s, &["-e", &fixture("boundary-edits.ts")]);
    rpc.send(json!({"id": "p0", "type": "prompt", "message": "hi"}));
    let (_, seen) = rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());
    assert!(
        !seen.iter().any(|r| r["type"] == "extension_error"),
        "{seen:#?}"
    );

    let entries = s.session_entries();
    let id_of_answer = |text: &str| {
        entries
            .iter()
            .find(|e| e["message"]["content"][0]["text"] == text)
            .map(|e| e["id"].clone())
            .unwrap()
    };
    let edit = entries
        .iter()
        .find(|e| e["type"] == "context_edit")
        .unwrap();
    assert_eq!(edit["targetId"], id_of_answer("First."));
    assert_eq!(edit["replacement"], Value::Null);
    let compaction = entries.iter().find(|e| e["type"] == "compaction").unwrap();
    assert_eq!(compaction["summary"], "Earlier talk, summarized.");
    assert_eq!(compaction["firstKeptEntryId"], id_of_answer("Second."));
    assert_eq!(compaction["fromHook"], true);
    assert_eq!(compaction["details"], json!({"by": "boundary-edits"}));
    assert!(compaction["tokensBefore"].as_u64().unwrap() > 0);
    let order: Vec<&str> = entries
        .iter()
        .filter(|e| e["type"] != "message" || e["message"]["role"] == "assistant")
        .filter(|e| {
            !matches!(
                e["type"].as_str(),
                Some("session" | "model_change" | "thinking_level_change")
            )
        })
        .map(|e| {
            e["customType"]
                .as_str()
                .or(e["message"]["content"][0]["text"].as_str())
                .unwrap_or(e["type"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        order,
        [
            "First.",
            "context_edit",
            "replacement-instruction",
            "Second.",
            "compaction",
            "go-on",
            "Third."
        ]
    );

    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        message_texts(["user", "assistant"], &requests[1]),
        ["hi", "Answer again using the persisted user request."]
    );
    let last = message_texts(["user", "assistant"], &requests[2]);
    assert_eq!(last.len(), 3, "{last:?}");
    assert!(last[0].starts_with("The conversation history before this point was compacted"));
    assert!(last[0].contains("Earlier talk, summarized."));
    assert_eq!(last[1..], ["Second.", "Go on from the summary."]);
}

/// `event.context` is rebuilt after each handler from the proposal so far, by the host's
/// own context building, with Pi's fields: the first handler sees the answer, the next sees
/// it hidden by the proposed edit and the proposed note as the model's last message. A
/// proposal that cannot be applied leaves the context as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boundary_handlers_see_the_context_rebuilt_from_earlier_proposals() {
    let s = Setup::new(json!([{"text": "First."}])).await;
    let fixture_path = fixture("boundary-context.ts");
    let mut rpc = Rpc::start(&s, &["-e", &fixture_path]);
    rpc.send(json!({"id": "p0", "type": "prompt", "message": "hi"}));
    let (_, seen) = rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());

    let entries = s.session_entries();
    let data = |custom_type: &str| {
        entries
            .iter()
            .find(|e| e["type"] == "custom" && e["customType"] == custom_type)
            .map(|e| e["data"].clone())
            .unwrap_or_else(|| panic!("no {custom_type} entry in {entries:#?}"))
    };
    assert_eq!(
        data("seen-before"),
        json!({"sources": ["message:system/1", "message:user/1", "message:assistant/1"],
               "llmRoles": ["system", "user", "assistant"], "lastText": "First.",
               "contextMessages": 3, "pending": 0, "canContinue": false})
    );
    assert_eq!(
        data("seen-after"),
        json!({"sources": ["message:system/1", "message:user/1", "message:assistant/0", "context_edit/0", "custom_message/1"],
               "llmRoles": ["system", "user", "user"], "lastText": "The answer is hidden.",
               "contextMessages": 3, "pending": 0, "canContinue": true})
    );
    // Before settling: the refused edit is reported and the next handler sees the
    // written context (the edit and the note are entries now), not the refused one.
    assert_eq!(
        data("seen-settle"),
        json!({"proposed": ["context_edit"],
               "sources": ["message:system/1", "message:user/1", "message:assistant/0", "context_edit/0", "custom_message/1"],
               "llmRoles": ["system", "user", "user"], "lastText": "The answer is hidden.",
               "contextMessages": 3, "pending": 0, "canContinue": true})
    );
    let errors: Vec<&Value> = seen
        .iter()
        .filter(|r| r["type"] == "extension_error")
        .collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0]["event"], "agent_before_settle");
    assert_eq!(
        errors[0]["error"],
        "Invalid boundary entries: Entry no-such-entry not found"
    );
    // Nothing asked to go on: one request.
    assert_eq!(s.requests().len(), 1);
}
