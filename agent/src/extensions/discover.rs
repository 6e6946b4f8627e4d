//! Which extension files a run loads, in Pi's order: the project's `.pi/extensions/` (only
//! when the project is trusted), `<agentDir>/extensions/`, then the configured paths (`-e`
//! and the `extensions` setting). `--no-extensions` leaves out discovery and the setting;
//! `-e` paths still load. A path is loaded once however many ways name it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::is_extension_file;

/// Inputs of [`extension_paths`].
pub struct DiscoverOptions<'a> {
    /// The agent dir (`~/.pi/agent`).
    pub agent_dir: &'a Path,
    /// The run's directory.
    pub cwd: &'a Path,
    /// Whether the project's `.pi` files may be used.
    pub project_trusted: bool,
    /// `--no-extensions`.
    pub no_extensions: bool,
    /// `-e` paths as given.
    pub cli_paths: &'a [String],
    /// The global settings' `extensions` list.
    pub global_setting: Option<&'a Value>,
    /// The project settings' `extensions` list (used only when trusted).
    pub project_setting: Option<&'a Value>,
}

/// The extension files to load.
pub fn extension_paths(options: &DiscoverOptions<'_>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add = |paths: Vec<PathBuf>| {
        for p in paths {
            let key = std::path::absolute(&p).unwrap_or_else(|_| p.clone());
            if !out
                .iter()
                .any(|o| std::path::absolute(o).unwrap_or_else(|_| o.clone()) == key)
            {
                out.push(p);
            }
        }
    };
    if !options.no_extensions {
        if options.project_trusted {
            add(discover_in_dir(&options.cwd.join(".pi").join("extensions")));
        }
        add(discover_in_dir(&options.agent_dir.join("extensions")));
    }
    let mut configured: Vec<PathBuf> = options
        .cli_paths
        .iter()
        .map(|p| resolve(options.cwd, p))
        .collect();
    if !options.no_extensions {
        let entries = |v: Option<&Value>, base: &Path| -> Vec<PathBuf> {
            v.and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                // Built-in toggles and package sources are not files.
                .filter(|s| {
                    !s.starts_with("builtin:")
                        && !s.starts_with('+')
                        && !s.starts_with('-')
                        && !s.starts_with("npm:")
                        && !s.starts_with("git:")
                })
                .map(|s| resolve(base, s))
                .collect()
        };
        configured.extend(entries(options.global_setting, options.agent_dir));
        if options.project_trusted {
            configured.extend(entries(options.project_setting, &options.cwd.join(".pi")));
        }
    }
    for p in configured {
        if p.is_dir() {
            match entries_of_package(&p) {
                Some(entries) => add(entries),
                None => add(discover_in_dir(&p)),
            }
        } else {
            add(vec![p]);
        }
    }
    out
}

fn resolve(base: &Path, path: &str) -> PathBuf {
    let expanded = match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    };
    if expanded.is_absolute() {
        expanded
    } else {
        base.join(expanded)
    }
}

/// A directory's entry points: `package.json`'s `pi.extensions`, else `index.ts` / `index.js`.
fn entries_of_package(dir: &Path) -> Option<Vec<PathBuf>> {
    if let Ok(text) = std::fs::read_to_string(dir.join("package.json")) {
        if let Ok(manifest) = serde_json::from_str::<Value>(&text) {
            let listed: Vec<PathBuf> = manifest
                .pointer("/pi/extensions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|p| dir.join(p))
                .filter(|p| p.exists())
                .collect();
            if !listed.is_empty() {
                return Some(listed);
            }
        }
    }
    ["index.ts", "index.js"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .map(|p| vec![p])
}

/// One level of a discovery directory: extension files, and subdirectories' entry points.
fn discover_in_dir(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    let mut out = Vec::new();
    for path in entries {
        if path.is_file() && is_extension_file(&path) {
            out.push(path);
        } else if path.is_dir() {
            out.extend(entries_of_package(&path).unwrap_or_default());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_extensions_need_trust_and_no_extensions_keeps_cli_paths() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let cwd = dir.path().join("proj");
        std::fs::create_dir_all(agent.join("extensions/sub")).unwrap();
        std::fs::create_dir_all(cwd.join(".pi/extensions")).unwrap();
        std::fs::write(agent.join("extensions/a.ts"), "").unwrap();
        std::fs::write(agent.join("extensions/notes.md"), "").unwrap();
        std::fs::write(agent.join("extensions/sub/index.ts"), "").unwrap();
        std::fs::write(cwd.join(".pi/extensions/p.ts"), "").unwrap();
        std::fs::write(cwd.join("cli.ts"), "").unwrap();
        let cli = vec!["cli.ts".to_string()];
        let setting = serde_json::json!(["set.ts", "-builtin:mcp", "npm:x"]);
        let opts = |trusted, no_extensions| DiscoverOptions {
            agent_dir: &agent,
            cwd: &cwd,
            project_trusted: trusted,
            no_extensions,
            cli_paths: &cli,
            global_setting: Some(&setting),
            project_setting: None,
        };
        let names = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            names(extension_paths(&opts(false, false))),
            [
                "agent/extensions/a.ts",
                "agent/extensions/sub/index.ts",
                "proj/cli.ts",
                "agent/set.ts"
            ]
        );
        assert_eq!(
            names(extension_paths(&opts(true, false)))[0],
            "proj/.pi/extensions/p.ts"
        );
        assert_eq!(names(extension_paths(&opts(true, true))), ["proj/cli.ts"]);
    }
}
