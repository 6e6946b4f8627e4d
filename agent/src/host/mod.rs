//! The session host: one [`AgentSession`] and the whole session lifecycle around it, behind
//! one entry point, [`Host::handle`], that every front end uses.
//!
//! RPC hands it decoded [`Request`]s and prints the response records; the TUI calls the same
//! commands and lifecycle methods for its effects. So `/clone`, `/fork`, `/new`, `/resume`,
//! `!cmd` and input expansion behave the same in every mode, decided once here, as real
//! Pi 1.6.0 does them.

mod lifecycle;
mod replace;
mod sessions;
pub(crate) mod views;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentError, AgentSession, InputMessage};
use crate::config::{Resources, ScopedModel};
use crate::llm::Model;
use crate::protocol::{response, Command, Event, Outcome, Request, StreamingBehavior};

pub use lifecycle::{HostError, MissingCwd, MissingSessionCwd};
pub use replace::{ExtensionLoader, Replaced, Replacement, SessionRefresh, SessionStart};
pub use sessions::SessionHome;
pub use views::{host_commands, model_json, tree_json};

/// Whether a provider has credentials (auth.json, environment, models.json, `--api-key`).
pub type HasAuth = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What the host knows besides the agent: where sessions live, what input expands to, and
/// the `--models` scope. Changes on `/reload` and when a session of another directory opens.
#[derive(Clone)]
pub struct HostSetup {
    /// Where sessions are opened and created.
    pub home: SessionHome,
    /// Skills and prompt templates for input expansion, and the commands `get_commands` lists.
    pub resources: Resources,
    /// `enableSkillCommands`: `/skill:name` expands to the skill.
    pub skill_commands: bool,
    /// `--models` (else `enabledModels`) with each pattern's level: what `cycle_model`
    /// cycles through (every available model when empty).
    pub scoped: Vec<ScopedModel>,
    /// Which providers have credentials: the models a user can pick.
    pub has_auth: HasAuth,
    /// The merged settings (`modelThinkingLevels`, `defaultThinkingLevel` for model switches).
    pub settings: Arc<crate::config::Settings>,
}

/// The agent and its session lifecycle, shared by the tasks that answer commands.
pub struct Host {
    agent: AgentSession,
    setup: Mutex<HostSetup>,
    /// The running `bash` command's cancel switch (`abort_bash`).
    bash_cancel: Mutex<Option<CancellationToken>>,
    /// Loaded extensions: their commands and `input` handlers see prompts first. A reload
    /// replaces them ([`Host::replace_extensions`]).
    extensions: Mutex<Option<Arc<crate::extensions::Extensions>>>,
    /// The front end runs extensions' prompts itself ([`Host::run_extension_prompts`]), for
    /// the extensions a reload loads too.
    runs_extension_prompts: std::sync::atomic::AtomicBool,
    /// Loads the extensions afresh for a replaced session (set by the front end; see
    /// [`Host::replace_session`]).
    extension_loader: Mutex<Option<ExtensionLoader>>,
    session_refresh: Mutex<Option<SessionRefresh>>,
}

/// What becomes of typed input once extensions have seen it.
#[derive(Debug, Clone, PartialEq)]
pub enum PreparedInput {
    /// An extension command ran, or an `input` handler handled the text: nothing is sent.
    Handled,
    /// The message to run: typed text (transformed by `input` handlers, then expanded, with
    /// its images), or the message a command sent (`pi.sendUserMessage`, `pi.sendMessage`
    /// with `triggerTurn`), as it was sent.
    Run(InputMessage),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values stay consistent between statements; a panic elsewhere must not
    // take the host down with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Host {
    /// A host over `agent`, already set up with its session.
    pub fn new(agent: AgentSession, setup: HostSetup) -> Arc<Host> {
        Arc::new(Host {
            agent,
            setup: Mutex::new(setup),
            bash_cancel: Mutex::new(None),
            extensions: Mutex::new(None),
            runs_extension_prompts: std::sync::atomic::AtomicBool::new(false),
            extension_loader: Mutex::new(None),
            session_refresh: Mutex::new(None),
        })
    }

    /// The agent (for views and for what has no command: navigation, labels).
    pub fn agent(&self) -> &AgentSession {
        &self.agent
    }

    /// The models whose provider has credentials, from the agent's current registry.
    pub fn available_models(&self) -> Vec<Model> {
        let has_auth = lock(&self.setup).has_auth.clone();
        let registry = self.agent.registry();
        // The start-up check, plus what the current registry configures itself: a
        // models.json read again by `/reload` may add providers with their own keys.
        let configured = |provider: &str| {
            has_auth(provider)
                || registry.resolve_api_key(provider).is_some()
                || !registry.resolve_headers(provider, None).is_empty()
        };
        let models = registry
            .models
            .iter()
            .filter(|m| configured(&m.provider))
            .cloned()
            .collect();
        // Provider objects' `filterModels(models, credential)` narrow their lists (Pi's
        // `getAvailable`).
        crate::llm::provider_auth::filter_available(models)
    }

    /// Routes prompts through these extensions from now on, and lets their commands replace
    /// the session through [`Host::replace_session`].
    pub fn set_extensions(self: &Arc<Self>, extensions: Arc<crate::extensions::Extensions>) {
        let host = Arc::downgrade(self);
        extensions.set_session_control(Arc::new(move |change| {
            let host = host.clone();
            Box::pin(async move {
                let Some(host) = host.upgrade() else {
                    return Err("the session has ended".to_string());
                };
                match host.replace_session(change).await {
                    Ok(Replaced::Cancelled) => Ok(true),
                    Ok(Replaced::Done { .. }) => Ok(false),
                    Err(e) => Err(e.to_string()),
                }
            })
        }));
        extensions.set_host_commands(views::host_commands(&lock(&self.setup).resources));
        *lock(&self.extensions) = Some(extensions);
    }

    /// Runs the user messages extensions send while the agent is idle as prompts of their
    /// own (RPC and the TUI, where runs go on in the background).
    pub fn run_extension_prompts(&self) {
        self.runs_extension_prompts
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(ext) = self.extensions() {
            let agent = self.agent.clone();
            ext.set_prompt_runner(Arc::new(move |start| {
                let _ = agent.spawn_run(start, || {});
            }));
        }
    }

    /// The loaded extensions, if any.
    pub fn extensions(&self) -> Option<Arc<crate::extensions::Extensions>> {
        lock(&self.extensions).clone()
    }

    /// The start of Pi's reload (`/reload`, a command's `ctx.reload()`): refused while a
    /// response streams; the running extensions hear `session_shutdown` with `reason:
    /// "reload"`. The front end then reads settings and resources again and loads the
    /// extensions again ([`Host::replace_extensions`]), and ends with [`Host::reload_end`].
    pub async fn reload_begin(&self) -> Result<(), String> {
        if self.agent.is_streaming() {
            return Err("Wait for the current response to finish before reloading.".into());
        }
        if let Some(ext) = self.extensions() {
            ext.session_shutdown("reload", None).await;
        }
        Ok(())
    }

    /// The end of a reload: the extensions loaded now hear `session_start` and then
    /// `resources_discover` (`reason: "reload"`); returns the resources they point at.
    pub async fn reload_end(&self) -> crate::extensions::DiscoveredResources {
        self.start_extensions(&SessionStart {
            reason: "reload",
            previous: None,
        })
        .await
    }

    /// Tells the extensions loaded now that their session started (`session_start` with
    /// `start`'s reason and previous file), then asks `resources_discover` (`reason`
    /// `reload` after a reload, `startup` otherwise, as Pi's `bindExtensions`); returns the
    /// resources they point at.
    pub async fn start_extensions(
        &self,
        start: &SessionStart,
    ) -> crate::extensions::DiscoveredResources {
        let Some(ext) = self.extensions() else {
            return Default::default();
        };
        ext.session_start(start.reason, start.previous.as_deref())
            .await;
        let discover = if start.reason == "reload" {
            "reload"
        } else {
            "startup"
        };
        ext.resources_discover(discover).await
    }

    /// How the extensions are loaded afresh for each replaced session (the front end's
    /// discovery and process start-up; without it the running extensions carry on).
    pub fn set_extension_loader(&self, loader: ExtensionLoader) {
        *lock(&self.extension_loader) = Some(loader);
    }

    fn extension_loader(&self) -> Option<ExtensionLoader> {
        lock(&self.extension_loader).clone()
    }

    pub fn set_session_refresh(&self, refresh: SessionRefresh) {
        *lock(&self.session_refresh) = Some(refresh);
    }

    /// A reload's new extensions (`None`: none are configured now) replace the running
    /// ones, as Pi rebuilds its extension runtime: the agent's hooks, the commands, and the
    /// tools (the old extensions' tools leave, a built-in one replaced comes back; the new
    /// ones register, a tool active before staying active). The old extensions retire
    /// ([`crate::extensions::Extensions::retire`]).
    pub async fn replace_extensions(
        self: &Arc<Self>,
        next: Option<Arc<crate::extensions::Extensions>>,
    ) {
        let old = lock(&self.extensions).take();
        let old_tools = old.as_ref().map(|o| o.tool_names()).unwrap_or_default();
        let new_tools = next
            .as_ref()
            .map(|n| n.registered_tools())
            .unwrap_or_default();
        match &next {
            Some(ext) => {
                ext.attach(self.agent.clone());
                self.agent.set_hooks(ext.clone());
                self.set_extensions(ext.clone());
                if self
                    .runs_extension_prompts
                    .load(std::sync::atomic::Ordering::SeqCst)
                {
                    self.run_extension_prompts();
                }
            }
            None => self.agent.clear_hooks(),
        }
        self.agent.replace_extension_tools(&old_tools, &new_tools);
        if let Some(old) = old {
            old.retire().await;
        }
    }

    /// Pi's order for a prompt: an extension `/command` runs instead of being sent; else
    /// `input` handlers may handle or transform the text; then skills and templates expand.
    pub async fn prepare_input(
        &self,
        text: &str,
        images: &[Value],
    ) -> Result<PreparedInput, String> {
        if let Some(ext) = self.extensions() {
            if let Some((name, args)) = ext.command_of(text) {
                ext.run_command(&name, &args).await;
                // A command that sent a message (`pi.sendUserMessage`, `pi.sendMessage` with
                // `triggerTurn`) turns into the run it asked for.
                return Ok(match ext.take_pending_run() {
                    Some(start) => PreparedInput::Run(start),
                    None => PreparedInput::Handled,
                });
            }
            match ext.input(text, images).await {
                crate::extensions::InputOutcome::Handled => return Ok(PreparedInput::Handled),
                crate::extensions::InputOutcome::Continue(t) => {
                    return self
                        .expand(&t)
                        .map(|t| PreparedInput::Run(typed(t, images)))
                }
            }
        }
        self.expand(text)
            .map(|t| PreparedInput::Run(typed(t, images)))
    }

    /// A copy of the current setup.
    pub fn setup(&self) -> HostSetup {
        lock(&self.setup).clone()
    }

    /// The directory sessions are created for and tools run in.
    pub fn cwd(&self) -> String {
        lock(&self.setup).home.cwd.clone()
    }

    /// New resources and skill-command setting (`/reload`).
    pub fn set_resources(&self, resources: Resources, skill_commands: bool) {
        if let Some(ext) = self.extensions() {
            ext.set_host_commands(views::host_commands(&resources));
        }
        let mut setup = lock(&self.setup);
        setup.resources = resources;
        setup.skill_commands = skill_commands;
    }

    /// Works in `cwd` from now on: tools, `!cmd`, new sessions and the prompt's cwd.
    pub fn set_cwd(&self, cwd: String) {
        let mut setup = lock(&self.setup);
        if setup.home.cwd != cwd {
            self.agent.set_cwd(PathBuf::from(&cwd));
            setup.home.cwd = cwd;
        }
    }

    /// What Pi does to typed input before sending it: `/skill:name args` becomes the skill's
    /// instructions (when skill commands are enabled) and `/template args` a prompt template.
    pub fn expand(&self, text: &str) -> Result<String, String> {
        let setup = lock(&self.setup);
        let text = if setup.skill_commands {
            crate::config::expand_skill_command(text, &setup.resources.skills)
                .map_err(|e| e.to_string())?
        } else {
            text.to_string()
        };
        Ok(crate::config::expand_prompt_template(
            &text,
            &setup.resources.prompt_templates,
        ))
    }

    /// Runs one command. `respond` gets the response record exactly once: at once for
    /// commands answered at once, when started or queued for `prompt`, when finished for
    /// `compact` and `bash` (which run on tasks, so `abort` and queries are answered while
    /// they work). Must be called within a tokio runtime.
    pub fn handle(
        self: &Arc<Self>,
        request: Request,
        respond: impl FnOnce(Value) + Send + 'static,
    ) {
        let Request { id, command } = request;
        let kind = command.kind();
        match command {
            Command::Prompt {
                message,
                images,
                streaming_behavior,
            } => self.prompt(id, message, images, streaming_behavior, respond),
            Command::Compact {
                custom_instructions,
            } => {
                let this = self.clone();
                tokio::spawn(async move {
                    let outcome = this
                        .agent
                        .compact(custom_instructions)
                        .await
                        .map(Some)
                        .map_err(|e| e.to_string());
                    respond(response(&id, kind, outcome));
                });
            }
            Command::Bash {
                command,
                exclude_from_context,
            } => {
                let this = self.clone();
                tokio::spawn(async move {
                    let outcome = this.bash(id.clone(), &command, exclude_from_context).await;
                    respond(response(&id, kind, outcome));
                });
            }
            other => match (self.extensions(), replacement_of(&other)) {
                // Extensions may ask the user before the session is replaced: off the loop.
                (Some(_), Some(change)) => {
                    let this = self.clone();
                    tokio::spawn(async move {
                        let outcome = this
                            .replace_session(change)
                            .await
                            .map(|r| Some(replaced_json(r)))
                            .map_err(|e| e.to_string());
                        respond(response(&id, kind, outcome));
                    });
                }
                _ => {
                    let replacing = replacement_of(&other).is_some();
                    let outcome = self.answer(&other);
                    if replacing && outcome.is_ok() {
                        // Before the next command: it sees the new session's settings.
                        let refresh = lock(&self.session_refresh).clone();
                        if let Some(refresh) = refresh {
                            refresh();
                        }
                    }
                    respond(response(&id, kind, outcome))
                }
            },
        }
    }

    fn prompt(
        self: &Arc<Self>,
        id: Option<Value>,
        message: String,
        images: Vec<Value>,
        streaming_behavior: Option<StreamingBehavior>,
        respond: impl FnOnce(Value) + Send + 'static,
    ) {
        if self.extensions().is_some() && !self.agent.is_streaming() {
            // Extension commands and `input` handlers may wait (dialogs): off the loop.
            let this = self.clone();
            tokio::spawn(async move {
                match this.prepare_input(&message, &images).await {
                    Err(e) => respond(response(&id, "prompt", Err(e))),
                    Ok(PreparedInput::Handled) => respond(response(
                        &id,
                        "prompt",
                        Ok(Some(json!({"disposition": "handled"}))),
                    )),
                    Ok(PreparedInput::Run(start)) => this.start_run(id, start, respond),
                }
            });
            return;
        }
        let message = match self.expand(&message) {
            Ok(m) => m,
            Err(e) => return respond(response(&id, "prompt", Err(e))),
        };
        let queued = || Ok(Some(json!({"disposition": "queued"})));
        if self.agent.is_streaming() {
            let outcome = match streaming_behavior {
                Some(StreamingBehavior::Steer) => {
                    self.agent.steer(message);
                    queued()
                }
                Some(StreamingBehavior::FollowUp) => {
                    self.agent.follow_up(message);
                    queued()
                }
                None => Err(AgentError::Busy.to_string()),
            };
            return respond(response(&id, "prompt", outcome));
        }
        self.start_run(id, typed(message, &images), respond);
    }

    /// Starts a run for an expanded prompt (or a command's message) and answers `started`
    /// (or the error).
    fn start_run(
        self: &Arc<Self>,
        id: Option<Value>,
        start: InputMessage,
        respond: impl FnOnce(Value) + Send + 'static,
    ) {
        // The response must go out before the run's first event: `on_started` runs before
        // the run is spawned. A prompt that cannot start answers with its error instead.
        let respond = Arc::new(Mutex::new(Some(respond)));
        let started = respond.clone();
        let started_id = id.clone();
        let result = self.agent.spawn_run(start, move || {
            if let Some(r) = lock(&started).take() {
                r(response(
                    &started_id,
                    "prompt",
                    Ok(Some(json!({"disposition": "started"}))),
                ));
            }
        });
        if let Err(e) = result {
            if let Some(r) = lock(&respond).take() {
                r(response(&id, "prompt", Err(e.to_string())));
            }
        }
    }

    /// `bash` / `!cmd`: runs a command, streams its output as `bash_execution_update` events
    /// and records it as a `bashExecution` message (left out of the context when excluded).
    pub async fn bash(&self, id: Option<Value>, command: &str, exclude: bool) -> Outcome {
        // Pi's `user_bash`: an extension may answer the command instead of running it.
        if let Some(ext) = self.extensions() {
            let payload = json!({"command": command, "excludeFromContext": exclude,
                "cwd": self.agent.cwd().display().to_string()});
            if let Some(result) = ext.before("user_bash", payload).await {
                if let Some(result) = result.get("result").filter(|r| r.is_object()) {
                    return self
                        .agent
                        .record_bash(command, exclude, result, None)
                        .map(Some)
                        .map_err(|e| e.to_string());
                }
            }
        }
        let cancel = CancellationToken::new();
        *lock(&self.bash_cancel) = Some(cancel.clone());
        let agent = &self.agent;
        let result = agent
            .execute_bash(command, exclude, cancel, |delta| {
                agent.emit(Event::BashExecutionUpdate {
                    id: id.clone(),
                    delta: delta.into(),
                });
            })
            .await;
        result.map(Some).map_err(|e| e.to_string())
    }

    /// Stops the running `bash` command, if any.
    pub fn abort_bash(&self) {
        if let Some(t) = lock(&self.bash_cancel).as_ref() {
            t.cancel();
        }
    }
}

/// Typed input as the message a run starts with.
fn typed(text: String, images: &[Value]) -> InputMessage {
    InputMessage::User {
        text,
        images: images.to_vec(),
    }
}

/// The session replacement an RPC command asks for, if it is one.
fn replacement_of(command: &Command) -> Option<Replacement> {
    Some(match command {
        Command::NewSession { parent_session } => Replacement::New {
            parent: parent_session.clone(),
        },
        Command::SwitchSession { session_path } => Replacement::Resume {
            location: session_path.clone(),
            missing_cwd: MissingCwd::Continue,
        },
        Command::Fork { entry_id } => Replacement::Fork {
            entry_id: entry_id.clone(),
        },
        Command::Clone => Replacement::Clone,
        _ => return None,
    })
}

/// Pi's RPC answer to a session replacement (`fork` adds the message's text).
fn replaced_json(replaced: Replaced) -> Value {
    match replaced {
        Replaced::Cancelled => json!({"cancelled": true}),
        Replaced::Done { text: Some(text) } => json!({"text": text, "cancelled": false}),
        Replaced::Done { text: None } => json!({"cancelled": false}),
    }
}
