//! The PostgreSQL session store through the real binary: an agent run that writes its session
//! to the server and continues it, and `pi sessions migrate | export | list | search` with a
//! `postgres://` store, against a private server started for these tests (see
//! `storage/tests/suite/pg_server.rs`: they print why and return where no server can be
//! started, and fail instead under `CI_REQUIRE_POSTGRES=1`).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../storage/tests/suite/pg_server.rs"]
mod pg_server;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use pi_fake_llm::{FakeLlm, Script};
use pi_storage::{open_store, ListScope, SessionStore, StoreOptions};
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");

fn pi(agent: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pi"));
    c.current_dir(cwd)
        .env("HOME", agent.parent().unwrap())
        .env("PI_CODING_AGENT_DIR", agent)
        .env_remove("PI_SESSION_STORE")
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .stdin(Stdio::null());
    c
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn open(spec: &str, agent: &Path) -> Box<dyn SessionStore> {
    open_store(&spec.parse().unwrap(), &StoreOptions::new(agent)).unwrap()
}

/// `pi -p` with `--session-store postgres://…` stores the session on the server, and a second
/// run selecting the store through `PI_SESSION_STORE` continues it with `-c`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_runs_store_and_continue_sessions_on_the_server() {
    let Some(server) = pg_server::pg_server() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (agent, cwd) = (tmp.path().join("agent"), tmp.path().join("cwd"));
    fs::create_dir_all(&agent).unwrap();
    fs::create_dir_all(&cwd).unwrap();
    let script: Script =
        serde_json::from_value(json!({"turns": [{"text": "one"}, {"text": "two"}]})).unwrap();
    let fake = FakeLlm::start(script).await.unwrap();
    let models = fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
        .unwrap()
        .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
    fs::write(agent.join("models.json"), models).unwrap();
    let spec = server.database_url(tmp.path());

    let first = pi(&agent, &cwd)
        .args([
            "--session-store",
            &spec,
            "--model",
            "fakeoai/fake-model",
            "-p",
            "first",
        ])
        .output()
        .unwrap();
    assert_eq!(ok(first, "first run"), "one\n");
    let second = pi(&agent, &cwd)
        .env("PI_SESSION_STORE", &spec)
        .args(["-c", "-p", "second"])
        .output()
        .unwrap();
    assert_eq!(ok(second, "second run"), "two\n");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].body.to_string().contains("first"),
        "-c sent the stored conversation"
    );

    let store = open(&spec, &agent);
    let listed = store.list_sessions(&ListScope::All).unwrap();
    assert_eq!(listed.len(), 1, "one session on the server, continued");
    let roles: Vec<String> = store
        .read_session(&listed[0].id)
        .unwrap()
        .entries
        .iter()
        .filter(|e| e.kind() == "message")
        .map(|e| {
            let v: Value = serde_json::from_slice(e.line()).unwrap();
            v["message"]["role"].as_str().unwrap_or("").to_string()
        })
        .collect();
    let turns: Vec<&str> = roles
        .iter()
        .map(String::as_str)
        .filter(|r| ["user", "assistant"].contains(r))
        .collect();
    assert_eq!(
        turns,
        ["user", "assistant", "user", "assistant"],
        "{roles:?}"
    );
    assert_eq!(listed[0].message_count, roles.len() as u64);
    assert_eq!(listed[0].first_message.as_deref(), Some("first"));
    // Nothing was written as files.
    assert!(!agent.join("sessions").exists());
}

fn v3_fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(format!("{FIXTURES}/sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "fixtures missing");
    files
}

fn header_id(file: &Path) -> String {
    let bytes = fs::read(file).unwrap();
    let first = bytes.split(|&b| b == b'\n').next().unwrap();
    let v: Value = serde_json::from_slice(first).unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// `agent/`, `cwd/` and `start/` under `root`, with Pi's v3 fixture sessions copied into
/// `start/`; also returns the fixtures' paths.
fn migration_dirs(root: &Path) -> (PathBuf, PathBuf, PathBuf, Vec<PathBuf>) {
    let (agent, cwd, start) = (root.join("agent"), root.join("cwd"), root.join("start"));
    for d in [&agent, &cwd, &start] {
        fs::create_dir_all(d).unwrap();
    }
    let fixtures = v3_fixtures();
    for f in &fixtures {
        fs::copy(f, start.join(f.file_name().unwrap())).unwrap();
    }
    (agent, cwd, start, fixtures)
}

/// `pi sessions migrate` JSONL → PostgreSQL → SQLite → JSONL: every file comes back byte for
/// byte; the server store lists and searches like any other.
#[test]
fn migrate_through_postgres_is_byte_identical() {
    let Some(server) = pg_server::pg_server() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (agent, cwd, start, fixtures) = migration_dirs(tmp.path());
    let pg = server.database_url(tmp.path());
    let stores = [
        format!("jsonl:{}", start.display()),
        pg.clone(),
        format!("sqlite:{}", tmp.path().join("s.db").display()),
        format!("jsonl:{}", tmp.path().join("end").display()),
    ];
    let n = fixtures.len();
    for pair in stores.windows(2) {
        let out = pi(&agent, &cwd)
            .args(["sessions", "migrate", "--from", &pair[0], "--to", &pair[1]])
            .output()
            .unwrap();
        let out = ok(out, &format!("migrate {} → {}", pair[0], pair[1]));
        assert!(
            out.contains(&format!(
                "{n} session(s); copied {n}, extended 0, 0 already there, 0 problem(s)"
            )),
            "{out}"
        );
        assert!(out.contains("verified"), "{out}");
    }
    for f in &fixtures {
        let original = fs::read(f).unwrap();
        let exported = pi(&agent, &cwd)
            .args(["sessions", "--store", &pg, "export", &header_id(f)])
            .output()
            .unwrap();
        assert!(exported.status.success());
        assert!(
            exported.stdout == original,
            "{} differs in PostgreSQL",
            f.display()
        );
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let id = header_id(f);
        let back = fs::read_dir(tmp.path().join("end"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(&format!("_{id}.jsonl")))
            .unwrap_or_else(|| panic!("{name} not migrated back"));
        assert!(
            fs::read(back).unwrap() == original,
            "{name} after the round trip"
        );
    }

    // Listing and search read the server (search through a local index beside the agent dir).
    let listed = pi(&agent, &cwd)
        .env("PI_SESSION_STORE", &pg)
        .args(["sessions", "list", "--all", "--jsonl"])
        .output()
        .unwrap();
    let listed = ok(listed, "list");
    let jsonl_listed = pi(&agent, &cwd)
        .args([
            "sessions", "--store", &stores[0], "list", "--all", "--jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(
        listed.lines().count(),
        ok(jsonl_listed, "list jsonl").lines().count()
    );
    let search = |store: &str| -> Vec<String> {
        let out = pi(&agent, &cwd)
            .args(["sessions", "--store", store, "search", "--json", "hello"])
            .output()
            .unwrap();
        let mut ids: Vec<String> = ok(out, "search")
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["sessionId"].to_string())
            .collect();
        ids.sort();
        ids
    };
    let on_server = search(&pg);
    assert!(
        !on_server.is_empty(),
        "search finds fixture text on the server"
    );
    assert!(fs::read_dir(&agent).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("history-")));
    assert_eq!(
        on_server,
        search(&stores[0]),
        "the same hits as over the files"
    );
}

/// The binary with a `postgres://` store over TLS: `sslmode=verify-full` with the root given
/// as `sslrootcert=` in the URL, then through `PGSSLROOTCERT`; a root that did not sign the
/// server's certificate is refused with the reason.
#[test]
fn migrate_and_list_over_verified_tls() {
    let Some(server) = pg_server::pg_tls_server() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (agent, cwd, start, fixtures) = migration_dirs(tmp.path());
    let base = format!(
        "postgres://postgres@localhost:{}/postgres?hostaddr=127.0.0.1&sslmode=verify-full",
        server.server.port()
    );
    let with_root = format!("{base}&sslrootcert={}", server.root.display());
    let out = pi(&agent, &cwd)
        .args(["sessions", "migrate", "--from"])
        .arg(format!("jsonl:{}", start.display()))
        .args(["--to", &with_root])
        .output()
        .unwrap();
    let n = fixtures.len();
    let out = ok(out, "migrate to PostgreSQL over TLS");
    assert!(
        out.contains(&format!("{n} session(s); copied {n}")),
        "{out}"
    );

    let list = pi(&agent, &cwd)
        .args(["sessions", "--store", &base, "list", "--all", "--json"])
        .env("PGSSLROOTCERT", &server.root)
        .output()
        .unwrap();
    let list: Value = serde_json::from_str(&ok(list, "list over TLS")).unwrap();
    let ids: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    for f in &fixtures {
        assert!(ids.contains(&header_id(f)), "{ids:?}");
    }

    let refused = pi(&agent, &cwd)
        .args(["sessions", "--store", &base, "list", "--all"])
        .env("PGSSLROOTCERT", &server.other_root)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("UnknownIssuer") || err.contains("unknown issuer"),
        "{err}"
    );
}
