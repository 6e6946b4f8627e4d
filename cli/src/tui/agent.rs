//! The adapter from [`AgentDriver`] to the engine's agent runtime
//! ([`pi_engine::agent::AgentSession`]), and the interactive entry point built on the same
//! session setup as the print/json/rpc modes.
//!
//! The runtime emits Pi's event JSON through an [`EventSink`] on its own tasks; the sink
//! here only forwards each value into a channel, which the UI drains once per frame, so
//! the agent never waits on drawing.

use super::driver::{
    AgentDriver, AgentEvent, BranchSummary, MissingCwd, MissingSessionCwd, ModelInfo, Reloaded,
    ThinkingLevel,
};
use super::session_ops;
use super::TuiOptions;
use anyhow::{anyhow, bail};
use pi_engine::agent::{AgentSession, EventSink, NavigateOptions};
use serde_json::Value;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Results of a tree navigation, sent by its task through the errors channel.
const NAV_DONE: &str = "tui_tree_navigated";
const NAV_ABORTED: &str = "tui_tree_navigation_aborted";
const NAV_FAILED: &str = "tui_tree_navigation_failed";

pub struct AgentSessionDriver {
    agent: AgentSession,
    /// How sessions are opened and created (the modes' setup), for /resume and /new.
    env: Option<crate::modes::Env>,
    /// The command line, for /reload (`--models`, `--system-prompt`, trust flags).
    args: crate::RunArgs,
    /// The directory pi started in, the one the start-up trust answer is for.
    start_cwd: String,
    /// The start-up folder had nothing that needs trust (so it was trusted): if a /reload
    /// finds project resources there, that trust is saved, as Pi does.
    auto_trust_on_reload: bool,
    /// Skills and prompt templates that typed input expands to.
    resources: pi_engine::config::Resources,
    runtime: tokio::runtime::Handle,
    events: mpsc::Receiver<Value>,
    /// For errors and results of spawned calls (a prompt that could not start, a failed
    /// compaction, a finished tree navigation).
    errors: mpsc::Sender<Value>,
}

/// A sink that forwards events into a channel, plus its receiving end.
pub fn channel_sink() -> (EventSink, mpsc::Sender<Value>, mpsc::Receiver<Value>) {
    let (tx, rx) = mpsc::channel();
    // `Sender` is Sync, but the sink type asks for Fn + Sync over a shared reference, and a
    // Mutex keeps this independent of that detail.
    let shared = Arc::new(Mutex::new(tx.clone()));
    let sink: EventSink = Arc::new(move |v| {
        if let Ok(tx) = shared.lock() {
            let _ = tx.send(v);
        }
    });
    (sink, tx, rx)
}

impl AgentSessionDriver {
    /// `events` must be the receiver whose sender feeds the sink `agent` was built with.
    pub fn new(
        agent: AgentSession,
        runtime: tokio::runtime::Handle,
        errors: mpsc::Sender<Value>,
        events: mpsc::Receiver<Value>,
    ) -> Self {
        AgentSessionDriver {
            agent,
            env: None,
            args: crate::RunArgs::default(),
            start_cwd: String::new(),
            auto_trust_on_reload: false,
            resources: pi_engine::config::Resources::default(),
            runtime,
            events,
            errors,
        }
    }

    /// Skills and templates for `/skill:name` and `/template` expansion.
    pub fn with_resources(mut self, resources: pi_engine::config::Resources) -> Self {
        self.resources = resources;
        self
    }

    /// Enables /resume and /new, which open and create sessions as the modes do.
    pub fn with_env(mut self, env: crate::modes::Env) -> Self {
        self.start_cwd = env.cwd.clone();
        self.auto_trust_on_reload = !pi_engine::config::has_trust_requiring_resources(
            Path::new(&env.cwd),
            pi_engine::config::home_dir().as_deref(),
        );
        self.env = Some(env);
        self
    }

    /// The session setup, for tests that check what /reload loaded.
    #[cfg(test)]
    pub(crate) fn env(&self) -> Option<&crate::modes::Env> {
        self.env.as_ref()
    }

    /// The command line the session was set up with, which /reload applies again.
    pub fn with_args(mut self, args: crate::RunArgs) -> Self {
        self.args = args;
        self
    }

    /// Pi's input expansion (`/skill:name`, prompt templates); `None` after reporting an
    /// error (an unknown skill).
    fn expand(&self, text: &str) -> Option<String> {
        let res = &self.resources;
        match pi_engine::config::expand_skill_command(text, &res.skills)
            .map(|t| pi_engine::config::expand_prompt_template(&t, &res.prompt_templates))
        {
            Ok(t) => Some(t),
            Err(e) => {
                self.report(e.to_string());
                let _ = self.errors.send(serde_json::json!({"type": "agent_end"}));
                None
            }
        }
    }

    fn report(&self, text: String) {
        let _ = self
            .errors
            .send(serde_json::json!({"type": "tui_error", "message": text}));
    }
}

/// The working directory a session header names (`None` when it names none).
fn header_cwd(session: &pi_engine::session::Session) -> Option<String> {
    session
        .header()
        .and_then(|h| h.get("cwd").and_then(Value::as_str).map(str::to_string))
        .filter(|c| !c.is_empty())
}

/// Pi's check before opening a session: its working directory must exist unless the user
/// chose to continue or fork elsewhere. Returns the session's directory when it exists.
fn check_session_cwd(
    session: &pi_engine::session::Session,
    fallback: &str,
    missing: MissingCwd,
) -> Result<Option<String>, MissingSessionCwd> {
    match header_cwd(session) {
        Some(cwd) if Path::new(&cwd).is_dir() => Ok(Some(cwd)),
        Some(cwd) if missing == MissingCwd::Ask => Err(MissingSessionCwd {
            session_cwd: cwd,
            fallback_cwd: fallback.to_string(),
        }),
        _ => Ok(None),
    }
}

impl AgentSessionDriver {
    /// Works in `cwd` from now on (tools, `!cmd`, new sessions, the prompt's cwd), as Pi's
    /// runtime does for a session from another directory. Its settings and resources are
    /// read by the /reload that the UI runs on seeing the change.
    fn adopt_cwd(&mut self, cwd: Option<String>) {
        let (Some(cwd), Some(env)) = (cwd, self.env.as_mut()) else {
            return;
        };
        if env.cwd != cwd {
            self.agent.set_cwd(std::path::PathBuf::from(&cwd));
            env.cwd = cwd;
        }
    }

    /// Pi's fork of a session whose directory is gone: every entry, under a new header in
    /// the current directory naming `parent` as its parent session.
    fn fork_into_cwd(
        &mut self,
        source: &pi_engine::session::Session,
        parent: String,
    ) -> anyhow::Result<String> {
        let Some(env) = &self.env else {
            bail!("no session setup available")
        };
        let header = pi_formats::header::NewHeader::new(
            pi_formats::id::session_id(),
            pi_formats::time::now_iso(),
            env.cwd.clone(),
            Some(parent),
        );
        let id = header.id.clone();
        let (session, persist) = env.create_from_lines(source.fork_from_lines(&header))?;
        let location = session
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or(id);
        self.agent.replace_session(session, persist);
        self.agent.restore_from_session();
        Ok(location)
    }
}

impl AgentDriver for AgentSessionDriver {
    fn prompt(&mut self, text: &str) {
        let Some(text) = self.expand(text) else {
            return;
        };
        let agent = self.agent.clone();
        let errors = self.errors.clone();
        self.runtime.spawn(async move {
            if let Err(e) = agent.prompt(&text, Vec::new()).await {
                let _ =
                    errors.send(serde_json::json!({"type": "tui_error", "message": e.to_string()}));
                let _ = errors.send(serde_json::json!({"type": "agent_end"}));
            }
        });
    }

    fn steer(&mut self, text: &str) {
        if let Some(text) = self.expand(text) {
            self.agent.steer(text);
        }
    }

    fn follow_up(&mut self, text: &str) {
        if let Some(text) = self.expand(text) {
            self.agent.follow_up(text);
        }
    }

    fn abort(&mut self) {
        self.agent.abort();
    }

    fn poll_events(&mut self) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        while let Ok(v) = self.events.try_recv() {
            let message = || {
                v.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string()
            };
            match v.get("type").and_then(Value::as_str) {
                Some("tui_error") => out.push(AgentEvent::Error(message())),
                Some(NAV_DONE) => out.push(AgentEvent::TreeNavigated {
                    messages: self.agent.messages(),
                    editor_text: v
                        .get("editorText")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                }),
                Some(NAV_ABORTED) => out.push(AgentEvent::TreeNavigationAborted),
                Some(NAV_FAILED) => out.push(AgentEvent::TreeNavigationFailed(message())),
                _ => out.extend(AgentEvent::from_pi_json(&v)),
            }
        }
        out
    }

    fn navigate_tree(&mut self, entry: &str, summary: &BranchSummary) -> anyhow::Result<()> {
        let options = match summary {
            BranchSummary::None => NavigateOptions::default(),
            BranchSummary::Summarize => NavigateOptions {
                summarize: true,
                ..Default::default()
            },
            BranchSummary::SummarizeWithFocus(focus) => NavigateOptions {
                summarize: true,
                custom_instructions: Some(focus.clone()).filter(|f| !f.trim().is_empty()),
                ..Default::default()
            },
        };
        let agent = self.agent.clone();
        let results = self.errors.clone();
        let entry = entry.to_string();
        self.runtime.spawn(async move {
            // Pi stops a running response once the user commits to navigating.
            if agent.is_streaming() {
                agent.abort();
                while agent.is_streaming() {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
            let event = match agent.navigate_tree(&entry, options).await {
                Ok(out) if out.aborted || out.cancelled => {
                    serde_json::json!({"type": NAV_ABORTED})
                }
                Ok(out) => serde_json::json!({"type": NAV_DONE, "editorText": out.editor_text}),
                Err(e) => serde_json::json!({"type": NAV_FAILED, "message": e.to_string()}),
            };
            let _ = results.send(event);
        });
        Ok(())
    }

    fn compact(&mut self, instructions: Option<&str>) {
        let agent = self.agent.clone();
        let errors = self.errors.clone();
        let instructions = instructions.map(str::to_string);
        self.runtime.spawn(async move {
            if let Err(e) = agent.compact(instructions).await {
                let _ = errors.send(
                    serde_json::json!({"type": "compaction_end", "errorMessage": e.to_string()}),
                );
            }
        });
    }

    fn set_model(&mut self, model: &ModelInfo) {
        let registry = self.agent.registry();
        match registry.find(&model.provider, &model.id).cloned() {
            Some(m) => {
                if let Err(e) = self.agent.set_model(m) {
                    self.report(format!("could not set the model: {e}"));
                }
            }
            None => self.report(format!("unknown model {}", model.key())),
        }
    }

    fn set_thinking(&mut self, level: ThinkingLevel) {
        if let Some(l) = pi_formats::message::ThinkingLevel::parse(level.as_str()) {
            if let Err(e) = self.agent.set_thinking_level(l) {
                self.report(format!("could not set the thinking level: {e}"));
            }
        }
    }

    fn models(&self) -> Vec<ModelInfo> {
        let registry = self.agent.registry();
        // Pi lists only models whose provider has credentials.
        registry
            .models
            .iter()
            .filter(|m| registry.resolve_api_key(&m.provider).is_some())
            .map(ModelInfo::from_engine)
            .collect()
    }

    fn session(&self) -> Option<pi_engine::session::Session> {
        Some(self.agent.with_session(|s| s.clone()))
    }

    fn clear_queue(&mut self) -> (Vec<String>, Vec<String>) {
        self.agent.clear_queue()
    }

    fn set_session_name(&mut self, name: &str) -> anyhow::Result<()> {
        Ok(self.agent.set_session_name(name)?)
    }

    fn messages(&self) -> Vec<Value> {
        self.agent.messages()
    }

    fn current_model(&self) -> Option<ModelInfo> {
        self.agent.model().map(|m| ModelInfo::from_engine(&m))
    }

    fn thinking_level(&self) -> Option<ThinkingLevel> {
        ThinkingLevel::parse(self.agent.thinking_level().as_str())
    }

    fn switch_session(&mut self, location: &str, missing_cwd: MissingCwd) -> anyhow::Result<()> {
        let Some(env) = &self.env else {
            anyhow::bail!("no session setup available")
        };
        if self.agent.is_streaming() {
            anyhow::bail!("wait for the current response to finish");
        }
        let (session, persist) = env.open_ref(location)?;
        let cwd = check_session_cwd(&session, &env.cwd, missing_cwd)?;
        if cwd.is_none() && missing_cwd == MissingCwd::Fork {
            // The original stays as it is: release it before writing the copy.
            drop(persist);
            let parent = session
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| location.to_string());
            self.fork_into_cwd(&session, parent)?;
            return Ok(());
        }
        self.agent.replace_session(session, persist);
        self.agent.restore_from_session();
        self.adopt_cwd(cwd);
        Ok(())
    }

    fn clone_session(&mut self) -> anyhow::Result<()> {
        let Some(env) = &self.env else {
            anyhow::bail!("no session setup available")
        };
        if self.agent.is_streaming() {
            anyhow::bail!("wait for the current response to finish");
        }
        let header = pi_formats::header::NewHeader::new(
            pi_formats::id::session_id(),
            pi_formats::time::now_iso(),
            env.cwd.clone(),
            self.agent.session_file().map(|p| p.display().to_string()),
        );
        let lines = self.agent.with_session(|s| s.fork_from_lines(&header));
        let (session, persist) = env.create_from_lines(lines)?;
        self.agent.replace_session(session, persist);
        self.agent.restore_from_session();
        Ok(())
    }

    fn new_session(&mut self) -> anyhow::Result<()> {
        let Some(env) = &self.env else {
            anyhow::bail!("no session setup available")
        };
        if self.agent.is_streaming() {
            anyhow::bail!("wait for the current response to finish");
        }
        let (session, persist) = env.new_session(None)?;
        self.agent.replace_session(session, persist);
        self.agent.start_new()?;
        Ok(())
    }

    fn set_label(&mut self, id: &str, label: Option<&str>) -> anyhow::Result<()> {
        self.agent.append(pi_formats::entry::NewEntry::Label {
            target_id: id.to_string(),
            label: label.map(str::to_string),
        })?;
        Ok(())
    }

    fn fork(&mut self, entry_id: &str) -> anyhow::Result<String> {
        let Some(env) = &self.env else {
            bail!("no session setup available")
        };
        if self.agent.is_streaming() {
            bail!("wait for the current response to finish");
        }
        let (parent, text) = self.agent.with_session(|s| {
            let idx = s
                .find(entry_id)
                .filter(|&i| s.entry(i).is_message_with_role("user"))
                .ok_or_else(|| anyhow!("Invalid entry ID for forking"))?;
            let value = s.entry_value(idx);
            let parent = value
                .get("parentId")
                .and_then(Value::as_str)
                .map(str::to_string);
            let text = session_ops::user_text(value.pointer("/message/content"));
            Ok::<_, anyhow::Error>((parent, text))
        })?;
        let file = self.agent.session_file();
        let parent_session = if env.no_session {
            None
        } else {
            file.as_ref().map(|p| p.display().to_string())
        };
        match parent {
            // The first message: a new, empty session that names this one as its parent.
            None => {
                let (session, persist) = env.new_session(parent_session)?;
                self.agent.replace_session(session, persist);
                self.agent.start_new()?;
            }
            Some(leaf) => {
                if !env.no_session && file.as_ref().is_some_and(|f| !f.is_file()) {
                    bail!("This session has not been saved yet. Send a message before cloning or forking it.");
                }
                let header = pi_formats::header::NewHeader::new(
                    pi_formats::id::session_id(),
                    pi_formats::time::now_iso(),
                    env.cwd.clone(),
                    parent_session,
                );
                let lines = self
                    .agent
                    .with_session(|s| s.branched_lines(&leaf, &header))?;
                let (session, persist) = env.create_from_lines(lines)?;
                self.agent.replace_session(session, persist);
                self.agent.restore_from_session();
            }
        }
        Ok(text)
    }

    fn import_session(&mut self, path: &str, missing_cwd: MissingCwd) -> anyhow::Result<String> {
        let Some(env) = &self.env else {
            bail!("no session setup available")
        };
        if self.agent.is_streaming() {
            bail!("wait for the current response to finish");
        }
        let home = pi_engine::config::home_dir();
        let source =
            Path::new(&env.cwd).join(pi_engine::config::expand_tilde(path, home.as_deref()));
        if !source.exists() {
            bail!("Session file not found: {}", source.display());
        }
        let imported = session_ops::check_import_file(&source)?;
        // Checked before copying, so asking leaves no stray copy behind (Pi removes its copy).
        let cwd = check_session_cwd(&imported, &env.cwd, missing_cwd)?;
        if cwd.is_none() && missing_cwd == MissingCwd::Fork {
            // Pi forks from the file given, which stays where it is.
            let parent = source
                .canonicalize()
                .unwrap_or_else(|_| source.clone())
                .display()
                .to_string();
            return self.fork_into_cwd(&imported, parent);
        }
        let id = imported
            .session_id()
            .ok_or_else(|| anyhow!("{}: the session header has no id", source.display()))?;
        let (session, persist, location) = match &env.spec {
            pi_storage::StoreSpec::Jsonl(_) => {
                let dir = self
                    .agent
                    .session_file()
                    .and_then(|f| f.parent().map(Path::to_path_buf))
                    .ok_or_else(|| anyhow!("the current session has no directory"))?;
                let flat = pi_storage::JsonlStore::open(
                    pi_storage::JsonlLayout::Flat { dir: dir.clone() },
                    Default::default(),
                );
                let sid = pi_storage::SessionId::new(id.clone());
                // Two files with one id would leave appends going to whichever is found first.
                if let Ok(existing) = flat.session_path(&sid) {
                    let same = existing.canonicalize().ok() == source.canonicalize().ok();
                    if !same {
                        bail!(
                            "session {id} is already stored as {}; resume it with /resume",
                            existing.display()
                        );
                    }
                }
                let dest = session_ops::copy_into_dir(&source, &dir)?;
                let (session, persist) = env.open_file(&dest)?;
                (session, persist, dest.display().to_string())
            }
            _ => {
                let store = pi_storage::open_store(&env.spec, &env.store_options)
                    .map_err(|e| anyhow!("{e}"))?;
                let outcome = pi_storage::transfer::import_jsonl(store.as_ref(), &source)
                    .map_err(|e| anyhow!("{e}"))?;
                drop(store);
                let (session, persist) = env.open_ref(outcome.id.as_str())?;
                (session, persist, outcome.id.as_str().to_string())
            }
        };
        self.agent.replace_session(session, persist);
        self.agent.restore_from_session();
        self.adopt_cwd(cwd);
        Ok(location)
    }

    fn cwd(&self) -> Option<std::path::PathBuf> {
        Some(self.agent.cwd())
    }

    fn project_trusted(&self) -> Option<bool> {
        self.env.as_ref().map(|e| e.settings.trusted)
    }

    fn reload(&mut self) -> anyhow::Result<Reloaded> {
        let Some(env) = self.env.as_mut() else {
            bail!("no session setup available")
        };
        if self.agent.is_streaming() {
            bail!("Wait for the current response to finish before reloading.");
        }
        let cwd = std::path::PathBuf::from(&env.cwd);
        // The start-up trust answer is for the start-up directory; elsewhere (a session
        // from another directory) trust.json and defaultProjectTrust decide.
        let mut args = self.args.clone();
        let mut warnings = Vec::new();
        if env.cwd != self.start_cwd {
            args.project_trusted = None;
            if undecided_trust(&env.agent_dir, &cwd, &args) {
                warnings.push(format!(
                    "{} is not a trusted project yet: its .pi settings and resources are not \
                     loaded (start pi there to decide)",
                    cwd.display()
                ));
            }
        }
        let settings = crate::modes::Settings::load_quiet(&env.agent_dir, &cwd, &args)?;
        env.resources = settings.resources(&env.agent_dir, &cwd, &args);
        env.settings = settings;
        self.resources = env.resources.clone();
        // models.json too, so the picker and ctrl+p see added or changed models. A broken
        // file keeps the models we have, as Pi keeps running with its error shown.
        match pi_engine::llm::load_models(&env.agent_dir.join("models.json")) {
            Ok(registry) => {
                env.registry = registry;
                let resolver = crate::modes::api_key_resolver_quiet(env, &mut warnings);
                self.agent
                    .set_registry(env.registry.clone(), Some(resolver));
            }
            Err(e) => warnings.push(format!("models.json error: {e}")),
        }
        // The next prompt patches the sections that changed into the session.
        let tools = self.agent.tools();
        self.agent
            .set_system_message(crate::modes::system_message(env, &tools));
        let saved_project_trust = if self.auto_trust_on_reload && env.cwd == self.start_cwd {
            save_implicit_trust(env, &args, &mut warnings, &mut self.auto_trust_on_reload)
        } else {
            false
        };
        let mut ui = read_ui(env, &args);
        ui.warnings.extend(warnings);
        ui.saved_project_trust = saved_project_trust;
        Ok(ui)
    }
}

/// Pi's implicit trust on reload: a folder trusted at start-up because it had nothing that
/// needs trust, which now has such resources and no saved decision, is saved as trusted.
/// Flags (`--approve` / `--no-approve`) turn this off. `pending` is cleared once a
/// decision is on disk.
fn save_implicit_trust(
    env: &crate::modes::Env,
    args: &crate::RunArgs,
    warnings: &mut Vec<String>,
    pending: &mut bool,
) -> bool {
    let cwd = Path::new(&env.cwd);
    let home = pi_engine::config::home_dir();
    if args.approve
        || args.no_approve
        || !env.settings.trusted
        || !pi_engine::config::has_trust_requiring_resources(cwd, home.as_deref())
    {
        return false;
    }
    let store = pi_engine::config::TrustStore::new(&env.agent_dir);
    let result = match store.get(cwd) {
        Ok(Some(_)) => Ok(false),
        Ok(None) => store.set(cwd, Some(true)).map(|()| true),
        Err(e) => Err(e),
    };
    match result {
        Ok(saved) => {
            *pending = false;
            saved
        }
        Err(e) => {
            warnings.push(format!("Could not save project trust after reload: {e}"));
            false
        }
    }
}

/// Whether the interactive start in `cwd` would ask about trust (resources present, nothing
/// decided).
fn undecided_trust(agent_dir: &Path, cwd: &Path, args: &crate::RunArgs) -> bool {
    if args.approve || args.no_approve {
        return false;
    }
    let decision = pi_engine::config::resolve_trust(
        cwd,
        &pi_engine::config::TrustStore::new(agent_dir),
        pi_engine::config::TrustInputs {
            override_: None,
            default: pi_engine::config::Settings::load_global(agent_dir).default_project_trust(),
            interactive: true,
            home: pi_engine::config::home_dir(),
        },
    );
    matches!(decision, Ok(pi_engine::config::TrustDecision::Ask { .. }))
}

/// What the UI takes from the settings and resources: header rows, slash commands, view
/// settings and the ctrl+p scope. Project settings and project resources are in `env`
/// only when the project is trusted (`modes::Settings` decides).
pub fn read_ui(env: &crate::modes::Env, args: &crate::RunArgs) -> Reloaded {
    let cfg = &env.settings.config;
    let res = &env.resources;
    let home = std::env::var("HOME").unwrap_or_default();
    let short = |p: &Path| {
        let text = p.display().to_string();
        match text.strip_prefix(&home) {
            Some(rest) if !home.is_empty() => format!("~{rest}"),
            _ => text,
        }
    };
    let mut loaded: Vec<(String, String)> = res
        .context_files
        .iter()
        .map(|f| (short(&f.path), "context".to_string()))
        .collect();
    loaded.extend(
        res.skills
            .iter()
            .map(|s| (format!("/skill:{}", s.name), "skill".to_string())),
    );
    loaded.extend(
        res.prompt_templates
            .iter()
            .map(|t| (format!("/{}", t.name), "template".to_string())),
    );
    let mut commands: Vec<super::app::Command> = res
        .skills
        .iter()
        .map(|s| super::app::Command {
            name: format!("skill:{}", s.name),
            description: s.description.clone(),
        })
        .collect();
    commands.extend(res.prompt_templates.iter().map(|t| super::app::Command {
        name: t.name.clone(),
        description: t.description.clone(),
    }));
    let mut warnings: Vec<String> = cfg.errors().iter().map(|e| e.to_string()).collect();
    warnings.extend(
        res.diagnostics
            .iter()
            .map(|d| format!("{}: {}", d.path.display(), d.message)),
    );
    // `--models` wins over `enabledModels`, as in Pi.
    let patterns: Vec<String> = match &args.models {
        Some(list) => list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => cfg.enabled_models().unwrap_or_default(),
    };
    let (scoped, scope_warnings) =
        pi_engine::config::resolve_model_scope(&patterns, &env.registry.models);
    warnings.extend(scope_warnings);
    Reloaded {
        loaded,
        commands,
        quiet_startup: cfg.quiet_startup().is_some(),
        double_escape: cfg.double_escape_action().to_string(),
        theme: cfg.theme().unwrap_or("dark").to_string(),
        show_thinking: !cfg.hide_thinking_block(),
        skip_branch_prompt: cfg.branch_summary().skip_prompt,
        auto_compact: cfg.compaction(None).map_or(true, |c| c.enabled),
        external_editor: cfg
            .get("externalEditor")
            .and_then(Value::as_str)
            .filter(|e| !e.trim().is_empty())
            .map(str::to_string),
        scoped_models: scoped
            .iter()
            .map(|s| {
                (
                    format!("{}/{}", s.model.provider, s.model.id),
                    s.thinking_level
                        .and_then(|l| ThinkingLevel::parse(l.as_str())),
                )
            })
            .collect(),
        warnings,
        saved_project_trust: false,
    }
}

/// Interactive mode from the command line: the same session setup as `-p` (new session,
/// `-c`, `--session`, `--fork`, model and tools flags), then [`super::run`]. `--resume`
/// opens the session picker first (escape quits with "No session selected", as in Pi).
pub fn run_with_args(mut args: crate::RunArgs) -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // Trust is asked before anything project-local is read (Pi's start-up selector).
    let agent_dir = pi_storage::StoreOptions::from_env(args.session_dir.as_deref(), None).agent_dir;
    // Before trust: `--session` may put the run in another project's directory, whose
    // trust is the one asked about; a directory that is gone is asked about first.
    let start = crate::modes::current_cwd()?;
    let cwd = match crate::modes::run_dir(&args, &start)? {
        crate::modes::RunDir::Dir(cwd) => cwd,
        crate::modes::RunDir::Missing(missing) => {
            let prompt = super::startup::missing_dir_prompt(&missing);
            match super::startup::ask_on_terminal(&agent_dir, prompt)? {
                // Continue: the session as stored, worked on here (asks again next time).
                Some(0) => start,
                // Fork: as `--fork`, a copy whose header names this directory.
                Some(1) => {
                    args.fork = args.session.take();
                    start
                }
                _ => return Ok(0),
            }
        }
    };
    args.project_trusted =
        super::startup::resolve_startup_trust(&agent_dir, Path::new(&cwd), &args, |prompt| {
            super::startup::ask_on_terminal(&agent_dir, prompt)
        })?;
    let env = crate::modes::Env::at(&args, cwd)?;
    // Decided once per run, as in Pi: /reload keeps this answer even if trust.json changes
    // (Pi's /trust takes effect on the next start).
    args.project_trusted = Some(env.settings.trusted);
    let (sink, errors, events) = channel_sink();
    let agent = {
        let _guard = runtime.enter();
        crate::modes::build_agent(&args, &env, sink)?
    };
    let cwd = std::path::PathBuf::from(&env.cwd);
    let mut opts = TuiOptions::new(cwd.clone());
    opts.agent_dir = env.agent_dir.clone();
    opts.open_resume = args.resume;
    let ui = read_ui(&env, &args);
    opts.quiet_startup = ui.quiet_startup;
    opts.double_escape = ui.double_escape;
    opts.theme = ui.theme;
    opts.skip_branch_prompt = ui.skip_branch_prompt;
    opts.show_thinking = ui.show_thinking;
    opts.external_editor = ui.external_editor;
    opts.auto_compact = ui.auto_compact;
    opts.scoped_models = ui.scoped_models.iter().map(|(k, _)| k.clone()).collect();
    opts.scoped_thinking = ui
        .scoped_models
        .iter()
        .filter_map(|(k, l)| l.map(|l| (k.clone(), l)))
        .collect();
    opts.loaded = ui.loaded;
    opts.commands = ui.commands;
    // Settings and resource problems were printed by `Env::new` before the screen switched.
    let resources = env.resources.clone();
    opts.thinking =
        ThinkingLevel::parse(agent.thinking_level().as_str()).unwrap_or(ThinkingLevel::Off);
    opts.model = agent.model().map(|m| ModelInfo::from_engine(&m));
    opts.store = pi_storage::open_store(&env.spec, &env.store_options).ok();
    let driver = AgentSessionDriver::new(agent, runtime.handle().clone(), errors, events)
        .with_env(env)
        .with_args(args)
        .with_resources(resources);
    opts.driver = Some(Box::new(driver));
    let code = super::run(opts);
    // Running tasks (a prompt mid-stream) are dropped with the runtime.
    runtime.shutdown_background();
    code
}
