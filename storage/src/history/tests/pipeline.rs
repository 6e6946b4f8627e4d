//! A large read of one file is indexed on two threads (`scan::feed_pipelined`), and files
//! refreshed together are parsed on other threads ahead of the inserts and streamed to them
//! (`scan::index_text`): the index they make must be the one the single-threaded path makes
//! from the same lines.

use super::*;

/// A session of `copies` rounds of [`lines`] with fresh ids: over a MiB at 1,500 rounds.
fn big_lines(copies: usize) -> Vec<String> {
    let mut out = Vec::new();
    for round in 0..copies {
        for line in lines() {
            let mut v: Value = serde_json::from_str(&line).unwrap();
            for key in ["id", "parentId"] {
                if let Some(id) = v[key].as_str() {
                    v[key] = format!("{id}-{round}").into();
                }
            }
            out.push(v.to_string());
        }
    }
    out.push(
        r#"{"type":"message","id":"last","parentId":"b1-0","timestamp":"2026-01-03T00:00:00.000Z","message":{"role":"user","content":"the walrus at the very end"}}"#
            .into(),
    );
    out
}

#[test]
fn a_big_file_indexes_as_it_does_in_small_appends() {
    let tmp = tempfile::tempdir().unwrap();
    let lines = big_lines(1_500);
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    assert!(
        bytes > 1 << 20,
        "{bytes} bytes: too small to take the two-thread path"
    );

    // Whole: one read of every line, on two threads.
    let (_, whole_store) = mixed_store(&tmp.path().join("whole"));
    let whole_dir = tmp.path().join("whole/sessions");
    write_session(&whole_dir, "z_big.jsonl", HEADER, &lines);
    let mut whole =
        HistoryIndex::open(&tmp.path().join("whole.sqlite"), &whole_store.describe()).unwrap();
    whole.refresh_jsonl(&whole_store).unwrap();

    // Listed first (summaries only), then the text caught up in one large read.
    let mut listed =
        HistoryIndex::open(&tmp.path().join("listed.sqlite"), &whole_store.describe()).unwrap();
    listed.refresh_jsonl_summaries(&whole_store).unwrap();
    listed.refresh_jsonl(&whole_store).unwrap();

    // In appends of a few hundred KB, each read on one thread.
    let (steps_dir, steps_store) = mixed_store(&tmp.path().join("steps"));
    let mut steps =
        HistoryIndex::open(&tmp.path().join("steps.sqlite"), &steps_store.describe()).unwrap();
    let path = write_session(&steps_dir, "z_big.jsonl", HEADER, &[]);
    steps.refresh_jsonl(&steps_store).unwrap();
    for chunk in lines.chunks(500) {
        for line in chunk {
            append_line(&path, line);
        }
        let report = steps.refresh_jsonl(&steps_store).unwrap();
        assert!(report.bytes_read < 1 << 20, "{report:?}");
    }

    // The stores live in different directories: compare with the paths made alike.
    let of = |index: &HistoryIndex, store: &JsonlStore, name: &str| {
        contents(index, store).replace(&tmp.path().join(name).display().to_string(), "ROOT")
    };
    let expected = of(&steps, &steps_store, "steps");
    assert_eq!(of(&whole, &whole_store, "whole"), expected);
    assert_eq!(of(&listed, &whole_store, "whole"), expected);
    // Row for row, the same order (rowids), so bm25 ties and snippets come out the same.
    let hits = |index: &HistoryIndex| {
        let mut q = SearchQuery::new("okapi OR walrus");
        q.limit = 5_000;
        index
            .search(&q)
            .unwrap()
            .into_iter()
            .map(|h| format!("{:?} {} {} {}", h.entry_id, h.kind, h.score, h.snippet))
            .collect::<Vec<_>>()
    };
    let found = hits(&whole);
    assert!(
        found.len() > 1_500,
        "every okapi and the final walrus: {}",
        found.len()
    );
    assert!(found.iter().any(|h| h.starts_with("Some(\"last\")")));
    assert_eq!(found, hits(&steps));
    assert_eq!(found, hits(&listed));
}

/// `count` sessions named `n_000.jsonl`…, each a few rounds of [`lines`] with ids of its own
/// (a different number of rounds each, so their sizes differ), and one in 50 over a MiB
/// (streamed to the writer in many batches, more than a parsing thread may make ahead).
fn small_sessions(dir: &Path, count: usize) -> Vec<PathBuf> {
    (0..count)
        .map(|n| {
            let rounds = if n % 50 == 7 { 1_500 } else { 1 + n % 7 };
            let lines: Vec<String> = big_lines(rounds)
                .into_iter()
                .map(|l| l.replace("\"id\":\"", &format!("\"id\":\"n{n}-")))
                .collect();
            let header = HEADER.replace("\"s1\"", &format!("\"n{n}\""));
            write_session(dir, &format!("n_{n:03}.jsonl"), &header, &lines)
        })
        .collect()
}

#[test]
fn files_parsed_ahead_index_as_one_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let count = 150;

    // All at once: the files are parsed on other threads, ahead of the inserts.
    let (all_dir, all_store) = mixed_store(&tmp.path().join("all"));
    let all_files = small_sessions(&all_dir, count);
    let mut all =
        HistoryIndex::open(&tmp.path().join("all.sqlite"), &all_store.describe()).unwrap();
    let report = all.refresh_jsonl(&all_store).unwrap();
    assert_eq!(
        report.sessions_reindexed as usize,
        report.sessions_seen as usize
    );
    // Checkpoints ran on their own connection during the build (tests commit every 64 KB);
    // the writer's automatic ones are back.
    let auto: i64 = all
        .conn
        .pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))
        .unwrap();
    assert_eq!(auto, super::super::WAL_AUTOCHECKPOINT);
    assert!(report.sessions_seen as usize > count, "{report:?}");

    // Listed first, then the text of every file caught up at once.
    let mut listed =
        HistoryIndex::open(&tmp.path().join("listed.sqlite"), &all_store.describe()).unwrap();
    listed.refresh_jsonl_summaries(&all_store).unwrap();
    listed.refresh_jsonl(&all_store).unwrap();

    // One file per refresh, in the same order: nothing to parse ahead.
    let (one_dir, one_store) = mixed_store(&tmp.path().join("one"));
    let mut one =
        HistoryIndex::open(&tmp.path().join("one.sqlite"), &one_store.describe()).unwrap();
    let mut names: Vec<PathBuf> = fs::read_dir(&one_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let parked = tmp.path().join("parked");
    fs::create_dir_all(&parked).unwrap();
    for path in &names {
        fs::rename(path, parked.join(path.file_name().unwrap())).unwrap();
    }
    small_sessions(&parked, count);
    names = fs::read_dir(&parked)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for path in &names {
        fs::rename(path, one_dir.join(path.file_name().unwrap())).unwrap();
        let report = one.refresh_jsonl(&one_store).unwrap();
        assert_eq!(report.sessions_updated, 1, "{report:?}");
    }

    // Appends to many files at once (continued rows) against one file at a time.
    let tail = r#"{"type":"message","id":"tail","parentId":"b1-0","timestamp":"2026-01-04T00:00:00.000Z","message":{"role":"user","content":"a narwhal appended later"}}"#;
    for (n, path) in all_files.iter().enumerate().step_by(3) {
        append_line(path, &tail.replace("\"tail\"", &format!("\"tail{n}\"")));
    }
    let appended = all.refresh_jsonl(&all_store).unwrap();
    assert_eq!(appended.sessions_updated as usize, count.div_ceil(3));
    assert_eq!(appended.sessions_reindexed, 0);
    listed.refresh_jsonl(&all_store).unwrap();
    for (n, path) in all_files.iter().enumerate().step_by(3) {
        append_line(
            &one_dir.join(path.file_name().unwrap()),
            &tail.replace("\"tail\"", &format!("\"tail{n}\"")),
        );
        one.refresh_jsonl(&one_store).unwrap();
    }

    let of = |index: &HistoryIndex, store: &JsonlStore, name: &str| {
        contents(index, store).replace(&tmp.path().join(name).display().to_string(), "ROOT")
    };
    let expected = of(&one, &one_store, "one");
    assert!(expected.contains("tail3"), "the appended lines are indexed");
    assert_eq!(of(&all, &all_store, "all"), expected);
    assert_eq!(of(&listed, &all_store, "all"), expected);
    let hits = |index: &HistoryIndex| {
        let mut q = SearchQuery::new("okapi OR walrus OR narwhal OR zebrafish");
        q.limit = 5_000;
        index
            .search(&q)
            .unwrap()
            .into_iter()
            .map(|h| {
                format!(
                    "{} {:?} {} {} {}",
                    h.session_id, h.entry_id, h.kind, h.score, h.snippet
                )
            })
            .collect::<Vec<_>>()
    };
    let found = hits(&one);
    assert!(found.len() > 1_000, "{}", found.len());
    assert_eq!(hits(&all), found);
    assert_eq!(hits(&listed), found);
}

#[test]
fn a_refresh_tells_its_progress_up_to_every_byte_it_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let files = small_sessions(&dir, 60);
    let store = JsonlStore::open(JsonlLayout::Flat { dir: dir.clone() }, FsyncPolicy::Never);
    let told = std::rc::Rc::new(std::cell::RefCell::new(Vec::<(u64, u64)>::new()));
    let mut index = HistoryIndex::open(&tmp.path().join("i.sqlite"), &store.describe()).unwrap();
    let sink = told.clone();
    index.report_progress(Progress::new(move |done, total| {
        sink.borrow_mut().push((done, total))
    }));

    let check = |report: &RefreshReport, told: &[(u64, u64)]| {
        let all = report.bytes_read;
        assert!(told.iter().all(|&(_, total)| total == all), "{told:?}");
        assert!(told.windows(2).all(|w| w[0].0 <= w[1].0), "{told:?}");
        assert_eq!(told.last(), Some(&(all, all)));
    };
    let report = index.refresh_jsonl(&store).unwrap();
    {
        let told = told.borrow();
        check(&report, &told);
        // Every file, and the batches of the one over a MiB in between.
        assert!(told.len() > 60 + 4, "{}", told.len());
        let big = fs::metadata(&files[7]).unwrap().len();
        assert!(told.windows(2).all(|w| w[1].0 - w[0].0 <= big));
    }

    // Later refreshes count only what they read: the appended lines.
    told.borrow_mut().clear();
    let tail = r#"{"type":"message","id":"late","parentId":"b1-0","timestamp":"2026-01-04T00:00:00.000Z","message":{"role":"user","content":"an ibis"}}"#;
    append_line(&files[3], tail);
    append_line(&files[9], &tail.replace("late", "later"));
    let report = index.refresh_jsonl(&store).unwrap();
    assert_eq!(report.bytes_read, 2 * (tail.len() as u64 + 1) + 1);
    check(&report, &told.borrow());
}
