//! Package sources as settings and `pi install` spell them: `npm:<spec>`, git (`git:` shorthand
//! or an `https://`, `ssh://`, `git://` URL, optionally `@ref`), or a local path. Pi 1.6.0's
//! identity rules: an npm package is its name, a git package its host and path without the
//! ref, a local package its resolved path; two spellings of one identity are one package.

use std::path::{Path, PathBuf};

use crate::config::paths::resolve_path;

/// A parsed package source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Npm(NpmSource),
    Git(GitSource),
    /// A path, relative to the settings file that holds it (or the cwd on the command line).
    Local(String),
}

/// `npm:<name>[@<version or range>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpmSource {
    /// What follows `npm:`, handed to `npm install` as is.
    pub spec: String,
    pub name: String,
    pub version: Option<String>,
    /// An exact version (`@1.2.3`): never updated.
    pub pinned: bool,
}

/// A git repository, optionally at a ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSource {
    /// What `git clone` gets.
    pub repo: String,
    pub host: String,
    /// `user/repo`, without `.git`.
    pub path: String,
    /// A tag, branch or commit; a configured ref is pinned.
    pub git_ref: Option<String>,
}

impl Source {
    /// Pi's `parseSource`: `npm:` first, then anything that is not a known URL scheme is a
    /// path, then git; what git cannot parse is a path too.
    pub fn parse(source: &str) -> Source {
        if let Some(spec) = source.strip_prefix("npm:") {
            let spec = spec.trim();
            let (name, version) = split_npm_spec(spec);
            let pinned = version.as_deref().is_some_and(is_exact_version);
            return Source::Npm(NpmSource {
                spec: spec.to_string(),
                name,
                version,
                pinned,
            });
        }
        if is_local_path(source) {
            return Source::Local(source.to_string());
        }
        match parse_git(source) {
            Some(git) => Source::Git(git),
            None => Source::Local(source.to_string()),
        }
    }

    /// The identity two sources share when they name the same package; local paths resolve
    /// against `base` (the directory of the settings file, or the cwd for command input).
    pub fn identity(&self, base: &Path) -> String {
        match self {
            Source::Npm(npm) => format!("npm:{}", npm.name),
            Source::Git(git) => format!("git:{}/{}", git.host, git.path),
            Source::Local(path) => format!("local:{}", resolve_local(path, base).display()),
        }
    }
}

/// A local source's absolute path (`~` expanded, `.` and `..` removed, `file:` dropped).
pub fn resolve_local(path: &str, base: &Path) -> PathBuf {
    let path = path.trim();
    let path = path.strip_prefix("file://").unwrap_or(path);
    let path = path.strip_prefix("file:").unwrap_or(path);
    resolve_path(path, base, crate::config::home().as_deref())
}

/// Pi's `isLocalPath`: everything but the known remote prefixes.
fn is_local_path(value: &str) -> bool {
    let trimmed = value.trim();
    ![
        "npm:", "git:", "github:", "http:", "https:", "ssh:", "builtin:",
    ]
    .iter()
    .any(|p| trimmed.starts_with(p))
}

/// `name[@version]` where a scoped name keeps its leading `@`.
fn split_npm_spec(spec: &str) -> (String, Option<String>) {
    let skip = usize::from(spec.starts_with('@'));
    match spec[skip..].find('@') {
        Some(at) if at > 0 && skip + at + 1 < spec.len() => {
            let at = skip + at;
            (spec[..at].to_string(), Some(spec[at + 1..].to_string()))
        }
        _ => (spec.to_string(), None),
    }
}

/// An exact semver version (`1.2.3`, `v1.2.3-beta.1`, `=1.0.0`), as `semver.valid` accepts.
pub fn is_exact_version(version: &str) -> bool {
    let v = version.trim();
    let v = v.strip_prefix('=').unwrap_or(v);
    let v = v.strip_prefix('v').unwrap_or(v);
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && (core.len() == v.len() || v[core.len()..].len() > 1)
}

/// Pi's `splitRef`: the repository and the ref after the first `@` of the path.
fn split_ref(url: &str) -> (String, Option<String>) {
    let cut = |prefix: &str, path: &str| -> Option<(String, String)> {
        let at = path.find('@')?;
        let (repo_path, git_ref) = (&path[..at], &path[at + 1..]);
        (!repo_path.is_empty() && !git_ref.is_empty())
            .then(|| (format!("{prefix}{repo_path}"), git_ref.to_string()))
    };
    if let Some(rest) = url.strip_prefix("git@") {
        if let Some(colon) = rest.find(':') {
            let prefix = format!("git@{}:", &rest[..colon]);
            return match cut(&prefix, &rest[colon + 1..]) {
                Some((repo, r)) => (repo, Some(r)),
                None => (url.to_string(), None),
            };
        }
    }
    if let Some(scheme_end) = url.find("://") {
        let after = &url[scheme_end + 3..];
        let Some(slash) = after.find('/') else {
            return (url.to_string(), None);
        };
        let prefix = &url[..scheme_end + 3 + slash + 1];
        let path = after[slash + 1..].trim_start_matches('/');
        return match cut(prefix, path) {
            Some((repo, r)) => (repo.trim_end_matches('/').to_string(), Some(r)),
            None => (url.to_string(), None),
        };
    }
    let Some(slash) = url.find('/') else {
        return (url.to_string(), None);
    };
    match cut(&url[..slash + 1], &url[slash + 1..]) {
        Some((repo, r)) => (repo, Some(r)),
        None => (url.to_string(), None),
    }
}

fn unsafe_part(value: &str, allow_slash: bool) -> bool {
    value.contains('\0')
        || value.contains('\\')
        || value.starts_with('/')
        || (!allow_slash && value.contains('/'))
        || value.split('/').any(|s| s == "..")
        || value.contains('%')
}

fn build_git(repo: String, host: &str, path: &str, git_ref: Option<String>) -> Option<GitSource> {
    if path.starts_with('/') {
        return None;
    }
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_start_matches('/');
    if host.is_empty() || path.is_empty() || path.split('/').count() < 2 {
        return None;
    }
    if unsafe_part(host, false) || unsafe_part(path, true) {
        return None;
    }
    Some(GitSource {
        repo,
        host: host.to_string(),
        path: path.to_string(),
        git_ref,
    })
}

/// Pi's `parseGitUrl`: with `git:` every shorthand (`host/user/repo`, `user/repo` for
/// GitHub, `git@host:user/repo`), without it only explicit protocol URLs.
pub fn parse_git(source: &str) -> Option<GitSource> {
    let trimmed = source.trim();
    let has_prefix = trimmed.starts_with("git:");
    let url = if has_prefix {
        trimmed[4..].trim()
    } else {
        trimmed
    };
    let lower = url.to_ascii_lowercase();
    let has_protocol = ["https://", "http://", "ssh://", "git://"]
        .iter()
        .any(|p| lower.starts_with(p));
    if !has_prefix && !has_protocol {
        return None;
    }
    let (repo, mut git_ref) = split_ref(url);
    // `#ref` (hosted-git-info's committish) also names a ref.
    let repo = match repo.clone().split_once('#') {
        Some((r, committish)) if !committish.is_empty() => {
            git_ref = git_ref.or(Some(committish.to_string()));
            r.to_string()
        }
        _ => repo,
    };
    if let Some(rest) = repo.strip_prefix("git@") {
        let (host, path) = rest.split_once(':')?;
        return build_git(repo.clone(), host, path, git_ref);
    }
    if has_protocol {
        let after = &repo[repo.find("://")? + 3..];
        let (authority, path) = after.split_once('/').unwrap_or((after, ""));
        let host_port = authority.rsplit('@').next().unwrap_or(authority);
        let host = host_port.split(':').next().unwrap_or(host_port);
        return build_git(repo.clone(), host, path, git_ref);
    }
    if let Some(shorthand) = repo.strip_prefix("github:") {
        return build_git(
            format!("https://github.com/{shorthand}"),
            "github.com",
            shorthand,
            git_ref,
        );
    }
    let (host, path) = repo.split_once('/')?;
    if !host.contains('.') && host != "localhost" {
        // `user/repo` is GitHub's shorthand.
        if path.split('/').count() == 1 {
            return build_git(
                format!("https://github.com/{repo}"),
                "github.com",
                &repo,
                git_ref,
            );
        }
        return None;
    }
    build_git(format!("https://{repo}"), host, path, git_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(s: &str) -> GitSource {
        match Source::parse(s) {
            Source::Git(g) => g,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn npm_specs() {
        let Source::Npm(n) = Source::parse("npm:@scope/pkg@1.2.3") else {
            panic!()
        };
        assert_eq!(
            (n.name.as_str(), n.version.as_deref(), n.pinned),
            ("@scope/pkg", Some("1.2.3"), true)
        );
        let Source::Npm(n) = Source::parse("npm:pkg@^1.0.0") else {
            panic!()
        };
        assert!(!n.pinned);
        let Source::Npm(n) = Source::parse("npm:pkg@file:/tmp/p.tgz") else {
            panic!()
        };
        assert_eq!((n.name.as_str(), n.pinned), ("pkg", false));
        let Source::Npm(n) = Source::parse("npm:@scope/pkg") else {
            panic!()
        };
        assert_eq!((n.name.as_str(), n.version), ("@scope/pkg", None));
    }

    #[test]
    fn git_forms_share_identity() {
        let base = Path::new("/");
        let a = git("git:github.com/user/repo@v1");
        assert_eq!(a.repo, "https://github.com/user/repo");
        assert_eq!(a.git_ref.as_deref(), Some("v1"));
        let b = git("https://github.com/user/repo.git");
        let c = git("git:git@github.com:user/repo");
        let d = git("ssh://git@github.com/user/repo@abc123");
        assert_eq!(d.git_ref.as_deref(), Some("abc123"));
        assert_eq!(d.repo, "ssh://git@github.com/user/repo");
        for s in [&b, &c, &d] {
            assert_eq!(
                Source::Git(s.clone()).identity(base),
                Source::Git(a.clone()).identity(base)
            );
        }
        assert_eq!(git("git:user/repo").host, "github.com");
        assert_eq!(
            git("git:example.test/user/pkg").repo,
            "https://example.test/user/pkg"
        );
    }

    #[test]
    fn paths_and_unparseable_git_are_local() {
        assert_eq!(Source::parse("./pkg"), Source::Local("./pkg".into()));
        assert_eq!(Source::parse("/abs/pkg"), Source::Local("/abs/pkg".into()));
        assert_eq!(
            Source::parse("git:nohost"),
            Source::Local("git:nohost".into())
        );
        assert_eq!(
            Source::parse("../x").identity(Path::new("/a/b")),
            "local:/a/x"
        );
    }

    #[test]
    fn exact_versions() {
        for v in ["1.2.3", "v1.2.3", "1.0.0-beta.1", "=2.0.0"] {
            assert!(is_exact_version(v), "{v}");
        }
        for v in ["^1.2.3", "1.2", "latest", "1.x", "file:../a.tgz", ">=1.0.0"] {
            assert!(!is_exact_version(v), "{v}");
        }
    }
}
