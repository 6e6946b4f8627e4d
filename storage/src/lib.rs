//! Session storage for pi in Rust: one [`SessionStore`] trait, four real backends.
//!
//! A Pi session is a header line plus entry lines (JSONL). Every backend keeps each line's
//! exact bytes and never re-serializes what it was given, so a session goes in and comes
//! back — or moves between backends — byte for byte. The trait moves [`StoredEntry`] records:
//! the raw line plus the id, parent id and type read from it once.
//!
//! * [`JsonlStore`] (default): Pi's own files and directory layout, so Pi and this program can
//!   share `~/.pi/agent/sessions`. Appends are `O_APPEND` whole-line writes under an advisory
//!   `flock`; a torn last line is never rewritten.
//! * [`RedbStore`] (`redb:PATH`) and [`SqliteStore`] (`sqlite:PATH`): database files keyed by
//!   (session, sequence number) with an entry-id index, so a path to the root is a chain of
//!   keyed lookups, and with per-session summary rows kept current on append, so listing does
//!   not read entries.
//! * [`PostgresStore`] (`postgres://user@host:port/db`): the same tables on a PostgreSQL
//!   server shared by many machines; one writer per session across all of them through
//!   advisory locks.
//!
//! Summaries follow Pi 1.6's `buildSessionInfo` in one place ([`summary`]); Pi's lazy file
//! creation is [`LazySession`]; migration between stores, import of any Pi version, export and
//! verification are in [`transfer`].
//!
//! ```
//! use pi_storage::{JsonlLayout, JsonlStore, FsyncPolicy, SessionHeader, SessionStore, StoredEntry};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = JsonlStore::open(JsonlLayout::Flat { dir: dir.path().into() }, FsyncPolicy::default());
//! let header = SessionHeader::parse(
//!     br#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#.to_vec(),
//! ).unwrap();
//! let mut writer = store.create_session(&header, &[]).unwrap();
//! writer.append(&[StoredEntry::from_line(br#"{"type":"label","id":"a1","parentId":null}"#.to_vec())]).unwrap();
//! let session = store.read_session(header.id()).unwrap();
//! assert_eq!(session.entries[0].id().unwrap().as_str(), "a1");
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod atomic;
pub mod error;
pub mod history;
pub mod ids;
pub mod jsonl;
pub mod jsonl_file;
pub mod lazy;
mod lock;
pub mod opencode_db;
pub mod paths;
pub mod postgres;
pub mod record;
pub mod redb_store;
pub mod spec;
pub mod sqlite;
pub mod store;
pub mod summary;
pub mod transfer;
mod walk;

pub use error::{StoreError, StoreResult};
pub use ids::{EntryId, SessionId};
pub use jsonl::{JsonlLayout, JsonlStore};
pub use jsonl_file::JsonlFileStore;
pub use lazy::LazySession;
pub use postgres::{PgUrl, PostgresStore};
pub use record::{SessionData, SessionHeader, StoredEntry};
pub use redb_store::RedbStore;
pub use spec::{open_store, resolve_store_spec, StoreOptions, StoreSpec};
pub use sqlite::SqliteStore;
pub use store::{walk_path, FsyncPolicy, SessionStore, SessionWriter};
pub use summary::{ListScope, SessionSummary, SummaryState};
pub use transfer::{
    copy_sessions, export_jsonl, export_to_file, import_jsonl, verify_session, CopyAction,
    CopyReport, ImportOutcome, VerifyReport,
};
pub use walk::set_warning_sink;
