//! `pi sessions list`: the sessions of this directory (or all), newest first.
//!
//! Summaries follow Pi 1.6's `buildSessionInfo` rules (`pi_storage::summary`), so a session Pi
//! would not list is not listed here either. For JSONL stores they are read from the history
//! index (`pi_storage::history`), whose summary rows are brought up to date first and alone:
//! files unchanged since the last listing are not opened, a grown file is read from where the
//! last listing stopped, and no text is indexed on the way (`pi sessions search` does that).
//! When the index cannot be used (an unwritable agent dir, a database error) the store lists
//! the files itself, with the same result.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use clap::Args;
use pi_formats::time::iso_from_millis;
use pi_storage::history::HistorySource;
use pi_storage::paths::resolve_cwd;
use pi_storage::store::SessionStore;
use pi_storage::{ListScope, SessionSummary, StoreOptions, StoreSpec};
use serde_json::json;

use super::store::StoreArgs;
use crate::visible::visible_line;

#[derive(Debug, Args)]
pub struct ListArgs {
    /// List the sessions of every directory.
    #[arg(long, conflicts_with = "cwd")]
    pub all: bool,
    /// List the sessions of this directory instead of the current one.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Print a JSON array instead of a table.
    #[arg(long, conflicts_with = "jsonl")]
    pub json: bool,
    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    pub jsonl: bool,
    /// Show at most N sessions (the newest).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// The sessions in scope, newest first: from the history index for JSONL stores, else (or
/// when the index cannot be used) from the store.
pub fn list_sessions(
    store: &dyn SessionStore,
    spec: &StoreSpec,
    options: &StoreOptions,
    scope: &ListScope,
) -> pi_storage::StoreResult<Vec<SessionSummary>> {
    if let Some(list) = list_from_index(store, spec, options, scope) {
        return Ok(list);
    }
    store.list_sessions(scope)
}

fn list_from_index(
    store: &dyn SessionStore,
    spec: &StoreSpec,
    options: &StoreOptions,
    scope: &ListScope,
) -> Option<Vec<SessionSummary>> {
    if !matches!(spec, StoreSpec::Jsonl(_)) {
        // Database stores keep per-session summaries themselves; listing reads no entries.
        return None;
    }
    let source = HistorySource::open(spec, options).ok()?;
    // Only the index of this very store.
    if source.store().describe() != store.describe() {
        return None;
    }
    let path = source.index_path(spec, options);
    let (index, _) = source.open_index_for_listing(&path).ok()?;
    index.sessions(scope, source.layout()).ok()
}

/// `/resume`'s list: every session of `store`, through the history index of the store the
/// environment and settings name when `store` is that one.
pub fn list_all_for_resume(
    store: &dyn SessionStore,
) -> pi_storage::StoreResult<Vec<SessionSummary>> {
    match StoreArgs::default().resolve() {
        Ok(resolved) => list_sessions(store, &resolved.spec, &resolved.options, &ListScope::All),
        Err(_) => store.list_sessions(&ListScope::All),
    }
}

pub fn run(args: ListArgs, store_args: &StoreArgs) -> anyhow::Result<i32> {
    let resolved = store_args.resolve()?;
    let store = super::store::open_spec(&resolved.spec, &resolved.options)?;
    let scope = if args.all {
        ListScope::All
    } else {
        let dir = match &args.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir()
                .context("cannot read the current directory")?
                .to_string_lossy()
                .into_owned(),
        };
        ListScope::Cwd(resolve_cwd(&dir))
    };
    let mut sessions = list_sessions(store.as_ref(), &resolved.spec, &resolved.options, &scope)
        .with_context(|| format!("cannot list sessions of {}", store.describe()))?;
    if let Some(limit) = args.limit {
        sessions.truncate(limit);
    }

    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // Terminal tables show short ids; they must stay usable as arguments, so each is as long
    // as the longest prefix needed to tell the listed ids from every id in the store (time-
    // ordered UUIDv7 ids often share their first 8 characters).
    let id_len = if terminal && !args.json && !args.jsonl {
        let all = store.session_ids().unwrap_or_default();
        unique_prefix_len(&sessions, &all)
    } else {
        usize::MAX
    };
    let written = write_list(&args, &sessions, id_len, &mut out).and_then(|()| {
        if sessions.is_empty() && terminal && !args.json && !args.jsonl {
            writeln!(out, "no sessions in {}", store.describe())?;
        }
        out.flush()
    });
    match written {
        // `pi sessions list | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.context("cannot write to stdout")?,
    }
    Ok(0)
}

fn write_list(
    args: &ListArgs,
    sessions: &[SessionSummary],
    id_len: usize,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if args.json {
        let list: Vec<_> = sessions.iter().map(to_json).collect();
        serde_json::to_writer_pretty(&mut *out, &list)?;
        writeln!(out)
    } else if args.jsonl {
        for s in sessions {
            serde_json::to_writer(&mut *out, &to_json(s))?;
            writeln!(out)?;
        }
        Ok(())
    } else {
        write_table(sessions, id_len, out)
    }
}

/// Pi's field names (camelCase), times as ISO strings.
fn to_json(s: &SessionSummary) -> serde_json::Value {
    json!({
        "id": s.id,
        "name": s.name,
        "firstMessage": s.first_message,
        "cwd": s.cwd,
        "created": s.created_ms.map(iso_from_millis),
        "modified": iso_from_millis(s.modified_ms),
        "messageCount": s.message_count,
        "entryCount": s.entry_count,
        "parentSession": s.parent_session,
        "path": s.location,
    })
}

/// A table for people. On a terminal (`id_len` < MAX) ids are shortened to unique prefixes
/// and the text is cut to the terminal width; piped output keeps the whole id and text,
/// tab-separated, so scripts can use it.
fn write_table(
    sessions: &[SessionSummary],
    id_len: usize,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if id_len == usize::MAX {
        for s in sessions {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                visible_line(s.id.as_str()),
                human_time(s.modified_ms),
                s.message_count,
                s.entry_count,
                flat(&describe(s))
            )?;
        }
        return Ok(());
    }
    let width = terminal_width().max(60);
    writeln!(
        out,
        "{:<id_len$}  {:<16}  {:>5}  {:>6}  SESSION",
        "ID", "MODIFIED", "MSGS", "ENTRIES"
    )?;
    for s in sessions {
        let id: String = visible_line(s.id.as_str()).chars().take(id_len).collect();
        let text = flat(&describe(s));
        let room = width.saturating_sub(id_len + 2 + 16 + 2 + 5 + 2 + 6 + 2);
        writeln!(
            out,
            "{id:<id_len$}  {:<16}  {:>5}  {:>6}  {}",
            human_time(s.modified_ms),
            s.message_count,
            s.entry_count,
            cut(&text, room)
        )?;
    }
    Ok(())
}

/// The name if there is one, with the first message after it; Pi shows "(no messages)".
fn describe(s: &SessionSummary) -> String {
    let first = s.first_message.as_deref().unwrap_or("(no messages)");
    match &s.name {
        Some(name) => format!("{name} — {first}"),
        None => first.to_string(),
    }
}

/// `YYYY-MM-DD HH:MM` (UTC).
fn human_time(ms: i64) -> String {
    let iso = iso_from_millis(ms);
    let date = iso.get(..10).unwrap_or(&iso);
    let time = iso.get(11..16).unwrap_or("");
    format!("{date} {time}")
}

/// One line for a person: whitespace runs folded, control characters shown.
fn flat(text: &str) -> String {
    visible_line(&text.split_whitespace().collect::<Vec<_>>().join(" ")).into_owned()
}

/// Cuts to `max` terminal columns (wide characters count two), ending in `…` when cut.
fn cut(text: &str, max: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    if unicode_width::UnicodeWidthStr::width(text) <= max {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// The shortest prefix length (at least 8 characters) that tells each listed id apart from
/// every other id in `all`.
fn unique_prefix_len(listed: &[SessionSummary], all: &[pi_storage::SessionId]) -> usize {
    let mut sorted: Vec<&str> = all.iter().map(|i| i.as_str()).collect();
    sorted.sort_unstable();
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let mut len = 8;
    for s in listed {
        let id = s.id.as_str();
        let at = sorted.partition_point(|other| *other < id);
        let neighbours = [at.checked_sub(1), Some(at), Some(at + 1)];
        for other in neighbours
            .into_iter()
            .flatten()
            .filter_map(|i| sorted.get(i))
        {
            if *other != id {
                len = len.max((common(id, other) + 1).min(id.chars().count()));
            }
        }
    }
    len
}

/// `COLUMNS` when set (what the user asked for), else the terminal's width.
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(|| crossterm::terminal::size().ok().map(|(w, _)| w as usize))
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_by_terminal_columns() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("abcdefghij", 5), "abcd…");
        // Each CJK character takes two columns.
        assert_eq!(cut("漢字漢字漢字", 7), "漢字漢…");
        assert_eq!(human_time(1_767_225_630_000), "2026-01-01 00:00");
    }

    #[test]
    fn short_ids_stay_unique_in_the_store() {
        let summary = |id: &str| SessionSummary {
            id: id.into(),
            location: String::new(),
            cwd: String::new(),
            name: None,
            parent_session: None,
            created_ms: None,
            modified_ms: 0,
            entry_count: 0,
            message_count: 0,
            first_message: None,
        };
        let all: Vec<pi_storage::SessionId> = ["01a22cb8-12e9", "01a22cb8-1bf9", "ffff0000-0000"]
            .into_iter()
            .map(Into::into)
            .collect();
        // The second id is not listed but still counts.
        assert_eq!(unique_prefix_len(&[summary("01a22cb8-12e9")], &all), 11);
        assert_eq!(unique_prefix_len(&[summary("ffff0000-0000")], &all), 8);
    }
}
