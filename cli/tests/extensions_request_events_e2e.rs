//! Request-time events: `context_with_system` (the whole transcript, after `context`),
//! `before_provider_headers` (headers edited in place, `null` removing one the provider
//! config adds) and `provider_stream_event` (each raw stream event) on OpenAI chat
//! completions and Anthropic messages; summary requests see the header hook but not the
//! payload and stream hooks, as in Pi; `ui_prompt_start` / `ui_prompt_end` around dialogs
//! over RPC, nested dialogs giving one span. Fixtures: provider-events.ts, ui-prompts.ts
//! (ours). Needs `node` (>= 20) on PATH.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Gives both fake providers configured headers (the handlers see them, and one of them is
/// removed by a handler).
fn configure_headers(s: &Setup) {
    let path = s.agent.join("models.json");
    let mut models: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for provider in ["fakeoai", "fakeant"] {
        models["providers"][provider]["headers"] = json!({"x-drop-me": "1", "x-keep": "kept"});
    }
    std::fs::write(&path, models.to_string()).unwrap();
}

/// The prompt text a request carries: OpenAI's system/developer messages, Anthropic's
/// `system` blocks.
fn system_text(api: &str, body: &Value) -> String {
    if api == "anthropic" {
        return match &body["system"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
    }
    message_texts(["system", "developer"], body).join("\n")
}

/// Every text of a request's messages.
fn all_text(body: &Value) -> String {
    body["messages"].to_string()
}

fn events<'a>(log: &'a [Value], name: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["event"] == name).collect()
}

/// `context_with_system` sees the transcript with its system message after `context`
/// added a message, and its chained edits reach the prompt; `before_provider_headers` sees
/// the configured headers and its additions reach the server while the header it set to
/// `null` does not; the payload hook still runs; `provider_stream_event` hands each raw event
/// over with the model's provider, API and id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_events_shape_the_request_and_see_the_stream() {
    let turns =
        json!([{"text": "Streamed from completions."}, {"text": "Streamed from messages."}]);
    let s = Setup::new(turns).await;
    configure_headers(&s);
    let ext = fixture("provider-events.ts");
    let mut logs = Vec::new();
    for (i, model) in ["fakeoai/fake-model", "fakeant/fake-claude"]
        .into_iter()
        .enumerate()
    {
        let log = s.cwd.join(format!("events-{i}.jsonl"));
        let out = s
            .command_without_model(&["--model", model, "-e", &ext, "-p", "hi"])
            .env("PROVIDER_EVENTS_LOG", &log)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{model}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        logs.push(jsonl(&log));
    }

    let recorded = s.fake.requests();
    assert_eq!(
        recorded.iter().map(|r| r.api.as_str()).collect::<Vec<_>>(),
        ["openai", "anthropic"]
    );
    for r in &recorded {
        let system = system_text(&r.api, &r.body);
        assert!(system.contains("[with-system one]"), "{}: {system}", r.api);
        assert!(
            system.contains("[with-system two saw=true]"),
            "{}: {system}",
            r.api
        );
        assert!(all_text(&r.body).contains("added by context"), "{}", r.body);
        assert_eq!(r.body["pi_payload_hook"], true);
        assert_eq!(r.headers["x-pi-added"], "one", "{:?}", r.headers);
        assert_eq!(r.headers["x-pi-chain"], "saw one", "{:?}", r.headers);
        assert_eq!(r.headers["x-keep"], "kept", "{:?}", r.headers);
        assert!(r.headers.get("x-drop-me").is_none(), "{:?}", r.headers);
    }

    for (log, (provider, api, model)) in logs.iter().zip([
        ("fakeoai", "openai-completions", "fake-model"),
        ("fakeant", "anthropic-messages", "fake-claude"),
    ]) {
        let seen = events(log, "context_with_system");
        assert_eq!(seen.len(), 1, "{log:?}");
        assert_eq!(seen[0]["roles"][0], "system");
        assert_eq!(seen[0]["sawContextMessage"], true);
        let headers = events(log, "before_provider_headers");
        assert_eq!(headers.len(), 1, "{log:?}");
        assert_eq!(headers[0]["headers"]["x-drop-me"], "1");
        assert_eq!(headers[0]["headers"]["x-keep"], "kept");
        let stream = events(log, "provider_stream_event");
        assert!(stream.len() > 2, "{log:?}");
        for e in &stream {
            assert_eq!(
                (&e["provider"], &e["api"], &e["model"]),
                (&json!(provider), &json!(api), &json!(model)),
                "{e}"
            );
        }
    }

    // Chat completions: the chunks as sent, text deltas in order.
    let stream = events(&logs[0], "provider_stream_event");
    assert!(stream
        .iter()
        .all(|e| e["data"]["object"] == "chat.completion.chunk"));
    let text: String = stream
        .iter()
        .filter_map(|e| e["data"]["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Streamed from completions.");
    // Messages: Anthropic's events from message_start to message_stop.
    let stream = events(&logs[1], "provider_stream_event");
    assert_eq!(stream[0]["data"]["type"], "message_start");
    assert_eq!(stream.last().unwrap()["data"]["type"], "message_stop");
    let text: String = stream
        .iter()
        .filter_map(|e| e["data"]["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "Streamed from messages.");
}

/// A compaction's summary request goes through `before_provider_headers` (Pi sends
/// summaries through the session's stream function, which applies it) but not through the
/// payload or stream-event hooks (Pi hands those to the agent loop's requests only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_requests_see_the_header_hook_only() {
    let big = "lorem ipsum dolor sit amet ".repeat(40);
    let turns: Vec<Value> = (0..2)
        .map(|i| json!({"text": format!("Reply {i}: {big}")}))
        .collect();
    let s = Setup::new(Value::Array(turns)).await;
    configure_headers(&s);
    std::fs::write(
        s.agent.join("settings.json"),
        json!({"compaction": {"keepRecentTokens": 60}}).to_string(),
    )
    .unwrap();
    let log = s.cwd.join("events.jsonl");
    let log_text = log.display().to_string();
    let mut rpc = Rpc::start_with_env(
        &s,
        &["-e", &fixture("provider-events.ts")],
        &[("PROVIDER_EVENTS_LOG", log_text.as_str())],
    );
    for (i, text) in ["one", "two"].iter().enumerate() {
        rpc.send(json!({"id": format!("p{i}"), "type": "prompt", "message": text}));
        rpc.until(|r| r["type"] == "agent_settled");
    }
    rpc.send(json!({"id": "c1", "type": "compact"}));
    let compacted = rpc.response("c1");
    assert_eq!(compacted["success"], true, "{compacted}");
    assert!(rpc.finish());

    // Summary requests carry Pi's summarization prompt (the history, and a turn prefix
    // when the cut splits a turn).
    let recorded = s.fake.requests();
    let summary = |body: &Value| {
        message_texts(["system", "developer"], body)
            .join("\n")
            .contains("You summarize conversations")
    };
    let kinds: Vec<bool> = recorded.iter().map(|r| summary(&r.body)).collect();
    assert_eq!(&kinds[..2], [false, false], "{kinds:?}");
    assert!(
        kinds.len() > 2 && kinds[2..].iter().all(|&k| k),
        "{kinds:?}"
    );
    for (r, is_summary) in recorded.iter().zip(&kinds) {
        assert_eq!(r.headers["x-pi-added"], "one", "{:?}", r.headers);
        assert!(r.headers.get("x-drop-me").is_none(), "{:?}", r.headers);
        assert_eq!(
            r.body.get("pi_payload_hook").is_some(),
            !is_summary,
            "{}",
            r.body
        );
    }
    let log = jsonl(&log);
    assert_eq!(
        events(&log, "before_provider_headers").len(),
        recorded.len()
    );
    // Stream events of the two turns only: their text deltas are the two replies.
    let text: String = events(&log, "provider_stream_event")
        .iter()
        .filter_map(|e| e["data"]["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, format!("Reply 0: {big}Reply 1: {big}"));
}

/// The notices a `prompt-event …` handler showed, as JSON.
fn prompt_events(notices: &[String]) -> Vec<Value> {
    notices
        .iter()
        .filter_map(|n| n.strip_prefix("prompt-event "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect()
}

/// Runs an RPC prompt (a command), answering its dialogs (confirm: yes, select: "b"), until
/// the notice `until` and `events` prompt events in all were seen; the notices shown.
fn run_command(
    rpc: &mut Rpc,
    id: &str,
    command: &str,
    until: &str,
    notices: &mut Vec<String>,
    events: usize,
) {
    rpc.send(json!({"id": id, "type": "prompt", "message": command}));
    let mut done = false;
    while !done || prompt_events(notices).len() < events {
        let (record, _) = rpc.until(|r| r["type"] == "extension_ui_request");
        match record["method"].as_str().unwrap() {
            "confirm" => rpc.send(
                json!({"type": "extension_ui_response", "id": record["id"], "confirmed": true}),
            ),
            "select" => {
                rpc.send(json!({"type": "extension_ui_response", "id": record["id"], "value": "b"}))
            }
            "notify" => {
                let message = record["message"].as_str().unwrap().to_string();
                done |= message == until;
                notices.push(message);
            }
            _ => {}
        }
    }
}

/// `ui_prompt_start` / `ui_prompt_end` bracket a dialog with Pi's fields (`reason`, `kind`,
/// `title`); a confirm and a select open together make one span, named after the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_prompt_events_bracket_dialogs_over_rpc() {
    let s = Setup::new(json!([])).await;
    let mut rpc = Rpc::start(&s, &["-e", &fixture("ui-prompts.ts")]);
    let mut notices = Vec::new();
    run_command(
        &mut rpc,
        "a",
        "/ask-both",
        "answered true b",
        &mut notices,
        2,
    );
    run_command(&mut rpc, "b", "/ask", "answered true", &mut notices, 4);
    assert!(rpc.finish());
    assert_eq!(
        prompt_events(&notices),
        vec![
            json!({"type": "ui_prompt_start", "reason": "ui_prompt", "kind": "confirm", "title": "First?"}),
            json!({"type": "ui_prompt_end", "reason": "ui_prompt", "kind": "confirm", "title": "First?"}),
            json!({"type": "ui_prompt_start", "reason": "ui_prompt", "kind": "confirm", "title": "Proceed?"}),
            json!({"type": "ui_prompt_end", "reason": "ui_prompt", "kind": "confirm", "title": "Proceed?"}),
        ],
        "{notices:?}"
    );
}
