//! A command's context reading and changing the session, end to end against the fake LLM:
//! `ctx.getContextUsage()` and `ctx.compact()` (fixtures/extensions/context-usage.ts),
//! `ctx.newSession({setup})` and `ctx.fork(id, {position: "at"})` at an entry that is not
//! the leaf (fixtures/extensions/session-control.ts). Needs `node` (>= 20) on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

/// The data of the custom entries of type `kind`, in order.
fn custom(entries: &[Value], kind: &str) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "custom" && e["customType"] == kind)
        .map(|e| e["data"].clone())
        .collect()
}

/// The assistant messages of a session, in order.
fn answers(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .map(|e| &e["message"])
        .collect()
}

/// Pi's context tokens of a response: `totalTokens`, else the sum of its parts.
fn context_tokens(message: &Value) -> u64 {
    let u = &message["usage"];
    match u["totalTokens"].as_u64() {
        Some(t) if t > 0 => t,
        _ => ["input", "output", "cacheRead", "cacheWrite"]
            .iter()
            .map(|k| u[*k].as_u64().unwrap_or(0))
            .sum(),
    }
}

/// `ctx.getContextUsage()` reports the last response's usage against the model's window,
/// unknown tokens right after a compaction; `ctx.compact()` reports its outcome to
/// `onError` (nothing to compact yet) and `onComplete` (the compaction's result), and the
/// compaction is the session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_usage_and_compaction_from_a_command() {
    let s = Setup::new(json!([
        {"text": "Hi.", "usage": {"prompt_tokens": 1200, "completion_tokens": 34}},
        {"text": "More.", "usage": {"prompt_tokens": 2500, "completion_tokens": 66}},
        {"text": "The summary."},
        {"text": "The turn prefix."},
        {"text": "After.", "usage": {"prompt_tokens": 900, "completion_tokens": 10}},
    ]))
    .await;
    // Keep little when compacting, so a short session has something to summarize.
    std::fs::write(
        s.agent.join("settings.json"),
        r#"{"compaction":{"keepRecentTokens":1}}"#,
    )
    .unwrap();
    let ext = fixture("context-usage.ts");

    let (code, out, err) = s.pi(&["-e", &ext, "-p", "/compact-wait", "hello"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Hi.\n");
    let entries = s.session_entries();
    assert_eq!(
        custom(&entries, "compact-failed"),
        [json!({"message": "Nothing to compact (session too small)"})]
    );

    let (code, out, err) = s.pi(&["-e", &ext, "-c", "-p", "/usage", "more"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "More.\n");
    let entries = s.session_entries();
    assert_eq!(context_tokens(answers(&entries)[0]), 1234);
    assert_eq!(
        custom(&entries, "usage"),
        [json!({"tokens": 1234, "contextWindow": 128000, "percent": 1234.0 / 128000.0 * 100.0})]
    );

    // Only a command ran: as Pi, the context's last answer is printed.
    let (code, out, err) = s.pi(&["-e", &ext, "-c", "-p", "/compact-wait Keep it short"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "More.\n");
    let entries = s.session_entries();
    let compaction = entries
        .iter()
        .find(|e| e["type"] == "compaction")
        .unwrap_or_else(|| panic!("a compaction entry: {entries:#?}"));
    let done = custom(&entries, "compacted");
    assert_eq!(done.len(), 1, "{entries:#?}");
    assert_eq!(done[0]["summary"], compaction["summary"]);
    let summary = done[0]["summary"].as_str().unwrap();
    assert!(summary.starts_with("The summary."), "{summary}");
    assert!(summary.ends_with("The turn prefix."), "{summary}");
    // The size of the context before: the last response's usage.
    assert_eq!(done[0]["tokensBefore"], 2566);
    assert_eq!(compaction["tokensBefore"], 2566);
    // Kept: the last answer (its turn was split).
    let more = answers(&entries)[1];
    assert_eq!(more["content"][0]["text"], "More.");
    let more_id = entries
        .iter()
        .find(|e| e["message"]["content"][0]["text"] == "More.")
        .unwrap()["id"]
        .clone();
    assert_eq!(done[0]["firstKeptEntryId"], more_id);
    assert_eq!(compaction["firstKeptEntryId"], more_id);
    // Right after a compaction the size is unknown until the next response.
    assert_eq!(
        done[0]["usageAfter"],
        json!({"tokens": null, "contextWindow": 128000, "percent": null})
    );
    // Both summary requests carried the command's instructions.
    let requests = s.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests[2].to_string().contains("Keep it short"));
    assert!(requests[3].to_string().contains("Keep it short"));

    let (code, out, err) = s.pi(&[
        "-e",
        &ext,
        "-c",
        "-p",
        "after",
        "/usage",
        "/context-entries",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "After.\n");
    let entries = s.session_entries();
    let usages = custom(&entries, "usage");
    assert_eq!(usages.len(), 2);
    assert_eq!(
        usages[1],
        json!({"tokens": 910, "contextWindow": 128000, "percent": 910.0 / 128000.0 * 100.0})
    );
    // `ctx.sessionManager.buildContextEntries()`: the compaction, the entries it kept (from
    // its firstKeptEntryId, without system messages), then everything after it.
    let at = |id: &Value| entries.iter().position(|e| e["id"] == *id).unwrap();
    let compaction_at = at(&compaction["id"]);
    let listed_at = entries
        .iter()
        .position(|e| e["customType"] == "context-entries")
        .unwrap();
    let mut expected = vec![compaction["id"].clone()];
    expected.extend(
        entries[at(&more_id)..compaction_at]
            .iter()
            .filter(|e| e["message"]["role"] != "system")
            .map(|e| e["id"].clone()),
    );
    expected.extend(
        entries[compaction_at + 1..listed_at]
            .iter()
            .map(|e| e["id"].clone()),
    );
    let listed = custom(&entries, "context-entries");
    assert_eq!(listed, [Value::Array(expected.clone())]);
    // Not the whole branch: the summarized start is left out.
    assert!(expected.len() < listed_at - 1, "{entries:#?}");
}

/// `ctx.newSession({setup})` writes into the new session before it is used, with the ids
/// the setup saw; `ctx.fork(id, {position: "at"})` at an answer that is not the leaf
/// continues in a copy of the path through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_session_setup_and_fork_at_an_inner_entry() {
    let s = Setup::new(json!([
        {"text": "First answer."},
        {"text": "Second answer."},
        {"text": "Prepared answer."},
        {"text": "Cloned answer."},
    ]))
    .await;
    let ext = fixture("session-control.ts");

    let (code, _, err) = s.pi(&["-e", &ext, "-p", "one", "two"]);
    assert_eq!(code, 0, "{err}");
    let original = s.session_entries();
    let original_file = std::fs::read_dir(&s.sessions)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .next()
        .unwrap();

    let (code, out, err) = s.pi(&["-e", &ext, "-c", "-p", "/fresh-setup", "three"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Prepared answer.\n");
    let (code, out, err) = s.pi(&[
        "-e",
        &ext,
        "--session",
        &original_file.display().to_string(),
        "-p",
        "/clone-at-first-answer",
        "four",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Cloned answer.\n");

    let requests = s.requests();
    assert_eq!(requests.len(), 4);
    // The new session starts from what setup wrote.
    assert_eq!(
        message_texts(["user", "assistant"], &requests[2]),
        ["Context from before.", "three"]
    );
    // The clone holds the path through the first answer only.
    assert_eq!(
        message_texts(["user", "assistant"], &requests[3]),
        ["one", "First answer.", "four"]
    );

    let mut files: Vec<_> = std::fs::read_dir(&s.sessions)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| *p != original_file)
        .collect();
    files.sort();
    assert_eq!(files.len(), 2);
    let read = |p: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (prepared, cloned): (Vec<Value>, Vec<Value>) = {
        let a = read(&files[0]);
        let b = read(&files[1]);
        if a.iter().any(|e| e["customType"] == "setup-note") {
            (a, b)
        } else {
            (b, a)
        }
    };

    // setup: the message and the note, chained, with the ids setup was given.
    let original_path = original_file.display().to_string();
    assert_eq!(prepared[0]["parentSession"], original_path);
    let message = prepared
        .iter()
        .find(|e| e["message"]["content"][0]["text"] == "Context from before.")
        .expect("setup's message");
    let note = prepared
        .iter()
        .find(|e| e["customType"] == "setup-note")
        .unwrap();
    assert_eq!(note["data"]["messageId"], message["id"]);
    assert_eq!(note["data"]["leaf"], message["id"]);
    assert_eq!(note["parentId"], message["id"]);
    // Setup's entries follow the new session's own first entries; the prompt's come after.
    let kinds: Vec<String> = prepared[1..]
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "message" => format!("message:{}", e["message"]["role"].as_str().unwrap()),
            "custom" => format!("custom:{}", e["customType"].as_str().unwrap()),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "model_change",
            "thinking_level_change",
            "message:user",
            "custom:setup-note",
            "message:system",
            "message:user",
            "message:assistant"
        ]
    );

    // fork at: the original's entries through the first answer, then the new prompt.
    assert_eq!(cloned[0]["parentSession"], original_path);
    let first_answer = original
        .iter()
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap();
    let kept: Vec<&Value> = cloned[1..]
        .iter()
        .take_while(|e| e["id"] != first_answer["id"])
        .chain(cloned.iter().filter(|e| e["id"] == first_answer["id"]))
        .collect();
    let original_ids: Vec<&Value> = original[1..]
        .iter()
        .take_while(|e| e["id"] != first_answer["id"])
        .chain(std::iter::once(first_answer))
        .map(|e| &e["id"])
        .collect();
    assert_eq!(
        kept.iter().map(|e| &e["id"]).collect::<Vec<_>>(),
        original_ids
    );
    let four = cloned
        .iter()
        .find(|e| e["message"]["content"][0]["text"] == "four")
        .unwrap();
    assert_eq!(four["parentId"], first_answer["id"]);
    assert!(!cloned
        .iter()
        .any(|e| e["message"]["content"][0]["text"] == "two"));
}
