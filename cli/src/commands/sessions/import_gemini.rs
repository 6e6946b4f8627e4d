//! `pi sessions import --from gemini [PATH…|--all]`: Gemini CLI chat recordings into the
//! current store.
//!
//! This file finds the recordings (`session-*.jsonl`, and the `.json` files older versions
//! wrote, under `<home>/.gemini/tmp/<project>/chats`), reads the project folder Gemini CLI
//! keeps beside them (`.project_root`), and prices the responses from the built-in model
//! catalog; `import_agent` writes the results through the store, and the record mapping
//! itself is `pi_formats::import::gemini`. The session id is Gemini's, and the lines are the
//! same for the same source, so a second import is `skipped`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use pi_agent::llm::{builtin_models, calculate_cost, find_model};
use pi_formats::import::{gemini, Converted, SourceFile};
use pi_formats::message::Usage;

use super::import::collect_files_matching;
use super::import_agent::{home_dir, import_all};
use super::store::StoreArgs;

pub fn run(paths: &[PathBuf], all: bool, store_args: &StoreArgs) -> anyhow::Result<i32> {
    let store = store_args.open()?;
    let roots = if all {
        vec![tmp_dir()?]
    } else {
        paths.to_vec()
    };
    let files = without_superseded(collect_files_matching(&roots, &is_recording)?);
    let models = builtin_models();
    let cost = |provider: &str, model: &str, usage: &mut Usage| {
        if let Some(m) = find_model(&models, provider, model) {
            calculate_cost(m, usage);
        }
    };
    Ok(import_all(
        store.as_ref(),
        &files,
        "Gemini CLI session(s)",
        &|file| convert_one(file, &cost),
    ))
}

/// A chat recording in a folder walk: `session-*.jsonl` or `session-*.json` (subagent
/// recordings, `chats/<session>/<id>.jsonl`, are not sessions of their own).
fn is_recording(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with("session-") && (name.ends_with(".jsonl") || name.ends_with(".json"))
}

/// Drops a `.json` recording when the `.jsonl` beside it exists: Gemini CLI rewrites an older
/// `.json` session to `.jsonl` when it is resumed, and goes on there.
fn without_superseded(files: Vec<PathBuf>) -> Vec<PathBuf> {
    files
        .iter()
        .filter(|f| {
            f.extension().is_none_or(|e| e != "json") || !files.contains(&f.with_extension("jsonl"))
        })
        .cloned()
        .collect()
}

fn convert_one(file: &Path, cost: &dyn Fn(&str, &str, &mut Usage)) -> anyhow::Result<Converted> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let label = file.display().to_string();
    let cwd = project_root(file);
    let source = SourceFile {
        label: &label,
        bytes: &bytes,
    };
    Ok(gemini::convert(source, cwd.as_deref(), cost)?)
}

/// The project folder of a recording: `<project>/.project_root`, beside its `chats` folder.
fn project_root(file: &Path) -> Option<String> {
    let chats = file
        .ancestors()
        .skip(1)
        .find(|d| d.file_name().is_some_and(|n| n == "chats"))?;
    let text = std::fs::read_to_string(chats.parent()?.join(".project_root")).ok()?;
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

/// `<home>/.gemini/tmp`, home being `$GEMINI_CLI_HOME` when set (as Gemini CLI reads it),
/// else `$HOME`.
fn tmp_dir() -> anyhow::Result<PathBuf> {
    let home = match std::env::var_os("GEMINI_CLI_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => home_dir()?,
    };
    let dir = home.join(".gemini").join("tmp");
    if !dir.is_dir() {
        anyhow::bail!("no Gemini CLI sessions at {}", dir.display());
    }
    Ok(dir)
}
