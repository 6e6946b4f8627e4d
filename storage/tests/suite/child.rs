//! The child side of the multi-process tests: this test binary re-runs itself with
//! `PI_STORAGE_CHILD` set, and this test then plays the part asked for. Without the variable
//! it does nothing.

use std::io::{BufRead, Write};

use pi_storage::{open_store, SessionId, StoreOptions, StoredEntry};

#[test]
fn child_main() {
    let Ok(mode) = std::env::var("PI_STORAGE_CHILD") else {
        return;
    };
    let spec = std::env::var("PI_STORAGE_CHILD_STORE").unwrap();
    let session = SessionId::new(std::env::var("PI_STORAGE_CHILD_SESSION").unwrap());
    let options = StoreOptions::new(std::path::Path::new("/nonexistent-agent-dir"));
    let store = open_store(&spec.parse().unwrap(), &options).unwrap();
    let mut out = std::io::stdout();
    match mode.as_str() {
        // Take the session's write lock, say so, and hold it until stdin closes.
        "hold-lock" => {
            let _writer = store.open_writer(&session).unwrap();
            writeln!(out, "LOCKED").unwrap();
            out.flush().unwrap();
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).unwrap();
        }
        // Append forever; acknowledge each entry once `append` has returned.
        "append-forever" => {
            let mut writer = store.open_writer(&session).unwrap();
            let mut parent = "root".to_string();
            for i in 0u64.. {
                let id = format!("e{i:07}");
                let line = format!(
                    r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"entry {i} {pad}","timestamp":1767225600000}}}}"#,
                    pad = "x".repeat((i % 7) as usize * 100)
                );
                writer
                    .append(&[StoredEntry::from_line(line.into_bytes())])
                    .unwrap();
                writeln!(out, "ACK {id}").unwrap();
                out.flush().unwrap();
                parent = id;
            }
        }
        other => panic!("unknown child mode {other}"),
    }
}
