//! A fresh extension runtime for every session, as Pi builds one each time `/new`,
//! `/resume`, `/fork` or `/clone` (or a command's `ctx.newSession`, `ctx.fork`,
//! `ctx.switchSession`) replaces the session: once the old session's extensions heard
//! `session_shutdown` and the new session is current, the extension files are found again
//! for the directory the session works in (its project's only when trusted) and loaded in a
//! new process, so module state starts afresh; their providers join the catalog; then
//! `session_start` (with the replacement's `reason` and `previousSessionFile`) and
//! `resources_discover` follow, and what they point at joins the resources.
//!
//! Settings and resources other than the extensions are not read again here: the
//! interactive mode reads a new directory's when a session from elsewhere opens
//! (`tui::session_ops::follow_cwd`).

use std::path::Path;
use std::sync::{Arc, Weak};

use pi_agent::host::{ExtensionLoader, Host, SessionStart};

use super::{api_key_resolver_quiet, base_catalog, catalog_with_extensions, Env, Settings};
use crate::RunArgs;

/// Lets `host` load the extensions afresh for each session it enters. `start_cwd` is the
/// directory the run started in, whose trust `args` carries.
pub fn install(host: &Arc<Host>, args: &RunArgs, start_cwd: &str) {
    let weak = Arc::downgrade(host);
    let args = args.clone();
    let start_cwd = start_cwd.to_string();
    let loader: ExtensionLoader = Arc::new(move |start: SessionStart| {
        let weak = weak.clone();
        let args = args.clone();
        let start_cwd = start_cwd.clone();
        Box::pin(async move {
            let Some(host) = weak.upgrade() else { return };
            let loading = {
                let (weak, args) = (weak.clone(), args.clone());
                tokio::task::spawn_blocking(move || load(&weak, &args, &start_cwd))
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

/// Finds and starts the extensions for the directory `host` works in now, replacing the
/// running ones, and puts their providers into the catalog. Returns what went wrong on the
/// way (the session goes on without what failed).
fn load(host: &Weak<Host>, args: &RunArgs, start_cwd: &str) -> Vec<String> {
    let Some(host) = host.upgrade() else {
        return Vec::new();
    };
    let home = host.setup().home;
    let cwd = home.cwd.clone();
    let mut args = args.clone();
    if cwd != start_cwd {
        // The start-up trust answer is for the start-up directory; elsewhere trust.json and
        // `defaultProjectTrust` decide.
        args.project_trusted = None;
    }
    let mut warnings = Vec::new();
    let settings = match Settings::load_quiet(&home.agent_dir, Path::new(&cwd), &args) {
        Ok(settings) => settings,
        Err(e) => {
            warnings.push(format!("{e:#}"));
            return warnings;
        }
    };
    let resources = settings.resources(&home.agent_dir, Path::new(&cwd), &args);
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
