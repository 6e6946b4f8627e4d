//! Which extension files a run loads, in Pi's order: the `-e` arguments (files, directories
//! and the packages they name, in argument order), then by Pi's precedence the project's
//! `extensions` setting and `.pi/extensions/` (only when the project is trusted), the user's
//! `extensions` setting and `<agentDir>/extensions/`; installed packages' files follow (the
//! caller adds them). `--no-extensions` leaves out everything but `-e`. A path is loaded once
//! however many ways name it; each comes with where it was found (Pi's `sourceInfo`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::is_extension_file;
use crate::config::{SourceInfo, SourceScope};
use crate::packages::Source;

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
    /// `-e` arguments as given (`builtin:` ones are skipped).
    pub cli_paths: &'a [String],
    /// The extension files of the packages `-e` names (`npm:…`, `git:…`), each with its
    /// package's source info (its `source` is the argument).
    pub cli_packages: &'a [(PathBuf, SourceInfo)],
    /// The global settings' `extensions` list.
    pub global_setting: Option<&'a Value>,
    /// The project settings' `extensions` list (used only when trusted).
    pub project_setting: Option<&'a Value>,
}

/// The extension files to load, with where each was found.
pub fn extension_paths(options: &DiscoverOptions<'_>) -> Vec<(PathBuf, SourceInfo)> {
    let mut out: Vec<(PathBuf, SourceInfo)> = Vec::new();
    let mut add = |paths: Vec<PathBuf>, info: &SourceInfo| {
        for p in paths {
            let key = std::path::absolute(&p).unwrap_or_else(|_| p.clone());
            if !out
                .iter()
                .any(|(o, _)| std::path::absolute(o).unwrap_or_else(|_| o.clone()) == key)
            {
                out.push((p, info.clone()));
            }
        }
    };
    let expand = |p: PathBuf| -> Vec<PathBuf> {
        if p.is_dir() {
            entries_of_package(&p).unwrap_or_else(|| discover_in_dir(&p))
        } else {
            vec![p]
        }
    };
    // Pi reports every extension `-e` loaded, files and packages alike, as `cli`.
    let cli = SourceInfo::cli();
    for argument in options.cli_paths {
        if argument.starts_with("builtin:") {
            continue;
        }
        match Source::parse(argument) {
            Source::Local(_) => add(expand(resolve(options.cwd, argument)), &cli),
            _ => {
                let files = options
                    .cli_packages
                    .iter()
                    .filter(|(_, info)| info.source == *argument)
                    .map(|(path, _)| path.clone())
                    .collect();
                add(files, &cli);
            }
        }
    }
    if options.no_extensions {
        return out;
    }
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
            .flat_map(expand)
            .collect()
    };
    let project_dir = crate::config::project_config_dir(options.cwd);
    if options.project_trusted {
        add(
            entries(options.project_setting, &project_dir),
            &SourceInfo::setting(SourceScope::Project),
        );
        add(
            discover_in_dir(&project_dir.join("extensions")),
            &SourceInfo::auto(SourceScope::Project, &project_dir),
        );
    }
    add(
        entries(options.global_setting, options.agent_dir),
        &SourceInfo::setting(SourceScope::User),
    );
    add(
        discover_in_dir(&options.agent_dir.join("extensions")),
        &SourceInfo::auto(SourceScope::User, options.agent_dir),
    );
    out
}

/// `path` from `base`, `~` expanded, `.` and `..` removed (as Pi's `path.resolve`).
fn resolve(base: &Path, path: &str) -> PathBuf {
    let expanded = match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    };
    crate::config::paths::normalize_lexically(&base.join(expanded))
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
                .map(|p| crate::config::paths::normalize_lexically(&dir.join(p)))
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
    fn cli_paths_first_then_pis_precedence_and_no_extensions_keeps_cli_paths() {
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
            cli_packages: &[],
            global_setting: Some(&setting),
            project_setting: None,
        };
        let names = |v: Vec<(PathBuf, SourceInfo)>| -> Vec<String> {
            v.iter()
                .map(|(p, info)| {
                    let path = p.strip_prefix(dir.path()).unwrap().display();
                    format!("{path} {}/{}", info.source, info.scope.as_str())
                })
                .collect()
        };
        assert_eq!(
            names(extension_paths(&opts(false, false))),
            [
                "proj/cli.ts cli/temporary",
                "agent/set.ts local/user",
                "agent/extensions/a.ts auto/user",
                "agent/extensions/sub/index.ts auto/user",
            ]
        );
        assert_eq!(
            names(extension_paths(&opts(true, false)))[1],
            "proj/.pi/extensions/p.ts auto/project"
        );
        assert_eq!(
            names(extension_paths(&opts(true, true))),
            ["proj/cli.ts cli/temporary"]
        );
    }
}
