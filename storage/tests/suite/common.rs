//! Fixtures and store factories shared by the suites.

use std::path::{Path, PathBuf};

use pi_storage::{
    FsyncPolicy, JsonlLayout, JsonlStore, PgUrl, PostgresStore, RedbStore, SessionData,
    SessionStore, SqliteStore,
};

use super::pg_server::pg_server;

/// A backend under test: how to open a store rooted in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Jsonl,
    JsonlFlat,
    Redb,
    Sqlite,
    /// A database of its own per directory on the private test server (see `pg_server`).
    Postgres,
}

impl Backend {
    /// The `--session-store` value for a store rooted in `dir`.
    pub fn spec(self, dir: &Path) -> String {
        match self {
            Backend::Jsonl | Backend::JsonlFlat => format!("jsonl:{}", dir.join("flat").display()),
            Backend::Redb => format!("redb:{}", dir.join("sessions.redb").display()),
            Backend::Sqlite => format!("sqlite:{}", dir.join("sessions.sqlite").display()),
            Backend::Postgres => server().database_url(dir),
        }
    }

    /// Whether the backend can be tested here: false (after saying why) only for PostgreSQL
    /// where no server can be started, which `CI_REQUIRE_POSTGRES=1` turns into a failure.
    pub fn available(self) -> bool {
        self != Backend::Postgres || pg_server().is_some()
    }

    pub fn open(self, dir: &Path) -> Box<dyn SessionStore> {
        self.open_with(dir, FsyncPolicy::EveryEntry)
    }

    pub fn open_with(self, dir: &Path, fsync: FsyncPolicy) -> Box<dyn SessionStore> {
        match self {
            Backend::Jsonl => Box::new(JsonlStore::open(
                JsonlLayout::PerCwd {
                    root: dir.join("sessions"),
                },
                fsync,
            )),
            Backend::JsonlFlat => Box::new(JsonlStore::open(
                JsonlLayout::Flat {
                    dir: dir.join("flat"),
                },
                fsync,
            )),
            Backend::Redb => Box::new(RedbStore::open(&dir.join("sessions.redb"), fsync).unwrap()),
            Backend::Sqlite => {
                Box::new(SqliteStore::open(&dir.join("sessions.sqlite"), fsync).unwrap())
            }
            Backend::Postgres => {
                let url = PgUrl::parse(&server().database_url(dir)).unwrap();
                Box::new(PostgresStore::open(&url, fsync).unwrap())
            }
        }
    }
}

fn server() -> &'static super::pg_server::PgServer {
    pg_server().expect("PostgreSQL tests check Backend::available first")
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// One fixture file: its bytes, and the session when Pi accepts its header.
pub struct Fixture {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub data: Option<SessionData>,
}

impl Fixture {
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// The bytes a store gives back: the file, with a line feed added after a torn last line.
    pub fn expected_export(&self) -> Vec<u8> {
        let mut bytes = self.bytes.clone();
        if bytes.last() != Some(&b'\n') {
            bytes.push(b'\n');
        }
        bytes
    }
}

/// Every fixture session file: real Pi 1.6 sessions, handmade tricky inputs, Pi 0.58 output.
pub fn all_fixtures() -> Vec<Fixture> {
    let root = fixtures_dir();
    let mut paths = Vec::new();
    for dir in [
        "realpi/sessions",
        "realpi/tricky/inputs",
        "pi-0.58-generated",
    ] {
        for item in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = item.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    assert!(paths.len() >= 40, "fixtures missing: {}", paths.len());
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            let data = SessionData::from_jsonl(&path.display().to_string(), &bytes).ok();
            Fixture { path, bytes, data }
        })
        .collect()
}

/// The fixtures Pi accepts (first line is a valid header).
pub fn session_fixtures() -> Vec<Fixture> {
    let all = all_fixtures();
    let accepted: Vec<_> = all.into_iter().filter(|f| f.data.is_some()).collect();
    assert!(
        accepted.len() >= 35,
        "only {} fixtures accepted",
        accepted.len()
    );
    accepted
}

/// Session fixtures with distinct ids (two tricky inputs share `trunc-last`).
pub fn distinct_session_fixtures() -> Vec<Fixture> {
    let mut seen = std::collections::HashSet::new();
    session_fixtures()
        .into_iter()
        .filter(|f| seen.insert(f.data.as_ref().unwrap().header.id().clone()))
        .collect()
}

pub fn data(f: &Fixture) -> &SessionData {
    f.data.as_ref().unwrap()
}
