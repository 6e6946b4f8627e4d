//! Which session store a `pi sessions …` command works on, and how an ID argument finds a
//! session in it.
//!
//! The store is the first non-empty of `--session-store`, env `PI_SESSION_STORE` and the
//! `sessionStore` setting, else Pi's JSONL layout; `--session-dir` (then env
//! `PI_CODING_AGENT_SESSION_DIR`, then the `sessionDir` setting) moves the JSONL store to one
//! flat directory, as in Pi. Settings come from `<agentDir>/settings.json`, overridden by
//! `<cwd>/.pi/settings.json`, as Pi merges them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use pi_storage::paths::agent_dir_from_env;
use pi_storage::spec::ENV_SESSION_STORE;
use pi_storage::{
    open_store, resolve_store_spec, ListScope, SessionId, SessionStore, StoreOptions, StoreSpec,
};
use serde_json::Value;

/// Store selection, global to the `pi sessions` group.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// Session store: jsonl, jsonl:DIR, redb:PATH, sqlite:PATH or postgres://USER@HOST/DB
    /// [default: env PI_SESSION_STORE, setting sessionStore, else jsonl].
    #[arg(
        long = "session-store",
        visible_alias = "store",
        global = true,
        value_name = "STORE"
    )]
    pub session_store: Option<String>,

    /// Directory for JSONL session files (one flat directory for every cwd).
    #[arg(long = "session-dir", global = true, value_name = "DIR")]
    pub session_dir: Option<String>,
}

/// The two settings that choose a store, read from Pi's settings files.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StoreSettings {
    pub session_store: Option<String>,
    pub session_dir: Option<String>,
}

impl StoreSettings {
    /// Reads `<agentDir>/settings.json`, then `<cwd>/.pi/settings.json` on top (Pi's merge
    /// order) when the project is trusted. Missing files are normal; a file that is not JSON
    /// is reported, naming it.
    ///
    /// A cloned repository must not redirect where `pi sessions` imports, lists or searches,
    /// so the project file counts only after trust, decided as the agent modes decide it
    /// without a prompt: a saved decision in `trust.json`, else `defaultProjectTrust`, else
    /// not trusted (a project without trust-requiring files is trusted, as in Pi).
    pub fn load(agent_dir: &Path, cwd: &Path) -> anyhow::Result<StoreSettings> {
        let mut settings = StoreSettings::default();
        let mut files = vec![agent_dir.join("settings.json")];
        if project_trusted(agent_dir, cwd)? {
            files.push(cwd.join(".pi").join("settings.json"));
        }
        for file in files {
            let text = match std::fs::read_to_string(&file) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
            };
            let value: Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not valid JSON", file.display()))?;
            let text_of = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
            if let Some(store) = text_of("sessionStore") {
                settings.session_store = Some(store);
            }
            if let Some(dir) = text_of("sessionDir") {
                settings.session_dir = Some(dir);
            }
        }
        Ok(settings)
    }
}

/// Whether `cwd`'s project files may apply, decided without asking (see [`StoreSettings::load`]).
fn project_trusted(agent_dir: &Path, cwd: &Path) -> anyhow::Result<bool> {
    use pi_agent::config::{self, resolve_trust, TrustDecision, TrustInputs, TrustStore};
    let global = config::Settings::load_global(agent_dir);
    let decision = resolve_trust(
        cwd,
        &TrustStore::new(agent_dir),
        TrustInputs {
            override_: None,
            default: global.default_project_trust(),
            interactive: false,
            home: config::home(),
        },
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(matches!(decision, TrustDecision::Trusted))
}

/// A store resolved from the flags, environment and settings.
#[derive(Debug)]
pub struct Resolved {
    pub spec: StoreSpec,
    pub options: StoreOptions,
}

impl StoreArgs {
    /// Resolves which store the flags, environment and settings name, without opening it.
    pub fn resolve(&self) -> anyhow::Result<Resolved> {
        let agent_dir = agent_dir_from_env();
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let settings = StoreSettings::load(&agent_dir, &cwd)?;
        let env_store = std::env::var(ENV_SESSION_STORE).ok();
        let spec = resolve_store_spec(
            self.session_store.as_deref(),
            env_store.as_deref(),
            settings.session_store.as_deref(),
        )?;
        let options =
            StoreOptions::from_env(self.session_dir.as_deref(), settings.session_dir.as_deref());
        Ok(Resolved { spec, options })
    }

    /// Opens the selected store.
    pub fn open(&self) -> anyhow::Result<Box<dyn SessionStore>> {
        let resolved = self.resolve()?;
        open_spec(&resolved.spec, &resolved.options)
    }
}

/// Opens a store, saying which one failed.
pub fn open_spec(
    spec: &StoreSpec,
    options: &StoreOptions,
) -> anyhow::Result<Box<dyn SessionStore>> {
    open_store(spec, options).with_context(|| format!("cannot open session store {spec}"))
}

/// What a session argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A session file given by path.
    File(PathBuf),
    /// A session in the store.
    Stored(SessionId),
}

pub use pi_storage::paths::is_path_argument;

/// Resolves `ID|FILE`: a path is a file; anything else is a full session id, a unique id
/// prefix, or a session name, looked up in the store only.
pub fn resolve_target(store: &dyn SessionStore, arg: &str) -> anyhow::Result<Target> {
    if is_path_argument(arg) {
        return Ok(Target::File(PathBuf::from(arg)));
    }
    // An id is looked up by file name in the JSONL store; refuse anything that could turn
    // into a path component rather than an id.
    if arg.is_empty() || arg.contains("..") || arg.contains('\0') || arg.starts_with('.') {
        bail!("{arg:?} is not a session id or prefix");
    }
    let id = SessionId::new(arg);
    if store
        .contains(&id)
        .with_context(|| format!("cannot look up {arg} in {}", store.describe()))?
    {
        return Ok(Target::Stored(id));
    }
    let ids = store
        .session_ids()
        .with_context(|| format!("cannot list sessions of {}", store.describe()))?;
    let matches: Vec<&SessionId> = ids.iter().filter(|i| i.as_str().starts_with(arg)).collect();
    match matches.as_slice() {
        [one] => return Ok(Target::Stored((*one).clone())),
        [] => {}
        many => {
            let shown: Vec<&str> = many.iter().take(5).map(|i| i.as_str()).collect();
            bail!(
                "{arg:?} matches {} sessions in {} ({}{}); give more of the id",
                many.len(),
                store.describe(),
                shown.join(", "),
                if many.len() > 5 { ", …" } else { "" }
            );
        }
    }
    // Names: the session name set with /name or --name, exactly.
    let named: Vec<SessionId> = store
        .list_sessions(&ListScope::All)
        .with_context(|| format!("cannot list sessions of {}", store.describe()))?
        .into_iter()
        .filter(|s| s.name.as_deref() == Some(arg))
        .map(|s| s.id)
        .collect();
    match named.as_slice() {
        [one] => Ok(Target::Stored(one.clone())),
        [] => bail!("no session {arg:?} in {}", store.describe()),
        many => bail!(
            "{} sessions in {} are named {arg:?}; use an id",
            many.len(),
            store.describe()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_ids_are_told_apart() {
        assert!(is_path_argument("./s.jsonl"));
        assert!(is_path_argument("/abs/x"));
        assert!(is_path_argument("s.jsonl"));
        assert!(!is_path_argument("0190a000"));
    }

    #[test]
    fn settings_merge_project_over_global_only_when_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let cwd = dir.path().join("proj");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(cwd.join(".pi")).unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"sessionStore":"sqlite:/a.db","sessionDir":"/s"}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.join(".pi/settings.json"),
            r#"{"sessionStore":"redb:/b.redb"}"#,
        )
        .unwrap();
        // Not trusted (no decision, defaultProjectTrust "ask"): the project file is ignored.
        let s = StoreSettings::load(&agent, &cwd).unwrap();
        assert_eq!(s.session_store.as_deref(), Some("sqlite:/a.db"));
        // Trusted once (trust.json, as the TUI's prompt saves it): it applies on top.
        pi_agent::config::TrustStore::new(&agent)
            .set(&cwd.canonicalize().unwrap(), Some(true))
            .unwrap();
        let s = StoreSettings::load(&agent, &cwd).unwrap();
        assert_eq!(s.session_store.as_deref(), Some("redb:/b.redb"));
        assert_eq!(s.session_dir.as_deref(), Some("/s"));
        std::fs::write(agent.join("settings.json"), "{oops").unwrap();
        let err = StoreSettings::load(&agent, &cwd).unwrap_err().to_string();
        assert!(err.contains("settings.json"), "{err}");
    }
}
