//! Lines `JSON.parse` accepts but serde_json alone refuses must not lose anything: a message
//! holding a lone surrogate escape stays in the context (it read as an indexed entry with no
//! value, so `verify` said ok and the message silently vanished).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

#[test]
fn a_message_with_a_lone_surrogate_stays_in_the_context() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"type":"session","version":3,"id":"s-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
            "\n",
            r#"{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"a\ud800b","timestamp":1}}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(["sessions", "inspect", "--json"])
        .arg(&file)
        .env("HOME", dir.path())
        .env("PI_CODING_AGENT_DIR", dir.path().join("agent"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["context"]["messages"],
        serde_json::json!([{"role": "user", "content": "a\u{fffd}b", "timestamp": 1}])
    );
}
