//! Keeping the server's search table (`pi_search`) current: every append indexes its own
//! entries in the same transaction, and sessions stored before the table existed are indexed
//! by [`catch_up`].
//!
//! A row is one searchable part of an entry, exactly as the history index makes them
//! (`history::extract`, the same model attribution), with the part's FTS5 tokens
//! (`history::tokens`) hex-encoded in order (`terms`) and their distinct values, cut to
//! [`LEXEME_HEX_CHARS`], as a `tsvector` (`lexemes`). Hex keeps every token a plain ASCII word
//! whatever the database's encoding, and a byte prefix of a token stays a prefix of its hex.
//! The text itself is not stored: a hit's snippet re-extracts its entry line from `pi_entries`.
//!
//! The session row keeps how far its entries are indexed (`search_next_seq`), the number of
//! rows and tokens (bm25's document count and average length are their sums) and the model
//! user and tool rows are attributed to.

use postgres::Transaction;

use super::conn::{prepare, Statements, Work};
use crate::history::extract;
use crate::history::tokens::fts5_tokens;

use super::search_expr::hex;

/// A tsvector lexeme is at most 2046 bytes; the lexemes are cut well below (a token of more
/// than 500 bytes is rare). The cut only narrows the candidates; `terms` decides.
pub(crate) const LEXEME_HEX_CHARS: usize = 1000;

/// A session's search columns.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SearchMark {
    /// Entries before this sequence number are indexed.
    pub next_seq: i64,
    /// Rows and tokens indexed for the session.
    pub docs: i64,
    pub tokens: i64,
    /// The model of the latest `model_change` or assistant message.
    pub provider: Option<String>,
    pub model: Option<String>,
}

impl SearchMark {
    /// Reads `search_next_seq, search_docs, search_tokens, search_provider, search_model`
    /// from column `at` on.
    pub fn from_row(row: &postgres::Row, at: usize) -> Work<SearchMark> {
        let text = |i: usize| -> Work<Option<String>> {
            Ok(row
                .try_get::<_, Option<Vec<u8>>>(i)?
                .map(String::from_utf8)
                .transpose()?)
        };
        Ok(SearchMark {
            next_seq: row.try_get(at)?,
            docs: row.try_get(at + 1)?,
            tokens: row.try_get(at + 2)?,
            provider: text(at + 3)?,
            model: text(at + 4)?,
        })
    }
}

/// One row to insert.
struct Doc {
    seq: i64,
    part: i32,
    entry_id: Option<String>,
    ts_ms: Option<i64>,
    role: &'static str,
    kind: &'static str,
    provider: Option<String>,
    model: Option<String>,
    tool_name: Option<String>,
    is_error: bool,
    text: String,
}

/// Indexes `lines` (sequence number, line), which continue the session at `mark.next_seq`,
/// and advances `mark`; the caller writes the mark and commits.
pub(crate) fn index_lines(
    tx: &mut Transaction<'_>,
    statements: &mut Statements,
    sid: &[u8],
    lines: &[(i64, &[u8])],
    mark: &mut SearchMark,
) -> Work<()> {
    let mut docs = Vec::new();
    for &(seq, line) in lines {
        mark.next_seq = seq + 1;
        let Some(x) = extract(line) else {
            continue;
        };
        // The attribution of `history::scan`'s feeder: a model change sets the model; an
        // assistant message naming its model becomes the model for what follows.
        if let Some((p, m)) = &x.model_change {
            mark.provider = Some(p.clone());
            mark.model = Some(m.clone());
        }
        let provider = x.provider.clone().or_else(|| mark.provider.clone());
        let model = x.model.clone().or_else(|| mark.model.clone());
        if x.message_role == Some("assistant") && x.model.is_some() {
            mark.provider = provider.clone();
            mark.model = model.clone();
        }
        for (i, part) in x.parts.into_iter().enumerate() {
            docs.push(Doc {
                seq,
                part: i32::try_from(i)?,
                entry_id: x.id.clone(),
                ts_ms: x.timestamp_ms,
                role: part.role,
                kind: part.kind,
                provider: provider.clone(),
                model: model.clone(),
                tool_name: part.tool_name,
                is_error: part.is_error,
                text: part.text,
            });
        }
    }
    if docs.is_empty() {
        return Ok(());
    }
    let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
    let tokens = fts5_tokens(&texts)?;
    let mut terms = Vec::with_capacity(docs.len());
    let mut lexemes = Vec::with_capacity(docs.len());
    for words in &tokens {
        mark.tokens += i64::try_from(words.len())?;
        let hexed: Vec<String> = words.iter().map(|w| hex(w)).collect();
        let mut cut: Vec<&str> = hexed
            .iter()
            .map(|h| &h[..h.len().min(LEXEME_HEX_CHARS)])
            .collect();
        cut.sort_unstable();
        cut.dedup();
        lexemes.push(cut.join(" "));
        terms.push(hexed.join(" "));
    }
    mark.docs += i64::try_from(docs.len())?;
    let bytes = |s: &Option<String>| s.as_ref().map(|s| s.as_bytes().to_vec());
    let insert = prepare(
        statements,
        tx,
        "INSERT INTO pi_search (session_id, seq, part, entry_id, ts_ms, role, kind, provider,
                                model, tool_name, is_error, terms, lexemes)
         SELECT $1, u.seq, u.part, u.entry_id, u.ts_ms, u.role, u.kind, u.provider, u.model,
                u.tool_name, u.is_error, string_to_array(u.terms, ' '),
                array_to_tsvector(string_to_array(u.lexemes, ' '))
         FROM unnest($2::BIGINT[], $3::INT[], $4::BYTEA[], $5::BIGINT[], $6::TEXT[],
                     $7::TEXT[], $8::BYTEA[], $9::BYTEA[], $10::BYTEA[], $11::BOOLEAN[],
                     $12::TEXT[], $13::TEXT[])
              AS u(seq, part, entry_id, ts_ms, role, kind, provider, model, tool_name,
                   is_error, terms, lexemes)",
    )?;
    tx.execute(
        &insert,
        &[
            &sid,
            &docs.iter().map(|d| d.seq).collect::<Vec<_>>(),
            &docs.iter().map(|d| d.part).collect::<Vec<_>>(),
            &docs.iter().map(|d| bytes(&d.entry_id)).collect::<Vec<_>>(),
            &docs.iter().map(|d| d.ts_ms).collect::<Vec<_>>(),
            &docs.iter().map(|d| d.role).collect::<Vec<_>>(),
            &docs.iter().map(|d| d.kind).collect::<Vec<_>>(),
            &docs.iter().map(|d| bytes(&d.provider)).collect::<Vec<_>>(),
            &docs.iter().map(|d| bytes(&d.model)).collect::<Vec<_>>(),
            &docs.iter().map(|d| bytes(&d.tool_name)).collect::<Vec<_>>(),
            &docs.iter().map(|d| d.is_error).collect::<Vec<_>>(),
            &terms,
            &lexemes,
        ],
    )?;
    Ok(())
}

/// Writes a session's search columns.
pub(crate) fn write_mark(
    tx: &mut Transaction<'_>,
    statements: &mut Statements,
    sid: &[u8],
    mark: &SearchMark,
) -> Work<()> {
    let update = prepare(
        statements,
        tx,
        "UPDATE pi_sessions SET search_next_seq = $2, search_docs = $3, search_tokens = $4,
                search_provider = $5, search_model = $6
         WHERE id = $1",
    )?;
    tx.execute(
        &update,
        &[
            &sid,
            &mark.next_seq,
            &mark.docs,
            &mark.tokens,
            &mark.provider.as_deref().map(str::as_bytes),
            &mark.model.as_deref().map(str::as_bytes),
        ],
    )?;
    Ok(())
}

/// Indexes every session whose entries are not all in the search table yet (stored by a
/// build without it), one transaction each, holding the session row as an append does.
/// Returns how many sessions it indexed.
pub(crate) fn catch_up(client: &mut postgres::Client, statements: &mut Statements) -> Work<u64> {
    let behind = prepare(
        statements,
        client,
        "SELECT id FROM pi_sessions WHERE search_next_seq < next_seq",
    )?;
    let ids: Vec<Vec<u8>> = client
        .query(&behind, &[])?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    let mut done = 0;
    for sid in ids {
        let mut tx = client.transaction()?;
        let lock = prepare(
            statements,
            &mut tx,
            "SELECT search_next_seq, search_docs, search_tokens, search_provider, search_model
             FROM pi_sessions WHERE id = $1 FOR UPDATE",
        )?;
        let Some(row) = tx.query_opt(&lock, &[&sid])? else {
            continue;
        };
        let mut mark = SearchMark::from_row(&row, 0)?;
        let read = prepare(
            statements,
            &mut tx,
            "SELECT seq, line FROM pi_entries WHERE session_id = $1 AND seq >= $2 ORDER BY seq",
        )?;
        let rows = tx.query(&read, &[&sid, &mark.next_seq])?;
        let lines: Vec<(i64, Vec<u8>)> = rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Work<_>>()?;
        if lines.is_empty() {
            continue;
        }
        let borrowed: Vec<(i64, &[u8])> = lines.iter().map(|(s, l)| (*s, l.as_slice())).collect();
        index_lines(&mut tx, statements, &sid, &borrowed, &mut mark)?;
        write_mark(&mut tx, statements, &sid, &mark)?;
        tx.commit()?;
        done += 1;
    }
    Ok(done)
}
