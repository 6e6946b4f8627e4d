//! `pi.registerProvider(name, config)` end to end (fixtures/extensions/local-provider.ts):
//! a provider registered at load is listed, selected with `--model` and answers through
//! its `baseUrl` with its `apiKey`; one registered later by a command is selected over RPC
//! (`set_model`, what `/model` does) and answers too. Needs `node` (>= 20) on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

fn run(s: &Setup, args: &[&str]) -> (i32, String, String) {
    let mut command = s.command_without_model(args);
    command
        .env("LOCAL_PROXY_URL", s.fake_url())
        .env("LOCAL_PROXY_KEY", "proxy-secret");
    outcome(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_provider_is_listed_selected_and_answers() {
    let s = Setup::new(json!([{"text": "From the proxy."}])).await;
    let ext = fixture("local-provider.ts");

    let (code, out, err) = run(&s, &["-e", &ext, "--list-models", "proxy"]);
    assert_eq!(code, 0, "{err}");
    let row: Vec<&str> = out
        .lines()
        .find(|l| l.starts_with("local-proxy"))
        .expect("the provider's model is listed")
        .split_whitespace()
        .collect();
    assert_eq!(
        row,
        ["local-proxy", "proxy-small", "32K", "1.0K", "no", "no"]
    );

    let (code, out, err) = run(
        &s,
        &["-e", &ext, "--model", "local-proxy/proxy-small", "-p", "hi"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "From the proxy.\n");
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "proxy-small");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    let answer = s
        .session_entries()
        .into_iter()
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(answer["message"]["provider"], "local-proxy");
    assert_eq!(answer["message"]["model"], "proxy-small");

    // Without the extension the model does not exist.
    let (code, _, err) = run(&s, &["--model", "local-proxy/proxy-small", "-p", "hi"]);
    assert_ne!(code, 0);
    assert!(err.contains("proxy-small"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_registered_by_a_command_can_be_selected() {
    let s = Setup::new(json!([{"text": "Late answer."}])).await;
    let ext = fixture("local-provider.ts");
    let url = s.fake_url();
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &ext],
        &[
            ("LOCAL_PROXY_URL", &url),
            ("LOCAL_PROXY_KEY", "proxy-secret"),
        ],
    );
    rpc.send(
        json!({"type": "set_model", "id": "m0", "provider": "late-proxy", "modelId": "late-model"}),
    );
    let refused = rpc.response("m0");
    assert_eq!(refused["success"], false, "{refused}");

    rpc.send(json!({"type": "prompt", "id": "p1", "message": "/add-late"}));
    rpc.until(|r| r["type"] == "extension_ui_request" && r["message"] == "late-proxy registered");
    rpc.send(
        json!({"type": "set_model", "id": "m1", "provider": "late-proxy", "modelId": "late-model"}),
    );
    let set = rpc.response("m1");
    assert_eq!(set["success"], true, "{set}");
    assert_eq!(set["data"]["id"], "late-model");
    assert_eq!(set["data"]["contextWindow"], 16000);

    rpc.send(json!({"type": "prompt", "id": "p2", "message": "hello"}));
    let (end, _) = rpc.until(|r| r["type"] == "agent_end");
    let last: &Value = end["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["provider"], "late-proxy");
    assert_eq!(last["model"], "late-model");
    assert!(rpc.finish());
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "late-model");
}

/// `registerProvider`'s `refreshModels` (fixtures/extensions/refresh-models.ts): Pi's
/// refresh after the extensions load runs it without network and with the stored
/// credential, and its list replaces the provider's models before the model is chosen
/// (`--list-models`, `--model`); RPC's background refresh runs it again with network, and
/// the new list reaches the session's catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_models_replaces_the_providers_models() {
    let s = Setup::new(json!([{"text": "From the live catalog."}, {"text": "Online."}])).await;
    let ext = fixture("refresh-models.ts");

    let (code, out, err) = run(&s, &["-e", &ext, "--list-models", "live"]);
    assert_eq!(code, 0, "{err}");
    let ids: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("live-cat"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(ids, ["live-offline-anon"], "{out}");

    // Pi's network phase resolves the provider's credential first: with nothing stored, the
    // configured `apiKey` ($LOCAL_PROXY_KEY) as an API key.
    let url = s.fake_url();
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &ext],
        &[
            ("LOCAL_PROXY_URL", &url),
            ("LOCAL_PROXY_KEY", "proxy-secret"),
        ],
    );
    rpc.wait_for_models(
        "live-cat",
        &["live-online-api_key"],
        Some(&["live-offline-anon"]),
    );
    assert!(rpc.finish());

    // The stored credential reaches the refresh.
    std::fs::write(
        s.agent.join("auth.json"),
        json!({"live-cat": {"type": "api_key", "key": "stored-live-key"}}).to_string(),
    )
    .unwrap();
    let (code, out, err) = run(
        &s,
        &[
            "-e",
            &ext,
            "--model",
            "live-cat/live-offline-api_key",
            "-p",
            "hi",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "From the live catalog.\n");
    assert_eq!(s.fake.requests()[0].body["model"], "live-offline-api_key");

    // RPC refreshes again with network in the background.
    let url = s.fake_url();
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &ext],
        &[
            ("LOCAL_PROXY_URL", &url),
            ("LOCAL_PROXY_KEY", "proxy-secret"),
        ],
    );
    rpc.wait_for_models(
        "live-cat",
        &["live-online-api_key"],
        Some(&["live-offline-api_key"]),
    );
    rpc.send(json!({"type": "set_model", "id": "m1", "provider": "live-cat", "modelId": "live-online-api_key"}));
    assert_eq!(rpc.response("m1")["success"], true);
    rpc.send(json!({"type": "prompt", "id": "p1", "message": "hello"}));
    rpc.until(|r| r["type"] == "agent_end");
    assert!(rpc.finish());
    assert_eq!(s.fake.requests()[1].body["model"], "live-online-api_key");
}

/// `refreshModels` with Pi's models store (fixtures/extensions/persisted-models.ts): what a
/// refresh publishes with `persist` is kept in models-store.json under the provider, the
/// next start-up's refresh (without network) gets it as `context.stored` and restores the
/// list from it, and `persist: null` deletes the entry. Real Pi 1.6.0 with the same
/// extension listed `snap-static`, then (RPC, network refresh) `snap-fetched-1` and wrote
/// `{"snap": {"models": [...], "fetches": 1, "checkedAt": ...}}`; the next
/// `--list-models snap` listed `snap-fetched-1`; with `SNAP_FORGET` the file became `{}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_models_keeps_what_it_persists_for_the_next_start() {
    let s = Setup::new(json!([])).await;
    let ext = fixture("persisted-models.ts");
    let listed = |s: &Setup| -> Vec<String> {
        let (code, out, err) = run(s, &["-e", &ext, "--list-models", "snap"]);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .filter(|l| l.starts_with("snap "))
            .filter_map(|l| l.split_whitespace().nth(1))
            .map(str::to_string)
            .collect()
    };
    let store = |s: &Setup| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(s.agent.join("models-store.json")).unwrap_or_default(),
        )
        .unwrap_or(Value::Null)
    };
    // An RPC session's background refresh (with network) until `wanted` is listed.
    let refresh_until = |s: &Setup, wanted: &str, forget: bool| {
        let url = s.fake_url();
        let mut env = vec![("LOCAL_PROXY_URL", url.as_str()), ("LOCAL_PROXY_KEY", "k")];
        if forget {
            env.push(("SNAP_FORGET", "1"));
        }
        let mut rpc = Rpc::start_with_env(s, &["-e", &ext], &env);
        rpc.wait_for_models("snap", &[wanted], None);
        assert!(rpc.finish());
    };

    assert_eq!(listed(&s), ["snap-static"]);
    refresh_until(&s, "snap-fetched-1", false);
    let kept = store(&s);
    assert_eq!(kept["snap"]["fetches"], 1, "{kept}");
    assert_eq!(kept["snap"]["models"][0]["id"], "snap-fetched-1", "{kept}");
    // The next start-up restores the kept list before any network refresh.
    assert_eq!(listed(&s), ["snap-fetched-1"]);
    // The next network refresh sees the entry too.
    refresh_until(&s, "snap-fetched-2", false);
    assert_eq!(store(&s)["snap"]["fetches"], 2);

    refresh_until(&s, "snap-forgotten", true);
    assert_eq!(store(&s), json!({}));
    assert_eq!(listed(&s), ["snap-static"]);
}

/// Pi refreshes the catalogs (without network) whenever a provider is registered: one
/// registered by a command (refresh-models.ts's `/add-live`) gets its `refreshModels` run
/// at once, and its list replaces the registered one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_registered_later_is_refreshed() {
    let s = Setup::new(json!([])).await;
    let ext = fixture("refresh-models.ts");
    let url = s.fake_url();
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &ext],
        &[("LOCAL_PROXY_URL", &url), ("LOCAL_PROXY_KEY", "k")],
    );
    rpc.send(json!({"type": "prompt", "id": "p1", "message": "/add-live"}));
    rpc.until(|r| r["type"] == "extension_ui_request" && r["message"] == "live-late registered");
    rpc.wait_for_models("live-late", &["late-offline-anon"], None);
    assert!(rpc.finish());
}
