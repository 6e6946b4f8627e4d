//! Streamed tool-call arguments: the tolerant partial-JSON parser re-reads the
//! text after every fragment a provider sends, so it sees every prefix of
//! whatever the model (or a hostile endpoint) produces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_agent::llm::json_stream::{parse_partial, parse_tool_arguments, partial_object, ToolArgs};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    assert!(partial_object(text).is_object());
    if let Some(v) = parse_partial(text) {
        let _ = v.to_string();
    }
    // A complete object reads the same strictly and tolerantly.
    if let Ok(strict @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        assert_eq!(partial_object(text), strict);
    }
    match parse_tool_arguments(text) {
        Ok(v) => assert!(v.is_object()),
        Err((fallback, _)) => assert!(fallback.is_object()),
    }
    // Streamed in a few fragments, as a provider would.
    let mut args = ToolArgs::new();
    let mut start = 0;
    for (i, _) in text.char_indices().step_by(64).skip(1) {
        assert!(args.append(&text[start..i]).is_object());
        start = i;
    }
    assert!(args.append(&text[start..]).is_object());
    let _ = args.finish();
});
