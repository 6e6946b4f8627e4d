//! Bounded resources in the streaming parsers: inputs far larger or deeper than any real
//! provider sends must be handled linearly and without recursion (the test harness's
//! threads have 2 MiB stacks).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_agent::llm::json_stream::partial_object;
use pi_agent::llm::sse::SseDecoder;

/// Streamed tool-call arguments are re-parsed tolerantly after every fragment;
/// a model (or a hostile endpoint) can send arbitrarily deep brackets.
#[test]
fn tool_arguments_nested_a_million_levels_deep() {
    let text = format!(r#"{{"a":{}"#, "[".repeat(1_000_000));
    assert!(partial_object(&text).is_object());
    let text = format!(r#"{{"a":{}"#, r#"{"b":"#.repeat(1_000_000));
    assert!(partial_object(&text).is_object());
}

/// A 50 MB `data:` line arriving in 16 KiB reads: linear, one event.
#[test]
fn a_50_mb_sse_event() {
    let mut stream = b"event: message\ndata: ".to_vec();
    stream.extend(vec![b'y'; 50 << 20]);
    stream.extend_from_slice(b"\n\n");
    let mut d = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in stream.chunks(16 << 10) {
        events.extend(d.feed(chunk));
    }
    events.extend(d.finish());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data.len(), 50 << 20);
}
