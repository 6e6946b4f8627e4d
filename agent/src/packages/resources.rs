//! What an installed package offers: its `pi` manifest's paths, else the conventional
//! `extensions/`, `skills/`, `prompts/`, `themes/` directories; narrowed by the object form of a
//! `packages` entry (`"skills": []`, `"!pattern"`, `"+path"`, `"-path"`). Pi 1.6.0's rules;
//! `.gitignore` files inside a package are not consulted.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The four resource kinds, in Pi's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Extensions,
    Skills,
    Prompts,
    Themes,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Extensions, Kind::Skills, Kind::Prompts, Kind::Themes];

    /// The settings / manifest key and conventional directory name.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Extensions => "extensions",
            Kind::Skills => "skills",
            Kind::Prompts => "prompts",
            Kind::Themes => "themes",
        }
    }
}

/// One resource file of a package and whether the filters let it load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: Kind,
    pub path: PathBuf,
    pub enabled: bool,
}

/// The `pi` object of `<root>/package.json`, if any.
fn manifest(root: &Path) -> Option<Map<String, Value>> {
    let text = std::fs::read_to_string(root.join("package.json")).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    match serde_json::from_str::<Value>(text).ok()?.get("pi")? {
        Value::Object(m) => Some(m.clone()),
        _ => None,
    }
}

fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    v.and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|e| e.as_str().map(str::to_string))
            .collect()
    })
}

fn is_override(s: &str) -> bool {
    s.starts_with('!') || s.starts_with('+') || s.starts_with('-')
}

fn has_glob(s: &str) -> bool {
    s.contains('*') || s.contains('?')
}

/// The resources of the package at `root`. `filter` is the object form of the settings entry
/// (`None` for the plain string form). `None` when the package declares nothing at all (a
/// local directory is then loaded as one extension, as Pi does).
pub fn package_resources(root: &Path, filter: Option<&Map<String, Value>>) -> Option<Vec<Found>> {
    let manifest = manifest(root);
    let mut out = Vec::new();
    if let Some(filter) = filter {
        let delta = filter.get("autoload") == Some(&Value::Bool(false));
        for kind in Kind::ALL {
            let patterns = strings(filter.get(kind.key()));
            match (delta, patterns) {
                (true, patterns) => {
                    let patterns = patterns.unwrap_or_default();
                    if patterns.is_empty() {
                        continue;
                    }
                    let all = manifest_files(root, manifest.as_ref(), kind);
                    for (path, enabled) in delta_patterns(&all, &patterns, root) {
                        out.push(Found {
                            kind,
                            path,
                            enabled,
                        });
                    }
                }
                (false, Some(patterns)) => {
                    let all = manifest_files(root, manifest.as_ref(), kind);
                    let enabled = apply_patterns(&all, &patterns, root);
                    for path in all {
                        let on = !patterns.is_empty() && enabled.contains(&path);
                        out.push(Found {
                            kind,
                            path,
                            enabled: on,
                        });
                    }
                }
                (false, None) => {
                    for path in default_files(root, manifest.as_ref(), kind) {
                        out.push(Found {
                            kind,
                            path,
                            enabled: true,
                        });
                    }
                }
            }
        }
        return Some(out);
    }
    if let Some(m) = manifest
        .as_ref()
        .filter(|m| Kind::ALL.iter().any(|k| m.contains_key(k.key())))
    {
        for kind in Kind::ALL {
            if let Some(entries) = strings(m.get(kind.key())) {
                for path in manifest_entries(&entries, root, kind) {
                    out.push(Found {
                        kind,
                        path,
                        enabled: true,
                    });
                }
            }
        }
        return Some(out);
    }
    let mut any_dir = false;
    for kind in Kind::ALL {
        let dir = root.join(kind.key());
        if dir.exists() {
            any_dir = true;
            for path in resource_files(&dir, kind) {
                out.push(Found {
                    kind,
                    path,
                    enabled: true,
                });
            }
        }
    }
    any_dir.then_some(out)
}

/// Unfiltered: the manifest's entries for `kind`, else the conventional directory.
fn default_files(root: &Path, manifest: Option<&Map<String, Value>>, kind: Kind) -> Vec<PathBuf> {
    if let Some(entries) = manifest.and_then(|m| strings(m.get(kind.key()))) {
        return manifest_entries(&entries, root, kind);
    }
    let dir = root.join(kind.key());
    if dir.exists() {
        resource_files(&dir, kind)
    } else {
        Vec::new()
    }
}

/// Everything the package allows for `kind` (what a filter can narrow).
fn manifest_files(root: &Path, manifest: Option<&Map<String, Value>>, kind: Kind) -> Vec<PathBuf> {
    match manifest.and_then(|m| strings(m.get(kind.key()))) {
        Some(entries) if !entries.is_empty() => manifest_entries(&entries, root, kind),
        _ => {
            let dir = root.join(kind.key());
            if dir.exists() {
                resource_files(&dir, kind)
            } else {
                Vec::new()
            }
        }
    }
}

/// A manifest list: paths and globs relative to the package, then its own `!`/`+`/`-`.
fn manifest_entries(entries: &[String], root: &Path, kind: Kind) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for entry in entries.iter().filter(|e| !is_override(e)) {
        if has_glob(entry) {
            paths.extend(expand_glob(entry, root));
        } else {
            paths.push(crate::config::paths::normalize_lexically(&root.join(entry)));
        }
    }
    let mut files = Vec::new();
    for p in paths {
        if p.is_file() {
            files.push(p);
        } else if p.is_dir() {
            files.extend(resource_files(&p, kind));
        }
    }
    let overrides: Vec<String> = entries.iter().filter(|e| is_override(e)).cloned().collect();
    let enabled = apply_patterns(&files, &overrides, root);
    files.retain(|f| enabled.contains(f));
    files
}

/// Visible files and directories below `root` matching `pattern` (no dot segments).
fn expand_glob(pattern: &str, root: &Path) -> Vec<PathBuf> {
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    let Some(matcher) = glob(pattern) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') || name == "node_modules" {
                continue;
            }
            let path = entry.path();
            let rel = posix(path.strip_prefix(root).unwrap_or(&path));
            if matcher.is_match(&rel) {
                out.push(path.clone());
            }
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

fn glob(pattern: &str) -> Option<globset::GlobMatcher> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

fn posix(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// The files of one resource directory: extensions one level deep (entry points of
/// subdirectories), skills as `SKILL.md` directories (and top-level `.md`), prompts and
/// themes recursively.
pub fn resource_files(dir: &Path, kind: Kind) -> Vec<PathBuf> {
    match kind {
        Kind::Extensions => extension_entries(dir),
        Kind::Skills => skill_entries(dir, dir),
        Kind::Prompts => files_with(dir, "md"),
        Kind::Themes => files_with(dir, "json"),
    }
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v.retain(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        name.is_some_and(|n| !n.starts_with('.') && n != "node_modules")
    });
    v
}

/// A directory's declared entry points: `package.json`'s `pi.extensions`, else `index.ts`/`.js`.
fn entry_points(dir: &Path) -> Option<Vec<PathBuf>> {
    if let Some(listed) = manifest(dir).and_then(|m| strings(m.get("extensions"))) {
        let found: Vec<PathBuf> = listed
            .iter()
            .map(|p| crate::config::paths::normalize_lexically(&dir.join(p)))
            .filter(|p| p.exists())
            .collect();
        if !found.is_empty() {
            return Some(found);
        }
    }
    ["index.ts", "index.js"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.exists())
        .map(|p| vec![p])
}

fn extension_entries(dir: &Path) -> Vec<PathBuf> {
    if let Some(entries) = entry_points(dir) {
        return entries;
    }
    let mut out = Vec::new();
    for path in sorted_entries(dir) {
        if path.is_file() && path.extension().is_some_and(|e| e == "ts" || e == "js") {
            out.push(path);
        } else if path.is_dir() {
            out.extend(entry_points(&path).unwrap_or_default());
        }
    }
    out
}

fn skill_entries(dir: &Path, root: &Path) -> Vec<PathBuf> {
    let skill = dir.join("SKILL.md");
    if skill.is_file() {
        return vec![skill];
    }
    let mut out = Vec::new();
    for path in sorted_entries(dir) {
        if path.is_file() && dir == root && path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        } else if path.is_dir() {
            out.extend(skill_entries(&path, root));
        }
    }
    out
}

fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in sorted_entries(dir) {
        if path.is_dir() {
            out.extend(files_with(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    out
}

/// The names a pattern may match: the path relative to `base`, the file name, the absolute
/// path, and for a `SKILL.md` the same three of its directory.
fn candidates(file: &Path, base: &Path) -> Vec<String> {
    let mut out = vec![
        posix(file.strip_prefix(base).unwrap_or(file)),
        file.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        posix(file),
    ];
    if file.file_name().is_some_and(|n| n == "SKILL.md") {
        if let Some(parent) = file.parent() {
            out.push(posix(parent.strip_prefix(base).unwrap_or(parent)));
            out.push(
                parent
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
            out.push(posix(parent));
        }
    }
    out
}

fn matches_glob(file: &Path, pattern: &str, base: &Path) -> bool {
    let Some(m) = glob(&posix(Path::new(pattern))) else {
        return false;
    };
    candidates(file, base).iter().any(|c| m.is_match(c))
}

fn matches_exact(file: &Path, pattern: &str, base: &Path) -> bool {
    let p = pattern.strip_prefix("./").unwrap_or(pattern);
    let p = posix(&crate::config::paths::normalize_lexically(Path::new(p)));
    let c = candidates(file, base);
    // The relative path, the absolute path, and a skill's directory (not bare names).
    [0usize, 2, 3, 5]
        .iter()
        .any(|&i| c.get(i).is_some_and(|s| *s == p))
}

/// Pi's `applyPatterns`: plain patterns include (all when there are none), `!` excludes, `+`
/// adds an exact path back, `-` removes an exact path whatever else said.
pub fn apply_patterns(all: &[PathBuf], patterns: &[String], base: &Path) -> BTreeSet<PathBuf> {
    let (mut inc, mut exc, mut force_in, mut force_out) = (vec![], vec![], vec![], vec![]);
    for p in patterns {
        if let Some(r) = p.strip_prefix('+') {
            force_in.push(r);
        } else if let Some(r) = p.strip_prefix('-') {
            force_out.push(r);
        } else if let Some(r) = p.strip_prefix('!') {
            exc.push(r);
        } else {
            inc.push(p.as_str());
        }
    }
    let mut result: Vec<&PathBuf> = all
        .iter()
        .filter(|f| inc.is_empty() || inc.iter().any(|p| matches_glob(f, p, base)))
        .filter(|f| !exc.iter().any(|p| matches_glob(f, p, base)))
        .collect();
    for f in all {
        if !result.contains(&f) && force_in.iter().any(|p| matches_exact(f, p, base)) {
            result.push(f);
        }
    }
    result
        .into_iter()
        .filter(|f| !force_out.iter().any(|p| matches_exact(f, p, base)))
        .cloned()
        .collect()
}

/// A project `autoload: false` entry: each pattern switches the files it names on (plain,
/// `+`) or off (`!`, `-`), later patterns winning; unnamed files are left to the user entry.
fn delta_patterns(all: &[PathBuf], patterns: &[String], base: &Path) -> Vec<(PathBuf, bool)> {
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    for pattern in patterns {
        let exact = pattern.starts_with('+') || pattern.starts_with('-');
        let on = !pattern.starts_with('-') && !pattern.starts_with('!');
        let target = if is_override(pattern) {
            &pattern[1..]
        } else {
            pattern.as_str()
        };
        for f in all {
            let hit = if exact {
                matches_exact(f, target, base)
            } else {
                matches_glob(f, target, base)
            };
            if hit {
                match out.iter_mut().find(|(p, _)| p == f) {
                    Some(e) => e.1 = on,
                    None => out.push((f.clone(), on)),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn fixture() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(&r.join("package.json"), r#"{"name":"p"}"#);
        write(&r.join("extensions/a.ts"), "");
        write(&r.join("extensions/legacy.ts"), "");
        write(&r.join("extensions/sub/index.js"), "");
        write(&r.join("skills/one/SKILL.md"), "");
        write(&r.join("skills/two/SKILL.md"), "");
        write(&r.join("prompts/review.md"), "");
        write(&r.join("prompts/deep/fix.md"), "");
        write(&r.join("themes/dark.json"), "{}");
        dir
    }

    fn rel(found: &[Found], root: &Path, kind: Kind) -> Vec<(String, bool)> {
        found
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| (posix(f.path.strip_prefix(root).unwrap()), f.enabled))
            .collect()
    }

    #[test]
    fn conventional_directories() {
        let dir = fixture();
        let r = dir.path();
        let found = package_resources(r, None).unwrap();
        assert_eq!(
            rel(&found, r, Kind::Extensions),
            [
                ("extensions/a.ts".into(), true),
                ("extensions/legacy.ts".into(), true),
                ("extensions/sub/index.js".into(), true)
            ]
        );
        assert_eq!(rel(&found, r, Kind::Skills).len(), 2);
        assert_eq!(rel(&found, r, Kind::Prompts).len(), 2);
        assert_eq!(rel(&found, r, Kind::Themes).len(), 1);
    }

    #[test]
    fn filters_narrow_the_package() {
        let dir = fixture();
        let r = dir.path();
        let filter = serde_json::json!({
            "source": "x",
            "extensions": ["extensions/*.ts", "!extensions/legacy.ts"],
            "skills": [],
            "prompts": ["-prompts/review.md"]
        });
        let found = package_resources(r, filter.as_object()).unwrap();
        assert_eq!(
            rel(&found, r, Kind::Extensions),
            [
                ("extensions/a.ts".into(), true),
                ("extensions/legacy.ts".into(), false),
                ("extensions/sub/index.js".into(), false)
            ]
        );
        assert!(rel(&found, r, Kind::Skills).iter().all(|(_, on)| !on));
        assert_eq!(
            rel(&found, r, Kind::Prompts),
            [
                ("prompts/deep/fix.md".into(), true),
                ("prompts/review.md".into(), false)
            ]
        );
        assert_eq!(
            rel(&found, r, Kind::Themes),
            [("themes/dark.json".into(), true)]
        );
    }

    #[test]
    fn manifest_paths_replace_conventions() {
        let dir = fixture();
        let r = dir.path();
        write(
            &r.join("package.json"),
            r#"{"name":"p","pi":{"extensions":["./extensions/a.ts"],"skills":["./skills/*","!two"]}}"#,
        );
        let found = package_resources(r, None).unwrap();
        assert_eq!(
            rel(&found, r, Kind::Extensions),
            [("extensions/a.ts".into(), true)]
        );
        assert_eq!(
            rel(&found, r, Kind::Skills),
            [("skills/one/SKILL.md".into(), true)]
        );
        assert!(rel(&found, r, Kind::Prompts).is_empty());
    }

    #[test]
    fn nothing_declared_is_none() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("index.ts"), "");
        assert_eq!(package_resources(dir.path(), None), None);
    }
}
