//! Tree navigation against the scripted fake provider, written through a real JSONL store.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pi_fake_llm::{FakeLlm, HttpError, Script, ToolCallSpec, Turn};
use pi_formats::header::NewHeader;
use pi_formats::message::ThinkingLevel;
use pi_storage::{JsonlLayout, JsonlStore, LazySession, SessionHeader};
use serde_json::{json, Value};

use super::*;
use crate::agent::{AgentOptions, PromptOptions, RequestOptions, ShellOptions};
use crate::llm::models_json::parse_models_json;
use crate::llm::ModelRegistry;
use crate::tools::{select_builtin_tools, ToolSelection};
use pi_engine::compaction::{
    CompactionSettings, RetrySettings, BRANCH_SUMMARY_PREAMBLE, SUMMARIZATION_SYSTEM_PROMPT,
};
use pi_engine::session::{EntryIdx, Session};

fn registry(base: &str) -> ModelRegistry {
    let text = json!({"providers": {"fakeoai": {"baseUrl": format!("{base}/v1"),
        "api": "openai-completions", "apiKey": "fake-key",
        "models": [{"id": "fake-model", "reasoning": true, "contextWindow": 128000, "maxTokens": 4096}]}}})
    .to_string();
    parse_models_json(&text, Path::new("models.json")).expect("models.json")
}

struct Setup {
    agent: AgentSession,
    events: Arc<Mutex<Vec<Value>>>,
    sessions: PathBuf,
}

impl Setup {
    /// The one session file, parsed.
    fn file_entries(&self) -> Vec<Value> {
        let files: Vec<_> = std::fs::read_dir(&self.sessions)
            .expect("sessions dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        assert_eq!(files.len(), 1, "one session file: {files:?}");
        std::fs::read_to_string(&files[0])
            .expect("read session")
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect()
    }

    fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == kind)
            .cloned()
            .collect()
    }

    /// The id of the message entry with this role and text.
    fn entry_id(&self, role: &str, text: &str) -> String {
        self.agent.with_session(|s| {
            s.entries()
                .iter()
                .enumerate()
                .map(|(i, _)| s.entry_value(i as EntryIdx))
                .find(|e| {
                    e["message"]["role"] == role
                        && e["message"]["content"].to_string().contains(text)
                })
                .and_then(|e| e["id"].as_str().map(str::to_string))
                .unwrap_or_else(|| panic!("no {role} message {text:?}"))
        })
    }
}

fn setup(fake: &FakeLlm, dir: &Path) -> Setup {
    setup_with_delay(fake, dir, 10)
}

fn setup_with_delay(fake: &FakeLlm, dir: &Path, base_delay_ms: u64) -> Setup {
    let reg = registry(&fake.base_url());
    let model = reg.find("fakeoai", "fake-model").cloned();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let cwd = dir.join("cwd");
    let sessions = dir.join("sessions");
    std::fs::create_dir_all(&cwd).expect("cwd");
    std::fs::create_dir_all(&sessions).expect("sessions");
    std::fs::write(cwd.join("notes.md"), "remember the milk\n").expect("notes");
    let header = NewHeader::new(
        pi_formats::id::session_id(),
        pi_formats::time::now_iso(),
        cwd.display().to_string(),
        None,
    );
    let opts = AgentOptions {
        cwd: cwd.clone(),
        registry: reg,
        model,
        thinking: ThinkingLevel::Medium,
        tools: select_builtin_tools(&ToolSelection::default()).expect("tools"),
        prompt: PromptOptions::default(),
        retry: RetrySettings {
            base_delay_ms,
            ..Default::default()
        },
        compaction: CompactionSettings::default(),
        branch_summary: Default::default(),
        api_key: None,
        api_key_resolver: None,
        shell: ShellOptions::default(),
        requests: RequestOptions::default(),
    };
    let store = JsonlStore::open(
        JsonlLayout::Flat {
            dir: sessions.clone(),
        },
        Default::default(),
    );
    let persist = Persistence {
        store: Some(Box::new(store)),
        lazy: Some(LazySession::new(SessionHeader::new(&header))),
        file: None,
    };
    let agent = AgentSession::new(
        Session::create(&header),
        persist,
        opts,
        Arc::new(move |e: crate::protocol::Event| sink_events.lock().unwrap().push(e.to_value())),
    );
    agent.start_new().expect("setup entries");
    Setup {
        agent,
        events,
        sessions,
    }
}

/// Q1 → A1, then Q2 → (read notes.md) → A2; summary requests come after these turns
/// (our summarization prompt is not the one the fake server recognises, so summaries
/// take `turns` entries in order).
fn conversation(summary_turns: Vec<Turn>, after: Vec<Turn>) -> Script {
    let mut turns = vec![
        Turn::text("A1 first answer"),
        Turn {
            text: Some("Reading it.".into()),
            tool_calls: vec![ToolCallSpec {
                name: "read".into(),
                arguments: json!({"path": "notes.md"}),
                id: None,
            }],
            ..Default::default()
        },
        Turn::text("A2 second answer"),
    ];
    turns.extend(summary_turns);
    turns.extend(after);
    Script::turns(turns)
}

async fn two_prompts(s: &Setup) {
    s.agent
        .prompt("Q1 first question", vec![])
        .await
        .expect("Q1");
    s.agent
        .prompt("Q2 second question", vec![])
        .await
        .expect("Q2");
}

fn user_text(request: &Value) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other
                .as_array()
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn navigating_with_a_summary_writes_the_entry_where_pi_does() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start(conversation(
        vec![Turn::text(
            "## Goal\nRead the notes on the abandoned branch.",
        )],
        vec![Turn::text("A3 after the summary")],
    ))
    .await
    .unwrap();
    let s = setup(&fake, dir.path());
    two_prompts(&s).await;
    let a1 = s.entry_id("assistant", "A1 first answer");
    let q2 = s.entry_id("user", "Q2 second question");
    let old_leaf = s.agent.with_session(|x| x.leaf_id().map(str::to_string));

    let out = s
        .agent
        .navigate_tree(
            &q2,
            NavigateOptions {
                summarize: true,
                custom_instructions: Some("the notes file".into()),
                replace_instructions: Some(false),
                label: Some("back-to-a1".into()),
            },
        )
        .await
        .expect("navigate");
    assert!(!out.cancelled && !out.aborted);
    // A user message target: its text goes back to the editor, the leaf to its parent.
    assert_eq!(out.editor_text.as_deref(), Some("Q2 second question"));
    let summary_entry = out.summary_entry.expect("summary entry");

    // The summary request: the summarization system prompt, one user message holding the
    // serialized abandoned branch (tool results left out), the prompt and the focus.
    let requests = fake.requests();
    let request = &requests.last().expect("summary request").body;
    assert_eq!(request["messages"][0]["role"], "system");
    assert_eq!(
        request["messages"][0]["content"].as_str(),
        Some(SUMMARIZATION_SYSTEM_PROMPT)
    );
    assert!(request["tools"].as_array().is_none_or(|t| t.is_empty()));
    let prompt = user_text(request);
    // The target (Q2) is on both branches, so the common ancestor is Q2 itself and the
    // summary covers what came after it, as in Pi.
    assert!(
        prompt.starts_with("<conversation>\n[Assistant]: Reading it.\n\n[Assistant tool calls]: read(path=\"notes.md\")"),
        "{prompt}"
    );
    assert!(!prompt.contains("Q2 second question"), "{prompt}");
    assert!(
        prompt.contains("[Assistant]: A2 second answer\n</conversation>"),
        "{prompt}"
    );
    assert!(!prompt.contains("Q1 first question"), "{prompt}");
    assert!(!prompt.contains("remember the milk"), "{prompt}");
    assert!(prompt.contains("## Goal"), "{prompt}");
    assert!(
        prompt.ends_with("\n\nAdditional focus: the notes file"),
        "{prompt}"
    );

    // The file: branch_summary hangs off A1, remembers the leaf it left, lists the files
    // the branch read, carries the usage, and Pi's key order; then the label on it.
    let entries = s.file_entries();
    let n = entries.len();
    let bs = &entries[n - 2];
    assert_eq!(bs, &summary_entry);
    let keys: Vec<&str> = bs.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "type",
            "id",
            "parentId",
            "timestamp",
            "fromId",
            "summary",
            "details",
            "usage",
            "fromHook"
        ]
    );
    assert_eq!(bs["type"], "branch_summary");
    assert_eq!(bs["parentId"].as_str(), Some(a1.as_str()));
    assert_eq!(bs["fromId"].as_str(), old_leaf.as_deref());
    assert_eq!(bs["fromHook"], false);
    assert_eq!(
        bs["details"],
        json!({"readFiles": ["notes.md"], "modifiedFiles": []})
    );
    assert!(bs["usage"]["totalTokens"].as_u64().is_some(), "{bs}");
    let summary = bs["summary"].as_str().unwrap();
    assert!(summary.starts_with(BRANCH_SUMMARY_PREAMBLE), "{summary}");
    assert!(summary.contains("Read the notes on the abandoned branch."));
    assert!(
        summary.contains("<read-files>\nnotes.md\n</read-files>"),
        "{summary}"
    );
    let label = &entries[n - 1];
    assert_eq!(label["type"], "label");
    assert_eq!(label["parentId"], bs["id"]);
    assert_eq!(label["targetId"], bs["id"]);
    assert_eq!(label["label"], "back-to-a1");

    // The context now ends with the summary, and the next prompt carries it to the model.
    let messages = s.agent.messages();
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles.last(), Some(&"branchSummary"), "{roles:?}");
    assert!(!roles.contains(&"toolResult"), "{roles:?}");
    s.agent.prompt("Q3 again", vec![]).await.expect("Q3");
    let requests = fake.requests();
    let next = user_text(&requests.last().unwrap().body);
    assert!(
        next.contains("Read the notes on the abandoned branch."),
        "{next}"
    );
    assert!(!next.contains("Q2 second question"), "{next}");
    let entries = s.file_entries();
    let q3 = entries
        .iter()
        .find(|e| e["message"]["role"] == "user" && e["message"].to_string().contains("Q3"))
        .expect("Q3 entry");
    // The next message continues after the summary's label (possibly via a system patch).
    let path_to_q3: Vec<&Value> = {
        let mut chain = vec![q3];
        let mut cur = q3;
        while let Some(p) = cur["parentId"].as_str() {
            cur = entries.iter().find(|e| e["id"] == p).expect("parent");
            chain.push(cur);
        }
        chain
    };
    assert!(path_to_q3.iter().any(|e| e["id"] == bs["id"]));
    // No retries were needed.
    assert!(s.events_of("summarization_retry_scheduled").is_empty());

    // Real Pi 1.6.0 (fixtures/realpi, scenario rpc_tree) wrote the same entry shape and sent
    // a request of the same structure.
    let pi = pi_fixture_lines("sessions/rpc_tree_labels_nav.jsonl");
    let pi_bs = pi
        .iter()
        .find(|e| e["type"] == "branch_summary")
        .expect("Pi's branch_summary");
    let pi_keys: Vec<&str> = pi_bs
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, pi_keys);
    let key_set = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(key_set(&bs["details"]), key_set(&pi_bs["details"]));
    assert_eq!(key_set(&bs["usage"]), key_set(&pi_bs["usage"]));
    // Pi's label on the summary follows it directly, as ours does.
    let pi_label = pi
        .iter()
        .find(|e| e["parentId"] == pi_bs["id"])
        .expect("Pi's label");
    assert_eq!(pi_label["type"], "label");
    assert_eq!(pi_label["targetId"], pi_bs["id"]);
    let pi_request = pi_fixture_lines("logs/rpc_tree.requests.jsonl")
        .into_iter()
        .find(|r| r["kind"] == "summary")
        .expect("Pi's summary request")["body"]
        .clone();
    let shape = |body: &Value| -> Vec<String> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let content = match &m["content"] {
                    Value::String(_) => "string".to_string(),
                    Value::Array(parts) => parts
                        .iter()
                        .map(|p| p["type"].as_str().unwrap_or("?"))
                        .collect::<Vec<_>>()
                        .join("+"),
                    _ => "?".into(),
                };
                format!("{}:{content}", m["role"].as_str().unwrap_or("?"))
            })
            .collect()
    };
    let summary_request = &fake.requests()[3].body;
    assert_eq!(shape(summary_request), shape(&pi_request));
    assert!(user_text(&pi_request).starts_with("<conversation>\n"));
    assert_eq!(summary_request["tools"], pi_request["tools"]);
}

fn pi_fixture_lines(rel: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/realpi")
        .join(rel);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("fixture json"))
        .collect()
}

#[tokio::test]
async fn plain_navigation_moves_the_leaf_in_memory_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeLlm::start(conversation(vec![], vec![Turn::text("A3 on a new branch")]))
        .await
        .unwrap();
    let s = setup(&fake, dir.path());
    two_prompts(&s).await;
    let a1 = s.entry_id("assistant", "A1 first answer");
    let leaf = s.agent.with_session(|x| x.leaf_id().map(str::to_string));
    let before = s.file_entries().len();

    // The current leaf: nothing happens.
    let out = s
        .agent
        .navigate_tree(leaf.as_deref().unwrap(), NavigateOptions::default())
        .await
        .unwrap();
    assert_eq!(out, NavigateOutcome::default());

    // An assistant message becomes the leaf itself; nothing is written.
    let out = s
        .agent
        .navigate_tree(&a1, NavigateOptions::default())
        .await
        .unwrap();
    assert_eq!(out.editor_text, None);
    assert_eq!(out.summary_entry, None);
    assert_eq!(s.file_entries().len(), before);
    assert_eq!(
        s.agent.with_session(|x| x.leaf_id().map(str::to_string)),
        Some(a1.clone())
    );

    // The writer is still the same: the next prompt appends below A1.
    s.agent.prompt("Q3 elsewhere", vec![]).await.unwrap();
    let entries = s.file_entries();
    let q3 = entries
        .iter()
        .find(|e| e["message"].to_string().contains("Q3 elsewhere"))
        .expect("Q3");
    let mut cur = q3;
    let mut reached_a1 = false;
    while let Some(p) = cur["parentId"].as_str() {
        if p == a1 {
            reached_a1 = true;
            break;
        }
        cur = entries.iter().find(|e| e["id"] == p).expect("parent");
        assert_ne!(
            cur["message"]["role"], "user",
            "Q2's branch is not on the path"
        );
    }
    assert!(reached_a1);

    // A label without a summary goes on the target; the first user message moves the leaf
    // before the root's children (no summary asked, so none is written).
    let q1 = s.entry_id("user", "Q1 first question");
    let out = s
        .agent
        .navigate_tree(
            &q1,
            NavigateOptions {
                label: Some("start".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.editor_text.as_deref(), Some("Q1 first question"));
    let label = s.file_entries().pop().unwrap();
    assert_eq!(label["type"], "label");
    assert_eq!(label["targetId"].as_str(), Some(q1.as_str()));

    // Unknown targets are refused with Pi's message.
    let err = s
        .agent
        .navigate_tree("nope", NavigateOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Entry nope not found");
}

#[tokio::test]
async fn transient_summary_errors_are_retried_with_events() {
    let dir = tempfile::tempdir().unwrap();
    let overloaded = Turn {
        http_error: Some(HttpError {
            status: 503,
            body: Some(json!({"error": {"message": "fake overloaded"}})),
        }),
        ..Default::default()
    };
    let fake = FakeLlm::start(conversation(
        vec![overloaded, Turn::text("## Goal\nSummary after a retry.")],
        vec![],
    ))
    .await
    .unwrap();
    let s = setup(&fake, dir.path());
    two_prompts(&s).await;
    let a1 = s.entry_id("assistant", "A1 first answer");
    let out = s
        .agent
        .navigate_tree(
            &a1,
            NavigateOptions {
                summarize: true,
                ..Default::default()
            },
        )
        .await
        .expect("navigate");
    let entry = out.summary_entry.expect("summary");
    assert!(entry["summary"]
        .as_str()
        .unwrap()
        .contains("Summary after a retry."));
    // The assistant message was the target: the summary hangs off it.
    assert_eq!(entry["parentId"].as_str(), Some(a1.as_str()));

    let kinds: Vec<String> = s
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| e["type"].as_str())
        .filter(|t| t.starts_with("summarization_retry"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        kinds,
        [
            "summarization_retry_scheduled",
            "summarization_retry_attempt_start",
            "summarization_retry_finished"
        ]
    );
    let scheduled = &s.events_of("summarization_retry_scheduled")[0];
    assert_eq!(scheduled["attempt"], 1);
    assert_eq!(scheduled["maxAttempts"], 3);
    assert_eq!(scheduled["delayMs"], 10);
    assert!(
        scheduled["errorMessage"]
            .as_str()
            .unwrap()
            .contains("overloaded"),
        "{scheduled}"
    );
    let keys: Vec<&str> = scheduled
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["type", "attempt", "maxAttempts", "delayMs", "errorMessage"]
    );
    assert_eq!(
        s.events_of("summarization_retry_attempt_start")[0],
        json!({"type": "summarization_retry_attempt_start", "source": "branchSummary"})
    );
    assert_eq!(
        s.events_of("summarization_retry_finished")[0],
        json!({"type": "summarization_retry_finished"})
    );
}

#[tokio::test]
async fn aborting_the_summary_leaves_the_session_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let slow = Turn {
        text: Some("## Goal\nnever used".into()),
        delay: Some(30.0),
        ..Default::default()
    };
    let fake = FakeLlm::start(conversation(vec![slow], vec![]))
        .await
        .unwrap();
    let s = setup(&fake, dir.path());
    two_prompts(&s).await;
    let q2 = s.entry_id("user", "Q2 second question");
    let leaf = s.agent.with_session(|x| x.leaf_id().map(str::to_string));
    let before = s.file_entries();
    let requests_before = fake.requests().len();

    let agent = s.agent.clone();
    let task = tokio::spawn(async move {
        agent
            .navigate_tree(
                &q2,
                NavigateOptions {
                    summarize: true,
                    ..Default::default()
                },
            )
            .await
    });
    // Wait until the summary request reached the server, then abort.
    while fake.requests().len() == requests_before {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(s.agent.is_navigating());
    assert!(
        s.agent.is_compacting(),
        "Pi counts a navigation as compacting"
    );
    s.agent.abort_branch_summary();
    let out = task.await.expect("join").expect("navigate");
    assert!(out.cancelled && out.aborted, "{out:?}");
    assert_eq!(out.summary_entry, None);
    assert!(!s.agent.is_navigating());
    assert_eq!(s.file_entries(), before);
    assert_eq!(
        s.agent.with_session(|x| x.leaf_id().map(str::to_string)),
        leaf
    );
}

/// The scenario of `fixtures/realpi-branch-nav` (recorded with real Pi 1.6.0), replayed:
/// navigating to Q2 with a summary and custom instructions, through a transient 503.
#[tokio::test]
async fn replaying_pi_s_recorded_navigation_gives_the_same_structure() {
    let pi_session = branch_nav_fixture("session.jsonl");
    let pi_requests = branch_nav_fixture("requests.jsonl");
    let pi_rpc = branch_nav_fixture("rpc.jsonl");
    let pi_summary_text = "## Goal\nRead the notes (summary from the fake server).";

    let dir = tempfile::tempdir().unwrap();
    let overloaded = Turn {
        http_error: Some(HttpError {
            status: 503,
            body: Some(json!({"error": {"message": "fake overloaded"}})),
        }),
        ..Default::default()
    };
    let mut turns = vec![
        Turn::text("A1: first answer."),
        Turn {
            text: Some("Reading.".into()),
            tool_calls: vec![ToolCallSpec {
                name: "read".into(),
                arguments: json!({"path": "notes.md"}),
                id: None,
            }],
            ..Default::default()
        },
        Turn::text("A2: second answer."),
    ];
    turns.extend([overloaded, Turn::text(pi_summary_text)]);
    turns.push(Turn::text("A3: after the summary."));
    let fake = FakeLlm::start(Script::turns(turns)).await.unwrap();
    let s = setup_with_delay(&fake, dir.path(), 50);
    s.agent.prompt("Q1 first question", vec![]).await.unwrap();
    s.agent.prompt("Q2 second question", vec![]).await.unwrap();
    let q2 = s.entry_id("user", "Q2 second question");
    let out = s
        .agent
        .navigate_tree(
            &q2,
            NavigateOptions {
                summarize: true,
                custom_instructions: Some("the notes file".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(out.editor_text.as_deref(), Some("Q2 second question"));
    s.agent.prompt("Q3 again", vec![]).await.unwrap();
    let ours = s.file_entries();

    // The tree from the first user message on: kinds and parents (as positions) agree.
    let shape = |entries: &[Value]| -> Vec<String> {
        let start = entries
            .iter()
            .position(|e| e["message"]["role"] == "user")
            .expect("a user message");
        let tail = &entries[start..];
        tail.iter()
            .map(|e| {
                let kind = match e["message"]["role"].as_str() {
                    Some(role) => role.to_string(),
                    None => e["type"].as_str().unwrap_or("?").to_string(),
                };
                let parent = tail
                    .iter()
                    .position(|p| p["id"] == e["parentId"])
                    .map_or("-".to_string(), |i| i.to_string());
                format!("{kind}<-{parent}")
            })
            .collect()
    };
    assert_eq!(shape(&ours), shape(&pi_session));

    // The branch_summary entry: same keys, details, file lists; the same text after the
    // (differently worded) preamble.
    let bs_of = |entries: &[Value]| -> Value {
        entries
            .iter()
            .find(|e| e["type"] == "branch_summary")
            .cloned()
            .expect("branch_summary")
    };
    let (ours_bs, pi_bs) = (bs_of(&ours), bs_of(&pi_session));
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&ours_bs), keys(&pi_bs));
    assert_eq!(ours_bs["details"], pi_bs["details"]);
    assert_eq!(ours_bs["fromHook"], pi_bs["fromHook"]);
    let after_preamble = |bs: &Value| -> String {
        let text = bs["summary"].as_str().unwrap();
        text[text.find(pi_summary_text).expect("model text in summary")..].to_string()
    };
    assert_eq!(after_preamble(&ours_bs), after_preamble(&pi_bs));

    // The summary request: the same serialized conversation and the same focus line.
    let pi_summary_request = pi_requests
        .iter()
        .rev()
        .find(|r| r["kind"] == "summary")
        .expect("Pi's summary request")["body"]
        .clone();
    let requests = fake.requests();
    let ours_summary_request = &requests[requests.len() - 2].body;
    let conversation = |body: &Value| -> String {
        let text = user_text(body);
        let end = text.find("</conversation>").expect("conversation block");
        text[..end].to_string()
    };
    assert_eq!(
        conversation(ours_summary_request),
        conversation(&pi_summary_request)
    );
    assert!(user_text(ours_summary_request).ends_with("\n\nAdditional focus: the notes file"));
    assert!(user_text(&pi_summary_request).ends_with("\n\nAdditional focus: the notes file"));
    for key in ["max_completion_tokens", "reasoning_effort", "tools"] {
        assert_eq!(
            ours_summary_request[key], pi_summary_request[key],
            "{key} of the summary request"
        );
    }

    // The retry events: same sequence and fields (the error text is each server's own).
    let strip = |mut e: Value| {
        if let Some(m) = e.as_object_mut() {
            if let Some(msg) = m.get_mut("errorMessage") {
                assert!(msg.as_str().unwrap_or("").contains("overloaded"), "{msg}");
                *msg = Value::Null;
            }
        }
        e
    };
    let pi_retry: Vec<Value> = pi_rpc
        .iter()
        .filter_map(|r| r.get("rec"))
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("summarization_retry"))
        })
        .cloned()
        .map(strip)
        .collect();
    let ours_retry: Vec<Value> = s
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("summarization_retry"))
        })
        .cloned()
        .map(strip)
        .collect();
    assert_eq!(pi_retry.len(), 3);
    assert_eq!(ours_retry, pi_retry);
}

fn branch_nav_fixture(name: &str) -> Vec<Value> {
    pi_fixture_lines(&format!("../realpi-branch-nav/{name}"))
}
