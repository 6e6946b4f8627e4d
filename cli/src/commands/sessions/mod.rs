//! `pi sessions …`: inspect, show, verify, list, export, import, migrate, search, stats,
//! query.
//!
//! Each subcommand lives in its own file with its clap `…Args` struct and a `run` fn.

pub mod export;
pub mod import;
pub mod import_agent;
pub mod import_claude;
pub mod import_codex;
pub mod import_gemini;
pub mod import_opencode;
pub mod import_opencode_storage;
pub mod inspect;
pub mod list;
pub mod migrate;
pub mod parquet;
pub mod query;
pub mod search;
pub mod show;
pub mod stats;
pub mod store;
pub mod upgrade;
pub mod verify;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: SessionsCommand,
    #[command(flatten)]
    pub store: store::StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Print what the engine makes of a session file (tree, branch, context) as JSON.
    Inspect(inspect::InspectArgs),
    /// Print the session tree for a person: roles, first lines, labels, the active path.
    Show(show::ShowArgs),
    /// Report every problem of session files (malformed lines, orphans, cycles, …).
    Verify(verify::VerifyArgs),
    /// Migrate a version 1 or 2 session file to version 3 (original kept as a backup).
    Upgrade(upgrade::UpgradeArgs),
    /// Full-text search over every session (ranked; refreshes the history index first).
    Search(search::SearchArgs),
    /// Sessions, messages, tool calls, errors, tokens and cost, optionally grouped.
    Stats(stats::StatsArgs),
    /// One read-only SQL SELECT over the history's views (see docs/history-sql.md).
    Query(query::QueryArgs),
    /// List sessions, newest first, with name, first message and counts.
    List(list::ListArgs),
    /// Export a session as JSONL, a self-contained HTML page, Markdown, a Claude Code transcript
    /// or a Codex rollout, or (`--format parquet -o DIR`) every session's SQL views as Parquet
    /// files.
    Export(export::ExportArgs),
    /// Import Pi session files (any version), Claude Code transcripts (`--from claude-code`) or
    /// Codex rollouts (`--from codex`) into the session store.
    Import(import::ImportArgs),
    /// Copy every session from one store to another, verified and idempotent.
    Migrate(migrate::MigrateArgs),
}

/// Dispatches a `pi sessions` subcommand; returns the exit code.
pub fn run(args: SessionsArgs) -> anyhow::Result<i32> {
    match args.command {
        SessionsCommand::Inspect(a) => inspect::run(a, &args.store),
        SessionsCommand::Show(args) => show::run(args),
        SessionsCommand::Verify(args) => verify::run(args),
        SessionsCommand::Upgrade(args) => upgrade::run(args),
        SessionsCommand::Search(a) => search::run(a, &args.store),
        SessionsCommand::Stats(a) => stats::run(a, &args.store),
        SessionsCommand::Query(a) => query::run(a, &args.store),
        SessionsCommand::List(list) => list::run(list, &args.store),
        SessionsCommand::Export(export) => export::run(export, &args.store),
        SessionsCommand::Import(import) => import::run(import, &args.store),
        SessionsCommand::Migrate(migrate) => migrate::run(migrate, &args.store),
    }
}
