//! End to end: extensions' `ctx.ui` in the interactive mode of the real `pi` binary, driven
//! in tmux against pi-fake-llm. Pi's confirm-destructive.ts asks before `/new` (a
//! `session_before_switch` gate answered while the UI keeps running), ui-dialogs.ts (ours)
//! asks a select and an input dialog and sets a status, a widget, a header and a footer
//! (after which the screen is idle again, not "Working..."); select-events.ts (ours) reports
//! ctrl+p's `model_select`.
//!
//! Needs tmux on PATH, as tui_e2e.rs; gated on `PI_TUI_E2E=1` like it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod extensions_common;
mod tmux_common;

use std::path::Path;
use std::time::Duration;

use extensions_common::{fixture, pi_bin, Setup};
use serde_json::json;
use tmux_common::{enabled, shell_quote, Tmux};

/// Starts pi with the fake model in a tmux session of its own (socket `pi-ext-NAME-PID`),
/// in `setup`'s directories, with `env` set and `-e` for each of `fixtures`; the pane stays
/// for 30 s after pi exits, so its last screen can be read.
fn start_pi(setup: &Setup, name: &str, env: &[(&str, &str)], fixtures: &[&str]) -> Tmux {
    let mut command = format!(
        "env PI_CODING_AGENT_DIR={} XDG_CACHE_HOME={}",
        shell_quote(&setup.agent),
        shell_quote(&setup.agent.join("cache")),
    );
    for (key, value) in env {
        command.push_str(&format!(" {key}={}", shell_quote(Path::new(value))));
    }
    command.push_str(&format!(
        " {} --session-dir {} --model fakeoai/fake-model",
        shell_quote(Path::new(pi_bin())),
        shell_quote(&setup.sessions),
    ));
    for file in fixtures {
        command.push_str(&format!(" -e {}", shell_quote(Path::new(&fixture(file)))));
    }
    command.push_str("; sleep 30");
    Tmux::start_on(
        Some(&format!("pi-ext-{name}-{}", std::process::id())),
        "t",
        &setup.cwd,
        &command,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn dialogs_gates_and_text_lines_in_the_interactive_mode() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([{"text": "First answer."}])).await;
    let tmux = start_pi(
        &setup,
        "tui",
        &[],
        &[
            "confirm-destructive.ts",
            "ui-dialogs.ts",
            "select-events.ts",
        ],
    );
    tmux.wait_for("fake-model");
    tmux.keys(&["Say hello", "Enter"]);
    tmux.wait_for("First answer.");

    // /new asks first; "No" keeps the session (its answer stays on screen).
    tmux.keys(&["/new", "Enter"]);
    let screen = tmux.wait_for("Clear session?");
    assert!(screen.contains("This will delete all messages"), "{screen}");
    tmux.keys(&["Down", "Enter"]);
    let screen = tmux.wait_for("Clear cancelled");
    assert!(screen.contains("First answer."), "{screen}");
    assert!(!screen.contains("New session started"), "{screen}");

    // Asked again, "Yes" switches: the transcript is the new, empty session's.
    tmux.keys(&["/new", "Enter"]);
    tmux.wait_for("Clear session?");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("New session started");
    assert!(!screen.contains("First answer."), "{screen}");

    // ctrl+p cycles: extensions hear Pi's `model_select` with source "cycle".
    tmux.keys(&["C-p"]);
    tmux.wait_for("model_select cycle fakeoai/fake-model -> fakeoai/");

    // A select, then an input dialog, answered from the keyboard.
    tmux.keys(&["/askme", "Enter"]);
    let screen = tmux.wait_for("Pick a color");
    assert!(screen.contains("blue"), "{screen}");
    tmux.keys(&["Down", "Enter"]);
    tmux.wait_for("Your name");
    tmux.keys(&["Ada", "Enter"]);
    let screen = tmux.wait_for("Answers: color=green name=Ada");
    for line in [
        "askme-status green",
        "askme-widget Ada",
        "askme-header Ada",
        "askme-footer green",
    ] {
        assert!(screen.contains(line), "{line} missing:\n{screen}");
    }
    // The command ran no agent turn: the UI is idle again, not "Working..." forever.
    tmux.wait_until(|s| !s.contains("Working..."), "idle after /askme");
}

/// `pi.registerShortcut`: the key runs the extension's handler (its notice shows), a
/// reserved key is skipped with Pi's warning and keeps its built-in meaning.
#[tokio::test(flavor = "multi_thread")]
async fn extension_shortcuts_in_the_interactive_mode() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    let tmux = start_pi(&setup, "keys", &[], &["shortcuts.ts"]);
    tmux.wait_for("fake-model");
    tmux.wait_for("Extension shortcut 'ctrl+c' conflicts with built-in shortcut. Skipping.");
    tmux.keys(&["M-x"]);
    tmux.wait_for("Shortcut ran on fake-model");
    // ctrl+c keeps clearing the editor.
    tmux.keys(&["draft", "C-c"]);
    let screen = tmux.wait_until(|s| !s.contains("draft"), "the editor cleared");
    assert!(!screen.contains("Reserved shortcut ran"), "{screen}");
}

/// `resources_discover`'s `themePaths`: the theme the settings name, found there by its
/// `name`, is the one in use (no "using system" warning) and /settings offers it.
#[tokio::test(flavor = "multi_thread")]
async fn themes_from_theme_paths_are_used_and_offered() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    let themes = setup.cwd.join("ext-themes");
    std::fs::create_dir_all(&themes).unwrap();
    std::fs::write(
        themes.join("ocean.json"),
        json!({"name": "ext-ocean", "colors": {"accent": "#2080c0"}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        setup.agent.join("settings.json"),
        json!({"theme": "ext-ocean"}).to_string(),
    )
    .unwrap();
    let tmux = start_pi(
        &setup,
        "themes",
        &[("DISCOVER_THEMES", &themes.display().to_string())],
        &["discover-themes.ts"],
    );
    let screen = tmux.wait_for("fake-model");
    assert!(!screen.contains("using system"), "{screen}");
    tmux.keys(&["/settings", "Enter"]);
    let screen = tmux.wait_for("Theme");
    let row = screen
        .lines()
        .find(|l| l.contains("Theme"))
        .unwrap_or_default()
        .to_string();
    assert!(row.contains("ext-ocean"), "{row}\n{screen}");
}

/// `ctx.ui.getAllThemes()`, `getTheme()` and `setTheme()` in the interactive mode
/// (themes-ui.ts): the list is every theme the screen can show (built-ins, the user's theme
/// files, the themes `resources_discover` contributed), `system` first, the rest by name; `setTheme` by name
/// repaints the screen in that theme and saves the setting; an unknown name is Pi's error
/// and the default theme; a theme object from `getTheme` is shown without being saved.
#[tokio::test(flavor = "multi_thread")]
async fn extensions_list_get_and_set_themes_on_screen() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    let themes = setup.cwd.join("ext-themes");
    std::fs::create_dir_all(&themes).unwrap();
    // Every colour of the screen's chrome in one hue, so the repaint shows.
    let ocean: serde_json::Map<String, serde_json::Value> = [
        "accent",
        "border",
        "borderMuted",
        "muted",
        "dim",
        "success",
        "warning",
    ]
    .iter()
    .map(|k| (k.to_string(), json!("#2080c0")))
    .collect();
    std::fs::write(
        themes.join("ocean.json"),
        json!({"name": "ext-ocean", "colors": ocean}).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(setup.agent.join("themes")).unwrap();
    std::fs::write(
        setup.agent.join("themes").join("mine.json"),
        json!({"name": "mine", "colors": {"accent": "#c02080"}}).to_string(),
    )
    .unwrap();
    let tmux = start_pi(
        &setup,
        "settheme",
        &[
            ("DISCOVER_THEMES", &themes.display().to_string()),
            ("THEME_PROBE", "ext-ocean"),
        ],
        &["themes-ui.ts"],
    );
    const OCEAN: &str = "38;2;32;128;192";
    tmux.wait_for("fake-model");
    assert!(!tmux.capture_ansi().contains(OCEAN));

    tmux.keys(&["/themes-list", "Enter"]);
    tmux.wait_for("themes: system,dark,ext-ocean+,light,mine+");
    tmux.wait_for("getTheme ext-ocean: ext-ocean ocean.json styled");
    tmux.wait_for("getTheme nosuch: undefined");

    // By name: the screen repaints in the theme, and the setting is saved.
    tmux.keys(&["/theme-set ext-ocean", "Enter"]);
    tmux.wait_for("setTheme ext-ocean: {\"success\":true}");
    tmux.wait_until_ansi(|s| s.contains(OCEAN), "the ocean colours");
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(setup.agent.join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["theme"], "ext-ocean", "{settings}");

    // An unknown name: Pi's error, and the default theme on screen; the setting stays.
    tmux.keys(&["/theme-set nosuch", "Enter"]);
    tmux.wait_for("setTheme nosuch: {\"success\":false,\"error\":\"Theme not found: nosuch\"}");
    tmux.wait_until_ansi(|s| !s.contains(OCEAN), "the default colours");
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(setup.agent.join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["theme"], "ext-ocean", "{settings}");

    // A theme object getTheme() gave: shown, not saved.
    tmux.keys(&["/theme-object ext-ocean", "Enter"]);
    tmux.wait_for("setTheme object ext-ocean: {\"success\":true}");
    tmux.wait_until_ansi(|s| s.contains(OCEAN), "the ocean colours again");
}

/// A command's `ctx.reload()` in the interactive mode is the screen's /reload: keybindings
/// edited meanwhile take effect (here `app.model.select` on alt+y) without typing /reload.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_reload_refreshes_the_screen() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    let tmux = start_pi(&setup, "cmdreload", &[], &["themes-ui.ts"]);
    tmux.wait_for("fake-model");
    std::fs::write(
        setup.agent.join("keybindings.json"),
        json!({"app.model.select": "alt+y"}).to_string(),
    )
    .unwrap();
    tmux.keys(&["/reload-now", "Enter"]);
    tmux.wait_for("session_start after reload");
    tmux.wait_until(|s| !s.contains("Working..."), "idle after /reload-now");
    tmux.keys(&["M-y"]);
    tmux.wait_for("Select model");
    // With /reload's notice.
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_until(|s| !s.contains("Select model"), "the picker closed");
    assert!(screen.contains("Reloaded keybindings"), "{screen}");
    assert!(!screen.contains("Reload failed"), "{screen}");
}

/// `/login` for a provider an extension registers with `oauth` (oauth-questions.ts): the
/// login's `onSelect` and `onPrompt` open Pi's login dialog, with the sign-in page and
/// instructions `onAuth` showed above the question and the placeholder as "e.g., …";
/// escape cancels the login without an error, and a later login stores the credentials
/// made of the answers.
#[tokio::test(flavor = "multi_thread")]
async fn an_extension_login_asks_its_questions_in_the_login_dialog() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    let tmux = start_pi(&setup, "login", &[], &["oauth-questions.ts"]);
    tmux.wait_for("fake-model");

    // Cancelled at the code: nothing is stored, no failure is reported.
    tmux.submit("/login corp-pick");
    let screen = tmux.wait_for("Choose a workspace:");
    assert!(screen.contains("Ops workspace"), "{screen}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Enter the one-time code:");
    tmux.keys(&["Escape"]);
    tmux.wait_until(
        |s| !s.contains("Enter the one-time code:"),
        "the question closed",
    );

    // Answered: the second workspace and a typed code.
    tmux.submit("/login corp-pick");
    tmux.wait_for("Choose a workspace:");
    tmux.keys(&["Down", "Enter"]);
    let screen = tmux.wait_for("Enter the one-time code:");
    for line in [
        "Login to Corp Pick",
        "https://sso.example.test/pick",
        "Approve the sign-in there.",
        "e.g., 123456",
    ] {
        assert!(screen.contains(line), "{line} missing:\n{screen}");
    }
    tmux.submit("4242");
    let screen = tmux.wait_for("Logged in to Corp Pick");
    assert!(!screen.contains("Failed to login"), "{screen}");
    let auth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(setup.agent.join("auth.json")).unwrap())
            .unwrap();
    assert_eq!(auth["corp-pick"]["access"], "pick-ws-lab-4242");
    assert_eq!(auth["corp-pick"]["workspace"], "ws-lab");
    assert_eq!(auth["corp-pick"]["type"], "oauth");
}

/// `registerProvider`'s `refreshModels` (refresh-models.ts) in the interactive mode: the
/// catalog refresh after start-up runs it with network and the stored credential, and the
/// model it returns replaces the start-up one in `/model` and answers prompts.
#[tokio::test(flavor = "multi_thread")]
async fn the_start_up_refresh_runs_refresh_models_with_network() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([{"text": "Online answer."}])).await;
    std::fs::write(
        setup.agent.join("auth.json"),
        json!({"live-cat": {"type": "api_key", "key": "stored-live-key"}}).to_string(),
    )
    .unwrap();
    let tmux = start_pi(
        &setup,
        "refresh",
        &[
            ("LOCAL_PROXY_URL", &setup.fake_url()),
            ("LOCAL_PROXY_KEY", "k"),
        ],
        &["refresh-models.ts"],
    );
    tmux.wait_for("fake-model");
    // The picker lists what the catalog holds when it opens: reopened until the refresh
    // with network has replaced the start-up model.
    let mut attempts = 0;
    loop {
        attempts += 1;
        tmux.submit("/model live-");
        let screen = tmux.wait_until(
            |s| s.contains("Search: live-") && s.contains("[live-cat]"),
            "the picker's live-cat rows",
        );
        if screen.contains("live-online-api_key") {
            assert!(!screen.contains("live-offline"), "{screen}");
            break;
        }
        assert!(
            screen.contains("live-offline-api_key") && attempts < 100,
            "{screen}"
        );
        tmux.keys(&["Escape"]);
        tmux.wait_until(|s| !s.contains("Search: live-"), "the picker closed");
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux.keys(&["Enter"]);
    tmux.submit("hello");
    tmux.wait_for("Online answer.");
    assert_eq!(
        setup.fake.requests()[0].body["model"],
        "live-online-api_key"
    );
}

/// Pi refreshes the catalogs when `/model <term>` names no model and when `/scoped-models`
/// opens, and when the picker opens (fixtures/extensions/file-catalog.ts, whose
/// `refreshModels` reads a file; offline, so no start-up refresh with network interferes):
/// a model that appeared since start-up is taken at once by `/model`, one that appears
/// later is listed by `/scoped-models`, and the picker says "Model catalogs refreshed."
/// and lists the next one; when the refresh throws, it says it could not refresh `filecat`
/// and keeps listing its models.
#[tokio::test(flavor = "multi_thread")]
async fn model_and_scoped_models_refresh_the_catalogs() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([{"text": "From the file catalog."}])).await;
    let catalog = setup.agent.join("catalog.txt");
    let tmux = start_pi(
        &setup,
        "catalogs",
        &[
            ("PI_OFFLINE", "1"),
            ("LOCAL_PROXY_URL", &setup.fake_url()),
            ("LOCAL_PROXY_KEY", "k"),
            ("CATALOG_FILE", &catalog.display().to_string()),
        ],
        &["file-catalog.ts"],
    );
    tmux.wait_for("fake-model");
    std::fs::write(&catalog, "filecat-new\n").unwrap();
    tmux.submit("/model filecat-new");
    let screen = tmux.wait_until(
        |s| {
            s.contains("Refreshing model catalogs")
                && s.lines()
                    .any(|l| l.contains("filecat-new") && !l.contains("/model"))
        },
        "the new model in the footer",
    );
    assert!(!screen.contains("Search: filecat-new"), "{screen}");
    tmux.submit("hello");
    tmux.wait_for("From the file catalog.");
    assert_eq!(setup.fake.requests()[0].body["model"], "filecat-new");

    std::fs::write(&catalog, "filecat-new\nfilecat-later\n").unwrap();
    tmux.submit("/scoped-models");
    tmux.wait_for("filecat-later");
    tmux.keys(&["Escape"]);
    tmux.wait_until(|s| !s.contains("Scoped models"), "the list closed");

    // The picker refreshes as it opens, saying so under the list as Pi's does.
    std::fs::write(
        &catalog,
        "filecat-new
filecat-later
filecat-last
",
    )
    .unwrap();
    tmux.submit("/model");
    let screen = tmux.wait_for("Model catalogs refreshed.");
    assert!(screen.contains("Select model"), "{screen}");
    tmux.keys(&["-l", "filecat-la"]);
    tmux.wait_for("filecat-last");
    tmux.keys(&["Escape"]);
    tmux.wait_until(|s| !s.contains("Select model"), "the picker closed");

    // A refresh that fails keeps the models and says so, in Pi's words.
    std::fs::write(&catalog, "fail\n").unwrap();
    tmux.submit("/model");
    let screen = tmux.wait_for("Could not refresh filecat; showing cached models.");
    assert!(!screen.contains("Model catalogs refreshed."), "{screen}");
    tmux.keys(&["-l", "filecat-la"]);
    tmux.wait_for("filecat-last");
}

/// `oauth.modifyModels` after `/login` (fixtures/extensions/oauth-modify-models.ts), also
/// offline, as Pi's refresh after a login runs without network under `PI_OFFLINE`: the
/// declared model listens nowhere, the one `modifyModels` made of it for the new
/// credential answers through the account's endpoint with the login's key.
#[tokio::test(flavor = "multi_thread")]
async fn a_login_projects_the_providers_models_through_modify_models() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([{"text": "From the account endpoint."}])).await;
    let tmux = start_pi(
        &setup,
        "modify",
        &[("PI_OFFLINE", "1"), ("ACCT_LLM_URL", &setup.fake_url())],
        &["oauth-modify-models.ts"],
    );
    tmux.wait_for("fake-model");
    tmux.submit("/login acct");
    tmux.wait_for("Tenant:");
    tmux.submit("t9");
    tmux.wait_for("Logged in to Acct SSO");
    tmux.submit("/model acct/acct-model");
    tmux.wait_until(
        |s| {
            s.lines()
                .any(|l| l.contains("acct-model") && !l.contains("/model"))
        },
        "the account's model in the footer",
    );
    tmux.submit("hello");
    tmux.wait_for("From the account endpoint.");
    let sent = setup.fake.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].body["model"], "acct-model");
    assert_eq!(
        sent[0].headers["authorization"],
        "Bearer fake-access-token-acct-t9"
    );
}

/// `project_trust` handlers at the interactive mode's start get Pi's start-up dialogs
/// (fixtures/extensions/trust-decider.ts with `TRUST_ANSWER=ask`): `ctx.hasUI` is true, its
/// `ctx.ui.select` and `ctx.ui.input` are screens of their own before the session's, and
/// the answer decides (and with `remember` is saved) without the built-in trust prompt.
#[tokio::test(flavor = "multi_thread")]
async fn project_trust_handlers_ask_on_start_up_screens() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    std::fs::create_dir_all(setup.cwd.join(".pi")).unwrap();
    std::fs::write(setup.cwd.join(".pi/SYSTEM.md"), "Project prompt.\n").unwrap();
    let log = setup.agent.join("trust.log");
    let tmux = start_pi(
        &setup,
        "trust",
        &[
            ("TRUST_ANSWER", "ask"),
            ("TRUST_REMEMBER", "1"),
            ("TRUST_LOG", &log.display().to_string()),
        ],
        &["trust-decider.ts"],
    );
    let screen = tmux.wait_for("Decide this project's trust:");
    assert!(screen.contains("Keep it untrusted"), "{screen}");
    tmux.keys(&["Down", "Enter"]);
    let screen = tmux.wait_for("Who decides?");
    assert!(screen.contains("your name"), "{screen}");
    tmux.submit("ann");
    let screen = tmux.wait_for("fake-model");
    assert!(!screen.contains("Trust project folder?"), "{screen}");
    let cwd = std::fs::canonicalize(&setup.cwd).unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged
            .lines()
            .any(|l| l.starts_with("project_trust ") && l.ends_with(" hasUI=true")),
        "{logged}"
    );
    assert!(logged.contains("asked Keep it untrusted ann"), "{logged}");
    let trust: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(setup.agent.join("trust.json")).unwrap())
            .unwrap();
    assert_eq!(trust[cwd.display().to_string()], false);
}

/// `/new` loads the extensions afresh, as Pi does: what the old ones drew goes (the first
/// session's widget), the new instance's status says it started one session, and slash
/// completion offers the commands of the files as they are now.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_session_gets_fresh_extensions_on_screen() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    std::fs::write(setup.cwd.join("cmdname.txt"), "alpha").unwrap();
    let tmux = start_pi(&setup, "new", &[], &["session-status.ts"]);
    tmux.wait_for("runtime 1 startup");
    tmux.wait_for("first-session widget");
    std::fs::write(setup.cwd.join("cmdname.txt"), "beta").unwrap();
    tmux.keys(&["/new", "Enter"]);
    let screen = tmux.wait_for("runtime 1 new");
    assert!(!screen.contains("first-session widget"), "{screen}");
    tmux.keys(&["/bet"]);
    tmux.wait_for("from beta");
    tmux.keys(&["C-c"]);
    tmux.wait_until(|s| !s.contains("/bet"), "the editor cleared");
    tmux.keys(&["/alph"]);
    std::thread::sleep(Duration::from_millis(800));
    let screen = tmux.capture();
    assert!(!screen.contains("from alpha"), "{screen}");
}

/// A project next to `setup.cwd` with a prompt template in `.pi/prompts` (so its trust is
/// asked), and a session of it in `setup.sessions`; returns the project's directory.
fn other_project_with_a_session(setup: &Setup) -> std::path::PathBuf {
    let other = setup.cwd.parent().unwrap().join("other");
    std::fs::create_dir_all(other.join(".pi/prompts")).unwrap();
    std::fs::write(
        other.join(".pi/prompts/deploy.md"),
        "---\ndescription: Deploy it\n---\nDeploy.\n",
    )
    .unwrap();
    let lines = [
        json!({"type": "session", "version": 3, "id": "sess-other",
               "timestamp": "2026-01-01T00:00:00.000Z", "cwd": other.display().to_string()}),
        json!({"type": "message", "id": "u1", "parentId": null,
               "timestamp": "2026-01-01T00:00:01.000Z",
               "message": {"role": "user", "content": [{"type": "text", "text": "Look at the parser"}],
                           "timestamp": 1767225601000u64}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(
        setup
            .sessions
            .join("2026-01-01T00-00-00-000Z_sess-other.jsonl"),
        text,
    )
    .unwrap();
    std::fs::canonicalize(&other).unwrap()
}

/// /resume of the session written by [`other_project_with_a_session`] (in the picker's
/// "All" scope, as it is another folder's).
fn resume_the_other_session(tmux: &Tmux) {
    tmux.wait_for("fake-model");
    tmux.keys(&["/resume"]);
    tmux.wait_for("Resume another session");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Resume Session (Current Folder)");
    tmux.keys(&["Tab"]);
    tmux.wait_for("Look at the parser");
    tmux.keys(&["Enter"]);
}

/// Resuming a session of another project whose trust is undecided asks in the running
/// screen, as Pi 1.6.0's new runtime does with the interactive trust context: the built-in
/// "Trust project folder?" question with the session-only answers; "Trust" loads the
/// project's prompt template and saves the folder in trust.json.
#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_session_in_an_untrusted_project_asks_on_screen() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    let other = other_project_with_a_session(&setup);
    let tmux = start_pi(&setup, "resume-trust", &[], &[]);
    resume_the_other_session(&tmux);
    let screen = tmux.wait_for("Trust project folder?");
    assert!(screen.contains(&other.display().to_string()), "{screen}");
    assert!(
        screen.contains("This allows pi to load .pi settings and resources"),
        "{screen}"
    );
    assert!(
        screen.contains("Do not trust (this session only)"),
        "{screen}"
    );
    // The session's screen is still there under the question (the footer's folder).
    assert!(
        screen.contains(
            &std::fs::canonicalize(&setup.cwd)
                .unwrap()
                .display()
                .to_string()
        ) || screen.contains(&setup.cwd.display().to_string()),
        "{screen}"
    );
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Working in");
    assert!(screen.contains("Look at the parser"), "{screen}");
    tmux.keys(&["/dep"]);
    tmux.wait_for("Deploy it");
    let trust: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(setup.agent.join("trust.json")).unwrap())
            .unwrap();
    assert_eq!(trust, json!({ other.display().to_string(): true }));
}

/// On the same resume, a `project_trust` handler (fixtures/extensions/trust-decider.ts with
/// `TRUST_ANSWER=confirm`) gets the running screen's context: `ctx.hasUI` true,
/// `ctx.mode` "tui", its notice and its confirm shown on the screen; its "Yes" decides
/// (the project's template loads) without the built-in question, and without `remember`
/// nothing is saved.
#[tokio::test(flavor = "multi_thread")]
async fn a_project_trust_handler_asks_on_screen_when_a_resume_enters_a_project() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let setup = Setup::new(json!([])).await;
    let other = other_project_with_a_session(&setup);
    let log = setup.agent.join("trust.log");
    let tmux = start_pi(
        &setup,
        "resume-handler",
        &[
            ("TRUST_ANSWER", "confirm"),
            ("TRUST_LOG", &log.display().to_string()),
        ],
        &["trust-decider.ts"],
    );
    resume_the_other_session(&tmux);
    let screen = tmux.wait_for("Trust this project?");
    assert!(screen.contains("Asked by trust-decider in tui"), "{screen}");
    assert!(
        screen.contains(&format!("Deciding the trust of {}", other.display())),
        "{screen}"
    );
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Working in");
    assert!(!screen.contains("Trust project folder?"), "{screen}");
    tmux.keys(&["/dep"]);
    tmux.wait_for("Deploy it");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(&format!("project_trust {} hasUI=true", other.display())),
        "{logged}"
    );
    assert!(logged.contains("confirmed true mode=tui"), "{logged}");
    assert!(!setup.agent.join("trust.json").exists());
}
