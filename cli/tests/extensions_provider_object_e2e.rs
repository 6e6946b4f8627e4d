//! `pi.registerProvider(provider)` with provider objects from `@earendil-works/pi-ai/compat`
//! (fixtures/extensions/provider-object.ts) end to end, against the fake LLM on 127.0.0.1.
//!
//! Real Pi 1.6.0 with the same fixture (offline, its fake server): with
//! `{"local-server": {"type": "api_key", "key": …}}` in auth.json, `--list-models` listed
//! `local-server  local-model  32K  2.0K  no  no` (and `echo-object  echo-model  16K  1.0K`
//! with `$ECHO_OBJECT_KEY` set), `-p` on `local-server/local-model` reached
//! `/v1/chat/completions` with the `x-resolved-by: local-server` header `resolve` added, and
//! `echo-object/echo-model` answered `api=echo-api key=ek1 header=from-ek1`. Without a stored
//! key `local-server` was not listed and `-p` failed with `No API key found for
//! local-server.` (the same for `echo-object` without `$ECHO_OBJECT_KEY`). Real Pi's
//! `pi auth login` loads no extensions (`Unknown provider "local-server".`); ours runs the
//! provider's `auth.apiKey.login` as it runs extensions' OAuth logins.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

fn run(s: &Setup, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = s.command_without_model(args);
    command
        .env("LOCAL_SERVER_URL", s.fake_url())
        .env_remove("ECHO_OBJECT_KEY")
        .envs(envs.iter().copied());
    outcome(command)
}

fn store_key(s: &Setup, key: &str) {
    let path = s.agent.join("auth.json");
    std::fs::write(
        &path,
        json!({"local-server": {"type": "api_key", "key": key}}).to_string(),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn listed<'a>(out: &'a str, provider: &str) -> Vec<Vec<&'a str>> {
    out.lines()
        .filter(|l| l.starts_with(provider))
        .map(|l| l.split_whitespace().collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_key_is_resolved_and_sent() {
    let s = Setup::new(json!([{"text": "From the local server."}])).await;
    let ext = fixture("provider-object.ts");
    store_key(&s, "fake-access-token-local-1");

    let (code, out, err) = run(&s, &["-e", &ext, "--list-models", "local"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        listed(&out, "local-server"),
        [["local-server", "local-model", "32K", "2.0K", "no", "no"]],
        "{out}"
    );

    let (code, out, err) = run(
        &s,
        &[
            "-e",
            &ext,
            "--model",
            "local-server/local-model",
            "-p",
            "hi",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "From the local server.\n");
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].body["model"], "local-model");
    assert_eq!(
        requests[0].headers["authorization"],
        "Bearer fake-access-token-local-1"
    );
    assert_eq!(requests[0].headers["x-resolved-by"], "local-server");
    let answer = s
        .session_entries()
        .into_iter()
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(answer["message"]["provider"], "local-server");
    assert_eq!(answer["message"]["model"], "local-model");
    assert_eq!(answer["message"]["api"], "openai-completions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_credential_the_provider_is_not_configured() {
    let s = Setup::new(json!([{"text": "unused"}])).await;
    let ext = fixture("provider-object.ts");

    let (code, out, err) = run(&s, &["-e", &ext, "--list-models"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(listed(&out, "local-server").is_empty(), "{out}");
    assert!(listed(&out, "echo-object").is_empty(), "{out}");

    let (code, _, err) = run(
        &s,
        &[
            "-e",
            &ext,
            "--model",
            "local-server/local-model",
            "-p",
            "hi",
        ],
        &[],
    );
    assert_ne!(code, 0);
    assert!(err.contains("No API key found for local-server."), "{err}");
    assert!(s.fake.requests().is_empty());
}

/// `pi auth login local-server` runs the provider's `auth.apiKey.login(interaction)`: its
/// `secret` prompt is answered from stdin, and the credential it returns is stored as Pi
/// stores it, then used by the next prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_login_stores_an_api_key_credential() {
    let s = Setup::new(json!([{"text": "Logged-in answer."}])).await;
    let extensions = s.agent.join("extensions");
    std::fs::create_dir_all(&extensions).unwrap();
    std::fs::copy(
        fixture("provider-object.ts"),
        extensions.join("provider-object.ts"),
    )
    .unwrap();

    let mut login = std::process::Command::new(pi_bin());
    login
        .args(["auth", "login", "local-server"])
        .current_dir(&s.cwd)
        .env("PI_CODING_AGENT_DIR", &s.agent)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = login.spawn().unwrap();
    writeln!(child.stdin.take().unwrap(), "fake-access-token-typed").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("Logged in to Local server setup."),
        "{stdout}"
    );
    assert!(format!("{stdout}{stderr}").contains("API key"), "{stderr}");
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(s.agent.join("auth.json")).unwrap()).unwrap();
    assert_eq!(
        stored,
        json!({"local-server": {"type": "api_key", "key": "fake-access-token-typed"}})
    );

    let (code, out, err) = run(
        &s,
        &["--model", "local-server/local-model", "-p", "hi"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Logged-in answer.\n");
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].headers["authorization"],
        "Bearer fake-access-token-typed"
    );
}

/// A provider object with its own chat implementation (keyed by the model's api) streams
/// in the extension, handed the model with its own api and the auth `resolve` made from the
/// environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_own_implementation_gets_the_resolved_auth() {
    let s = Setup::new(json!([{"text": "unused"}])).await;
    let ext = fixture("provider-object.ts");
    let key = [("ECHO_OBJECT_KEY", "ek1")];

    let (code, out, err) = run(&s, &["-e", &ext, "--list-models", "echo"], &key);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        listed(&out, "echo-object"),
        [["echo-object", "echo-model", "16K", "1.0K", "no", "no"]],
        "{out}"
    );

    let (code, out, err) = run(
        &s,
        &["-e", &ext, "--model", "echo-object/echo-model", "-p", "hi"],
        &key,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "api=echo-api key=ek1 header=from-ek1\n");
    assert!(s.fake.requests().is_empty());

    let (code, _, err) = run(
        &s,
        &["-e", &ext, "--model", "echo-object/echo-model", "-p", "hi"],
        &[],
    );
    assert_ne!(code, 0);
    assert!(err.contains("No API key found for echo-object."), "{err}");
}

/// What a provider object cannot be registered with, or what this host does not use, is an
/// extension error naming the provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_parts_are_extension_errors() {
    let s = Setup::new(json!([{"text": "Still answering."}])).await;
    let ext = s.cwd.join("bad-provider.ts");
    std::fs::write(
        &ext,
        r#"import { createProvider, openAICompletionsApi } from "@earendil-works/pi-ai/compat";
export default function (pi: any) {
  pi.registerProvider({ id: "", auth: {} });
  const deferred: any = createProvider({ id: "deferred", models: [], api: openAICompletionsApi(),
    auth: { apiKey: { name: "f", resolve: async () => ({ auth: { apiKey: "k" } }) } } });
  deferred.fetchDeferred = () => undefined;
  pi.registerProvider(deferred);
}
"#,
    )
    .unwrap();
    let (code, out, err) = s.pi(&["-e", ext.to_str().unwrap(), "-p", "hi"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Still answering.\n");
    assert!(err.contains("Provider id must not be empty."), "{err}");
    assert!(
        err.contains("Provider deferred: fetchDeferred not supported"),
        "{err}"
    );
}

/// Over RPC: a prompt to the provider object's model is sent with the key `resolve` made,
/// and the background refresh with network runs createProvider's `fetchModels` with the
/// credential `resolve` made; its models join the session's catalog and are kept in
/// models-store.json, from which the next start restores them without network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_prompts_and_refreshes_use_the_providers_auth() {
    let s = Setup::new(json!([{"text": "Over RPC."}])).await;
    let ext = fixture("provider-object.ts");
    store_key(&s, "fake-access-token-rpc");
    let url = format!("http://127.0.0.1:{}/v1", s.fake.port());
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &ext],
        &[("LOCAL_SERVER_URL", &url), ("ECHO_OBJECT_KEY", "ek1")],
    );
    rpc.send(
        json!({"type": "set_model", "id": "m1", "provider": "local-server", "modelId": "local-model"}),
    );
    let set = rpc.response("m1");
    assert_eq!(set["success"], true, "{set}");
    rpc.send(json!({"type": "prompt", "id": "p1", "message": "hello"}));
    let (end, _) = rpc.until(|r| r["type"] == "agent_end");
    let last: &Value = end["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["provider"], "local-server");
    assert_eq!(last["content"][0]["text"], "Over RPC.");

    for asked in 1.. {
        let id = format!("c{asked}");
        rpc.send(json!({"type": "get_available_models", "id": id}));
        let ids: Vec<String> = rpc.response(&id)["data"]["models"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["provider"] == "echo-object")
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect();
        if ids == ["echo-model", "echo-fetched-ek1"] {
            break;
        }
        assert!(
            ids == ["echo-model"] && asked < 200,
            "{ids:?} after {asked} asks"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(rpc.finish());
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].headers["authorization"],
        "Bearer fake-access-token-rpc"
    );
    let store: Value =
        serde_json::from_str(&std::fs::read_to_string(s.agent.join("models-store.json")).unwrap())
            .unwrap();
    assert_eq!(
        store["echo-object"]["models"][0]["id"], "echo-fetched-ek1",
        "{store}"
    );

    // The next start restores the kept models before any network refresh.
    let (code, out, err) = run(
        &s,
        &["-e", &ext, "--list-models", "echo"],
        &[("ECHO_OBJECT_KEY", "ek1")],
    );
    assert_eq!(code, 0, "{err}");
    let ids: Vec<&str> = listed(&out, "echo-object").iter().map(|r| r[1]).collect();
    assert_eq!(ids, ["echo-fetched-ek1", "echo-model"], "{out}");
}

/// `checked` of fixtures/extensions/provider-object-hooks.ts: `auth.apiKey.check` (configured
/// with a stored key or `$CHECKED_OK`), a `resolve` that always makes a key, and
/// `filterModels` hiding `checked-hidden` unless the stored key is `show-all`.
fn run_hooks(s: &Setup, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let ext = fixture("provider-object-hooks.ts");
    let mut all = vec!["-e", ext.as_str()];
    all.extend_from_slice(args);
    let mut command = s.command_without_model(&all);
    command
        .env("LOCAL_SERVER_URL", s.fake_url())
        .env_remove("CHECKED_OK")
        .env_remove("CHECKED_MJ")
        .env_remove("CHECKED_REFRESH_AUTH")
        .envs(envs.iter().copied());
    outcome(command)
}

fn store_checked_key(s: &Setup, key: &str) {
    let path = s.agent.join("auth.json");
    std::fs::write(
        &path,
        json!({"checked": {"type": "api_key", "key": key}}).to_string(),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Real Pi 1.6.0, same fixture: without a stored key or `$CHECKED_OK`, `--list-models
/// checked` printed "No models available…" and `-p --model checked/checked-a` failed with
/// `No API key found for checked.` although `resolve` would have made a key; with
/// `$CHECKED_OK=1` it listed `checked-a` and `checked-b` (`filterModels` hid
/// `checked-hidden`), and `--model checked/checked-hidden` still answered, sent with the key
/// `resolve` made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn availability_follows_the_check_not_the_resolution() {
    let s = Setup::new(json!([{"text": "Checked answer."}])).await;

    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(listed(&out, "checked").is_empty(), "{out}");
    let (code, _, err) = run_hooks(&s, &["--model", "checked/checked-a", "-p", "hi"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("No API key found for checked."), "{err}");
    assert!(s.fake.requests().is_empty());

    let ok = [("CHECKED_OK", "1")];
    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &ok);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        listed(&out, "checked"),
        [
            ["checked", "checked-a", "32K", "2.0K", "no", "no"],
            ["checked", "checked-b", "32K", "2.0K", "no", "no"]
        ],
        "{out}"
    );
    let (code, out, err) = run_hooks(&s, &["--model", "checked/checked-hidden", "-p", "hi"], &ok);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Checked answer.\n");
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "checked-hidden");
    assert_eq!(
        requests[0].headers["authorization"],
        "Bearer fake-access-token-checked"
    );
}

/// `filterModels(models, credential)` is handed the stored credential. Real Pi 1.6.0: with
/// the stored key `show-all` `--list-models checked` listed all three models, with `k2` only
/// `checked-a` and `checked-b`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_models_sees_the_stored_credential() {
    let s = Setup::new(json!([{"text": "unused"}])).await;
    let ids = |out: &str| -> Vec<String> {
        listed(out, "checked")
            .iter()
            .map(|r| r[1].to_string())
            .collect()
    };

    store_checked_key(&s, "show-all");
    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        ids(&out),
        ["checked-a", "checked-b", "checked-hidden"],
        "{out}"
    );

    store_checked_key(&s, "k2");
    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(ids(&out), ["checked-a", "checked-b"], "{out}");
}

/// models.json's `modelOverrides` for a provider object's id apply above its models, and
/// its `apiKey` above the object's `check`. Real Pi 1.6.0 with the overrides below printed
/// `checked-a 64K 4.1K yes no` and `checked-b 32K 2.0K no no`; with `"apiKey":
/// "$CHECKED_MJ"` it listed nothing while `$CHECKED_MJ` was unset, and with it set
/// `checked-a 32K` and `checked-b 8K`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_json_overrides_apply_above_the_objects_models() {
    let s = Setup::new(json!([{"text": "unused"}])).await;
    let path = s.agent.join("models.json");
    let base: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let write = |checked: Value| {
        let mut config = base.clone();
        config["providers"]["checked"] = checked;
        std::fs::write(&path, config.to_string()).unwrap();
    };

    write(json!({"modelOverrides": {
        "checked-a": {"contextWindow": 64000, "maxTokens": 4096, "reasoning": true},
        "checked-hidden": {"contextWindow": 1000}
    }}));
    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &[("CHECKED_OK", "1")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        listed(&out, "checked"),
        [
            ["checked", "checked-a", "64K", "4.1K", "yes", "no"],
            ["checked", "checked-b", "32K", "2.0K", "no", "no"]
        ],
        "{out}"
    );

    write(
        json!({"apiKey": "$CHECKED_MJ", "modelOverrides": {"checked-b": {"contextWindow": 8000}}}),
    );
    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(listed(&out, "checked").is_empty(), "{out}");
    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &[("CHECKED_MJ", "x")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        listed(&out, "checked"),
        [
            ["checked", "checked-a", "32K", "2.0K", "no", "no"],
            ["checked", "checked-b", "8K", "2.0K", "no", "no"]
        ],
        "{out}"
    );
    // Without a stored credential models.json's key decides alone: the object's `check`
    // would say configured (`$CHECKED_OK`), but `$CHECKED_MJ` is unset. Real Pi 1.6.0:
    // `No models matching "checked"`.
    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &[("CHECKED_OK", "1")]);
    assert_eq!(code, 0, "{err}");
    assert!(listed(&out, "checked").is_empty(), "{out}");
}

/// models.json's block for a provider object's id is a layer above the object: its
/// `baseUrl` and `compat` reach the object's models, its `models` replace or join them, and
/// its `modelOverrides` apply to those too. Real Pi 1.6.0 with this block and the object
/// pointed at a closed port listed `checked-a 32K 2.0K`, `checked-b 9K 1K`, `checked-extra 16K
/// 3K`, and answered prompts to `checked-a` and `checked-extra` from the block's `baseUrl`,
/// sending `max_tokens` (2048, 3000).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_json_routes_and_extends_the_objects_models() {
    let s = Setup::new(json!([{"text": "From a."}, {"text": "From extra."}])).await;
    let path = s.agent.join("models.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["providers"]["checked"] = json!({
        "baseUrl": format!("http://127.0.0.1:{}/v1", s.fake.port()),
        "compat": {"maxTokensField": "max_tokens"},
        "models": [{"id": "checked-extra", "contextWindow": 16000},
                   {"id": "checked-b", "contextWindow": 9000, "maxTokens": 1000}],
        "modelOverrides": {"checked-extra": {"maxTokens": 3000}}
    });
    std::fs::write(&path, config.to_string()).unwrap();
    let env = [
        ("CHECKED_OK", "1"),
        ("LOCAL_SERVER_URL", "http://127.0.0.1:9/v1"),
    ];

    let (code, out, err) = run_hooks(&s, &["--list-models", "checked"], &env);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        listed(&out, "checked"),
        [
            ["checked", "checked-a", "32K", "2.0K", "no", "no"],
            ["checked", "checked-b", "9K", "1K", "no", "no"],
            ["checked", "checked-extra", "16K", "3K", "no", "no"]
        ],
        "{out}"
    );
    for (model, answer) in [("checked-a", "From a."), ("checked-extra", "From extra.")] {
        let target = format!("checked/{model}");
        let (code, out, err) = run_hooks(&s, &["--model", &target, "-p", "hi"], &env);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, format!("{answer}\n"));
    }
    let requests = s.fake.requests();
    let sent: Vec<(&str, &Value, bool)> = requests
        .iter()
        .map(|r| {
            (
                r.body["model"].as_str().unwrap(),
                &r.body["max_tokens"],
                r.body.get("max_completion_tokens").is_some(),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [
            ("checked-a", &json!(2048), false),
            ("checked-extra", &json!(3000), false)
        ]
    );
    assert!(requests
        .iter()
        .all(|r| r.headers["authorization"] == "Bearer fake-access-token-checked"));
}

/// `refreshModelsAuth`: by default the network refresh gets the credential `resolve` makes;
/// with "configured" it runs when `check` says the provider is configured, with no
/// credential. Real Pi 1.6.0 over RPC (network allowed, `$CHECKED_OK=1`, nothing stored):
/// `get_available_models` came to `checked-a`, `checked-b`, `checked-fetched-fake-access-token-checked`,
/// and with `$CHECKED_REFRESH_AUTH=configured` to `…`, `checked-fetched-none`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_models_auth_decides_the_network_credential() {
    for (mode, fetched) in [
        ("", "checked-fetched-fake-access-token-checked"),
        ("configured", "checked-fetched-none"),
    ] {
        let s = Setup::new(json!([{"text": "unused"}])).await;
        let ext = fixture("provider-object-hooks.ts");
        let url = format!("http://127.0.0.1:{}/v1", s.fake.port());
        let mut env = vec![("LOCAL_SERVER_URL", url.as_str()), ("CHECKED_OK", "1")];
        if !mode.is_empty() {
            env.push(("CHECKED_REFRESH_AUTH", mode));
        }
        let mut rpc = Rpc::start_with_env(&s, &["-e", &ext], &env);
        rpc.wait_for_models("checked", &["checked-a", "checked-b", fetched], None);
        assert!(rpc.finish());
        let store: Value = serde_json::from_str(
            &std::fs::read_to_string(s.agent.join("models-store.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(store["checked"]["models"][0]["id"], fetched, "{store}");
        assert!(s.fake.requests().is_empty());
    }
}
