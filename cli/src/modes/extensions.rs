//! Starting the run's extensions (`-e`, discovery, the `extensions` setting) and stopping
//! them at the end. Loading failures end the run before any session is created, as Pi does
//! (its `Failed to load extension` diagnostics and the `-ne` hint, exit code 1).

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail};
use pi_agent::extensions::{extension_paths, DiscoverOptions, Extensions, StartOptions, UiMode};

use super::{write_line, Env};
use crate::RunArgs;

/// The extensions this process started, stopped by [`shutdown`].
static STARTED: std::sync::Mutex<Vec<Arc<Extensions>>> = std::sync::Mutex::new(Vec::new());

/// Loads the configured extensions; `None` when there are none (no Node process starts).
pub fn start(
    args: &RunArgs,
    env: &Env,
    builtin: &[Arc<dyn pi_agent::tools::Tool>],
) -> anyhow::Result<Option<Arc<Extensions>>> {
    let cwd = Path::new(&env.home.cwd);
    let config = &env.settings.config;
    // `-e builtin:<name>` turns a built-in on (llama.cpp: `modes::llama_cpp`); it is no file.
    let cli_paths: Vec<String> = args
        .extensions
        .iter()
        .filter(|e| !e.starts_with("builtin:"))
        .cloned()
        .collect();
    let mut paths = extension_paths(&DiscoverOptions {
        agent_dir: &env.home.agent_dir,
        cwd,
        project_trusted: env.settings.trusted,
        no_extensions: args.no_extensions,
        cli_paths: &cli_paths,
        global_setting: config.global().get("extensions"),
        project_setting: config.project().get("extensions"),
    });
    // Installed packages' extensions load after the discovered ones (Pi's lowest precedence).
    if !args.no_extensions {
        for p in &env.resources.package_extensions {
            if !paths.contains(p) {
                paths.push(p.clone());
            }
        }
    }
    if paths.is_empty() {
        if let Some(flag) = args.extension_flags.first() {
            bail!("unknown option {flag} (no extension is loaded to register it)");
        }
        return Ok(None);
    }
    let mode = match args.mode.as_deref() {
        Some("rpc") => UiMode::Rpc,
        Some("json") => UiMode::Json,
        _ if args.print => UiMode::Print,
        Some(_) => UiMode::Print,
        None => UiMode::Tui,
    };
    let records: Option<pi_agent::extensions::RecordSink> = match mode {
        UiMode::Rpc => Some(Arc::new(|v: serde_json::Value| write_line(&v))),
        // Text on stderr would land on the TUI's screen: errors become notices instead.
        UiMode::Tui => Some(Arc::new(tui_relay::send)),
        _ => None,
    };
    let options = StartOptions {
        paths,
        cwd: cwd.to_path_buf(),
        mode,
        records,
        active_tools: builtin.to_vec(),
        flags: args.extension_flags.clone(),
    };
    let handle = tokio::runtime::Handle::current();
    // build_host runs inside the runtime (print, rpc) or beside it (TUI): the sidecar's
    // reader task must live on the runtime that outlives this call.
    let ext = tokio::task::block_in_place(|| handle.block_on(Extensions::start(options)))
        .map_err(|e| anyhow!(e))?;
    STARTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(ext.clone());
    if !ext.errors.is_empty() {
        for e in &ext.errors {
            eprintln!(
                "Error: Failed to load extension \"{}\": {}",
                e.path, e.error
            );
        }
        bail!("Hint: Start without extensions using \"pi -ne\".");
    }
    if let Some(flag) = ext.unknown_flags.first() {
        bail!("unknown option {flag} (no loaded extension registers it)");
    }
    Ok(Some(ext))
}

/// Sends `session_shutdown` and stops every sidecar this process started.
pub async fn shutdown() {
    let started = std::mem::take(&mut *STARTED.lock().unwrap_or_else(|e| e.into_inner()));
    for ext in started {
        ext.shutdown().await;
    }
}

/// The extensions of this run (for RPC's `extension_ui_response`).
pub fn current() -> Option<Arc<Extensions>> {
    STARTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .last()
        .cloned()
}

/// Extension records in the TUI (`extension_error`, `extension_ui_request`): held until
/// the screen is up, then handed to it.
pub mod tui_relay {
    use serde_json::Value;
    use std::sync::Mutex;

    type Deliver = Box<dyn Fn(Value) + Send>;

    enum Relay {
        Waiting(Vec<Value>),
        Attached(Deliver),
    }

    static RELAY: Mutex<Relay> = Mutex::new(Relay::Waiting(Vec::new()));

    /// A record from the extensions (any thread).
    pub fn send(record: Value) {
        match &mut *RELAY.lock().unwrap_or_else(|e| e.into_inner()) {
            Relay::Waiting(held) => held.push(record),
            Relay::Attached(deliver) => deliver(record),
        }
    }

    /// Hands what was held and everything after to `deliver`.
    pub fn attach(deliver: impl Fn(Value) + Send + 'static) {
        let mut relay = RELAY.lock().unwrap_or_else(|e| e.into_inner());
        if let Relay::Waiting(held) = &mut *relay {
            for record in held.drain(..) {
                deliver(record);
            }
        }
        *relay = Relay::Attached(Box::new(deliver));
    }

    #[cfg(test)]
    mod tests {
        use serde_json::json;

        #[test]
        fn records_are_held_until_the_screen_attaches_then_delivered_in_order() {
            super::send(json!({"type": "extension_error", "error": "boom"}));
            super::send(json!({"type": "extension_ui_request", "method": "notify"}));
            let (tx, rx) = std::sync::mpsc::channel();
            super::attach(move |t| {
                let _ = tx.send(t);
            });
            super::send(json!({"type": "extension_error", "error": "later"}));
            let seen: Vec<String> = rx
                .try_iter()
                .map(|r| r["error"].as_str().unwrap_or("ui").to_string())
                .collect();
            assert_eq!(seen, ["boom", "ui", "later"]);
        }
    }
}
