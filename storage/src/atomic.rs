//! Whole-file writes that readers never see half done.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to a temp file next to `path`, syncs it, then renames it over `path`, so a
/// reader sees the old or the new file, never half of one, and a failed write leaves no
/// partial file. A replaced file keeps its mode; a new one is private (0600), since exports
/// and sessions can hold secrets. The error names the file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let named = |e: std::io::Error, what: &str, at: &Path| {
        std::io::Error::new(e.kind(), format!("cannot {what} {}: {e}", at.display()))
    };
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| named(e, "create a file in", dir))?;
    tmp.write_all(bytes).map_err(|e| named(e, "write", path))?;
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
