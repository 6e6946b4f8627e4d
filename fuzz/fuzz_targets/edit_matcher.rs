//! The edit tool's matcher, splicer and diff on arbitrary file text and edits.
//!
//! Input: `file \0 old \0 new [\0 old \0 new]…` (invalid UTF-8 decoded lossily,
//! as the tool decodes files). Byte 0 picks the argument shape: `edits[]`, the
//! legacy top-level `oldText`/`newText`, or `edits` as a JSON string.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_agent::tools::edit_text;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut parts = text.split('\0');
    let file = parts.next().unwrap_or("");
    let rest: Vec<&str> = parts.collect();
    let edits: Vec<Value> = rest
        .chunks(2)
        .take(8)
        .map(|p| json!({"oldText": p[0], "newText": p.get(1).copied().unwrap_or("")}))
        .collect();
    let args = match (shape % 3, edits.first()) {
        (1, Some(first)) => {
            json!({"path": "f.txt", "oldText": first["oldText"], "newText": first["newText"]})
        }
        (2, _) => json!({"path": "f.txt", "edits": Value::Array(edits.clone()).to_string()}),
        _ => json!({"path": "f.txt", "edits": edits}),
    };
    if let Ok((new_text, _diff)) = edit_text(file, args, "f.txt") {
        // A BOM survives every edit (an edit may add one of its own).
        assert!(!file.starts_with('\u{feff}') || new_text.starts_with('\u{feff}'));
    }
});
