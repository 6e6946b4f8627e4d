//! Searching and adding up the index.

use rusqlite::types::Value as SqlValue;
use rusqlite::OptionalExtension;
use serde::Serialize;

use super::readback::{TextPlace, TextReader};
use super::HistoryIndex;
use crate::error::{StoreError, StoreResult};
use crate::paths::resolve_cwd;

/// How many of the most recent matches are ranked when a query matches more (see `search`).
pub const RANK_WINDOW: i64 = 5_000;

/// A full-text search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// Words (all must occur), `"quoted phrases"`, `word*` prefixes; `OR`/`NOT` between
    /// terms as in FTS5. Other punctuation is searched as text, never as syntax.
    pub text: String,
    /// Only sessions whose header cwd is this directory.
    pub cwd: Option<String>,
    /// Only rows of this role: `user`, `assistant`, `tool`, `bash`, `summary`, `custom`.
    pub role: Option<String>,
    /// Only entries at or after this time (ms since the epoch).
    pub since_ms: Option<i64>,
    /// Only entries before this time (ms since the epoch).
    pub until_ms: Option<i64>,
    /// Only entries of this model (`id` or `provider/id`).
    pub model: Option<String>,
    /// Only sessions whose id starts with this.
    pub session: Option<String>,
    /// At most this many hits.
    pub limit: usize,
    /// Put around matched words in snippets.
    pub highlight: (String, String),
}

impl SearchQuery {
    /// A query for `text` with no filters, 20 hits, matches in `[` `]`.
    pub fn new(text: &str) -> SearchQuery {
        SearchQuery {
            text: text.to_string(),
            cwd: None,
            role: None,
            since_ms: None,
            until_ms: None,
            model: None,
            session: None,
            limit: 20,
            highlight: ("[".into(), "]".into()),
        }
    }
}

/// One search result: a piece of an entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// The session's header id.
    pub session_id: String,
    /// The session file (or `DB#id`).
    pub location: String,
    /// The session's cwd.
    pub cwd: String,
    /// The entry the text is from.
    pub entry_id: Option<String>,
    /// Entry time, ms since the epoch.
    pub timestamp_ms: Option<i64>,
    /// See [`SearchQuery::role`].
    pub role: String,
    /// `text`, `thinking`, `tool_call`, `tool_result`, `bash`, `compaction`, …
    pub kind: String,
    /// The tool, for tool calls and results.
    pub tool_name: Option<String>,
    /// Provider and model the entry is attributed to.
    pub provider: Option<String>,
    /// See `provider`.
    pub model: Option<String>,
    /// bm25 score; lower is better (FTS5's sign).
    pub score: f64,
    /// The best-matching fragment with matches highlighted.
    pub snippet: String,
}

/// What statistics are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// Calendar day (UTC).
    Day,
    /// Week starting Monday (UTC), named by its Monday.
    Week,
    /// `provider/model`.
    Model,
    /// Provider.
    Provider,
    /// Session cwd.
    Cwd,
    /// Tool name (tool calls and their errors only).
    Tool,
}

/// A statistics query.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatsQuery {
    /// Grouping; `None` gives only the totals.
    pub group: Option<GroupBy>,
    /// Only entries at or after this time.
    pub since_ms: Option<i64>,
    /// Only entries before this time.
    pub until_ms: Option<i64>,
    /// Only sessions of this cwd.
    pub cwd: Option<String>,
}

/// Counts and sums over a set of entries.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsRow {
    /// The group (empty for totals).
    pub key: String,
    /// Distinct sessions with at least one counted entry.
    pub sessions: u64,
    /// `message` entries.
    pub messages: u64,
    /// Tool calls in assistant messages.
    pub tool_calls: u64,
    /// Tool results flagged `isError`.
    pub tool_errors: u64,
    /// Assistant messages that ended in an error.
    pub errors: u64,
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache-read tokens.
    pub cache_read: i64,
    /// Cache-write tokens.
    pub cache_write: i64,
    /// Cost in the providers' currency (`usage.cost.total`).
    pub cost: f64,
}

/// Statistics: totals and, when grouped, one row per group (largest first for names,
/// in time order for days and weeks).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Stats {
    /// Over everything matched.
    pub total: StatsRow,
    /// Per group.
    pub groups: Vec<StatsRow>,
}

/// Turns what a person typed into an FTS5 query that cannot be a syntax error: every word
/// becomes a quoted string, quoted phrases stay phrases, a trailing `*` stays a prefix
/// search, and bare `OR`/`NOT`/`AND` stay operators.
pub fn fts_query(text: &str) -> String {
    let mut terms: Vec<String> = Vec::new();
    // FTS5's query parser ends a string at NUL ("unterminated string").
    let text = text.replace('\0', " ");
    let mut chars = text.chars().peekable();
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let phrase: String = chars.by_ref().take_while(|&c| c != '"').collect();
            if !phrase.trim().is_empty() {
                terms.push(quote(&phrase));
            }
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '"' {
                    break;
                }
                word.push(c);
                chars.next();
            }
            match word.as_str() {
                // An operator needs a term before it (not another operator).
                "OR" | "NOT" | "AND"
                    if !matches!(
                        terms.last().map(String::as_str),
                        None | Some("OR" | "NOT" | "AND")
                    ) =>
                {
                    terms.push(word)
                }
                "OR" | "NOT" | "AND" if !terms.is_empty() => {}
                _ => match word.strip_suffix('*') {
                    Some(stem) if !stem.is_empty() && !stem.contains('*') => {
                        terms.push(format!("{}*", quote(stem)))
                    }
                    _ => terms.push(quote(&word)),
                },
            }
        }
    }
    // A trailing operator has nothing to apply to.
    while matches!(terms.last().map(String::as_str), Some("OR" | "NOT" | "AND")) {
        terms.pop();
    }
    terms.join(" ")
}

impl HistoryIndex {
    /// Ranked full-text hits (bm25), best first.
    pub fn search(&self, q: &SearchQuery) -> StoreResult<Vec<SearchHit>> {
        let err = |e| StoreError::db("search history", self.location(), e);
        let query = fts_query(&q.text);
        if query.is_empty() || q.limit == 0 {
            return Ok(Vec::new());
        }
        let mut sql = String::from(
            "SELECT d.rowid, f.rank FROM fts f JOIN docs d ON d.rowid = f.rowid
             JOIN sessions s ON s.sid = d.sid WHERE fts MATCH ?1",
        );
        let mut args: Vec<SqlValue> = vec![SqlValue::Text(query.clone())];
        let mut filter =
            |sql_part: &str, v: SqlValue| push_filter(&mut sql, &mut args, sql_part, v);
        if let Some(role) = &q.role {
            filter(" AND d.role = ?", SqlValue::Text(role.clone()));
        }
        if let Some(t) = q.since_ms {
            filter(" AND d.ts_ms >= ?", SqlValue::Integer(t));
        }
        if let Some(t) = q.until_ms {
            filter(" AND d.ts_ms < ?", SqlValue::Integer(t));
        }
        if let Some(m) = &q.model {
            filter(
                " AND (d.model = ? OR d.provider || '/' || d.model = ?)",
                SqlValue::Text(m.clone()),
            );
        }
        if let Some(cwd) = &q.cwd {
            filter(" AND s.cwd_key = ?", SqlValue::Text(resolve_cwd(cwd)));
        }
        if let Some(id) = &q.session {
            filter(
                " AND substr(s.session_id, 1, length(?)) = ?",
                SqlValue::Text(id.clone()),
            );
        }
        // bm25 scores every match, so ranking a word found in most entries costs time in
        // proportion to the whole history. Rank the most recent RANK_WINDOW matches (a
        // rowid range FTS5 walks cheaply) instead; if filters leave too few hits there, rank
        // everything.
        let floor: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2",
            )
            .and_then(|mut s| {
                s.query_row(rusqlite::params![query, RANK_WINDOW - 1], |r| r.get(0))
                    .optional()
            })
            .map_err(err)?;
        let rank = |floor: Option<i64>| -> StoreResult<Vec<(i64, f64)>> {
            let mut args = args.clone();
            let mut sql = sql.clone();
            if let Some(floor) = floor {
                args.push(SqlValue::Integer(floor));
                sql.push_str(&format!(" AND f.rowid >= ?{}", args.len()));
            }
            args.push(SqlValue::Integer(q.limit as i64));
            let sql = format!("{sql} ORDER BY f.rank LIMIT ?{}", args.len());
            self.conn
                .prepare(&sql)
                .and_then(|mut s| {
                    s.query_map(rusqlite::params_from_iter(args.iter()), |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })?
                    .collect()
                })
                .map_err(err)
        };
        let mut ranked = rank(floor)?;
        if floor.is_some() && ranked.len() < q.limit {
            ranked = rank(None)?;
        }
        // Snippets only for the hits shown: the text is not in the index (see `readback`),
        // so each hit's text is read back from its session file and the snippet is cut by
        // FTS5 itself from a one-query scratch table holding just those texts.
        let mut hits = Vec::with_capacity(ranked.len());
        let mut texts = Vec::with_capacity(ranked.len());
        let mut reader = TextReader::default();
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT s.session_id, s.location, s.cwd, d.entry_id, d.ts_ms, d.role, d.kind,
                        d.tool_name, d.provider, d.model, d.text, s.key, d.line_offset,
                        d.line_len, d.part
                 FROM docs d JOIN sessions s ON s.sid = d.sid WHERE d.rowid = ?1",
            )
            .map_err(err)?;
        for (rowid, score) in ranked {
            let (hit, text, place) = stmt
                .query_row([rowid], |r| {
                    let hit = SearchHit {
                        session_id: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                        location: r.get(1)?,
                        cwd: r.get(2)?,
                        entry_id: r.get(3)?,
                        timestamp_ms: r.get(4)?,
                        role: r.get(5)?,
                        kind: r.get(6)?,
                        tool_name: r.get(7)?,
                        provider: r.get(8)?,
                        model: r.get(9)?,
                        score,
                        snippet: String::new(),
                    };
                    let place = match (r.get::<_, Option<i64>>(12)?, r.get::<_, Option<i64>>(13)?) {
                        (Some(offset), Some(len)) => Some(TextPlace {
                            path: r.get(11)?,
                            offset: offset as u64,
                            len: len as u64,
                            part: r.get::<_, i64>(14)? as usize,
                        }),
                        _ => None,
                    };
                    Ok((hit, r.get::<_, Option<String>>(10)?, place))
                })
                .map_err(err)?;
            texts.push(
                text.or_else(|| place.and_then(|p| reader.text(&p)))
                    .unwrap_or_default(),
            );
            hits.push(hit);
        }
        let snippets = snippets(&self.conn, &query, &texts, &q.highlight).map_err(err)?;
        for (hit, snippet) in hits.iter_mut().zip(snippets) {
            hit.snippet = snippet;
        }
        Ok(hits)
    }

    /// The sessions (their locations) with a user or assistant message whose text matches
    /// `text` (the same query language as [`HistoryIndex::search`]). Unranked and
    /// unlimited: `/resume` asks this once per search term and keeps sessions that match
    /// every term somewhere, as Pi's session search does over each session's message text.
    pub fn sessions_with_message_text(
        &self,
        text: &str,
    ) -> StoreResult<std::collections::HashSet<String>> {
        let err = |e| StoreError::db("search history", self.location(), e);
        let query = fts_query(text);
        if query.is_empty() {
            return Ok(Default::default());
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT DISTINCT s.location FROM fts f JOIN docs d ON d.rowid = f.rowid
                 JOIN sessions s ON s.sid = d.sid
                 WHERE fts MATCH ?1 AND d.role IN ('user', 'assistant') AND d.kind = 'text'",
            )
            .map_err(err)?;
        let rows = stmt
            .query_map([query], |r| r.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<_, _>>())
            .map_err(err)?;
        Ok(rows)
    }

    /// Sessions, messages, tool calls, errors, tokens and cost, in total and per group.
    pub fn stats(&self, q: &StatsQuery) -> StoreResult<Stats> {
        let err = |e| StoreError::db("compute statistics", self.location(), e);
        let mut wh = String::from(" WHERE 1 = 1");
        let mut args: Vec<SqlValue> = Vec::new();
        let mut filter = |sql_part: &str, v: SqlValue| push_filter(&mut wh, &mut args, sql_part, v);
        if let Some(t) = q.since_ms {
            filter(" AND x.ts_ms >= ?", SqlValue::Integer(t));
        }
        if let Some(t) = q.until_ms {
            filter(" AND x.ts_ms < ?", SqlValue::Integer(t));
        }
        if let Some(cwd) = &q.cwd {
            filter(" AND s.cwd_key = ?", SqlValue::Text(resolve_cwd(cwd)));
        }
        let day = "coalesce(date(x.ts_ms / 1000, 'unixepoch'), '(no date)')";
        let week =
            "coalesce(date(x.ts_ms / 1000, 'unixepoch', 'weekday 0', '-6 days'), '(no date)')";
        let model = "coalesce(x.provider || '/' || x.model, x.model, '(unknown)')";
        let key = match q.group {
            None => "''",
            Some(GroupBy::Day) => day,
            Some(GroupBy::Week) => week,
            Some(GroupBy::Model) => model,
            Some(GroupBy::Provider) => "coalesce(x.provider, '(unknown)')",
            Some(GroupBy::Cwd) => "s.cwd",
            Some(GroupBy::Tool) => "coalesce(x.tool_name, '(unknown)')",
        };
        let sql = if q.group == Some(GroupBy::Tool) {
            format!(
                "SELECT {key}, count(DISTINCT x.sid), 0,
                        sum(x.kind = 'tool_call'), sum(x.kind = 'tool_result' AND x.is_error),
                        0, 0, 0, 0, 0, 0.0
                 FROM docs x JOIN sessions s ON s.sid = x.sid
                 {wh} AND x.kind IN ('tool_call', 'tool_result') GROUP BY 1"
            )
        } else {
            format!(
                "SELECT {key}, count(DISTINCT x.sid), sum(x.role IS NOT NULL), sum(x.tool_calls),
                        sum(x.tool_errors), sum(x.errors), sum(x.input), sum(x.output),
                        sum(x.cache_read), sum(x.cache_write), sum(x.cost)
                 FROM entries x JOIN sessions s ON s.sid = x.sid {wh} GROUP BY 1"
            )
        };
        let mut rows: Vec<StatsRow> = self
            .conn
            .prepare(&sql)
            .and_then(|mut s| {
                s.query_map(rusqlite::params_from_iter(args.iter()), stats_row)?
                    .collect()
            })
            .map_err(err)?;
        match q.group {
            Some(GroupBy::Day | GroupBy::Week) => rows.sort_by(|a, b| a.key.cmp(&b.key)),
            Some(GroupBy::Tool) => rows.sort_by_key(|r| std::cmp::Reverse(r.tool_calls)),
            _ => rows.sort_by(|a, b| {
                b.cost
                    .total_cmp(&a.cost)
                    .then_with(|| (b.input + b.output).cmp(&(a.input + a.output)))
                    .then_with(|| b.messages.cmp(&a.messages))
            }),
        }
        let totals_sql = format!(
            "SELECT '', count(DISTINCT x.sid), sum(x.role IS NOT NULL), sum(x.tool_calls),
                    sum(x.tool_errors), sum(x.errors), sum(x.input), sum(x.output),
                    sum(x.cache_read), sum(x.cache_write), sum(x.cost)
             FROM entries x JOIN sessions s ON s.sid = x.sid {wh}"
        );
        let total = self
            .conn
            .query_row(
                &totals_sql,
                rusqlite::params_from_iter(args.iter()),
                stats_row,
            )
            .map_err(err)?;
        Ok(Stats {
            total,
            groups: if q.group.is_some() { rows } else { Vec::new() },
        })
    }
}

/// FTS5's `snippet()` of each text for `query` (an FTS5 query the texts match), as the index
/// itself would cut it if it stored the text: the texts go into a scratch table in the
/// connection's in-memory temp schema with the index's tokenizer, and are gone afterwards.
/// A text that does not match (read back from a file rewritten meanwhile) gets `""`.
pub(crate) fn snippets(
    conn: &rusqlite::Connection,
    query: &str,
    texts: &[String],
    highlight: &(String, String),
) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.snip
             USING fts5(text, tokenize='unicode61 remove_diacritics 2');
         DELETE FROM temp.snip;",
    )?;
    let mut out = Vec::with_capacity(texts.len());
    {
        let mut insert =
            conn.prepare_cached("INSERT INTO temp.snip(rowid, text) VALUES (?1, ?2)")?;
        for (i, text) in texts.iter().enumerate() {
            insert.execute(rusqlite::params![i as i64, text])?;
        }
        let mut cut = conn.prepare_cached(
            "SELECT snippet(snip, 0, ?3, ?4, '…', 24) FROM temp.snip
             WHERE snip MATCH ?1 AND rowid = ?2",
        )?;
        for i in 0..texts.len() {
            let snippet: Option<String> = cut
                .query_row(
                    rusqlite::params![query, i as i64, highlight.0, highlight.1],
                    |r| r.get(0),
                )
                .optional()?;
            out.push(snippet.unwrap_or_default());
        }
    }
    conn.execute_batch("DELETE FROM temp.snip;")?;
    Ok(out)
}

fn stats_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StatsRow> {
    let n = |i| r.get::<_, Option<i64>>(i).map(|v| v.unwrap_or(0));
    Ok(StatsRow {
        key: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
        sessions: n(1)? as u64,
        messages: n(2)? as u64,
        tool_calls: n(3)? as u64,
        tool_errors: n(4)? as u64,
        errors: n(5)? as u64,
        input: n(6)?,
        output: n(7)?,
        cache_read: n(8)?,
        cache_write: n(9)?,
        cost: r.get::<_, Option<f64>>(10)?.unwrap_or(0.0),
    })
}

/// Appends a filter, numbering each of its `?` and binding `v` to every one of them.
fn push_filter(sql: &mut String, args: &mut Vec<SqlValue>, part: &str, v: SqlValue) {
    for (i, piece) in part.split('?').enumerate() {
        if i > 0 {
            args.push(v.clone());
            sql.push_str(&format!("?{}", args.len()));
        }
        sql.push_str(piece);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_never_becomes_syntax() {
        assert_eq!(fts_query("cargo test"), r#""cargo" "test""#);
        assert_eq!(fts_query(r#""cargo test" -x"#), r#""cargo test" "-x""#);
        assert_eq!(fts_query("quok* a:b"), r#""quok"* "a:b""#);
        assert_eq!(fts_query("a OR b OR"), r#""a" OR "b""#);
        assert_eq!(fts_query("OR"), r#""OR""#);
        assert_eq!(fts_query(r#"say "hi"#), r#""say" "hi""#);
        assert_eq!(fts_query("  "), "");
        assert_eq!(fts_query("a OR OR b"), r#""a" OR "b""#);
        assert_eq!(fts_query("a NOT AND b"), r#""a" NOT "b""#);
        assert_eq!(fts_query("* ** x*y"), r#""*" "**" "x*y""#);
    }
}
