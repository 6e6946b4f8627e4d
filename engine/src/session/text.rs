//! The bytes a [`Session`](super::Session) indexes: the file as opened, plus the
//! lines appended since.
//!
//! A large file is memory-mapped rather than read: reading 100 MB into a fresh
//! buffer costs more than indexing it (every page is faulted in as new anonymous
//! memory), and a mapped file only costs the pages actually touched. A warm open
//! (see `heads`) touches only the active path's lines, so a session of any size
//! opens in memory proportional to its entry count, not its bytes.
//!
//! Session files are append-only (Pi and this engine only ever append). A mapping
//! of a file that another program *truncates* while it is open would fault on the
//! lost pages; files below [`MAP_MIN_BYTES`] are therefore read, where that
//! matters least to speed, and big files are mapped.

use memmap2::Mmap;
use std::fs::File;
use std::sync::Arc;

/// Files at least this large are mapped instead of read.
pub(crate) const MAP_MIN_BYTES: u64 = 1 << 20;

#[derive(Debug)]
enum Base {
    Owned(Vec<u8>),
    Mapped(Mmap),
}

impl Base {
    fn bytes(&self) -> &[u8] {
        match self {
            Base::Owned(v) => v,
            Base::Mapped(m) => m,
        }
    }
}

/// The file's bytes (shared between clones) followed by appended lines.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    base: Arc<Base>,
    tail: Vec<u8>,
}

impl Default for Text {
    fn default() -> Self {
        Text::owned(Vec::new())
    }
}

impl Text {
    pub(crate) fn owned(bytes: Vec<u8>) -> Text {
        Text {
            base: Arc::new(Base::Owned(bytes)),
            tail: Vec::new(),
        }
    }

    /// Reads `file` (`len` bytes long): mapped when large, read otherwise.
    pub(crate) fn from_file(mut file: &File, len: u64) -> std::io::Result<Text> {
        if len < MAP_MIN_BYTES {
            let mut bytes = Vec::with_capacity(len as usize);
            std::io::Read::read_to_end(&mut file, &mut bytes)?;
            return Ok(Text::owned(bytes));
        }
        // SAFETY: the mapping is read-only and session files are only appended to;
        // see the module documentation for the truncation caveat.
        #[allow(unsafe_code)]
        let map = unsafe { Mmap::map(file)? };
        Ok(Text {
            base: Arc::new(Base::Mapped(map)),
            tail: Vec::new(),
        })
    }

    /// The bytes of the file as opened.
    pub(crate) fn base(&self) -> &[u8] {
        self.base.bytes()
    }

    pub(crate) fn len(&self) -> usize {
        self.base().len() + self.tail.len()
    }

    /// `len` bytes from `start`; a range never spans the file and the appended lines.
    pub(crate) fn slice(&self, start: usize, len: usize) -> &[u8] {
        let base = self.base();
        if start < base.len() {
            &base[start..start + len]
        } else {
            let s = start - base.len();
            &self.tail[s..s + len]
        }
    }

    /// Appends a line and its LF; returns where the line starts.
    pub(crate) fn push_line(&mut self, line: &[u8]) -> usize {
        let start = self.len();
        self.tail.extend_from_slice(line);
        self.tail.push(b'\n');
        start
    }

    /// Tells the kernel the mapped pages of `start..start + len` are not needed
    /// any more: they stay in the page cache but leave this process's resident set,
    /// so scanning a 2 GB file does not make the process 2 GB large.
    pub(crate) fn release(&self, start: usize, len: usize) {
        if let Base::Mapped(map) = &*self.base {
            // Only whole pages inside the range are released.
            let page = 4096;
            let first = start.div_ceil(page) * page;
            let end = (start + len) / page * page;
            if end > first {
                // SAFETY: MADV_DONTNEED on a read-only shared file mapping only drops
                // this process's page-table entries; the next access reads the same
                // bytes from the page cache or the file. No Rust reference observes
                // a change.
                #[allow(unsafe_code)]
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        first,
                        end - first,
                    )
                };
            }
        }
    }
}
