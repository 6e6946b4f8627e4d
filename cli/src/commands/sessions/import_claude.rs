//! `pi sessions import --from claude-code [PATH…|--all]`: Claude Code transcripts into the
//! current store.
//!
//! This file finds the transcripts, reads them with their subagent files and prices the
//! responses from the built-in model catalog; `import_agent` writes the results through the
//! store, and the record mapping itself is `pi_formats::import::claude_code`. The session id
//! is Claude Code's, and the lines are the same for the same source, so a second import is
//! `skipped` and a transcript that grew gets only its new lines.

use std::path::{Path, PathBuf};

use anyhow::Context;
use pi_agent::llm::{builtin_models, calculate_cost, find_model};
use pi_formats::import::{claude_code, Converted, SourceFile};
use pi_formats::message::Usage;

use super::import::collect_files;
use super::import_agent::{home_dir, import_all};
use super::store::StoreArgs;

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
    Ok(import_all(
        store.as_ref(),
        &files,
        "Claude Code transcript(s)",
        &|file| convert_one(file, &cost),
    ))
}

/// Reads one transcript with its subagent files and converts it.
fn convert_one(file: &Path, cost: &dyn Fn(&str, &mut Usage)) -> anyhow::Result<Converted> {
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
    Ok(claude_code::convert(
        SourceFile {
            label: &label,
            bytes: &main,
        },
        &sides,
        cost,
    )?)
}

/// `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`.
fn projects_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => home_dir()?.join(".claude"),
    };
    let dir = base.join("projects");
    if !dir.is_dir() {
        anyhow::bail!("no Claude Code sessions at {}", dir.display());
    }
    Ok(dir)
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
