//! The `SessionStore` trait: what every backend provides.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::error::{StoreError, StoreResult};
use crate::ids::{EntryId, SessionId};
use crate::record::{SessionData, SessionHeader, StoredEntry};
use crate::summary::{ListScope, SessionSummary};

/// When appended entries are forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Every `append` call is on disk (fsync / durable commit) when it returns. The default:
    /// Pi appends a handful of entries per turn, so the cost is a few milliseconds per turn,
    /// and a crash or power loss never loses an entry the agent already acted on.
    #[default]
    EveryEntry,
    /// Appends reach the OS at once (a killed process loses nothing) but are forced to disk
    /// only by [`SessionWriter::sync`], which the engine calls at the end of each turn.
    TurnEnd,
    /// Never forced to disk; `sync` does nothing. For benchmarks and throwaway sessions.
    Never,
}

/// A store of sessions. Each session is a header line plus entry lines, kept byte for byte.
///
/// Contracts every backend keeps (checked by the conformance suite in `tests/`):
/// * **Lossless.** Lines come back exactly as given, in the order given, including blank,
///   malformed and duplicate-id lines. Export of a session is its header and lines, each
///   followed by a line feed.
/// * **Single writer.** Appending needs a [`SessionWriter`], and at most one exists per session
///   across all processes; another attempt gets [`StoreError::SessionLocked`]. Readers never
///   take the lock and may see a session while it grows.
/// * **Durable appends.** When `append` returns, the entries survive a crash of this process;
///   whether they also survive power loss depends on the [`FsyncPolicy`].
/// * **Ids.** A session is addressed by its header id. Entry ids may repeat within a session
///   (hand-edited files); lookups by entry id use the last line with that id, like Pi's index.
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// The backend's name: `"jsonl"`, `"redb"`, `"sqlite"` or `"postgres"`.
    fn name(&self) -> &'static str;

    /// Where the store lives, for messages (`sqlite:/path/db`, `jsonl:/dir`, ...).
    fn describe(&self) -> String;

    /// Creates a session with its header and first entries, written at once (durably, per the
    /// policy), and returns the writer for it.
    ///
    /// Fails with [`StoreError::SessionExists`] if the id is taken. Callers that want Pi's
    /// lazy creation (no file until the conversation starts) use [`crate::LazySession`].
    fn create_session(
        &self,
        header: &SessionHeader,
        entries: &[StoredEntry],
    ) -> StoreResult<Box<dyn SessionWriter>>;

    /// Takes the session's write lock and returns a writer that appends after its last line.
    fn open_writer(&self, id: &SessionId) -> StoreResult<Box<dyn SessionWriter>>;

    /// Reads the header line.
    fn read_header(&self, id: &SessionId) -> StoreResult<SessionHeader>;

    /// Reads the whole session: header and every line after it, in order.
    fn read_session(&self, id: &SessionId) -> StoreResult<SessionData>;

    /// The entries from the root down to `leaf` (root first), following `parentId` links as
    /// Pi's `getBranch` does: each parent is the last entry with that id; the walk stops at an
    /// entry without a (known) parent, and also where a parent link would revisit an entry
    /// (Pi loops forever on a cycle).
    ///
    /// The default reads the whole session; database backends walk an index instead.
    fn read_path(&self, id: &SessionId, leaf: &EntryId) -> StoreResult<Vec<StoredEntry>> {
        let data = self.read_session(id)?;
        walk_path(&data.entries, leaf).ok_or_else(|| StoreError::EntryNotFound {
            session: id.clone(),
            entry: leaf.clone(),
        })
    }

    /// The lines after the entry `cursor` (its last occurrence), in order: what a reader that
    /// has seen everything up to `cursor` is missing.
    fn read_after(&self, id: &SessionId, cursor: &EntryId) -> StoreResult<Vec<StoredEntry>> {
        let mut data = self.read_session(id)?;
        let at = data
            .entries
            .iter()
            .rposition(|e| e.id() == Some(cursor))
            .ok_or_else(|| StoreError::EntryNotFound {
                session: id.clone(),
                entry: cursor.clone(),
            })?;
        Ok(data.entries.split_off(at + 1))
    }

    /// Summaries of the sessions in scope, most recently modified first, computed as Pi's
    /// `buildSessionInfo` does (see [`crate::summary`]). Sessions Pi would not list are left out.
    fn list_sessions(&self, scope: &ListScope) -> StoreResult<Vec<SessionSummary>>;

    /// Every session id in the store, listable or not (what a migration copies).
    fn session_ids(&self) -> StoreResult<Vec<SessionId>>;

    /// Deletes a session. Fails with [`StoreError::SessionLocked`] while a writer holds it.
    fn delete_session(&self, id: &SessionId) -> StoreResult<()>;

    /// Whether a session with this id exists.
    fn contains(&self, id: &SessionId) -> StoreResult<bool> {
        match self.read_header(id) {
            Ok(_) => Ok(true),
            Err(StoreError::SessionNotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The one writer of a session. Dropping it releases the lock.
pub trait SessionWriter: Send + fmt::Debug {
    /// The session written to.
    fn session_id(&self) -> &SessionId;

    /// Appends lines after the session's last line, all or nothing as far as the backend allows
    /// (databases: one transaction; JSONL: one `write` of whole lines). Durable on return per
    /// the store's [`FsyncPolicy`]. Lines must not contain a line feed.
    fn append(&mut self, entries: &[StoredEntry]) -> StoreResult<()>;

    /// Forces everything appended so far to disk (the end of a turn under
    /// [`FsyncPolicy::TurnEnd`]). Does nothing under [`FsyncPolicy::Never`].
    fn sync(&mut self) -> StoreResult<()>;
}

/// Walks parent links from `leaf` to the root over entries in file order; root first.
/// `None` when no entry has the id `leaf`.
pub fn walk_path(entries: &[StoredEntry], leaf: &EntryId) -> Option<Vec<StoredEntry>> {
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        if let Some(id) = e.id() {
            by_id.insert(id.as_str(), i);
        }
    }
    let mut at = *by_id.get(leaf.as_str())?;
    let mut seen = HashSet::new();
    let mut path = Vec::new();
    while seen.insert(at) {
        let entry = &entries[at];
        path.push(entry.clone());
        match entry.parent_id().and_then(|p| by_id.get(p.as_str())) {
            Some(&parent) => at = parent,
            None => break,
        }
    }
    path.reverse();
    Some(path)
}
