//! Provider round trips over real TCP against `pi-fake-llm`, and request bodies compared
//! with the ones real Pi 1.6.0 sent for the same conversation (fixtures/realpi/logs).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pi_fake_llm::{FakeLlm, HttpError, Script, ToolCallSpec, Turn, UsageSpec};
use pi_formats::message::{
    AgentMessage, AssistantMessage, ContentBlock, StopReason, ThinkingLevel,
};
use serde_json::{json, Value};

use super::transform::user_text;
use super::*;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/realpi")
}

fn registry() -> ModelRegistry {
    load_models(&fixtures().join("tricky/agent/models.json")).expect("fixture models.json")
}

/// The fixture model with its base URL pointed at `srv`.
fn fake_model(srv: &FakeLlm, provider: &str, id: &str) -> Model {
    let mut m = registry()
        .find(provider, id)
        .expect("fixture model")
        .clone();
    m.base_url = if m.api == api::OPENAI_COMPLETIONS {
        srv.openai_base_url()
    } else {
        srv.base_url()
    };
    m
}

fn opts() -> StreamOptions {
    StreamOptions {
        api_key: Some("fake-key".into()),
        ..StreamOptions::default()
    }
}

fn ctx(text: &str) -> Context {
    Context {
        system_prompt: Some("You are a test.".into()),
        messages: vec![user_text(text, 1)],
        tools: vec![],
    }
}

async fn collect(
    model: &Model,
    context: &Context,
    options: StreamOptions,
) -> (Vec<AssistantMessageEvent>, AssistantMessage) {
    let mut s = stream(model, context.clone(), options);
    let mut events = Vec::new();
    while let Some(ev) = s.next().await {
        events.push(ev);
    }
    let last = events
        .last()
        .and_then(|e| e.final_message())
        .cloned()
        .expect("terminal event");
    (events, last)
}

fn kinds(events: &[AssistantMessageEvent]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e {
            AssistantMessageEvent::Start { .. } => "start",
            AssistantMessageEvent::TextStart { .. } => "text_start",
            AssistantMessageEvent::TextDelta { .. } => "text_delta",
            AssistantMessageEvent::TextEnd { .. } => "text_end",
            AssistantMessageEvent::ThinkingStart { .. } => "thinking_start",
            AssistantMessageEvent::ThinkingDelta { .. } => "thinking_delta",
            AssistantMessageEvent::ThinkingEnd { .. } => "thinking_end",
            AssistantMessageEvent::ToolCallStart { .. } => "toolcall_start",
            AssistantMessageEvent::ToolCallDelta { .. } => "toolcall_delta",
            AssistantMessageEvent::ToolCallEnd { .. } => "toolcall_end",
            AssistantMessageEvent::Done { .. } => "done",
            AssistantMessageEvent::Error { .. } => "error",
        })
        .collect()
}

fn dedup(k: Vec<&'static str>) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for x in k {
        if out.last() != Some(&x) {
            out.push(x);
        }
    }
    out
}

fn tool_turn() -> Turn {
    Turn {
        thinking: Some("I should list the directory.".into()),
        text: Some("Listing now.".into()),
        tool_calls: vec![
            ToolCallSpec {
                name: "bash".into(),
                arguments: json!({"command": "ls -la", "timeout": 5}),
                id: None,
            },
            ToolCallSpec {
                name: "read".into(),
                arguments: json!({"path": "a \"b\".txt"}),
                id: Some("call_x".into()),
            },
        ],
        usage: Some(UsageSpec {
            prompt_tokens: Some(1000),
            completion_tokens: Some(50),
            cached_tokens: Some(200),
            reasoning_tokens: Some(7),
        }),
        ..Turn::default()
    }
}

// ---------------------------------------------------------------- openai-completions

#[tokio::test]
async fn openai_text_usage_and_cost() {
    let srv = FakeLlm::start(Script::turns(vec![Turn {
        text: Some("Hello there, world!".into()),
        usage: Some(UsageSpec {
            prompt_tokens: Some(100),
            completion_tokens: Some(10),
            cached_tokens: Some(20),
            reasoning_tokens: None,
        }),
        ..Turn::default()
    }]))
    .await
    .expect("server");
    let model = fake_model(&srv, "fakeoai", "fake-model");
    let (events, msg) = collect(&model, &ctx("hi"), opts()).await;
    assert_eq!(
        dedup(kinds(&events)),
        ["start", "text_start", "text_delta", "text_end", "done"]
    );
    assert_eq!(msg.stop_reason, StopReason::Stop);
    assert_eq!(msg.raw_stop_reason.as_deref(), Some("stop"));
    assert_eq!(msg.content, vec![ContentBlock::text("Hello there, world!")]);
    assert_eq!(msg.response_id.as_deref(), Some("chatcmpl-fake-1"));
    assert!(msg.duration_ms.is_some());
    let u = &msg.usage;
    assert_eq!(
        (
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens
        ),
        (80, 10, 20, 0, 110)
    );
    assert_eq!(u.reasoning, Some(0));
    // fake-model: $1 in, $2 out, $0.1 cache read per million.
    assert!((u.cost.input - 80.0 / 1e6).abs() < 1e-15);
    assert!((u.cost.output - 20.0 / 1e6).abs() < 1e-15);
    assert!((u.cost.cache_read - 2.0 / 1e6).abs() < 1e-15);
    assert!((u.cost.total - 102.0 / 1e6).abs() < 1e-15);
    let req = &srv.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(
        req.body["messages"][0],
        json!({"role": "system", "content": "You are a test."})
    );
    assert_eq!(
        req.body["messages"][1],
        json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    );
    assert_eq!(req.headers["authorization"], "<redacted>");
}

#[tokio::test]
async fn openai_thinking_and_streamed_tool_calls() {
    let srv = FakeLlm::start(Script::turns(vec![tool_turn()]))
        .await
        .expect("server");
    let model = fake_model(&srv, "fakeoai", "fake-model");
    let options = StreamOptions {
        reasoning: Some(ThinkingLevel::High),
        ..opts()
    };
    let (events, msg) = collect(&model, &ctx("list"), options).await;
    assert_eq!(
        dedup(kinds(&events)),
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "text_start",
            "text_delta",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_start",
            "toolcall_delta",
            "thinking_end",
            "text_end",
            "toolcall_end",
            "done"
        ]
    );
    assert_eq!(msg.stop_reason, StopReason::ToolUse);
    let ContentBlock::Thinking(t) = &msg.content[0] else {
        panic!("thinking first: {:?}", msg.content)
    };
    assert_eq!(t.thinking, "I should list the directory.");
    assert_eq!(t.thinking_signature.as_deref(), Some("reasoning_content"));
    let calls: Vec<_> = msg.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "call_1_0");
    assert_eq!(
        calls[0].arguments,
        json!({"command": "ls -la", "timeout": 5})
    );
    assert_eq!(calls[1].id, "call_x");
    assert_eq!(calls[1].arguments, json!({"path": "a \"b\".txt"}));
    // The raw fragments concatenate to the argument text; partials parse along the way.
    let frags: String = events
        .iter()
        .filter_map(|e| match e {
            AssistantMessageEvent::ToolCallDelta {
                content_index: 2,
                delta,
                ..
            } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&frags).expect("json"),
        json!({"command": "ls -la", "timeout": 5})
    );
    assert_eq!(msg.usage.reasoning, Some(7));
    assert_eq!(msg.usage.input, 800);
    // high effort on a reasoning model goes out as reasoning_effort.
    assert_eq!(srv.requests()[0].body["reasoning_effort"], "high");
}

#[tokio::test]
async fn openai_http_error_and_overflow() {
    let srv = FakeLlm::start(Script::turns(vec![
        Turn {
            http_error: Some(HttpError {
                status: 400,
                body: Some(json!({"error": {"message": "fake bad request", "type": "invalid_request_error"}})),
            }),
            ..Turn::default()
        },
        Turn {
            http_error: Some(HttpError {
                status: 400,
                body: Some(json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."}})),
            }),
            ..Turn::default()
        },
    ]))
    .await
    .expect("server");
    let model = fake_model(&srv, "fakeoai", "fake-model");
    let (events, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(
        kinds(&events),
        ["error"],
        "no start before a failed request"
    );
    assert_eq!(msg.stop_reason, StopReason::Error);
    // Exactly what real Pi stored for the same reply (fixtures/realpi/sessions/print_error.jsonl).
    assert_eq!(
        msg.error_message.as_deref(),
        Some(r#"400: {"message":"fake bad request","type":"invalid_request_error"}"#)
    );
    assert!(!is_context_overflow(&msg, model.context_window));
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert!(
        is_context_overflow(&msg, model.context_window),
        "{:?}",
        msg.error_message
    );
}

#[tokio::test]
async fn openai_cut_stream_and_missing_finish() {
    let srv = FakeLlm::start(Script::turns(vec![
        Turn {
            text: Some("abcdefghijkl".into()),
            cut_after: Some(3),
            ..Turn::default()
        },
        Turn {
            text: Some("abcdefghijkl".into()),
            omit_finish: true,
            ..Turn::default()
        },
        Turn {
            text: Some("partial".into()),
            stream_error: Some("upstream exploded".into()),
            ..Turn::default()
        },
        Turn {
            text: Some("Cut off by leng".into()),
            finish_reason: Some("length".into()),
            ..Turn::default()
        },
    ]))
    .await
    .expect("server");
    let model = fake_model(&srv, "fakeoai", "fake-model");
    let (events, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert!(msg.error_message.as_deref().is_some_and(|m| !m.is_empty()));
    assert_eq!(kinds(&events)[0], "start");
    // Two of the three text pieces arrived before the cut; they stay in the message.
    assert!(
        matches!(&msg.content[..], [ContentBlock::Text(t)] if t.text == "abcdefgh"),
        "{:?}",
        msg.content
    );
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Stream ended without finish_reason")
    );
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(msg.error_message.as_deref(), Some("upstream exploded"));
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(msg.stop_reason, StopReason::Length);
    assert_eq!(msg.raw_stop_reason.as_deref(), Some("length"));
}

async fn abort_mid_stream(model: &Model) {
    let options = opts();
    let cancel = options.cancel.clone();
    let mut started = Instant::now();
    let mut s = stream(model, ctx("x"), options);
    let mut saw_delta = false;
    let mut last = None;
    while let Some(ev) = s.next().await {
        if matches!(ev, AssistantMessageEvent::TextDelta { .. }) && !saw_delta {
            saw_delta = true;
            started = Instant::now();
            cancel.cancel();
        }
        last = ev.final_message().cloned();
    }
    let msg = last.expect("final");
    assert!(saw_delta);
    assert_eq!(msg.stop_reason, StopReason::Aborted);
    assert_eq!(msg.error_message.as_deref(), Some("Request was aborted"));
    assert!(!msg.content.is_empty(), "partial content is kept");
    // The server waits 2 s between events and would need ~20 s more; the abort must end the
    // stream before even the next event is due.
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
}

fn slow_turn() -> Turn {
    Turn {
        text: Some("x".repeat(300)),
        event_delay_ms: Some(2000),
        ..Turn::default()
    }
}

#[tokio::test]
async fn openai_abort_mid_stream() {
    let srv = FakeLlm::start(Script::turns(vec![slow_turn()]))
        .await
        .expect("server");
    abort_mid_stream(&fake_model(&srv, "fakeoai", "fake-model")).await;
}

#[tokio::test]
async fn connection_refused_is_an_error_message() {
    let srv = FakeLlm::start(Script::default()).await.expect("server");
    let mut model = fake_model(&srv, "fakeoai", "fake-model");
    drop(srv);
    model.base_url = "http://127.0.0.1:9/v1".into();
    let (events, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(kinds(&events), ["error"]);
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert!(msg.error_message.as_deref().is_some_and(|m| !m.is_empty()));
}

// ---------------------------------------------------------------- anthropic-messages

#[tokio::test]
async fn anthropic_thinking_tool_calls_usage() {
    let srv = FakeLlm::start(Script::turns(vec![tool_turn(), Turn::text("Done.")]))
        .await
        .expect("server");
    let model = fake_model(&srv, "fakeant", "fake-claude");
    let options = StreamOptions {
        reasoning: Some(ThinkingLevel::Low),
        ..opts()
    };
    let (events, msg) = collect(&model, &ctx("list"), options).await;
    assert_eq!(
        dedup(kinds(&events)),
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "done"
        ]
    );
    assert_eq!(msg.stop_reason, StopReason::ToolUse);
    assert_eq!(msg.raw_stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(msg.response_id.as_deref(), Some("msg_fake_1"));
    let ContentBlock::Thinking(t) = &msg.content[0] else {
        panic!("thinking")
    };
    assert_eq!(t.thinking_signature.as_deref(), Some("fakesig"));
    let calls: Vec<_> = msg.tool_calls().collect();
    assert_eq!(calls[0].id, "toolu_1_0");
    assert_eq!(
        calls[0].arguments,
        json!({"command": "ls -la", "timeout": 5})
    );
    let u = &msg.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.total_tokens),
        (1000, 50, 200, 1250)
    );
    // fake-claude: $3 in, $15 out, $0.3 cache read.
    assert!((u.cost.total - (3.0 * 1000.0 + 15.0 * 50.0 + 0.3 * 200.0) / 1e6).abs() < 1e-12);

    let req = &srv.requests()[0];
    assert_eq!(req.path, "/v1/messages?beta=true");
    assert_eq!(
        req.headers["anthropic-beta"],
        "interleaved-thinking-2025-05-14"
    );
    assert_eq!(req.headers["anthropic-version"], "2023-06-01");
    assert_eq!(
        req.body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048, "display": "summarized"})
    );
    assert_eq!(req.body["max_tokens"], 8192);

    // Replay: the tool results and the thinking signature go back.
    let mut context = ctx("list");
    context.messages.push(AgentMessage::Assistant(msg.clone()));
    for c in msg.tool_calls() {
        context.messages.push(AgentMessage::ToolResult(
            pi_formats::message::ToolResultMessage {
                tool_call_id: c.id.clone(),
                tool_name: c.name.clone(),
                content: vec![ContentBlock::text("ok")],
                details: None,
                is_error: false,
                duration_ms: None,
                timestamp: 3,
                extra: Default::default(),
            },
        ));
    }
    let (_, done) = collect(
        &model,
        &context,
        StreamOptions {
            reasoning: Some(ThinkingLevel::Low),
            ..opts()
        },
    )
    .await;
    assert_eq!(done.stop_reason, StopReason::Stop);
    let body = &srv.requests()[1].body;
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "I should list the directory.", "signature": "fakesig"})
    );
    let results = &body["messages"][2]["content"];
    assert_eq!(
        results.as_array().map(Vec::len),
        Some(2),
        "consecutive results merged: {results}"
    );
    assert_eq!(results[1]["cache_control"], json!({"type": "ephemeral"}));
}

#[tokio::test]
async fn anthropic_errors_cut_and_overflow() {
    let srv = FakeLlm::start(Script::turns(vec![
        Turn { http_error: Some(HttpError { status: 500, body: Some(json!({"error": {"message": "fake overloaded"}})) }), ..Turn::default() },
        Turn { http_error: Some(HttpError { status: 400, body: Some(json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 213462 tokens > 200000 maximum"}})) }), ..Turn::default() },
        Turn { text: Some("abcdefghijkl".into()), cut_after: Some(3), ..Turn::default() },
        Turn { text: Some("abcdefghijkl".into()), omit_finish: true, ..Turn::default() },
        Turn { text: Some("partial".into()), stream_error: Some("Overloaded".into()), ..Turn::default() },
    ]))
    .await
    .expect("server");
    let model = fake_model(&srv, "fakeant", "fake-claude");
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some(r#"500 {"error":{"message":"fake overloaded"}}"#)
    );
    assert!(!is_context_overflow(&msg, model.context_window));
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert!(
        is_context_overflow(&msg, model.context_window),
        "{:?}",
        msg.error_message
    );
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert_eq!(
        msg.usage.input,
        srv.requests()[2].body.to_string().len() as u64 / 4,
        "input tokens kept from message_start"
    );
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Anthropic stream ended before message_stop")
    );
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert!(
        msg.error_message
            .as_deref()
            .is_some_and(|m| m.contains("Overloaded")),
        "{:?}",
        msg.error_message
    );
}

#[tokio::test]
async fn anthropic_abort_mid_stream() {
    let srv = FakeLlm::start(Script::turns(vec![slow_turn()]))
        .await
        .expect("server");
    abort_mid_stream(&fake_model(&srv, "fakeant", "fake-claude")).await;
}

// ---------------------------------------------------------------- Pi's recorded requests

/// The `message` payloads of a linear fixture session, in order.
fn session_messages(name: &str) -> Vec<AgentMessage> {
    let text = std::fs::read_to_string(fixtures().join("sessions").join(name)).expect("session");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message")
        .map(|e| serde_json::from_value(e["message"].clone()).expect("message"))
        .collect()
}

fn recorded(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("logs").join(name)).expect("log");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// Replays each of Pi's requests: the context is the session up to the assistant message
/// that answered it; our request body must equal Pi's in every field we produce.
async fn compare_with_pi(
    session: &str,
    log: &str,
    provider: &str,
    model_id: &str,
    level: ThinkingLevel,
    keys: &[&str],
) {
    let messages = session_messages(session);
    let pi_requests = recorded(log);
    let assistant_positions: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, AgentMessage::Assistant(_)))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        assistant_positions.len(),
        pi_requests.len(),
        "one request per assistant message"
    );
    let srv = FakeLlm::start(Script::default()).await.expect("server");
    let model = fake_model(&srv, provider, model_id);
    for (k, &pos) in assistant_positions.iter().enumerate() {
        let context = Context {
            system_prompt: None,
            messages: messages[..pos].to_vec(),
            tools: vec![],
        };
        let options = StreamOptions {
            reasoning: Some(level),
            ..opts()
        };
        let _ = collect(&model, &context, options).await;
        let ours = &srv.requests()[k].body;
        let pis = &pi_requests[k]["body"];
        for key in keys {
            assert_eq!(ours.get(*key), pis.get(*key), "request {k}, field {key}");
        }
        let ours_keys: Vec<&String> = ours
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        let pis_keys: Vec<&String> = pis
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(
            ours_keys, pis_keys,
            "request {k}: top-level keys and their order"
        );
    }
}

#[tokio::test]
async fn openai_requests_match_pi() {
    for (session, log) in [
        ("json_tools.jsonl", "json_tools.requests.jsonl"),
        ("print_plain.jsonl", "print_plain.requests.jsonl"),
    ] {
        compare_with_pi(
            session,
            log,
            "fakeoai",
            "fake-model",
            ThinkingLevel::Medium,
            &[
                "model",
                "messages",
                "stream",
                "stream_options",
                "store",
                "max_completion_tokens",
                "tools",
                "reasoning_effort",
            ],
        )
        .await;
    }
}

#[tokio::test]
async fn anthropic_requests_match_pi() {
    compare_with_pi(
        "anthropic_tools_thinking.jsonl",
        "anthropic.requests.jsonl",
        "fakeant",
        "fake-claude",
        ThinkingLevel::Low,
        &[
            "model",
            "messages",
            "max_tokens",
            "stream",
            "system",
            "tools",
            "thinking",
        ],
    )
    .await;
}

// ---------------------------------------------------------------- openai-responses / google

fn responses_model(srv: &FakeLlm) -> Model {
    let mut m = fake_model(srv, "fakeoai", "fake-model");
    m.api = api::OPENAI_RESPONSES.into();
    m.provider = "openai".into();
    m.base_url = srv.openai_base_url();
    m
}

fn google_model(srv: &FakeLlm) -> Model {
    let mut m = fake_model(srv, "fakeoai", "fake-model");
    m.api = api::GOOGLE_GENERATIVE_AI.into();
    m.provider = "google".into();
    m.id = "gemini-2.5-flash".into();
    m.base_url = format!("{}/v1beta", srv.base_url());
    m
}

#[tokio::test]
async fn responses_thinking_tools_usage_and_replay() {
    let srv = FakeLlm::start(Script::turns(vec![tool_turn(), Turn::text("ok")]))
        .await
        .expect("server");
    let model = responses_model(&srv);
    let options = StreamOptions {
        reasoning: Some(ThinkingLevel::Medium),
        ..opts()
    };
    let (events, msg) = collect(&model, &ctx("list"), options.clone()).await;
    assert_eq!(
        dedup(kinds(&events)),
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "done"
        ]
    );
    assert_eq!(msg.stop_reason, StopReason::ToolUse);
    assert_eq!(msg.response_id.as_deref(), Some("resp_fake_1"));
    let ContentBlock::Thinking(t) = &msg.content[0] else {
        panic!("thinking")
    };
    assert_eq!(t.thinking, "I should list the directory.");
    let item: Value =
        serde_json::from_str(t.thinking_signature.as_deref().expect("sig")).expect("item json");
    assert_eq!(item["type"], "reasoning");
    let calls: Vec<_> = msg.tool_calls().collect();
    assert_eq!(calls[0].id, "call_1_0|fc_fake_1_0");
    assert_eq!(
        calls[0].arguments,
        json!({"command": "ls -la", "timeout": 5})
    );
    assert_eq!(
        (
            msg.usage.input,
            msg.usage.cache_read,
            msg.usage.output,
            msg.usage.total_tokens
        ),
        (800, 200, 50, 1050)
    );
    let body = &srv.requests()[0].body;
    assert_eq!(srv.requests()[0].path, "/v1/responses");
    assert_eq!(
        body["reasoning"],
        json!({"effort": "medium", "summary": "auto"})
    );
    assert_eq!(
        body["input"][0],
        json!({"role": "developer", "content": "You are a test."})
    );

    let mut context = ctx("list");
    context.messages.push(AgentMessage::Assistant(msg.clone()));
    let (_, done) = collect(&model, &context, options).await;
    assert_eq!(done.stop_reason, StopReason::Stop);
    let input = srv.requests()[1].body["input"].clone();
    let types: Vec<_> = input
        .as_array()
        .expect("input")
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("msg").to_string())
        .collect();
    assert_eq!(
        types,
        [
            "msg",
            "msg",
            "reasoning",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ],
        "{input}"
    );
    assert_eq!(input[4]["call_id"], "call_1_0");
    assert_eq!(input[4]["id"], "fc_fake_1_0");
    assert_eq!(input[6]["output"], "No result provided");
}

#[tokio::test]
async fn responses_errors_and_abort() {
    let srv = FakeLlm::start(Script::turns(vec![
        Turn { http_error: Some(HttpError { status: 400, body: Some(json!({"error": {"message": "Your input exceeds the context window of this model."}})) }), ..Turn::default() },
        Turn { text: Some("abcdefghijkl".into()), stream_error: Some("boom".into()), ..Turn::default() },
        Turn { text: Some("abcdefghijkl".into()), omit_finish: true, ..Turn::default() },
        slow_turn(),
    ]))
    .await
    .expect("server");
    let model = responses_model(&srv);
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert!(
        is_context_overflow(&msg, model.context_window),
        "{:?}",
        msg.error_message
    );
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Error Code server_error: boom")
    );
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some("OpenAI Responses stream ended before a terminal response event")
    );
    abort_mid_stream(&model).await;
}

#[tokio::test]
async fn google_thinking_tools_usage() {
    let srv = FakeLlm::start(Script::turns(vec![tool_turn(), Turn { http_error: Some(HttpError { status: 400,
        body: Some(json!({"error": {"code": 400, "message": "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)."}})) }), ..Turn::default() }]))
        .await
        .expect("server");
    let model = google_model(&srv);
    let options = StreamOptions {
        reasoning: Some(ThinkingLevel::Low),
        ..opts()
    };
    let (events, msg) = collect(&model, &ctx("list"), options.clone()).await;
    assert_eq!(
        dedup(kinds(&events)),
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "done"
        ]
    );
    assert_eq!(msg.stop_reason, StopReason::ToolUse);
    assert_eq!(msg.raw_stop_reason.as_deref(), Some("STOP"));
    let calls: Vec<_> = msg.tool_calls().collect();
    assert!(
        calls[0].id.starts_with("bash_"),
        "made-up id: {}",
        calls[0].id
    );
    assert_eq!(calls[1].id, "call_x");
    assert_eq!(
        calls[0].arguments,
        json!({"command": "ls -la", "timeout": 5})
    );
    assert_eq!(
        (
            msg.usage.input,
            msg.usage.cache_read,
            msg.usage.output,
            msg.usage.reasoning
        ),
        (800, 200, 50, Some(7))
    );
    let req = &srv.requests()[0];
    assert_eq!(
        req.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(req.headers["x-goog-api-key"], "<redacted>");
    assert_eq!(
        req.body["systemInstruction"],
        json!({"parts": [{"text": "You are a test."}]})
    );
    assert_eq!(
        req.body["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true, "thinkingBudget": 2048})
    );
    let (_, msg) = collect(&model, &ctx("x"), options).await;
    assert!(
        is_context_overflow(&msg, model.context_window),
        "{:?}",
        msg.error_message
    );
}

#[tokio::test]
async fn google_cut_and_abort() {
    let srv = FakeLlm::start(Script::turns(vec![
        Turn {
            text: Some("abcdefghijkl".into()),
            cut_after: Some(2),
            ..Turn::default()
        },
        Turn {
            text: Some("abcdefghijkl".into()),
            finish_reason: Some("content_filter".into()),
            ..Turn::default()
        },
        slow_turn(),
    ]))
    .await
    .expect("server");
    let model = google_model(&srv);
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(msg.stop_reason, StopReason::Error);
    assert!(
        matches!(&msg.content[..], [ContentBlock::Text(t)] if t.text == "abcdefgh"),
        "{:?}",
        msg.content
    );
    let (_, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(
        msg.error_message.as_deref(),
        Some("Provider stopped with: SAFETY")
    );
    abort_mid_stream(&model).await;
}

#[tokio::test]
async fn unknown_api_is_an_error_event() {
    let srv = FakeLlm::start(Script::default()).await.expect("server");
    let mut model = fake_model(&srv, "fakeoai", "fake-model");
    model.api = "no-such-api".into();
    let (events, msg) = collect(&model, &ctx("x"), opts()).await;
    assert_eq!(kinds(&events), ["error"]);
    assert_eq!(
        msg.error_message.as_deref(),
        Some("No API provider registered for api: no-such-api")
    );
    assert!(srv.requests().is_empty());
}
