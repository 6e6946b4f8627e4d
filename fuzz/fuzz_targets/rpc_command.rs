//! The RPC command decoder: one stdin record, as `pi --mode rpc` reads it, to a typed command
//! or the error response it gets.
//!
//! Input: if the first byte is below 0x80 the rest is the record as sent; otherwise the first
//! byte picks a command `type` and the rest is spliced after `{"type":"<kind>",`, so the fuzzer
//! spends its time on each command's fields rather than on finding the spelling of a type.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_agent::protocol::command::{decode_record, decode_value, record_content, Decoded};

const KINDS: &[&str] = &[
    "prompt", "steer", "follow_up", "abort", "clear_queue", "new_session", "get_state",
    "set_model", "cycle_model", "get_available_models", "set_thinking_level",
    "cycle_thinking_level", "get_available_thinking_levels", "set_steering_mode",
    "set_follow_up_mode", "compact", "set_auto_compaction", "set_auto_retry", "abort_retry",
    "bash", "abort_bash", "get_session_stats", "export_html", "switch_session", "fork", "clone",
    "get_fork_messages", "get_entries", "get_tree", "get_last_assistant_text",
    "set_session_name", "get_messages", "get_commands",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let record: Vec<u8> = if pick < 0x80 {
        rest.to_vec()
    } else {
        let kind = KINDS[pick as usize % KINDS.len()];
        let mut r = format!("{{\"type\":\"{kind}\",").into_bytes();
        r.extend_from_slice(rest);
        r
    };
    let decoded = decode_record(&record);
    let content = record_content(&record);
    match &decoded {
        Decoded::Blank => assert!(content.iter().all(u8::is_ascii_whitespace)),
        Decoded::Rejected(r) => {
            let parsed = pi_formats::jsonl::parse_value(content);
            // A parse rejection exactly when the record is not JSON (as JSON.parse reads it:
            // `parse_value`); otherwise the response
            // carries the record's own id.
            assert_eq!(r.command == "parse", parsed.is_err(), "{r:?}");
            if let Ok(v) = parsed {
                assert_eq!(r.id.as_ref(), v.get("id"));
            }
        }
        Decoded::Command(req) => {
            // What the decoder understood, written back the way Pi's client sends it,
            // decodes to the same command, through the value and through the line.
            let v = req.to_value();
            assert_eq!(decode_value(&v), decoded);
            let mut line = serde_json::to_vec(&v).expect("a Value always serializes");
            line.push(b'\n');
            assert_eq!(decode_record(&line), decoded);
        }
    }
});
