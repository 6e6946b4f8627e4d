//! Text rows' text, read back from the session files.
//!
//! The full-text table is contentless: for a JSONL session a text row records only where its
//! entry line is in the file and which of the line's extracted parts it is. Its text is that
//! line read again and put through the same [`extract`], so it is the text that was indexed
//! for as long as the file still holds those bytes (a refresh runs before every search, and
//! a file rewritten under a running search gives an empty snippet, never another entry's).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use super::extract::extract;

/// Where one row's text is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextPlace {
    /// The session file.
    pub path: String,
    /// Byte offset and length of the entry line.
    pub offset: u64,
    pub len: u64,
    /// Which of [`extract`]'s parts of the line.
    pub part: usize,
}

/// Reads texts back, keeping each file open across the rows of one search.
#[derive(Debug, Default)]
pub(crate) struct TextReader {
    files: HashMap<String, Option<File>>,
}

impl TextReader {
    /// The text of the row at `place`; `None` if the file or line is not there any more.
    pub fn text(&mut self, place: &TextPlace) -> Option<String> {
        let file = self
            .files
            .entry(place.path.clone())
            .or_insert_with(|| File::open(&place.path).ok())
            .as_ref()?;
        let mut line = vec![0; usize::try_from(place.len).ok()?];
        file.read_exact_at(&mut line, place.offset).ok()?;
        extract(&line)?
            .parts
            .into_iter()
            .nth(place.part)
            .map(|p| p.text)
    }
}
