//! The JSONL line framing and the entry head parser on arbitrary bytes.
//!
//! Checks beyond "no panic": the lines cover the input exactly, and the fast head
//! parser agrees with the full-value path on every field the tree reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_formats::head::EntryHead;
use pi_formats::jsonl;

fuzz_target!(|data: &[u8]| {
    let mut covered = 0usize;
    for line in jsonl::lines(data) {
        assert_eq!(line.start, covered, "lines are contiguous");
        covered = line.end() + usize::from(line.terminated);
        if line.is_blank() {
            continue;
        }
        match jsonl::parse_value(line.bytes) {
            Ok(value) => {
                let head = EntryHead::parse(line.bytes).expect("valid JSON has a head");
                let slow = EntryHead::from_value(&value);
                assert_eq!(head.kind, slow.kind);
                assert_eq!(head.id, slow.id);
                assert_eq!(head.parent, slow.parent);
                assert_eq!(head.timestamp, slow.timestamp);
                assert_eq!(head.role, slow.role);
                assert_eq!(head.target_id, slow.target_id);
                assert_eq!(head.label, slow.label);
                assert_eq!(head.name, slow.name);
                assert_eq!(
                    head.version.map(f64::to_bits),
                    slow.version.map(f64::to_bits)
                );
                // Falsy exactly as JSON.parse's value is (`1e999` is Infinity, truthy).
                let kept = jsonl::parse_truthy(line.bytes).expect("parsed above");
                assert_eq!(head.falsy, kept.is_none());
                if let Some(kept) = kept {
                    assert_eq!(kept, value);
                }
            }
            Err(reason) => {
                assert!(EntryHead::parse(line.bytes).is_err());
                let _ = jsonl::line_error(&line, reason).to_string();
            }
        }
    }
    assert_eq!(covered, data.len(), "lines cover the input");
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = jsonl::js_trim(text);
    }
});
