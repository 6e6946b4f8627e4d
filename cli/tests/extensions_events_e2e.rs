//! Events extensions hear about the user's own choices, over RPC: `model_select` and
//! `thinking_level_select` (set_model, cycle_model, set_thinking_level) and `user_bash`
//! (the `bash` command, which a handler may answer instead of running). select-events.ts
//! (ours) turns each into a notice. Needs `node` (>= 20) on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

fn is_notice(r: &Value) -> bool {
    r["type"] == "extension_ui_request" && r["method"] == "notify"
}

/// The response to `id` and the first `count` notices, whichever order they came in.
fn answer_and_notices(rpc: &mut Rpc, id: &str, count: usize) -> (Value, Vec<String>) {
    let (response, skipped) = rpc.until(|r| r["type"] == "response" && r["id"] == id);
    let text = |r: &Value| r["message"].as_str().unwrap().to_string();
    let mut notices: Vec<String> = skipped.iter().filter(|r| is_notice(r)).map(text).collect();
    while notices.len() < count {
        notices.push(text(&rpc.until(is_notice).0));
    }
    (response, notices)
}

/// The next notice.
fn answer_and_notices_more(rpc: &mut Rpc) -> Option<String> {
    rpc.until(is_notice).0["message"]
        .as_str()
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_thinking_and_user_bash_events_over_rpc() {
    let s = Setup::new(json!([])).await;
    let mut rpc = Rpc::start(&s, &["-e", &fixture("select-events.ts")]);

    rpc.send(json!({"id": "t", "type": "set_thinking_level", "level": "high"}));
    let (_, notices) = answer_and_notices(&mut rpc, "t", 1);
    assert!(
        notices[0].starts_with("thinking_level_select "),
        "{notices:?}"
    );
    assert!(notices[0].ends_with(" -> high"), "{notices:?}");
    rpc.send(json!({"id": "t2", "type": "set_thinking_level", "level": "low"}));
    let (_, notices) = answer_and_notices(&mut rpc, "t2", 1);
    assert_eq!(notices, ["thinking_level_select high -> low"]);

    // fake-model-2 does not reason: the level is clamped first, then the model event.
    rpc.send(
        json!({"id": "m", "type": "set_model", "provider": "fakeoai", "modelId": "fake-model-2"}),
    );
    let (answer, notices) = answer_and_notices(&mut rpc, "m", 2);
    assert_eq!(answer["success"], true);
    assert_eq!(
        notices,
        [
            "thinking_level_select low -> off",
            "model_select set fakeoai/fake-model -> fakeoai/fake-model-2"
        ]
    );

    rpc.send(json!({"id": "c", "type": "cycle_model"}));
    let (cycled, mut notices) = answer_and_notices(&mut rpc, "c", 1);
    let to = cycled["data"]["model"]["id"].as_str().unwrap().to_string();
    while !notices.iter().any(|n| n.starts_with("model_select")) {
        notices.extend(answer_and_notices_more(&mut rpc));
    }
    assert!(
        notices.contains(&format!(
            "model_select cycle fakeoai/fake-model-2 -> fakeoai/{to}"
        )),
        "{notices:?}"
    );

    // pi.setModel from a command: `model_select` (source "set") has reached the handlers
    // by the time the call resolves, as in Pi; the current model again selects nothing.
    rpc.send(json!({"id": "s", "type": "prompt", "message": "/switch fakeoai/fake-model"}));
    let (answer, notices) = answer_and_notices(&mut rpc, "s", 0);
    assert_eq!(answer["data"]["disposition"], "handled");
    let mut notices = notices;
    while notices.len() < 2 {
        notices.extend(answer_and_notices_more(&mut rpc));
    }
    assert_eq!(
        notices[notices.len() - 2..],
        [
            format!("model_select set fakeoai/{to} -> fakeoai/fake-model"),
            "setModel fakeoai/fake-model -> true".to_string()
        ],
        "{notices:?}"
    );
    rpc.send(json!({"id": "s2", "type": "prompt", "message": "/switch fakeoai/fake-model"}));
    let (_, mut notices) = answer_and_notices(&mut rpc, "s2", 0);
    if notices.is_empty() {
        notices.extend(answer_and_notices_more(&mut rpc));
    }
    assert_eq!(notices, ["setModel fakeoai/fake-model -> true"]);
    rpc.send(json!({"id": "g0", "type": "get_state"}));
    assert_eq!(rpc.response("g0")["data"]["model"]["id"], "fake-model");

    // `!fake …` is answered by the extension: recorded, never run.
    rpc.send(json!({"id": "b", "type": "bash", "command": "fake hello"}));
    let (answered, notices) = answer_and_notices(&mut rpc, "b", 1);
    assert_eq!(notices, ["user_bash fake hello exclude=false cwd=true"]);
    assert_eq!(answered["data"]["output"], "faked: hello");
    assert_eq!(answered["data"]["exitCode"], 7);
    // Any other command runs as usual.
    rpc.send(
        json!({"id": "r", "type": "bash", "command": "echo real", "excludeFromContext": true}),
    );
    let (ran, notices) = answer_and_notices(&mut rpc, "r", 1);
    assert_eq!(notices, ["user_bash echo real exclude=true cwd=true"]);
    assert_eq!(ran["data"]["output"], "real\n");
    assert_eq!(ran["data"]["exitCode"], 0);
    // Both are in the conversation as `bashExecution` messages.
    rpc.send(json!({"id": "g", "type": "get_messages"}));
    let messages = rpc.response("g");
    let bash: Vec<&Value> = messages["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "bashExecution")
        .collect();
    assert_eq!(bash.len(), 2, "{messages:#?}");
    assert_eq!(bash[0]["command"], "fake hello");
    assert_eq!(bash[0]["output"], "faked: hello");
    assert_eq!(bash[0]["exitCode"], 7);
    assert_eq!(bash[1]["excludeFromContext"], true);
    assert!(rpc.finish());
}
