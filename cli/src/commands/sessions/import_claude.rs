//! `pi sessions import --from claude-code [PATH…|--all]`: Claude Code transcripts into the
//! current store.
//!
//! This file finds the transcripts, reads them with their subagent files, prices the
//! responses from the built-in model catalog and writes the result through the store; the
//! record mapping itself is `pi_formats::import::claude_code`. The session id is Claude Code's,
//! and the lines are the same for the same source, so a second import is `skipped` and a
//! transcript that grew gets only its new lines.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pi_agent::llm::{builtin_models, calculate_cost, find_model};
use pi_formats::import::{claude_code, Converted, SourceFile};
use pi_formats::message::Usage;
use pi_storage::transfer::put_session;
use pi_storage::{CopyAction, SessionData, SessionHeader, StoredEntry};

use super::import::collect_files;
use super::store::StoreArgs;
use crate::visible::visible_line;

pub fn run(paths: &[PathBuf], all: bool, store_args: &StoreArgs) -> anyhow::Result<i32> {
    let store = store_args.open()?;
    let roots = if all {
        vec![projects_dir()?]
    } else {
        paths.to_vec()
    };
    let files: Vec<PathBuf> = collect_files(&roots)?
        .into_iter()
        .filter(|f| !is_subagent_file(f))
        .collect();
    let models = builtin_models();
    let cost = |model: &str, usage: &mut Usage| {
        if let Some(m) = find_model(&models, "anthropic", model) {
            calculate_cost(m, usage);
        }
    };
    let bar = if std::io::stderr().is_terminal() {
        let bar =
            ProgressBar::with_draw_target(Some(files.len() as u64), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} transcripts  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let (mut created, mut appended, mut skipped, mut failed) = (0, 0, 0, 0);
    for file in &files {
        bar.set_message(file.display().to_string());
        match import_one(store.as_ref(), file, &cost) {
            Ok((converted, action)) => {
                bar.suspend(|| println!("{}", visible_line(&describe(file, &converted, &action))));
                match action {
                    CopyAction::Created { .. } => created += 1,
                    CopyAction::Appended { .. } => appended += 1,
                    CopyAction::Skipped => skipped += 1,
                    CopyAction::Conflict { .. } => failed += 1,
                }
            }
            Err(e) => {
                failed += 1;
                bar.suspend(|| eprintln!("error: {}", visible_line(&format!("{e:#}"))));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "{} Claude Code transcript(s) into {}: {created} imported, {appended} updated, \
         {skipped} already there, {failed} failed",
        files.len(),
        store.describe()
    );
    Ok(if failed > 0 { 1 } else { 0 })
}

/// Converts one transcript (with its subagent files) and writes it through the store.
fn import_one(
    store: &dyn pi_storage::SessionStore,
    file: &Path,
    cost: &dyn Fn(&str, &mut Usage),
) -> anyhow::Result<(Converted, CopyAction)> {
    let main = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut subs = Vec::new();
    for sub in subagent_files(file)? {
        let bytes =
            std::fs::read(&sub).with_context(|| format!("cannot read {}", sub.display()))?;
        subs.push((sub.display().to_string(), bytes));
    }
    let label = file.display().to_string();
    let sides: Vec<SourceFile<'_>> = subs
        .iter()
        .map(|(label, bytes)| SourceFile { label, bytes })
        .collect();
    let converted = claude_code::convert(
        SourceFile {
            label: &label,
            bytes: &main,
        },
        &sides,
        cost,
    )?;
    let header = SessionHeader::parse(converted.header.clone().into_bytes())
        .map_err(|reason| anyhow::anyhow!("{label}: cannot make a session header: {reason}"))?;
    let data = SessionData {
        header,
        entries: converted
            .lines
            .iter()
            .map(|l| StoredEntry::from_line(l.clone().into_bytes()))
            .collect(),
        torn_tail: false,
    };
    let action =
        put_session(store, &data, false).with_context(|| format!("cannot store {label}"))?;
    Ok((converted, action))
}

fn describe(file: &Path, c: &Converted, action: &CopyAction) -> String {
    let file = file.display();
    let id = &c.session_id;
    let n = &c.counts;
    let what = format!(
        "{} message(s), {} tool call(s), {} tool result(s), {} compaction(s), {} model change(s), \
         {} record(s) kept as custom entries",
        n.messages, n.tool_calls, n.tool_results, n.compactions, n.model_changes, n.custom
    );
    match action {
        CopyAction::Created { lines } => {
            format!("imported {id} from {file}: {lines} entries: {what}")
        }
        CopyAction::Appended { lines } => format!("updated {id} from {file}: {lines} new entries"),
        CopyAction::Skipped => format!("skipped {id} from {file}: already in the store"),
        CopyAction::Conflict { reason } => format!(
            "conflict: {id} from {file} differs from the stored session ({reason}); left alone"
        ),
    }
}

/// `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`.
fn projects_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => dirs_home()?.join(".claude"),
    };
    let dir = base.join("projects");
    if !dir.is_dir() {
        anyhow::bail!("no Claude Code sessions at {}", dir.display());
    }
    Ok(dir)
}

fn dirs_home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set")
}

/// Subagent transcripts are read with their session, not as sessions of their own.
fn is_subagent_file(path: &Path) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "subagents")
}

/// `<dir>/<session>/subagents/*.jsonl`, sorted.
fn subagent_files(main: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let (Some(dir), Some(stem)) = (main.parent(), main.file_stem()) else {
        return Ok(Vec::new());
    };
    let subdir = dir.join(stem).join("subagents");
    if !subdir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(&subdir).with_context(|| format!("cannot read {}", subdir.display()))?
    {
        let p = entry
            .with_context(|| format!("cannot read {}", subdir.display()))?
            .path();
        if p.extension().is_some_and(|e| e == "jsonl") && p.is_file() {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}
