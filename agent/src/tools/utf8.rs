//! A streaming, lossy UTF-8 decoder: what Node's `TextDecoder` does with `{stream: true}`.
//!
//! Tools read files and pipes in chunks, and a chunk boundary can split a multi-byte character.
//! The decoder holds back an incomplete sequence at the end of a chunk until the next one arrives,
//! and replaces invalid bytes with U+FFFD, so decoding in chunks gives the same text as decoding
//! everything at once.

/// Decoder state: the bytes of a character split across chunks.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub(crate) fn new() -> Self {
        Utf8Stream::default()
    }

    /// Appends the text of `bytes` to `out`, keeping an incomplete trailing sequence for later.
    pub(crate) fn decode_into(&mut self, bytes: &[u8], out: &mut String) {
        if self.pending.is_empty() {
            self.decode_complete(bytes, out, false);
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(bytes);
            self.decode_complete(&joined, out, false);
        }
    }

    /// The text of `bytes` as a new string.
    pub(crate) fn decode(&mut self, bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len());
        self.decode_into(bytes, &mut out);
        out
    }

    /// Flushes a held-back incomplete sequence as U+FFFD.
    pub(crate) fn finish(&mut self) -> String {
        let pending = std::mem::take(&mut self.pending);
        let mut out = String::new();
        self.decode_complete(&pending, &mut out, true);
        out
    }

    fn decode_complete(&mut self, mut bytes: &[u8], out: &mut String, last: bool) {
        loop {
            match std::str::from_utf8(bytes) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(error) => {
                    let valid = error.valid_up_to();
                    // The prefix is valid by construction; from_utf8 of it cannot fail.
                    out.push_str(std::str::from_utf8(&bytes[..valid]).unwrap_or_default());
                    match error.error_len() {
                        Some(invalid) => {
                            out.push('\u{FFFD}');
                            bytes = &bytes[valid + invalid..];
                        }
                        None if last => {
                            out.push('\u{FFFD}');
                            return;
                        }
                        None => {
                            self.pending.extend_from_slice(&bytes[valid..]);
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_character_is_joined() {
        let bytes = "aé😀z".as_bytes();
        for cut in 0..=bytes.len() {
            let mut decoder = Utf8Stream::new();
            let mut text = decoder.decode(&bytes[..cut]);
            text.push_str(&decoder.decode(&bytes[cut..]));
            text.push_str(&decoder.finish());
            assert_eq!(text, "aé😀z", "cut at {cut}");
        }
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut decoder = Utf8Stream::new();
        let mut text = decoder.decode(b"a\xffb\xe2\x82");
        text.push_str(&decoder.finish());
        assert_eq!(text, "a\u{FFFD}b\u{FFFD}");
        assert_eq!(text, String::from_utf8_lossy(b"a\xffb\xe2\x82"));
    }
}
