//! `ctx.reload()` of an extension command: Pi's `/reload`. The extensions hear
//! `session_shutdown` (the host's [`Host::reload_begin`]); settings, context files, skills,
//! prompt templates, models.json and mcp.json are read again and applied to the running
//! host; the extensions are loaded again in a new process ([`super::extensions::reload`]);
//! then `session_start` and `resources_discover` follow ([`Host::reload_end`]).
//!
//! In the interactive mode a command's reload is the screen's own `/reload`, which also
//! refreshes keybindings, themes and the model picker (`tui_relay::reload_on_screen`).

use std::sync::{Arc, Mutex, Weak};

use pi_agent::extensions::{DiscoveredResources, Extensions, ReloadControl};
use pi_agent::host::Host;

use super::settings::Settings;
use super::{
    api_key_resolver_quiet, catalog_with_extensions, current_mcp, prompt_builder_for, reload_mcp,
    tool_selection, Env,
};
use crate::RunArgs;

/// Lets `extensions`' commands reload `host` (held weakly: the host owns the extensions).
pub fn install(extensions: &Extensions, host: &Arc<Host>, args: &RunArgs, settings: &Settings) {
    let weak = Arc::downgrade(host);
    let args = args.clone();
    // The settings the last reload (or the start) applied: tools newly selected by the
    // reloaded settings become active, as `/reload` does.
    let applied = Arc::new(Mutex::new(settings.clone()));
    let control: ReloadControl = Arc::new(move || {
        let weak = weak.clone();
        let args = args.clone();
        let applied = applied.clone();
        Box::pin(async move {
            // In the TUI the screen reloads, as its /reload (keybindings, themes, ...).
            if super::extensions::tui_relay::reload_on_screen().await {
                return Ok(());
            }
            let host = weak.upgrade().ok_or("the session has ended")?;
            host.reload_begin().await?;
            let announce = args.clone();
            let outcome = tokio::task::spawn_blocking(move || reload(&weak, &args, &applied))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r);
            let found = host.reload_end().await;
            add_discovered(&host, &found);
            super::extensions::announce_loaded(&announce);
            outcome
        })
    });
    extensions.set_reload_control(control);
}

/// Adds the skills and prompt templates extensions' `resources_discover` handlers point at
/// to the host's resources and the system prompt, and their theme paths to the resources.
pub(crate) fn add_discovered(host: &Host, found: &DiscoveredResources) {
    let setup = host.setup();
    let mut resources = setup.resources;
    found.record_provenance(&mut resources.provenance);
    let themes = resources.add_discovered_themes(&found.theme_paths);
    let prompt = resources.add_discovered(&found.skill_paths, &found.prompt_paths);
    if prompt {
        host.agent().set_prompt_builder(prompt_builder_for(
            setup.home.cwd.clone(),
            resources.clone(),
            current_mcp(),
        ));
    }
    if prompt || themes {
        host.set_resources(resources, setup.skill_commands);
    }
}

/// Reads everything again for the directory the host works in now and applies it.
fn reload(host: &Weak<Host>, args: &RunArgs, applied: &Mutex<Settings>) -> Result<(), String> {
    let host = host.upgrade().ok_or("the session has ended")?;
    let env = Env::at(args, host.cwd()).map_err(|e| format!("{e:#}"))?;
    let agent = host.agent();
    let mut previous = applied.lock().unwrap_or_else(|e| e.into_inner());
    agent.reselect_tools(
        &tool_selection(args, &previous),
        &tool_selection(args, &env.settings),
    );
    *previous = env.settings.clone();
    drop(previous);
    host.set_resources(
        env.resources.clone(),
        env.settings.config.enable_skill_commands(),
    );
    let mut warnings = Vec::new();
    // The extensions' providers and virtual models join the catalog below.
    let handle = tokio::runtime::Handle::current();
    warnings.extend(super::extensions::reload(args, &env, &host, &handle));
    let registry = catalog_with_extensions(&env, host.extensions().as_deref());
    let mut with_registry = Env { registry, ..env };
    let resolver = api_key_resolver_quiet(&with_registry, &mut warnings);
    agent.set_registry(std::mem::take(&mut with_registry.registry), Some(resolver));
    warnings.extend(reload_mcp(with_registry.settings.trusted));
    // The next prompt patches the sections that changed into the session; later tool
    // changes rebuild it from the reloaded resources too.
    agent.set_prompt_builder(prompt_builder_for(
        with_registry.home.cwd.clone(),
        with_registry.resources.clone(),
        current_mcp(),
    ));
    for warning in warnings {
        eprintln!("Warning: {warning}");
    }
    Ok(())
}
