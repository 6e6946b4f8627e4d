//! `pi sessions stats`: sessions, messages, tool calls and errors, tokens and cost over the
//! whole history, optionally grouped, from the history index (refreshed first).

use std::io::{IsTerminal, Write};

use anyhow::anyhow;
use clap::{Args, ValueEnum};
use pi_storage::history::{GroupBy, Stats, StatsQuery, StatsRow};

use super::search::{open_index, parse_time};
use super::store::StoreArgs;
use crate::visible::visible_line;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    Day,
    Week,
    Model,
    Provider,
    Cwd,
    Tool,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Group the figures.
    #[arg(long, value_enum)]
    pub by: Option<By>,
    /// Only entries from this time on: YYYY-MM-DD, an ISO time, or 7d / 12h / 2w ago.
    #[arg(long)]
    pub since: Option<String>,
    /// Only entries before this time (a date includes its whole day).
    #[arg(long)]
    pub until: Option<String>,
    /// Only sessions started in this directory.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: StatsArgs, store: &StoreArgs) -> anyhow::Result<i32> {
    let query = StatsQuery {
        group: args.by.map(|b| match b {
            By::Day => GroupBy::Day,
            By::Week => GroupBy::Week,
            By::Model => GroupBy::Model,
            By::Provider => GroupBy::Provider,
            By::Cwd => GroupBy::Cwd,
            By::Tool => GroupBy::Tool,
        }),
        since_ms: args
            .since
            .as_deref()
            .map(|s| parse_time(s, false))
            .transpose()?,
        until_ms: args
            .until
            .as_deref()
            .map(|s| parse_time(s, true))
            .transpose()?,
        cwd: args.cwd.clone(),
    };
    let store = store.resolve()?;
    let index = open_index(&store.spec, &store.options)?;
    let stats = index.stats(&query).map_err(|e| anyhow!("{e}"))?;
    let stdout = std::io::stdout();
    let tty = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &stats)?;
        writeln!(out)?;
    } else {
        write_text(&mut out, &stats, args.by, tty)?;
    }
    out.flush()?;
    Ok(0)
}

fn write_text(
    out: &mut impl Write,
    stats: &Stats,
    by: Option<By>,
    tty: bool,
) -> std::io::Result<()> {
    let t = &stats.total;
    writeln!(
        out,
        "Sessions {}  Messages {}  Tool calls {} ({} failed)  Assistant errors {}",
        t.sessions, t.messages, t.tool_calls, t.tool_errors, t.errors
    )?;
    writeln!(
        out,
        "Tokens   input {}  output {}  cache read {}  cache write {}",
        human(t.input),
        human(t.output),
        human(t.cache_read),
        human(t.cache_write)
    )?;
    writeln!(out, "Cost     ${:.2}", t.cost)?;
    let Some(by) = by else {
        return Ok(());
    };
    if stats.groups.is_empty() {
        return writeln!(out, "\nNothing to group.");
    }
    // The bar shows what the grouping is most about: tool calls per tool, else cost when
    // there is any, else tokens.
    let (label, measure): (&str, fn(&StatsRow) -> f64) = if by == By::Tool {
        ("tool calls", |r| r.tool_calls as f64)
    } else if stats.groups.iter().any(|r| r.cost > 0.0) {
        ("cost", |r| r.cost)
    } else {
        ("tokens", |r| {
            (r.input + r.output + r.cache_read + r.cache_write) as f64
        })
    };
    let max = stats.groups.iter().map(measure).fold(0.0, f64::max);
    let key_width = stats
        .groups
        .iter()
        .map(|r| r.key.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 40);
    if tty {
        writeln!(out, "\nBy {by:?} (bar: {label})")?;
    } else {
        writeln!(out, "\nBy {by:?}")?;
    }
    for r in &stats.groups {
        let key: String = visible_line(&r.key).chars().take(key_width).collect();
        // Bars only on a terminal; piped output keeps plain columns.
        let bar = if tty {
            format!("{:<24}  ", bar(measure(r), max, 24))
        } else {
            String::new()
        };
        let figures = if by == By::Tool {
            format!("{:>6} calls {:>5} failed", r.tool_calls, r.tool_errors)
        } else {
            format!(
                "{:>5} sess {:>7} msgs {:>8} tok {:>9}",
                r.sessions,
                r.messages,
                human(r.input + r.output + r.cache_read + r.cache_write),
                format!("${:.2}", r.cost)
            )
        };
        writeln!(out, "{key:<key_width$}  {bar}{figures}")?;
    }
    Ok(())
}

/// A bar of `width` cells for `value` out of `max`, in eighths.
fn bar(value: f64, max: f64, width: usize) -> String {
    if max <= 0.0 || value <= 0.0 {
        return String::new();
    }
    let eighths = ((value / max) * (width * 8) as f64).round().max(1.0) as usize;
    let mut s = "█".repeat(eighths / 8);
    const PARTS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    s.push_str(PARTS[eighths % 8]);
    s
}

/// 1234 → 1.2k, 1234567 → 1.2M.
fn human(n: i64) -> String {
    let f = n as f64;
    if f.abs() >= 1e9 {
        format!("{:.1}G", f / 1e9)
    } else if f.abs() >= 1e6 {
        format!("{:.1}M", f / 1e6)
    } else if f.abs() >= 1e4 {
        format!("{:.1}k", f / 1e3)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_numbers() {
        assert_eq!(bar(1.0, 1.0, 3), "███");
        assert_eq!(bar(0.5, 1.0, 3), "█▌");
        assert_eq!(bar(0.0, 1.0, 3), "");
        assert_eq!(human(1234), "1234");
        assert_eq!(human(123_456), "123.5k");
        assert_eq!(human(2_500_000), "2.5M");
    }
}
