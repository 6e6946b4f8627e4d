//! The agent: Pi's agent loop and the session runtime around it (`AgentSession`).
//!
//! A run is a sequence of turns. Each turn streams one assistant response from the provider
//! and executes its tool calls (in parallel, results in call order), until the model stops
//! calling tools and no steering or follow-up message is queued. Everything is persisted the
//! way Pi 1.6.0 persists it: each message at its `message_end`, into the in-memory
//! [`Session`] and, through storage's [`LazySession`], into the store (the file appears with
//! the first user or assistant message). The write happens just before
//! `message_end` is emitted, so a client that sees `message_end` finds the message saved.
//!
//! Around the loop the runtime does what Pi's `AgentSession` does: automatic retry of
//! transient provider errors (the failed attempt stays in the file but is hidden from the
//! model with a `context_edit` whose replacement is `null`), compaction on context overflow
//! (then one retry) and after a turn that crossed the threshold, and manual compaction.
//!
//! Events are Pi's JSON objects, handed to an [`EventSink`]; the CLI modes print them.

mod boundary;
mod context_usage;
pub mod events;
mod hooks;
mod input;
pub mod loadout;
mod navigate;
mod nested_call;
mod nested_queue;
mod prepare_loadout;
pub mod prompt;
mod retry;
mod route;
mod run;
mod summarizer;
mod tool_session;
mod user_bash;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use pi_formats::entry::NewEntry;
use pi_formats::message::{AgentMessage, ThinkingLevel};
use pi_storage::lazy::LazySession;
use pi_storage::record::StoredEntry;
use pi_storage::store::SessionStore;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::llm::{Model, ModelRegistry};
use crate::protocol::Event;
use crate::tools::Tool;
use pi_engine::compaction::{BranchSummarySettings, CompactionSettings, RetrySettings};
use pi_engine::context::{self, EntrySource, SessionPath};
use pi_engine::session::Session;

pub use context_usage::ContextUsage;
pub use events::{null_sink, EventSink};
pub use hooks::{AgentHooks, RunStart};
pub use input::InputMessage;
pub use loadout::ToolLoadout;
pub use navigate::{NavigateOptions, NavigateOutcome};
pub use prompt::{PromptBuilder, PromptOptions};
pub use retry::is_retryable_error;
pub use route::{RouteReason, VIRTUAL_MODEL_STATE_ENTRY};
pub(crate) use run::tool_output_json;

/// Why an agent operation failed. Messages are shown to users (RPC `error`, stderr).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No model is selected (none given and none in the session).
    #[error("No model selected. Use --model provider/id or set_model")]
    NoModel,
    /// The model's provider has no API key (none from `--api-key`, auth.json, the
    /// environment or models.json) and no configured headers: Pi refuses before sending.
    #[error("No API key found for {0}.\n\nSet the provider's API key in the environment, in auth.json or models.json, or pass --api-key.")]
    NoApiKey(String),
    /// A prompt arrived while a run is in progress without a streaming behavior.
    #[error("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.")]
    Busy,
    /// Writing to the session store failed.
    #[error("cannot write the session: {0}")]
    Persist(String),
    /// Anything else, with its message.
    #[error("{0}")]
    Other(String),
}

/// How queued messages are delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueMode {
    /// Every queued message at once.
    All,
    /// One message per turn (Pi's default).
    OneAtATime,
}

impl QueueMode {
    /// Pi's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::All => "all",
            QueueMode::OneAtATime => "one-at-a-time",
        }
    }

    /// Parses Pi's spelling.
    pub fn parse(s: &str) -> Option<QueueMode> {
        match s {
            "all" => Some(QueueMode::All),
            "one-at-a-time" => Some(QueueMode::OneAtATime),
            _ => None,
        }
    }
}

/// What the runtime needs besides the session.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Working directory for tools and the prompt's `cwd` section.
    pub cwd: PathBuf,
    /// Models and provider credentials.
    pub registry: ModelRegistry,
    /// The current model.
    pub model: Option<Model>,
    /// The current thinking level.
    pub thinking: ThinkingLevel,
    /// Active tools.
    pub tools: Vec<Arc<dyn Tool>>,
    /// System prompt shaping.
    pub prompt: PromptOptions,
    /// `retry` settings.
    pub retry: RetrySettings,
    /// `compaction` settings.
    pub compaction: CompactionSettings,
    /// `branchSummary` settings (the token reserve of branch summaries).
    pub branch_summary: BranchSummarySettings,
    /// `--api-key`: overrides the provider's key.
    pub api_key: Option<String>,
    /// Finds a provider's key (auth.json, environment) before models.json is consulted.
    pub api_key_resolver: Option<ApiKeyResolver>,
    /// `shellPath`, `shellCommandPrefix` and `<agentDir>/bin` for the bash tool.
    pub shell: ShellOptions,
    /// How model requests are made (`thinkingBudgets`, `httpProxy`, `httpIdleTimeoutMs`,
    /// `images.blockImages`).
    pub requests: RequestOptions,
}

/// Settings that shape each model request of the agent loop.
#[derive(Debug, Clone, Default)]
pub struct RequestOptions {
    /// `thinkingBudgets`: token budgets per level for budget-based thinking.
    pub thinking_budgets: crate::llm::ThinkingBudgets,
    /// A client built with the proxy and idle timeout of the settings (a shared default
    /// client otherwise).
    pub client: Option<reqwest::Client>,
    /// `images.blockImages`: images in user messages and tool results reach the model as
    /// "Image reading is disabled." (they stay in the session).
    pub block_images: bool,
}

/// How the bash tool runs commands (settings `shellPath`, `shellCommandPrefix`).
#[derive(Debug, Clone, Default)]
pub struct ShellOptions {
    /// `shellPath`.
    pub shell_path: Option<PathBuf>,
    /// `shellCommandPrefix`.
    pub command_prefix: Option<String>,
    /// `<agentDir>/bin`, put on `PATH`.
    pub bin_dir: Option<PathBuf>,
}

/// A provider → API key lookup (`engine::config::resolve_api_key` in the CLI).
#[derive(Clone)]
pub struct ApiKeyResolver(pub Arc<KeyLookup>);

/// provider → key.
pub type KeyLookup = dyn Fn(&str) -> Option<String> + Send + Sync;

impl std::fmt::Debug for ApiKeyResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKeyResolver")
    }
}

impl AgentOptions {
    /// The key for `provider`: `--api-key`, then the resolver, then models.json.
    pub(crate) fn api_key_for(&self, provider: &str) -> Option<String> {
        self.api_key
            .clone()
            .or_else(|| self.api_key_resolver.as_ref().and_then(|r| (r.0)(provider)))
            .or_else(|| self.registry.resolve_api_key(provider))
    }
}

/// Where the session is written: a store and Pi's lazy creation, or nowhere (`--no-session`).
#[derive(Debug, Default)]
pub struct Persistence {
    /// The store; `None` keeps the session in memory only.
    pub store: Option<Box<dyn SessionStore>>,
    /// The session in the store (created with the first conversation message).
    pub lazy: Option<LazySession>,
    /// The file the session lives (or will live) in, for JSONL stores.
    pub file: Option<PathBuf>,
}

/// Queued steering and follow-up messages, and the custom messages held for the end of the
/// turn.
#[derive(Debug, Default)]
struct Queues {
    steering: Vec<InputMessage>,
    follow_up: Vec<InputMessage>,
    /// Custom messages sent while streaming that neither steer nor follow up (Pi's
    /// `triggerTurn: false`): written once the turn's tool results are, so they never land
    /// between a tool call and its result.
    after_turn: Vec<Value>,
}

struct State {
    session: Session,
    persist: Persistence,
    opts: AgentOptions,
    /// Every configured tool; `opts.tools` holds the active ones.
    registered: Vec<Arc<dyn Tool>>,
    /// The tool options, which filter tools registered after start-up as they filtered
    /// the start-up ones (`None`: nothing filters them).
    selection: Option<crate::tools::ToolSelection>,
    steering_mode: QueueMode,
    follow_up_mode: QueueMode,
    auto_compaction: bool,
    is_compacting: bool,
    /// What the active tools' `prepareLoadout` hooks returned.
    loadout_changes: crate::tools::LoadoutChanges,
    /// The active and registered tools the hooks last ran for.
    loadout_key: Option<Vec<String>>,
}

struct Shared {
    state: Mutex<State>,
    queues: Mutex<Queues>,
    sink: EventSink,
    /// Set while a run is in progress; cancelled by `abort`.
    run: Mutex<Option<CancellationToken>>,
    /// Woken when a run ends ([`AgentSession::wait_for_idle`]).
    idle: tokio::sync::Notify,
    /// Set while a retry waits; cancelled by `abort_retry`.
    retry_wait: Mutex<Option<CancellationToken>>,
    /// Cancels a manual compaction.
    compaction: Mutex<Option<CancellationToken>>,
    /// Set while a tree navigation runs (it may be summarizing the branch it leaves);
    /// cancelled by `abort_branch_summary`.
    branch_summary: Mutex<Option<CancellationToken>>,
    /// Extension hooks, when extensions are loaded.
    hooks: Mutex<Option<Arc<dyn AgentHooks>>>,
    /// A `before_agent_start` system prompt that replaces the prompt for the running prompt.
    system_override: Mutex<Option<String>>,
    /// Tools loaded during the session (`tool_search`), when MCP servers can be searched.
    loadout: Mutex<Option<Arc<dyn ToolLoadout>>>,
    /// When nested calls may run (`executionMode: "sequential"`).
    nested_queue: nested_queue::NestedQueue,
}

/// The texts of the user messages among `messages`.
fn user_texts(messages: &[InputMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m.user_text().map(str::to_string))
        .collect()
}

/// Locks a mutex, carrying on if a panicking holder poisoned it: the state is only ever
/// changed in small steps that leave it consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a run ended.
#[derive(Debug, Clone, Default)]
pub struct RunOutcome {
    /// The last assistant message of the run.
    pub last_assistant: Option<AgentMessage>,
    /// The run was aborted.
    pub aborted: bool,
}

/// The agent runtime over one session (Pi's `AgentSession`). Cheap to clone; clones share
/// the session, queues and abort state, so a command loop can steer or abort a running
/// prompt from another task.
#[derive(Clone)]
pub struct AgentSession {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for AgentSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSession").finish_non_exhaustive()
    }
}

impl AgentSession {
    /// A runtime over `session`. For a new session call [`AgentSession::start_new`] after.
    pub fn new(
        session: Session,
        persist: Persistence,
        opts: AgentOptions,
        sink: EventSink,
    ) -> AgentSession {
        let auto_compaction = opts.compaction.enabled;
        AgentSession {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    session,
                    persist,
                    registered: opts.tools.clone(),
                    selection: None,
                    opts,
                    steering_mode: QueueMode::OneAtATime,
                    follow_up_mode: QueueMode::OneAtATime,
                    auto_compaction,
                    is_compacting: false,
                    loadout_changes: Default::default(),
                    loadout_key: None,
                }),
                queues: Mutex::new(Queues::default()),
                sink,
                run: Mutex::new(None),
                idle: tokio::sync::Notify::new(),
                retry_wait: Mutex::new(None),
                compaction: Mutex::new(None),
                branch_summary: Mutex::new(None),
                hooks: Mutex::new(None),
                system_override: Mutex::new(None),
                loadout: Mutex::new(None),
                nested_queue: nested_queue::NestedQueue::default(),
            }),
        }
    }

    /// Pi's setup entries of a new session: `model_change` (when a model is selected) and
    /// `thinking_level_change`. Held in memory until the conversation starts.
    pub fn start_new(&self) -> Result<(), AgentError> {
        let (model, level) = {
            let st = lock(&self.shared.state);
            (st.opts.model.clone(), st.opts.thinking)
        };
        if let Some(m) = model {
            self.append(NewEntry::ModelChange {
                provider: m.provider.clone(),
                model_id: m.id.clone(),
            })?;
        }
        self.append(NewEntry::ThinkingLevelChange {
            thinking_level: level.as_str().to_string(),
        })?;
        Ok(())
    }

    pub(crate) fn emit(&self, ev: Event) {
        if let Some(hooks) = self.hooks() {
            hooks.observe(&ev);
        }
        (self.shared.sink)(ev);
    }

    /// Appends an entry to the session and the store. Returns its id.
    pub fn append(&self, entry: NewEntry) -> Result<String, AgentError> {
        let mut st = lock(&self.shared.state);
        append_locked(&mut st, &entry)
    }

    /// Lets extensions shape runs from now on.
    pub fn set_hooks(&self, hooks: Arc<dyn AgentHooks>) {
        *lock(&self.shared.hooks) = Some(hooks);
    }

    /// Runs go on without hooks (a reload left no extensions).
    pub fn clear_hooks(&self) {
        *lock(&self.shared.hooks) = None;
    }

    pub(crate) fn hooks(&self) -> Option<Arc<dyn AgentHooks>> {
        lock(&self.shared.hooks).clone()
    }

    /// Lets tools join the declared set during the session (see [`ToolLoadout`]).
    pub fn set_tool_loadout(&self, loadout: Arc<dyn ToolLoadout>) {
        *lock(&self.shared.loadout) = Some(loadout);
    }

    pub(crate) fn tool_loadout(&self) -> Option<Arc<dyn ToolLoadout>> {
        lock(&self.shared.loadout).clone()
    }

    /// Records an extension's custom message (`pi.sendMessage`, `before_agent_start`) as
    /// Pi does: a `custom_message` entry, announced with `message_start`/`message_end`
    /// carrying `{role: "custom", customType, content, display, details, timestamp}`.
    pub fn append_custom_message(&self, message: &Value) -> Result<String, AgentError> {
        self.record_custom_message(message).map(|(id, _)| id)
    }

    /// [`Self::append_custom_message`], also returning the message as the events carry it
    /// (what a run lists in `agent_end`).
    pub(crate) fn record_custom_message(
        &self,
        message: &Value,
    ) -> Result<(String, Value), AgentError> {
        let text = |k: &str| {
            message
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let content = match message.get("content") {
            Some(c) if !c.is_null() => c.clone(),
            _ => Value::from(""),
        };
        let display = message
            .get("display")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let details = message.get("details").cloned().filter(|d| !d.is_null());
        let mut wire = serde_json::Map::new();
        wire.insert("role".into(), "custom".into());
        wire.insert("customType".into(), text("customType").into());
        wire.insert("content".into(), content.clone());
        wire.insert("display".into(), display.into());
        if let Some(d) = &details {
            wire.insert("details".into(), d.clone());
        }
        wire.insert("timestamp".into(), pi_formats::time::now_millis().into());
        let wire = Value::Object(wire);
        self.emit(Event::MessageStart {
            message: wire.clone(),
        });
        let id = self.append(NewEntry::CustomMessage {
            custom_type: text("customType"),
            content,
            display,
            details,
        });
        self.emit(Event::MessageEnd {
            message: wire.clone(),
        });
        id.map(|id| (id, wire))
    }

    /// Pi's `sendMessage` without a turn (`triggerTurn` not set): while a run streams the
    /// message waits for the end of the current turn (appending it now could put it between
    /// a tool call and its result); otherwise it is appended at once.
    pub fn append_custom_message_after_turn(&self, message: Value) -> Result<(), AgentError> {
        {
            // The queue lock orders this with the end of a run (see `finish_run`), so a
            // message is never left behind by a run that just ended.
            let mut q = lock(&self.shared.queues);
            if self.is_streaming() {
                q.after_turn.push(message);
                return Ok(());
            }
        }
        self.append_custom_message(&message).map(|_| ())
    }

    /// Writes the custom messages held for the end of the turn.
    pub(crate) fn flush_after_turn(&self) -> Result<(), AgentError> {
        let held = std::mem::take(&mut lock(&self.shared.queues).after_turn);
        for message in &held {
            self.append_custom_message(message)?;
        }
        Ok(())
    }

    /// Resolves once no run is in progress (Pi's `waitForIdle`).
    pub async fn wait_for_idle(&self) {
        loop {
            let woken = self.shared.idle.notified();
            tokio::pin!(woken);
            // Registered before the check, so a run ending in between still wakes us.
            woken.as_mut().enable();
            if !self.is_streaming() {
                return;
            }
            woken.await;
        }
    }

    /// Runs `f` with the session.
    pub fn with_session<R>(&self, f: impl FnOnce(&Session) -> R) -> R {
        f(&lock(&self.shared.state).session)
    }

    /// The current model.
    pub fn model(&self) -> Option<Model> {
        lock(&self.shared.state).opts.model.clone()
    }

    /// The model registry.
    pub fn registry(&self) -> ModelRegistry {
        lock(&self.shared.state).opts.registry.clone()
    }

    /// Replaces the model registry (models.json was read again, as on `/reload`), and the
    /// key lookup with it when given (`None` keeps the current one). The current model is
    /// looked up again by provider and id, so its new definition (base URL, context window,
    /// cost) applies to the next request; a model no longer defined stays selected.
    pub fn set_registry(&self, registry: ModelRegistry, api_key_resolver: Option<ApiKeyResolver>) {
        let mut st = lock(&self.shared.state);
        if let Some(current) = &st.opts.model {
            if let Some(found) = registry.find(&current.provider, &current.id) {
                st.opts.model = Some(found.clone());
            }
        }
        st.opts.registry = registry;
        if let Some(resolver) = api_key_resolver {
            st.opts.api_key_resolver = Some(resolver);
        }
    }

    /// The current thinking level.
    pub fn thinking_level(&self) -> ThinkingLevel {
        lock(&self.shared.state).opts.thinking
    }

    /// The working directory.
    pub fn cwd(&self) -> PathBuf {
        lock(&self.shared.state).opts.cwd.clone()
    }

    /// Moves the working directory of tools and the prompt's `cwd` section (after switching
    /// to a session from another directory, as Pi's runtime does). The system message is the
    /// caller's to rebuild.
    pub fn set_cwd(&self, cwd: PathBuf) {
        lock(&self.shared.state).opts.cwd = cwd;
    }

    /// The session file (JSONL stores), even before it is created.
    pub fn session_file(&self) -> Option<PathBuf> {
        lock(&self.shared.state).persist.file.clone()
    }

    /// Whether a key is configured for `provider` (`--api-key`, auth.json, the
    /// environment, models.json).
    pub fn has_api_key(&self, provider: &str) -> bool {
        lock(&self.shared.state)
            .opts
            .api_key_for(provider)
            .is_some()
    }

    /// The session id.
    pub fn session_id(&self) -> String {
        self.with_session(|s| s.session_id().unwrap_or_default())
    }

    /// Whether a run is in progress.
    pub fn is_streaming(&self) -> bool {
        lock(&self.shared.run).is_some()
    }

    /// Whether a compaction or a tree navigation (with its branch summary) is in progress,
    /// as Pi's `isCompacting` counts both.
    pub fn is_compacting(&self) -> bool {
        let compacting = lock(&self.shared.state).is_compacting;
        compacting || lock(&self.shared.branch_summary).is_some()
    }

    /// Steering / follow-up delivery modes.
    pub fn queue_modes(&self) -> (QueueMode, QueueMode) {
        let st = lock(&self.shared.state);
        (st.steering_mode, st.follow_up_mode)
    }

    /// Sets the steering mode.
    pub fn set_steering_mode(&self, mode: QueueMode) {
        lock(&self.shared.state).steering_mode = mode;
    }

    /// Sets the follow-up mode.
    pub fn set_follow_up_mode(&self, mode: QueueMode) {
        lock(&self.shared.state).follow_up_mode = mode;
    }

    /// Whether threshold/overflow compaction is on.
    pub fn auto_compaction(&self) -> bool {
        lock(&self.shared.state).auto_compaction
    }

    /// Turns automatic compaction on or off.
    pub fn set_auto_compaction(&self, enabled: bool) {
        lock(&self.shared.state).auto_compaction = enabled;
    }

    /// Whether automatic retry is on.
    pub fn auto_retry(&self) -> bool {
        lock(&self.shared.state).opts.retry.enabled
    }

    /// Turns automatic retry on or off.
    pub fn set_auto_retry(&self, enabled: bool) {
        lock(&self.shared.state).opts.retry.enabled = enabled;
    }

    /// Number of queued user messages (Pi's `pendingMessageCount`).
    pub fn pending_count(&self) -> usize {
        let q = lock(&self.shared.queues);
        q.steering
            .iter()
            .chain(&q.follow_up)
            .filter(|m| m.user_text().is_some())
            .count()
    }

    /// Queues a steering message (delivered after the current turn's tool calls, before the
    /// next model request).
    pub fn steer(&self, message: impl Into<InputMessage>) {
        let message = message.into();
        let shown = message.user_text().is_some();
        lock(&self.shared.queues).steering.push(message);
        if shown {
            self.emit_queue_update();
        }
    }

    /// Queues a follow-up message (delivered when the agent would stop).
    pub fn follow_up(&self, message: impl Into<InputMessage>) {
        let message = message.into();
        let shown = message.user_text().is_some();
        lock(&self.shared.queues).follow_up.push(message);
        if shown {
            self.emit_queue_update();
        }
    }

    /// Empties both queues, returning the user messages that were queued (steering,
    /// follow-up); queued custom messages are dropped, as Pi's `clearQueue` drops them.
    pub fn clear_queue(&self) -> (Vec<String>, Vec<String>) {
        let taken = {
            let mut q = lock(&self.shared.queues);
            (
                user_texts(&std::mem::take(&mut q.steering)),
                user_texts(&std::mem::take(&mut q.follow_up)),
            )
        };
        if !taken.0.is_empty() || !taken.1.is_empty() {
            self.emit_queue_update();
        }
        taken
    }

    fn emit_queue_update(&self) {
        let ev = {
            let q = lock(&self.shared.queues);
            Event::QueueUpdate {
                steering: user_texts(&q.steering),
                follow_up: user_texts(&q.follow_up),
            }
        };
        self.emit(ev);
    }

    /// Takes queued messages per the mode.
    fn take_queued(&self, steering: bool) -> Vec<InputMessage> {
        let mode = {
            let st = lock(&self.shared.state);
            if steering {
                st.steering_mode
            } else {
                st.follow_up_mode
            }
        };
        let taken = {
            let mut q = lock(&self.shared.queues);
            let list = if steering {
                &mut q.steering
            } else {
                &mut q.follow_up
            };
            match mode {
                _ if list.is_empty() => Vec::new(),
                QueueMode::All => std::mem::take(list),
                QueueMode::OneAtATime => vec![list.remove(0)],
            }
        };
        taken
    }

    /// Aborts the running prompt (provider stream and tools) and any retry wait.
    pub fn abort(&self) {
        if let Some(t) = lock(&self.shared.run).as_ref() {
            t.cancel();
        }
        self.abort_retry();
        if let Some(t) = lock(&self.shared.compaction).as_ref() {
            t.cancel();
        }
        self.abort_branch_summary();
    }

    /// Cancels a retry that is waiting for its backoff.
    pub fn abort_retry(&self) {
        if let Some(t) = lock(&self.shared.retry_wait).as_ref() {
            t.cancel();
        }
    }

    /// Selects a model: appends `model_change`, clamps the thinking level to what the model
    /// supports (appending `thinking_level_change` and emitting `thinking_level_changed` when
    /// that changes it).
    pub fn set_model(&self, model: Model) -> Result<(), AgentError> {
        self.append(NewEntry::ModelChange {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
        })?;
        let (old, new) = {
            let mut st = lock(&self.shared.state);
            let old = st.opts.thinking;
            let new = clamp_level(&model, old);
            st.opts.model = Some(model);
            (old, new)
        };
        if old != new {
            self.set_thinking_level(new)?;
        }
        Ok(())
    }

    /// Pi's model switch with a wanted level (cycling, `/model`): the model change, then the
    /// level clamped to the new model, recorded only when it differs from the current one.
    pub fn switch_model(
        &self,
        model: Model,
        level: ThinkingLevel,
    ) -> Result<ThinkingLevel, AgentError> {
        self.append(NewEntry::ModelChange {
            provider: model.provider.clone(),
            model_id: model.id.clone(),
        })?;
        let (old, new) = {
            let mut st = lock(&self.shared.state);
            let new = clamp_level(&model, level);
            st.opts.model = Some(model);
            (st.opts.thinking, new)
        };
        if old != new {
            self.set_thinking_level(new)?;
        }
        Ok(new)
    }

    /// Sets the thinking level (clamped to the model), persisting and emitting the change.
    pub fn set_thinking_level(&self, level: ThinkingLevel) -> Result<ThinkingLevel, AgentError> {
        let level = match self.model() {
            Some(m) => clamp_level(&m, level),
            None => level,
        };
        lock(&self.shared.state).opts.thinking = level;
        self.append(NewEntry::ThinkingLevelChange {
            thinking_level: level.as_str().to_string(),
        })?;
        self.emit(Event::ThinkingLevelChanged {
            level: level.as_str().to_string(),
        });
        Ok(level)
    }

    /// Levels the current model supports (`off` only without reasoning).
    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        match self.model() {
            Some(m) if m.reasoning => m.supported_thinking_levels(),
            _ => vec![ThinkingLevel::Off],
        }
    }

    /// Sets the session name (`session_info`), emitting `session_info_changed`.
    pub fn set_session_name(&self, name: &str) -> Result<(), AgentError> {
        let entry = NewEntry::session_info(name);
        let stored = match &entry {
            NewEntry::SessionInfo { name } => name.clone(),
            _ => String::new(),
        };
        self.append(entry)?;
        self.emit(Event::SessionInfoChanged { name: stored });
        Ok(())
    }

    /// The messages of the current context (Pi's `agent.state.messages`).
    pub fn messages(&self) -> Vec<Value> {
        self.with_session(|s| {
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            context::project(&path).messages().cloned().collect()
        })
    }

    /// The same messages one at a time, for writing them out without holding them
    /// all (RPC `get_messages` on a huge uncompacted session). The session stays
    /// locked while `each` runs.
    pub fn for_each_message(&self, mut each: impl FnMut(&Value)) {
        self.with_session(|s| {
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            context::project_each(&path, |_, messages| messages.iter().for_each(&mut each));
        })
    }

    /// How many messages the context holds, without keeping any of them.
    pub fn message_count(&self) -> usize {
        let mut n = 0;
        self.for_each_message(|_| n += 1);
        n
    }

    /// Replaces the session (new session, switch, fork, clone). Queues are cleared.
    pub fn replace_session(&self, session: Session, persist: Persistence) {
        let mut st = lock(&self.shared.state);
        st.session = session;
        st.persist = persist;
        *lock(&self.shared.queues) = Queues::default();
    }

    /// Restores model and thinking level from the session (after resume or switch).
    pub fn restore_from_session(&self) {
        let mut st = lock(&self.shared.state);
        let (level, model, selected) = {
            let s = &st.session;
            let branch = s.branch_path();
            let path = SessionPath::of(s, &branch);
            let (level, model) = context::context_settings(&path);
            let selected = path
                .last_mark(pi_engine::session::Mark::ModelChange)
                .map(|i| {
                    let change = path.value(i);
                    let text = |k: &str| {
                        change
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string()
                    };
                    (text("provider"), text("modelId"))
                });
            (level, model, selected)
        };
        if let Some(m) = model {
            let provider = m.get("provider").and_then(Value::as_str).unwrap_or("");
            let id = m.get("modelId").and_then(Value::as_str).unwrap_or("");
            if let Some(found) = st.opts.registry.find(provider, id).cloned() {
                st.opts.model = Some(found);
            }
        }
        // Responses name the physical model a router chose; the selection is the virtual
        // model of the latest `model_change`, while it is registered (Pi's
        // `getBranchSelection`). Otherwise the model that answered last stays selected.
        if let Some((provider, id)) = selected {
            if let Some(found) = st.opts.registry.find(&provider, &id) {
                if found.is_virtual() {
                    st.opts.model = Some(found.clone());
                }
            }
        }
        if let Some(l) = level
            .as_ref()
            .and_then(Value::as_str)
            .and_then(ThinkingLevel::parse)
        {
            st.opts.thinking = l;
        }
    }

    /// The text of the last assistant message on the branch.
    pub fn last_assistant_text(&self) -> Option<String> {
        let msgs = self.messages();
        msgs.iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
            .map(|m| pi_engine::js::content_text(m.get("content"), ""))
    }
}

/// Clamps a level to the model: `off` for models without reasoning.
fn clamp_level(model: &Model, level: ThinkingLevel) -> ThinkingLevel {
    if !model.reasoning {
        ThinkingLevel::Off
    } else {
        model.clamp_thinking_level(level)
    }
}

impl AgentSession {
    /// Appends an entry an extension built whole (`newSession`'s `setup` writes, whose ids
    /// the extension already holds), verbatim: it must continue the current leaf under an
    /// id the session does not have yet. Returns its id.
    pub fn append_built(&self, entry: &Value) -> Result<String, AgentError> {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string);
        let invalid = |why: &str| AgentError::Other(format!("cannot append the entry: {why}"));
        let id = text("id")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| invalid("it has no id"))?;
        let mut st = lock(&self.shared.state);
        if st.session.find(&id).is_some() {
            return Err(invalid(&format!("entry {id} exists already")));
        }
        let parent_id = text("parentId");
        if parent_id.as_deref() != st.session.leaf_id() {
            return Err(invalid("its parent is not the current leaf"));
        }
        let prepared = pi_engine::session::PreparedEntry {
            base: pi_formats::entry::EntryBase {
                id: id.clone(),
                parent_id,
                timestamp: text("timestamp").unwrap_or_else(pi_formats::time::now_iso),
            },
            line: entry.to_string(),
        };
        let State {
            session, persist, ..
        } = &mut *st;
        let Persistence { store, lazy, .. } = persist;
        if let (Some(store), Some(lazy)) = (store.as_deref(), lazy.as_mut()) {
            lazy.append(
                store,
                &[StoredEntry::from_line(prepared.line.clone().into_bytes())],
            )
            .map_err(|e| AgentError::Persist(format!("{e:#}")))?;
        }
        session.commit(&prepared);
        Ok(id)
    }
}

fn append_locked(st: &mut State, entry: &NewEntry) -> Result<String, AgentError> {
    let State {
        session, persist, ..
    } = st;
    let Persistence { store, lazy, .. } = persist;
    session
        .append_with(entry, |p| match (store.as_deref(), lazy.as_mut()) {
            (Some(store), Some(lazy)) => lazy.append(
                store,
                &[StoredEntry::from_line(p.line.clone().into_bytes())],
            ),
            _ => Ok(()),
        })
        .map_err(|e| AgentError::Persist(format!("{e:#}")))
}

#[cfg(test)]
mod tests;
