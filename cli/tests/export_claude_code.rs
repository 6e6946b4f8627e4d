//! `pi sessions export --format claude-code`: sessions written by real Pi 1.6.0 become Claude
//! Code transcripts (one chained record per message the model sees), which our own Claude
//! Code importer reads back to the same conversation. That the real Claude Code resumes them
//! is checked by `scripts/claude-code-resume.sh` (it needs the CLI from npm).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod import_common;

use std::collections::HashSet;

use import_common::{conversation, inspect_field, lines, realpi_session, Env};
use serde_json::Value;

#[test]
fn sessions_written_by_pi_round_trip_through_claude_code_transcripts() {
    for name in [
        "json_tools",
        "rpc_main",
        "rpc_compact_twice",
        "anthropic_tools_thinking",
    ] {
        let env = Env::new();
        let source = realpi_session(name);
        let header = &lines(&source)[0];
        let id = header["id"].as_str().unwrap();
        let out = env.path(&format!("claude/projects/-x/{id}.jsonl"));
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let src = source.to_str().unwrap();
        env.ok(&[
            "export",
            src,
            "--format",
            "claude-code",
            "-o",
            out.to_str().unwrap(),
        ]);

        // One chain of records with Claude Code's envelope.
        let records = lines(&out);
        assert!(!records.is_empty(), "{name}");
        let mut parent = Value::Null;
        let mut uuids = HashSet::new();
        for r in &records {
            assert_eq!(r["parentUuid"], parent, "{name}: chained");
            assert_eq!(r["sessionId"], id);
            assert_eq!(r["cwd"], header["cwd"]);
            assert!(matches!(r["type"].as_str(), Some("user" | "assistant")));
            assert_eq!(r["message"]["role"], r["type"]);
            assert!(r["timestamp"].as_str().unwrap().ends_with('Z'));
            assert!(uuids.insert(r["uuid"].as_str().unwrap().to_string()));
            parent = r["uuid"].clone();
        }
        // The same session exports the same bytes.
        let again = env.ok(&["export", src, "--format", "claude-code"]);
        assert_eq!(again, std::fs::read_to_string(&out).unwrap(), "{name}");

        // Read back by the Claude Code importer: the same conversation reaches the model.
        env.ok(&["import", "--from", "claude-code", out.to_str().unwrap()]);
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

#[test]
fn an_unreadable_session_is_a_one_line_error() {
    let env = Env::new();
    let bad = env.path("work/bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    let out = env.run(&["export", bad.to_str().unwrap(), "--format", "claude-code"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.jsonl"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty());
}
