//! The crate's one error type.
//!
//! Variants say what the caller was doing and name the thing involved (session id, file, line);
//! the backend's own error (io, redb, SQLite) travels as the boxed `source`, so no backend type
//! appears in a signature.

use std::path::{Path, PathBuf};

use crate::ids::{EntryId, SessionId};

/// The boxed cause of a backend failure.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result alias used by every fallible function of this crate.
pub type StoreResult<T> = Result<T, StoreError>;

/// Everything that can go wrong in a session store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What we were doing, e.g. "append to", "read".
        action: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The io error.
        #[source]
        source: std::io::Error,
    },
    /// A database operation failed (redb or SQLite).
    #[error("cannot {action} in {location}: {source}")]
    Database {
        /// What we were doing, e.g. "append entries".
        action: &'static str,
        /// The database file (and session, when one is involved).
        location: String,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
    /// No session with this id exists in the store.
    #[error("session {id} not found in {store}")]
    SessionNotFound {
        /// The id asked for.
        id: SessionId,
        /// Which store was searched.
        store: String,
    },
    /// No entry with this id exists in the session.
    #[error("entry {entry} not found in session {session}")]
    EntryNotFound {
        /// The session searched.
        session: SessionId,
        /// The entry id asked for.
        entry: EntryId,
    },
    /// A session with this id already exists (creating it again would lose data).
    #[error("session {id} already exists at {location}")]
    SessionExists {
        /// The session id.
        id: SessionId,
        /// Where the existing session is.
        location: String,
    },
    /// Another writer (this process or another) holds the session's lock.
    #[error("session {session} is locked by another writer ({})", path.display())]
    SessionLocked {
        /// The session id.
        session: SessionId,
        /// The locked file: the session file, a lock file, or the database.
        path: PathBuf,
    },
    /// The database is opened by another process (redb allows one process at a time).
    #[error("store {} is in use by another process", path.display())]
    StoreLocked {
        /// The database file.
        path: PathBuf,
    },
    /// A line that should be a session header is not one.
    #[error("{location}: line {line}: not a session header: {reason}")]
    InvalidHeader {
        /// The file or session the header came from.
        location: String,
        /// 1-based line number.
        line: u64,
        /// Why it was refused.
        reason: String,
    },
    /// An entry line that cannot be stored (it would break line framing).
    #[error("session {session}: invalid entry line: {reason}")]
    InvalidLine {
        /// The session being written.
        session: SessionId,
        /// Why it was refused.
        reason: String,
    },
    /// A session id that cannot name a file.
    #[error("invalid session id {id:?}: {reason}")]
    InvalidSessionId {
        /// The offending id.
        id: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A `--session-store` value that does not parse.
    #[error("invalid session store {spec:?}: {reason}")]
    InvalidSpec {
        /// What was given.
        spec: String,
        /// What is expected instead.
        reason: String,
    },
    /// Stored data is inconsistent (e.g. a database written by a newer version).
    #[error("{location}: corrupt store: {reason}")]
    Corrupt {
        /// The file or session.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// A copy wrote a session but reading it back gave different bytes.
    #[error("session {id}: verification after copy failed: {reason}")]
    VerifyFailed {
        /// The session id.
        id: SessionId,
        /// The first difference found.
        reason: String,
    },
}

impl StoreError {
    /// Wraps a database error with what we were doing and where.
    pub(crate) fn db(
        action: &'static str,
        location: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> StoreError {
        StoreError::Database {
            action,
            location: location.into(),
            source: source.into(),
        }
    }
}

/// Attaches the path (and what we were doing) to an io error.
pub(crate) trait IoResultExt<T> {
    fn context(self, action: &'static str, path: &Path) -> StoreResult<T>;
}

impl<T> IoResultExt<T> for std::io::Result<T> {
    fn context(self, action: &'static str, path: &Path) -> StoreResult<T> {
        self.map_err(|source| StoreError::Io {
            action,
            path: path.to_path_buf(),
            source,
        })
    }
}
