//! Snapshot tests of each view (ratatui TestBackend) and tests of the update function.

use super::app::{update, App, Effect, Msg};
use super::dialogs::{Dialog, SessionRow};
use super::driver::{
    AgentDriver, AgentEvent, BranchSummary, FakeDriver, ModelInfo, ThinkingLevel, Usage,
};
use super::render;
use super::transcript::Item;
use super::tree::{tests::sample_session, Filter, TreeNav};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::PathBuf;

fn models() -> Vec<ModelInfo> {
    let m = |p: &str, id: &str, r: bool, w: u64| ModelInfo {
        provider: p.into(),
        id: id.into(),
        name: id.into(),
        context_window: w,
        reasoning: r,
    };
    vec![
        m("anthropic", "claude-sonnet-4-5", true, 200_000),
        m("anthropic", "claude-haiku-4-5", false, 200_000),
        m("openai", "gpt-5", true, 400_000),
        m("google", "gemini-2.5-pro", true, 1_000_000),
    ]
}

fn app() -> App {
    let mut a = App::new(PathBuf::from("/work/project"));
    a.models = models();
    a.model = a.models.first().cloned();
    a.thinking = ThinkingLevel::Medium;
    a.footer.session_name = Some("refactor".into());
    a
}

fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ctrl(c: char) -> Msg {
    Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

fn typed(app: &mut App, text: &str) -> Vec<Effect> {
    let mut out = Vec::new();
    for c in text.chars() {
        out.extend(update(app, key(KeyCode::Char(c))));
    }
    out
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = match Terminal::new(TestBackend::new(w, h)) {
        Ok(t) => t,
        Err(e) => panic!("test backend: {e}"),
    };
    if let Err(e) = t.draw(|f| render::draw(app, f)) {
        panic!("draw: {e}");
    }
    format!("{}", t.backend())
}

/// A conversation with thinking, a tool call with long output, a failing tool and an error.
fn conversation(app: &mut App) {
    let events = vec![
        AgentEvent::MessageStart { role: "user".into(), text: "Why does the build fail?".into() },
        AgentEvent::MessageStart { role: "assistant".into(), text: String::new() },
        AgentEvent::ThinkingDelta("The user wants the build fixed.\nLet me read Cargo.toml first.".into()),
        AgentEvent::TextDelta("Let me look at the manifest.".into()),
        AgentEvent::MessageEnd { role: "assistant".into(), usage: Some(Usage { input: 1200, output: 80, cache_read: 15000, cache_write: 900, cost: 0.0123 }), error: None },
        AgentEvent::ToolStart { id: "t1".into(), name: "read".into(), args: r#"{"path":"Cargo.toml"}"#.into() },
        AgentEvent::ToolEnd { id: "t1".into(), output: (1..=9).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n"), is_error: false },
        AgentEvent::ToolStart { id: "t2".into(), name: "bash".into(), args: r#"{"command":"cargo build"}"#.into() },
        AgentEvent::ToolEnd { id: "t2".into(), output: "error[E0432]: unresolved import".into(), is_error: true },
        AgentEvent::MessageStart { role: "assistant".into(), text: String::new() },
        AgentEvent::TextDelta("## Fix\n\nAdd the **missing** crate:\n\n```rust\nuse foo::bar; // needed\nlet n = 42;\n```\n\n- run `cargo build`\n- done".into()),
        AgentEvent::MessageEnd { role: "assistant".into(), usage: Some(Usage { input: 1500, output: 120, cache_read: 16000, cache_write: 0, cost: 0.02 }), error: None },
    ];
    for e in events {
        update(app, Msg::Agent(e));
    }
}

#[test]
fn snapshot_transcript_collapsed() {
    let mut a = app();
    conversation(&mut a);
    // ctrl+t hides thinking blocks (shown by default, as in Pi).
    update(&mut a, ctrl('t'));
    assert!(!a.flags.show_thinking);
    insta::assert_snapshot!(screen(&a, 70, 44));
}

#[test]
fn snapshot_transcript_expanded_thinking_and_tools() {
    let mut a = app();
    conversation(&mut a);
    update(&mut a, ctrl('o'));
    assert!(a.flags.show_thinking && a.flags.tools_expanded);
    insta::assert_snapshot!(screen(&a, 70, 50));
}

#[test]
fn snapshot_startup_header_and_footer() {
    let mut a = app();
    a.push_header(&[
        ("AGENTS.md".into(), "context".into()),
        ("skill:review".into(), "skill".into()),
    ]);
    a.footer.totals = Usage {
        input: 12_345,
        output: 678,
        cache_read: 1_500_000,
        cache_write: 2_000,
        cost: 1.234,
    };
    a.footer.context_tokens = 50_000;
    a.footer.auto_compact = true;
    a.footer.git_branch = Some("main".into());
    insta::assert_snapshot!(screen(&a, 70, 24));
}

#[test]
fn quiet_startup_hides_the_header() {
    let mut a = app();
    a.settings.quiet_startup = true;
    a.push_header(&[]);
    assert!(a.transcript.is_empty());
}

#[test]
fn snapshot_working_with_queue_and_multiline_editor() {
    let mut a = app();
    typed(&mut a, "first");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Prompt("first".into())]
    );
    typed(&mut a, "steer me");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Steer("steer me".into())]
    );
    typed(&mut a, "later");
    let alt_enter = Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    assert_eq!(
        update(&mut a, alt_enter),
        vec![Effect::FollowUp("later".into())]
    );
    typed(&mut a, "line one");
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT)),
    );
    typed(&mut a, "line two");
    insta::assert_snapshot!(screen(&a, 60, 16));
}

#[test]
fn escape_aborts_and_restores_the_queue() {
    let mut a = app();
    typed(&mut a, "go");
    update(&mut a, key(KeyCode::Enter));
    typed(&mut a, "one");
    update(&mut a, key(KeyCode::Enter));
    typed(&mut a, "two");
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT)),
    );
    typed(&mut a, "draft");
    assert_eq!(update(&mut a, key(KeyCode::Esc)), vec![Effect::Abort]);
    assert_eq!(a.editor.text(), "one\n\ntwo\n\ndraft");
    assert!(a.steering.is_empty() && a.follow_up.is_empty());
}

#[test]
fn alt_up_pulls_queued_messages_back() {
    let mut a = app();
    a.working = true;
    typed(&mut a, "queued");
    update(&mut a, key(KeyCode::Enter));
    let out = update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::Up, KeyModifiers::ALT)),
    );
    assert_eq!(out, vec![Effect::ClearQueue]);
    assert_eq!(a.editor.text(), "queued");
}

#[test]
fn delivered_queue_messages_leave_the_queue() {
    let mut a = app();
    a.working = true;
    typed(&mut a, "steer");
    update(&mut a, key(KeyCode::Enter));
    assert_eq!(a.steering, vec!["steer".to_string()]);
    update(
        &mut a,
        Msg::Agent(AgentEvent::MessageStart {
            role: "user".into(),
            text: "steer".into(),
        }),
    );
    assert!(a.steering.is_empty());
}

#[test]
fn thinking_model_and_quit_keys() {
    let mut a = app();
    let out = update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT)),
    );
    assert_eq!(out, vec![Effect::SetThinking(ThinkingLevel::High)]);
    let out = update(&mut a, ctrl('p'));
    assert_eq!(
        a.model.as_ref().map(|m| m.id.as_str()),
        Some("claude-haiku-4-5")
    );
    assert_eq!(
        a.thinking,
        ThinkingLevel::Off,
        "a model without reasoning has thinking off"
    );
    assert!(matches!(out.as_slice(), [Effect::SetModel(_)]));
    update(
        &mut a,
        Msg::Key(KeyEvent::new(
            KeyCode::Char('P'),
            KeyModifiers::CONTROL | KeyModifiers::SHIFT,
        )),
    );
    assert_eq!(
        a.model.as_ref().map(|m| m.id.as_str()),
        Some("claude-sonnet-4-5")
    );
    // Scoped models restrict the cycle.
    a.scoped = vec!["openai/gpt-5".into(), "anthropic/claude-sonnet-4-5".into()];
    update(&mut a, ctrl('p'));
    assert_eq!(a.model.as_ref().map(|m| m.id.as_str()), Some("gpt-5"));

    typed(&mut a, "text");
    assert!(update(&mut a, ctrl('c')).is_empty());
    assert!(a.editor.is_empty());
    assert!(update(&mut a, ctrl('c')).is_empty());
    assert_eq!(update(&mut a, ctrl('c')), vec![Effect::Quit]);
    assert_eq!(update(&mut a, ctrl('d')), vec![Effect::Quit]);
}

#[test]
fn bash_commands_and_history() {
    let mut a = app();
    typed(&mut a, "!ls -la");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::RunBash {
            command: "ls -la".into(),
            excluded: false
        }]
    );
    typed(&mut a, "!!git status");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::RunBash {
            command: "git status".into(),
            excluded: true
        }]
    );
    update(&mut a, key(KeyCode::Up));
    assert_eq!(a.editor.text(), "!!git status");
    update(&mut a, Msg::Paste("pasted\r\ntext".into()));
    assert_eq!(a.editor.text(), "!!git statuspasted\ntext");
}

#[test]
fn snapshot_slash_completion() {
    let mut a = app();
    typed(&mut a, "/s");
    let names: Vec<&str> = a
        .completion
        .as_ref()
        .map(|c| c.items.iter().map(|(n, _)| n.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["/scoped-models", "/settings", "/session"]);
    insta::assert_snapshot!(screen(&a, 70, 14));
    update(&mut a, key(KeyCode::Down));
    update(&mut a, key(KeyCode::Enter));
    assert!(matches!(a.dialog, Some(Dialog::Settings(_))));
}

#[test]
fn slash_tab_then_args() {
    let mut a = app();
    typed(&mut a, "/comp");
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(a.editor.text(), "/compact ");
    typed(&mut a, "keep the API notes");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Compact(Some("keep the API notes".into()))]
    );
    typed(&mut a, "/tree");
    update(&mut a, key(KeyCode::Esc));
    assert_eq!(update(&mut a, key(KeyCode::Enter)), vec![Effect::OpenTree]);
}

#[test]
fn at_file_completion_is_fuzzy() {
    let mut a = app();
    update(
        &mut a,
        Msg::FilesIndexed(vec![
            "src/main.rs".into(),
            "src/tui/app.rs".into(),
            "README.md".into(),
        ]),
    );
    typed(&mut a, "look at @tapp");
    let first = a
        .completion
        .as_ref()
        .and_then(|c| c.items.first())
        .map(|(n, _)| n.clone());
    assert_eq!(first.as_deref(), Some("@src/tui/app.rs"));
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(a.editor.text(), "look at @src/tui/app.rs ");
}

#[test]
fn tab_completes_paths() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    };
    for p in ["src/lib.rs", "src/library/x.rs", "README.md"] {
        let path = dir.path().join(p);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::write(path, "");
    }
    let mut a = App::new(dir.path().to_path_buf());
    typed(&mut a, "see RE");
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(a.editor.text(), "see README.md ");
    typed(&mut a, "sr");
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(a.editor.text(), "see README.md src/");
    typed(&mut a, "li");
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(a.editor.text(), "see README.md src/lib");
    assert_eq!(a.completion.as_ref().map(|c| c.items.len()), Some(2));
}

#[test]
fn snapshot_model_picker_with_search() {
    let mut a = app();
    update(&mut a, ctrl('l'));
    insta::assert_snapshot!("model_picker", screen(&a, 60, 18));
    typed(&mut a, "gpt");
    insta::assert_snapshot!("model_picker_search", screen(&a, 60, 18));
    let out = update(&mut a, key(KeyCode::Enter));
    assert!(matches!(out.as_slice(), [Effect::SetModel(m)] if m.id == "gpt-5"));
    assert!(a.dialog.is_none());
}

#[test]
fn snapshot_settings() {
    let mut a = app();
    typed(&mut a, "/settings");
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Enter));
    update(&mut a, key(KeyCode::Down));
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::SaveSetting {
            key: "theme".into(),
            value: serde_json::json!("light")
        }]
    );
    assert_eq!(a.theme.name, "light");
    insta::assert_snapshot!(screen(&a, 60, 16));
}

fn tree_app() -> App {
    let mut a = app();
    a.open_tree(TreeNav::from_session(&sample_session()));
    a
}

#[test]
fn snapshot_tree_each_filter() {
    let mut a = tree_app();
    for (i, f) in Filter::ALL.iter().enumerate() {
        if let Some(Dialog::Tree(t)) = &a.dialog {
            assert_eq!(t.filter, *f);
        }
        insta::assert_snapshot!(format!("tree_filter_{}", f.name()), screen(&a, 72, 16));
        if i + 1 < Filter::ALL.len() {
            update(&mut a, ctrl('o'));
        }
    }
    update(&mut a, ctrl('o'));
    assert!(matches!(&a.dialog, Some(Dialog::Tree(t)) if t.filter == Filter::Default));
}

#[test]
fn snapshot_tree_label_and_timestamps() {
    let mut a = tree_app();
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::Char('T'), KeyModifiers::SHIFT)),
    );
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::Char('L'), KeyModifiers::SHIFT)),
    );
    typed(&mut a, "tip");
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::SetLabel {
            id: "b3".into(),
            label: Some("tip".into())
        }]
    );
    insta::assert_snapshot!(screen(&a, 72, 16));
}

#[test]
fn tree_user_message_goes_to_editor_after_three_way_prompt() {
    let mut a = tree_app();
    // From b3 (selected) up to b2, the "try again" user message.
    update(&mut a, key(KeyCode::Up));
    update(&mut a, key(KeyCode::Enter));
    assert!(matches!(a.dialog, Some(Dialog::BranchPrompt(_))));
    let prompt = screen(&a, 60, 14);
    insta::assert_snapshot!("branch_prompt", prompt);
    // Escape goes back to the tree, not out.
    update(&mut a, key(KeyCode::Esc));
    assert!(matches!(a.dialog, Some(Dialog::Tree(_))));
    update(&mut a, key(KeyCode::Enter));
    update(&mut a, key(KeyCode::Down));
    update(&mut a, key(KeyCode::Down));
    update(&mut a, key(KeyCode::Enter));
    typed(&mut a, "the API");
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::NavigateTree {
            entry: "b2".into(),
            summary: BranchSummary::SummarizeWithFocus("the API".into())
        }]
    );
    assert!(a.dialog.is_none());
    // While the branch is summarized: the status line, and escape aborts.
    assert!(a.summarizing_branch);
    insta::assert_snapshot!("summarizing_branch", screen(&a, 60, 8));
    // A prompt now would land on the branch being left: it stays in the editor.
    typed(&mut a, "later");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert_eq!(a.editor.text(), "later");
    a.editor.take();
    assert_eq!(update(&mut a, key(KeyCode::Esc)), vec![Effect::Abort]);
    // An aborted summary goes back to the tree.
    let out = update(&mut a, Msg::Agent(AgentEvent::TreeNavigationAborted));
    assert_eq!(out, vec![Effect::OpenTree]);
    assert!(!a.summarizing_branch);
    // Done: the transcript is rebuilt from the new position (with the summary), and the
    // re-edited message's text comes back to the editor.
    a.summarizing_branch = true;
    update(
        &mut a,
        Msg::Agent(AgentEvent::TreeNavigated {
            messages: vec![
                serde_json::json!({"role": "user", "content": "fix the bug", "timestamp": 1}),
                serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "Another approach."}], "timestamp": 2}),
                serde_json::json!({"role": "branchSummary", "summary": "The user explored another branch.\n\n## Goal\nFix it", "fromId": "b3", "timestamp": 3}),
            ],
            editor_text: Some("try again".into()),
        }),
    );
    assert!(!a.summarizing_branch);
    assert_eq!(a.editor.text(), "try again");
    insta::assert_snapshot!("after_branch_summary", screen(&a, 60, 16));
    a.flags.tools_expanded = true;
    let expanded = screen(&a, 60, 20);
    assert!(expanded.contains("Branch Summary"), "{expanded}");
    assert!(expanded.contains("Fix it"), "{expanded}");
}

#[test]
fn tree_skip_prompt_and_same_leaf() {
    let mut a = tree_app();
    a.settings.skip_branch_prompt = true;
    // Selecting the current leaf changes nothing.
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(a.dialog.is_none());
    a.open_tree(TreeNav::from_session(&sample_session()));
    for _ in 0..3 {
        update(&mut a, key(KeyCode::Up));
    }
    // b3 → b2 → b1 → a4
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::NavigateTree {
            entry: "a4".into(),
            summary: BranchSummary::None
        }]
    );
}

fn resume_rows() -> Vec<SessionRow> {
    let row = |id: &str, name: Option<&str>, first: &str, age_min: i64, n: u64| SessionRow {
        id: id.into(),
        location: format!("/home/u/.pi/agent/sessions/--work--/{id}.jsonl"),
        cwd: "/work/project".into(),
        name: name.map(str::to_string),
        modified_ms: 1_000_000_000 - age_min * 60_000,
        message_count: n,
        first_message: first.into(),
    };
    vec![
        row("s1", None, "Fix the flaky login test", 5, 12),
        row(
            "s2",
            Some("tui work"),
            "Build the ratatui interface",
            90,
            40,
        ),
        row(
            "s3",
            None,
            "Explain the compaction cut point",
            3 * 24 * 60,
            8,
        ),
        row(
            "s4",
            Some("release"),
            "Prepare the 1.0 release notes",
            2 * 60,
            3,
        ),
    ]
}

#[test]
fn snapshot_resume_with_search() {
    let mut a = app();
    a.open_resume(resume_rows(), 1_000_000_000);
    insta::assert_snapshot!("resume", screen(&a, 80, 14));
    typed(&mut a, "rat");
    insta::assert_snapshot!("resume_search", screen(&a, 80, 14));
    update(&mut a, key(KeyCode::Backspace));
    update(&mut a, key(KeyCode::Backspace));
    update(&mut a, key(KeyCode::Backspace));
    update(&mut a, ctrl('n'));
    update(&mut a, ctrl('p'));
    insta::assert_snapshot!("resume_named_paths", screen(&a, 80, 14));
}

#[test]
fn resume_rename_delete_and_select() {
    let mut a = app();
    a.open_resume(resume_rows(), 1_000_000_000);
    update(&mut a, ctrl('r'));
    for _ in 0..10 {
        update(&mut a, key(KeyCode::Backspace));
    }
    typed(&mut a, "login");
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::RenameSession {
            location: "/home/u/.pi/agent/sessions/--work--/s1.jsonl".into(),
            name: "login".into()
        }]
    );
    update(&mut a, ctrl('d'));
    // Any key but y/enter cancels.
    assert!(update(&mut a, key(KeyCode::Char('n'))).is_empty());
    update(&mut a, ctrl('d'));
    let out = update(&mut a, key(KeyCode::Char('y')));
    assert_eq!(
        out,
        vec![Effect::DeleteSession(
            "/home/u/.pi/agent/sessions/--work--/s1.jsonl".into()
        )]
    );
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::Resume(
            "/home/u/.pi/agent/sessions/--work--/s2.jsonl".into()
        )]
    );
}

#[test]
fn snapshot_hotkeys() {
    let mut a = app();
    typed(&mut a, "/hotkeys");
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Enter));
    insta::assert_snapshot!(screen(&a, 60, 20));
}

#[test]
fn fake_driver_round_trip() {
    let mut driver = FakeDriver {
        model_list: models(),
        session: Some(sample_session()),
        ..FakeDriver::default()
    };
    let mut a = app();
    typed(&mut a, "hello");
    for e in update(&mut a, key(KeyCode::Enter)) {
        if let Effect::Prompt(t) = e {
            driver.prompt(&t);
        }
    }
    for ev in driver.poll_events() {
        update(&mut a, Msg::Agent(ev));
    }
    assert!(!a.working);
    assert_eq!(
        a.transcript.items().last(),
        Some(&Item::Assistant {
            text: "echo: hello".into(),
            thinking: String::new(),
            error: None
        })
    );
    assert_eq!(a.footer.totals.input, 10);
    assert!(driver.navigate_tree("a4", &BranchSummary::None).is_ok());
    assert_eq!(
        driver.poll_events(),
        vec![AgentEvent::TreeNavigated {
            messages: vec![],
            editor_text: None
        }]
    );
    assert_eq!(
        driver
            .session
            .as_ref()
            .and_then(|s| s.leaf_id().map(str::to_string))
            .as_deref(),
        Some("a4")
    );
}

#[test]
fn pi_json_events_parse() {
    let ev = |v: serde_json::Value| AgentEvent::from_pi_json(&v);
    assert_eq!(
        ev(
            serde_json::json!({"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"hi"}})
        ),
        Some(AgentEvent::TextDelta("hi".into()))
    );
    assert_eq!(
        ev(
            serde_json::json!({"type":"tool_execution_end","toolCallId":"c","toolName":"bash","result":{"content":[{"type":"text","text":"ok"}]},"isError":false})
        ),
        Some(AgentEvent::ToolEnd {
            id: "c".into(),
            output: "ok".into(),
            is_error: false
        })
    );
    assert_eq!(
        ev(
            serde_json::json!({"type":"message_end","message":{"role":"assistant","usage":{"input":3,"output":4,"cacheRead":5,"cacheWrite":6,"cost":{"total":0.5}},"stopReason":"stop"}})
        ),
        Some(AgentEvent::MessageEnd {
            role: "assistant".into(),
            usage: Some(Usage {
                input: 3,
                output: 4,
                cache_read: 5,
                cache_write: 6,
                cost: 0.5
            }),
            error: None
        })
    );
    assert_eq!(
        ev(serde_json::json!({"type":"queue_update","steering":["a"],"followUp":[]})),
        Some(AgentEvent::QueueUpdate {
            steering: vec!["a".into()],
            follow_up: vec![]
        })
    );
    assert_eq!(ev(serde_json::json!({"type":"unknown"})), None);
}

#[test]
fn long_transcript_renders_its_tail() {
    let mut a = app();
    for i in 0..10_000 {
        a.transcript.push(if i % 2 == 0 {
            Item::User(format!("question {i}"))
        } else {
            Item::Assistant {
                text: format!("answer **{i}**"),
                thinking: String::new(),
                error: None,
            }
        });
    }
    let s = screen(&a, 50, 12);
    assert!(s.contains("answer 9999"), "{s}");
    // Scrolling up shows older items.
    a.scroll = 2;
    let s = screen(&a, 50, 12);
    assert!(
        s.contains("question 9998") && !s.contains("answer 9999"),
        "{s}"
    );
    // A resize reflows.
    a.scroll = 0;
    assert!(screen(&a, 20, 12).contains("answer 9999"));
}

#[test]
fn snapshot_loaded_session_messages() {
    let mut a = app();
    a.push_header(&[]);
    let messages = serde_json::json!([
        {"role": "user", "content": "List the files", "timestamp": 1},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Use ls."},
            {"type": "text", "text": "Listing."},
            {"type": "toolCall", "id": "c1", "name": "ls", "arguments": {"path": "."}}
        ], "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.001}}, "stopReason": "toolUse"},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "ls", "content": [{"type": "text", "text": "a.rs\nb.rs"}], "isError": false},
        {"role": "assistant", "content": [{"type": "text", "text": "Two files."}], "usage": {"input": 150, "output": 5, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.002}}, "stopReason": "stop"}
    ]);
    let list = messages.as_array().cloned().unwrap_or_default();
    a.load_messages(&list);
    assert!(
        matches!(a.transcript.items().first(), Some(Item::Header(_))),
        "the header stays"
    );
    assert_eq!(a.footer.totals.input, 250);
    assert_eq!(a.last_assistant.as_deref(), Some("Two files."));
    update(&mut a, key(KeyCode::Up));
    assert_eq!(
        a.editor.text(),
        "List the files",
        "history holds the session's prompts"
    );
    update(&mut a, ctrl('c'));
    insta::assert_snapshot!(screen(&a, 60, 40));
}

#[test]
fn double_escape_opens_the_tree_when_idle() {
    let mut a = app();
    assert!(update(&mut a, key(KeyCode::Esc)).is_empty());
    assert_eq!(update(&mut a, key(KeyCode::Esc)), vec![Effect::OpenTree]);
    // Another key in between disarms it.
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Left));
    assert!(update(&mut a, key(KeyCode::Esc)).is_empty());
}

#[test]
fn export_and_clone_commands() {
    let mut a = app();
    typed(&mut a, "/export out.md");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Export(Some("out.md".into()))]
    );
    typed(&mut a, "/clone");
    update(&mut a, key(KeyCode::Esc));
    assert_eq!(update(&mut a, key(KeyCode::Enter)), vec![Effect::Clone]);
}

#[test]
fn summarization_retries_show_as_notices() {
    let ev = AgentEvent::from_pi_json(&serde_json::json!({
        "type": "summarization_retry_scheduled", "attempt": 1, "maxAttempts": 3,
        "delayMs": 2000, "errorMessage": "503 overloaded"}));
    assert_eq!(
        ev,
        Some(AgentEvent::Notice(
            "503 overloaded (retrying summary 1/3 in 2s)".into()
        ))
    );
    for kind in [
        "summarization_retry_attempt_start",
        "summarization_retry_finished",
    ] {
        assert_eq!(
            AgentEvent::from_pi_json(&serde_json::json!({"type": kind, "source": "branchSummary"})),
            None
        );
    }
    // The fake driver resolves a user message like Pi: leaf on its parent, text back.
    let mut driver = FakeDriver {
        session: Some(sample_session()),
        ..Default::default()
    };
    driver
        .navigate_tree("b2", &BranchSummary::Summarize)
        .expect("navigate");
    assert_eq!(
        driver.session.as_ref().and_then(|s| s.leaf_id()),
        Some("b1")
    );
    assert_eq!(
        driver.poll_events(),
        vec![AgentEvent::TreeNavigated {
            messages: vec![],
            editor_text: Some("try again".into())
        }]
    );
    assert!(driver.navigate_tree("zz", &BranchSummary::None).is_err());
}
