//! `pi sessions query "SELECT …"`: one read-only SQL statement over the history's views
//! (`docs/history-sql.md`), printed as a table, tab-separated lines, JSON or CSV.
//!
//! The index is refreshed first, as for `search` and `stats`; the statement then runs on a
//! read-only connection of its own (`pi_storage::history::HistorySql`), which refuses
//! anything but reading the views.

use std::io::{IsTerminal, Write};

use clap::Args;
use pi_storage::history::{HistorySql, QueryError, SqlValue};
use unicode_width::UnicodeWidthStr;

use super::search::open_index;
use super::store::StoreArgs;
use crate::visible::visible_line;

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// One SELECT statement over the views sessions, entries, messages, usage, tool_calls.
    #[arg(value_name = "SQL")]
    pub sql: String,
    /// Print a JSON array of objects (one per row, keys in column order).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV (RFC 4180) with a header line.
    #[arg(long)]
    pub csv: bool,
}

/// Widest a table cell gets on a terminal; longer values are cut with `…`.
const MAX_CELL_WIDTH: usize = 60;

pub fn run(args: QueryArgs, store: &StoreArgs) -> anyhow::Result<i32> {
    let store = store.resolve()?;
    // Kept open while the query runs: its connection keeps the index's WAL files in place
    // for the read-only one.
    let index = open_index(&store.spec, &store.options)?;
    let stdout = std::io::stdout();
    let tty = stdout.is_terminal();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let format = if args.json {
        Format::Json
    } else if args.csv {
        Format::Csv
    } else if tty {
        Format::Table
    } else {
        Format::Tsv
    };
    let result = HistorySql::open(index.path()).and_then(|sql| {
        let mut query = sql.prepare(&args.sql)?;
        let columns = query.columns.clone();
        write_rows(&mut out, format, &columns, |each| query.for_each(each))?;
        out.flush()?;
        Ok(())
    });
    match result {
        Ok(()) => Ok(0),
        // `pi sessions query … | head` is not an error.
        Err(QueryError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => {
            drop(out);
            eprintln!("pi sessions query: {}", visible_line(&e.to_string()));
            Ok(1)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Table,
    Tsv,
    Json,
    Csv,
}

type EachRow<'a> = &'a mut dyn FnMut(&[SqlValue]) -> std::io::Result<()>;

/// Writes the rows `run` produces. JSON, CSV and tab-separated output stream row by row;
/// the table needs every row first for its column widths.
fn write_rows(
    out: &mut impl Write,
    format: Format,
    columns: &[String],
    run: impl FnOnce(EachRow<'_>) -> Result<(), QueryError>,
) -> Result<(), QueryError> {
    match format {
        Format::Json => {
            let mut first = true;
            out.write_all(b"[")?;
            run(&mut |row| {
                let object: serde_json::Map<String, serde_json::Value> = columns
                    .iter()
                    .cloned()
                    .zip(row.iter().map(json_value))
                    .collect();
                out.write_all(if first { b"\n  " } else { b",\n  " })?;
                first = false;
                serde_json::to_writer(&mut *out, &object)?;
                Ok(())
            })?;
            out.write_all(if first { b"]\n" } else { b"\n]\n" })?;
        }
        Format::Csv => {
            let line = |cells: Vec<String>| {
                let quoted: Vec<String> = cells.iter().map(|c| csv_field(c)).collect();
                format!("{}\r\n", quoted.join(","))
            };
            out.write_all(line(columns.to_vec()).as_bytes())?;
            run(&mut |row| out.write_all(line(row.iter().map(text_of).collect()).as_bytes()))?;
        }
        Format::Tsv => {
            let line = |cells: Vec<String>| {
                let shown: Vec<String> = cells.iter().map(|c| visible_line(c).into()).collect();
                format!("{}\n", shown.join("\t"))
            };
            out.write_all(line(columns.to_vec()).as_bytes())?;
            run(&mut |row| out.write_all(line(row.iter().map(text_of).collect()).as_bytes()))?;
        }
        Format::Table => {
            let mut rows: Vec<Vec<(String, bool)>> = Vec::new();
            run(&mut |row| {
                rows.push(
                    row.iter()
                        .map(|v| {
                            let numeric = matches!(v, SqlValue::Integer(_) | SqlValue::Real(_));
                            (cell(&text_of(v)), numeric)
                        })
                        .collect(),
                );
                Ok(())
            })?;
            write_table(out, columns, &rows)?;
        }
    }
    Ok(())
}

/// A value as one visible line, cut to [`MAX_CELL_WIDTH`].
fn cell(text: &str) -> String {
    let shown = visible_line(text);
    if shown.width() <= MAX_CELL_WIDTH {
        return shown.into_owned();
    }
    let mut cut = String::new();
    for c in shown.chars() {
        if cut.width() + 1 >= MAX_CELL_WIDTH {
            break;
        }
        cut.push(c);
    }
    cut.push('…');
    cut
}

fn write_table(
    out: &mut impl Write,
    columns: &[String],
    rows: &[Vec<(String, bool)>],
) -> std::io::Result<()> {
    let header: Vec<String> = columns.iter().map(|c| cell(c)).collect();
    let widths: Vec<usize> = header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            rows.iter()
                .map(|r| r[i].0.width())
                .chain([h.width()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let pad = |text: &str, width: usize, right: bool| {
        let fill = " ".repeat(width.saturating_sub(text.width()));
        if right {
            format!("{fill}{text}")
        } else {
            format!("{text}{fill}")
        }
    };
    let line: Vec<String> = header
        .iter()
        .zip(&widths)
        .map(|(h, &w)| pad(h, w, false))
        .collect();
    writeln!(out, "{}", line.join("  ").trim_end())?;
    let rule: Vec<String> = widths.iter().map(|&w| "─".repeat(w)).collect();
    writeln!(out, "{}", rule.join("  "))?;
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|((text, numeric), &w)| pad(text, w, *numeric))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    writeln!(
        out,
        "({} row{})",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    )
}

/// A value as text: NULL is empty, blobs are hex.
fn text_of(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => String::new(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => f.to_string(),
        SqlValue::Text(s) => s.clone(),
        SqlValue::Blob(b) => hex(b),
    }
}

fn json_value(v: &SqlValue) -> serde_json::Value {
    match v {
        SqlValue::Null => serde_json::Value::Null,
        SqlValue::Integer(i) => (*i).into(),
        // Non-finite numbers have no JSON form: null.
        SqlValue::Real(f) => {
            serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, Into::into)
        }
        SqlValue::Text(s) => s.clone().into(),
        SqlValue::Blob(b) => hex(b).into(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One CSV field, quoted when it holds a comma, quote or line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_and_cells() {
        assert_eq!(csv_field("a"), "a");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\"\n"), "\"say \"\"hi\"\"\n\"");
        assert_eq!(cell("a\u{1b}[2Jb"), "a^[[2Jb");
        assert_eq!(cell(&"x".repeat(100)).width(), MAX_CELL_WIDTH);
        assert_eq!(
            json_value(&SqlValue::Real(f64::NAN)),
            serde_json::Value::Null
        );
    }

    #[test]
    fn a_table_aligns_numbers_right() {
        let mut out = Vec::new();
        let columns = vec!["model".to_string(), "cost".to_string()];
        write_rows(&mut out, Format::Table, &columns, |each| {
            each(&[SqlValue::Text("m".into()), SqlValue::Real(1.5)])?;
            each(&[SqlValue::Text("long-model".into()), SqlValue::Integer(10)])?;
            Ok(())
        })
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "model       cost\n──────────  ────\nm            1.5\nlong-model    10\n(2 rows)\n"
        );
    }
}
