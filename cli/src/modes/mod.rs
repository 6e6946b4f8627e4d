//! The non-interactive modes (print, json, rpc) and what they share: settings, model
//! resolution, tool selection, and opening or creating the session.

pub mod json;
pub mod print;
pub mod rpc;
mod settings;

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _};
use pi_engine::agent::{
    AgentOptions, AgentSession, EventSink, Persistence, PromptOptions, QueueMode,
};
use pi_engine::llm::{load_models, Model, ModelRegistry};
use pi_engine::session::Session;
use pi_engine::tools::{select_builtin_tools, NoTools, ToolSelection};
use pi_formats::header::NewHeader;
use pi_formats::message::ThinkingLevel;
use pi_storage::paths::{session_dir_name, session_file_name, sessions_root};
use pi_storage::{
    open_store, resolve_store_spec, JsonlLayout, JsonlStore, LazySession, ListScope, SessionHeader,
    SessionId, SessionStore, StoreOptions, StoreSpec, StoredEntry,
};

pub use settings::Settings;

use crate::RunArgs;

/// Which non-interactive mode runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `-p`: the final answer as text.
    Text,
    /// `--mode json`: every event as a JSON line.
    Json,
    /// `--mode rpc`: commands on stdin, responses and events on stdout.
    Rpc,
}

/// Dispatches to a mode.
pub fn run(args: RunArgs) -> anyhow::Result<i32> {
    if let Some(input) = &args.export {
        // Pi: `--export FILE [OUTPUT]` renders the file and exits before any mode starts.
        let written = export_html(input, args.messages.first().map(String::as_str))?;
        println!("Exported to: {}", written.display());
        return Ok(0);
    }
    if let (Some(provider), None, None) = (&args.provider, &args.model, &args.list_models) {
        // Pi's start-up error, for every mode.
        bail!("--provider requires --model (for example: --provider {provider} --model <pattern>)");
    }
    let mode = match args.mode.as_deref() {
        Some("json") => Mode::Json,
        Some("rpc") => Mode::Rpc,
        Some("text") => Mode::Text,
        Some(other) => bail!("unknown --mode {other:?}: expected text, json or rpc"),
        None if args.print => Mode::Text,
        None => {
            if args.list_models.is_some() {
                Mode::Text
            } else {
                // No mode flag: the interactive TUI (it handles --resume itself). Warnings
                // about skipped session links wait until the screen is restored.
                let deferred = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
                let sink = deferred.clone();
                pi_storage::set_warning_sink(move |w| {
                    sink.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(w.to_string())
                });
                let result = crate::tui::agent::run_with_args(args);
                for w in deferred.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
                    eprintln!("pi: warning: {w}");
                }
                return result;
            }
        }
    };
    if args.resume {
        bail!("--resume picks a session interactively and only works in interactive mode; use --session FILE|ID or -c instead");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        if let Some(pattern) = &args.list_models {
            let env = Env::new(&args)?;
            return print::list_models(&env, pattern);
        }
        match mode {
            Mode::Text | Mode::Json => print::run(args, mode).await,
            Mode::Rpc => rpc::run(args).await,
        }
    })
}

/// `--export FILE [OUTPUT]`: the session file as one HTML page, written to OUTPUT or to
/// `pi-session-<file name>.html` in the current directory (Pi's default name).
fn export_html(input: &str, output: Option<&str>) -> anyhow::Result<PathBuf> {
    let path = Path::new(input);
    if !path.is_file() {
        bail!(
            "File not found: {}",
            std::path::absolute(path)
                .unwrap_or(path.to_path_buf())
                .display()
        );
    }
    let session = Session::open(path).map_err(|e| anyhow!("{e}"))?;
    let out = match output {
        Some(o) => PathBuf::from(o),
        None => {
            let stem = path
                .file_name()
                .map(|n| n.to_string_lossy().trim_end_matches(".jsonl").to_string())
                .unwrap_or_default();
            PathBuf::from(format!("pi-session-{stem}.html"))
        }
    };
    std::fs::write(&out, pi_engine::export::html::render(&session))
        .with_context(|| format!("cannot write {}", out.display()))?;
    Ok(out)
}

/// Everything resolved from flags, environment and settings before a session exists.
pub struct Env {
    /// Context files, skills, prompt templates, SYSTEM.md / APPEND_SYSTEM.md.
    pub resources: pi_engine::config::Resources,
    pub agent_dir: PathBuf,
    pub cwd: String,
    pub settings: Settings,
    pub registry: ModelRegistry,
    pub spec: StoreSpec,
    pub store_options: StoreOptions,
    pub no_session: bool,
}

/// The directory the run was started in, as sessions record it.
pub fn current_cwd() -> anyhow::Result<String> {
    let cwd_path = std::env::current_dir().context("cannot read the current directory")?;
    Ok(pi_storage::paths::resolve_cwd(
        &cwd_path.display().to_string(),
    ))
}

/// Where a run works. Pi decides this before anything directory-bound is read: `--session`
/// may name a session of another project, whose settings, trust and resources apply.
#[derive(Debug, Clone, PartialEq)]
pub enum RunDir {
    /// The current directory, or the stored directory of the `--session` being continued.
    Dir(String),
    /// `--session` names a session whose stored directory no longer exists.
    Missing(MissingSessionDir),
}

/// A `--session` whose stored directory is gone (Pi's `MissingSessionCwdIssue`).
#[derive(Debug, Clone, PartialEq)]
pub struct MissingSessionDir {
    /// The session file, or the store location of a database session.
    pub session_file: String,
    /// The directory in the session header.
    pub session_cwd: String,
    /// The directory the run was started in, offered instead.
    pub fallback_cwd: String,
}

impl std::fmt::Display for MissingSessionDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Pi's formatMissingSessionCwdError, line for line.
        write!(
            f,
            "Stored session working directory does not exist: {}\nSession file: {}\n\
             Current working directory: {}",
            self.session_cwd, self.session_file, self.fallback_cwd
        )
    }
}

/// Decides where a run started in `start` works: for `--session` (not `--fork`, which
/// copies the session into `start`) the session's own directory when it exists.
pub fn run_dir(args: &RunArgs, start: &str) -> anyhow::Result<RunDir> {
    let Some(reference) = args.session.as_deref().filter(|_| args.fork.is_none()) else {
        return Ok(RunDir::Dir(start.to_string()));
    };
    // Only the store is needed to find the session; it is located with the settings of
    // the start directory, as Pi's start-up settings manager finds `sessionDir`.
    let probe = Env::probe(args, start)?;
    let (session, _) = probe.open_ref(reference)?;
    let stored = session
        .header()
        .and_then(|h| h["cwd"].as_str().map(str::to_string))
        .unwrap_or_default();
    if stored.is_empty() {
        return Ok(RunDir::Dir(start.to_string()));
    }
    if Path::new(&stored).is_dir() {
        return Ok(RunDir::Dir(pi_storage::paths::resolve_cwd(&stored)));
    }
    Ok(RunDir::Missing(MissingSessionDir {
        session_file: session
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| reference.to_string()),
        session_cwd: stored,
        fallback_cwd: start.to_string(),
    }))
}

impl Env {
    /// Reads the agent dir, settings and models.json for the directory the run works in
    /// ([`run_dir`]); a `--session` whose directory is gone is an error here (print, json
    /// and rpc exit 1 as Pi does; the TUI asks first and calls [`Env::at`]).
    pub fn new(args: &RunArgs) -> anyhow::Result<Env> {
        match run_dir(args, &current_cwd()?)? {
            RunDir::Dir(cwd) => Env::at(args, cwd),
            RunDir::Missing(missing) => bail!("{missing}"),
        }
    }

    /// Just enough to find sessions from `cwd`: agent dir, settings (no prompt, no
    /// warnings) and store; no models, no resources.
    fn probe(args: &RunArgs, cwd: &str) -> anyhow::Result<Env> {
        let agent_dir = StoreOptions::from_env(args.session_dir.as_deref(), None).agent_dir;
        let settings = Settings::load_quiet(&agent_dir, Path::new(cwd), args)?;
        let (store_options, spec) = store_of(args, &settings)?;
        Ok(Env {
            resources: Default::default(),
            agent_dir,
            cwd: cwd.to_string(),
            settings,
            registry: Default::default(),
            spec,
            store_options,
            no_session: true,
        })
    }

    /// [`Env::new`] for a directory already decided.
    pub fn at(args: &RunArgs, cwd: String) -> anyhow::Result<Env> {
        let store_probe = StoreOptions::from_env(args.session_dir.as_deref(), None);
        let agent_dir = store_probe.agent_dir.clone();
        let settings = Settings::load(&agent_dir, Path::new(&cwd), args)?;
        let (store_options, spec) = store_of(args, &settings)?;
        let models_path = agent_dir.join("models.json");
        let registry = load_models(&models_path).map_err(|e| anyhow!("{e}"))?;
        let resources = settings.resources(&agent_dir, Path::new(&cwd), args);
        for d in &resources.diagnostics {
            eprintln!("Warning: {}: {}", d.path.display(), d.message);
        }
        Ok(Env {
            resources,
            agent_dir,
            cwd,
            settings,
            registry,
            spec,
            store_options,
            no_session: args.no_session,
        })
    }

    fn store(&self) -> anyhow::Result<Box<dyn SessionStore>> {
        open_store(&self.spec, &self.store_options).map_err(|e| anyhow!("{e}"))
    }

    /// Where a new JSONL session file goes (other stores have no file).
    fn new_file(&self, header: &NewHeader) -> Option<PathBuf> {
        let dir = match &self.spec {
            StoreSpec::Jsonl(Some(dir)) => dir.clone(),
            StoreSpec::Jsonl(None) => match &self.store_options.session_dir {
                Some(dir) => dir.clone(),
                None => sessions_root(&self.agent_dir).join(session_dir_name(&header.cwd)),
            },
            _ => return None,
        };
        Some(dir.join(session_file_name(&header.timestamp, &header.id)))
    }

    /// A new, empty session (written when the conversation starts).
    pub fn new_session(&self, parent: Option<String>) -> anyhow::Result<(Session, Persistence)> {
        let header = NewHeader::new(
            pi_formats::id::session_id(),
            pi_formats::time::now_iso(),
            self.cwd.clone(),
            parent,
        );
        let mut session = Session::create(&header);
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let file = self.new_file(&header);
        session.set_path(file.clone());
        Ok((
            session,
            Persistence {
                store: Some(self.store()?),
                lazy: Some(LazySession::new(SessionHeader::new(&header))),
                file,
            },
        ))
    }

    /// A session made of `lines` (header first), created in the store at once (fork, clone).
    pub fn create_from_lines(&self, lines: Vec<String>) -> anyhow::Result<(Session, Persistence)> {
        let mut bytes = lines.join("\n").into_bytes();
        bytes.push(b'\n');
        let header_line = lines.first().cloned().unwrap_or_default();
        let header_value: serde_json::Value =
            serde_json::from_str(&header_line).context("building the new session's header")?;
        let new_header = NewHeader::new(
            header_value["id"].as_str().unwrap_or_default().to_string(),
            header_value["timestamp"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            header_value["cwd"].as_str().unwrap_or_default().to_string(),
            header_value["parentSession"].as_str().map(str::to_string),
        );
        let file = self.new_file(&new_header);
        let mut session = Session::from_bytes(bytes, file.as_deref().unwrap_or(Path::new("new")))
            .map_err(|e| anyhow!("{e}"))?;
        session.set_path(file.clone());
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let store = self.store()?;
        let header = SessionHeader::parse(header_line.into_bytes()).map_err(|e| anyhow!(e))?;
        let entries: Vec<StoredEntry> = lines[1..]
            .iter()
            .map(|l| StoredEntry::from_line(l.clone().into_bytes()))
            .collect();
        // Pi writes a fork only once it has a conversation; with messages it exists at once.
        let mut lazy = LazySession::new(header);
        lazy.append(store.as_ref(), &entries)
            .map_err(|e| anyhow!("cannot write the new session: {e}"))?;
        Ok((
            session,
            Persistence {
                store: Some(store),
                lazy: Some(lazy),
                file,
            },
        ))
    }

    /// Opens a session file for appending.
    pub fn open_file(&self, path: &Path) -> anyhow::Result<(Session, Persistence)> {
        let cache = pi_engine::session::HeadCache::in_agent_dir(&self.agent_dir);
        let (session, _) = Session::open_cached(path, Some(&cache)).map_err(|e| anyhow!("{e}"))?;
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let id = session
            .session_id()
            .ok_or_else(|| anyhow!("{}: the session header has no id", path.display()))?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let store = JsonlStore::open(JsonlLayout::Flat { dir }, Default::default());
        let header_line = session
            .header_line()
            .map(<[u8]>::to_vec)
            .ok_or_else(|| anyhow!("{}: no session header", path.display()))?;
        let header = SessionHeader::parse(header_line).map_err(|e| anyhow!(e))?;
        let writer = store
            .open_writer(&SessionId::new(id))
            .map_err(|e| anyhow!("cannot open {} for appending: {e}", path.display()))?;
        Ok((
            session,
            Persistence {
                store: Some(Box::new(store)),
                lazy: Some(LazySession::resume(header, writer)),
                file: Some(path.to_path_buf()),
            },
        ))
    }

    /// `--session FILE|ID`: an existing file, else the session whose id starts with the text.
    pub fn open_ref(&self, reference: &str) -> anyhow::Result<(Session, Persistence)> {
        let path = Path::new(reference);
        if path.is_file() {
            return self.open_file(path);
        }
        let store = self.store()?;
        let mut matches: Vec<_> = store
            .list_sessions(&ListScope::All)
            .map_err(|e| anyhow!("{e}"))?
            .into_iter()
            .filter(|s| s.id.as_str().starts_with(reference))
            .collect();
        match matches.len() {
            0 if reference.ends_with(".jsonl") || reference.contains('/') => {
                bail!("session file not found: {reference}")
            }
            0 => bail!("no session matches {reference:?} (not a file, not an id prefix)"),
            1 => {}
            n => bail!("{n} sessions match the id prefix {reference:?}; give more of the id"),
        }
        let summary = matches.remove(0);
        self.open_summary(store, &summary.id, &summary.location)
    }

    fn open_summary(
        &self,
        store: Box<dyn SessionStore>,
        id: &SessionId,
        location: &str,
    ) -> anyhow::Result<(Session, Persistence)> {
        if matches!(self.spec, StoreSpec::Jsonl(_)) {
            return self.open_file(Path::new(location));
        }
        let data = store.read_session(id).map_err(|e| anyhow!("{e}"))?;
        let session = Session::from_bytes(data.to_jsonl(), Path::new(location))
            .map_err(|e| anyhow!("{e}"))?;
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let writer = store.open_writer(id).map_err(|e| anyhow!("{e}"))?;
        Ok((
            session,
            Persistence {
                store: Some(store),
                lazy: Some(LazySession::resume(data.header, writer)),
                file: None,
            },
        ))
    }

    /// `-c`: the most recently modified session of this directory.
    pub fn latest(&self) -> anyhow::Result<Option<(Session, Persistence)>> {
        let store = self.store()?;
        let mut list = store
            .list_sessions(&ListScope::Cwd(self.cwd.clone()))
            .map_err(|e| anyhow!("{e}"))?;
        pi_storage::summary::sort_summaries(&mut list);
        match list.into_iter().next() {
            Some(s) => Ok(Some(self.open_summary(store, &s.id, &s.location)?)),
            None => Ok(None),
        }
    }
}

/// The prompts of a run after Pi's `@file` arguments are read: the files' text goes in
/// front of the first message, and image files are attached to it.
#[derive(Debug, Default)]
pub struct Prompts {
    pub messages: Vec<String>,
    /// Image blocks (`{"type":"image","data","mimeType"}`) for the first message.
    pub images: Vec<serde_json::Value>,
}

/// Reads `@file` arguments as Pi's `processFileArguments` does: each file named by its
/// absolute path, text in a `<file>` element, images attached (with an empty element, or
/// Pi's note when an image cannot be sent), empty files skipped, a missing file an error.
pub fn expand_messages(messages: &[String]) -> anyhow::Result<Prompts> {
    let mut files = String::new();
    let mut images = Vec::new();
    let mut plain = Vec::new();
    for m in messages {
        let Some(arg) = m.strip_prefix('@').filter(|p| !p.is_empty()) else {
            plain.push(m.clone());
            continue;
        };
        let path = std::path::absolute(expand_home(arg))
            .with_context(|| format!("cannot resolve @{arg}"))?;
        let name = path.display();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("File not found: {name}"),
            Err(e) => bail!("Could not read file {name}: {e}"),
        };
        if bytes.is_empty() {
            continue;
        }
        match pi_engine::tools::prompt_image(&bytes) {
            Some(pi_engine::tools::PromptImage::Attached {
                mime_type,
                data,
                hints,
            }) => {
                images.push(
                    serde_json::json!({"type": "image", "data": data, "mimeType": mime_type}),
                );
                files.push_str(&format!(
                    "<file name=\"{name}\">{}</file>\n",
                    hints.join("\n")
                ));
            }
            Some(pi_engine::tools::PromptImage::Omitted(note)) => {
                files.push_str(&format!("<file name=\"{name}\">{note}</file>\n"));
            }
            None => {
                let text = String::from_utf8(bytes).map_err(|_| {
                    anyhow!("Could not read file {name}: not UTF-8 text nor a supported image")
                })?;
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
                files.push_str(&format!("<file name=\"{name}\">\n{text}\n</file>\n"));
            }
        }
    }
    if !files.is_empty() {
        // The files go in front of the first message, as Pi's initial message.
        match plain.first_mut() {
            Some(first) => *first = format!("{files}{first}"),
            None => plain.push(files),
        }
    }
    Ok(Prompts {
        messages: plain,
        images,
    })
}

/// `~/…` as Pi's `resolveReadPath` expands it.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Piped stdin (not a terminal), read whole; `None` for a terminal or empty input.
pub fn read_piped_stdin() -> Option<String> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        return None;
    }
    let mut text = String::new();
    stdin.read_to_string(&mut text).ok()?;
    let trimmed = text.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

fn split_list(s: &Option<String>) -> Option<Vec<String>> {
    s.as_ref().map(|s| {
        s.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    })
}

/// Builds the agent for a mode: session (new, `-c`, `--session`, `--fork`), model,
/// thinking level, tools, settings.
pub fn build_agent(args: &RunArgs, env: &Env, sink: EventSink) -> anyhow::Result<AgentSession> {
    let selection = ToolSelection {
        tools: split_list(&args.tools),
        exclude_tools: split_list(&args.exclude_tools),
        no_tools: if args.no_tools {
            NoTools::All
        } else if args.no_builtin_tools {
            NoTools::Builtin
        } else {
            NoTools::None
        },
        default_tools: None,
    };
    let tools = select_builtin_tools(&selection).map_err(|e| anyhow!(e))?;
    let (session, persist, resumed) = if let Some(r) = &args.fork {
        let (source, _) = Env {
            no_session: true,
            ..env.clone_for_read()
        }
        .open_ref(r)?;
        let header = NewHeader::new(
            pi_formats::id::session_id(),
            pi_formats::time::now_iso(),
            env.cwd.clone(),
            source.path().map(|p| p.display().to_string()),
        );
        let (s, p) = env.create_from_lines(source.fork_from_lines(&header))?;
        (s, p, true)
    } else if let Some(r) = &args.session {
        let (s, p) = env.open_ref(r)?;
        (s, p, true)
    } else if args.continue_session {
        match env.latest()? {
            Some((s, p)) => (s, p, true),
            None => {
                let (s, p) = env.new_session(None)?;
                (s, p, false)
            }
        }
    } else {
        let (s, p) = env.new_session(None)?;
        (s, p, false)
    };

    let has_auth = auth_check(env, args.api_key.is_some());
    let flag_level = match &args.thinking {
        Some(l) => Some(ThinkingLevel::parse(l).ok_or_else(|| {
            anyhow!(
                "invalid --thinking {l:?}: expected off, minimal, low, medium, high, xhigh or max"
            )
        })?),
        None => None,
    };
    // Pi's CLI model resolution (engine::config): `--provider`, `--model` with `:level`.
    let resolution = pi_engine::config::resolve_cli_model(
        &pi_engine::config::CliModelRequest {
            provider: args.provider.as_deref(),
            model: args.model.as_deref(),
            thinking: flag_level,
            inline_api_key: args.api_key.is_some(),
        },
        &env.registry.models,
        &has_auth,
    );
    if let Some(e) = resolution.error {
        bail!("{e}");
    }
    if let Some(w) = resolution.warning {
        eprintln!("Warning: {w}");
    }
    let explicit = resolution.model.map(|m| (m, resolution.thinking_level));
    let scoped = scoped_models(args, env);
    let available = available_models(env, &has_auth);
    let initial = pi_engine::config::find_initial_model(
        &scoped,
        resumed,
        &env.settings.config,
        &env.registry.models,
        &available,
        &has_auth,
    );
    let default_model = initial.model.clone();
    let settings_level = Some(initial.thinking_level);
    let retry = env.settings.retry;
    let opts = AgentOptions {
        cwd: PathBuf::from(&env.cwd),
        registry: env.registry.clone(),
        model: explicit
            .as_ref()
            .map(|(m, _)| m.clone())
            .or(default_model.clone()),
        thinking: flag_level
            .or(explicit.as_ref().and_then(|(_, l)| *l))
            .or(settings_level)
            .unwrap_or(pi_engine::config::DEFAULT_THINKING_LEVEL),
        tools: tools.clone(),
        prompt: PromptOptions {
            system_prompt: args.system_prompt.clone(),
            append_system_prompt: (!args.append_system_prompt.is_empty())
                .then(|| args.append_system_prompt.join("\n\n")),
            system_message: Some(system_message(env, &tools)),
            reloaded: false,
        },
        retry,
        compaction: env.settings.compaction,
        branch_summary: env.settings.config.branch_summary(),
        api_key: args.api_key.clone(),
        api_key_resolver: Some(api_key_resolver(env)),
        shell: pi_engine::agent::ShellOptions {
            shell_path: env.settings.config.shell_path(),
            command_prefix: env
                .settings
                .config
                .shell_command_prefix()
                .map(str::to_string),
            bin_dir: Some(env.agent_dir.join("bin")),
        },
        requests: request_options(env)?,
    };
    let mut opts = opts;
    if let (false, Some(m)) = (resumed, opts.model.as_ref()) {
        // A new session starts at a level the model supports (Pi clamps at startup).
        opts.thinking = if m.reasoning {
            m.clamp_thinking_level(opts.thinking)
        } else {
            ThinkingLevel::Off
        };
    }
    let agent = AgentSession::new(session, persist, opts, sink);
    if let Some(mode) = env
        .settings
        .steering_mode
        .as_deref()
        .and_then(QueueMode::parse)
    {
        agent.set_steering_mode(mode);
    }
    if let Some(mode) = env
        .settings
        .follow_up_mode
        .as_deref()
        .and_then(QueueMode::parse)
    {
        agent.set_follow_up_mode(mode);
    }
    if let Some(name) = &args.name {
        agent.append(pi_formats::entry::NewEntry::session_info(name))?;
    }
    if resumed {
        agent.restore_from_session();
        if let Some((m, _)) = &explicit {
            let same = agent
                .model()
                .is_some_and(|cur| cur.provider == m.provider && cur.id == m.id);
            if !same {
                agent.set_model(m.clone())?;
            }
        } else if agent.model().is_none() {
            if let Some(m) = default_model {
                agent.set_model(m)?;
            }
        }
        let wanted = flag_level.or(explicit.as_ref().and_then(|(_, l)| *l));
        if let Some(l) = wanted {
            if l != agent.thinking_level() {
                agent.set_thinking_level(l)?;
            }
        }
    } else {
        agent.start_new()?;
    }
    Ok(agent)
}

/// The settings that shape model requests: `thinkingBudgets`, `images.blockImages`, and an
/// HTTP client for `httpProxy` (global settings only, as Pi reads it before trusting any
/// project) and `httpIdleTimeoutMs`.
pub fn request_options(env: &Env) -> anyhow::Result<pi_engine::agent::RequestOptions> {
    let cfg = &env.settings.config;
    let idle_ms = cfg.http_idle_timeout_ms().map_err(|e| anyhow!(e))?;
    let proxy = cfg
        .global()
        .get("httpProxy")
        .and_then(serde_json::Value::as_str);
    let client = pi_engine::llm::settings_client(proxy, idle_ms).map_err(|e| anyhow!(e))?;
    Ok(pi_engine::agent::RequestOptions {
        thinking_budgets: cfg.thinking_budgets().unwrap_or_default(),
        client: Some(client),
        block_images: cfg.block_images(),
    })
}

/// Whether a provider has credentials: `--api-key` (when given), auth.json, the environment,
/// models.json, or configured headers (what Pi's `hasConfiguredAuth` accepts).
pub fn auth_check(env: &Env, inline_api_key: bool) -> impl Fn(&str) -> bool {
    let resolver = api_key_resolver(env);
    let registry = env.registry.clone();
    move |provider: &str| {
        inline_api_key
            || (resolver.0)(provider).is_some()
            || registry.resolve_api_key(provider).is_some()
            || !registry.resolve_headers(provider, None).is_empty()
    }
}

/// The models a user can use now (Pi's `getAvailableSnapshot`): those whose provider has
/// credentials, in registry order.
pub fn available_models(env: &Env, has_auth: &dyn Fn(&str) -> bool) -> Vec<Model> {
    env.registry
        .models
        .iter()
        .filter(|m| has_auth(&m.provider))
        .cloned()
        .collect()
}

/// The session's system message, as `engine::config` builds it (context files, skills,
/// SYSTEM.md / APPEND_SYSTEM.md, `--system-prompt`, `--append-system-prompt`).
pub(crate) fn system_message(
    env: &Env,
    tools: &[Arc<dyn pi_engine::tools::Tool>],
) -> serde_json::Value {
    let cwd = Path::new(&env.cwd);
    let resources = &env.resources;
    pi_engine::config::build_system_message(&pi_engine::config::SystemPromptInput {
        tools,
        cwd,
        resources,
        // We ship no harness docs yet: pointing the model at missing files only misleads.
        docs: None,
        timestamp_ms: 0,
    })
}

/// Keys from auth.json and the environment (models.json and `--api-key` are handled by the
/// agent), in Pi's precedence.
pub(crate) fn api_key_resolver(env: &Env) -> pi_engine::agent::ApiKeyResolver {
    let mut warnings = Vec::new();
    let resolver = api_key_resolver_quiet(env, &mut warnings);
    // The resolver is built more than once per run (model choice, the agent): each
    // auth.json problem is said once.
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    for w in warnings {
        if !said.contains(&w) {
            eprintln!("Warning: {w}");
            said.push(w);
        }
    }
    resolver
}

/// [`api_key_resolver`] with auth.json problems added to `warnings` instead of printed (the
/// interactive mode's /reload, where stderr would write over the screen).
pub(crate) fn api_key_resolver_quiet(
    env: &Env,
    warnings: &mut Vec<String>,
) -> pi_engine::agent::ApiKeyResolver {
    let auth = pi_engine::config::AuthStore::load_or_warn(&env.agent_dir, warnings);
    let registry = env.registry.clone();
    pi_engine::agent::ApiKeyResolver(Arc::new(move |provider: &str| {
        let lookup = |k: &str| std::env::var(k).ok();
        pi_engine::config::resolve_api_key(provider, None, Some(&auth), &registry, &lookup)
    }))
}

impl Env {
    /// A copy for reading other sessions (the registry and settings are shared values).
    fn clone_for_read(&self) -> Env {
        Env {
            resources: self.resources.clone(),
            agent_dir: self.agent_dir.clone(),
            cwd: self.cwd.clone(),
            settings: self.settings.clone(),
            registry: self.registry.clone(),
            spec: self.spec.clone(),
            store_options: self.store_options.clone(),
            no_session: self.no_session,
        }
    }
}

/// What Pi does to typed input before sending it: `/skill:name args` becomes the skill's
/// instructions (when skill commands are enabled) and `/template args` a prompt template.
pub fn expand_input(env: &Env, text: &str) -> anyhow::Result<String> {
    let text = if env.settings.config.enable_skill_commands() {
        pi_engine::config::expand_skill_command(text, &env.resources.skills)
            .map_err(|e| anyhow!(e))?
    } else {
        text.to_string()
    };
    Ok(pi_engine::config::expand_prompt_template(
        &text,
        &env.resources.prompt_templates,
    ))
}

/// `--models` patterns, else the `enabledModels` setting (as Pi), resolved to models (for
/// `cycle_model` and the starting model).
pub fn scoped_models(args: &RunArgs, env: &Env) -> Vec<pi_engine::config::ScopedModel> {
    let patterns: Vec<String> = match &args.models {
        Some(list) => list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => env.settings.config.enabled_models().unwrap_or_default(),
    };
    if patterns.is_empty() {
        return Vec::new();
    }
    let (scoped, warnings) =
        pi_engine::config::resolve_model_scope(&patterns, &env.registry.models);
    for w in warnings {
        eprintln!("Warning: {w}");
    }
    scoped
}

/// A sink that writes each event as one JSON line to stdout.
pub fn stdout_sink() -> EventSink {
    Arc::new(|v| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        // A closed stdout (reader gone) must not kill the agent mid-write; the session
        // file is what matters then.
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    })
}

/// Where sessions live: the flags, then the environment, then the settings decide (for
/// [`Env::probe`] and [`Env::at`] alike).
fn store_of(args: &RunArgs, settings: &Settings) -> anyhow::Result<(StoreOptions, StoreSpec)> {
    let store_options =
        StoreOptions::from_env(args.session_dir.as_deref(), settings.session_dir.as_deref());
    let spec = resolve_store_spec(
        args.session_store.as_deref(),
        std::env::var(pi_storage::spec::ENV_SESSION_STORE)
            .ok()
            .as_deref(),
        settings.session_store.as_deref(),
    )
    .map_err(|e| anyhow!("{e}"))?;
    Ok((store_options, spec))
}
