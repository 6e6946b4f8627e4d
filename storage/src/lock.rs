//! Advisory write locks (`flock`), one per session.
//!
//! The lock is held by an open file: it disappears when the writer is dropped or its process
//! dies, so a crash never leaves a session locked. `flock` locks belong to the open file
//! description, so two writers in one process exclude each other just like two processes.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use fs2::FileExt;

use crate::error::{IoResultExt, StoreError, StoreResult};
use crate::ids::SessionId;

/// Takes the exclusive lock on an open file, or reports who is in the way.
pub(crate) fn try_lock(file: &File, session: &SessionId, path: &Path) -> StoreResult<()> {
    match file.try_lock_exclusive() {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == fs2::lock_contended_error().raw_os_error() => {
            Err(StoreError::SessionLocked {
                session: session.clone(),
                path: path.to_path_buf(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(StoreError::SessionLocked {
            session: session.clone(),
            path: path.to_path_buf(),
        }),
        Err(e) => Err(e).context("lock", path),
    }
}

/// A held lock on a sidecar file, for the database backends.
#[derive(Debug)]
pub(crate) struct LockFile {
    _file: File,
}

/// Locks `<dir>/<session>.lock`, creating the file. Session ids are escaped so that any id
/// (even one with `/`) names a file inside `dir`.
pub(crate) fn lock_session(dir: &Path, session: &SessionId) -> StoreResult<LockFile> {
    std::fs::create_dir_all(dir).context("create lock directory", dir)?;
    let path = dir.join(format!("{}.lock", escape_id(session.as_str())));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .context("open lock file", &path)?;
    try_lock(&file, session, &path)?;
    Ok(LockFile { _file: file })
}

/// The lock directory next to a database file: `<db>.locks/`.
pub(crate) fn lock_dir(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".locks");
    db.with_file_name(name)
}

fn escape_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cannot_escape_the_lock_dir() {
        assert_eq!(escape_id("../a.b"), "%2E%2E%2Fa%2Eb");
    }

    #[test]
    fn second_lock_in_process_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let id = SessionId::new("s");
        let held = lock_session(dir.path(), &id).unwrap();
        assert!(matches!(
            lock_session(dir.path(), &id),
            Err(StoreError::SessionLocked { .. })
        ));
        drop(held);
        assert!(lock_session(dir.path(), &id).is_ok());
    }
}
