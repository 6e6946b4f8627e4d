//! The session effects of the interactive mode: /fork, /import, /reload, and renaming and
//! deleting sessions from /resume.
//!
//! The driver loop in `mod.rs` calls these with the app, the agent and the store; they need
//! no terminal, so tests run them against real session files. The file-level helpers
//! (checking and copying an import, naming a session that is not open) live here too, used
//! by the agent adapter in `agent.rs`.

use super::app::App;
use super::app::Effect;
use super::dialogs::{Confirm, Dialog, ForkRow, SessionRow};
use super::driver::{
    AgentDriver, MissingCwd, MissingSessionCwd, OpFailure, OpOutcome, Reloaded, SessionOp,
};
use super::keys::Keymap;
use super::theme::Theme;
use super::transcript::Item;
use anyhow::anyhow;
use pi_engine::session::Session;
use pi_formats::entry::NewEntry;
use pi_storage::store::SessionStore;
use pi_storage::{SessionId, StoredEntry};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Pi's `getUserMessagesForForking`: every user message entry of the file that has text,
/// in file order (all branches, not only the current one).
pub fn fork_rows(session: &Session) -> Vec<ForkRow> {
    let mut rows = Vec::new();
    for idx in session.indices() {
        let record = session.entry(idx);
        if !record.is_message_with_role("user") {
            continue;
        }
        let Some(id) = record.id.as_deref() else {
            continue;
        };
        let value = session.entry_value(idx);
        let text = user_text(value.pointer("/message/content"));
        if !text.is_empty() {
            rows.push(ForkRow {
                id: id.to_string(),
                text,
            });
        }
    }
    rows
}

/// The text of a user message's content: the string, or its text parts joined.
pub fn user_text(content: Option<&Value>) -> String {
    pi_engine::js::content_text(content, "")
}

/// `/fork` chosen in the picker: switch to the forked session and put the message back
/// into the editor.
pub fn fork(app: &mut App, driver: &mut dyn AgentDriver, entry_id: &str) {
    let outcome = driver
        .fork(entry_id)
        .map(Some)
        .map_err(OpFailure::from_error);
    fork_done(app, driver, outcome);
}

fn fork_done(app: &mut App, driver: &mut dyn AgentDriver, outcome: OpOutcome) {
    match outcome {
        Ok(text) => {
            after_switch(app, driver);
            app.editor.set_text(&text.unwrap_or_default());
            app.notice("Forked to new session");
        }
        Err(e) => app
            .transcript
            .push(Item::Error(format!("Fork failed: {}", failure_text(&e)))),
    }
}

fn failure_text(e: &OpFailure) -> String {
    match e {
        OpFailure::MissingCwd(m) => m.to_string(),
        OpFailure::Failed(text) => text.clone(),
    }
}

/// Starts `op` without waiting for it (an extension may ask the user first); its outcome
/// comes to [`op_done`] now or, from the real agent, through the driver loop later.
pub fn start(app: &mut App, driver: &mut dyn AgentDriver, agent_dir: &Path, op: SessionOp) {
    let before = driver.cwd();
    if let Some(outcome) = driver.start_session_op(&op) {
        op_done(app, driver, agent_dir, op, before, outcome);
    }
}

/// What the UI does once a session operation ended.
pub fn op_done(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    op: SessionOp,
    before: Option<PathBuf>,
    outcome: OpOutcome,
) {
    match op {
        SessionOp::Fork(_) => {
            let forked = outcome.is_ok();
            fork_done(app, driver, outcome);
            if forked {
                show_new_runtime(app, driver, agent_dir, before.clone());
            }
        }
        SessionOp::Resume {
            location,
            missing_cwd,
        } => resume_done(
            app,
            driver,
            agent_dir,
            &location,
            missing_cwd,
            before,
            outcome,
        ),
        SessionOp::New => match outcome {
            Ok(_) => {
                after_switch(app, driver);
                show_new_runtime(app, driver, agent_dir, before.clone());
                app.notice("New session started");
            }
            Err(e) => app.notice(format!(
                "Could not start a new session: {}",
                failure_text(&e)
            )),
        },
        SessionOp::Clone => match outcome {
            Ok(_) => {
                after_switch(app, driver);
                show_new_runtime(app, driver, agent_dir, before.clone());
                app.notice("Cloned the session; now working in the copy");
            }
            Err(e) => app.notice(format!("Could not clone: {}", failure_text(&e))),
        },
    }
}

/// `/import FILE`, once confirmed (`missing_cwd`: the answer to the missing-directory
/// question, once asked).
pub fn import(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    path: &str,
    missing_cwd: MissingCwd,
) {
    if app.working {
        app.transcript.push(Item::Error(
            "Wait for the current response to finish before importing.".into(),
        ));
        return;
    }
    let before = driver.cwd();
    match driver.import_session(path, missing_cwd) {
        Ok(location) => {
            after_switch(app, driver);
            follow_cwd(app, driver, agent_dir, before);
            match missing_cwd {
                MissingCwd::Fork => app.notice(format!(
                    "Forked into new session {location} in {}",
                    app.cwd.display()
                )),
                MissingCwd::Ask | MissingCwd::Continue => {
                    app.notice(format!("Session imported from: {path}"))
                }
            }
        }
        Err(e) => match e.downcast::<MissingSessionCwd>() {
            Ok(missing) => ask_missing_cwd(app, &missing, "Import cancelled", |choice| {
                Effect::ImportWith {
                    path: path.to_string(),
                    missing_cwd: choice,
                }
            }),
            Err(e) => app
                .transcript
                .push(Item::Error(format!("Failed to import session: {e:#}"))),
        },
    }
}

/// A session chosen in /resume (`missing_cwd` as for [`import`]).
pub fn resume(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    location: &str,
    missing_cwd: MissingCwd,
) {
    let before = driver.cwd();
    let outcome = driver
        .switch_session(location, missing_cwd)
        .map(|()| None)
        .map_err(OpFailure::from_error);
    resume_done(
        app,
        driver,
        agent_dir,
        location,
        missing_cwd,
        before,
        outcome,
    );
}

fn resume_done(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    location: &str,
    missing_cwd: MissingCwd,
    before: Option<PathBuf>,
    outcome: OpOutcome,
) {
    match outcome {
        Ok(_) => {
            after_switch(app, driver);
            show_new_runtime(app, driver, agent_dir, before);
            app.notice(match missing_cwd {
                MissingCwd::Ask => format!("Resumed {location}"),
                MissingCwd::Continue => format!("Resumed session in {}", app.cwd.display()),
                MissingCwd::Fork => format!("Forked into a new session in {}", app.cwd.display()),
            });
        }
        Err(OpFailure::MissingCwd(missing)) => {
            ask_missing_cwd(app, &missing, "Resume cancelled", |choice| {
                Effect::ResumeWith {
                    location: location.to_string(),
                    missing_cwd: choice,
                }
            })
        }
        Err(OpFailure::Failed(e)) => app.notice(format!("Could not resume: {e}")),
    }
}

/// Pi's question for a session whose directory is gone: continue here, fork here, cancel.
fn ask_missing_cwd(
    app: &mut App,
    missing: &MissingSessionCwd,
    cancelled: &str,
    effect: impl Fn(MissingCwd) -> Effect,
) {
    let here = &missing.fallback_cwd;
    app.dialog = Some(Dialog::Confirm(Confirm {
        title: format!("Session cwd does not exist: {}", missing.session_cwd),
        message: String::new(),
        options: vec![
            (
                format!("Continue in {here} (asks again next time)"),
                Some(effect(MissingCwd::Continue)),
            ),
            (
                format!("Fork into {here} (new session ID, original kept)"),
                Some(effect(MissingCwd::Fork)),
            ),
            ("Cancel".into(), None),
        ],
        cancelled: cancelled.into(),
        selected: 0,
    }));
}

/// After opening a session from another directory the agent works there (Pi's runtime
/// follows the session's cwd): the footer, `@` completion and `!cmd` follow, and that
/// directory's settings, context files and resources are read as /reload reads them.
/// `before` is the driver's directory before the switch.
pub fn follow_cwd(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    before: Option<PathBuf>,
) {
    let Some(cwd) = driver.cwd().filter(|c| Some(c) != before.as_ref()) else {
        return;
    };
    app.set_cwd(cwd);
    match driver.follow_dir() {
        Ok(r) => {
            apply_reloaded_quietly(app, agent_dir, r);
            app.notice(format!("Working in {}", app.cwd.display()));
        }
        Err(e) => app.transcript.push(Item::Error(format!(
            "Could not load the settings of {}: {e:#}",
            app.cwd.display()
        ))),
    }
}

/// After `/new`, `/resume`, `/fork` or `/clone`: the new session's runtime read settings
/// and resources again for its directory (`modes::session_extensions`), as Pi builds one
/// for every session; the screen shows what it read (header, slash commands, keys, theme),
/// and says so when the session works in another directory than `before`.
fn show_new_runtime(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    before: Option<PathBuf>,
) {
    let moved = driver.cwd().filter(|c| Some(c) != before.as_ref());
    if let Some(cwd) = &moved {
        app.set_cwd(cwd.clone());
    }
    match driver.reread_for_screen() {
        Ok(r) => {
            apply_reloaded_quietly(app, agent_dir, r);
            if moved.is_some() {
                app.notice(format!("Working in {}", app.cwd.display()));
            }
        }
        Err(e) => app.transcript.push(Item::Error(format!(
            "Could not load the settings of {}: {e:#}",
            app.cwd.display()
        ))),
    }
}

/// `/reload`: settings, keybindings, themes, context files, skills and prompt templates.
pub fn reload(app: &mut App, driver: &mut dyn AgentDriver, agent_dir: &Path) {
    if app.working {
        app.notice("Wait for the current response to finish before reloading.");
        return;
    }
    if app.compacting {
        app.notice("Wait for compaction to finish before reloading.");
        return;
    }
    reload_now(app, driver, agent_dir);
}

/// A command's `ctx.reload()`: /reload, while the command that asked runs on (Pi's
/// `handleReloadCommand()`; the agent's streaming state decides, not the UI's).
pub fn reload_for_extension(app: &mut App, driver: &mut dyn AgentDriver, agent_dir: &Path) {
    if app.compacting {
        app.notice("Wait for compaction to finish before reloading.");
        return;
    }
    reload_now(app, driver, agent_dir);
}

fn reload_now(app: &mut App, driver: &mut dyn AgentDriver, agent_dir: &Path) {
    match driver.reload() {
        Ok(r) => {
            // models.json was read again: the picker lists what the registry has now.
            app.models = driver.models();
            if let Some(current) = app.model.as_ref().map(|m| m.key()) {
                if let Some(m) = app.models.iter().find(|m| m.key() == current) {
                    app.model = Some(m.clone());
                }
            }
            apply_reloaded(app, agent_dir, r);
            // The reloaded extensions' shortcuts and commands replace the old ones.
            super::ext_ui::refresh_registrations(
                app,
                &driver.extension_shortcuts(),
                driver.extension_commands(),
            );
        }
        Err(e) => app
            .transcript
            .push(Item::Error(format!("Reload failed: {e:#}"))),
    }
}

/// Puts freshly read settings and resources into the UI state, and says so.
pub fn apply_reloaded(app: &mut App, agent_dir: &Path, r: Reloaded) {
    let saved_trust = r.saved_project_trust;
    apply_reloaded_quietly(app, agent_dir, r);
    app.notice(if saved_trust {
        "Reloaded keybindings, extensions, skills, prompts, themes, and context files; saved project trust"
    } else {
        "Reloaded keybindings, extensions, skills, prompts, themes, and context files"
    });
}

/// [`apply_reloaded`] without the closing notice (the warnings still show).
fn apply_reloaded_quietly(app: &mut App, agent_dir: &Path, r: Reloaded) {
    let (keys, mut warnings) = Keymap::load(agent_dir);
    app.keys = keys;
    let (theme, warning) = Theme::load(&r.theme, agent_dir, &r.theme_paths);
    app.theme = theme;
    app.transcript.theme_changed();
    warnings.extend(warning);
    warnings.extend(r.warnings);
    app.settings.quiet_startup = r.quiet_startup;
    app.settings.double_escape = r.double_escape;
    app.settings.theme = r.theme;
    app.settings.theme_paths = r.theme_paths;
    super::theme::publish(agent_dir, &app.settings.theme_paths);
    app.settings.skip_branch_prompt = r.skip_branch_prompt;
    app.settings.external_editor = r.external_editor;
    app.footer.auto_compact = r.auto_compact;
    app.prefs = r.prefs;
    app.flags.show_thinking = r.show_thinking;
    app.scoped = r.scoped_models.iter().map(|(k, _)| k.clone()).collect();
    app.scoped_thinking = r
        .scoped_models
        .iter()
        .filter_map(|(k, l)| l.map(|l| (k.clone(), l)))
        .collect();
    app.commands = r.commands;
    app.refresh_header(&r.loaded);
    for w in warnings {
        app.notice(format!("Warning: {w}"));
    }
}

/// ctrl+r in /resume. The current session is named through the agent (it holds the write
/// lock); any other session gets a `session_info` entry through the store, under its lock.
pub fn rename(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    store: Option<&dyn SessionStore>,
    id: &str,
    name: &str,
) {
    let current = driver.session().and_then(|s| s.session_id());
    let result = if current.as_deref() == Some(id) {
        driver.set_session_name(name)
    } else {
        match store {
            Some(store) => rename_in_store(store, &SessionId::new(id), name),
            None => Err(anyhow!("no session store configured")),
        }
    };
    match result {
        Ok(()) => app.resume_renamed(id, name),
        Err(e) => app.resume_error(format!("Could not rename the session: {e:#}")),
    }
}

/// Appends a `session_info` entry naming a session that is not open here, as Pi's
/// `SessionManager.open(file).appendSessionInfo(name)`: the entry's parent is the file's
/// last entry. The writer is taken first, so a session another process is writing is
/// refused rather than forked at a stale leaf.
pub fn rename_in_store(store: &dyn SessionStore, id: &SessionId, name: &str) -> anyhow::Result<()> {
    let mut writer = store.open_writer(id).map_err(|e| anyhow!("{e}"))?;
    let data = store.read_session(id).map_err(|e| anyhow!("{e}"))?;
    let session =
        Session::from_bytes(data.to_jsonl(), Path::new(id.as_str())).map_err(|e| anyhow!("{e}"))?;
    let prepared = session.prepare(&NewEntry::session_info(name));
    writer
        .append(&[StoredEntry::from_line(prepared.line.into_bytes())])
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// ctrl+d in /resume, confirmed. The picker refuses the current session before this.
pub fn delete(app: &mut App, store: Option<&dyn SessionStore>, id: &str) {
    let Some(store) = store else {
        app.transcript
            .push(Item::Error("No session store configured".into()));
        return;
    };
    match store.delete_session(&SessionId::new(id)) {
        Ok(()) => app.resume_deleted(id),
        Err(e) => app.resume_error(format!("Could not delete the session: {e}")),
    }
}

/// Opens /resume: every session in the store, the current one marked so it cannot be
/// deleted.
pub fn open_resume(
    app: &mut App,
    driver: &dyn AgentDriver,
    store: Option<&dyn SessionStore>,
    now_ms: i64,
) {
    let Some(store) = store else {
        app.notice("No session store configured");
        return;
    };
    match crate::commands::sessions::list::list_all_for_resume(store) {
        Ok(list) => {
            app.open_resume(list.iter().map(SessionRow::from_summary).collect(), now_ms);
            if let Some(super::dialogs::Dialog::Resume(r)) = app.dialog.as_mut() {
                r.current = driver.session().and_then(|s| s.session_id());
            }
        }
        Err(e) => app.notice(format!("Could not list sessions: {e}")),
    }
}

/// Refreshes what depends on the session after a switch (/resume, /new, /fork, /import).
pub fn after_switch(app: &mut App, driver: &dyn AgentDriver) {
    app.load_messages(&driver.messages());
    let session = driver.session();
    app.footer.session_name = session.as_ref().and_then(|s| s.session_name());
    if let Some(s) = &session {
        app.footer.totals = session_totals(s);
    }
    app.footer.file_totals_pending = false;
    app.footer.since_open = super::driver::Usage::default();
    // A resumed or imported session brings its own model and thinking level.
    if let Some(model) = driver.current_model() {
        app.model = Some(model);
    }
    if let Some(level) = driver.thinking_level() {
        app.thinking = level;
    }
    app.steering.clear();
    app.follow_up.clear();
}

/// Usage summed over every assistant message in the session file, all branches included,
/// as Pi's footer counts it (what was spent, not what the current branch holds).
pub fn session_totals(session: &Session) -> super::driver::Usage {
    let mut t = super::driver::Usage::default();
    for idx in session.indices() {
        if !session.entry(idx).is_message_with_role("assistant") {
            continue;
        }
        let value = session.entry_value(idx);
        let Some(u) = value.pointer("/message/usage") else {
            continue;
        };
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        t.input += n("input");
        t.output += n("output");
        t.cache_read += n("cacheRead");
        t.cache_write += n("cacheWrite");
        t.cost += u
            .pointer("/cost/total")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
    }
    t
}

/// Cost per physical model (`provider/model`, in order of first answer) over every
/// assistant message in the file, for /session when a virtual model routes between models.
pub fn cost_by_model(session: &Session) -> Vec<(String, f64)> {
    let mut costs: Vec<(String, f64)> = Vec::new();
    for idx in session.indices() {
        if !session.entry(idx).is_message_with_role("assistant") {
            continue;
        }
        let value = session.entry_value(idx);
        let Some(message) = value.get("message") else {
            continue;
        };
        let text = |k: &str| message.get(k).and_then(Value::as_str).unwrap_or("");
        let key = format!("{}/{}", text("provider"), text("model"));
        let cost = message
            .pointer("/usage/cost/total")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        match costs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, sum)) => *sum += cost,
            None => costs.push((key, cost)),
        }
    }
    costs
}

/// /trust (Pi's trust selector): the saved decision for the project folder and this run's,
/// and the answers that are saved (Trust, Trust parent folder, Do not trust), the saved one
/// selected. Saving takes effect at the next start.
pub fn open_trust(app: &mut App, agent_dir: &Path, cwd: &Path, trusted_now: Option<bool>) {
    use pi_agent::config::{TrustChoice, TrustStore};
    let saved = match TrustStore::new(agent_dir).get_entry(cwd) {
        Ok(saved) => saved,
        Err(e) => {
            app.transcript.push(Item::Error(format!("{e}")));
            return;
        }
    };
    let choices: Vec<TrustChoice> = TrustChoice::options(cwd)
        .into_iter()
        .filter(|c| c.saved_path(cwd).is_some())
        .collect();
    let label = |trusted: bool| if trusted { "trusted" } else { "untrusted" };
    let own_path = TrustChoice::Trust.saved_path(cwd);
    let saved_text = match &saved {
        None => "none".to_string(),
        Some((path, trusted)) if Some(path) != own_path.as_ref() => {
            format!("{} (inherited from {})", label(*trusted), path.display())
        }
        Some((path, trusted)) => format!("{} ({})", label(*trusted), path.display()),
    };
    let selected = choices
        .iter()
        .position(|c| {
            saved
                .as_ref()
                .is_some_and(|(p, t)| c.trusted() == *t && c.saved_path(cwd).as_ref() == Some(p))
        })
        .unwrap_or(0);
    let mut message = format!("{}\n\nSaved decision: {saved_text}", cwd.display());
    if let Some(now) = trusted_now {
        message.push_str(&format!("\nCurrent session: {}", label(now)));
    }
    app.dialog = Some(Dialog::Confirm(Confirm {
        title: "Project trust".into(),
        message,
        options: choices
            .into_iter()
            .map(|c| (c.label(cwd), Some(Effect::SaveTrust(c))))
            .collect(),
        cancelled: String::new(),
        selected,
    }));
}

/// Saves a /trust answer to `trust.json`; this run keeps the trust it started with.
pub fn save_trust(
    app: &mut App,
    agent_dir: &Path,
    cwd: &Path,
    choice: pi_agent::config::TrustChoice,
) {
    match choice.record(cwd, &pi_agent::config::TrustStore::new(agent_dir)) {
        Ok(trusted) => app.notice(format!(
            "Saved trust decision: {}. Restart pi for this to take effect.",
            if trusted { "trusted" } else { "untrusted" }
        )),
        Err(e) => app.transcript.push(Item::Error(format!(
            "Could not save the trust decision: {e}"
        ))),
    }
}
