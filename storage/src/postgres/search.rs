//! `pi sessions search` on the server: the query runs in PostgreSQL over `pi_search` (kept by
//! `search_index.rs`), and only the hits shown come back to the client.
//!
//! The answers are the history index's (`history::query`): the same rows, the same matching
//! and the same bm25 scores, so a session store moved between JSONL and PostgreSQL searches
//! alike. How each part is kept equal:
//!
//! * **Tokens** are FTS5's own (`history::tokens`), for the rows and for the query's strings.
//! * **Matching**: the query is parsed with FTS5's grouping (`search_expr.rs`). A GIN index on
//!   `lexemes` finds the rows holding every word the query needs (a `tsquery` of the lexemes,
//!   `:*` for a prefix; the right side of `NOT` is left out, since it only removes rows), and
//!   each of those is checked exactly against its ordered `terms`: a phrase is its tokens at
//!   consecutive positions, the last one a byte prefix for `word*`.
//! * **bm25** is FTS5's formula (`fts5_aux.c`): k1 = 1.2, b = 0.75, each phrase's idf from the
//!   number of rows it occurs in (counted on the server, over every row as FTS5 counts), the
//!   average row length from the sessions' row and token counts, and each row's number of
//!   phrase occurrences and tokens. The idfs and the average are computed here in `f64` and the
//!   rest on the server in `float8`, in FTS5's order of operations, so the scores are equal.
//! * **The window**: when more than [`RANK_WINDOW`] rows match, only the most recently indexed
//!   ones are ranked, and everything when filters leave too few there, as the index does.
//! * **Snippets** are cut by FTS5's `snippet()` from the hit's text, re-extracted from its entry
//!   line (`pi_entries`), exactly as the index cuts them from text read back from a file.

use std::fmt::Write as _;

use postgres::types::ToSql;
use rusqlite::Connection;

use super::conn::{prepare, Work};
use super::search_expr::{parse, Expr, Phrase, Query};
use super::search_index::{catch_up, LEXEME_HEX_CHARS};
use super::{snapshot, PostgresStore};
use crate::error::{StoreError, StoreResult};
use crate::history::{extract, fts_query, snippets, SearchHit, SearchQuery, RANK_WINDOW};
use crate::paths::resolve_cwd;
use crate::record::SessionHeader;

type Param = Box<dyn ToSql + Sync + Send>;

/// A phrase's tokens at position `i` of `d.terms`.
fn phrase_at(p: &Phrase) -> String {
    let mut sql = String::new();
    let last = p.tokens.len().saturating_sub(1);
    for (k, token) in p.tokens.iter().enumerate() {
        if k > 0 {
            sql.push_str(" AND ");
        }
        // Tokens are hex: nothing in them needs quoting.
        if k == last && p.prefix {
            let _ = write!(sql, "starts_with(d.terms[i + {k}], '{token}')");
        } else {
            let _ = write!(sql, "d.terms[i + {k}] = '{token}'");
        }
    }
    sql
}

fn phrase_matches(p: &Phrase) -> String {
    format!(
        "EXISTS (SELECT 1 FROM generate_subscripts(d.terms, 1) AS i WHERE {})",
        phrase_at(p)
    )
}

/// How often the phrase occurs in the row (FTS5's instance count).
fn phrase_count(p: &Phrase) -> String {
    format!(
        "(SELECT count(*) FROM generate_subscripts(d.terms, 1) AS i WHERE {})::float8",
        phrase_at(p)
    )
}

/// The exact condition of `e` on a row `d`.
fn matches(e: &Expr, phrases: &[Phrase]) -> String {
    match e {
        Expr::Phrase(i) => phrases.get(*i).map_or("FALSE".into(), phrase_matches),
        Expr::And(a, b) => format!("({} AND {})", matches(a, phrases), matches(b, phrases)),
        Expr::Or(a, b) => format!("({} OR {})", matches(a, phrases), matches(b, phrases)),
        Expr::Not(a, b) => format!("({} AND NOT {})", matches(a, phrases), matches(b, phrases)),
        Expr::Nothing => "FALSE".into(),
    }
}

fn lexeme(token: &str, prefix: bool) -> String {
    let cut = &token[..token.len().min(LEXEME_HEX_CHARS)];
    format!("'{cut}'{}", if prefix { ":*" } else { "" })
}

/// A `tsquery` every row matching `phrase` matches: all its lexemes.
fn phrase_lexemes(p: &Phrase) -> String {
    let last = p.tokens.len().saturating_sub(1);
    p.tokens
        .iter()
        .enumerate()
        .map(|(k, t)| lexeme(t, p.prefix && k == last))
        .collect::<Vec<_>>()
        .join(" & ")
}

/// A `tsquery` every row matching `e` matches (`None`: no such narrowing).
fn candidates(e: &Expr, phrases: &[Phrase]) -> Option<String> {
    match e {
        Expr::Phrase(i) => phrases.get(*i).map(|p| format!("({})", phrase_lexemes(p))),
        Expr::And(a, b) => match (candidates(a, phrases), candidates(b, phrases)) {
            (Some(a), Some(b)) => Some(format!("({a} & {b})")),
            (a, b) => a.or(b),
        },
        Expr::Or(a, b) => Some(format!(
            "({} | {})",
            candidates(a, phrases)?,
            candidates(b, phrases)?
        )),
        Expr::Not(a, _) => candidates(a, phrases),
        Expr::Nothing => None,
    }
}

/// `WHERE` conditions finding the rows that match `e`, with `$1` the candidates' tsquery.
fn match_condition(e: &Expr, phrases: &[Phrase], narrowed: bool) -> String {
    let exact = matches(e, phrases);
    if narrowed {
        format!("d.lexemes @@ $1::text::tsquery AND {exact}")
    } else {
        exact
    }
}

/// When each phrase's occurrences in a row count for bm25, as FTS5 counts them: a phrase
/// counts where its node is positioned on the row, which is where every `AND` above it
/// matched and, under a `NOT`, where the `NOT` matched (its right side then does not occur).
/// An `OR` counts each side that occurs. `None`: never.
fn counted(e: &Expr, phrases: &[Phrase], when: &str, out: &mut Vec<Option<String>>) {
    match e {
        Expr::Phrase(i) => {
            if let Some(slot) = out.get_mut(*i) {
                *slot = Some(when.to_string());
            }
        }
        Expr::Or(a, b) => {
            counted(a, phrases, when, out);
            counted(b, phrases, when, out);
        }
        Expr::And(..) | Expr::Not(..) => {
            let here = format!("{when} AND {}", matches(e, phrases));
            match e {
                Expr::And(a, b) => {
                    counted(a, phrases, &here, out);
                    counted(b, phrases, &here, out);
                }
                Expr::Not(a, _) => counted(a, phrases, &here, out),
                _ => {}
            }
        }
        Expr::Nothing => {}
    }
}

/// FTS5's bm25 of a row `d`, with `$2` the average row length and `$3…` each phrase's idf.
fn score(expr: &Expr, phrases: &[Phrase]) -> String {
    let mut when = vec![None; phrases.len()];
    counted(expr, phrases, "TRUE", &mut when);
    let mut sum = String::from("0::float8");
    for (i, p) in phrases.iter().enumerate() {
        let f = match &when[i] {
            Some(cond) => format!(
                "(CASE WHEN {cond} THEN {} ELSE 0::float8 END)",
                phrase_count(p)
            ),
            None => "0::float8".to_string(),
        };
        sum = format!(
            "({sum} + ${idf}::float8 * (({f} * (1.2::float8 + 1.0::float8)) / ({f} + 1.2::float8 * \
             (1::float8 - 0.75::float8 + 0.75::float8 * cardinality(d.terms)::float8 / $2::float8))))",
            idf = i + 3
        );
    }
    format!("(-1.0::float8 * {sum})")
}

/// FTS5's idf: `ln((N - n + 0.5) / (n + 0.5))`, at least 1e-6.
fn idf(rows: i64, hits: i64) -> f64 {
    let idf = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 {
        1e-6
    } else {
        idf
    }
}

/// One ranked row, before its snippet.
struct Ranked {
    session_id: Vec<u8>,
    seq: i64,
    part: i32,
    hit: SearchHit,
}

fn opt_text(bytes: Option<Vec<u8>>) -> Work<Option<String>> {
    Ok(bytes.map(String::from_utf8).transpose()?)
}

impl PostgresStore {
    /// Indexes for search the sessions stored before the server kept a search table (by a
    /// build of schema 1); returns how many. Appends index their own entries, so this finds
    /// nothing to do once it has run.
    pub fn catch_up_search(&self) -> StoreResult<u64> {
        let inner = &self.inner;
        inner.run(
            "index sessions for search",
            || inner.loc(),
            |s| {
                let (client, statements) = s.parts();
                catch_up(client, statements)
            },
        )
    }

    /// Ranked full-text hits, best first: what `HistoryIndex::search` answers over the same
    /// sessions, computed on the server (see the module docs).
    pub fn search(&self, q: &SearchQuery) -> StoreResult<Vec<SearchHit>> {
        let fts = fts_query(&q.text);
        if fts.is_empty() || q.limit == 0 {
            return Ok(Vec::new());
        }
        let err = |e: rusqlite::Error| StoreError::db("search history", self.inner.loc(), e);
        let Some(query) = parse(&fts).map_err(err)? else {
            return Ok(Vec::new());
        };
        self.catch_up_search()?;
        let inner = &self.inner;
        let (q2, url) = (q.clone(), inner.url.to_string());
        let mut ranked = inner.run(
            "search history",
            || inner.loc(),
            move |s| {
                let (client, _) = s.parts();
                let mut tx = snapshot(client)?;
                rank(&mut tx, &query, &q2, &url)
            },
        )?;
        // The hits' texts: their entry lines, extracted again.
        let wanted: Vec<(Vec<u8>, i64, i32)> = ranked
            .iter()
            .map(|r| (r.session_id.clone(), r.seq, r.part))
            .collect();
        let texts = inner.run(
            "search history",
            || inner.loc(),
            move |s| {
                let (client, statements) = s.parts();
                let line = prepare(
                    statements,
                    client,
                    "SELECT line FROM pi_entries WHERE session_id = $1 AND seq = $2",
                )?;
                let mut texts = Vec::with_capacity(wanted.len());
                for (sid, seq, part) in wanted {
                    let text = client
                        .query_opt(&line, &[&sid, &seq])?
                        .map(|r| r.try_get::<_, Vec<u8>>(0))
                        .transpose()?
                        .and_then(|line| extract(&line))
                        .and_then(|x| x.parts.into_iter().nth(usize::try_from(part).ok()?))
                        .map(|p| p.text)
                        .unwrap_or_default();
                    texts.push(text);
                }
                Ok(texts)
            },
        )?;
        let scratch = Connection::open_in_memory().map_err(err)?;
        let cut = snippets(&scratch, &fts, &texts, &q.highlight).map_err(err)?;
        for (r, snippet) in ranked.iter_mut().zip(cut) {
            r.hit.snippet = snippet;
        }
        Ok(ranked.into_iter().map(|r| r.hit).collect())
    }
}

/// Ranks the matching rows on the server and returns the best `q.limit`.
fn rank(
    tx: &mut postgres::Transaction<'_>,
    query: &Query,
    q: &SearchQuery,
    url: &str,
) -> Work<Vec<Ranked>> {
    let Query { expr, phrases } = query;
    let narrow = candidates(expr, phrases);
    let tsquery = narrow.clone().unwrap_or_default();
    let condition = match_condition(expr, phrases, narrow.is_some());
    // FTS5's totals: every row, whatever the filters.
    let totals = tx.query_one(
        "SELECT COALESCE(sum(search_docs), 0)::BIGINT, COALESCE(sum(search_tokens), 0)::BIGINT
         FROM pi_sessions",
        &[],
    )?;
    let (rows, tokens): (i64, i64) = (totals.try_get(0)?, totals.try_get(1)?);
    if rows == 0 {
        return Ok(Vec::new());
    }
    let avgdl = tokens as f64 / rows as f64;
    let mut idfs = Vec::with_capacity(phrases.len());
    for p in phrases {
        let hits: i64 = tx
            .query_one(
                &format!(
                    "SELECT count(*) FROM pi_search d WHERE d.lexemes @@ $1::text::tsquery AND {}",
                    phrase_matches(p)
                ),
                &[&phrase_lexemes(p)],
            )?
            .try_get(0)?;
        idfs.push(idf(rows, hits));
    }
    // Rows matched by the query alone, the most recently indexed first: the window's floor.
    let floor: Option<i64> = tx
        .query_opt(
            &format!(
                "SELECT d.id FROM pi_search d WHERE {condition} AND $1::text IS NOT NULL
                 ORDER BY d.id DESC LIMIT 1 OFFSET $2"
            ),
            &[&tsquery, &(RANK_WINDOW - 1)],
        )?
        .map(|r| r.try_get(0))
        .transpose()?;
    let mut params: Vec<Param> = vec![Box::new(tsquery), Box::new(avgdl)];
    for idf in idfs {
        params.push(Box::new(idf));
    }
    let mut filters = String::new();
    let mut filter = |sql: &str, value: Param| {
        params.push(value);
        filters.push_str(&sql.replace('?', &format!("${}", params.len())));
    };
    if let Some(role) = &q.role {
        filter(" AND d.role = ?", Box::new(role.clone()));
    }
    if let Some(t) = q.since_ms {
        filter(" AND d.ts_ms >= ?", Box::new(t));
    }
    if let Some(t) = q.until_ms {
        filter(" AND d.ts_ms < ?", Box::new(t));
    }
    if let Some(m) = &q.model {
        filter(
            " AND (d.model = ?::bytea OR d.provider || '\\x2f'::bytea || d.model = ?::bytea)",
            Box::new(m.as_bytes().to_vec()),
        );
    }
    if let Some(cwd) = &q.cwd {
        filter(
            " AND s.cwd_key = ?::bytea",
            Box::new(resolve_cwd(cwd).into_bytes()),
        );
    }
    if let Some(id) = &q.session {
        filter(
            " AND substring(s.id FROM 1 FOR length(?::bytea)) = ?::bytea",
            Box::new(id.as_bytes().to_vec()),
        );
    }
    let limit = i64::try_from(q.limit)?;
    let score = score(expr, phrases);
    let run =
        |tx: &mut postgres::Transaction<'_>, floor: Option<i64>| -> Work<Vec<postgres::Row>> {
            let mut refs: Vec<&(dyn ToSql + Sync)> = params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect();
            let mut windowed = String::new();
            if let Some(floor) = &floor {
                refs.push(floor);
                let _ = write!(windowed, " AND d.id >= ${}", refs.len());
            }
            refs.push(&limit);
            let sql = format!(
            "SELECT d.session_id, d.seq, d.part, d.entry_id, d.ts_ms, d.role, d.kind, d.tool_name,
                    d.provider, d.model, s.header, {score} AS score
             FROM pi_search d JOIN pi_sessions s ON s.id = d.session_id
             WHERE {condition} AND $1::text IS NOT NULL{filters}{windowed}
             ORDER BY score, d.id LIMIT ${}",
            refs.len()
        );
            Ok(tx.query(&sql, &refs)?)
        };
    let mut rows = run(tx, floor)?;
    if floor.is_some() && rows.len() < q.limit {
        rows = run(tx, None)?;
    }
    rows.iter()
        .map(|r| {
            let session_id: Vec<u8> = r.try_get(0)?;
            let id = String::from_utf8(session_id.clone())?;
            let header: Vec<u8> = r.try_get(10)?;
            let cwd = SessionHeader::parse(header)
                .ok()
                .and_then(|h| h.cwd().map(str::to_string))
                .unwrap_or_default();
            Ok(Ranked {
                seq: r.try_get(1)?,
                part: r.try_get(2)?,
                hit: SearchHit {
                    location: format!("{url}#{id}"),
                    session_id: id,
                    cwd,
                    entry_id: opt_text(r.try_get(3)?)?,
                    timestamp_ms: r.try_get(4)?,
                    role: r.try_get(5)?,
                    kind: r.try_get(6)?,
                    tool_name: opt_text(r.try_get(7)?)?,
                    provider: opt_text(r.try_get(8)?)?,
                    model: opt_text(r.try_get(9)?)?,
                    score: r.try_get(11)?,
                    snippet: String::new(),
                },
                session_id,
            })
        })
        .collect()
}
