use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::super::{HistoryIndex, StatsQuery};
use super::*;
use crate::jsonl::{JsonlLayout, JsonlStore};
use crate::store::FsyncPolicy;

const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work/alpha"}"#;
const CALL: &str = r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","provider":"anthropic","model":"claude-x","timestamp":1767225601000,"content":[{"type":"toolCall","id":"c1","name":"edit","arguments":{"path":"src/main.rs","edits":[]}},{"type":"toolCall","id":"c2","name":"bash","arguments":{"command":"cargo test"}}],"usage":{"input":100,"output":20,"cacheRead":5,"cacheWrite":1,"cost":{"total":0.25}}}}"#;
const RESULT: &str = r#"{"type":"message","id":"t1","parentId":"a1","timestamp":"2026-01-01T00:00:02.750Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"edit","isError":true,"content":[{"type":"text","text":"no match"}],"timestamp":1767225602750}}"#;
const COMPACTION: &str = r#"{"type":"compaction","id":"k1","parentId":"t1","timestamp":"2026-01-01T00:00:03.000Z","summary":"Goal: tests","usage":{"input":7,"output":3,"cost":{"total":0.01}}}"#;

fn setup() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    JsonlStore,
    HistoryIndex,
) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a_s1.jsonl");
    fs::write(&file, format!("{HEADER}\n{CALL}\n")).unwrap();
    let store = JsonlStore::open(JsonlLayout::Flat { dir }, FsyncPolicy::Never);
    let mut index = HistoryIndex::open(&tmp.path().join("history.sqlite"), "test").unwrap();
    index.refresh_jsonl(&store).unwrap();
    (tmp, file, store, index)
}

fn append(path: &Path, line: &str) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    writeln!(f, "{line}").unwrap();
}

fn rows(sql: &HistorySql, q: &str) -> Vec<Vec<SqlValue>> {
    let mut out = Vec::new();
    sql.prepare(q)
        .unwrap()
        .for_each(|r| {
            out.push(r.to_vec());
            Ok(())
        })
        .unwrap();
    out
}

#[test]
fn a_tool_result_in_a_later_refresh_finds_its_call() {
    let (_tmp, file, store, mut index) = setup();
    // The result arrives after the call was indexed: the call row is completed in place.
    append(&file, RESULT);
    append(&file, COMPACTION);
    index.refresh_jsonl(&store).unwrap();
    let sql = HistorySql::open(index.path()).unwrap();
    let calls = rows(
        &sql,
        "SELECT tool, path, command, answered, is_error, duration_ms, result_entry_id
         FROM tool_calls ORDER BY call_id",
    );
    use SqlValue::{Integer as I, Null, Text as T};
    assert_eq!(
        calls,
        vec![
            vec![
                T("edit".into()),
                T("src/main.rs".into()),
                Null,
                I(1),
                I(1),
                I(750),
                T("t1".into())
            ],
            vec![
                T("bash".into()),
                Null,
                T("cargo test".into()),
                I(0),
                Null,
                Null,
                Null
            ],
        ]
    );
    // entries = messages + the compaction's usage; usage = assistant + compaction.
    let counts = rows(
        &sql,
        "SELECT (SELECT count(*) FROM entries), (SELECT count(*) FROM messages),
                (SELECT count(*) FROM usage), (SELECT sum(total_tokens) FROM usage),
                (SELECT week FROM usage LIMIT 1), (SELECT time FROM entries LIMIT 1)",
    );
    assert_eq!(
        counts[0],
        vec![
            I(3),
            I(2),
            I(2),
            I(136),
            T("2025-12-29".into()),
            T("2026-01-01T00:00:01.000Z".into())
        ]
    );
    // The same totals as the statistics.
    let stats = index.stats(&StatsQuery::default()).unwrap().total;
    let totals = rows(
        &sql,
        "SELECT count(DISTINCT file), count(role), sum(tool_calls), sum(tool_errors),
                sum(input_tokens), sum(output_tokens), sum(cost) FROM entries",
    );
    assert_eq!(
        totals[0],
        vec![
            I(stats.sessions as i64),
            I(stats.messages as i64),
            I(stats.tool_calls as i64),
            I(stats.tool_errors as i64),
            I(stats.input),
            I(stats.output),
            SqlValue::Real(stats.cost)
        ]
    );
}

#[test]
fn only_one_reading_statement_runs() {
    let (_tmp, _file, _store, index) = setup();
    let sql = HistorySql::open(index.path()).unwrap();
    for (q, says) in [
        (
            "INSERT INTO tool_uses(sid) VALUES (1)",
            "INSERT into tool_uses",
        ),
        ("UPDATE main.entries SET cost = 0", "UPDATE of entries"),
        ("DELETE FROM main.sessions", "DELETE from sessions"),
        ("DROP TABLE main.docs", "changing the schema"),
        ("CREATE TEMP TABLE t(a)", "changing the schema"),
        ("ATTACH ':memory:' AS x", "ATTACH"),
        ("PRAGMA query_only = 0", "PRAGMA query_only"),
        ("PRAGMA main.journal_mode = DELETE", "PRAGMA journal_mode"),
        ("BEGIN", "transactions"),
        ("VACUUM", "would write"),
        (
            "SELECT 1; DELETE FROM main.entries",
            "one statement at a time",
        ),
    ] {
        match sql.prepare(q).map(|_| ()) {
            Err(QueryError::Refused(why)) => assert!(why.contains(says), "{q}: {why}"),
            other => panic!("{q}: {other:?}"),
        }
    }
    match sql.prepare("SELECT nope FROM usage").map(|_| ()) {
        Err(QueryError::Sql(m)) => assert!(m.contains("no such column: nope"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Nothing changed, and reading still works after the refusals.
    assert_eq!(
        rows(&sql, "SELECT count(*) FROM tool_calls"),
        vec![vec![SqlValue::Integer(2)]]
    );
    assert_eq!(rows(&sql, "PRAGMA table_info(usage)").len(), 20);
}

#[test]
fn every_view_has_its_documented_columns() {
    let (_tmp, _file, _store, index) = setup();
    let sql = HistorySql::open(index.path()).unwrap();
    for view in VIEWS {
        let q = sql
            .prepare(&format!("SELECT * FROM {}", view.name))
            .unwrap();
        let names: Vec<&str> = view.columns.iter().map(|c| c.name).collect();
        assert_eq!(q.columns, names, "{}", view.name);
    }
}
