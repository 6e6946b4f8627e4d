//! The adapter from [`AgentDriver`] to the engine's agent runtime
//! ([`pi_agent::agent::AgentSession`]), and the interactive entry point built on the same
//! session setup as the print/json/rpc modes.
//!
//! The runtime emits Pi's event JSON through an [`EventSink`] on its own tasks; the sink
//! here only forwards each value into a channel, which the UI drains once per frame, so
//! the agent never waits on drawing.

use super::driver::{
    AgentDriver, AgentEvent, BashDone, BashResult, BranchSummary, MissingCwd, ModelInfo, OpFailure,
    OpOutcome, Reloaded, SessionOp, ThinkingLevel,
};
use super::TuiOptions;
use anyhow::{anyhow, bail};
use pi_agent::agent::{AgentSession, EventSink, NavigateOptions};
use pi_agent::host::{Host, HostError, Replaced, Replacement};
use pi_agent::protocol::{Command, Event, Request};
use serde_json::Value;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// What reaches the UI between frames, in the order it happened: the agent's events, and
/// the outcomes of the UI's own calls (a command that failed, a finished tree navigation),
/// which are answers to the UI rather than events of the agent.
pub enum Incoming {
    Agent(Event),
    Answer(AgentEvent),
}

pub struct AgentSessionDriver {
    /// The session host every mode shares: the agent and the session lifecycle.
    host: Arc<Host>,
    /// The modes' setup (settings, models, resources), which /reload reads again.
    env: crate::modes::Env,
    /// The command line, for /reload (`--models`, `--system-prompt`, trust flags).
    args: crate::RunArgs,
    /// The directory pi started in, the one the start-up trust answer is for.
    start_cwd: String,
    /// The start-up folder had nothing that needs trust (so it was trusted): if a /reload
    /// finds project resources there, that trust is saved, as Pi does.
    auto_trust_on_reload: bool,
    runtime: tokio::runtime::Handle,
    incoming: mpsc::Receiver<Incoming>,
    /// Where answers to the UI's calls go (a prompt that could not start, a failed
    /// compaction, a finished tree navigation), in line with the agent's events.
    answers: mpsc::Sender<Incoming>,
}

/// A sink that forwards events into a channel, a sender for answers into the same
/// channel, and its receiving end.
pub fn channel_sink() -> (EventSink, mpsc::Sender<Incoming>, mpsc::Receiver<Incoming>) {
    let (tx, rx) = mpsc::channel();
    // `Sender` is Sync, but the sink type asks for Fn + Sync over a shared reference, and a
    // Mutex keeps this independent of that detail.
    let shared = Arc::new(Mutex::new(tx.clone()));
    let sink: EventSink = Arc::new(move |event| {
        if let Ok(tx) = shared.lock() {
            let _ = tx.send(Incoming::Agent(event));
        }
    });
    (sink, tx, rx)
}

/// A lifecycle error for the UI: a missing session directory stays a
/// [`MissingSessionCwd`] (the UI asks what to do), anything else is its message.
fn ui_error(e: HostError) -> anyhow::Error {
    match e {
        HostError::MissingCwd(m) => anyhow::Error::new(m),
        HostError::Failed(text) => anyhow!(text),
    }
}

impl AgentSessionDriver {
    /// `/new`, `/resume`, `/fork`, `/clone`: asks the extensions' `session_before_*`
    /// handlers first (they may cancel), then replaces the session.
    fn replace(&mut self, change: Replacement) -> anyhow::Result<Option<String>> {
        let host = self.host.clone();
        match self
            .runtime
            .block_on(host.replace_session(change))
            .map_err(ui_error)?
        {
            Replaced::Cancelled => bail!("Cancelled by an extension"),
            Replaced::Done { text } => Ok(text),
        }
    }

    /// A driver over `host`, set up from `env` and `args`. `incoming` must be the receiver
    /// whose sender feeds the sink the host's agent was built with.
    pub fn new(
        host: Arc<Host>,
        env: crate::modes::Env,
        args: crate::RunArgs,
        runtime: tokio::runtime::Handle,
        answers: mpsc::Sender<Incoming>,
        incoming: mpsc::Receiver<Incoming>,
    ) -> Self {
        let start_cwd = env.home.cwd.clone();
        let auto_trust_on_reload = !pi_agent::config::has_trust_requiring_resources(
            Path::new(&start_cwd),
            pi_agent::config::home().as_deref(),
        );
        AgentSessionDriver {
            host,
            env,
            args,
            start_cwd,
            auto_trust_on_reload,
            runtime,
            incoming,
            answers,
        }
    }

    fn agent(&self) -> &AgentSession {
        self.host.agent()
    }

    /// The session setup, for tests that check what /reload loaded.
    #[cfg(test)]
    pub(crate) fn env(&self) -> &crate::modes::Env {
        &self.env
    }

    /// The session host this driver is a client of.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Runs a command through the host, exactly as RPC does. A failure is shown as an
    /// error (and, for a prompt that did not start, ends the UI's working state).
    pub fn send(&self, command: Command) {
        self.send_then(command, |_| {});
    }

    /// [`send`](Self::send), then `answered` gets the response record (when a `prompt` has
    /// started, a `compact` or `bash` finished, anything else at once).
    pub fn send_then(&self, command: Command, answered: impl FnOnce(Value) + Send + 'static) {
        let answers = self.answers.clone();
        let kind = command.kind();
        let _guard = self.runtime.enter();
        self.host
            .handle(Request { id: None, command }, move |record| {
                if record["success"] == false {
                    let message = record["error"].as_str().unwrap_or("error").to_string();
                    let shown = match kind {
                        "compact" => AgentEvent::CompactionEnd {
                            summary: None,
                            error: Some(message),
                        },
                        _ => AgentEvent::Error(message),
                    };
                    let _ = answers.send(Incoming::Answer(shown));
                    if kind == "prompt" {
                        let _ = answers.send(Incoming::Answer(AgentEvent::AgentEnd));
                    }
                }
                answered(record);
            });
    }
}

impl AgentDriver for AgentSessionDriver {
    fn prompt(&mut self, text: &str) {
        let answers = self.answers.clone();
        let command = Command::Prompt {
            message: text.to_string(),
            images: Vec::new(),
            streaming_behavior: None,
        };
        // An extension command or `input` handler may take the prompt: then no run starts
        // and no `agent_end` comes to end the UI's working state.
        self.send_then(command, move |record| {
            if record["data"]["disposition"] == "handled" {
                let _ = answers.send(Incoming::Answer(AgentEvent::PromptHandled));
            }
        });
    }

    fn steer(&mut self, text: &str) {
        self.send(Command::Steer {
            message: text.to_string(),
        });
    }

    fn follow_up(&mut self, text: &str) {
        self.send(Command::FollowUp {
            message: text.to_string(),
        });
    }

    fn abort(&mut self) {
        self.send(Command::Abort);
    }

    fn poll_events(&mut self) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        while let Ok(incoming) = self.incoming.try_recv() {
            match incoming {
                Incoming::Agent(event) => out.extend(AgentEvent::from_event(&event)),
                Incoming::Answer(shown) => out.push(shown),
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
        let agent = self.agent().clone();
        let answers = self.answers.clone();
        let entry = entry.to_string();
        self.runtime.spawn(async move {
            // Pi stops a running response once the user commits to navigating.
            if agent.is_streaming() {
                agent.abort();
                while agent.is_streaming() {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
            let shown = match agent.navigate_tree(&entry, options).await {
                Ok(out) if out.aborted => AgentEvent::TreeNavigationAborted,
                Ok(out) if out.cancelled => AgentEvent::TreeNavigationCancelled,
                Ok(out) => AgentEvent::TreeNavigated {
                    messages: agent.messages(),
                    editor_text: out.editor_text,
                },
                Err(e) => AgentEvent::TreeNavigationFailed(e.to_string()),
            };
            let _ = answers.send(Incoming::Answer(shown));
        });
        Ok(())
    }

    fn extension_shortcuts(&self) -> Vec<String> {
        self.host
            .extensions()
            .map(|e| e.shortcuts.iter().map(|(key, _)| key.clone()).collect())
            .unwrap_or_default()
    }

    fn extension_commands(&self) -> Vec<super::app::Command> {
        extension_commands(&self.host)
    }

    fn run_shortcut(&mut self, shortcut: &str) {
        if let Some(ext) = self.host.extensions() {
            let shortcut = shortcut.to_string();
            self.runtime
                .spawn(async move { ext.run_shortcut(&shortcut).await });
        }
    }

    fn compact(&mut self, instructions: Option<&str>) {
        self.send(Command::Compact {
            custom_instructions: instructions.map(str::to_string),
        });
    }

    fn set_model(&mut self, model: &ModelInfo) {
        self.send(Command::SetModel {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
        });
    }

    fn cycle_model(&mut self, model: &ModelInfo, thinking: Option<ThinkingLevel>) {
        let found = self
            .agent()
            .registry()
            .find(&model.provider, &model.id)
            .cloned();
        let outcome = match found {
            Some(m) => self.host.cycle_to(m, thinking).map_err(|e| e.to_string()),
            None => Err(format!("Model not found: {}", model.key())),
        };
        if let Err(e) = outcome {
            let _ = self.answers.send(Incoming::Answer(AgentEvent::Error(e)));
        }
    }

    fn set_queue_mode(&mut self, follow_up: bool, mode: &str) {
        if let Some(mode) = pi_agent::agent::QueueMode::parse(mode) {
            self.send(if follow_up {
                Command::SetFollowUpMode { mode }
            } else {
                Command::SetSteeringMode { mode }
            });
        }
    }

    fn set_thinking(&mut self, level: ThinkingLevel) {
        self.send(Command::SetThinkingLevel { level });
    }

    fn set_llama_models(&mut self, models: Vec<pi_agent::llm::Model>) {
        let mut registry = self.agent().registry();
        pi_agent::llm::llama_cpp::replace_models(&mut registry, models);
        self.env.registry = registry.clone();
        self.agent().set_registry(registry, None);
    }

    fn set_radius_models(&mut self, models: Vec<pi_agent::llm::Model>) {
        let mut registry = self.agent().registry();
        pi_agent::llm::radius_catalog::replace_models(&mut registry, models);
        self.env.registry = registry.clone();
        self.agent().set_registry(registry, None);
    }

    fn models(&self) -> Vec<ModelInfo> {
        // Pi lists only models whose provider has credentials (auth.json, the environment,
        // models.json: the same check as the model choice at start-up).
        self.host
            .available_models()
            .iter()
            .map(ModelInfo::from_engine)
            .collect()
    }

    fn session(&self) -> Option<pi_engine::session::Session> {
        Some(self.agent().with_session(|s| s.clone()))
    }

    fn clear_queue(&mut self) -> (Vec<String>, Vec<String>) {
        self.agent().clear_queue()
    }

    fn set_session_name(&mut self, name: &str) -> anyhow::Result<()> {
        // Answered at once, so its error can be returned (the rename dialog shows it).
        Ok(self.agent().set_session_name(name)?)
    }

    fn messages(&self) -> Vec<Value> {
        self.agent().messages()
    }

    fn current_model(&self) -> Option<ModelInfo> {
        self.agent().model().map(|m| ModelInfo::from_engine(&m))
    }

    fn thinking_level(&self) -> Option<ThinkingLevel> {
        Some(self.agent().thinking_level())
    }

    fn switch_session(&mut self, location: &str, missing_cwd: MissingCwd) -> anyhow::Result<()> {
        self.replace(Replacement::Resume {
            location: location.to_string(),
            missing_cwd,
        })
        .map(drop)
    }

    fn clone_session(&mut self) -> anyhow::Result<()> {
        self.replace(Replacement::Clone).map(drop)
    }

    fn new_session(&mut self) -> anyhow::Result<()> {
        self.replace(Replacement::New { parent: None }).map(drop)
    }

    fn start_session_op(&mut self, op: &SessionOp) -> Option<OpOutcome> {
        // On the runtime, not the UI thread: a `session_before_*` handler may open a dialog
        // the UI must stay responsive to answer.
        let change = match op.clone() {
            SessionOp::New => Replacement::New { parent: None },
            SessionOp::Clone => Replacement::Clone,
            SessionOp::Fork(entry_id) => Replacement::Fork { entry_id },
            SessionOp::Resume {
                location,
                missing_cwd,
            } => Replacement::Resume {
                location,
                missing_cwd,
            },
        };
        let host = self.host.clone();
        let answers = self.answers.clone();
        let before = self.cwd();
        let op = op.clone();
        self.runtime.spawn(async move {
            let outcome = match host.replace_session(change).await {
                Ok(Replaced::Done { text }) => Ok(text),
                Ok(Replaced::Cancelled) => {
                    Err(OpFailure::Failed("Cancelled by an extension".into()))
                }
                Err(e) => Err(OpFailure::from_error(ui_error(e))),
            };
            let _ = answers.send(Incoming::Answer(AgentEvent::SessionReplaced {
                op,
                before,
                outcome,
            }));
        });
        None
    }

    fn set_label(&mut self, id: &str, label: Option<&str>) -> anyhow::Result<()> {
        self.agent().append(pi_formats::entry::NewEntry::Label {
            target_id: id.to_string(),
            label: label.map(str::to_string),
        })?;
        Ok(())
    }

    fn fork(&mut self, entry_id: &str) -> anyhow::Result<String> {
        self.replace(Replacement::Fork {
            entry_id: entry_id.to_string(),
        })
        .map(Option::unwrap_or_default)
    }

    fn import_session(&mut self, path: &str, missing_cwd: MissingCwd) -> anyhow::Result<String> {
        self.host.import(path, missing_cwd).map_err(ui_error)
    }

    fn run_bash(&mut self, command: &str, excluded: bool, done: BashDone) {
        let host = self.host.clone();
        let command = command.to_string();
        self.runtime.spawn(async move {
            done(match host.bash(None, &command, excluded).await {
                Ok(Some(result)) => BashResult::from_json(&result),
                Ok(None) => BashResult::default(),
                Err(e) => BashResult::failed(e),
            });
        });
    }

    fn abort_bash(&mut self) {
        self.host.abort_bash();
    }

    fn cwd(&self) -> Option<std::path::PathBuf> {
        Some(self.agent().cwd())
    }

    fn project_trusted(&self) -> Option<bool> {
        Some(self.env.settings.trusted)
    }

    fn reload(&mut self) -> anyhow::Result<Reloaded> {
        // Pi's reload: `session_shutdown` to the running extensions, settings and resources
        // read again, the extensions loaded again, then `session_start` and
        // `resources_discover` to the ones loaded now.
        let host = self.host.clone();
        self.runtime
            .block_on(host.reload_begin())
            .map_err(|e| anyhow!(e))?;
        let reloaded = self.read_again(true);
        let found = self.runtime.block_on(host.reload_end());
        crate::modes::reload::add_discovered(&host, &found);
        reloaded
    }

    fn follow_dir(&mut self) -> anyhow::Result<Reloaded> {
        if self.host.agent().is_streaming() {
            bail!("Wait for the current response to finish before reloading.");
        }
        self.read_again(false)
    }

    fn reread_for_screen(&mut self) -> anyhow::Result<Reloaded> {
        // The host applied them already (`modes::session_extensions`), the resources the
        // new extensions discovered included; the screen only reads them.
        self.env.home.cwd = self.host.cwd();
        let cwd = std::path::PathBuf::from(&self.env.home.cwd);
        let (args, warnings) = self.args_for(&cwd);
        self.env.settings =
            crate::modes::Settings::load_quiet(&self.env.home.agent_dir, &cwd, &args)?;
        self.env.resources = self.host.setup().resources;
        let mut ui = read_ui(&self.env, &args);
        ui.commands.extend(extension_commands(&self.host));
        ui.warnings.extend(warnings);
        Ok(ui)
    }
}

impl AgentSessionDriver {
    /// The run's arguments for reading `cwd`'s settings: the start-up trust answer is for
    /// the start-up directory; elsewhere (a session from another directory) the decision
    /// made there in this run (a `project_trust` handler's, or the answer to the screen's
    /// trust question on `/resume`), else trust.json and defaultProjectTrust decide, with a
    /// warning when nothing decided yet (`/import` asks nothing, as in Pi).
    fn args_for(&self, cwd: &Path) -> (crate::RunArgs, Vec<String>) {
        let mut args = self.args.clone();
        let mut warnings = Vec::new();
        if cwd.display().to_string() != self.start_cwd {
            args.project_trusted = crate::modes::extensions::decided_trust(cwd);
            if args.project_trusted.is_none()
                && undecided_trust(&self.env.home.agent_dir, cwd, &args)
            {
                warnings.push(format!(
                    "{} is not a trusted project yet: its .pi settings and resources are not \
                     loaded (start pi there to decide)",
                    cwd.display()
                ));
            }
        }
        (args, warnings)
    }

    /// What `/reload` reads again (settings, resources, models.json, mcp.json), and with
    /// `extensions` the extensions, loaded again in a new process.
    fn read_again(&mut self, extensions: bool) -> anyhow::Result<Reloaded> {
        // The host's directory is the one the run works in now (a session from another
        // directory moves it).
        self.env.home.cwd = self.host.cwd();
        let cwd = std::path::PathBuf::from(&self.env.home.cwd);
        let (args, mut warnings) = self.args_for(&cwd);
        let env = &mut self.env;
        let settings = crate::modes::Settings::load_quiet(&env.home.agent_dir, &cwd, &args)?;
        env.resources = settings.resources(&env.home.agent_dir, &cwd, &args);
        // Tools newly added to `defaultTools` become active; `codemode.*` applies from the
        // next request.
        self.host.agent().reselect_tools(
            &crate::modes::tool_selection(&args, &env.settings),
            &crate::modes::tool_selection(&args, &settings),
        );
        env.settings = settings;
        // The themes extensions contributed stay (they are not asked again here).
        for path in self.host.setup().resources.theme_paths {
            if !env.resources.theme_paths.contains(&path) {
                env.resources.theme_paths.push(path);
            }
        }
        self.host.set_resources(
            env.resources.clone(),
            env.settings.config.enable_skill_commands(),
        );
        if extensions {
            warnings.extend(crate::modes::extensions::reload(
                &args,
                env,
                &self.host,
                &self.runtime,
            ));
        }
        // models.json too, so the picker and ctrl+p see added or changed models. A broken
        // file keeps the models we have, as Pi keeps running with its error shown.
        match crate::modes::base_catalog(&args, &env.settings, &env.home.agent_dir, &mut warnings) {
            Ok(registry) => {
                env.registry = registry;
                let resolver = crate::modes::api_key_resolver_quiet(env, &mut warnings);
                // With the extensions' providers and virtual models, as at start-up.
                let catalog =
                    crate::modes::catalog_with_extensions(env, self.host.extensions().as_deref());
                self.host.agent().set_registry(catalog, Some(resolver));
            }
            Err(e) => warnings.push(format!("models.json error: {e}")),
        }
        // mcp.json too: new servers connect, removed ones stop, changed ones reconnect.
        warnings.extend(crate::modes::reload_mcp(env.settings.trusted));
        // The next prompt patches the sections that changed into the session.
        let tools = self.host.agent().tools();
        self.host
            .agent()
            .set_system_message(crate::modes::system_message_with_mcp(env, &tools));
        let saved_project_trust = if self.auto_trust_on_reload && env.home.cwd == self.start_cwd {
            save_implicit_trust(env, &args, &mut warnings, &mut self.auto_trust_on_reload)
        } else {
            false
        };
        let mut ui = read_ui(env, &args);
        ui.commands.extend(extension_commands(&self.host));
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
    let cwd = Path::new(&env.home.cwd);
    let home = pi_agent::config::home();
    if args.approve
        || args.no_approve
        || !env.settings.trusted
        || !pi_agent::config::has_trust_requiring_resources(cwd, home.as_deref())
    {
        return false;
    }
    let store = pi_agent::config::TrustStore::new(&env.home.agent_dir);
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
    let decision = pi_agent::config::resolve_trust(
        cwd,
        &pi_agent::config::TrustStore::new(agent_dir),
        pi_agent::config::TrustInputs {
            override_: None,
            default: pi_agent::config::Settings::load_global(agent_dir).default_project_trust(),
            interactive: true,
            home: pi_agent::config::home(),
        },
    );
    matches!(decision, Ok(pi_agent::config::TrustDecision::Ask { .. }))
}

/// The extensions' commands for the slash completion, after the skills and templates (as
/// Pi, leaving out those named like a built-in command).
fn extension_commands(host: &Host) -> Vec<super::app::Command> {
    let Some(ext) = host.extensions() else {
        return Vec::new();
    };
    ext.commands
        .iter()
        .filter(|(name, _)| {
            !super::app::BUILTIN_COMMANDS
                .iter()
                .any(|(b, _)| *b == name.as_str())
        })
        .map(|(name, description)| super::app::Command {
            name: name.clone(),
            description: tagged(
                description.as_deref().unwrap_or_default(),
                ext.command_sources.get(name),
            ),
        })
        .collect()
}

/// A completion's description with Pi's tag of where the command comes from: `[u]`, `[p]`
/// or `[t]` (user, project, temporary), with the package for npm and git packages
/// (`[u:npm:x]`, `[u:git:github.com/o/r@v1]`); built-in extensions' commands go untagged.
fn tagged(description: &str, source_info: Option<&Value>) -> String {
    let Some(info) = source_info else {
        return description.to_string();
    };
    let source = info["source"].as_str().unwrap_or_default().trim();
    if source == "builtin" {
        return description.to_string();
    }
    let scope = match info["scope"].as_str() {
        Some("user") => "u",
        Some("project") => "p",
        _ => "t",
    };
    let tag = if source.starts_with("npm:") {
        format!("{scope}:{source}")
    } else if matches!(source, "auto" | "local" | "cli") {
        scope.to_string()
    } else if let Some(git) = pi_agent::packages::parse_git(source) {
        let pinned = git.git_ref.map(|r| format!("@{r}")).unwrap_or_default();
        format!("{scope}:git:{}/{}{pinned}", git.host, git.path)
    } else {
        scope.to_string()
    };
    if description.is_empty() {
        format!("[{tag}]")
    } else {
        format!("[{tag}] {description}")
    }
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
            description: tagged(&s.description, Some(&res.provenance.json(&s.file_path))),
        })
        .collect();
    commands.extend(res.prompt_templates.iter().map(|t| super::app::Command {
        name: t.name.clone(),
        description: tagged(&t.description, Some(&res.provenance.json(&t.file_path))),
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
        pi_agent::config::resolve_model_scope(&patterns, &env.registry.models);
    warnings.extend(scope_warnings);
    Reloaded {
        loaded,
        commands,
        // `--verbose` overrides `quietStartup`, as in Pi.
        quiet_startup: cfg.quiet_startup().is_some() && !args.verbose,
        double_escape: cfg.double_escape_action().to_string(),
        // `--use-theme` overrides the setting for the run (not saved).
        theme: args
            .use_theme
            .as_deref()
            .or(cfg.theme())
            .unwrap_or(super::system_theme::NAME)
            .to_string(),
        theme_paths: res.theme_paths.clone(),
        show_thinking: !cfg.hide_thinking_block(),
        skip_branch_prompt: cfg.branch_summary().skip_prompt,
        auto_compact: cfg.compaction(None).map_or(true, |c| c.enabled),
        prefs: super::settings_menu::Prefs::from_settings(cfg),
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
                    s.thinking_level,
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
    // User/global and `-e` extensions decide first (`project_trust`); the prompt only when
    // none does.
    {
        let _guard = runtime.enter();
        crate::modes::extensions::decide_trust(&args, &cwd, true)?;
    }
    args.project_trusted = match crate::modes::extensions::decided_trust(Path::new(&cwd)) {
        Some(trusted) => Some(trusted),
        None => {
            super::startup::resolve_startup_trust(&agent_dir, Path::new(&cwd), &args, |prompt| {
                super::startup::ask_on_terminal(&agent_dir, prompt)
            })?
        }
    };
    let env = crate::modes::Env::at(&args, cwd)?;
    // Decided once per run, as in Pi: /reload keeps this answer even if trust.json changes
    // (Pi's /trust takes effect on the next start).
    args.project_trusted = Some(env.settings.trusted);
    let (sink, answers, incoming) = channel_sink();
    let host = {
        let _guard = runtime.enter();
        crate::modes::build_host(&args, &env, sink)?
    };
    host.run_extension_prompts();
    let agent = host.agent();
    let cwd = std::path::PathBuf::from(&env.home.cwd);
    let mut opts = TuiOptions::new(cwd.clone());
    opts.agent_dir = env.home.agent_dir.clone();
    opts.open_resume = args.resume;
    opts.llama = crate::modes::llama_cpp::enabled(&args, &env.settings);
    let ui = read_ui(&env, &args);
    opts.quiet_startup = ui.quiet_startup;
    opts.double_escape = ui.double_escape;
    opts.theme = ui.theme;
    // Themes extensions contributed at start-up (`resources_discover`).
    opts.theme_paths = host.setup().resources.theme_paths.clone();
    opts.skip_branch_prompt = ui.skip_branch_prompt;
    opts.show_thinking = ui.show_thinking;
    opts.external_editor = ui.external_editor;
    opts.auto_compact = ui.auto_compact;
    opts.prefs = ui.prefs.clone();
    // `--tui-mode` wins over `tuiMode`, as in Pi.
    opts.regular = args
        .tui_mode
        .as_deref()
        .or_else(|| env.settings.config.get("tuiMode").and_then(Value::as_str))
        == Some("regular");
    opts.scoped_models = ui.scoped_models.iter().map(|(k, _)| k.clone()).collect();
    opts.scoped_thinking = ui
        .scoped_models
        .iter()
        .filter_map(|(k, l)| l.map(|l| (k.clone(), l)))
        .collect();
    opts.loaded = ui.loaded;
    opts.commands = ui.commands;
    opts.commands.extend(extension_commands(&host));
    // Settings and resource problems were printed by `Env::new` before the screen switched.
    opts.thinking = agent.thinking_level();
    opts.model = agent.model().map(|m| ModelInfo::from_engine(&m));
    opts.store = pi_storage::open_store(&env.home.spec, &env.home.store_options).ok();
    opts.store_spec = Some((env.home.spec.clone(), env.home.store_options.clone()));
    let exit_host = Arc::clone(&host);
    let exit_agent_dir = env.home.agent_dir.clone();
    let driver =
        AgentSessionDriver::new(host, env, args, runtime.handle().clone(), answers, incoming);
    opts.driver = Some(Box::new(driver));
    let code = super::run(opts);
    // Running tasks (a prompt mid-stream) are dropped with the runtime.
    runtime.shutdown_background();
    // After the screen is restored, as Pi: how to come back to the session (the one open
    // at exit, which /resume, /new or /fork may have changed).
    if code.is_ok() && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        let agent = exit_host.agent();
        let file = agent.session_file();
        let hint = super::exit_hint::resume_hint(
            file.as_deref(),
            &agent.session_id(),
            &exit_host.cwd(),
            &exit_agent_dir,
        );
        if let Some(hint) = hint {
            print!("{hint}");
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::tagged;
    use serde_json::json;

    #[test]
    fn completions_carry_pis_source_tags() {
        let info = |source: &str, scope: &str| json!({"source": source, "scope": scope});
        assert_eq!(tagged("Do it", Some(&info("auto", "user"))), "[u] Do it");
        assert_eq!(
            tagged("Do it", Some(&info("local", "project"))),
            "[p] Do it"
        );
        assert_eq!(tagged("", Some(&info("cli", "temporary"))), "[t]");
        assert_eq!(
            tagged("Pkg", Some(&info("npm:@a/b@1.0.0", "user"))),
            "[u:npm:@a/b@1.0.0] Pkg"
        );
        assert_eq!(
            tagged("Pkg", Some(&info("git:github.com/o/r@v2", "project"))),
            "[p:git:github.com/o/r@v2] Pkg"
        );
        assert_eq!(
            tagged("Local pkg", Some(&info("../pkg", "user"))),
            "[u] Local pkg"
        );
        assert_eq!(tagged("MCP", Some(&info("builtin", "temporary"))), "MCP");
        assert_eq!(tagged("No info", None), "No info");
    }
}
