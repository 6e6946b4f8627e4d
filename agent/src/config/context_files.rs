//! Context files: `AGENTS.md` and friends from the agent dir and from every directory from
//! the filesystem root down to the cwd (Pi's `loadProjectContextFiles`).
//!
//! In each directory the first existing regular file of `AGENTS.override.md`, `AGENTS.md`,
//! `AGENTS.MD`, `CLAUDE.md`, `CLAUDE.MD` is taken, so an override file replaces that
//! directory's `AGENTS.md`. The global file comes first, then ancestors outermost first, the
//! cwd's last, so nearer instructions come later in the prompt and read as refinements.
//! Context files are not gated by project trust in Pi 1.6.0 and are not here either.
//!
//! One exception, as in Pi: inside a linked git worktree nested in its main checkout
//! (`repo/.worktrees/feat`), the worktree's own context file shadows the main checkout's file
//! of the same name, which would otherwise load twice as an ancestor.

use std::path::Path;
use std::path::PathBuf;

use super::paths::canonicalize_or_normalize;
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
    let shadowed = shadowed_context_file(&cwd);
    let mut ancestors = Vec::new();
    let mut dir = Some(cwd.as_path());
    while let Some(d) = dir {
        if let Some(file) = from_dir(d, warnings) {
            let is_shadowed = shadowed.as_ref().is_some_and(|s| {
                file.path
                    .file_name()
                    .is_some_and(|name| canonicalize_or_normalize(d).join(name) == *s)
            });
            if !is_shadowed
                && !files.iter().any(|f: &ContextFile| f.path == file.path)
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

/// `(worktree root, common git dir)` of the checkout containing `cwd` (Pi's `findGitPaths`).
fn git_paths(cwd: &Path) -> Option<(PathBuf, PathBuf)> {
    for dir in cwd.ancestors() {
        let git = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&git) else {
            continue;
        };
        if meta.is_dir() {
            return git.join("HEAD").exists().then(|| (dir.to_path_buf(), git));
        }
        let text = std::fs::read_to_string(&git).ok()?;
        let target = text.trim().strip_prefix("gitdir: ")?;
        let git_dir = normalize_lexically(&dir.join(target.trim()));
        if !git_dir.join("HEAD").exists() {
            return None;
        }
        let common = match std::fs::read_to_string(git_dir.join("commondir")) {
            Ok(c) => normalize_lexically(&git_dir.join(c.trim())),
            Err(_) => git_dir,
        };
        return Some((dir.to_path_buf(), common));
    }
    None
}

/// The main checkout's context file that the nested worktree's own file shadows, as a
/// canonical path; `None` outside such a layout.
fn shadowed_context_file(cwd: &Path) -> Option<PathBuf> {
    let (worktree, common) = git_paths(cwd)?;
    let common = canonicalize_or_normalize(&common);
    let worktree = canonicalize_or_normalize(&worktree);
    let main_root = common.parent()?.to_path_buf();
    // An ordinary repo (same dir) or a sibling worktree (main not an ancestor) shadows nothing.
    if worktree == main_root || !worktree.starts_with(&main_root) {
        return None;
    }
    // Only when the common dir is the main root's own `.git` (not a bare or submodule layout).
    if canonicalize_or_normalize(&main_root.join(".git")) != common {
        return None;
    }
    let own = from_dir(&worktree, &mut Vec::new())?;
    Some(main_root.join(own.path.file_name()?))
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
    fn nested_worktree_shadows_the_main_checkout_file() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().canonicalize().unwrap().join("repo");
        let wt = repo.join(".worktrees/feat");
        std::fs::create_dir_all(repo.join(".git/worktrees/feat")).unwrap();
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            repo.join(".git/worktrees/feat/HEAD"),
            "ref: refs/heads/feat\n",
        )
        .unwrap();
        std::fs::write(repo.join(".git/worktrees/feat/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", repo.join(".git/worktrees/feat").display()),
        )
        .unwrap();
        std::fs::write(repo.join("AGENTS.md"), "main copy").unwrap();
        std::fs::write(wt.join("AGENTS.md"), "worktree copy").unwrap();
        let agent = tmp.path().join("agent");
        let files = load_context_files(&agent, &wt, &mut Vec::new());
        let contents: Vec<&str> = files.iter().map(|f| f.content.as_str()).collect();
        assert_eq!(contents, vec!["worktree copy"]);
        // In the main checkout itself, its file loads.
        let files = load_context_files(&agent, &repo, &mut Vec::new());
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].content, "main copy");
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
