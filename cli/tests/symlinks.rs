//! Symlinks in the JSONL session store, with real links: a link that stays inside the store
//! is followed like Pi follows it; a directory or file link that leads outside is ignored
//! with a warning by listing, id resolution and search; a link loop is reported, not a hang.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const INSIDE: &str = "0192f000-0000-7000-8000-00000000a001";
const LINKED: &str = "0192f000-0000-7000-8000-00000000a002";
const OUTSIDE: &str = "0192f000-0000-7000-8000-00000000b001";
const OUTSIDE_FILE: &str = "0192f000-0000-7000-8000-00000000b002";

fn session(dir: &Path, id: &str, text: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl"));
    fs::write(
        &path,
        format!(
            "{{\"type\":\"session\",\"version\":3,\"id\":\"{id}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}}\n\
             {{\"type\":\"message\",\"id\":\"m1\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\",\"timestamp\":1767225601000}}}}\n"
        ),
    )
    .unwrap();
    path
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// agent/sessions holds one plain cwd dir, a link to a dir elsewhere inside the store, a
    /// link to a dir outside it, a file link to a session outside it, and a two-link loop.
    fn new() -> Env {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        let root = env.root();
        session(&root.join("--w--"), INSIDE, "kiwi inside");
        session(&root.join("archive/--old--"), LINKED, "kiwi linked");
        symlink(root.join("archive/--old--"), root.join("--old--")).unwrap();
        let outside = env.dir.path().join("outside");
        session(&outside.join("--x--"), OUTSIDE, "kiwi outside");
        symlink(outside.join("--x--"), root.join("--x--")).unwrap();
        let file = session(&outside.join("files"), OUTSIDE_FILE, "kiwi outside file");
        symlink(
            &file,
            root.join("--w--")
                .join(format!("2026-01-01T00-00-00-000Z_{OUTSIDE_FILE}.jsonl")),
        )
        .unwrap();
        symlink(root.join("--loop-b--"), root.join("--loop-a--")).unwrap();
        symlink(root.join("--loop-a--"), root.join("--loop-b--")).unwrap();
        env
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("agent/sessions")
    }

    fn pi(&self, args: &[&str]) -> Output {
        let work = self.dir.path().join("work");
        fs::create_dir_all(&work).unwrap();
        Command::new(env!("CARGO_BIN_EXE_pi"))
            .current_dir(work)
            .env("HOME", self.dir.path())
            .env("PI_CODING_AGENT_DIR", self.dir.path().join("agent"))
            .env_remove("PI_SESSION_STORE")
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .args(args)
            .output()
            .unwrap()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn listing_follows_links_inside_the_store_only() {
    let env = Env::new();
    let out = env.pi(&["sessions", "list", "--all", "--jsonl"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains(INSIDE), "{stdout}");
    assert!(
        stdout.contains(LINKED),
        "a link inside the store is followed: {stdout}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.contains(LINKED)).count(),
        1,
        "listed once: {stdout}"
    );
    assert!(!stdout.contains(OUTSIDE), "{stdout}");
    assert!(!stdout.contains(OUTSIDE_FILE), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--x--") && stderr.contains("outside the session store"),
        "{stderr}"
    );
    assert!(stderr.contains(OUTSIDE_FILE), "{stderr}");
    assert!(
        stderr.contains("--loop-a--"),
        "the loop is reported: {stderr}"
    );
}

#[test]
fn ids_resolve_through_links_inside_the_store_only() {
    let env = Env::new();
    let ok = env.pi(&["sessions", "export", LINKED, "--format", "jsonl"]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains("kiwi linked"));
    for id in [OUTSIDE, OUTSIDE_FILE, &OUTSIDE[..33]] {
        let out = env.pi(&["sessions", "export", id, "--format", "jsonl"]);
        assert!(!out.status.success(), "{id} must not resolve");
        assert!(!text(&out.stdout).contains("kiwi outside"));
    }
}

#[test]
fn search_indexes_links_inside_the_store_only() {
    let env = Env::new();
    let out = env.pi(&["sessions", "search", "kiwi", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(INSIDE) && stdout.contains(LINKED),
        "{stdout}"
    );
    assert!(
        !stdout.contains(OUTSIDE) && !stdout.contains(OUTSIDE_FILE),
        "{stdout}"
    );
}

#[test]
fn a_new_session_is_not_written_through_a_link_out_of_the_store() {
    let env = Env::new();
    // `import` creates the session in the per-cwd dir of its header's cwd, "/x" → `--x--`,
    // which is the link to the outside directory.
    let src = env.dir.path().join("src.jsonl");
    let body = fs::read_to_string(session(&env.dir.path().join("tmp"), "new-1", "x")).unwrap();
    fs::write(&src, body.replace("\"cwd\":\"/w\"", "\"cwd\":\"/x\"")).unwrap();
    let out = env.pi(&["sessions", "import", src.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("outside the session store"),
        "{}",
        text(&out.stderr)
    );
    let outside: Vec<_> = fs::read_dir(env.dir.path().join("outside/--x--"))
        .unwrap()
        .collect();
    assert_eq!(outside.len(), 1, "nothing written outside");
}

/// `pi --session ID|PREFIX` (here in RPC mode, which needs no model to answer `get_state`).
#[test]
fn dash_dash_session_resolves_through_links_inside_the_store_only() {
    let env = Env::new();
    let rpc = |reference: &str| {
        let work = env.dir.path().join("work");
        fs::create_dir_all(&work).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_pi"))
            .args(["--mode", "rpc", "--session", reference])
            .current_dir(work)
            .env("HOME", env.dir.path())
            .env("PI_CODING_AGENT_DIR", env.dir.path().join("agent"))
            .env_remove("PI_SESSION_STORE")
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        // pi may exit before reading stdin when the reference resolves to nothing.
        let _ = stdin.write_all(b"{\"id\":1,\"type\":\"get_state\"}\n");
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    // `--session` works in the session's own directory and refuses one that is gone (as Pi
    // does), so the linked session names the directory this test runs in.
    let work = env.dir.path().join("work");
    fs::create_dir_all(&work).unwrap();
    let linked = env.root().join(format!(
        "archive/--old--/2026-01-01T00-00-00-000Z_{LINKED}.jsonl"
    ));
    let body = fs::read_to_string(&linked).unwrap();
    let cwd = serde_json::to_string(work.to_str().unwrap()).unwrap();
    fs::write(
        &linked,
        body.replace("\"cwd\":\"/w\"", &format!("\"cwd\":{cwd}")),
    )
    .unwrap();
    let ok = rpc(LINKED);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(
        text(&ok.stdout).contains(&format!("\"sessionId\":\"{LINKED}\"")),
        "{}",
        text(&ok.stdout)
    );
    for reference in [OUTSIDE, OUTSIDE_FILE, &OUTSIDE[..33]] {
        let out = rpc(reference);
        assert!(!out.status.success(), "{reference} must not resolve");
        assert!(
            text(&out.stderr).contains("no session matches"),
            "{}",
            text(&out.stderr)
        );
    }
}
