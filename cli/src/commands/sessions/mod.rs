//! `pi sessions …`: inspect, show, verify, list, export, import, migrate, search, stats.
//!
//! Each subcommand lives in its own file with its clap `…Args` struct and a `run` fn.

pub mod inspect;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: SessionsCommand,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Print what the engine makes of a session file (tree, branch, context) as JSON.
    Inspect(inspect::InspectArgs),
}

/// Dispatches a `pi sessions` subcommand; returns the exit code.
pub fn run(args: SessionsArgs) -> anyhow::Result<i32> {
    match args.command {
        SessionsCommand::Inspect(args) => inspect::run(args),
    }
}
