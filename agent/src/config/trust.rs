//! Project trust, as Pi 1.6.0 decides it: project-local settings, skills, prompt templates,
//! `SYSTEM.md` and `APPEND_SYSTEM.md` are used only for a trusted project.
//!
//! The order (Pi's `main` + `resolveProjectTrusted`):
//! 1. `--approve` / `--no-approve` decide outright.
//! 2. A project without trust-requiring resources is trusted unless `trust.json` says no.
//! 3. The nearest `trust.json` entry for the cwd or one of its ancestors decides.
//! 4. `defaultProjectTrust` (global settings only): `always` trusts, `never` does not.
//! 5. `ask`: interactive modes ask ([`TrustDecision::Ask`]); every other mode does not trust.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Map;
use serde_json::Value;

use super::error::parse_json;
use super::error::read_optional;
use super::error::write_atomic;
use super::error::ConfigError;
use super::error::ConfigResult;
use super::paths::canonicalize_or_normalize;
use super::paths::project_config_dir;
use super::settings::DefaultProjectTrust;

/// Entries under `<cwd>/.pi` whose presence makes trust matter.
const TRUST_REQUIRING: [&str; 8] = [
    "settings.json",
    "mcp.json",
    "extensions",
    "skills",
    "prompts",
    "themes",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
];

/// The outcome of [`resolve_trust`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustDecision {
    /// Project-local resources are used.
    Trusted,
    /// Project-local resources are ignored.
    Untrusted,
    /// Interactive mode and nothing decided: the caller asks the user (Pi's options: trust,
    /// trust the parent folder, trust for this session only, do not trust, …) and records a
    /// remembered answer with [`TrustStore::set`]. Until answered, treat as untrusted.
    Ask {
        /// The canonical project path to show and to record.
        path: PathBuf,
        /// Its parent, for "trust parent folder" (`None` at the root).
        parent: Option<PathBuf>,
    },
}

impl TrustDecision {
    /// Whether project-local resources may be loaded now (`Ask` counts as not yet).
    pub fn trusted(&self) -> bool {
        matches!(self, TrustDecision::Trusted)
    }
}

/// An answer to the trust prompt (Pi's options, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustChoice {
    /// Trust this folder and remember it.
    Trust,
    /// Trust the parent folder (and so its other projects) and remember it.
    TrustParent,
    /// Trust for this run only.
    TrustSession,
    /// Do not trust, and remember it.
    Deny,
    /// Do not trust for this run only.
    DenySession,
}

impl TrustChoice {
    /// The choices to offer for `path` (no parent option at the root).
    pub fn options(path: &Path) -> Vec<TrustChoice> {
        let mut options = vec![TrustChoice::Trust];
        if path.parent().is_some() {
            options.push(TrustChoice::TrustParent);
        }
        options.extend([
            TrustChoice::TrustSession,
            TrustChoice::Deny,
            TrustChoice::DenySession,
        ]);
        options
    }

    /// The menu label (Pi's wording is a UI label, kept so users recognise it).
    pub fn label(self, path: &Path) -> String {
        match self {
            TrustChoice::Trust => "Trust".into(),
            TrustChoice::TrustParent => format!(
                "Trust parent folder ({})",
                path.parent()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
            TrustChoice::TrustSession => "Trust (this session only)".into(),
            TrustChoice::Deny => "Do not trust".into(),
            TrustChoice::DenySession => "Do not trust (this session only)".into(),
        }
    }

    /// Whether the project is trusted after this answer.
    pub fn trusted(self) -> bool {
        matches!(
            self,
            TrustChoice::Trust | TrustChoice::TrustParent | TrustChoice::TrustSession
        )
    }

    /// The folder whose entry this answer writes for `path` (`None` for session-only
    /// answers): /trust marks the option matching the saved decision by it.
    pub fn saved_path(self, path: &Path) -> Option<PathBuf> {
        let path = canonicalize_or_normalize(path);
        match self {
            TrustChoice::Trust | TrustChoice::Deny => Some(path),
            TrustChoice::TrustParent => Some(path.parent().map(Path::to_path_buf).unwrap_or(path)),
            TrustChoice::TrustSession | TrustChoice::DenySession => None,
        }
    }

    /// Records the answer for `path` in `store` (session-only answers record nothing) and
    /// returns whether the project is now trusted.
    pub fn record(self, path: &Path, store: &TrustStore) -> ConfigResult<bool> {
        let path = canonicalize_or_normalize(path);
        match self {
            TrustChoice::Trust => store.set(&path, Some(true))?,
            TrustChoice::TrustParent => match path.parent() {
                Some(parent) => {
                    store.set_many(&[(parent.to_path_buf(), Some(true)), (path.clone(), None)])?
                }
                None => store.set(&path, Some(true))?,
            },
            TrustChoice::Deny => store.set(&path, Some(false))?,
            TrustChoice::TrustSession | TrustChoice::DenySession => {}
        }
        Ok(self.trusted())
    }
}

/// What [`resolve_trust`] needs besides the cwd and the store.
#[derive(Debug, Clone, Default)]
pub struct TrustInputs {
    /// `Some(true)` for `--approve`/`-a`, `Some(false)` for `--no-approve`/`-na`.
    pub override_: Option<bool>,
    /// `defaultProjectTrust` from the global settings.
    pub default: DefaultProjectTrust,
    /// Whether the mode can prompt (interactive TUI). Print, JSON and RPC modes never prompt.
    pub interactive: bool,
    /// The home dir; `~/.agents/skills` is the user's own and never needs trust.
    pub home: Option<PathBuf>,
}

/// Decides whether `cwd` is trusted. Errors only when `trust.json` is unreadable or malformed
/// (Pi refuses to guess then).
pub fn resolve_trust(
    cwd: &Path,
    store: &TrustStore,
    inputs: TrustInputs,
) -> ConfigResult<TrustDecision> {
    let from_bool = |b: bool| {
        if b {
            TrustDecision::Trusted
        } else {
            TrustDecision::Untrusted
        }
    };
    if let Some(decision) = inputs.override_ {
        return Ok(from_bool(decision));
    }
    if !has_trust_requiring_resources(cwd, inputs.home.as_deref()) {
        return Ok(from_bool(store.get(cwd)?.unwrap_or(true)));
    }
    if let Some(decision) = store.get(cwd)? {
        return Ok(from_bool(decision));
    }
    match inputs.default {
        DefaultProjectTrust::Always => return Ok(TrustDecision::Trusted),
        DefaultProjectTrust::Never => return Ok(TrustDecision::Untrusted),
        DefaultProjectTrust::Ask => {}
    }
    if !inputs.interactive {
        return Ok(TrustDecision::Untrusted);
    }
    let path = canonicalize_or_normalize(cwd);
    let parent = path.parent().map(Path::to_path_buf);
    Ok(TrustDecision::Ask { path, parent })
}

/// Whether `cwd` has project-local files that need trust: a trust-requiring entry in
/// `<cwd>/.pi`, or a `.agents/skills` directory in the cwd or an ancestor (other than the
/// user's own `~/.agents/skills`).
pub fn has_trust_requiring_resources(cwd: &Path, home: Option<&Path>) -> bool {
    let cwd = canonicalize_or_normalize(cwd);
    let config = project_config_dir(&cwd);
    if TRUST_REQUIRING.iter().any(|e| config.join(e).exists()) {
        return true;
    }
    let user_skills = home.map(|h| canonicalize_or_normalize(h).join(".agents").join("skills"));
    let mut dir = Some(cwd.as_path());
    while let Some(d) = dir {
        let skills = d.join(".agents").join("skills");
        if Some(&skills) != user_skills.as_ref() && skills.exists() {
            return true;
        }
        dir = d.parent();
    }
    false
}

/// `<agent dir>/trust.json`: `{ "<canonical path>": true | false }`. A decision applies to the
/// directory and everything below it; the nearest entry wins.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// The store of an agent dir.
    pub fn new(agent_dir: &Path) -> TrustStore {
        TrustStore {
            path: agent_dir.join("trust.json"),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The nearest recorded decision for `cwd` or an ancestor.
    pub fn get(&self, cwd: &Path) -> ConfigResult<Option<bool>> {
        Ok(self.get_entry(cwd)?.map(|(_, trusted)| trusted))
    }

    /// [`TrustStore::get`] with the folder the decision was recorded for (`cwd` itself or
    /// the ancestor it is inherited from), as /trust shows it.
    pub fn get_entry(&self, cwd: &Path) -> ConfigResult<Option<(PathBuf, bool)>> {
        let data = self.read()?;
        let mut dir = Some(canonicalize_or_normalize(cwd));
        while let Some(d) = dir {
            if let Some(Value::Bool(b)) = data.get(d.to_string_lossy().as_ref()) {
                return Ok(Some((d, *b)));
            }
            dir = d.parent().map(Path::to_path_buf);
        }
        Ok(None)
    }

    /// Records (or with `None` clears) the decision for `path`.
    pub fn set(&self, path: &Path, decision: Option<bool>) -> ConfigResult<()> {
        self.set_many(&[(path.to_path_buf(), decision)])
    }

    /// Records several decisions at once ("trust parent" sets the parent and clears the
    /// project's own entry).
    pub fn set_many(&self, decisions: &[(PathBuf, Option<bool>)]) -> ConfigResult<()> {
        let mut data = self.read()?;
        for (path, decision) in decisions {
            let key = canonicalize_or_normalize(path)
                .to_string_lossy()
                .into_owned();
            data.shift_remove(&key);
            if let Some(d) = decision {
                data.insert(key, Value::Bool(*d));
            }
        }
        // Pi writes keys sorted, two-space JSON and a final newline.
        let mut keys: Vec<_> = data.into_iter().collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        let sorted: Map<String, Value> = keys.into_iter().collect();
        let mut text = serde_json::to_string_pretty(&Value::Object(sorted)).unwrap_or_default();
        text.push('\n');
        write_atomic(&self.path, text.as_bytes(), None)
    }

    fn read(&self) -> ConfigResult<Map<String, Value>> {
        let Some(text) = read_optional(&self.path)? else {
            return Ok(Map::new());
        };
        let Value::Object(map) = parse_json(&text, &self.path)? else {
            return Err(ConfigError::Invalid {
                path: self.path.clone(),
                message: "expected an object".into(),
            });
        };
        for (key, value) in &map {
            if !matches!(value, Value::Bool(_) | Value::Null) {
                return Err(ConfigError::Invalid {
                    path: self.path.clone(),
                    message: format!("value for {key:?} must be true, false, or null"),
                });
            }
        }
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        _tmp: tempfile::TempDir,
        cwd: PathBuf,
        home: PathBuf,
        store: TrustStore,
    }

    fn fixture(with_resources: bool) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let cwd = root.join("work/proj");
        std::fs::create_dir_all(&cwd).unwrap();
        if with_resources {
            std::fs::create_dir_all(cwd.join(".pi")).unwrap();
            std::fs::write(cwd.join(".pi/settings.json"), "{}").unwrap();
        }
        let home = root.join("home");
        let store = TrustStore::new(&root.join("agent"));
        Fixture {
            _tmp: tmp,
            cwd,
            home,
            store,
        }
    }

    fn decide(
        f: &Fixture,
        override_: Option<bool>,
        default: DefaultProjectTrust,
        interactive: bool,
    ) -> TrustDecision {
        resolve_trust(
            &f.cwd,
            &f.store,
            TrustInputs {
                override_,
                default,
                interactive,
                home: Some(f.home.clone()),
            },
        )
        .unwrap()
    }

    #[test]
    fn matrix_without_recorded_decision() {
        use DefaultProjectTrust::*;
        let f = fixture(true);
        for default in [Ask, Always, Never] {
            for interactive in [false, true] {
                // Overrides always win.
                assert_eq!(
                    decide(&f, Some(true), default, interactive),
                    TrustDecision::Trusted
                );
                assert_eq!(
                    decide(&f, Some(false), default, interactive),
                    TrustDecision::Untrusted
                );
                let expected = match (default, interactive) {
                    (Always, _) => TrustDecision::Trusted,
                    (Never, _) => TrustDecision::Untrusted,
                    (Ask, false) => TrustDecision::Untrusted,
                    (Ask, true) => TrustDecision::Ask {
                        path: f.cwd.clone(),
                        parent: f.cwd.parent().map(Path::to_path_buf),
                    },
                };
                assert_eq!(
                    decide(&f, None, default, interactive),
                    expected,
                    "{default:?} {interactive}"
                );
            }
        }
    }

    #[test]
    fn recorded_decisions_beat_the_default_and_apply_to_subdirectories() {
        use DefaultProjectTrust::*;
        let f = fixture(true);
        f.store.set(&f.cwd, Some(false)).unwrap();
        assert_eq!(decide(&f, None, Always, true), TrustDecision::Untrusted);
        assert_eq!(decide(&f, Some(true), Never, false), TrustDecision::Trusted);
        // Trusting the parent: parent entry set, own entry cleared.
        let parent = f.cwd.parent().unwrap().to_path_buf();
        f.store
            .set_many(&[(parent.clone(), Some(true)), (f.cwd.clone(), None)])
            .unwrap();
        assert_eq!(decide(&f, None, Never, false), TrustDecision::Trusted);
        let text = std::fs::read_to_string(f.store.path()).unwrap();
        assert_eq!(text, format!("{{\n  \"{}\": true\n}}\n", parent.display()));
    }

    #[test]
    fn projects_without_local_resources_are_trusted_unless_recorded() {
        use DefaultProjectTrust::*;
        let f = fixture(false);
        assert!(!has_trust_requiring_resources(&f.cwd, Some(&f.home)));
        assert_eq!(decide(&f, None, Never, false), TrustDecision::Trusted);
        f.store.set(&f.cwd, Some(false)).unwrap();
        assert_eq!(decide(&f, None, Always, true), TrustDecision::Untrusted);
        // An ancestor's .agents/skills needs trust; the user's own does not.
        std::fs::create_dir_all(f.home.join(".agents/skills")).unwrap();
        assert!(!has_trust_requiring_resources(&f.home, Some(&f.home)));
        std::fs::create_dir_all(f.cwd.parent().unwrap().join(".agents/skills")).unwrap();
        assert!(has_trust_requiring_resources(&f.cwd, Some(&f.home)));
    }

    #[test]
    fn prompt_answers_are_recorded_like_pi() {
        use DefaultProjectTrust::*;
        let f = fixture(true);
        let options = TrustChoice::options(&f.cwd);
        assert_eq!(options.len(), 5);
        assert!(options[1]
            .label(&f.cwd)
            .starts_with("Trust parent folder ("));
        assert!(TrustChoice::TrustSession.record(&f.cwd, &f.store).unwrap());
        assert!(!f.store.path().exists());
        assert!(!TrustChoice::Deny.record(&f.cwd, &f.store).unwrap());
        assert_eq!(decide(&f, None, Ask, true), TrustDecision::Untrusted);
        assert!(TrustChoice::TrustParent.record(&f.cwd, &f.store).unwrap());
        assert_eq!(decide(&f, None, Ask, true), TrustDecision::Trusted);
    }

    #[test]
    fn malformed_trust_file_is_an_error() {
        let f = fixture(true);
        std::fs::create_dir_all(f.store.path().parent().unwrap()).unwrap();
        std::fs::write(f.store.path(), r#"{"/x": "yes"}"#).unwrap();
        let err = f.store.get(&f.cwd).unwrap_err().to_string();
        assert!(err.contains("must be true, false, or null"), "{err}");
        std::fs::write(f.store.path(), "{").unwrap();
        assert!(matches!(
            f.store.get(&f.cwd),
            Err(ConfigError::Parse { .. })
        ));
    }
}
