//! Pi's lazy session creation, for any store.
//!
//! Pi 1.6 (`_persist`/`_hasConversation`) writes nothing until the session holds a `user` or
//! `assistant` message: setup entries (model, thinking level) stay in memory, so starting and
//! quitting without chatting leaves no file. The first such message creates the session with
//! everything so far (header and buffered entries, `O_EXCL` for JSONL); later entries append.

use pi_formats::head::EntryHead;

use crate::error::StoreResult;
use crate::record::{SessionHeader, StoredEntry};
use crate::store::{SessionStore, SessionWriter};

/// A session that is created in its store when the conversation starts.
#[derive(Debug)]
pub struct LazySession {
    header: SessionHeader,
    pending: Vec<StoredEntry>,
    writer: Option<Box<dyn SessionWriter>>,
}

impl LazySession {
    /// A new session, not yet in any store.
    pub fn new(header: SessionHeader) -> LazySession {
        LazySession {
            header,
            pending: Vec::new(),
            writer: None,
        }
    }

    /// A session that already exists (opened with [`SessionStore::open_writer`]).
    pub fn resume(header: SessionHeader, writer: Box<dyn SessionWriter>) -> LazySession {
        LazySession {
            header,
            pending: Vec::new(),
            writer: Some(writer),
        }
    }

    /// The header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Whether the session exists in the store yet.
    pub fn is_persisted(&self) -> bool {
        self.writer.is_some()
    }

    /// Entries held back until the conversation starts.
    pub fn pending(&self) -> &[StoredEntry] {
        &self.pending
    }

    /// Appends entries: buffered while there is no conversation, then created in `store` in
    /// one write (header + everything buffered), then appended directly.
    ///
    /// If creating or appending fails, the entries of this call are not kept, so memory never
    /// runs ahead of the store (Pi's `_appendEntry` rolls back the same way).
    pub fn append(&mut self, store: &dyn SessionStore, entries: &[StoredEntry]) -> StoreResult<()> {
        if let Some(writer) = &mut self.writer {
            return writer.append(entries);
        }
        let before = self.pending.len();
        self.pending.extend_from_slice(entries);
        if !self.pending.iter().any(is_conversation) {
            return Ok(());
        }
        match store.create_session(&self.header, &self.pending) {
            Ok(writer) => {
                self.writer = Some(writer);
                self.pending.clear();
                Ok(())
            }
            Err(e) => {
                self.pending.truncate(before);
                Err(e)
            }
        }
    }

    /// Forces appended entries to disk; nothing to do before the session exists.
    pub fn sync(&mut self) -> StoreResult<()> {
        match &mut self.writer {
            Some(writer) => writer.sync(),
            None => Ok(()),
        }
    }
}

/// A `message` entry whose role is `user` or `assistant`.
fn is_conversation(entry: &StoredEntry) -> bool {
    entry.kind() == "message"
        && EntryHead::parse(entry.line())
            .ok()
            .and_then(|h| h.role.map(|r| r == "user" || r == "assistant"))
            .unwrap_or(false)
}
