//! The UI state and its update function: `update(&mut App, Msg) -> Vec<Effect>`.
//!
//! No terminal and no agent here: keys and agent events come in as [`Msg`], and what must
//! happen outside (send a prompt, open the external editor, quit) goes out as [`Effect`]s
//! for the driver loop in `mod.rs`. Tests feed messages and inspect the state and effects.

use super::dialogs::{
    fuzzy_score, BranchPrompt, Confirm, ConfirmOutcome, Dialog, ForkPicker, ForkRow, ModelPicker,
    RefreshStatus, ResumeMode, ResumePicker, ResumeScope, ResumeSort, ScopedModels, SessionRow,
    Setting, SettingsDialog, BRANCH_OPTIONS,
};
use super::driver::{AgentEvent, BranchSummary, Dispatched, ModelInfo, ThinkingLevel, Usage};
use super::editor::Editor;
use super::keys::Keymap;
use super::theme::Theme;
use super::transcript::{Item, Transcript, ViewFlags};
use super::tree::{Filter, TreeNav};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::PathBuf;

/// Inputs to [`update`].
#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    Paste(String),
    Agent(AgentEvent),
    /// The project's files for `@` completion (relative paths, gitignore respected).
    FilesIndexed(Vec<String>),
    /// A `!cmd` finished.
    BashDone {
        command: String,
        result: super::driver::BashResult,
        excluded: bool,
    },
    /// Text back from the external editor.
    EditorText(String),
    Notice(String),
    /// A record from the extensions (`extension_ui_request`, `extension_error`).
    Extension(serde_json::Value),
    /// The usage of every assistant message in the session file, summed off the UI thread
    /// so a large session shows its latest messages first.
    FileTotals(Usage),
    /// `/llama`'s background work reports (a router listing, a finished load or login).
    Llama(super::llama_view::LlamaUpdate),
    /// A Radius sign-in finished, or the start-up catalog refresh came back.
    Radius(super::login::RadiusUpdate),
    /// An account sign-in was stored (`action`: "Logged in to <provider>").
    LoggedIn {
        provider: String,
        action: String,
    },
    /// A running extension login asks something: its question opens in the login dialog.
    LoginQuestion(Box<super::api_key_login::LoginQuestion>),
    /// The catalog changed off the UI thread (an extension's `refreshModels`).
    ModelsChanged,
    /// A command's `ctx.reload()`: the loop reloads as /reload does, then answers.
    ExtensionReload(tokio::sync::mpsc::UnboundedSender<()>),
    /// The catalog refresh `/model` or `/scoped-models` asked for ended; `query` is the
    /// `/model <term>` that had no match before it.
    CatalogsRefreshed {
        query: Option<String>,
        refresh: pi_agent::extensions::ModelRefresh,
    },
}

/// The output line of a `!cmd` until it finishes.
const BASH_RUNNING: &str = "Running… (escape to cancel)";

/// What the driver loop must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Prompt(String),
    /// `/login <provider> [domain]`: sign in (the loop runs it off the UI thread).
    Login(String),
    /// Sign in to an account (`<provider id> [enterprise domain]`), without asking for the
    /// method.
    AccountLogin(String),
    /// `/login`'s provider list: account sign-ins, or API keys (`api_key`).
    LoginProviders {
        api_key: bool,
    },
    /// `/login`'s "Select authentication method:" (escape in its provider list goes back).
    OpenLoginMethods,
    /// `/login`'s API-key questions for a provider (its catalog id); `from_list` when it was
    /// picked from the provider list, which escape at its choice of method reopens.
    ApiKeyLogin {
        provider: String,
        from_list: bool,
    },
    /// A login was stored (`action` is Pi's "Saved API key for X" / "Logged in to X"): Pi's
    /// completion, which picks the provider's default model when none was selected.
    LoginDone {
        provider: String,
        action: String,
    },
    /// Every question of an API-key login is answered: store the credential.
    SaveApiKey {
        provider: String,
        name: String,
        credential: serde_json::Value,
    },
    /// `/logout` without a provider: pick a stored credential.
    OpenLogout,
    /// Remove a provider's stored credential.
    Logout(String),
    /// Read the model list again (the catalog changed).
    RefreshModelList,
    /// Extensions were loaded afresh: their commands, shortcuts and models replace the old.
    ExtensionsLoaded,
    Steer(String),
    FollowUp(String),
    Abort,
    /// alt+up: take the agent's queues back.
    ClearQueue,
    Compact(Option<String>),
    SetModel(ModelInfo),
    /// ctrl+p / shift+ctrl+p picked the next model: Pi's `cycleModel` (`source: "cycle"`
    /// for extensions), with the scoped pattern's level when it has one.
    CycleModel {
        model: ModelInfo,
        thinking: Option<ThinkingLevel>,
    },
    SetThinking(ThinkingLevel),
    /// Navigate to the entry picked in /tree, summarizing the branch left as asked.
    NavigateTree {
        entry: String,
        summary: BranchSummary,
    },
    SetLabel {
        id: String,
        label: Option<String>,
    },
    RunBash {
        command: String,
        excluded: bool,
    },
    /// Escape while a `!cmd` runs.
    AbortBash,
    /// A key an extension registered with `pi.registerShortcut`: run its handler.
    Shortcut(String),
    /// ctrl+g: the loop suspends the screen, runs the editor, and sends `Msg::EditorText`.
    ExternalEditor(String),
    Suspend,
    Quit,
    /// Open the /tree navigator (the loop snapshots the session and calls `open_tree`).
    OpenTree,
    /// `/settings` changed `steeringMode` (`follow_up` false) or `followUpMode`: apply it
    /// to the running agent.
    SetQueueMode {
        follow_up: bool,
        mode: String,
    },
    /// ctrl+v: paste an image (as a file path) or text from the system clipboard.
    PasteClipboard,
    /// Open /resume (the loop lists sessions and calls `open_resume`).
    OpenResume,
    /// /resume's search changed: look these history index queries up in message text
    /// (the loop calls `resume_text_hits`).
    SearchSessionText(Vec<String>),
    Resume(String),
    /// ctrl+r in /resume: name a session (any session, not only the current one).
    RenameSession {
        id: String,
        location: String,
        name: String,
    },
    /// ctrl+d in /resume, once confirmed.
    DeleteSession {
        id: String,
        location: String,
    },
    NewSession,
    /// Open the /fork message picker (the loop reads the session and calls `open_fork`).
    OpenFork,
    /// Fork from before this user message (its entry id).
    Fork(String),
    Clone,
    SetSessionName(String),
    Copy(String),
    /// An extension dialog was answered: the `extension_ui_response` to send back.
    ExtensionAnswer(serde_json::Value),
    Export(Option<String>),
    Import(String),
    /// `/import` again, with the answer to "the session's directory is gone".
    ImportWith {
        path: String,
        missing_cwd: super::driver::MissingCwd,
    },
    /// `/resume` again, with the answer to "the session's directory is gone".
    ResumeWith {
        location: String,
        missing_cwd: super::driver::MissingCwd,
    },
    Reload,
    /// Open /mcp: the server list.
    OpenMcp,
    /// `/llama`: read the router, load or unload a model, update `/model`'s list.
    Llama(super::llama_view::LlamaAction),
    /// The Radius gateway's fresh catalog replaces the `radius` models.
    SetRadiusModels(Vec<pi_agent::llm::Model>),
    /// "Yes" to configuring the Radius MCP server after `/login radius`.
    ConfigureRadiusMcp,
    /// A server's view in /mcp.
    OpenMcpServer(String),
    /// An action of a server's view in /mcp.
    McpAction {
        server: String,
        action: super::mcp_view::McpAction,
    },
    /// Open /trust (the loop reads trust.json and calls `session_ops::open_trust`).
    OpenTrust,
    /// Save the /trust answer to trust.json (effective at the next start, as in Pi).
    SaveTrust(pi_agent::config::TrustChoice),
    SaveSetting {
        key: String,
        value: serde_json::Value,
    },
    /// An extension's `ctx.ui.setTheme()`: show the theme `name` (`""` or an unknown name:
    /// the default), and with `save` make it the `theme` setting.
    SetTheme {
        name: String,
        save: bool,
    },
    SaveScopedModels(Vec<String>),
    /// Pi's catalog refresh when `/model` or `/scoped-models` opens (the extensions'
    /// `refreshModels`, off the UI thread); `Some(term)`: `/model <term>` had no match and is
    /// looked up again afterwards.
    RefreshCatalogs(Option<String>),
    /// `/model <term>` after the catalog refresh: the model, else the picker.
    ModelQuery(String),
    /// `/session`: show the session's file, id, message counts, tokens and cost.
    SessionInfo,
}

/// Footer data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Footer {
    pub cwd: String,
    pub git_branch: Option<String>,
    pub session_name: Option<String>,
    pub totals: Usage,
    /// The whole file's totals are being summed off the UI thread (a resumed session at
    /// start-up); until they arrive `totals` covers the context shown, and
    /// `since_open` what this run has spent, to add to them.
    pub file_totals_pending: bool,
    pub since_open: Usage,
    /// Tokens of the last assistant message (the current context size).
    pub context_tokens: u64,
    pub auto_compact: bool,
    /// The physical model of the latest successful response: with a virtual model
    /// selected it is shown after the selection, and its context window applies.
    pub dispatched: Option<Dispatched>,
}

/// A command for completion: name and description.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub name: String,
    pub description: String,
}

pub const BUILTIN_COMMANDS: &[(&str, &str)] = &[
    ("model", "Select model (opens selector UI)"),
    ("scoped-models", "Enable/disable models for ctrl+p cycling"),
    ("settings", "Open settings menu"),
    ("thinking", "Set the thinking level"),
    ("resume", "Resume another session"),
    ("new", "Start a new session"),
    ("name", "Set session display name"),
    ("session", "Show session info and stats"),
    ("changelog", "Show changelog entries"),
    ("tree", "Navigate session tree (switch branches)"),
    ("fork", "Create a new fork from a previous message"),
    (
        "clone",
        "Duplicate the current session at the current position",
    ),
    ("compact", "Manually compact the session context"),
    ("copy", "Copy last agent message to clipboard"),
    ("export", "Export session to HTML file"),
    ("import", "Import and resume a session from a JSONL file"),
    (
        "reload",
        "Reload keybindings, extensions, skills, prompts, and themes",
    ),
    ("trust", "Save project trust decision for future sessions"),
    ("login", "Configure provider authentication"),
    ("logout", "Remove provider authentication"),
    ("hotkeys", "Show all keyboard shortcuts"),
    ("quit", "Quit pi"),
    // Pi's built-in `mcp` extension registers it after the built-in commands.
    (
        "mcp",
        "Manage MCP servers: sign in, reconnect, enable or disable, and change exposure",
    ),
    // Pi's built-in `llama.cpp` extension (off with `-builtin:llama.cpp`).
    ("llama", "Manage llama.cpp router models"),
];

#[derive(Debug, Clone, PartialEq)]
pub enum CompletionKind {
    Command,
    File,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub kind: CompletionKind,
    /// (replacement, description)
    pub items: Vec<(String, String)>,
    pub selected: usize,
}

/// Settings the UI reads.
#[derive(Debug, Clone, PartialEq)]
pub struct UiSettings {
    pub quiet_startup: bool,
    /// `doubleEscapeAction`: what escape twice on an empty, idle editor opens: `tree`
    /// (default), `fork`, or `none`.
    pub double_escape: String,
    pub skip_branch_prompt: bool,
    pub theme: String,
    /// Theme files and directories extensions contributed: their themes are offered in
    /// /settings after `dark` and `light`.
    pub theme_paths: Vec<std::path::PathBuf>,
    pub external_editor: Option<String>,
    /// `builtin:llama.cpp` is on: `/llama` is a command (else it is prompt text, as in Pi).
    pub llama: bool,
}

impl Default for UiSettings {
    fn default() -> Self {
        UiSettings {
            quiet_startup: false,
            double_escape: "tree".into(),
            skip_branch_prompt: false,
            theme: super::system_theme::NAME.into(),
            theme_paths: Vec::new(),
            external_editor: None,
            llama: true,
        }
    }
}

pub struct App {
    pub transcript: Transcript,
    pub editor: Editor,
    pub footer: Footer,
    pub dialog: Option<Dialog>,
    /// What extensions show (`ctx.ui`): status, widgets, header, footer, waiting dialogs.
    pub ext_ui: super::ext_ui::ExtUi,
    pub completion: Option<Completion>,
    pub theme: Theme,
    pub keys: Keymap,
    pub settings: UiSettings,
    pub flags: ViewFlags,
    /// Lines scrolled up from the bottom of the transcript.
    pub scroll: u64,
    pub working: bool,
    /// Between the agent's `agent_start` and `agent_end`: `working` may also be set by a
    /// prompt that has not started yet (or never does, when an extension takes it).
    pub agent_running: bool,
    pub compacting: bool,
    /// A tree navigation is summarizing the branch it leaves (escape aborts it).
    pub summarizing_branch: bool,
    /// Messages submitted while a branch summary is generated, with whether each is a
    /// follow-up: sent in order once the navigation completes (the first as the prompt).
    /// They are also in `steering`/`follow_up`, which show them as queued.
    pub held: Vec<(String, bool)>,
    pub steering: Vec<String>,
    pub follow_up: Vec<String>,
    pub models: Vec<ModelInfo>,
    /// Models ctrl+p cycles through (empty: all models).
    pub scoped: Vec<String>,
    /// Thinking levels that `--models` patterns such as `sonnet:high` attach to a scoped
    /// model; cycling to that model applies the level.
    pub scoped_thinking: std::collections::HashMap<String, ThinkingLevel>,
    pub model: Option<ModelInfo>,
    pub thinking: ThinkingLevel,
    /// Extra slash commands: skills (`skill:name`) and prompt templates.
    pub commands: Vec<Command>,
    pub files: Vec<String>,
    pub cwd: PathBuf,
    /// ctrl+c pressed on an empty editor: the next one quits.
    pub ctrl_c_armed: bool,
    /// escape pressed while idle with an empty editor: the next one opens /tree (Pi's
    /// doubleEscapeAction). Any other key disarms it; there is no time window, which keeps
    /// `update` free of clocks.
    pub escape_armed: bool,
    /// Spinner frame, advanced by ticks while working.
    pub tick: u64,
    /// Last assistant text, for /copy.
    pub last_assistant: Option<String>,
    /// The /resume picker was opened by `--resume`: cancelling it quits, as in Pi.
    pub resume_at_start: bool,
    /// Values of Pi's other /settings entries (see `settings_menu`).
    pub prefs: super::settings_menu::Prefs,
    /// Printed on the main screen after the UI closes.
    pub exit_message: Option<String>,
    /// `!cmd`s running now (escape cancels them).
    pub bash_running: usize,
    /// Wall-clock milliseconds, set by the loop before it hands over events (tests set it),
    /// so `update` itself reads no clock.
    pub now_ms: i64,
    /// When each running tool call started (`now_ms`), for the duration bash shows.
    pub tool_started: std::collections::HashMap<String, i64>,
    /// A failed request waiting to be retried.
    pub retry: Option<RetryWait>,
    /// ctrl+] (true) or ctrl+alt+] (false) was pressed: the next character is the target.
    pub jump: Option<bool>,
    /// The transcript index of the last status line (see [`App::status`]).
    pub status_at: Option<usize>,
    /// Large pastes shown in the editor as markers: (marker, text), numbered from 1.
    pub pastes: Vec<(String, String)>,
    /// The transcript's height and total line count on the last frame (the renderer
    /// writes it), so paging moves by a screenful.
    pub view: std::cell::Cell<(u16, u64)>,
}

/// A retry the agent waits for: shown as Pi's countdown in the status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryWait {
    pub attempt: u64,
    pub max_attempts: u64,
    /// When the retry fires (`now_ms` clock).
    pub due_ms: i64,
}

impl RetryWait {
    /// Whole seconds left, rounded up (0 once due).
    pub fn seconds_left(&self, now_ms: i64) -> i64 {
        ((self.due_ms - now_ms).max(0) + 999) / 1000
    }
}

impl App {
    pub fn new(cwd: PathBuf) -> App {
        let cwd_text = cwd.display().to_string();
        App {
            transcript: Transcript::default(),
            editor: Editor::default(),
            footer: Footer {
                cwd: cwd_text,
                ..Footer::default()
            },
            dialog: None,
            ext_ui: Default::default(),
            completion: None,
            theme: Theme::system(),
            keys: Keymap::default(),
            settings: UiSettings::default(),
            // Pi shows thinking blocks unless `hideThinkingBlock` is set.
            flags: ViewFlags {
                show_thinking: true,
                tools_expanded: false,
            },
            scroll: 0,
            working: false,
            agent_running: false,
            compacting: false,
            summarizing_branch: false,
            held: Vec::new(),
            steering: Vec::new(),
            follow_up: Vec::new(),
            models: Vec::new(),
            scoped: Vec::new(),
            scoped_thinking: std::collections::HashMap::new(),
            model: None,
            thinking: ThinkingLevel::Off,
            commands: Vec::new(),
            files: Vec::new(),
            cwd,
            ctrl_c_armed: false,
            escape_armed: false,
            tick: 0,
            last_assistant: None,
            resume_at_start: false,
            prefs: super::settings_menu::Prefs::default(),
            exit_message: None,
            bash_running: 0,
            now_ms: 0,
            tool_started: std::collections::HashMap::new(),
            retry: None,
            jump: None,
            status_at: None,
            pastes: Vec::new(),
            view: std::cell::Cell::new((0, 0)),
        }
    }

    /// The startup header: shortcuts, then loaded context files, skills and templates.
    pub fn push_header(&mut self, loaded: &[(String, String)]) {
        if self.settings.quiet_startup {
            return;
        }
        let rows = self.header_rows(loaded);
        self.transcript.push(Item::Header(rows));
    }

    /// After /reload: the header at the top shows the resources loaded now (and the
    /// shortcuts of the reloaded keymap); a quiet start-up stays without one.
    pub fn refresh_header(&mut self, loaded: &[(String, String)]) {
        let rows = self.header_rows(loaded);
        if let Some(Item::Header(old)) = self.transcript.get_mut(0) {
            *old = rows;
        }
    }

    fn header_rows(&self, loaded: &[(String, String)]) -> Vec<(String, String)> {
        let k = |a: &str| self.keys.hint(a);
        let mut rows = vec![
            (k("app.interrupt"), "to interrupt".to_string()),
            (k("app.clear"), "to clear".to_string()),
            (format!("{} twice", k("app.clear")), "to exit".to_string()),
            (k("app.exit"), "to exit (empty)".to_string()),
            (k("app.model.cycleForward"), "to cycle models".to_string()),
            (k("app.thinking.cycle"), "to cycle thinking".to_string()),
            (k("app.tools.expand"), "to expand tools".to_string()),
            (k("app.thinking.toggle"), "to toggle thinking".to_string()),
            (k("app.editor.external"), "for external editor".to_string()),
            ("/".to_string(), "for commands".to_string()),
            ("!".to_string(), "to run bash".to_string()),
            ("@".to_string(), "to reference files".to_string()),
        ];
        rows.extend(loaded.iter().cloned());
        rows
    }

    /// Rebuilds the transcript from a session's context messages (Pi message JSON), for
    /// `-c`, `--session`, /resume and /new; usage totals are summed for the footer.
    pub fn load_messages(&mut self, messages: &[serde_json::Value]) {
        use serde_json::Value;
        let header = self
            .transcript
            .items()
            .first()
            .filter(|i| matches!(i, Item::Header(_)))
            .cloned();
        self.transcript.clear();
        self.status_at = None;
        self.transcript.extend(header);
        self.footer.totals = Usage::default();
        self.footer.context_tokens = 0;
        self.footer.dispatched = None;
        self.last_assistant = None;
        let text_of = |content: Option<&Value>, kind: &str, field: &str| -> String {
            match content {
                Some(Value::String(s)) if kind == "text" => s.clone(),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
                    .filter_map(|p| p.get(field).and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            }
        };
        for m in messages {
            let content = m.get("content");
            match m.get("role").and_then(Value::as_str) {
                Some("user") => self
                    .transcript
                    .push(Item::User(text_of(content, "text", "text"))),
                Some("assistant") => {
                    let text = text_of(content, "text", "text");
                    let thinking = text_of(content, "thinking", "thinking");
                    let error = match m.get("stopReason").and_then(Value::as_str) {
                        Some("error") | Some("aborted") => Some(
                            m.get("errorMessage")
                                .and_then(Value::as_str)
                                .unwrap_or("aborted")
                                .to_string(),
                        ),
                        _ => None,
                    };
                    let failed = error.is_some();
                    if !text.trim().is_empty() {
                        self.last_assistant = Some(text.clone());
                    }
                    if !text.trim().is_empty() || !thinking.trim().is_empty() || error.is_some() {
                        self.transcript.push(Item::Assistant {
                            text,
                            thinking,
                            error,
                        });
                    }
                    if let Some(Value::Array(parts)) = content {
                        for p in parts
                            .iter()
                            .filter(|p| p.get("type").and_then(Value::as_str) == Some("toolCall"))
                        {
                            self.transcript.push(Item::Tool {
                                id: p
                                    .get("id")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_string(),
                                name: p
                                    .get("name")
                                    .and_then(Value::as_str)
                                    .unwrap_or("tool")
                                    .to_string(),
                                args: p.get("arguments").map(Value::to_string).unwrap_or_default(),
                                output: String::new(),
                                is_error: false,
                                done: false,
                                diff: None,
                                duration_ms: None,
                            });
                        }
                    }
                    if let Some(u) = m.get("usage") {
                        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                        let t = &mut self.footer.totals;
                        t.input += n("input");
                        t.output += n("output");
                        t.cache_read += n("cacheRead");
                        t.cache_write += n("cacheWrite");
                        t.cost += u
                            .pointer("/cost/total")
                            .and_then(Value::as_f64)
                            .unwrap_or(0.0);
                        // An aborted or failed reply says nothing about the context size
                        // (Pi takes the last assistant usage that is neither).
                        if !failed {
                            self.footer.context_tokens =
                                n("input") + n("output") + n("cacheRead") + n("cacheWrite");
                        }
                    }
                    if !failed {
                        if let Some(d) = Dispatched::of_message(m) {
                            self.footer.dispatched = Some(d);
                        }
                    }
                }
                Some("toolResult") => {
                    let id = m.get("toolCallId").and_then(Value::as_str).unwrap_or("");
                    let output = text_of(content, "text", "text");
                    let is_error = m.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    let edit_diff = m
                        .pointer("/details/diff")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    if let Some(Item::Tool {
                        output: o,
                        is_error: e,
                        done,
                        diff,
                        ..
                    }) = self.transcript.tool_mut(id)
                    {
                        *o = output;
                        *e = is_error;
                        *done = true;
                        *diff = edit_diff;
                    }
                }
                Some(role @ ("compactionSummary" | "branchSummary")) => {
                    let summary = m
                        .get("summary")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    self.transcript.push(if role == "branchSummary" {
                        Item::BranchSummary(summary)
                    } else {
                        Item::Compaction(summary)
                    });
                }
                Some("bashExecution") => self.transcript.push(Item::Bash {
                    command: m
                        .get("command")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    output: m
                        .get("output")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    excluded: m
                        .get("excludeFromContext")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                }),
                _ => {}
            }
        }
        // Up arrow recalls this session's prompts, as in Pi.
        let prompts: Vec<String> = self
            .transcript
            .items()
            .iter()
            .filter_map(|i| match i {
                Item::User(t) if !t.trim().is_empty() => Some(t.clone()),
                _ => None,
            })
            .collect();
        self.editor.set_history(prompts);
        self.scroll = 0;
    }

    /// Works in `cwd` from now on (a session from another directory was opened): the
    /// footer shows it, `@` completion and `!cmd` use it.
    pub fn set_cwd(&mut self, cwd: PathBuf) {
        self.footer.cwd = cwd.display().to_string();
        self.footer.git_branch = super::git_branch(&cwd);
        self.files.clear();
        self.cwd = cwd;
    }

    /// A `!cmd` starts: its transcript item shows it running until it finishes.
    fn start_bash(&mut self, command: &str, excluded: bool) {
        self.bash_running += 1;
        self.transcript.push(Item::Bash {
            command: command.to_string(),
            output: BASH_RUNNING.to_string(),
            excluded,
        });
    }

    /// A `!cmd` finished: its running item gets the output (or a new item, when the
    /// transcript was rebuilt meanwhile).
    pub fn finish_bash(&mut self, command: String, output: String, excluded: bool) {
        self.bash_running = self.bash_running.saturating_sub(1);
        let running = self.transcript.items().iter().rposition(|i| {
            matches!(i, Item::Bash { command: c, output: o, .. } if *c == command && o == BASH_RUNNING)
        });
        match running.and_then(|i| self.transcript.get_mut(i)) {
            Some(Item::Bash { output: o, .. }) => *o = output,
            _ => self.transcript.push(Item::Bash {
                command,
                output,
                excluded,
            }),
        }
    }

    /// `/session`, as Pi prints it: file and id, message counts, tokens and cost (the
    /// totals cover the whole file, like the footer).
    pub fn session_info(&mut self, session: Option<&pi_engine::session::Session>) {
        let Some(s) = session else {
            self.notice("No session");
            return;
        };
        let (mut user, mut assistant, mut calls, mut results) = (0, 0, 0, 0);
        for idx in s.indices() {
            let record = s.entry(idx);
            if record.is_message_with_role("user") {
                user += 1;
            } else if record.is_message_with_role("assistant") {
                assistant += 1;
                let v = s.entry_value(idx);
                calls += v
                    .pointer("/message/content")
                    .and_then(serde_json::Value::as_array)
                    .map_or(0, |parts| {
                        parts
                            .iter()
                            .filter(|p| p.get("type").and_then(|t| t.as_str()) == Some("toolCall"))
                            .count()
                    });
            } else if record.is_message_with_role("toolResult") {
                results += 1;
            }
        }
        let t = super::session_ops::session_totals(s);
        let mut text = String::from("Session Info\n\n");
        if let Some(name) = s.session_name() {
            text.push_str(&format!("Name: {name}\n"));
        }
        let file = s
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "In-memory".into());
        text.push_str(&format!(
            "File: {file}\nID: {}\n\nMessages\nUser: {user}\nAssistant: {assistant}\nTool Calls: {calls}\nTool Results: {results}\nTotal: {}\n\nTokens\nInput: {}\nOutput: {}\nCache Read: {}\nCache Write: {}\nTotal: {}\n\nCost\nTotal: ${:.4}",
            s.session_id().unwrap_or_default(),
            user + assistant + results,
            t.input,
            t.output,
            t.cache_read,
            t.cache_write,
            t.input + t.output + t.cache_read + t.cache_write,
            t.cost
        ));
        // A virtual model spends on several physical models: Pi lists each one's cost.
        let by_model = super::session_ops::cost_by_model(s);
        let routed = self.model.as_ref().is_some_and(|m| m.is_virtual);
        if routed || by_model.len() > 1 {
            for (model, cost) in by_model {
                text.push_str(&format!("\n{model}: ${cost:.4}"));
            }
        }
        self.notice(text);
    }

    /// A one-line status, as Pi's `showStatus`: it replaces the previous status line when
    /// nothing was added after it, so cycling models does not fill the transcript.
    pub fn status(&mut self, text: String) {
        let n = self.transcript.len();
        if n > 0 && self.status_at == Some(n - 1) {
            if let Some(Item::Notice(t)) = self.transcript.last_mut() {
                *t = text;
                return;
            }
        }
        self.transcript.push(Item::Notice(text));
        self.status_at = Some(self.transcript.len() - 1);
    }

    pub fn notice(&mut self, text: impl Into<String>) {
        self.transcript.push(Item::Notice(text.into()));
    }

    pub fn open_tree(&mut self, mut nav: TreeNav) {
        // `treeFilterMode`: the filter /tree opens with.
        if let Some(f) = super::tree::Filter::ALL
            .into_iter()
            .find(|f| f.name() == self.prefs.tree_filter)
        {
            if f != nav.filter {
                nav.set_filter(f);
            }
        }
        self.dialog = Some(Dialog::Tree(Box::new(nav)));
    }

    pub fn open_resume(&mut self, rows: Vec<SessionRow>, now_ms: i64) {
        let mut picker = ResumePicker::new(rows, now_ms);
        picker.cwd = pi_storage::paths::resolve_cwd(&self.cwd.to_string_lossy());
        self.dialog = Some(Dialog::Resume(picker));
    }

    /// The loop's answers to [`Effect::SearchSessionText`]: `lookup` gives the sessions whose
    /// message text matches an index query, or `None` when the index cannot tell (the
    /// picker then looks at first messages only).
    pub fn resume_text_hits(
        &mut self,
        queries: Vec<String>,
        mut lookup: impl FnMut(&str) -> Option<std::collections::HashSet<String>>,
    ) {
        if let Some(Dialog::Resume(r)) = self.dialog.as_mut() {
            for q in queries {
                if let Some(hits) = lookup(&q) {
                    r.text_hits.insert(q, hits);
                }
            }
            r.clamp();
        }
    }

    /// The /fork picker over the session's user messages; a notice when there are none.
    pub fn open_fork(&mut self, rows: Vec<ForkRow>) {
        if rows.is_empty() {
            self.notice("No messages to fork from");
            return;
        }
        self.dialog = Some(Dialog::Fork(ForkPicker::new(rows)));
    }

    /// A rename from /resume was written: show the new name in the open picker.
    pub fn resume_renamed(&mut self, id: &str, name: &str) {
        if let Some(Dialog::Resume(r)) = self.dialog.as_mut() {
            if let Some(row) = r.sessions.iter_mut().find(|s| s.id == id) {
                row.name = Some(name.to_string());
            }
        }
        if let Some(Dialog::Resume(r)) = self.dialog.as_ref() {
            if r.current.as_deref() == Some(id) {
                self.footer.session_name = Some(name.to_string());
            }
        }
    }

    /// A rename or delete from /resume failed: say so in the open picker (the transcript
    /// is mostly hidden behind it), else in the transcript.
    pub fn resume_error(&mut self, text: String) {
        match self.dialog.as_mut() {
            Some(Dialog::Resume(r)) => r.error = Some(text),
            _ => self.transcript.push(Item::Error(text)),
        }
    }

    /// A delete from /resume succeeded: drop the row from the open picker.
    pub fn resume_deleted(&mut self, id: &str) {
        if let Some(Dialog::Resume(r)) = self.dialog.as_mut() {
            r.sessions.retain(|s| s.id != id);
            r.clamp();
        }
    }

    /// `/model <term>`: the model whose `provider/id` or id is the term, else the picker
    /// filtered by it (refreshing the catalogs again as it opens, as Pi's picker does).
    pub fn model_query(&mut self, q: String, out: &mut Vec<Effect>) {
        match self
            .models
            .iter()
            .find(|m| m.key() == q || m.id == q)
            .cloned()
        {
            Some(m) => self.set_model(m, out),
            None => {
                self.open_model_picker_refreshing(out);
                if let Some(Dialog::ModelPicker(p)) = self.dialog.as_mut() {
                    p.query = q;
                    p.selected = 0;
                }
            }
        }
    }

    /// The catalog changed: an open model picker or `/scoped-models` list shows the new one
    /// (choices made in the list kept; a new model enabled when the settings name it).
    pub fn catalog_changed(&mut self) {
        match self.dialog.as_mut() {
            Some(Dialog::ModelPicker(p)) => {
                p.models = self.models.clone();
                p.selected = p.selected.min(p.filtered().len().saturating_sub(1));
            }
            Some(Dialog::ScopedModels(s)) => {
                let was: Vec<(String, bool)> = s
                    .models
                    .iter()
                    .zip(&s.enabled)
                    .map(|(m, on)| (m.key(), *on))
                    .collect();
                s.enabled = self
                    .models
                    .iter()
                    .map(|m| {
                        let key = m.key();
                        was.iter()
                            .find(|(k, _)| *k == key)
                            .map_or_else(|| self.scoped.contains(&key), |(_, on)| *on)
                    })
                    .collect();
                s.models = self.models.clone();
                s.selected = s.selected.min(s.models.len().saturating_sub(1));
            }
            _ => {}
        }
    }

    pub fn open_model_picker(&mut self) {
        let current = self.model.as_ref().map(ModelInfo::key);
        let selected = self
            .models
            .iter()
            .position(|m| Some(m.key()) == current)
            .unwrap_or(0);
        self.dialog = Some(Dialog::ModelPicker(ModelPicker {
            models: self.models.clone(),
            query: String::new(),
            selected,
            current,
            refresh_status: None,
        }));
    }

    /// The model picker as Pi opens it: the catalog as it is now, refreshed meanwhile
    /// (the extensions' `refreshModels`), with the refresh's status under the list.
    pub fn open_model_picker_refreshing(&mut self, out: &mut Vec<Effect>) {
        self.open_model_picker();
        if let Some(Dialog::ModelPicker(p)) = self.dialog.as_mut() {
            p.refresh_status = Some(RefreshStatus::Running);
        }
        out.push(Effect::RefreshCatalogs(None));
    }

    pub fn open_settings(&mut self) {
        use super::settings_menu::{items, late_items};
        let flag = |key: &'static str, label: &'static str, on: bool| Setting {
            key,
            label,
            options: vec!["true".to_string(), "false".to_string()],
            value: usize::from(!on),
        };
        let levels = super::driver::available_levels(self.model.as_ref());
        let level = levels.iter().position(|l| *l == self.thinking).unwrap_or(0);
        let mut list = vec![
            Setting {
                key: "defaultThinkingLevel",
                label: "Thinking level",
                options: levels.iter().map(|l| l.as_str().to_string()).collect(),
                value: level,
            },
            {
                // Pi's order: `system` (the default), then the other built-in themes and
                // the ones extensions contributed, by name; a configured theme found
                // nowhere else is listed as it is set.
                let system = super::system_theme::NAME.to_string();
                let mut options: Vec<String> = vec!["dark".into(), "light".into()];
                for name in super::theme::theme_names(&self.settings.theme_paths) {
                    if !options.contains(&name) && name != system {
                        options.push(name);
                    }
                }
                if !self.settings.theme.is_empty()
                    && !options.contains(&self.settings.theme)
                    && self.settings.theme != system
                {
                    options.push(self.settings.theme.clone());
                }
                options.sort();
                options.insert(0, system);
                let value = options
                    .iter()
                    .position(|o| *o == self.settings.theme)
                    .unwrap_or(0);
                Setting {
                    key: "theme",
                    label: "Theme",
                    options,
                    value,
                }
            },
            // From here on Pi's entries in Pi's order (those this build acts on).
            flag(
                "compaction.enabled",
                "Auto-compact",
                self.footer.auto_compact,
            ),
        ];
        list.extend(items(&self.prefs));
        list.push(flag(
            "hideThinkingBlock",
            "Hide thinking",
            !self.flags.show_thinking,
        ));
        list.push(flag(
            "quietStartup",
            "Quiet startup",
            self.settings.quiet_startup,
        ));
        list.extend(late_items(&self.prefs, &self.settings.double_escape));
        list.push(flag(
            "branchSummary.skipPrompt",
            "Skip branch summary prompt",
            self.settings.skip_branch_prompt,
        ));
        self.dialog = Some(Dialog::Settings(SettingsDialog {
            items: list,
            selected: 0,
        }));
    }

    fn scoped_models(&self) -> Vec<ModelInfo> {
        if self.scoped.is_empty() {
            return self.models.clone();
        }
        self.scoped
            .iter()
            .filter_map(|k| self.models.iter().find(|m| &m.key() == k).cloned())
            .collect()
    }

    pub(super) fn set_model(&mut self, m: ModelInfo, out: &mut Vec<Effect>) {
        if !m.reasoning {
            self.thinking = ThinkingLevel::Off;
        }
        self.model = Some(m.clone());
        out.push(Effect::SetModel(m));
    }

    fn cycle_model(&mut self, forward: bool, out: &mut Vec<Effect>) {
        let scoped = !self.scoped.is_empty();
        let list = self.scoped_models();
        if list.len() < 2 {
            self.notice(if list.is_empty() {
                "No models available"
            } else {
                "Only one model in scope"
            });
            return;
        }
        let cur = self
            .model
            .as_ref()
            .and_then(|m| list.iter().position(|x| x.key() == m.key()));
        let n = list.len();
        let next = match cur {
            Some(i) if forward => (i + 1) % n,
            Some(i) => (i + n - 1) % n,
            None => 0,
        };
        let model = list[next].clone();
        let level = scoped
            .then(|| self.scoped_thinking.get(&model.key()).copied())
            .flatten();
        if !model.reasoning {
            self.thinking = ThinkingLevel::Off;
        }
        self.model = Some(model.clone());
        // A `:level` on the scoped pattern wins, clamped to what the model can do.
        let thinking = level.map(|level| {
            if model.reasoning {
                level
            } else {
                ThinkingLevel::Off
            }
        });
        if let Some(level) = thinking {
            self.thinking = level;
        }
        out.push(Effect::CycleModel {
            model: model.clone(),
            thinking,
        });
        let name = if model.name.is_empty() {
            &model.id
        } else {
            &model.name
        };
        let thinking = if model.reasoning {
            format!(" (thinking: {})", self.thinking.as_str())
        } else {
            String::new()
        };
        self.status(format!("Switched to {name}{thinking}"));
    }

    /// Sends what was held during a branch summary, as Pi flushes its compaction queue
    /// after navigating: the first message starts the turn, the rest are queued behind it.
    /// (An aborted summary keeps them queued, as in Pi.)
    fn send_held(&mut self, out: &mut Vec<Effect>) {
        let mut held = std::mem::take(&mut self.held).into_iter();
        let Some((first, first_follow_up)) = held.next() else {
            return;
        };
        let shown = if first_follow_up {
            &mut self.follow_up
        } else {
            &mut self.steering
        };
        if let Some(i) = shown.iter().position(|s| *s == first) {
            shown.remove(i);
        }
        self.working = true;
        out.push(Effect::Prompt(first));
        for (text, follow_up) in held {
            out.push(if follow_up {
                Effect::FollowUp(text)
            } else {
                Effect::Steer(text)
            });
        }
    }

    fn restore_queue_to_editor(&mut self, steering: Vec<String>, follow_up: Vec<String>) {
        let mut parts: Vec<String> = steering.into_iter().chain(follow_up).collect();
        if parts.is_empty() {
            return;
        }
        if !self.editor.is_empty() {
            parts.push(self.editor.text());
        }
        self.editor.set_text(&parts.join("\n\n"));
    }

    fn update_completion(&mut self) {
        let text = self.editor.text();
        if let Some(rest) = text.strip_prefix('/') {
            if !rest.contains(char::is_whitespace) {
                let llama = self.settings.llama;
                // Pi's order: built-in commands, prompt templates, extension commands, skills.
                let mut added: Vec<&Command> = self.commands.iter().collect();
                added.sort_by_key(|c| {
                    if self.ext_ui.commands.contains(&c.name) {
                        1
                    } else if c.name.starts_with("skill:") {
                        2
                    } else {
                        0
                    }
                });
                let mut items: Vec<(String, String)> = BUILTIN_COMMANDS
                    .iter()
                    .filter(|(n, _)| llama || *n != "llama")
                    .map(|(n, d)| (n.to_string(), d.to_string()))
                    .chain(
                        added
                            .iter()
                            .map(|c| (c.name.clone(), c.description.clone())),
                    )
                    .filter(|(n, _)| n.starts_with(rest))
                    .map(|(n, d)| (format!("/{n}"), d))
                    .collect();
                items.truncate(50);
                self.completion = (!items.is_empty()).then_some(Completion {
                    kind: CompletionKind::Command,
                    items,
                    selected: 0,
                });
                return;
            }
        }
        let word = self.editor.word_before_cursor();
        if let Some(q) = word.strip_prefix('@') {
            let mut scored: Vec<(i64, &String)> = self
                .files
                .iter()
                .filter_map(|f| fuzzy_score(q, f).map(|s| (s, f)))
                .collect();
            scored.sort();
            let items: Vec<(String, String)> = scored
                .into_iter()
                .take(20)
                .map(|(_, f)| (format!("@{f}"), String::new()))
                .collect();
            self.completion = (!items.is_empty()).then_some(Completion {
                kind: CompletionKind::File,
                items,
                selected: 0,
            });
            return;
        }
        self.completion = None;
    }

    fn accept_completion(&mut self) -> bool {
        let Some(c) = self.completion.take() else {
            return false;
        };
        let Some((text, _)) = c.items.get(c.selected) else {
            return false;
        };
        match c.kind {
            CompletionKind::Command => self.editor.set_text(&format!("{text} ")),
            CompletionKind::File => self.editor.replace_word_before_cursor(&format!("{text} ")),
        }
        true
    }

    /// Tab with no popup: complete the path before the cursor against the file system.
    fn complete_path(&mut self) {
        let word = self.editor.word_before_cursor();
        let (prefix, path_text) = match word.strip_prefix('@') {
            Some(p) => ("@", p.to_string()),
            None => ("", word.clone()),
        };
        let (dir_text, stem) = match path_text.rfind('/') {
            Some(i) => (&path_text[..=i], &path_text[i + 1..]),
            None => ("", path_text.as_str()),
        };
        let dir = if dir_text.starts_with('/') {
            PathBuf::from(dir_text)
        } else if let Some(rest) = dir_text.strip_prefix("~/") {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default()
                .join(rest)
        } else {
            self.cwd.join(dir_text)
        };
        let Ok(read) = std::fs::read_dir(&dir) else {
            return;
        };
        let mut names: Vec<(String, bool)> = read
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                (name.starts_with(stem) && (!name.starts_with('.') || stem.starts_with('.')))
                    .then_some((name, is_dir))
            })
            .collect();
        names.sort();
        match names.len() {
            0 => {}
            1 => {
                let (name, is_dir) = &names[0];
                let tail = if *is_dir { "/" } else { " " };
                self.editor
                    .replace_word_before_cursor(&format!("{prefix}{dir_text}{name}{tail}"));
            }
            _ => {
                // Extend to the longest common prefix, then offer the choices.
                let first = &names[0].0;
                let common = names.iter().fold(first.len(), |n, (s, _)| {
                    first
                        .chars()
                        .zip(s.chars())
                        .take_while(|(a, b)| a == b)
                        .count()
                        .min(n)
                });
                let common: String = first.chars().take(common).collect();
                self.editor
                    .replace_word_before_cursor(&format!("{prefix}{dir_text}{common}"));
                let items = names
                    .iter()
                    .map(|(n, d)| {
                        (
                            format!("{prefix}{dir_text}{n}{}", if *d { "/" } else { "" }),
                            String::new(),
                        )
                    })
                    .collect();
                self.completion = Some(Completion {
                    kind: CompletionKind::File,
                    items,
                    selected: 0,
                });
            }
        }
    }

    /// The editor text with paste markers replaced by what was pasted.
    fn expand_pastes(&self, text: String) -> String {
        self.pastes
            .iter()
            .fold(text, |t, (marker, pasted)| t.replace(marker, pasted))
    }

    fn submit(&mut self, follow_up: bool, out: &mut Vec<Effect>) {
        if !self.pastes.is_empty() {
            let text = self.expand_pastes(self.editor.text());
            self.pastes.clear();
            self.editor.set_text(&text);
        }
        let text = self.editor.text();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        if let Some(cmd) = trimmed.strip_prefix('/') {
            if self.slash_command(cmd, out) {
                self.editor.take();
                return;
            }
        }
        if let Some((cmd, excluded)) = trimmed
            .strip_prefix("!!")
            .map(|c| (c, true))
            .or_else(|| trimmed.strip_prefix('!').map(|c| (c, false)))
        {
            self.editor.take();
            let command = cmd.trim().to_string();
            self.start_bash(&command, excluded);
            out.push(Effect::RunBash { command, excluded });
            return;
        }
        // A redirect URL for the `/mcp` sign-in waiting on its browser, not a prompt.
        if super::mcp_view::take_pasted_redirect(trimmed) {
            self.editor.take();
            self.notice("Redirect URL received, finishing the sign-in…");
            return;
        }
        let text = self.editor.take();
        if self.summarizing_branch {
            // Sent now it would land on the branch being left: Pi queues it (its compaction
            // queue, with Pi's status text) and sends it once the navigation completes.
            if follow_up {
                self.follow_up.push(text.clone());
            } else {
                self.steering.push(text.clone());
            }
            self.held.push((text, follow_up));
            self.notice("Queued message for after compaction");
            return;
        }
        self.scroll = 0;
        if self.working {
            if follow_up {
                self.follow_up.push(text.clone());
                out.push(Effect::FollowUp(text));
            } else {
                self.steering.push(text.clone());
                out.push(Effect::Steer(text));
            }
        } else {
            self.working = true;
            out.push(Effect::Prompt(text));
        }
    }

    /// Runs a slash command; false when the name is unknown (then the text is sent as a
    /// prompt, as Pi does for `/unknown`).
    fn slash_command(&mut self, line: &str, out: &mut Vec<Effect>) -> bool {
        let (name, args) = match line.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (line, ""),
        };
        let arg = (!args.is_empty()).then(|| args.to_string());
        match name {
            "model" => match arg {
                // Pi refreshes the catalogs first when the term names no model (unless
                // scoped models limit the choice), then looks again.
                Some(q)
                    if self.scoped.is_empty()
                        && !self.models.iter().any(|m| m.key() == q || m.id == q) =>
                {
                    self.notice("Refreshing model catalogs…");
                    out.push(Effect::RefreshCatalogs(Some(q)));
                }
                Some(q) => self.model_query(q, out),
                None => self.open_model_picker_refreshing(out),
            },
            "scoped-models" => {
                // Pi refreshes the catalogs while the list is open.
                out.push(Effect::RefreshCatalogs(None));
                let enabled = self
                    .models
                    .iter()
                    .map(|m| self.scoped.contains(&m.key()))
                    .collect();
                self.dialog = Some(Dialog::ScopedModels(ScopedModels {
                    models: self.models.clone(),
                    enabled,
                    selected: 0,
                }));
            }
            "settings" => self.open_settings(),
            "resume" => out.push(Effect::OpenResume),
            "new" => out.push(Effect::NewSession),
            "name" => match arg {
                Some(n) => {
                    self.footer.session_name = Some(n.clone());
                    out.push(Effect::SetSessionName(n));
                }
                None => self.notice("Usage: /name <name>"),
            },
            // The loop reads the session (file, id, message counts) and calls `session_info`.
            "session" => out.push(Effect::SessionInfo),
            "thinking" => {
                let levels = super::driver::available_levels(self.model.as_ref());
                match arg.as_deref() {
                    None => {
                        let options = levels
                            .iter()
                            .map(|l| (l.as_str().to_string(), Some(Effect::SetThinking(*l))))
                            .collect();
                        self.dialog = Some(Dialog::Confirm(Confirm {
                            title: "Thinking level".into(),
                            message: String::new(),
                            selected: levels.iter().position(|l| *l == self.thinking).unwrap_or(0),
                            options,
                            cancelled: String::new(),
                        }));
                    }
                    Some(text) => match ThinkingLevel::parse(text) {
                        Some(l) if levels.contains(&l) => {
                            self.thinking = l;
                            out.push(Effect::SetThinking(l));
                            self.notice(format!("Thinking level: {}", l.as_str()));
                        }
                        _ => self.transcript.push(Item::Error(format!(
                            "Invalid thinking level \"{text}\" for this model. Available: {}",
                            levels
                                .iter()
                                .map(|l| l.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))),
                    },
                }
            }
            "tree" => out.push(Effect::OpenTree),
            "fork" => out.push(Effect::OpenFork),
            "clone" => out.push(Effect::Clone),
            "compact" => {
                self.compacting = true;
                out.push(Effect::Compact(arg));
            }
            "copy" => match self.last_assistant.clone() {
                Some(t) => out.push(Effect::Copy(t)),
                None => self.notice("No assistant message to copy"),
            },
            "export" => out.push(Effect::Export(arg)),
            "import" => match path_argument(args) {
                Some(f) => {
                    self.dialog = Some(Dialog::Confirm(Confirm::yes_no(
                        "Import session",
                        format!("Replace current session with {f}?"),
                        Effect::Import(f),
                        "Import cancelled",
                    )))
                }
                None => self
                    .transcript
                    .push(Item::Error("Usage: /import <path.jsonl>".into())),
            },
            "reload" => out.push(Effect::Reload),
            "login" => match arg {
                Some(a) => out.push(Effect::Login(a)),
                None => self.dialog = Some(super::login::picker()),
            },
            "logout" => match arg {
                Some(p) => out.push(Effect::Logout(p)),
                None => out.push(Effect::OpenLogout),
            },
            "trust" => out.push(Effect::OpenTrust),
            "mcp" => out.push(Effect::OpenMcp),
            "llama" if self.settings.llama => {
                out.push(Effect::Llama(super::llama_view::LlamaAction::Open))
            }
            "hotkeys" => self.dialog = Some(Dialog::Hotkeys(0)),
            "changelog" => self
                .transcript
                .push(Item::Changelog(super::changelog::markdown(
                    super::changelog::CHANGELOG,
                ))),
            "quit" | "exit" => out.push(Effect::Quit),
            // Skills, prompt templates and anything that is no command (a path such as
            // `/usr/local/bin/python crashes`) go to the agent as prompts, as in Pi.
            _ => return false,
        }
        true
    }

    fn on_agent(&mut self, ev: AgentEvent) {
        match ev {
            AgentEvent::AgentStart => {
                self.working = true;
                self.agent_running = true;
                self.retry = None;
            }
            AgentEvent::AgentEnd => {
                self.working = false;
                self.agent_running = false;
                self.retry = None;
                self.steering.clear();
                self.follow_up.clear();
            }
            AgentEvent::TurnStart | AgentEvent::TurnEnd => {}
            AgentEvent::MessageStart { role, text } => match role.as_str() {
                "user" => {
                    // A queued steering/follow-up message is now delivered: drop it from the queue.
                    if let Some(i) = self.steering.iter().position(|s| *s == text) {
                        self.steering.remove(i);
                    } else if let Some(i) = self.follow_up.iter().position(|s| *s == text) {
                        self.follow_up.remove(i);
                    }
                    self.transcript.push(Item::User(text));
                }
                "assistant" => self.transcript.push(Item::Assistant {
                    text: String::new(),
                    thinking: String::new(),
                    error: None,
                }),
                _ => {}
            },
            AgentEvent::TextDelta(d) => {
                if let Some(Item::Assistant { text, .. }) = self.last_assistant_item() {
                    text.push_str(&d);
                }
            }
            AgentEvent::ThinkingDelta(d) => {
                if let Some(Item::Assistant { thinking, .. }) = self.last_assistant_item() {
                    thinking.push_str(&d);
                }
            }
            AgentEvent::MessageEnd {
                role,
                usage,
                error,
                dispatched,
            } => {
                if role == "assistant" {
                    if error.is_none() && dispatched.is_some() {
                        self.footer.dispatched = dispatched;
                    }
                    if let Some(u) = usage {
                        self.footer.totals.add(&u);
                        if self.footer.file_totals_pending {
                            self.footer.since_open.add(&u);
                        }
                        if error.is_none() {
                            self.footer.context_tokens =
                                u.input + u.output + u.cache_read + u.cache_write;
                        }
                    }
                    if let Some(Item::Assistant { text, error: e, .. }) = self.last_assistant_item()
                    {
                        *e = error;
                        let t = text.clone();
                        if !t.trim().is_empty() {
                            self.last_assistant = Some(t);
                        }
                    }
                }
            }
            AgentEvent::ToolStart { id, name, args } => {
                self.tool_started.insert(id.clone(), self.now_ms);
                self.transcript.push(Item::Tool {
                    id,
                    name,
                    args,
                    output: String::new(),
                    is_error: false,
                    done: false,
                    diff: None,
                    duration_ms: None,
                })
            }
            AgentEvent::ToolUpdate { id, output } => {
                if let Some(Item::Tool { output: o, .. }) = self.transcript.tool_mut(&id) {
                    *o = output;
                }
            }
            AgentEvent::ToolEnd {
                id,
                output,
                is_error,
                diff: edit_diff,
            } => {
                let took = self
                    .tool_started
                    .remove(&id)
                    .map(|start| (self.now_ms - start).max(0) as u64);
                if let Some(Item::Tool {
                    output: o,
                    is_error: e,
                    done,
                    diff,
                    duration_ms,
                    ..
                }) = self.transcript.tool_mut(&id)
                {
                    *o = output;
                    *e = is_error;
                    *done = true;
                    *diff = edit_diff;
                    *duration_ms = took;
                }
            }
            AgentEvent::QueueUpdate {
                steering,
                follow_up,
            } => {
                self.steering = steering;
                self.follow_up = follow_up;
            }
            AgentEvent::CompactionStart => self.compacting = true,
            AgentEvent::CompactionEnd { summary, error } => {
                self.compacting = false;
                match (summary, error) {
                    (_, Some(e)) => self
                        .transcript
                        .push(Item::Error(format!("Compaction failed: {e}"))),
                    (Some(s), None) => self.transcript.push(Item::Compaction(s)),
                    (None, None) => {}
                }
            }
            AgentEvent::TreeNavigated {
                messages,
                editor_text,
            } => {
                self.summarizing_branch = false;
                // The footer totals cover the whole session file, not the branch shown.
                let totals = self.footer.totals;
                self.load_messages(&messages);
                self.footer.totals = totals;
                if let Some(text) = editor_text {
                    if self.editor.text().trim().is_empty() {
                        self.editor.set_text(&text);
                    }
                }
                self.notice("Navigated to selected point");
            }
            AgentEvent::TreeNavigationAborted => {
                self.summarizing_branch = false;
                self.notice("Branch summarization cancelled");
            }
            AgentEvent::TreeNavigationCancelled => {
                self.summarizing_branch = false;
                self.notice("Navigation cancelled");
            }
            AgentEvent::TreeNavigationFailed(e) => {
                self.summarizing_branch = false;
                self.transcript
                    .push(Item::Error(format!("Navigation failed: {e}")));
            }
            AgentEvent::RetryStart {
                attempt,
                max_attempts,
                delay_ms,
            } => {
                // The turn that failed has ended, but the agent is not done: what is typed
                // now is queued (Pi keeps streaming through the wait).
                self.working = true;
                self.retry = Some(RetryWait {
                    attempt,
                    max_attempts,
                    due_ms: self.now_ms + delay_ms as i64,
                });
            }
            AgentEvent::RetryEnd {
                success,
                attempt,
                final_error,
            } => {
                self.retry = None;
                if !success {
                    self.transcript.push(Item::Error(format!(
                        "Retry failed after {attempt} attempts: {}",
                        final_error.as_deref().unwrap_or("Unknown error")
                    )));
                }
            }
            AgentEvent::Notice(t) => self.notice(t),
            AgentEvent::Error(e) => self.transcript.push(Item::Error(e)),
            AgentEvent::PromptHandled => {
                if !self.agent_running && self.retry.is_none() {
                    self.working = false;
                }
            }
            // Finished by the driver loop, which has the driver (session_ops::op_done).
            AgentEvent::SessionReplaced { .. } => {}
        }
    }

    /// The assistant message being streamed: the last assistant item, unless a tool call
    /// came after it (then deltas belong to a new message that has not started yet).
    fn last_assistant_item(&mut self) -> Option<&mut Item> {
        let i = self
            .transcript
            .items()
            .iter()
            .rposition(|it| matches!(it, Item::Assistant { .. }))?;
        self.transcript.get_mut(i)
    }
}

/// The first argument of a path command, as Pi reads it: up to the first whitespace, or
/// the text inside matching quotes; `None` when empty or the quote is not closed.
fn path_argument(args: &str) -> Option<String> {
    let args = args.trim_start();
    let first = args.chars().next()?;
    if first == '"' || first == '\'' {
        let rest = &args[1..];
        return rest.find(first).map(|end| rest[..end].to_string());
    }
    Some(
        args.split(char::is_whitespace)
            .next()
            .unwrap_or(args)
            .to_string(),
    )
}

/// The update function.
pub fn update(app: &mut App, msg: Msg) -> Vec<Effect> {
    let mut out = Vec::new();
    match msg {
        Msg::Key(k) => on_key(app, k, &mut out),
        Msg::Paste(text) => match app.dialog.as_mut() {
            Some(Dialog::Extension(d)) => d.paste(&text),
            Some(Dialog::Login(d)) => d.paste(&text),
            Some(d) => {
                if let Some(q) = dialog_query(d) {
                    q.push_str(&text.replace(['\n', '\r'], " "));
                }
            }
            None => {
                app.editor.checkpoint(false);
                let text = text.replace("\r\n", "\n").replace('\r', "\n");
                let lines = text.split('\n').count();
                let chars = text.chars().count();
                // A large paste shows as a marker, as in Pi; submit expands it.
                if lines > 10 || chars > 1000 {
                    let marker = if lines > 10 {
                        format!("[paste #{} +{lines} lines]", app.pastes.len() + 1)
                    } else {
                        format!("[paste #{} {chars} chars]", app.pastes.len() + 1)
                    };
                    app.pastes.push((marker.clone(), text));
                    app.editor.insert_str(&marker);
                } else {
                    app.editor.insert_str(&text);
                }
                app.update_completion();
            }
        },
        Msg::Agent(ev) => {
            // Pi goes back to the tree when a branch summary is aborted.
            if ev == AgentEvent::TreeNavigationAborted {
                out.push(Effect::OpenTree);
            }
            let navigated = matches!(ev, AgentEvent::TreeNavigated { .. });
            app.on_agent(ev);
            if navigated {
                app.send_held(&mut out);
            }
        }
        Msg::FilesIndexed(files) => app.files = files,
        Msg::BashDone {
            command,
            result,
            excluded,
        } => app.finish_bash(command, result.display_text(), excluded),
        Msg::EditorText(t) => {
            app.editor.set_text(t.strip_suffix('\n').unwrap_or(&t));
        }
        Msg::Notice(t) => app.notice(t),
        Msg::Extension(record) => {
            if record.get("type").and_then(serde_json::Value::as_str)
                == Some(crate::modes::extensions::EXTENSIONS_LOADED)
            {
                return vec![Effect::ExtensionsLoaded];
            }
            if record.get("method").and_then(serde_json::Value::as_str) == Some("setTheme") {
                return vec![Effect::SetTheme {
                    name: record["theme"].as_str().unwrap_or_default().to_string(),
                    save: record["save"].as_bool().unwrap_or(false),
                }];
            }
            super::ext_ui::apply(app, &record)
        }
        Msg::Llama(u) => return super::llama_view::on_update(app, u),
        Msg::Radius(u) => return super::login::on_radius(app, u),
        Msg::LoggedIn { provider, action } => return vec![Effect::LoginDone { provider, action }],
        Msg::ModelsChanged => return vec![Effect::RefreshModelList],
        // The loop runs it (it needs the driver).
        Msg::ExtensionReload(_) => {}
        Msg::CatalogsRefreshed { query, refresh } => {
            if let Some(Dialog::ModelPicker(p)) = app.dialog.as_mut() {
                if p.refresh_status.is_some() {
                    p.refresh_status = Some(RefreshStatus::after(&refresh));
                }
            }
            let mut out = vec![Effect::RefreshModelList];
            out.extend(query.map(Effect::ModelQuery));
            return out;
        }
        Msg::LoginQuestion(question) => {
            app.dialog = Some(Dialog::Login(Box::new(
                super::api_key_login::LoginDialog::Question(question),
            )));
        }
        Msg::FileTotals(file) => {
            // A switch since start-up computed its own totals; these are stale then.
            if app.footer.file_totals_pending {
                let mut totals = file;
                totals.add(&app.footer.since_open);
                app.footer.totals = totals;
                app.footer.file_totals_pending = false;
                app.footer.since_open = Usage::default();
            }
        }
    }
    out
}

/// The text field a dialog's typing goes to, if it has one.
fn dialog_query(d: &mut Dialog) -> Option<&mut String> {
    match d {
        Dialog::ModelPicker(p) => Some(&mut p.query),
        Dialog::Resume(r) => match &mut r.mode {
            ResumeMode::Rename(s) => Some(s),
            ResumeMode::Browse => Some(&mut r.query),
            ResumeMode::ConfirmDelete => None,
        },
        Dialog::BranchPrompt(b) => b.focus.as_mut(),
        Dialog::Tree(t) => t.label_edit.as_mut(),
        _ => None,
    }
}

fn is_char(k: &KeyEvent) -> Option<char> {
    match k.code {
        KeyCode::Char(c)
            if !k
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            Some(c)
        }
        _ => None,
    }
}

fn on_key(app: &mut App, k: KeyEvent, out: &mut Vec<Effect>) {
    if app.dialog.is_some() {
        on_dialog_key(app, k, out);
        return;
    }
    // An extension's shortcut (reserved keys were never taken, see ext_ui::shortcuts_of).
    let pressed = super::keys::KeySpec::from_event(&k);
    if let Some((_, shortcut)) = app.ext_ui.shortcuts.iter().find(|(key, _)| *key == pressed) {
        out.push(Effect::Shortcut(shortcut.clone()));
        return;
    }
    let keys = app.keys.clone();
    let m = |a: &str| keys.matches(a, &k);
    if !m("app.clear") {
        app.ctrl_c_armed = false;
    }
    if !m("app.interrupt") {
        app.escape_armed = false;
    }
    // The completion popup takes navigation keys first.
    if app.completion.is_some() {
        if m("tui.select.up") || m("tui.select.down") {
            if let Some(c) = app.completion.as_mut() {
                let n = c.items.len();
                c.selected = if m("tui.select.up") {
                    (c.selected + n - 1) % n
                } else {
                    (c.selected + 1) % n
                };
            }
            return;
        }
        if m("tui.input.tab") {
            app.accept_completion();
            app.update_completion();
            return;
        }
        if m("tui.input.submit") {
            let is_command = app
                .completion
                .as_ref()
                .is_some_and(|c| c.kind == CompletionKind::Command);
            app.accept_completion();
            if is_command {
                app.submit(false, out);
            }
            app.update_completion();
            return;
        }
        if m("app.interrupt") {
            app.completion = None;
            return;
        }
    }
    if m("app.interrupt") {
        if app.bash_running > 0 {
            out.push(Effect::AbortBash);
        } else if app.working {
            // Take the agent's queue first, as Pi's `restoreQueuedMessagesToEditor` does:
            // otherwise the aborted tool's result is followed by the queued steering message,
            // sent to the session as well as restored to the editor.
            out.push(Effect::ClearQueue);
            out.push(Effect::Abort);
            let (s, f) = (
                std::mem::take(&mut app.steering),
                std::mem::take(&mut app.follow_up),
            );
            app.restore_queue_to_editor(s, f);
        } else if app.summarizing_branch {
            out.push(Effect::Abort);
        } else if app.editor.is_empty() {
            if app.escape_armed {
                match app.settings.double_escape.as_str() {
                    "none" => {}
                    "fork" => out.push(Effect::OpenFork),
                    _ => out.push(Effect::OpenTree),
                }
            }
            app.escape_armed = !app.escape_armed;
        }
        return;
    }
    if m("app.clear") {
        if !app.editor.is_empty() {
            app.editor.clear();
            app.completion = None;
        } else if app.ctrl_c_armed {
            out.push(Effect::Quit);
        } else {
            app.ctrl_c_armed = true;
        }
        return;
    }
    if m("app.exit") && app.editor.is_empty() {
        out.push(Effect::Quit);
        return;
    }
    if m("app.suspend") {
        out.push(Effect::Suspend);
        return;
    }
    if m("app.editor.external") {
        out.push(Effect::ExternalEditor(app.editor.text()));
        return;
    }
    if m("app.clipboard.pasteImage") {
        out.push(Effect::PasteClipboard);
        return;
    }
    if m("app.model.select") {
        app.open_model_picker_refreshing(out);
        return;
    }
    if m("app.session.fork") {
        out.push(Effect::OpenFork);
        return;
    }
    if m("app.model.cycleBackward") {
        app.cycle_model(false, out);
        return;
    }
    if m("app.model.cycleForward") {
        app.cycle_model(true, out);
        return;
    }
    if m("app.thinking.cycle") {
        app.thinking = super::driver::next_level(app.thinking, app.model.as_ref());
        out.push(Effect::SetThinking(app.thinking));
        app.status(format!("Thinking level: {}", app.thinking.as_str()));
        return;
    }
    if m("app.thinking.toggle") {
        app.flags.show_thinking = !app.flags.show_thinking;
        return;
    }
    if m("app.tools.expand") {
        app.flags.tools_expanded = !app.flags.tools_expanded;
        return;
    }
    if m("app.message.dequeue") {
        if !app.steering.is_empty() || !app.follow_up.is_empty() {
            app.held.clear();
            out.push(Effect::ClearQueue);
            let (s, f) = (
                std::mem::take(&mut app.steering),
                std::mem::take(&mut app.follow_up),
            );
            app.restore_queue_to_editor(s, f);
        }
        return;
    }
    if m("app.message.copy") {
        if let Some(t) = app.last_assistant.clone() {
            out.push(Effect::Copy(t));
        }
        return;
    }
    if m("app.message.followUp") {
        app.submit(true, out);
        return;
    }
    if m("tui.input.newLine") {
        app.editor.newline();
        return;
    }
    if m("tui.input.submit") {
        app.submit(false, out);
        app.update_completion();
        return;
    }
    if m("tui.input.tab") {
        app.complete_path();
        return;
    }
    // Transcript scrolling: a page is the transcript's height on the last frame.
    let (height, total) = app.view.get();
    let page = u64::from(height.max(1));
    let top = total.saturating_sub(page);
    let scroll_by = |app: &mut App, up: bool, n: u64| {
        app.scroll = if up {
            app.scroll.saturating_add(n).min(top)
        } else {
            app.scroll.saturating_sub(n)
        };
    };
    for (action, up, n) in [
        ("tui.altScreen.pageUp", true, page),
        ("tui.altScreen.pageDown", false, page),
        ("tui.altScreen.halfPageUp", true, page.div_ceil(2)),
        ("tui.altScreen.halfPageDown", false, page.div_ceil(2)),
        ("tui.altScreen.lineUp", true, 1),
        ("tui.altScreen.lineDown", false, 1),
        ("tui.altScreen.top", true, u64::MAX),
        ("tui.altScreen.bottom", false, u64::MAX),
    ] {
        if m(action) {
            scroll_by(app, up, n);
            return;
        }
    }
    if let Some(forward) = app.jump.take() {
        if let Some(c) = is_char(&k) {
            app.editor.jump_to(c, forward);
        }
        return;
    }
    if m("tui.editor.jumpForward") || m("tui.editor.jumpBackward") {
        app.jump = Some(m("tui.editor.jumpForward"));
        return;
    }
    if m("tui.editor.undo") {
        app.editor.undo();
        app.update_completion();
        return;
    }
    // Edits are undo steps; moving the cursor is not.
    let edits = [
        "tui.editor.deleteWordBackward",
        "tui.editor.deleteCharBackward",
        "tui.editor.deleteCharForward",
        "tui.editor.deleteToLineStart",
        "tui.editor.deleteToLineEnd",
        "tui.editor.yank",
        "tui.editor.yankPop",
    ];
    // Kills in a row share a kill-ring entry; alt+y follows only a yank.
    let kill_ring_keys = [
        "tui.editor.deleteWordBackward",
        "tui.editor.deleteToLineStart",
        "tui.editor.deleteToLineEnd",
        "tui.editor.yank",
        "tui.editor.yankPop",
    ];
    if !kill_ring_keys.iter().any(|a| m(a)) {
        app.editor.end_kill_sequence();
    }
    if edits.iter().any(|a| m(a)) {
        app.editor.checkpoint(false);
    } else if let Some(c) = is_char(&k) {
        app.editor.checkpoint(!c.is_whitespace());
    }
    let e = &mut app.editor;
    if m("tui.editor.historyPrevious") {
        e.history_prev();
    } else if m("tui.editor.historyNext") {
        e.history_next();
    } else if m("tui.editor.cursorUp") {
        e.up();
    } else if m("tui.editor.cursorDown") {
        e.down();
    } else if m("tui.editor.cursorWordLeft") {
        e.word_left();
    } else if m("tui.editor.cursorWordRight") {
        e.word_right();
    } else if m("tui.editor.cursorLeft") {
        e.left();
    } else if m("tui.editor.cursorRight") {
        e.right();
    } else if m("tui.editor.cursorLineStart") {
        e.home();
    } else if m("tui.editor.cursorLineEnd") {
        e.end();
    } else if m("tui.editor.deleteWordBackward") {
        e.delete_word_back();
    } else if m("tui.editor.deleteCharBackward") {
        e.backspace();
    } else if m("tui.editor.deleteCharForward") {
        e.delete();
    } else if m("tui.editor.deleteToLineStart") {
        e.delete_to_line_start();
    } else if m("tui.editor.deleteToLineEnd") {
        e.delete_to_line_end();
    } else if m("tui.editor.yank") {
        e.yank();
    } else if m("tui.editor.yankPop") {
        e.yank_pop();
    } else if let Some(c) = is_char(&k) {
        e.insert_char(c);
    } else {
        return;
    }
    app.update_completion();
}

fn list_move(selected: &mut usize, len: usize, keys: &Keymap, k: &KeyEvent) -> bool {
    if len == 0 {
        return false;
    }
    let page = 10;
    if keys.matches("tui.select.up", k) {
        *selected = if *selected == 0 {
            len - 1
        } else {
            *selected - 1
        };
    } else if keys.matches("tui.select.down", k) {
        *selected = if *selected + 1 >= len {
            0
        } else {
            *selected + 1
        };
    } else if keys.matches("tui.select.pageUp", k) {
        *selected = selected.saturating_sub(page);
    } else if keys.matches("tui.select.pageDown", k) {
        *selected = (*selected + page).min(len - 1);
    } else {
        return false;
    }
    true
}

fn edit_text(s: &mut String, k: &KeyEvent) -> bool {
    if let Some(c) = is_char(k) {
        s.push(c);
        true
    } else if k.code == KeyCode::Backspace {
        s.pop();
        true
    } else {
        false
    }
}

fn on_dialog_key(app: &mut App, k: KeyEvent, out: &mut Vec<Effect>) {
    let keys = app.keys.clone();
    let m = |a: &str| keys.matches(a, &k);
    let Some(dialog) = app.dialog.take() else {
        return;
    };
    // Each arm puts the dialog back (possibly changed) or leaves it closed.
    let next: Option<Dialog> = match dialog {
        Dialog::Extension(mut d) => match d.key(&keys, &k) {
            Some(answer) => {
                out.push(Effect::ExtensionAnswer(answer));
                None
            }
            None => Some(Dialog::Extension(d)),
        },
        Dialog::Login(mut d) => match d.key(&keys, &k) {
            super::api_key_login::LoginKey::Open => Some(Dialog::Login(d)),
            super::api_key_login::LoginKey::Closed => None,
            super::api_key_login::LoginKey::Failed(error) => {
                app.transcript.push(Item::Error(error));
                None
            }
            super::api_key_login::LoginKey::Run(effect) => {
                out.push(effect);
                None
            }
            super::api_key_login::LoginKey::Save {
                provider,
                name,
                credential,
            } => {
                out.push(Effect::SaveApiKey {
                    provider,
                    name,
                    credential,
                });
                None
            }
        },
        Dialog::Hotkeys(scroll) => {
            if m("tui.select.cancel") || m("tui.select.confirm") {
                None
            } else {
                // The list scrolls when the screen is too short for it.
                let page = usize::from(app.view.get().0.max(2)) / 2;
                let last = super::dialogs::HOTKEYS.len().saturating_sub(1);
                let scroll = if m("tui.select.up") {
                    scroll.saturating_sub(1)
                } else if m("tui.select.down") {
                    scroll + 1
                } else if m("tui.select.pageUp") {
                    scroll.saturating_sub(page)
                } else if m("tui.select.pageDown") {
                    scroll + page
                } else {
                    scroll
                };
                Some(Dialog::Hotkeys(scroll.min(last)))
            }
        }
        Dialog::ModelPicker(mut p) => {
            if m("tui.select.cancel") {
                None
            } else if m("tui.select.confirm") {
                if let Some(model) = p.filtered().get(p.selected).map(|m| (*m).clone()) {
                    app.set_model(model, out);
                }
                None
            } else {
                let len = p.filtered().len();
                if !list_move(&mut p.selected, len, &keys, &k) && edit_text(&mut p.query, &k) {
                    p.selected = 0;
                }
                Some(Dialog::ModelPicker(p))
            }
        }
        Dialog::ScopedModels(mut s) => {
            if m("tui.select.cancel") {
                None
            } else if m("app.models.save")
                || (k.code == KeyCode::Char('s') && k.modifiers == KeyModifiers::CONTROL)
            {
                let keys: Vec<String> = s
                    .models
                    .iter()
                    .zip(&s.enabled)
                    .filter(|(_, e)| **e)
                    .map(|(m, _)| m.key())
                    .collect();
                app.scoped = keys.clone();
                out.push(Effect::SaveScopedModels(keys));
                None
            } else if m("tui.select.confirm") || k.code == KeyCode::Char(' ') {
                if let Some(e) = s.enabled.get_mut(s.selected) {
                    *e = !*e;
                }
                Some(Dialog::ScopedModels(s))
            } else {
                let len = s.models.len();
                list_move(&mut s.selected, len, &keys, &k);
                Some(Dialog::ScopedModels(s))
            }
        }
        Dialog::Settings(mut s) => {
            if m("tui.select.cancel") {
                None
            } else if m("tui.select.confirm") || k.code == KeyCode::Char(' ') {
                if let Some(item) = s.items.get_mut(s.selected) {
                    item.value = (item.value + 1) % item.options.len().max(1);
                    let text = item.options.get(item.value).cloned().unwrap_or_default();
                    let key = item.key;
                    apply_setting(app, key, &text, out);
                }
                Some(Dialog::Settings(s))
            } else {
                let len = s.items.len();
                list_move(&mut s.selected, len, &keys, &k);
                Some(Dialog::Settings(s))
            }
        }
        Dialog::Resume(r) => resume_key(app, r, &k, out),
        Dialog::Tree(t) => tree_key(app, t, &k, out),
        Dialog::BranchPrompt(b) => branch_key(app, b, &k, out),
        Dialog::Fork(mut f) => {
            if m("tui.select.cancel") {
                None
            } else if m("tui.select.confirm") {
                if let Some(row) = f.rows.get(f.selected) {
                    out.push(Effect::Fork(row.id.clone()));
                }
                None
            } else {
                let len = f.rows.len();
                list_move(&mut f.selected, len, &keys, &k);
                Some(Dialog::Fork(f))
            }
        }
        Dialog::Confirm(mut c) => match c.key(&keys, &k) {
            ConfirmOutcome::Open => Some(Dialog::Confirm(c)),
            ConfirmOutcome::Chosen(i) => {
                match c.options.swap_remove(i).1 {
                    Some(effect) => out.push(effect),
                    None if c.cancelled.is_empty() => {}
                    None => app.notice(c.cancelled),
                }
                None
            }
            // An empty `cancelled` closes quietly (/trust, as Pi's selector does).
            ConfirmOutcome::Cancelled if c.cancelled.is_empty() => None,
            ConfirmOutcome::Cancelled => {
                app.notice(c.cancelled);
                None
            }
        },
    };
    app.dialog = next;
}

fn apply_setting(app: &mut App, key: &str, text: &str, out: &mut Vec<Effect>) {
    let as_bool = text == "true";
    let value = match key {
        "defaultThinkingLevel" => {
            if let Some(l) = ThinkingLevel::parse(text) {
                app.thinking = l;
                out.push(Effect::SetThinking(l));
            }
            serde_json::Value::from(text)
        }
        "theme" => {
            app.settings.theme = text.to_string();
            app.theme = match text {
                super::system_theme::NAME => Theme::system(),
                "light" => Theme::light(),
                "dark" => Theme::dark(),
                other => super::theme::find_named(other, &app.settings.theme_paths)
                    .unwrap_or_else(Theme::system),
            };
            app.transcript.theme_changed();
            serde_json::Value::from(text)
        }
        "hideThinkingBlock" => {
            app.flags.show_thinking = !as_bool;
            as_bool.into()
        }
        "quietStartup" => {
            app.settings.quiet_startup = as_bool;
            as_bool.into()
        }
        "branchSummary.skipPrompt" => {
            app.settings.skip_branch_prompt = as_bool;
            as_bool.into()
        }
        "compaction.enabled" => {
            app.footer.auto_compact = as_bool;
            as_bool.into()
        }
        "doubleEscapeAction" => {
            app.settings.double_escape = text.to_string();
            text.into()
        }
        "treeFilterMode" => {
            app.prefs.tree_filter = text.to_string();
            text.into()
        }
        "steeringMode" | "followUpMode" => {
            let follow_up = key == "followUpMode";
            if follow_up {
                app.prefs.follow_up_mode = text.to_string();
            } else {
                app.prefs.steering_mode = text.to_string();
            }
            out.push(Effect::SetQueueMode {
                follow_up,
                mode: text.to_string(),
            });
            text.into()
        }
        // Read when the agent starts (and, for skill commands, on /reload).
        "images.blockImages" | "enableSkillCommands" | "httpIdleTimeoutMs" => {
            let Some(value) = super::settings_menu::json_value(key, text) else {
                return;
            };
            match key {
                "images.blockImages" => app.prefs.block_images = as_bool,
                "enableSkillCommands" => app.prefs.skill_commands = as_bool,
                _ => app.prefs.http_idle_timeout_ms = value.as_u64().unwrap_or(0),
            }
            value
        }
        _ => serde_json::Value::from(text),
    };
    out.push(Effect::SaveSetting {
        key: key.to_string(),
        value,
    });
}

fn resume_key(
    app: &mut App,
    mut r: ResumePicker,
    k: &KeyEvent,
    out: &mut Vec<Effect>,
) -> Option<Dialog> {
    let keys = app.keys.clone();
    let m = |a: &str| keys.matches(a, k);
    match r.mode.clone() {
        ResumeMode::ConfirmDelete => {
            // The row goes once the loop reports the file gone (`resume_deleted`).
            if k.code == KeyCode::Char('y') || m("tui.select.confirm") {
                if let Some(row) = r.selected_row() {
                    out.push(Effect::DeleteSession {
                        id: row.id.clone(),
                        location: row.location.clone(),
                    });
                }
            }
            r.mode = ResumeMode::Browse;
            Some(Dialog::Resume(r))
        }
        ResumeMode::Rename(mut name) => {
            if m("tui.select.cancel") {
                r.mode = ResumeMode::Browse;
            } else if m("tui.select.confirm") {
                // Pi ignores an empty name and stays in the rename field.
                let trimmed = name.trim().to_string();
                if trimmed.is_empty() {
                    r.mode = ResumeMode::Rename(name);
                    return Some(Dialog::Resume(r));
                }
                // The row shows the name once the loop has written it (`resume_renamed`).
                if let Some(row) = r.selected_row() {
                    out.push(Effect::RenameSession {
                        id: row.id.clone(),
                        location: row.location.clone(),
                        name: trimmed,
                    });
                }
                r.mode = ResumeMode::Browse;
            } else {
                edit_text(&mut name, k);
                r.mode = ResumeMode::Rename(name);
            }
            Some(Dialog::Resume(r))
        }
        ResumeMode::Browse => {
            // An error stays up until the next key.
            r.error = None;
            if m("tui.select.cancel") {
                if std::mem::take(&mut app.resume_at_start) {
                    app.exit_message = Some("No session selected".into());
                    out.push(Effect::Quit);
                }
                return None;
            }
            if m("tui.select.confirm") {
                return match r.selected_row() {
                    Some(row) => {
                        app.resume_at_start = false;
                        out.push(Effect::Resume(row.location.clone()));
                        None
                    }
                    None => Some(Dialog::Resume(r)),
                };
            }
            if m("app.session.togglePath") {
                r.show_path = !r.show_path;
            } else if m("app.session.toggleSort") {
                r.sort = match r.sort {
                    ResumeSort::Recent => ResumeSort::Relevance,
                    ResumeSort::Relevance => ResumeSort::Recent,
                };
            } else if m("tui.input.tab") {
                r.scope = match r.scope {
                    ResumeScope::Current => ResumeScope::All,
                    ResumeScope::All => ResumeScope::Current,
                };
                r.selected = 0;
            } else if m("app.session.toggleNamedFilter") {
                r.named_only = !r.named_only;
                r.clamp();
            } else if m("app.session.rename") {
                if let Some(row) = r.selected_row() {
                    r.mode = ResumeMode::Rename(row.name.clone().unwrap_or_default());
                }
            } else if m("app.session.delete") {
                match r.selected_row() {
                    Some(row) if r.current.as_deref() == Some(row.id.as_str()) => {
                        r.error = Some("Cannot delete the currently active session".into());
                        return Some(Dialog::Resume(r));
                    }
                    Some(_) => r.mode = ResumeMode::ConfirmDelete,
                    None => {}
                }
            } else {
                let len = r.filtered().len();
                if !list_move(&mut r.selected, len, &keys, k) && edit_text(&mut r.query, k) {
                    r.selected = 0;
                    let pending = r.pending_text_queries();
                    if !pending.is_empty() {
                        out.push(Effect::SearchSessionText(pending));
                    }
                }
            }
            Some(Dialog::Resume(r))
        }
    }
}

fn tree_key(
    app: &mut App,
    mut t: Box<TreeNav>,
    k: &KeyEvent,
    out: &mut Vec<Effect>,
) -> Option<Dialog> {
    let keys = app.keys.clone();
    let m = |a: &str| keys.matches(a, k);
    if let Some(mut label) = t.label_edit.take() {
        if m("tui.select.confirm") {
            if let Some(row) = t.rows.get(t.selected) {
                let node = row.node;
                let text = label.trim().to_string();
                t.nodes[node].label = (!text.is_empty()).then(|| text.clone());
                out.push(Effect::SetLabel {
                    id: t.nodes[node].id.clone(),
                    label: (!text.is_empty()).then_some(text),
                });
                t.rebuild();
            }
        } else if !m("tui.select.cancel") {
            edit_text(&mut label, k);
            t.label_edit = Some(label);
        }
        return Some(Dialog::Tree(t));
    }
    if m("tui.select.cancel") {
        // Escape clears a search first, then closes.
        if !t.search.is_empty() {
            t.search.clear();
            t.rebuild();
            return Some(Dialog::Tree(t));
        }
        return None;
    }
    if m("tui.select.confirm") {
        let Some((target, editor_text)) = t.resolve_selection() else {
            return Some(Dialog::Tree(t));
        };
        if !t.leaves_branch(target.as_deref()) {
            if let Some(text) = editor_text {
                app.editor.set_text(&text);
            }
            return None;
        }
        let Some(entry) = t.selected_node().map(|n| n.id.clone()) else {
            return Some(Dialog::Tree(t));
        };
        if app.settings.skip_branch_prompt {
            out.push(Effect::NavigateTree {
                entry,
                summary: BranchSummary::None,
            });
            return None;
        }
        return Some(Dialog::BranchPrompt(BranchPrompt {
            target,
            editor_text,
            selected: 0,
            focus: None,
            nav: t,
        }));
    }
    if m("app.tree.foldOrUp") {
        t.fold_or_up();
    } else if m("app.tree.unfoldOrDown") {
        t.unfold_or_down();
    } else if m("app.tree.editLabel") {
        let current = t
            .selected_node()
            .and_then(|n| n.label.clone())
            .unwrap_or_default();
        t.label_edit = Some(current);
    } else if m("app.tree.toggleLabelTimestamp") {
        t.show_label_time = !t.show_label_time;
    } else if m("app.tree.filter.cycleBackward") {
        let f = t.filter.cycle(false);
        t.filter = f;
        t.rebuild();
    } else if m("app.tree.filter.cycleForward") {
        let f = t.filter.cycle(true);
        t.filter = f;
        t.rebuild();
    } else if m("app.tree.filter.default") {
        t.set_filter(Filter::Default);
    } else if m("app.tree.filter.noTools") {
        t.set_filter(Filter::NoTools);
    } else if m("app.tree.filter.userOnly") {
        t.set_filter(Filter::UserOnly);
    } else if m("app.tree.filter.labeledOnly") {
        t.set_filter(Filter::LabeledOnly);
    } else if m("app.tree.filter.all") {
        t.set_filter(Filter::All);
    } else if m("tui.select.up") {
        t.move_by(-1);
    } else if m("tui.select.down") {
        t.move_by(1);
    } else if m("tui.select.pageUp") || k.code == KeyCode::Left {
        t.move_by(-10);
    } else if m("tui.select.pageDown") || k.code == KeyCode::Right {
        t.move_by(10);
    } else if k.code == KeyCode::Backspace && !t.search.is_empty() {
        t.search.pop();
        t.rebuild();
    } else if let Some(c) = is_char(k) {
        // Typing searches the tree, as in Pi's tree selector.
        t.search.push(c);
        t.rebuild();
    }
    Some(Dialog::Tree(t))
}

fn branch_key(
    app: &mut App,
    mut b: BranchPrompt,
    k: &KeyEvent,
    out: &mut Vec<Effect>,
) -> Option<Dialog> {
    let keys = app.keys.clone();
    let m = |a: &str| keys.matches(a, k);
    if let Some(mut focus) = b.focus.take() {
        if m("tui.select.cancel") {
            return Some(Dialog::BranchPrompt(b));
        }
        if m("tui.select.confirm") {
            if let Some(entry) = b.nav.selected_node().map(|n| n.id.clone()) {
                app.summarizing_branch = true;
                out.push(Effect::NavigateTree {
                    entry,
                    summary: BranchSummary::SummarizeWithFocus(focus),
                });
            }
            return None;
        }
        edit_text(&mut focus, k);
        b.focus = Some(focus);
        return Some(Dialog::BranchPrompt(b));
    }
    if m("tui.select.cancel") {
        return Some(Dialog::Tree(b.nav));
    }
    if m("tui.select.confirm") {
        let summary = match b.selected {
            0 => BranchSummary::None,
            1 => BranchSummary::Summarize,
            _ => {
                b.focus = Some(String::new());
                return Some(Dialog::BranchPrompt(b));
            }
        };
        if let Some(entry) = b.nav.selected_node().map(|n| n.id.clone()) {
            app.summarizing_branch = summary != BranchSummary::None;
            out.push(Effect::NavigateTree { entry, summary });
        }
        return None;
    }
    list_move(&mut b.selected, BRANCH_OPTIONS.len(), &keys, k);
    Some(Dialog::BranchPrompt(b))
}
