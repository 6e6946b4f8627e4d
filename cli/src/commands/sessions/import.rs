//! `pi sessions import FILE|DIR…`: Pi session files of any version into the current store.
//! With `--from claude-code`, `--from codex`, `--from gemini` or `--from opencode`, another
//! agent's sessions instead (see `import_claude`, `import_codex`, `import_gemini`,
//! `import_opencode`).
//!
//! Ids are kept. Version 1 and 2 files are migrated on the way in, as Pi migrates them on
//! load; a session the store already holds is recognised and skipped (a v3 file that grew
//! since gets only its new lines). A directory means every `.jsonl` file under it, so Pi's
//! whole `~/.pi/agent/sessions` can be imported at once.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use crate::visible::visible_line;
use pi_storage::{import_jsonl, CopyAction, ImportOutcome};

use super::store::StoreArgs;

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Session files, or directories to search for `.jsonl` files.
    #[arg(value_name = "FILE|DIR", required_unless_present = "all")]
    pub paths: Vec<PathBuf>,
    /// What wrote the files: `pi` (default), `claude-code` (Claude Code's transcripts),
    /// `codex` (Codex's rollouts), `gemini` (Gemini CLI's chat recordings) or `opencode`
    /// (OpenCode's database or `opencode export` files).
    #[arg(long, value_name = "FORMAT", default_value = "pi")]
    pub from: ImportFormat,
    /// Every session the other agent keeps (`--from claude-code`: `~/.claude/projects`, or
    /// `$CLAUDE_CONFIG_DIR/projects`; `--from codex`: `~/.codex/sessions`, or
    /// `$CODEX_HOME/sessions`, and `archived_sessions` beside it; `--from gemini`:
    /// `~/.gemini/tmp`, or `$GEMINI_CLI_HOME/.gemini/tmp`; `--from opencode`:
    /// `$XDG_DATA_HOME/opencode/opencode.db`, or `~/.local/share/opencode/opencode.db`).
    #[arg(long, conflicts_with = "paths")]
    pub all: bool,
}

/// The source formats `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportFormat {
    /// Pi session files, any version.
    Pi,
    /// Claude Code transcripts (`~/.claude/projects/*/*.jsonl`).
    ClaudeCode,
    /// Codex rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
    Codex,
    /// Gemini CLI chat recordings (`~/.gemini/tmp/<project>/chats/session-*.jsonl`).
    Gemini,
    /// OpenCode sessions (`~/.local/share/opencode/opencode.db`, or `opencode export` files).
    Opencode,
}

pub fn run(args: ImportArgs, store_args: &StoreArgs) -> anyhow::Result<i32> {
    match args.from {
        ImportFormat::ClaudeCode => {
            return super::import_claude::run(&args.paths, args.all, store_args)
        }
        ImportFormat::Codex => return super::import_codex::run(&args.paths, args.all, store_args),
        ImportFormat::Gemini => {
            return super::import_gemini::run(&args.paths, args.all, store_args)
        }
        ImportFormat::Opencode => {
            return super::import_opencode::run(&args.paths, args.all, store_args)
        }
        ImportFormat::Pi if args.all => {
            anyhow::bail!("--all needs --from claude-code, codex, gemini or opencode")
        }
        ImportFormat::Pi => {}
    }
    let store = store_args.open()?;
    let files = collect_files(&args.paths)?;
    let (mut created, mut appended, mut skipped, mut failed) = (0, 0, 0, 0);
    for file in &files {
        match import_jsonl(store.as_ref(), file) {
            Ok(outcome) => {
                println!("{}", visible_line(&describe(file, &outcome)));
                match outcome.action {
                    CopyAction::Created { .. } => created += 1,
                    CopyAction::Appended { .. } => appended += 1,
                    CopyAction::Skipped => skipped += 1,
                    CopyAction::Conflict { .. } => failed += 1,
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!(
                    "error: {}",
                    visible_line(&format!("{}: {e}", file.display()))
                );
            }
        }
    }
    println!(
        "{} file(s) into {}: {created} imported, {appended} updated, {skipped} already there, \
         {failed} failed",
        files.len(),
        store.describe()
    );
    Ok(if failed > 0 { 1 } else { 0 })
}

fn describe(file: &Path, outcome: &ImportOutcome) -> String {
    let migrated = if outcome.migrated {
        " (migrated to version 3)"
    } else {
        ""
    };
    let file = file.display();
    let id = &outcome.id;
    match &outcome.action {
        CopyAction::Created { lines } => {
            format!("imported {id} from {file}: {lines} line(s){migrated}")
        }
        CopyAction::Appended { lines } => {
            format!("updated {id} from {file}: {lines} new line(s)")
        }
        CopyAction::Skipped => format!("skipped {id} from {file}: already in the store"),
        CopyAction::Conflict { reason } => {
            format!(
                "conflict: {id} from {file} differs from the stored session ({reason}); left alone"
            )
        }
    }
}

/// Files as given, plus every `.jsonl` file under the given directories (sorted, so runs are
/// repeatable). Walked without recursion; symlinked directories are not followed, so a link
/// loop cannot trap the walk.
pub(super) fn collect_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    collect_files_matching(paths, &|p| p.extension().is_some_and(|e| e == "jsonl"))
}

/// Files as given, plus every file under the given directories that `wanted` accepts (sorted),
/// walked as [`collect_files`] walks.
pub(super) fn collect_files_matching(
    paths: &[PathBuf],
    wanted: &dyn Fn(&Path) -> bool,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        if !meta.is_dir() {
            files.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        let mut dirs = vec![path.clone()];
        while let Some(dir) = dirs.pop() {
            let entries = std::fs::read_dir(&dir)
                .with_context(|| format!("cannot read {}", dir.display()))?;
            for entry in entries {
                let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
                let kind = entry
                    .file_type()
                    .with_context(|| format!("cannot read {}", entry.path().display()))?;
                let p = entry.path();
                if kind.is_dir() {
                    dirs.push(p);
                } else if kind.is_file() && wanted(&p) {
                    found.push(p);
                }
            }
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}
