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

    // Listing and search read the server.
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
    let indexes = history_files(&agent);
    let on_server = search(&pg);
    assert!(
        !on_server.is_empty(),
        "search finds fixture text on the server"
    );
    assert_eq!(
        history_files(&agent),
        indexes,
        "the server searches: no local index"
    );
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

/// Sessions made up for search: many messages of words drawn unevenly from a small vocabulary
/// (so common words match hundreds of rows and bm25 has real work), with phrases, paths,
/// accents, tool calls and results, two models and two cwds.
fn write_search_corpus(dir: &Path) {
    const WORDS: &[&str] = &[
        "alpha",
        "beta",
        "gamma",
        "delta",
        "café",
        "Über",
        "naïve",
        "src/main.rs",
        "alphabet",
        "alpine",
        "betamax",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
        "nu",
        "xi",
        "omicron",
        "pi",
        "rho",
        "sigma",
        "tau",
        "upsilon",
        "phi",
        "chi",
        "psi",
    ];
    let mut seed: u64 = 0x5eed;
    let mut next = move |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    for s in 0..24 {
        let id = format!("0190aaaa-0000-7000-8000-{s:012x}");
        let cwd = if s % 3 == 0 { "/work/one" } else { "/work/two" };
        let mut lines = vec![json!({"type": "session", "version": 3, "id": id,
            "timestamp": "2026-11-01T10:00:00.000Z", "cwd": cwd})];
        let mut parent: Option<String> = None;
        let mut push = |lines: &mut Vec<Value>, i: usize, message: Value| {
            let entry_id = format!("{s:02x}{i:06x}");
            lines.push(
                json!({"type": "message", "id": entry_id, "parentId": parent,
                "timestamp": format!("2026-11-{:02}T10:{:02}:00.000Z", 1 + s % 28, i % 60),
                "message": message}),
            );
            parent = Some(entry_id);
        };
        for turn in 0..12 {
            // Skewed: low indexes (alpha, beta, …) much more often than high ones.
            let mut text = |len: usize| -> String {
                (0..len)
                    .map(|_| WORDS[next(WORDS.len()).min(next(WORDS.len()))])
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let ts = 1_761_991_200_000_i64 + (s * 10_000 + turn) as i64;
            let (user, said, command, output) = (text(8), text(30), text(3), text(12));
            let model = if s % 2 == 0 { "m-one" } else { "m-two" };
            push(
                &mut lines,
                turn * 3,
                json!({"role": "user", "content": user, "timestamp": ts}),
            );
            push(
                &mut lines,
                turn * 3 + 1,
                json!({"role": "assistant",
                "content": [{"type": "text", "text": said},
                            {"type": "toolCall", "id": format!("c{turn}"), "name": "bash",
                             "arguments": {"command": command}}],
                "provider": "fakeoai", "model": model, "stopReason": "toolUse",
                "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                          "cost": {"total": 0.001}},
                "timestamp": ts + 1}),
            );
            push(
                &mut lines,
                turn * 3 + 2,
                json!({"role": "toolResult",
                "toolCallId": format!("c{turn}"), "toolName": "bash",
                "content": [{"type": "text", "text": output}], "isError": turn % 5 == 4,
                "timestamp": ts + 2}),
            );
        }
        let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
        fs::write(
            dir.join(format!("2026-11-01T10-00-00-000Z_{id}.jsonl")),
            body,
        )
        .unwrap();
    }
}

/// The history index files in the agent dir.
fn history_files(agent: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(agent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("history") && n.ends_with(".sqlite"))
        .collect();
    names.sort();
    names
}

/// `pi sessions search --json` hits without the store-specific `location` and `open`, in the
/// order printed (none for "No matches", exit 1).
fn search_hits(agent: &Path, cwd: &Path, store: &str, args: &[&str]) -> Vec<Value> {
    let out = pi(agent, cwd)
        .args(["sessions", "--store", store, "search", "--json"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(0) || (out.status.code() == Some(1) && !err.contains("cannot")),
        "search {args:?} on {store}: {err}"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("location");
            o.remove("open");
            v
        })
        .collect()
}

/// Hits in a canonical order: by score (as printed), rows of equal score by their contents,
/// since the two stores number their rows differently and break ties by that.
fn canonical(hits: &[Value]) -> Vec<String> {
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(
        scores.windows(2).all(|w| w[0] <= w[1]),
        "best first: {scores:?}"
    );
    let mut keyed: Vec<(f64, String)> = hits
        .iter()
        .map(|h| (h["score"].as_f64().unwrap(), h.to_string()))
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    keyed.into_iter().map(|(_, s)| s).collect()
}

const SEARCHES: &[&[&str]] = &[
    &["alpha"],
    &["alpha", "beta"],
    &["\"alpha beta\""],
    &["alp*"],
    &["bet*", "gamma"],
    &["alpha", "OR", "zeta"],
    &["alpha", "NOT", "beta"],
    &["psi", "OR", "chi", "NOT", "alpha", "AND", "beta"],
    &["cafe"],
    &["UBER", "naive"],
    &["src/main"],
    &["\"main rs alpha\""],
    &["src/ma*"],
    &["//", "alpha"],
    &["//", "OR", "alpha"],
    &["--role", "tool", "alpha"],
    &["--role", "assistant", "gamma", "delta"],
    &["--role", "user", "beta*"],
    &["--model", "m-two", "alpha"],
    &["--model", "fakeoai/m-one", "gamma"],
    &["--cwd", "/work/one", "delta"],
    &["--session", "0190aaaa-0000-7000-8000-00000000000", "theta"],
    &["--since", "2026-11-10", "--until", "2026-11-20", "epsilon"],
    &["question"],
    &["rpc-bash-tool"],
    &["\"line two\""],
    &["answer*"],
    &["hello", "OR", "fork*"],
    &["nothingmatchesthis"],
];

/// `pi sessions search` with a `postgres://` store answers on the server, with the hits the
/// history index gives over the same sessions as JSONL files: the same rows, bm25 scores and
/// snippets, for words, phrases, prefixes, OR/NOT, accents and every filter; also for sessions
/// stored before the server kept a search table (indexed by the next search).
#[test]
fn search_on_the_server_equals_the_local_index() {
    let Some(server) = pg_server::pg_server() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (agent, cwd, start, _) = migration_dirs(tmp.path());
    write_search_corpus(&start);
    let pg = server.database_url(tmp.path());
    let files = format!("jsonl:{}", start.display());
    let out = pi(&agent, &cwd)
        .args(["sessions", "migrate", "--from", &files, "--to", &pg])
        .output()
        .unwrap();
    ok(out, "migrate to PostgreSQL");

    let compare = |label: &str| {
        let mut matched = 0;
        for args in SEARCHES {
            let mut args = args.to_vec();
            args.extend(["--limit", "2000"]);
            let local = search_hits(&agent, &cwd, &files, &args);
            let server_side = search_hits(&agent, &cwd, &pg, &args);
            assert_eq!(
                canonical(&server_side),
                canonical(&local),
                "{label}: search {args:?}"
            );
            matched += usize::from(!local.is_empty());
            // A small limit cuts both rankings at the same scores.
            args.truncate(args.len() - 2);
            args.extend(["--limit", "7"]);
            let scores = |hits: Vec<Value>| -> Vec<String> {
                hits.iter().map(|h| h["score"].to_string()).collect()
            };
            assert_eq!(
                scores(search_hits(&agent, &cwd, &pg, &args)),
                scores(search_hits(&agent, &cwd, &files, &args)),
                "{label}: search {args:?}"
            );
        }
        assert!(
            matched >= SEARCHES.len() / 2,
            "most searches match something"
        );
    };
    compare("indexed on append");
    assert_eq!(
        history_files(&agent).len(),
        1,
        "only the JSONL store's index: none is made for the server"
    );

    // As a database written by a build without the search table: nothing indexed.
    let mut admin = postgres::Client::connect(&pg, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DELETE FROM pi_search;
             UPDATE pi_sessions SET search_next_seq = 0, search_docs = 0, search_tokens = 0,
                    search_provider = NULL, search_model = NULL;",
        )
        .unwrap();
    compare("indexed by the first search");
    let behind: i64 = admin
        .query_one(
            "SELECT count(*) FROM pi_sessions WHERE search_next_seq < next_seq",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(behind, 0);
}

/// Mutual TLS: a role the server lets in only with a client certificate (`pg_hba.conf`
/// `hostssl … cert`) migrates, lists and searches with `sslcert=`/`sslkey=` in the URL, and
/// through `PGSSLCERT`/`PGSSLKEY`; without a certificate, with one from another root, or with
/// a key file others can read, there is no connection and the error says why.
#[test]
fn client_certificates_log_in_where_the_server_requires_them() {
    let Some(server) = pg_server::pg_tls_server() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (agent, cwd, start, fixtures) = migration_dirs(tmp.path());
    let user = pg_server::CERT_USER;
    let base = format!(
        "postgres://{user}@localhost:{}/{user}?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
        server.server.port(),
        server.root.display()
    );
    let with_cert = format!(
        "{base}&sslcert={}&sslkey={}",
        server.client_cert.display(),
        server.client_key.display()
    );
    let out = pi(&agent, &cwd)
        .args(["sessions", "migrate", "--from"])
        .arg(format!("jsonl:{}", start.display()))
        .args(["--to", &with_cert])
        .output()
        .unwrap();
    let n = fixtures.len();
    let out = ok(out, "migrate with a client certificate");
    assert!(
        out.contains(&format!("{n} session(s); copied {n}")),
        "{out}"
    );

    // The same role through the environment, listing and searching on the server.
    let with_env = |command: &mut Command| {
        command
            .env("PGSSLCERT", &server.client_cert)
            .env("PGSSLKEY", &server.client_key);
    };
    let mut list = pi(&agent, &cwd);
    list.args(["sessions", "--store", &base, "list", "--all", "--jsonl"]);
    with_env(&mut list);
    assert_eq!(ok(list.output().unwrap(), "list").lines().count(), n);
    let mut search = pi(&agent, &cwd);
    search.args(["sessions", "--store", &base, "search", "--json", "question"]);
    with_env(&mut search);
    assert!(ok(search.output().unwrap(), "search").lines().count() > 0);

    let refused = |url: &str, what: &str| -> String {
        let out = pi(&agent, &cwd)
            .args(["sessions", "--store", url, "list", "--all"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{what} was let in");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused(&base, "no certificate");
    assert!(err.contains("certificate"), "{err}");
    let stranger = format!(
        "{base}&sslcert={}&sslkey={}",
        server.stranger_cert.display(),
        server.stranger_key.display()
    );
    let err = refused(&stranger, "a certificate from another root");
    assert!(
        err.to_lowercase().contains("unknownca") || err.contains("certificate"),
        "{err}"
    );
    let open_key = tmp.path().join("open.key");
    fs::copy(&server.client_key, &open_key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&open_key, fs::Permissions::from_mode(0o644)).unwrap();
    let readable = format!(
        "{base}&sslcert={}&sslkey={}",
        server.client_cert.display(),
        open_key.display()
    );
    let err = refused(&readable, "a key others can read");
    assert!(err.contains("others can read it"), "{err}");
}
