//! Whole-file writes that readers never see half done.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to a temp file next to `path`, syncs it, then renames it over `path`, so a
/// reader sees the old or the new file, never half of one, and a failed write leaves no
/// partial file. A replaced file keeps its mode; a new one is private (0600), since exports
/// and sessions can hold secrets. The error names the file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_with(path, |out| out.write_all(bytes))
}

/// [`write_atomically`] of what `write` produces, streamed into the temp file (through a
/// buffer) instead of held in memory first: for exports as large as a session. An error
/// from `write` leaves `path` as it was and no temp file behind.
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let named = |e: std::io::Error, what: &str, at: &Path| {
        std::io::Error::new(e.kind(), format!("cannot {what} {}: {e}", at.display()))
    };
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| named(e, "create a file in", dir))?;
    {
        let mut buffered = std::io::BufWriter::with_capacity(1 << 16, tmp.as_file_mut());
        write(&mut buffered)
            .and_then(|()| buffered.flush())
            .map_err(|e| named(e, "write", path))?;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        tmp.as_file()
            .set_permissions(meta.permissions())
            .map_err(|e| named(e, "write", path))?;
    }
    tmp.as_file()
        .sync_all()
        .map_err(|e| named(e, "write", path))?;
    tmp.persist(path)
        .map_err(|e| named(e.error, "write", path))?;
    // The rename itself is durable once the directory is synced.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_write_replaces_the_file_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.html");
        write_atomically(&path, b"old").unwrap();
        // A writer that fails halfway leaves the old file and no temp file.
        let err = write_atomically_with(&path, |out| {
            out.write_all(b"half")?;
            Err(std::io::Error::other("render failed"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("out.html"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // Many small writes arrive whole.
        write_atomically_with(&path, |out| {
            (0..100_000).try_for_each(|i| write!(out, "{i},"))
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("0,1,2,") && text.ends_with("99999,"));
    }
}
