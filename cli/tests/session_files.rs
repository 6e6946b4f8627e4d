//! Session files end to end: lossless round trip of every fixture line, Pi's own
//! large v1 fixtures (migrated, with context equal to real Pi 1.6.0's), and no
//! panic on any truncated or tricky input.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_cli::commands::sessions::inspect::Report;
use pi_engine::session::{EntryIdx, Session};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

fn jsonl_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in [
        "realpi/sessions",
        "realpi/tricky/inputs",
        "pi-mono-repo",
        "pi-0.58-generated",
    ] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "jsonl") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() > 40);
    files
}

/// Every line we index, written back, is the original line byte for byte, and every
/// line we do not index is blank or reported: nothing is silently dropped.
#[test]
fn every_fixture_line_round_trips_byte_for_byte() {
    let mut checked = 0;
    for file in jsonl_files() {
        let bytes = std::fs::read(&file).unwrap();
        let Ok(session) = Session::from_bytes(bytes.clone(), &file) else {
            continue;
        };
        if session.load_report().migrated_from.is_some() {
            continue; // migrated lines are new lines by definition
        }
        let original: Vec<&[u8]> = pi_formats::jsonl::lines(&bytes).map(|l| l.bytes).collect();
        let mut accounted = vec![false; original.len()];
        if let Some(header) = session.header_line() {
            let n = session.header_line_number() as usize;
            assert_eq!(header, original[n - 1], "{}: header", file.display());
            accounted[n - 1] = true;
        }
        for (i, record) in session.entries().iter().enumerate() {
            let line = session.entry_line(i as EntryIdx);
            assert_eq!(
                line,
                original[record.line as usize - 1],
                "{}: line {}",
                file.display(),
                record.line
            );
            accounted[record.line as usize - 1] = true;
            checked += 1;
        }
        for skipped in &session.load_report().skipped_lines {
            accounted[skipped.line as usize - 1] = true;
        }
        for (n, done) in accounted.iter().enumerate() {
            let line = original[n];
            assert!(
                *done || pi_formats::jsonl::is_blank(line) || is_header_or_falsy(line),
                "{}: line {} neither indexed nor reported",
                file.display(),
                n + 1
            );
        }
    }
    assert!(checked > 300, "only {checked} lines checked");
}

fn is_header_or_falsy(line: &[u8]) -> bool {
    let head = pi_formats::head::EntryHead::parse(line).unwrap();
    head.is_header() || head.falsy
}

/// Truncating any fixture anywhere gives a session or a clear error, never a panic.
#[test]
fn truncated_fixtures_never_panic() {
    for file in jsonl_files() {
        let bytes = std::fs::read(&file).unwrap();
        let step = (bytes.len() / 40).max(1);
        for cut in (0..bytes.len()).step_by(step) {
            let truncated = bytes[..cut].to_vec();
            if let Ok(session) = Session::from_bytes(truncated, &file) {
                let mut out = Vec::new();
                Report::build(&session).write(&mut out).unwrap();
                assert!(!out.is_empty());
            }
        }
    }
}

/// Flattens our tree like the stored oracle (`treeFlat`): pre-order [id, type, role, label, depth].
fn tree_flat(report: &Report) -> Vec<Value> {
    let s = report.session;
    let mut out = Vec::new();
    let mut stack: Vec<(EntryIdx, u64)> = report.tree.roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((idx, depth)) = stack.pop() {
        let r = s.entry(idx);
        let label =
            r.id.as_deref()
                .and_then(|id| s.label(id))
                .map(|l| l.text.to_string());
        out.push(serde_json::json!([
            r.id.as_deref(),
            r.kind.as_str(),
            r.role.as_deref(),
            label,
            depth
        ]));
        for &c in report.tree.children[idx as usize].iter().rev() {
            stack.push((c, depth + 1));
        }
    }
    out
}

fn rename(v: &Value, map: &HashMap<String, String>) -> Value {
    match v {
        Value::String(s) => Value::String(map.get(s).cloned().unwrap_or(s.clone())),
        Value::Array(a) => Value::Array(a.iter().map(|x| rename(x, map)).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, x)| (k.clone(), rename(x, map))).collect())
        }
        other => other.clone(),
    }
}

fn id_map(flat: &[Value]) -> HashMap<String, String> {
    flat.iter()
        .enumerate()
        .map(|(i, n)| {
            (
                n[0].as_str().unwrap_or_default().to_string(),
                format!("id{i}"),
            )
        })
        .collect()
}

#[test]
fn pi_mono_v1_fixtures_migrate_and_match_real_pi() {
    for name in [
        "large-session",
        "before-compaction",
        "prompt-cache-replay-session",
    ] {
        let file = root().join(format!("pi-mono-repo/{name}.jsonl"));
        let oracle: Value = serde_json::from_slice(
            &std::fs::read(root().join(format!("pi-mono-repo/oracle/{name}.oracle.json"))).unwrap(),
        )
        .unwrap();
        let before = std::fs::read(&file).unwrap();
        let session = Session::open(&file).unwrap();
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "{name}: file changed"
        );
        assert_eq!(session.load_report().migrated_from, Some(1.0), "{name}");
        let report = Report::build(&session);
        let ours_flat = tree_flat(&report);
        let pi_flat = oracle["treeFlat"].as_array().unwrap();
        let ours_map = id_map(&ours_flat);
        let pi_map = id_map(pi_flat);
        assert_eq!(
            rename(&Value::Array(ours_flat.clone()), &ours_map),
            rename(&Value::Array(pi_flat.clone()), &pi_map),
            "{name}: tree"
        );
        for key in [
            "entryCount",
            "leafId",
            "sessionName",
            "labels",
            "branch",
            "contextEntryIds",
            "context",
            "llmMessages",
        ] {
            let ours = rename(&report.get(key).unwrap(), &ours_map);
            let pi = rename(&oracle[key], &pi_map);
            assert!(ours == pi, "{name}: {key} differs");
        }
    }
}
