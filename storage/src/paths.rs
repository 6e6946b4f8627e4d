//! Where Pi keeps sessions on disk, so Pi and we can share one directory.
//!
//! Pi 1.6 (dist `config.js`, `core/session-manager.js`, `main.js`):
//! * agent dir: env `PI_CODING_AGENT_DIR` (tilde-expanded), else `~/.pi/agent`;
//! * session dir override, first non-empty of: `--session-dir`, env
//!   `PI_CODING_AGENT_SESSION_DIR`, settings `sessionDir` (all tilde-expanded). An override is
//!   one flat directory for every cwd;
//! * otherwise `<agentDir>/sessions/--<cwd>--/`, where the resolved cwd loses one leading `/`
//!   or `\` and every `/`, `\` and `:` becomes `-`;
//! * file name `<header timestamp with : and . as ->_<session id>.jsonl`.
//!
//! These functions take their inputs as arguments (no hidden environment reads) except the
//! `*_from_env` conveniences.

use std::path::{Component, Path, PathBuf};

/// Env var naming the agent dir.
pub const ENV_AGENT_DIR: &str = "PI_CODING_AGENT_DIR";
/// Env var naming a session dir override.
pub const ENV_SESSION_DIR: &str = "PI_CODING_AGENT_SESSION_DIR";

/// `~` and `~/…` expanded against `home`, as Pi's `normalizePath` does; other paths unchanged.
pub fn expand_tilde(path: &str, home: &Path) -> PathBuf {
    if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(path)
    }
}

/// The agent dir from the value of `PI_CODING_AGENT_DIR` (if set) and the home dir.
pub fn agent_dir(env_agent_dir: Option<&str>, home: &Path) -> PathBuf {
    match env_agent_dir {
        Some(dir) if !dir.is_empty() => expand_tilde(dir, home),
        _ => home.join(".pi").join("agent"),
    }
}

/// The session dir override: the first non-empty of the `--session-dir` flag, the
/// `PI_CODING_AGENT_SESSION_DIR` value and the `sessionDir` setting, tilde-expanded.
/// `None` means Pi's default per-cwd layout under `<agentDir>/sessions`.
pub fn session_dir_override(
    flag: Option<&str>,
    env_session_dir: Option<&str>,
    setting: Option<&str>,
    home: &Path,
) -> Option<PathBuf> {
    [flag, env_session_dir, setting]
        .into_iter()
        .flatten()
        .find(|dir| !dir.is_empty())
        .map(|dir| expand_tilde(dir, home))
}

/// The user's home directory: `$HOME` when set and not empty (the passwd entry is not
/// consulted, as in Pi).
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// [`home`], or `/` without one, where a path is needed regardless.
pub fn home_dir() -> PathBuf {
    home().unwrap_or_else(|| PathBuf::from("/"))
}

/// [`agent_dir`] from the process environment.
pub fn agent_dir_from_env() -> PathBuf {
    agent_dir(std::env::var(ENV_AGENT_DIR).ok().as_deref(), &home_dir())
}

/// `<agentDir>/sessions`: the root of the per-cwd layout.
pub fn sessions_root(agent_dir: &Path) -> PathBuf {
    agent_dir.join("sessions")
}

/// The directory name Pi uses for a cwd: `--<cwd, one leading separator dropped, / \ : → ->--`.
pub fn session_dir_name(cwd: &str) -> String {
    let resolved = resolve_cwd(cwd);
    let trimmed = resolved
        .strip_prefix('/')
        .or_else(|| resolved.strip_prefix('\\'))
        .unwrap_or(&resolved);
    let safe: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{safe}--")
}

/// Pi's default session dir for a cwd: `<agentDir>/sessions/<session_dir_name(cwd)>`.
pub fn default_session_dir(agent_dir: &Path, cwd: &str) -> PathBuf {
    sessions_root(agent_dir).join(session_dir_name(cwd))
}

/// Node's `path.resolve(cwd)` without touching the file system: relative paths are joined to
/// the process cwd, `.`/`..`/repeated separators are folded, a trailing separator is dropped.
/// Used both for directory names and for comparing header cwds when listing.
pub fn resolve_cwd(cwd: &str) -> String {
    if cwd.is_empty() {
        return std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
    }
    resolve_path(Path::new(cwd)).to_string_lossy().into_owned()
}

/// [`resolve_cwd`] for any path, bytes kept (not lossy): what Pi stores for a file it was
/// given (`--session`, `--fork`'s `parentSession`). Links are not followed.
pub fn resolve_path(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(base) => base.join(path),
            Err(_) => return path.to_path_buf(),
        }
    };
    let mut parts: Vec<Component<'_>> = Vec::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(parts.last(), Some(Component::Normal(_))) {
                    parts.pop();
                }
            }
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}

/// The file name Pi gives a session: `<timestamp with : and . as ->_<id>.jsonl`.
pub fn session_file_name(timestamp: &str, id: &str) -> String {
    format!("{}_{id}.jsonl", pi_formats::time::file_stamp(timestamp))
}

/// Whether an argument is a path rather than an id (Pi's rule): it contains a path separator
/// or ends in `.jsonl`. Only such explicit paths may reach files outside the store.
pub fn is_path_argument(arg: &str) -> bool {
    arg.contains('/') || arg.contains('\\') || arg.ends_with(".jsonl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_names_match_pi() {
        assert_eq!(session_dir_name("/Users/a/b c/d"), "--Users-a-b c-d--");
        assert_eq!(
            session_dir_name("/Users/badlogic/workspaces/pi-mono/"),
            "--Users-badlogic-workspaces-pi-mono--"
        );
        assert_eq!(session_dir_name("/a/./b/../c"), "--a-c--");
        assert_eq!(session_dir_name("/"), "----");
    }

    #[test]
    fn overrides_take_the_first_non_empty() {
        let home = Path::new("/h");
        assert_eq!(
            session_dir_override(Some(""), Some("~/s"), Some("/t"), home),
            Some(PathBuf::from("/h/s"))
        );
        assert_eq!(session_dir_override(None, None, None, home), None);
        assert_eq!(agent_dir(None, home), PathBuf::from("/h/.pi/agent"));
        assert_eq!(agent_dir(Some("~"), home), PathBuf::from("/h"));
    }

    #[test]
    fn file_names_match_pi() {
        assert_eq!(
            session_file_name("2025-12-09T00:52:54.397Z", "d97339c6"),
            "2025-12-09T00-52-54-397Z_d97339c6.jsonl"
        );
    }
}
