//! The non-interactive modes (print, json, rpc) and what they share: settings, model
//! resolution, tool selection, and opening or creating the session.

pub(crate) mod extensions;
pub mod json;
pub(crate) mod llama_cpp;
mod mcp_command;
pub mod print;
pub mod radius_refresh;
pub(crate) mod reload;
pub mod rpc;
mod session_extensions;
mod settings;

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _};
use pi_agent::agent::{AgentOptions, AgentSession, EventSink, PromptOptions, QueueMode};
use pi_agent::host::{Host, HostSetup, SessionHome};
use pi_agent::llm::{load_models, Model, ModelRegistry};
use pi_agent::tools::{select_builtin_tools, NoTools, ToolSelection};
use pi_formats::header::NewHeader;
use pi_formats::message::ThinkingLevel;
use pi_storage::{resolve_store_spec, StoreOptions, StoreSpec};

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
            let result = print::list_models(&args, &env, pattern);
            extensions::shutdown().await;
            return result;
        }
        let result = match mode {
            Mode::Text | Mode::Json => print::run(args, mode).await,
            Mode::Rpc => rpc::run(args).await,
        };
        shutdown_mcp().await;
        extensions::shutdown().await;
        result
    })
}

/// Everything resolved from flags, environment and settings before a session exists.
pub struct Env {
    /// Context files, skills, prompt templates, SYSTEM.md / APPEND_SYSTEM.md.
    pub resources: pi_agent::config::Resources,
    pub settings: Settings,
    pub registry: ModelRegistry,
    /// Where sessions are opened and created, and the directory the run works in.
    pub home: SessionHome,
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
    let (session, _) = probe.home.open_ref(reference).map_err(|e| anyhow!(e))?;
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
            RunDir::Dir(cwd) => {
                extensions::decide_trust(args, &cwd, true)?;
                Env::at(args, cwd)
            }
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
            settings,
            registry: Default::default(),
            home: SessionHome {
                agent_dir,
                cwd: cwd.to_string(),
                spec,
                store_options,
                no_session: true,
            },
        })
    }

    /// [`Env::new`] for a directory already decided.
    pub fn at(args: &RunArgs, cwd: String) -> anyhow::Result<Env> {
        let store_probe = StoreOptions::from_env(args.session_dir.as_deref(), None);
        let agent_dir = store_probe.agent_dir.clone();
        let settings = Settings::load(&agent_dir, Path::new(&cwd), args)?;
        let (store_options, spec) = store_of(args, &settings)?;
        let mut warnings = Vec::new();
        let registry =
            base_catalog(args, &settings, &agent_dir, &mut warnings).map_err(|e| anyhow!("{e}"))?;
        for w in warnings {
            eprintln!("Warning: {w}");
        }
        let resources = settings.resources(&agent_dir, Path::new(&cwd), args);
        for d in &resources.diagnostics {
            eprintln!("Warning: {}: {}", d.path.display(), d.message);
        }
        Ok(Env {
            resources,
            settings,
            registry,
            home: SessionHome {
                agent_dir,
                cwd,
                spec,
                store_options,
                no_session: args.no_session,
            },
        })
    }
}

/// The model catalog before extensions add theirs: models.json (the built-in models when
/// there is none), the Radius catalog fetched at the last login (for an offline start), and
/// llama.cpp's router models when that built-in is on.
pub(crate) fn base_catalog(
    args: &RunArgs,
    settings: &Settings,
    agent_dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<ModelRegistry, pi_agent::llm::ModelsJsonError> {
    let mut registry = load_models(&agent_dir.join("models.json"))?;
    if !registry.provider_errors.is_empty() {
        warnings.push(format!(
            "errors loading models.json:\n{}",
            std::mem::take(&mut registry.provider_errors).join("\n")
        ));
    }
    pi_agent::llm::radius_catalog::apply_cached(&mut registry, agent_dir);
    llama_cpp::add_router_models(&mut registry, args, settings, agent_dir, warnings);
    Ok(registry)
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
        match pi_agent::tools::prompt_image(&bytes) {
            Some(pi_agent::tools::PromptImage::Attached {
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
            Some(pi_agent::tools::PromptImage::Omitted(note)) => {
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

/// The tool options of a run: the command line's tool flags over the settings'
/// `defaultTools` and `codemode.*` (read again by `/reload`).
pub fn tool_selection(args: &RunArgs, settings: &Settings) -> ToolSelection {
    ToolSelection {
        tools: split_list(&args.tools),
        exclude_tools: split_list(&args.exclude_tools),
        no_tools: if args.no_tools {
            NoTools::All
        } else if args.no_builtin_tools {
            NoTools::Builtin
        } else {
            NoTools::None
        },
        default_tools: settings.config.default_tools(),
        codemode: pi_agent::codemode::CodemodeOptions::from_settings(
            settings.config.get("codemode"),
        ),
    }
}

/// Builds the host for a mode: the agent with its session (new, `-c`, `--session`,
/// `--fork`), model, thinking level, tools and settings, and the session lifecycle around it.
pub fn build_host(args: &RunArgs, env: &Env, sink: EventSink) -> anyhow::Result<Arc<Host>> {
    let selection = tool_selection(args, &env.settings);
    let mut tools = select_builtin_tools(&selection).map_err(|e| anyhow!(e))?;
    let mcp = start_mcp(args, env);
    if let Some(mcp) = &mcp {
        tools.extend(pi_agent::mcp::tool_set::declared_mcp_tools(mcp, &selection));
    }
    let extensions = extensions::start(args, env, &tools)?;
    // The tool options filter extension tools as they filter built-ins, and their exposure
    // decides what is declared (an extension tool with a built-in's name replaces it, Pi's
    // tool overrides). The MCP servers' declared tools follow the session's own.
    let extension_tools = extensions
        .as_ref()
        .map(|ext| ext.registered_tools())
        .unwrap_or_default();
    let session_tools = pi_agent::tools::select_session_tools(&selection, &extension_tools)
        .map_err(|e| anyhow!(e))?;
    tools = session_tools.active.clone();
    if let Some(mcp) = &mcp {
        tools.extend(pi_agent::mcp::tool_set::declared_mcp_tools(mcp, &selection));
    }
    let inactive: Vec<Arc<dyn pi_agent::tools::Tool>> = session_tools
        .registered
        .iter()
        .filter(|t| !tools.iter().any(|a| a.name() == t.name()))
        .cloned()
        .collect();
    // Registered, not declared: callable from codemode scripts, loadable by `tool_search`.
    let nested: Vec<Arc<dyn pi_agent::tools::Tool>> = inactive
        .iter()
        .filter(|t| t.exposure().is_nested_only())
        .cloned()
        .collect();
    // Virtual models join the catalog before `--model` and the session's model resolve.
    let registry = catalog_with_extensions(env, extensions.as_deref());
    // With MCP on, the loadout owns the servers' part of the tool set (recomputed before
    // every request, so late servers and `/mcp` changes reach the model): their declared
    // tools, then codemode (its `tools.*` covers every other callable tool, extensions'
    // included), then `tool_search` (it changes what the model sees; scripts do not call it).
    let loadout = match &mcp {
        Some(m) => {
            let loadout = pi_agent::mcp::tool_search::McpLoadout::with_nested(
                m.clone(),
                selection.clone(),
                &tools,
                nested,
            );
            tools = loadout.session_tools();
            Some(loadout)
        }
        None => {
            if pi_agent::mcp::tool_set::wants_codemode(&selection, None) {
                tools = pi_agent::codemode::with_codemode(tools, nested, None, &selection.codemode);
                tools = pi_agent::mcp::tool_set::in_selection_order(tools, &selection);
            }
            None
        }
    };
    let (session, persist, resumed) = if let Some(r) = &args.fork {
        if let Some(id) = &args.session_id {
            if env
                .home
                .open_local_id(id)
                .map_err(|e| anyhow!(e))?
                .is_some()
            {
                bail!("Session already exists with id '{id}'");
            }
        }
        let (source, _) = env.home.read_only().open_ref(r).map_err(|e| anyhow!(e))?;
        let header = NewHeader::new(
            args.session_id
                .clone()
                .unwrap_or_else(pi_formats::id::session_id),
            pi_formats::time::now_iso(),
            env.home.cwd.clone(),
            // Absolute, as Pi stores it, whatever form the argument had.
            source
                .path()
                .map(|p| pi_storage::paths::resolve_path(p).display().to_string()),
        );
        let (s, p) = env
            .home
            .create_from_lines(source.fork_from_lines(&header))
            .map_err(|e| anyhow!(e))?;
        (s, p, true)
    } else if let Some(r) = &args.session {
        let (s, p) = env.home.open_ref(r).map_err(|e| anyhow!(e))?;
        (s, p, true)
    } else if let Some(id) = &args.session_id {
        // `--no-session` keeps only the id, as Pi's in-memory session does.
        let existing = if args.no_session {
            None
        } else {
            env.home.open_local_id(id).map_err(|e| anyhow!(e))?
        };
        match existing {
            Some((s, p)) => (s, p, true),
            None => {
                if !args.no_session {
                    eprintln!(
                        "Warning: No project session found with id '{id}'; creating a new \
                         session with that id."
                    );
                }
                let (s, p) = env
                    .home
                    .new_session_as(id.clone(), None)
                    .map_err(|e| anyhow!(e))?;
                (s, p, false)
            }
        }
    } else if args.continue_session {
        match env.home.latest().map_err(|e| anyhow!(e))? {
            Some((s, p)) => (s, p, true),
            None => {
                let (s, p) = env.home.new_session(None).map_err(|e| anyhow!(e))?;
                (s, p, false)
            }
        }
    } else {
        let (s, p) = env.home.new_session(None).map_err(|e| anyhow!(e))?;
        (s, p, false)
    };

    let has_auth = credentials_check(env, &registry, args.api_key.is_some());
    let flag_level = match &args.thinking {
        Some(l) => Some(ThinkingLevel::parse(l).ok_or_else(|| {
            anyhow!(
                "invalid --thinking {l:?}: expected off, minimal, low, medium, high, xhigh or max"
            )
        })?),
        None => None,
    };
    // Pi's CLI model resolution (engine::config): `--provider`, `--model` with `:level`.
    let resolution = pi_agent::config::resolve_cli_model(
        &pi_agent::config::CliModelRequest {
            provider: args.provider.as_deref(),
            model: args.model.as_deref(),
            thinking: flag_level,
            inline_api_key: args.api_key.is_some(),
        },
        &registry.models,
        &has_auth,
    );
    if let Some(e) = resolution.error {
        bail!("{e}");
    }
    if let Some(w) = resolution.warning {
        eprintln!("Warning: {w}");
    }
    let explicit = resolution.model.map(|m| (m, resolution.thinking_level));
    let scoped = scoped_models(args, env, &registry);
    let available: Vec<Model> = registry
        .models
        .iter()
        .filter(|m| has_auth(&m.provider))
        .cloned()
        .collect();
    let initial = pi_agent::config::find_initial_model(
        &scoped,
        resumed,
        &env.settings.config,
        &registry.models,
        &available,
        &has_auth,
    );
    let default_model = initial.model.clone();
    let settings_level = Some(initial.thinking_level);
    let retry = env.settings.retry;
    let opts = AgentOptions {
        cwd: PathBuf::from(&env.home.cwd),
        registry,
        model: explicit
            .as_ref()
            .map(|(m, _)| m.clone())
            .or(default_model.clone()),
        thinking: flag_level
            .or(explicit.as_ref().and_then(|(_, l)| *l))
            .or(settings_level)
            .unwrap_or(pi_agent::config::DEFAULT_THINKING_LEVEL),
        tools: tools.clone(),
        prompt: PromptOptions {
            system_prompt: args.system_prompt.clone(),
            append_system_prompt: (!args.append_system_prompt.is_empty())
                .then(|| args.append_system_prompt.join("\n\n")),
            system_message: Some(with_mcp_section(
                system_message(env, &tools),
                mcp.as_deref(),
            )),
            reloaded: false,
            builder: Some(prompt_builder(env, mcp.clone())),
        },
        retry,
        compaction: env.settings.compaction,
        branch_summary: env.settings.config.branch_summary(),
        api_key: args.api_key.clone(),
        api_key_resolver: Some(api_key_resolver(env)),
        shell: pi_agent::agent::ShellOptions {
            shell_path: env.settings.config.shell_path(),
            command_prefix: env
                .settings
                .config
                .shell_command_prefix()
                .map(str::to_string),
            bin_dir: Some(env.home.agent_dir.join("bin")),
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
    agent.register_tools_in_order(&session_tools.registered);
    // Tools extensions register later go through the same options.
    agent.set_tool_selection(selection.clone());
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
    let mut resources = env.resources.clone();
    // Before `session_start`: tools its handlers register reach the loadout.
    if let Some(loadout) = loadout {
        agent.set_tool_loadout(loadout);
    }
    if let Some(ext) = &extensions {
        ext.attach(agent.clone());
        agent.set_hooks(ext.clone());
        ext.set_host_commands(pi_agent::host::host_commands(&resources));
        // Pi's `session_start`, once `ctx.sessionManager` can read the session, then
        // `resources_discover`: skills and prompt templates the extensions point at join
        // the loaded ones (and the system prompt).
        let handle = tokio::runtime::Handle::current();
        let found = tokio::task::block_in_place(|| {
            handle.block_on(async {
                ext.session_start("startup", None).await;
                ext.resources_discover("startup").await
            })
        });
        // Themes are the interactive mode's (its theme setting and /settings).
        found.record_provenance(&mut resources.provenance);
        resources.add_discovered_themes(&found.theme_paths);
        if resources.add_discovered(&found.skill_paths, &found.prompt_paths) {
            agent.set_prompt_builder(prompt_builder_for(
                env.home.cwd.clone(),
                resources.clone(),
                mcp.clone(),
            ));
        }
    }
    let host = Host::new(
        agent,
        HostSetup {
            home: env.home.clone(),
            resources,
            skill_commands: env.settings.config.enable_skill_commands(),
            scoped,
            has_auth: Arc::new(has_auth),
            settings: env.settings.config.clone(),
        },
    );
    if let Some(ext) = extensions {
        reload::install(&ext, &host, args, &env.settings);
        host.set_extensions(ext);
    }
    session_extensions::install(&host, args, &env.home.cwd, &env.settings);
    Ok(host)
}

/// The settings that shape model requests: `thinkingBudgets`, `images.blockImages`, and an
/// HTTP client for `httpProxy` (global settings only, as Pi reads it before trusting any
/// project) and `httpIdleTimeoutMs`.
pub fn request_options(env: &Env) -> anyhow::Result<pi_agent::agent::RequestOptions> {
    let cfg = &env.settings.config;
    let idle_ms = cfg.http_idle_timeout_ms().map_err(|e| anyhow!(e))?;
    let proxy = cfg
        .global()
        .get("httpProxy")
        .and_then(serde_json::Value::as_str);
    let client = pi_agent::llm::settings_client(proxy, idle_ms).map_err(|e| anyhow!(e))?;
    Ok(pi_agent::agent::RequestOptions {
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
        if inline_api_key {
            return true;
        }
        // A provider object says itself whether it is configured (its `auth.apiKey.check`,
        // else its resolution, Pi's `checkProviderAuth`), without its key being resolved.
        let owned = pi_agent::llm::provider_auth::check_blocking(provider);
        matches!(owned, Some(Ok(true)))
            || (owned.is_none() && (resolver.0)(provider).is_some())
            || registry.resolve_api_key(provider).is_some()
            || !registry.resolve_headers(provider, None).is_empty()
    }
}

/// Whether a provider of `registry` can be used: credentials as [`auth_check`] finds them,
/// and a provider that lists only virtual models needs none.
pub fn credentials_check(
    env: &Env,
    registry: &ModelRegistry,
    inline_api_key: bool,
) -> impl Fn(&str) -> bool {
    let env_auth = auth_check(env, inline_api_key);
    let virtual_only: Vec<String> = registry
        .models
        .iter()
        .filter(|m| m.is_virtual() && registry.is_virtual_only_provider(&m.provider))
        .map(|m| m.provider.clone())
        .collect();
    // Providers extensions register bring their own `apiKey` / headers.
    let registry = registry.clone();
    move |provider: &str| {
        env_auth(provider)
            || virtual_only.iter().any(|p| p == provider)
            || registry.resolve_api_key(provider).is_some()
            || !registry.resolve_headers(provider, None).is_empty()
    }
}

/// The catalog of a run: `env`'s models plus the providers and virtual models its
/// extensions register.
pub fn catalog_with_extensions(
    env: &Env,
    extensions: Option<&pi_agent::extensions::Extensions>,
) -> ModelRegistry {
    match extensions {
        Some(ext) => ext.catalog(env.registry.clone()),
        None => env.registry.clone(),
    }
}

/// The models a user can use now (Pi's `getAvailableSnapshot`): those whose provider has
/// credentials, in registry order.
pub fn available_models(registry: &ModelRegistry, has_auth: &dyn Fn(&str) -> bool) -> Vec<Model> {
    let configured = registry
        .models
        .iter()
        .filter(|m| has_auth(&m.provider))
        .cloned()
        .collect();
    // Provider objects' `filterModels(models, credential)` narrow their lists.
    pi_agent::llm::provider_auth::filter_available(configured)
}

/// The session's system message, as `engine::config` builds it (context files, skills,
/// SYSTEM.md / APPEND_SYSTEM.md, `--system-prompt`, `--append-system-prompt`).
pub(crate) fn system_message(
    env: &Env,
    tools: &[Arc<dyn pi_agent::tools::Tool>],
) -> serde_json::Value {
    let cwd = Path::new(&env.home.cwd);
    let resources = &env.resources;
    pi_agent::config::build_system_message(&pi_agent::config::SystemPromptInput {
        tools,
        cwd,
        resources,
        // We ship no harness docs yet: pointing the model at missing files only misleads.
        docs: None,
        timestamp_ms: 0,
    })
}

/// [`system_message`] with the `mcp_servers` section of this run's servers (`/reload`, which
/// may have changed them).
pub(crate) fn system_message_with_mcp(
    env: &Env,
    tools: &[Arc<dyn pi_agent::tools::Tool>],
) -> serde_json::Value {
    with_mcp_section(system_message(env, tools), current_mcp().as_deref())
}

/// Rebuilds the system message for another tool set (`pi.setActiveTools`, tools an
/// extension registers later) from the same resources.
fn prompt_builder(
    env: &Env,
    mcp: Option<Arc<pi_agent::mcp::McpManager>>,
) -> pi_agent::agent::PromptBuilder {
    prompt_builder_for(env.home.cwd.clone(), env.resources.clone(), mcp)
}

/// [`prompt_builder`] over `resources` (with what extensions contributed).
pub(crate) fn prompt_builder_for(
    cwd: String,
    resources: pi_agent::config::Resources,
    mcp: Option<Arc<pi_agent::mcp::McpManager>>,
) -> pi_agent::agent::PromptBuilder {
    pi_agent::agent::PromptBuilder(Arc::new(move |tools| {
        let message =
            pi_agent::config::build_system_message(&pi_agent::config::SystemPromptInput {
                tools,
                cwd: Path::new(&cwd),
                resources: &resources,
                docs: None,
                timestamp_ms: 0,
            });
        with_mcp_section(message, mcp.as_deref())
    }))
}

/// The MCP managers this process started, stopped by [`shutdown_mcp`].
static MCP_MANAGERS: std::sync::Mutex<Vec<Arc<pi_agent::mcp::McpManager>>> =
    std::sync::Mutex::new(Vec::new());

/// Loads `mcp.json` (the project's only when trusted) unless `--no-mcp`, starts every enabled
/// server in the background and waits up to 10 s for those with `direct` tools, as Pi's first
/// prompt does. Configuration errors and failed servers are reported once on stderr.
fn start_mcp(args: &RunArgs, env: &Env) -> Option<Arc<pi_agent::mcp::McpManager>> {
    if args.no_mcp {
        return None;
    }
    let manager = pi_agent::mcp::McpManager::load(
        &env.home.agent_dir,
        Path::new(&env.home.cwd),
        env.settings.trusted,
    );
    // Kept without servers too: `/reload` may find some later, and `/mcp` answers.
    let manager = Arc::new(manager);
    let handle = tokio::runtime::Handle::current();
    // build_host runs inside the runtime (print, rpc) or beside it (TUI); either way the
    // servers' tasks must live on the runtime that outlives this call.
    tokio::task::block_in_place(|| handle.block_on(manager.start(pi_agent::mcp::DIRECT_WAIT)));
    let tui = args.mode.is_none() && !args.print;
    if tui {
        // Later lines would write over the screen.
        for problem in manager.problems() {
            eprintln!("Warning: {problem}");
        }
    } else if args.mode.as_deref() != Some("rpc") {
        // RPC clients get Pi's notify record instead (`mcp_command::report_after_startup`).
        report_mcp_problems(&manager);
    }
    MCP_MANAGERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(manager.clone());
    let _ = MCP_RUNTIME.set(handle);
    Some(manager)
}

/// The runtime the MCP connections live on (the TUI's loop runs beside it).
static MCP_RUNTIME: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();

/// The MCP servers of this run, when MCP is on.
pub fn current_mcp() -> Option<Arc<pi_agent::mcp::McpManager>> {
    mcp_command::current()
}

/// `/reload` for MCP: reads `mcp.json` (and the trusted project's) again, stops removed and
/// changed servers and connects new and changed ones, waiting for those with `direct` tools
/// as start-up does, so the next request declares what the files say now. Returns the
/// configuration errors, as warnings.
pub fn reload_mcp(project_trusted: bool) -> Vec<String> {
    let Some(mcp) = current_mcp() else {
        return Vec::new();
    };
    let reloaded = mcp.reload(project_trusted);
    if let (false, Some(handle)) = (reloaded.is_empty(), MCP_RUNTIME.get()) {
        let work = reloaded.apply(pi_agent::mcp::DIRECT_WAIT);
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::task::block_in_place(|| handle.block_on(work));
        } else {
            handle.block_on(work);
        }
    }
    mcp.config()
        .errors
        .iter()
        .map(|e| format!("MCP config error: {e}"))
        .collect()
}

/// Runs `work` on the runtime of the MCP connections (reconnects from the TUI).
pub fn spawn_on_mcp_runtime(work: impl std::future::Future<Output = ()> + Send + 'static) {
    if let Some(handle) = MCP_RUNTIME.get() {
        handle.spawn(work);
    }
}

/// Config errors and servers that failed already, now; servers still connecting once their
/// first connection settled (they are not waited for at start-up); each once, on stderr.
fn report_mcp_problems(manager: &Arc<pi_agent::mcp::McpManager>) {
    use pi_agent::mcp::ConnState;
    for problem in manager.problems() {
        eprintln!("Warning: {problem}");
    }
    let connecting: Vec<_> = manager
        .servers()
        .iter()
        .filter(|s| s.enabled() && s.status().state == ConnState::Connecting)
        .cloned()
        .collect();
    for server in connecting {
        tokio::spawn(async move {
            server.settled().await;
            if server.status().state == ConnState::Failed {
                let error = server.status().error.unwrap_or_default();
                let first = error.lines().next().unwrap_or("unknown error").to_string();
                eprintln!("Warning: MCP server \"{}\" failed: {first}", server.name());
            }
        });
    }
}

/// Stops every MCP server this process started (stdin, SIGTERM, SIGKILL).
pub async fn shutdown_mcp() {
    let managers = std::mem::take(&mut *MCP_MANAGERS.lock().unwrap_or_else(|e| e.into_inner()));
    for manager in managers {
        manager.shutdown().await;
    }
}

/// Adds Pi's `mcp_servers` section (servers reached through codemode or tool_search) to a
/// built system message.
fn with_mcp_section(
    mut message: serde_json::Value,
    mcp: Option<&pi_agent::mcp::McpManager>,
) -> serde_json::Value {
    let Some(section) = mcp.and_then(pi_agent::mcp::McpManager::servers_section) else {
        return message;
    };
    if let Some(sections) = message.get_mut("sections").and_then(|s| s.as_object_mut()) {
        sections.insert(
            "mcp_servers".into(),
            serde_json::Value::from(format!("<mcp_servers>\n{section}\n</mcp_servers>")),
        );
    }
    message
}

/// Keys from auth.json and the environment (models.json and `--api-key` are handled by the
/// agent), in Pi's precedence.
pub(crate) fn api_key_resolver(env: &Env) -> pi_agent::agent::ApiKeyResolver {
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
) -> pi_agent::agent::ApiKeyResolver {
    let auth = pi_agent::config::AuthStore::load_or_warn(&env.home.agent_dir, warnings);
    let registry = env.registry.clone();
    let agent_dir = env.home.agent_dir.clone();
    pi_agent::agent::ApiKeyResolver(Arc::new(move |provider: &str| {
        // A provider object registered by an extension resolves its own key
        // (`auth.apiKey.resolve`, `auth.oauth.toAuth`) from the stored credential or the
        // environment; models.json's `apiKey` still stands above it (the agent's fallback).
        if let Some(resolved) = pi_agent::llm::provider_auth::resolve_blocking(provider) {
            return resolved.ok().flatten().and_then(|auth| auth.api_key);
        }
        // A subscription login (read from disk now: /login may have run since startup),
        // refreshed when it is about to expire. A failed refresh still sends the old token,
        // so the provider's answer says what is wrong.
        if let (Some(token), _) = pi_agent::llm::oauth::oauth_access_token(&agent_dir, provider) {
            return Some(token);
        }
        // Read now too: `/login llama.cpp` may have stored the router since start-up.
        if provider == pi_agent::llm::llama_cpp::PROVIDER_ID {
            if let Some(conn) = pi_agent::llm::llama_cpp::current_connection(&agent_dir) {
                return Some(conn.key());
            }
        }
        // Stored keys are read now as well: `/login` may have saved one since start-up. The
        // start-up copy stands in when the file cannot be read (its problem was said then).
        let current = pi_agent::config::AuthStore::load(&agent_dir).ok();
        let auth = current.as_ref().unwrap_or(&auth);
        let lookup = |k: &str| std::env::var(k).ok();
        pi_agent::config::resolve_api_key(provider, None, Some(auth), &registry, &lookup)
    }))
}

/// `--models` patterns, else the `enabledModels` setting (as Pi), resolved to models (for
/// `cycle_model` and the starting model).
pub fn scoped_models(
    args: &RunArgs,
    env: &Env,
    registry: &ModelRegistry,
) -> Vec<pi_agent::config::ScopedModel> {
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
    let (scoped, warnings) = pi_agent::config::resolve_model_scope(&patterns, &registry.models);
    for w in warnings {
        eprintln!("Warning: {w}");
    }
    scoped
}

/// A sink that writes each event as one JSON line to stdout (warnings to stderr too, for
/// whoever watches the process rather than the stream).
pub fn stdout_sink() -> EventSink {
    Arc::new(|event| {
        warn_on_stderr(&event);
        write_line(&event);
    })
}

/// Print mode's sink: the answer is printed at the end, only warnings show on the way.
pub fn stderr_warnings_sink() -> EventSink {
    Arc::new(|event| warn_on_stderr(&event))
}

/// A warning event as one line on stderr; its text may quote a session file, so control
/// characters are made visible.
fn warn_on_stderr(event: &pi_agent::protocol::Event) {
    if let pi_agent::protocol::Event::Warning { message } = event {
        eprintln!("Warning: {}", crate::visible::visible_line(message));
    }
}

/// Writes one record (an event or a response) as a JSON line to stdout, whole.
pub fn write_line(record: &impl serde::Serialize) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // A closed stdout (reader gone) must not kill the agent mid-write; the session
    // file is what matters then.
    let _ = serde_json::to_writer(&mut out, record);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
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
