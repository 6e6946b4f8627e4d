//! `pi sessions search` and `pi sessions stats` through the real binary, over an agent dir
//! in Pi's per-cwd layout.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

mod pty_common;

fn fixture_sessions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/realpi/sessions")
}

/// An agent dir holding every fixture session under one per-cwd directory.
fn agent_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agent/sessions/--work-fixtures--");
    fs::create_dir_all(&dir).unwrap();
    for item in fs::read_dir(fixture_sessions()).unwrap() {
        let path = item.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    (tmp, dir)
}

fn pi(agent: &Path) -> Command {
    let mut cmd = Command::cargo_bin("pi").unwrap();
    cmd.env("PI_CODING_AGENT_DIR", agent)
        .env_remove("PI_SESSION_STORE")
        .env_remove("PI_CODING_AGENT_SESSION_DIR");
    cmd
}

fn search(agent: &Path, args: &[&str]) -> Vec<Value> {
    let out = pi(agent)
        .args(["sessions", "search", "--json"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn search_finds_appends_and_survives_a_corrupt_index() {
    let (tmp, dir) = agent_dir();
    let agent = tmp.path().join("agent");
    let hits = search(&agent, &["user-bash"]);
    assert!(!hits.is_empty());
    assert!(hits.iter().any(|h| h["role"] == "bash"), "{hits:?}");
    assert!(agent.join("history.sqlite").exists());

    // A hit opens with the printed command.
    let hit = &hits[0];
    let open = hit["open"].as_str().unwrap();
    let words: Vec<&str> = open.split(' ').collect();
    assert_eq!(&words[..3], ["pi", "sessions", "show"]);
    let shown = pi(&agent).args(&words[1..]).output().unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );

    // Another process appends to a session file; the next search sees it.
    assert!(search(&agent, &["wombatine"]).is_empty());
    let file = dir.join(
        fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .find(|n| n.to_string_lossy().ends_with(".jsonl"))
            .unwrap(),
    );
    let mut f = OpenOptions::new().append(true).open(&file).unwrap();
    writeln!(
        f,
        r#"{{"type":"message","id":"zz000001","parentId":null,"timestamp":"2026-12-01T00:00:00.000Z","message":{{"role":"user","content":"the wombatine question"}}}}"#
    )
    .unwrap();
    let hits = search(&agent, &["wombatine", "--role", "user"]);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["entryId"], "zz000001");
    assert!(search(&agent, &["wombatine", "--role", "tool"]).is_empty());
    assert!(search(&agent, &["wombatine", "--until", "2026-11-30"]).is_empty());

    // Garbage in the index file: rebuilt, same answer, a note on stderr.
    fs::write(agent.join("history.sqlite"), vec![0x42; 10_000]).unwrap();
    let out = pi(&agent)
        .args(["sessions", "search", "--json", "wombatine"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("rebuilt"));

    // Nothing found: exit 1, like grep.
    let out = pi(&agent)
        .args(["sessions", "search", "zzqqxxnothing"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn stats_add_up_the_usage_of_the_files() {
    let (tmp, _dir) = agent_dir();
    let agent = tmp.path().join("agent");
    let (mut input, mut output, mut cost) = (0i64, 0i64, 0f64);
    for item in fs::read_dir(fixture_sessions()).unwrap() {
        let path = item.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        for line in fs::read_to_string(&path).unwrap().lines().skip(1) {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let usage = if v["usage"].is_object() {
                &v["usage"]
            } else {
                &v["message"]["usage"]
            };
            input += usage["input"].as_i64().unwrap_or(0);
            output += usage["output"].as_i64().unwrap_or(0);
            cost += usage["cost"]["total"].as_f64().unwrap_or(0.0);
        }
    }
    let out = pi(&agent)
        .args(["sessions", "stats", "--json", "--by", "model"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["total"]["input"], input);
    assert_eq!(stats["total"]["output"], output);
    assert!((stats["total"]["cost"].as_f64().unwrap() - cost).abs() < 1e-9);
    let groups = stats["groups"].as_array().unwrap();
    let sum: i64 = groups.iter().map(|g| g["input"].as_i64().unwrap()).sum();
    assert_eq!(sum, input);

    let text = pi(&agent)
        .args(["sessions", "stats", "--by", "day"])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.starts_with("Sessions 16"), "{text}");
    assert!(text.contains("By Day"), "{text}");
}

#[test]
fn the_group_store_flags_choose_what_is_searched() {
    let (tmp, dir) = agent_dir();
    let agent = tmp.path().join("agent-elsewhere");
    // A flat directory given by --session-dir: its own index, in the agent dir.
    let out = pi(&agent)
        .args(["sessions", "search", "--json", "user-bash", "--session-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
    let indexes: Vec<_> = fs::read_dir(&agent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("history-") && n.ends_with(".sqlite"))
        .collect();
    assert_eq!(indexes.len(), 1, "{indexes:?}");
    // The default store of that agent dir is empty.
    let out = pi(&agent)
        .args(["sessions", "search", "user-bash"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// A session of `lines` user messages of about 1 KB each, the last one naming `word`.
fn write_big_session(dir: &Path, lines: usize, word: &str) -> u64 {
    fs::create_dir_all(dir).unwrap();
    let path = dir.join("2026-01-01T00-00-00-000Z_big.jsonl");
    let mut out = std::io::BufWriter::new(fs::File::create(&path).unwrap());
    writeln!(
        out,
        r#"{{"type":"session","version":3,"id":"big","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}}"#
    )
    .unwrap();
    let filler = "lorem ipsum dolor sit amet ".repeat(36);
    for n in 0..lines {
        let parent = if n == 0 {
            "null".to_string()
        } else {
            format!("\"m{}\"", n - 1)
        };
        let text = if n + 1 == lines {
            format!("{filler} {word}")
        } else {
            format!("{filler} {n}")
        };
        writeln!(
            out,
            r#"{{"type":"message","id":"m{n}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}"}}}}"#
        )
        .unwrap();
    }
    drop(out);
    fs::metadata(&path).unwrap().len()
}

/// A long build draws a progress bar on a terminal (bytes read of bytes to read), clears
/// it, and prints nothing of it when standard error is not a terminal.
#[test]
fn a_long_index_build_shows_a_progress_bar_on_a_terminal_only() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let bytes = write_big_session(&agent.join("sessions/--w--"), 20_000, "wombat");
    assert!(bytes > 16 << 20, "{bytes} bytes: under the bar's threshold");

    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("pi"));
    cmd.env("PI_CODING_AGENT_DIR", &agent)
        .env_remove("PI_SESSION_STORE")
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .args(["sessions", "search", "wombat"]);
    let out = pty_common::spawn_all_on_terminal(&mut cmd).finish();
    assert_eq!(out.code, 0, "{}", out.stdout);
    let total = format!("/{:.2} MiB", bytes as f64 / (1 << 20) as f64);
    assert!(
        out.stdout.contains(&total),
        "no bar of {total}: {:?}",
        out.stdout
    );
    assert!(out.stdout.contains(" left"), "{:?}", out.stdout);
    assert!(
        out.stdout.contains("pi: indexed 1 session(s)"),
        "{:?}",
        out.stdout
    );
    assert!(out.stdout.contains("wombat"), "the hit: {:?}", out.stdout);

    // Piped: the notes only, no bar (a fresh index, so the same build happens).
    fs::remove_file(agent.join("history.sqlite")).unwrap();
    let out = pi(&agent)
        .args(["sessions", "search", "wombat"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("pi: indexed 1 session(s)"), "{stderr}");
    assert!(
        !stderr.contains("MiB") && !stderr.contains(" left"),
        "{stderr}"
    );
}
