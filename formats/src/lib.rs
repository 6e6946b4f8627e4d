//! The Pi session file format, read and written losslessly.
//!
//! A session file is JSONL: line 1 is a `session` header, every further line is
//! an entry whose `id`/`parentId` fields form a tree. This crate knows the bytes:
//! how lines are framed ([`jsonl`]), how the few fields the tree needs are read
//! without materialising payloads ([`head`]), the header ([`header`]), how new
//! entries are laid out field for field as Pi writes them ([`entry`]), the
//! message union ([`message`]), and the v1/v2 → v3 migration ([`migrate`]).
//!
//! Nothing here rewrites what it reads: a line that came from a file is kept as
//! its original bytes, so writing it back is the identity.

#![forbid(unsafe_code)]

pub mod entry;
pub mod head;
pub mod header;
pub mod id;
pub mod import;
pub mod jsonl;
pub mod message;
pub mod migrate;
pub mod scan;
pub mod time;

pub use head::{EntryHead, ParentRef};
pub use jsonl::{Line, LineError, LineErrorKind};
