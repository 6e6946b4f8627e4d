#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Virtual models (`pi.registerVirtualModel`, Pi's virtual-models.md) end to end: our `pi`
//! with fixtures/extensions/virtual-router.ts against the fake LLM on 127.0.0.1. The router
//! logs every request it sees, so the tests check what Pi documents a router is told
//! (reason, selection, previous, failed, state) and what the session records (the
//! selection in `model_change`, the physical model on each response, router state in
//! `pi.virtual-model-state` entries).

mod extensions_common;

use extensions_common::{fixture, outcome, tc, Setup};
use serde_json::{json, Value};

struct Routed {
    setup: Setup,
    log: std::path::PathBuf,
}

impl Routed {
    async fn new(turns: Value) -> Routed {
        let setup = Setup::new(turns).await;
        // Retries after a transient error come quickly.
        std::fs::write(
            setup.agent.join("settings.json"),
            json!({"retry": {"baseDelayMs": 1}}).to_string(),
        )
        .unwrap();
        let log = setup.agent.join("routes.jsonl");
        Routed { setup, log }
    }

    fn pi(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let mut c = self.setup.command_without_model(args);
        c.env("ROUTE_LOG", &self.log).envs(env.iter().copied());
        outcome(c)
    }

    fn routes(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn requested_models(&self) -> Vec<String> {
        self.setup
            .requests()
            .iter()
            .map(|r| r["model"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

fn states(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "custom" && e["customType"] == "pi.virtual-model-state")
        .map(|e| &e["data"])
        .collect()
}

fn assistants(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .map(|e| &e["message"])
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_virtual_model_routes_each_request_and_keeps_its_state_on_the_branch() {
    let r = Routed::new(json!([
        {"text": "Listing.", "tool_calls": [tc("ls", json!({}))]},
        {"text": "Done."},
        {"text": "Again."},
    ]))
    .await;
    let ext = fixture("virtual-router.ts");
    let (code, stdout, stderr) = r.pi(
        &[
            "-e",
            &ext,
            "--model",
            "router/auto:high",
            "-p",
            "list the files",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Done.\n");
    // A user request is routed by the selected level; the follow-up after the tool result
    // stays on the model that handled the turn.
    assert_eq!(r.requested_models(), ["fake-model", "fake-model"]);
    let routes = r.routes();
    assert_eq!(routes.len(), 2, "{routes:#?}");
    assert_eq!(routes[0]["reason"], "user");
    assert_eq!(routes[0]["selected"], "router/auto:high");
    assert_eq!(routes[0]["state"], Value::Null);
    assert_eq!(routes[0]["previous"], Value::Null);
    assert_eq!(routes[0]["roles"], json!(["system", "user"]));
    assert_eq!(routes[1]["reason"], "continuation");
    assert_eq!(routes[1]["previous"], "fakeoai/fake-model");
    assert_eq!(routes[1]["state"], json!({"routed": 1}));
    assert_eq!(
        routes[1]["roles"],
        json!(["system", "user", "assistant", "toolResult"])
    );

    let entries = r.setup.session_entries();
    // The selection is the virtual model; each response names the physical one and the
    // level the router chose.
    let change = entries
        .iter()
        .find(|e| e["type"] == "model_change")
        .unwrap();
    assert_eq!(
        (&change["provider"], &change["modelId"]),
        (&json!("router"), &json!("auto"))
    );
    for m in assistants(&entries) {
        assert_eq!(m["provider"], "fakeoai");
        assert_eq!(m["model"], "fake-model");
        assert_eq!(m["api"], "openai-completions");
        assert_eq!(m["thinkingLevel"], "medium");
    }
    // New state was stored once, before the request it was returned for; returning the
    // previous model without state keeps it.
    assert_eq!(
        states(&entries),
        [&json!({"provider": "router", "modelId": "auto", "state": {"routed": 1}})]
    );
    let state_at = entries
        .iter()
        .position(|e| e["customType"] == "pi.virtual-model-state")
        .unwrap();
    let first_response = entries
        .iter()
        .position(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .unwrap();
    assert!(state_at < first_response);

    // Resuming restores the virtual selection (not the physical model that answered last)
    // and hands the router the state stored on the branch.
    let (code, stdout, stderr) = r.pi(&["-e", &ext, "-c", "-p", "again"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Again.\n");
    let routes = r.routes();
    assert_eq!(routes.len(), 3);
    assert_eq!(routes[2]["reason"], "user");
    assert_eq!(routes[2]["selected"], "router/auto:high");
    assert_eq!(routes[2]["state"], json!({"routed": 1}));
    assert_eq!(routes[2]["previous"], "fakeoai/fake-model");
    let entries = r.setup.session_entries();
    assert_eq!(states(&entries).len(), 2);
    assert_eq!(states(&entries)[1]["state"], json!({"routed": 2}));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_is_routed_with_the_failed_response() {
    let r = Routed::new(json!([
        {"http_error": {"status": 503, "body": {"error": {"message": "fake overloaded"}}}},
        {"text": "Recovered."},
    ]))
    .await;
    let ext = fixture("virtual-router.ts");
    let (code, stdout, stderr) = r.pi(
        &["-e", &ext, "--model", "router/auto:low", "-p", "hello"],
        &[],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Recovered.\n");
    assert_eq!(r.requested_models(), ["fake-model-2", "fake-model-2"]);
    let routes = r.routes();
    assert_eq!(routes.len(), 2, "{routes:#?}");
    assert_eq!(routes[0]["reason"], "user");
    assert_eq!(routes[1]["reason"], "retry");
    assert!(
        routes[1]["failed"]
            .as_str()
            .unwrap()
            .contains("fake overloaded"),
        "{routes:#?}"
    );
    // The failed attempt is hidden from the model: the retry sees no assistant message.
    assert_eq!(routes[1]["roles"], json!(["system", "user"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_router_that_fails_ends_the_request_with_an_error_and_sends_nothing() {
    let r = Routed::new(json!([{"text": "never"}])).await;
    let ext = fixture("virtual-router.ts");
    let (code, stdout, stderr) = r.pi(
        &["-e", &ext, "--model", "router/auto", "-p", "hello"],
        &[("ROUTE_THROW", "1")],
    );
    assert_ne!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("the router is down"), "{stderr}");
    assert!(r.setup.requests().is_empty());
    let entries = r.setup.session_entries();
    let failed = assistants(&entries);
    assert_eq!(failed.len(), 1);
    // No physical model answered: the error response names the virtual model.
    assert_eq!(failed[0]["provider"], "router");
    assert_eq!(failed[0]["model"], "auto");
    assert_eq!(failed[0]["api"], "pi-virtual");
    assert_eq!(failed[0]["stopReason"], "error");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_its_extension_a_session_falls_back_to_the_model_that_answered_last() {
    let r = Routed::new(json!([{"text": "Routed."}, {"text": "Direct."}])).await;
    let ext = fixture("virtual-router.ts");
    let (code, stdout, stderr) = r.pi(
        &["-e", &ext, "--model", "router/auto:low", "-p", "hello"],
        &[],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = r.pi(&["-c", "-p", "again"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Direct.\n");
    assert_eq!(r.requested_models(), ["fake-model-2", "fake-model-2"]);
    assert_eq!(r.routes().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compaction_summary_is_a_direct_request_routed_without_state() {
    let big = "lorem ipsum dolor sit amet ".repeat(40);
    let turns: Vec<Value> = (0..3)
        .map(|i| json!({"text": format!("Reply {i}: {big}")}))
        .collect();
    let r = Routed::new(Value::Array(turns)).await;
    std::fs::write(
        r.setup.agent.join("settings.json"),
        json!({"compaction": {"keepRecentTokens": 60}}).to_string(),
    )
    .unwrap();
    let ext = fixture("virtual-router.ts");
    let mut rpc = extensions_common::Rpc::start_with_env(
        &r.setup,
        &["-e", &ext],
        &[("ROUTE_LOG", r.log.to_str().unwrap())],
    );
    // RPC's set_model takes the virtual model like any other.
    rpc.send(json!({"id": "m", "type": "set_model", "provider": "router", "modelId": "auto"}));
    let set = rpc.response("m");
    assert_eq!(set["success"], true, "{set}");
    assert_eq!(set["data"]["api"], "pi-virtual");
    for (i, text) in ["one", "two", "three"].iter().enumerate() {
        rpc.send(json!({"id": format!("p{i}"), "type": "prompt", "message": text}));
        rpc.until(|r| r["type"] == "agent_settled");
    }
    rpc.send(json!({"id": "c", "type": "compact"}));
    let done = rpc.response("c");
    assert_eq!(
        done["success"],
        true,
        "{done}\nroutes: {:#?}\nentries: {:#?}",
        r.routes(),
        r.setup.session_entries()
    );
    assert!(rpc.finish());

    let routes = r.routes();
    assert_eq!(routes.len(), 4, "{routes:#?}");
    let direct = &routes[3];
    assert_eq!(direct["reason"], "direct");
    // State exists on the branch, but a direct request gets none.
    assert_eq!(routes[2]["state"], json!({"routed": 2}));
    assert_eq!(direct["state"], Value::Null);
    // The router sends a direct request like a user one: by the selected level (medium,
    // clamped to the router's next level, high). One route serves the whole compaction
    // (its summary and, when the cut splits a turn, the turn prefix's).
    let models = r.requested_models();
    assert!(models.len() >= 4, "{models:?}");
    assert!(models.iter().all(|m| m == "fake-model"), "{models:?}");
    let entries = r.setup.session_entries();
    assert_eq!(
        entries.iter().filter(|e| e["type"] == "compaction").count(),
        1
    );
    // Only the user requests stored state.
    assert_eq!(states(&entries).len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn list_models_loads_extensions_and_lists_their_virtual_models() {
    let r = Routed::new(json!([])).await;
    let ext = fixture("virtual-router.ts");
    let (code, stdout, stderr) = r.pi(&["-e", &ext, "--list-models"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let rows: Vec<&str> = stdout.lines().collect();
    // The router's own provider needs no credentials; the physical models stay listed.
    assert!(
        rows.iter()
            .any(|l| l.split_whitespace().take(2).eq(["router", "auto"])),
        "{stdout}"
    );
    assert!(rows.iter().any(|l| l.contains("fake-model")), "{stdout}");
    // A search narrows to it; without the extension it is gone.
    let (_, found, _) = r.pi(&["-e", &ext, "--list-models", "auto"], &[]);
    assert!(found.contains("router"), "{found}");
    let (code, without, stderr) = r.pi(&["--list-models"], &[]);
    assert_eq!(code, 0, "{without}{stderr}");
    assert!(!without.contains("router"), "{without}");
    assert!(r.setup.requests().is_empty());
}
