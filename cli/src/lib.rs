//! The `pi` command line: argument parsing and dispatch to the modes and `pi sessions …`.

// Unsafe code only at the terminal's syscalls, each with its SAFETY note.
#![deny(unsafe_code)]

pub mod commands;
pub mod modes;
pub mod tui;
pub mod visible;

use clap::{Parser, Subcommand};

/// pi: a minimal terminal coding agent.
#[derive(Debug, Parser)]
#[command(
    name = "pi",
    version,
    about,
    args_conflicts_with_subcommands = true,
    disable_version_flag = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub args: RunArgs,
}

/// The flags of an agent run (Pi's top-level options).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// Long options clap does not know, as given (`--plan`, `--name=value`): values for the
    /// flags extensions register.
    #[arg(skip)]
    pub extension_flags: Vec<String>,

    /// Print the version and exit (Pi spells it `-v`).
    #[arg(short = 'v', long = "version")]
    pub version: bool,

    /// Export a session file to HTML and exit; the first message, if any, names the output
    /// (default `pi-session-<name>.html` in the current directory).
    #[arg(long, value_name = "FILE")]
    pub export: Option<String>,

    /// Non-interactive: process the prompt(s) and print the final answer.
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// Output mode: text (default with -p), json (event stream) or rpc (commands on stdin).
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,

    /// Provider name (with --model ID).
    #[arg(long)]
    pub provider: Option<String>,

    /// Model: `id`, `provider/id`, optionally with `:thinking` (e.g. `openai/gpt-5:high`).
    #[arg(long)]
    pub model: Option<String>,

    /// Thinking level: off, minimal, low, medium, high, xhigh.
    #[arg(long)]
    pub thinking: Option<String>,

    /// API key for the provider (overrides models.json and the environment).
    #[arg(long = "api-key")]
    pub api_key: Option<String>,

    /// Models to cycle through (comma-separated patterns).
    #[arg(long)]
    pub models: Option<String>,

    /// List the available models and exit (optionally filtered by a pattern).
    #[arg(long = "list-models", num_args = 0..=1, default_missing_value = "")]
    pub list_models: Option<String>,

    /// Continue the most recent session in this directory.
    #[arg(short = 'c', long = "continue")]
    pub continue_session: bool,

    /// Pick a session to resume (interactive mode only).
    #[arg(short = 'r', long)]
    pub resume: bool,

    /// Use this session file, or the session whose id starts with this prefix.
    #[arg(long, value_name = "FILE|ID")]
    pub session: Option<String>,

    /// Fork this session (file or id prefix) into a new session and continue there.
    #[arg(long, value_name = "FILE|ID")]
    pub fork: Option<String>,

    /// Open this directory's session with this id, or create it with the id (with `--fork`:
    /// the new session's id).
    #[arg(long = "session-id", value_name = "ID", allow_hyphen_values = true)]
    pub session_id: Option<String>,

    /// Directory for session files.
    #[arg(long = "session-dir")]
    pub session_dir: Option<String>,

    /// Do not save the session.
    #[arg(long = "no-session")]
    pub no_session: bool,

    /// Name the session.
    #[arg(short = 'n', long, allow_hyphen_values = true)]
    pub name: Option<String>,

    /// Tools to enable (comma-separated names or patterns; +name/-name adjust the defaults).
    #[arg(short = 't', long, value_name = "LIST", allow_hyphen_values = true)]
    pub tools: Option<String>,

    /// Tools to disable (comma-separated names or patterns).
    #[arg(long = "exclude-tools", visible_alias = "xt", value_name = "LIST")]
    pub exclude_tools: Option<String>,

    /// Disable the built-in tools (those named by --tools stay).
    #[arg(long = "no-builtin-tools", visible_alias = "nbt")]
    pub no_builtin_tools: bool,

    /// Load an extension file (repeatable).
    #[arg(short = 'e', long = "extension", value_name = "PATH")]
    pub extensions: Vec<String>,

    /// Disable extension discovery (`-e` paths still load).
    #[arg(long = "no-extensions")]
    pub no_extensions: bool,

    /// Disable MCP for this run: no servers connect and there are no MCP tools.
    #[arg(long = "no-mcp")]
    pub no_mcp: bool,

    /// Disable all tools (except those named by --tools).
    #[arg(long = "no-tools", visible_alias = "nt")]
    pub no_tools: bool,

    /// Replace the base system prompt.
    #[arg(long = "system-prompt")]
    pub system_prompt: Option<String>,

    /// Append text or a file's contents to the system prompt (repeatable).
    #[arg(long = "append-system-prompt", value_name = "TEXT|FILE")]
    pub append_system_prompt: Vec<String>,

    /// Do not load AGENTS.md / CLAUDE.md context files.
    #[arg(long = "no-context-files", visible_alias = "nc")]
    pub no_context_files: bool,

    /// Interactive terminal mode: fullscreen (default) or regular.
    #[arg(long = "tui-mode", value_name = "MODE")]
    pub tui_mode: Option<String>,

    /// Show the interactive startup information even when `quietStartup` is set.
    #[arg(long)]
    pub verbose: bool,

    /// Session store: jsonl, jsonl:DIR, redb:PATH, sqlite:PATH or postgres://USER@HOST:PORT/DB.
    #[arg(long = "session-store")]
    pub session_store: Option<String>,

    /// Load a skill file or directory (repeatable).
    #[arg(long = "skill", value_name = "PATH")]
    pub skills: Vec<String>,

    /// Disable discovered and configured skills (`--skill` paths still load) [alias: -ns].
    #[arg(long = "no-skills")]
    pub no_skills: bool,

    /// Load a prompt-template file or directory (repeatable).
    #[arg(long = "prompt-template", value_name = "PATH")]
    pub prompt_templates: Vec<String>,

    /// Disable discovered and configured prompt templates (`--prompt-template` paths still
    /// load) [alias: -np].
    #[arg(long = "no-prompt-templates")]
    pub no_prompt_templates: bool,

    /// Load a theme file or directory (repeatable).
    #[arg(long = "theme", value_name = "PATH")]
    pub themes: Vec<String>,

    /// The interactive theme for this run (`name`, or `dark/light` names), not saved.
    #[arg(long = "use-theme", value_name = "NAME[/NAME]")]
    pub use_theme: Option<String>,

    /// Disable discovered and configured themes (`--theme` paths still load).
    #[arg(long = "no-themes")]
    pub no_themes: bool,

    /// No automatic network activity (model catalog refreshes, package installs): the same
    /// as `PI_OFFLINE=1`.
    #[arg(long)]
    pub offline: bool,

    /// Trust project-local files (.pi settings and resources) for this run.
    #[arg(short = 'a', long)]
    pub approve: bool,

    /// Ignore project-local files (.pi settings and resources) for this run.
    #[arg(long = "no-approve", visible_alias = "na")]
    pub no_approve: bool,

    /// The interactive trust prompt's answer for the start-up cwd (never a flag): for the
    /// rest of the run it decides like `--approve` / `--no-approve`, as Pi keeps the
    /// answer for the process.
    #[arg(skip)]
    pub project_trusted: Option<bool>,

    /// Messages to send; `@path` includes a file's contents.
    #[arg(value_name = "MESSAGE")]
    pub messages: Vec<String>,
}

// Parsed once per run: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect, list, export, import, migrate, search and verify sessions.
    Sessions(commands::sessions::SessionsArgs),
    /// Add, remove and check MCP servers (mcp.json) without a session.
    Mcp(commands::mcp::McpArgs),
    /// Log in to and out of model providers (subscription sign-in).
    Auth(commands::auth::AuthArgs),
}

/// Pi's short flags of more than one letter, and the long flags they stand for.
const MULTI_LETTER_SHORTS: &[(&str, &str)] = &[
    ("-nc", "--no-context-files"),
    ("-ne", "--no-extensions"),
    ("-ns", "--no-skills"),
    ("-np", "--no-prompt-templates"),
    ("-nt", "--no-tools"),
    ("-nbt", "--no-builtin-tools"),
    ("-na", "--no-approve"),
    ("-xt", "--exclude-tools"),
];

/// Pi spells some short flags with two or three letters (`-nc`, `-xt`, `-nbt`, …); clap
/// would read `-nc` as `-n c` (a session named "c"), so they are rewritten to their long
/// forms first. Only flags are rewritten: not the value of a flag that takes one
/// (`--name -nc`), nor anything after `--` (a prompt may start with `-`).
/// The command line with Pi's spellings normalized for clap, and the long options clap does
/// not know (`--plan`, `--ssh-host=h`): those are extension flags (`pi.registerFlag`),
/// resolved once the extensions are loaded.
fn normalize_args(args: impl Iterator<Item = String>) -> (Vec<String>, Vec<String>) {
    use clap::CommandFactory;
    let command = Cli::command();
    // `Some(optional)` for a flag that takes a value (`optional`: only when the next
    // argument is not a flag, as `--list-models [search]`).
    let takes_value = |arg: &str| -> Option<bool> {
        let found = if let Some(long) = arg.strip_prefix("--") {
            command.get_arguments().find(|a| {
                a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|v| v.contains(&long))
            })
        } else if let Some(short) = arg.strip_prefix('-').filter(|s| s.chars().count() == 1) {
            let c = short.chars().next();
            command.get_arguments().find(|a| a.get_short() == c)
        } else {
            None
        };
        let a = found.filter(|a| a.get_action().takes_values() && !a.is_positional())?;
        Some(a.get_num_args().is_some_and(|n| n.min_values() == 0))
    };
    let known_long = |arg: &str| {
        let name = arg.trim_start_matches('-');
        let name = name.split_once('=').map_or(name, |(n, _)| n);
        command.get_arguments().any(|a| {
            a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|v| v.contains(&name))
        }) || matches!(name, "help")
    };
    let mut out = Vec::new();
    let mut extension_flags = Vec::new();
    let mut args = args.peekable();
    // The program name.
    out.extend(args.next());
    // A subcommand (`pi sessions …`) has its own flags.
    if args
        .peek()
        .is_some_and(|a| command.get_subcommands().any(|c| c.get_name() == a))
    {
        out.extend(args);
        return (out, extension_flags);
    }
    while let Some(arg) = args.next() {
        if arg == "--" {
            out.push(arg);
            out.extend(args);
            break;
        }
        if arg.starts_with("--") && arg.len() > 2 && !known_long(&arg) {
            extension_flags.push(arg);
            continue;
        }
        if let Some(optional) = takes_value(&arg) {
            out.push(arg);
            if !optional || args.peek().is_some_and(|next| !next.starts_with('-')) {
                out.extend(args.next());
            }
            continue;
        }
        match MULTI_LETTER_SHORTS.iter().find(|(short, _)| *short == arg) {
            Some((_, long)) => out.push((*long).to_string()),
            None => out.push(arg),
        }
    }
    (out, extension_flags)
}

/// What Pi's argument parser only warns about: an unknown `--thinking` level is dropped
/// (the settings decide) instead of ending the run.
fn check_run_args(args: &mut RunArgs) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(level) = &args.thinking {
        if pi_formats::message::ThinkingLevel::parse(level).is_none() {
            warnings.push(format!(
                "Invalid thinking level \"{level}\". Valid values: off, minimal, low, medium, high, xhigh, max"
            ));
            args.thinking = None;
        }
    }
    warnings
}

/// Pi's checks of `--session-id`: not with `--session`, `--continue` or `--resume`, and an
/// id of letters, digits, `.`, `_` and `-` that starts and ends with a letter or digit.
fn check_session_id(args: &RunArgs) -> Result<(), String> {
    let Some(id) = &args.session_id else {
        return Ok(());
    };
    let conflicting: Vec<&str> = [
        (args.session.is_some(), "--session"),
        (args.continue_session, "--continue"),
        (args.resume, "--resume"),
    ]
    .into_iter()
    .filter_map(|(set, flag)| set.then_some(flag))
    .collect();
    if !conflicting.is_empty() {
        return Err(format!(
            "--session-id cannot be combined with {}",
            conflicting.join(", ")
        ));
    }
    let inner_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let edges_ok = id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !edges_ok || !id.chars().all(inner_ok) {
        return Err(
            "Session id must be non-empty, contain only alphanumeric characters, '-', \
                    '_', and '.', and start and end with an alphanumeric character"
                .into(),
        );
    }
    Ok(())
}

/// Runs the command line and returns the process exit code.
pub fn run() -> i32 {
    // Package commands (`pi install …`, `pi list`, `pi config`) have Pi's own parser.
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = commands::packages::run(&raw) {
        return code;
    }
    let (argv, extension_flags) = normalize_args(std::env::args());
    let mut cli = Cli::parse_from(argv);
    cli.args.extension_flags = extension_flags;
    if cli.args.offline {
        // Before any thread starts; extension processes inherit it, as Pi's do.
        std::env::set_var("PI_OFFLINE", "1");
    }
    if cli.command.is_none() {
        for warning in check_run_args(&mut cli.args) {
            eprintln!("Warning: {warning}");
        }
        if let Some(mode) = cli
            .args
            .tui_mode
            .as_deref()
            .filter(|m| !matches!(*m, "regular" | "fullscreen"))
        {
            // Pi's wording and exit code.
            eprintln!("Error: Invalid TUI mode \"{mode}\". Valid values: regular, fullscreen");
            return 1;
        }
        if cli.args.version {
            println!("{}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        if let Err(e) = check_session_id(&cli.args) {
            eprintln!("Error: {e}");
            return 1;
        }
    }
    let result = match cli.command {
        Some(Command::Sessions(args)) => commands::sessions::run(args),
        Some(Command::Mcp(args)) => commands::mcp::run(args),
        Some(Command::Auth(args)) => commands::auth::run(args),
        None => match cli.args.export.as_deref() {
            Some(input) => {
                commands::sessions::export::export_flag(input, cli.args.messages.first())
            }
            None => modes::run(cli.args),
        },
    };
    // Full command output kept for this run's model (`pi-bash-*.log`) goes with the process.
    pi_agent::tools::remove_output_files();
    match result {
        Ok(code) => code,
        Err(err) => {
            // One line, no backtrace: the message names the file and what went wrong.
            eprintln!("pi: {err:#}");
            1
        }
    }
}
