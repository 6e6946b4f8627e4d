//! Large reads are indexed on two threads (`scan::feed_pipelined`): the index they make must
//! be the one the single-threaded path makes from the same lines.

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
