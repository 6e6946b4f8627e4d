//! `/llama` in the TUI (Pi 1.6.0's llama.cpp router manager, in this UI's selector dialog):
//! the router's models with their state, loaded ones first; choosing an unloaded model loads
//! it (asking first whether to unload the others when some are loaded), choosing a loaded
//! or sleeping one unloads it after a yes. The router may be shared, so every step reads its
//! state again. When it cannot be reached the panel offers Retry and Close; Retry reads the
//! state again and does not repeat the interrupted action.
//!
//! The HTTP work runs on a thread of its own and reports back as [`Msg::Llama`]; each new
//! listing also replaces the `llama.cpp` models `/model` offers. `/login llama.cpp [url]
//! [key]` stores the router (Pi prompts for both; here they are arguments, defaulting to
//! `LLAMA_BASE_URL` or `http://127.0.0.1:9931`, and no key).
//!
//! Not built: Pi's "Download model…" (a Hugging Face search; this build has no network to
//! test it against), cancelling a load with escape, and restoring the unloaded models when a
//! replacing load fails.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use pi_agent::llm::llama_cpp::{self, catalog, Connection, RouterClient, RouterModel};
use pi_agent::llm::Model;

use super::app::{App, Effect, Msg};
use super::dialogs::{Confirm, Dialog};
use super::driver::AgentDriver;
use super::transcript::Item;

/// Per-request limit for the panel's calls (Pi's 15 s).
const TIMEOUT: Duration = Duration::from_secs(15);

const PANEL: &str = "llama.cpp models";
const UNAVAILABLE: &str = "llama.cpp unavailable";
const LOADING: &str = "Loading model";
const UNLOADING: &str = "Unloading model";

/// What `/llama`'s dialogs ask the loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum LlamaAction {
    /// Read the router's state and show the panel.
    Open,
    /// A model row was chosen.
    Pick {
        model: String,
        state: String,
        /// The other loaded or sleeping models.
        others: Vec<String>,
    },
    /// Unload `unload` (waiting for each), then load `model`.
    Load {
        model: String,
        unload: Vec<String>,
    },
    Unload(String),
    /// The router's chat models now: what `/model` offers for llama.cpp.
    Sync(Vec<Model>),
}

/// The router's answer to a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    pub models: Vec<RouterModel>,
    pub chat: Vec<Model>,
}

/// What the background work reports.
#[derive(Debug, Clone, PartialEq)]
pub enum LlamaUpdate {
    /// A listing (or why there is none); `show` opens the panel with it.
    Catalog {
        server: String,
        result: Result<Catalog, String>,
        show: bool,
    },
    /// A load, unload or login finished: the notice, or the error.
    Done(Result<String, String>),
}

fn effect(action: LlamaAction) -> Option<Effect> {
    Some(Effect::Llama(action))
}

/// A dialog that says what is going on (escape closes it; the work goes on).
fn progress(title: &str, message: &str) -> Dialog {
    Dialog::Confirm(Confirm {
        title: title.into(),
        message: message.into(),
        options: Vec::new(),
        cancelled: String::new(),
        selected: 0,
    })
}

/// Whether one of `/llama`'s dialogs is up (a listing that arrives after the user closed
/// the panel only updates `/model`).
fn panel_open(app: &App) -> bool {
    matches!(&app.dialog, Some(Dialog::Confirm(c))
        if [PANEL, UNAVAILABLE, LOADING, UNLOADING].contains(&c.title.as_str()))
}

/// `loaded · 32k context`, `sleeping`, `unloaded`, `loading`, plus `decision` for
/// classifier-only models.
fn describe(model: &RouterModel) -> String {
    let mut parts = vec![model.status.value.clone()];
    if model.status.failed {
        parts.push("failed".into());
    }
    if model.status.value == "loaded" {
        let ctx = catalog::context_window(model);
        parts.push(if ctx >= 1000 {
            format!("{}k context", (ctx as f64 / 1000.0).round())
        } else {
            format!("{ctx} context")
        });
    }
    if !catalog::is_chat_model(model) {
        parts.push("decision".into());
    }
    parts.join(" · ")
}

/// The panel for a listing: loaded (and sleeping) models first, then by id.
pub fn panel(server: &str, models: &[RouterModel]) -> Dialog {
    let mut sorted: Vec<&RouterModel> = models.iter().collect();
    sorted.sort_by(|a, b| b.is_loaded().cmp(&a.is_loaded()).then(a.id.cmp(&b.id)));
    let loaded: Vec<String> = sorted
        .iter()
        .filter(|m| m.is_loaded())
        .map(|m| m.id.clone())
        .collect();
    let options = sorted
        .iter()
        .map(|m| {
            let others = loaded.iter().filter(|id| **id != m.id).cloned().collect();
            (
                format!("{}  {}", m.id, describe(m)),
                effect(LlamaAction::Pick {
                    model: m.id.clone(),
                    state: m.status.value.clone(),
                    others,
                }),
            )
        })
        .collect::<Vec<_>>();
    let message = if options.is_empty() {
        format!("{server}\n\nNo models. Check the router's --models-dir or presets.")
    } else {
        format!("{server}\nenter: load/unload · esc: close")
    };
    Dialog::Confirm(Confirm {
        title: PANEL.into(),
        message,
        options,
        cancelled: String::new(),
        selected: 0,
    })
}

/// Applies a background report to the UI; returns the effects it asks for.
pub fn on_update(app: &mut App, update: LlamaUpdate) -> Vec<Effect> {
    match update {
        LlamaUpdate::Catalog {
            server,
            result: Ok(cat),
            show,
        } => {
            if show && (panel_open(app) || app.dialog.is_none()) {
                app.dialog = Some(panel(&server, &cat.models));
            }
            vec![Effect::Llama(LlamaAction::Sync(cat.chat))]
        }
        LlamaUpdate::Catalog {
            server,
            result: Err(message),
            show,
        } => {
            if show && (panel_open(app) || app.dialog.is_none()) {
                app.dialog = Some(Dialog::Confirm(Confirm {
                    title: UNAVAILABLE.into(),
                    message: format!("{server}\n\n{message}"),
                    options: vec![
                        ("Retry".into(), effect(LlamaAction::Open)),
                        ("Close".into(), None),
                    ],
                    cancelled: String::new(),
                    selected: 0,
                }));
            } else if !show {
                app.notice(format!("llama.cpp: {message}"));
            }
            Vec::new()
        }
        LlamaUpdate::Done(Ok(text)) => {
            app.notice(text);
            Vec::new()
        }
        LlamaUpdate::Done(Err(text)) => {
            app.transcript.push(Item::Error(text));
            Vec::new()
        }
    }
}

/// Runs `work` on a thread with its own runtime; what it returns is sent to the UI.
fn spawn<F>(tx: mpsc::Sender<Msg>, work: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = Vec<LlamaUpdate>>,
{
    std::thread::spawn(move || {
        let updates = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt.block_on(work()),
            Err(e) => vec![LlamaUpdate::Done(Err(e.to_string()))],
        };
        for u in updates {
            let _ = tx.send(Msg::Llama(u));
        }
    });
}

/// Reads the router's models and the chat models among them.
async fn read(client: &RouterClient, show: bool) -> LlamaUpdate {
    let result = match client.list().await {
        Ok(models) => {
            let chat = catalog::chat_models(client, &models).await;
            Ok(Catalog { models, chat })
        }
        Err(e) => Err(e.to_string()),
    };
    LlamaUpdate::Catalog {
        server: client.server_url().to_string(),
        result,
        show,
    }
}

/// Carries out a `/llama` action (the loop calls this for [`Effect::Llama`]).
pub fn apply(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    tx: &mpsc::Sender<Msg>,
    action: LlamaAction,
) {
    if let LlamaAction::Sync(models) = action {
        driver.set_llama_models(models);
        app.models = driver.models();
        return;
    }
    let Some(conn) = llama_cpp::current_connection(agent_dir) else {
        app.notice(format!(
            "Configure llama.cpp with /login {}",
            llama_cpp::PROVIDER_ID
        ));
        return;
    };
    let client = conn.client(TIMEOUT);
    match action {
        LlamaAction::Open => {
            app.dialog = Some(progress(PANEL, &format!("{}\n\nLoading…", conn.server_url)));
            spawn(tx.clone(), move || async move {
                vec![read(&client, true).await]
            });
        }
        LlamaAction::Pick {
            model,
            state,
            others,
        } => {
            if let Some(next) = pick(app, model, &state, others) {
                apply(app, driver, agent_dir, tx, next);
            }
        }
        LlamaAction::Load { model, unload } => {
            app.dialog = Some(progress(LOADING, &model));
            spawn(tx.clone(), move || async move {
                let mut done = Ok(format!("Loaded {model}"));
                for other in &unload {
                    if let Err(e) = client.unload_and_wait(other).await {
                        done = Err(e.to_string());
                        break;
                    }
                }
                if done.is_ok() {
                    if let Err(e) = client.load_and_wait(&model).await {
                        done = Err(e.to_string());
                    }
                }
                // A connection error shows as the panel's Retry / Close instead.
                let listing = read(&client, true).await;
                match (&done, &listing) {
                    (Err(_), LlamaUpdate::Catalog { result: Err(_), .. }) => vec![listing],
                    _ => vec![LlamaUpdate::Done(done), listing],
                }
            });
        }
        LlamaAction::Unload(model) => {
            app.dialog = Some(progress(UNLOADING, &model));
            spawn(tx.clone(), move || async move {
                let done = client
                    .unload_and_wait(&model)
                    .await
                    .map(|()| format!("Unloaded {model}"))
                    .map_err(|e| e.to_string());
                vec![LlamaUpdate::Done(done), read(&client, true).await]
            });
        }
        LlamaAction::Sync(_) => {}
    }
}

/// A row was chosen: unload a loaded model (after a yes), load an unloaded one (asking
/// about the others first), or say why nothing can be done now.
fn pick(app: &mut App, model: String, state: &str, others: Vec<String>) -> Option<LlamaAction> {
    match state {
        "loaded" | "sleeping" => {
            app.dialog = Some(Dialog::Confirm(Confirm {
                title: "Unload model?".into(),
                message: model.clone(),
                options: vec![
                    ("Yes".into(), effect(LlamaAction::Unload(model))),
                    ("No".into(), effect(LlamaAction::Open)),
                ],
                cancelled: String::new(),
                selected: 0,
            }));
            None
        }
        "unloaded" if others.is_empty() => Some(LlamaAction::Load {
            model,
            unload: Vec::new(),
        }),
        "unloaded" => {
            let n = others.len();
            app.dialog = Some(Dialog::Confirm(Confirm {
                title: format!("{n} model{} loaded", if n == 1 { " is" } else { "s are" }),
                message: others.join("\n"),
                options: vec![
                    (
                        "Unload all and load".into(),
                        effect(LlamaAction::Load {
                            model: model.clone(),
                            unload: others,
                        }),
                    ),
                    (
                        "Keep loaded and load".into(),
                        effect(LlamaAction::Load {
                            model,
                            unload: Vec::new(),
                        }),
                    ),
                    ("Cancel".into(), effect(LlamaAction::Open)),
                ],
                cancelled: String::new(),
                selected: 0,
            }));
            None
        }
        other => {
            app.notice(format!("{model} is {other}"));
            Some(LlamaAction::Open)
        }
    }
}

/// `/login llama.cpp [url] [key]`: checks that a router answers there, then stores it.
pub fn login(app: &mut App, agent_dir: &Path, args: &[&str], tx: mpsc::Sender<Msg>) {
    let entered = args
        .first()
        .map(|s| s.to_string())
        .or_else(|| std::env::var("LLAMA_BASE_URL").ok())
        .unwrap_or_else(|| llama_cpp::DEFAULT_SERVER_URL.to_string());
    let url = match llama_cpp::normalize_server_url(&entered) {
        Ok(u) => u,
        Err(e) => {
            app.transcript
                .push(Item::Error(format!("Login failed: {e}")));
            return;
        }
    };
    let key = args.get(1).map(|s| s.to_string());
    app.notice(format!("Connecting to llama.cpp at {url}…"));
    let agent_dir = agent_dir.to_path_buf();
    spawn(tx, move || async move {
        let conn = Connection {
            server_url: url.clone(),
            api_key: key.clone(),
            source: "stored credential",
        };
        let client = conn.client(TIMEOUT);
        if let Err(e) = client.list().await {
            return vec![LlamaUpdate::Done(Err(format!("Login failed: {e}")))];
        }
        let saved = pi_agent::config::AuthStore::load(&agent_dir).and_then(|mut store| {
            store.set(
                llama_cpp::PROVIDER_ID,
                llama_cpp::credential(&url, key.as_deref()),
            )
        });
        match saved {
            Ok(()) => vec![
                LlamaUpdate::Done(Ok(format!(
                    "Logged in to llama.cpp at {url}. Credentials saved to {}",
                    agent_dir.join("auth.json").display()
                ))),
                read(&client, false).await,
            ],
            Err(e) => vec![LlamaUpdate::Done(Err(format!("Login failed: {e}")))],
        }
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::tui::app::update;
    use crate::tui::driver::FakeDriver;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use pi_fake_llm::llama::RouterModelSpec;
    use pi_fake_llm::{FakeLlm, Script};
    use serde_json::json;

    fn key(code: KeyCode) -> Msg {
        Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    /// The app, the driver and the loop's side of `/llama`, against a real router.
    struct Ui {
        app: App,
        driver: FakeDriver,
        dir: tempfile::TempDir,
        tx: mpsc::Sender<Msg>,
        rx: mpsc::Receiver<Msg>,
    }

    impl Ui {
        /// Carries out effects as the loop does (only `/llama`'s are expected).
        fn run(&mut self, effects: Vec<Effect>) {
            for e in effects {
                match e {
                    Effect::Llama(a) => apply(
                        &mut self.app,
                        &mut self.driver,
                        self.dir.path(),
                        &self.tx,
                        a,
                    ),
                    other => panic!("unexpected effect {other:?}"),
                }
            }
        }

        fn press(&mut self, code: KeyCode) {
            let effects = update(&mut self.app, key(code));
            self.run(effects);
        }

        fn typed(&mut self, line: &str) {
            for c in line.chars() {
                update(&mut self.app, key(KeyCode::Char(c)));
            }
            self.press(KeyCode::Enter);
        }

        /// Waits for the background work's next report and applies it.
        fn next(&mut self) -> LlamaUpdate {
            let Msg::Llama(u) = self.rx.recv_timeout(Duration::from_secs(20)).unwrap() else {
                panic!("not a llama report")
            };
            let effects = update(&mut self.app, Msg::Llama(u.clone()));
            self.run(effects);
            u
        }

        fn dialog(&self) -> &Confirm {
            match &self.app.dialog {
                Some(Dialog::Confirm(c)) => c,
                other => panic!("no dialog: {other:?}"),
            }
        }

        fn labels(&self) -> Vec<String> {
            self.dialog().options.iter().map(|o| o.0.clone()).collect()
        }

        /// Moves to the option starting with `prefix` and chooses it.
        fn choose(&mut self, prefix: &str) {
            let i = self
                .labels()
                .iter()
                .position(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no option {prefix}: {:?}", self.labels()));
            for _ in 0..i {
                self.press(KeyCode::Down);
            }
            self.press(KeyCode::Enter);
        }

        fn llama_models(&self) -> Vec<String> {
            self.app
                .models
                .iter()
                .filter(|m| m.provider == "llama.cpp")
                .map(|m| m.id.clone())
                .collect()
        }

        fn last_notice(&self) -> String {
            self.app
                .transcript
                .items()
                .iter()
                .rev()
                .find_map(|i| match i {
                    Item::Notice(t) => Some(t.clone()),
                    _ => None,
                })
                .unwrap_or_default()
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn llama_panel_loads_unloads_and_retries() {
        let mut qwen = RouterModelSpec::new("qwen-loaded", "loaded");
        qwen.n_ctx = Some(32768);
        let models = vec![
            qwen,
            RouterModelSpec::new("gemma-sleeping", "sleeping"),
            RouterModelSpec::new("dir-unloaded", "unloaded"),
        ];
        let fake = FakeLlm::start_router(Script::default(), models, false)
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = mpsc::channel();
        let mut ui = Ui {
            app: App::new(std::path::PathBuf::from("/work/project")),
            driver: FakeDriver::default(),
            dir,
            tx,
            rx,
        };

        // Not configured yet: says how.
        ui.typed("/llama");
        assert_eq!(
            ui.last_notice(),
            "Configure llama.cpp with /login llama.cpp"
        );

        // `/login llama.cpp URL` checks the router and stores it as Pi does.
        ui.app.dialog = None;
        let effects = {
            for c in format!("/login llama.cpp {}/v1", fake.base_url()).chars() {
                update(&mut ui.app, key(KeyCode::Char(c)));
            }
            update(&mut ui.app, key(KeyCode::Enter))
        };
        let [Effect::Login(arg)] = effects.as_slice() else {
            panic!("{effects:?}")
        };
        crate::tui::login::start(&mut ui.app, ui.dir.path(), arg, ui.tx.clone());
        assert!(matches!(ui.next(), LlamaUpdate::Done(Ok(_))));
        let stored = pi_agent::config::AuthStore::load(ui.dir.path()).unwrap();
        assert_eq!(
            stored.raw("llama.cpp").unwrap(),
            &json!({"type": "api_key", "env": {"LLAMA_BASE_URL": fake.base_url()}})
        );
        // The login's listing fills `/model`: loaded and sleeping models.
        ui.next();
        assert_eq!(ui.llama_models(), ["qwen-loaded", "gemma-sleeping"]);

        // The panel: loaded and sleeping first, with their state.
        ui.typed("/llama");
        assert_eq!(ui.dialog().title, "llama.cpp models");
        ui.next();
        assert_eq!(
            ui.labels(),
            [
                "gemma-sleeping  sleeping",
                "qwen-loaded  loaded · 33k context",
                "dir-unloaded  unloaded"
            ]
        );
        let screen = {
            let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(90, 30)).unwrap();
            t.draw(|f| crate::tui::render::draw(&ui.app, f)).unwrap();
            format!("{}", t.backend())
        };
        assert!(screen.contains("llama.cpp models"), "{screen}");
        assert!(
            screen.contains("qwen-loaded  loaded · 33k context"),
            "{screen}"
        );

        // An unloaded model while others are loaded: asks, then replaces them.
        ui.choose("dir-unloaded");
        assert_eq!(ui.dialog().title, "2 models are loaded");
        assert_eq!(
            ui.labels(),
            ["Unload all and load", "Keep loaded and load", "Cancel"]
        );
        ui.choose("Unload all and load");
        assert_eq!(ui.dialog().title, "Loading model");
        assert_eq!(
            ui.next(),
            LlamaUpdate::Done(Ok("Loaded dir-unloaded".into()))
        );
        ui.next();
        assert_eq!(ui.dialog().title, "llama.cpp models");
        assert_eq!(ui.labels()[0], "dir-unloaded  loaded · 4k context");
        assert_eq!(ui.llama_models(), ["dir-unloaded"]);
        let posts: Vec<(String, serde_json::Value)> = fake
            .router_calls()
            .into_iter()
            .filter(|c| c.method == "POST")
            .map(|c| (c.path, c.body))
            .collect();
        assert_eq!(
            posts,
            [
                ("/models/unload".into(), json!({"model": "gemma-sleeping"})),
                ("/models/unload".into(), json!({"model": "qwen-loaded"})),
                ("/models/load".into(), json!({"model": "dir-unloaded"})),
            ]
        );

        // A loaded model: unloaded after a yes.
        ui.choose("dir-unloaded");
        assert_eq!(ui.dialog().title, "Unload model?");
        ui.choose("Yes");
        assert_eq!(
            ui.next(),
            LlamaUpdate::Done(Ok("Unloaded dir-unloaded".into()))
        );
        ui.next();
        assert!(ui.llama_models().is_empty());
        assert_eq!(
            fake.router_calls().last().map(|c| c.path.clone()),
            Some("/models".into())
        );

        // The router goes away: Retry / Close; Retry reads the state again.
        fake.set_router_down(true);
        ui.app.dialog = None;
        ui.typed("/llama");
        ui.next();
        assert_eq!(ui.dialog().title, "llama.cpp unavailable");
        assert_eq!(ui.labels(), ["Retry", "Close"]);
        assert!(
            ui.dialog().message.contains("Could not connect"),
            "{}",
            ui.dialog().message
        );
        fake.set_router_down(false);
        ui.choose("Retry");
        ui.next();
        assert_eq!(ui.dialog().title, "llama.cpp models");
        assert_eq!(ui.labels().len(), 3);

        // With `-builtin:llama.cpp`, `/llama` is no command: it goes to the model as text.
        ui.app.dialog = None;
        ui.app.settings.llama = false;
        for c in "/llama".chars() {
            update(&mut ui.app, key(KeyCode::Char(c)));
        }
        let effects = update(&mut ui.app, key(KeyCode::Enter));
        assert!(
            !effects.iter().any(|e| matches!(e, Effect::Llama(_))),
            "{effects:?}"
        );
    }
}
