//! Installing, removing, updating and resolving the packages of the `packages` setting, as Pi
//! 1.6.0's package manager does: npm packages under `<agent dir>/npm` (`npm install --prefix`),
//! git packages cloned to `<agent dir>/git/<host>/<path>`, local paths used in place; project
//! packages (`-l`) under `<cwd>/.pi/npm` and `<cwd>/.pi/git`, only in a trusted project.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Map, Value};

use super::resources::{package_resources, Found, Kind};
use super::source::{resolve_local, GitSource, NpmSource, Source};
use crate::config::{self, SourceInfo, SourceScope, CONFIG_DIR_NAME};

/// Which settings file a package is declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageScope {
    /// `<agent dir>/settings.json`.
    User,
    /// `<cwd>/.pi/settings.json`.
    Project,
}

/// What the manager reports while it works (Pi's progress events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// `Installing npm:x...`, `Updating git:…...`, `Removing …...`.
    Start(String),
    /// A warning that did not stop the work.
    Warning(String),
    /// `<source>[ (project)] <from> -> <to>` after an update changed a package.
    Updated(String),
}

/// Whether child processes write to the terminal (commands) or are captured (startup).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Inherit,
    Capture,
}

/// One entry of `pi list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    pub source: String,
    pub scope: PackageScope,
    /// The object form (with resource filters).
    pub filtered: bool,
    /// Where it is installed, when it is.
    pub installed_path: Option<PathBuf>,
}

/// A package resource the run may load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageResource {
    pub kind: Kind,
    pub path: PathBuf,
    pub enabled: bool,
    /// The configured source it comes from.
    pub source: String,
    pub scope: PackageScope,
    /// The same as Pi reports it (`sourceInfo`).
    pub source_info: SourceInfo,
}

/// A configured package that could not be installed at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallFailure {
    pub source: String,
    pub message: String,
}

impl InstallFailure {
    /// Pi's startup warning.
    pub fn warning(&self) -> String {
        format!(
            "Extension package \"{}\": could not be installed: {}",
            self.source, self.message
        )
    }
}

/// The packages' resources, in load order.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    pub resources: Vec<PackageResource>,
    pub failures: Vec<InstallFailure>,
}

impl Resolved {
    /// The enabled files of one kind.
    pub fn enabled(&self, kind: Kind) -> Vec<PathBuf> {
        self.enabled_with_sources(kind)
            .into_iter()
            .map(|(path, _)| path)
            .collect()
    }

    /// The enabled files of one kind with the package each comes from.
    pub fn enabled_with_sources(&self, kind: Kind) -> Vec<(PathBuf, SourceInfo)> {
        self.resources
            .iter()
            .filter(|r| r.kind == kind && r.enabled)
            .map(|r| (r.path.clone(), r.source_info.clone()))
            .collect()
    }
}

/// `PI_OFFLINE` (`1`, `true`, `yes`): no installs or updates touch the network.
pub fn offline() -> bool {
    std::env::var("PI_OFFLINE")
        .map(|v| v == "1" || v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("yes"))
        .unwrap_or(false)
}

/// The package manager of one cwd and agent dir.
pub struct PackageManager {
    cwd: PathBuf,
    agent_dir: PathBuf,
    settings: config::Settings,
    trusted: bool,
    output: Output,
    progress: Box<dyn FnMut(Progress) + Send>,
    /// Where user-scope packages live instead of the agent dir, while temporary (`-e`)
    /// packages resolve.
    user_base: Option<PathBuf>,
}

type Result<T> = std::result::Result<T, String>;

impl PackageManager {
    /// `trusted` decides whether project settings are read and project storage used.
    pub fn new(cwd: &Path, agent_dir: &Path, trusted: bool, output: Output) -> PackageManager {
        let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        PackageManager {
            settings: config::Settings::load(agent_dir, &cwd, trusted),
            agent_dir: agent_dir.to_path_buf(),
            cwd,
            trusted,
            output,
            progress: Box::new(|_| {}),
            user_base: None,
        }
    }

    /// Receives progress events.
    pub fn on_progress(&mut self, f: impl FnMut(Progress) + Send + 'static) {
        self.progress = Box::new(f);
    }

    /// Problems met reading the settings files.
    pub fn settings_errors(&self) -> Vec<String> {
        self.settings
            .errors()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn emit(&mut self, p: Progress) {
        (self.progress)(p);
    }

    fn base_dir(&self, scope: PackageScope) -> PathBuf {
        match scope {
            PackageScope::User => self
                .user_base
                .clone()
                .unwrap_or_else(|| self.agent_dir.clone()),
            PackageScope::Project => self.cwd.join(CONFIG_DIR_NAME),
        }
    }

    fn check_scope(&self, scope: PackageScope) -> Result<()> {
        if scope == PackageScope::Project && !self.trusted {
            return Err(
                "Project is not trusted; refusing to access project package storage".into(),
            );
        }
        Ok(())
    }

    fn npm_root(&self, scope: PackageScope) -> PathBuf {
        self.base_dir(scope).join("npm")
    }

    fn git_root(&self, scope: PackageScope) -> PathBuf {
        self.base_dir(scope).join("git")
    }

    fn npm_path(&self, npm: &NpmSource, scope: PackageScope) -> PathBuf {
        self.npm_root(scope).join("node_modules").join(&npm.name)
    }

    fn git_path(&self, git: &GitSource, scope: PackageScope) -> PathBuf {
        self.git_root(scope).join(&git.host).join(&git.path)
    }

    /// Where `source` lives on disk, if it is there.
    pub fn installed_path(&self, source: &str, scope: PackageScope) -> Option<PathBuf> {
        let path = match Source::parse(source) {
            Source::Npm(n) => self.npm_path(&n, scope),
            Source::Git(g) => self.git_path(&g, scope),
            Source::Local(p) => resolve_local(&p, &self.base_dir(scope)),
        };
        path.exists().then_some(path)
    }

    fn packages(&self, scope: PackageScope) -> Vec<Value> {
        let map = match scope {
            PackageScope::User => self.settings.global(),
            PackageScope::Project => self.settings.project(),
        };
        map.get("packages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    fn save_packages(&mut self, scope: PackageScope, packages: Vec<Value>) -> Result<()> {
        let s = match scope {
            PackageScope::User => config::Scope::Global,
            PackageScope::Project => config::Scope::Project,
        };
        self.settings
            .set(s, &["packages"], Some(Value::Array(packages)))
            .map_err(|e| e.to_string())
    }

    /// `pi list`: user packages, then project packages.
    pub fn list(&self) -> Vec<Configured> {
        let mut out = Vec::new();
        for scope in [PackageScope::User, PackageScope::Project] {
            for entry in self.packages(scope) {
                let Some(source) = source_of(&entry) else {
                    continue;
                };
                out.push(Configured {
                    installed_path: self.installed_path(&source, scope),
                    filtered: entry.is_object(),
                    source,
                    scope,
                });
            }
        }
        out
    }

    /// `pi install`: installs `source` and adds it to the settings (replacing an entry of the
    /// same package spelled another way).
    pub fn install_and_persist(&mut self, source: &str, local: bool) -> Result<()> {
        let scope = scope_of(local);
        self.check_scope(scope)?;
        self.emit(Progress::Start(format!("Installing {source}...")));
        match Source::parse(source) {
            Source::Npm(n) => self.install_npm(std::slice::from_ref(&n.spec), scope)?,
            Source::Git(g) => self.install_git(&g, scope)?,
            Source::Local(p) => {
                let resolved = resolve_local(&p, &self.cwd);
                if !resolved.exists() {
                    return Err(format!("Path does not exist: {}", resolved.display()));
                }
            }
        }
        self.add_to_settings(source, scope)
    }

    fn add_to_settings(&mut self, source: &str, scope: PackageScope) -> Result<()> {
        let normalized = match Source::parse(source) {
            Source::Local(p) => {
                let rel = relative(&self.base_dir(scope), &resolve_local(&p, &self.cwd));
                if rel.as_os_str().is_empty() {
                    ".".to_string()
                } else {
                    rel.to_string_lossy().into_owned()
                }
            }
            _ => source.to_string(),
        };
        let key = Source::parse(source).identity(&self.cwd);
        let base = self.base_dir(scope);
        let mut packages = self.packages(scope);
        let found = packages
            .iter()
            .position(|e| source_of(e).is_some_and(|s| Source::parse(&s).identity(&base) == key));
        match found {
            Some(i) => {
                if source_of(&packages[i]).as_deref() == Some(normalized.as_str()) {
                    return Ok(());
                }
                match &mut packages[i] {
                    Value::Object(m) => {
                        m.insert("source".into(), Value::String(normalized));
                    }
                    other => *other = Value::String(normalized),
                }
            }
            None => packages.push(Value::String(normalized)),
        }
        self.save_packages(scope, packages)
    }

    /// `pi remove`: uninstalls and drops the settings entry; `false` when no entry matched.
    pub fn remove_and_persist(&mut self, source: &str, local: bool) -> Result<bool> {
        let scope = scope_of(local);
        self.check_scope(scope)?;
        self.emit(Progress::Start(format!("Removing {source}...")));
        match Source::parse(source) {
            Source::Npm(n) => {
                let root = self.npm_root(scope);
                if root.exists() {
                    let root = root.canonicalize().unwrap_or(root);
                    let root = root.to_string_lossy().into_owned();
                    let args: Vec<String> = match self.npm_flavour()? {
                        Flavour::Bun => {
                            vec!["uninstall".into(), n.name.clone(), "--cwd".into(), root]
                        }
                        Flavour::Pnpm => {
                            vec!["uninstall".into(), n.name.clone(), "--prefix".into(), root]
                        }
                        Flavour::Npm => [
                            "uninstall",
                            n.name.as_str(),
                            "--prefix",
                            root.as_str(),
                            "--legacy-peer-deps",
                            "--no-audit",
                            "--no-fund",
                        ]
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                    };
                    self.run_npm(&args, None)?;
                }
            }
            Source::Git(g) => {
                let target = self.git_path(&g, scope);
                remove_all(&target);
                remove_all(&update_marker(&target));
                prune_empty_parents(&target, &self.git_root(scope));
            }
            Source::Local(_) => {}
        }
        let key = Source::parse(source).identity(&self.cwd);
        let base = self.base_dir(scope);
        let mut packages = self.packages(scope);
        let before = packages.len();
        packages.retain(|e| source_of(e).is_none_or(|s| Source::parse(&s).identity(&base) != key));
        if packages.len() == before {
            return Ok(false);
        }
        self.save_packages(scope, packages)?;
        Ok(true)
    }

    /// `pi update --extensions` (all) or `pi update <source>` (one package). Pinned npm
    /// versions are left alone; git packages are reconciled to their ref (a pinned ref stays,
    /// an unpinned checkout moves to its remote branch). Returns nothing: changes are
    /// reported as [`Progress::Updated`].
    pub fn update(&mut self, source: Option<&str>) -> Result<()> {
        let wanted = source.map(|s| Source::parse(s).identity(&self.cwd));
        let mut entries = Vec::new();
        let mut all = Vec::new();
        for scope in [PackageScope::User, PackageScope::Project] {
            let base = self.base_dir(scope);
            for entry in self.packages(scope) {
                let Some(s) = source_of(&entry) else { continue };
                all.push(s.clone());
                if wanted
                    .as_ref()
                    .is_some_and(|w| *w != Source::parse(&s).identity(&base))
                {
                    continue;
                }
                entries.push((s, scope));
            }
        }
        if let Some(source) = source {
            if entries.is_empty() {
                return Err(no_match_message(source, &all));
            }
        }
        if offline() {
            return Ok(());
        }
        let mut updated = Vec::new();
        for (s, scope) in entries {
            match Source::parse(&s) {
                Source::Npm(n) if !n.pinned => {
                    let path = self.npm_path(&n, scope);
                    let before = installed_version(&path);
                    if let (Some(installed), Ok(latest)) = (&before, self.latest_npm_version(&n)) {
                        if !version_greater(&latest, installed) {
                            continue;
                        }
                    }
                    self.emit(Progress::Start(format!("Updating {s}...")));
                    let spec = if n.version.is_some() {
                        n.spec.clone()
                    } else {
                        format!("{}@latest", n.name)
                    };
                    self.install_npm(&[spec], scope)?;
                    let after = installed_version(&path);
                    if after != before {
                        updated.push((s.clone(), scope, before, after, false));
                    }
                }
                Source::Git(g) => {
                    self.emit(Progress::Start(format!("Updating {s}...")));
                    let target = self.git_path(&g, scope);
                    let before = git_head(&target);
                    self.update_git(&g, scope)?;
                    let after = git_head(&target);
                    if before != after {
                        updated.push((s.clone(), scope, before, after, true));
                    }
                }
                _ => {}
            }
        }
        for (s, scope, from, to, git) in updated {
            let fmt = |v: Option<String>| match v {
                None => "(none)".to_string(),
                Some(v) if git => v.chars().take(7).collect(),
                Some(v) => v,
            };
            let scope = if scope == PackageScope::Project {
                " (project)"
            } else {
                ""
            };
            self.emit(Progress::Updated(format!(
                "{s}{scope} {} -> {}",
                fmt(from),
                fmt(to)
            )));
        }
        Ok(())
    }

    /// The resources of every configured package (project entries replace user entries of
    /// the same package). Missing npm and git packages are installed first unless offline;
    /// one that fails is skipped and reported in [`Resolved::failures`].
    pub fn resolve(&mut self) -> Resolved {
        let mut entries: Vec<(Value, PackageScope)> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        let scopes: &[PackageScope] = if self.trusted {
            &[PackageScope::Project, PackageScope::User]
        } else {
            &[PackageScope::User]
        };
        for &scope in scopes {
            let base = self.base_dir(scope);
            for entry in self.packages(scope) {
                let Some(s) = source_of(&entry) else { continue };
                let id = Source::parse(&s).identity(&base);
                if let Some(i) = seen.iter().position(|x| *x == id) {
                    // A project `autoload: false` entry is a delta over the user entry: keep both.
                    let earlier_delta = entries[i].1 == PackageScope::Project
                        && entries[i].0.get("autoload") == Some(&Value::Bool(false));
                    if earlier_delta && scope == PackageScope::User {
                        seen.push(id);
                        entries.push((entry, scope));
                    }
                    continue;
                }
                seen.push(id);
                entries.push((entry, scope));
            }
        }
        let mut out = Resolved::default();
        for (entry, scope) in entries {
            let info_scope = match scope {
                PackageScope::User => SourceScope::User,
                PackageScope::Project => SourceScope::Project,
            };
            self.resolve_entry(&entry, scope, info_scope, &mut out);
        }
        out
    }

    /// `-e npm:…` / `-e git:…` (and other package sources): packages tried for this run
    /// only, installed when missing under `<agent>/tmp/extensions` (Pi's cache for them),
    /// never added to the settings. Their resources come after the configured ones'.
    pub fn resolve_temporary(&mut self, sources: &[String]) -> Resolved {
        let temporary = self.agent_dir.join("tmp").join("extensions");
        let saved = self.user_base.replace(temporary);
        let mut out = Resolved::default();
        for source in sources {
            self.resolve_entry(
                &Value::String(source.clone()),
                PackageScope::User,
                SourceScope::Temporary,
                &mut out,
            );
        }
        self.user_base = saved;
        out
    }

    /// Pi's refresh of a cached `-e` package, which no `pi update` reaches: an unpinned npm
    /// package with a newer version is installed again (`name@latest` for a bare name), a
    /// git checkout is pulled unless its ref is the commit checked out. A failed refresh
    /// keeps the cached copy.
    fn refresh_temporary(&mut self, parsed: &Source, source: &str, scope: PackageScope) {
        match parsed {
            Source::Npm(n) if !n.pinned => {
                let installed = installed_version(&self.npm_path(n, scope));
                let newer = match (installed, self.latest_npm_version(n)) {
                    (Some(installed), Ok(latest)) => version_greater(&latest, &installed),
                    _ => false,
                };
                if newer {
                    let spec = match n.version {
                        Some(_) => n.spec.clone(),
                        None => format!("{}@latest", n.name),
                    };
                    let _ = self.install_npm(&[spec], scope);
                }
            }
            Source::Git(g) => {
                let target = self.git_path(g, scope);
                let pinned_commit = g.git_ref.as_deref().filter(|r| {
                    (7..=64).contains(&r.len()) && r.chars().all(|c| c.is_ascii_hexdigit())
                });
                if let (Some(commit), Some(head)) = (pinned_commit, git_head(&target)) {
                    if head.to_lowercase().starts_with(&commit.to_lowercase()) {
                        return;
                    }
                }
                self.emit(Progress::Start(format!("Refreshing {source}...")));
                let _ = self.update_git(g, scope);
            }
            _ => {}
        }
    }

    /// Installs one configured package when it is missing and adds its resources to `out`
    /// (a failed install to its failures).
    /// `info_scope` is the scope its resources report (`temporary` for `-e` packages).
    fn resolve_entry(
        &mut self,
        entry: &Value,
        scope: PackageScope,
        info_scope: SourceScope,
        out: &mut Resolved,
    ) {
        let Some(source) = source_of(entry) else {
            return;
        };
        let filter = entry.as_object();
        let root = match Source::parse(&source) {
            Source::Local(p) => {
                let path = resolve_local(&p, &self.base_dir(scope));
                if path.is_file() {
                    out.resources.push(PackageResource {
                        kind: Kind::Extensions,
                        source_info: SourceInfo::package(&source, info_scope, &path),
                        path,
                        enabled: true,
                        source: source.clone(),
                        scope,
                    });
                    return;
                }
                if !path.is_dir() {
                    return;
                }
                path
            }
            parsed => {
                let path = match &parsed {
                    Source::Npm(n) => self.npm_path(n, scope),
                    Source::Git(g) => self.git_path(g, scope),
                    Source::Local(_) => return,
                };
                let needs_install = match &parsed {
                    Source::Npm(n) => !npm_matches(n, &path),
                    _ => !path.exists(),
                };
                if needs_install {
                    if offline() {
                        return;
                    }
                    self.emit(Progress::Start(format!("Installing {source}...")));
                    let result = match &parsed {
                        Source::Npm(n) => self.install_npm(std::slice::from_ref(&n.spec), scope),
                        Source::Git(g) => self.install_git(g, scope),
                        Source::Local(_) => Ok(()),
                    };
                    if let Err(message) = result {
                        out.failures.push(InstallFailure { source, message });
                        return;
                    }
                } else if info_scope == SourceScope::Temporary && !offline() {
                    self.refresh_temporary(&parsed, &source, scope);
                }
                path
            }
        };
        let source_info = SourceInfo::package(&source, info_scope, &root);
        match package_resources(&root, filter) {
            Some(found) => {
                for Found {
                    kind,
                    path,
                    enabled,
                } in found
                {
                    if !out
                        .resources
                        .iter()
                        .any(|r| r.kind == kind && r.path == path)
                    {
                        out.resources.push(PackageResource {
                            kind,
                            path,
                            enabled,
                            source: source.clone(),
                            scope,
                            source_info: source_info.clone(),
                        });
                    }
                }
            }
            // A directory declaring nothing is loaded as one extension.
            None => out.resources.push(PackageResource {
                kind: Kind::Extensions,
                path: root,
                enabled: true,
                source,
                scope,
                source_info,
            }),
        }
    }

    // ---- npm ----

    fn npm_command(&self) -> Result<(String, Vec<String>)> {
        let configured: Vec<String> = self
            .settings
            .global()
            .get("npmCommand")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        match configured.split_first() {
            None => Ok(("npm".into(), Vec::new())),
            Some((c, _)) if c.is_empty() => {
                Err("Invalid npmCommand: first array entry must be a non-empty command".into())
            }
            Some((c, rest)) => Ok((c.clone(), rest.to_vec())),
        }
    }

    fn npm_flavour(&self) -> Result<Flavour> {
        let (command, args) = self.npm_command()?;
        let name = |c: &str| {
            Path::new(c)
                .file_name()
                .map(|n| {
                    n.to_string_lossy()
                        .trim_end_matches(".cmd")
                        .trim_end_matches(".exe")
                        .to_string()
                })
                .unwrap_or_default()
        };
        let pick = |n: &str| match n {
            "pnpm" => Some(Flavour::Pnpm),
            "bun" => Some(Flavour::Bun),
            "npm" => Some(Flavour::Npm),
            _ => None,
        };
        if let Some(i) = args.iter().rposition(|a| a == "--") {
            if let Some(wrapped) = args.get(i + 1) {
                return Ok(pick(&name(wrapped)).unwrap_or(Flavour::Npm));
            }
        }
        Ok(pick(&name(&command))
            .or_else(|| args.iter().find_map(|a| pick(&name(a))))
            .unwrap_or(Flavour::Npm))
    }

    fn run_npm(&self, args: &[String], cwd: Option<&Path>) -> Result<()> {
        let (command, mut full) = self.npm_command()?;
        full.extend(args.iter().cloned());
        self.run(&command, &full, cwd)
    }

    fn ensure_npm_project(&self, root: &Path) -> Result<()> {
        std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
        ensure_gitignore(root)?;
        let pkg = root.join("package.json");
        if !pkg.exists() {
            std::fs::write(
                &pkg,
                "{\n  \"name\": \"pi-extensions\",\n  \"private\": true\n}",
            )
            .map_err(|e| format!("{}: {e}", pkg.display()))?;
        }
        Ok(())
    }

    fn install_npm(&self, specs: &[String], scope: PackageScope) -> Result<()> {
        self.check_scope(scope)?;
        let root = self.npm_root(scope);
        self.ensure_npm_project(&root)?;
        // npm writes broken nested lock paths when --prefix goes through a symlink.
        let root = root.canonicalize().unwrap_or(root);
        let root = root.to_string_lossy().into_owned();
        let mut args = vec!["install".to_string()];
        args.extend(specs.iter().cloned());
        match self.npm_flavour()? {
            Flavour::Bun => args.extend(["--cwd".into(), root, "--omit=peer".into()]),
            Flavour::Pnpm => args.extend([
                "--prefix".into(),
                root,
                "--config.auto-install-peers=false".into(),
                "--config.strict-peer-dependencies=false".into(),
                "--config.strict-dep-builds=false".into(),
            ]),
            // Host-provided pi packages are peers: never let npm install them.
            Flavour::Npm => args.extend([
                "--prefix".into(),
                root,
                "--legacy-peer-deps".into(),
                "--no-audit".into(),
                "--no-fund".into(),
            ]),
        }
        self.run_npm(&args, None)
    }

    fn dependency_install_args(&self) -> Result<Vec<String>> {
        let v: &[&str] = match self.npm_flavour()? {
            Flavour::Bun => &["install", "--omit=dev", "--omit=peer"],
            Flavour::Pnpm => &[
                "install",
                "--prod",
                "--config.auto-install-peers=false",
                "--config.strict-peer-dependencies=false",
                "--config.strict-dep-builds=false",
            ],
            Flavour::Npm => &[
                "install",
                "--omit=dev",
                "--legacy-peer-deps",
                "--no-audit",
                "--no-fund",
            ],
        };
        Ok(v.iter().map(|s| s.to_string()).collect())
    }

    /// `npm view <spec> version --json`: the newest version the spec allows.
    fn latest_npm_version(&self, n: &NpmSource) -> Result<String> {
        let (command, mut args) = self.npm_command()?;
        let spec = if n.version.is_some() {
            &n.spec
        } else {
            &n.name
        };
        args.extend([
            "view".into(),
            spec.clone(),
            "version".into(),
            "--json".into(),
        ]);
        let out = capture(&command, &args, &self.cwd)?;
        match serde_json::from_str::<Value>(out.trim()) {
            Ok(Value::String(v)) => Ok(v),
            Ok(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .max_by(|a, b| compare_versions(a, b))
                .map(str::to_string)
                .ok_or_else(|| "Unexpected response from npm view".into()),
            _ => Err("Unexpected response from npm view".into()),
        }
    }

    // ---- git ----

    fn install_git(&self, g: &GitSource, scope: PackageScope) -> Result<()> {
        self.check_scope(scope)?;
        let target = self.git_path(g, scope);
        if target.exists() {
            return self.update_git(g, scope);
        }
        let root = self.git_root(scope);
        ensure_gitignore(&root)?;
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        remove_all(&update_marker(&target));
        let result = (|| {
            self.run(
                "git",
                &[
                    "clone".into(),
                    g.repo.clone(),
                    target.to_string_lossy().into_owned(),
                ],
                None,
            )?;
            if let Some(r) = &g.git_ref {
                self.run("git", &["checkout".into(), r.clone()], Some(&target))?;
            }
            if target.join("package.json").exists() {
                self.run_npm(&self.dependency_install_args()?, Some(&target))?;
            }
            Ok(())
        })();
        if result.is_err() {
            remove_all(&target);
            prune_empty_parents(&target, &root);
        }
        result
    }

    fn update_git(&self, g: &GitSource, scope: PackageScope) -> Result<()> {
        let target = self.git_path(g, scope);
        if !target.exists() {
            return self.install_git(g, scope);
        }
        let (fetch, r) = match &g.git_ref {
            Some(r) => (
                vec!["fetch".to_string(), "origin".into(), r.clone()],
                "FETCH_HEAD".to_string(),
            ),
            None => self.upstream_target(&target),
        };
        self.run("git", &fetch, Some(&target))?;
        let local = capture("git", &["rev-parse".into(), "HEAD".into()], &target)?;
        let commit = format!("{r}^{{commit}}");
        let wanted = capture("git", &["rev-parse".into(), commit.clone()], &target)?;
        let marker = update_marker(&target);
        if local.trim() == wanted.trim() {
            if marker.exists() {
                return self.clean_and_install(&target, &marker);
            }
            if missing_dependencies(&target) {
                self.run_npm(&self.dependency_install_args()?, Some(&target))?;
            }
            return Ok(());
        }
        std::fs::write(&marker, "").map_err(|e| format!("{}: {e}", marker.display()))?;
        self.run(
            "git",
            &["reset".into(), "--hard".into(), commit],
            Some(&target),
        )?;
        self.clean_and_install(&target, &marker)
    }

    /// The remote branch an unpinned checkout follows, and how to fetch only it.
    fn upstream_target(&self, target: &Path) -> (Vec<String>, String) {
        let fetch = |branch: &str| {
            vec![
                "fetch".to_string(),
                "--prune".into(),
                "--no-tags".into(),
                "origin".into(),
                format!("+refs/heads/{branch}:refs/remotes/origin/{branch}"),
            ]
        };
        let upstream = capture(
            "git",
            &[
                "rev-parse".into(),
                "--abbrev-ref".into(),
                "@{upstream}".into(),
            ],
            target,
        );
        if let Ok(up) = upstream {
            if let Some(branch) = up.trim().strip_prefix("origin/").filter(|b| !b.is_empty()) {
                return (fetch(branch), "@{upstream}".into());
            }
        }
        let _ = capture(
            "git",
            &[
                "remote".into(),
                "set-head".into(),
                "origin".into(),
                "-a".into(),
            ],
            target,
        );
        let head = capture(
            "git",
            &["symbolic-ref".into(), "refs/remotes/origin/HEAD".into()],
            target,
        )
        .unwrap_or_default();
        match head.trim().strip_prefix("refs/remotes/origin/") {
            Some(branch) if !branch.is_empty() => (fetch(branch), "origin/HEAD".into()),
            _ => (
                vec![
                    "fetch".into(),
                    "--prune".into(),
                    "--no-tags".into(),
                    "origin".into(),
                    "+HEAD:refs/remotes/origin/HEAD".into(),
                ],
                "origin/HEAD".into(),
            ),
        }
    }

    fn clean_and_install(&self, target: &Path, marker: &Path) -> Result<()> {
        self.run("git", &["clean".into(), "-fdx".into()], Some(target))?;
        if target.join("package.json").exists() {
            self.run_npm(&self.dependency_install_args()?, Some(target))?;
        }
        remove_all(marker);
        Ok(())
    }

    // ---- processes ----

    fn run(&self, command: &str, args: &[String], cwd: Option<&Path>) -> Result<()> {
        let mut c = Command::new(command);
        c.args(args).stdin(Stdio::null());
        if let Some(dir) = cwd {
            c.current_dir(dir);
        }
        let describe = format!("{command} {}", args.join(" "));
        match self.output {
            Output::Inherit => {
                let status = c
                    .status()
                    .map_err(|e| format!("{describe} failed to start: {e}"))?;
                if status.success() {
                    Ok(())
                } else {
                    Err(format!("{describe} failed with code {}", code(&status)))
                }
            }
            Output::Capture => {
                // Startup: git and ssh must fail rather than prompt on the terminal.
                c.env("GIT_TERMINAL_PROMPT", "0");
                if std::env::var_os("GIT_SSH_COMMAND").is_none() {
                    c.env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
                }
                let out = c
                    .output()
                    .map_err(|e| format!("{describe} failed to start: {e}"))?;
                if out.status.success() {
                    return Ok(());
                }
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                let tail: String = {
                    let t = text.trim();
                    let start = t.len().saturating_sub(8000);
                    let start = (start..=t.len())
                        .find(|&i| t.is_char_boundary(i))
                        .unwrap_or(0);
                    t[start..].to_string()
                };
                let tail = if tail.is_empty() {
                    String::new()
                } else {
                    format!(":\n{tail}")
                };
                Err(format!(
                    "{describe} failed with code {}{tail}",
                    code(&out.status)
                ))
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Flavour {
    Npm,
    Pnpm,
    Bun,
}

fn code(status: &std::process::ExitStatus) -> String {
    status
        .code()
        .map(|c| c.to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn capture(command: &str, args: &[String], cwd: &Path) -> Result<String> {
    let out = Command::new(command)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{command} failed to start: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{command} {} failed with code {}: {}",
            args.join(" "),
            code(&out.status),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn scope_of(local: bool) -> PackageScope {
    if local {
        PackageScope::Project
    } else {
        PackageScope::User
    }
}

/// The source string of a `packages` entry (string or `{ "source": … }`).
pub fn source_of(entry: &Value) -> Option<String> {
    match entry {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => m.get("source").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

/// Pi's hint when `pi update <source>` names nothing configured.
fn no_match_message(source: &str, configured: &[String]) -> String {
    let t = source.trim();
    let hint = configured.iter().find(|s| match Source::parse(s) {
        Source::Npm(n) => t == n.name || t == n.spec,
        Source::Git(g) => {
            let short = format!("{}/{}", g.host, g.path);
            t == short
                || g.git_ref
                    .as_ref()
                    .is_some_and(|r| t == format!("{short}@{r}"))
        }
        Source::Local(_) => false,
    });
    match hint {
        Some(s) => format!("No matching package found for {source}. Did you mean {s}?"),
        None => format!("No matching package found for {source}"),
    }
}

fn installed_version(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path.join("package.json")).ok()?;
    serde_json::from_str::<Value>(text.trim_start_matches('\u{feff}'))
        .ok()?
        .get("version")?
        .as_str()
        .map(str::to_string)
}

/// Whether the installed copy satisfies the configured spec. Only exact versions are
/// compared; ranges and tags accept what is installed (`pi update` moves them).
fn npm_matches(n: &NpmSource, path: &Path) -> bool {
    match installed_version(path) {
        None => false,
        Some(v) => !n.pinned || n.version.as_deref().map(strip_v) == Some(strip_v(&v)),
    }
}

fn strip_v(v: &str) -> &str {
    let v = v.trim().trim_start_matches('=');
    v.strip_prefix('v').unwrap_or(v)
}

fn version_parts(v: &str) -> (Vec<u64>, Option<String>) {
    let v = strip_v(v);
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p.split('+').next().unwrap_or(p).to_string())),
        None => (v.split('+').next().unwrap_or(v), None),
    };
    (
        core.split('.').map(|p| p.parse().unwrap_or(0)).collect(),
        pre,
    )
}

fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let (ca, pa) = version_parts(a);
    let (cb, pb) = version_parts(b);
    ca.cmp(&cb).then_with(|| match (pa, pb) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (Some(x), Some(y)) => x.cmp(&y),
    })
}

fn version_greater(a: &str, b: &str) -> bool {
    compare_versions(a, b) == std::cmp::Ordering::Greater
}

fn git_head(dir: &Path) -> Option<String> {
    if !dir.exists() {
        return None;
    }
    capture("git", &["rev-parse".into(), "HEAD".into()], dir)
        .ok()
        .filter(|s| !s.is_empty())
}

fn update_marker(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.pi-update-incomplete"))
}

/// A dependency of `package.json` missing from `node_modules`.
fn missing_dependencies(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else {
        return false;
    };
    let Ok(manifest) = serde_json::from_str::<Value>(text.trim_start_matches('\u{feff}')) else {
        return false;
    };
    let Some(deps) = manifest.get("dependencies").and_then(Value::as_object) else {
        return false;
    };
    deps.keys()
        .any(|name| !name.contains("..") && !dir.join("node_modules").join(name).exists())
}

fn ensure_gitignore(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(".gitignore");
    if !path.exists() {
        std::fs::write(&path, "*\n!.gitignore\n")
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn remove_all(path: &Path) {
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// Removes the now empty directories between a removed checkout and the git root.
fn prune_empty_parents(target: &Path, root: &Path) {
    let mut current = target.parent();
    while let Some(dir) = current {
        if !dir.starts_with(root) || dir == root {
            break;
        }
        if dir.exists() {
            let empty = std::fs::read_dir(dir)
                .map(|mut r| r.next().is_none())
                .unwrap_or(false);
            if !empty || std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
        current = dir.parent();
    }
}

/// `target` relative to `base` (both absolute), with `..` where they part.
fn relative(base: &Path, target: &Path) -> PathBuf {
    let base_n = config::paths::normalize_lexically(base);
    let base: Vec<_> = base_n.components().collect();
    let target_n = config::paths::normalize_lexically(target);
    let target: Vec<_> = target_n.components().collect();
    let common = base.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..base.len() {
        out.push("..");
    }
    for c in &target[common..] {
        out.push(c.as_os_str());
    }
    out
}

/// A configured package's entry with `kind` resources filtered, for `pi config`.
pub fn set_resource_enabled(entry: &Value, kind: Kind, rel_path: &str, enabled: bool) -> Value {
    let mut map: Map<String, Value> = match entry {
        Value::Object(m) => m.clone(),
        other => {
            let mut m = Map::new();
            m.insert("source".into(), other.clone());
            m
        }
    };
    let list = map
        .entry(kind.key().to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(items) = list {
        // Any earlier pattern for this path goes: the new one decides.
        items.retain(|v| {
            v.as_str().is_none_or(|s| {
                let stripped = if s.starts_with(['!', '+', '-']) {
                    &s[1..]
                } else {
                    s
                };
                stripped != rel_path
            })
        });
        let sign = if enabled { '+' } else { '-' };
        items.push(Value::String(format!("{sign}{rel_path}")));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative(Path::new("/a/b"), Path::new("/a/c/d")),
            PathBuf::from("../c/d")
        );
        assert_eq!(
            relative(Path::new("/a/b"), Path::new("/a/b")),
            PathBuf::new()
        );
    }

    #[test]
    fn versions_compare() {
        assert!(version_greater("1.10.0", "1.9.0"));
        assert!(version_greater("1.0.0", "1.0.0-beta"));
        assert!(!version_greater("1.0.0", "1.0.0"));
    }

    #[test]
    fn toggling_a_resource_writes_an_exact_pattern() {
        let e = set_resource_enabled(
            &Value::String("npm:x".into()),
            Kind::Skills,
            "skills/a/SKILL.md",
            false,
        );
        assert_eq!(
            e,
            serde_json::json!({"source": "npm:x", "skills": ["-skills/a/SKILL.md"]})
        );
        let e = set_resource_enabled(&e, Kind::Skills, "skills/a/SKILL.md", true);
        assert_eq!(
            e,
            serde_json::json!({"source": "npm:x", "skills": ["+skills/a/SKILL.md"]})
        );
    }
}
