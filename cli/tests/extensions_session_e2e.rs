//! Session replacement as extensions see it, over RPC: Pi's confirm-destructive.ts example
//! (copied unchanged from the 1.6.0 npm package) asks before `new_session` and `fork`
//! through the RPC extension-UI protocol and cancels on "no"; session-events.ts (ours)
//! records the lifecycle events and vetoes a clone. Needs `node` (>= 20) on PATH.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

fn is_ui(method: &'static str) -> impl Fn(&Value) -> bool {
    move |r| r["type"] == "extension_ui_request" && r["method"] == method
}

fn session_file(rpc: &mut Rpc, id: &str) -> String {
    rpc.send(json!({"id": id, "type": "get_state"}));
    let state = rpc.response(id);
    state["data"]["sessionFile"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_confirm_and_cancel_session_replacement_over_rpc() {
    let s = Setup::new(json!([{"text": "One."}])).await;
    let mut rpc = Rpc::start(
        &s,
        &[
            "-e",
            &fixture("confirm-destructive.ts"),
            "-e",
            &fixture("session-events.ts"),
        ],
    );
    rpc.send(json!({"id": "1", "type": "prompt", "message": "first"}));
    rpc.until(|r| r["type"] == "agent_settled");
    let first = session_file(&mut rpc, "s1");

    // `new_session`: "Clear session?" answered no → cancelled, the session stays.
    rpc.send(json!({"id": "2", "type": "new_session"}));
    let (confirm, _) = rpc.until(is_ui("confirm"));
    assert_eq!(confirm["title"], "Clear session?");
    rpc.send(json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": false}));
    let (notice, _) = rpc.until(is_ui("notify"));
    assert_eq!(notice["message"], "Clear cancelled");
    assert_eq!(rpc.response("2")["data"], json!({"cancelled": true}));
    assert_eq!(session_file(&mut rpc, "s2"), first);

    // `fork` from the first message: the select answered "No" → cancelled.
    rpc.send(json!({"id": "fm", "type": "get_fork_messages"}));
    let messages = rpc.response("fm");
    let entry_id = messages["data"]["messages"][0]["entryId"]
        .as_str()
        .unwrap()
        .to_string();
    rpc.send(json!({"id": "3", "type": "fork", "entryId": entry_id}));
    let (select, _) = rpc.until(is_ui("select"));
    assert_eq!(
        select["title"],
        format!("Fork from entry {}?", &entry_id[..8])
    );
    assert_eq!(
        select["options"],
        json!(["Yes, create fork", "No, stay in current session"])
    );
    rpc.send(json!({"type": "extension_ui_response", "id": select["id"],
        "value": "No, stay in current session"}));
    assert_eq!(rpc.response("3")["data"], json!({"cancelled": true}));

    // `clone`: confirm-destructive lets it through, the next handler cancels it.
    rpc.send(json!({"id": "4", "type": "prompt", "message": "/veto-clone"}));
    assert_eq!(rpc.response("4")["data"]["disposition"], "handled");
    rpc.send(json!({"id": "5", "type": "clone"}));
    let (select, _) = rpc.until(is_ui("select"));
    rpc.send(json!({"type": "extension_ui_response", "id": select["id"],
        "value": "Yes, create fork"}));
    assert_eq!(rpc.response("5")["data"], json!({"cancelled": true}));
    assert_eq!(session_file(&mut rpc, "s3"), first);

    // `new_session` confirmed: a new session, with shutdown and start around it.
    rpc.send(json!({"id": "6", "type": "new_session"}));
    let (confirm, _) = rpc.until(is_ui("confirm"));
    rpc.send(json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": true}));
    assert_eq!(rpc.response("6")["data"], json!({"cancelled": false}));
    let second = session_file(&mut rpc, "s4");
    assert_ne!(second, first);
    assert!(rpc.finish());

    let log = std::fs::read_to_string(s.cwd.join("session-events.jsonl")).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // A handler that cancels ends the gate: session-events.ts never saw the cancelled
    // new_session and fork (confirm-destructive.ts comes first), only the clone it vetoed.
    let expected = json!([
        {"event": "session_start", "reason": "startup", "sessionFile": first},
        {"event": "session_before_fork", "entryId": events[1]["entryId"], "position": "at", "sessionFile": first},
        {"event": "session_before_switch", "reason": "new", "sessionFile": first},
        // As in Pi, the session left is told which file the next one lives (will live) in.
        {"event": "session_shutdown", "reason": "new", "targetSessionFile": second, "sessionFile": first},
        {"event": "session_start", "reason": "new", "previousSessionFile": first, "sessionFile": second},
        {"event": "session_shutdown", "reason": "quit", "sessionFile": second},
    ]);
    assert_eq!(Value::Array(events.clone()), expected, "{log}");
    // A clone is taken at the leaf (the answer), not at the message a fork starts before.
    assert!(events[1]["entryId"].is_string());
    assert_ne!(events[1]["entryId"], json!(entry_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_before_compact_cancels_or_supplies_the_summary() {
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
    let mut rpc = Rpc::start(&s, &["-e", &fixture("compaction-hooks.ts")]);
    for (i, text) in ["one", "two", "three"].iter().enumerate() {
        let id = format!("p{i}");
        rpc.send(json!({"id": id, "type": "prompt", "message": text}));
        rpc.until(|r| r["type"] == "agent_settled");
    }
    let model_requests = s.requests().len();

    rpc.send(json!({"id": "c1", "type": "compact", "customInstructions": "veto"}));
    let vetoed = rpc.response("c1");
    assert_eq!(vetoed["success"], false, "{vetoed}");
    assert_eq!(vetoed["error"], "Compaction cancelled");

    rpc.send(json!({"id": "c2", "type": "compact", "customInstructions": "custom"}));
    let done = rpc.response("c2");
    assert_eq!(done["success"], true, "{done}");
    assert!(done["data"]["summary"]
        .as_str()
        .unwrap()
        .starts_with("Custom summary of "));
    // The extension's summary is recorded without asking the model.
    assert_eq!(s.requests().len(), model_requests);
    assert!(rpc.finish());

    let entries = s.session_entries();
    let compactions: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "compaction")
        .collect();
    assert_eq!(compactions.len(), 1);
    assert_eq!(compactions[0]["fromHook"], true);
    assert_eq!(compactions[0]["details"], json!({"by": "compaction-hooks"}));

    let log = std::fs::read_to_string(s.cwd.join("compaction-events.jsonl")).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 4, "{log}");
    assert_eq!(events[0]["event"], "session_before_compact");
    assert_eq!(events[0]["reason"], "manual");
    assert_eq!(events[0]["signal"], "boolean");
    assert!(events[0]["summarized"].as_u64().unwrap() > 0, "{log}");
    assert!(events[0]["branchEntries"].as_u64().unwrap() >= 6, "{log}");
    assert_eq!(
        events[1],
        json!({"event": "session_compact_failed", "reason": "manual", "aborted": true})
    );
    assert_eq!(events[2]["customInstructions"], "custom");
    assert_eq!(
        events[3],
        json!({"event": "session_compact", "reason": "manual", "fromExtension": true,
            "summary": compactions[0]["summary"], "fromHook": true})
    );
}

/// Pi builds a new extension runtime for every session: after `new_session`,
/// `switch_session` and `fork` the extensions are loaded again in a new process (module
/// state starts afresh), hear `session_start` with the reason and the file left, then
/// `resources_discover` (`startup`); the process of the session left stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_gets_a_fresh_extension_runtime() {
    let s = Setup::new(json!([{"text": "One."}])).await;
    let mut rpc = Rpc::start(&s, &["-e", &fixture("session-runtime.ts")]);
    rpc.send(json!({"id": "1", "type": "prompt", "message": "first"}));
    rpc.until(|r| r["type"] == "agent_settled");
    let first = session_file(&mut rpc, "s1");

    rpc.send(json!({"id": "2", "type": "new_session"}));
    assert_eq!(rpc.response("2")["data"], json!({"cancelled": false}));
    let second = session_file(&mut rpc, "s2");

    rpc.send(json!({"id": "3", "type": "switch_session", "sessionPath": first}));
    assert_eq!(rpc.response("3")["data"], json!({"cancelled": false}));

    rpc.send(json!({"id": "fm", "type": "get_fork_messages"}));
    let entry_id = rpc.response("fm")["data"]["messages"][0]["entryId"]
        .as_str()
        .unwrap()
        .to_string();
    rpc.send(json!({"id": "4", "type": "fork", "entryId": entry_id}));
    assert_eq!(rpc.response("4")["data"]["cancelled"], false);
    assert!(rpc.finish());

    let log = std::fs::read_to_string(s.cwd.join("session-runtime.jsonl")).unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shape: Vec<Value> = events
        .iter()
        .map(|e| {
            json!([
                e["event"],
                e["reason"],
                e["previousSessionFile"],
                e["started"]
            ])
        })
        .collect();
    assert_eq!(
        shape,
        [
            json!(["session_start", "startup", null, 1]),
            json!(["resources_discover", "startup", null, 1]),
            json!(["session_start", "new", first, 1]),
            json!(["resources_discover", "startup", null, 1]),
            json!(["session_start", "resume", second, 1]),
            json!(["resources_discover", "startup", null, 1]),
            json!(["session_start", "fork", first, 1]),
            json!(["resources_discover", "startup", null, 1]),
        ],
        "{log}"
    );
    // Each session's events come from a process of its own; those of the sessions left
    // have stopped.
    let pids: Vec<u64> = events
        .iter()
        .step_by(2)
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["pid"].as_u64().unwrap(), pids[i / 2], "{log}");
    }
    let mut distinct = pids.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{log}");
    for pid in &pids {
        let alive = (0..50).all(|_| {
            let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|st| st.split(' ').nth(2) == Some("Z"));
            if !gone {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            !gone
        });
        assert!(!alive, "extension process {pid} still runs");
    }
}

/// Pi builds a new runtime for every session, so what changed on disk since start-up
/// applies from the next session on: after `new_session` a context file and a prompt
/// template added meanwhile are in the system prompt and in `get_commands`, while the
/// first session's request had neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_reads_context_files_and_templates_again() {
    let s = Setup::new(json!([{"text": "One."}, {"text": "Two."}])).await;
    let mut rpc = Rpc::start(&s, &[]);
    rpc.send(json!({"id": "1", "type": "prompt", "message": "first"}));
    rpc.until(|r| r["type"] == "agent_settled");
    let template_names = |rpc: &mut Rpc, id: &str| -> Vec<String> {
        rpc.send(json!({"id": id, "type": "get_commands"}));
        rpc.response(id)["data"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["source"] == "prompt")
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(template_names(&mut rpc, "c1").is_empty());

    std::fs::write(
        s.agent.join("AGENTS.md"),
        "Rule added later: answer in haiku.\n",
    )
    .unwrap();
    std::fs::create_dir_all(s.agent.join("prompts")).unwrap();
    std::fs::write(
        s.agent.join("prompts/later.md"),
        "---\ndescription: Added after start-up\n---\nDo the later thing.\n",
    )
    .unwrap();
    rpc.send(json!({"id": "n", "type": "new_session"}));
    assert_eq!(rpc.response("n")["success"], true);
    assert_eq!(template_names(&mut rpc, "c2"), ["later"]);
    rpc.send(json!({"id": "2", "type": "prompt", "message": "second"}));
    rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());

    let requests = s.fake.requests();
    let system = |i: usize| {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "system" || m["role"] == "developer")
            .map(|m| m["content"].to_string())
            .collect::<String>()
    };
    assert!(!system(0).contains("Rule added later"), "{}", system(0));
    assert!(system(1).contains("Rule added later"), "{}", system(1));
}
