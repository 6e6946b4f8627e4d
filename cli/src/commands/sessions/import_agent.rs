//! What importing another agent's sessions has in common, whatever the agent: a progress bar
//! on terminals, one line per source, writing each converted session through the store (so a
//! second import is `skipped` and a source that grew gets only its new lines), the summary and
//! the exit code. The agent-specific parts (finding the files, reading them, the mapping)
//! are `import_claude`, `import_codex` and `import_gemini`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pi_formats::import::Converted;
use pi_storage::transfer::put_session;
use pi_storage::{CopyAction, SessionData, SessionHeader, SessionStore, StoredEntry};

use crate::visible::visible_line;

/// Converts each file with `convert` and stores the result; `noun` names the sources in the
/// progress bar and the summary ("Claude Code transcript(s)"). Returns the exit code: 1 if any
/// source failed or conflicted.
pub(super) fn import_all(
    store: &dyn SessionStore,
    files: &[PathBuf],
    noun: &str,
    convert: &dyn Fn(&Path) -> anyhow::Result<Converted>,
) -> i32 {
    let bar = progress_bar(files.len(), noun);
    let (mut created, mut appended, mut skipped, mut failed) = (0, 0, 0, 0);
    for file in files {
        bar.set_message(file.display().to_string());
        match convert(file).and_then(|c| store_converted(store, &c, file).map(|a| (c, a))) {
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
        "{} {noun} into {}: {created} imported, {appended} updated, {skipped} already there, \
         {failed} failed",
        files.len(),
        store.describe()
    );
    if failed > 0 {
        1
    } else {
        0
    }
}

fn progress_bar(len: usize, noun: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    let template = format!("{{bar:30}} {{pos}}/{{len}} {noun}  {{msg}}");
    bar.set_style(
        ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Writes a converted session through the store (read back and compared, like `import`).
fn store_converted(
    store: &dyn SessionStore,
    converted: &Converted,
    file: &Path,
) -> anyhow::Result<CopyAction> {
    let label = file.display();
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
    put_session(store, &data, false).with_context(|| format!("cannot store {label}"))
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

/// `$HOME`.
pub(super) fn home_dir() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set")
}
