//! Where a resource comes from: Pi's `sourceInfo`, the provenance `pi.getAllTools()`,
//! `pi.getCommands()` and RPC's `get_commands` give every tool, command, prompt template and
//! skill (extensions.md "pi.getCommands()", rpc-commands.md "get_commands").
//!
//! Pi's values, as 1.6.0 fills them:
//! - `builtin`: shipped with Pi (`builtin:read`, `builtin:mcp`, …), scope `temporary`;
//! - `auto`: found in `<agentDir>/{extensions,skills,prompts,themes}` (scope `user`, base dir
//!   the agent dir) or the trusted project's `.pi/…` (scope `project`, base dir `.pi`);
//! - `local`: named by a settings entry (`extensions`, `skills`, `prompts`, `themes`), no
//!   base dir; or, for a path found no other way (`--skill`, `--prompt-template`), scope
//!   `temporary` with the file's directory as base dir;
//! - `cli`: an extension file `-e` loaded (scope `temporary`);
//! - a package source as written (`npm:x`, `../pkg`, the resolved path of a `-e` directory)
//!   with origin `package`, the package's root as base dir and its changelog when it has one.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// Which settings layer (or none) brought a resource in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceScope {
    User,
    Project,
    Temporary,
}

impl SourceScope {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceScope::User => "user",
            SourceScope::Project => "project",
            SourceScope::Temporary => "temporary",
        }
    }
}

/// A resource Pi loaded directly, or one of a package's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceOrigin {
    TopLevel,
    Package,
}

/// One resource's provenance, without its path (the same for every file of a package).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceInfo {
    /// `builtin`, `auto`, `local`, `cli`, or the package source as written.
    pub source: String,
    pub scope: SourceScope,
    pub origin: SourceOrigin,
    pub base_dir: Option<PathBuf>,
    /// A package's changelog (`pi.changelogPath`, else `CHANGELOG.md`), when it exists.
    pub changelog_path: Option<PathBuf>,
}

impl SourceInfo {
    fn top_level(source: &str, scope: SourceScope, base_dir: Option<PathBuf>) -> SourceInfo {
        SourceInfo {
            source: source.to_string(),
            scope,
            origin: SourceOrigin::TopLevel,
            base_dir,
            changelog_path: None,
        }
    }

    /// Shipped with Pi: core tools, `builtin:mcp`, `builtin:llama.cpp`, codemode.
    pub fn builtin() -> SourceInfo {
        SourceInfo::top_level("builtin", SourceScope::Temporary, None)
    }

    /// An extension file named by `-e`.
    pub fn cli() -> SourceInfo {
        SourceInfo::top_level("cli", SourceScope::Temporary, None)
    }

    /// Auto-discovered under `base_dir` (the agent dir, or the project's `.pi`).
    pub fn auto(scope: SourceScope, base_dir: &Path) -> SourceInfo {
        SourceInfo::top_level("auto", scope, Some(base_dir.to_path_buf()))
    }

    /// Contributed by the extension at `extension` (its `resources_discover` handler): the
    /// source names the extension file without `.ts`/`.js`, based in its directory.
    pub fn contributed_by(extension: &Path) -> SourceInfo {
        let file = extension
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = file
            .strip_suffix(".ts")
            .or_else(|| file.strip_suffix(".js"))
            .unwrap_or(&file);
        SourceInfo::top_level(
            &format!("extension:{name}"),
            SourceScope::Temporary,
            extension.parent().map(Path::to_path_buf),
        )
    }

    /// Named by an entry of the `scope` settings file.
    pub fn setting(scope: SourceScope) -> SourceInfo {
        SourceInfo::top_level("local", scope, None)
    }

    /// A resource of the package `source` (as written) installed at `root`; a package that
    /// is a single file has its directory as base dir and no changelog.
    pub fn package(source: &str, scope: SourceScope, root: &Path) -> SourceInfo {
        let (base_dir, changelog_path) = if root.is_file() {
            (root.parent().map(Path::to_path_buf), None)
        } else {
            (Some(root.to_path_buf()), changelog_of(root))
        };
        SourceInfo {
            source: source.to_string(),
            scope,
            origin: SourceOrigin::Package,
            base_dir,
            changelog_path,
        }
    }

    /// Pi's provenance of a path nothing else claimed: under the agent dir's or the
    /// project's resource directories it is theirs, anything else is a temporary local file
    /// based in its directory (or in itself, for a directory).
    pub fn for_path(path: &Path, agent_dir: &Path, cwd: &Path) -> SourceInfo {
        const KINDS: [&str; 4] = ["skills", "prompts", "themes", "extensions"];
        let project = super::project_config_dir(cwd);
        for (scope, base) in [
            (SourceScope::User, agent_dir),
            (SourceScope::Project, project.as_path()),
        ] {
            if let Some(root) = KINDS
                .iter()
                .map(|kind| base.join(kind))
                .find(|root| path.starts_with(root))
            {
                return SourceInfo::top_level("local", scope, Some(root));
            }
        }
        let base = if path.is_dir() {
            path.to_path_buf()
        } else {
            path.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        SourceInfo::top_level("local", SourceScope::Temporary, Some(base))
    }

    /// Pi's load order of resources found through settings and discovery (lower first):
    /// project settings entries, project discovery, user settings entries, user discovery,
    /// packages.
    pub fn precedence(&self) -> u8 {
        if self.origin == SourceOrigin::Package {
            return 4;
        }
        let scope = if self.scope == SourceScope::Project {
            0
        } else {
            2
        };
        scope + u8::from(self.source != "local")
    }

    /// `{path, source, scope, origin, baseDir?, changelogPath?}` as Pi reports it.
    pub fn to_json(&self, path: &str) -> Value {
        let mut out = json!({
            "path": path,
            "source": self.source,
            "scope": self.scope.as_str(),
            "origin": match self.origin {
                SourceOrigin::TopLevel => "top-level",
                SourceOrigin::Package => "package",
            },
        });
        if let Some(dir) = &self.base_dir {
            out["baseDir"] = dir.display().to_string().into();
        }
        if let Some(changelog) = &self.changelog_path {
            out["changelogPath"] = changelog.display().to_string().into();
        }
        out
    }

    /// A built-in resource's `{path: "builtin:<name>", …}`.
    pub fn builtin_json(name: &str) -> Value {
        SourceInfo::builtin().to_json(&format!("builtin:{name}"))
    }
}

/// The provenance of a run's resources: the roots they were found under (files, skill
/// directories, resource directories), each with its [`SourceInfo`], in load order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    roots: Vec<(PathBuf, SourceInfo)>,
    agent_dir: PathBuf,
    cwd: PathBuf,
}

impl Provenance {
    pub fn new(agent_dir: &Path, cwd: &Path) -> Provenance {
        Provenance {
            roots: Vec::new(),
            agent_dir: agent_dir.to_path_buf(),
            cwd: cwd.to_path_buf(),
        }
    }

    /// Records where what is found under `root` comes from (the first record of a root wins).
    pub fn add(&mut self, root: &Path, info: SourceInfo) {
        if !self.roots.iter().any(|(r, _)| r == root) {
            self.roots.push((root.to_path_buf(), info));
        }
    }

    /// Where `path` comes from, as Pi looks it up: the root equal to it, else the first
    /// root holding it, else [`SourceInfo::for_path`].
    pub fn of(&self, path: &Path) -> SourceInfo {
        self.roots
            .iter()
            .find(|(root, _)| root == path)
            .or_else(|| self.roots.iter().find(|(root, _)| path.starts_with(root)))
            .map(|(_, info)| info.clone())
            .unwrap_or_else(|| SourceInfo::for_path(path, &self.agent_dir, &self.cwd))
    }

    /// [`Provenance::of`] as Pi's JSON.
    pub fn json(&self, path: &Path) -> Value {
        self.of(path).to_json(&path.display().to_string())
    }
}

/// The package's changelog: `package.json`'s `pi.changelogPath` (inside the package), else
/// `CHANGELOG.md`, when the file exists.
fn changelog_of(root: &Path) -> Option<PathBuf> {
    let declared = std::fs::read_to_string(root.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|manifest| {
            manifest
                .pointer("/pi/changelogPath")
                .map(|v| v.as_str().map(String::from))
        });
    let name = match declared {
        // An empty or non-string `changelogPath` turns the changelog off.
        Some(Some(name)) if !name.is_empty() => name,
        Some(_) => return None,
        None => "CHANGELOG.md".to_string(),
    };
    let path = root.join(name);
    let inside = match (path.canonicalize(), root.canonicalize()) {
        (Ok(file), Ok(root)) => file.starts_with(&root) && file != root,
        _ => false,
    };
    inside.then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_follows_pis_ranks() {
        let dir = Path::new("/a");
        let ranks: Vec<u8> = [
            SourceInfo::setting(SourceScope::Project),
            SourceInfo::auto(SourceScope::Project, dir),
            SourceInfo::setting(SourceScope::User),
            SourceInfo::auto(SourceScope::User, dir),
            SourceInfo::package("npm:x", SourceScope::User, dir),
        ]
        .iter()
        .map(SourceInfo::precedence)
        .collect();
        assert_eq!(ranks, [0, 1, 2, 3, 4]);
    }

    /// Real Pi 1.6.0 (fixtures/extensions/source-info/realpi.json): a skill directory the
    /// extension `auto-ext.ts` contributed gives its skills `extension:auto-ext`, scope
    /// `temporary`, the extension's directory as base dir.
    #[test]
    fn what_an_extension_contributes_names_the_extension() {
        let mut provenance = Provenance::new(Path::new("/home/u/.pi/agent"), Path::new("/w"));
        let extension = Path::new("/home/u/.pi/agent/extensions/auto-ext.ts");
        provenance.add(
            Path::new("/w/disc/skills"),
            SourceInfo::contributed_by(extension),
        );
        assert_eq!(
            provenance.json(Path::new("/w/disc/skills/s/SKILL.md")),
            json!({"path": "/w/disc/skills/s/SKILL.md", "source": "extension:auto-ext",
                   "scope": "temporary", "origin": "top-level",
                   "baseDir": "/home/u/.pi/agent/extensions"})
        );
        assert_eq!(
            SourceInfo::contributed_by(Path::new("/x/tools.js")).source,
            "extension:tools"
        );
    }

    #[test]
    fn paths_nothing_claimed_belong_to_their_resource_root_or_directory() {
        let agent = Path::new("/home/u/.pi/agent");
        let cwd = Path::new("/work/p");
        let user = SourceInfo::for_path(&agent.join("prompts/a.md"), agent, cwd);
        assert_eq!(user.to_json("x")["scope"], "user");
        assert_eq!(user.to_json("x")["baseDir"], "/home/u/.pi/agent/prompts");
        let project = SourceInfo::for_path(&cwd.join(".pi/skills/s/SKILL.md"), agent, cwd);
        assert_eq!(project.to_json("x")["baseDir"], "/work/p/.pi/skills");
        let loose = SourceInfo::for_path(&cwd.join("notes/x.md"), agent, cwd);
        assert_eq!(
            loose.to_json("x"),
            json!({"path": "x", "source": "local", "scope": "temporary",
                   "origin": "top-level", "baseDir": "/work/p/notes"})
        );
    }

    #[test]
    fn a_packages_changelog_is_found_unless_turned_off() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("CHANGELOG.md"), "# c").unwrap();
        let info = SourceInfo::package("../pkg", SourceScope::User, root);
        assert_eq!(info.changelog_path, Some(root.join("CHANGELOG.md")));
        std::fs::write(root.join("package.json"), r#"{"pi":{"changelogPath":""}}"#).unwrap();
        assert_eq!(
            SourceInfo::package("../pkg", SourceScope::User, root).changelog_path,
            None
        );
    }
}
