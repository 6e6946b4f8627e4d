//! Walking a JSONL store's directories without following a symlink out of the store.
//!
//! Pi lists sessions with plain `fs` calls, so a symlinked cwd directory or session file is
//! followed wherever it points. We follow a link only when its resolved target stays inside
//! the store's root (itself resolved, so a root that is a symlink is fine): a link to a
//! directory elsewhere in the store works as in Pi, a link leading outside the store is
//! skipped with a warning, and a link that cannot be resolved (a loop, a missing target) is
//! skipped with a warning too. The walk is one or two levels deep and never recursive, and
//! `canonicalize` fails on a loop instead of spinning, so a link loop cannot hang it.
//!
//! Listing, `--session ID` resolution (through listing), the history index and search all
//! take their files from here, so they agree on what is in the store.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{IoResultExt, StoreResult};

/// What a directory entry is, for the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
}

/// The store root as the links inside it must resolve to; `None` if it does not exist.
pub(crate) fn resolved_root(root: &Path) -> Option<PathBuf> {
    fs::canonicalize(root).ok()
}

/// Whether `path` (an entry of a directory inside the store) is a `kind` to take.
/// A symlink counts only when its target is inside `root` (resolved); otherwise a warning
/// names it, once per process.
pub(crate) fn admit(root: &Path, path: &Path, kind: Kind) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false; // vanished since it was listed
    };
    if !meta.file_type().is_symlink() {
        return match kind {
            Kind::Dir => meta.is_dir(),
            Kind::File => meta.is_file(),
        };
    }
    let target = match fs::canonicalize(path) {
        Ok(target) => target,
        Err(e) => {
            warn_once(path, &format!("cannot resolve the symlink ({e})"));
            return false;
        }
    };
    if !target.starts_with(root) {
        warn_once(
            path,
            &format!(
                "the symlink points outside the session store, to {}",
                target.display()
            ),
        );
        return false;
    }
    match fs::metadata(&target) {
        Ok(m) => match kind {
            Kind::Dir => m.is_dir(),
            Kind::File => m.is_file(),
        },
        Err(_) => false,
    }
}

/// Entries of `dir` that are `kind` (links judged by [`admit`]), unsorted.
/// A missing `dir` has none.
pub(crate) fn entries(root: &Path, dir: &Path, kind: Kind) -> StoreResult<Vec<PathBuf>> {
    Ok(entries_with(root, dir, kind, false)?
        .into_iter()
        .map(|(path, _)| path)
        .collect())
}

/// [`entries`], each with its metadata when `stat` is set and the entry is not a link:
/// taken through the open directory (`statx` relative to its descriptor), which skips
/// resolving the whole path again — a fifth of an unchanged history refresh. A link, or an
/// entry whose `stat` failed, comes with `None` (the caller follows the link itself).
fn entries_with(
    root: &Path,
    dir: &Path,
    kind: Kind,
    stat: bool,
) -> StoreResult<Vec<(PathBuf, Option<fs::Metadata>)>> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).context("list", dir),
    };
    let mut out = Vec::new();
    for item in read {
        let item = item.context("list", dir)?;
        let path = item.path();
        if kind == Kind::File && path.extension() != Some(std::ffi::OsStr::new("jsonl")) {
            continue;
        }
        // The directory entry's own type (d_type) settles everything but a link without a
        // `stat`: listing a thousand sessions then costs a thousand fewer system calls.
        let (taken, link) = match item.file_type() {
            Ok(t) if !t.is_symlink() => (
                match kind {
                    Kind::Dir => t.is_dir(),
                    Kind::File => t.is_file(),
                },
                false,
            ),
            _ => (admit(root, &path, kind), true),
        };
        if taken {
            let meta = if stat && !link {
                item.metadata().ok()
            } else {
                None
            };
            out.push((path, meta));
        }
    }
    Ok(out)
}

/// The cwd directories of a per-cwd store, sorted; a directory reached twice (a link to a
/// sibling) is taken once, under its first name.
pub(crate) fn cwd_dirs(root: &Path) -> StoreResult<Vec<PathBuf>> {
    let Some(real_root) = resolved_root(root) else {
        return Ok(Vec::new());
    };
    let mut dirs = entries(&real_root, root, Kind::Dir)?;
    dirs.sort();
    let mut seen = HashSet::new();
    dirs.retain(|d| seen.insert(fs::canonicalize(d).unwrap_or_else(|_| d.clone())));
    Ok(dirs)
}

/// The `*.jsonl` session files of one directory of a store rooted at `root`, unsorted.
pub(crate) fn session_files(root: &Path, dir: &Path) -> StoreResult<Vec<PathBuf>> {
    Ok(session_files_with(root, dir, false)?
        .into_iter()
        .map(|(path, _)| path)
        .collect())
}

/// [`session_files`] with each plain file's metadata, `stat`ed relative to the directory
/// (see [`entries_with`]); `None` for links.
pub(crate) fn session_files_stat(
    root: &Path,
    dir: &Path,
) -> StoreResult<Vec<(PathBuf, Option<fs::Metadata>)>> {
    session_files_with(root, dir, true)
}

fn session_files_with(
    root: &Path,
    dir: &Path,
    stat: bool,
) -> StoreResult<Vec<(PathBuf, Option<fs::Metadata>)>> {
    let Some(real_root) = resolved_root(root) else {
        return Ok(Vec::new());
    };
    // A cwd directory named directly (`ListScope::Cwd`) is judged like a listed one.
    if dir != root && !admit(&real_root, dir, Kind::Dir) {
        return Ok(Vec::new());
    }
    entries_with(&real_root, dir, Kind::File, stat)
}

/// Whether writing into `dir` (a session directory of the store at `root`, maybe not yet
/// created) would leave the store through a symlink.
pub(crate) fn leaves_store(root: &Path, dir: &Path) -> bool {
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return false; // created as a plain directory
    };
    if !meta.file_type().is_symlink() {
        return false;
    }
    match (resolved_root(root), fs::canonicalize(dir)) {
        (Some(root), Ok(target)) => !target.starts_with(root),
        _ => true,
    }
}

/// Receives each warning about a skipped link (once per path and process).
type WarningSink = Box<dyn Fn(&str) + Send>;

static SINK: Mutex<Option<WarningSink>> = Mutex::new(None);

/// Sends warnings about skipped symlinks to `sink` instead of stderr, which is the default.
/// A full-screen UI installs one so a warning never writes over its screen.
pub fn set_warning_sink(sink: impl Fn(&str) + Send + 'static) {
    *SINK.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(sink));
}

fn warn_once(path: &Path, why: &str) {
    static WARNED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if !warned
        .get_or_insert_with(HashSet::new)
        .insert(path.to_path_buf())
    {
        return;
    }
    let message = format!("ignoring {}: {why}", path.display());
    match SINK.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        Some(sink) => sink(&message),
        // The store has no other channel to the user while listing; Pi's own warnings go
        // to stderr as well.
        None => eprintln!("pi: warning: {message}"),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn links_inside_are_followed_outside_and_loops_are_not() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("sessions");
        let outside = tmp.path().join("elsewhere");
        fs::create_dir_all(root.join("--a--")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("--a--/s_1.jsonl"), "x\n").unwrap();
        fs::write(outside.join("s_2.jsonl"), "x\n").unwrap();
        symlink(root.join("--a--"), root.join("--b--")).unwrap();
        symlink(&outside, root.join("--out--")).unwrap();
        symlink(root.join("--loop1--"), root.join("--loop2--")).unwrap();
        symlink(root.join("--loop2--"), root.join("--loop1--")).unwrap();
        symlink(root.join("--a--/s_1.jsonl"), root.join("--a--/s_3.jsonl")).unwrap();
        symlink(outside.join("s_2.jsonl"), root.join("--a--/s_4.jsonl")).unwrap();

        let warnings = std::sync::Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = warnings.clone();
        set_warning_sink(move |w| sink.lock().unwrap().push(w.to_string()));

        let dirs = cwd_dirs(&root).unwrap();
        assert_eq!(
            dirs,
            vec![root.join("--a--")],
            "the sibling link is the same dir"
        );
        let mut files = session_files(&root, &root.join("--a--")).unwrap();
        files.sort();
        assert_eq!(
            files,
            vec![root.join("--a--/s_1.jsonl"), root.join("--a--/s_3.jsonl")]
        );
        assert!(session_files(&root, &root.join("--out--"))
            .unwrap()
            .is_empty());
        assert_eq!(session_files(&root, &root.join("--b--")).unwrap().len(), 2);
        assert!(leaves_store(&root, &root.join("--out--")));
        assert!(leaves_store(&root, &root.join("--loop1--")));
        assert!(!leaves_store(&root, &root.join("--b--")));
        assert!(!leaves_store(&root, &root.join("--new--")));
        let warnings = warnings.lock().unwrap().join("\n");
        for name in ["--out--", "--loop1--", "--loop2--", "s_4.jsonl"] {
            assert!(warnings.contains(name), "{name}: {warnings}");
        }
        assert!(
            !warnings.contains("--b--:") && !warnings.contains("s_3"),
            "{warnings}"
        );
    }
}
