//! `pi sessions search QUERY`: ranked full-text search over every session of the store,
//! answered from the history index (`pi_storage::history`), which is brought up to date
//! first (incrementally: only files that changed are read, only from where they grew). A
//! PostgreSQL store answers on the server instead (`PostgresStore::search`), with the same
//! hits.

use std::io::{IsTerminal, Write};

use anyhow::{anyhow, bail, Context as _};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pi_storage::history::{HistoryIndex, HistorySource, Progress, SearchHit, SearchQuery};
use pi_storage::{PostgresStore, StoreOptions, StoreSpec};

use super::store::StoreArgs;
use crate::visible::visible_line;

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Words to find (all of them), "a phrase", prefix*, or a OR b.
    #[arg(required = true, num_args = 1..)]
    pub query: Vec<String>,
    /// Only sessions started in this directory.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Only text of this role.
    #[arg(long, value_parser = ["user", "assistant", "tool", "bash", "summary", "custom"])]
    pub role: Option<String>,
    /// Only entries from this time on: YYYY-MM-DD, an ISO time, or 7d / 12h / 2w ago.
    #[arg(long)]
    pub since: Option<String>,
    /// Only entries before this time (a date includes its whole day).
    #[arg(long)]
    pub until: Option<String>,
    /// Only entries of this model (`id` or `provider/id`).
    #[arg(long)]
    pub model: Option<String>,
    /// Only the session whose id starts with this.
    #[arg(long)]
    pub session: Option<String>,
    /// At most this many hits.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print hits as JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// Opens the history index of a store, brought up to date (incrementally).
pub fn open_index(spec: &StoreSpec, options: &StoreOptions) -> anyhow::Result<HistoryIndex> {
    let source = HistorySource::open(spec, options).map_err(|e| anyhow!("{e}"))?;
    let path = source.index_path(spec, options);
    // The first build reads every session once, which can take a while on a big history:
    // say so before, and what it did after, so a silent wait is not mistaken for a hang.
    let first_build = !path.exists();
    if first_build {
        eprintln!(
            "pi: building the history index {} (first use: every session is read once)…",
            path.display()
        );
    }
    let started = std::time::Instant::now();
    let bar = std::io::stderr().is_terminal().then(progress_bar);
    let progress = bar.clone().map(|bar| {
        Progress::new(move |done, total| {
            // A refresh of a few files ends before a bar would be read.
            if total >= BAR_FROM_BYTES {
                bar.set_length(total);
                bar.set_position(done);
            }
        })
    });
    let opened = source
        .open_index_reporting(&path, progress)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("history index {}", path.display()));
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let (index, report) = opened?;
    if let Some(why) = index.rebuilt() {
        eprintln!("pi: history index {} rebuilt ({why})", path.display());
    }
    if first_build || index.rebuilt().is_some() {
        eprintln!(
            "pi: indexed {} session(s), {} line(s), {:.1} MB in {:.1} s",
            report.sessions_updated,
            report.lines_read,
            report.bytes_read as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(index)
}

/// Bytes to read from which a refresh shows a progress bar on a terminal.
const BAR_FROM_BYTES: u64 = 16 << 20;

/// The bar a long refresh draws on standard error: bytes read of bytes to read, the rate
/// and the time left. Nothing is drawn until it has a length.
fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec}, {eta} left",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

pub fn run(args: SearchArgs, store: &StoreArgs) -> anyhow::Result<i32> {
    let tty = std::io::stdout().is_terminal() && !args.json;
    let mut query = SearchQuery::new(&args.query.join(" "));
    query.cwd = args.cwd.clone();
    query.role = args.role.clone();
    query.since_ms = args
        .since
        .as_deref()
        .map(|s| parse_time(s, false))
        .transpose()?;
    query.until_ms = args
        .until
        .as_deref()
        .map(|s| parse_time(s, true))
        .transpose()?;
    query.model = args.model.clone();
    query.session = args.session.clone();
    query.limit = args.limit;
    if tty {
        // Marks the index puts around matches; turned into colour only after the snippet's
        // own control characters were made visible (see `write_hit`).
        query.highlight = (MATCH_START.into(), MATCH_END.into());
    }
    let store = store.resolve()?;
    let hits = match &store.spec {
        // The server searches its own table: nothing is read back or indexed here.
        StoreSpec::Postgres(url) => PostgresStore::open(url, store.options.fsync)
            .and_then(|pg| pg.search(&query))
            .map_err(|e| anyhow!("{e}"))?,
        _ => open_index(&store.spec, &store.options)?
            .search(&query)
            .map_err(|e| anyhow!("{e}"))?,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        for hit in &hits {
            let mut value = serde_json::to_value(hit)?;
            value["open"] = open_command(hit).into();
            writeln!(out, "{value}")?;
        }
    } else if hits.is_empty() {
        writeln!(out, "No matches.")?;
    } else {
        for (i, hit) in hits.iter().enumerate() {
            write_hit(&mut out, i + 1, hit, tty)?;
        }
    }
    out.flush()?;
    // Like grep: 1 when nothing matched.
    Ok(if hits.is_empty() { 1 } else { 0 })
}

/// Private-use characters marking matches in terminal snippets. Session text holding them
/// gets a harmless highlight at worst; it can never smuggle an escape sequence through.
const MATCH_START: &str = "\u{E000}";
const MATCH_END: &str = "\u{E001}";

fn write_hit(out: &mut impl Write, n: usize, hit: &SearchHit, tty: bool) -> std::io::Result<()> {
    let (dim, reset) = if tty {
        ("\x1b[2m", "\x1b[0m")
    } else {
        ("", "")
    };
    let time = hit
        .timestamp_ms
        .map(|t| {
            let iso = pi_formats::time::iso_from_millis(t);
            format!("{} {}", &iso[..10], &iso[11..16])
        })
        .unwrap_or_else(|| "-".into());
    let what = match (&hit.tool_name, hit.kind.as_str()) {
        (Some(tool), "tool_call") => format!("{} → {tool}()", hit.role),
        (Some(tool), _) => format!("{} {tool}", hit.role),
        (None, "thinking") => format!("{} (thinking)", hit.role),
        (None, _) => hit.role.clone(),
    };
    let session: String = hit.session_id.chars().take(8).collect();
    let place = format!(
        "session {session} entry {} {}",
        hit.entry_id.as_deref().unwrap_or("-"),
        hit.cwd
    );
    writeln!(
        out,
        "{n:>3}. {time}  {}  {dim}{}{reset}",
        visible_line(&what),
        visible_line(&place)
    )?;
    let mut snippet = visible_line(hit.snippet.trim()).into_owned();
    if tty {
        snippet = snippet
            .replace(MATCH_START, "\x1b[1;33m")
            .replace(MATCH_END, "\x1b[0m");
    }
    writeln!(out, "     {snippet}")?;
    writeln!(out, "     {dim}{}{reset}", visible_line(&open_command(hit)))
}

/// The command that opens a hit: the session tree with the entry's branch marked.
fn open_command(hit: &SearchHit) -> String {
    match &hit.entry_id {
        Some(entry) => format!(
            "pi sessions show {} --at {entry}",
            shell_word(&hit.location)
        ),
        None => format!("pi sessions show {}", shell_word(&hit.location)),
    }
}

fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@%,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A time given on the command line, in ms since the epoch: an ISO date or time, or an
/// amount before now (`30m`, `12h`, `7d`, `2w`). With `end_of_day`, a bare date means the
/// end of that day (for `--until`, which is exclusive).
pub fn parse_time(text: &str, end_of_day: bool) -> anyhow::Result<i64> {
    let text = text.trim();
    if let Some(split) = text.find(|c: char| !c.is_ascii_digit()) {
        let (n, unit) = text.split_at(split);
        let unit_ms: Option<i64> = match unit {
            "m" | "min" => Some(60_000),
            "h" => Some(3_600_000),
            "d" => Some(86_400_000),
            "w" => Some(7 * 86_400_000),
            _ => None,
        };
        if let (Ok(n), Some(unit_ms)) = (n.parse::<i64>(), unit_ms) {
            return Ok(pi_formats::time::now_millis() - n.saturating_mul(unit_ms));
        }
    }
    let Some(ms) = pi_formats::time::parse_millis(text) else {
        bail!("cannot read the time {text:?}: use YYYY-MM-DD, an ISO time, or 7d / 12h / 2w");
    };
    let is_date = text.len() == 10;
    Ok(ms as i64 + if end_of_day && is_date { 86_400_000 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time("1970-01-02", false).unwrap(), 86_400_000);
        assert_eq!(parse_time("1970-01-02", true).unwrap(), 2 * 86_400_000);
        let week = parse_time("1w", false).unwrap();
        assert!((pi_formats::time::now_millis() - week - 7 * 86_400_000).abs() < 10_000);
        assert!(parse_time("yesterday", false).is_err());
        assert_eq!(shell_word("/a b/c'd"), r"'/a b/c'\''d'");
    }
}
