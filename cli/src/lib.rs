//! The `pi` command line: argument parsing and dispatch to the modes and `pi sessions …`.

pub mod commands;
pub mod modes;
pub mod tui;
pub mod visible;

use clap::{Parser, Subcommand};

/// pi: a minimal terminal coding agent.
#[derive(Debug, Parser)]
#[command(name = "pi", version, about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub args: RunArgs,
}

/// The flags of an agent run (Pi's top-level options).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
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

    /// Directory for session files.
    #[arg(long = "session-dir")]
    pub session_dir: Option<String>,

    /// Do not save the session.
    #[arg(long = "no-session")]
    pub no_session: bool,

    /// Name the session.
    #[arg(short = 'n', long)]
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

    /// Disable all tools (except those named by --tools).
    #[arg(long = "no-tools", visible_alias = "nt")]
    pub no_tools: bool,

    /// Replace the base system prompt.
    #[arg(long = "system-prompt")]
    pub system_prompt: Option<String>,

    /// Append text to the system prompt.
    #[arg(long = "append-system-prompt")]
    pub append_system_prompt: Option<String>,

    /// Session store: jsonl, jsonl:DIR, redb:PATH or sqlite:PATH.
    #[arg(long = "session-store")]
    pub session_store: Option<String>,

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

    /// Export a session file to HTML and exit (the output file is the first MESSAGE, else
    /// `pi-session-<file name>.html` here).
    #[arg(long = "export", value_name = "FILE")]
    pub export: Option<String>,

    /// Messages to send; `@path` includes a file's contents.
    #[arg(value_name = "MESSAGE")]
    pub messages: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect, list, export, import, migrate, search and verify sessions.
    Sessions(commands::sessions::SessionsArgs),
}

/// Pi spells some short flags with two letters (`-xt`, `-nbt`, `-nt`, `-na`); clap only
/// knows single-letter shorts, so they are rewritten to their long forms first.
fn normalize_args(args: impl Iterator<Item = String>) -> Vec<String> {
    args.map(|a| match a.as_str() {
        "-xt" => "--exclude-tools".to_string(),
        "-nbt" => "--no-builtin-tools".to_string(),
        "-nt" => "--no-tools".to_string(),
        "-na" => "--no-approve".to_string(),
        _ => a,
    })
    .collect()
}

/// Runs the command line and returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse_from(normalize_args(std::env::args()));
    let result = match cli.command {
        Some(Command::Sessions(args)) => commands::sessions::run(args),
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
