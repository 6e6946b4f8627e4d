//! End to end: the `system` theme of the real `pi` binary on a pseudo-terminal where the
//! test is the terminal. It sees pi's colour questions (OSC 10/11/4 and DA1) and answers
//! them as a terminal would, or does not, and reads the colours pi draws with.
//!
//! Gated on `PI_TUI_E2E=1` like the other interactive-mode tests. The expected colours come
//! from fixtures/system-theme/expected.json, recorded from Pi's own generator
//! (scripts/system-theme-fixture.mjs).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

mod pty_common;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures");
const QUERY_END: &str = "\x1b]4;15;?\x07\x1b[c";

fn enabled() -> bool {
    std::env::var("PI_TUI_E2E").is_ok_and(|v| v == "1")
}

struct Run {
    _tmp: tempfile::TempDir,
    _fake: FakeLlm,
    pty: pty_common::PtyChild,
}

impl Drop for Run {
    fn drop(&mut self) {
        self.pty.kill();
    }
}

/// `pi` on a fresh 30 × 100 terminal, with `settings` as its settings.json.
async fn start(settings: Value) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let agent: PathBuf = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    let sessions = tmp.path().join("sessions");
    for d in [&agent, &cwd, &sessions] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(agent.join("settings.json"), settings.to_string()).unwrap();
    let script: Script = serde_json::from_value(json!({"turns": [{"text": "ok"}]})).unwrap();
    let fake = FakeLlm::start(script).await.unwrap();
    let models = std::fs::read_to_string(format!("{FIXTURES}/realpi/tricky/agent/models.json"))
        .unwrap()
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    std::fs::write(agent.join("models.json"), models).unwrap();
    let bin =
        std::env::var("PI_TUI_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pi").to_string());
    let mut cmd = Command::new(Path::new(&bin));
    cmd.current_dir(&cwd)
        .env("PI_CODING_AGENT_DIR", &agent)
        .env("TERM", "xterm-256color")
        .env_remove("TMUX")
        .env_remove("COLORFGBG")
        .args(["--session-dir"])
        .arg(&sessions)
        .args(["--model", "fakeoai/fake-model"]);
    let pty = pty_common::spawn_sized(&mut cmd, 30, 100);
    Run {
        _tmp: tmp,
        _fake: fake,
        pty,
    }
}

fn hex(v: &Value) -> (u8, u8, u8) {
    let s = v.as_str().unwrap();
    let p = |i: usize| u8::from_str_radix(&s[i..i + 2], 16).unwrap();
    (p(1), p(3), p(5))
}

/// A colour as a terminal reports it (16 bits a channel).
fn osc_value(v: &Value) -> String {
    let (r, g, b) = hex(v);
    format!("rgb:{r:02x}{r:02x}/{g:02x}{g:02x}/{b:02x}{b:02x}")
}

/// The SGR sequence that sets the foreground to the recorded colour of `token` (the
/// background follows it in the same sequence, as ratatui writes both).
fn fg_sgr(case: &Value, token: &str) -> String {
    let (r, g, b) = hex(&case["colors"][token]);
    format!("\x1b[38;2;{r};{g};{b};")
}

fn recorded(name: &str) -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURES}/system-theme/expected.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    all["generated"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
        .clone()
}

/// A terminal that answers everything (Catppuccin Mocha): pi draws with the colours Pi's
/// generator makes for it, and what the user types around the replies reaches the editor
/// intact, with nothing of the replies in it.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_that_reports_its_colours_gets_them() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let mut run = start(json!({})).await;
    let asked = run.pty.wait_for(QUERY_END, 0);
    let case = recorded("mocha");
    let mut answer = format!(
        "\x1b]10;{}\x1b\\\x1b]11;{}\x07",
        osc_value(&case["foreground"]),
        osc_value(&case["background"])
    );
    for (i, c) in case["palette"].as_array().unwrap().iter().enumerate() {
        answer.push_str(&format!("\x1b]4;{i};{}\x07", osc_value(c)));
    }
    answer.push_str("\x1b[?62;22c");
    run.pty.type_text(&format!("hel{answer}lo"));
    // The header's keys are `dim`, their descriptions `muted`.
    let drawn = run.pty.wait_for(&fg_sgr(&case, "dim"), asked);
    run.pty.wait_for(&fg_sgr(&case, "muted"), asked);
    run.pty.wait_for("hello", asked);
    let out = run.pty.output();
    let after = &out[asked..];
    for leaked in ["rgb:", "cdcd", "62;22c", "1e1e"] {
        assert!(
            !after.contains(leaked),
            "{leaked:?} reached the screen: {after:?}"
        );
    }
    // Before the answer the screen was grey: no colour of its own.
    let before = &out[asked..drawn];
    let first_rgb = before.find("\x1b[38;2;").unwrap_or(before.len());
    assert!(
        before[..first_rgb].contains("interrupt"),
        "the first frame was not drawn before the colours: {before:?}"
    );
}

/// A terminal that answers only DA1, as tmux does without a client that reports colours:
/// the palette-index tier, where colours are ANSI indices the terminal draws itself,
/// secondary text is faint, and there is no RGB colour at all.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_that_reports_nothing_gets_palette_indices() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let mut run = start(json!({})).await;
    let asked = run.pty.wait_for(QUERY_END, 0);
    run.pty.wait_for("interrupt", asked);
    run.pty.type_text("\x1b[?1;2c");
    // The slash-command list marks its selection in `accent`: palette colour 5.
    run.pty.type_text("/");
    let at = run.pty.wait_for("\x1b[38;5;5;", asked);
    let out = run.pty.output();
    assert!(!out[asked..at].contains("\x1b[38;2;"), "{out:?}");
    // Faint header text.
    assert!(out[asked..].contains("\x1b[2m"), "{out:?}");
}

/// A terminal that answers nothing at all: after the timeout the palette-index tier, and
/// when the colours come in late after all (a slow link), they still apply.
#[tokio::test(flavor = "multi_thread")]
async fn late_colours_still_apply() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let mut run = start(json!({})).await;
    let asked = run.pty.wait_for(QUERY_END, 0);
    run.pty.type_text("/");
    // The timeout's fallback: indices.
    let fallback = run.pty.wait_for("\x1b[38;5;5;", asked);
    run.pty.type_text("\x1b");
    let case = recorded("dark-background-only");
    run.pty.type_text(&format!(
        "\x1b]11;{}\x07\x1b[?62c",
        osc_value(&case["background"])
    ));
    run.pty.wait_for(&fg_sgr(&case, "dim"), fallback);
}

/// `dark` set in the settings stays `dark`, whatever the terminal reports.
#[tokio::test(flavor = "multi_thread")]
async fn a_chosen_theme_ignores_the_terminal() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1");
        return;
    }
    let mut run = start(json!({"theme": "dark"})).await;
    let asked = run.pty.wait_for(QUERY_END, 0);
    run.pty.type_text("\x1b]11;rgb:ffff/ffff/ffff\x07\x1b[?62c");
    // dark's `dim` (#666666) and `muted` (#808080) on the header.
    run.pty.wait_for("\x1b[38;2;102;102;102;", asked);
    run.pty.wait_for("\x1b[38;2;128;128;128;", asked);
}
