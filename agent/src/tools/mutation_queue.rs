//! Serializes writes and edits of the same file (Pi's `withFileMutationQueue`).
//!
//! Tool calls of one assistant message may run in parallel; two edits of one file must not read
//! the same original and overwrite each other. Calls for different files still run in parallel.

use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::Weak;

use tokio::sync::Mutex as AsyncMutex;
use tokio::sync::OwnedMutexGuard;

type QueueMap = HashMap<PathBuf, Weak<AsyncMutex<()>>>;

fn queues() -> &'static Mutex<QueueMap> {
    static QUEUES: OnceLock<Mutex<QueueMap>> = OnceLock::new();
    QUEUES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The queue key: the real path, so two spellings of one file share a queue, or the path itself
/// when it does not exist yet.
fn queue_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Waits for earlier mutations of `path` to finish; the guard holds the file until dropped.
pub(crate) async fn lock_file(path: &Path) -> OwnedMutexGuard<()> {
    let key = queue_key(path);
    let mutex = {
        // A poisoned map only means another thread panicked while holding it; the map itself is
        // still consistent, so keep using it.
        let mut map = queues()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.retain(|_, weak| weak.strong_count() > 0);
        match map.get(&key).and_then(Weak::upgrade) {
            Some(existing) => existing,
            None => {
                let created = Arc::new(AsyncMutex::new(()));
                map.insert(key, Arc::downgrade(&created));
                created
            }
        }
    };
    mutex.lock_owned().await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn same_file_waits_other_file_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        let guard = lock_file(&a).await;
        // Another file is free at once.
        let other = tokio::time::timeout(Duration::from_millis(200), lock_file(&b)).await;
        assert!(other.is_ok());
        // The same file waits until the first guard is dropped.
        let blocked = tokio::time::timeout(Duration::from_millis(100), lock_file(&a)).await;
        assert!(blocked.is_err());
        drop(guard);
        let free = tokio::time::timeout(Duration::from_millis(200), lock_file(&a)).await;
        assert!(free.is_ok());
    }
}
