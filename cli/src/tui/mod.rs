//! Interactive mode: the everyday coding session in the terminal (ratatui + crossterm).
//!
//! Layout follows the helix/codex split: [`app`] holds the state and the pure update
//! function (`Msg` in, `Effect`s out), [`render`] draws `&App` into a frame, and this module
//! is the imperative shell that owns the terminal, the agent ([`driver::AgentDriver`]) and
//! the background work (file index, `!cmd`, external editor).
//!
//! # Entry point
//!
//! `pi` with no mode flag calls [`run`]:
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let opts = pi_cli::tui::TuiOptions::new(std::env::current_dir()?);
//! let code = pi_cli::tui::run(opts)?;
//! std::process::exit(code);
//! # }
//! ```
//!
//! From the command line, [`agent::run_with_args`] does the whole setup (session, model,
//! tools as for `-p`, UI settings from settings.json) and calls [`run`]. To embed the UI
//! differently, fill in [`TuiOptions::driver`] (e.g. [`agent::AgentSessionDriver`]); without
//! a driver the UI runs offline and says so on every prompt. The terminal is restored on every
//! way out: normal exit, error, ctrl+c/ctrl+d, and panic (a hook restores it before the
//! default hook prints).

pub mod agent;
pub mod api_key_login;
pub mod app;
pub mod changelog;
pub mod clipboard;
pub mod dialogs;
pub mod driver;
pub mod editor;
pub mod exit_hint;
pub mod ext_ui;
pub mod input;
pub mod keys;
pub mod llama_view;
pub mod login;
pub mod markdown;
pub mod mcp_view;
pub mod okcolor;
pub mod render;
pub mod session_ops;
pub mod session_search;
pub mod settings_menu;
pub mod startup;
pub mod system_theme;
pub mod term_colors;
pub mod theme;
pub mod transcript;
pub mod tree;

#[cfg(test)]
mod tests;

use app::{App, Effect, Msg};
use crossterm::event::{Event, KeyEventKind};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{
    event::{DisableBracketedPaste, EnableBracketedPaste},
    execute,
};
use driver::{AgentDriver, AgentEvent, BranchSummary, ModelInfo, ThinkingLevel};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// Everything the interactive mode needs from the command line.
pub struct TuiOptions {
    pub cwd: PathBuf,
    /// `~/.pi/agent` (keybindings.json, themes/, settings).
    pub agent_dir: PathBuf,
    /// The agent; `None` runs offline (prompts answer with a notice).
    pub driver: Option<Box<dyn AgentDriver>>,
    /// Session store for /resume.
    pub store: Option<Box<dyn pi_storage::store::SessionStore>>,
    /// What `store` was opened from, for its history index (/resume's message search).
    pub store_spec: Option<(pi_storage::StoreSpec, pi_storage::StoreOptions)>,
    /// Startup header rows for loaded context files, skills and templates: (name, kind).
    pub loaded: Vec<(String, String)>,
    /// Slash commands beyond the built-ins (`skill:name`, prompt templates).
    pub commands: Vec<app::Command>,
    pub quiet_startup: bool,
    /// `doubleEscapeAction`: `tree`, `fork` or `none`.
    pub double_escape: String,
    pub skip_branch_prompt: bool,
    pub theme: String,
    /// Theme files and directories extensions contributed (`resources_discover`'s
    /// `themePaths`): their themes can be set and picked in /settings.
    pub theme_paths: Vec<PathBuf>,
    pub thinking: ThinkingLevel,
    /// Models for ctrl+p (`--models`, else settings' `enabledModels`, as `provider/id`).
    pub scoped_models: Vec<String>,
    /// Thinking levels given with scoped models (`--models sonnet:high`).
    pub scoped_thinking: std::collections::HashMap<String, ThinkingLevel>,
    /// settings' `externalEditor`, before $VISUAL and $EDITOR.
    pub external_editor: Option<String>,
    /// The current model (defaults to the driver's first model).
    pub model: Option<ModelInfo>,
    /// Thinking blocks expanded (Pi's `hideThinkingBlock`, inverted; shown by default).
    pub show_thinking: bool,
    /// `--resume`: start with the session picker open.
    pub open_resume: bool,
    /// `compaction.enabled`.
    pub auto_compact: bool,
    /// The other settings /settings shows.
    pub prefs: settings_menu::Prefs,
    /// `--tui-mode regular` / `tuiMode: "regular"`: the main screen, finished messages
    /// printed into the terminal's scrollback, instead of the alternate screen.
    pub regular: bool,
    /// `builtin:llama.cpp` is on (`/llama` exists).
    pub llama: bool,
}

impl TuiOptions {
    pub fn new(cwd: PathBuf) -> TuiOptions {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        TuiOptions {
            cwd,
            agent_dir: std::env::var_os("PI_CODING_AGENT_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".pi").join("agent")),
            driver: None,
            store: None,
            store_spec: None,
            loaded: Vec::new(),
            commands: Vec::new(),
            quiet_startup: false,
            double_escape: "tree".into(),
            skip_branch_prompt: false,
            theme: system_theme::NAME.into(),
            theme_paths: Vec::new(),
            thinking: ThinkingLevel::Off,
            scoped_models: Vec::new(),
            scoped_thinking: std::collections::HashMap::new(),
            external_editor: None,
            model: None,
            show_thinking: true,
            open_resume: false,
            auto_compact: true,
            prefs: settings_menu::Prefs::default(),
            regular: false,
            llama: true,
        }
    }
}

/// A driver for when no agent runtime is wired in: it keeps the UI usable and says why
/// nothing answers.
#[derive(Debug, Default)]
pub struct OfflineDriver {
    pending: Vec<AgentEvent>,
}

impl AgentDriver for OfflineDriver {
    fn prompt(&mut self, text: &str) {
        self.pending.push(AgentEvent::MessageStart {
            role: "user".into(),
            text: text.into(),
        });
        self.pending.push(AgentEvent::Error(
            "No agent runtime is connected to this build.".into(),
        ));
        self.pending.push(AgentEvent::AgentEnd);
    }
    fn steer(&mut self, _: &str) {}
    fn follow_up(&mut self, _: &str) {}
    fn abort(&mut self) {
        self.pending.push(AgentEvent::AgentEnd);
    }
    fn poll_events(&mut self) -> Vec<AgentEvent> {
        std::mem::take(&mut self.pending)
    }
    fn navigate_tree(&mut self, _: &str, _: &BranchSummary) -> anyhow::Result<()> {
        anyhow::bail!("no session")
    }
    fn compact(&mut self, _: Option<&str>) {
        self.pending.push(AgentEvent::CompactionEnd {
            summary: None,
            error: Some("no agent".into()),
        });
    }
    fn set_model(&mut self, _: &ModelInfo) {}
    fn set_thinking(&mut self, _: ThinkingLevel) {}
    fn models(&self) -> Vec<ModelInfo> {
        pi_agent::llm::model::builtin_models()
            .iter()
            .map(ModelInfo::from_engine)
            .collect()
    }
    fn session(&self) -> Option<pi_engine::session::Session> {
        None
    }
    fn clear_queue(&mut self) -> (Vec<String>, Vec<String>) {
        (Vec::new(), Vec::new())
    }
}

/// Builds the initial state from the options (no terminal needed; tests use it too).
pub fn initial_app(opts: &TuiOptions, driver: &dyn AgentDriver) -> App {
    let mut app = App::new(opts.cwd.clone());
    let (keys, mut warnings) = keys::Keymap::load(&opts.agent_dir);
    app.keys = keys;
    let (theme, warning) = theme::Theme::load(&opts.theme, &opts.agent_dir, &opts.theme_paths);
    app.theme = theme;
    warnings.extend(warning);
    app.settings.quiet_startup = opts.quiet_startup;
    app.settings.double_escape = opts.double_escape.clone();
    app.flags.show_thinking = opts.show_thinking;
    app.settings.skip_branch_prompt = opts.skip_branch_prompt;
    app.settings.theme = opts.theme.clone();
    app.settings.theme_paths = opts.theme_paths.clone();
    app.settings.external_editor = opts.external_editor.clone();
    app.settings.llama = opts.llama;
    app.models = driver.models();
    let (shortcuts, skipped) = ext_ui::shortcuts_of(&driver.extension_shortcuts(), &app.keys);
    app.ext_ui.shortcuts = shortcuts;
    warnings.extend(skipped);
    app.scoped = opts.scoped_models.clone();
    app.scoped_thinking = opts.scoped_thinking.clone();
    app.model = opts.model.clone().or_else(|| app.models.first().cloned());
    app.thinking = opts.thinking;
    app.commands = opts.commands.clone();
    app.ext_ui.commands = driver
        .extension_commands()
        .into_iter()
        .map(|c| c.name)
        .collect();
    app.footer.git_branch = git_branch(&opts.cwd);
    app.footer.auto_compact = opts.auto_compact;
    app.prefs = opts.prefs.clone();
    app.push_header(&opts.loaded);
    // `-c` / `--session`: show the conversation so far.
    let messages = driver.messages();
    if !messages.is_empty() {
        app.load_messages(&messages);
    }
    if let Some(s) = driver.session() {
        app.footer.session_name = s.session_name();
        // Summing usage reads every assistant message of the file: `run` does it after the
        // first frame (see `Msg::FileTotals`).
        app.footer.file_totals_pending = true;
    }
    for w in warnings {
        app.notice(w);
    }
    app
}

/// The checked-out branch, from `.git/HEAD` in `cwd` or a parent (no git process per
/// start-up); `None` outside a repository or on a detached HEAD.
pub(crate) fn git_branch(cwd: &std::path::Path) -> Option<String> {
    for dir in cwd.ancestors() {
        let git = dir.join(".git");
        let head = if git.is_dir() {
            git.join("HEAD")
        } else if git.is_file() {
            // A worktree or submodule: `.git` names the real git directory.
            let text = std::fs::read_to_string(&git).ok()?;
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            dir.join(target).join("HEAD")
        } else {
            continue;
        };
        let text = std::fs::read_to_string(head).ok()?;
        return text
            .trim()
            .strip_prefix("ref: refs/heads/")
            .map(str::to_string);
    }
    None
}

/// Regular mode is on (read by `restore_terminal`, which the panic hook calls too).
static REGULAR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Puts the terminal back: raw mode off, main screen, cursor shown. Safe to call twice.
fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let mut out = io::stdout();
    let _ = out.write_all(input::DISABLE_EXTENDED_KEYS.as_bytes());
    let _ = execute!(out, DisableBracketedPaste, crossterm::cursor::Show);
    if !REGULAR.load(std::sync::atomic::Ordering::Relaxed) {
        let _ = execute!(out, LeaveAlternateScreen);
    } else {
        // Below the last drawn row, so what follows (the resume hint) does not overwrite it.
        let _ = writeln!(out);
    }
}

fn setup_terminal(regular: bool) -> anyhow::Result<Terminal<CrosstermBackend<io::Stdout>>> {
    terminal::enable_raw_mode()?;
    enter_screen(regular)?;
    let backend = CrosstermBackend::new(io::stdout());
    if regular {
        // A fixed part of the main screen (ratatui's inline viewport cannot grow and shrink
        // with its content): the lower half, at least 12 rows so dialogs stay usable. What
        // is printed above it scrolls into the terminal's own scrollback.
        let rows = terminal::size()?.1.max(1);
        let height = (rows / 2).max(12).min(rows);
        let options = ratatui::TerminalOptions {
            viewport: ratatui::Viewport::Inline(height),
        };
        return Ok(Terminal::with_options(backend, options)?);
    }
    Ok(Terminal::new(backend)?)
}

/// The alternate screen (fullscreen mode only), bracketed paste and extended key reporting
/// (shift+enter).
fn enter_screen(regular: bool) -> io::Result<()> {
    let mut out = io::stdout();
    if !regular {
        execute!(out, EnterAlternateScreen)?;
    }
    execute!(out, EnableBracketedPaste)?;
    out.write_all(input::ENABLE_EXTENDED_KEYS.as_bytes())?;
    out.flush()
}

/// Which transcript items regular mode has printed into the scrollback.
#[derive(Debug, Default)]
struct Printed {
    count: usize,
    generation: u64,
}

/// Regular mode: prints the transcript items that will not change any more (everything but
/// a running tool call and the message being streamed) above the UI, into the terminal's
/// scrollback, and has the UI draw only what follows them.
fn print_settled(app: &mut App, terminal: &mut Term, printed: &mut Printed) -> io::Result<()> {
    let items = app.transcript.items();
    // /new, /resume and the like start the transcript over; what was printed stays printed.
    if printed.generation != app.transcript.generation() || printed.count > items.len() {
        printed.generation = app.transcript.generation();
        printed.count = 0;
    }
    let live = items
        .iter()
        .enumerate()
        .position(|(i, item)| {
            matches!(item, transcript::Item::Tool { done: false, .. })
                || (i + 1 == items.len() && app.working)
        })
        .unwrap_or(items.len())
        .max(printed.count);
    let width = terminal.size()?.width;
    for item in &items[printed.count..live] {
        let lines = transcript::item_lines(item, width, app.flags, &app.theme);
        let height = u16::try_from(lines.len()).unwrap_or(u16::MAX);
        terminal.insert_before(height, |buf| {
            let area = buf.area;
            for (y, line) in lines.iter().enumerate().take(usize::from(area.height)) {
                let y = area.y + y as u16;
                let row = ratatui::layout::Rect {
                    x: area.x,
                    y,
                    width: area.width,
                    height: 1,
                };
                buf.set_style(row, line.style);
                buf.set_line(area.x, y, line, area.width);
            }
            render::show_controls(area, buf);
        })?;
    }
    printed.count = live;
    app.transcript.set_floor(live);
    Ok(())
}

/// Restores the terminal when dropped, so `?` and early returns cannot leave it raw; then
/// prints the exit message, if any, on the main screen.
struct TerminalGuard {
    exit_message: Option<String>,
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        // Questions the host asked in the screen (project trust) end unanswered.
        crate::modes::extensions::tui_relay::close_dialogs();
        // Only once: leaving the alternate screen again would move the cursor back over
        // the message (the terminal restores the cursor it saved on entry).
        restore_terminal();
        if let Some(text) = &self.exit_message {
            println!("{text}");
        }
    }
}

/// Runs the interactive session until the user quits; returns the exit code.
pub fn run(mut opts: TuiOptions) -> anyhow::Result<i32> {
    let mut driver: Box<dyn AgentDriver> = opts
        .driver
        .take()
        .unwrap_or_else(|| Box::new(OfflineDriver::default()));
    // The terminal is asked for its colours once the screen is set up; until it answers,
    // the `system` theme is grey.
    theme::mark_terminal_colors_pending();
    let mut app = initial_app(&opts, driver.as_ref());

    // Restore the terminal before the default hook prints, or the panic message lands in
    // the alternate screen and vanishes.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        default_hook(info);
    }));

    let mut tty = input::TtyInput::open()?;
    REGULAR.store(opts.regular, std::sync::atomic::Ordering::Relaxed);
    let mut terminal = setup_terminal(opts.regular)?;
    let mut color_query = start_color_query(&mut app);
    let mut printed = Printed::default();
    let mut guard = TerminalGuard { exit_message: None };
    let mut search = session_search::SessionSearch::default();
    let (tx, rx) = mpsc::channel::<Msg>();
    {
        let record_tx = std::sync::Mutex::new(tx.clone());
        crate::modes::extensions::tui_relay::attach(move |record| {
            let _ = record_tx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(Msg::Extension(record));
        });
        // A command's `ctx.reload()` is this screen's /reload.
        let reload_tx = std::sync::Mutex::new(tx.clone());
        crate::modes::extensions::tui_relay::attach_reload(move |done| {
            let _ = reload_tx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(Msg::ExtensionReload(done));
        });
    }
    theme::publish(&opts.agent_dir, &app.settings.theme_paths);
    if app.footer.file_totals_pending {
        if let Some(snapshot) = driver.session() {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = tx.send(Msg::FileTotals(session_ops::session_totals(&snapshot)));
            });
        }
    }
    let mut indexed = opts.cwd.clone();
    spawn_file_index(indexed.clone(), tx.clone());
    {
        // Started from the kept catalog; the gateway's current one follows when it answers.
        let tx = tx.clone();
        crate::modes::radius_refresh::spawn(opts.agent_dir.clone(), move |models| {
            let _ = tx.send(Msg::Radius(login::RadiusUpdate::catalog(models)));
        });
    }
    if crate::modes::radius_refresh::network_allowed() {
        // Pi's catalog refresh after start-up also runs the extensions' `refreshModels`.
        let tx = tx.clone();
        let agent_dir = opts.agent_dir.clone();
        std::thread::spawn(move || {
            if crate::modes::extensions::refresh_models_blocking(&agent_dir, None, true).changed {
                let _ = tx.send(Msg::ModelsChanged);
            }
        });
    }
    if opts.open_resume {
        apply_effect(
            &mut app,
            driver.as_mut(),
            &opts,
            &mut terminal,
            &tx,
            &mut search,
            Effect::OpenResume,
        )?;
        // As `pi -r`: leaving the picker without a choice ends the program.
        app.resume_at_start = matches!(app.dialog, Some(dialogs::Dialog::Resume(_)));
    }

    loop {
        // What goes into the scrollback keeps its colours: wait (at most the query's
        // timeout) for the terminal's before printing.
        if opts.regular && !color_query.as_ref().is_some_and(|q| q.waiting()) {
            print_settled(&mut app, &mut terminal, &mut printed)?;
        }
        terminal.draw(|f| render::draw(&app, f))?;
        let mut effects = Vec::new();
        // What is ready is read at once, so a paste or key repeat costs one frame, not one
        // each. A resize needs no event: the next draw reflows (heights are cached per width).
        // While the colour query waits, the wait is short so its timeout is kept.
        let wait = match &color_query {
            Some(q) if q.waiting() => Duration::from_millis(20),
            _ => Duration::from_millis(50),
        };
        for ev in tty.read(wait)? {
            match ev {
                Event::Key(k) if k.kind != KeyEventKind::Release => {
                    effects.extend(app::update(&mut app, Msg::Key(k)))
                }
                Event::Paste(s) => effects.extend(app::update(&mut app, Msg::Paste(s))),
                _ => {}
            }
        }
        let replies = tty.take_replies();
        if let Some(query) = color_query.as_mut() {
            let mut reported: Vec<_> = replies.iter().filter_map(|r| query.on_reply(r)).collect();
            reported.extend(query.on_tick(std::time::Instant::now()));
            for colors in reported {
                apply_terminal_colors(&mut app, colors);
            }
        }
        app.now_ms = now_ms();
        for ev in driver.poll_events() {
            if let AgentEvent::SessionReplaced {
                op,
                before,
                outcome,
            } = ev
            {
                session_ops::op_done(
                    &mut app,
                    driver.as_mut(),
                    &opts.agent_dir,
                    op,
                    before,
                    outcome,
                );
                continue;
            }
            effects.extend(app::update(&mut app, Msg::Agent(ev)));
        }
        while let Ok(msg) = rx.try_recv() {
            if let Msg::ExtensionReload(done) = msg {
                session_ops::reload_for_extension(&mut app, driver.as_mut(), &opts.agent_dir);
                let _ = done.send(());
                continue;
            }
            effects.extend(app::update(&mut app, msg));
        }
        if app.working || app.compacting || app.summarizing_branch {
            app.tick += 1;
        }
        for effect in effects {
            let quit = apply_effect(
                &mut app,
                driver.as_mut(),
                &opts,
                &mut terminal,
                &tx,
                &mut search,
                effect,
            )?;
            if quit {
                if opts.regular {
                    // Leave the UI where it is and continue below it (the cursor sits in the
                    // editor, mid-viewport).
                    let bottom = terminal.get_frame().area().bottom().saturating_sub(1);
                    execute!(io::stdout(), crossterm::cursor::MoveTo(0, bottom))?;
                }
                guard.exit_message = app.exit_message.take();
                return Ok(0);
            }
        }
        // An extension dialog waits for the dialog open before it to close.
        ext_ui::open_next(&mut app);
        if let Some(title) = app.ext_ui.title.take() {
            let _ = execute!(io::stdout(), terminal::SetTitle(title));
        }
        // A session from another directory moved us there: `@` completion lists its files.
        if app.cwd != indexed {
            indexed = app.cwd.clone();
            spawn_file_index(indexed.clone(), tx.clone());
        }
    }
}

/// Asks the terminal for its colours (see [`term_colors`]); the replies come in with the
/// input. A question that cannot be written counts as a terminal that answers nothing.
fn start_color_query(app: &mut App) -> Option<term_colors::ColorQuery> {
    let mut out = io::stdout();
    let sent = out
        .write_all(term_colors::query().as_bytes())
        .and_then(|()| out.flush());
    match sent {
        Ok(()) => Some(term_colors::ColorQuery::new(std::time::Instant::now())),
        Err(_) => {
            apply_terminal_colors(app, system_theme::TerminalColors::default());
            None
        }
    }
}

/// The terminal reported its colours (or the query timed out with what it had): remember
/// them over what earlier reports said and, when the `system` theme is on screen, rebuild
/// it from them.
fn apply_terminal_colors(app: &mut App, reported: system_theme::TerminalColors) {
    let next = term_colors::merge(theme::terminal_colors().as_ref(), reported);
    // Rebuilding re-wraps the whole transcript: not when nothing changed.
    if !theme::set_terminal_colors(next) || app.theme.name != system_theme::NAME {
        return;
    }
    app.theme = theme::Theme::system();
    app.transcript.theme_changed();
}

/// Walks the project with the `ignore` crate (respects .gitignore) on a thread; large
/// trees are capped so `@` completion stays instant.
fn spawn_file_index(cwd: PathBuf, tx: mpsc::Sender<Msg>) {
    std::thread::spawn(move || {
        let mut files = Vec::new();
        for entry in ignore::WalkBuilder::new(&cwd)
            .hidden(true)
            .build()
            .flatten()
        {
            if entry.file_type().is_some_and(|t| t.is_file()) {
                if let Ok(rel) = entry.path().strip_prefix(&cwd) {
                    files.push(rel.to_string_lossy().into_owned());
                }
            }
            if files.len() >= 50_000 {
                break;
            }
        }
        let _ = tx.send(Msg::FilesIndexed(files));
    });
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

type Term = Terminal<CrosstermBackend<io::Stdout>>;

/// Carries out one effect; returns true to quit.
fn apply_effect(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    opts: &TuiOptions,
    terminal: &mut Term,
    tx: &mpsc::Sender<Msg>,
    search: &mut session_search::SessionSearch,
    effect: Effect,
) -> anyhow::Result<bool> {
    match effect {
        Effect::Quit => return Ok(true),
        Effect::Prompt(t) => driver.prompt(&t),
        Effect::Steer(t) => driver.steer(&t),
        Effect::FollowUp(t) => driver.follow_up(&t),
        Effect::Abort => driver.abort(),
        Effect::ClearQueue => {
            let (s, f) = driver.clear_queue();
            let mut parts: Vec<String> = s
                .into_iter()
                .chain(f)
                .filter(|p| !app.editor.text().contains(p.as_str()))
                .collect();
            if !parts.is_empty() {
                parts.push(app.editor.text());
                app.editor.set_text(parts.join("\n\n").trim_end());
            }
        }
        Effect::Compact(i) => driver.compact(i.as_deref()),
        Effect::Shortcut(s) => driver.run_shortcut(&s),
        Effect::SetModel(m) => driver.set_model(&m),
        Effect::CycleModel { model, thinking } => driver.cycle_model(&model, thinking),
        Effect::SetQueueMode { follow_up, mode } => driver.set_queue_mode(follow_up, &mode),
        Effect::PasteClipboard => {
            let env = |k: &str| std::env::var(k).ok();
            match clipboard::paste(&env, &std::env::temp_dir()) {
                Ok(clipboard::Pasted::Image(path)) => {
                    app::update(app, Msg::Paste(path.display().to_string()));
                }
                Ok(clipboard::Pasted::Text(text)) => {
                    app::update(app, Msg::Paste(text));
                }
                Ok(clipboard::Pasted::Nothing) => {}
                Err(e) => app.transcript.push(transcript::Item::Error(format!(
                    "Failed to paste from clipboard: {e}"
                ))),
            }
        }
        Effect::SetThinking(l) => {
            app.thinking = l;
            driver.set_thinking(l);
        }
        Effect::SessionInfo => app.session_info(driver.session().as_ref()),
        Effect::NavigateTree { entry, summary } => {
            // The outcome arrives as an agent event (a summary takes a model call).
            if let Err(e) = driver.navigate_tree(&entry, &summary) {
                app::update(
                    app,
                    Msg::Agent(AgentEvent::TreeNavigationFailed(e.to_string())),
                );
            }
        }
        Effect::OpenTree => match driver.session() {
            Some(s) => app.open_tree(tree::TreeNav::from_session(&s)),
            None => app.notice("No session yet"),
        },
        Effect::OpenResume => {
            search.reset();
            session_ops::open_resume(app, driver, opts.store.as_deref(), now_ms())
        }
        Effect::SearchSessionText(queries) => {
            app.resume_text_hits(queries, |q| match &opts.store_spec {
                Some(store) => search.sessions_matching(store, q).ok(),
                None => None,
            })
        }
        Effect::DeleteSession { id, .. } => session_ops::delete(app, opts.store.as_deref(), &id),
        Effect::RenameSession { id, name, .. } => {
            session_ops::rename(app, driver, opts.store.as_deref(), &id, &name)
        }
        Effect::OpenFork => match driver.session() {
            Some(s) => app.open_fork(session_ops::fork_rows(&s)),
            None => app.notice("No messages to fork from"),
        },
        Effect::Fork(id) => {
            session_ops::start(app, driver, &opts.agent_dir, driver::SessionOp::Fork(id))
        }
        Effect::Import(path) => {
            session_ops::import(app, driver, &opts.agent_dir, &path, driver::MissingCwd::Ask)
        }
        Effect::ImportWith { path, missing_cwd } => {
            session_ops::import(app, driver, &opts.agent_dir, &path, missing_cwd)
        }
        Effect::ResumeWith {
            location,
            missing_cwd,
        } => session_ops::start(
            app,
            driver,
            &opts.agent_dir,
            driver::SessionOp::Resume {
                location,
                missing_cwd,
            },
        ),
        Effect::Reload => session_ops::reload(app, driver, &opts.agent_dir),
        Effect::Login(arg) => login::start(app, &opts.agent_dir, &arg, tx.clone()),
        Effect::AccountLogin(arg) => login::start_account(app, &opts.agent_dir, &arg, tx.clone()),
        Effect::LoginProviders { api_key } => login::open_providers(app, api_key),
        Effect::OpenLoginMethods => app.dialog = Some(login::picker()),
        Effect::ApiKeyLogin {
            provider,
            from_list,
        } => login::open_api_key_form(app, &provider, from_list),
        Effect::SaveApiKey {
            provider,
            name,
            credential,
        } => login::save_api_key(app, driver, &opts.agent_dir, &provider, &name, credential),
        Effect::LoginDone { provider, action } => {
            login::finish_login(app, driver, &opts.agent_dir, &provider, &action)
        }
        Effect::OpenLogout => login::open_logout(app, &opts.agent_dir),
        Effect::Logout(provider) => {
            login::logout(app, &opts.agent_dir, &provider);
            // As Pi after a logout: the provider's refresh without network, so its
            // `refreshModels` and `oauth.modifyModels` no longer see the credential.
            let (tx, agent_dir) = (tx.clone(), opts.agent_dir.clone());
            std::thread::spawn(move || {
                let only = [provider];
                if crate::modes::extensions::refresh_models_blocking(&agent_dir, Some(&only), false)
                    .changed
                {
                    let _ = tx.send(Msg::ModelsChanged);
                }
            });
        }
        Effect::Llama(action) => llama_view::apply(app, driver, &opts.agent_dir, tx, action),
        Effect::RefreshModelList => {
            app.models = driver.models();
            app.catalog_changed();
        }
        Effect::RefreshCatalogs(query) => {
            let (tx, agent_dir) = (tx.clone(), opts.agent_dir.clone());
            std::thread::spawn(move || {
                let refresh = crate::modes::extensions::refresh_models_blocking(
                    &agent_dir,
                    None,
                    crate::modes::radius_refresh::network_allowed(),
                );
                let _ = tx.send(Msg::CatalogsRefreshed { query, refresh });
            });
        }
        Effect::ModelQuery(q) => {
            let mut out = Vec::new();
            app.model_query(q, &mut out);
            for effect in out {
                if apply_effect(app, driver, opts, terminal, tx, search, effect)? {
                    return Ok(true);
                }
            }
        }
        Effect::ExtensionsLoaded => {
            ext_ui::refresh_registrations(
                app,
                &driver.extension_shortcuts(),
                driver.extension_commands(),
            );
            app.models = driver.models();
            app.catalog_changed();
        }
        Effect::SetRadiusModels(models) => {
            driver.set_radius_models(models);
            app.models = driver.models();
        }
        Effect::ConfigureRadiusMcp => {
            // Pi reloads so the MCP extension reads mcp.json again.
            if login::configure_radius_mcp(app, &opts.agent_dir) {
                session_ops::reload(app, driver, &opts.agent_dir);
            }
        }
        Effect::OpenMcp => {
            let mcp = crate::modes::current_mcp();
            mcp_view::open_list(app, mcp.as_deref(), &opts.agent_dir)
        }
        Effect::OpenMcpServer(name) => {
            let mcp = crate::modes::current_mcp();
            mcp_view::open_server(app, mcp.as_deref(), &name)
        }
        Effect::McpAction { server, action } => {
            let found = crate::modes::current_mcp()
                .and_then(|m| m.servers().iter().find(|s| s.name() == server).cloned());
            match (found, action) {
                (None, _) => app.notice(format!("No MCP server named \"{server}\".")),
                (Some(server), mcp_view::McpAction::Reconnect) => {
                    // On the runtime the connections live on; the outcome comes back as a notice.
                    let tx = tx.clone();
                    app.notice(format!("Reconnecting to MCP server \"{}\"…", server.name()));
                    crate::modes::spawn_on_mcp_runtime(async move {
                        let text = match server.reconnect().await {
                            Ok(_) => format!(
                                "Reconnected to MCP server \"{}\" ({}).",
                                server.name(),
                                pi_agent::mcp::status::describe_state(&server)
                            ),
                            Err(error) => error,
                        };
                        let _ = tx.send(Msg::Notice(text));
                    });
                }
                (Some(server), mcp_view::McpAction::SignIn) => {
                    let tx = tx.clone();
                    app.notice(format!("Signing in to MCP server \"{}\"…", server.name()));
                    crate::modes::spawn_on_mcp_runtime(async move {
                        let prompt = mcp_view::NoticePrompt {
                            name: server.name().to_string(),
                            notices: tx.clone(),
                        };
                        let limit = std::time::Duration::from_secs_f64(
                            crate::commands::mcp_login::DEFAULT_LOGIN_TIMEOUT_SECS,
                        );
                        let notice =
                            pi_agent::mcp::oauth::session::sign_in(&server, &prompt, limit).await;
                        mcp_view::end_pasted_redirect();
                        let _ = tx.send(Msg::Notice(notice.text().to_string()));
                    });
                }
                (Some(server), mcp_view::McpAction::SignOut) => {
                    let tx = tx.clone();
                    crate::modes::spawn_on_mcp_runtime(async move {
                        let notice = pi_agent::mcp::oauth::session::sign_out(&server).await;
                        let _ = tx.send(Msg::Notice(notice.text().to_string()));
                    });
                }
                (Some(server), action) => match mcp_view::save_change(&server, action) {
                    Err(error) => app.notice(error),
                    Ok(text) => match action {
                        // Connecting or disconnecting takes a moment: on the connections'
                        // runtime, with the outcome as a second notice.
                        mcp_view::McpAction::SetEnabled(enabled)
                        | mcp_view::McpAction::SetEnabledInProject(enabled) => {
                            app.notice(text);
                            let tx = tx.clone();
                            crate::modes::spawn_on_mcp_runtime(async move {
                                server.set_enabled(enabled).await;
                                let _ = tx.send(Msg::Notice(format!(
                                    "MCP server \"{}\": {}.",
                                    server.name(),
                                    pi_agent::mcp::status::describe_state(&server)
                                )));
                            });
                        }
                        _ => app.notice(text),
                    },
                },
            }
        }
        Effect::OpenTrust => {
            let cwd = driver.cwd().unwrap_or_else(|| app.cwd.clone());
            let trusted = driver.project_trusted();
            session_ops::open_trust(app, &opts.agent_dir, &cwd, trusted)
        }
        Effect::SaveTrust(choice) => {
            let cwd = driver.cwd().unwrap_or_else(|| app.cwd.clone());
            session_ops::save_trust(app, &opts.agent_dir, &cwd, choice)
        }
        Effect::RunBash { command, excluded } => {
            // Through the session host, as RPC's `bash`: recorded as a `bashExecution`
            // message and, unless excluded, sent to the model with the next prompt.
            let tx = tx.clone();
            driver.run_bash(
                &command.clone(),
                excluded,
                Box::new(move |result| {
                    let _ = tx.send(Msg::BashDone {
                        command,
                        result,
                        excluded,
                    });
                }),
            );
        }
        Effect::AbortBash => driver.abort_bash(),
        Effect::ExternalEditor(text) => {
            let editor = opts
                .external_editor
                .clone()
                .or_else(|| std::env::var("VISUAL").ok())
                .or_else(|| std::env::var("EDITOR").ok())
                .unwrap_or_else(|| "nano".into());
            let file = tempfile::Builder::new().suffix(".md").tempfile()?;
            std::fs::write(file.path(), text)?;
            restore_terminal();
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{editor} \"$1\""))
                .arg("sh")
                .arg(file.path())
                .status();
            terminal::enable_raw_mode()?;
            enter_screen(opts.regular)?;
            terminal.clear()?;
            match status {
                Ok(s) if s.success() => {
                    let t = std::fs::read_to_string(file.path())?;
                    app::update(app, Msg::EditorText(t));
                }
                Ok(s) => app.notice(format!("{editor} exited with {s}")),
                Err(e) => app.notice(format!("could not start {editor}: {e}")),
            }
        }
        Effect::Suspend => {
            restore_terminal();
            // SIGTSTP stops us like the shell's ctrl+z; execution continues here after `fg`.
            // SAFETY: raising a signal in our own process has no memory-safety preconditions.
            #[allow(unsafe_code)]
            unsafe {
                libc::raise(libc::SIGTSTP);
            }
            terminal::enable_raw_mode()?;
            enter_screen(opts.regular)?;
            terminal.clear()?;
        }
        Effect::Copy(text) => {
            // OSC 52 works over ssh and in tmux (with set-clipboard on) without a helper binary.
            let b64 = base64_encode(text.as_bytes());
            let mut out = io::stdout();
            let _ = write!(out, "\x1b]52;c;{b64}\x07");
            let _ = out.flush();
            app.notice("Copied last message to clipboard");
        }
        Effect::SetTheme { name, save } => {
            let (theme, _) = theme::Theme::load(&name, &opts.agent_dir, &app.settings.theme_paths);
            app.theme = theme;
            app.transcript.theme_changed();
            if save && app.settings.theme != name {
                app.settings.theme = name.clone();
                if let Err(e) = save_setting(&opts.agent_dir, "theme", name.into()) {
                    app.notice(format!("Could not save theme: {e}"));
                }
            }
        }
        Effect::SaveSetting { key, value } => {
            if let Err(e) = save_setting(&opts.agent_dir, &key, value) {
                app.notice(format!("Could not save {key}: {e}"));
            }
        }
        Effect::SaveScopedModels(list) => {
            let value = serde_json::json!(list);
            if let Err(e) = save_setting(&opts.agent_dir, "enabledModels", value) {
                app.notice(format!("Could not save enabledModels: {e}"));
            }
        }
        Effect::SetLabel { id, label } => {
            if let Err(e) = driver.set_label(&id, label.as_deref()) {
                app.notice(format!("Could not set the label: {e}"));
            }
        }
        Effect::SetSessionName(name) => match driver.set_session_name(&name) {
            Ok(()) => app.notice(format!("Session name set: {name}")),
            Err(e) => app.notice(format!("Could not set the session name: {e}")),
        },
        Effect::Resume(location) => session_ops::start(
            app,
            driver,
            &opts.agent_dir,
            driver::SessionOp::Resume {
                location,
                missing_cwd: driver::MissingCwd::Ask,
            },
        ),
        Effect::NewSession => {
            session_ops::start(app, driver, &opts.agent_dir, driver::SessionOp::New)
        }
        Effect::Clone => session_ops::start(app, driver, &opts.agent_dir, driver::SessionOp::Clone),
        Effect::ExtensionAnswer(answer) => {
            // A trust question of a session replacement is answered in the host itself.
            if crate::modes::extensions::tui_relay::answer_dialog(&answer) {
                return Ok(false);
            }
            if let Some(ext) = crate::modes::extensions::current() {
                ext.ui_response(&answer);
            }
        }
        Effect::Export(path) => match export_session(driver, &opts.cwd, path.as_deref()) {
            Ok(p) => app.notice(format!("Session exported to: {}", p.display())),
            Err(e) => app.transcript.push(transcript::Item::Error(format!(
                "Failed to export session: {e}"
            ))),
        },
    }
    Ok(false)
}

/// `/export [file]`: HTML by default, the raw session for `.jsonl`, Markdown for `.md`.
fn export_session(
    driver: &dyn AgentDriver,
    cwd: &std::path::Path,
    path: Option<&str>,
) -> anyhow::Result<PathBuf> {
    let Some(session) = driver.session() else {
        anyhow::bail!("no session")
    };
    let id = session.session_id().unwrap_or_else(|| "session".into());
    let path = cwd.join(
        path.map(str::to_string)
            .unwrap_or_else(|| format!("pi-session-{id}.html")),
    );
    // Pi's `/export f.jsonl` writes the active branch; the other formats are the page and
    // document every export path writes.
    let bytes = match path.extension().and_then(|e| e.to_str()) {
        Some("jsonl") => branch_jsonl(&session),
        _ => pi_engine::export::render(&session, pi_engine::export::Format::for_path(&path)),
    };
    pi_storage::atomic::write_atomically(&path, &bytes)?;
    Ok(path)
}

/// The header and the entries of the active branch, root first, each line as stored: what
/// Pi's `/export file.jsonl` writes (other branches stay out).
fn branch_jsonl(session: &pi_engine::session::Session) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(header) = session.header_line() {
        out.extend_from_slice(header);
        out.push(b'\n');
    }
    for idx in session.branch_path().entries {
        out.extend_from_slice(session.entry_line(idx));
        out.push(b'\n');
    }
    out
}

/// Writes one key (dotted keys nest) into the global settings.json through
/// `engine::config`, which re-reads the file, keeps every other key and replaces it
/// atomically.
pub fn save_setting(
    agent_dir: &std::path::Path,
    key: &str,
    value: serde_json::Value,
) -> anyhow::Result<()> {
    let path: Vec<&str> = key.split('.').collect();
    pi_agent::config::Settings::load_global(agent_dir)
        .set_global(&path, Some(value))
        .map_err(|e| anyhow::anyhow!("{e}"))
}

fn base64_encode(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
