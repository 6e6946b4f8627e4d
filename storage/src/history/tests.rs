use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::*;
use crate::record::{SessionHeader, StoredEntry};
use crate::sqlite::SqliteStore;
use crate::store::FsyncPolicy;

const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work/alpha"}"#;

fn lines() -> Vec<String> {
    vec![
        r#"{"type":"model_change","id":"m0","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","provider":"anthropic","modelId":"claude-x"}"#.into(),
        r#"{"type":"message","id":"u1","parentId":"m0","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"please find the zebrafish parser"}],"timestamp":1767225601000}}"#.into(),
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","provider":"anthropic","model":"claude-x","stopReason":"toolUse","timestamp":1767225602000,"content":[{"type":"thinking","thinking":"consider the marmoset option"},{"type":"text","text":"looking for the okapi now"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"grep -rn quetzal src/"}}],"usage":{"input":100,"output":20,"cacheRead":5,"cacheWrite":1,"cost":{"total":0.25}}}}"#.into(),
        r#"{"type":"message","id":"t1","parentId":"a1","timestamp":"2026-01-02T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","isError":true,"content":[{"type":"text","text":"capybara: no such file"}],"timestamp":1767312003000}}"#.into(),
        r#"{"type":"message","id":"b1","parentId":"t1","timestamp":"2026-01-02T00:00:04.000Z","message":{"role":"bashExecution","command":"echo axolotl","output":"axolotl\n","exitCode":0,"timestamp":1767312004000}}"#.into(),
    ]
}

fn write_session(dir: &Path, name: &str, header: &str, lines: &[String]) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    let mut text = format!("{header}\n");
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    fs::write(&path, text).unwrap();
    path
}

fn append_line(path: &Path, line: &str) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    writeln!(f, "{line}").unwrap();
}

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    index_path: PathBuf,
    store: JsonlStore,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    write_session(&dir, "a_s1.jsonl", HEADER, &lines());
    let other = HEADER
        .replace("\"s1\"", "\"s2\"")
        .replace("/work/alpha", "/work/beta");
    write_session(
        &dir,
        "b_s2.jsonl",
        &other,
        &[r#"{"type":"message","id":"u9","parentId":null,"timestamp":"2026-02-01T00:00:00.000Z","message":{"role":"user","content":"zebrafish again, in beta"}}"#.into()],
    );
    let store = JsonlStore::open(JsonlLayout::Flat { dir: dir.clone() }, FsyncPolicy::Never);
    Fixture {
        index_path: tmp.path().join("history.sqlite"),
        _tmp: tmp,
        dir,
        store,
    }
}

impl Fixture {
    fn index(&self) -> HistoryIndex {
        let mut index = HistoryIndex::open(&self.index_path, &self.store.describe()).unwrap();
        index.refresh_jsonl(&self.store).unwrap();
        index
    }
}

fn entry_ids(index: &HistoryIndex, q: &SearchQuery) -> Vec<String> {
    let mut ids: Vec<String> = index
        .search(q)
        .unwrap()
        .into_iter()
        .map(|h| format!("{}/{}", h.session_id, h.entry_id.unwrap_or_default()))
        .collect();
    ids.sort();
    ids
}

#[test]
fn finds_text_of_every_role_and_tool_arguments() {
    let f = fixture();
    let index = f.index();
    for (word, role, kind, entry) in [
        ("okapi", "assistant", "text", "a1"),
        ("marmoset", "assistant", "thinking", "a1"),
        ("quetzal", "assistant", "tool_call", "a1"),
        ("capybara", "tool", "tool_result", "t1"),
        ("axolotl", "bash", "bash", "b1"),
    ] {
        let hits = index.search(&SearchQuery::new(word)).unwrap();
        assert_eq!(hits.len(), 1, "{word}");
        let hit = &hits[0];
        assert_eq!(
            (
                hit.role.as_str(),
                hit.kind.as_str(),
                hit.entry_id.as_deref()
            ),
            (role, kind, Some(entry)),
            "{word}"
        );
        assert!(
            hit.snippet.contains(&format!("[{word}]")),
            "{}",
            hit.snippet
        );
        assert_eq!(hit.model.as_deref(), Some("claude-x"));
    }
    let user = index.search(&SearchQuery::new("zebrafish")).unwrap();
    assert_eq!(user.len(), 2);
    assert!(user.iter().all(|h| h.role == "user"));
    assert_eq!(
        index.search(&SearchQuery::new("quetzal")).unwrap()[0]
            .tool_name
            .as_deref(),
        Some("bash")
    );
    // Phrases, prefixes and punctuation that would be FTS5 syntax.
    assert_eq!(
        entry_ids(&index, &SearchQuery::new("\"zebrafish parser\"")),
        ["s1/u1"]
    );
    assert_eq!(entry_ids(&index, &SearchQuery::new("zebraf*")).len(), 2);
    assert_eq!(entry_ids(&index, &SearchQuery::new("src/ -rn")), ["s1/a1"]);
}

#[test]
fn filters_combine() {
    let f = fixture();
    let index = f.index();
    let q = |edit: &dyn Fn(&mut SearchQuery)| {
        let mut q = SearchQuery::new("zebrafish OR capybara OR axolotl");
        edit(&mut q);
        entry_ids(&index, &q)
    };
    assert_eq!(q(&|_| {}), ["s1/b1", "s1/t1", "s1/u1", "s2/u9"]);
    assert_eq!(q(&|q| q.role = Some("user".into())), ["s1/u1", "s2/u9"]);
    assert_eq!(
        q(&|q| {
            q.role = Some("user".into());
            q.cwd = Some("/work/beta".into());
        }),
        ["s2/u9"]
    );
    assert_eq!(
        q(&|q| q.since_ms = Some(1_767_312_000_000)),
        ["s1/b1", "s1/t1", "s2/u9"]
    );
    assert_eq!(
        q(&|q| {
            q.since_ms = Some(1_767_312_000_000);
            q.until_ms = Some(1_769_904_000_000);
            q.session = Some("s1".into());
        }),
        ["s1/b1", "s1/t1"]
    );
    assert_eq!(
        q(&|q| {
            q.model = Some("anthropic/claude-x".into());
            q.role = Some("tool".into());
        }),
        ["s1/t1"]
    );
    assert!(q(&|q| q.model = Some("gpt".into())).is_empty());
    assert_eq!(q(&|q| q.limit = 1).len(), 1);
}

#[test]
fn appended_lines_show_up_after_refresh_without_rereading() {
    let f = fixture();
    let mut index = f.index();
    let again = index.refresh_jsonl(&f.store).unwrap();
    assert_eq!((again.sessions_updated, again.bytes_read), (0, 0));
    assert!(index
        .search(&SearchQuery::new("narwhal"))
        .unwrap()
        .is_empty());

    let path = f.dir.join("a_s1.jsonl");
    let before = fs::metadata(&path).unwrap().len();
    let line = r#"{"type":"message","id":"u2","parentId":"b1","timestamp":"2026-01-03T00:00:00.000Z","message":{"role":"user","content":"and the narwhal"}}"#;
    append_line(&path, line);
    let report = index.refresh_jsonl(&f.store).unwrap();
    assert_eq!(report.sessions_updated, 1);
    assert_eq!(report.sessions_reindexed, 0);
    assert_eq!(
        report.bytes_read,
        fs::metadata(&path).unwrap().len() - before
    );
    assert_eq!(entry_ids(&index, &SearchQuery::new("narwhal")), ["s1/u2"]);
    // Rows of the old part are not duplicated.
    assert_eq!(index.search(&SearchQuery::new("okapi")).unwrap().len(), 1);
    let summary = &index
        .sessions(&ListScope::All, Some(f.store.layout()))
        .unwrap();
    assert_eq!(summary.len(), 2);
    let s1 = summary.iter().find(|s| s.id.as_str() == "s1").unwrap();
    assert_eq!(s1.message_count, 5);

    // A torn line waits for the rest of it.
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"type":"message","id":"u3","message":{"role":"user","con"#)
        .unwrap();
    index.refresh_jsonl(&f.store).unwrap();
    assert!(index
        .search(&SearchQuery::new("walrus"))
        .unwrap()
        .is_empty());
    file.write_all(b"tent\":\"walrus\"}}\n").unwrap();
    index.refresh_jsonl(&f.store).unwrap();
    assert_eq!(entry_ids(&index, &SearchQuery::new("walrus")), ["s1/u3"]);
}

#[test]
fn listing_matches_the_store() {
    let f = fixture();
    let index = f.index();
    let mut ours = index
        .sessions(&ListScope::All, Some(f.store.layout()))
        .unwrap();
    let mut theirs = f.store.list_sessions(&ListScope::All).unwrap();
    ours.sort_by(|a, b| a.id.cmp(&b.id));
    theirs.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(ours, theirs);
    let beta = index
        .sessions(&ListScope::Cwd("/work/beta".into()), Some(f.store.layout()))
        .unwrap();
    assert_eq!(beta.len(), 1);
}

#[test]
fn rewritten_shrunk_and_deleted_files_are_reindexed() {
    let f = fixture();
    let mut index = f.index();
    let path = f.dir.join("a_s1.jsonl");
    // Shrunk: only the header and the first two entries remain.
    write_session(&f.dir, "a_s1.jsonl", HEADER, &lines()[..2]);
    let report = index.refresh_jsonl(&f.store).unwrap();
    assert_eq!(report.sessions_reindexed, 1);
    assert!(index.search(&SearchQuery::new("okapi")).unwrap().is_empty());
    assert_eq!(
        entry_ids(&index, &SearchQuery::new("zebrafish")),
        ["s1/u1", "s2/u9"]
    );
    // Rewritten longer with another beginning: the head check catches it.
    let mut changed = lines();
    changed[0] = changed[0].replace("claude-x", "claude-y");
    changed
        .push(r#"{"type":"message","id":"u5","message":{"role":"user","content":"ibex"}}"#.into());
    write_session(&f.dir, "a_s1.jsonl", HEADER, &changed);
    let report = index.refresh_jsonl(&f.store).unwrap();
    assert_eq!(report.sessions_reindexed, 1);
    assert_eq!(index.search(&SearchQuery::new("okapi")).unwrap().len(), 1);
    assert_eq!(entry_ids(&index, &SearchQuery::new("ibex")), ["s1/u5"]);
    // The user message after the changed model_change is attributed to the new model.
    let parser = index
        .search(&SearchQuery::new("\"zebrafish parser\""))
        .unwrap();
    assert_eq!(parser[0].model.as_deref(), Some("claude-y"));
    fs::remove_file(&path).unwrap();
    let report = index.refresh_jsonl(&f.store).unwrap();
    assert_eq!(report.sessions_removed, 1);
    assert_eq!(entry_ids(&index, &SearchQuery::new("zebrafish")), ["s2/u9"]);
}

#[test]
fn deleted_or_corrupt_index_is_rebuilt() {
    let f = fixture();
    drop(f.index());
    fs::remove_file(&f.index_path).unwrap();
    let index = f.index();
    assert_eq!(index.search(&SearchQuery::new("okapi")).unwrap().len(), 1);
    drop(index);

    // Garbage over the whole file.
    fs::write(&f.index_path, vec![0x5a; 64 * 1024]).unwrap();
    let _ = fs::remove_file(f.index_path.with_extension("sqlite-wal"));
    let index = f.index();
    assert!(index.rebuilt().is_some());
    assert_eq!(index.search(&SearchQuery::new("okapi")).unwrap().len(), 1);
    drop(index);

    // Garbage after an intact SQLite header: pages break, not the file's first bytes.
    let mut bytes = fs::read(&f.index_path).unwrap();
    let len = bytes.len();
    for b in &mut bytes[100..len.min(40_000)] {
        *b = 0xa7;
    }
    fs::write(&f.index_path, bytes).unwrap();
    let mut index = HistoryIndex::open(&f.index_path, &f.store.describe()).unwrap();
    index.refresh_jsonl(&f.store).unwrap();
    assert_eq!(index.search(&SearchQuery::new("okapi")).unwrap().len(), 1);
    drop(index);

    // Another schema version.
    let conn = rusqlite::Connection::open(&f.index_path).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    let index = f.index();
    assert!(index.rebuilt().is_some());
    assert_eq!(index.search(&SearchQuery::new("okapi")).unwrap().len(), 1);
}

#[test]
fn database_stores_are_indexed_through_the_trait() {
    let tmp = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&tmp.path().join("s.db"), FsyncPolicy::Never).unwrap();
    let header = SessionHeader::parse(HEADER.as_bytes().to_vec()).unwrap();
    let entries: Vec<StoredEntry> = lines().into_iter().map(StoredEntry::from_line).collect();
    let mut writer = store.create_session(&header, &entries).unwrap();
    let mut index = HistoryIndex::open(&tmp.path().join("h.sqlite"), &store.describe()).unwrap();
    index.refresh_store(&store).unwrap();
    assert_eq!(entry_ids(&index, &SearchQuery::new("okapi")), ["s1/a1"]);
    let again = index.refresh_store(&store).unwrap();
    assert_eq!(again.sessions_updated, 0);
    writer
        .append(&[StoredEntry::from_line(
            br#"{"type":"message","id":"u7","parentId":"b1","message":{"role":"user","content":"narwhal"}}"#.to_vec(),
        )])
        .unwrap();
    let report = index.refresh_store(&store).unwrap();
    assert_eq!((report.sessions_updated, report.lines_read), (1, 1));
    assert_eq!(entry_ids(&index, &SearchQuery::new("narwhal")), ["s1/u7"]);
    assert_eq!(index.search(&SearchQuery::new("okapi")).unwrap().len(), 1);
    let ours = index.sessions(&ListScope::All, None).unwrap();
    assert_eq!(ours, store.list_sessions(&ListScope::All).unwrap());
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/realpi/sessions")
}

#[test]
fn stats_totals_equal_the_usage_in_the_fixture_files() {
    // Independently: every entry's `usage`, or its message's, summed straight from the files.
    let (mut input, mut output, mut cache_read, mut cache_write, mut cost) =
        (0i64, 0i64, 0i64, 0i64, 0f64);
    let (mut messages, mut tool_errors) = (0u64, 0u64);
    let mut files = 0;
    for item in fs::read_dir(fixtures_dir()).unwrap() {
        let path = item.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        files += 1;
        let text = fs::read_to_string(&path).unwrap();
        for line in text.lines().skip(1) {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if v["type"] == "message" {
                messages += 1;
                tool_errors += u64::from(
                    v["message"]["role"] == "toolResult" && v["message"]["isError"] == true,
                );
            }
            let usage = if v["usage"].is_object() {
                &v["usage"]
            } else {
                &v["message"]["usage"]
            };
            if usage.is_object() {
                let n = |k: &str| usage[k].as_f64().unwrap_or(0.0) as i64;
                input += n("input");
                output += n("output");
                cache_read += n("cacheRead");
                cache_write += n("cacheWrite");
                cost += usage["cost"]["total"].as_f64().unwrap_or(0.0);
            }
        }
    }
    assert!(files >= 10 && input > 0);

    let tmp = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(
        JsonlLayout::Flat {
            dir: fixtures_dir(),
        },
        FsyncPolicy::Never,
    );
    let mut index = HistoryIndex::open(&tmp.path().join("h.sqlite"), &store.describe()).unwrap();
    index.refresh_jsonl(&store).unwrap();
    let stats = index.stats(&StatsQuery::default()).unwrap();
    let t = &stats.total;
    assert_eq!(
        (
            t.input,
            t.output,
            t.cache_read,
            t.cache_write,
            t.messages,
            t.tool_errors
        ),
        (
            input,
            output,
            cache_read,
            cache_write,
            messages,
            tool_errors
        )
    );
    assert!((t.cost - cost).abs() < 1e-9, "{} vs {cost}", t.cost);
    assert_eq!(t.sessions, files);

    // Every grouping adds up to the same totals.
    for group in [
        GroupBy::Day,
        GroupBy::Week,
        GroupBy::Model,
        GroupBy::Provider,
        GroupBy::Cwd,
    ] {
        let s = index
            .stats(&StatsQuery {
                group: Some(group),
                ..StatsQuery::default()
            })
            .unwrap();
        let sum: i64 = s.groups.iter().map(|g| g.input + g.output).sum();
        assert_eq!(sum, input + output, "{group:?}");
        let msgs: u64 = s.groups.iter().map(|g| g.messages).sum();
        assert_eq!(msgs, messages, "{group:?}");
    }
    let tools = index
        .stats(&StatsQuery {
            group: Some(GroupBy::Tool),
            ..StatsQuery::default()
        })
        .unwrap();
    assert_eq!(
        tools.groups.iter().map(|g| g.tool_calls).sum::<u64>(),
        t.tool_calls
    );
    assert_eq!(
        tools.groups.iter().map(|g| g.tool_errors).sum::<u64>(),
        tool_errors
    );
}

#[test]
fn common_words_rank_a_recent_window_and_filters_still_reach_older_hits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let mut entries = vec![
        r#"{"type":"message","id":"old","message":{"role":"bashExecution","command":"echo common","output":""}}"#.to_string(),
    ];
    for i in 0..(query::RANK_WINDOW + 100) {
        entries.push(format!(
            r#"{{"type":"message","id":"e{i}","message":{{"role":"user","content":"common word {i}"}}}}"#
        ));
    }
    write_session(&dir, "a_s1.jsonl", HEADER, &entries);
    let store = JsonlStore::open(JsonlLayout::Flat { dir }, FsyncPolicy::Never);
    let mut index = HistoryIndex::open(&tmp.path().join("h.sqlite"), &store.describe()).unwrap();
    index.refresh_jsonl(&store).unwrap();
    let hits = index.search(&SearchQuery::new("common")).unwrap();
    assert_eq!(hits.len(), 20);
    let mut bash = SearchQuery::new("common");
    bash.role = Some("bash".into());
    assert_eq!(entry_ids(&index, &bash), ["s1/old"]);
}

#[test]
fn odd_queries_answer_without_errors() {
    let f = fixture();
    let index = f.index();
    for q in [
        "\"",
        "*",
        "OR",
        "a OR OR b",
        "NOT",
        "x NOT",
        "(",
        ")",
        "^",
        "-",
        ":",
        "NEAR(a b)",
        "\"unclosed phrase",
        "col:okapi",
        "''",
        "\u{0}",
        "🦀",
        "a\"b",
    ] {
        index
            .search(&SearchQuery::new(q))
            .unwrap_or_else(|e| panic!("{q:?}: {e}"));
    }
}

#[cfg(unix)]
#[test]
fn an_unreadable_cwd_directory_hides_only_its_sessions() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    write_session(&root.join("--a--"), "a_s1.jsonl", HEADER, &lines());
    let locked = root.join("--b--");
    write_session(
        &locked,
        "b_s2.jsonl",
        &HEADER.replace("\"s1\"", "\"s2\""),
        &lines(),
    );
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    // Root ignores permissions: then the directory is readable and both are found.
    let readable = fs::read_dir(&locked).is_ok();
    let store = JsonlStore::open(JsonlLayout::PerCwd { root }, FsyncPolicy::Never);
    let mut index = HistoryIndex::open(&tmp.path().join("h.sqlite"), &store.describe()).unwrap();
    let result = index.refresh_jsonl(&store);
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    result.unwrap();
    let found = index.search(&SearchQuery::new("okapi")).unwrap().len();
    assert_eq!(found, if readable { 2 } else { 1 });
}

/// Everything searchable or countable in an index, for comparing two of them.
fn contents(index: &HistoryIndex, store: &JsonlStore) -> String {
    let mut out = String::new();
    let mut sessions = index
        .sessions(&ListScope::All, Some(store.layout()))
        .unwrap();
    sessions.sort_by(|a, b| a.location.cmp(&b.location));
    out.push_str(&format!("{sessions:?}\n"));
    for word in [
        "okapi",
        "zebrafish",
        "narwhal",
        "walrus",
        "the",
        "file",
        "bash",
        "error",
        "read",
    ] {
        let mut q = SearchQuery::new(word);
        q.limit = 1000;
        let mut hits: Vec<String> = index
            .search(&q)
            .unwrap()
            .into_iter()
            .map(|h| format!("{}/{:?}/{}/{}", h.session_id, h.entry_id, h.role, h.kind))
            .collect();
        hits.sort();
        out.push_str(&format!("{word}: {hits:?}\n"));
    }
    for group in [GroupBy::Day, GroupBy::Model, GroupBy::Tool] {
        let s = index
            .stats(&StatsQuery {
                group: Some(group),
                ..StatsQuery::default()
            })
            .unwrap();
        out.push_str(&format!("{s:?}\n"));
    }
    out
}

/// A copy of the real Pi fixture sessions plus the small fixture, in one flat directory.
fn mixed_store(tmp: &Path) -> (PathBuf, JsonlStore) {
    let dir = tmp.join("sessions");
    write_session(&dir, "a_s1.jsonl", HEADER, &lines());
    for item in fs::read_dir(fixtures_dir()).unwrap() {
        let path = item.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    let store = JsonlStore::open(JsonlLayout::Flat { dir: dir.clone() }, FsyncPolicy::Never);
    (dir, store)
}

/// What a file watcher reports is all a `refresh_jsonl_files` looks at: changes it was not
/// told of wait for a later refresh, and the index ends as a full refresh leaves it.
#[test]
fn a_refresh_of_reported_files_looks_at_those_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, store) = mixed_store(tmp.path());
    let mut index = HistoryIndex::open(&tmp.path().join("i.sqlite"), &store.describe()).unwrap();
    let full = index.refresh_jsonl(&store).unwrap();
    assert!(full.sessions_seen > 2, "{full:?}");
    let count =
        |index: &HistoryIndex, word: &str| index.search(&SearchQuery::new(word)).unwrap().len();
    let said = |id: &str, word: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":"u1","timestamp":"2026-01-05T00:00:00.000Z","message":{{"role":"user","content":"a {word} here"}}}}"#
        )
    };

    // Two files change; one is reported, with paths that are no sessions of the store.
    let a = dir.join("a_s1.jsonl");
    append_line(&a, &said("late1", "gribbleton"));
    let b = write_session(
        &dir,
        "b_new.jsonl",
        &HEADER.replace("\"s1\"", "\"s9\""),
        &[said("u9", "snorfwick")],
    );
    let elsewhere = tmp.path().join("elsewhere.jsonl");
    fs::write(
        &elsewhere,
        format!("{HEADER}\n{}\n", said("e1", "plonkavert")),
    )
    .unwrap();
    let reported = [a.clone(), dir.join("notes.txt"), elsewhere];
    let report = index.refresh_jsonl_files(&store, &reported).unwrap();
    assert_eq!(
        (report.sessions_seen, report.sessions_updated),
        (1, 1),
        "{report:?}"
    );
    let gribbletons = count(&index, "gribbleton");
    assert!(gribbletons > 0);
    assert_eq!(count(&index, "snorfwick"), 0, "not reported yet");
    assert_eq!(count(&index, "plonkavert"), 0, "not in the store");

    let report = index
        .refresh_jsonl_files(&store, std::slice::from_ref(&b))
        .unwrap();
    assert_eq!(report.sessions_reindexed, 1, "{report:?}");
    let snorfwicks = count(&index, "snorfwick");
    assert!(snorfwicks > 0);

    // A deleted file, reported: its rows go, every other file's stay.
    fs::remove_file(&b).unwrap();
    let report = index.refresh_jsonl_files(&store, &[b]).unwrap();
    assert_eq!(report.sessions_removed, 1, "{report:?}");
    assert_eq!(count(&index, "snorfwick"), 0);
    assert_eq!(count(&index, "gribbleton"), gribbletons);

    // Where the watched refreshes leave it is where a full refresh does.
    let mut fresh =
        HistoryIndex::open(&tmp.path().join("fresh.sqlite"), &store.describe()).unwrap();
    fresh.refresh_jsonl(&store).unwrap();
    assert_eq!(contents(&index, &store), contents(&fresh, &store));
}

#[test]
fn summaries_first_list_like_the_store_and_text_catches_up() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, store) = mixed_store(tmp.path());
    let mut listed =
        HistoryIndex::open(&tmp.path().join("listed.sqlite"), &store.describe()).unwrap();
    let report = listed.refresh_jsonl_summaries(&store).unwrap();
    assert!(report.sessions_updated > 10);
    let sorted = |mut v: Vec<crate::summary::SessionSummary>| {
        v.sort_by(|a, b| a.location.cmp(&b.location));
        v
    };
    let from_files = || sorted(store.list_sessions(&ListScope::All).unwrap());
    let from_index =
        |i: &HistoryIndex| sorted(i.sessions(&ListScope::All, Some(store.layout())).unwrap());
    assert_eq!(from_index(&listed), from_files());
    // Listing indexed no text.
    assert!(listed
        .search(&SearchQuery::new("okapi"))
        .unwrap()
        .is_empty());
    assert_eq!(
        listed
            .refresh_jsonl_summaries(&store)
            .unwrap()
            .sessions_updated,
        0
    );

    // Another entry: the summary follows, the text still waits.
    let path = dir.join("a_s1.jsonl");
    append_line(
        &path,
        r#"{"type":"message","id":"u2","parentId":"b1","timestamp":"2026-01-03T00:00:00.000Z","message":{"role":"user","content":"and the narwhal"}}"#,
    );
    assert_eq!(
        listed
            .refresh_jsonl_summaries(&store)
            .unwrap()
            .sessions_updated,
        1
    );
    assert_eq!(from_index(&listed), from_files());
    assert!(listed
        .search(&SearchQuery::new("narwhal"))
        .unwrap()
        .is_empty());

    // A full refresh indexes the skipped text once, and then equals an index built whole.
    let caught_up = listed.refresh_jsonl(&store).unwrap();
    assert!(caught_up.sessions_updated > 10);
    assert_eq!(listed.refresh_jsonl(&store).unwrap().sessions_updated, 0);
    let mut whole =
        HistoryIndex::open(&tmp.path().join("whole.sqlite"), &store.describe()).unwrap();
    whole.refresh_jsonl(&store).unwrap();
    assert_eq!(contents(&listed, &store), contents(&whole, &store));
    assert_eq!(entry_ids(&listed, &SearchQuery::new("narwhal")), ["s1/u2"]);

    // Appends after the catch-up: both kinds of refresh, in either order, still agree.
    append_line(
        &path,
        r#"{"type":"message","id":"u3","parentId":"u2","timestamp":"2026-01-04T00:00:00.000Z","message":{"role":"user","content":"a walrus too"}}"#,
    );
    listed.refresh_jsonl_summaries(&store).unwrap();
    append_line(
        &path,
        r#"{"type":"message","id":"u4","parentId":"u3","timestamp":"2026-01-05T00:00:00.000Z","message":{"role":"user","content":"and an okapi"}}"#,
    );
    listed.refresh_jsonl(&store).unwrap();
    whole.refresh_jsonl(&store).unwrap();
    assert_eq!(contents(&listed, &store), contents(&whole, &store));
    assert_eq!(from_index(&listed), from_files());
}

/// Watermarks kept in memory between refreshes are dropped as soon as another connection
/// (another `pi` process) commits: no tail is indexed twice or missed.
#[test]
fn two_handles_refreshing_in_turn_index_each_tail_once() {
    let f = fixture();
    let mut a = f.index();
    let mut b = HistoryIndex::open(&f.index_path, &f.store.describe()).unwrap();
    b.refresh_jsonl(&f.store).unwrap();
    let path = f.dir.join("a_s1.jsonl");
    for (n, word) in ["narwhal", "walrus", "okapi", "quokka"].iter().enumerate() {
        append_line(
            &path,
            &format!(
                r#"{{"type":"message","id":"t{n}","parentId":null,"timestamp":"2026-01-0{}T00:00:00.000Z","message":{{"role":"user","content":"another {word}"}}}}"#,
                n + 3
            ),
        );
        // Alternate which handle sees the append first.
        let (first, second) = if n % 2 == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        assert_eq!(first.refresh_jsonl(&f.store).unwrap().sessions_updated, 1);
        assert_eq!(second.refresh_jsonl(&f.store).unwrap().sessions_updated, 0);
        assert_eq!(first.refresh_jsonl(&f.store).unwrap().sessions_updated, 0);
    }
    let mut fresh =
        HistoryIndex::open(&f.dir.join("../fresh.sqlite"), &f.store.describe()).unwrap();
    fresh.refresh_jsonl(&f.store).unwrap();
    assert_eq!(contents(&a, &f.store), contents(&fresh, &f.store));
    assert_eq!(entry_ids(&a, &SearchQuery::new("another")).len(), 4);
}

/// `/resume`'s message search: sessions whose user or assistant text matches, not those
/// where the word is only in thinking, tool calls, tool output or `!cmd` output.
#[test]
fn sessions_with_message_text_looks_at_user_and_assistant_text_only() {
    let f = fixture();
    let index = f.index();
    let names = |q: &str| {
        let mut v: Vec<String> = index
            .sessions_with_message_text(q)
            .unwrap()
            .into_iter()
            .map(|l| l.rsplit('/').next().unwrap_or_default().to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("zebraf*"), ["a_s1.jsonl", "b_s2.jsonl"]);
    assert_eq!(names("okapi"), ["a_s1.jsonl"]);
    assert_eq!(names("\"zebrafish parser\""), ["a_s1.jsonl"]);
    for hidden in ["marmoset", "quetzal", "capybara", "axolotl", ""] {
        assert!(names(hidden).is_empty(), "{hidden}");
    }
}

/// Real Pi resumes a months-old session by appending to its file, which moves neither the
/// directory's mtime nor anything but the file itself: a refresh must still find the new
/// lines (why no directory-level watermark replaces the per-file `stat`, history.md).
#[test]
fn an_append_to_a_session_untouched_for_months_is_found() {
    let f = fixture();
    let path = f.dir.join("a_s1.jsonl");
    let months_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(90 * 86_400);
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(months_ago)
        .unwrap();
    let mut index = f.index();
    assert!(entry_ids(&index, &SearchQuery::new("pangolin")).is_empty());
    let dir_mtime = fs::metadata(&f.dir).unwrap().modified().unwrap();
    append_line(
        &path,
        r#"{"type":"message","id":"u77","parentId":"b1","timestamp":"2026-04-01T00:00:00.000Z","message":{"role":"user","content":"the pangolin is back"}}"#,
    );
    assert_eq!(fs::metadata(&f.dir).unwrap().modified().unwrap(), dir_mtime);
    let report = index.refresh_jsonl(&f.store).unwrap();
    assert_eq!(report.sessions_updated, 1);
    assert_eq!(entry_ids(&index, &SearchQuery::new("pangolin")), ["s1/u77"]);
}

mod contentless;
mod pipeline;
