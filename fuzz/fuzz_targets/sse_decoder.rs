//! The SSE decoder on arbitrary bytes cut into arbitrary chunks: the events
//! must not depend on where the network split the stream.
//!
//! Input: byte 0 = number of cut points (mod 8), then that many cut offsets
//! (one byte each), then the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_agent::llm::sse::{SseDecoder, SseEvent};

fn decode_whole(stream: &[u8]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut events = d.feed(stream);
    events.extend(d.finish());
    events
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 8).min(rest.len());
    let (cuts, stream) = rest.split_at(n);
    let mut cuts: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c).min(stream.len()))
        .collect();
    cuts.sort_unstable();

    let whole = decode_whole(stream);

    let mut d = SseDecoder::new();
    let mut events = Vec::new();
    let mut at = 0;
    for cut in cuts.into_iter().chain([stream.len()]) {
        events.extend(d.feed(&stream[at..cut]));
        at = cut;
    }
    events.extend(d.finish());
    assert_eq!(events, whole, "chunking changed the events");

    // Byte by byte, the worst case for every boundary rule.
    if stream.len() <= 512 {
        let mut d = SseDecoder::new();
        let mut events = Vec::new();
        for b in stream.chunks(1) {
            events.extend(d.feed(b));
        }
        events.extend(d.finish());
        assert_eq!(events, whole, "byte-wise feeding changed the events");
    }
});
