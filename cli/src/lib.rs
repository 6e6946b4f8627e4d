//! The `pi` command line: argument parsing and dispatch to the modes and `pi sessions …`.

pub mod commands;

use clap::{Parser, Subcommand};

/// pi: a minimal terminal coding agent.
#[derive(Debug, Parser)]
#[command(name = "pi", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect, list, export, import, migrate, search and verify sessions.
    Sessions(commands::sessions::SessionsArgs),
}

/// Runs the command line and returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Sessions(args)) => commands::sessions::run(args),
        None => Err(anyhow::anyhow!(
            "interactive mode is not available yet; see `pi --help`"
        )),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // One line, no backtrace: the message names the file and what went wrong.
            eprintln!("pi: {err:#}");
            1
        }
    }
}
