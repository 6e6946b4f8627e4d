//! Questions the interactive mode asks before the session is set up, on a screen of their
//! own (Pi's `showStartupSelector`): whether to trust the project folder.
//!
//! The trust answer has to come first because it decides what is loaded at all: project
//! `settings.json`, `.pi` skills, prompt templates, `SYSTEM.md` and `APPEND_SYSTEM.md`.

use super::dialogs::{Confirm, ConfirmOutcome};
use super::keys::Keymap;
use super::theme::Theme;
use crossterm::event::{self, Event, KeyEvent, KeyEventKind};
use crossterm::execute;
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use pi_agent::config::{
    home, resolve_trust, Settings, TrustChoice, TrustDecision, TrustInputs, TrustStore,
};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::Terminal;
use std::path::Path;

/// The trust question for `path` with Pi's five answers (four at the root), in its order.
pub fn trust_prompt(path: &Path) -> Confirm {
    Confirm {
        title: "Trust project folder?".into(),
        message: format!(
            "{}\n\nThis allows pi to load .pi settings and resources, install missing project \
             packages, and execute project extensions.",
            path.display()
        ),
        options: TrustChoice::options(path)
            .into_iter()
            .map(|c| (c.label(path), None))
            .collect(),
        cancelled: String::new(),
        selected: 0,
    }
}

/// Pi's start-up question for a `--session` whose stored directory is gone, with its
/// three answers: continue here, fork here, cancel (the /resume dialog's wording).
pub fn missing_dir_prompt(missing: &crate::modes::MissingSessionDir) -> Confirm {
    let here = &missing.fallback_cwd;
    Confirm {
        title: format!("Session cwd does not exist: {}", missing.session_cwd),
        message: String::new(),
        options: vec![
            (format!("Continue in {here} (asks again next time)"), None),
            (
                format!("Fork into {here} (new session ID, original kept)"),
                None,
            ),
            ("Cancel".into(), None),
        ],
        cancelled: String::new(),
        selected: 0,
    }
}

/// Decides project trust for the interactive start: `Some(trusted)` when the user was
/// asked, `None` when nothing needed asking (the flags, `trust.json` or
/// `defaultProjectTrust` decide, as in the other modes).
///
/// `ask` shows the question and returns the chosen option's index, `None` for escape. A
/// remembered answer is written to `trust.json` as Pi writes it; escape trusts nothing and
/// records nothing, as in Pi.
pub fn resolve_startup_trust(
    agent_dir: &Path,
    cwd: &Path,
    args: &crate::RunArgs,
    ask: impl FnOnce(Confirm) -> anyhow::Result<Option<usize>>,
) -> anyhow::Result<Option<bool>> {
    if args.approve || args.no_approve {
        return Ok(None);
    }
    let store = TrustStore::new(agent_dir);
    let decision = resolve_trust(
        cwd,
        &store,
        TrustInputs {
            override_: None,
            default: Settings::load_global(agent_dir).default_project_trust(),
            interactive: true,
            home: home(),
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let TrustDecision::Ask { path, .. } = decision else {
        return Ok(None);
    };
    let choices = TrustChoice::options(&path);
    let Some(choice) = ask(trust_prompt(&path))?.and_then(|i| choices.get(i).copied()) else {
        return Ok(Some(false));
    };
    let trusted = choice
        .record(&path, &store)
        .map_err(|e| anyhow::anyhow!("cannot save the trust decision: {e}"))?;
    Ok(Some(trusted))
}

/// Shows `prompt` alone on the alternate screen until an answer or escape, then restores
/// the terminal. Keys and theme come from the agent dir as in the session.
pub fn ask_on_terminal(agent_dir: &Path, prompt: Confirm) -> anyhow::Result<Option<usize>> {
    let (keys, _) = Keymap::load(agent_dir);
    on_own_screen(agent_dir, prompt, draw, |prompt, k| {
        match prompt.key(&keys, k) {
            ConfirmOutcome::Open => None,
            ConfirmOutcome::Chosen(i) => Some(Some(i)),
            ConfirmOutcome::Cancelled => Some(None),
        }
    })
}

/// Runs a question alone on the alternate screen in the theme the session will use:
/// `paint` draws it, `answer` takes each key press and returns the answer once there is
/// one. `state` is what the question shows and keys change (the selection, the text typed).
/// The terminal is restored however the question ends.
fn on_own_screen<S, T>(
    agent_dir: &Path,
    mut state: S,
    paint: impl Fn(&Theme, &S, Rect, &mut ratatui::buffer::Buffer),
    mut answer: impl FnMut(&mut S, &KeyEvent) -> Option<T>,
) -> anyhow::Result<T> {
    let theme_name = Settings::load_global(agent_dir)
        .theme()
        .unwrap_or(super::system_theme::NAME)
        .to_string();
    let (theme, _) = Theme::load(&theme_name, agent_dir, &[]);
    terminal::enable_raw_mode()?;
    let result = (|| -> anyhow::Result<T> {
        execute!(std::io::stdout(), EnterAlternateScreen)?;
        let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
        loop {
            term.draw(|f| paint(&theme, &state, f.area(), f.buffer_mut()))?;
            if let Event::Key(k) = event::read()? {
                if k.kind == KeyEventKind::Release {
                    continue;
                }
                if let Some(done) = answer(&mut state, &k) {
                    return Ok(done);
                }
            }
        }
    })();
    let _ = execute!(std::io::stdout(), LeaveAlternateScreen);
    let _ = terminal::disable_raw_mode();
    result
}

/// The prompt at the top of an otherwise empty screen.
pub fn draw(theme: &Theme, prompt: &Confirm, area: Rect, buf: &mut ratatui::buffer::Buffer) {
    let height = super::render::confirm_height(prompt, area.width).min(area.height);
    super::render::draw_confirm(theme, prompt, Rect { height, ..area }, buf);
    super::render::show_controls(area, buf);
}

/// A `project_trust` handler's question at the interactive mode's start (Pi's
/// `showStartupSelector` / `showStartupInput`): the chosen option or the text typed, `None`
/// when the user cancelled (or the terminal failed).
pub fn ask_trust_question(
    agent_dir: &Path,
    question: pi_agent::extensions::trust::TrustQuestion,
) -> Option<String> {
    // Pi's start-up context shows no notices (there is no screen yet).
    if question.notify.is_some() {
        return None;
    }
    if question.input {
        return input_on_terminal(agent_dir, &question.title, question.placeholder.as_deref())
            .ok()
            .flatten();
    }
    // `confirm` sends "title\nmessage" as Pi's selector title does.
    let (title, message) = question
        .title
        .split_once('\n')
        .unwrap_or((question.title.as_str(), ""));
    let prompt = Confirm {
        title: title.to_string(),
        message: message.to_string(),
        options: question.options.iter().map(|o| (o.clone(), None)).collect(),
        cancelled: String::new(),
        selected: 0,
    };
    let chosen = ask_on_terminal(agent_dir, prompt).ok().flatten()?;
    question.options.get(chosen).cloned()
}

/// A line of text asked alone on the alternate screen: enter answers, escape (or ctrl+c)
/// cancels.
pub fn input_on_terminal(
    agent_dir: &Path,
    title: &str,
    placeholder: Option<&str>,
) -> anyhow::Result<Option<String>> {
    use crossterm::event::{KeyCode, KeyModifiers};
    use ratatui::style::{Modifier, Style};
    use ratatui::text::{Line, Span};
    use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};
    let paint = |theme: &Theme, text: &String, area: Rect, buf: &mut ratatui::buffer::Buffer| {
        let shown = match (text.is_empty(), placeholder) {
            (true, Some(p)) => Span::styled(p.to_string(), theme.fg(theme.dim)),
            _ => Span::raw(format!("{text}▏")),
        };
        let lines = vec![
            Line::default(),
            Line::from(vec![Span::raw("> "), shown]),
            Line::default(),
            Line::styled("enter to submit · escape to cancel", theme.fg(theme.dim)),
        ];
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.fg(theme.border))
            .title(Span::styled(
                title.to_string(),
                Style::default().add_modifier(Modifier::BOLD),
            ));
        let height = 6.min(area.height);
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .render(Rect { height, ..area }, buf);
        super::render::show_controls(area, buf);
    };
    let answer = |text: &mut String, k: &KeyEvent| {
        match k.code {
            KeyCode::Enter => return Some(Some(text.clone())),
            KeyCode::Esc => return Some(None),
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => return Some(None),
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            _ => {}
        }
        None
    };
    on_own_screen(agent_dir, String::new(), paint, answer)
}
