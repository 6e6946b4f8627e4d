//! Starting the run's extensions (`-e`, discovery, the `extensions` setting) and stopping
//! them at the end. Loading failures end the run before any session is created, as Pi does
//! (its `Failed to load extension` diagnostics and the `-ne` hint, exit code 1).

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail};
use pi_agent::extensions::{
    extension_paths, DiscoverOptions, Extensions, Preloaded, StartOptions, UiMode,
};

use pi_agent::host::Host;

use super::{write_line, Env};
use crate::RunArgs;

/// The extensions this process started, stopped by [`shutdown`].
static STARTED: std::sync::Mutex<Vec<Arc<Extensions>>> = std::sync::Mutex::new(Vec::new());

/// Extensions loaded to decide a project's trust ([`decide_trust`]); [`start`] loads the
/// rest into the same process.
static PRELOADED: std::sync::Mutex<Option<Preloaded>> = std::sync::Mutex::new(None);

/// Trust decisions `project_trust` handlers (or the user, asked in the running screen) made
/// in this process, by directory (also for a later reload of the same directory).
static DECIDED: std::sync::Mutex<Vec<(std::path::PathBuf, bool)>> =
    std::sync::Mutex::new(Vec::new());

/// The trust a `project_trust` handler decided for `cwd` in this process.
pub fn decided_trust(cwd: &Path) -> Option<bool> {
    DECIDED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(dir, _)| dir == cwd)
        .map(|(_, trusted)| *trusted)
}

/// Pi's `project_trust`: when the project in `cwd` has files that need trust and no
/// `--approve`/`--no-approve` decides, the user/global and `-e` extensions are loaded (before
/// anything project-local) and asked; the first "yes" or "no" decides (and with `remember`
/// is saved in trust.json), so [`decided_trust`] has it for the settings. Otherwise the
/// built-in flow (trust.json, `defaultProjectTrust`, the prompt) decides as before.
/// `start_up`: the run's start, whose interactive mode gives the handlers start-up dialogs;
/// a session replacement entering another directory gives them the running screen's
/// dialogs in the interactive mode ([`tui_relay::screen_dialog`]) and none elsewhere
/// (`ctx.hasUI` false), and its new extensions carry on in the process they loaded in
/// ([`reload`]).
pub fn decide_trust(args: &RunArgs, cwd: &str, start_up: bool) -> anyhow::Result<()> {
    let dir = Path::new(cwd);
    if args.approve
        || args.no_approve
        || args.project_trusted.is_some()
        || decided_trust(dir).is_some()
        || !pi_agent::config::has_trust_requiring_resources(
            dir,
            pi_agent::config::home().as_deref(),
        )
    {
        return Ok(());
    }
    let agent_dir = pi_storage::StoreOptions::from_env(args.session_dir.as_deref(), None).agent_dir;
    let global = pi_agent::config::Settings::load_global(&agent_dir);
    let found = extension_paths(&DiscoverOptions {
        agent_dir: &agent_dir,
        cwd: dir,
        project_trusted: false,
        no_extensions: args.no_extensions,
        cli_paths: &cli_paths(args),
        cli_packages: &[],
        global_setting: global.global().get("extensions"),
        project_setting: None,
    });
    let mut provenance = pi_agent::config::Provenance::new(&agent_dir, dir);
    for (path, info) in &found {
        provenance.add(path, info.clone());
    }
    let paths: Vec<std::path::PathBuf> = found.into_iter().map(|(path, _)| path).collect();
    if paths.is_empty() {
        return Ok(());
    }
    let (mode, records) = front_end(args);
    // Pi's interactive start gives the handlers start-up dialogs (`ctx.hasUI` true), shown
    // before the session's screen; a later session replacement the running screen's
    // dialogs; the other modes (and `--list-models`) none.
    let dialog: Option<pi_agent::extensions::trust::TrustDialog> =
        match (start_up, mode == UiMode::Tui && args.list_models.is_none()) {
            (true, true) => {
                let agent_dir = agent_dir.clone();
                Some(Arc::new(move |question| {
                    crate::tui::startup::ask_trust_question(&agent_dir, question)
                }))
            }
            (false, true) => tui_relay::screen_dialog(),
            (_, false) => None,
        };
    let options = StartOptions {
        paths,
        provenance,
        cwd: dir.to_path_buf(),
        mode,
        records,
        active_tools: Vec::new(),
        flags: args.extension_flags.clone(),
    };
    let handle = tokio::runtime::Handle::current();
    let (preloaded, answer) = tokio::task::block_in_place(|| {
        handle.block_on(async {
            let preloaded = Extensions::preload(options).await?;
            let answer = preloaded.project_trust(dir, dialog).await;
            Ok::<_, String>((preloaded, answer))
        })
    })
    .map_err(|e| anyhow!(e))?;
    *PRELOADED.lock().unwrap_or_else(|e| e.into_inner()) = Some(preloaded);
    let Some(answer) = answer else {
        return Ok(());
    };
    if answer.remember {
        pi_agent::config::TrustStore::new(&agent_dir)
            .set(dir, Some(answer.trusted))
            .map_err(|e| anyhow!("cannot save the trust decision: {e}"))?;
    }
    remember_decided(dir, answer.trusted);
    Ok(())
}

/// Keeps `trusted` as this process's decision for `cwd` ([`decided_trust`]): Pi asks once
/// per directory and run.
pub fn remember_decided(cwd: &Path, trusted: bool) {
    DECIDED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((cwd.to_path_buf(), trusted));
}

/// `-e` paths (`-e builtin:<name>` turns a built-in on: `modes::llama_cpp`; it is no file;
/// package sources are [`package_sources`]).
fn cli_paths(args: &RunArgs) -> Vec<String> {
    args.extensions
        .iter()
        .filter(|e| !e.starts_with("builtin:"))
        .cloned()
        .collect()
}

/// `-e` arguments that name packages to try for this run (`npm:…`, `git:…`, git URLs), and
/// `-e` directories as absolute paths (Pi loads a directory's skills, prompt templates and
/// themes as a package's).
pub fn package_sources(args: &RunArgs, cwd: &Path) -> Vec<String> {
    args.extensions
        .iter()
        .filter_map(|e| {
            if is_package_source(e) {
                return Some(e.clone());
            }
            let path = pi_agent::config::resolve_path(e, cwd, pi_agent::config::home().as_deref());
            (!e.starts_with("builtin:") && path.is_dir()).then(|| path.display().to_string())
        })
        .collect()
}

fn is_package_source(argument: &str) -> bool {
    !argument.starts_with("builtin:")
        && !matches!(
            pi_agent::packages::Source::parse(argument),
            pi_agent::packages::Source::Local(_)
        )
}

/// The front end the extensions run under, and where their records go.
fn front_end(args: &RunArgs) -> (UiMode, Option<pi_agent::extensions::RecordSink>) {
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
    (mode, records)
}

/// The extension files of a run in `env`: discovery (the project's only when trusted), `-e`
/// paths, the `extensions` settings, then installed packages' extensions.
fn configured_paths(
    args: &RunArgs,
    env: &Env,
) -> (Vec<std::path::PathBuf>, pi_agent::config::Provenance) {
    let cwd = Path::new(&env.home.cwd);
    let config = &env.settings.config;
    let cli_paths = cli_paths(args);
    let mut found = extension_paths(&DiscoverOptions {
        agent_dir: &env.home.agent_dir,
        cwd,
        project_trusted: env.settings.trusted,
        no_extensions: args.no_extensions,
        cli_paths: &cli_paths,
        cli_packages: &env.resources.temporary_extensions,
        global_setting: config.global().get("extensions"),
        project_setting: config.project().get("extensions"),
    });
    // Installed packages' extensions load after the discovered ones (Pi's lowest precedence).
    if !args.no_extensions {
        for (path, info) in &env.resources.package_extensions {
            if !found.iter().any(|(p, _)| p == path) {
                found.push((path.clone(), info.clone()));
            }
        }
    }
    let mut provenance = pi_agent::config::Provenance::new(&env.home.agent_dir, cwd);
    for (path, info) in &found {
        provenance.add(path, info.clone());
    }
    (
        found.into_iter().map(|(path, _)| path).collect(),
        provenance,
    )
}

/// Loads the configured extensions; `None` when there are none (no Node process starts).
pub fn start(
    args: &RunArgs,
    env: &Env,
    builtin: &[Arc<dyn pi_agent::tools::Tool>],
) -> anyhow::Result<Option<Arc<Extensions>>> {
    let cwd = Path::new(&env.home.cwd);
    let (mut paths, provenance) = configured_paths(args, env);
    // Extensions loaded for the trust decision carry on in the same process.
    let preloaded = PRELOADED.lock().unwrap_or_else(|e| e.into_inner()).take();
    if paths.is_empty() && preloaded.is_none() {
        if let Some(flag) = args.extension_flags.first() {
            bail!("unknown option {flag} (no extension is loaded to register it)");
        }
        return Ok(None);
    }
    if let Some(pre) = &preloaded {
        // Kept first, in the order they loaded (a reordering settings file cannot move them).
        let mut all = pre.paths().to_vec();
        all.extend(paths.into_iter().filter(|p| !pre.paths().contains(p)));
        paths = all;
    }
    let (mode, records) = front_end(args);
    let options = StartOptions {
        paths,
        provenance,
        cwd: cwd.to_path_buf(),
        mode,
        records,
        active_tools: builtin.to_vec(),
        flags: args.extension_flags.clone(),
    };
    let handle = tokio::runtime::Handle::current();
    // build_host runs inside the runtime (print, rpc) or beside it (TUI): the sidecar's
    // reader task must live on the runtime that outlives this call.
    let ext = tokio::task::block_in_place(|| {
        handle.block_on(Extensions::start_after(preloaded, options))
    })
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
    // Pi's refresh after the extensions registered their providers (without network, as at
    // every start-up and reload): `refreshModels` lists and `oauth.modifyModels` join the
    // catalog before a model is chosen.
    ext.set_base_catalog(env.registry.clone());
    tokio::task::block_in_place(|| {
        handle.block_on(ext.refresh_models(&env.home.agent_dir, false, None))
    });
    Ok(Some(ext))
}

/// Pi's reload of the extensions, between `session_shutdown` and `session_start` (see
/// [`Host::reload_begin`]): the extension files are found again as at start-up, from the
/// settings `env` has just read (the project's trust as decided for the run), and loaded in
/// a new process, so edited files are read again and module state starts afresh; they
/// replace the host's (tools, commands, hooks). A file that fails to load is reported as an
/// extension error and the session goes on without it. Returns a warning when no extension
/// can run at all (no Node.js).
pub fn reload(
    args: &RunArgs,
    env: &Env,
    host: &Arc<Host>,
    handle: &tokio::runtime::Handle,
) -> Option<String> {
    let (paths, provenance) = configured_paths(args, env);
    if paths.is_empty() && host.extensions().is_none() {
        return None;
    }
    let (mode, records) = front_end(args);
    if mode == UiMode::Tui {
        // What the running extensions put on the screen (statuses, widgets, header, footer)
        // goes with them, before the new ones' `session_start` handlers draw theirs (Pi's
        // `resetExtensionUI`); through the relay, so it comes in order with their records.
        tui_relay::send(serde_json::json!({ "type": EXTENSIONS_REPLACED }));
    }
    let mut warning = None;
    // Extensions loaded to decide the trust of the directory a replacement entered carry
    // on (none at a `/reload`: the start-up's were taken by [`start`]).
    let preloaded = PRELOADED.lock().unwrap_or_else(|e| e.into_inner()).take();
    let mut paths = paths;
    if let Some(pre) = &preloaded {
        let mut all = pre.paths().to_vec();
        all.extend(paths.into_iter().filter(|p| !pre.paths().contains(p)));
        paths = all;
    }
    let next = if paths.is_empty() {
        None
    } else {
        let options = StartOptions {
            paths,
            provenance,
            cwd: std::path::PathBuf::from(&env.home.cwd),
            mode,
            records,
            active_tools: host.agent().tools(),
            flags: args.extension_flags.clone(),
        };
        match tokio::task::block_in_place(|| {
            handle.block_on(Extensions::start_after(preloaded, options))
        }) {
            Ok(ext) => {
                ext.report_load_errors();
                Some(ext)
            }
            Err(e) => {
                warning = Some(e);
                None
            }
        }
    };
    if let Some(ext) = &next {
        // As at start-up: the new providers' `refreshModels` lists, without network.
        ext.set_base_catalog(env.registry.clone());
        tokio::task::block_in_place(|| {
            handle.block_on(ext.refresh_models(&env.home.agent_dir, false, None))
        });
        super::reload::install(ext, host, args, &env.settings);
    }
    {
        let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = host.extensions() {
            started.retain(|e| !Arc::ptr_eq(e, &old));
        }
        started.extend(next.clone());
    }
    tokio::task::block_in_place(|| handle.block_on(host.replace_extensions(next)));
    warning
}

/// The record that tells the interactive mode the running extensions are being replaced.
pub const EXTENSIONS_REPLACED: &str = "extensions_replaced";

/// The record that tells the interactive mode the extensions loaded in their place are
/// ready (their commands, shortcuts and providers can be read).
pub const EXTENSIONS_LOADED: &str = "extensions_loaded";

/// Tells the interactive mode the extensions were loaded afresh (after a session
/// replacement or a command's `ctx.reload()`; its own `/reload` reads them itself).
pub fn announce_loaded(args: &RunArgs) {
    if front_end(args).0 == UiMode::Tui {
        tui_relay::send(serde_json::json!({ "type": EXTENSIONS_LOADED }));
    }
}

/// A problem loading extensions after start-up: on stderr, or in the interactive mode (whose
/// screen stderr would garble) as a notice.
pub fn warn(args: &RunArgs, warning: &str) {
    match front_end(args).0 {
        UiMode::Tui => tui_relay::send(serde_json::json!({
            "type": "extension_error",
            "extensionPath": "<extensions>",
            "error": warning,
        })),
        _ => eprintln!("Warning: {warning}"),
    }
}

/// Pi's catalog refresh (the interactive mode's after start-up, with network, and after a
/// login, with network unless `PI_OFFLINE`): the extensions' `refreshModels` and
/// `oauth.modifyModels` run again, on their runtime, from any thread; `true` when some
/// provider's models changed.
pub fn refresh_models_blocking(
    agent_dir: &Path,
    only: Option<&[String]>,
    allow_network: bool,
) -> pi_agent::extensions::ModelRefresh {
    let Some(ext) = current() else {
        return Default::default();
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Default::default();
    };
    runtime.block_on(ext.refresh_models(agent_dir, allow_network, only))
}

/// Sends `session_shutdown` and stops every sidecar this process started.
pub async fn shutdown() {
    let preloaded = PRELOADED.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(pre) = preloaded {
        pre.shutdown().await;
    }
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

    type Reload = Box<dyn Fn(tokio::sync::mpsc::UnboundedSender<()>) + Send>;

    static RELOAD: Mutex<Option<Reload>> = Mutex::new(None);

    /// From now on a command's `ctx.reload()` asks the screen (`ask`, any thread), which
    /// reloads as its /reload does and then answers on the channel it was given.
    pub fn attach_reload(ask: impl Fn(tokio::sync::mpsc::UnboundedSender<()>) + Send + 'static) {
        *RELOAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(ask));
    }

    /// Has the screen reload (see [`attach_reload`]) and waits for it; `false` when no
    /// screen is attached (the caller reloads itself).
    pub async fn reload_on_screen() -> bool {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        {
            let ask = RELOAD.lock().unwrap_or_else(|e| e.into_inner());
            let Some(ask) = ask.as_ref() else {
                return false;
            };
            ask(tx);
        }
        // The screen gone (quitting) counts as done.
        let _ = rx.recv().await;
        true
    }

    /// The ids of the screen dialogs [`screen_dialog`] opens (the answers are theirs, not
    /// the extensions').
    pub const TRUST_DIALOG_ID: &str = "project-trust-";

    type Reply = std::sync::mpsc::Sender<Option<String>>;

    /// Screen dialogs waiting for their answer, by request id.
    static DIALOGS: Mutex<Vec<(String, Reply)>> = Mutex::new(Vec::new());

    static NEXT_DIALOG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

    /// Whether the screen is attached (records reach it rather than being held).
    fn attached() -> bool {
        matches!(
            &*RELAY.lock().unwrap_or_else(|e| e.into_inner()),
            Relay::Attached(_)
        )
    }

    /// Questions asked in the running screen (Pi's interactive `createProjectTrustContext`:
    /// `select`, `confirm`, `input` are the screen's extension dialogs, `notify` its notices),
    /// blocking until answered; `None` when no screen is attached. The answer is the chosen
    /// option or the text typed, `None` when cancelled (or the screen went away).
    pub fn screen_dialog() -> Option<pi_agent::extensions::trust::TrustDialog> {
        if !attached() {
            return None;
        }
        Some(std::sync::Arc::new(
            |question: pi_agent::extensions::trust::TrustQuestion| {
                if let Some(kind) = &question.notify {
                    send(serde_json::json!({
                        "type": "extension_ui_request",
                        "method": "notify",
                        "message": question.title,
                        "notifyType": kind,
                    }));
                    return None;
                }
                let n = NEXT_DIALOG.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let id = format!("{TRUST_DIALOG_ID}{n}");
                // A `confirm` comes as "title\nmessage", as Pi's selector title has it.
                let (title, message) = question
                    .title
                    .split_once('\n')
                    .unwrap_or((question.title.as_str(), ""));
                let mut request = serde_json::json!({
                    "type": "extension_ui_request",
                    "id": id,
                    "title": title,
                    "message": message,
                });
                if question.input {
                    request["method"] = "input".into();
                    request["placeholder"] =
                        question.placeholder.clone().unwrap_or_default().into();
                } else {
                    request["method"] = "select".into();
                    request["options"] = question.options.clone().into();
                }
                let (tx, rx) = std::sync::mpsc::channel();
                DIALOGS
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((id, tx));
                send(request);
                rx.recv().ok().flatten()
            },
        ))
    }

    /// Hands the screen's answer (an `extension_ui_response`) to the [`screen_dialog`]
    /// question it answers; `false` when it answers none (it is an extension's).
    pub fn answer_dialog(answer: &Value) -> bool {
        let Some(id) = answer.get("id").and_then(Value::as_str) else {
            return false;
        };
        let mut dialogs = DIALOGS.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = dialogs.iter().position(|(d, _)| d == id) else {
            return false;
        };
        let (_, reply) = dialogs.remove(i);
        let value = answer
            .get("value")
            .and_then(Value::as_str)
            .map(str::to_string);
        let _ = reply.send(value);
        true
    }

    /// The screen is closing: the questions still open are answered as cancelled.
    pub fn close_dialogs() {
        DIALOGS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    #[cfg(test)]
    mod tests {
        use serde_json::json;

        #[test]
        fn records_wait_for_the_screen_and_trust_questions_for_its_answer() {
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

            // With the screen attached, a trust question is a screen dialog: it waits for
            // the screen's answer to its id; extensions' answers are not taken.
            let ask = super::screen_dialog().expect("the screen is attached");
            let asking = std::thread::spawn(move || {
                ask(pi_agent::extensions::trust::TrustQuestion {
                    title: "Trust project folder?\n/p\n\nThis allows".into(),
                    options: vec!["Trust".into(), "Do not trust".into()],
                    input: false,
                    placeholder: None,
                    notify: None,
                })
            });
            let request = rx.recv().expect("the dialog request");
            assert_eq!(request["method"], "select");
            assert_eq!(request["title"], "Trust project folder?");
            assert_eq!(request["message"], "/p\n\nThis allows");
            assert_eq!(request["options"], json!(["Trust", "Do not trust"]));
            let id = request["id"].as_str().expect("id").to_string();
            assert!(id.starts_with(super::TRUST_DIALOG_ID), "{id}");
            assert!(!super::answer_dialog(&json!({"id": "ext-1", "value": "x"})));
            assert!(super::answer_dialog(
                &json!({"type": "extension_ui_response", "id": id, "value": "Do not trust"})
            ));
            assert_eq!(asking.join().unwrap().as_deref(), Some("Do not trust"));
            // Notices are shown and answered at once.
            let ask = super::screen_dialog().expect("the screen is attached");
            let answer = ask(pi_agent::extensions::trust::TrustQuestion {
                title: "Deciding".into(),
                options: Vec::new(),
                input: false,
                placeholder: None,
                notify: Some("warning".into()),
            });
            assert_eq!(answer, None);
            let notice = rx.recv().expect("the notice");
            assert_eq!(notice["method"], "notify");
            assert_eq!(notice["notifyType"], "warning");
            assert_eq!(notice["message"], "Deciding");
        }
    }
}
