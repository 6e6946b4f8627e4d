//! Pi's TypeScript extensions, run unchanged in a Node sidecar (see docs/extensions.md).
//!
//! [`Extensions::start`] starts the sidecar (only when an extension is configured), loads
//! every extension as Pi's loader does and reports what they registered. Their tools become
//! ordinary agent tools ([`ExtensionTool`]); their `tool_call`, `input` and
//! `before_agent_start` handlers run through [`crate::agent::AgentHooks`] and
//! [`Extensions::input`]; `/name` commands through [`Extensions::run_command`]. What the
//! extensions do on their own (`appendEntry`, `sendMessage`, `ctx.ui`) arrives as sidecar
//! notifications and is applied to the attached agent.
//!
//! Failures never end the run: a hook that throws or times out, or a sidecar that exits, is
//! reported (`extension_error` in RPC mode, `Extension error (<path>): …` on stderr
//! otherwise) and the agent goes on as if the hook had not been there.

mod bundle;
mod discover;
mod execute_tool;
mod forward;
mod oauth;
mod providers;
mod request_hooks;
mod sidecar;
mod state;
mod tool;
pub mod trust;
mod virtual_models;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

pub use discover::{extension_paths, DiscoverOptions};
use execute_tool::ToolMessage;
pub use providers::{with_providers, ModelRefresh};
pub use sidecar::Sidecar;
pub use state::set_ui_themes;
pub use tool::ExtensionTool;
pub use virtual_models::{virtual_model_of, with_virtual_models};

use crate::agent::{AgentSession, InputMessage};

/// How long a hook (`tool_call`, `input`, `before_agent_start`, a command) or loading may
/// take before the agent goes on without it (`PI_EXTENSION_TIMEOUT_MS` overrides).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// How long loading (transpiling and running the factories) may take at least.
pub const DEFAULT_LOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the providers' `refreshModels` may take together (Pi's catalog refreshes give
/// up after 15 s and keep the models they had).
const MODEL_REFRESH_TIMEOUT: Duration = Duration::from_secs(15);

/// Which front end runs the extensions: Pi's `ctx.mode` and whether `ctx.hasUI`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiMode {
    /// `-p`: no UI (`ctx.hasUI` false).
    Print,
    /// `--mode json`: no UI.
    Json,
    /// `--mode rpc`: dialogs over the extension-UI sub-protocol.
    Rpc,
    /// The interactive TUI: dialogs and text lines on its screen.
    Tui,
}

impl UiMode {
    fn as_str(self) -> &'static str {
        match self {
            UiMode::Print => "print",
            UiMode::Json => "json",
            UiMode::Rpc => "rpc",
            UiMode::Tui => "tui",
        }
    }

    fn has_ui(self) -> bool {
        matches!(self, UiMode::Rpc | UiMode::Tui)
    }
}

/// Writes a record for the client (RPC: a stdout line).
pub type RecordSink = Arc<dyn Fn(Value) + Send + Sync>;

/// Starts a run in the background (`pi.sendUserMessage`, or `pi.sendMessage` with
/// `triggerTurn`, while the agent is idle, outside a command): the front end's way to run one.
pub type PromptRunner = Arc<dyn Fn(InputMessage) + Send + Sync>;

/// Carries out a session replacement a command asked for (`ctx.newSession`, `ctx.fork`,
/// `ctx.switchSession`): whether an extension cancelled it, or why it failed.
pub type SessionControl = Arc<
    dyn Fn(crate::host::Replacement) -> futures::future::BoxFuture<'static, Result<bool, String>>
        + Send
        + Sync,
>;

/// Carries out Pi's `/reload` for a command's `ctx.reload()` (set by the front end): the
/// extensions hear `session_shutdown`, settings and resources are read again, the extensions
/// are loaded again in a new process, then `session_start` and `resources_discover` follow
/// (see [`crate::host::Host::reload_begin`]).
pub type ReloadControl =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// What starting the extensions needs.
pub struct StartOptions {
    /// Extension files in load order.
    pub paths: Vec<PathBuf>,
    /// Where they were found (Pi's `sourceInfo` of their tools and commands).
    pub provenance: crate::config::Provenance,
    /// Where the session works (`ctx.cwd`, relative paths).
    pub cwd: PathBuf,
    /// The front end.
    pub mode: UiMode,
    /// RPC records (`extension_ui_request`, `extension_error`); `None` prints errors on stderr.
    pub records: Option<RecordSink>,
    /// The active tools, for `pi.getAllTools()`.
    pub active_tools: Vec<Arc<dyn crate::tools::Tool>>,
    /// Command-line options for `pi.registerFlag` flags, as given (`--plan`, `--name=v`).
    pub flags: Vec<String>,
}

/// What `resources_discover` handlers contributed: absolute paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiscoveredResources {
    /// Skill files or directories.
    pub skill_paths: Vec<PathBuf>,
    /// Prompt-template files or directories.
    pub prompt_paths: Vec<PathBuf>,
    /// Theme files or directories.
    pub theme_paths: Vec<PathBuf>,
    /// The extension file behind each of those paths.
    pub contributors: Vec<(PathBuf, PathBuf)>,
}

impl DiscoveredResources {
    /// Whether no handler contributed anything.
    pub fn is_empty(&self) -> bool {
        self.skill_paths.is_empty() && self.prompt_paths.is_empty() && self.theme_paths.is_empty()
    }

    /// Records in `provenance` that the contributed paths come from their extensions (Pi's
    /// `extension:<name>` sourceInfo of what `resources_discover` adds).
    pub fn record_provenance(&self, provenance: &mut crate::config::Provenance) {
        for (path, extension) in &self.contributors {
            provenance.add(path, crate::config::SourceInfo::contributed_by(extension));
        }
    }
}

/// A failed extension: its path and Pi's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The path as configured.
    pub path: String,
    /// `Failed to load extension: …` or `Extension does not export a valid factory function: …`.
    pub error: String,
}

/// What an `input` handler decided.
#[derive(Debug, Clone, PartialEq)]
pub enum InputOutcome {
    /// Send the text (maybe transformed) as the prompt.
    Continue(String),
    /// An extension handled it: nothing is sent.
    Handled,
}

/// The loaded extensions of one run.
pub struct Extensions {
    sidecar: Arc<Sidecar>,
    /// Tools as registered (`name`, `label`, `description`, `parameters`, …).
    pub tools: Vec<Value>,
    /// Commands: `(name, description)`.
    pub commands: Vec<(String, Option<String>)>,
    /// Events some extension handles.
    pub events: Vec<String>,
    /// Extensions that failed to load.
    pub errors: Vec<LoadError>,
    /// Command-line options no extension registered a flag for.
    pub unknown_flags: Vec<String>,
    /// Virtual models as declared (`{provider, id, name, thinkingLevels, …}`); see
    /// [`with_virtual_models`].
    pub virtual_models: Vec<Value>,
    /// Keyboard shortcuts (`pi.registerShortcut`): `(key as registered, description)`.
    pub shortcuts: Vec<(String, Option<String>)>,
    /// Where each command comes from, by command name (`get_commands`' `sourceInfo`).
    pub command_sources: HashMap<String, Value>,
    shared: Arc<Shared>,
    timeout: Duration,
}

/// What sidecar notifications need: the agent to write to and where records go.
struct Shared {
    agent: Mutex<Option<AgentSession>>,
    records: Option<RecordSink>,
    /// Running extension tools' channels (partial results, `ctx.executeTool()` calls), by
    /// tool call id.
    updates: Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<ToolMessage>>>,
    /// Open RPC dialogs: UI request id → sidecar request id.
    dialogs: Mutex<HashMap<String, Value>>,
    sidecar: Mutex<Option<Arc<Sidecar>>>,
    /// Every built-in tool, for the shims' `createReadTool(cwd)` and friends.
    builtin: Vec<Arc<dyn crate::tools::Tool>>,
    /// What `pi.getCommands()` lists after the extensions' commands (see
    /// [`Extensions::set_host_commands`]).
    host_commands: Mutex<Value>,
    cwd: PathBuf,
    /// The extensions these notifications belong to (for tools registered later).
    this: Mutex<Weak<Extensions>>,
    /// The sidecar's copy of the session; its lock also orders the syncs.
    sync: tokio::sync::Mutex<state::SyncMark>,
    /// Held while the providers' models refresh: refreshes run one after another, so one
    /// started later (a provider registered meanwhile) has the last word.
    refreshing: tokio::sync::Mutex<()>,
    /// Events handlers were registered for after loading.
    late_events: Mutex<Vec<String>>,
    /// `pi.sendMessage(…, {deliverAs: "nextTurn"})` messages for the next prompt.
    next_turn: Mutex<Vec<Value>>,
    /// Runs extensions asked for while idle (`sendUserMessage`, `sendMessage` with
    /// `triggerTurn`) that wait for a command to end or for print mode's next step.
    pending_runs: Mutex<Vec<InputMessage>>,
    /// Commands running now: a user message sent meanwhile becomes the prompt the command
    /// turns into ([`Extensions::take_pending_run`]).
    in_command: AtomicUsize,
    runner: Mutex<Option<PromptRunner>>,
    /// How commands replace the session (set by the host).
    session_control: Mutex<Option<SessionControl>>,
    /// How commands' `ctx.reload()` reloads (set by the front end).
    reload_control: Mutex<Option<ReloadControl>>,
    /// Tools registered after loading (`tools_changed`), by name.
    late_tools: Mutex<Vec<String>>,
    /// A reload replaced these extensions: their process stops once no command runs in it.
    retired: std::sync::atomic::AtomicBool,
    /// Agent events for the extensions' notification handlers, in order.
    forward: forward::Forwarder,
    /// The runtime the sidecar's tasks run on.
    runtime: tokio::runtime::Handle,
    /// Requests of providers registered with `streamSimple`, running in the sidecar.
    provider_streams: providers::ProviderStreams,
    /// Logins of providers registered with `oauth`.
    oauth_logins: oauth::OAuthLogins,
    /// What `oauth.modifyModels` made of providers' models.
    credential_models: providers::CredentialModels,
    /// Answers `project_trust` handlers' dialogs while [`Preloaded::project_trust`] runs
    /// with one.
    trust_dialog: Mutex<Option<trust::TrustDialog>>,
    /// Providers registered in the config form (`{name, config}`; see [`with_providers`]),
    /// as last declared or refreshed.
    providers: Mutex<Vec<Value>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("tools", &self.tools.len())
            .field("commands", &self.commands)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The providers as now declared (registered, unregistered or refreshed): their
    /// streams and logins are registered, and the attached agent's catalog follows.
    fn providers_changed(self: &Arc<Self>, declared: Vec<Value>) {
        *lock(&self.providers) = declared.clone();
        if let Some(agent) = self.agent() {
            providers::register_stream_apis(self, &declared);
            providers::register_auth_resolvers(self, &declared);
            oauth::register_flows(self, &declared);
            let (registry, errors) = providers::with_declared(self, agent.registry(), &declared);
            for e in errors {
                self.report_error("<extension>", "registerProvider", &e);
            }
            agent.set_registry(registry, None);
        }
    }

    fn report_error(&self, extension_path: &str, event: &str, error: &str) {
        match &self.records {
            Some(records) => records(json!({
                "type": "extension_error",
                "extensionPath": extension_path,
                "event": event,
                "error": error,
            })),
            None => eprintln!("Extension error ({extension_path}): {error}"),
        }
    }

    fn agent(&self) -> Option<AgentSession> {
        lock(&self.agent).clone()
    }

    /// A notification or request from the sidecar.
    fn inbound(self: &Arc<Self>, method: &str, params: Value, id: Option<Value>) {
        let text = |k: &str| {
            params
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match method {
            "extension_error" => {
                self.report_error(&text("extensionPath"), &text("event"), &text("error"))
            }
            "tool_update" => {
                let partial = params.get("partial").cloned().unwrap_or(Value::Null);
                self.to_running_tool(&text("toolCallId"), ToolMessage::Update(partial));
            }
            "execute_tool" => {
                if let Some(id) = id {
                    let caller = text("toolCallId");
                    let tx = lock(&self.updates).get(&caller).cloned();
                    let message = ToolMessage::Execute {
                        request: id.clone(),
                        params: params.clone(),
                    };
                    if tx.is_none_or(|tx| tx.send(message).is_err()) {
                        let outcome = execute_tool::unavailable_outcome(&caller, &params);
                        self.answer_sidecar(id, outcome);
                    }
                }
            }
            "abort_execute_tool" => {
                let key = params.get("key").cloned().unwrap_or(Value::Null);
                self.to_running_tool(&text("toolCallId"), ToolMessage::Abort { key });
            }
            "ui" => self.ui(params, id),
            "run_builtin" => {
                if let Some(id) = id {
                    self.run_builtin(params, id);
                }
            }
            "append_entry" => {
                if let Some(agent) = self.agent() {
                    let entry = pi_formats::entry::NewEntry::Custom {
                        custom_type: text("customType"),
                        data: params.get("data").cloned().filter(|d| !d.is_null()),
                    };
                    if let Err(e) = agent.append(entry) {
                        self.report_error("<extension>", "appendEntry", &e.to_string());
                    }
                }
            }
            "send_message" => self.send_message(&params),
            "set_session_name" => {
                if let Some(agent) = self.agent() {
                    let _ = agent.set_session_name(&text("name"));
                }
            }
            "handles" => {
                let mut late = lock(&self.late_events);
                let event = text("event");
                if !late.contains(&event) {
                    late.push(event);
                }
            }
            "tools_changed" => self.tool_registered(&params),
            "virtual_models_changed" => {
                if let Some(agent) = self.agent() {
                    let declared = params
                        .get("models")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    agent.set_registry(with_virtual_models(agent.registry(), &declared), None);
                }
            }
            "stream_event" => self.provider_streams.event(&params),
            "builtin_stream" => {
                if let Some(id) = id {
                    providers::builtin_stream(self, params, id);
                }
            }
            "abort_builtin_stream" => providers::abort_builtin_stream(self, &params),
            "oauth_event" => self.oauth_logins.event(&params),
            "trust_dialog" => {
                if let Some(id) = id {
                    trust::dialog(self, &params, id);
                }
            }
            "oauth_prompt" => {
                if let Some(id) = id {
                    self.oauth_logins.prompt(self, &params, id);
                }
            }
            "providers_changed" => {
                let declared = params
                    .get("providers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                self.providers_changed(declared);
                providers::refresh_after_registration(self);
            }
            "set_active_tools" => {
                if let Some(agent) = self.agent() {
                    let names: Vec<String> = params
                        .get("names")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|n| n.as_str().map(str::to_string))
                        .collect();
                    agent.set_active_tools(&names);
                }
            }
            "set_label" => {
                if let Some(agent) = self.agent() {
                    let label = params
                        .get("label")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let entry = pi_formats::entry::NewEntry::Label {
                        target_id: text("entryId"),
                        label,
                    };
                    if let Err(e) = agent.append(entry) {
                        self.report_error("<extension>", "setLabel", &e.to_string());
                    }
                }
            }
            "send_user_message" => self.send_user_message(&params),
            "set_thinking_level" => {
                if let Some(agent) = self.agent() {
                    if let Some(level) = pi_formats::message::ThinkingLevel::parse(&text("level")) {
                        let _ = agent.set_thinking_level(level);
                    }
                }
            }
            "set_model" => {
                if let Some(id) = id {
                    // As Pi's `setModel`, the extensions' `model_select` handlers have run
                    // when the call resolves.
                    let this = self.clone();
                    let (provider, model_id) = (text("provider"), text("id"));
                    self.runtime.spawn(async move {
                        let events = this.set_model(&provider, &model_id);
                        let ok = events.is_some();
                        let ext = lock(&this.this).upgrade();
                        if let Some(ext) = ext {
                            for (name, payload) in events.unwrap_or_default() {
                                ext.notify(name, payload).await;
                            }
                        }
                        this.answer_sidecar(id, json!(ok));
                    });
                }
            }
            "navigate_tree" => {
                if let Some(id) = id {
                    self.navigate_tree(params, id);
                }
            }
            "wait_for_idle" => {
                if let Some(id) = id {
                    self.wait_for_idle(id);
                }
            }
            "replace_session" => {
                if let Some(id) = id {
                    self.replace_session(params, id);
                }
            }
            "boundary_context" => {
                if let Some(id) = id {
                    let drafts = params
                        .get("entries")
                        .and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    let answer = match self.agent() {
                        Some(agent) => match agent.boundary_context(&text("event"), drafts) {
                            Ok(context) => json!({ "context": context }),
                            Err(e) => json!({ "error": e }),
                        },
                        None => json!({ "error": "no session is open" }),
                    };
                    self.answer_sidecar(id, answer);
                }
            }
            "append_entries" => {
                if let Some(id) = id {
                    let answer = match self.append_built(&params) {
                        Ok(()) => Value::Null,
                        Err(e) => json!({ "error": e }),
                    };
                    self.answer_sidecar(id, answer);
                }
            }
            "compact" => {
                if let Some(id) = id {
                    self.compact(params, id);
                }
            }
            "reload" => {
                if let Some(id) = id {
                    self.reload(id);
                }
            }
            "abort" => {
                if let Some(agent) = self.agent() {
                    agent.abort();
                }
            }
            _ => {}
        }
    }

    /// Hands `message` to the running extension tool call `call_id`, if it still runs.
    fn to_running_tool(&self, call_id: &str, message: ToolMessage) {
        if let Some(tx) = lock(&self.updates).get(call_id) {
            let _ = tx.send(message);
        }
    }

    /// A tool an extension registered after loading: the tool options filter and activate
    /// it as they did the start-up tools; the agent (and codemode scripts, `tool_search`,
    /// for `codemode` and `deferred` ones) can call it from now on.
    fn tool_registered(&self, params: &Value) {
        let (Some(agent), Some(ext)) = (self.agent(), lock(&self.this).upgrade()) else {
            return;
        };
        if let Some(info) = params.get("tool") {
            let tool = ExtensionTool::new(info, ext);
            {
                let mut late = lock(&self.late_tools);
                let name = crate::tools::Tool::name(&tool);
                if !late.iter().any(|n| n == name) {
                    late.push(name.to_string());
                }
            }
            let default_active = tool.default_active();
            agent.register_extension_tool(Arc::new(tool), default_active);
        }
    }

    /// `pi.sendMessage(message, {deliverAs, triggerTurn})` as Pi delivers it: `nextTurn`
    /// waits for the next prompt; while streaming, a steering (the default) or follow-up
    /// message, or with `triggerTurn: false` a message written at the end of the turn; while
    /// idle, a run started by the message (`triggerTurn`) or a message appended at once.
    fn send_message(&self, params: &Value) {
        let message = params.get("message").cloned().unwrap_or(Value::Null);
        let deliver = params.pointer("/options/deliverAs").and_then(Value::as_str);
        let trigger = params
            .pointer("/options/triggerTurn")
            .and_then(Value::as_bool);
        if deliver == Some("nextTurn") {
            lock(&self.next_turn).push(message);
            return;
        }
        let Some(agent) = self.agent() else { return };
        let written = if agent.is_streaming() && trigger != Some(false) {
            match deliver {
                Some("followUp") => agent.follow_up(InputMessage::Custom(message)),
                _ => agent.steer(InputMessage::Custom(message)),
            }
            Ok(())
        } else if trigger == Some(true) {
            self.start_run(InputMessage::Custom(message));
            Ok(())
        } else {
            agent.append_custom_message_after_turn(message)
        };
        if let Err(e) = written {
            self.report_error("<extension>", "sendMessage", &e.to_string());
        }
    }

    /// `pi.sendUserMessage`: while the agent streams, a steering or follow-up message; while
    /// it is idle, the prompt the running command turns into, or a run of its own.
    fn send_user_message(&self, params: &Value) {
        let Some(agent) = self.agent() else { return };
        let (text, images) = user_content(params.get("content"));
        let deliver = params.pointer("/options/deliverAs").and_then(Value::as_str);
        if agent.is_streaming() {
            let message = InputMessage::User { text, images };
            match deliver {
                Some("followUp") => agent.follow_up(message),
                Some("steer") => agent.steer(message),
                _ => self.report_error(
                    "<extension>",
                    "sendUserMessage",
                    "Agent is busy: pass deliverAs \"steer\" or \"followUp\" to queue the message",
                ),
            }
            return;
        }
        self.start_run(InputMessage::User { text, images });
    }

    /// A run an extension asked for while idle: the front end starts it now, unless a
    /// command is running (the command then turns into it) or there is no front-end runner
    /// (print mode runs it after the current step).
    fn start_run(&self, start: InputMessage) {
        let runner = lock(&self.runner).clone();
        match runner {
            Some(run) if self.in_command.load(Ordering::SeqCst) == 0 => run(start),
            _ => lock(&self.pending_runs).push(start),
        }
    }

    /// A command's `ctx.waitForIdle()`: answered once no run is in progress. Runs the
    /// command asked for (`sendUserMessage`, `sendMessage` with `triggerTurn`) wait for the
    /// command to end; one waiting for them runs them now, as Pi would have started them.
    fn wait_for_idle(self: &Arc<Self>, id: Value) {
        let this = self.clone();
        self.runtime.spawn(async move {
            if let Some(agent) = this.agent() {
                loop {
                    let next = {
                        let mut pending = lock(&this.pending_runs);
                        (!pending.is_empty()).then(|| pending.remove(0))
                    };
                    let Some(start) = next else { break };
                    if let Err(e) = agent.run(start).await {
                        this.report_error("<extension>", "waitForIdle", &e.to_string());
                    }
                }
                agent.wait_for_idle().await;
            }
            // What the run wrote is readable through ctx.sessionManager when the call resolves.
            this.sync_state().await;
            this.answer_sidecar(id, Value::Null);
        });
    }

    /// A command's `ctx.newSession`, `ctx.fork`, `ctx.switchSession`: the host's own
    /// session replacement (the one `/new`, `/fork`, `/resume` use, with its
    /// `session_before_*` gates and events), answered `{cancelled}` or `{error}`.
    fn replace_session(self: &Arc<Self>, params: Value, id: Value) {
        let this = self.clone();
        self.runtime.spawn(async move {
            let control = lock(&this.session_control).clone();
            let answer = match (control, this.replacement_of(&params)) {
                (None, _) => json!({"error": "Session control is not available in this mode"}),
                (_, Err(e)) => json!({ "error": e }),
                (Some(control), Ok(change)) => match control(change).await {
                    Ok(cancelled) => json!({ "cancelled": cancelled }),
                    Err(e) => json!({ "error": e }),
                },
            };
            // `withSession` and what follows read the session that is current now.
            this.sync_state().await;
            this.answer_sidecar(id, answer);
        });
    }

    /// The host operation a `replace_session` request asks for.
    fn replacement_of(&self, params: &Value) -> Result<crate::host::Replacement, String> {
        let text = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_string);
        match text("op").as_deref() {
            Some("new") => Ok(crate::host::Replacement::New {
                parent: text("parentSession"),
            }),
            Some("switch") => Ok(crate::host::Replacement::Resume {
                location: text("sessionPath").ok_or("switchSession needs a session path")?,
                missing_cwd: crate::host::MissingCwd::Continue,
            }),
            Some("fork") => {
                let entry_id = text("entryId").ok_or("fork needs an entry id")?;
                if text("position").as_deref() != Some("at") {
                    return Ok(crate::host::Replacement::Fork { entry_id });
                }
                // Forking "at" an entry copies the path through it into a new session.
                Ok(crate::host::Replacement::ForkAt { entry_id })
            }
            _ => Err("unknown session operation".into()),
        }
    }

    /// The entries a `newSession` `setup` callback wrote (built in the sidecar, ids
    /// included), appended in order. Only the kinds its SessionManager offers are taken.
    fn append_built(&self, params: &Value) -> Result<(), String> {
        const KINDS: [&str; 7] = [
            "message",
            "thinking_level_change",
            "model_change",
            "custom",
            "custom_message",
            "session_info",
            "label",
        ];
        let agent = self.agent().ok_or("No session")?;
        for entry in params
            .get("entries")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
            if !KINDS.contains(&kind) {
                return Err(format!("setup cannot write a \"{kind}\" entry"));
            }
            agent.append_built(entry).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// `ctx.compact({customInstructions})`, as Pi's: a run in progress is aborted first,
    /// then the session is compacted (with the `session_before_compact` gate). Answered
    /// `{result}` (the compaction) or `{error}` for the sidecar's `onComplete`/`onError`.
    fn compact(self: &Arc<Self>, params: Value, id: Value) {
        let this = self.clone();
        self.runtime.spawn(async move {
            let Some(agent) = this.agent() else {
                return this.answer_sidecar(id, json!({"error": "No session"}));
            };
            if agent.is_streaming() {
                agent.abort();
                agent.wait_for_idle().await;
            }
            let instructions = params
                .get("customInstructions")
                .and_then(Value::as_str)
                .map(str::to_string);
            let answer = match agent.compact(instructions).await {
                Ok(result) => json!({ "result": result }),
                Err(e) => json!({"error": e.to_string()}),
            };
            // onComplete reads the compacted session through ctx.sessionManager.
            this.sync_state().await;
            this.answer_sidecar(id, answer);
        });
    }

    /// A command's `ctx.reload()`: Pi's `/reload` flow, carried out by the front end
    /// ([`ReloadControl`]). The answer goes to this process, which keeps running the
    /// command to its end (Pi runs the code after `await ctx.reload()` from the old
    /// version); its context is stale by then, and the process stops when the command ends.
    fn reload(self: &Arc<Self>, id: Value) {
        let this = self.clone();
        self.runtime.spawn(async move {
            let control = lock(&this.reload_control).clone();
            let Some(control) = control else {
                return this.answer_sidecar(
                    id,
                    json!({"error": "ctx.reload() is not available in this mode"}),
                );
            };
            if this.agent().is_some_and(|a| a.is_streaming()) {
                return this.answer_sidecar(
                    id,
                    json!({"error": "Cannot reload while the agent is running"}),
                );
            }
            let outcome = control().await;
            if !this.retired.load(Ordering::SeqCst) {
                this.sync_state().await;
            }
            let answer = match outcome {
                Ok(()) => Value::Null,
                Err(e) => json!({ "error": format!("Reload failed: {e}") }),
            };
            this.answer_sidecar(id, answer);
        });
    }

    /// A command's `ctx.navigateTree(targetId, options)`: Pi's tree navigation (with its
    /// `session_before_tree` and `session_tree` events), answered `{cancelled}` or `{error}`.
    fn navigate_tree(self: &Arc<Self>, params: Value, id: Value) {
        let this = self.clone();
        self.runtime.spawn(async move {
            let Some(agent) = this.agent() else {
                return this.answer_sidecar(id, json!({"error": "No session"}));
            };
            let text = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_string);
            let options = crate::agent::NavigateOptions {
                summarize: params.get("summarize").and_then(Value::as_bool) == Some(true),
                custom_instructions: text("customInstructions"),
                replace_instructions: params.get("replaceInstructions").and_then(Value::as_bool),
                label: text("label"),
            };
            let target = text("targetId").unwrap_or_default();
            let answer = match agent.navigate_tree(&target, options).await {
                Ok(outcome) => json!({"cancelled": outcome.cancelled}),
                Err(e) => json!({"error": e.to_string()}),
            };
            this.answer_sidecar(id, answer);
        });
    }

    /// `pi.setModel`: `None` (the call answers `false`) when the model is unknown or its
    /// provider has no key; else the events the change makes (`model_select` with `source:
    /// "set"`, after `thinking_level_select` when the level moved).
    fn set_model(&self, provider: &str, id: &str) -> Option<Vec<(&'static str, Value)>> {
        let agent = self.agent()?;
        let registry = agent.registry();
        let model = registry.find(provider, id).cloned()?;
        // A virtual model under a provider of its own needs no key (its router's choice
        // is checked per request).
        if !agent.has_api_key(provider) && !registry.is_virtual_only_provider(provider) {
            return None;
        }
        let before = (agent.model(), agent.thinking_level());
        agent.set_model(model.clone()).ok()?;
        Some(crate::host::views::model_select_events(
            before,
            (&model, agent.thinking_level()),
            "set",
        ))
    }

    /// `ctx.ui` calls: RPC gets an `extension_ui_request`; a dialog's answer comes back
    /// through [`Extensions::ui_response`]. Without a client, dialogs are cancelled.
    fn ui(self: &Arc<Self>, params: Value, id: Option<Value>) {
        let Value::Object(mut fields) = params else {
            return;
        };
        fields.retain(|_, v| !v.is_null());
        let ui_id = pi_formats::id::session_id();
        let mut request = serde_json::Map::new();
        request.insert("type".into(), "extension_ui_request".into());
        request.insert("id".into(), ui_id.clone().into());
        request.extend(fields);
        let Some(records) = &self.records else {
            if let Some(id) = id {
                self.answer_sidecar(id, json!({"cancelled": true}));
            }
            return;
        };
        if let Some(id) = id {
            lock(&self.dialogs).insert(ui_id, id);
            if let Some(s) = lock(&self.sidecar).as_ref() {
                s.open_dialogs.fetch_add(1, Ordering::SeqCst);
            }
        }
        records(Value::Object(request));
    }

    /// Runs a built-in tool for an extension's wrapped definition (`createBashTool(cwd)`)
    /// and answers with its result (`{content, details, isError}`).
    fn run_builtin(self: &Arc<Self>, params: Value, id: Value) {
        let this = self.clone();
        tokio::spawn(async move {
            let text = |k: &str| {
                params
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let ctx = crate::tools::ToolContext::new(this.cwd.clone());
            let output = crate::tools::run_tool_call(
                &this.builtin,
                &text("toolCallId"),
                &text("name"),
                params.get("params").cloned().unwrap_or(Value::Null),
                &ctx,
                tokio_util::sync::CancellationToken::new(),
                &crate::tools::ignore_updates,
            )
            .await;
            let mut result = json!({"content": output.content_json(), "isError": output.is_error});
            if let Some(d) = output.details {
                result["details"] = d;
            }
            this.answer_sidecar(id, result);
        });
    }

    async fn sync_state(&self) {
        let Some(agent) = self.agent() else { return };
        let sidecar = lock(&self.sidecar).clone();
        let Some(sidecar) = sidecar else { return };
        let mut mark = self.sync.lock().await;
        let host_commands = lock(&self.host_commands).clone();
        let update = state::state_update(&agent, &mut mark, &host_commands);
        sidecar.tell_raw("set_state", &update).await;
    }

    fn answer_sidecar(&self, id: Value, result: Value) {
        let sidecar = lock(&self.sidecar).clone();
        if let Some(sidecar) = sidecar {
            // On the runtime the sidecar lives on: a TUI dialog is answered from the UI
            // thread, which runs outside it.
            self.runtime
                .spawn(async move { sidecar.answer(id, result).await });
        }
    }
}

impl Extensions {
    /// Starts the sidecar and loads `options.paths`. Fails only when the sidecar cannot run
    /// at all (no Node.js); extensions that fail to load are listed in [`Extensions::errors`].
    pub async fn start(options: StartOptions) -> Result<Arc<Extensions>, String> {
        Self::start_after(None, options).await
    }

    /// Starts the sidecar and loads the extensions that decide the project's trust (Pi's
    /// user/global and `-e` ones) before anything project-local is read; see
    /// [`Preloaded::project_trust`]. [`Extensions::start_after`] loads the rest into the same
    /// process, so no factory runs twice.
    pub async fn preload(options: StartOptions) -> Result<Preloaded, String> {
        let (shared, sidecar, timeout) = Self::spawn(&options)?;
        let paths = options.paths.clone();
        // Nothing can answer a dialog yet (the front end starts after trust): handlers see
        // `ctx.hasUI` false and dialogs answer their defaults.
        let loaded = Self::load(
            &shared,
            &sidecar,
            timeout,
            &options,
            &paths,
            &options.flags,
            false,
        )
        .await;
        let (events, errors) = match loaded {
            Ok(v) => (string_list(&v, "events"), load_errors(&v)),
            Err(e) => (Vec::new(), failed_loads(&paths, &e)),
        };
        Ok(Preloaded {
            shared,
            sidecar,
            timeout,
            paths,
            events,
            errors,
        })
    }

    /// [`Extensions::start`] continuing from `preloaded`: only the paths it did not load yet
    /// are loaded now (their `-e` flags were handed over then).
    pub async fn start_after(
        preloaded: Option<Preloaded>,
        options: StartOptions,
    ) -> Result<Arc<Extensions>, String> {
        let (shared, sidecar, timeout, rest, flags, mut errors) = match preloaded {
            Some(pre) => {
                let rest: Vec<PathBuf> = options
                    .paths
                    .iter()
                    .filter(|p| !pre.paths.contains(p))
                    .cloned()
                    .collect();
                (
                    pre.shared,
                    pre.sidecar,
                    pre.timeout,
                    rest,
                    Vec::new(),
                    pre.errors,
                )
            }
            None => {
                let (shared, sidecar, timeout) = Self::spawn(&options)?;
                let rest = options.paths.clone();
                (
                    shared,
                    sidecar,
                    timeout,
                    rest,
                    options.flags.clone(),
                    Vec::new(),
                )
            }
        };
        let has_ui = options.mode.has_ui();
        let loaded =
            match Self::load(&shared, &sidecar, timeout, &options, &rest, &flags, has_ui).await {
                Ok(v) => v,
                Err(e) => {
                    sidecar.shutdown().await;
                    errors.extend(failed_loads(&rest, &e));
                    return Ok(Arc::new(Extensions {
                        sidecar,
                        tools: Vec::new(),
                        commands: Vec::new(),
                        events: Vec::new(),
                        unknown_flags: Vec::new(),
                        virtual_models: Vec::new(),
                        shortcuts: Vec::new(),
                        command_sources: HashMap::new(),
                        errors,
                        shared,
                        timeout,
                    }));
                }
            };
        let list = |k: &str| {
            loaded
                .get(k)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        errors.extend(load_errors(&loaded));
        *lock(&shared.providers) = list("providers");
        let extensions = Arc::new(Extensions {
            tools: list("tools"),
            commands: list("commands")
                .iter()
                .filter_map(|c| Some((str_of(c, "name")?, str_of(c, "description"))))
                .collect(),
            events: string_list(&loaded, "events"),
            unknown_flags: string_list(&loaded, "unknownFlags"),
            virtual_models: list("virtualModels"),
            shortcuts: list("shortcuts")
                .iter()
                .filter_map(|c| Some((str_of(c, "shortcut")?, str_of(c, "description"))))
                .collect(),
            command_sources: list("commands")
                .iter()
                .filter_map(|c| Some((str_of(c, "name")?, c.get("sourceInfo")?.clone())))
                .collect(),
            errors,
            sidecar,
            shared,
            timeout,
        });
        *lock(&extensions.shared.this) = Arc::downgrade(&extensions);
        extensions.shared.forward.start(&extensions);
        Ok(extensions)
    }

    /// Starts the Node process (nothing loaded yet).
    fn spawn(options: &StartOptions) -> Result<(Arc<Shared>, Arc<Sidecar>, Duration), String> {
        let script =
            bundle::install().map_err(|e| format!("cannot write the extension runtime: {e}"))?;
        let node = std::env::var("PI_NODE").unwrap_or_else(|_| "node".to_string());
        let timeout = std::env::var("PI_EXTENSION_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_HOOK_TIMEOUT);
        let shared = Arc::new(Shared {
            agent: Mutex::new(None),
            records: options.records.clone(),
            updates: Mutex::new(HashMap::new()),
            dialogs: Mutex::new(HashMap::new()),
            sidecar: Mutex::new(None),
            builtin: crate::tools::all_builtin_tools(),
            cwd: options.cwd.clone(),
            this: Mutex::new(Weak::new()),
            sync: tokio::sync::Mutex::new(state::SyncMark::default()),
            refreshing: tokio::sync::Mutex::new(()),
            host_commands: Mutex::new(Value::Array(Vec::new())),
            late_events: Mutex::new(Vec::new()),
            next_turn: Mutex::new(Vec::new()),
            pending_runs: Mutex::new(Vec::new()),
            in_command: AtomicUsize::new(0),
            runner: Mutex::new(None),
            session_control: Mutex::new(None),
            reload_control: Mutex::new(None),
            late_tools: Mutex::new(Vec::new()),
            retired: std::sync::atomic::AtomicBool::new(false),
            forward: forward::Forwarder::default(),
            runtime: tokio::runtime::Handle::current(),
            provider_streams: providers::ProviderStreams::default(),
            oauth_logins: oauth::OAuthLogins::default(),
            credential_models: providers::CredentialModels::default(),
            trust_dialog: Mutex::new(None),
            providers: Mutex::new(Vec::new()),
        });
        let inbound_shared = shared.clone();
        let exit_shared = shared.clone();
        let sidecar = Sidecar::spawn(
            &node,
            &script,
            &options.cwd,
            Arc::new(move |method, params, id| inbound_shared.inbound(method, params, id)),
            Box::new(move |why| {
                exit_shared.report_error(
                    "<extensions>",
                    "process",
                    &format!("The extension process stopped ({why}); extension tools, commands and hooks are unavailable for the rest of the session"),
                );
            }),
        )?;
        *lock(&shared.sidecar) = Some(sidecar.clone());
        Ok((shared, sidecar, timeout))
    }

    /// Loads `paths` into the sidecar; the answer lists everything loaded so far.
    async fn load(
        shared: &Shared,
        sidecar: &Sidecar,
        timeout: Duration,
        options: &StartOptions,
        paths: &[PathBuf],
        flags: &[String],
        has_ui: bool,
    ) -> Result<Value, String> {
        let source_infos: Vec<Value> = paths.iter().map(|p| options.provenance.json(p)).collect();
        let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        sidecar
            .request_bounded(
                "load",
                json!({
                    "paths": paths,
                    "sourceInfos": source_infos,
                    "flags": flags,
                    "cwd": options.cwd.display().to_string(),
                    "mode": options.mode.as_str(),
                    "hasUI": has_ui,
                    "builtinTools": options
                        .active_tools
                        .iter()
                        .map(|t| json!({"name": t.name(), "description": t.description(), "parameters": t.parameters()}))
                        .collect::<Vec<_>>(),
                    "allBuiltinTools": shared
                        .builtin
                        .iter()
                        .map(|t| json!({"name": t.name(), "description": t.description(), "parameters": t.parameters()}))
                        .collect::<Vec<_>>(),
                }),
                // Loading transpiles TypeScript: slower than a hook, and bounded apart.
                timeout.max(DEFAULT_LOAD_TIMEOUT),
            )
            .await
    }

    /// Providers registered in the config form (`{name, config}`; see [`with_providers`]),
    /// with the models their `refreshModels` returned last.
    pub fn providers(&self) -> Vec<Value> {
        lock(&self.shared.providers).clone()
    }

    /// Pi's model refresh for the providers extensions register (all, or those of `only`):
    /// each `refreshModels(context)` runs in the sidecar with `allowNetwork`, the provider's
    /// credential from auth.json, its `baseUrl` and its models-store.json entry (`stored`);
    /// what it publishes with `persist` is written there, and a list it returns replaces the
    /// provider's models. Then `oauth.modifyModels` runs for the providers with a stored
    /// OAuth credential. Both reach the catalog [`Extensions::catalog`] builds and the
    /// attached agent's. A provider whose refresh fails keeps its models; the outcome names
    /// it (Pi's model picker says so). See [`providers::refresh_models`].
    pub async fn refresh_models(
        &self,
        agent_dir: &std::path::Path,
        allow_network: bool,
        only: Option<&[String]>,
    ) -> ModelRefresh {
        providers::refresh_models(self, agent_dir, allow_network, only).await
    }

    /// The catalog the extensions' providers apply to (models.json's included), for
    /// `oauth.modifyModels` before [`Extensions::catalog`] is first asked.
    pub fn set_base_catalog(&self, base: crate::llm::ModelRegistry) {
        *lock(&self.shared.credential_models.base) = Some(base);
    }

    /// `base` with what the extensions add to the catalog: their providers, then their
    /// virtual models. A provider that cannot be added is reported and left out.
    pub fn catalog(&self, base: crate::llm::ModelRegistry) -> crate::llm::ModelRegistry {
        let declared = self.providers();
        providers::register_stream_apis(&self.shared, &declared);
        providers::register_auth_resolvers(&self.shared, &declared);
        self.register_logins();
        self.set_base_catalog(base.clone());
        let (registry, errors) = providers::with_declared(&self.shared, base, &declared);
        for e in errors {
            self.shared
                .report_error("<extensions>", "registerProvider", &e);
        }
        if self.virtual_models.is_empty() {
            return registry;
        }
        with_virtual_models(registry, &self.virtual_models)
    }

    /// Makes the logins of providers registered with `oauth` known to `/login`,
    /// `pi auth login` and the token refresh (also done by [`Extensions::catalog`]).
    pub fn register_logins(&self) {
        oauth::register_flows(&self.shared, &self.providers());
    }

    /// The commands `pi.getCommands()` lists after the extensions' own: built-in
    /// extensions' commands, prompt templates and skills (`get_commands` entries).
    pub fn set_host_commands(&self, commands: Vec<Value>) {
        *lock(&self.shared.host_commands) = Value::Array(commands);
    }

    /// The agent that `appendEntry`, `sendMessage` and session calls act on.
    pub fn attach(&self, agent: AgentSession) {
        *lock(&self.shared.agent) = Some(agent);
    }

    /// Pi's `session_start`, once the session is open (its entries readable through
    /// `ctx.sessionManager`): `reason` is `startup`, `new`, `resume` or `fork`.
    pub async fn session_start(&self, reason: &str, previous_file: Option<&str>) {
        let mut payload = json!({ "reason": reason });
        if let Some(previous) = previous_file {
            payload["previousSessionFile"] = previous.into();
        }
        self.notify("session_start", payload).await;
    }

    /// Pi's `resources_discover` (after `session_start`; `reason` is `startup` or
    /// `reload`): the skill, prompt-template and theme paths the handlers return, relative
    /// paths taken from the cwd. Empty when no extension handles the event.
    pub async fn resources_discover(&self, reason: &str) -> DiscoveredResources {
        let cwd = self.shared.cwd.clone();
        let Some(found) = self
            .emit(
                "resources_discover",
                json!({"cwd": cwd.display().to_string(), "reason": reason}),
            )
            .await
        else {
            return DiscoveredResources::default();
        };
        let home = crate::config::paths::home();
        let paths = |key: &str| -> Vec<PathBuf> {
            found
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|p| crate::config::paths::resolve_path(p, &cwd, home.as_deref()))
                .collect()
        };
        let contributors = found
            .get("contributors")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(path, extension)| {
                let extension = PathBuf::from(extension.as_str()?);
                let path = crate::config::paths::resolve_path(path, &cwd, home.as_deref());
                Some((path, extension))
            })
            .collect();
        DiscoveredResources {
            skill_paths: paths("skillPaths"),
            prompt_paths: paths("promptPaths"),
            theme_paths: paths("themePaths"),
            contributors,
        }
    }

    /// Pi's `session_shutdown` for the session being left (`reason`: `quit`, `new`,
    /// `resume`, `fork`), with the session replacing it when known.
    pub async fn session_shutdown(&self, reason: &str, target_file: Option<&str>) {
        let mut payload = json!({ "reason": reason });
        if let Some(target) = target_file {
            payload["targetSessionFile"] = target.into();
        }
        self.notify("session_shutdown", payload).await;
    }

    /// A `session_before_*` gate: the handlers' result (with `cancel: true` from the first
    /// handler that cancels), `None` when no extension handles the event. A handler that
    /// fails or does not answer in time is reported and the operation goes on, as in Pi.
    pub async fn before(&self, event: &str, payload: Value) -> Option<Value> {
        self.emit(event, payload).await
    }

    /// [`Self::before`] for an operation that can be aborted while its handlers run: when
    /// `abort` fires, the handlers' `event.signal` aborts (Pi passes the operation's own
    /// AbortSignal, which handlers hand on to their model calls).
    pub async fn before_abortable(
        &self,
        event: &str,
        payload: Value,
        abort: &CancellationToken,
    ) -> Option<Value> {
        static NEXT_EMIT: AtomicU64 = AtomicU64::new(1);
        if !self.handles(event) {
            return None;
        }
        let emit_id = NEXT_EMIT.fetch_add(1, Ordering::SeqCst);
        let sidecar = self.sidecar.clone();
        let aborted = abort.clone();
        let watcher = tokio::spawn(async move {
            aborted.cancelled().await;
            sidecar
                .tell("abort_emit", json!({ "emitId": emit_id }))
                .await;
        });
        let result = self.emit_with_id(event, payload, Some(emit_id)).await;
        watcher.abort();
        result.ok().flatten()
    }

    /// How the front end runs a prompt of its own (RPC, the TUI); without one, messages an
    /// extension asks for while idle wait for [`Extensions::take_pending_run`].
    pub fn set_prompt_runner(&self, runner: PromptRunner) {
        *lock(&self.shared.runner) = Some(runner);
    }

    /// How commands' `ctx.newSession`, `ctx.fork` and `ctx.switchSession` are carried out.
    pub fn set_session_control(&self, control: SessionControl) {
        *lock(&self.shared.session_control) = Some(control);
    }

    /// How commands' `ctx.reload()` reloads.
    pub fn set_reload_control(&self, control: ReloadControl) {
        *lock(&self.shared.reload_control) = Some(control);
    }

    /// The names of the tools these extensions registered, while loading and after.
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
            .collect();
        for name in lock(&self.shared.late_tools).iter() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }

    /// Reports the extensions that failed to load as extension errors (event `load`): a
    /// reload goes on without them, where start-up stops.
    pub fn report_load_errors(&self) {
        for e in &self.errors {
            self.shared.report_error(&e.path, "load", &e.error);
        }
    }

    /// A reload replaced these extensions (after their `session_shutdown`): their context
    /// turns stale, as Pi invalidates the old runtime, and their process stops, at once or,
    /// when a command runs in it (the one that called `ctx.reload()`), when it ends.
    pub async fn retire(&self) {
        self.shared.retired.store(true, Ordering::SeqCst);
        if self.sidecar.exited() {
            return;
        }
        self.sidecar.tell("invalidate", json!({})).await;
        if self.shared.in_command.load(Ordering::SeqCst) == 0 {
            self.sidecar.shutdown().await;
        }
    }

    /// The next run an extension asked for while idle (a command's `sendUserMessage` or
    /// `sendMessage` with `triggerTurn`).
    pub fn take_pending_run(&self) -> Option<InputMessage> {
        let mut pending = lock(&self.shared.pending_runs);
        (!pending.is_empty()).then(|| pending.remove(0))
    }

    /// The registered tools as agent tools, with whether registering activates them.
    pub fn registered_tools(self: &Arc<Self>) -> Vec<crate::tools::RegisteredTool> {
        self.tools
            .iter()
            .map(|t| {
                let tool = ExtensionTool::new(t, self.clone());
                crate::tools::RegisteredTool {
                    default_active: tool.default_active(),
                    tool: Arc::new(tool),
                }
            })
            .collect()
    }

    fn handles(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == event)
            || lock(&self.shared.late_events).iter().any(|e| e == event)
    }

    /// Emits `event` to the extensions, bounded by the hook time limit: `Ok(None)` when no
    /// extension handles it; a failure (timeout, dead sidecar) is reported and returned.
    async fn emit_checked(&self, event: &str, payload: Value) -> Result<Option<Value>, String> {
        self.emit_with_id(event, payload, None).await
    }

    /// [`Self::emit_checked`] where `emit_id` names the emit for `abort_emit`.
    async fn emit_with_id(
        &self,
        event: &str,
        payload: Value,
        emit_id: Option<u64>,
    ) -> Result<Option<Value>, String> {
        if !self.handles(event) {
            return Ok(None);
        }
        if self.sidecar.exited() {
            return Err("the extension process is not running".into());
        }
        self.shared.sync_state().await;
        match self
            .sidecar
            .request_bounded(
                "emit",
                json!({"event": event, "payload": payload, "emitId": emit_id}),
                self.timeout,
            )
            .await
        {
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                let e = format!("\"{event}\" handler {e}");
                if !self.sidecar.exited() {
                    self.shared.report_error("<extensions>", event, &e);
                }
                Err(e)
            }
        }
    }

    /// [`Self::emit_checked`] where a failure reads as "no result".
    async fn emit(&self, event: &str, payload: Value) -> Option<Value> {
        self.emit_checked(event, payload).await.ok().flatten()
    }

    /// Emits an event whose result is not used (`session_start`, `agent_end`, …).
    pub async fn notify(&self, event: &str, payload: Value) {
        let _ = self.emit(event, payload).await;
    }

    /// Emits notification events in order without waiting for them (the caller is
    /// synchronous: a model or thinking-level change answered at once, maybe from the TUI's
    /// thread). Events no extension handles are dropped here. They run on the sidecar's
    /// runtime, so the caller needs none.
    pub fn notify_later(self: &Arc<Self>, events: Vec<(&'static str, Value)>) {
        let events: Vec<_> = events
            .into_iter()
            .filter(|(name, _)| self.handles(name))
            .collect();
        if events.is_empty() {
            return;
        }
        let this = self.clone();
        self.shared.runtime.spawn(async move {
            for (name, payload) in events {
                this.notify(name, payload).await;
            }
        });
    }

    /// Pi's `input` event: handlers may transform the text or handle it.
    pub async fn input(&self, text: &str, images: &[Value]) -> InputOutcome {
        let Some(result) = self
            .emit(
                "input",
                json!({"text": text, "images": images, "source": "interactive"}),
            )
            .await
        else {
            return InputOutcome::Continue(text.to_string());
        };
        match result.get("action").and_then(Value::as_str) {
            Some("handled") => InputOutcome::Handled,
            Some("transform") => InputOutcome::Continue(
                result
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or(text)
                    .to_string(),
            ),
            _ => InputOutcome::Continue(text.to_string()),
        }
    }

    /// The extension command `text` invokes (`/name args`), if any: `(name, args)`.
    pub fn command_of(&self, text: &str) -> Option<(String, String)> {
        let rest = text.strip_prefix('/')?;
        let (name, args) = match rest.find(char::is_whitespace) {
            Some(i) => (&rest[..i], rest[i..].trim_start()),
            None => (rest, ""),
        };
        self.commands
            .iter()
            .any(|(n, _)| n == name)
            .then(|| (name.to_string(), args.to_string()))
    }

    /// Runs an extension command to its end (errors are reported, never returned).
    pub async fn run_command(&self, name: &str, args: &str) {
        if self.sidecar.exited() {
            self.shared.report_error(
                "<extensions>",
                &format!("command:{name}"),
                "the extension process is not running",
            );
            return;
        }
        self.shared.sync_state().await;
        self.shared.in_command.fetch_add(1, Ordering::SeqCst);
        // A command may wait for the user or run long work: no time limit.
        let outcome = self
            .sidecar
            .request("command", json!({"name": name, "args": args}))
            .await;
        let running = self.shared.in_command.fetch_sub(1, Ordering::SeqCst) - 1;
        if let Err(e) = outcome {
            self.shared
                .report_error("<extensions>", &format!("command:{name}"), &e);
        }
        // The command reloaded the extensions: its process was kept for it until now.
        if running == 0 && self.shared.retired.load(Ordering::SeqCst) {
            self.sidecar.shutdown().await;
        }
    }

    /// Runs the handler of a registered shortcut (the TUI saw its key); errors are
    /// reported, never returned.
    pub async fn run_shortcut(&self, shortcut: &str) {
        if self.sidecar.exited() {
            return;
        }
        self.shared.sync_state().await;
        // A handler may open dialogs and wait for the user: no time limit, as a command.
        if let Err(e) = self
            .sidecar
            .request("shortcut", json!({ "shortcut": shortcut }))
            .await
        {
            self.shared
                .report_error("<extensions>", &format!("shortcut:{shortcut}"), &e);
        }
    }

    /// An `extension_ui_response` from the RPC client.
    pub fn ui_response(&self, response: &Value) {
        let Some(ui_id) = response.get("id").and_then(Value::as_str) else {
            return;
        };
        let Some(sidecar_id) = lock(&self.shared.dialogs).remove(ui_id) else {
            return;
        };
        self.sidecar.open_dialogs.fetch_sub(1, Ordering::SeqCst);
        let mut result = response.clone();
        if let Value::Object(m) = &mut result {
            m.remove("type");
            m.remove("id");
        }
        self.shared.answer_sidecar(sidecar_id, result);
    }

    /// Stops the sidecar after `session_shutdown`.
    pub async fn shutdown(&self) {
        self.shared.forward.drain().await;
        self.session_shutdown("quit", None).await;
        self.sidecar.shutdown().await;
    }

    pub(crate) fn sidecar(&self) -> &Arc<Sidecar> {
        &self.sidecar
    }

    /// Brings the sidecar's copy of the session up to date (before a tool runs).
    pub(crate) async fn sync_state(&self) {
        self.shared.sync_state().await;
    }

    pub(crate) fn updates(
        &self,
    ) -> &Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<ToolMessage>>> {
        &self.shared.updates
    }
}

#[async_trait::async_trait]
impl crate::agent::AgentHooks for Extensions {
    async fn tool_call(
        &self,
        call_id: &str,
        parent: Option<&str>,
        tool_name: &str,
        input: &Value,
    ) -> Option<String> {
        let mut payload = json!({"toolName": tool_name, "toolCallId": call_id, "input": input});
        if let Some(parent) = parent {
            payload["parentToolCallId"] = parent.into();
        }
        // Fail-safe as Pi: a handler that cannot answer blocks the call.
        let result = match self.emit_checked("tool_call", payload).await {
            Ok(Some(result)) => result,
            Ok(None) => return None,
            Err(e) => return Some(format!("Extension failed, blocking execution: {e}")),
        };
        (result.get("block").and_then(Value::as_bool) == Some(true)).then(|| {
            result
                .get("reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .unwrap_or("Tool execution was blocked")
                .to_string()
        })
    }

    async fn before_agent_start(
        &self,
        start: &InputMessage,
        system_prompt: &str,
    ) -> crate::agent::RunStart {
        // Pi's order after the prompt: "nextTurn" messages, then the handlers' messages.
        let mut messages = std::mem::take(&mut *lock(&self.shared.next_turn));
        // Pi's trigger: `{messageType: "user", prompt, images}` or `{messageType: "custom",
        // message}`.
        let payload = match start {
            InputMessage::User { text, images } => json!({"prompt": text, "images": images,
                "systemPrompt": system_prompt, "messageType": "user"}),
            InputMessage::Custom(message) => json!({"message": custom_wire(message),
                "systemPrompt": system_prompt, "messageType": "custom"}),
        };
        let Some(result) = self.emit("before_agent_start", payload).await else {
            return crate::agent::RunStart {
                messages,
                system_prompt: None,
            };
        };
        messages.extend(
            result
                .get("messages")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        );
        crate::agent::RunStart {
            messages,
            system_prompt: result
                .get("systemPrompt")
                .and_then(Value::as_str)
                .filter(|p| *p != system_prompt)
                .map(str::to_string),
        }
    }

    async fn tool_result(
        &self,
        call_id: &str,
        parent: Option<&str>,
        tool_name: &str,
        input: &Value,
        result: &Value,
    ) -> Option<Value> {
        let mut payload = json!({"toolCallId": call_id, "toolName": tool_name, "input": input});
        if let Some(parent) = parent {
            payload["parentToolCallId"] = parent.into();
        }
        for key in [
            "content",
            "details",
            "structuredContent",
            "isError",
            "usage",
        ] {
            if let Some(v) = result.get(key) {
                payload[key] = v.clone();
            }
        }
        if payload.get("isError").is_none() {
            payload["isError"] = false.into();
        }
        self.emit("tool_result", payload)
            .await
            .filter(|r| r.as_object().is_some_and(|m| !m.is_empty()))
    }

    fn wants_compaction(&self) -> bool {
        self.handles("session_before_compact")
    }

    async fn before_compact(&self, payload: Value, abort: &CancellationToken) -> Option<Value> {
        self.before_abortable("session_before_compact", payload, abort)
            .await
    }

    async fn compaction_done(&self, event: &'static str, payload: Value) {
        self.notify(event, payload).await;
    }

    fn wants_context(&self) -> bool {
        self.handles("context")
    }

    fn provider_hooks(&self) -> Option<Arc<dyn crate::llm::ProviderHooks>> {
        let payload = self.handles("before_provider_request");
        let response = self.handles("after_provider_response");
        let stream = self.handles("provider_stream_event");
        if !payload && !response && !stream {
            return None;
        }
        let extensions = lock(&self.shared.this).upgrade()?;
        Some(Arc::new(request_hooks::RequestHooks {
            extensions,
            payload,
            response,
            stream,
        }))
    }

    fn wants_provider_headers(&self) -> bool {
        self.handles("before_provider_headers")
    }

    async fn provider_headers(
        &self,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Option<serde_json::Map<String, Value>> {
        // The sidecar answers `{headers}` as the handlers left the object; a timeout or a
        // dead sidecar keeps the headers as assembled.
        match self
            .emit("before_provider_headers", json!({ "headers": headers }))
            .await?
            .get_mut("headers")
            .map(Value::take)
        {
            Some(Value::Object(edited)) => Some(edited),
            _ => None,
        }
    }

    fn wants_context_with_system(&self) -> bool {
        self.handles("context_with_system")
    }

    async fn context_with_system(&self, messages: Vec<Value>) -> Option<Vec<Value>> {
        match self
            .emit("context_with_system", json!({ "messages": messages }))
            .await?
            .get_mut("messages")
            .map(Value::take)
        {
            Some(Value::Array(messages)) => Some(messages),
            _ => None,
        }
    }

    fn wants_tree(&self) -> bool {
        self.handles("session_before_tree")
    }

    async fn before_tree(&self, payload: Value) -> Option<Value> {
        self.before("session_before_tree", payload).await
    }

    async fn tree_done(&self, payload: Value) {
        self.notify("session_tree", payload).await;
    }

    async fn context(&self, messages: Vec<Value>) -> Option<Vec<Value>> {
        self.emit("context", json!({ "messages": messages }))
            .await?
            .get("messages")?
            .as_array()
            .cloned()
    }

    async fn route(&self, request: Value) -> Result<Value, String> {
        if self.sidecar.exited() {
            return Err("the extension process is not running".into());
        }
        self.shared.sync_state().await;
        self.sidecar
            .request_bounded("route", request, self.timeout)
            .await
    }

    fn wants_boundary(&self, event: &str) -> bool {
        self.handles(event)
    }

    async fn boundary(&self, event: &str, mut payload: Value) -> Option<Value> {
        // The handlers of events before this one (message_end, …) run first, as in Pi.
        self.shared.forward.flush().await;
        if event == "turn_end" {
            payload["turnIndex"] = self.shared.forward.turn_index().into();
        }
        self.emit(event, payload).await
    }

    fn boundary_error(&self, event: &str, message: &str) {
        self.shared.report_error("<boundary>", event, message);
    }

    fn observe(&self, event: &crate::protocol::Event) {
        self.shared
            .forward
            .observe(event, |name| self.handles(name));
    }
}

/// Extensions loaded before the project's trust is decided (see [`Extensions::preload`]).
pub struct Preloaded {
    shared: Arc<Shared>,
    sidecar: Arc<Sidecar>,
    timeout: Duration,
    paths: Vec<PathBuf>,
    events: Vec<String>,
    errors: Vec<LoadError>,
}

impl std::fmt::Debug for Preloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preloaded")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

/// A `project_trust` handler's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustAnswer {
    /// `"yes"` (true) or `"no"` (false).
    pub trusted: bool,
    /// `remember: true`: the decision is to be saved in `trust.json`.
    pub remember: bool,
}

impl Preloaded {
    /// The extension files loaded.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Stops the process (the run ended before the rest of the extensions were loaded).
    pub async fn shutdown(&self) {
        self.sidecar.shutdown().await;
    }

    /// Pi's `project_trust` for `cwd`: the first handler answering `"yes"` or `"no"` decides;
    /// `None` when none does (`"undecided"`, no handler, or a failure, which is reported).
    /// With `dialog` (the interactive mode's start) handlers see `ctx.hasUI` true and their
    /// `ctx.ui.select` / `confirm` / `input` are asked through it, without a time limit (the
    /// user answers); without, they answer at once.
    pub async fn project_trust(
        &self,
        cwd: &Path,
        dialog: Option<trust::TrustDialog>,
    ) -> Option<TrustAnswer> {
        if !self.events.iter().any(|e| e == "project_trust") || self.sidecar.exited() {
            return None;
        }
        let params = json!({
            "event": "project_trust",
            "payload": {"cwd": cwd.display().to_string()},
            "trustUI": dialog.is_some(),
        });
        let answer = match dialog {
            Some(dialog) => {
                *lock(&self.shared.trust_dialog) = Some(dialog);
                let answer = self.sidecar.request("emit", params).await;
                *lock(&self.shared.trust_dialog) = None;
                answer
            }
            None => {
                self.sidecar
                    .request_bounded("emit", params, self.timeout)
                    .await
            }
        };
        let answer = match answer {
            Ok(v) => v,
            Err(e) => {
                self.shared.report_error(
                    "<extensions>",
                    "project_trust",
                    &format!("\"project_trust\" handler {e}"),
                );
                return None;
            }
        };
        let trusted = match answer.get("trusted").and_then(Value::as_str) {
            Some("yes") => true,
            Some("no") => false,
            _ => return None,
        };
        Some(TrustAnswer {
            trusted,
            remember: answer.get("remember").and_then(Value::as_bool) == Some(true),
        })
    }
}

/// A string list of a load answer.
fn string_list(loaded: &Value, key: &str) -> Vec<String> {
    loaded
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect()
}

/// The failures a load answer lists.
fn load_errors(loaded: &Value) -> Vec<LoadError> {
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    loaded
        .get("errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| LoadError {
            path: str_of(e, "path").unwrap_or_default(),
            error: str_of(e, "error").unwrap_or_default(),
        })
        .collect()
}

/// Every path of a load that did not finish, failed with `error`.
fn failed_loads(paths: &[PathBuf], error: &str) -> Vec<LoadError> {
    paths
        .iter()
        .map(|p| LoadError {
            path: p.display().to_string(),
            error: format!("Failed to load extension: loading {error}"),
        })
        .collect()
}

/// A custom message as Pi's `sendMessage` builds it (`role: "custom"`, content defaulting to
/// an empty list).
fn custom_wire(message: &Value) -> Value {
    let mut wire = json!({
        "role": "custom",
        "customType": message.get("customType").cloned().unwrap_or(Value::Null),
        "content": message.get("content").filter(|c| !c.is_null()).cloned().unwrap_or(json!([])),
        "display": message.get("display").cloned().unwrap_or(Value::Null),
        "timestamp": pi_formats::time::now_millis(),
    });
    if let Some(details) = message.get("details").filter(|d| !d.is_null()) {
        wire["details"] = details.clone();
    }
    wire
}

/// `sendUserMessage` content: a string, or text and image blocks.
fn user_content(content: Option<&Value>) -> (String, Vec<Value>) {
    match content {
        Some(Value::String(text)) => (text.clone(), Vec::new()),
        Some(Value::Array(blocks)) => {
            let text = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n");
            let images = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("image"))
                .cloned()
                .collect();
            (text, images)
        }
        _ => (String::new(), Vec::new()),
    }
}

/// Whether `path` looks like an extension file (Pi loads `.ts` and `.js`).
pub fn is_extension_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("ts" | "js" | "mts" | "mjs" | "cts" | "cjs")
    )
}
