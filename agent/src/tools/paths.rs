//! Resolving the paths models pass to tools (Pi's `path-utils.ts` and `utils/paths.ts`).

use std::path::Component;
use std::path::Path;
use std::path::PathBuf;

use unicode_normalization::UnicodeNormalization;

/// Unicode spaces models sometimes put in paths; Pi maps them to a plain space.
fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// Decodes `%XX` escapes of a `file://` URL path.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(value) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(value);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Pi's `normalizePath` with `normalizeUnicodeSpaces` and `stripAtPrefix`: unicode spaces become
/// spaces, one leading `@` goes, `~` and `~/` expand to the home directory, `file://` URLs become
/// paths.
pub(crate) fn expand_path(input: &str) -> String {
    let mut normalized: String = input
        .chars()
        .map(|c| if is_unicode_space(c) { ' ' } else { c })
        .collect();
    if let Some(rest) = normalized.strip_prefix('@') {
        normalized = rest.to_string();
    }
    if normalized == "~" {
        return pi_storage::paths::home_dir().to_string_lossy().into_owned();
    }
    if let Some(rest) = normalized.strip_prefix("~/") {
        return normalize_lexically(&pi_storage::paths::home_dir().join(rest))
            .to_string_lossy()
            .into_owned();
    }
    if let Some(rest) = normalized.strip_prefix("file://") {
        let path = rest.strip_prefix("localhost").unwrap_or(rest);
        if path.starts_with('/') {
            return percent_decode(path);
        }
    }
    normalized
}

/// Node's `path.resolve` cleanup: drops `.` and empty parts, applies `..` lexically, no trailing
/// slash.
pub(crate) fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                // At the root, ".." stays at the root, as in Node.
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::Prefix(prefix) => out.push(prefix.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push("/");
    }
    out
}

/// Resolves a model-supplied path against `cwd` (Pi's `resolveToCwd`).
/// The directory a search tool works in: its optional `path` argument (missing or
/// empty means `.`) resolved against the working directory.
pub(crate) fn search_root(args: &serde_json::Value, cwd: &Path) -> PathBuf {
    let path = args
        .get("path")
        .and_then(serde_json::Value::as_str)
        .filter(|p| !p.is_empty())
        .unwrap_or(".");
    resolve_to_cwd(path, cwd)
}

pub(crate) fn resolve_to_cwd(path: &str, cwd: &Path) -> PathBuf {
    let expanded = expand_path(path);
    let expanded = Path::new(&expanded);
    if expanded.is_absolute() {
        normalize_lexically(expanded)
    } else {
        normalize_lexically(&cwd.join(expanded))
    }
}

fn exists(path: &Path) -> bool {
    // Pi checks with access(F_OK), which follows symlinks like metadata does.
    std::fs::metadata(path).is_ok()
}

/// macOS screenshot names put U+202F before AM/PM: `Screen Shot 10.00.00 AM.png`.
fn am_pm_variant(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < path.len() {
        let rest = &path[i..];
        if rest.starts_with(' ') && bytes.len() >= i + 4 {
            let marker = &bytes[i + 1..i + 4];
            let is_am_pm =
                marker[0].eq_ignore_ascii_case(&b'a') || marker[0].eq_ignore_ascii_case(&b'p');
            if is_am_pm && marker[1].eq_ignore_ascii_case(&b'm') && marker[2] == b'.' {
                out.push('\u{202F}');
                out.push_str(&path[i + 1..i + 4]);
                i += 4;
                continue;
            }
        }
        // Advance by one whole character.
        let ch = rest.chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Resolves a path for reading, trying the macOS variants Pi tries when the path does not exist:
/// U+202F before AM/PM, NFD, curly apostrophe, and NFD with curly apostrophe.
pub(crate) fn resolve_read_path(path: &str, cwd: &Path) -> PathBuf {
    let resolved = resolve_to_cwd(path, cwd);
    if exists(&resolved) {
        return resolved;
    }
    let Some(text) = resolved.to_str() else {
        return resolved;
    };
    let am_pm = am_pm_variant(text);
    let nfd: String = text.nfd().collect();
    let curly = text.replace('\'', "\u{2019}");
    let nfd_curly = nfd.replace('\'', "\u{2019}");
    for candidate in [am_pm, nfd, curly, nfd_curly] {
        if candidate != text && exists(Path::new(&candidate)) {
            return PathBuf::from(candidate);
        }
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_and_absolute_paths() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            resolve_to_cwd("src/a.rs", cwd),
            PathBuf::from("/work/project/src/a.rs")
        );
        assert_eq!(
            resolve_to_cwd("@src/./b/../a.rs", cwd),
            PathBuf::from("/work/project/src/a.rs")
        );
        assert_eq!(
            resolve_to_cwd("/etc//hosts/", cwd),
            PathBuf::from("/etc/hosts")
        );
        assert_eq!(resolve_to_cwd("../../..", cwd), PathBuf::from("/"));
        assert_eq!(
            resolve_to_cwd("a\u{00A0}b", cwd),
            PathBuf::from("/work/project/a b")
        );
        assert_eq!(
            resolve_to_cwd("file:///tmp/a%20b", cwd),
            PathBuf::from("/tmp/a b")
        );
    }

    #[test]
    fn am_pm_gets_narrow_no_break_space() {
        assert_eq!(
            am_pm_variant("Shot 10.00 AM.png"),
            "Shot 10.00\u{202F}AM.png"
        );
        assert_eq!(am_pm_variant("Shot pm.png"), "Shot\u{202F}pm.png");
        assert_eq!(am_pm_variant("plain.png"), "plain.png");
    }

    #[test]
    fn read_path_finds_curly_apostrophe_variant() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("Capture d\u{2019}écran.png");
        std::fs::write(&real, b"x").unwrap();
        assert_eq!(resolve_read_path("Capture d'écran.png", dir.path()), real);
        // A missing path with no variant comes back as resolved.
        assert_eq!(
            resolve_read_path("nope'.png", dir.path()),
            dir.path().join("nope'.png")
        );
    }
}
