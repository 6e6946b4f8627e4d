//! Snapshot tests of each view (ratatui TestBackend) and tests of the update function.

use super::app::{update, App, Effect, Msg};
use super::dialogs::{Dialog, SessionRow};
use super::driver::{
    AgentDriver, AgentEvent, BranchSummary, Dispatched, FakeDriver, ModelInfo, ThinkingLevel, Usage,
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
        xhigh: id == "gpt-5",
        is_virtual: false,
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

#[test]
fn snapshot_trust_prompt() {
    let prompt = super::startup::trust_prompt(std::path::Path::new("/work/project"));
    let theme = super::theme::Theme::dark();
    let mut t = match Terminal::new(TestBackend::new(80, 16)) {
        Ok(t) => t,
        Err(e) => panic!("test backend: {e}"),
    };
    if let Err(e) = t.draw(|f| super::startup::draw(&theme, &prompt, f.area(), f.buffer_mut())) {
        panic!("draw: {e}");
    }
    insta::assert_snapshot!(format!("{}", t.backend()));
}

/// A conversation with thinking, a tool call with long output, a failing tool and an error.
fn conversation(app: &mut App) {
    let events = vec![
        AgentEvent::MessageStart { role: "user".into(), text: "Why does the build fail?".into() },
        AgentEvent::MessageStart { role: "assistant".into(), text: String::new() },
        AgentEvent::ThinkingDelta("The user wants the build fixed.\nLet me read Cargo.toml first.".into()),
        AgentEvent::TextDelta("Let me look at the manifest.".into()),
        AgentEvent::MessageEnd { role: "assistant".into(), usage: Some(Usage { input: 1200, output: 80, cache_read: 15000, cache_write: 900, cost: 0.0123 }), error: None, dispatched: None },
        AgentEvent::ToolStart { id: "t1".into(), name: "read".into(), args: r#"{"path":"Cargo.toml"}"#.into() },
        AgentEvent::ToolEnd { id: "t1".into(), output: (1..=9).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n"), is_error: false, diff: None },
        AgentEvent::ToolStart { id: "t2".into(), name: "bash".into(), args: r#"{"command":"cargo build"}"#.into() },
        AgentEvent::ToolEnd { id: "t2".into(), output: "error[E0432]: unresolved import".into(), is_error: true, diff: None },
        AgentEvent::MessageStart { role: "assistant".into(), text: String::new() },
        AgentEvent::TextDelta("## Fix\n\nAdd the **missing** crate:\n\n```rust\nuse foo::bar; // needed\nlet n = 42;\n```\n\n- run `cargo build`\n- done".into()),
        AgentEvent::MessageEnd { role: "assistant".into(), usage: Some(Usage { input: 1500, output: 120, cache_read: 16000, cache_write: 0, cost: 0.02 }), error: None, dispatched: None },
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
fn virtual_model_footer_shows_the_routed_model_and_its_window() {
    let mut a = app();
    a.model = Some(ModelInfo {
        provider: "router".into(),
        id: "auto".into(),
        name: "Auto".into(),
        context_window: 0,
        reasoning: true,
        xhigh: false,
        is_virtual: true,
    });
    a.thinking = ThinkingLevel::High;
    let answered = |model: &str, error: Option<&str>| {
        Msg::Agent(AgentEvent::MessageEnd {
            role: "assistant".into(),
            usage: Some(Usage {
                input: 40_000,
                ..Usage::default()
            }),
            error: error.map(str::to_string),
            dispatched: Some(Dispatched {
                provider: "openai".into(),
                model: model.into(),
                thinking: Some("medium".into()),
            }),
        })
    };
    // Before any response: the selection alone, no usage percentage (window unknown).
    let before = screen(&a, 90, 8);
    assert!(before.contains("auto • high"), "{before}");
    assert!(!before.contains('→') && !before.contains('%'), "{before}");

    update(&mut a, answered("gpt-5", None));
    let after = screen(&a, 90, 8);
    assert!(after.contains("auto • high → gpt-5 • medium"), "{after}");
    // 40k of gpt-5's 400k window.
    assert!(after.contains("10.0%/400k"), "{after}");

    // A failed response names no new route.
    update(&mut a, answered("gemini-2.5-pro", Some("503 overloaded")));
    assert!(screen(&a, 90, 8).contains("→ gpt-5 • medium"));

    // A physical model shows no route even though one was recorded.
    a.model = a.models.first().cloned();
    assert!(!screen(&a, 90, 8).contains('→'));
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
    // The agent's queue is emptied before the abort, so nothing queued is delivered after
    // the aborted tool (the e2e test `queue_steering_and_follow_up_while_a_tool_runs`).
    assert_eq!(
        update(&mut a, key(KeyCode::Esc)),
        vec![Effect::ClearQueue, Effect::Abort]
    );
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
    assert!(matches!(
        out.as_slice(),
        [Effect::CycleModel { thinking: None, .. }]
    ));
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
    // The default is `system`, first in the list; from `dark` the next choice is `light`.
    assert_eq!(a.settings.theme, "system");
    assert_eq!(a.theme.name, "system");
    a.settings.theme = "dark".into();
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

/// A theme an extension contributed (`themePaths`) is offered after the built-in ones and
/// applies when picked.
#[test]
fn settings_offer_contributed_themes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ocean.json"),
        r##"{"name": "ocean", "colors": {"accent": "#010203"}}"##,
    )
    .unwrap();
    let mut a = app();
    a.settings.theme_paths = vec![dir.path().to_path_buf()];
    typed(&mut a, "/settings");
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Enter));
    update(&mut a, key(KeyCode::Down));
    // Enter steps through the choices from the default `system`: dark, light, then the
    // contributed one.
    update(&mut a, key(KeyCode::Enter));
    update(&mut a, key(KeyCode::Enter));
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::SaveSetting {
            key: "theme".into(),
            value: serde_json::json!("ocean")
        }]
    );
    assert_eq!(a.theme.name, "ocean");
    assert_eq!(a.theme.accent, ratatui::style::Color::Rgb(1, 2, 3));
}

/// Pi's order of the theme choices: `system` first, then every other theme by name; a
/// contributed theme named `system` is not listed (the name is reserved).
#[test]
fn settings_list_themes_in_pis_order() {
    let dir = tempfile::tempdir().unwrap();
    for (file, name) in [
        ("a.json", "ocean"),
        ("b.json", "amber"),
        ("c.json", "system"),
    ] {
        std::fs::write(
            dir.path().join(file),
            format!(r##"{{"name": "{name}", "colors": {{"accent": "#010203"}}}}"##),
        )
        .unwrap();
    }
    let mut a = app();
    a.settings.theme_paths = vec![dir.path().to_path_buf()];
    a.open_settings();
    let Some(Dialog::Settings(s)) = &a.dialog else {
        panic!("no settings dialog")
    };
    let theme = s.items.iter().find(|i| i.key == "theme").unwrap();
    assert_eq!(theme.options, ["system", "amber", "dark", "light", "ocean"]);
    assert_eq!(theme.options[theme.value], "system");
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
    // A prompt now would land on the branch being left: it is queued (see
    // `prompts_during_a_branch_summary_are_sent_after_navigating`); alt+up takes it back.
    typed(&mut a, "later");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert_eq!(a.editor.text(), "");
    assert_eq!(a.steering, vec!["later".to_string()]);
    let alt_up = Msg::Key(KeyEvent::new(KeyCode::Up, KeyModifiers::ALT));
    assert_eq!(update(&mut a, alt_up), vec![Effect::ClearQueue]);
    assert_eq!(a.editor.text(), "later");
    assert!(a.held.is_empty() && a.steering.is_empty());
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

/// As in Pi (its compaction queue): messages submitted while a branch summary is generated
/// are queued with "Queued message for after compaction", kept when the summary is
/// aborted, and sent once the navigation completes: the first as the prompt, the rest
/// queued behind it as steering or follow-up.
#[test]
fn prompts_during_a_branch_summary_are_sent_after_navigating() {
    let mut a = app();
    a.summarizing_branch = true;
    typed(&mut a, "first");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    typed(&mut a, "second");
    let alt_enter = Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    assert!(update(&mut a, alt_enter).is_empty());
    assert_eq!(a.editor.text(), "");
    assert_eq!(a.steering, vec!["first".to_string()]);
    assert_eq!(a.follow_up, vec!["second".to_string()]);
    let screen_text = screen(&a, 60, 12);
    assert!(
        screen_text.contains("Queued message for after compaction"),
        "{screen_text}"
    );
    assert!(screen_text.contains("first"), "{screen_text}");

    // Aborted: still queued, nothing sent.
    let out = update(&mut a, Msg::Agent(AgentEvent::TreeNavigationAborted));
    assert_eq!(out, vec![Effect::OpenTree]);
    assert_eq!(a.held.len(), 2);

    a.dialog = None;
    a.summarizing_branch = true;
    let out = update(
        &mut a,
        Msg::Agent(AgentEvent::TreeNavigated {
            messages: vec![],
            editor_text: None,
        }),
    );
    assert_eq!(
        out,
        vec![
            Effect::Prompt("first".into()),
            Effect::FollowUp("second".into())
        ]
    );
    assert!(a.working);
    assert!(a.held.is_empty());
    assert!(a.steering.is_empty());
    assert_eq!(a.follow_up, vec!["second".to_string()]);
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
    for _ in 0..30 {
        update(&mut a, key(KeyCode::Backspace));
    }
    // An empty name is ignored and the field stays open, as in Pi.
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    typed(&mut a, "login");
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::RenameSession {
            id: "s1".into(),
            location: "/home/u/.pi/agent/sessions/--work--/s1.jsonl".into(),
            name: "login".into()
        }]
    );
    // The row changes once the loop reports the write.
    a.resume_renamed("s1", "login");
    match &a.dialog {
        Some(Dialog::Resume(r)) => assert_eq!(r.sessions[0].name.as_deref(), Some("login")),
        other => panic!("resume picker closed: {other:?}"),
    }
    update(&mut a, ctrl('d'));
    // Any key but y/enter cancels.
    assert!(update(&mut a, key(KeyCode::Char('n'))).is_empty());
    update(&mut a, ctrl('d'));
    let out = update(&mut a, key(KeyCode::Char('y')));
    assert_eq!(
        out,
        vec![Effect::DeleteSession {
            id: "s1".into(),
            location: "/home/u/.pi/agent/sessions/--work--/s1.jsonl".into()
        }]
    );
    a.resume_deleted("s1");
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::Resume(
            "/home/u/.pi/agent/sessions/--work--/s2.jsonl".into()
        )]
    );
}

#[test]
fn cancelling_the_resume_picker_of_dash_r_quits() {
    let mut a = app();
    a.open_resume(resume_rows(), 1_000_000_000);
    a.resume_at_start = true;
    assert_eq!(update(&mut a, key(KeyCode::Esc)), vec![Effect::Quit]);
    assert_eq!(a.exit_message.as_deref(), Some("No session selected"));
    // A later /resume is an ordinary picker: escape just closes it.
    a.exit_message = None;
    a.open_resume(resume_rows(), 1_000_000_000);
    assert!(update(&mut a, key(KeyCode::Esc)).is_empty());
    assert!(a.dialog.is_none());
    // Choosing a session at start-up clears the flag too.
    a.open_resume(resume_rows(), 1_000_000_000);
    a.resume_at_start = true;
    update(&mut a, key(KeyCode::Enter));
    assert!(!a.resume_at_start);
    assert_eq!(a.exit_message, None);
}

#[test]
fn resume_refuses_to_delete_the_current_session() {
    let mut a = app();
    a.open_resume(resume_rows(), 1_000_000_000);
    if let Some(Dialog::Resume(r)) = a.dialog.as_mut() {
        r.current = Some("s1".into());
    }
    assert!(update(&mut a, ctrl('d')).is_empty());
    match &a.dialog {
        Some(Dialog::Resume(r)) => assert_eq!(r.mode, super::dialogs::ResumeMode::Browse),
        other => panic!("resume picker closed: {other:?}"),
    }
    // Shown in the picker, where the transcript is hidden, until the next key.
    assert!(screen(&a, 80, 14).contains("Cannot delete the currently active session"));
    update(&mut a, key(KeyCode::Down));
    assert!(!screen(&a, 80, 14).contains("Cannot delete"));
}

#[test]
fn snapshot_fork_picker_and_import_confirm() {
    let mut a = app();
    let rows = super::session_ops::fork_rows(&sample_session());
    assert_eq!(
        rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["a1", "b2"]
    );
    a.open_fork(rows);
    insta::assert_snapshot!("fork_picker", screen(&a, 80, 20));
    update(&mut a, key(KeyCode::Up));
    insta::assert_snapshot!("fork_picker_first", screen(&a, 80, 20));
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Fork("a1".into())]
    );
    // No user messages: a notice instead of an empty picker.
    a.open_fork(Vec::new());
    assert!(a.dialog.is_none());
    assert!(matches!(
        a.transcript.items().last(),
        Some(Item::Notice(n)) if n == "No messages to fork from"
    ));

    typed(&mut a, "/import \"my session.jsonl\" extra");
    update(&mut a, key(KeyCode::Esc));
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    insta::assert_snapshot!("import_confirm", screen(&a, 80, 12));
    // Down to "No": cancelled, nothing imported.
    update(&mut a, key(KeyCode::Down));
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(matches!(
        a.transcript.items().last(),
        Some(Item::Notice(n)) if n == "Import cancelled"
    ));
    typed(&mut a, "/import");
    update(&mut a, key(KeyCode::Esc));
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(matches!(
        a.transcript.items().last(),
        Some(Item::Error(e)) if e == "Usage: /import <path.jsonl>"
    ));
}

#[test]
fn fork_picker_scrolls_long_lists() {
    let mut a = app();
    let rows = (1..=12)
        .map(|i| super::dialogs::ForkRow {
            id: format!("m{i}"),
            text: format!("prompt number {i}\nsecond line"),
        })
        .collect();
    a.open_fork(rows);
    let s = screen(&a, 80, 20);
    assert!(
        s.contains("Message 12 of 12") && s.contains("(12/12)"),
        "{s}"
    );
    assert!(s.contains("prompt number 12 second line"), "{s}");
    assert!(!s.contains("Message 1 of 12"), "{s}");
    for _ in 0..11 {
        update(&mut a, key(KeyCode::Up));
    }
    let s = screen(&a, 80, 20);
    assert!(s.contains("Message 1 of 12") && s.contains("(1/12)"), "{s}");
    // Escape closes without forking.
    assert!(update(&mut a, key(KeyCode::Esc)).is_empty());
    assert!(a.dialog.is_none());
}

#[test]
fn scoped_cycling_applies_the_pattern_thinking_level() {
    let mut a = app();
    a.scoped = vec![
        "anthropic/claude-sonnet-4-5".into(),
        "openai/gpt-5".into(),
        "anthropic/claude-haiku-4-5".into(),
    ];
    a.scoped_thinking
        .insert("openai/gpt-5".into(), ThinkingLevel::High);
    a.scoped_thinking
        .insert("anthropic/claude-haiku-4-5".into(), ThinkingLevel::High);
    let out = update(&mut a, ctrl('p'));
    assert_eq!(
        out,
        vec![Effect::CycleModel {
            model: models()[2].clone(),
            thinking: Some(ThinkingLevel::High)
        }]
    );
    // haiku has no reasoning: the level clamps to off.
    let out = update(&mut a, ctrl('p'));
    assert_eq!(
        out,
        vec![Effect::CycleModel {
            model: models()[1].clone(),
            thinking: Some(ThinkingLevel::Off)
        }]
    );
    // shift+ctrl+p goes back; sonnet has no level of its own, so none is set.
    let back = Msg::Key(KeyEvent::new(
        KeyCode::Char('p'),
        KeyModifiers::CONTROL | KeyModifiers::SHIFT,
    ));
    assert_eq!(
        update(&mut a, back.clone()),
        vec![Effect::CycleModel {
            model: models()[2].clone(),
            thinking: Some(ThinkingLevel::High)
        }]
    );
    update(&mut a, back.clone());
    assert_eq!(
        update(&mut a, back),
        vec![Effect::CycleModel {
            model: models()[1].clone(),
            thinking: Some(ThinkingLevel::Off)
        }]
    );
    update(&mut a, ctrl('p'));
    assert_eq!(
        a.model.as_ref().map(|m| m.key()).as_deref(),
        Some("anthropic/claude-sonnet-4-5")
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

/// What the screen shows of an event given as its wire JSON (`None` for JSON that is no
/// event, or an event the screen does not show).
fn shown(wire: serde_json::Value) -> Option<AgentEvent> {
    let event: pi_agent::protocol::Event = serde_json::from_value(wire).ok()?;
    AgentEvent::from_event(&event)
}

#[test]
fn pi_json_events_parse() {
    let ev = shown;
    assert_eq!(
        ev(
            serde_json::json!({"type":"message_update","usage":{},"assistantMessageEvent":{"type":"text_delta","delta":"hi"}})
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
            is_error: false,
            diff: None
        })
    );
    assert_eq!(
        ev(
            serde_json::json!({"type":"message_end","message":{"role":"assistant","provider":"openai","model":"gpt-5","thinkingLevel":"medium","usage":{"input":3,"output":4,"cacheRead":5,"cacheWrite":6,"cost":{"total":0.5}},"stopReason":"stop"}})
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
            error: None,
            dispatched: Some(Dispatched {
                provider: "openai".into(),
                model: "gpt-5".into(),
                thinking: Some("medium".into()),
            }),
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
fn double_escape_follows_the_double_escape_action_setting() {
    let mut a = app();
    a.settings.double_escape = "fork".into();
    update(&mut a, key(KeyCode::Esc));
    assert_eq!(update(&mut a, key(KeyCode::Esc)), vec![Effect::OpenFork]);
    a.settings.double_escape = "none".into();
    update(&mut a, key(KeyCode::Esc));
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

/// The picker's line after a catalog refresh, in Pi's words (its model-selector.js).
#[test]
fn picker_refresh_status_names_what_failed() {
    use super::dialogs::RefreshStatus;
    use pi_agent::extensions::ModelRefresh;
    let text = |refresh: ModelRefresh| RefreshStatus::after(&refresh).text().to_string();
    assert_eq!(text(ModelRefresh::default()), "Model catalogs refreshed.");
    let failed = |names: &[&str]| ModelRefresh {
        failed: names.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    };
    assert_eq!(
        text(failed(&["filecat"])),
        "Could not refresh filecat; showing cached models."
    );
    assert_eq!(
        text(failed(&["a", "b"])),
        "Could not refresh 2 model catalogs (a, b); showing cached models."
    );
    let late = ModelRefresh {
        timed_out: true,
        ..failed(&["a"])
    };
    assert_eq!(
        text(late),
        "Model refresh timed out; showing cached models."
    );
}

// ---------------------------------------------------------------------------------------
// Session effects against real files: /fork, /import, /reload, rename and delete in
// /resume. A real `AgentSessionDriver` over a JSONL store in a temp dir, no model calls.

mod on_disk {
    use super::super::agent::{channel_sink, AgentSessionDriver};
    use super::super::dialogs::Dialog;
    use super::super::driver::{AgentDriver, MissingCwd, ModelInfo};
    use super::super::session_ops;
    use super::super::transcript::Item;
    use super::{key, typed, update, App, Effect, KeyCode};
    use crate::modes::{build_host, Env, Settings};
    use crate::RunArgs;
    use serde_json::Value;
    use std::path::{Path, PathBuf};

    pub(super) struct Project {
        _tmp: tempfile::TempDir,
        pub agent: PathBuf,
        pub cwd: PathBuf,
        pub sessions: PathBuf,
    }

    pub(super) fn project() -> Project {
        let tmp = match tempfile::tempdir() {
            Ok(t) => t,
            Err(e) => panic!("tempdir: {e}"),
        };
        let root = tmp.path().to_path_buf();
        let p = Project {
            agent: root.join("agent"),
            cwd: root.join("proj"),
            sessions: root.join("sessions"),
            _tmp: tmp,
        };
        for d in [&p.agent, &p.cwd, &p.sessions] {
            must(std::fs::create_dir_all(d));
        }
        p
    }

    pub(super) fn must<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
        match r {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    fn env_with_store(p: &Project, args: &RunArgs, spec: pi_storage::StoreSpec) -> Env {
        let settings = must(Settings::load(&p.agent, &p.cwd, args));
        let resources = settings.resources(&p.agent, &p.cwd, args);
        Env {
            resources,
            settings,
            registry: pi_agent::llm::ModelRegistry::builtin(),
            home: pi_agent::host::SessionHome {
                agent_dir: p.agent.clone(),
                cwd: p.cwd.display().to_string(),
                spec,
                store_options: pi_storage::StoreOptions {
                    agent_dir: p.agent.clone(),
                    session_dir: Some(p.sessions.clone()),
                    fsync: pi_storage::store::FsyncPolicy::Never,
                },
                no_session: false,
            },
        }
    }

    /// The driver the binary builds, over `args` (`--session FILE` to open a file).
    pub(super) fn driver(
        p: &Project,
        args: RunArgs,
    ) -> (AgentSessionDriver, tokio::runtime::Runtime) {
        driver_with(
            p,
            args,
            pi_storage::StoreSpec::Jsonl(Some(p.sessions.clone())),
        )
    }

    fn driver_with(
        p: &Project,
        args: RunArgs,
        spec: pi_storage::StoreSpec,
    ) -> (AgentSessionDriver, tokio::runtime::Runtime) {
        let rt = must(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build(),
        );
        let env = env_with_store(p, &args, spec);
        let (sink, errors, events) = channel_sink();
        let host = {
            let _guard = rt.enter();
            must(build_host(&args, &env, sink))
        };
        let d = AgentSessionDriver::new(host, env, args, rt.handle().clone(), errors, events);
        (d, rt)
    }

    /// A session in `p.sessions`: two prompts with answers, a label on the first answer.
    pub(super) fn write_session(p: &Project, id: &str, name: &str) -> PathBuf {
        let cwd = p.cwd.display().to_string();
        let header = serde_json::json!({"type":"session","version":3,"id":id,
            "timestamp":"2026-01-01T00:00:00.000Z","cwd":cwd});
        let msg = |eid: &str, parent: Option<&str>, role: &str, text: &str| {
            let content = if role == "user" {
                Value::from(text)
            } else {
                serde_json::json!([{"type":"text","text":text}])
            };
            serde_json::json!({"type":"message","id":eid,"parentId":parent,
                "timestamp":"2026-01-01T00:00:01.000Z",
                "message":{"role":role,"content":content,"timestamp":1}})
            .to_string()
        };
        let lines = [
            header.to_string(),
            msg("u1", None, "user", "first question"),
            msg("a1", Some("u1"), "assistant", "first answer"),
            r#"{"type":"label","id":"l1","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","targetId":"a1","label":"keep"}"#.to_string(),
            msg("u2", Some("l1"), "user", "second question"),
            msg("a2", Some("u2"), "assistant", "second answer"),
        ];
        let path = p.sessions.join(name);
        must(std::fs::write(&path, lines.join("\n") + "\n"));
        path
    }

    pub(super) fn open_args(path: &Path) -> RunArgs {
        RunArgs {
            session: Some(path.display().to_string()),
            ..RunArgs::default()
        }
    }

    pub(super) fn lines_of(path: &Path) -> Vec<Value> {
        must(std::fs::read_to_string(path))
            .lines()
            .map(|l| must(serde_json::from_str::<Value>(l)))
            .collect()
    }

    fn app_for(d: &AgentSessionDriver) -> App {
        let mut a = App::new(PathBuf::from("/p"));
        a.load_messages(&d.messages());
        a
    }

    fn last_error(a: &App) -> Option<String> {
        a.transcript.items().iter().rev().find_map(|i| match i {
            Item::Error(e) => Some(e.clone()),
            _ => None,
        })
    }

    #[test]
    fn export_writes_the_page_every_other_export_path_writes() {
        let p = project();
        let file = write_session(&p, "sess-x", "x.jsonl");
        let (d, _rt) = driver(&p, open_args(&file));
        let written = must(super::super::export_session(&d, &p.cwd, Some("out.html")));
        let ours = must(std::fs::read(&written));
        let session = must(pi_engine::session::Session::open(&file));
        let shared = pi_engine::export::render(&session, pi_engine::export::Format::Html);
        assert!(ours == shared, "/export differs from the shared renderer");
        let md = must(super::super::export_session(&d, &p.cwd, Some("out.md")));
        assert_eq!(
            must(std::fs::read(&md)),
            pi_engine::export::render(&session, pi_engine::export::Format::Markdown)
        );
    }

    #[test]
    fn fork_picks_a_user_message_and_branches_into_a_new_file() {
        let p = project();
        let original = write_session(&p, "sess-a", "a.jsonl");
        let before = must(std::fs::read(&original));
        let (mut d, _rt) = driver(&p, open_args(&original));
        let mut a = app_for(&d);

        typed(&mut a, "/fork");
        update(&mut a, key(KeyCode::Esc)); // close the completion popup
        let out = update(&mut a, key(KeyCode::Enter));
        assert_eq!(out, vec![Effect::OpenFork]);
        let rows = session_ops::fork_rows(&must(d.session().ok_or("no session")));
        assert_eq!(
            rows.iter()
                .map(|r| (r.id.as_str(), r.text.as_str()))
                .collect::<Vec<_>>(),
            [("u1", "first question"), ("u2", "second question")]
        );
        a.open_fork(rows);
        // Starts on the last message; enter forks from it.
        let out = update(&mut a, key(KeyCode::Enter));
        assert_eq!(out, vec![Effect::Fork("u2".into())]);
        assert!(a.dialog.is_none());
        session_ops::fork(&mut a, &mut d, "u2");

        assert_eq!(a.editor.text(), "second question");
        assert_eq!(last_error(&a), None);
        let new_file = must(
            d.session()
                .and_then(|s| s.path().map(Path::to_path_buf))
                .ok_or("no file"),
        );
        assert_ne!(new_file, original);
        assert_eq!(new_file.parent(), Some(p.sessions.as_path()));
        let lines = lines_of(&new_file);
        assert_eq!(lines[0]["type"], "session");
        assert_eq!(lines[0]["parentSession"], original.display().to_string());
        assert_ne!(lines[0]["id"], "sess-a");
        // The path up to the message's parent: u1, a1, then the label re-created at the end.
        let kinds: Vec<(String, String)> = lines[1..]
            .iter()
            .map(|l| {
                (
                    l["type"].as_str().unwrap_or("").to_string(),
                    l["id"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        assert_eq!(kinds[0], ("message".into(), "u1".into()));
        assert_eq!(kinds[1], ("message".into(), "a1".into()));
        assert_eq!(kinds[2].0, "label");
        assert_eq!(lines[3]["targetId"], "a1");
        assert_eq!(lines[3]["parentId"], "a1");
        assert_eq!(lines.len(), 4);
        // The transcript shows the forked context, and the source file is untouched.
        assert!(a
            .transcript
            .items()
            .iter()
            .any(|i| matches!(i, Item::User(t) if t == "first question")));
        assert!(!a
            .transcript
            .items()
            .iter()
            .any(|i| matches!(i, Item::User(t) if t == "second question")));
        assert_eq!(must(std::fs::read(&original)), before);
    }

    #[test]
    fn fork_from_the_first_message_starts_an_empty_child_session() {
        let p = project();
        let original = write_session(&p, "sess-a", "a.jsonl");
        let (mut d, _rt) = driver(&p, open_args(&original));
        let mut a = app_for(&d);
        session_ops::fork(&mut a, &mut d, "u1");
        assert_eq!(a.editor.text(), "first question");
        let s = must(d.session().ok_or("no session"));
        let header = must(s.header().ok_or("no header"));
        assert_eq!(header["parentSession"], original.display().to_string());
        assert!(!s.entries().iter().any(|e| e.is_message_with_role("user")));
        assert!(!a
            .transcript
            .items()
            .iter()
            .any(|i| matches!(i, Item::User(_))));
        // Not a user message: refused, nothing switched.
        let before = d.session().and_then(|s| s.session_id());
        session_ops::fork(&mut a, &mut d, "a1");
        assert_eq!(
            last_error(&a).as_deref(),
            Some("Fork failed: Invalid entry ID for forking")
        );
        assert_eq!(d.session().and_then(|s| s.session_id()), before);
    }

    #[test]
    fn import_copies_into_the_session_dir_and_switches() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let outside = p.cwd.join("exported.jsonl");
        let src = write_session(&p, "sess-imp", "tmp.jsonl");
        must(std::fs::rename(&src, &outside));
        let (mut d, _rt) = driver(&p, open_args(&current));
        let mut a = app_for(&d);

        typed(&mut a, "/import exported.jsonl");
        update(&mut a, key(KeyCode::Esc));
        assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
        match &a.dialog {
            Some(Dialog::Confirm(c)) => {
                assert_eq!(c.message, "Replace current session with exported.jsonl?")
            }
            other => panic!("no confirmation: {other:?}"),
        }
        let out = update(&mut a, key(KeyCode::Enter));
        assert_eq!(out, vec![Effect::Import("exported.jsonl".into())]);
        session_ops::import(&mut a, &mut d, &p.agent, "exported.jsonl", MissingCwd::Ask);
        assert_eq!(last_error(&a), None);

        let copied = p.sessions.join("exported.jsonl");
        assert_eq!(must(std::fs::read(&copied)), must(std::fs::read(&outside)));
        assert_eq!(
            d.session().and_then(|s| s.session_id()).as_deref(),
            Some("sess-imp")
        );
        assert_eq!(
            d.session().and_then(|s| s.path().map(Path::to_path_buf)),
            Some(copied.clone())
        );
        assert!(a
            .transcript
            .items()
            .iter()
            .any(|i| matches!(i, Item::User(t) if t == "second question")));
        // The imported session is the one written to now.
        must(d.set_session_name("imported"));
        let last = lines_of(&copied).pop().unwrap_or_default();
        assert_eq!(last["type"], "session_info");
        assert_eq!(last["name"], "imported");
    }

    /// A session written for `cwd` (its header names it), moved to `dest`.
    fn session_for_cwd(p: &Project, id: &str, cwd: &Path, dest: &Path) {
        let src = write_session(p, id, &format!("{id}.tmp"));
        let text = must(std::fs::read_to_string(&src));
        let text = text.replacen(
            &format!("\"cwd\":\"{}\"", p.cwd.display()),
            &format!("\"cwd\":\"{}\"", cwd.display()),
            1,
        );
        must(std::fs::write(dest, text));
        must(std::fs::remove_file(&src));
    }

    fn notices(a: &App) -> Vec<String> {
        a.transcript
            .items()
            .iter()
            .filter_map(|i| match i {
                Item::Notice(n) => Some(n.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn import_of_a_session_whose_cwd_is_gone_offers_continue_or_fork() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let (mut d, _rt) = driver(&p, open_args(&current));
        let mut a = app_for(&d);
        let gone = p.cwd.join("deleted-project");
        let source = p.cwd.join("old.jsonl");
        session_for_cwd(&p, "sess-old", &gone, &source);
        let source_bytes = must(std::fs::read(&source));
        let here = p.cwd.display().to_string();

        // Asked first; nothing is copied until answered.
        session_ops::import(&mut a, &mut d, &p.agent, "old.jsonl", MissingCwd::Ask);
        assert_eq!(last_error(&a), None);
        match &a.dialog {
            Some(Dialog::Confirm(c)) => {
                assert_eq!(
                    c.title,
                    format!("Session cwd does not exist: {}", gone.display())
                );
                let labels: Vec<&str> = c.options.iter().map(|(l, _)| l.as_str()).collect();
                assert_eq!(
                    labels,
                    [
                        format!("Continue in {here} (asks again next time)").as_str(),
                        &format!("Fork into {here} (new session ID, original kept)"),
                        "Cancel"
                    ]
                );
            }
            other => panic!("not asked: {other:?}"),
        }
        assert!(!p.sessions.join("old.jsonl").exists());
        assert_eq!(
            d.session().and_then(|s| s.session_id()).as_deref(),
            Some("sess-cur")
        );

        // Cancel: nothing happens.
        update(&mut a, key(KeyCode::Up));
        assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
        assert_eq!(
            notices(&a).last().map(String::as_str),
            Some("Import cancelled")
        );
        assert!(a.dialog.is_none());

        // Fork: a new session in this directory holding every entry; the file is untouched.
        session_ops::import(&mut a, &mut d, &p.agent, "old.jsonl", MissingCwd::Ask);
        update(&mut a, key(KeyCode::Down));
        let out = update(&mut a, key(KeyCode::Enter));
        assert_eq!(
            out,
            vec![Effect::ImportWith {
                path: "old.jsonl".into(),
                missing_cwd: MissingCwd::Fork
            }]
        );
        session_ops::import(&mut a, &mut d, &p.agent, "old.jsonl", MissingCwd::Fork);
        assert_eq!(last_error(&a), None);
        let forked = must(
            d.session()
                .and_then(|s| s.path().map(Path::to_path_buf))
                .ok_or("path"),
        );
        let lines = lines_of(&forked);
        assert_ne!(lines[0]["id"], "sess-old");
        assert_eq!(lines[0]["cwd"], here.as_str());
        assert_eq!(
            lines[0]["parentSession"],
            must(source.canonicalize()).display().to_string()
        );
        assert_eq!(lines.len(), lines_of(&source).len());
        assert_eq!(must(std::fs::read(&source)), source_bytes);
        assert!(notices(&a)
            .last()
            .is_some_and(|n| n.starts_with("Forked into new session")));

        // Continue: imported as it is (its header still names the gone directory, so the
        // question comes again next time); tools keep working here.
        session_ops::import(&mut a, &mut d, &p.agent, "old.jsonl", MissingCwd::Continue);
        assert_eq!(last_error(&a), None);
        let copied = p.sessions.join("old.jsonl");
        assert_eq!(must(std::fs::read(&copied)), source_bytes);
        assert_eq!(
            d.session().and_then(|s| s.session_id()).as_deref(),
            Some("sess-old")
        );
        assert_eq!(d.cwd(), Some(p.cwd.clone()));
        assert_eq!(
            notices(&a).last().map(String::as_str),
            Some("Session imported from: old.jsonl")
        );

        // /resume of it (from another session) asks the same question.
        session_ops::resume(
            &mut a,
            &mut d,
            &p.agent,
            &current.display().to_string(),
            MissingCwd::Ask,
        );
        assert_eq!(
            d.session().and_then(|s| s.session_id()).as_deref(),
            Some("sess-cur"),
            "{:?}",
            notices(&a)
        );
        session_ops::resume(
            &mut a,
            &mut d,
            &p.agent,
            &copied.display().to_string(),
            MissingCwd::Ask,
        );
        match &a.dialog {
            Some(Dialog::Confirm(c)) => assert_eq!(c.cancelled, "Resume cancelled"),
            other => panic!("not asked: {other:?} {:?}", notices(&a)),
        }
    }

    #[test]
    fn a_session_from_another_directory_moves_tools_there_as_in_pi() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let (mut d, _rt) = driver(&p, open_args(&current));
        let mut a = App::new(p.cwd.clone());
        let other = p.cwd.join("other-project");
        must(std::fs::create_dir_all(&other));
        must(std::fs::write(
            other.join("AGENTS.md"),
            "Other project rules.\n",
        ));
        let source = p.cwd.join("other.jsonl");
        session_for_cwd(&p, "sess-other", &other, &source);

        session_ops::import(&mut a, &mut d, &p.agent, "other.jsonl", MissingCwd::Ask);
        assert_eq!(last_error(&a), None);
        assert!(a.dialog.is_none());
        // The agent, the footer and the next /new work in the session's directory, and its
        // context files are in the prompt.
        assert_eq!(d.cwd(), Some(other.clone()));
        assert_eq!(a.cwd, other);
        assert_eq!(a.footer.cwd, other.display().to_string());
        let env = d.env();
        assert_eq!(env.home.cwd, other.display().to_string());
        let message = crate::modes::system_message(env, &[]).to_string();
        assert!(message.contains("Other project rules."), "{message}");
        assert!(notices(&a)
            .iter()
            .any(|n| n == &format!("Working in {}", other.display())));
        must(d.new_session());
        assert_eq!(
            d.session().and_then(|s| s
                .header()
                .and_then(|h| h["cwd"].as_str().map(str::to_string))),
            Some(other.display().to_string())
        );

        // /resume of a session of the start-up directory moves back.
        session_ops::resume(
            &mut a,
            &mut d,
            &p.agent,
            &current.display().to_string(),
            MissingCwd::Ask,
        );
        assert_eq!(d.cwd(), Some(p.cwd.clone()));
        assert_eq!(a.cwd, p.cwd);
    }

    #[test]
    fn import_names_a_taken_file_with_a_suffix_and_refuses_bad_files() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let (mut d, _rt) = driver(&p, open_args(&current));
        let mut a = app_for(&d);
        // Same file name as a stored session, another id: copied as cur-1.jsonl.
        let other_dir = p.cwd.join("elsewhere");
        must(std::fs::create_dir_all(&other_dir));
        let src = write_session(&p, "sess-other", "x.jsonl");
        let outside = other_dir.join("cur.jsonl");
        must(std::fs::rename(&src, &outside));
        session_ops::import(
            &mut a,
            &mut d,
            &p.agent,
            &outside.display().to_string(),
            MissingCwd::Ask,
        );
        assert_eq!(last_error(&a), None);
        assert!(p.sessions.join("cur-1.jsonl").is_file());
        assert_eq!(
            d.session().and_then(|s| s.session_id()).as_deref(),
            Some("sess-other")
        );

        // A malformed line: one line naming the file and the line; nothing copied.
        let bad = p.cwd.join("bad.jsonl");
        must(std::fs::write(
            &bad,
            "{\"type\":\"session\",\"version\":3,\"id\":\"b\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/\"}\n{oops\n",
        ));
        session_ops::import(&mut a, &mut d, &p.agent, "bad.jsonl", MissingCwd::Ask);
        let e = last_error(&a).unwrap_or_default();
        assert!(e.starts_with("Failed to import session: "), "{e}");
        assert!(
            e.contains(&bad.display().to_string()) && e.contains("line 2"),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
        assert!(!p.sessions.join("bad.jsonl").exists());
        // A missing file.
        session_ops::import(&mut a, &mut d, &p.agent, "nope.jsonl", MissingCwd::Ask);
        let e = last_error(&a).unwrap_or_default();
        assert!(
            e.contains("Session file not found") && e.contains("nope.jsonl"),
            "{e}"
        );
        assert_eq!(
            d.session().and_then(|s| s.session_id()).as_deref(),
            Some("sess-other")
        );
    }

    #[test]
    fn rename_in_resume_writes_session_info_to_any_session() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let other = write_session(&p, "sess-other", "other.jsonl");
        let (mut d, _rt) = driver(&p, open_args(&current));
        let store = must(pi_storage::open_store(
            &pi_storage::StoreSpec::Jsonl(Some(p.sessions.clone())),
            &pi_storage::StoreOptions::new(&p.agent),
        ));
        let mut a = app_for(&d);
        session_ops::open_resume(&mut a, &d, Some(store.as_ref()), 0);
        match &a.dialog {
            Some(Dialog::Resume(r)) => {
                assert_eq!(r.current.as_deref(), Some("sess-cur"));
                assert_eq!(r.sessions.len(), 2);
            }
            other => panic!("no picker: {other:?}"),
        }
        // Another session: through the store, parented on its last entry.
        session_ops::rename(
            &mut a,
            &mut d,
            Some(store.as_ref()),
            "sess-other",
            "Other work",
        );
        assert_eq!(last_error(&a), None);
        let lines = lines_of(&other);
        let last = &lines[lines.len() - 1];
        assert_eq!(last["type"], "session_info");
        assert_eq!(last["name"], "Other work");
        assert_eq!(last["parentId"], "a2");
        match &a.dialog {
            Some(Dialog::Resume(r)) => assert_eq!(
                r.sessions
                    .iter()
                    .find(|s| s.id == "sess-other")
                    .and_then(|s| s.name.as_deref()),
                Some("Other work")
            ),
            other => panic!("picker closed: {other:?}"),
        }
        // The current session: through the agent, which holds its lock.
        session_ops::rename(&mut a, &mut d, Some(store.as_ref()), "sess-cur", "Mine");
        assert_eq!(last_error(&a), None);
        let last = lines_of(&current).pop().unwrap_or_default();
        assert_eq!(
            (last["type"].as_str(), last["name"].as_str()),
            (Some("session_info"), Some("Mine"))
        );
        assert_eq!(a.footer.session_name.as_deref(), Some("Mine"));
        // A session another writer holds is refused, and its file is unchanged.
        let held = pi_storage::JsonlStore::open(
            pi_storage::JsonlLayout::Flat {
                dir: p.sessions.clone(),
            },
            Default::default(),
        );
        let writer = must(pi_storage::store::SessionStore::open_writer(
            &held,
            &pi_storage::SessionId::new("sess-other"),
        ));
        let before = must(std::fs::read(&other));
        session_ops::rename(&mut a, &mut d, Some(store.as_ref()), "sess-other", "Again");
        match &a.dialog {
            Some(Dialog::Resume(r)) => assert!(
                r.error
                    .as_deref()
                    .is_some_and(|e| e.starts_with("Could not rename the session")),
                "{:?}",
                r.error
            ),
            other => panic!("picker closed: {other:?}"),
        }
        assert_eq!(must(std::fs::read(&other)), before);
        drop(writer);
    }

    #[test]
    fn delete_in_resume_removes_the_file() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let other = write_session(&p, "sess-other", "other.jsonl");
        let (d, _rt) = driver(&p, open_args(&current));
        let store = must(pi_storage::open_store(
            &pi_storage::StoreSpec::Jsonl(Some(p.sessions.clone())),
            &pi_storage::StoreOptions::new(&p.agent),
        ));
        let mut a = app_for(&d);
        session_ops::open_resume(&mut a, &d, Some(store.as_ref()), 0);
        session_ops::delete(&mut a, Some(store.as_ref()), "sess-other");
        assert_eq!(last_error(&a), None);
        assert!(!other.exists());
        assert!(current.exists());
        match &a.dialog {
            Some(Dialog::Resume(r)) => {
                assert_eq!(
                    r.sessions.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
                    ["sess-cur"]
                )
            }
            other => panic!("picker closed: {other:?}"),
        }
    }

    #[test]
    fn reload_reads_settings_resources_and_patches_the_prompt() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let (mut d, _rt) = driver(&p, open_args(&current));
        let mut a = App::new(p.cwd.clone());
        a.push_header(&[]);
        // Written after start-up: a global context file, a skill, a template, settings,
        // keybindings.
        must(std::fs::write(
            p.agent.join("AGENTS.md"),
            "Always answer in haiku.\n",
        ));
        let skill = p.agent.join("skills").join("lint");
        must(std::fs::create_dir_all(&skill));
        must(std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: lint\ndescription: Run the linters\n---\nRun cargo clippy.\n",
        ));
        must(std::fs::create_dir_all(p.agent.join("prompts")));
        must(std::fs::write(
            p.agent.join("prompts").join("review.md"),
            "---\ndescription: Review the diff\n---\nReview $ARGUMENTS\n",
        ));
        must(std::fs::write(
            p.agent.join("settings.json"),
            r#"{"theme":"light","hideThinkingBlock":true,"enabledModels":["openai/gpt-5:high","anthropic/claude-sonnet-4-5"]}"#,
        ));
        must(std::fs::write(
            p.agent.join("keybindings.json"),
            r#"{"app.model.cycleForward":"ctrl+y"}"#,
        ));

        session_ops::reload(&mut a, &mut d, &p.agent);
        assert_eq!(last_error(&a), None);
        assert!(matches!(
            a.transcript.items().last(),
            Some(Item::Notice(n)) if n.starts_with("Reloaded keybindings")
        ));
        assert_eq!(a.settings.theme, "light");
        assert!(!a.flags.show_thinking);
        assert_eq!(a.scoped, ["openai/gpt-5", "anthropic/claude-sonnet-4-5"]);
        assert_eq!(
            a.scoped_thinking.get("openai/gpt-5"),
            Some(&super::ThinkingLevel::High)
        );
        let names: Vec<&str> = a.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["skill:lint", "review"]);
        assert_eq!(a.keys.hint("app.model.cycleForward"), "ctrl+y");
        match a.transcript.items().first() {
            Some(Item::Header(rows)) => {
                assert!(rows
                    .iter()
                    .any(|(n, k)| n.ends_with("AGENTS.md") && k == "context"));
                assert!(rows.iter().any(|(n, k)| n == "/skill:lint" && k == "skill"));
                assert!(rows.iter().any(|(n, k)| n == "/review" && k == "template"));
                assert!(rows.iter().any(|(n, _)| n == "ctrl+y"));
            }
            other => panic!("no header: {other:?}"),
        }
        // The agent's prompt is rebuilt from the reloaded resources (the next prompt writes
        // the changed sections; the tmux test checks that in the session file).
        let env = d.env();
        assert!(env
            .resources
            .context_files
            .iter()
            .any(|f| f.path.ends_with("AGENTS.md")));
        let message = crate::modes::system_message(env, &[]).to_string();
        assert!(message.contains("Always answer in haiku."), "{message}");
    }

    #[test]
    fn header_lists_project_resources_only_when_trusted() {
        let p = project();
        let pi_dir = p.cwd.join(".pi");
        must(std::fs::create_dir_all(pi_dir.join("prompts")));
        must(std::fs::write(
            pi_dir.join("prompts").join("deploy.md"),
            "---\ndescription: Deploy it\n---\nDeploy.\n",
        ));
        must(std::fs::create_dir_all(pi_dir.join("skills").join("ship")));
        must(std::fs::write(
            pi_dir.join("skills").join("ship").join("SKILL.md"),
            "---\nname: ship\ndescription: Ship it\n---\nShip.\n",
        ));
        // AGENTS.md files are not trust-gated (Pi loads them from the cwd and its
        // ancestors either way); the project's .pi resources are.
        must(std::fs::write(p.cwd.join("AGENTS.md"), "Project rules.\n"));
        must(std::fs::write(p.agent.join("AGENTS.md"), "Global rules.\n"));
        let rows = |args: RunArgs| {
            let (d, _rt) = driver(&p, args.clone());
            let env = d.env();
            super::super::agent::read_ui(env, &args).loaded
        };
        // Unknown project, no prompt possible here: untrusted, only global resources.
        let untrusted = rows(RunArgs::default());
        assert!(
            untrusted
                .iter()
                .any(|(n, _)| n.ends_with("agent/AGENTS.md")),
            "{untrusted:?}"
        );
        assert!(
            !untrusted.iter().any(|(n, _)| n == "/deploy"),
            "{untrusted:?}"
        );
        assert!(
            !untrusted.iter().any(|(n, _)| n == "/skill:ship"),
            "{untrusted:?}"
        );
        // --approve trusts it: the project template and context file appear.
        let trusted = rows(RunArgs {
            approve: true,
            ..RunArgs::default()
        });
        assert!(
            trusted
                .iter()
                .any(|(n, k)| n == "/deploy" && k == "template"),
            "{trusted:?}"
        );
        assert!(
            trusted
                .iter()
                .any(|(n, k)| n == "/skill:ship" && k == "skill"),
            "{trusted:?}"
        );
    }

    /// A project with a `.pi` prompt template, which makes trust matter.
    fn untrusted_project() -> Project {
        let p = project();
        let prompts = p.cwd.join(".pi").join("prompts");
        must(std::fs::create_dir_all(&prompts));
        must(std::fs::write(
            prompts.join("deploy.md"),
            "---\ndescription: Deploy it\n---\nDeploy.\n",
        ));
        p
    }

    /// Answers the start-up trust prompt with `answer` (`None`: escape), then builds the
    /// session as the binary does; returns what was decided, whether the project template
    /// loaded, and `trust.json` (empty when not written).
    fn start_with_answer(p: &Project, answer: Option<usize>) -> (Option<bool>, bool, String) {
        let mut args = RunArgs::default();
        let mut labels = Vec::new();
        args.project_trusted = must(super::super::startup::resolve_startup_trust(
            &p.agent,
            &p.cwd,
            &args,
            |prompt| {
                labels = prompt.options.iter().map(|(l, _)| l.clone()).collect();
                Ok(answer)
            },
        ));
        if args.project_trusted.is_some() {
            assert_eq!(labels.len(), 5, "{labels:?}");
        }
        let (d, _rt) = driver(p, args.clone());
        let env = d.env();
        let loaded = super::super::agent::read_ui(env, &args)
            .loaded
            .iter()
            .any(|(n, _)| n == "/deploy");
        let trust = std::fs::read_to_string(p.agent.join("trust.json")).unwrap_or_default();
        (args.project_trusted, loaded, trust)
    }

    #[test]
    fn trust_prompt_answers_decide_what_loads_and_what_is_saved() {
        let key = |path: &Path| must(path.canonicalize()).display().to_string();
        // Trust: saved for the folder, resources load; the next start does not ask.
        let p = untrusted_project();
        let (decided, loaded, trust) = start_with_answer(&p, Some(0));
        assert_eq!((decided, loaded), (Some(true), true));
        assert_eq!(trust, format!("{{\n  \"{}\": true\n}}\n", key(&p.cwd)));
        let (decided, loaded, _) = start_with_answer(&p, None);
        assert_eq!((decided, loaded), (None, true));

        // Trust parent folder: saved for the parent.
        let p = untrusted_project();
        let parent = must(p.cwd.parent().ok_or("no parent")).to_path_buf();
        let (decided, loaded, trust) = start_with_answer(&p, Some(1));
        assert_eq!((decided, loaded), (Some(true), true));
        assert_eq!(trust, format!("{{\n  \"{}\": true\n}}\n", key(&parent)));

        // Trust (this session only): loads, saves nothing, so the next start asks again.
        let p = untrusted_project();
        let (decided, loaded, trust) = start_with_answer(&p, Some(2));
        assert_eq!((decided, loaded, trust.as_str()), (Some(true), true, ""));
        let (decided, loaded, _) = start_with_answer(&p, Some(4));
        assert_eq!((decided, loaded), (Some(false), false));

        // Do not trust: saved as false, nothing loads, and the next start does not ask.
        let p = untrusted_project();
        let (decided, loaded, trust) = start_with_answer(&p, Some(3));
        assert_eq!((decided, loaded), (Some(false), false));
        assert_eq!(trust, format!("{{\n  \"{}\": false\n}}\n", key(&p.cwd)));
        let (decided, loaded, _) = start_with_answer(&p, Some(0));
        assert_eq!((decided, loaded), (None, false));

        // Do not trust (this session only) and escape: nothing loads, nothing is saved.
        for answer in [Some(4), None] {
            let p = untrusted_project();
            let (decided, loaded, trust) = start_with_answer(&p, answer);
            assert_eq!((decided, loaded, trust.as_str()), (Some(false), false, ""));
        }
    }

    #[test]
    fn trust_is_not_asked_when_flags_settings_or_the_project_decide() {
        let ask = |_: super::super::dialogs::Confirm| -> anyhow::Result<Option<usize>> {
            panic!("the trust prompt should not be shown")
        };
        let p = untrusted_project();
        for args in [
            RunArgs {
                approve: true,
                ..RunArgs::default()
            },
            RunArgs {
                no_approve: true,
                ..RunArgs::default()
            },
        ] {
            let decided = must(super::super::startup::resolve_startup_trust(
                &p.agent, &p.cwd, &args, ask,
            ));
            assert_eq!(decided, None);
        }
        must(std::fs::write(
            p.agent.join("settings.json"),
            r#"{"defaultProjectTrust":"always"}"#,
        ));
        let args = RunArgs::default();
        let decided = must(super::super::startup::resolve_startup_trust(
            &p.agent, &p.cwd, &args, ask,
        ));
        assert_eq!(decided, None);
        // Nothing project-local: nothing to ask.
        let plain = project();
        let decided = must(super::super::startup::resolve_startup_trust(
            &plain.agent,
            &plain.cwd,
            &args,
            ask,
        ));
        assert_eq!(decided, None);
    }

    #[test]
    fn settings_writes_keep_other_keys() {
        let p = project();
        let path = p.agent.join("settings.json");
        must(std::fs::write(
            &path,
            r#"{"defaultModel":"gpt-5","branchSummary":{"reserveTokens":100}}"#,
        ));
        must(super::super::save_setting(
            &p.agent,
            "branchSummary.skipPrompt",
            true.into(),
        ));
        must(super::super::save_setting(
            &p.agent,
            "theme",
            "light".into(),
        ));
        let v: Value = must(serde_json::from_str(&must(std::fs::read_to_string(&path))));
        assert_eq!(
            v,
            serde_json::json!({"defaultModel":"gpt-5",
                "branchSummary":{"reserveTokens":100,"skipPrompt":true},"theme":"light"})
        );
        // No temp file is left behind.
        let names: Vec<String> = must(std::fs::read_dir(&p.agent))
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["settings.json"]);
    }

    #[test]
    fn import_into_a_database_store_switches_to_the_stored_session() {
        let p = project();
        let db = p.sessions.join("sessions.sqlite");
        let spec = pi_storage::StoreSpec::Sqlite(db.clone());
        let (mut d, _rt) = driver_with(&p, RunArgs::default(), spec.clone());
        let src = write_session(&p, "sess-db", "x.jsonl");
        let outside = p.cwd.join("export.jsonl");
        must(std::fs::rename(&src, &outside));
        let mut a = App::new(p.cwd.clone());
        session_ops::import(&mut a, &mut d, &p.agent, "export.jsonl", MissingCwd::Ask);
        assert_eq!(last_error(&a), None);
        assert_eq!(
            d.session().and_then(|s| s.session_id()).as_deref(),
            Some("sess-db")
        );
        assert!(a
            .transcript
            .items()
            .iter()
            .any(|i| matches!(i, Item::User(t) if t == "second question")));
        // Appends go to the store's copy.
        must(d.set_session_name("in the db"));
        let store = must(pi_storage::open_store(
            &spec,
            &pi_storage::StoreOptions::new(&p.agent),
        ));
        let data = must(store.read_session(&pi_storage::SessionId::new("sess-db")));
        let last: Value = must(serde_json::from_slice(
            data.entries.last().map(|e| e.line()).unwrap_or_default(),
        ));
        assert_eq!(last["type"], "session_info");
        assert_eq!(last["name"], "in the db");
        // Nothing was copied next to the database.
        assert!(!p.sessions.join("export.jsonl").exists());
    }

    #[test]
    fn reload_reads_models_json_for_the_picker_and_the_agent() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let (mut d, _rt) = driver(&p, open_args(&current));
        let mut a = App::new(p.cwd.clone());
        a.models = d.models();
        let models_json = |window: u64, extra: &str| {
            format!(
                r#"{{"providers":{{"local":{{"baseUrl":"http://127.0.0.1:1/v1",
                "api":"openai-completions","apiKey":"k","models":[
                {{"id":"m1","contextWindow":{window}}}{extra}]}}}}}}"#
            )
        };
        let keys = |a: &App| -> Vec<String> { a.models.iter().map(|m| m.key()).collect() };
        assert!(!keys(&a).contains(&"local/m1".to_string()));

        // Added while running: the picker lists it and the agent can switch to it.
        must(std::fs::write(
            p.agent.join("models.json"),
            models_json(1000, ""),
        ));
        session_ops::reload(&mut a, &mut d, &p.agent);
        assert_eq!(last_error(&a), None);
        assert!(keys(&a).contains(&"local/m1".to_string()), "{:?}", keys(&a));
        let m1 = must(a.models.iter().find(|m| m.key() == "local/m1").ok_or("m1")).clone();
        d.set_model(&m1);
        assert!(d.poll_events().is_empty());
        a.model = Some(m1);

        // Changed: the current model's new definition is used; a new model appears.
        must(std::fs::write(
            p.agent.join("models.json"),
            models_json(2000, r#",{"id":"m2"}"#),
        ));
        session_ops::reload(&mut a, &mut d, &p.agent);
        assert!(keys(&a).contains(&"local/m2".to_string()), "{:?}", keys(&a));
        assert_eq!(a.model.as_ref().map(|m| m.context_window), Some(2000));
        // The switch to m1 was recorded in the session.
        let switched = d
            .session()
            .is_some_and(|s| String::from_utf8_lossy(&s.to_jsonl()).contains(r#""modelId":"m1""#));
        assert!(switched);

        // Broken: reported, and the models we had stay.
        must(std::fs::write(p.agent.join("models.json"), "{oops"));
        session_ops::reload(&mut a, &mut d, &p.agent);
        assert!(keys(&a).contains(&"local/m2".to_string()), "{:?}", keys(&a));
        let warned =
            a.transcript.items().iter().any(
                |i| matches!(i, Item::Notice(n) if n.starts_with("Warning: models.json error")),
            );
        assert!(warned);
    }

    #[test]
    fn reload_saves_trust_for_a_folder_that_gained_project_resources_as_pi_does() {
        for (flag, expect_saved) in [(false, true), (true, false)] {
            let p = project();
            let current = write_session(&p, "sess-cur", "cur.jsonl");
            // As the binary starts: nothing needs trust, so the folder is trusted for the run.
            let args = RunArgs {
                project_trusted: Some(true),
                no_approve: flag,
                ..open_args(&current)
            };
            let (mut d, _rt) = driver(&p, args);
            let mut a = App::new(p.cwd.clone());
            let prompts = p.cwd.join(".pi").join("prompts");
            must(std::fs::create_dir_all(&prompts));
            must(std::fs::write(prompts.join("deploy.md"), "Deploy.\n"));
            session_ops::reload(&mut a, &mut d, &p.agent);
            let trust = std::fs::read_to_string(p.agent.join("trust.json")).unwrap_or_default();
            let last = notices(&a).last().cloned().unwrap_or_default();
            if expect_saved {
                let key = must(p.cwd.canonicalize()).display().to_string();
                assert_eq!(trust, format!("{{\n  \"{key}\": true\n}}\n"));
                assert!(last.ends_with("; saved project trust"), "{last}");
                assert!(a.commands.iter().any(|c| c.name == "deploy"));
                // Once saved, a later reload says nothing more.
                session_ops::reload(&mut a, &mut d, &p.agent);
                let last = notices(&a).last().cloned().unwrap_or_default();
                assert!(!last.contains("saved project trust"), "{last}");
            } else {
                // --no-approve: nothing is trusted, nothing saved.
                assert_eq!(trust, "");
                assert!(!last.contains("saved project trust"), "{last}");
                assert!(!a.commands.iter().any(|c| c.name == "deploy"));
            }
        }
    }

    /// Escape and alt+up take the agent's queue back, not only the UI's copy: what is
    /// queued in the agent would otherwise still be delivered after the aborted tool.
    #[test]
    fn clearing_the_queue_empties_the_agents_queue() {
        let p = project();
        let (mut d, _rt) = driver(&p, RunArgs::default());
        d.steer("steer me");
        d.follow_up("later");
        assert_eq!(
            d.clear_queue(),
            (vec!["steer me".to_string()], vec!["later".to_string()])
        );
        assert_eq!(d.clear_queue(), (Vec::new(), Vec::new()));
    }

    /// /trust as in Pi 1.6: the saved decision and this run's, the saved answers (the
    /// saved one selected); a choice goes to trust.json for the next start, and this run
    /// keeps the trust it started with.
    #[test]
    fn trust_command_saves_a_decision_for_the_next_start() {
        let p = project();
        let (d, _rt) = driver(&p, RunArgs::default());
        let mut a = App::new(p.cwd.clone());
        let cwd = must(p.cwd.canonicalize());
        let parent = must(cwd.parent().ok_or("parent")).to_path_buf();
        let trusted_at_start = d.project_trusted();
        assert_eq!(trusted_at_start, Some(true), "nothing here needs trust");
        let open = |a: &mut App, d: &AgentSessionDriver| {
            let mut out = typed(a, "/trust");
            out.extend(update(a, key(KeyCode::Enter)));
            assert_eq!(out, vec![Effect::OpenTrust]);
            session_ops::open_trust(a, &p.agent, &p.cwd, d.project_trusted());
        };
        let choose = |a: &mut App, keys: &[KeyCode]| {
            let mut out = Vec::new();
            for k in keys {
                out.extend(update(a, key(*k)));
            }
            match out.as_slice() {
                [Effect::SaveTrust(c)] => session_ops::save_trust(a, &p.agent, &p.cwd, *c),
                other => panic!("expected a trust choice, got {other:?}"),
            }
        };
        let saved = || -> Value {
            must(serde_json::from_str(&must(std::fs::read_to_string(
                p.agent.join("trust.json"),
            ))))
        };

        open(&mut a, &d);
        let text = super::screen(&a, 100, 30);
        assert!(text.contains("Project trust"), "{text}");
        assert!(text.contains("Saved decision: none"), "{text}");
        assert!(text.contains("Current session: trusted"), "{text}");
        assert!(text.contains(&format!("Trust parent folder ({})", parent.display())));
        assert!(!text.contains("this session only"), "{text}");
        choose(&mut a, &[KeyCode::Down, KeyCode::Down, KeyCode::Enter]);
        assert_eq!(
            saved(),
            serde_json::json!({ cwd.display().to_string(): false })
        );
        assert_eq!(
            notices(&a).last().map(String::as_str),
            Some("Saved trust decision: untrusted. Restart pi for this to take effect.")
        );
        assert_eq!(
            d.project_trusted(),
            trusted_at_start,
            "effective next start"
        );
        assert!(!must(Settings::load(&p.agent, &p.cwd, &RunArgs::default())).trusted);

        open(&mut a, &d);
        match &a.dialog {
            Some(super::Dialog::Confirm(c)) => {
                assert_eq!(c.options[c.selected].0, "Do not trust");
                assert!(c
                    .message
                    .contains(&format!("Saved decision: untrusted ({})", cwd.display())));
            }
            other => panic!("expected the trust dialog, got {other:?}"),
        }
        choose(&mut a, &[KeyCode::Up, KeyCode::Enter]);
        assert_eq!(
            saved(),
            serde_json::json!({ parent.display().to_string(): true })
        );
        assert!(must(Settings::load(&p.agent, &p.cwd, &RunArgs::default())).trusted);

        open(&mut a, &d);
        let text = super::screen(&a, 100, 30);
        assert!(
            text.contains(&format!("trusted (inherited from {})", parent.display())),
            "{text}"
        );
        // Escape closes without saving or saying anything.
        let before = notices(&a).len();
        assert!(update(&mut a, key(KeyCode::Esc)).is_empty());
        assert!(a.dialog.is_none());
        assert_eq!(notices(&a).len(), before);
    }

    #[test]
    fn reload_reports_a_broken_settings_file_in_the_transcript() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let (mut d, _rt) = driver(&p, open_args(&current));
        let mut a = App::new(p.cwd.clone());
        must(std::fs::write(p.agent.join("settings.json"), "{oops"));
        session_ops::reload(&mut a, &mut d, &p.agent);
        assert_eq!(last_error(&a), None);
        let notices: Vec<&str> = a
            .transcript
            .items()
            .iter()
            .filter_map(|i| match i {
                Item::Notice(n) => Some(n.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            notices
                .iter()
                .any(|n| n.starts_with("Warning: ") && n.contains("settings.json")),
            "{notices:?}"
        );
        assert!(notices.last().is_some_and(|n| n.starts_with("Reloaded")));
    }

    /// A session whose answers used another model, with two branches that both spent.
    fn write_branched_session(p: &Project) -> PathBuf {
        let cwd = p.cwd.display().to_string();
        let usage = |input: u64| {
            serde_json::json!({"input":input,"output":10,"cacheRead":0,"cacheWrite":0,
                "totalTokens":input+10,"cost":{"total":0.5}})
        };
        let answer = |id: &str, parent: &str, input: u64, stop: &str| {
            serde_json::json!({"type":"message","id":id,"parentId":parent,
                "timestamp":"2026-01-01T00:00:03.000Z",
                "message":{"role":"assistant","content":[{"type":"text","text":id}],
                    "provider":"openai","model":"gpt-4.1","usage":usage(input),
                    "stopReason":stop,"timestamp":3}})
            .to_string()
        };
        let lines = [
            serde_json::json!({"type":"session","version":3,"id":"sess-b",
                "timestamp":"2026-01-01T00:00:00.000Z","cwd":cwd})
            .to_string(),
            r#"{"type":"model_change","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:00.500Z","provider":"openai","modelId":"gpt-4.1"}"#.to_string(),
            r#"{"type":"message","id":"u1","parentId":"m1","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"first","timestamp":1}}"#.to_string(),
            answer("a1", "u1", 1000, "stop"),
            // The branch left behind: its answer cost too.
            answer("a2", "u1", 2000, "stop"),
            // The current branch ends in an aborted answer that reports no usage.
            r#"{"type":"message","id":"u2","parentId":"a1","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":"second","timestamp":4}}"#.to_string(),
            serde_json::json!({"type":"message","id":"a3","parentId":"u2",
                "timestamp":"2026-01-01T00:00:05.000Z",
                "message":{"role":"assistant","content":[],"provider":"openai","model":"gpt-4.1",
                    "usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"total":0}},
                    "stopReason":"aborted","errorMessage":"Request was aborted","timestamp":5}})
            .to_string(),
        ];
        let path = p.sessions.join("b.jsonl");
        must(std::fs::write(&path, lines.join("\n") + "\n"));
        path
    }

    #[test]
    fn resume_shows_the_sessions_model_and_whole_file_totals() {
        let p = project();
        let current = write_session(&p, "sess-cur", "cur.jsonl");
        let other = write_branched_session(&p);
        let (mut d, _rt) = driver(&p, open_args(&current));
        let mut a = App::new(p.cwd.clone());
        a.model = Some(super::models()[0].clone());
        session_ops::resume(
            &mut a,
            &mut d,
            &p.agent,
            &other.display().to_string(),
            MissingCwd::Ask,
        );
        assert_eq!(
            a.model.as_ref().map(|m| m.key()).as_deref(),
            Some("openai/gpt-4.1"),
            "{:?}",
            notices(&a)
        );
        // Both branches' answers count, as in Pi's footer; the aborted one adds nothing.
        assert_eq!(a.footer.totals.input, 3000);
        assert_eq!(a.footer.totals.output, 20);
        // The context size is that of the last answer that was not aborted.
        assert_eq!(a.footer.context_tokens, 1010);
    }

    #[test]
    fn session_info_and_export_of_the_active_branch() {
        let p = project();
        let other = write_branched_session(&p);
        let (d, _rt) = driver(&p, open_args(&other));
        let mut a = App::new(p.cwd.clone());
        typed(&mut a, "/session");
        update(&mut a, key(KeyCode::Esc));
        assert_eq!(
            update(&mut a, key(KeyCode::Enter)),
            vec![Effect::SessionInfo]
        );
        a.session_info(d.session().as_ref());
        let info = notices(&a).pop().unwrap_or_default();
        assert!(
            info.contains(&format!("File: {}", other.display())),
            "{info}"
        );
        assert!(info.contains("ID: sess-b"), "{info}");
        assert!(
            info.contains("User: 2") && info.contains("Assistant: 3"),
            "{info}"
        );
        assert!(info.contains("Input: 3000"), "{info}");
        // One physical model and no virtual selection: no per-model lines.
        assert!(!info.contains("openai/gpt-4.1:"), "{info}");
        // With a virtual model selected, /session lists what each physical model cost.
        a.model = Some(ModelInfo {
            provider: "router".into(),
            id: "auto".into(),
            name: "Auto".into(),
            context_window: 0,
            reasoning: false,
            xhigh: false,
            is_virtual: true,
        });
        a.session_info(d.session().as_ref());
        let info = notices(&a).pop().unwrap_or_default();
        assert!(
            info.contains("Total: $1.0000\nopenai/gpt-4.1: $1.0000"),
            "{info}"
        );

        // `/export f.jsonl` writes the header and the active branch only (a2 is off it).
        let out = must(super::super::export_session(&d, &p.cwd, Some("f.jsonl")));
        let ids: Vec<String> = lines_of(&out)
            .iter()
            .map(|l| l["id"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(ids, ["sess-b", "m1", "u1", "a1", "u2", "a3"]);
    }
}

#[test]
fn summarization_retries_show_as_notices() {
    let ev = shown(serde_json::json!({
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
            shown(serde_json::json!({"type": kind, "source": "branchSummary"})),
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

/// Escapes in session text (a name, a message) are drawn visibly and never reach the terminal:
/// no screen cell holds a control character.
#[test]
fn control_characters_from_a_session_are_shown_not_sent() {
    let mut a = app();
    a.footer.session_name = Some("evil\x1b]0;title\x07".into());
    a.transcript.push(Item::User("hi \x1b[2J there".into()));
    a.transcript.push(Item::Assistant {
        text: "osc \x1b]52;c;Zm9v\x07 done".into(),
        thinking: String::new(),
        error: None,
    });
    let mut t = match Terminal::new(TestBackend::new(80, 20)) {
        Ok(t) => t,
        Err(e) => panic!("test backend: {e}"),
    };
    if let Err(e) = t.draw(|f| render::draw(&a, f)) {
        panic!("draw: {e}");
    }
    for cell in t.backend().buffer().content() {
        assert!(
            !cell.symbol().chars().any(char::is_control),
            "{:?}",
            cell.symbol()
        );
    }
    let text = format!("{}", t.backend());
    assert!(text.contains("hi ^[[2J there"), "{text}");
    assert!(text.contains("osc ^[]52;c;Zm9v^G done"), "{text}");
    assert!(text.contains("evil^[]0;title^G"), "{text}");
}

#[test]
fn a_slash_prompt_that_is_no_command_is_sent() {
    let mut a = app();
    let out = typed(&mut a, "/usr/local/bin/python crashes, why?");
    assert!(out.is_empty());
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::Prompt("/usr/local/bin/python crashes, why?".into())]
    );
    assert!(a.editor.is_empty());
    // A real command still runs as one.
    typed(&mut a, "/hotkeys");
    update(&mut a, key(KeyCode::Enter));
    assert!(matches!(a.dialog, Some(Dialog::Hotkeys(_))));
}

#[test]
fn shift_tab_offers_xhigh_only_where_the_model_has_it() {
    let mut a = app();
    a.thinking = ThinkingLevel::High;
    let backtab = || Msg::Key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT));
    // claude-sonnet-4-5 declares no xhigh: high wraps to off.
    assert_eq!(
        update(&mut a, backtab()),
        vec![Effect::SetThinking(ThinkingLevel::Off)]
    );
    // gpt-5 (in this list) declares it.
    a.model = a.models.iter().find(|m| m.id == "gpt-5").cloned();
    a.thinking = ThinkingLevel::High;
    update(&mut a, backtab());
    assert_eq!(a.thinking, ThinkingLevel::Xhigh);
    // /settings offers the same levels.
    a.model = a.models.first().cloned();
    a.open_settings();
    match &a.dialog {
        Some(Dialog::Settings(s)) => assert!(!s.items[0].options.contains(&"xhigh".to_string())),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_aborted_turn_keeps_the_context_size() {
    let mut a = app();
    conversation(&mut a);
    let before = a.footer.context_tokens;
    assert!(before > 0);
    update(
        &mut a,
        Msg::Agent(AgentEvent::MessageStart {
            role: "assistant".into(),
            text: String::new(),
        }),
    );
    update(
        &mut a,
        Msg::Agent(AgentEvent::MessageEnd {
            role: "assistant".into(),
            usage: Some(Usage::default()),
            error: Some("Request was aborted".into()),
            dispatched: None,
        }),
    );
    assert_eq!(a.footer.context_tokens, before);
}

#[test]
fn settings_show_auto_compaction_as_configured() {
    let opts = super::TuiOptions::new(PathBuf::from("/work/project"));
    // On unless settings turn it off, as in Pi.
    assert!(opts.auto_compact);
    let driver = FakeDriver::default();
    let mut a = super::initial_app(&opts, &driver);
    assert!(a.footer.auto_compact);
    a.open_settings();
    match &a.dialog {
        Some(Dialog::Settings(s)) => {
            let item = s.items.iter().find(|i| i.key == "compaction.enabled");
            let item = item.map(|i| i.options[i.value].as_str());
            assert_eq!(item, Some("true"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_retry_wait_queues_input_counts_down_and_escape_cancels_it() {
    let mut a = app();
    a.now_ms = 10_000;
    let parsed = shown(serde_json::json!({"type": "auto_retry_start",
        "attempt": 1, "maxAttempts": 3, "delayMs": 2000, "errorMessage": "503 overloaded"}));
    assert_eq!(
        parsed,
        Some(AgentEvent::RetryStart {
            attempt: 1,
            max_attempts: 3,
            delay_ms: 2000
        })
    );
    for ev in [
        AgentEvent::AgentStart,
        AgentEvent::MessageStart {
            role: "assistant".into(),
            text: String::new(),
        },
        AgentEvent::MessageEnd {
            role: "assistant".into(),
            usage: None,
            error: Some("503 overloaded".into()),
            dispatched: None,
        },
        AgentEvent::AgentEnd,
    ]
    .into_iter()
    .chain(parsed)
    {
        update(&mut a, Msg::Agent(ev));
    }
    assert!(screen(&a, 70, 20).contains("Retrying (1/3) in 2s... (escape to cancel)"));
    a.now_ms = 11_200;
    assert!(screen(&a, 70, 20).contains("Retrying (1/3) in 1s..."));
    // Typed while the retry waits: queued as steering, not refused as a second prompt.
    typed(&mut a, "also check the logs");
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(out, vec![Effect::Steer("also check the logs".into())]);
    // Escape cancels the retry (the agent's abort ends the wait).
    let out = update(&mut a, key(KeyCode::Esc));
    assert!(out.contains(&Effect::Abort), "{out:?}");
    let end = shown(serde_json::json!({"type": "auto_retry_end",
        "success": false, "attempt": 1, "finalError": "Retry cancelled"}));
    for ev in end.into_iter().chain([AgentEvent::AgentEnd]) {
        update(&mut a, Msg::Agent(ev));
    }
    let shown = screen(&a, 70, 20);
    assert!(
        shown.contains("Retry failed after 1 attempts: Retry cancelled"),
        "{shown}"
    );
    assert!(!shown.contains("Retrying ("), "{shown}");
}

#[test]
fn tools_render_as_pi_shows_them() {
    let mut a = app();
    a.now_ms = 5_000;
    let output: String = (1..=8).map(|i| format!("out {i}\n")).collect();
    let diff = " 1 keep\n-2 old line\n+2 new line";
    let events = vec![
        AgentEvent::ToolStart {
            id: "b".into(),
            name: "bash".into(),
            args: r#"{"command":"make test"}"#.into(),
        },
        AgentEvent::ToolEnd {
            id: "b".into(),
            output,
            is_error: false,
            diff: None,
        },
        AgentEvent::ToolStart {
            id: "w".into(),
            name: "write".into(),
            args: serde_json::json!({"path": "notes.txt", "content": "first\nsecond"}).to_string(),
        },
        AgentEvent::ToolEnd {
            id: "w".into(),
            output: "Successfully wrote 12 bytes to notes.txt".into(),
            is_error: false,
            diff: None,
        },
        AgentEvent::ToolStart {
            id: "e".into(),
            name: "edit".into(),
            args: serde_json::json!({"path": "src/a.rs", "oldText": "old line", "newText": "new line"})
                .to_string(),
        },
    ];
    for (i, e) in events.into_iter().enumerate() {
        if i == 1 {
            a.now_ms = 6_500;
        }
        update(&mut a, Msg::Agent(e));
    }
    let end = shown(serde_json::json!({"type": "tool_execution_end",
        "toolCallId": "e", "toolName": "edit", "isError": false,
        "result": {"content": [{"type": "text", "text": "Successfully replaced text in src/a.rs."}],
                   "details": {"diff": diff, "firstChangedLine": 2}}}));
    if let Some(e) = end {
        update(&mut a, Msg::Agent(e));
    }
    let shown = screen(&a, 70, 40);
    // bash: the command, the last five lines behind a count of the earlier ones, the time.
    assert!(shown.contains("$ make test"), "{shown}");
    assert!(
        shown.contains("... (3 earlier lines, ctrl+o to expand)"),
        "{shown}"
    );
    assert!(!shown.contains("out 3 ") && shown.contains("out 4") && shown.contains("out 8"));
    assert!(shown.contains("Took 1.5s"), "{shown}");
    // write: the content written.
    assert!(
        shown.contains("write notes.txt") && shown.contains("second"),
        "{shown}"
    );
    // edit: the diff from the result, not the one-line confirmation.
    assert!(
        shown.contains("-2 old line") && shown.contains("+2 new line"),
        "{shown}"
    );
    assert!(!shown.contains("Successfully replaced"), "{shown}");
    // A session loaded from disk shows the diff too.
    let mut b = app();
    b.load_messages(&[
        serde_json::json!({"role": "assistant", "content": [{"type": "toolCall", "id": "e",
            "name": "edit", "arguments": {"path": "src/a.rs"}}], "stopReason": "toolUse"}),
        serde_json::json!({"role": "toolResult", "toolCallId": "e", "toolName": "edit",
            "content": [{"type": "text", "text": "ok"}], "details": {"diff": diff},
            "isError": false}),
    ]);
    assert!(screen(&b, 70, 20).contains("+2 new line"));
}

#[test]
fn hotkeys_show_every_row_and_paging_moves_a_screenful() {
    let mut a = app();
    typed(&mut a, "/hotkeys");
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Enter));
    // Tall enough: every shortcut is listed, the last one included.
    let shown = screen(&a, 70, 40);
    assert!(shown.contains("scroll to the end and follow"), "{shown}");
    // Too short: the list scrolls to its end.
    for _ in 0..40 {
        update(&mut a, key(KeyCode::Down));
    }
    let shown = screen(&a, 70, 16);
    assert!(shown.contains("scroll to the end and follow"), "{shown}");
    update(&mut a, key(KeyCode::Esc));

    for i in 0..100 {
        update(
            &mut a,
            Msg::Agent(AgentEvent::Notice(format!("notice {i}"))),
        );
    }
    screen(&a, 70, 30);
    let (height, total) = a.view.get();
    assert!(height > 10 && total >= 200, "{height} {total}");
    update(&mut a, key(KeyCode::PageUp));
    assert_eq!(a.scroll, u64::from(height));
    // ctrl+home goes to the top, ctrl+end back to the end (following new output).
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::Home, KeyModifiers::CONTROL)),
    );
    assert_eq!(a.scroll, total - u64::from(height));
    assert!(screen(&a, 70, 30).contains("notice 0 "));
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::End, KeyModifiers::CONTROL)),
    );
    assert_eq!(a.scroll, 0);
}

#[test]
fn editor_yank_undo_and_jump() {
    let mut a = app();
    typed(&mut a, "hello big world");
    update(&mut a, ctrl('w'));
    assert_eq!(a.editor.text(), "hello big ");
    update(&mut a, ctrl('a'));
    update(&mut a, ctrl('y'));
    assert_eq!(a.editor.text(), "worldhello big ");
    // ctrl+- takes back the yank, then the deletion, then the last typed word.
    update(&mut a, ctrl('-'));
    assert_eq!(a.editor.text(), "hello big ");
    update(&mut a, ctrl('-'));
    assert_eq!(a.editor.text(), "hello big world");
    update(&mut a, ctrl('-'));
    assert_eq!(a.editor.text(), "hello big ");
    // ctrl+] then a character jumps to it.
    update(&mut a, ctrl('a'));
    update(&mut a, ctrl(']'));
    update(&mut a, key(KeyCode::Char('b')));
    assert_eq!(a.editor.cursor(), (0, 6));
    update(&mut a, key(KeyCode::Char('X')));
    assert_eq!(a.editor.text(), "hello Xbig ");
}

#[test]
fn thinking_command_sets_or_picks_a_level() {
    let mut a = app();
    a.thinking = ThinkingLevel::Low;
    typed(&mut a, "/thinking high");
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(out, vec![Effect::SetThinking(ThinkingLevel::High)]);
    assert_eq!(a.thinking, ThinkingLevel::High);
    // claude-sonnet-4-5 has no xhigh here.
    typed(&mut a, "/thinking xhigh");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert_eq!(a.thinking, ThinkingLevel::High);
    // Without a level: a picker of the model's levels, on the current one.
    typed(&mut a, "/thinking");
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Enter));
    assert!(matches!(a.dialog, Some(Dialog::Confirm(_))));
    update(&mut a, key(KeyCode::Up));
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(out, vec![Effect::SetThinking(ThinkingLevel::Medium)]);
}

#[test]
fn cycling_models_and_thinking_says_so_on_one_status_line() {
    let mut a = app();
    let before = a.transcript.len();
    update(&mut a, ctrl('p'));
    update(&mut a, ctrl('p'));
    let notices: Vec<&Item> = a.transcript.items()[before..].iter().collect();
    // claude-haiku-4-5 (no reasoning: thinking goes off), then gpt-5: the second status
    // replaced the first.
    assert_eq!(
        notices,
        [&Item::Notice("Switched to gpt-5 (thinking: off)".into())]
    );
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT)),
    );
    assert_eq!(
        a.transcript.items().last(),
        Some(&Item::Notice("Thinking level: minimal".into()))
    );
    assert_eq!(a.transcript.len(), before + 1);
}

#[test]
fn large_pastes_show_as_markers_and_are_sent_whole() {
    let mut a = app();
    let big: String = (1..=12).map(|i| format!("row {i}\n")).collect();
    let big = big.trim_end().to_string();
    typed(&mut a, "look: ");
    update(&mut a, Msg::Paste(big.clone()));
    update(&mut a, Msg::Paste("x".repeat(1500)));
    assert_eq!(
        a.editor.text(),
        "look: [paste #1 +12 lines][paste #2 1500 chars]"
    );
    assert!(screen(&a, 80, 20).contains("[paste #1 +12 lines]"));
    // A small paste goes in as it is.
    update(&mut a, Msg::Paste(" ok".into()));
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        out,
        vec![Effect::Prompt(format!(
            "look: {big}{} ok",
            "x".repeat(1500)
        ))]
    );
    assert!(a.pastes.is_empty());
}

#[test]
fn typing_in_the_tree_searches_it() {
    let mut a = tree_app();
    let all = match &a.dialog {
        Some(Dialog::Tree(t)) => t.rows.len(),
        other => panic!("{other:?}"),
    };
    typed(&mut a, "AGAIN");
    let texts = |a: &App| match &a.dialog {
        Some(Dialog::Tree(t)) => t
            .rows
            .iter()
            .map(|r| t.nodes[r.node].text.clone())
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    // Any case; the entries whose text holds the query.
    let found = texts(&a);
    assert!(!found.is_empty() && found.len() < all, "{found:?}");
    assert!(
        found.iter().all(|t| t.to_lowercase().contains("again")),
        "{found:?}"
    );
    assert!(screen(&a, 80, 24).contains("Search: AGAIN"));
    update(&mut a, key(KeyCode::Backspace));
    assert!(screen(&a, 80, 24).contains("Search: AGAI"));
    // Escape clears the search, a second escape closes the tree.
    update(&mut a, key(KeyCode::Esc));
    assert_eq!(texts(&a).len(), all);
    update(&mut a, key(KeyCode::Esc));
    assert!(a.dialog.is_none());
}

/// `/changelog` shows the CHANGELOG.md this build embeds, under Pi's "What's New".
#[test]
fn changelog_command_shows_the_embedded_changelog() {
    let mut a = app();
    typed(&mut a, "/changelog");
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Enter));
    assert!(
        matches!(a.transcript.items().last(), Some(Item::Changelog(t)) if t.contains(concat!("[", env!("CARGO_PKG_VERSION"), "]"))),
        "{:?}",
        a.transcript.items().last()
    );
    // Tall enough for the whole changelog: the view keeps the end of the transcript.
    let s = screen(&a, 90, 300);
    assert!(s.contains("What's New"), "{s}");
    assert!(s.contains("pi sessions"), "{s}");
}

/// /resume opens on the current folder; tab shows every session (Pi's scope switch).
#[test]
fn resume_scope_switches_between_this_folder_and_all() {
    let mut a = app();
    let mut rows = resume_rows();
    rows[2].cwd = "/elsewhere".into();
    a.open_resume(rows, 1_000_000_000);
    let ids = |a: &App| match &a.dialog {
        Some(Dialog::Resume(r)) => r
            .filtered()
            .iter()
            .map(|s| s.id.clone())
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(ids(&a), ["s1", "s2", "s4"]);
    assert!(screen(&a, 90, 14).contains("Resume Session (Current Folder)"));
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(ids(&a), ["s1", "s2", "s4", "s3"]);
    assert!(screen(&a, 90, 14).contains("Resume Session (All)"));
    update(&mut a, key(KeyCode::Tab));
    typed(&mut a, "compaction");
    assert!(screen(&a, 110, 14).contains("No sessions in current folder. Press Tab to view all."));
}

/// The search asks the loop for message-text matches per term, and a session whose later
/// message matches is listed; every term must match somewhere, as in Pi.
#[test]
fn resume_search_uses_message_text_from_the_index() {
    let mut a = app();
    a.open_resume(resume_rows(), 1_000_000_000);
    let out = typed(&mut a, "okapi");
    assert_eq!(
        out.last(),
        Some(&Effect::SearchSessionText(vec!["okapi*".into()]))
    );
    let loc = |id: &str| format!("/home/u/.pi/agent/sessions/--work--/{id}.jsonl");
    a.resume_text_hits(vec!["okapi*".into()], |_| {
        Some([loc("s3")].into_iter().collect())
    });
    let ids = |a: &App| match &a.dialog {
        Some(Dialog::Resume(r)) => r
            .filtered()
            .iter()
            .map(|s| s.id.clone())
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(ids(&a), ["s3"]);
    // A second term, answered by nothing: no session has both.
    let out = typed(&mut a, " \"red fox\"");
    assert!(out.contains(&Effect::SearchSessionText(vec!["\"red fox\"".into()])));
    a.resume_text_hits(vec!["\"red fox\"".into()], |_| Some(Default::default()));
    assert!(ids(&a).is_empty());
    // Without an index answer a term still matches names, folders and first messages.
    if let Some(Dialog::Resume(r)) = a.dialog.as_mut() {
        r.query = "tui".into();
    }
    assert_eq!(ids(&a), ["s2"]);
}

/// /settings offers Pi's entries for the settings this build acts on, saved under Pi's
/// keys with Pi's types; the tree filter and double-escape entries apply at once.
#[test]
fn settings_offer_pis_entries_with_pis_keys() {
    let mut a = app();
    a.open_settings();
    let keys: Vec<&str> = match &a.dialog {
        Some(Dialog::Settings(s)) => s.items.iter().map(|i| i.key).collect(),
        other => panic!("{other:?}"),
    };
    for k in [
        "compaction.enabled",
        "images.blockImages",
        "enableSkillCommands",
        "steeringMode",
        "followUpMode",
        "httpIdleTimeoutMs",
        "hideThinkingBlock",
        "quietStartup",
        "doubleEscapeAction",
        "treeFilterMode",
        "theme",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
    let choose = |a: &mut App, key: &str| -> Vec<Effect> {
        let at = match &a.dialog {
            Some(Dialog::Settings(s)) => s.items.iter().position(|i| i.key == key),
            _ => None,
        };
        if let Some(Dialog::Settings(s)) = a.dialog.as_mut() {
            s.selected = at.unwrap_or_default();
        }
        update(a, key_enter())
    };
    fn key_enter() -> Msg {
        key(KeyCode::Enter)
    }
    assert_eq!(
        choose(&mut a, "httpIdleTimeoutMs"),
        vec![Effect::SaveSetting {
            key: "httpIdleTimeoutMs".into(),
            value: serde_json::json!(0)
        }]
    );
    assert_eq!(
        choose(&mut a, "images.blockImages"),
        vec![Effect::SaveSetting {
            key: "images.blockImages".into(),
            value: serde_json::json!(true)
        }]
    );
    assert_eq!(
        choose(&mut a, "steeringMode"),
        vec![
            Effect::SetQueueMode {
                follow_up: false,
                mode: "all".into()
            },
            Effect::SaveSetting {
                key: "steeringMode".into(),
                value: serde_json::json!("all")
            }
        ]
    );
    choose(&mut a, "doubleEscapeAction");
    assert_eq!(a.settings.double_escape, "fork");
    choose(&mut a, "treeFilterMode");
    assert_eq!(a.prefs.tree_filter, "no-tools");
    update(&mut a, key(KeyCode::Esc));
    a.open_tree(TreeNav::from_session(&sample_session()));
    match &a.dialog {
        Some(Dialog::Tree(t)) => assert_eq!(t.filter, Filter::NoTools),
        other => panic!("{other:?}"),
    }
}

/// ctrl+y then alt+y cycles Pi's kill ring from the keyboard; a key in between ends the
/// yank, so alt+y then does nothing.
#[test]
fn alt_y_pops_the_kill_ring() {
    let alt = |c: char| Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::ALT));
    let mut a = app();
    typed(&mut a, "one two");
    update(&mut a, ctrl('w'));
    typed(&mut a, "three");
    update(&mut a, ctrl('u'));
    assert_eq!(a.editor.text(), "");
    update(&mut a, ctrl('y'));
    assert_eq!(a.editor.text(), "one three");
    update(&mut a, alt('y'));
    assert_eq!(a.editor.text(), "two");
    typed(&mut a, "!");
    update(&mut a, alt('y'));
    assert_eq!(a.editor.text(), "two!");
}

/// A resumed session's footer totals are summed after the first frame: until they arrive
/// the footer covers the context shown, and what this run spends meanwhile is added to the
/// file's totals, not lost; after a switch the late sum is stale and ignored.
#[test]
fn file_totals_arrive_after_start_and_keep_what_was_spent_meanwhile() {
    let opts = super::TuiOptions::new(PathBuf::from("/p"));
    let driver = FakeDriver {
        session: Some(sample_session()),
        ..Default::default()
    };
    let mut a = super::initial_app(&opts, &driver);
    assert!(a.footer.file_totals_pending);
    let spent = Usage {
        input: 5,
        output: 1,
        ..Usage::default()
    };
    update(
        &mut a,
        Msg::Agent(AgentEvent::MessageEnd {
            role: "assistant".into(),
            usage: Some(spent),
            error: None,
            dispatched: None,
        }),
    );
    let file = Usage {
        input: 100,
        output: 10,
        ..Usage::default()
    };
    update(&mut a, Msg::FileTotals(file));
    assert_eq!((a.footer.totals.input, a.footer.totals.output), (105, 11));
    assert!(!a.footer.file_totals_pending);

    // Arriving again (or after a switch computed its own), the sum changes nothing.
    update(&mut a, Msg::FileTotals(file));
    assert_eq!(a.footer.totals.input, 105);
}

#[test]
fn a_prompt_an_extension_handles_ends_the_working_state() {
    let mut a = app();
    typed(&mut a, "/ext-command");
    let out = update(&mut a, key(KeyCode::Enter));
    assert_eq!(out, vec![Effect::Prompt("/ext-command".into())]);
    assert!(a.working);
    // No run starts for a command: the answer alone ends "Working...".
    update(&mut a, Msg::Agent(AgentEvent::PromptHandled));
    assert!(!a.working);

    // A run of another origin (a message the command sent) keeps it working until it ends.
    typed(&mut a, "/ext-command");
    update(&mut a, key(KeyCode::Enter));
    update(&mut a, Msg::Agent(AgentEvent::AgentStart));
    update(&mut a, Msg::Agent(AgentEvent::PromptHandled));
    assert!(a.working);
    update(&mut a, Msg::Agent(AgentEvent::AgentEnd));
    assert!(!a.working);
}
