//! Context files: `AGENTS.md` and friends from the agent dir and from every directory from
//! the filesystem root down to the cwd (Pi's `loadProjectContextFiles`).
//!
//! In each directory the first existing regular file of `AGENTS.override.md`, `AGENTS.md`,
//! `AGENTS.MD`, `CLAUDE.md`, `CLAUDE.MD` is taken, so an override file replaces that
//! directory's `AGENTS.md`. The global file comes first, then ancestors outermost first, the
//! cwd's last, so nearer instructions come later in the prompt and read as refinements.
//! Context files are not gated by project trust in Pi 1.6.0 and are not here either.

use std::path::Path;
use std::path::PathBuf;

use super::paths::normalize_lexically;

/// The names looked for in each directory, in order of preference.
const CANDIDATES: [&str; 5] = [
    "AGENTS.override.md",
    "AGENTS.md",
    "AGENTS.MD",
    "CLAUDE.md",
    "CLAUDE.MD",
];

/// One loaded context file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its text (a leading byte order mark removed).
    pub content: String,
}

/// Loads the context files for `cwd`. Unreadable files are skipped with a warning pushed to
/// `warnings`.
pub fn load_context_files(
    agent_dir: &Path,
    cwd: &Path,
    warnings: &mut Vec<String>,
) -> Vec<ContextFile> {
    let mut files = Vec::new();
    if let Some(global) = from_dir(agent_dir, warnings) {
        files.push(global);
    }
    let cwd = normalize_lexically(cwd);
    let mut ancestors = Vec::new();
    let mut dir = Some(cwd.as_path());
    while let Some(d) = dir {
        if let Some(file) = from_dir(d, warnings) {
            if !files.iter().any(|f: &ContextFile| f.path == file.path)
                && !ancestors.iter().any(|f: &ContextFile| f.path == file.path)
            {
                ancestors.push(file);
            }
        }
        dir = d.parent();
    }
    ancestors.reverse();
    files.extend(ancestors);
    files
}

fn from_dir(dir: &Path, warnings: &mut Vec<String>) -> Option<ContextFile> {
    for name in CANDIDATES {
        let path = dir.join(name);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        // A case-insensitive file system answers for `AGENTS.MD` with `AGENTS.md`; the name
        // actually asked for is kept, as Pi does.
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let content = text
                    .strip_prefix('\u{feff}')
                    .map(str::to_string)
                    .unwrap_or(text);
                return Some(ContextFile { path, content });
            }
            Err(e) => warnings.push(format!("Could not read {}: {e}", path.display())),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_then_outermost_to_cwd_with_overrides() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let agent = root.join("agent");
        let cwd = root.join("a/b/c");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(agent.join("AGENTS.md"), "global").unwrap();
        std::fs::write(root.join("a/CLAUDE.md"), "claude a").unwrap();
        std::fs::write(root.join("a/b/AGENTS.md"), "agents b").unwrap();
        std::fs::write(root.join("a/b/AGENTS.override.md"), "override b").unwrap();
        std::fs::write(cwd.join("AGENTS.md"), "\u{feff}cwd").unwrap();
        // A directory with the name is not a file.
        std::fs::create_dir_all(root.join("a/b/c/CLAUDE.md")).unwrap();
        let mut warnings = Vec::new();
        let files = load_context_files(&agent, &cwd, &mut warnings);
        let got: Vec<(PathBuf, &str)> = files
            .iter()
            .map(|f| (f.path.clone(), f.content.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (agent.join("AGENTS.md"), "global"),
                (root.join("a/CLAUDE.md"), "claude a"),
                (root.join("a/b/AGENTS.override.md"), "override b"),
                (cwd.join("AGENTS.md"), "cwd"),
            ]
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn agent_dir_inside_the_tree_is_not_loaded_twice() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path().join("p");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(cwd.join("AGENTS.md"), "x").unwrap();
        let files = load_context_files(&cwd, &cwd, &mut Vec::new());
        assert_eq!(files.len(), 1);
    }
}
