//! FTS5's own tokens of a text, for an index kept somewhere other than SQLite.
//!
//! The PostgreSQL store searches on the server (`postgres/search.rs`) and must find exactly
//! what the history index's FTS5 table finds. Rather than re-implementing FTS5's `unicode61`
//! tokenizer (Unicode categories, case folding, diacritics), the texts go through it: they are
//! put into an in-memory FTS5 table with the index's tokenizer settings and read back, token
//! by token and in order, through an `fts5vocab` table of type `instance`. The transaction is
//! rolled back afterwards, so the scratch table stays empty.

use std::cell::RefCell;

use rusqlite::Connection;

/// The tokenizer settings of the history index's `fts` table (see `SCHEMA` in `mod.rs`).
pub(crate) const TOKENIZE: &str = "unicode61 remove_diacritics 2";

thread_local! {
    /// One scratch connection per thread, opened on first use.
    static SCRATCH: RefCell<Option<Connection>> = const { RefCell::new(None) };
}

fn open_scratch() -> rusqlite::Result<Connection> {
    let conn = Connection::open_in_memory()?;
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE tok USING fts5(text, tokenize='{TOKENIZE}');
         CREATE VIRTUAL TABLE tok_words USING fts5vocab(tok, 'instance');"
    ))?;
    Ok(conn)
}

/// The tokens of each text in order, as FTS5 indexes them (folded, without diacritics).
pub(crate) fn fts5_tokens(texts: &[&str]) -> rusqlite::Result<Vec<Vec<String>>> {
    SCRATCH.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(open_scratch()?);
        }
        let Some(conn) = slot.as_mut() else {
            return Ok(Vec::new());
        };
        let tx = conn.transaction()?;
        let mut found: Vec<Vec<(i64, String)>> = vec![Vec::new(); texts.len()];
        {
            let mut insert = tx.prepare_cached("INSERT INTO tok(rowid, text) VALUES (?1, ?2)")?;
            for (i, text) in texts.iter().enumerate() {
                insert.execute(rusqlite::params![i as i64, text])?;
            }
            let mut words = tx.prepare_cached("SELECT doc, offset, term FROM tok_words")?;
            let mut rows = words.query([])?;
            while let Some(row) = rows.next()? {
                let doc: i64 = row.get(0)?;
                if let Some(list) = usize::try_from(doc).ok().and_then(|d| found.get_mut(d)) {
                    list.push((row.get(1)?, row.get(2)?));
                }
            }
        }
        // Nothing is kept: the next call starts from an empty table.
        tx.rollback()?;
        Ok(found
            .into_iter()
            .map(|mut list| {
                list.sort_by_key(|(offset, _)| *offset);
                list.into_iter().map(|(_, term)| term).collect()
            })
            .collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fts5s() {
        let got = fts5_tokens(&["Héllo, wörld! src/main.rs -rn", "", "a a b"]).unwrap();
        assert_eq!(
            got,
            vec![
                vec!["hello", "world", "src", "main", "rs", "rn"],
                vec![],
                vec!["a", "a", "b"],
            ]
        );
        // The scratch table is empty again.
        assert_eq!(fts5_tokens(&["x"]).unwrap(), vec![vec!["x"]]);
    }
}
