//! `pi sessions import --from codex [PATH…|--all]`: Codex rollouts into the current store.
//!
//! This file finds the rollouts, finds the rollout a fork continues (among the files given,
//! else under the `sessions` folder the fork lives in), and prices the responses from the
//! built-in model catalog; `import_agent` writes the results through the store, and the
//! record mapping itself is `pi_formats::import::codex`. The session id is Codex's, and the
//! lines are the same for the same source, so a second import is `skipped`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use pi_agent::llm::{builtin_models, calculate_cost, find_model};
use pi_formats::import::{codex, Converted, SourceFile};
use pi_formats::message::Usage;

use super::import::collect_files;
use super::import_agent::{home_dir, import_all};
use super::store::StoreArgs;

pub fn run(paths: &[PathBuf], all: bool, store_args: &StoreArgs) -> anyhow::Result<i32> {
    let store = store_args.open()?;
    let roots = if all {
        sessions_dirs()?
    } else {
        paths.to_vec()
    };
    let files = collect_files(&roots)?;
    let by_id: HashMap<String, PathBuf> = files
        .iter()
        .filter_map(|f| Some((codex::id_from_file_name(f.to_str()?)?, f.clone())))
        .collect();
    let models = builtin_models();
    // Codex's own provider is `openai`; for another (a proxy, a gateway) the OpenAI price of
    // the same model is the best guess.
    let cost = |provider: &str, model: &str, usage: &mut Usage| {
        let known =
            find_model(&models, provider, model).or_else(|| find_model(&models, "openai", model));
        if let Some(m) = known {
            calculate_cost(m, usage);
        }
    };
    Ok(import_all(
        store.as_ref(),
        &files,
        "Codex rollout(s)",
        &|file| convert_one(file, &by_id, &cost),
    ))
}

/// Reads one rollout (and, for a fork, the rollout it continues) and converts it.
fn convert_one(
    file: &Path,
    by_id: &HashMap<String, PathBuf>,
    cost: &dyn Fn(&str, &str, &mut Usage),
) -> anyhow::Result<Converted> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let label = file.display().to_string();
    let rollout = SourceFile {
        label: &label,
        bytes: &bytes,
    };
    let parent_path = codex::forked_from(&rollout).and_then(|id| {
        by_id
            .get(&id)
            .cloned()
            .or_else(|| find_in_sessions_dir(file, &id))
    });
    let parent = match &parent_path {
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
            Some((p.display().to_string(), bytes))
        }
        None => None,
    };
    let parent = parent
        .as_ref()
        .map(|(label, bytes)| SourceFile { label, bytes });
    Ok(codex::convert(rollout, parent, cost)?)
}

/// The rollout with session id `id` under the `sessions` (or `archived_sessions`) folder that
/// holds `file`, if there is one.
fn find_in_sessions_dir(file: &Path, id: &str) -> Option<PathBuf> {
    let root = file.ancestors().skip(1).find(|d| {
        d.file_name()
            .is_some_and(|n| n == "sessions" || n == "archived_sessions")
    })?;
    let mut roots = vec![root.to_path_buf()];
    if let Some(home) = root.parent() {
        for other in ["sessions", "archived_sessions"] {
            let dir = home.join(other);
            if dir != root && dir.is_dir() {
                roots.push(dir);
            }
        }
    }
    collect_files(&roots)
        .ok()?
        .into_iter()
        .find(|f| f.to_str().and_then(codex::id_from_file_name).as_deref() == Some(id))
}

/// `$CODEX_HOME/sessions` (else `~/.codex/sessions`), and `archived_sessions` next to it when
/// it exists.
fn sessions_dirs() -> anyhow::Result<Vec<PathBuf>> {
    let base = match std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => home_dir()?.join(".codex"),
    };
    let dirs: Vec<PathBuf> = ["sessions", "archived_sessions"]
        .iter()
        .map(|d| base.join(d))
        .filter(|d| d.is_dir())
        .collect();
    if dirs.is_empty() {
        anyhow::bail!("no Codex sessions at {}", base.join("sessions").display());
    }
    Ok(dirs)
}
