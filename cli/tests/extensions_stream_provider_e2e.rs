//! `pi.registerProvider(name, {api, streamSimple})` end to end with Pi's own example,
//! fixtures/extensions/custom-provider-anthropic (Pi 1.6.0's `custom-provider-anthropic`,
//! its `baseUrl` read from `CUSTOM_ANTHROPIC_BASE_URL`), and its npm dependency, the real
//! `@anthropic-ai/sdk` 0.52.0 from the registry tarball kept next to it. The extension's
//! stream function runs in the sidecar and talks to the fake LLM's Anthropic endpoint; its
//! events come back to the agent loop. Needs `node` (>= 20) and `tar` on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

/// A copy of the example with its dependency unpacked into `node_modules`, as `npm install`
/// would leave it.
fn installed_example(setup: &Setup) -> PathBuf {
    let source = Path::new(&fixture("custom-provider-anthropic")).to_path_buf();
    let dir = setup
        .agent
        .parent()
        .unwrap()
        .join("custom-provider-anthropic");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["index.ts", "package.json", "package-lock.json"] {
        std::fs::copy(source.join(name), dir.join(name)).unwrap();
    }
    let sdk = dir.join("node_modules/@anthropic-ai/sdk");
    std::fs::create_dir_all(&sdk).unwrap();
    let status = Command::new("tar")
        .arg("xzf")
        .arg(source.join("anthropic-ai-sdk-0.52.0.tgz"))
        .arg("--strip-components=1")
        .arg("-C")
        .arg(&sdk)
        .status()
        .expect("run tar");
    assert!(status.success());
    dir
}

fn command(setup: &Setup, args: &[&str]) -> Command {
    let mut c = setup.command_without_model(args);
    c.env(
        "CUSTOM_ANTHROPIC_BASE_URL",
        format!("http://127.0.0.1:{}", setup.fake.port()),
    )
    .env("CUSTOM_ANTHROPIC_API_KEY", "sk-ant-test-key");
    c
}

/// The tool results of an Anthropic request body, as `(tool_use_id, text)`.
fn anthropic_tool_results(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (b["tool_use_id"].as_str().unwrap_or("").to_string(), text)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pis_custom_anthropic_example_answers_with_a_tool_round_trip() {
    let s = Setup::new(json!([
        {"tool_calls": [tc("read", json!({"path": "notes.txt"}))],
         "usage": {"prompt_tokens": 1000, "completion_tokens": 20}},
        {"text": "The notes say hello.", "usage": {"prompt_tokens": 1100, "completion_tokens": 6}}
    ]))
    .await;
    std::fs::write(s.cwd.join("notes.txt"), "hello from the notes file\n").unwrap();
    let ext = installed_example(&s);
    let ext = ext.display().to_string();

    let out = command(
        &s,
        &[
            "-e",
            &ext,
            "--model",
            "custom-anthropic/claude-sonnet-4-5",
            "-p",
            "What do the notes say?",
        ],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout, "The notes say hello.\n", "{stderr}");

    // The requests are the example's, made by the Anthropic SDK in the sidecar.
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 2, "{stderr}");
    for r in &requests {
        assert_eq!(r.api, "anthropic");
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.body["model"], "claude-sonnet-4-5");
        assert_eq!(r.body["stream"], true);
        // No maxTokens in the options: the example's own default, a third of the model's.
        assert_eq!(r.body["max_tokens"], 64000 / 3);
        // The session's default level (medium) reaches the example as `options.reasoning`.
        assert_eq!(
            r.body["thinking"],
            json!({"type": "enabled", "budget_tokens": 10240})
        );
        assert_eq!(
            r.headers["anthropic-beta"],
            "fine-grained-tool-streaming-2025-05-14,interleaved-thinking-2025-05-14"
        );
        let system = r.body["system"][0]["text"].as_str().unwrap();
        assert!(system.contains("read"), "Pi's system prompt: {system}");
        let tools: Vec<&str> = r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(tools.contains(&"read"), "{tools:?}");
    }
    let first_user = &requests[0].body["messages"][0];
    assert_eq!(first_user["role"], "user");
    assert_eq!(first_user["content"][0]["text"], "What do the notes say?");
    let results = anthropic_tool_results(&requests[1].body);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].1.contains("hello from the notes file"),
        "{results:?}"
    );

    // The session records the provider's responses as any other: its api, the tool call
    // the SDK streamed, the usage priced with the example's costs.
    let entries = s.session_entries();
    let assistants: Vec<&Value> = entries
        .iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .map(|e| &e["message"])
        .collect();
    assert_eq!(assistants.len(), 2);
    for a in &assistants {
        assert_eq!(a["api"], "custom-anthropic-api");
        assert_eq!(a["provider"], "custom-anthropic");
        assert_eq!(a["model"], "claude-sonnet-4-5");
    }
    assert_eq!(assistants[0]["stopReason"], "toolUse");
    let call = &assistants[0]["content"][0];
    assert_eq!(call["type"], "toolCall");
    assert_eq!(call["name"], "read");
    assert_eq!(call["arguments"], json!({"path": "notes.txt"}));
    assert_eq!(results[0].0, call["id"].as_str().unwrap());
    // The example reads the input tokens again from `message_delta`, where the fake (as
    // real Pi shows on the same script) reports none: 0 input, 20 output at $15/M.
    assert_eq!(assistants[0]["usage"]["input"], 0);
    assert_eq!(assistants[0]["usage"]["output"], 20);
    let cost = assistants[0]["usage"]["cost"]["total"].as_f64().unwrap();
    assert!((cost - 20.0 * 15.0 / 1e6).abs() < 1e-12, "{cost}");
    assert_eq!(assistants[0]["usage"]["cost"]["totalFromProvider"], false);
    assert_eq!(assistants[1]["stopReason"], "stop");
    assert_eq!(assistants[1]["content"][0]["text"], "The notes say hello.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_reaches_the_extensions_stream_and_the_next_prompt_answers() {
    let s = Setup::new(json!([
        {"text": "Too late.", "delay": 30.0},
        {"text": "Second answer."}
    ]))
    .await;
    let ext = installed_example(&s).display().to_string();
    let url = format!("http://127.0.0.1:{}", s.fake.port());
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &ext],
        &[
            ("CUSTOM_ANTHROPIC_BASE_URL", &url),
            ("CUSTOM_ANTHROPIC_API_KEY", "sk-ant-test-key"),
        ],
    );
    rpc.send(
        json!({"type": "set_model", "id": "m1", "provider": "custom-anthropic",
                    "modelId": "claude-sonnet-4-5"}),
    );
    assert_eq!(rpc.response("m1")["success"], true);
    rpc.send(json!({"type": "prompt", "id": "p1", "message": "first"}));
    // Abort once the SDK's request is at the server (the example pushes `start` before
    // the request goes out), so the abort has a request in flight to cancel.
    while s.fake.requests().is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    rpc.send(json!({"type": "abort", "id": "a1"}));
    let (end, _) = rpc.until(|r| r["type"] == "agent_end");
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["stopReason"], "aborted", "{last}");
    // Idle again once settled: the next prompt starts a run of its own.
    rpc.until(|r| r["type"] == "agent_settled");

    rpc.send(json!({"type": "prompt", "id": "p2", "message": "second"}));
    let (end, _) = rpc.until(|r| r["type"] == "agent_end");
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"][0]["text"], "Second answer.", "{last}");
    assert!(rpc.finish());
    assert_eq!(s.fake.requests().len(), 2);
}

/// A provider whose `streamSimple` delegates to Pi's built-in `anthropicMessagesApi()`, as
/// Pi's gitlab-duo example does: the host's own Anthropic provider makes the request with
/// the key and headers the extension chose, and the events reach the agent through the
/// extension's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_can_delegate_to_a_builtin_api() {
    let s = Setup::new(json!([
        {"tool_calls": [tc("read", json!({"path": "notes.txt"}))]},
        {"text": "Relayed answer."}
    ]))
    .await;
    std::fs::write(s.cwd.join("notes.txt"), "relayed notes\n").unwrap();
    let ext = fixture("relay-provider.ts");
    let out = s
        .command_without_model(&["-e", &ext, "--model", "relay/relay-model", "-p", "go"])
        .env(
            "RELAY_UPSTREAM_URL",
            format!("http://127.0.0.1:{}", s.fake.port()),
        )
        .env("RELAY_KEY", "relay-secret")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Relayed answer.\n");
    let requests = s.fake.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.api, "anthropic");
        assert_eq!(r.body["model"], "relay-model");
        assert_eq!(r.headers["x-relay"], "relay-provider");
        assert!(r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "read"));
    }
    let results = anthropic_tool_results(&requests[1].body);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("relayed notes"), "{results:?}");
    let entries = s.session_entries();
    let last = entries
        .iter()
        .rev()
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(last["message"]["provider"], "relay");
    assert_eq!(last["message"]["model"], "relay-model");
}

/// Pi's gitlab-duo example (a `streamSimple` provider over Pi's built-in APIs) loads and
/// lists its models; answering needs gitlab.com's token exchange, so it is not run here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pis_gitlab_duo_example_loads_and_lists_its_models() {
    let s = Setup::new(json!([])).await;
    let ext = fixture("custom-provider-gitlab-duo");
    let out = s
        .command_without_model(&["-e", &ext, "--list-models", "gitlab-duo"])
        .env("GITLAB_TOKEN", "glpat-test")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("Extension error"), "{stderr}");
    let ids: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("gitlab-duo"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(ids.len(), 9, "{stdout}");
    assert!(ids.contains(&"claude-sonnet-4-6"), "{stdout}");
    assert!(ids.contains(&"gpt-5-codex"), "{stdout}");
}

/// Pi's custom-compaction.ts example, unchanged: its `session_before_compact` handler
/// serializes the conversation with `convertToLlm` / `serializeConversation` and asks
/// `google/gemini-2.5-flash` through `ctx.modelRegistry.complete` (the key from
/// models.json, the fake LLM's Google endpoint); the answer becomes the compaction summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pis_custom_compaction_example_summarizes_through_the_model_registry() {
    let s = Setup::new(json!([
        {"text": "First answer."},
        {"text": "Custom summary text."}
    ]))
    .await;
    let models = std::fs::read_to_string(s.agent.join("models.json")).unwrap();
    let mut models: Value = serde_json::from_str(&models).unwrap();
    models["providers"]["google"] = json!({
        "baseUrl": format!("http://127.0.0.1:{}/v1beta", s.fake.port()),
        "apiKey": "google-test-key"
    });
    std::fs::write(s.agent.join("models.json"), models.to_string()).unwrap();
    std::fs::write(
        s.agent.join("settings.json"),
        r#"{"compaction":{"keepRecentTokens":1}}"#,
    )
    .unwrap();
    let ext = fixture("custom-compaction.ts");
    let (code, out, err) = s.pi(&["-e", &ext, "-p", "hello there"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "First answer.\n");
    let mut rpc = Rpc::start(&s, &["-e", &ext, "-c"]);
    rpc.send(json!({"type": "compact", "id": "c1"}));
    let compacted = rpc.response("c1");
    assert_eq!(compacted["success"], true, "{compacted}");
    assert!(rpc.finish());

    let requests = s.fake.requests();
    assert_eq!(requests.len(), 2);
    let summary_request = &requests[1];
    assert_eq!(summary_request.api, "google");
    assert!(
        summary_request.path.contains("gemini-2.5-flash"),
        "{}",
        summary_request.path
    );
    let prompt = summary_request.body["contents"][0]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        prompt.contains(
            // The kept tail (the answer) stays out: the user turn is what is summarized.
            "<conversation>\n[User]: hello there\n</conversation>"
        ),
        "{prompt}"
    );
    let compaction = s
        .session_entries()
        .into_iter()
        .find(|e| e["type"] == "compaction")
        .expect("a compaction entry");
    assert_eq!(compaction["summary"], "Custom summary text.");
    assert_eq!(compaction["fromHook"], true);
}

/// The headers a `streamSimple` provider is handed (fixtures/extensions/header-echo-provider.ts)
/// are those `before_provider_headers` handlers left, as Pi hands them: the provider's
/// configured headers, the handler's addition, and `null` for the one it removed. Real Pi
/// 1.6.0 answered `{"x-added":"one","x-config":null,"x-kept":"kept"}` with the same
/// extension.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_provider_gets_the_headers_handlers_left_with_their_nulls() {
    let s = Setup::new(json!([])).await;
    let ext = fixture("header-echo-provider.ts");
    let out = s
        .command_without_model(&["-e", &ext, "--model", "echo/echo-model", "-p", "hi"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"x-added\":\"one\",\"x-config\":null,\"x-kept\":\"kept\"}\n"
    );
}
