//! The contentless full-text table: text read back from the session files by byte range
//! must be the text that was indexed, and search must answer as an index that stores the
//! text would (same hits, scores and snippets).

use super::*;
use crate::history::extract::extract;
use crate::history::readback::{TextPlace, TextReader};

/// Sessions with every kind of row, an entry over the per-entry cap, non-ASCII text, an
/// unterminated last line and a tail appended after the first refresh.
fn varied() -> (Fixture, HistoryIndex) {
    let f = fixture();
    let big = "lorem ipsum dolor ".repeat(5_000);
    let third = HEADER
        .replace("\"s1\"", "\"s3\"")
        .replace("/work/alpha", "/work/gamma");
    let path = write_session(
        &f.dir,
        "c_s3.jsonl",
        &third,
        &[
            serde_json::json!({"type": "message", "id": "g1", "parentId": null,
                "timestamp": "2026-03-01T00:00:00.000Z",
                "message": {"role": "user", "content": format!("zebrafish café naïve {big} tail-word")}})
            .to_string(),
            serde_json::json!({"type": "message", "id": "g2", "parentId": "g1",
                "timestamp": "2026-03-01T00:00:01.000Z",
                "message": {"role": "assistant", "content": [
                    {"type": "text", "text": "the zebrafish parser is ready"},
                    {"type": "thinking", "thinking": "zebrafish twice zebrafish"},
                    {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "src/zebrafish.rs"}},
                    {"type": "toolCall", "id": "d", "name": "bash", "arguments": {"command": "cargo test parser"}}]}})
            .to_string(),
            r###"{"type":"compaction","id":"g3","parentId":"g2","timestamp":"2026-03-01T00:00:02.000Z","summary":"## Goal\nparser for zebrafish","firstKeptEntryId":"g1","tokensBefore":5}"###.into(),
        ],
    );
    let mut index = f.index();
    append_line(
        &path,
        r#"{"type":"message","id":"g4","parentId":"g3","timestamp":"2026-03-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"d","toolName":"bash","content":[{"type":"text","text":"parser ok; zebrafish tests pass"}]}}"#,
    );
    // A writer that leaves the final newline off: the line is complete JSON, so it counts.
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    write!(
        file,
        r#"{{"type":"custom_message","id":"g5","parentId":"g4","timestamp":"2026-03-01T00:00:04.000Z","customType":"x","content":"custom zebrafish note","display":true}}"#
    )
    .unwrap();
    drop(file);
    index.refresh_jsonl(&f.store).unwrap();
    (f, index)
}

/// Every text row: (entry id, kind, text read back from its byte range).
fn read_back(index: &HistoryIndex) -> Vec<(String, String, String)> {
    let mut stmt = index
        .conn
        .prepare(
            "SELECT d.entry_id, d.kind, s.key, d.line_offset, d.line_len, d.part, d.text
             FROM docs d JOIN sessions s ON s.sid = d.sid ORDER BY d.rowid",
        )
        .unwrap();
    let mut reader = TextReader::default();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, Option<String>>(6)?,
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap();
    rows.into_iter()
        .map(|(id, kind, path, offset, len, part, text)| {
            assert_eq!(text, None, "JSONL rows do not store their text");
            let place = TextPlace {
                path,
                offset: offset.unwrap() as u64,
                len: len.unwrap() as u64,
                part: part as usize,
            };
            let text = reader.text(&place).expect("the row's line is in its file");
            (id, kind, text)
        })
        .collect()
}

#[test]
fn text_read_back_by_byte_range_equals_the_text_of_each_entry() {
    let (f, index) = varied();
    let mut got = read_back(&index);
    // Independently: every line of every file, split on newlines, through `extract`.
    let mut want = Vec::new();
    for path in [
        f.dir.join("a_s1.jsonl"),
        f.dir.join("b_s2.jsonl"),
        f.dir.join("c_s3.jsonl"),
    ] {
        let bytes = fs::read(&path).unwrap();
        for line in bytes.split(|&b| b == b'\n').skip(1) {
            for part in extract(line)
                .map(|x| (x.id, x.parts))
                .into_iter()
                .flat_map(|(id, parts)| parts.into_iter().map(move |p| (id.clone().unwrap(), p)))
            {
                want.push((part.0, part.1.kind.to_string(), part.1.text));
            }
        }
    }
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // The capped entry is read back capped, exactly as it was indexed.
    let capped = got.iter().find(|(id, ..)| id == "g1").unwrap();
    assert_eq!(capped.2.len(), MAX_INDEXED_BYTES_PER_ENTRY);
    assert!(capped.2.starts_with("zebrafish café naïve"));
}

#[test]
fn search_answers_as_an_index_that_stores_the_text() {
    let (_f, index) = varied();
    // The former layout: the same rows with their text stored, in a plain FTS5 table.
    let reference = Connection::open_in_memory().unwrap();
    reference
        .execute_batch(
            "CREATE VIRTUAL TABLE r USING fts5(text, tokenize='unicode61 remove_diacritics 2')",
        )
        .unwrap();
    let rowids: Vec<i64> = index
        .conn
        .prepare("SELECT rowid FROM docs ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for (rowid, (.., text)) in rowids.iter().zip(read_back(&index)) {
        reference
            .execute(
                "INSERT INTO r(rowid, text) VALUES (?1, ?2)",
                params![rowid, text],
            )
            .unwrap();
    }
    let ids: std::collections::HashMap<i64, String> = index
        .conn
        .prepare("SELECT rowid, entry_id || '/' || kind FROM docs")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for text in [
        "zebrafish",
        "parser",
        "\"zebrafish parser\"",
        "zebra*",
        "cafe",
        "lorem dolor",
        "\"parser ok\"",
        "zebrafish NOT parser",
        "okapi OR capybara",
        "src/zebrafish.rs",
    ] {
        let query = query::fts_query(text);
        let want: Vec<(String, String, String)> = reference
            .prepare(
                "SELECT rowid, rank, snippet(r, 0, '[', ']', '…', 24) FROM r WHERE r MATCH ?1
                 ORDER BY rank LIMIT 20",
            )
            .unwrap()
            .query_map([&query], |r| {
                Ok((
                    ids[&r.get::<_, i64>(0)?].clone(),
                    format!("{:.9}", r.get::<_, f64>(1)?),
                    r.get(2)?,
                ))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let got: Vec<(String, String, String)> = index
            .search(&SearchQuery::new(text))
            .unwrap()
            .into_iter()
            .map(|h| {
                (
                    format!("{}/{}", h.entry_id.unwrap(), h.kind),
                    format!("{:.9}", h.score),
                    h.snippet,
                )
            })
            .collect();
        assert!(!want.is_empty(), "{text}");
        assert_eq!(got, want, "{text}");
    }
    // Past the per-entry cap nothing is indexed, as before.
    assert!(index
        .search(&SearchQuery::new("tail-word"))
        .unwrap()
        .is_empty());
}

#[test]
fn a_file_rewritten_after_the_refresh_gives_an_empty_snippet_not_another_text() {
    let f = fixture();
    let index = f.index();
    let path = f.dir.join("a_s1.jsonl");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replace("okapi", "zzzzz")).unwrap();
    let hits = index.search(&SearchQuery::new("okapi")).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].snippet, "");
}

#[test]
fn database_store_rows_keep_their_text_for_snippets() {
    let tmp = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&tmp.path().join("s.db"), FsyncPolicy::Never).unwrap();
    let header = SessionHeader::parse(HEADER.as_bytes().to_vec()).unwrap();
    let entries: Vec<StoredEntry> = lines().into_iter().map(StoredEntry::from_line).collect();
    let _writer = store.create_session(&header, &entries).unwrap();
    let mut index = HistoryIndex::open(&tmp.path().join("h.sqlite"), &store.describe()).unwrap();
    index.refresh_store(&store).unwrap();
    let hits = index.search(&SearchQuery::new("okapi")).unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].snippet.contains("[okapi]"), "{}", hits[0].snippet);
}

#[test]
fn a_refresh_sees_an_appended_file_a_new_file_and_a_linked_file() {
    let f = fixture();
    let mut index = f.index();
    // Appended: the listing's own `stat` (through the directory) shows the new size.
    append_line(
        &f.dir.join("b_s2.jsonl"),
        r#"{"type":"message","id":"u10","parentId":"u9","timestamp":"2026-02-01T00:00:01.000Z","message":{"role":"user","content":"wombat appended"}}"#,
    );
    // New, and a link to a file elsewhere in the store (followed: its own `stat`).
    let other = HEADER.replace("\"s1\"", "\"s4\"");
    let line = r#"{"type":"message","id":"u11","parentId":null,"timestamp":"2026-02-02T00:00:00.000Z","message":{"role":"user","content":"numbat arrives"}}"#;
    write_session(&f.dir, "d_s4.jsonl", &other, &[line.into()]);
    let elsewhere = f.dir.join("kept");
    let linked = HEADER.replace("\"s1\"", "\"s5\"");
    let target = write_session(
        &elsewhere,
        "s5.txt",
        &linked,
        &[line.replace("u11", "u12").replace("numbat", "quoll")],
    );
    std::os::unix::fs::symlink(&target, f.dir.join("e_s5.jsonl")).unwrap();
    let report = index.refresh_jsonl(&f.store).unwrap();
    assert_eq!((report.sessions_seen, report.sessions_updated), (4, 3));
    assert_eq!(entry_ids(&index, &SearchQuery::new("wombat")), ["s2/u10"]);
    assert_eq!(entry_ids(&index, &SearchQuery::new("numbat")), ["s4/u11"]);
    assert_eq!(entry_ids(&index, &SearchQuery::new("quoll")), ["s5/u12"]);
    // The linked file grows: seen through the link.
    append_line(
        &target,
        &line.replace("u11", "u13").replace("numbat", "dunnart"),
    );
    let report = index.refresh_jsonl(&f.store).unwrap();
    assert_eq!(report.sessions_updated, 1);
    assert_eq!(entry_ids(&index, &SearchQuery::new("dunnart")), ["s5/u13"]);
    assert_eq!(index.refresh_jsonl(&f.store).unwrap().sessions_updated, 0);
}
