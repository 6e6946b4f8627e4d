//! The seam between the interactive UI and the agent: a small trait the UI drives, and the
//! events it receives back.
//!
//! [`AgentEvent`] is what the screen shows of the runtime's typed
//! [`pi_agent::protocol::Event`]s (`message_start/update/end`, `tool_execution_*`, `turn_*`,
//! `agent_*`, `queue_update`, `compaction_*`), plus the answers to the UI's own calls.

use pi_agent::protocol::Event;
use serde_json::Value;

/// Pi's thinking levels (the session format's type; the UI adds what shift+tab offers).
pub use pi_formats::message::ThinkingLevel;

/// The levels shift+tab offers for `model` (all but `xhigh` without a model): `off`
/// alone without reasoning, `xhigh` only where the model declares it (Pi's
/// `getAvailableThinkingLevels`).
pub fn available_levels(model: Option<&ModelInfo>) -> Vec<ThinkingLevel> {
    match model {
        Some(m) if !m.reasoning => vec![ThinkingLevel::Off],
        Some(m) if m.xhigh => ThinkingLevel::ALL[..6].to_vec(),
        _ => ThinkingLevel::ALL[..5].to_vec(),
    }
}

/// The level after `level` that `model` offers, wrapping.
pub fn next_level(level: ThinkingLevel, model: Option<&ModelInfo>) -> ThinkingLevel {
    let levels = available_levels(model);
    match levels.iter().position(|l| *l == level) {
        Some(i) => levels[(i + 1) % levels.len()],
        None => levels[0],
    }
}

/// What the UI needs to know about a model (kept apart from the engine's `Model` so the
/// picker can be tested with made-up lists).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub provider: String,
    pub id: String,
    pub name: String,
    pub context_window: u64,
    pub reasoning: bool,
    /// The model declares the `xhigh` thinking level.
    pub xhigh: bool,
    /// A virtual model: an extension's router picks the physical model per request.
    pub is_virtual: bool,
}

impl ModelInfo {
    pub fn from_engine(m: &pi_agent::llm::model::Model) -> ModelInfo {
        ModelInfo {
            provider: m.provider.clone(),
            id: m.id.clone(),
            name: m.name.clone(),
            context_window: m.context_window,
            reasoning: m.reasoning,
            xhigh: m
                .supported_thinking_levels()
                .contains(&pi_formats::message::ThinkingLevel::Xhigh),
            is_virtual: m.is_virtual(),
        }
    }

    /// `provider/id`, the form `--model` and the footer use.
    pub fn key(&self) -> String {
        format!("{}/{}", self.provider, self.id)
    }
}

/// The physical model that produced an assistant message (its `provider`, `model` and
/// `thinkingLevel`); with a virtual model selected, the footer shows it after the selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatched {
    pub provider: String,
    pub model: String,
    pub thinking: Option<String>,
}

impl Dispatched {
    /// Read off an assistant message's JSON; `None` when it names no model.
    pub fn of_message(message: &Value) -> Option<Dispatched> {
        let text = |k: &str| message.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Dispatched {
            provider: text("provider").unwrap_or_default(),
            model: text("model").filter(|m| !m.is_empty())?,
            thinking: text("thinkingLevel"),
        })
    }
}

/// Token usage and cost of one assistant message (Pi's `usage`), or a sum of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub cost: f64,
}

impl Usage {
    /// Adds `other` to this sum.
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.cost += other.cost;
    }
}

/// The three answers to "summarize the branch you are leaving?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchSummary {
    None,
    Summarize,
    SummarizeWithFocus(String),
}

/// Events from the agent, reduced to what the UI shows.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    AgentStart,
    AgentEnd,
    TurnStart,
    TurnEnd,
    /// A message begins; `role` is `user`, `assistant`, `toolResult`, … User messages carry
    /// their text so prompts sent by others (RPC, extensions) show up too.
    MessageStart {
        role: String,
        text: String,
    },
    TextDelta(String),
    ThinkingDelta(String),
    /// The assistant message is complete; usage feeds the footer, an error message ends it.
    MessageEnd {
        role: String,
        usage: Option<Usage>,
        error: Option<String>,
        /// For an assistant message: the physical model that answered.
        dispatched: Option<Dispatched>,
    },
    ToolStart {
        id: String,
        name: String,
        args: String,
    },
    ToolUpdate {
        id: String,
        output: String,
    },
    ToolEnd {
        id: String,
        output: String,
        is_error: bool,
        /// The edit tool's diff (`result.details.diff`).
        diff: Option<String>,
    },
    /// The queues as the agent holds them now.
    QueueUpdate {
        steering: Vec<String>,
        follow_up: Vec<String>,
    },
    CompactionStart,
    CompactionEnd {
        summary: Option<String>,
        error: Option<String>,
    },
    /// A tree navigation finished: the context messages from the new position (to rebuild
    /// the transcript) and, for a re-edited user message, its text for the editor.
    TreeNavigated {
        messages: Vec<Value>,
        editor_text: Option<String>,
    },
    /// The branch summary of a tree navigation was aborted; nothing changed.
    TreeNavigationAborted,
    /// An extension cancelled a tree navigation (`session_before_tree`); nothing changed.
    TreeNavigationCancelled,
    /// A tree navigation failed; nothing changed.
    TreeNavigationFailed(String),
    /// A /new, /resume, /fork or /clone started with [`AgentDriver::start_session_op`]
    /// ended (`before`: the driver's directory when it started).
    SessionReplaced {
        op: SessionOp,
        before: Option<std::path::PathBuf>,
        outcome: OpOutcome,
    },
    /// A failed request will be retried after `delay_ms` (Pi's `auto_retry_start`); the
    /// agent is still busy, so input is queued and escape cancels the retry.
    RetryStart {
        attempt: u64,
        max_attempts: u64,
        delay_ms: u64,
    },
    /// The retries are over (`auto_retry_end`).
    RetryEnd {
        success: bool,
        attempt: u64,
        final_error: Option<String>,
    },
    /// Something for the user that is not part of the conversation.
    Notice(String),
    Error(String),
    /// A prompt was consumed before reaching the agent (an extension command ran, or an
    /// `input` handler handled it): no run started for it, so the UI stops working unless
    /// a run of another origin is going on.
    PromptHandled,
}

fn text_of_content(content: &Value) -> String {
    pi_engine::js::content_text(Some(content), "\n")
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn u64_at(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// The footer's usage from a message's `usage` object.
fn usage_of(u: &Value) -> Usage {
    Usage {
        input: u64_at(u, "input"),
        output: u64_at(u, "output"),
        cache_read: u64_at(u, "cacheRead"),
        cache_write: u64_at(u, "cacheWrite"),
        cost: u
            .pointer("/cost/total")
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
    }
}

impl AgentEvent {
    /// What the screen shows of one agent event; events it does not show give `None`.
    /// Message payloads are Pi's message JSON, read here for role, text and usage.
    pub fn from_event(event: &Event) -> Option<AgentEvent> {
        Some(match event {
            Event::AgentStart => AgentEvent::AgentStart,
            // `agent_settled` also ends runs that failed before `agent_start`.
            Event::AgentEnd { .. } | Event::AgentSettled { .. } => AgentEvent::AgentEnd,
            Event::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                ..
            } => AgentEvent::RetryStart {
                attempt: u64::from(*attempt).max(1),
                max_attempts: u64::from(*max_attempts),
                delay_ms: *delay_ms,
            },
            Event::AutoRetryEnd {
                success,
                attempt,
                final_error,
            } => AgentEvent::RetryEnd {
                success: *success,
                attempt: u64::from(*attempt),
                final_error: final_error.clone(),
            },
            // Pi shows the error and a retry countdown; the retried attempt and the end of
            // the loop change nothing on this screen.
            Event::SummarizationRetryScheduled {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => AgentEvent::Notice(format!(
                "{error_message} (retrying summary {attempt}/{max_attempts} in {}s)",
                delay_ms.div_ceil(1000)
            )),
            Event::TurnStart => AgentEvent::TurnStart,
            Event::TurnEnd { .. } => AgentEvent::TurnEnd,
            Event::MessageStart { message } => AgentEvent::MessageStart {
                role: str_at(message, "role").to_string(),
                text: message
                    .get("content")
                    .map(text_of_content)
                    .unwrap_or_default(),
            },
            Event::MessageUpdate {
                assistant_message_event: e,
                ..
            } => match str_at(e, "type") {
                "text_delta" => AgentEvent::TextDelta(str_at(e, "delta").to_string()),
                "thinking_delta" => AgentEvent::ThinkingDelta(str_at(e, "delta").to_string()),
                _ => return None,
            },
            Event::MessageEnd { message: m } => {
                let error = match str_at(m, "stopReason") {
                    "error" | "aborted" => Some(
                        m.get("errorMessage")
                            .and_then(Value::as_str)
                            .unwrap_or(str_at(m, "stopReason"))
                            .to_string(),
                    ),
                    _ => None,
                };
                AgentEvent::MessageEnd {
                    role: str_at(m, "role").to_string(),
                    usage: m.get("usage").map(usage_of),
                    error,
                    dispatched: Dispatched::of_message(m),
                }
            }
            // Calls a tool made (a codemode script's) belong to their parent's row, as in Pi.
            Event::ToolExecutionStart {
                parent_tool_call_id: Some(_),
                ..
            }
            | Event::ToolExecutionUpdate {
                parent_tool_call_id: Some(_),
                ..
            }
            | Event::ToolExecutionEnd {
                parent_tool_call_id: Some(_),
                ..
            } => return None,
            Event::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
                ..
            } => AgentEvent::ToolStart {
                id: tool_call_id.clone(),
                name: tool_name.clone(),
                args: args.to_string(),
            },
            Event::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => AgentEvent::ToolUpdate {
                id: tool_call_id.clone(),
                output: partial_result
                    .get("content")
                    .map(text_of_content)
                    .unwrap_or_default(),
            },
            Event::ToolExecutionEnd {
                tool_call_id,
                result,
                is_error,
                ..
            } => AgentEvent::ToolEnd {
                id: tool_call_id.clone(),
                output: result
                    .get("content")
                    .map(text_of_content)
                    .unwrap_or_default(),
                is_error: *is_error,
                diff: result
                    .pointer("/details/diff")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            },
            Event::QueueUpdate {
                steering,
                follow_up,
            } => AgentEvent::QueueUpdate {
                steering: steering.clone(),
                follow_up: follow_up.clone(),
            },
            Event::CompactionStart { .. } => AgentEvent::CompactionStart,
            Event::CompactionEnd {
                result,
                error_message,
                ..
            } => AgentEvent::CompactionEnd {
                summary: result
                    .as_ref()
                    .and_then(|r| r.get("summary"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                error: error_message.clone(),
            },
            Event::Warning { message } => AgentEvent::Notice(format!("Warning: {message}")),
            Event::SummarizationRetryAttemptStart { .. }
            | Event::SummarizationRetryFinished
            | Event::ThinkingLevelChanged { .. }
            | Event::SessionInfoChanged { .. }
            | Event::EntryAppended { .. }
            | Event::BashExecutionUpdate { .. } => return None,
        })
    }
}

/// What the UI asks of the agent. Calls return at once; results arrive as [`AgentEvent`]s
/// through [`AgentDriver::poll_events`], so a slow provider never blocks a keystroke.
pub trait AgentDriver {
    /// Starts a turn with a new user prompt (only called while idle).
    fn prompt(&mut self, text: &str);
    /// Queues a steering message, delivered after the current tool call.
    fn steer(&mut self, text: &str);
    /// Queues a follow-up, delivered when the agent would otherwise stop.
    fn follow_up(&mut self, text: &str);
    /// Aborts the running turn; the agent clears its queues (the UI restores them).
    fn abort(&mut self);
    /// Events since the last call, oldest first.
    fn poll_events(&mut self) -> Vec<AgentEvent>;
    /// Navigates to the entry the user picked in /tree (Pi's `navigateTree`: a user message
    /// puts the leaf on its parent), after summarizing the abandoned branch as asked. The
    /// result arrives as [`AgentEvent::TreeNavigated`], [`AgentEvent::TreeNavigationAborted`]
    /// or [`AgentEvent::TreeNavigationFailed`]; `Err` means it could not start.
    /// [`AgentDriver::abort`] aborts a summary in progress.
    fn navigate_tree(&mut self, entry: &str, summary: &BranchSummary) -> anyhow::Result<()>;
    /// Compacts the context now, with optional instructions for the summary.
    fn compact(&mut self, instructions: Option<&str>);
    fn set_model(&mut self, model: &ModelInfo);
    /// Cycling (ctrl+p) moved to `model`, with the scoped pattern's level if any.
    fn cycle_model(&mut self, model: &ModelInfo, thinking: Option<ThinkingLevel>) {
        self.set_model(model);
        if let Some(level) = thinking {
            self.set_thinking(level);
        }
    }
    fn set_thinking(&mut self, level: ThinkingLevel);
    /// The models the user can pick from.
    fn models(&self) -> Vec<ModelInfo>;
    /// The llama.cpp router's chat models now (`/llama` read them): they replace the
    /// `llama.cpp` models `/model` offers.
    fn set_llama_models(&mut self, _models: Vec<pi_agent::llm::Model>) {}
    /// The Radius gateway's catalog now (a login or the start-up refresh read it): it
    /// replaces the `radius` models.
    fn set_radius_models(&mut self, _models: Vec<pi_agent::llm::Model>) {}
    /// A snapshot of the session being written, for /tree (a copy, so the agent can keep
    /// appending while the navigator is open).
    fn session(&self) -> Option<pi_engine::session::Session>;
    /// Takes the queued steering and follow-up messages back (alt+up).
    fn clear_queue(&mut self) -> (Vec<String>, Vec<String>);

    /// The keys extensions registered (`pi.registerShortcut`), as registered.
    fn extension_shortcuts(&self) -> Vec<String> {
        Vec::new()
    }

    /// The slash commands extensions registered (other than built-in names).
    fn extension_commands(&self) -> Vec<super::app::Command> {
        Vec::new()
    }

    /// Runs the handler of an extension's shortcut (in the background).
    fn run_shortcut(&mut self, _shortcut: &str) {}

    /// The model the agent uses now (a resumed session restores its own).
    fn current_model(&self) -> Option<ModelInfo> {
        None
    }

    /// The thinking level the agent uses now.
    fn thinking_level(&self) -> Option<ThinkingLevel> {
        None
    }

    /// The current context's messages as Pi message JSON, to rebuild the transcript after
    /// opening or switching sessions.
    fn messages(&self) -> Vec<Value> {
        Vec::new()
    }

    /// `/resume`: switches to the session at a store location (a file for JSONL). A session
    /// whose working directory is gone is handled as `missing_cwd` says.
    fn switch_session(&mut self, _location: &str, _missing_cwd: MissingCwd) -> anyhow::Result<()> {
        anyhow::bail!("switching sessions is not supported by this agent")
    }

    /// `/new`: starts a fresh session.
    fn new_session(&mut self) -> anyhow::Result<()> {
        anyhow::bail!("new sessions are not supported by this agent")
    }

    /// `/clone`: continues in a copy of the current branch (a new session whose parent is
    /// this one).
    fn clone_session(&mut self) -> anyhow::Result<()> {
        anyhow::bail!("cloning sessions is not supported by this agent")
    }

    /// `/name`: sets the session's display name.
    fn set_session_name(&mut self, _name: &str) -> anyhow::Result<()> {
        anyhow::bail!("naming sessions is not supported by this agent")
    }

    /// `shift+L` in /tree: sets (or with `None` clears) an entry's label.
    fn set_label(&mut self, _id: &str, _label: Option<&str>) -> anyhow::Result<()> {
        anyhow::bail!("labels are not supported by this agent")
    }

    /// `/fork`: continues in a new session holding the path up to the parent of the user
    /// message `entry_id` (Pi's `createBranchedSession`; an empty session when that message
    /// was the first). Returns the message's text, which goes back into the editor.
    fn fork(&mut self, _entry_id: &str) -> anyhow::Result<String> {
        anyhow::bail!("forking is not supported by this agent")
    }

    /// `/import FILE`: copies a session file into the current session directory (or store)
    /// and switches to it. Returns where the imported session now lives. A session whose
    /// working directory is gone is handled as `missing_cwd` says.
    fn import_session(&mut self, _path: &str, _missing_cwd: MissingCwd) -> anyhow::Result<String> {
        anyhow::bail!("importing sessions is not supported by this agent")
    }

    /// `!cmd` / `!!cmd`: runs a shell command through the session (recorded as a
    /// `bashExecution` message, sent with the next prompt unless `excluded`); `done` gets the
    /// outcome.
    fn run_bash(&mut self, _command: &str, _excluded: bool, done: BashDone) {
        done(BashResult::failed(
            "running commands is not supported by this agent".into(),
        ));
    }

    /// Escape while a `!cmd` runs.
    fn abort_bash(&mut self) {}

    /// `/reload`: reads settings, models.json, context files, skills and prompt templates
    /// again, and loads the extensions again.
    fn reload(&mut self) -> anyhow::Result<Reloaded> {
        anyhow::bail!("reloading is not supported by this agent")
    }

    /// After a session from another directory opened: that directory's settings and
    /// resources, read as `/reload` reads them (the extensions stay as they are).
    fn follow_dir(&mut self) -> anyhow::Result<Reloaded> {
        self.reload()
    }

    /// After `/new`, `/resume`, `/fork` or `/clone`: what the new session's runtime read
    /// (settings, context files, skills, prompt templates, themes), for the screen.
    fn reread_for_screen(&mut self) -> anyhow::Result<Reloaded> {
        self.follow_dir()
    }

    /// The directory tools run in: the session's own once a session from another directory
    /// is opened, as in Pi (`None`: the start-up directory, always).
    fn cwd(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// Whether this run loaded the project as trusted (decided once at start-up; `None`:
    /// not known, as for agents without project settings).
    fn project_trusted(&self) -> Option<bool> {
        None
    }
    /// `steeringMode` (`follow_up` false) or `followUpMode` changed in /settings.
    fn set_queue_mode(&mut self, _follow_up: bool, _mode: &str) {}

    /// Starts a session replacement. `Some` when it ended at once (this default, through
    /// the synchronous methods); `None` when its outcome arrives later as
    /// [`AgentEvent::SessionReplaced`], so the UI keeps running meanwhile (an extension's
    /// `session_before_*` handler may open a dialog the user must answer first).
    fn start_session_op(&mut self, op: &SessionOp) -> Option<OpOutcome> {
        let outcome = match op {
            SessionOp::New => self.new_session().map(|()| None),
            SessionOp::Clone => self.clone_session().map(|()| None),
            SessionOp::Fork(id) => self.fork(id).map(Some),
            SessionOp::Resume {
                location,
                missing_cwd,
            } => self.switch_session(location, *missing_cwd).map(|()| None),
        };
        Some(outcome.map_err(OpFailure::from_error))
    }
}

/// A change of the current session the UI asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionOp {
    /// `/new`.
    New,
    /// `/clone`.
    Clone,
    /// `/fork` from this user message.
    Fork(String),
    /// A session picked in /resume.
    Resume {
        location: String,
        missing_cwd: MissingCwd,
    },
}

/// Why a [`SessionOp`] did not happen.
#[derive(Debug, Clone, PartialEq)]
pub enum OpFailure {
    /// The session names a directory that is gone: the UI asks what to do.
    MissingCwd(MissingSessionCwd),
    /// Anything else (an extension's cancel included), as its message.
    Failed(String),
}

impl OpFailure {
    pub fn from_error(e: anyhow::Error) -> OpFailure {
        match e.downcast::<MissingSessionCwd>() {
            Ok(m) => OpFailure::MissingCwd(m),
            Err(e) => OpFailure::Failed(format!("{e:#}")),
        }
    }
}

/// How a [`SessionOp`] ended: for a fork, the text of the message forked from.
pub type OpOutcome = Result<Option<String>, OpFailure>;

pub use pi_agent::host::{MissingCwd, MissingSessionCwd};

/// Called once with the outcome of a `!cmd`.
pub type BashDone = Box<dyn FnOnce(BashResult) + Send>;

/// How a `!cmd` ended, as the transcript shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BashResult {
    /// What the command printed (the tail, when truncated).
    pub output: String,
    /// The exit code; `None` when it was cancelled or could not run.
    pub exit_code: Option<i64>,
    pub cancelled: bool,
    /// Where the whole output was saved when it was cut.
    pub full_output_path: Option<String>,
}

impl BashResult {
    /// From the host's `bash` result (RPC's `data`).
    pub fn from_json(v: &Value) -> BashResult {
        BashResult {
            output: v["output"].as_str().unwrap_or_default().to_string(),
            exit_code: v["exitCode"].as_i64(),
            cancelled: v["cancelled"].as_bool().unwrap_or(false),
            full_output_path: v["fullOutputPath"].as_str().map(str::to_string),
        }
    }

    /// A command that could not run.
    pub fn failed(message: String) -> BashResult {
        BashResult {
            output: message,
            ..Default::default()
        }
    }

    /// The output followed by Pi's status line: the exit code when it is not 0, a
    /// cancellation, the file holding the whole output.
    pub fn display_text(&self) -> String {
        let mut text = self.output.trim_end_matches('\n').to_string();
        let mut status = Vec::new();
        if self.cancelled {
            status.push("(cancelled)".to_string());
        } else if let Some(code) = self.exit_code.filter(|c| *c != 0) {
            status.push(format!("(exit {code})"));
        }
        if let Some(path) = &self.full_output_path {
            status.push(format!("Output truncated. Full output: {path}"));
        }
        for line in status {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&line);
        }
        text
    }
}

/// What `/reload` (and start-up) read from disk for the UI.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reloaded {
    /// Header rows for context files, skills and templates: (name, kind).
    pub loaded: Vec<(String, String)>,
    /// Skill and template slash commands.
    pub commands: Vec<super::app::Command>,
    pub quiet_startup: bool,
    /// `doubleEscapeAction`.
    pub double_escape: String,
    pub theme: String,
    /// Theme files and directories extensions contributed (`resources_discover`).
    pub theme_paths: Vec<std::path::PathBuf>,
    pub show_thinking: bool,
    pub skip_branch_prompt: bool,
    pub external_editor: Option<String>,
    /// `compaction.enabled` (on unless set to false), shown in the footer and /settings.
    pub auto_compact: bool,
    /// The other settings /settings shows.
    pub prefs: super::settings_menu::Prefs,
    /// Models for ctrl+p as `provider/id`, with a thinking level where the pattern gave one.
    pub scoped_models: Vec<(String, Option<ThinkingLevel>)>,
    /// Problems found while loading, one line each.
    pub warnings: Vec<String>,
    /// The reload found project resources in a folder trusted at start-up for having none,
    /// and saved that trust to trust.json (Pi's implicit trust on reload).
    pub saved_project_trust: bool,
}

/// A scripted agent for tests and for running the UI before a runtime exists: every prompt
/// is answered with the next scripted reply (or an echo), streamed as Pi would.
#[derive(Debug, Default)]
pub struct FakeDriver {
    pub replies: std::collections::VecDeque<Vec<AgentEvent>>,
    pub pending: Vec<AgentEvent>,
    /// Every call, for assertions: `prompt:…`, `steer:…`, `abort`, …
    pub calls: Vec<String>,
    pub model_list: Vec<ModelInfo>,
    pub session: Option<pi_engine::session::Session>,
}

impl FakeDriver {
    /// The events of a plain assistant answer.
    pub fn answer(text: &str) -> Vec<AgentEvent> {
        vec![
            AgentEvent::AgentStart,
            AgentEvent::TurnStart,
            AgentEvent::MessageStart {
                role: "assistant".into(),
                text: String::new(),
            },
            AgentEvent::TextDelta(text.to_string()),
            AgentEvent::MessageEnd {
                role: "assistant".into(),
                usage: Some(Usage {
                    input: 10,
                    output: 5,
                    ..Usage::default()
                }),
                error: None,
                dispatched: None,
            },
            AgentEvent::TurnEnd,
            AgentEvent::AgentEnd,
        ]
    }
}

impl AgentDriver for FakeDriver {
    fn prompt(&mut self, text: &str) {
        self.calls.push(format!("prompt:{text}"));
        self.pending.push(AgentEvent::MessageStart {
            role: "user".into(),
            text: text.into(),
        });
        self.pending.push(AgentEvent::MessageEnd {
            role: "user".into(),
            usage: None,
            error: None,
            dispatched: None,
        });
        let reply = self
            .replies
            .pop_front()
            .unwrap_or_else(|| FakeDriver::answer(&format!("echo: {text}")));
        self.pending.extend(reply);
    }
    fn steer(&mut self, text: &str) {
        self.calls.push(format!("steer:{text}"));
    }
    fn follow_up(&mut self, text: &str) {
        self.calls.push(format!("follow_up:{text}"));
    }
    fn abort(&mut self) {
        self.calls.push("abort".into());
        self.pending.push(AgentEvent::AgentEnd);
    }
    fn poll_events(&mut self) -> Vec<AgentEvent> {
        std::mem::take(&mut self.pending)
    }
    fn navigate_tree(&mut self, entry: &str, summary: &BranchSummary) -> anyhow::Result<()> {
        self.calls.push(format!("navigate:{entry}:{summary:?}"));
        let mut editor_text = None;
        if let Some(session) = self.session.as_mut() {
            let Some(idx) = session.find(entry) else {
                anyhow::bail!("Entry {entry} not found")
            };
            let nav = pi_engine::compaction::navigation_target(&session.entry_value(idx));
            match nav.new_leaf_id.as_deref() {
                Some(id) => session.branch(id)?,
                None => session.reset_leaf(),
            }
            editor_text = nav.editor_text;
        }
        self.pending.push(AgentEvent::TreeNavigated {
            messages: Vec::new(),
            editor_text,
        });
        Ok(())
    }
    fn compact(&mut self, instructions: Option<&str>) {
        self.calls
            .push(format!("compact:{}", instructions.unwrap_or("")));
    }
    fn set_model(&mut self, model: &ModelInfo) {
        self.calls.push(format!("model:{}", model.key()));
    }
    fn set_thinking(&mut self, level: ThinkingLevel) {
        self.calls.push(format!("thinking:{}", level.as_str()));
    }
    fn set_llama_models(&mut self, models: Vec<pi_agent::llm::Model>) {
        self.calls.push(format!("llama_models:{}", models.len()));
        self.model_list
            .retain(|m| m.provider != pi_agent::llm::llama_cpp::PROVIDER_ID);
        self.model_list
            .extend(models.iter().map(ModelInfo::from_engine));
    }
    fn models(&self) -> Vec<ModelInfo> {
        self.model_list.clone()
    }
    fn session(&self) -> Option<pi_engine::session::Session> {
        self.session.clone()
    }
    fn clear_queue(&mut self) -> (Vec<String>, Vec<String>) {
        self.calls.push("clear_queue".into());
        (Vec::new(), Vec::new())
    }
    fn set_session_name(&mut self, name: &str) -> anyhow::Result<()> {
        self.calls.push(format!("name:{name}"));
        Ok(())
    }
    fn set_label(&mut self, id: &str, label: Option<&str>) -> anyhow::Result<()> {
        self.calls
            .push(format!("label:{id}:{}", label.unwrap_or("")));
        Ok(())
    }
}
