//! Where Pi keeps its files: the agent dir (`PI_CODING_AGENT_DIR`, else `~/.pi/agent`) and the
//! project's `.pi/` directory.

use std::path::Path;
use std::path::PathBuf;

/// The per-project configuration directory name, relative to the cwd.
pub const CONFIG_DIR_NAME: &str = ".pi";

/// The environment variable that moves the agent dir.
const ENV_AGENT_DIR: &str = "PI_CODING_AGENT_DIR";

pub use pi_storage::paths::home;

/// Expands a leading `~` or `~/` to `home` (Pi's `normalizePath`); other text is unchanged.
pub fn expand_tilde(path: &str, home: Option<&Path>) -> PathBuf {
    match home {
        Some(home) if path == "~" => home.to_path_buf(),
        Some(home) if path.starts_with("~/") => home.join(&path[2..]),
        _ => PathBuf::from(path),
    }
}

/// The agent dir: `PI_CODING_AGENT_DIR` (with `~` expanded) when set and non-empty, else
/// `<home>/.pi/agent`. `env` looks up environment variables so tests need not set them.
pub fn agent_dir(env: &dyn Fn(&str) -> Option<String>, home: Option<&Path>) -> PathBuf {
    if let Some(dir) = env(ENV_AGENT_DIR).filter(|d| !d.is_empty()) {
        return expand_tilde(&dir, home);
    }
    home.map(Path::to_path_buf)
        .unwrap_or_default()
        .join(CONFIG_DIR_NAME)
        .join("agent")
}

/// `<cwd>/.pi`.
pub fn project_config_dir(cwd: &Path) -> PathBuf {
    cwd.join(CONFIG_DIR_NAME)
}

/// Makes `path` absolute against `base` after `~` expansion, and removes `.` and `..`
/// components lexically (Node's `path.resolve`; symlinks are not followed).
pub fn resolve_path(path: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    let expanded = expand_tilde(path.trim(), home);
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        base.join(expanded)
    };
    normalize_lexically(&joined)
}

/// Removes `.` and `..` without touching the file system.
pub(crate) fn normalize_lexically(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The real path when it exists (symlinks resolved), else the lexical normal form. Pi keys
/// trust decisions and duplicate checks by canonical paths.
pub(crate) fn canonicalize_or_normalize(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalize_lexically(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_dir_from_env_with_tilde() {
        let home = Path::new("/home/u");
        let env = |k: &str| (k == "PI_CODING_AGENT_DIR").then(|| "~/custom".to_string());
        assert_eq!(agent_dir(&env, Some(home)), PathBuf::from("/home/u/custom"));
        let none = |_: &str| None;
        assert_eq!(
            agent_dir(&none, Some(home)),
            PathBuf::from("/home/u/.pi/agent")
        );
        let empty = |_: &str| Some(String::new());
        assert_eq!(
            agent_dir(&empty, Some(home)),
            PathBuf::from("/home/u/.pi/agent")
        );
    }

    #[test]
    fn tilde_only_at_the_start() {
        let home = Some(Path::new("/h"));
        assert_eq!(expand_tilde("~", home), PathBuf::from("/h"));
        assert_eq!(expand_tilde("a/~/b", home), PathBuf::from("a/~/b"));
        assert_eq!(expand_tilde("~user/x", home), PathBuf::from("~user/x"));
        assert_eq!(
            resolve_path("../x/./y", Path::new("/a/b"), home),
            PathBuf::from("/a/x/y")
        );
    }
}
