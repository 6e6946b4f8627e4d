//! One session file at a path the user named (`--session FILE`, RPC `switch_session`).
//!
//! A [`crate::JsonlStore`] finds a session by id among the files of its directories, so a
//! backup copy with the same header id, or a symlink the store's walk skips, could be picked
//! instead of the file that was named. Pi writes to exactly the path it was given; this store
//! holds that one path and nothing else: every read and write goes to it, and a session with
//! any other id is not found.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{IoResultExt, StoreError, StoreResult};
use crate::ids::SessionId;
use crate::jsonl::{read_header_line, summarize_file, sync_dir, CreateMode, JsonlWriter};
use crate::record::{check_lines, SessionData, SessionHeader, StoredEntry};
use crate::store::{FsyncPolicy, SessionStore, SessionWriter};
use crate::summary::{ListScope, SessionSummary};

/// The session file at one path.
#[derive(Debug, Clone)]
pub struct JsonlFileStore {
    path: PathBuf,
    fsync: FsyncPolicy,
}

impl JsonlFileStore {
    /// The store of the session at `path` (which may not exist yet, or be empty: then the
    /// first [`SessionStore::create_session`] writes it there, as Pi does for `--session NEW`).
    pub fn new(path: impl Into<PathBuf>, fsync: FsyncPolicy) -> JsonlFileStore {
        JsonlFileStore {
            path: path.into(),
            fsync,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fails unless the file's header carries `id`.
    fn check_id(&self, id: &SessionId) -> StoreResult<()> {
        let header = read_header_line(&self.path)?;
        if header.id() == id {
            Ok(())
        } else {
            Err(self.not_found(id))
        }
    }

    fn not_found(&self, id: &SessionId) -> StoreError {
        StoreError::SessionNotFound {
            id: id.clone(),
            store: self.describe(),
        }
    }
}

impl SessionStore for JsonlFileStore {
    fn name(&self) -> &'static str {
        "jsonl"
    }

    fn describe(&self) -> String {
        format!("jsonl file {}", self.path.display())
    }

    fn create_session(
        &self,
        header: &SessionHeader,
        entries: &[StoredEntry],
    ) -> StoreResult<Box<dyn SessionWriter>> {
        check_lines(header.id(), entries)?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).context("create directory", dir)?;
        }
        let writer = JsonlWriter::create_at(
            &self.path,
            header,
            entries,
            self.fsync,
            CreateMode::NewOrEmpty,
        )?;
        if self.fsync == FsyncPolicy::EveryEntry {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                sync_dir(dir)?;
            }
        }
        Ok(Box::new(writer))
    }

    fn open_writer(&self, id: &SessionId) -> StoreResult<Box<dyn SessionWriter>> {
        self.check_id(id)?;
        Ok(Box::new(JsonlWriter::open_at(&self.path, id, self.fsync)?))
    }

    fn read_header(&self, id: &SessionId) -> StoreResult<SessionHeader> {
        let header = read_header_line(&self.path)?;
        if header.id() == id {
            Ok(header)
        } else {
            Err(self.not_found(id))
        }
    }

    fn read_session(&self, id: &SessionId) -> StoreResult<SessionData> {
        self.check_id(id)?;
        let buf = fs::read(&self.path).context("read", &self.path)?;
        SessionData::from_jsonl(&self.path.display().to_string(), &buf)
    }

    fn list_sessions(&self, _scope: &ListScope) -> StoreResult<Vec<SessionSummary>> {
        match summarize_file(&self.path) {
            Ok(summary) => Ok(summary.into_iter().collect()),
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }

    fn session_ids(&self) -> StoreResult<Vec<SessionId>> {
        Ok(read_header_line(&self.path)
            .ok()
            .map(|h| h.id().clone())
            .into_iter()
            .collect())
    }

    fn delete_session(&self, id: &SessionId) -> StoreResult<()> {
        self.check_id(id)?;
        let file = fs::File::open(&self.path).context("open", &self.path)?;
        crate::lock::try_lock(&file, id, &self.path)?;
        fs::remove_file(&self.path).context("delete", &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(id: &str) -> SessionHeader {
        SessionHeader::parse(
            format!(
                r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}}"#
            )
            .into_bytes(),
        )
        .unwrap()
    }

    fn entry(id: &str) -> StoredEntry {
        StoredEntry::from_line(
            format!(r#"{{"type":"label","id":"{id}","parentId":null}}"#).into_bytes(),
        )
    }

    #[test]
    fn writes_go_to_the_named_file_not_to_a_copy_with_the_same_id() {
        let dir = tempfile::tempdir().unwrap();
        let named = dir.path().join("mine.jsonl");
        // The copy sorts first and carries the id in its name, where a lookup by id looks first.
        let copy = dir.path().join("2026-01-01T00-00-00-000Z_s1.jsonl");
        let store = JsonlFileStore::new(&named, FsyncPolicy::Never);
        store.create_session(&header("s1"), &[]).unwrap();
        fs::copy(&named, &copy).unwrap();
        let mut w = store.open_writer(header("s1").id()).unwrap();
        w.append(&[entry("a1")]).unwrap();
        assert!(fs::read_to_string(&named).unwrap().contains("\"a1\""));
        assert!(!fs::read_to_string(&copy).unwrap().contains("\"a1\""));
    }

    #[test]
    fn an_empty_file_becomes_the_session_and_a_full_one_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.jsonl");
        fs::write(&path, "").unwrap();
        let store = JsonlFileStore::new(&path, FsyncPolicy::Never);
        store.create_session(&header("s1"), &[entry("a1")]).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(r#"{"type":"session""#) && text.contains("\"a1\""));
        let again = store.create_session(&header("s2"), &[]);
        assert!(matches!(again, Err(StoreError::SessionExists { .. })));
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn another_id_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let store = JsonlFileStore::new(&path, FsyncPolicy::Never);
        store.create_session(&header("s1"), &[]).unwrap();
        assert!(matches!(
            store.open_writer(header("s2").id()),
            Err(StoreError::SessionNotFound { .. })
        ));
    }
}
