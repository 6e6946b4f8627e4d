//! A server-sent-events decoder (WHATWG HTML "event stream interpretation").
//!
//! It is fed raw bytes as they arrive from the network, in chunks of any size: a line, a
//! CRLF pair or a UTF-8 sequence may be split across reads. Lines end with `\n`, `\r\n` or a
//! lone `\r`; a `\r` at the very end of a chunk is remembered so that a `\n` opening the next
//! chunk is not taken for an empty line (which would dispatch an event early).
//!
//! Departure from the spec, on purpose: [`SseDecoder::finish`] dispatches an event that the
//! stream did not terminate with a blank line. Pi's Anthropic reader does the same, and a
//! proxy that drops the final blank line should not lose the last event.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type `message`.
    pub event: Option<String>,
    /// All `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` seen so far (sticky across events, per the spec).
    pub id: Option<String>,
}

/// Incremental SSE decoder.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: skip one leading `\n`.
    after_cr: bool,
    /// Whether the stream's first bytes were checked for a BOM.
    bom_checked: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    /// The last valid `retry:` field: the server's reconnection time in milliseconds.
    retry_ms: Option<u64>,
}

impl SseDecoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed the next chunk; returns the events it completed, in order.
    pub fn feed(&mut self, mut chunk: &[u8]) -> Vec<SseEvent> {
        let out = Vec::new();
        if !self.bom_checked && !chunk.is_empty() {
            // The BOM may itself be split across chunks; wait until 3 bytes are available.
            let mut probe = std::mem::take(&mut self.line);
            probe.extend_from_slice(chunk);
            if probe.len() < 3 && b"\xEF\xBB\xBF".starts_with(&probe) {
                self.line = probe;
                return out;
            }
            self.bom_checked = true;
            let start = if probe.starts_with(b"\xEF\xBB\xBF") {
                3
            } else {
                0
            };
            // Re-run with the probe as the chunk (the line buffer was empty before the BOM check).
            let probe = probe[start..].to_vec();
            return self.feed_lines(&probe, out);
        }
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        self.feed_lines(chunk, out)
    }

    fn feed_lines(&mut self, chunk: &[u8], mut out: Vec<SseEvent>) -> Vec<SseEvent> {
        let mut i = 0;
        while i < chunk.len() {
            match memchr2(b'\n', b'\r', &chunk[i..]) {
                None => {
                    self.line.extend_from_slice(&chunk[i..]);
                    break;
                }
                Some(off) => {
                    let end = i + off;
                    self.line.extend_from_slice(&chunk[i..end]);
                    let line = std::mem::take(&mut self.line);
                    if let Some(ev) = self.process_line(&line) {
                        out.push(ev);
                    }
                    if chunk[end] == b'\r' {
                        if end + 1 < chunk.len() {
                            i = if chunk[end + 1] == b'\n' {
                                end + 2
                            } else {
                                end + 1
                            };
                        } else {
                            self.after_cr = true;
                            i = end + 1;
                        }
                    } else {
                        i = end + 1;
                    }
                }
            }
        }
        out
    }

    /// End of stream: processes an unterminated last line and returns a pending event.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut dispatched = None;
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            dispatched = self.process_line(&line);
        }
        dispatched.or_else(|| self.dispatch())
    }

    fn process_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None; // comment
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.find(':') {
            Some(pos) => {
                let v = &text[pos + 1..];
                (&text[..pos], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // Per spec an id containing NUL is ignored.
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            // The reconnection time, kept for clients that resume a broken stream; a value
            // that is not all ASCII digits is ignored per spec, as are unknown fields.
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        None
    }

    /// The reconnection time the stream set with `retry:` so far (it needs no event: a
    /// server may send it in a data-less priming block before closing the stream).
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if !self.has_data {
            // Spec: an event without data is not dispatched, and its type is reset.
            self.event = None;
            return None;
        }
        self.has_data = false;
        Some(SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
        })
    }
}

fn memchr2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == a || c == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(d.feed(c));
        }
        out.extend(d.finish());
        out
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
            id: None,
        }
    }

    #[test]
    fn retry_is_kept_without_an_event_and_junk_values_are_ignored() {
        let mut d = SseDecoder::new();
        assert_eq!(d.retry_ms(), None);
        assert!(d.feed(b"id: 1\nretry: 250\n\n").is_empty());
        assert_eq!(d.retry_ms(), Some(250));
        d.feed(b"retry: 1.5\nretry: -3\nretry:\n\n");
        assert_eq!(d.retry_ms(), Some(250));
        d.feed(b"retry:40\n\n");
        assert_eq!(d.retry_ms(), Some(40));
    }

    #[test]
    fn basic_events_and_line_endings() {
        let input = b"event: a\ndata: 1\n\ndata: x\r\ndata: y\r\n\r\n: comment\rdata:z\r\r";
        assert_eq!(
            decode_all(&[input]),
            vec![ev(Some("a"), "1"), ev(None, "x\ny"), ev(None, "z")]
        );
    }

    #[test]
    fn field_parsing_rules() {
        // No colon: whole line is the field name with empty value; only one leading space
        // is stripped; unknown fields ignored; data-less events are not dispatched.
        let input = b"data\n\ndata:  two spaces\nfoo: bar\n\nevent: lonely\n\ndata: after\n\n";
        assert_eq!(
            decode_all(&[input]),
            vec![ev(None, ""), ev(None, " two spaces"), ev(None, "after")]
        );
    }

    #[test]
    fn id_is_sticky_and_bom_is_stripped() {
        let input = "\u{feff}id: 7\ndata: a\n\ndata: b\n\n".as_bytes();
        let got = decode_all(&[input]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].id.as_deref(), Some("7"));
        assert_eq!(got[1].id.as_deref(), Some("7"));
        assert_eq!(got[0].data, "a");
    }

    #[test]
    fn unterminated_last_event_is_flushed_at_finish() {
        assert_eq!(decode_all(&[b"data: [DONE]"]), vec![ev(None, "[DONE]")]);
        assert_eq!(decode_all(&[b"data: a\n"]), vec![ev(None, "a")]);
    }

    /// Every split point of a stream exercising all line endings, multi-byte UTF-8, a BOM and
    /// comments must decode exactly as the unsplit stream does.
    #[test]
    fn every_chunk_boundary_gives_the_same_events() {
        let input = "\u{feff}event: message_start\r\ndata: {\"a\":\"é😀\"}\r\n\r\n: keepalive\n\
                     data: line1\rdata: line2\r\rid: 42\ndata:\n\nevent: x\ndata: tail\n\n"
            .as_bytes();
        let expected = decode_all(&[input]);
        assert_eq!(expected.len(), 4, "{expected:?}");
        assert_eq!(expected[0].data, "{\"a\":\"é😀\"}");
        assert_eq!(expected[1].data, "line1\nline2");
        assert_eq!(expected[2].data, "");
        for i in 0..=input.len() {
            let got = decode_all(&[&input[..i], &input[i..]]);
            assert_eq!(got, expected, "split at {i}");
        }
        for i in 0..=input.len() {
            for j in i..=input.len() {
                let got = decode_all(&[&input[..i], &input[i..j], &input[j..]]);
                assert_eq!(got, expected, "split at {i},{j}");
            }
        }
        // One byte at a time.
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(decode_all(&bytes), expected);
    }

    #[test]
    fn cr_at_chunk_end_then_lf_is_one_line_break() {
        // "data: a\r" | "\n\n": the \r\n pair straddles chunks; the event must come out once.
        assert_eq!(decode_all(&[b"data: a\r", b"\n\r\n"]), vec![ev(None, "a")]);
        // "data: a\r" | "\r": two line breaks → dispatch.
        let mut d = SseDecoder::new();
        assert!(d.feed(b"data: a\r").is_empty());
        assert_eq!(d.feed(b"\r"), vec![ev(None, "a")]);
    }

    #[test]
    fn invalid_utf8_does_not_panic() {
        let got = decode_all(&[b"data: \xff\xfe\n\n"]);
        assert_eq!(got.len(), 1);
        assert!(got[0].data.contains('\u{fffd}'));
    }
}
