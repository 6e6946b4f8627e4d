//! `pi sessions export --format codex`: sessions written by real Pi 1.6.0 become Codex rollouts
//! (the records Codex 0.171 writes), which our own Codex importer reads back to the same
//! conversation; a rollout recorded by the real Codex goes Codex → Pi → Codex → Pi with its
//! reasoning intact. That the real Codex resumes exported rollouts is checked by
//! `scripts/codex-resume.sh` (it needs the CLI from npm).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod import_common;

use std::path::{Path, PathBuf};

use import_common::{conversation, inspect_field, lines, realpi_session, Env};
use serde_json::Value;

/// The rollout the real Codex 0.171.0 recorded (tools, reasoning, a failed command, an image,
/// compactions on the server).
fn codex_rollout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../fixtures/import/codex/sessions/2026/12/02/\
         rollout-2026-12-02T17-10-48-01a237bc-c8f2-74e3-a621-ecee6134b3c6.jsonl",
    )
}

/// The thinking the model sees, with the signature a provider replays.
fn thinking(llm_messages: &Value) -> Vec<(String, String)> {
    llm_messages
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "thinking")
        .map(|b| {
            let signature: Value =
                serde_json::from_str(b["thinkingSignature"].as_str().unwrap()).unwrap();
            (
                b["thinking"].as_str().unwrap().to_string(),
                signature["encrypted_content"].to_string(),
            )
        })
        .collect()
}

/// Exports `session` into `env`'s Codex sessions folder; the rollout's path.
fn export_into_codex_home(env: &Env, session: &str) -> PathBuf {
    let sessions = env.path("codex/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let printed = env.ok(&[
        "export",
        session,
        "--format",
        "codex",
        "-o",
        sessions.to_str().unwrap(),
    ]);
    PathBuf::from(printed.trim_end())
}

/// Checks the rollout has Codex's envelope and layout; returns its records.
fn check_rollout(path: &Path, id: &str, cwd: &Value) -> Vec<Value> {
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("rollout-") && name.ends_with(&format!("-{id}.jsonl")));
    // `YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl`, dated like the file name.
    let day: Vec<&str> = path
        .iter()
        .rev()
        .skip(1)
        .take(3)
        .map(|c| c.to_str().unwrap())
        .collect();
    assert_eq!(&name[8..18], format!("{}-{}-{}", day[2], day[1], day[0]));
    let records = lines(path);
    assert_eq!(records[0]["type"], "session_meta");
    assert_eq!(records[0]["payload"]["id"], id);
    assert_eq!(records[0]["payload"]["cwd"], *cwd);
    assert_eq!(records[0]["payload"]["model_provider"], "openai");
    for (n, r) in records.iter().enumerate() {
        assert_eq!(r["ordinal"], n as u64);
        assert!(r["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(r["payload"].is_object());
    }
    // Every call has its output after it.
    let items: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "response_item")
        .map(|r| &r["payload"])
        .collect();
    for (k, call) in items.iter().enumerate() {
        if call["type"] == "function_call" {
            assert!(items[k..]
                .iter()
                .any(|o| o["type"] == "function_call_output" && o["call_id"] == call["call_id"]));
        }
    }
    records
}

#[test]
fn sessions_written_by_pi_round_trip_through_codex_rollouts() {
    for name in [
        "json_tools",
        "rpc_main",
        "rpc_compact_twice",
        "rpc_autocompact",
        "anthropic_tools_thinking",
        "rpc_errors",
    ] {
        let env = Env::new();
        let source = realpi_session(name);
        let header = &lines(&source)[0];
        let id = header["id"].as_str().unwrap();
        let src = source.to_str().unwrap();
        let rollout = export_into_codex_home(&env, src);
        let records = check_rollout(&rollout, id, &header["cwd"]);
        assert!(
            records.iter().any(|r| r["type"] == "turn_context"),
            "{name}"
        );

        // The same session exports the same bytes, to stdout as to the sessions folder.
        let again = env.ok(&["export", src, "--format", "codex"]);
        assert_eq!(again, std::fs::read_to_string(&rollout).unwrap(), "{name}");

        // Read back by the Codex importer: the same conversation reaches the model.
        env.ok(&["import", "--from", "codex", rollout.to_str().unwrap()]);
        let imported = env.imported()[id].clone();
        let before = env.ok(&["inspect", src, "--json"]);
        let after = env.ok(&["inspect", imported.to_str().unwrap(), "--json"]);
        assert_eq!(
            conversation(&inspect_field(&after, "llmMessages")),
            conversation(&inspect_field(&before, "llmMessages")),
            "{name}"
        );
    }
}

/// The first `lines` lines of the recorded rollout, as Codex had written them by then, under
/// the rollout's own name in `env`.
fn rollout_prefix(env: &Env, lines: usize) -> PathBuf {
    let full = codex_rollout();
    let text = std::fs::read_to_string(&full).unwrap();
    let prefix: String = text.split_inclusive('\n').take(lines).collect();
    let path = env.path(&format!(
        "recorded/{}",
        full.file_name().unwrap().to_str().unwrap()
    ));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, prefix).unwrap();
    path
}

#[test]
fn codex_rollouts_come_back_from_pi_with_their_reasoning() {
    // The first turn (an image, reasoning, a failed command), then through the second (a
    // compaction on the server, reasoning, an `apply_patch` call).
    for lines in [28, 57] {
        // Codex → Pi.
        let env = Env::new();
        let recorded = rollout_prefix(&env, lines);
        env.ok(&["import", "--from", "codex", recorded.to_str().unwrap()]);
        let (id, first) = env.imported().into_iter().next().unwrap();
        let first = first.to_str().unwrap().to_string();
        // Pi → Codex → Pi.
        let rollout = export_into_codex_home(&env, &first);
        let cwd = lines_of(&first)[0]["cwd"].clone();
        check_rollout(&rollout, &id, &cwd);
        let back = Env::new();
        back.ok(&["import", "--from", "codex", rollout.to_str().unwrap()]);
        let second = back.imported()[&id].clone();

        let before = inspect_field(&env.ok(&["inspect", &first, "--json"]), "llmMessages");
        let after = inspect_field(
            &back.ok(&["inspect", second.to_str().unwrap(), "--json"]),
            "llmMessages",
        );
        assert_eq!(conversation(&after), conversation(&before), "{lines} lines");
        // OpenAI's reasoning items go back whole (their encrypted content is what the API
        // replays).
        let reasoning = thinking(&before);
        assert_eq!(reasoning.len(), 1, "{lines} lines");
        assert_eq!(thinking(&after), reasoning, "{lines} lines");
    }
}

fn lines_of(path: &str) -> Vec<Value> {
    lines(Path::new(path))
}

#[test]
fn an_unreadable_session_is_a_one_line_error() {
    let env = Env::new();
    let bad = env.path("work/bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    let out = env.run(&["export", bad.to_str().unwrap(), "--format", "codex"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.jsonl"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty());
}
