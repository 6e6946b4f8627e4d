//! Agent loop against the scripted fake provider: events, persistence, tools, retry.

use std::sync::{Arc, Mutex};

use pi_fake_llm::{FakeLlm, Script, ToolCallSpec, Turn};
use pi_formats::header::NewHeader;
use pi_formats::message::ThinkingLevel;
use serde_json::{json, Value};

use super::*;
use crate::llm::models_json::parse_models_json;
use crate::tools::{select_builtin_tools, ToolSelection};

fn registry(base: &str) -> ModelRegistry {
    let text = json!({"providers": {"fakeoai": {"baseUrl": format!("{base}/v1"),
        "api": "openai-completions", "apiKey": "fake-key",
        "models": [{"id": "fake-model", "reasoning": true, "contextWindow": 128000, "maxTokens": 4096}]}}})
    .to_string();
    parse_models_json(&text, std::path::Path::new("models.json")).expect("models.json")
}

fn agent(fake: &FakeLlm, cwd: &std::path::Path) -> (AgentSession, Arc<Mutex<Vec<Value>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let header = NewHeader::new(
        pi_formats::id::session_id(),
        pi_formats::time::now_iso(),
        cwd.display().to_string(),
        None,
    );
    let a = agent_with(
        fake,
        cwd,
        &header,
        Persistence::default(),
        Arc::new(move |e: crate::protocol::Event| sink_events.lock().unwrap().push(e.to_value())),
    );
    (a, events)
}

fn agent_with(
    fake: &FakeLlm,
    cwd: &std::path::Path,
    header: &NewHeader,
    persist: Persistence,
    sink: EventSink,
) -> AgentSession {
    let reg = registry(&fake.base_url());
    let model = reg.find("fakeoai", "fake-model").cloned();
    let retry = RetrySettings {
        base_delay_ms: 10,
        ..Default::default()
    };
    let opts = AgentOptions {
        cwd: cwd.to_path_buf(),
        registry: reg,
        model,
        thinking: ThinkingLevel::Medium,
        tools: select_builtin_tools(&ToolSelection::default()).expect("tools"),
        prompt: PromptOptions::default(),
        retry,
        compaction: CompactionSettings::default(),
        branch_summary: Default::default(),
        api_key: None,
        api_key_resolver: None,
        shell: ShellOptions::default(),
        requests: RequestOptions::default(),
    };
    let a = AgentSession::new(Session::create(header), persist, opts, sink);
    a.start_new().expect("setup entries");
    a
}

/// A client that sees `message_end` finds the message in the session file: at every
/// `message_end` the file holds as many messages as `message_end`s were emitted so far.
#[tokio::test]
async fn message_end_comes_after_the_message_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start(Script::turns(vec![
        Turn {
            text: Some("Let me check.".into()),
            tool_calls: vec![ToolCallSpec {
                name: "bash".into(),
                arguments: json!({"command": "echo hi"}),
                id: None,
            }],
            ..Default::default()
        },
        Turn::text("done"),
    ]))
    .await
    .unwrap();
    let file = dir.path().join("s.jsonl");
    let header = NewHeader::new(
        pi_formats::id::session_id(),
        pi_formats::time::now_iso(),
        dir.path().display().to_string(),
        None,
    );
    let persist = Persistence {
        store: Some(Box::new(pi_storage::JsonlFileStore::new(
            &file,
            pi_storage::FsyncPolicy::Never,
        ))),
        lazy: Some(LazySession::new(pi_storage::SessionHeader::new(&header))),
        file: Some(file.clone()),
    };
    // (role, messages ended so far, messages in the file) at each message_end.
    let seen = Arc::new(Mutex::new(Vec::<(String, usize, usize)>::new()));
    let sink_seen = seen.clone();
    let sink_file = file.clone();
    let sink: EventSink = Arc::new(move |e: crate::protocol::Event| {
        let v = e.to_value();
        if v["type"] != "message_end" {
            return;
        }
        let in_file = std::fs::read_to_string(&sink_file)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(r#""type":"message""#))
            .count();
        let mut seen = sink_seen.lock().unwrap();
        let ended = seen.len() + 1;
        let role = v["message"]["role"].as_str().unwrap_or("").to_string();
        seen.push((role, ended, in_file));
    });
    let a = agent_with(&fake, dir.path(), &header, persist, sink);
    a.prompt("hello", vec![]).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let roles: Vec<&str> = seen.iter().map(|(r, ..)| r.as_str()).collect();
    // The first message (the system prompt) waits in memory for the conversation, as Pi
    // writes no file before it; every conversation message is in the file at its message_end.
    assert_eq!(roles.len(), 5, "{seen:?}");
    assert_eq!(
        &roles[1..],
        ["user", "assistant", "toolResult", "assistant"]
    );
    for (role, ended, in_file) in seen.iter().skip(1) {
        assert_eq!(
            in_file, ended,
            "message_end of {role} #{ended} came before its message was written"
        );
    }
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] != "message_update" && e["type"] != "tool_execution_update")
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn tool_turn_persists_like_pi() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start(Script::turns(vec![
        Turn {
            text: Some("Let me check.".into()),
            tool_calls: vec![
                ToolCallSpec {
                    name: "bash".into(),
                    arguments: json!({"command": "echo hi"}),
                    id: None,
                },
                ToolCallSpec {
                    name: "nope".into(),
                    arguments: json!({}),
                    id: None,
                },
            ],
            ..Default::default()
        },
        Turn::text("done"),
    ]))
    .await
    .unwrap();
    let (a, events) = agent(&fake, dir.path());
    let out = a.prompt("hello", vec![]).await.unwrap();
    assert!(!out.aborted);
    let ev = events.lock().unwrap().clone();
    assert_eq!(
        types(&ev),
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "tool_execution_start",
            "tool_execution_start",
            "tool_execution_end",
            "tool_execution_end",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "turn_end",
            "turn_start",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    // the unknown tool fails at once, so its end comes first; results stay in call order
    let results: Vec<&Value> = ev
        .iter()
        .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "toolResult")
        .collect();
    assert_eq!(results[0]["message"]["toolName"], "bash");
    assert_eq!(
        results[1]["message"]["content"][0]["text"],
        "Tool nope not found"
    );
    let roles: Vec<String> = a.with_session(|s| {
        s.entries()
            .iter()
            .map(|e| {
                e.role
                    .as_deref()
                    .unwrap_or(e.kind.as_str().unwrap_or(""))
                    .to_string()
            })
            .collect()
    });
    assert_eq!(
        roles,
        [
            "model_change",
            "thinking_level_change",
            "system",
            "user",
            "assistant",
            "toolResult",
            "toolResult",
            "assistant"
        ]
    );
    assert_eq!(a.last_assistant_text().as_deref(), Some("done"));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
}

#[tokio::test]
async fn retry_hides_failed_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let fail = Turn {
        http_error: Some(pi_fake_llm::HttpError {
            status: 500,
            body: Some(json!({"error": {"message": "fake overloaded"}})),
        }),
        ..Default::default()
    };
    let fake = FakeLlm::start(Script::turns(vec![fail, Turn::text("Recovered")]))
        .await
        .unwrap();
    let (a, events) = agent(&fake, dir.path());
    a.prompt("first", vec![]).await.unwrap();
    let ev = events.lock().unwrap().clone();
    let t = types(&ev);
    let pos = |k: &str| t.iter().position(|x| x == k).unwrap();
    assert!(pos("auto_retry_start") < pos("entry_appended"));
    assert!(t.contains(&"auto_retry_end".to_string()));
    let msgs = a.messages();
    assert!(
        msgs.iter().all(|m| m["stopReason"] != "error"),
        "failed attempt hidden"
    );
    let reqs = fake.requests();
    let roles: Vec<&str> = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user"]);
}

#[tokio::test]
async fn swapping_the_registry_and_cwd_updates_the_current_model_and_tools_dir() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start(Script::turns(vec![])).await.unwrap();
    let (a, _events) = agent(&fake, dir.path());
    // models.json changed: the current model's new definition is used, new models appear.
    let text = json!({"providers": {"fakeoai": {"baseUrl": format!("{}/v1", fake.base_url()),
        "api": "openai-completions", "apiKey": "fake-key",
        "models": [{"id": "fake-model", "reasoning": true, "contextWindow": 999},
                   {"id": "fake-new"}]}}})
    .to_string();
    let reg = parse_models_json(&text, std::path::Path::new("models.json")).unwrap();
    a.set_registry(reg, None);
    assert_eq!(a.model().map(|m| m.context_window), Some(999));
    assert!(a.registry().find("fakeoai", "fake-new").is_some());
    // A registry without the current model keeps it selected.
    a.set_registry(ModelRegistry::builtin(), None);
    assert_eq!(a.model().map(|m| m.id), Some("fake-model".to_string()));
    let other = dir.path().join("other");
    a.set_cwd(other.clone());
    assert_eq!(a.cwd(), other);
}

#[tokio::test]
async fn busy_and_no_model_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start(Script::turns(vec![Turn {
        delay: Some(0.5),
        ..Turn::text("slow")
    }]))
    .await
    .unwrap();
    let (a, _events) = agent(&fake, dir.path());
    let b = a.clone();
    let h = tokio::spawn(async move { b.prompt("one", vec![]).await });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(matches!(
        a.prompt("two", vec![]).await,
        Err(AgentError::Busy)
    ));
    h.await.unwrap().unwrap();
}

/// A tool of a test extension: its name and description.
#[derive(Debug)]
struct ExtTool(String, &'static str, Value);

#[async_trait::async_trait]
impl crate::tools::Tool for ExtTool {
    fn name(&self) -> &str {
        &self.0
    }
    fn description(&self) -> &str {
        self.1
    }
    fn parameters(&self) -> &Value {
        &self.2
    }
    async fn execute(
        &self,
        _: &str,
        _: Value,
        _: &crate::tools::ToolContext,
        _: tokio_util::sync::CancellationToken,
        _: crate::tools::ToolUpdateFn<'_>,
    ) -> Result<crate::tools::ToolOutput, crate::tools::ToolError> {
        Ok(crate::tools::ToolOutput::text("ok"))
    }
}

/// A reload's new extension tools replace the old ones: a removed tool leaves, a built-in
/// the old extension overrode comes back, a tool the user activated stays active although
/// its new version registers with `defaultActive: false`, a new tool activates.
#[tokio::test]
async fn a_reload_replaces_the_extension_tools() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start(Script::turns(vec![])).await.unwrap();
    let (a, _) = agent(&fake, dir.path());
    let tool = |name: &str, description: &'static str| -> Arc<dyn crate::tools::Tool> {
        Arc::new(ExtTool(name.into(), description, json!({"type": "object"})))
    };
    let builtin_read = a
        .tools()
        .iter()
        .find(|t| t.name() == "read")
        .map(|t| t.description().to_string())
        .unwrap();
    a.register_extension_tool(tool("read", "old read"), true);
    a.register_extension_tool(tool("gone", "old"), true);
    a.register_extension_tool(tool("kept", "old"), false);
    let mut active: Vec<String> = a.tools().iter().map(|t| t.name().to_string()).collect();
    active.push("kept".into());
    a.set_active_tools(&active);

    a.replace_extension_tools(
        &["read".into(), "gone".into(), "kept".into()],
        &[
            crate::tools::RegisteredTool {
                tool: tool("kept", "new"),
                default_active: false,
            },
            crate::tools::RegisteredTool {
                tool: tool("fresh", "new"),
                default_active: true,
            },
        ],
    );
    let described = |tools: Vec<Arc<dyn crate::tools::Tool>>, name: &str| {
        tools
            .iter()
            .find(|t| t.name() == name)
            .map(|t| t.description().to_string())
    };
    assert_eq!(described(a.tools(), "read"), Some(builtin_read));
    assert_eq!(described(a.all_tools(), "gone"), None);
    assert_eq!(described(a.tools(), "kept").as_deref(), Some("new"));
    assert_eq!(described(a.tools(), "fresh").as_deref(), Some("new"));
}
