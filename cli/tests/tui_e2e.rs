//! End to end: the interactive UI of the real `pi` binary in tmux, against pi-fake-llm.
//!
//! Gated on `PI_TUI_E2E=1` (and tmux on PATH): it needs `pi` with no mode flag to start the
//! interactive mode (`tui::agent::run_with_args`), a terminal multiplexer, and a few seconds.
//! `PI_TUI_E2E_BIN` picks another binary (e.g. `target/release/pi`).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use pi_fake_llm::{FakeLlm, Script};
use serde_json::json;
use tmux_common::{enabled, shell_quote, tmux_on, Tmux};

mod tmux_common;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");

#[tokio::test(flavor = "multi_thread")]
async fn interactive_session_against_fake_llm() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux and the interactive mode wired to `pi`)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent: PathBuf = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd, &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(cwd.join("notes.md"), "hello").expect("write");
    let skill = agent.join("skills").join("review");
    std::fs::create_dir_all(&skill).expect("mkdir skill");
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: review\ndescription: Review the change\n---\nReview carefully.\n",
    )
    .expect("write skill");
    let script: Script = serde_json::from_value(json!({"turns": [
        {"text": "Hello from the **fake** model."},
        {"text": "Second answer."},
        // The branch summary request (our summarization prompt is not the wording the
        // fake server routes to `summaries`, so it takes the next turn).
        {"text": "## Goal\nSummary of the Next branch."}
    ]}))
    .expect("script");
    let fake = FakeLlm::start(script).await.expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");

    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions)
    );
    let name = format!("pi-tui-e2e-{}", std::process::id());
    let tmux = Tmux::start(&name, &cwd, &command);

    // Startup header (with the global skill) and footer.
    tmux.wait_for("to interrupt");
    tmux.wait_for("/skill:review");
    tmux.wait_for("fake-model");

    tmux.keys(&["Say hello", "Enter"]);
    let screen = tmux.wait_for("Hello from the fake model.");
    assert!(screen.contains("Say hello"), "{screen}");
    // Usage reached the footer.
    tmux.wait_for("↑");

    // Slash completion and the tree navigator.
    tmux.keys(&["/tre"]);
    tmux.wait_for("Navigate session tree");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Session tree");
    tmux.keys(&["Escape"]);
    // A key right behind escape would arrive as alt+key: wait for the tree to close.
    tmux.wait_until(
        |screen| !screen.contains("Session tree"),
        "the tree to close",
    );

    // A second prompt, then ctrl+d on the empty editor quits cleanly.
    tmux.keys(&["Next", "Enter"]);
    let screen = tmux.wait_for("Second answer.");
    eprintln!("{screen}");
    // /tree: pick the "Next" prompt (one up from the leaf) and leave its branch with a
    // summary; the transcript is rebuilt from the new position, showing the summary, and
    // the prompt's text comes back to the editor.
    tmux.keys(&["/tree", "Enter"]);
    tmux.wait_for("Session tree");
    tmux.keys(&["Up"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("Summarize the branch you are leaving?");
    tmux.keys(&["Down"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Navigated to selected point");
    assert!(screen.contains("[branch]"), "{screen}");
    assert!(!screen.contains("Second answer."), "{screen}");
    // Expanded, the summary itself shows.
    tmux.keys(&["C-o"]);
    tmux.wait_for("Summary of the Next branch.");
    tmux.keys(&["C-o"]);
    tmux.keys(&["C-c"]);
    tmux.keys(&["/export out.html", "Enter"]);
    tmux.wait_for("Session exported to");
    assert!(cwd.join("out.html").is_file());
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
    assert!(tmux.alive());

    drop(tmux);

    // `--resume` opens the picker; enter resumes the session.
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model --resume; echo EXITED-$?; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions)
    );
    let tmux = Tmux::start(&format!("{name}-r"), &cwd, &command);
    tmux.wait_for("Resume Session");
    tmux.keys(&["Enter"]);
    // The file's last entry, the branch summary, is the leaf again.
    tmux.wait_for("[branch]");
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");

    let files: Vec<_> = std::fs::read_dir(&sessions)
        .expect("sessions")
        .flatten()
        .collect();
    assert_eq!(files.len(), 1, "one session file");
    let text = std::fs::read_to_string(files[0].path()).expect("session");
    assert!(
        text.contains("Say hello") && text.contains("Second answer."),
        "{text}"
    );
    // The branch_summary entry: on the first answer, from the abandoned answer.
    let entries: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let id_of = |needle: &str| {
        entries
            .iter()
            .find(|e| e["type"] == "message" && e["message"].to_string().contains(needle))
            .and_then(|e| e["id"].as_str())
            .unwrap_or_else(|| panic!("no message with {needle}"))
            .to_string()
    };
    let summaries: Vec<&serde_json::Value> = entries
        .iter()
        .filter(|e| e["type"] == "branch_summary")
        .collect();
    assert_eq!(summaries.len(), 1, "{text}");
    let bs = summaries[0];
    assert_eq!(
        bs["parentId"].as_str(),
        Some(id_of("Hello from the").as_str())
    );
    assert_eq!(
        bs["fromId"].as_str(),
        Some(id_of("Second answer.").as_str())
    );
    assert!(bs["summary"]
        .as_str()
        .unwrap_or("")
        .contains("Summary of the Next branch."));
    assert_eq!(bs["details"], json!({"readFiles": [], "modifiedFiles": []}));
    assert_eq!(bs["fromHook"], false);
}

fn session_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("sessions")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("session file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// /fork, renaming another session from /resume, /reload, /import, and `--name` / `--fork`
/// at start.
#[tokio::test(flavor = "multi_thread")]
async fn fork_rename_and_reload_against_fake_llm() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux and the interactive mode wired to `pi`)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent: PathBuf = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd, &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let script: Script = serde_json::from_value(json!({"turns": [
        {"text": "First answer."},
        {"text": "Second answer."},
        {"text": "After reload."}
    ]}))
    .expect("script");
    let fake = FakeLlm::start(script).await.expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let pi = |extra: &str| {
        format!(
            "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model {extra}; echo EXITED-$?; sleep 30",
            shell_quote(&agent),
            shell_quote(Path::new(&bin)),
            shell_quote(&sessions)
        )
    };
    let name = format!("pi-tui-e2e-fork-{}", std::process::id());
    let tmux = Tmux::start(&name, &cwd, &pi("--name 'e2e session'"));
    // `--name` reaches the footer.
    tmux.wait_for("e2e session");
    tmux.keys(&["Alpha question", "Enter"]);
    tmux.wait_for("First answer.");
    tmux.keys(&["Beta question", "Enter"]);
    tmux.wait_for("Second answer.");
    let original = session_files(&sessions);
    assert_eq!(original.len(), 1);
    let original = original[0].clone();

    // /fork: the picker starts on the last prompt; enter forks before it.
    tmux.keys(&["/fork"]);
    tmux.wait_for("Create a new fork");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Message 2 of 2");
    assert!(
        screen.contains("Fork from Message") && screen.contains("Alpha question"),
        "{screen}"
    );
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Forked to new session");
    // The forked-from prompt is back in the editor, and its answer left the transcript.
    assert!(screen.contains("Beta question"), "{screen}");
    assert!(!screen.contains("Second answer."), "{screen}");
    let files = session_files(&sessions);
    assert_eq!(files.len(), 2, "{files:?}");
    let fork = files
        .iter()
        .find(|f| **f != original)
        .expect("fork")
        .clone();
    let lines = jsonl(&fork);
    assert_eq!(lines[0]["parentSession"], original.display().to_string());
    let text = std::fs::read_to_string(&fork).expect("fork");
    assert!(text.contains("Alpha question") && text.contains("First answer."));
    assert!(!text.contains("Beta question"), "{text}");
    tmux.keys(&["C-c"]);
    tmux.wait_until(|s| !s.contains("Beta question"), "the editor to clear");

    // /resume: rename the original (not the current session) with ctrl+r.
    tmux.keys(&["/resume"]);
    tmux.wait_for("Resume another session");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Resume Session");
    tmux.keys(&["Alpha"]);
    tmux.wait_for("Search: Alpha");
    // Both sessions start with "Alpha question". The list is ordered by last activity, and
    // the fork's newest entry is the copied "First answer.", older than the original's
    // "Second answer.": the original is the first row, selected.
    tmux.keys(&["C-r"]);
    tmux.wait_for("New name:");
    for _ in 0..20 {
        tmux.keys(&["BSpace"]);
    }
    tmux.keys(&["Renamed original", "Enter"]);
    let screen = tmux.wait_for("Renamed original");
    assert!(!screen.contains("New name:"), "{screen}");
    let last = jsonl(&original).pop().expect("line");
    assert_eq!(last["type"], "session_info");
    assert_eq!(last["name"], "Renamed original");
    assert_eq!(
        jsonl(&fork)
            .iter()
            .filter(|l| l["name"] == "Renamed original")
            .count(),
        0
    );
    tmux.keys(&["Escape"]);
    tmux.wait_until(|s| !s.contains("Resume Session"), "the picker to close");

    // /reload picks up a context file written while running; the next prompt patches it in.
    std::fs::write(agent.join("AGENTS.md"), "Reply like a pirate.\n").expect("AGENTS.md");
    tmux.keys(&["/reload"]);
    tmux.wait_for("Reload keybindings");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Reloaded keybindings");
    tmux.keys(&["Gamma question", "Enter"]);
    tmux.wait_for("After reload.");
    let patched = jsonl(&fork).into_iter().any(|l| {
        l["message"]["role"] == "system"
            && l["message"]["sections"]
                .to_string()
                .contains("Reply like a pirate.")
    });
    assert!(
        patched,
        "{}",
        std::fs::read_to_string(&fork).unwrap_or_default()
    );

    // /import: a broken file is refused with its name and line; a good one is copied into
    // the session dir and opened.
    let header = json!({"type": "session", "version": 3, "id": "imported-session",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd.display().to_string()});
    std::fs::write(cwd.join("bad.jsonl"), format!("{header}\n{{oops\n")).expect("bad");
    let user = json!({"type": "message", "id": "i1", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "Imported prompt", "timestamp": 1}});
    std::fs::write(cwd.join("good.jsonl"), format!("{header}\n{user}\n")).expect("good");
    tmux.keys(&["/import bad.jsonl"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("Replace current session with bad.jsonl?");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Failed to import session");
    assert!(screen.contains("bad.jsonl: line 2"), "{screen}");
    tmux.keys(&["/import good.jsonl"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("Replace current session with good.jsonl?");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Session imported from: good.jsonl");
    assert!(screen.contains("Imported prompt"), "{screen}");
    assert!(!screen.contains("Gamma question"), "{screen}");
    assert_eq!(
        std::fs::read(sessions.join("good.jsonl")).expect("imported copy"),
        std::fs::read(cwd.join("good.jsonl")).expect("source")
    );
    assert!(!sessions.join("bad.jsonl").exists());
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
    drop(tmux);

    // `--fork FILE` in the interactive mode: the copy opens with the conversation shown.
    let tmux = Tmux::start(
        &format!("{name}-f"),
        &cwd,
        &pi(&format!("--fork {}", shell_quote(&original))),
    );
    let screen = tmux.wait_for("Second answer.");
    assert!(screen.contains("Beta question"), "{screen}");
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
    // original, its /fork, the import, and the --fork copy
    assert_eq!(session_files(&sessions).len(), 4);
    drop(tmux);

    // `-r`, then escape: nothing chosen, so pi ends as Pi does, and writes nothing.
    let tmux = Tmux::start(&format!("{name}-r"), &cwd, &pi("-r"));
    tmux.wait_for("Resume Session");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("EXITED-0");
    assert!(screen.contains("No session selected"), "{screen}");
    assert_eq!(session_files(&sessions).len(), 4);
}

/// The start-up trust prompt of a project with `.pi` resources: "Do not trust (this session
/// only)" loads nothing and saves nothing; "Trust" loads the project's template and is saved
/// in trust.json, so the next start does not ask.
#[tokio::test(flavor = "multi_thread")]
async fn trust_prompt_at_start_up() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux and the interactive mode wired to `pi`)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent: PathBuf = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd.join(".pi").join("prompts"), &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(
        cwd.join(".pi").join("prompts").join("deploy.md"),
        "---\ndescription: Deploy it\n---\nDeploy.\n",
    )
    .expect("template");
    let fake = FakeLlm::start(serde_json::from_value(json!({"turns": []})).expect("script"))
        .await
        .expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions)
    );
    let trust_file = agent.join("trust.json");
    let name = format!("pi-tui-e2e-trust-{}", std::process::id());

    let tmux = Tmux::start(&name, &cwd, &command);
    let screen = tmux.wait_for("Trust project folder?");
    assert!(
        screen.contains("Do not trust (this session only)"),
        "{screen}"
    );
    for _ in 0..4 {
        tmux.keys(&["Down"]);
    }
    tmux.wait_for("→ Do not trust (this session only)");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("to interrupt");
    assert!(!screen.contains("/deploy"), "{screen}");
    assert!(!trust_file.exists());
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
    drop(tmux);

    let tmux = Tmux::start(&format!("{name}-2"), &cwd, &command);
    tmux.wait_for("Trust project folder?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("/deploy");
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
    drop(tmux);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trust_file).expect("trust.json"))
            .expect("json");
    let key = cwd.canonicalize().expect("cwd").display().to_string();
    assert_eq!(saved, json!({ key: true }));

    // Decided: the next start goes straight to the session.
    let tmux = Tmux::start(&format!("{name}-3"), &cwd, &command);
    let screen = tmux.wait_for("/deploy");
    assert!(!screen.contains("Trust project folder?"), "{screen}");
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
}

/// /import of a session whose directory is gone asks (continue / fork / cancel) and forks
/// into the current directory; a session from another, existing directory moves the agent
/// there (`!pwd` runs in it).
#[tokio::test(flavor = "multi_thread")]
async fn import_follows_or_replaces_the_session_directory() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux and the interactive mode wired to `pi`)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent: PathBuf = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let other = tmp.path().join("other");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd, &other, &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let fake = FakeLlm::start(serde_json::from_value(json!({"turns": []})).expect("script"))
        .await
        .expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");
    let session = |id: &str, dir: &Path, text: &str| {
        let header = json!({"type": "session", "version": 3, "id": id,
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": dir.display().to_string()});
        let user = json!({"type": "message", "id": "i1", "parentId": null,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1}});
        format!("{header}\n{user}\n")
    };
    let gone = tmp.path().join("deleted");
    std::fs::write(
        cwd.join("gone.jsonl"),
        session("gone-session", &gone, "From a gone dir"),
    )
    .expect("gone");
    std::fs::write(
        cwd.join("other.jsonl"),
        session("other-session", &other, "From the other dir"),
    )
    .expect("other");
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions)
    );
    let tmux = Tmux::start(
        &format!("pi-tui-e2e-import-{}", std::process::id()),
        &cwd,
        &command,
    );
    tmux.wait_for("to interrupt");

    tmux.keys(&["/import gone.jsonl"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("Replace current session with gone.jsonl?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Session cwd does not exist");
    tmux.wait_for("(new session ID, original kept)");
    tmux.keys(&["Down"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Forked into new session");
    assert!(screen.contains("From a gone dir"), "{screen}");
    let forks = session_files(&sessions);
    assert_eq!(forks.len(), 1, "{forks:?}");
    let lines = jsonl(&forks[0]);
    assert_eq!(lines[0]["cwd"], cwd.display().to_string());
    assert_ne!(lines[0]["id"], "gone-session");

    tmux.keys(&["/import other.jsonl"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("Replace current session with other.jsonl?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Session imported from: other.jsonl");
    tmux.wait_for("Working in");
    tmux.submit("!!echo \"PWD=$(pwd)\"");
    let canonical = other.canonicalize().expect("other");
    tmux.wait_until(
        |s| {
            s.contains(&format!("PWD={}", other.display()))
                || s.contains(&format!("PWD={}", canonical.display()))
        },
        "pwd to print the other directory",
    );
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
}

/// `pi --session FILE` on a session of another directory works there from the start (the
/// footer names it, `!!pwd` runs in it); once that directory is gone, the start asks first:
/// escape cancels (exit 0, nothing written), "Fork into" copies it into the current one.
#[tokio::test(flavor = "multi_thread")]
async fn session_flag_from_another_directory() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux and the interactive mode wired to `pi`)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent: PathBuf = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let other = tmp.path().join("elsewhere-proj");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd, &other, &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let other = other.canonicalize().expect("other");
    let fake = FakeLlm::start(serde_json::from_value(json!({"turns": []})).expect("script"))
        .await
        .expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");
    let header = json!({"type": "session", "version": 3, "id": "elsewhere-session",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": other.display().to_string()});
    let user = json!({"type": "message", "id": "i1", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "From elsewhere", "timestamp": 1}});
    let file = sessions.join("elsewhere.jsonl");
    std::fs::write(&file, format!("{header}\n{user}\n")).expect("session");
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model --session {}; echo EXITED-$?; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions),
        shell_quote(&file)
    );
    let name = format!("pi-tui-e2e-session-dir-{}", std::process::id());

    let tmux = Tmux::start(&name, &cwd, &command);
    let screen = tmux.wait_for("From elsewhere");
    assert!(screen.contains("elsewhere-proj"), "footer: {screen}");
    tmux.submit("!!echo \"PWD=$(pwd)\"");
    tmux.wait_for(&format!("PWD={}", other.display()));
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
    drop(tmux);

    std::fs::remove_dir_all(&other).expect("remove other");
    let tmux = Tmux::start(&format!("{name}-2"), &cwd, &command);
    tmux.wait_for("Session cwd does not exist");
    tmux.keys(&["Escape"]);
    tmux.wait_for("EXITED-0");
    drop(tmux);
    assert_eq!(session_files(&sessions), vec![file.clone()]);

    let tmux = Tmux::start(&format!("{name}-3"), &cwd, &command);
    tmux.wait_for("(new session ID, original kept)");
    tmux.keys(&["Down"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("From elsewhere");
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
    let files = session_files(&sessions);
    assert_eq!(files.len(), 2, "{files:?}");
    let fork = files.iter().find(|f| **f != file).expect("the fork");
    let lines = jsonl(fork);
    let here = cwd.canonicalize().expect("cwd");
    assert_eq!(lines[0]["cwd"], here.display().to_string());
    assert_ne!(lines[0]["id"], "elsewhere-session");

    // "Continue in": the stored session, worked on here; no new file. (Started before the
    // last one is killed, so the tmux server does not exit in between.)
    let last = tmux;
    let tmux = Tmux::start(&format!("{name}-4"), &cwd, &command);
    drop(last);
    tmux.wait_for("(asks again next time)");
    tmux.keys(&["Enter"]);
    tmux.wait_for("From elsewhere");
    tmux.submit("!!echo \"PWD=$(pwd)\"");
    tmux.wait_for(&format!("PWD={}", here.display()));
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
    assert_eq!(session_files(&sessions).len(), 2);
}

/// The message queue while a tool runs: enter queues a steering message and alt+enter a
/// follow-up, both shown as queued; once the tool finishes the steering message goes to the
/// model right after the tool result, and the follow-up once the agent would stop. Escape
/// aborts the run and gives the queued messages back to the editor.
///
/// The slow tool waits for a file the test creates, so "while the tool runs" does not
/// depend on timing.
#[tokio::test(flavor = "multi_thread")]
async fn queue_steering_and_follow_up_while_a_tool_runs() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux and the interactive mode wired to `pi`)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent: PathBuf = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd, &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    // Polls for `file` (up to about a minute), then prints a marker.
    let wait_for_file = |file: &str| {
        format!("for i in $(seq 600); do [ -e {file} ] && break; sleep 0.1; done; echo tool-{file}")
    };
    let script: Script = serde_json::from_value(json!({"turns": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": wait_for_file("release")}}]},
        {"text": "Steered answer."},
        {"text": "Follow-up answer."},
        {"tool_calls": [{"name": "bash", "arguments": {"command": wait_for_file("never")}}]},
        {"text": "Restored answer."}
    ]}))
    .expect("script");
    let fake = FakeLlm::start(script).await.expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions)
    );
    let tmux = Tmux::start(
        &format!("pi-tui-e2e-queue-{}", std::process::id()),
        &cwd,
        &command,
    );
    tmux.wait_for("to interrupt");

    tmux.keys(&["Run the slow tool", "Enter"]);
    tmux.wait_until(
        |s| s.contains("Working...") && s.contains("[ -e release ]"),
        "the slow tool to run",
    );
    tmux.keys(&["Steer now", "Enter"]);
    tmux.wait_for("Steering: Steer now");
    tmux.keys(&["Later please", "M-Enter"]);
    let screen = tmux.wait_for("Follow-up: Later please");
    assert!(screen.contains("Steering: Steer now"), "{screen}");
    // Still running: only the tool call's request so far.
    assert_eq!(fake.requests().len(), 1);

    std::fs::write(cwd.join("release"), "").expect("release");
    let screen = tmux.wait_until(
        |s| s.contains("Follow-up answer.") && !s.contains("Working..."),
        "both queued messages to be answered",
    );
    assert!(screen.contains("Steered answer."), "{screen}");
    assert!(
        screen.contains("Steer now") && screen.contains("Later please"),
        "{screen}"
    );
    assert!(!screen.contains("Steering:"), "{screen}");
    assert!(!screen.contains("Follow-up:"), "{screen}");

    // The model saw the steering message right after the tool result, and the follow-up
    // only after answering it.
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let roles_and_texts = |i: usize| -> Vec<(String, String)> {
        requests[i].body["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or("").to_string(),
                    m["content"].to_string(),
                )
            })
            .collect()
    };
    let second = roles_and_texts(1);
    let tool = second
        .iter()
        .position(|(role, _)| role == "tool")
        .unwrap_or_else(|| panic!("no tool result: {second:?}"));
    assert!(second[tool].1.contains("tool-release"), "{second:?}");
    assert_eq!(second.len(), tool + 2, "{second:?}");
    assert_eq!(second[tool + 1].0, "user");
    assert!(second[tool + 1].1.contains("Steer now"), "{second:?}");
    assert!(
        !format!("{second:?}").contains("Later please"),
        "{second:?}"
    );
    let third = roles_and_texts(2);
    let n = third.len();
    assert_eq!(third[n - 2].0, "assistant", "{third:?}");
    assert!(third[n - 2].1.contains("Steered answer."), "{third:?}");
    assert_eq!(third[n - 1].0, "user");
    assert!(third[n - 1].1.contains("Later please"), "{third:?}");

    // The session file: the tool result, then the steering message, its answer, then the
    // follow-up and its answer.
    let files = session_files(&sessions);
    assert_eq!(files.len(), 1, "{files:?}");
    let file = files[0].clone();
    let messages = |file: &Path| -> Vec<(String, String)> {
        jsonl(file)
            .iter()
            // (Our sessions also hold the system prompt as a `system` message.)
            .filter(|e| e["type"] == "message" && e["message"]["role"] != "system")
            .map(|e| {
                (
                    e["message"]["role"].as_str().unwrap_or("").to_string(),
                    e["message"]["content"].to_string(),
                )
            })
            .collect()
    };
    let saved = messages(&file);
    let expected = [
        ("user", "Run the slow tool"),
        ("assistant", "[ -e release ]"),
        ("toolResult", "tool-release"),
        ("user", "Steer now"),
        ("assistant", "Steered answer."),
        ("user", "Later please"),
        ("assistant", "Follow-up answer."),
    ];
    assert_eq!(saved.len(), expected.len(), "{saved:?}");
    for ((role, content), (want_role, want_text)) in saved.iter().zip(expected) {
        assert_eq!(role, want_role, "{saved:?}");
        assert!(content.contains(want_text), "{want_text:?} in {saved:?}");
    }

    // Escape while the tool runs: the run stops and the queued message is back in the
    // editor, not sent; enter then sends it as the next prompt.
    tmux.keys(&["Slow again", "Enter"]);
    tmux.wait_until(
        |s| s.contains("Working...") && s.contains("[ -e never ]"),
        "the second slow tool to run",
    );
    tmux.keys(&["Keep me", "Enter"]);
    tmux.wait_for("Steering: Keep me");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_until(
        |s| !s.contains("Working...") && !s.contains("Steering:"),
        "the run to stop",
    );
    assert!(screen.contains("Keep me"), "{screen}");
    assert_eq!(fake.requests().len(), 4);
    let text = std::fs::read_to_string(&file).expect("session");
    assert!(!text.contains("Keep me"), "{text}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Restored answer.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    let last = requests[4].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["role"], "user", "{last}");
    assert!(last["content"].to_string().contains("Keep me"), "{last}");
    let saved = messages(&file);
    let kept: Vec<_> = saved
        .iter()
        .filter(|(role, text)| role == "user" && text.contains("Keep me"))
        .collect();
    assert_eq!(kept.len(), 1, "{saved:?}");
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
}

/// A fake LLM answering `turns`, with `models.json` in `agent` pointing at it.
async fn fake_llm_with(agent: &Path, turns: serde_json::Value) -> FakeLlm {
    let script: Script = serde_json::from_value(json!({ "turns": turns })).expect("script");
    let fake = FakeLlm::start(script).await.expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");
    fake
}

/// Temp dirs `agent`, `cwd`, `sessions` and the shell command running `pi` in them.
fn pi_dirs(tmp: &Path, extra: &str) -> (PathBuf, PathBuf, PathBuf, String) {
    let agent = tmp.join("agent");
    let cwd = tmp.join("cwd");
    let sessions = tmp.join("sessions");
    for d in [&agent, &cwd, &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model {extra}; echo EXITED-$?; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions)
    );
    (agent, cwd, sessions, command)
}

/// Pi's documented tmux set-up (`extended-keys on`): shift+enter inserts a new line and
/// enter still submits. tmux forwards modified keys only to a pane that asks for them.
#[tokio::test(flavor = "multi_thread")]
async fn shift_enter_under_tmux_extended_keys() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (agent, cwd, sessions, command) = pi_dirs(tmp.path(), "");
    let _fake = fake_llm_with(&agent, json!([{"text": "Got both lines."}])).await;
    let socket = format!("pi-tui-e2e-keys-{}", std::process::id());
    // A server with the option set before pi starts (a placeholder session keeps it up).
    let _holder = Tmux::start_on(Some(&socket), "holder", &cwd, "sleep 60");
    let status = tmux_on(Some(&socket))
        .args(["set", "-g", "extended-keys", "on"])
        .status()
        .expect("tmux set");
    assert!(status.success());
    let tmux = Tmux::start_on(Some(&socket), "pi", &cwd, &command);
    tmux.wait_for("to interrupt");
    tmux.keys(&["first line", "S-Enter", "second line"]);
    let screen = tmux.wait_for("second line");
    assert!(!screen.contains("Got both lines."), "{screen}");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Got both lines.");
    eprintln!("{screen}");
    let file = session_files(&sessions).pop().expect("session file");
    let user = jsonl(&file)
        .into_iter()
        .find(|l| l["message"]["role"] == "user")
        .expect("user message");
    assert_eq!(
        user["message"]["content"][0]["text"],
        "first line\nsecond line"
    );
}

/// A provider error that Pi retries: the countdown shows, a message typed during the wait
/// is queued (not refused with "Agent is already processing"), escape cancels the retry.
#[tokio::test(flavor = "multi_thread")]
async fn retry_wait_queues_input_and_escape_cancels() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (agent, cwd, _sessions, command) = pi_dirs(tmp.path(), "");
    // A long backoff, so the wait is still on while we type.
    std::fs::write(
        agent.join("settings.json"),
        r#"{"retry": {"baseDelayMs": 60000, "maxRetries": 3}}"#,
    )
    .expect("settings");
    let _fake = fake_llm_with(
        &agent,
        json!([{"http_error": {"status": 503, "body": {"error": {"message": "overloaded"}}}}]),
    )
    .await;
    let name = format!("pi-tui-e2e-retry-{}", std::process::id());
    let tmux = Tmux::start(&name, &cwd, &command);
    tmux.wait_for("to interrupt");
    tmux.keys(&["Do the thing", "Enter"]);
    tmux.wait_for("Retrying (1/3) in");
    tmux.keys(&["also this", "Enter"]);
    let screen = tmux.wait_for("Steering: also this");
    assert!(!screen.contains("already processing"), "{screen}");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("Retry failed after 1 attempts");
    assert!(!screen.contains("Retrying (1/3)"), "{screen}");
}

/// `!cmd` runs through the session host as RPC's `bash` does: its output is shown, the
/// session holds a `bashExecution` message, and the next prompt's request carries it;
/// `!!cmd` is shown and saved but kept out of the context; escape cancels a running one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bang_commands_are_recorded_and_sent_with_the_next_prompt() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux and the interactive mode wired to `pi`)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent: PathBuf = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd, &sessions] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let script: Script = serde_json::from_value(json!({"turns": [
        {"text": "Seen the output."}
    ]}))
    .expect("script");
    let fake = FakeLlm::start(script).await.expect("fake llm");
    let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .expect("models.json")
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).expect("write models");
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let command = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions)
    );
    let tmux = Tmux::start(
        &format!("pi-tui-e2e-bang-{}", std::process::id()),
        &cwd,
        &command,
    );
    tmux.wait_for("to interrupt");

    tmux.keys(&["!echo sent-$((40+2))", "Enter"]);
    tmux.wait_for("sent-42");
    tmux.keys(&["!!echo private-$((6*7))", "Enter"]);
    tmux.wait_for("private-42");
    tmux.keys(&["!sleep 30; echo never-printed", "Enter"]);
    tmux.wait_for("Running…");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("(cancelled)");
    // (The command line itself names it; its output never came.)
    assert!(
        !screen.lines().any(|l| l.trim() == "never-printed"),
        "{screen}"
    );
    tmux.keys(&["!exit 3", "Enter"]);
    tmux.wait_for("(exit 3)");

    tmux.keys(&["What did it print?", "Enter"]);
    tmux.wait_for("Seen the output.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0].body["messages"].to_string();
    assert!(sent.contains("sent-42"), "{sent}");
    assert!(!sent.contains("private-42"), "{sent}");

    let files = session_files(&sessions);
    assert_eq!(files.len(), 1, "{files:?}");
    let bash: Vec<serde_json::Value> = jsonl(&files[0])
        .into_iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "bashExecution")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(bash.len(), 4, "{bash:?}");
    assert_eq!(bash[0]["command"], "echo sent-$((40+2))");
    assert!(bash[0]["output"].as_str().unwrap_or("").contains("sent-42"));
    assert_eq!(bash[0]["exitCode"], 0);
    assert_ne!(bash[0]["excludeFromContext"], true);
    assert_eq!(bash[1]["excludeFromContext"], true);
    assert_eq!(bash[2]["cancelled"], true);
    assert_eq!(bash[3]["exitCode"], 3);
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED-0");
}

/// Pi prints how to come back after the UI exits: "To resume this session:" and, on its own
/// line, `pi [--session-dir DIR] --session ID` (the directory because it is not the default
/// one); that command opens the same session again.
#[tokio::test(flavor = "multi_thread")]
async fn exit_prints_the_resume_command() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (agent, cwd, sessions, command) = pi_dirs(tmp.path(), "");
    let _fake = fake_llm_with(&agent, json!([{"text": "Noted the plan."}])).await;
    let tmux = Tmux::start(
        &format!("pi-tui-e2e-hint-{}", std::process::id()),
        &cwd,
        &command,
    );
    tmux.wait_for("to interrupt");
    tmux.keys(&["Remember the plan", "Enter"]);
    tmux.wait_for("Noted the plan.");
    tmux.keys(&["C-d"]);
    let screen = tmux.wait_for("EXITED-0");
    let file = session_files(&sessions).pop().expect("session file");
    let id = jsonl(&file)[0]["id"].as_str().expect("id").to_string();
    let lines: Vec<&str> = screen.lines().map(str::trim_end).collect();
    let at = lines
        .iter()
        .position(|l| *l == "To resume this session:")
        .unwrap_or_else(|| panic!("no hint; screen:\n{screen}"));
    let expected = format!("pi --session-dir {} --session {id}", sessions.display());
    assert_eq!(lines[at + 1], expected, "{screen}");

    // The printed command (with this binary as `pi`) resumes the session.
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let again = format!(
        "env PI_CODING_AGENT_DIR={} {} --session-dir {} --session {id} --model fakeoai/fake-model; sleep 30",
        shell_quote(&agent),
        shell_quote(Path::new(&bin)),
        shell_quote(&sessions)
    );
    let tmux2 = Tmux::start(
        &format!("pi-tui-e2e-hint2-{}", std::process::id()),
        &cwd,
        &again,
    );
    tmux2.wait_for("Noted the plan.");
}

/// A session file in Pi's format: a user message, an answer, then a second user message.
fn write_pi_session(dir: &Path, id: &str, cwd: &Path, first: &str, later: &str) -> PathBuf {
    let cwd = cwd.display().to_string();
    let lines = [
        json!({"type": "session", "version": 3, "id": id,
               "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd}),
        json!({"type": "message", "id": "u1", "parentId": null,
               "timestamp": "2026-01-01T00:00:01.000Z",
               "message": {"role": "user", "content": [{"type": "text", "text": first}],
                           "timestamp": 1767225601000u64}}),
        json!({"type": "message", "id": "a1", "parentId": "u1",
               "timestamp": "2026-01-01T00:00:02.000Z",
               "message": {"role": "assistant", "content": [{"type": "text", "text": "Sure."}],
                           "provider": "fakeoai", "model": "fake-model", "stopReason": "stop",
                           "timestamp": 1767225602000u64,
                           "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                     "cost": {"total": 0}}}}),
        json!({"type": "message", "id": "u2", "parentId": "a1",
               "timestamp": "2026-01-01T00:00:03.000Z",
               "message": {"role": "user", "content": [{"type": "text", "text": later}],
                           "timestamp": 1767225603000u64}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let path = dir.join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl"));
    std::fs::write(&path, text).expect("write session");
    path
}

/// /resume as in Pi 1.6.0: the current folder first (tab shows all), and the search looks
/// at every message of a session (through the history index), not only the first.
#[tokio::test(flavor = "multi_thread")]
async fn resume_searches_message_text_and_switches_scope() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (agent, cwd, sessions, command) = pi_dirs(tmp.path(), "");
    let _fake = fake_llm_with(&agent, json!([])).await;
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    write_pi_session(
        &sessions,
        "sess-here",
        &cwd,
        "Tidy the readme",
        "nothing special",
    );
    write_pi_session(
        &sessions,
        "sess-away",
        &elsewhere,
        "Look at the parser",
        "the quetzalcoatl bug again",
    );
    let tmux = Tmux::start(
        &format!("pi-tui-e2e-resume-{}", std::process::id()),
        &cwd,
        &command,
    );
    tmux.wait_for("to interrupt");
    tmux.keys(&["/resume"]);
    tmux.wait_for("Resume another session");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Resume Session (Current Folder)");
    assert!(screen.contains("Tidy the readme"), "{screen}");
    assert!(!screen.contains("Look at the parser"), "{screen}");
    // A word from the away session's second message: nothing in this folder.
    tmux.keys(&["quetzal"]);
    tmux.wait_for("No sessions in current folder. Press Tab to view all.");
    tmux.keys(&["Tab"]);
    let screen = tmux.wait_for("Resume Session (All)");
    let screen = if screen.contains("Look at the parser") {
        screen
    } else {
        tmux.wait_for("Look at the parser")
    };
    assert!(!screen.contains("Tidy the readme"), "{screen}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the quetzalcoatl bug again");
}

/// ctrl+v with an image on the clipboard (read through `xclip`, as Pi does on X11): the
/// image is saved as `$TMPDIR/pi-clipboard-<id>.png` and its path is put into the editor.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_v_pastes_a_clipboard_image_as_a_file() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (agent, cwd, _sessions, command) = pi_dirs(tmp.path(), "");
    let _fake = fake_llm_with(&agent, json!([])).await;
    // A stand-in for xclip that holds a PNG.
    let bin = tmp.path().join("bin");
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::fs::create_dir_all(&out).expect("mkdir");
    let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR-not-really";
    std::fs::write(tmp.path().join("clip.png"), png).expect("write png");
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in\n  *TARGETS*) printf 'TARGETS\\ntext/plain\\nimage/png\\n' ;;\n  *image/png*) cat {} ;;\n  *) exit 1 ;;\nesac\n",
        shell_quote(&tmp.path().join("clip.png"))
    );
    let xclip = bin.join("xclip");
    std::fs::write(&xclip, script).expect("write xclip");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&xclip, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let command = format!(
        "PATH={}:$PATH TMPDIR={} {command}",
        shell_quote(&bin),
        shell_quote(&out)
    );
    let tmux = Tmux::start(
        &format!("pi-tui-e2e-clip-{}", std::process::id()),
        &cwd,
        &command,
    );
    tmux.wait_for("to interrupt");
    tmux.keys(&["look at ", "C-v"]);
    let screen = tmux.wait_for("pi-clipboard-");
    let saved: Vec<PathBuf> = std::fs::read_dir(&out)
        .expect("read out")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("pi-clipboard-"))
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}\n{screen}");
    assert_eq!(saved[0].extension().and_then(|e| e.to_str()), Some("png"));
    assert_eq!(std::fs::read(&saved[0]).expect("read image"), png);
    assert!(
        screen.contains(&format!("look at {}", saved[0].display())),
        "{screen}"
    );
}

/// `--tui-mode regular`: the main screen, not the alternate one; finished messages go into
/// the terminal's scrollback and stay there after pi exits.
#[tokio::test(flavor = "multi_thread")]
async fn regular_mode_uses_the_terminal_scrollback() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (agent, cwd, _sessions, command) = pi_dirs(tmp.path(), "--tui-mode regular");
    let answers: Vec<serde_json::Value> = (1..=12)
        .map(|i| json!({"text": format!("Answer number {i}.\n\nWith a second paragraph.")}))
        .collect();
    let _fake = fake_llm_with(&agent, json!(answers)).await;
    let tmux = Tmux::start(
        &format!("pi-tui-e2e-regular-{}", std::process::id()),
        &cwd,
        &command,
    );
    tmux.wait_for("to interrupt");
    let alternate = |t: &Tmux| {
        let out = t
            .tmux()
            .args(["display", "-p", "-t", &t.name, "#{alternate_on}"])
            .output()
            .expect("tmux display");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(alternate(&tmux), "0");
    for i in 1..=12 {
        tmux.keys(&[&format!("Question {i}"), "Enter"]);
        tmux.wait_for(&format!("Answer number {i}."));
    }
    // The first exchange scrolled off the screen into the pane's history.
    let history = tmux
        .tmux()
        .args(["capture-pane", "-p", "-S", "-500", "-t", &tmux.name])
        .output()
        .expect("capture history");
    let history = String::from_utf8_lossy(&history.stdout).into_owned();
    assert!(!tmux.capture().contains("Answer number 1."), "{history}");
    assert!(history.contains("Question 1"), "{history}");
    assert!(history.contains("Answer number 1."), "{history}");
    assert_eq!(history.matches("Answer number 1.").count(), 1, "{history}");
    tmux.keys(&["C-d"]);
    let screen = tmux.wait_for("EXITED-0");
    assert!(screen.contains("Answer number 12."), "{screen}");
}

/// `/reload` reads the tool options again, as Pi's does: a tool added to `defaultTools`
/// while running is declared on the next request (`grep` as a built-in, `codemode` through
/// the MCP loadout), and a tool removed from it stays.
#[tokio::test(flavor = "multi_thread")]
async fn reload_enables_tools_added_to_default_tools() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (agent, cwd, _sessions, command) = pi_dirs(tmp.path(), "");
    let fake = fake_llm_with(
        &agent,
        json!([{"text": "Before reload."}, {"text": "After reload."}]),
    )
    .await;
    let declared = |body: &serde_json::Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
            .collect()
    };
    let name = format!("pi-tui-e2e-reload-tools-{}", std::process::id());
    let tmux = Tmux::start(&name, &cwd, &command);
    tmux.wait_for("to interrupt");
    tmux.keys(&["one", "Enter"]);
    tmux.wait_for("Before reload.");
    assert_eq!(
        declared(&fake.requests()[0].body),
        ["read", "bash", "edit", "write"]
    );

    std::fs::write(
        agent.join("settings.json"),
        json!({"defaultTools": ["+grep", "+codemode", "-bash"]}).to_string(),
    )
    .expect("settings.json");
    tmux.keys(&["/reload"]);
    tmux.wait_for("Reload keybindings");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Reloaded keybindings");
    tmux.keys(&["two", "Enter"]);
    tmux.wait_for("After reload.");
    let mut after = declared(&fake.requests()[1].body);
    after.sort();
    assert_eq!(after, ["bash", "codemode", "edit", "grep", "read", "write"]);
}
