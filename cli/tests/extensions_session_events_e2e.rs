//! The session lifecycle events side by side with real Pi 1.6.0: the scenario of
//! scripts/session-events-record.sh (prompts, set_session_name, new_session,
//! switch_session back, fork, a fork that fails after its gate, a cancelled, a done and an
//! extension-supplied compaction, tree navigation with the model's, without and with the
//! extension's branch summary, clone, quit) driven over RPC with
//! fixtures/extensions/session-events-log.ts, whose normalized event log must equal the one
//! real Pi wrote (fixtures/extensions/session-events/realpi.jsonl). Needs `node` (>= 20).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

const RECORDED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/extensions/session-events/realpi.jsonl"
);

fn command(rpc: &mut Rpc, record: Value) -> (Value, Vec<Value>) {
    let id = record["id"].as_str().unwrap().to_string();
    rpc.send(record);
    rpc.until(|r| r["type"] == "response" && r["id"] == id)
}

fn prompt(rpc: &mut Rpc, id: &str, text: &str) {
    let (answer, _) = command(rpc, json!({"id": id, "type": "prompt", "message": text}));
    assert_eq!(answer["success"], true, "{answer}");
    rpc.until(|r| r["type"] == "agent_settled");
}

/// Runs one of the extension's commands and waits for its `ev-done` notice.
fn ext_command(rpc: &mut Rpc, id: &str, text: &str) {
    let done = |r: &Value| {
        r["type"] == "extension_ui_request"
            && r["method"] == "notify"
            && r["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("ev-done"))
    };
    let (answer, seen) = command(rpc, json!({"id": id, "type": "prompt", "message": text}));
    assert_eq!(answer["data"]["disposition"], "handled", "{answer}");
    if !seen.iter().any(done) {
        rpc.until(done);
    }
}

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_events_match_real_pi() {
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
    let log = s._tmp.path().join("events.jsonl");
    let log_path = log.display().to_string();
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &fixture("session-events-log.ts")],
        &[("PI_SESSION_EVENTS_LOG", &log_path)],
    );

    prompt(&mut rpc, "p1", "one");
    prompt(&mut rpc, "p2", "two");
    command(
        &mut rpc,
        json!({"id": "n", "type": "set_session_name", "name": "demo"}),
    );
    let (state, _) = command(&mut rpc, json!({"id": "s1", "type": "get_state"}));
    let first = state["data"]["sessionFile"].as_str().unwrap().to_string();
    let (new, _) = command(&mut rpc, json!({"id": "new", "type": "new_session"}));
    assert_eq!(new["data"], json!({"cancelled": false}), "{new}");
    let (switched, _) = command(
        &mut rpc,
        json!({"id": "sw", "type": "switch_session", "sessionPath": first}),
    );
    assert_eq!(switched["data"], json!({"cancelled": false}), "{switched}");
    let (messages, _) = command(&mut rpc, json!({"id": "fm", "type": "get_fork_messages"}));
    let entry = messages["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["text"] == "two")
        .unwrap()["entryId"]
        .clone();
    let (forked, _) = command(
        &mut rpc,
        json!({"id": "fork", "type": "fork", "entryId": entry}),
    );
    assert_eq!(forked["success"], true, "{forked}");
    prompt(&mut rpc, "p3", "three");
    // A fork that fails after its gate (no such entry): no shutdown, the session stays.
    let (bad, _) = command(
        &mut rpc,
        json!({"id": "badfork", "type": "fork", "entryId": "nonexistent"}),
    );
    assert_eq!(bad["success"], false, "{bad}");
    ext_command(&mut rpc, "veto", "/ev-veto-compact");
    let (vetoed, _) = command(&mut rpc, json!({"id": "c1", "type": "compact"}));
    assert_eq!(vetoed["success"], false, "{vetoed}");
    let (compacted, _) = command(&mut rpc, json!({"id": "c2", "type": "compact"}));
    assert_eq!(compacted["success"], true, "{compacted}");
    ext_command(&mut rpc, "nav1", "/ev-nav assistant#1 summarize");
    ext_command(&mut rpc, "nav2", "/ev-nav user#2");
    ext_command(&mut rpc, "hooktree", "/ev-hook-tree");
    ext_command(&mut rpc, "nav3", "/ev-nav assistant#2 summarize");
    ext_command(&mut rpc, "hookcompact", "/ev-hook-compact");
    let (hooked, _) = command(&mut rpc, json!({"id": "c3", "type": "compact"}));
    assert_eq!(hooked["success"], true, "{hooked}");
    let (cloned, _) = command(&mut rpc, json!({"id": "clone", "type": "clone"}));
    assert_eq!(cloned["data"], json!({"cancelled": false}), "{cloned}");
    assert!(rpc.finish());

    let ours = lines(&std::fs::read_to_string(&log).unwrap());
    let real = lines(&std::fs::read_to_string(RECORDED).unwrap());
    for (i, (o, r)) in ours.iter().zip(&real).enumerate() {
        assert_eq!(o, r, "event {i} differs (ours, then real Pi)");
    }
    assert_eq!(ours.len(), real.len(), "ours: {ours:#?}");
}
