//! A fresh extension runtime for every session, as Pi builds one each time `/new`,
//! `/resume`, `/fork` or `/clone` (or a command's `ctx.newSession`, `ctx.fork`,
//! `ctx.switchSession`) replaces the session: once the old session's extensions heard
//! `session_shutdown` and the new session is current, the extension files are found again
//! for the directory the session works in (its project's only when trusted) and loaded in a
//! new process, so module state starts afresh; their providers join the catalog; then
//! `session_start` (with the replacement's `reason` and `previousSessionFile`) and
//! `resources_discover` follow, and what they point at joins the resources.
//!
//! Pi builds the whole runtime anew for the session, not only the extensions: settings,
//! context files, skills, prompt templates, themes and mcp.json are read again for its
//! directory (so what changed on disk since start-up applies from the new session on), and
//! the tools the settings select follow. The discovered resources of the new extensions
//! join after that. The interactive mode then shows what was read
//! (`tui::session_ops::after_replacement`).

use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use pi_agent::host::{ExtensionLoader, Host, SessionStart};

use super::{
    api_key_resolver_quiet, base_catalog, catalog_with_extensions, current_mcp, prompt_builder_for,
    reload_mcp, tool_selection, Env, Settings,
};
use crate::RunArgs;

/// Lets `host` load the extensions afresh for each session it enters. `start_cwd` is the
/// directory the run started in, whose trust `args` carries; `settings` are the ones the
/// run started with.
pub fn install(host: &Arc<Host>, args: &RunArgs, start_cwd: &str, settings: &Settings) {
    let weak = Arc::downgrade(host);
    let args = args.clone();
    let start_cwd = start_cwd.to_string();
    // The settings the last session applied: tools they newly select become active.
    let applied = Arc::new(Mutex::new(settings.clone()));
    // A replacement while no extensions run (RPC answers it on its loop) reads the
    // settings and resources alone, before the next command.
    {
        let (weak, args, start_cwd, applied) = (
            Arc::downgrade(host),
            args.clone(),
            start_cwd.to_string(),
            applied.clone(),
        );
        host.set_session_refresh(Arc::new(move || {
            let Some(host) = weak.upgrade() else { return };
            let mut warnings = Vec::new();
            apply_settings(&host, &args, &start_cwd, &applied, &mut warnings);
            for warning in warnings {
                super::extensions::warn(&args, &warning);
            }
        }));
    }
    let loader: ExtensionLoader = Arc::new(move |start: SessionStart| {
        let weak = weak.clone();
        let args = args.clone();
        let start_cwd = start_cwd.clone();
        let applied = applied.clone();
        Box::pin(async move {
            let Some(host) = weak.upgrade() else { return };
            let loading = {
                let (weak, args) = (weak.clone(), args.clone());
                tokio::task::spawn_blocking(move || load(&weak, &args, &start_cwd, &applied))
            };
            let warnings = loading.await.unwrap_or_else(|e| vec![e.to_string()]);
            let found = host.start_extensions(&start).await;
            super::reload::add_discovered(&host, &found);
            for warning in warnings {
                super::extensions::warn(&args, &warning);
            }
            super::extensions::announce_loaded(&args);
        })
    });
    host.set_extension_loader(loader);
}

/// Reads settings and resources again for the directory `host` works in now and applies
/// them, finds and starts the extensions there, replacing the running ones, and puts their
/// providers into the catalog. Returns what went wrong on the way (the session goes on
/// without what failed).
fn load(
    host: &Weak<Host>,
    args: &RunArgs,
    start_cwd: &str,
    applied: &Mutex<Settings>,
) -> Vec<String> {
    let Some(host) = host.upgrade() else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    let Some((args, settings, resources)) =
        apply_settings(&host, args, start_cwd, applied, &mut warnings)
    else {
        return warnings;
    };
    let home = host.setup().home;
    let registry = match base_catalog(&args, &settings, &home.agent_dir, &mut warnings) {
        Ok(registry) => Some(registry),
        Err(e) => {
            warnings.push(format!("models.json error: {e}"));
            None
        }
    };
    let env = Env {
        resources,
        settings,
        registry: registry.clone().unwrap_or_else(|| host.agent().registry()),
        home,
    };
    let handle = tokio::runtime::Handle::current();
    let had_extensions = host.extensions().is_some();
    warnings.extend(super::extensions::reload(&args, &env, &host, &handle));
    // Without extensions before or after, the catalog has nothing to swap: it stays as it
    // is (a live catalog fetched since start-up included).
    let involved = had_extensions || host.extensions().is_some();
    if registry.is_some() && involved {
        // The new extensions' providers and virtual models replace the old ones'.
        let resolver = api_key_resolver_quiet(&env, &mut warnings);
        let catalog = catalog_with_extensions(&env, host.extensions().as_deref());
        host.agent().set_registry(catalog, Some(resolver));
    }
    warnings
}

/// Reads the settings and resources of the directory `host` works in now and applies them:
/// the tools the settings newly select, context files, skills and prompt templates (the
/// system prompt follows from the next request), mcp.json. Returns the arguments for that
/// directory with what was read; `None` when the settings cannot be read.
fn apply_settings(
    host: &Host,
    args: &RunArgs,
    start_cwd: &str,
    applied: &Mutex<Settings>,
    warnings: &mut Vec<String>,
) -> Option<(RunArgs, Settings, pi_agent::config::Resources)> {
    let home = host.setup().home;
    let cwd = home.cwd.clone();
    let mut args = args.clone();
    if cwd != start_cwd {
        // The start-up trust answer is for the start-up directory. Elsewhere, as Pi's new
        // runtime does, the user-level extensions' `project_trust` handlers decide first
        // (with the running screen's dialogs in the interactive mode, without elsewhere),
        // then trust.json and `defaultProjectTrust`, whose `ask` asks in the screen.
        args.project_trusted = None;
        if let Err(e) = super::extensions::decide_trust(&args, &cwd, false) {
            warnings.push(format!("{e:#}"));
        }
        if super::extensions::decided_trust(Path::new(&cwd)).is_none() {
            ask_on_screen(&home.agent_dir, Path::new(&cwd), &args, warnings);
        }
        args.project_trusted = super::extensions::decided_trust(Path::new(&cwd));
    }
    let settings = match Settings::load_quiet(&home.agent_dir, Path::new(&cwd), &args) {
        Ok(settings) => settings,
        Err(e) => {
            warnings.push(format!("{e:#}"));
            return None;
        }
    };
    let resources = settings.resources(&home.agent_dir, Path::new(&cwd), &args);
    {
        let mut previous = applied.lock().unwrap_or_else(|e| e.into_inner());
        host.agent().reselect_tools(
            &tool_selection(&args, &previous),
            &tool_selection(&args, &settings),
        );
        *previous = settings.clone();
    }
    host.set_resources(resources.clone(), settings.config.enable_skill_commands());
    warnings.extend(reload_mcp(settings.trusted));
    // The next prompt patches the sections that changed into the session.
    host.agent()
        .set_prompt_builder(prompt_builder_for(cwd, resources.clone(), current_mcp()));
    Some((args, settings, resources))
}

/// Pi's trust question for a session replacement entering `cwd` while the interactive
/// screen runs (the start-up question's wording and answers, the session-only ones
/// included, asked as a dialog of that screen): when trust.json and `defaultProjectTrust`
/// leave it open. The answer is saved as at start-up and kept for this run, escape
/// included (untrusted). Without a screen (print, json, rpc) nothing is asked: the project
/// stays untrusted, as in Pi.
fn ask_on_screen(agent_dir: &Path, cwd: &Path, args: &crate::RunArgs, warnings: &mut Vec<String>) {
    let Some(dialog) = super::extensions::tui_relay::screen_dialog() else {
        return;
    };
    let asked = crate::tui::startup::resolve_startup_trust(agent_dir, cwd, args, |prompt| {
        let mut title = prompt.title.clone();
        if !prompt.message.is_empty() {
            title = format!("{title}\n{}", prompt.message);
        }
        let labels: Vec<String> = prompt.options.iter().map(|(l, _)| l.clone()).collect();
        let chosen = dialog(pi_agent::extensions::trust::TrustQuestion {
            title,
            options: labels.clone(),
            input: false,
            placeholder: None,
            notify: None,
        });
        Ok(chosen.and_then(|c| labels.iter().position(|l| *l == c)))
    });
    match asked {
        Ok(Some(trusted)) => super::extensions::remember_decided(cwd, trusted),
        Ok(None) => {}
        Err(e) => warnings.push(format!("{e:#}")),
    }
}
