//! End to end over RPC: Pi's tree navigation events. tree-events.ts (ours) navigates with a
//! command's `ctx.navigateTree`; its `session_before_tree` handler cancels or supplies the
//! branch summary, and `session_tree` reports where the leaf went. Needs `node` (>= 20).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

mod extensions_common;

use extensions_common::*;

/// Runs `/command` and returns the notices the extension showed before it answered.
fn command_notices(rpc: &mut Rpc, id: &str, command: &str) -> Vec<String> {
    rpc.send(json!({"id": id, "type": "prompt", "message": command}));
    let (answer, seen) = rpc.until(|r| r["type"] == "response" && r["id"] == id);
    assert_eq!(answer["data"]["disposition"], "handled", "{answer}");
    seen.iter()
        .filter(|r| r["type"] == "extension_ui_request" && r["method"] == "notify")
        .map(|r| r["message"].as_str().unwrap().to_string())
        .collect()
}

/// The roles of the messages in the context now.
fn roles(rpc: &mut Rpc) -> Vec<String> {
    rpc.send(json!({"id": "roles", "type": "get_messages"}));
    rpc.response("roles")["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("").to_string())
        .collect::<Vec<String>>()
}

fn prompt(rpc: &mut Rpc, id: &str, text: &str) {
    rpc.send(json!({"id": id, "type": "prompt", "message": text}));
    rpc.until(|r| r["type"] == "agent_settled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_before_tree_cancels_or_supplies_the_summary_and_session_tree_follows() {
    let s = Setup::new(json!([{"text": "Answer one."}, {"text": "Answer two."}])).await;
    let mut rpc = Rpc::start(&s, &["-e", &fixture("tree-events.ts")]);
    prompt(&mut rpc, "p1", "one");
    prompt(&mut rpc, "p2", "two");

    // A cancelling handler stops the navigation: the leaf stays, no session_tree.
    command_notices(&mut rpc, "m1", "/tree-mode cancel");
    let notices = command_notices(&mut rpc, "g1", "/goto-first-answer");
    assert_eq!(
        notices,
        [
            "session_before_tree target=assistant old=true common=true entries=user,assistant wants=false signal=true",
            "navigate cancelled=true leaf=false",
        ]
    );
    assert_eq!(
        roles(&mut rpc),
        ["system", "user", "assistant", "user", "assistant"]
    );

    // A supplied summary is recorded instead of asking the model, with the label.
    command_notices(&mut rpc, "m2", "/tree-mode summary");
    let notices = command_notices(&mut rpc, "g2", "/goto-first-answer summarize");
    assert_eq!(
        notices,
        [
            "session_before_tree target=assistant old=true common=true entries=user,assistant wants=true signal=true",
            "session_tree moved=true fromExtension=true summary=Extension summary leaf=true",
            "navigate cancelled=false leaf=false",
        ]
    );
    assert_eq!(s.requests().len(), 2, "no summary request was made");
    let entries = s.session_entries();
    let summary = entries
        .iter()
        .find(|e| e["type"] == "branch_summary")
        .expect("a branch_summary entry");
    assert_eq!(summary["summary"], "Extension summary");
    assert_eq!(summary["fromHook"], true);
    assert_eq!(summary["details"], json!({"by": "tree-events"}));
    let first_answer = entries
        .iter()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(summary["parentId"], first_answer["id"]);
    assert!(entries.iter().any(|e| e["type"] == "label"
        && e["targetId"] == summary["id"]
        && e["label"] == "ext-label"));
    // The context is now the first exchange and the summary.
    assert_eq!(
        roles(&mut rpc),
        ["system", "user", "assistant", "branchSummary"]
    );

    // Passing through: a plain navigation back to the first answer, session_tree without
    // a summary.
    command_notices(&mut rpc, "m4", "/tree-mode pass");
    let notices = command_notices(&mut rpc, "g3", "/goto-first-answer");
    assert_eq!(
        notices[1..],
        [
            "session_tree moved=true fromExtension=undefined summary=undefined leaf=true",
            "navigate cancelled=false leaf=true",
        ]
    );
    assert!(rpc.finish());
}
