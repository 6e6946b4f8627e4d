//! The `pi sessions` commands of the session core, driven through the real binary.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(rel)
}

fn pi() -> Command {
    Command::cargo_bin("pi").unwrap()
}

fn copy_to_temp(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join(Path::new(rel).file_name().unwrap());
    std::fs::copy(fixture(rel), &dst).unwrap();
    (dir, dst)
}

#[test]
fn inspect_refuses_a_non_session_with_one_line_and_no_panic() {
    let out = pi()
        .args(["sessions", "inspect", "--json"])
        .arg(fixture("realpi/tricky/inputs/not_json.jsonl"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("not_json.jsonl"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn inspect_on_a_parent_cycle_answers_and_warns() {
    let out = pi()
        .args(["sessions", "inspect", "--json"])
        .arg(fixture("realpi/tricky/inputs/parent_cycle.jsonl"))
        .timeout(std::time::Duration::from_secs(10))
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["branch"], serde_json::json!(["c001", "c002"]));
    assert!(v["warnings"][0].as_str().unwrap().contains("cycle"));
}

#[test]
fn inspect_leaf_option_moves_the_branch() {
    let file = fixture("realpi/sessions/rpc_tree_labels_nav.jsonl");
    let out = pi()
        .args(["sessions", "inspect", "--json", "--leaf", "f7cbab8e"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["branch"].as_array().unwrap().last().unwrap(), "f7cbab8e");
    let out = pi()
        .args(["sessions", "inspect", "--json", "--leaf", "nope"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Entry nope not found"));
}

#[test]
fn show_marks_the_active_path_and_labels() {
    let out = pi()
        .args(["sessions", "show"])
        .arg(fixture("realpi/sessions/rpc_tree_labels_nav.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let active: Vec<&str> = text.lines().filter(|l| l.starts_with('*')).collect();
    assert_eq!(active.len(), 5, "{text}");
    assert!(active.last().unwrap().contains("a1adcda3"));
    assert!(text.contains("[checkpoint-1]"));
    assert!(text.contains("└─ bdf0f4f1  branch summary"));
}

#[test]
fn verify_is_clean_for_real_sessions_and_names_lines_of_problems() {
    pi().args(["sessions", "verify"])
        .arg(fixture("realpi/sessions/rpc_main.jsonl"))
        .arg(fixture("realpi/sessions/rpc_tree_labels_nav.jsonl"))
        .assert()
        .success();
    let out = pi()
        .args(["sessions", "verify", "--json"])
        .arg(fixture("realpi/tricky/inputs/truncated_last_line.jsonl"))
        .arg(fixture("realpi/tricky/inputs/orphan_parent_leaf.jsonl"))
        .arg(fixture("realpi/tricky/inputs/duplicate_ids.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let reports: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports[0]["problems"][0]["kind"], "torn_tail");
    assert_eq!(reports[0]["problems"][0]["line"], 5);
    assert_eq!(reports[1]["problems"][0]["kind"], "orphan_parent");
    let kinds: Vec<&str> = reports[2]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"duplicate_id") && kinds.contains(&"parent_cycle"),
        "{kinds:?}"
    );
}

#[test]
fn upgrade_migrates_through_a_new_file_and_keeps_the_original() {
    let (_dir, file) = copy_to_temp("realpi/tricky/inputs/v2_hookmessage.jsonl");
    let original = std::fs::read(&file).unwrap();
    pi().args(["sessions", "upgrade"])
        .arg(&file)
        .assert()
        .success();
    let backup = file.with_file_name("v2_hookmessage.jsonl.v2.bak");
    assert_eq!(std::fs::read(&backup).unwrap(), original);
    let upgraded = std::fs::read_to_string(&file).unwrap();
    assert!(upgraded.starts_with(r#"{"type":"session","version":3"#));
    assert!(upgraded.contains(r#""role":"custom""#) && !upgraded.contains("hookMessage"));
    // Now clean, and a second run changes nothing.
    pi().args(["sessions", "verify"])
        .arg(&file)
        .assert()
        .success();
    pi().args(["sessions", "upgrade"])
        .arg(&file)
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), upgraded);
}
