//! Choosing a store: `jsonl` | `jsonl:DIR` | `redb:PATH` | `sqlite:PATH` |
//! `postgres://user@host:port/db`.
//!
//! The CLI takes the value from `--session-store`, env `PI_SESSION_STORE` or the
//! `sessionStore` setting, parses it with [`StoreSpec::from_str`] and calls [`open_store`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{StoreError, StoreResult};
use crate::jsonl::{JsonlLayout, JsonlStore};
use crate::paths::{
    agent_dir, expand_tilde, home_dir, session_dir_override, sessions_root, ENV_AGENT_DIR,
    ENV_SESSION_DIR,
};
use crate::postgres::{PgUrl, PostgresStore};
use crate::redb_store::RedbStore;
use crate::sqlite::SqliteStore;
use crate::store::{FsyncPolicy, SessionStore};

/// Env var selecting the store.
pub const ENV_SESSION_STORE: &str = "PI_SESSION_STORE";

/// Which backend, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// Pi's JSONL files. `None`: Pi's layout (the session dir override if one is configured,
    /// else per-cwd directories under `<agentDir>/sessions`). `Some(dir)`: one flat directory.
    Jsonl(Option<PathBuf>),
    /// A redb database file.
    Redb(PathBuf),
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://` or `postgresql://` URL).
    Postgres(PgUrl),
}

impl FromStr for StoreSpec {
    type Err = StoreError;

    fn from_str(spec: &str) -> StoreResult<StoreSpec> {
        let bad = |reason: &str| StoreError::InvalidSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        if PgUrl::is_postgres_spec(spec) {
            return PgUrl::parse(spec)
                .map(StoreSpec::Postgres)
                .map_err(|e| bad(&e));
        }
        let (kind, path) = match spec.split_once(':') {
            Some((kind, path)) => (kind, Some(path)),
            None => (spec, None),
        };
        let path = match path {
            Some("") => return Err(bad("the path after ':' is empty")),
            Some(p) => Some(expand_tilde(p, &home_dir())),
            None => None,
        };
        match (kind, path) {
            ("jsonl", dir) => Ok(StoreSpec::Jsonl(dir)),
            ("redb", Some(path)) => Ok(StoreSpec::Redb(path)),
            ("sqlite", Some(path)) => Ok(StoreSpec::Sqlite(path)),
            ("redb" | "sqlite", None) => {
                Err(bad("needs a database file: redb:PATH or sqlite:PATH"))
            }
            _ => Err(bad(
                "expected jsonl, jsonl:DIR, redb:PATH, sqlite:PATH or postgres://user@host/db",
            )),
        }
    }
}

impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSpec::Jsonl(None) => f.write_str("jsonl"),
            StoreSpec::Jsonl(Some(dir)) => write!(f, "jsonl:{}", dir.display()),
            StoreSpec::Redb(path) => write!(f, "redb:{}", path.display()),
            StoreSpec::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            // Without the password, if the URL has one.
            StoreSpec::Postgres(url) => write!(f, "{url}"),
        }
    }
}

/// What opening a store needs besides the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Pi's agent dir (see [`crate::paths::agent_dir`]).
    pub agent_dir: PathBuf,
    /// The session dir override (see [`crate::paths::session_dir_override`]); used by `jsonl`.
    pub session_dir: Option<PathBuf>,
    /// When appends reach the disk.
    pub fsync: FsyncPolicy,
}

impl StoreOptions {
    /// Options for an agent dir, without a session dir override, with the default fsync policy.
    pub fn new(agent_dir: &Path) -> StoreOptions {
        StoreOptions {
            agent_dir: agent_dir.to_path_buf(),
            session_dir: None,
            fsync: FsyncPolicy::default(),
        }
    }
}

impl StoreOptions {
    /// Options as Pi resolves them at startup: agent dir from `PI_CODING_AGENT_DIR`, session
    /// dir override from the `--session-dir` flag, env `PI_CODING_AGENT_SESSION_DIR`, then the
    /// `sessionDir` setting.
    pub fn from_env(session_dir_flag: Option<&str>, session_dir_setting: Option<&str>) -> Self {
        let home = home_dir();
        StoreOptions {
            agent_dir: agent_dir(std::env::var(ENV_AGENT_DIR).ok().as_deref(), &home),
            session_dir: session_dir_override(
                session_dir_flag,
                std::env::var(ENV_SESSION_DIR).ok().as_deref(),
                session_dir_setting,
                &home,
            ),
            fsync: FsyncPolicy::default(),
        }
    }
}

/// The store to use: the first non-empty of the `--session-store` flag, env
/// `PI_SESSION_STORE` (pass its value) and the `sessionStore` setting; `jsonl` otherwise.
pub fn resolve_store_spec(
    flag: Option<&str>,
    env: Option<&str>,
    setting: Option<&str>,
) -> StoreResult<StoreSpec> {
    match [flag, env, setting]
        .into_iter()
        .flatten()
        .find(|s| !s.is_empty())
    {
        Some(spec) => spec.parse(),
        None => Ok(StoreSpec::Jsonl(None)),
    }
}

/// Opens the store a spec names.
pub fn open_store(spec: &StoreSpec, options: &StoreOptions) -> StoreResult<Box<dyn SessionStore>> {
    Ok(match spec {
        StoreSpec::Jsonl(None) => {
            let layout = match &options.session_dir {
                Some(dir) => JsonlLayout::Flat { dir: dir.clone() },
                None => JsonlLayout::PerCwd {
                    root: sessions_root(&options.agent_dir),
                },
            };
            Box::new(JsonlStore::open(layout, options.fsync))
        }
        StoreSpec::Jsonl(Some(dir)) => Box::new(JsonlStore::open(
            JsonlLayout::Flat { dir: dir.clone() },
            options.fsync,
        )),
        StoreSpec::Redb(path) => Box::new(RedbStore::open(path, options.fsync)?),
        StoreSpec::Sqlite(path) => Box::new(SqliteStore::open(path, options.fsync)?),
        StoreSpec::Postgres(url) => Box::new(PostgresStore::open(url, options.fsync)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for text in [
            "jsonl",
            "jsonl:/d",
            "redb:/a/b.redb",
            "sqlite:/x.db",
            "postgres://pi@db.example:5433/sessions",
            "postgresql://pi@localhost/pi",
        ] {
            let spec: StoreSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
        }
        for bad in [
            "",
            "redb",
            "sqlite:",
            "mysql:/x",
            "jsonl:",
            "postgres://h:port/db",
        ] {
            assert!(bad.parse::<StoreSpec>().is_err(), "{bad}");
        }
        assert_eq!(
            resolve_store_spec(Some(""), Some("redb:/e"), Some("sqlite:/s")).unwrap(),
            StoreSpec::Redb("/e".into())
        );
        assert_eq!(
            resolve_store_spec(None, None, None).unwrap(),
            StoreSpec::Jsonl(None)
        );
    }
}
